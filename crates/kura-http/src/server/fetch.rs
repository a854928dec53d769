//! Fetching through a flight, the request's side: join or lead the flight for the key, wait
//! for the head, serve from it, fall back on a stale copy when the backend fails. The fetch
//! task itself is in `fill.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use http::header::CONTENT_LENGTH;
use http::request::Parts;
use http::{HeaderMap, Method, Response, StatusCode};

use super::interim;
use super::proxy::{serve_stored, Peer, Proxy};
use super::{fill, respond};
use crate::body::Body;
use crate::cache::object::Object;
use crate::coalesce::{Head, Join, Outcome, Producer, ReadHead, Reader, ReaderBody};
use crate::compress::ClientCoding;
use crate::rules::cache_control::RequestDirectives;
use crate::rules::range::{self, RangeAnswer};
use crate::rules::stale::{decide, Backend as BackendState, Decision};
use crate::rules::validation::conditional::has_validators;
use crate::rules::vary::Vary;
use crate::rules::{RequestHead, ResponseHead};
use crate::stats::CacheOutcome;

/// Fetches the object for `parts` (key `key`; `stale`: the stored copy being revalidated or
/// replaced), joining a flight for the key when `coalesce`.
pub async fn fetch(
    proxy: &Arc<Proxy>,
    parts: &Parts,
    key: Vec<u8>,
    stale: Option<Object>,
    peer: &Peer,
    route: usize,
    coalesce: bool,
) -> (Response<Body>, CacheOutcome) {
    // Before it joins a flight: a request that came back would wait on its own fetch.
    if let Some(refused) = super::loops::refused(proxy, &parts.headers) {
        return refused;
    }
    let (flight, leader) = if coalesce {
        match proxy.flights.join(&key) {
            Join::Leader(flight) => (flight, true),
            Join::Waiter(flight) => (flight, false),
        }
    } else {
        (proxy.flights.solo(), true)
    };
    // Subscribe before the fetch can produce anything.
    let reader = flight.reader();
    // The backend's 1xx responses go to the client that leads the flight.
    let interim = peer.interim_for(parts).filter(|_| leader);
    let (informational, hints) = match interim {
        Some(_) => {
            let (sender, receiver) = interim::channel();
            (Some(sender), Some(receiver))
        }
        None => (None, None),
    };
    if leader {
        let origin = fill::Origin {
            uri: parts.uri.clone(),
            headers: parts.headers.clone(),
            client: peer.forwarded,
            route,
            interim: informational,
        };
        let producer = Producer::new(proxy.flights.clone(), flight);
        tokio::spawn(fill::run(
            proxy.clone(),
            producer,
            key.clone(),
            origin,
            stale.clone(),
        ));
    }
    let Some(reader) = reader else {
        // The flight no longer holds the body's start: fetch alone.
        return Box::pin(fetch(proxy, parts, key, stale, peer, route, false)).await;
    };
    let now = || SystemTime::now();
    let head = match interim::while_forwarding(reader.head(), hints, interim.as_deref()).await {
        ReadHead::Failed(error) => {
            if let Some(served) = stale_on_error(proxy, parts, &stale, peer, route).await {
                return served;
            }
            return (respond::synth(error.status(), false), CacheOutcome::Synth);
        }
        ReadHead::Ready(head) => head,
    };
    if is_server_error(head.status) {
        if let Some(served) = stale_on_error(proxy, parts, &stale, peer, route).await {
            return served;
        }
    }
    let outcome = if leader {
        CacheOutcome::Miss
    } else {
        CacheOutcome::Coalesced
    };
    match &head.outcome {
        Outcome::Revalidated(object) => {
            serve_stored(
                proxy,
                parts,
                (**object).clone(),
                peer,
                route,
                outcome,
                now(),
            )
            .await
        }
        Outcome::Private if !leader => {
            drop(reader);
            Box::pin(fetch(proxy, parts, key, stale, peer, route, false)).await
        }
        Outcome::Private => {
            // The backend was asked for gzip on this client's behalf.
            let mut headers = head.headers.clone();
            let decode = ClientCoding::adapt(ClientCoding::of(parts), &mut headers);
            let body = if parts.method == Method::HEAD {
                Body::Empty
            } else {
                Body::Flight(ReaderBody(reader)).decoded(decode)
            };
            let mut response = Response::new(body);
            *response.status_mut() = head.status;
            *response.headers_mut() = headers;
            respond::primed(response, CacheOutcome::Pass).await
        }
        Outcome::Shared => {
            if !leader && !vary_matches(&head.headers, &parts.headers, &head_secondary(&head)) {
                drop(reader);
                return Box::pin(fetch(proxy, parts, key, stale, peer, route, false)).await;
            }
            let request = RequestHead::from(parts);
            // The fields of the representation this client gets (see `respond::object`).
            let mut headers = head.headers.clone();
            let decode = ClientCoding::adapt(ClientCoding::of(parts), &mut headers);
            let stored = ResponseHead {
                status: head.status,
                headers: &headers,
            };
            use crate::rules::validation::client::{answer, not_modified_headers, ClientAnswer};
            match answer(request, stored, now()) {
                ClientAnswer::NotModified => {
                    let mut response = Response::new(Body::Empty);
                    *response.status_mut() = StatusCode::NOT_MODIFIED;
                    *response.headers_mut() = not_modified_headers(&headers);
                    (response, outcome)
                }
                ClientAnswer::Full | ClientAnswer::Forward => {
                    if !crate::rules::serve::sends_body(&parts.method, head.status) {
                        let mut response = Response::new(Body::Empty);
                        *response.status_mut() = head.status;
                        *response.headers_mut() = headers;
                        return (response, outcome);
                    }
                    if decode.is_some() {
                        let body = Body::Flight(ReaderBody(reader)).decoded(decode);
                        let mut response = Response::new(body);
                        *response.status_mut() = head.status;
                        *response.headers_mut() = headers;
                        return respond::primed(response, outcome).await;
                    }
                    (ranged_flight(parts, head.status, headers, reader), outcome)
                }
            }
        }
    }
}

