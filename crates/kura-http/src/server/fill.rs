//! The fetch task of a flight: one conditional or plain GET to the backend, a 304 merged into
//! the stored object, the response judged storable or not, its body streamed to the readers
//! and stored once complete.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{AGE, CONTENT_LENGTH};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::BodyExt;

use super::fetch::is_server_error;
use super::interim;
use super::proxy::Proxy;
use crate::backend::{strip_hop_by_hop, Backend, Lease, Pick};
use crate::bans::Hold;
use crate::body::Body;
use crate::cache::object::Object;
use crate::coalesce::{FetchError, Head, Outcome, Producer};
use crate::compress;
use crate::compress::codec::Encoder;
use crate::compress::decode::Check;
use crate::rules::freshness::Freshness;
use crate::rules::storable::{credentials, storable, NotStorable};
use crate::rules::surrogate::SurrogateControl;
use crate::rules::targeted::ResponseControl;
use crate::rules::validation::conditional::{has_validators, make_conditional};
use crate::rules::validation::update::{select_for_update, update_headers};
use crate::rules::{headers, vary, RequestHead, ResponseHead};

/// What the fetch task needs of the request that started it.
#[derive(Clone)]
pub(super) struct Origin {
    pub(super) uri: Uri,
    pub(super) headers: HeaderMap,
    /// The client's address, for `X-Forwarded-For` (none for a background refresh).
    pub(super) client: Option<IpAddr>,
    /// The request's route (backend and settings).
    pub(super) route: usize,
    /// Where the backend's 1xx responses go: the client that leads the flight.
    pub(super) interim: Option<interim::Hints>,
}

