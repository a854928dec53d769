//! Compressed storage (seed 002): compressible responses are stored gzip-compressed, gzip
//! clients get the stored bytes, the others get them decoded on the fly.
//!
//! - **Way in** (`server/fill.rs`): a storable response whose type is in the list, at least
//!   `min_size` long, not already content-coded, not a range and not `no-transform` goes
//!   through an [`codec::Encoder`] before it reaches the flight, so the flight and the store
//!   hold the gzip bytes. A response the backend sent gzip-coded is kept as it is. The stored
//!   header fields get `Content-Encoding: gzip` and [`MARKER`] (the identity length when known),
//!   which says the gzip coding is the proxy's: the stored `ETag` is still the backend's, of
//!   the identity bytes.
//! - **Request**: the client's `Accept-Encoding` is read once ([`ClientCoding`]), then replaced
//!   by the codings kura decodes (`gzip, br, zstd`: `backend_accept`) for the lookup and the
//!   backend request, so every client shares one variant even when the backend sends
//!   `Vary: Accept-Encoding` (Varnish's `http_gzip_support`, with brotli and zstd too).
//! - **Way out** ([`ClientCoding::adapt`]): the header fields a client gets for a coded object
//!   (gzip, br or zstd, as stored), and the coding its body must be decoded from when the
//!   client does not accept it (`decode.rs`, bounded by `max_decoded`); a client that accepts
//!   gzip but not the stored br or zstd gets it decoded and gzipped again on the fly
//!   ([`TRANSCODE_LEVEL`]), not identity.

pub mod accept;
pub mod codec;
pub mod decode;

pub use accept::{Accepted, Coding};

use http::header::{
    ACCEPT_ENCODING, ACCEPT_RANGES, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE,
    CONTENT_TYPE, ETAG, VARY,
};
use http::request::Parts;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use crate::rules::cache_control::ResponseDirectives;

/// Stored with an object the proxy compressed; its value is the identity length, or empty when
/// it was not known when the head was sent. Never sent to a client, and removed from backend
/// responses.
pub const MARKER: HeaderName = HeaderName::from_static("kura-gzip");

/// The gzip level a br or zstd object is transcoded at for a client that accepts gzip but not
/// its coding: the fastest. Measured (`bench/http-encodings.sh`, a 20 KB page): level 1 adds
/// 16% to the brotli decoding such a request pays anyway and sends 57% of the identity bytes;
/// level 6 would add 36% for 40%.
pub const TRANSCODE_LEVEL: u32 = 1;

/// The media types compressed by default: text, and the structured text types of the web.
pub const DEFAULT_TYPES: [&str; 11] = [
    "text/*",
    "application/json",
    "application/javascript",
    "application/xml",
    "application/xhtml+xml",
    "application/rss+xml",
    "application/atom+xml",
    "application/ld+json",
    "application/manifest+json",
    "image/svg+xml",
    "application/wasm",
];

/// `[compression]`.
#[derive(Debug, Clone)]
pub struct Compression {
    /// Compressed storage on (default: on).
    pub enabled: bool,
    /// gzip level, 1..=9 (default 6, gzip's and Varnish's).
    pub level: u32,
    /// Media types compressed: exact (`application/json`) or a whole top-level type (`text/*`),
    /// lowercase.
    pub types: Vec<String>,
    /// Bodies whose `Content-Length` is smaller are stored as they are (default 1024). Bodies
    /// of unknown length are compressed.
    pub min_size: u64,
    /// The codings asked of the backend for looked-up requests (default gzip, br, zstd: all
    /// that kura decodes).
    pub backend_accept: Vec<Coding>,
    /// Largest decoded body: a coded body that would decode to more is not stored, and is cut
    /// when decoded for a client (default 64 MiB).
    pub max_decoded: u64,
    /// The coding kura compresses with: gzip (default) or br.
    pub coding: Coding,
    /// brotli's quality, 0..=11 (default 5), when `coding` is br.
    pub brotli_level: u32,
}

impl Default for Compression {
    fn default() -> Compression {
        Compression {
            enabled: true,
            level: 6,
            types: DEFAULT_TYPES.iter().map(|t| (*t).to_owned()).collect(),
            min_size: 1024,
            backend_accept: Coding::ALL.to_vec(),
            max_decoded: 64 << 20,
            coding: Coding::Gzip,
            brotli_level: 5,
        }
    }
}

