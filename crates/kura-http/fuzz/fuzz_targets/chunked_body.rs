//! Fuzzes `wire::chunked::Chunked`, how the framing guard follows a chunked request body:
//! the first bytes of the input choose read sizes, the rest is the body. Fed in those pieces,
//! it must never panic, consume at most what it is given, stop consuming at its verdict, and
//! reach exactly the verdict (and length) it reaches when fed everything at once: where a body
//! ends must not depend on how its bytes arrive.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../src/wire/chunked.rs"]
mod chunked;

use chunked::{Chunked, Progress};

fuzz_target!(|data: &[u8]| {
    let Some((&cuts, rest)) = data.split_first() else {
        return;
    };
    let cut = usize::from(cuts % 17) + 1;
    for (max_bytes, max_lines) in [(16 * 1024, 100), (64, 2)] {
        let whole = Chunked::new(max_bytes, max_lines).feed(rest);
        assert!(whole.0 <= rest.len());
        let mut pieces = Chunked::new(max_bytes, max_lines);
        let (mut at, mut progress) = (0, Progress::More);
        for piece in rest.chunks(cut) {
            let (used, now) = pieces.feed(piece);
            assert!(used <= piece.len());
            at += used;
            progress = now;
            if now != Progress::More {
                break;
            }
            assert_eq!(used, piece.len(), "bytes left over without a verdict");
        }
        assert_eq!((at, progress), whole);
    }
});