/// The fetch task.
pub(super) async fn run(
    proxy: Arc<Proxy>,
    producer: Producer,
    key: Vec<u8>,
    origin: Origin,
    stale: Option<Object>,
) {
    let backend = proxy.backend(origin.route);
    // The bans added from now on are checked when the response is stored (and none of them
    // is completed before).
    let since = proxy.cache.bans().hold();
    let mut headers = backend.forward_headers(&origin.headers, origin.client, None);
    let stored: Vec<&HeaderMap> = stale.iter().map(|o| &o.headers).collect();
    let mut conditional = make_conditional(&mut headers, &stored);
    let policy = &proxy.route(origin.route).policy;
    let leader_vary = origin.headers.clone();
    let (mut parts, body, request_time, response_time) = loop {
        let request = backend_request(backend, &origin, headers.clone());
        proxy.stats.backend_requests.fetch_add(1, Ordering::Relaxed);
        let request_time = SystemTime::now();
        let response = match backend.send(request, Pick::Shared).await {
            Ok(response) => response,
            Err(error) => {
                producer.fail(error);
                return;
            }
        };
        let response_time = SystemTime::now();
        let waited = response_time
            .duration_since(request_time)
            .unwrap_or_default();
        proxy.stats.first_byte.record(waited);
        let (mut parts, body) = response.into_parts();
        if let Some(device) = &proxy.config.keys.device {
            device.from_backend(&mut parts.headers);
        }
        parts.headers.remove(compress::MARKER);
        parts.headers.remove(crate::esi::MARKER);
        if parts.status != StatusCode::NOT_MODIFIED {
            break (parts, body, request_time, response_time);
        }
        // The 304 updates the response kura validated (its only one: `stale`) when its
        // validators select it (RFC 9111 §4.3.4), or when it has none: it answers a request
        // that named only that response's validators.
        let updated = stale.as_ref().filter(|o| {
            conditional
                && (!has_validators(&parts.headers)
                    || !select_for_update(&parts.headers, &[&o.headers]).is_empty())
        });
        if let Some(object) = updated {
            let validation = Validation {
                since: &since,
                key: &key,
                origin: &origin,
                request_time,
                response_time,
            };
            let updated = revalidated(&proxy, object, &parts.headers, &validation).await;
            producer.head(Head {
                status: updated.status,
                headers: HeaderMap::new(),
                leader_vary,
                outcome: Outcome::Revalidated(Box::new(updated)),
            });
            producer.finish(true);
            return;
        }
        if !conditional {
            // A 304 to a request that asked for none: it must not reach a client that sent a
            // plain GET (issue 37, finding 4).
            tracing::debug!("backend answered 304 to an unconditional request");
            producer.fail(FetchError::Garbage);
            return;
        }
        // A 304 whose validators are not the stored response's: fetch the whole response
        // instead (RFC 9111 §4.3.3).
        make_conditional(&mut headers, &[]);
        conditional = false;
    };
    let mut store = storage_plan(
        &proxy,
        &origin,
        &key,
        stale.as_ref(),
        &parts,
        (request_time, response_time),
    );
    let mut encoder = compressor(&proxy, parts.status, store.as_mut());
    let (send_headers, outcome) = match &store {
        Some((kept, freshness)) => {
            let mut sent = kept.clone();
            let age = freshness.current_age(SystemTime::now());
            sent.insert(AGE, HeaderValue::from(age.as_secs()));
            (sent, Outcome::Shared)
        }
        None => {
            strip_hop_by_hop(&mut parts.headers);
            (parts.headers.clone(), Outcome::Private)
        }
    };
    producer.head(Head {
        status: parts.status,
        headers: send_headers,
        leader_vary,
        outcome,
    });
    let mut check = coding_check(&proxy, store.as_ref(), encoder.is_some());
    let lease = Lease::of(&parts.extensions);
    let (complete, last) =
        stream_body(backend, lease, &producer, body, &mut encoder, &mut check).await;
    if refused(&proxy, &check) {
        store = None;
    }
    // Stored before the last chunk is pushed and the flight ends, so a reader that has the
    // last byte finds it stored.
    let whole = producer.whole(complete, last.as_ref());
    if let (Some(chunks), Some((mut kept, freshness))) = (whole, store) {
        complete_fields(&mut kept, &chunks, encoder.as_ref());
        if parts.status == StatusCode::OK {
            // An ESI page is stored parsed: a hit does not read it again.
            if let Some(marker) = crate::esi::marker(&proxy, origin.route, &kept, &chunks) {
                kept.insert(crate::esi::MARKER, marker);
            }
        }
        proxy.cache.bring_back_for_insert(&key, &kept).await;
        if proxy.cache.insert_since(
            &since,
            policy,
            proxy.config.keep,
            &key,
            &origin.headers,
            parts.status,
            &freshness,
            &kept,
            &chunks,
        ) {
            proxy.stats.stored.fetch_add(1, Ordering::Relaxed);
        }
    }
    if let Some(last) = last {
        producer.push(last).await;
    }
    producer.finish(complete);
}

/// Compressed on the way in: the flight and the store hold the compressed bytes, the stored
/// fields are marked ([`compress::Compression::mark`]).
fn compressor(
    proxy: &Proxy,
    status: StatusCode,
    store: Option<&mut (HeaderMap, Freshness)>,
) -> Option<Encoder> {
    let (kept, _) = store?;
    let compression = &proxy.config.compression;
    if !compression.compresses(status, kept) {
        return None;
    }
    compression.mark(kept);
    Some(compression.encoder())
}

/// Whether the check refuses the body for the store (logged and counted).
fn refused(proxy: &Proxy, check: &Check) -> bool {
    let Some(why) = check.failed() else {
        return false;
    };
    tracing::warn!("backend body not stored: {why}");
    proxy.stats.encoding_refused.fetch_add(1, Ordering::Relaxed);
    true
}

/// The check of a body the backend coded, as it passes (`compress::decode::Check`): it is not
/// stored if it is not what its `Content-Encoding` says or would decode past `max_decoded`.
fn coding_check(proxy: &Proxy, store: Option<&(HeaderMap, Freshness)>, ours: bool) -> Check {
    let compression = &proxy.config.compression;
    let coded = match store {
        Some((kept, _)) if compression.enabled && !ours => compress::coding_of(kept),
        _ => None,
    };
    Check::new(coded, compression.max_decoded)
}

