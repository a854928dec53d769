//! The text and meta round-trip oracle.
//!
//! Requests hold some fields as raw text from the line (a get's keys, the
//! stats arguments, the meta flags), so a request parsed from a line with
//! extra spaces is not `==` to the one parsed from its canonical form.
//! [`same_request`] compares what those fields mean instead.

use kura_proto::{parse, Frame, Limits, MetaFlags, Request};

/// Whether two requests ask for the same thing: equal in every field, with
/// raw text fields compared word by word.
pub fn same_request(a: &Request<'_>, b: &Request<'_>) -> bool {
    match (a, b) {
        (Request::Get(x), Request::Get(y)) => {
            x.cas == y.cas && x.touch == y.touch && x.keys().eq(y.keys())
        }
        (Request::Stats(x), Request::Stats(y)) => x.group() == y.group() && x.args().eq(y.args()),
        (Request::MetaGet(x), Request::MetaGet(y)) => {
            x.key == y.key && same_flags(&x.flags, &y.flags)
        }
        (Request::MetaSet(x), Request::MetaSet(y)) => {
            x.key == y.key && x.mode == y.mode && x.data == y.data && same_flags(&x.flags, &y.flags)
        }
        (Request::MetaDelete(x), Request::MetaDelete(y)) => {
            x.key == y.key && same_flags(&x.flags, &y.flags)
        }
        (Request::MetaArith(x), Request::MetaArith(y)) => {
            x.key == y.key && x.incr == y.incr && same_flags(&x.flags, &y.flags)
        }
        _ => a == b,
    }
}

fn same_flags(a: &MetaFlags<'_>, b: &MetaFlags<'_>) -> bool {
    a.iter().eq(b.iter())
        && a.quiet == b.quiet
        && a.value == b.value
        && a.no_bump == b.no_bump
        && a.vivify == b.vivify
        && a.ttl == b.ttl
        && a.recache == b.recache
        && a.client_flags == b.client_flags
        && a.compare_cas == b.compare_cas
        && a.explicit_cas == b.explicit_cas
        && a.mode == b.mode
        && a.delta == b.delta
        && a.initial == b.initial
        && a.invalidate == b.invalidate
        && a.remove_value == b.remove_value
}

/// Composes `request`, checks that the bytes parse whole under `limits` into
/// an equivalent request that composes to the same bytes, and returns them.
///
/// # Panics
///
/// When any of that fails, with the request and the composed bytes.
pub fn assert_round_trip(request: &Request<'_>, limits: &Limits) -> Vec<u8> {
    let mut wire = Vec::new();
    request.compose(&mut wire);
    let shown = String::from_utf8_lossy(&wire);
    let Frame::Request {
        request: again,
        len,
    } = parse(&wire, limits)
    else {
        panic!("{request:?} composed as {shown:?}, which does not parse as a request");
    };
    assert_eq!(len, wire.len(), "{request:?} composed as {shown:?}");
    assert!(
        same_request(request, &again),
        "{request:?} composed as {shown:?}, which parses as {again:?}"
    );
    let mut recomposed = Vec::new();
    again.compose(&mut recomposed);
    assert_eq!(
        recomposed, wire,
        "{request:?} composed as {shown:?}, not a fixed point"
    );
    wire
}

/// Parses every frame of `buf` in turn, checking that each one makes
/// progress and that every request round-trips; returns how many did.
///
/// # Panics
///
/// On a frame that overruns the buffer or makes no progress, or a request
/// that does not round-trip.
pub fn check_stream(buf: &[u8], limits: &Limits) -> usize {
    let mut pos = 0;
    let mut requests = 0;
    while pos < buf.len() {
        match parse(&buf[pos..], limits) {
            Frame::Incomplete { needed } => {
                assert!(needed == 0 || needed > buf.len() - pos);
                break;
            }
            Frame::Close => break,
            Frame::Error { len, .. } => {
                assert!(len > 0 && len <= buf.len() - pos);
                pos += len;
            }
            Frame::Request { request, len } => {
                assert!(len > 0 && len <= buf.len() - pos);
                assert_round_trip(&request, limits);
                requests += 1;
                pos += len;
            }
        }
    }
    requests
}
