//! cargo-fuzz target `ip_parser`: the body is [`sluice_fuzz::ip_parser`] (see its doc).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::ip_parser(data));