/// What the fetched response becomes in the cache: the headers to store and their
/// freshness, or `None` (not storable, too large, not worth storing, or an error answer that
/// must not replace the stale object); notes a hit-for-miss when nothing is stored and no
/// stale object waits for a refresh.
fn storage_plan(
    proxy: &Proxy,
    origin: &Origin,
    key: &[u8],
    stale: Option<&Object>,
    parts: &http::response::Parts,
    (request_time, response_time): (SystemTime, SystemTime),
) -> Option<(HeaderMap, Freshness)> {
    let policy = &proxy.route(origin.route).policy;
    let request = RequestHead {
        method: &Method::GET,
        uri: &origin.uri,
        headers: &origin.headers,
    };
    let control = ResponseControl::of(policy, &parts.headers);
    if policy.surrogate_control
        && SurrogateControl::from_headers(&parts.headers).is_some_and(|s| s.esi)
    {
        // kura does not process ESI: counted, so that a site moving from a CDN sees it.
        proxy.stats.esi_requested.fetch_add(1, Ordering::Relaxed);
    }
    let too_large = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|len| len > proxy.config.max_object);
    let plan = storable(policy, request, ResponseHead::from(parts), &control).and_then(|plan| {
        credentials(policy, request, ResponseHead::from(parts), &control).map(|()| plan)
    });
    // An error answer never replaces a stored object: that object is what stale-if-error
    // serves while the backend fails.
    let keeps_stale = stale.is_some() && is_server_error(parts.status);
    let mut store = None;
    if let (Ok(plan), false, false) = (&plan, too_large, keeps_stale) {
        let mut kept = headers::for_storage(&parts.headers, &plan.strip, response_time);
        strip_hop_by_hop(&mut kept);
        // Fields that vary the response without being in the key key it when the request
        // carried any (`key_headers`).
        let keyed = &proxy.route(origin.route).unkeyed.key;
        if keyed.iter().any(|name| origin.headers.contains_key(name)) {
            for name in keyed {
                vary::add(&mut kept, name);
            }
        }
        // Fields, cookie values and the device class that key the route's responses, always
        // (`key_headers_always`, `key_cookies`, `key_device_class`).
        let route = proxy.route(origin.route);
        for name in &route.unkeyed.always {
            vary::add(&mut kept, name);
        }
        for (_, field) in &route.key_cookies {
            vary::add(&mut kept, field);
        }
        if let (true, Some(device)) = (route.unkeyed.device_class, &proxy.config.keys.device) {
            vary::add(&mut kept, &device.header);
        }
        let head = ResponseHead {
            status: parts.status,
            headers: &kept,
        };
        let freshness = Freshness::new(policy, head, &control, request_time, response_time);
        if freshness.worth_storing(has_validators(&kept)) {
            store = Some((kept, freshness));
        }
    }
    let hit_for_miss = store.is_none()
        && stale.is_none()
        && !is_server_error(parts.status)
        && plan != Err(NotStorable::RequestNoStore);
    if hit_for_miss {
        proxy.cache.hit_for_miss(key, proxy.config.hit_for_miss);
    }
    store
}

