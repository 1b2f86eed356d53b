//! cargo-fuzz target `tc_parser`: the body is [`sluice_fuzz::tc_parser`] (see its doc).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::tc_parser(data));
