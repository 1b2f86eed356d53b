//! cargo-fuzz target `pcap_reader`: the body is [`sluice_fuzz::pcap_reader`] (see its doc).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::pcap_reader(data));
