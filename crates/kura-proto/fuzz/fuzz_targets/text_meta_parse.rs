//! Fuzzes the text and meta parser: any bytes, parsed frame after frame
//! under a few server limits, must never panic and must always make
//! progress; every request found must compose into bytes that parse whole
//! into the same request (the oracle is shared with the composer's
//! property tests).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/support/mod.rs"]
mod support;

fuzz_target!(|data: &[u8]| {
    for limits in &support::LIMITS {
        support::text::check_stream(data, limits);
    }
});
