//! The request's target and `Host`, settled before anything else reads them.
//!
//! RFC 9112 §3.2.2: a request in absolute-form (`GET http://a.example/x`) names its host in the
//! target, and that authority replaces any `Host` the request carries. kura makes the request
//! origin-form with that authority as its one `Host`, so the cache key, the rule matched and the
//! `Host` the backend gets are the same host: otherwise `GET http://victim/x` with
//! `Host: evil` would be stored under victim's URL with the page the backend made for evil
//! (issue 37, finding 2). A `Host` that is not `uri-host [":" port]` (RFC 9112 §3.2, RFC 3986
//! §3.2.2) is refused with 400, as nginx refuses it; so is userinfo in the authority (RFC 9110
//! §4.2.4) and an absolute-form target whose scheme is not `http` or `https`.

use http::header::HOST;
use http::request::Parts;
use http::uri::{Authority, PathAndQuery};
use http::{HeaderValue, Uri};

/// Makes the target origin-form with its authority as `Host` (absolute-form), and checks
/// `Host`. `Err(())` when the request must get 400.
pub fn settle(parts: &mut Parts) -> Result<(), ()> {
    if let Some(authority) = parts.uri.authority().cloned() {
        if !matches!(parts.uri.scheme_str(), Some("http" | "https")) {
            return Err(());
        }
        let host = host_of(&authority)?;
        let path = parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        parts.uri = Uri::from(path);
        parts.headers.remove(HOST);
        parts.headers.insert(HOST, host);
        return Ok(());
    }
    match parts.headers.get(HOST) {
        Some(host) if !valid_host(host.as_bytes()) => Err(()),
        _ => Ok(()),
    }
}

/// The `Host` value for `authority`: itself, without userinfo (refused), when valid.
fn host_of(authority: &Authority) -> Result<HeaderValue, ()> {
    let text = authority.as_str();
    if text.contains('@') || !valid_host(text.as_bytes()) {
        return Err(());
    }
    HeaderValue::from_str(text).map_err(|_| ())
}

/// Whether `value` is `uri-host [":" port]`: a bracketed IPv6 address, or a non-empty
/// reg-name (or IPv4 address) of unreserved characters, sub-delimiters and percent escapes,
/// then an optional port of at most five digits.
pub fn valid_host(value: &[u8]) -> bool {
    let (host, port) = if let Some(rest) = value.strip_prefix(b"[") {
        let Some(close) = rest.iter().position(|&b| b == b']') else {
            return false;
        };
        let Ok(literal) = std::str::from_utf8(&rest[..close]) else {
            return false;
        };
        if literal.parse::<std::net::Ipv6Addr>().is_err() {
            return false;
        }
        (&value[..close + 2], &rest[close + 1..])
    } else {
        match value.iter().position(|&b| b == b':') {
            Some(colon) => (&value[..colon], &value[colon..]),
            None => (value, &b""[..]),
        }
    };
    let port_ok = match port {
        [] => true,
        [b':', digits @ ..] => digits.len() <= 5 && digits.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    port_ok && !host.is_empty() && (host[0] == b'[' || reg_name(host))
}

/// RFC 3986 §3.2.2 reg-name (an IPv4 address is one too).
fn reg_name(host: &[u8]) -> bool {
    let mut at = 0;
    while at < host.len() {
        let b = host[at];
        if b == b'%' {
            let escape = host.get(at + 1..at + 3);
            if !escape.is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)) {
                return false;
            }
            at += 3;
            continue;
        }
        let unreserved = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
        let sub_delim = matches!(
            b,
            b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
        );
        if !(unreserved || sub_delim) {
            return false;
        }
        at += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(target: &str, hosts: &[&str]) -> Parts {
        let mut request = http::Request::builder().uri(target);
        for host in hosts {
            request = request.header(HOST, *host);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn an_absolute_target_s_authority_replaces_host() {
        let mut p = parts("http://Victim.example:8080/x?y=1", &["evil.example"]);
        assert_eq!(settle(&mut p), Ok(()));
        assert_eq!(p.uri, "/x?y=1");
        assert_eq!(p.headers.get_all(HOST).iter().count(), 1);
        assert_eq!(p.headers[HOST], "Victim.example:8080");
        let mut bare = parts("https://a.example", &[]);
        assert_eq!(settle(&mut bare), Ok(()));
        assert_eq!(bare.uri, "/");
        assert_eq!(bare.headers[HOST], "a.example");
        for bad in ["http://user@a.example/", "ftp://a.example/"] {
            assert_eq!(settle(&mut parts(bad, &["a.example"])), Err(()), "{bad}");
        }
    }

    #[test]
    fn hosts_must_be_uri_host_and_port() {
        for good in [
            "example.com",
            "EXAMPLE.com:80",
            "127.0.0.1:6081",
            "[::1]",
            "[2001:db8::1]:443",
            "a-b_c~d.example",
            "xn--bcher-kva.example",
            "a%2Eb",
            "example.com:",
        ] {
            assert!(valid_host(good.as_bytes()), "{good}");
        }
        for bad in [
            "",
            ":80",
            "a b",
            "a/b",
            "a\\b",
            "a@b",
            "example.com:80:80",
            "example.com:8o",
            "example.com:123456",
            "[::1",
            "[::g]",
            "[::1]x",
            "a%2",
            "a\"b",
            "é.example",
        ] {
            assert!(!valid_host(bad.as_bytes()), "{bad}");
        }
        let mut bad = parts("/", &["a/b"]);
        assert_eq!(settle(&mut bad), Err(()));
    }
}
