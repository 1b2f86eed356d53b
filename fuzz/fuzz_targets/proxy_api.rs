//! cargo-fuzz target `proxy_api`: the body is [`sluice_fuzz::proxy_api`] (see its doc).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_fuzz::proxy_api(data));
