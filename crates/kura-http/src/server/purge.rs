//! PURGE, BAN and PURGEKEYS on the client listeners. A plain PURGE removes a URL's stored
//! responses (every variant), or with the soft header marks them stale, so grace serves them
//! while one request refreshes them; the requests applications send to Varnish with ban and
//! key fields become bans (`invalidation.rs`). Allowed from the `[purge] allow` addresses or
//! with the `[purge] token`; 405 when neither is configured.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::request::Parts;
use http::{HeaderValue, Response, StatusCode};

use super::invalidation::{self, Action};
use super::proxy::{primary_key, Peer, Proxy};
use crate::bans::{split_key, Expr};
use crate::body::Body;
use crate::stats::CacheOutcome;

/// Whether a request is a PURGE, BAN or PURGEKEYS.
pub fn is_purge(parts: &Parts) -> bool {
    invalidation::is_invalidation(parts.method.as_str())
}

/// Answers a PURGE, BAN or PURGEKEYS.
pub async fn purge(
    proxy: &Arc<Proxy>,
    parts: &Parts,
    peer: &Peer,
) -> (Response<Body>, CacheOutcome) {
    let settings = &proxy.config.purge;
    let counters = &proxy.cache.bans().counters;
    let method = parts.method.as_str();
    let refused = |status, text: &str| {
        counters.purges_refused.fetch_add(1, Ordering::Relaxed);
        reply(status, text)
    };
    if !settings.enabled() {
        return refused(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("{method} is not enabled: set [purge] allow or token"),
        );
    }
    let from_allowed = peer
        .addr
        .is_some_and(|addr| settings.allow.iter().any(|net| net.contains(addr.ip())));
    let with_token = settings.token.as_ref().is_some_and(|token| {
        parts
            .headers
            .get(&settings.token_header)
            .is_some_and(|sent| same(sent.as_bytes(), token.as_bytes()))
    });
    if !from_allowed && !with_token {
        return refused(
            StatusCode::FORBIDDEN,
            &format!("{method} is not allowed from this address without the purge token"),
        );
    }
    let soft = parts
        .headers
        .get(&settings.soft_header)
        .is_some_and(|v| v.as_bytes() != b"0");
    match invalidation::read(method, &parts.headers, soft) {
        Err(refusal) => refused(StatusCode::BAD_REQUEST, &refusal.to_string()),
        Ok(Action::Url) => purge_url(proxy, parts, peer, soft).await,
        Ok(Action::Bans(bans)) => {
            let bans_list = proxy.cache.bans();
            let mut text = String::from("banned:");
            for (expr, soft) in bans {
                let kind = if soft { "soft ban" } else { "ban" };
                let said = expr.text().to_owned();
                let seq = bans_list.add(expr, soft);
                text.push_str(&format!("\n{kind} {seq}: {said}"));
            }
            counters.ban_requests.fetch_add(1, Ordering::Relaxed);
            reply(StatusCode::OK, &text)
        }
    }
}

/// Purges the request's URL, hard or soft.
async fn purge_url(
    proxy: &Arc<Proxy>,
    parts: &Parts,
    peer: &Peer,
    soft: bool,
) -> (Response<Body>, CacheOutcome) {
    // The key the URL is stored under, normalised by its route's rules.
    let rules = &proxy.route(proxy.route_of(parts)).normalize;
    let Some(key) = primary_key(parts, peer.scheme, rules) else {
        return reply(StatusCode::BAD_REQUEST, "PURGE needs a URL with a host");
    };
    let counters = &proxy.cache.bans().counters;
    if !soft {
        if proxy.cache.invalidate(&key) {
            counters.purges.fetch_add(1, Ordering::Relaxed);
            return reply(StatusCode::OK, "purged");
        }
        return reply(StatusCode::NOT_FOUND, "nothing stored for this URL");
    }
    // Every variant is in the URL's one entry: made stale there, without a ban (a deploy that
    // soft-purges thousands of URLs leaves the ban list as it was). Only a fetch in flight,
    // which began before the purge and stores after it, needs a soft ban on the URL.
    // An entry on disk is read back off the worker first.
    proxy.cache.bring_back(&key).await;
    let softened = proxy.cache.soften(&key, SystemTime::now());
    let in_flight = proxy.flights.busy(&key);
    if !softened && !in_flight {
        return reply(StatusCode::NOT_FOUND, "nothing stored for this URL");
    }
    if in_flight {
        if let Some((host, url)) = split_key(&key) {
            proxy.cache.bans().add(Expr::url(host, url), true);
        }
    }
    counters.soft_purges.fetch_add(1, Ordering::Relaxed);
    reply(StatusCode::OK, "soft purged: stale from now on")
}

/// Compares secrets in time independent of where they differ.
pub(super) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn reply(status: StatusCode, text: &str) -> (Response<Body>, CacheOutcome) {
    let text = format!("{} {text}\n", status.as_u16());
    let length = text.len();
    let mut response = Response::new(Body::full(text));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
    (response, CacheOutcome::Synth)
}