/// Streams the backend's body into the flight (through `encoder` when it compresses); true
/// when it arrived whole. The chunk that completes a body of known length (with the
/// encoder's last bytes when it compresses; those alone for a body of unknown length) is
/// returned instead of pushed: a client may have the whole response with it, so the caller
/// stores the object first. Other chunks go out as they come (a chunked body's end is the
/// flight's end).
async fn stream_body(
    backend: &Backend,
    lease: Option<&Lease>,
    producer: &Producer,
    mut body: hyper::body::Incoming,
    encoder: &mut Option<Encoder>,
    check: &mut Check,
) -> (bool, Option<Bytes>) {
    // The server's own: every fetched response holds its server's lease.
    let timeout = lease.map_or(backend.between_bytes_timeout(), |l| {
        l.server().timeouts.between_bytes
    });
    let mut held: Option<Bytes> = None;
    loop {
        match tokio::time::timeout(timeout, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(mut data) = frame.into_data() {
                    check.feed(&data);
                    if let Some(encoder) = encoder.as_mut() {
                        data = encoder.push(&data);
                    }
                    if !data.is_empty() {
                        // (Nothing follows a held chunk; were anything to, it goes first.)
                        if let Some(before) = held.take() {
                            producer.push(before).await;
                        }
                        if hyper::body::Body::is_end_stream(&body) {
                            held = Some(data);
                        } else {
                            producer.push(data).await;
                        }
                    }
                }
                if !producer.wanted() {
                    return (false, held);
                }
            }
            Ok(None) => {
                check.end();
                // Compressing, the encoder's last bytes go with the last chunk.
                if let Some(encoder) = encoder.as_mut() {
                    let end = encoder.finish();
                    held = match held.take() {
                        Some(last) => Some([last, end].concat().into()),
                        None => Some(end).filter(|e| !e.is_empty()),
                    };
                }
                return (true, held);
            }
            Ok(Some(Err(error))) => {
                tracing::debug!("backend body: {error}");
                if let Some(lease) = lease {
                    lease.body_failed();
                }
                return (false, held);
            }
            Err(_) => {
                tracing::debug!("backend body: timed out");
                if let Some(lease) = lease {
                    lease.body_failed();
                }
                return (false, held);
            }
        }
    }
}

/// A validation's context: what the stored object is checked against and where it goes.
struct Validation<'a> {
    since: &'a Hold,
    key: &'a [u8],
    origin: &'a Origin,
    request_time: SystemTime,
    response_time: SystemTime,
}

/// The stored fields of a whole body `chunks`: its `Content-Length`, and [`compress::MARKER`]
/// with the identity length when the proxy compressed it.
fn complete_fields(kept: &mut HeaderMap, chunks: &[Bytes], encoder: Option<&Encoder>) {
    let length: usize = chunks.iter().map(Bytes::len).sum();
    kept.insert(CONTENT_LENGTH, HeaderValue::from(length));
    if let Some(encoder) = encoder {
        kept.insert(compress::MARKER, HeaderValue::from(encoder.input));
    }
}

/// The stored `object` updated by a 304 with `fields` (RFC 9111 §4.3.4), stored again when it
/// may still be (a page of variants on disk read back off the worker first).
async fn revalidated(
    proxy: &Proxy,
    object: &Object,
    fields: &HeaderMap,
    at: &Validation<'_>,
) -> Object {
    let policy = &proxy.route(at.origin.route).policy;
    let mut merged = object.headers.clone();
    update_headers(policy, &mut merged, fields, at.response_time);
    let head = ResponseHead {
        status: object.status,
        headers: &merged,
    };
    let control = ResponseControl::of(policy, &merged);
    let freshness = Freshness::new(policy, head, &control, at.request_time, at.response_time);
    let request = RequestHead {
        method: &Method::GET,
        uri: &at.origin.uri,
        headers: &at.origin.headers,
    };
    let allowed = storable(policy, request, head, &control)
        .and_then(|_| credentials(policy, request, head, &control));
    if allowed.is_ok() {
        proxy.cache.bring_back_for_insert(at.key, &merged).await;
    }
    if allowed.is_ok()
        && proxy.cache.insert_since(
            at.since,
            policy,
            proxy.config.keep,
            at.key,
            &at.origin.headers,
            object.status,
            &freshness,
            &merged,
            &[&object.body],
        )
    {
        proxy.stats.stored.fetch_add(1, Ordering::Relaxed);
    }
    proxy.stats.revalidated.fetch_add(1, Ordering::Relaxed);
    Object {
        status: object.status,
        freshness,
        secondary: object.secondary.clone(),
        headers: merged,
        body: object.body.clone(),
    }
}

/// The GET for `origin` to `backend` with `headers`; its 1xx responses go to `origin`'s client.
fn backend_request(backend: &Backend, origin: &Origin, headers: HeaderMap) -> Request<Body> {
    let mut request = Request::new(Body::Empty);
    *request.uri_mut() = backend.uri(origin.uri.path_and_query());
    *request.headers_mut() = headers;
    if let Some(hints) = origin.interim.clone() {
        interim::forward_to(&mut request, hints);
    }
    request
}
