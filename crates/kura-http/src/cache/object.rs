//! The bytes of a cache record in kura-store, and back.
//!
//! A record is one of three kinds, by its first byte:
//! - an object: status, freshness summary, the secondary key it was stored under, the stored
//!   header fields, then the body (served as a slice of the store's item, never copied);
//! - a page at a URL whose responses carry `Vary`: the `Vary` and every variant, each an
//!   object record (`page.rs`);
//! - a hit-for-miss marker: the URL's last response was not storable, so requests for it are
//!   not coalesced (each goes to the backend at once) until it expires.

use std::time::{Duration, UNIX_EPOCH};

use bytes::{Buf, BufMut, Bytes};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use crate::rules::freshness::{Freshness, LifetimeSource, StaleRules};

use super::page::{Page, PAGE};

const OBJECT: u8 = 0;
const HIT_FOR_MISS: u8 = 2;

/// A stored response, decoded (the body shares the store item's memory).
#[derive(Debug, Clone)]
pub struct Object {
    /// Status code.
    pub status: StatusCode,
    /// Freshness summary.
    pub freshness: Freshness,
    /// The normalised request values of the fields `Vary` names.
    pub secondary: Vec<u8>,
    /// Stored header fields.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// A decoded record.
// Made once per lookup and taken apart at once: boxing the object would cost an allocation
// on every hit for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Record {
    /// A stored response.
    Object(Object),
    /// The URL's `Vary` and its variants.
    Page(Page),
    /// The URL's last response was not storable.
    HitForMiss,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn option_millis(d: Option<Duration>) -> u64 {
    d.map_or(0, |d| millis(d).saturating_add(1).min(u64::MAX - 1))
}

fn from_option_millis(v: u64) -> Option<Duration> {
    v.checked_sub(1).map(Duration::from_millis)
}

fn source_byte(source: LifetimeSource) -> u8 {
    match source {
        LifetimeSource::SMaxAge => 0,
        LifetimeSource::MaxAge => 1,
        LifetimeSource::Expires => 2,
        LifetimeSource::Invalid => 3,
        LifetimeSource::LastModified => 4,
        LifetimeSource::DefaultTtl => 5,
        LifetimeSource::None => 6,
    }
}

fn byte_source(b: u8) -> Option<LifetimeSource> {
    Some(match b {
        0 => LifetimeSource::SMaxAge,
        1 => LifetimeSource::MaxAge,
        2 => LifetimeSource::Expires,
        3 => LifetimeSource::Invalid,
        4 => LifetimeSource::LastModified,
        5 => LifetimeSource::DefaultTtl,
        6 => LifetimeSource::None,
        _ => return None,
    })
}

/// The bytes of an object record, without its body (the caller appends the body).
pub fn encode_head(
    status: StatusCode,
    freshness: &Freshness,
    secondary: &[u8],
    headers: &HeaderMap,
    body_len: usize,
) -> Vec<u8> {
    let fields: usize = headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 8)
        .sum();
    let mut out = Vec::with_capacity(64 + secondary.len() + fields + body_len);
    out.put_u8(OBJECT);
    out.put_u16(status.as_u16());
    out.put_u64(millis(freshness.lifetime));
    out.put_u8(source_byte(freshness.source));
    out.put_u64(millis(freshness.initial_age));
    let received = freshness
        .response_time
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    out.put_u64(millis(received));
    let stale = &freshness.stale;
    out.put_u8(
        u8::from(stale.no_cache)
            | u8::from(stale.must_revalidate) << 1
            | u8::from(stale.s_maxage) << 2,
    );
    out.put_u64(option_millis(stale.while_revalidate));
    out.put_u64(option_millis(stale.if_error));
    put_bytes(&mut out, secondary);
    out.put_u32(u32::try_from(headers.len()).unwrap_or(u32::MAX));
    for (name, value) in headers {
        put_bytes(&mut out, name.as_str().as_bytes());
        put_bytes(&mut out, value.as_bytes());
    }
    out
}

/// The bytes of `object`'s record, body included.
pub fn encode(object: &Object) -> Vec<u8> {
    let mut value = encode_head(
        object.status,
        &object.freshness,
        &object.secondary,
        &object.headers,
        object.body.len(),
    );
    value.extend_from_slice(&object.body);
    value
}

