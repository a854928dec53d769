//! A request head: where it ends and how its body is framed, decided as hyper's server decides
//! (`httparse` with its default settings, then RFC 9112 §6.1-§6.3), with one rule of kura's
//! own: a request with both `Content-Length` and `Transfer-Encoding` is refused, not framed by
//! `Transfer-Encoding` (a front end that frames it by `Content-Length` would read another
//! request out of its body).

/// The limits a head is parsed under: hyper's server is configured with the same ones, so both
/// refuse the same heads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLimits {
    /// Largest head in bytes (request line, fields and the empty line): hyper's
    /// `max_header_size`, 431 past it.
    pub max_head: usize,
    /// Most header fields: hyper's `max_headers`, 431 past it.
    pub max_headers: usize,
}

/// How a request's body is framed (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body.
    None,
    /// `Content-Length` bytes (more than zero).
    Length(u64),
    /// `Transfer-Encoding` ending in `chunked`.
    Chunked,
    /// No body, and an upgrade is asked for ([`asks_upgrade`]): if the answer is `101`, what
    /// follows on the connection is the other protocol, else nothing more is read.
    Upgrade,
}

/// Why a head is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not a request head `httparse` accepts (400).
    Malformed,
    /// Past [`HeadLimits::max_head`] (431).
    TooLarge,
    /// More fields than [`HeadLimits::max_headers`] (431).
    TooManyHeaders,
    /// A `Content-Length` that is not digits, or two that differ (400).
    BadLength,
    /// A `Transfer-Encoding` whose last coding is not `chunked`, or any on HTTP/1.0 (400).
    BadTransferEncoding,
    /// Both `Content-Length` and `Transfer-Encoding` (400).
    BothFramings,
}

impl Refusal {
    /// Whether hyper answers it with 431 (the head is too large) rather than 400.
    pub fn is_too_large(self) -> bool {
        matches!(self, Refusal::TooLarge | Refusal::TooManyHeaders)
    }
}

/// What the start of a buffer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole head yet, and no limit passed.
    Partial,
    /// A head of `len` bytes, its body framed by `body`.
    Complete {
        /// Bytes of the head, its empty line included.
        len: usize,
        /// The body that follows it.
        body: BodyFraming,
    },
    /// A head that must not be served.
    Refused(Refusal),
}

/// Fields parsed without an allocation; a head with more is parsed again with room for
/// [`HeadLimits::max_headers`].
const INLINE_HEADERS: usize = 64;

/// Reads the request head at the start of `input`.
pub fn parse_head(input: &[u8], limits: &HeadLimits) -> Parsed {
    let mut inline = [httparse::EMPTY_HEADER; INLINE_HEADERS];
    if limits.max_headers <= INLINE_HEADERS {
        return parse_with(input, limits, &mut inline[..limits.max_headers]);
    }
    match parse_with(input, limits, &mut inline) {
        Parsed::Refused(Refusal::TooManyHeaders) => {
            let mut room = vec![httparse::EMPTY_HEADER; limits.max_headers];
            parse_with(input, limits, &mut room)
        }
        parsed => parsed,
    }
}

fn parse_with<'a>(
    input: &'a [u8],
    limits: &HeadLimits,
    fields: &mut [httparse::Header<'a>],
) -> Parsed {
    let mut request = httparse::Request::new(fields);
    let len = match request.parse(input) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if input.len() >= limits.max_head => {
            return Parsed::Refused(Refusal::TooLarge)
        }
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(httparse::Error::TooManyHeaders) => return Parsed::Refused(Refusal::TooManyHeaders),
        Err(_) => return Parsed::Refused(Refusal::Malformed),
    };
    if len > limits.max_head {
        return Parsed::Refused(Refusal::TooLarge);
    }
    let http10 = request.version == Some(0);
    match body_framing(request.headers, http10) {
        Ok(BodyFraming::None)
            if request.method == Some("GET")
                && !http10
                && asks_upgrade(request.headers.iter().map(|f| (f.name.as_bytes(), f.value))) =>
        {
            Parsed::Complete {
                len,
                body: BodyFraming::Upgrade,
            }
        }
        Ok(body) => Parsed::Complete { len, body },
        Err(refusal) => Parsed::Refused(refusal),
    }
}

/// Whether request fields (name, value) ask to upgrade the connection (RFC 9110 §7.8):
/// `Connection` lists `upgrade` and `Upgrade` names a protocol other than `h2c` (which kura
/// answers over HTTP/1.1: RFC 9113 deprecates it). The guard and the proxy read a request
/// with this one function, so they agree on which requests may switch protocols.
pub fn asks_upgrade<'a>(fields: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> bool {
    let mut connection = false;
    let mut protocol = false;
    for (name, value) in fields {
        let members = || {
            value
                .split(|&b| b == b',')
                .map(<[u8]>::trim_ascii)
                .filter(|m| !m.is_empty())
        };
        if name.eq_ignore_ascii_case(b"connection") {
            connection |= members().any(|m| m.eq_ignore_ascii_case(b"upgrade"));
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            protocol |= members().any(|m| !m.eq_ignore_ascii_case(b"h2c"));
        }
    }
    connection && protocol
}

/// The body framing of a request with `fields` (RFC 9112 §6.1-§6.3), as hyper's server reads
/// it: `Content-Length` is digits only (no sign, no list), repeated only with the same value;
/// the last `Transfer-Encoding` line decides whether the body is chunked, and a
/// `Transfer-Encoding` whose last coding is not `chunked` is refused, as is any on HTTP/1.0.
fn body_framing(fields: &[httparse::Header<'_>], http10: bool) -> Result<BodyFraming, Refusal> {
    let mut length: Option<u64> = None;
    let mut chunked: Option<bool> = None;
    for field in fields {
        if field.name.eq_ignore_ascii_case("content-length") {
            let value = digits(field.value).ok_or(Refusal::BadLength)?;
            if length.is_some_and(|before| before != value) {
                return Err(Refusal::BadLength);
            }
            length = Some(value);
        } else if field.name.eq_ignore_ascii_case("transfer-encoding") {
            if http10 {
                return Err(Refusal::BadTransferEncoding);
            }
            chunked = Some(last_coding_is_chunked(field.value));
        }
    }
    match (length, chunked) {
        (Some(_), Some(_)) => Err(Refusal::BothFramings),
        (None, Some(true)) => Ok(BodyFraming::Chunked),
        (None, Some(false)) => Err(Refusal::BadTransferEncoding),
        (Some(0) | None, None) => Ok(BodyFraming::None),
        (Some(n), None) => Ok(BodyFraming::Length(n)),
    }
}

/// A `Content-Length` value: one or more digits and nothing else (hyper's reading).
fn digits(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// Whether the last coding of one `Transfer-Encoding` line is `chunked` (a value that is not
/// visible ASCII never is).
fn last_coding_is_chunked(value: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(value) else {
        return false;
    };
    if !text
        .bytes()
        .all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
    {
        return false;
    }
    text.rsplit(',')
        .next()
        .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
}

#[cfg(test)]
mod tests;
