//! cargo-fuzz target `trace_parser`: the body is [`sluice_fuzz::trace_parser`] (see its doc).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::trace_parser(data));