impl Compression {
    /// Whether a storable response with `status` and stored fields `headers` is to be
    /// compressed on its way in.
    pub fn compresses(&self, status: StatusCode, headers: &HeaderMap) -> bool {
        if !self.enabled
            || matches!(status.as_u16(), 204 | 206 | 304)
            || status.is_informational()
            || headers.contains_key(CONTENT_RANGE)
            || no_transform(headers)
        {
            return false;
        }
        let coded = headers.get_all(CONTENT_ENCODING).iter().any(|v| {
            v.to_str().map_or(true, |v| {
                v.split(',')
                    .any(|c| !c.trim().eq_ignore_ascii_case("identity"))
            })
        });
        if coded {
            return false;
        }
        let length = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if length.is_some_and(|length| length < self.min_size) {
            return false;
        }
        headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|value| self.type_listed(value))
    }

    /// Whether the media type of a `Content-Type` value is in the list.
    pub fn type_listed(&self, content_type: &str) -> bool {
        let media = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let Some((top, _)) = media.split_once('/') else {
            return false;
        };
        self.types
            .iter()
            .any(|listed| match listed.strip_suffix("/*") {
                Some(listed_top) => listed_top == top,
                None => *listed == media,
            })
    }

    /// Reads the client's `Accept-Encoding` and replaces it by `gzip` (when on): called once
    /// for a request that is looked up in the cache.
    pub fn normalise_request(&self, parts: &mut Parts) {
        if !self.enabled {
            return;
        }
        let accepted = Accepted::of(&parts.headers);
        parts.extensions.insert(ClientCoding {
            accepted,
            limit: self.max_decoded,
        });
        let names: Vec<&str> = self.backend_accept.iter().map(|c| c.name()).collect();
        let value = match names.as_slice() {
            [] => HeaderValue::from_static("identity"),
            names => {
                HeaderValue::try_from(names.join(", ")).unwrap_or(HeaderValue::from_static("gzip"))
            }
        };
        parts.headers.insert(ACCEPT_ENCODING, value);
    }

    /// The encoder of a response to compress.
    pub fn encoder(&self) -> codec::Encoder {
        match self.coding {
            Coding::Br => codec::Encoder::brotli(self.brotli_level),
            _ => codec::Encoder::new(self.level),
        }
    }

    /// Marks fields about to be stored as compressed by the proxy: `Content-Encoding` (gzip,
    /// or br), no `Content-Length` until the compressed length is known, [`MARKER`] with the
    /// identity length when the backend gave it.
    pub fn mark(&self, headers: &mut HeaderMap) {
        let identity = headers.remove(CONTENT_LENGTH);
        headers.remove(CONTENT_ENCODING);
        let coding = HeaderValue::from_static(match self.coding {
            Coding::Br => "br",
            _ => "gzip",
        });
        headers.insert(CONTENT_ENCODING, coding);
        headers.insert(MARKER, identity.unwrap_or(HeaderValue::from_static("")));
        headers.remove(ACCEPT_RANGES);
    }
}

/// Whether `Cache-Control` says `no-transform` (RFC 9110 §7.7, RFC 9111 §5.2.2.6).
fn no_transform(headers: &HeaderMap) -> bool {
    headers.contains_key(CACHE_CONTROL) && ResponseDirectives::from_headers(headers).no_transform
}

/// The coding the fields say the content has, when it is one kura decodes, and only that one
/// (`gzip, br`, codings applied twice, are left as they are).
pub fn coding_of(headers: &HeaderMap) -> Option<Coding> {
    let mut codings = headers.get_all(CONTENT_ENCODING).iter();
    match (codings.next(), codings.next()) {
        (Some(value), None) => value
            .to_str()
            .ok()
            .filter(|v| !v.contains(','))
            .and_then(Coding::parse),
        _ => None,
    }
}

/// Whether the fields say the content is gzip-coded, and only that.
pub fn is_gzip(headers: &HeaderMap) -> bool {
    coding_of(headers) == Some(Coding::Gzip)
}