/// The bytes of a hit-for-miss marker.
pub fn encode_hit_for_miss() -> Vec<u8> {
    vec![HIT_FOR_MISS]
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.put_u32(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
    out.put_slice(bytes);
}

/// Decodes a record (`None`: the bytes are not a record this version wrote).
pub fn decode(bytes: Bytes) -> Option<Record> {
    let mut r = bytes.clone();
    if r.is_empty() {
        return None;
    }
    match r.get_u8() {
        HIT_FOR_MISS => Some(Record::HitForMiss),
        PAGE => Page::decode(r).map(Record::Page),
        OBJECT => decode_object(r).map(Record::Object),
        _ => None,
    }
}

fn decode_object(mut r: Bytes) -> Option<Object> {
    let status = StatusCode::from_u16(r.try_get_u16().ok()?).ok()?;
    let lifetime = Duration::from_millis(r.try_get_u64().ok()?);
    let source = byte_source(r.try_get_u8().ok()?)?;
    let initial_age = Duration::from_millis(r.try_get_u64().ok()?);
    let response_time = UNIX_EPOCH.checked_add(Duration::from_millis(r.try_get_u64().ok()?))?;
    let flags = r.try_get_u8().ok()?;
    let while_revalidate = from_option_millis(r.try_get_u64().ok()?);
    let if_error = from_option_millis(r.try_get_u64().ok()?);
    let secondary = take(&mut r)?.to_vec();
    let count = r.try_get_u32().ok()?;
    let mut headers = HeaderMap::with_capacity(count.min(256) as usize);
    for _ in 0..count {
        let name = HeaderName::from_bytes(&take(&mut r)?).ok()?;
        let value = HeaderValue::from_maybe_shared(take(&mut r)?).ok()?;
        headers.append(name, value);
    }
    Some(Object {
        status,
        freshness: Freshness {
            lifetime,
            source,
            initial_age,
            response_time,
            stale: StaleRules {
                no_cache: flags & 1 != 0,
                must_revalidate: flags & 2 != 0,
                s_maxage: flags & 4 != 0,
                while_revalidate,
                if_error,
            },
        },
        secondary,
        headers,
        body: r,
    })
}

fn take(r: &mut Bytes) -> Option<Bytes> {
    let len = r.try_get_u32().ok()? as usize;
    (r.len() >= len).then(|| r.split_to(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn freshness() -> Freshness {
        Freshness {
            lifetime: Duration::from_secs(60),
            source: LifetimeSource::MaxAge,
            initial_age: Duration::from_millis(1500),
            response_time: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            stale: StaleRules {
                no_cache: false,
                must_revalidate: true,
                s_maxage: false,
                while_revalidate: Some(Duration::ZERO),
                if_error: None,
            },
        }
    }

    #[test]
    fn object_round_trip() {
        let mut headers = HeaderMap::new();
        headers.insert("etag", HeaderValue::from_static("\"x\""));
        headers.append("set-cookie", HeaderValue::from_static("a=1"));
        headers.append("set-cookie", HeaderValue::from_static("b=2"));
        let mut bytes = encode_head(
            StatusCode::NOT_FOUND,
            &freshness(),
            b"\x01gzip",
            &headers,
            5,
        );
        bytes.extend_from_slice(b"hello");
        let Some(Record::Object(object)) = decode(Bytes::from(bytes)) else {
            panic!("not an object");
        };
        assert_eq!(object.status, StatusCode::NOT_FOUND);
        assert_eq!(object.freshness, freshness());
        assert_eq!(object.secondary, b"\x01gzip");
        assert_eq!(object.headers, headers);
        assert_eq!(object.body, "hello");
    }

    #[test]
    fn other_records_and_garbage() {
        let page = Page {
            vary: HeaderValue::from_static("accept-encoding"),
            variants: Vec::new(),
        };
        match decode(Bytes::from(page.encode())) {
            Some(Record::Page(back)) => assert_eq!(back.vary, page.vary),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            decode(Bytes::from(encode_hit_for_miss())),
            Some(Record::HitForMiss)
        ));
        let head = encode_head(StatusCode::OK, &freshness(), b"", &HeaderMap::new(), 0);
        for cut in 0..head.len() - 4 {
            assert!(
                decode(Bytes::copy_from_slice(&head[..cut])).is_none(),
                "{cut}"
            );
        }
        assert!(decode(Bytes::from_static(&[9, 1, 2])).is_none());
    }
}
