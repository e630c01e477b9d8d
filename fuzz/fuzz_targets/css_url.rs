#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| scrape_core::fuzz::css_url(data));
