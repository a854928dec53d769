//! What the cache knows of each status code (RFC 9110 §15, RFC 9111 §3 and §4.2.2,
//! RFC 5861 §4).

use http::StatusCode;

/// Whether `status` is final (not 1xx, RFC 9110 §15.2): only final responses are stored.
pub fn is_final(status: StatusCode) -> bool {
    !status.is_informational()
}

/// Whether `status` is heuristically cacheable (RFC 9110 §15.1): a response with it may be
/// stored and given a heuristic lifetime without explicit freshness.
pub fn is_heuristically_cacheable(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200 | 203 | 204 | 206 | 300 | 301 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// Whether this cache understands `status` and conforms to its caching requirements
/// (RFC 9111 §3, `must-understand` §5.2.2.3): the final codes RFC 9110 defines, except 206
/// (this cache does not store partial content) and 304 (never stored as a response of its
/// own; it updates stored ones, §4.3.4).
pub fn is_understood(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200..=205 | 300..=303 | 305 | 307 | 308 | 400..=417 | 421 | 422 | 426 | 500..=505
    )
}

/// Whether a backend's answer with `status` counts as an error in which a stale response may
/// be served instead (RFC 5861 §4: 500, 502, 503 and 504).
pub fn is_error_for_stale(status: StatusCode) -> bool {
    matches!(status.as_u16(), 500 | 502 | 503 | 504)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(code: u16) -> StatusCode {
        StatusCode::from_u16(code).unwrap()
    }

    // RFC 9110 §15.1: the heuristically cacheable codes, and some that are not.
    #[test]
    fn heuristic_codes() {
        for code in [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501] {
            assert!(is_heuristically_cacheable(s(code)), "{code}");
        }
        for code in [201, 302, 303, 307, 400, 401, 403, 500, 502, 503, 504, 999] {
            assert!(!is_heuristically_cacheable(s(code)), "{code}");
        }
    }

    // RFC 9111 §3: 206 and 304 must be understood to be stored; this cache understands neither.
    #[test]
    fn understood_codes() {
        for code in [200, 204, 301, 302, 307, 308, 404, 410, 500, 503] {
            assert!(is_understood(s(code)), "{code}");
        }
        for code in [100, 206, 304, 299, 418, 599, 999] {
            assert!(!is_understood(s(code)), "{code}");
        }
    }

    #[test]
    fn final_codes() {
        assert!(!is_final(s(100)) && !is_final(s(103)));
        assert!(is_final(s(200)) && is_final(s(599)));
    }

    // RFC 5861 §4: the error statuses.
    #[test]
    fn error_codes() {
        for code in [500, 502, 503, 504] {
            assert!(is_error_for_stale(s(code)));
        }
        for code in [200, 304, 404, 501, 505] {
            assert!(!is_error_for_stale(s(code)));
        }
    }
}
