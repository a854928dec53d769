//! `Cache-Status` (RFC 9211): this cache's member, appended after any the backend sent (the
//! list runs from the origin's side to the client's), beside `X-Cache`:
//!
//! | outcome | member |
//! |---|---|
//! | hit | `kura; hit; ttl=N` (N: seconds of freshness left) |
//! | stale | `kura; hit; ttl=-N` (served stale: grace, stale-while-revalidate, stale-if-error) |
//! | miss | `kura; fwd=miss; fwd-status=S; stored` |
//! | coalesced | `kura; fwd=miss; fwd-status=S; collapsed` |
//! | pass | `kura; fwd=method; fwd-status=S` (not GET or HEAD), else `fwd=bypass` |
//! | synth | `kura; detail=synth` (answered by kura itself) |
//! | pipe | `kura; fwd=bypass; fwd-status=101` (an upgrade piped to the backend) |

use std::time::SystemTime;

use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};

use crate::rules::freshness::Freshness;
use crate::stats::CacheOutcome;

/// The field's name.
pub const CACHE_STATUS: HeaderName = HeaderName::from_static("cache-status");

/// Appends the member of a response served from a stored object with `freshness`.
pub fn stored(headers: &mut HeaderMap, name: &str, freshness: &Freshness, now: SystemTime) {
    let seconds = |d: std::time::Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    let ttl = seconds(freshness.lifetime).saturating_sub(seconds(freshness.current_age(now)));
    append(headers, format!("{name}; hit; ttl={ttl}"));
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
    use std::time::Duration;

    use super::*;
    use crate::rules::freshness::{LifetimeSource, StaleRules};

    #[test]
    fn members_for_each_outcome() {
        let now = SystemTime::now();
        let freshness = Freshness {
            lifetime: Duration::from_secs(60),
            source: LifetimeSource::MaxAge,
            initial_age: Duration::from_secs(10),
            response_time: now,
            stale: StaleRules::default(),
        };
        let mut headers = HeaderMap::new();
        headers.append(
            CACHE_STATUS,
            HeaderValue::from_static("origin; fwd=uri-miss"),
        );
        stored(&mut headers, "kura", &freshness, now);
        stored(
            &mut headers,
            "kura",
            &freshness,
            now + Duration::from_secs(70),
        );
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
                "kura; hit; ttl=50",
                "kura; hit; ttl=-20",
                "edge; fwd=method; fwd-status=201",
                "edge; fwd=bypass; fwd-status=200",
                "kura; fwd=miss; fwd-status=200; stored",
            ]
        );
    }
}
