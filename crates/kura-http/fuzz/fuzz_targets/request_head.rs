//! Fuzzes `wire::head::parse_head`, what the framing guard in front of hyper decides about a
//! request head: any bytes, under a few limits, must never panic; a complete head lies inside
//! the input; and the decision must not depend on how the bytes arrived: every prefix of the
//! input (the guard parses again as bytes come) is `Partial` or refused when the whole is
//! refused (the reason may differ: a head that is both too long and malformed is refused as
//! one or the other, as by hyper, depending on where the reads end), never complete at another
//! length, never refused when the whole is a head.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../src/wire/head.rs"]
mod head;

use head::{parse_head, HeadLimits, Parsed};

const LIMITS: [HeadLimits; 3] = [
    HeadLimits {
        max_head: 32 * 1024,
        max_headers: 512,
    },
    HeadLimits {
        max_head: 8 * 1024,
        max_headers: 64,
    },
    HeadLimits {
        max_head: 256,
        max_headers: 4,
    },
];

fuzz_target!(|data: &[u8]| {
    for limits in &LIMITS {
        let whole = parse_head(data, limits);
        if let Parsed::Complete { len, .. } = whole {
            assert!(len > 0 && len <= data.len() && len <= limits.max_head);
            // The head alone decides the same.
            assert_eq!(parse_head(&data[..len], limits), whole);
        }
        let end = match whole {
            Parsed::Complete { len, .. } => len,
            _ => data.len(),
        };
        // Every shorter prefix is undecided, or refused when the whole is.
        for cut in 0..end {
            match parse_head(&data[..cut], limits) {
                Parsed::Partial => {}
                Parsed::Refused(_) => assert!(
                    matches!(whole, Parsed::Refused(_)),
                    "a prefix of {cut} bytes is refused, the whole is {whole:?}"
                ),
                Parsed::Complete { .. } => panic!("a prefix of {cut} bytes is a complete head"),
            }
        }
    }
});