/// A body to decode for a client: from `coding`, to at most `limit` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decode {
    /// The coding it has.
    pub coding: Coding,
    /// Largest decoded length.
    pub limit: u64,
    /// gzip-compressed again as it is decoded, at this level (a gzip client of a br or zstd
    /// object); `None`: sent decoded.
    pub gzip: Option<u32>,
}

/// What a client accepts, read before its `Accept-Encoding` was replaced; in the request's
/// extensions. A request without it (compression off) gets the stored fields as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientCoding {
    /// The codings the client accepts.
    pub accepted: Accepted,
    /// Largest body decoded for it (`max_decoded`).
    pub limit: u64,
}

impl ClientCoding {
    /// The coding of the request `parts`, `None` when compression is off.
    pub fn of(parts: &Parts) -> Option<ClientCoding> {
        parts.extensions.get::<ClientCoding>().copied()
    }

    /// A client accepting `codings`, with the default decoding limit (for tests and tools).
    pub fn accepting(codings: &[Coding]) -> ClientCoding {
        ClientCoding {
            accepted: Accepted::of_codings(codings),
            limit: Compression::default().max_decoded,
        }
    }

    /// Adapts `headers`, the fields of a (stored or fetched) response, for this client; `Some`
    /// when the body must be decoded for it. [`MARKER`] is removed in every case.
    ///
    /// A coded response (gzip, br, zstd) gets `Vary: Accept-Encoding` merged in. A client that
    /// accepts its coding gets it as it is, with a weak `ETag` when the proxy compressed it
    /// (RFC 9110 §8.8.3: the backend's strong tag names the identity bytes). One that accepts
    /// gzip but not the stored br or zstd gets it transcoded: `Content-Encoding: gzip`, no
    /// `Content-Length` or `Accept-Ranges`, a weak `ETag`. Any other gets it decoded: no
    /// `Content-Encoding`, the identity `Content-Length` when known, no `Accept-Ranges`, and a
    /// weak `ETag` when the backend coded it. `no-transform` responses are never decoded.
    pub fn adapt(coding: Option<ClientCoding>, headers: &mut HeaderMap) -> Option<Decode> {
        let marker = headers.remove(MARKER);
        let client = coding?;
        let stored = coding_of(headers)?;
        merge_vary(headers);
        let ours = marker.is_some();
        if client.accepted.accepts(stored) || no_transform(headers) {
            if ours {
                weaken_etag(headers);
            }
            return None;
        }
        headers.remove(CONTENT_ENCODING);
        headers.remove(CONTENT_LENGTH);
        headers.remove(ACCEPT_RANGES);
        if stored != Coding::Gzip && client.accepted.accepts(Coding::Gzip) {
            headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            weaken_etag(headers);
            return Some(Decode {
                coding: stored,
                limit: client.limit,
                gzip: Some(TRANSCODE_LEVEL),
            });
        }
        if let Some(identity) = marker.filter(|v| !v.is_empty()) {
            headers.insert(CONTENT_LENGTH, identity);
        }
        if !ours {
            weaken_etag(headers);
        }
        Some(Decode {
            coding: stored,
            limit: client.limit,
            gzip: None,
        })
    }
}

/// Adds `Accept-Encoding` to `Vary` unless it is there (or `Vary: *`).
fn merge_vary(headers: &mut HeaderMap) {
    let listed = headers.get_all(VARY).iter().any(|v| {
        v.to_str().is_ok_and(|v| {
            v.split(',')
                .any(|f| f.trim() == "*" || f.trim().eq_ignore_ascii_case("accept-encoding"))
        })
    });
    if !listed {
        headers.append(VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

/// Makes a strong `ETag` weak (`"x"` becomes `W/"x"`).
fn weaken_etag(headers: &mut HeaderMap) {
    let Some(etag) = headers.get(ETAG) else {
        return;
    };
    let bytes = etag.as_bytes();
    if bytes.starts_with(b"W/") || !bytes.starts_with(b"\"") {
        return;
    }
    let mut weak = b"W/".to_vec();
    weak.extend_from_slice(bytes);
    if let Ok(value) = HeaderValue::from_bytes(&weak) {
        headers.insert(ETAG, value);
    }
}

#[cfg(test)]
mod tests;
