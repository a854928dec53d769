use super::*;

use std::task::{Context, Poll, Waker};

use bytes::Bytes;

use crate::body::Body;
use codec::{gzip, Encoder};
use decode::Decoding;

fn fields(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(*name, HeaderValue::from_static(value));
    }
    headers
}

fn decode_all(body: Body) -> Result<Vec<u8>, String> {
    let mut gunzip = Decoding::new(body, Coding::Gzip, u64::MAX);
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
    Compression::default().mark(&mut headers);
    headers.insert(MARKER, HeaderValue::from_static(identity));
    headers.insert(CONTENT_LENGTH, HeaderValue::from_static("300"));
    headers
}

// RFC 9110 §8.8.3: the gzip bytes the proxy made are a transformation: weak ETag for them.
#[test]
fn gzip_client_of_our_gzip() {
    let mut headers = ours("20000");
    let decode = ClientCoding::adapt(Some(ClientCoding::accepting(&[Coding::Gzip])), &mut headers);
    assert!(decode.is_none());
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
    let decode = ClientCoding::adapt(Some(ClientCoding::accepting(&[])), &mut headers);
    assert!(decode.is_some());
    assert!(!headers.contains_key(CONTENT_ENCODING));
    assert_eq!(headers[CONTENT_LENGTH], "20000");
    assert_eq!(headers[ETAG], "\"v1\"");
    assert_eq!(headers[VARY], "Accept-Encoding");
    assert!(!headers.contains_key(ACCEPT_RANGES));
    assert!(!headers.contains_key(MARKER));
    // Identity length unknown: no Content-Length.
    let mut headers = ours("");
    assert!(ClientCoding::adapt(Some(ClientCoding::accepting(&[])), &mut headers).is_some());
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
    assert!(
        ClientCoding::adapt(Some(ClientCoding::accepting(&[Coding::Gzip])), &mut headers).is_none()
    );
    assert_eq!(headers, backend);
    let mut headers = backend.clone();
    assert!(ClientCoding::adapt(Some(ClientCoding::accepting(&[])), &mut headers).is_some());
    assert_eq!(headers[ETAG], "W/\"v1\"");
    assert!(!headers.contains_key(CONTENT_LENGTH));
    assert_eq!(headers.get_all(VARY).iter().count(), 1);
    // no-transform: never decoded.
    let mut headers = backend.clone();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-transform"));
    assert!(ClientCoding::adapt(Some(ClientCoding::accepting(&[])), &mut headers).is_none());
    assert_eq!(headers[CONTENT_ENCODING], "gzip");
}

#[test]
fn plain_objects_and_compression_off_are_untouched() {
    let plain = fields(&[("content-type", "image/png"), ("etag", "\"p\"")]);
    let mut headers = plain.clone();
    assert!(ClientCoding::adapt(Some(ClientCoding::accepting(&[])), &mut headers).is_none());
    assert_eq!(headers, plain);
    let mut headers = ours("1");
    assert!(ClientCoding::adapt(None, &mut headers).is_none());
    assert!(!headers.contains_key(MARKER));
}

#[test]
fn vary_merged() {
    let mut headers = fields(&[("content-encoding", "gzip"), ("vary", "X-Device")]);
    ClientCoding::adapt(Some(ClientCoding::accepting(&[Coding::Gzip])), &mut headers);
    let vary: Vec<_> = headers.get_all(VARY).iter().collect();
    assert_eq!(vary, ["X-Device", "Accept-Encoding"]);
    let mut headers = fields(&[("content-encoding", "gzip"), ("vary", "*")]);
    ClientCoding::adapt(Some(ClientCoding::accepting(&[Coding::Gzip])), &mut headers);
    assert_eq!(headers.get_all(VARY).iter().count(), 1);
    let mut headers = fields(&[("content-encoding", "gzip"), ("etag", "W/\"w\"")]);
    ClientCoding::adapt(Some(ClientCoding::accepting(&[])), &mut headers);
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
    assert_eq!(parts.headers[ACCEPT_ENCODING], "gzip, br, zstd");
    assert_eq!(
        ClientCoding::of(&parts),
        Some(ClientCoding::accepting(&[Coding::Br]))
    );
    // Asking the backend for gzip only, as Varnish's http_gzip_support does.
    let gzip_only = Compression {
        backend_accept: vec![Coding::Gzip],
        ..Compression::default()
    };
    gzip_only.normalise_request(&mut parts);
    assert_eq!(parts.headers[ACCEPT_ENCODING], "gzip");
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
    let mut gunzip = Decoding::new(Body::full(gzip(&text, 6)), Coding::Gzip, u64::MAX);
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

// Brotli and zstd objects: as they are for clients that accept them, transcoded to gzip for
// those that accept gzip only, decoded for the others.
#[test]
fn every_coding_is_served_or_decoded() {
    for (name, coding) in [("br", Coding::Br), ("zstd", Coding::Zstd)] {
        let stored = fields(&[("content-encoding", name), ("etag", "\"e\"")]);
        let mut headers = stored.clone();
        let as_is = ClientCoding::adapt(Some(ClientCoding::accepting(&[coding])), &mut headers);
        assert!(as_is.is_none());
        assert_eq!(headers[CONTENT_ENCODING], name);
        assert_eq!(headers[VARY], "Accept-Encoding");
        let mut headers = stored.clone();
        let gzip_only = Some(ClientCoding::accepting(&[Coding::Gzip]));
        let decode = ClientCoding::adapt(gzip_only, &mut headers).unwrap();
        assert_eq!(
            (decode.coding, decode.gzip),
            (coding, Some(TRANSCODE_LEVEL))
        );
        assert_eq!(headers[CONTENT_ENCODING], "gzip");
        assert_eq!(headers[ETAG], "W/\"e\"");
        let mut headers = fields(&[
            ("content-encoding", name),
            ("etag", "\"e\""),
            ("kura-gzip", "30000"),
        ]);
        let identity = Some(ClientCoding::accepting(&[]));
        let decode = ClientCoding::adapt(identity, &mut headers).unwrap();
        assert_eq!((decode.coding, decode.gzip), (coding, None));
        assert!(!headers.contains_key(CONTENT_ENCODING));
        assert_eq!(headers[CONTENT_LENGTH], "30000");
        assert_eq!(headers[ETAG], "\"e\"", "ours: the identity bytes' tag");
    }
    // Two codings applied, or one kura does not know: left as they are.
    for value in ["gzip, br", "deflate", "compress"] {
        let mut headers = fields(&[("content-encoding", value)]);
        assert!(ClientCoding::adapt(Some(ClientCoding::accepting(&[])), &mut headers).is_none());
        assert_eq!(headers[CONTENT_ENCODING], value);
        assert!(!headers.contains_key(VARY));
    }
}

fn brotli(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut writer = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
        std::io::Write::write_all(&mut writer, data).unwrap();
    }
    out
}

