//! cargo-fuzz target `scenario_parser`: the body is [`sluice_fuzz::scenario_parser`] (see its doc).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::scenario_parser(data));
