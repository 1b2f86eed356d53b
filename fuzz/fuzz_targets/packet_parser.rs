//! cargo-fuzz target `packet_parser`: the body is [`sluice_fuzz::packet_parser`] (see its doc).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::packet_parser(data));