/// The flight's body as the response to `parts`: a range of it when the request asks for one
/// and the backend gave the length (the fetch itself was for the whole object, so that it can
/// be stored; bytes before the range are read and dropped), else the whole.
fn ranged_flight(
    parts: &Parts,
    status: StatusCode,
    headers: HeaderMap,
    reader: Reader,
) -> Response<Body> {
    let length = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let answer = match length {
        Some(length) => range::answer(&parts.method, &parts.headers, status, &headers, length),
        None => RangeAnswer::Full,
    };
    match (answer, length) {
        (RangeAnswer::Partial { start, end }, Some(length)) => {
            let body = Body::FlightRange {
                reader: ReaderBody(reader),
                skip: start,
                left: end - start + 1,
            };
            respond::partial(headers, start, end, length, body)
        }
        (RangeAnswer::Unsatisfiable, Some(length)) => respond::unsatisfiable(length),
        _ => {
            let mut response = Response::new(Body::Flight(ReaderBody(reader)));
            *response.status_mut() = status;
            *response.headers_mut() = headers;
            response
        }
    }
}

/// The secondary key the flight's response was stored under is carried in its head as the
/// fields `Vary` names; a waiter compares its own request's values with the leader's.
fn head_secondary(head: &Head) -> HeaderMap {
    head.leader_vary.clone()
}

fn vary_matches(response: &HeaderMap, request: &HeaderMap, leader: &HeaderMap) -> bool {
    let vary = Vary::from_headers(response);
    match (vary.secondary_key(request), vary.secondary_key(leader)) {
        (Some(mine), Some(theirs)) => mine == theirs,
        _ => false,
    }
}

pub(super) fn is_server_error(status: StatusCode) -> bool {
    matches!(status.as_u16(), 500 | 502 | 503 | 504)
}

/// Serves the stale copy when the backend failed and the rules allow it.
async fn stale_on_error(
    proxy: &Arc<Proxy>,
    parts: &Parts,
    stale: &Option<Object>,
    peer: &Peer,
    route: usize,
) -> Option<(Response<Body>, CacheOutcome)> {
    let object = stale.as_ref()?;
    let now = SystemTime::now();
    let directives = RequestDirectives::from_headers(&parts.headers);
    let decision = decide(
        &proxy.route(route).policy,
        &object.freshness,
        has_validators(&object.headers),
        &directives,
        BackendState::Failed,
        now,
    );
    match decision {
        Decision::StaleOnError | Decision::Fresh => {
            let stale = CacheOutcome::Stale;
            Some(serve_stored(proxy, parts, object.clone(), peer, route, stale, now).await)
        }
        Decision::GatewayTimeout => Some((
            respond::synth(StatusCode::GATEWAY_TIMEOUT, false),
            CacheOutcome::Synth,
        )),
        _ => None,
    }
}

/// Starts a background refresh of `object` unless a fetch for the key is under way.
pub fn refresh(proxy: &Arc<Proxy>, parts: &Parts, key: &[u8], object: &Object, route: usize) {
    if proxy.flights.busy(key) {
        return;
    }
    if let Join::Leader(flight) = proxy.flights.join(key) {
        proxy
            .stats
            .background_refreshes
            .fetch_add(1, Ordering::Relaxed);
        let origin = fill::Origin {
            uri: parts.uri.clone(),
            headers: parts.headers.clone(),
            client: None,
            route,
            interim: None,
        };
        let producer = Producer::new(proxy.flights.clone(), flight);
        tokio::spawn(fill::run(
            proxy.clone(),
            producer,
            key.to_vec(),
            origin,
            Some(object.clone()),
        ));
    }
}
