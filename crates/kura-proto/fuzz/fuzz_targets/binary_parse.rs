//! Fuzzes the binary protocol's parser: any bytes, stepped through as a
//! server would under a few server limits, must never panic and must always
//! make progress; every request found must compose into bytes that parse
//! into the same request (the oracle is shared with the property tests).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/mod.rs"]
mod support;

fuzz_target!(|data: &[u8]| {
    for limits in &support::LIMITS {
        support::binary::check_stream(data, limits);
    }
});
