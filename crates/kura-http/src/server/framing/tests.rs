use std::collections::VecDeque;

use proptest::prelude::*;
use tokio::io::AsyncReadExt;

use super::*;

/// A stream that yields the given pieces one read at a time.
struct Pieces(VecDeque<Vec<u8>>);

impl AsyncRead for Pieces {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(mut piece) = self.0.pop_front() {
            let n = piece.len().min(buf.remaining());
            buf.put_slice(&piece[..n]);
            if n < piece.len() {
                piece.drain(..n);
                self.0.push_front(piece);
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// What hyper would read from `input` delivered in pieces of `size` bytes, and the refusals.
fn through(input: &[u8], size: usize) -> (Vec<u8>, u64) {
    let pieces = input.chunks(size.max(1)).map(<[u8]>::to_vec).collect();
    let stats = Arc::new(Stats::default());
    let limits = HeadLimits {
        max_head: 32 * 1024,
        max_headers: 200,
    };
    let mut guard = Guard::new(Pieces(pieces), limits, stats.clone());
    let mut out = Vec::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(guard.read_to_end(&mut out)).unwrap();
    (out, stats.bad_requests.load(Ordering::Relaxed))
}

const GET: &[u8] = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
const CHUNKED: &[u8] = b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nTrailer: t\r\n\r\n";
/// A request whose body looks like a head with both fields: it must pass as a body.
fn decoy() -> Vec<u8> {
    let body = b"GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n";
    let mut request = format!(
        "POST /d HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}
const CONFLICT: &[u8] = b"POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";

#[test]
fn well_framed_requests_pass_unchanged_up_to_a_conflict() {
    let input = [GET, CHUNKED, &decoy(), GET, CONFLICT].concat();
    let expected = [GET, CHUNKED, &decoy(), GET, REFUSED].concat();
    for size in [1, 2, 7, 64, 100_000] {
        // Followed exactly, so the conflict after them is found.
        assert_eq!(
            through(&input, size),
            (expected.clone(), 1),
            "pieces of {size}"
        );
    }
}

#[test]
fn both_framing_fields_are_refused_and_nothing_after_is_read() {
    for size in [1, 5, 100_000] {
        let (out, refused) = through(&[GET, CONFLICT, GET].concat(), size);
        assert_eq!(out, [GET, REFUSED].concat(), "pieces of {size}");
        assert_eq!(refused, 1);
    }
    let lowercase =
        b"GET / HTTP/1.1\r\ntransfer-encoding: gzip, chunked\r\ncontent-length: 0\r\n\r\n";
    assert_eq!(through(lowercase, 3).0, REFUSED);
}

#[test]
fn what_the_guard_cannot_follow_never_reaches_hyper_unjudged() {
    // A malformed chunk size: hyper gets the body up to its bad byte (and fails the request),
    // nothing after it.
    let bad_chunk = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
    let (out, refused) = through(&[&bad_chunk[..], CONFLICT].concat(), 3);
    assert_eq!(out, &bad_chunk[..bad_chunk.len() - 3]);
    assert_eq!(refused, 0);
    // Heads hyper refuses with 400 are refused here, and nothing after them is read.
    for head in [
        &b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        b"POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nabcde",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
    ] {
        for size in [1, 3, 100_000] {
            let (out, refused) = through(&[head, CONFLICT].concat(), size);
            assert_eq!(
                (out, refused),
                (REFUSED.to_vec(), 1),
                "{head:?} in pieces of {size}"
            );
        }
    }
    // An incomplete head at the end of the stream: hyper sees the same end.
    let cut = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    assert_eq!(through(&cut, 3), (cut.clone(), 0));
}

#[test]
fn a_head_ending_in_a_bare_lf_is_followed_like_any_other() {
    // Finding 6 of issue 37: CRLF lines, then a bare LF. hyper takes the head to end there;
    // the guard once looked for CRLF CRLF only and let the next request through unjudged.
    for first in [
        &b"GET /a HTTP/1.1\r\nHost: x\r\n\n"[..],
        b"GET /a HTTP/1.1\nHost: x\n\n",
        b"POST /a HTTP/1.1\nHost: x\nContent-Length: 2\n\nok",
    ] {
        for size in [1, 4, 100_000] {
            let (out, refused) = through(&[first, CONFLICT, GET].concat(), size);
            assert_eq!(out, [first, REFUSED].concat(), "pieces of {size}");
            assert_eq!(refused, 1);
        }
    }
}

#[test]
fn heads_with_many_fields_and_long_chunk_sizes_are_followed() {
    // More fields than the guard once parsed (128), fewer than the limit.
    let mut many = String::from("GET / HTTP/1.1\r\nHost: x\r\n");
    for i in 0..150 {
        many.push_str(&format!("X-{i}: v\r\n"));
    }
    many.push_str("\r\n");
    // A chunk size with leading zeros past 16 digits: hyper reads it.
    let zeros = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n000000000000000000002\r\nok\r\n0\r\n\r\n";
    for first in [many.as_bytes(), &zeros[..]] {
        let (out, refused) = through(&[first, CONFLICT].concat(), 7);
        assert_eq!((out, refused), ([first, REFUSED].concat(), 1));
    }
}

#[test]
fn a_head_past_the_limit_goes_to_hyper_for_its_431_and_nothing_after() {
    let mut input = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
    input.extend(std::iter::repeat_n(b'a', 40 * 1024));
    input.extend_from_slice(b"\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n");
    let (out, refused) = through(&input, 4096);
    assert!(
        out.len() >= 32 * 1024 && input.starts_with(&out),
        "{}",
        out.len()
    );
    assert_eq!(refused, 0);
    let mut fields = String::from("GET / HTTP/1.1\r\n");
    for i in 0..201 {
        fields.push_str(&format!("X-{i}: v\r\n"));
    }
    fields.push_str("\r\n");
    // Read in pieces of the head's size: after the head the guard reads nothing more.
    let (out, _) = through(&[fields.as_bytes(), GET].concat(), fields.len());
    assert_eq!(
        out,
        fields.as_bytes(),
        "too many fields: the head alone, for hyper's 431"
    );
}

proptest! {
    #[test]
    fn any_chunked_or_sized_bodies_pass_unchanged(
        bodies in proptest::collection::vec((any::<bool>(), proptest::collection::vec(any::<u8>(), 0..300)), 1..5),
        size in 1usize..50,
    ) {
        let mut input = Vec::new();
        for (chunked, body) in &bodies {
            if *chunked {
                input.extend_from_slice(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
                for part in body.chunks(37) {
                    input.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                    input.extend_from_slice(part);
                    input.extend_from_slice(b"\r\n");
                }
                input.extend_from_slice(b"0\r\n\r\n");
            } else {
                input.extend_from_slice(format!("POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes());
                input.extend_from_slice(body);
            }
        }
        input.extend_from_slice(CONFLICT);
        let (out, refused) = through(&input, size);
        let mut expected = input[..input.len() - CONFLICT.len()].to_vec();
        expected.extend_from_slice(REFUSED);
        prop_assert_eq!(out, expected);
        prop_assert_eq!(refused, 1);
    }
}
