//! The binary protocol's round-trip oracle. Binary requests hold no raw
//! text, so "the same request" is plain `==`.

use kura_proto::binary::{parse, BinFrame, BinRequest, Command, HEADER_LEN};
use kura_proto::{Data, Limits};

/// The announced value length of a store refused as too large: the bytes
/// a server skips after its frame.
fn refused_value(request: &BinRequest<'_>) -> Option<usize> {
    match request.command {
        Command::Store {
            data: Data::TooLarge { len },
            ..
        } => Some(len),
        _ => None,
    }
}

/// Composes `request`, checks that the bytes parse under `limits` into an
/// equal request covering all of them (a store refused as too large is
/// composed without its value, which is where its frame ends) and compose
/// to the same bytes, and returns them.
///
/// # Panics
///
/// When any of that fails, with the request and the composed bytes.
pub fn assert_round_trip(request: &BinRequest<'_>, limits: &Limits) -> Option<Vec<u8>> {
    let mut wire = Vec::new();
    request.compose(&mut wire);
    let BinFrame::Request {
        request: again,
        len,
    } = parse(&wire, limits)
    else {
        panic!("{request:?} composed as {wire:02x?}, which does not parse as a request");
    };
    assert_eq!(len, wire.len(), "{request:?} composed as {wire:02x?}");
    assert_eq!(&again, request, "composed as {wire:02x?}");
    let mut recomposed = Vec::new();
    again.compose(&mut recomposed);
    assert_eq!(recomposed, wire, "{request:?} is not a fixed point");
    Some(wire)
}

/// Steps through `buf` as a server would (skipping refused values and
/// bodies, stopping where it would close), checking that each frame makes
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
        let left = buf.len() - pos;
        let skip = match parse(&buf[pos..], limits) {
            BinFrame::Incomplete { needed } => {
                assert!(
                    needed > left,
                    "incomplete with {left} bytes, needs {needed}"
                );
                break;
            }
            BinFrame::Close => break,
            BinFrame::Error {
                len,
                swallow,
                close,
                ..
            } => {
                assert!((HEADER_LEN..=left).contains(&len), "error frame of {len}");
                if close {
                    break;
                }
                len + swallow
            }
            BinFrame::Request { request, len } => {
                assert!((HEADER_LEN..=left).contains(&len), "request frame of {len}");
                assert_round_trip(&request, limits);
                requests += 1;
                len + refused_value(&request).unwrap_or(0)
            }
        };
        pos = pos.saturating_add(skip);
    }
    requests
}