fn zstd(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

/// `data` in each coding kura decodes.
fn every_coding(data: &[u8]) -> [(Coding, Vec<u8>); 3] {
    [
        (Coding::Gzip, gzip(data, 9)),
        (Coding::Br, brotli(data)),
        (Coding::Zstd, zstd(data)),
    ]
}

#[test]
fn brotli_and_zstd_decode_whole_and_in_pieces() {
    let text = page(300_000);
    for (coding, coded) in every_coding(&text) {
        assert!(
            decode::decode_all(coding, &coded, u64::MAX).unwrap() == text,
            "{coding:?}"
        );
        // Fed a few bytes at a time, as a backend's chunks come.
        let mut decoder = decode::Decoder::new(coding, u64::MAX);
        let mut out = Vec::new();
        for piece in coded.chunks(777) {
            decoder.feed(Bytes::copy_from_slice(piece));
            while let Some(chunk) = decoder.step().unwrap() {
                assert!(chunk.len() <= 4 << 20);
                out.extend_from_slice(&chunk);
            }
        }
        while let Some(chunk) = decoder.finish().unwrap() {
            assert!(chunk.len() <= 64 << 10, "{coding:?}: {}", chunk.len());
            out.extend_from_slice(&chunk);
        }
        assert!(out == text, "{coding:?}");
        assert_eq!(decoder.produced(), text.len() as u64);
    }
}

// A decompression bomb: 64 MiB of zeros, a few KiB coded, refused past the limit.
#[test]
fn bombs_are_refused_at_the_limit() {
    let zeros = vec![0u8; 64 << 20];
    for (coding, coded) in every_coding(&zeros) {
        assert!(coded.len() < 1 << 20, "{coding:?}: {}", coded.len());
        let error = decode::decode_all(coding, &coded, 1 << 20).unwrap_err();
        assert_eq!(error, decode::DecodeError::TooLarge(1 << 20), "{coding:?}");
    }
}

// A backend that lies about Content-Encoding: plain text, or a body cut short.
#[test]
fn false_and_truncated_codings_are_errors() {
    let text = page(20_000);
    for (coding, coded) in every_coding(&text) {
        let corrupt = decode::DecodeError::Corrupt(coding.name());
        assert_eq!(
            decode::decode_all(coding, &text, u64::MAX),
            Err(corrupt.clone()),
            "{coding:?} plain"
        );
        let cut = &coded[..coded.len() / 2];
        assert_eq!(
            decode::decode_all(coding, cut, u64::MAX),
            Err(corrupt.clone()),
            "{coding:?} cut"
        );
    }
    // Trailing garbage after a brotli stream.
    let mut extra = brotli(&text);
    extra.extend_from_slice(b"junk");
    assert!(decode::decode_all(Coding::Br, &extra, u64::MAX).is_err());
}

// `coding = "br"`: the proxy's own brotli, streamed in pieces, flushed at each, decodes whole.
#[test]
fn brotli_encoder_streams() {
    let text = page(200_000);
    let config = Compression {
        coding: Coding::Br,
        ..Compression::default()
    };
    let mut encoder = config.encoder();
    let mut coded = Vec::new();
    for chunk in text.chunks(7_000) {
        let out = encoder.push(chunk);
        assert!(!out.is_empty(), "flushed at each chunk");
        coded.extend_from_slice(&out);
    }
    coded.extend_from_slice(&encoder.finish());
    assert!(encoder.finish().is_empty());
    assert!(
        coded.len() * 3 < text.len(),
        "{} of {}",
        coded.len(),
        text.len()
    );
    assert!(decode::decode_all(Coding::Br, &coded, u64::MAX).unwrap() == text);
    let mut headers = fields(&[("content-type", "text/html"), ("content-length", "9")]);
    config.mark(&mut headers);
    assert_eq!(headers[CONTENT_ENCODING], "br");
    assert_eq!(headers[MARKER], "9");
}
