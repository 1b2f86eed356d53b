//! cargo-fuzz target `proxy_http`: the body is [`sluice_fuzz::proxy_http`] (see its doc).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::proxy_http(data));
