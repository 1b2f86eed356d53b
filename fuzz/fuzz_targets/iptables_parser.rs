//! cargo-fuzz target `iptables_parser`: the body is [`sluice_fuzz::iptables_parser`] (see its doc).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::iptables_parser(data));
