//! Invalidation after unsafe methods (RFC 9111 §4.4).
//!
//! When a request with an unsafe method (anything but GET, HEAD, OPTIONS and TRACE, including
//! methods the cache does not know, RFC 9110 §9.2.1) gets a non-error response (2xx or 3xx),
//! the cache invalidates the target URI, and the URIs in `Location` and `Content-Location`
//! (resolved against the target, RFC 3986 §5, with the `iri-string` crate) when their host is
//! the target's host (MUST NOT otherwise, so one site cannot empty another's entries).
//! Invalidating a URI means every stored response for it, all variants.

use http::header::{CONTENT_LOCATION, HOST, LOCATION};
use http::{HeaderMap, Method, StatusCode, Uri};
use iri_string::types::{UriAbsoluteStr, UriReferenceStr};

use super::head::RequestHead;

/// Whether `method` is safe (RFC 9110 §9.2.1); unknown methods are not.
pub fn is_safe(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// The request's target URI in absolute form (RFC 9110 §7.1): as received when absolute,
/// otherwise `scheme` (`"http"` or `"https"`, as the connection was), `Host` and the path.
/// `None` without a usable host.
pub fn target_uri(request: RequestHead<'_>, scheme: &str) -> Option<Uri> {
    if request.uri.scheme().is_some() && request.uri.authority().is_some() {
        return Some(normalise(request.uri));
    }
    let host = request.headers.get(HOST)?.to_str().ok()?.trim();
    let path = request
        .uri
        .path_and_query()
        .map_or("/", |path| path.as_str());
    let uri: Uri = format!("{scheme}://{host}{path}").parse().ok()?;
    Some(normalise(&uri))
}

/// `uri` with its scheme and host in lowercase (RFC 3986 §6.2.2.1: they are case-insensitive),
/// so that equal URIs compare equal.
pub fn normalise(uri: &Uri) -> Uri {
    let mut parts = uri.clone().into_parts();
    if let Some(authority) = &parts.authority {
        let lower = authority.as_str().to_ascii_lowercase();
        if let Ok(authority) = lower.parse() {
            parts.authority = Some(authority);
        }
    }
    if let Some(scheme) = &parts.scheme {
        let lower = scheme.as_str().to_ascii_lowercase();
        if let Ok(scheme) = lower.parse() {
            parts.scheme = Some(scheme);
        }
    }
    Uri::from_parts(parts).unwrap_or_else(|_| uri.clone())
}

/// The URIs to invalidate after `method` on `target` (absolute) got a response with `status`
/// and header fields `response`. Empty for safe methods and error statuses.
pub fn invalidated(
    method: &Method,
    target: &Uri,
    status: StatusCode,
    response: &HeaderMap,
) -> Vec<Uri> {
    if is_safe(method) || !(status.is_success() || status.is_redirection()) {
        return Vec::new();
    }
    let target = normalise(target);
    let mut uris = vec![target.clone()];
    for name in [LOCATION, CONTENT_LOCATION] {
        for value in response.get_all(name) {
            let Some(uri) = value.to_str().ok().and_then(|v| resolve(&target, v.trim())) else {
                continue;
            };
            let uri = normalise(&uri);
            if same_host(&uri, &target) && !uris.contains(&uri) {
                uris.push(uri);
            }
        }
    }
    uris
}

/// Resolves `reference` against `base` (RFC 3986 §5.2), without its fragment.
fn resolve(base: &Uri, reference: &str) -> Option<Uri> {
    if reference.is_empty() {
        return None;
    }
    let base = base.to_string();
    let base = UriAbsoluteStr::new(&base).ok()?;
    let reference = UriReferenceStr::new(reference).ok()?;
    let resolved = reference.resolve_against(base).to_string();
    let without_fragment = resolved.split('#').next().unwrap_or(&resolved);
    without_fragment.parse().ok()
}

fn same_host(a: &Uri, b: &Uri) -> bool {
    match (a.host(), b.host()) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    use crate::rules::test_support::map;

    fn target() -> Uri {
        "http://example.com/a/b?x=1".parse().unwrap()
    }

    fn run(method: Method, status: u16, response: &[(&'static str, &'static str)]) -> Vec<String> {
        let status = StatusCode::from_u16(status).unwrap();
        invalidated(&method, &target(), status, &map(response))
            .iter()
            .map(Uri::to_string)
            .collect()
    }

    // RFC 9110 §9.2.1: safe methods; unknown methods are unsafe.
    #[test]
    fn safety() {
        for method in [Method::GET, Method::HEAD, Method::OPTIONS, Method::TRACE] {
            assert!(is_safe(&method));
        }
        for method in [
            Method::POST,
            Method::PUT,
            Method::DELETE,
            Method::PATCH,
            Method::CONNECT,
        ] {
            assert!(!is_safe(&method));
        }
        assert!(!is_safe(&Method::from_bytes(b"PURGE").unwrap()));
    }

    // RFC 9111 §4.4: unsafe method + non-error status: the target is invalidated.
    #[test]
    fn target_is_invalidated() {
        assert_eq!(run(Method::POST, 200, &[]), ["http://example.com/a/b?x=1"]);
        assert_eq!(
            run(Method::DELETE, 204, &[]),
            ["http://example.com/a/b?x=1"]
        );
        assert_eq!(run(Method::PUT, 303, &[]), ["http://example.com/a/b?x=1"]);
        let unknown = Method::from_bytes(b"FROB").unwrap();
        assert_eq!(run(unknown, 200, &[]).len(), 1);
    }

    // RFC 9111 §4.4: only non-error statuses; never for safe methods.
    #[test]
    fn errors_and_safe_methods_invalidate_nothing() {
        for status in [400, 404, 500, 503] {
            assert!(run(Method::POST, status, &[]).is_empty(), "{status}");
        }
        assert!(run(Method::GET, 200, &[("location", "/c")]).is_empty());
    }

    // RFC 9111 §4.4: Location and Content-Location, resolved, same host only.
    #[test]
    fn location_and_content_location() {
        let response = [
            ("location", "/new?y=2#frag"),
            ("content-location", "c"),
            ("location", "http://EXAMPLE.com:8080/other"),
            ("content-location", "http://evil.example/a"),
            ("location", "//evil.example/b"),
        ];
        assert_eq!(
            run(Method::POST, 201, &response),
            [
                "http://example.com/a/b?x=1",
                "http://example.com/new?y=2",
                "http://example.com:8080/other",
                "http://example.com/a/c",
            ]
        );
    }

    // RFC 3986 §5.2.4: dot segments are removed; garbage is skipped.
    #[test]
    fn references_resolve_or_are_skipped() {
        let response = [("location", "../up"), ("content-location", "not a uri")];
        assert_eq!(
            run(Method::POST, 200, &response),
            ["http://example.com/a/b?x=1", "http://example.com/up"]
        );
        let same = [("location", "http://example.com/a/b?x=1")];
        assert_eq!(run(Method::POST, 200, &same).len(), 1);
    }

    // RFC 9110 §7.1: the target URI from an origin-form request and Host.
    #[test]
    fn target_uri_reconstruction() {
        let request = Request::post("/p?q=1")
            .header("host", "Example.com:81")
            .body(())
            .unwrap();
        let uri = target_uri((&request).into(), "http").unwrap();
        assert_eq!(uri.to_string(), "http://example.com:81/p?q=1");
        let absolute = Request::post("HTTPS://A.example/x").body(()).unwrap();
        assert_eq!(
            target_uri((&absolute).into(), "http").unwrap().to_string(),
            "https://a.example/x"
        );
        let no_host = Request::post("/p").body(()).unwrap();
        assert_eq!(target_uri((&no_host).into(), "http"), None);
        let bad_host = Request::post("/p").header("host", "a b").body(()).unwrap();
        assert_eq!(target_uri((&bad_host).into(), "http"), None);
    }
}
