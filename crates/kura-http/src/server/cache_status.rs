//! `Cache-Status` (RFC 9211): this cache's member, appended after any the backend sent (the
//! list runs from the origin's side to the client's), beside `X-Cache`:
//!
//! | outcome | member |
//! |---|---|
//! | hit | `kura; hit` |
//! | stale | `kura; hit; fwd=stale` (served stale: grace, stale-while-revalidate, stale-if-error; a background fetch refreshes it) |
//! | miss | `kura; fwd=miss; fwd-status=S; stored` |
//! | coalesced | `kura; fwd=miss; fwd-status=S; collapsed` |
//! | pass | `kura; fwd=method; fwd-status=S` (not GET or HEAD), else `fwd=bypass` |
//! | synth | `kura; detail=synth` (answered by kura itself) |
//! | pipe | `kura; fwd=bypass; fwd-status=101` (an upgrade piped to the backend) |

use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};

use crate::config::CacheStatus;
use crate::stats::CacheOutcome;

/// The field's name.
pub const CACHE_STATUS: HeaderName = HeaderName::from_static("cache-status");

/// Appends the member of a response served from a stored object: `hit`, or `hit; fwd=stale`
/// when it is served stale. No `ttl`: every hit would pay for a field formatted for it (about
/// a thousand instructions), where the two members made at start cost a clone.
pub fn stored(headers: &mut HeaderMap, members: &CacheStatus, outcome: CacheOutcome) {
    let member = if outcome == CacheOutcome::Stale {
        &members.stale
    } else {
        &members.hit
    };
    headers.append(CACHE_STATUS, member.clone());
}

/// Appends the member of a response with any other `outcome`, to a request with `method`.
pub fn forwarded(
    headers: &mut HeaderMap,
    name: &str,
    outcome: CacheOutcome,
    method: &Method,
    status: StatusCode,
) {
    let status = status.as_u16();
    let member = match outcome {
        CacheOutcome::Miss => format!("{name}; fwd=miss; fwd-status={status}; stored"),
        CacheOutcome::Coalesced => format!("{name}; fwd=miss; fwd-status={status}; collapsed"),
        CacheOutcome::Pass if method != Method::GET && method != Method::HEAD => {
            format!("{name}; fwd=method; fwd-status={status}")
        }
        CacheOutcome::Pass | CacheOutcome::Pipe => {
            format!("{name}; fwd=bypass; fwd-status={status}")
        }
        // A hit or stale response is given its member where it is served (`stored`).
        CacheOutcome::Hit | CacheOutcome::Stale | CacheOutcome::Synth => {
            format!("{name}; detail=synth")
        }
    };
    append(headers, member);
}

fn append(headers: &mut HeaderMap, member: String) {
    // The name is a checked token and the rest is ours: always a valid field value.
    if let Ok(value) = HeaderValue::try_from(member) {
        headers.append(CACHE_STATUS, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_for_each_outcome() {
        let kura = CacheStatus::named("kura").unwrap();
        let mut headers = HeaderMap::new();
        headers.append(
            CACHE_STATUS,
            HeaderValue::from_static("origin; fwd=uri-miss"),
        );
        stored(&mut headers, &kura, CacheOutcome::Hit);
        stored(&mut headers, &kura, CacheOutcome::Stale);
        let pass = CacheOutcome::Pass;
        forwarded(
            &mut headers,
            "edge",
            pass,
            &Method::POST,
            StatusCode::CREATED,
        );
        forwarded(&mut headers, "edge", pass, &Method::GET, StatusCode::OK);
        let miss = CacheOutcome::Miss;
        forwarded(&mut headers, "kura", miss, &Method::GET, StatusCode::OK);
        let members: Vec<_> = headers.get_all(CACHE_STATUS).iter().collect();
        assert_eq!(
            members,
            [
                "origin; fwd=uri-miss",
                "kura; hit",
                "kura; hit; fwd=stale",
                "edge; fwd=method; fwd-status=201",
                "edge; fwd=bypass; fwd-status=200",
                "kura; fwd=miss; fwd-status=200; stored",
            ]
        );
    }
}
