use super::*;

use std::task::{Context, Poll, Waker};

use bytes::Bytes;

use crate::body::Body;
use codec::{gzip, Encoder, Gunzip};

fn fields(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(*name, HeaderValue::from_static(value));
    }
    headers
}

fn decode_all(body: Body) -> Result<Vec<u8>, String> {
    let mut gunzip = Gunzip::new(body);
    let mut cx = Context::from_waker(Waker::noop());
    let mut out = Vec::new();
    // Bounded: every step either yields or consumes input.
    for _ in 0..100_000 {
        match gunzip.poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    out.extend_from_slice(&data);
                }
            }
            Poll::Ready(Some(Err(error))) => return Err(error.to_string()),
            Poll::Ready(None) => return Ok(out),
            Poll::Pending => return Err("pending".into()),
        }
    }
    Err("did not end".into())
}

fn page(len: usize) -> Vec<u8> {
    let words = [
        "<div class=\"entry\">",
        "kura",
        "cache",
        "</div>\n",
        "hatena ",
        "blog ",
    ];
    let mut out = Vec::new();
    let mut i = 0usize;
    while out.len() < len {
        out.extend_from_slice(words[(i * 7 + i / 3) % words.len()].as_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

#[test]
fn listed_types() {
    let c = Compression::default();
    assert!(c.type_listed("text/html; charset=utf-8"));
    assert!(c.type_listed("TEXT/CSS"));
    assert!(c.type_listed("application/json"));
    assert!(c.type_listed("image/svg+xml"));
    assert!(!c.type_listed("image/png"));
    assert!(!c.type_listed("application/octet-stream"));
    assert!(!c.type_listed("textual"));
    assert!(!c.type_listed("application/jsonx"));
}

#[test]
fn what_is_compressed() {
    let c = Compression::default();
    let html = fields(&[("content-type", "text/html"), ("content-length", "20000")]);
    assert!(c.compresses(StatusCode::OK, &html));
    assert!(c.compresses(StatusCode::NOT_FOUND, &html));
    // Unknown length: compressed.
    assert!(c.compresses(StatusCode::OK, &fields(&[("content-type", "text/html")])));
    // Too small.
    let small = fields(&[("content-type", "text/html"), ("content-length", "1023")]);
    assert!(!c.compresses(StatusCode::OK, &small));
    // Not a listed type, or no type.
    let png = fields(&[("content-type", "image/png"), ("content-length", "20000")]);
    assert!(!c.compresses(StatusCode::OK, &png));
    assert!(!c.compresses(StatusCode::OK, &fields(&[("content-length", "20000")])));
    // Already coded (identity is no coding).
    let br = fields(&[("content-type", "text/html"), ("content-encoding", "br")]);
    assert!(!c.compresses(StatusCode::OK, &br));
    let gz = fields(&[("content-type", "text/html"), ("content-encoding", "gzip")]);
    assert!(!c.compresses(StatusCode::OK, &gz));
    let id = fields(&[
        ("content-type", "text/html"),
        ("content-encoding", "identity"),
    ]);
    assert!(c.compresses(StatusCode::OK, &id));
    // RFC 9110 §7.7: no-transform.
    let nt = fields(&[
        ("content-type", "text/html"),
        ("cache-control", "max-age=60, no-transform"),
    ]);
    assert!(!c.compresses(StatusCode::OK, &nt));
    // Ranges and bodiless statuses.
    assert!(!c.compresses(StatusCode::PARTIAL_CONTENT, &html));
    assert!(!c.compresses(StatusCode::NO_CONTENT, &html));
    let off = Compression {
        enabled: false,
        ..Compression::default()
    };
    assert!(!off.compresses(StatusCode::OK, &html));
}

fn ours(identity: &'static str) -> HeaderMap {
    let mut headers = fields(&[
        ("content-type", "text/html"),
        ("content-length", "300"),
        ("etag", "\"v1\""),
        ("accept-ranges", "bytes"),
    ]);
    Compression::mark(&mut headers);
    headers.insert(MARKER, HeaderValue::from_static(identity));
    headers.insert(CONTENT_LENGTH, HeaderValue::from_static("300"));
    headers
}

// RFC 9110 §8.8.3: the gzip bytes the proxy made are a transformation: weak ETag for them.
#[test]
fn gzip_client_of_our_gzip() {
    let mut headers = ours("20000");
    let decode = ClientCoding::adapt(Some(ClientCoding { gzip: true }), &mut headers);
    assert!(!decode);
    assert_eq!(headers[CONTENT_ENCODING], "gzip");
    assert_eq!(headers[CONTENT_LENGTH], "300");
    assert_eq!(headers[ETAG], "W/\"v1\"");
    assert_eq!(headers[VARY], "Accept-Encoding");
    assert!(!headers.contains_key(MARKER));
}

// The decoded bytes are the backend's own: its strong ETag, the identity length.
#[test]
fn identity_client_of_our_gzip() {
    let mut headers = ours("20000");
    let decode = ClientCoding::adapt(Some(ClientCoding { gzip: false }), &mut headers);
    assert!(decode);
    assert!(!headers.contains_key(CONTENT_ENCODING));
    assert_eq!(headers[CONTENT_LENGTH], "20000");
    assert_eq!(headers[ETAG], "\"v1\"");
    assert_eq!(headers[VARY], "Accept-Encoding");
    assert!(!headers.contains_key(ACCEPT_RANGES));
    assert!(!headers.contains_key(MARKER));
    // Identity length unknown: no Content-Length.
    let mut headers = ours("");
    assert!(ClientCoding::adapt(
        Some(ClientCoding { gzip: false }),
        &mut headers
    ));
    assert!(!headers.contains_key(CONTENT_LENGTH));
}

// A backend's gzip: as it is for gzip clients; decoded (weak ETag) for the others.
#[test]
fn backend_gzip() {
    let backend = fields(&[
        ("content-encoding", "gzip"),
        ("content-length", "300"),
        ("etag", "\"v1\""),
        ("vary", "Accept-Encoding"),
    ]);
    let mut headers = backend.clone();
    assert!(!ClientCoding::adapt(
        Some(ClientCoding { gzip: true }),
        &mut headers
    ));
    assert_eq!(headers, backend);
    let mut headers = backend.clone();
    assert!(ClientCoding::adapt(
        Some(ClientCoding { gzip: false }),
        &mut headers
    ));
    assert_eq!(headers[ETAG], "W/\"v1\"");
    assert!(!headers.contains_key(CONTENT_LENGTH));
    assert_eq!(headers.get_all(VARY).iter().count(), 1);
    // no-transform: never decoded.
    let mut headers = backend.clone();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-transform"));
    assert!(!ClientCoding::adapt(
        Some(ClientCoding { gzip: false }),
        &mut headers
    ));
    assert_eq!(headers[CONTENT_ENCODING], "gzip");
}

#[test]
fn plain_objects_and_compression_off_are_untouched() {
    let plain = fields(&[("content-type", "image/png"), ("etag", "\"p\"")]);
    let mut headers = plain.clone();
    assert!(!ClientCoding::adapt(
        Some(ClientCoding { gzip: false }),
        &mut headers
    ));
    assert_eq!(headers, plain);
    let mut headers = ours("1");
    assert!(!ClientCoding::adapt(None, &mut headers));
    assert!(!headers.contains_key(MARKER));
}

#[test]
fn vary_merged() {
    let mut headers = fields(&[("content-encoding", "gzip"), ("vary", "X-Device")]);
    ClientCoding::adapt(Some(ClientCoding { gzip: true }), &mut headers);
    let vary: Vec<_> = headers.get_all(VARY).iter().collect();
    assert_eq!(vary, ["X-Device", "Accept-Encoding"]);
    let mut headers = fields(&[("content-encoding", "gzip"), ("vary", "*")]);
    ClientCoding::adapt(Some(ClientCoding { gzip: true }), &mut headers);
    assert_eq!(headers.get_all(VARY).iter().count(), 1);
    let mut headers = fields(&[("content-encoding", "gzip"), ("etag", "W/\"w\"")]);
    ClientCoding::adapt(Some(ClientCoding { gzip: false }), &mut headers);
    assert_eq!(headers[ETAG], "W/\"w\"");
}

#[test]
fn request_normalised() {
    let (mut parts, ()) = http::Request::builder()
        .header(ACCEPT_ENCODING, "br, gzip;q=0")
        .body(())
        .unwrap()
        .into_parts();
    Compression::default().normalise_request(&mut parts);
    assert_eq!(parts.headers[ACCEPT_ENCODING], "gzip");
    assert_eq!(ClientCoding::of(&parts), Some(ClientCoding { gzip: false }));
}

// Streaming both ways: chunks through the encoder, the gzip through the decoding body.
#[test]
fn round_trip_streaming() {
    let text = page(200_000);
    let mut encoder = Encoder::new(6);
    let mut gz = Vec::new();
    for chunk in text.chunks(7_000) {
        gz.extend_from_slice(&encoder.push(chunk));
    }
    assert_eq!(encoder.input, text.len());
    gz.extend_from_slice(&encoder.finish());
    assert!(gz.len() * 3 < text.len(), "{} of {}", gz.len(), text.len());
    assert!(decode_all(Body::full(gz.clone())).unwrap() == text);
    // Decoding emits bounded pieces, not one buffer of the whole.
    let mut state = 1u64;
    let text: Vec<u8> = (0..200_000)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            b'a' + (state >> 60) as u8
        })
        .collect();
    let mut gunzip = Gunzip::new(Body::full(gzip(&text, 6)));
    let mut cx = Context::from_waker(Waker::noop());
    let Poll::Ready(Some(Ok(first))) = gunzip.poll_frame(&mut cx) else {
        panic!("no first frame");
    };
    assert!(first.into_data().unwrap().len() < text.len());
}

#[test]
fn each_push_is_decodable_at_once() {
    // Sync flush: what a reader has so far decodes to everything pushed so far.
    let text = page(50_000);
    let mut encoder = Encoder::new(6);
    let mut gz = encoder.push(&text[..10_000]).to_vec();
    let mut decoder = flate2::write::GzDecoder::new(Vec::new());
    std::io::Write::write_all(&mut decoder, &gz).unwrap();
    std::io::Write::flush(&mut decoder).unwrap();
    assert!(decoder.get_ref().as_slice() == &text[..10_000]);
    gz.extend_from_slice(&encoder.push(&text[10_000..]));
    gz.extend_from_slice(&encoder.finish());
    assert!(decode_all(Body::full(gz)).unwrap() == text);
}

#[test]
fn bad_gzip_is_an_error() {
    assert!(decode_all(Body::full(Bytes::from_static(b"not gzip at all"))).is_err());
    let mut gz = gzip(&page(10_000), 6);
    gz[20] ^= 0xff;
    let len = gz.len();
    gz[len - 5] ^= 0xff;
    assert!(decode_all(Body::full(gz)).is_err());
}
