//! Fuzzes `wire::proxy_header::parse`, what a `listen_proxy` listener reads before anything
//! else: any bytes must never panic; a complete header lies inside the input; and the answer
//! must not depend on how the bytes arrived (the listener parses again as bytes come): every
//! prefix of a complete header is `Partial`, and every prefix of a refused input is `Partial`
//! or refused, never complete.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../src/wire/proxy_header.rs"]
mod proxy_header;

use proxy_header::{parse, Parsed};

fuzz_target!(|data: &[u8]| {
    let whole = parse(data);
    if let Parsed::Complete { len, .. } = whole {
        assert!(len <= data.len(), "a header longer than the input");
        for cut in 0..len {
            assert_eq!(parse(&data[..cut]), Parsed::Partial, "a prefix of {cut} bytes");
        }
        // What follows the header does not change it.
        assert_eq!(parse(&data[..len]), whole);
    }
    if let Parsed::Refused(_) = whole {
        for cut in 0..data.len() {
            assert!(
                !matches!(parse(&data[..cut]), Parsed::Complete { .. }),
                "a prefix of {cut} bytes of a refused input is a header"
            );
        }
    }
});
