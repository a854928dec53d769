//! Loop detection (`server/loops.rs`): a kura whose backend is its own listener, two kuras
//! that are each other's backend, and an absolute-form target that names kura itself each
//! get one `508` instead of a request forwarded again and again; a chain of two kuras is not
//! a loop; a client that forges kura's name in `Via`, or sends more entries than
//! `max_via_hops`, makes only its own request fail.

mod common;

use std::net::SocketAddr;

use common::wire::{Conn, GUARD};
use common::*;
use kura_http::{Config, Server};

/// A kura listening on `port` in front of `backend`.
async fn kura_on(port: u16, backend: SocketAddr, extra: &str) -> Server {
    let config = Config::from_toml(&format!(
        "backend = \"http://{backend}\"\nlisten = [\"127.0.0.1:{port}\"]\nadmin_listen = \"127.0.0.1:0\"\nthreads = 2\nmemory_mb = 16\n{extra}"
    ))
    .unwrap();
    Server::start(config).await.unwrap()
}

fn local(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// `GET path` with header pairs, bounded by the guard time: a loop that never ends fails the
/// test instead of hanging it.
async fn get_bounded(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Got {
    tokio::time::timeout(GUARD, send(&client(), addr, "GET", path, headers))
        .await
        .expect("an answer within the guard time, not a request going round")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kura_whose_backend_is_itself_answers_508_at_once() {
    let port = kura_testkit::free_port();
    let server = kura_on(port, local(port), "").await;
    let addr = server.http[0];
    let got = get_bounded(addr, "/x", &[]).await;
    assert_eq!(got.status, 508);
    let text = String::from_utf8_lossy(&got.body).into_owned();
    assert!(
        text.contains("Loop Detected") && text.contains("Via"),
        "{text}"
    );
    assert_eq!(got.header("cache-control"), "no-store");
    // One request went out (to itself) and came back: refused there, not forwarded again.
    let counters = stats(&server).await;
    assert_eq!(counters["backend_requests"], 1);
    assert_eq!(counters["loops"], 1);

    // A pass (POST), an absolute-form target naming kura itself, and an upgrade: the same.
    let post = tokio::time::timeout(GUARD, send(&client(), addr, "POST", "/form", &[]))
        .await
        .unwrap();
    assert_eq!(post.status, 508);
    let mut conn = Conn::open(addr).await;
    let absolute = format!("GET http://127.0.0.1:{port}/abs HTTP/1.1\r\nHost: elsewhere\r\n\r\n");
    conn.send(absolute.as_bytes()).await;
    assert_eq!(conn.response(false).await.unwrap().status, 508);
    let mut conn = Conn::open(addr).await;
    conn.send(b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").await;
    let answer = conn.response(false).await.unwrap();
    assert_eq!(answer.status, 508, "{}", answer.head);
    assert!(conn.closed().await);
    let counters = stats(&server).await;
    assert_eq!(counters["backend_requests"], 4);
    assert_eq!(counters["loops"], 4);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_kuras_that_are_each_others_backend_answer_508() {
    let (a_port, b_port) = (kura_testkit::free_port(), kura_testkit::free_port());
    let a = kura_on(a_port, local(b_port), "").await;
    let b = kura_on(b_port, local(a_port), "").await;
    let got = get_bounded(a.http[0], "/x", &[]).await;
    assert_eq!(got.status, 508);
    // a to b, b back to a, refused there.
    assert_eq!(stats(&a).await["backend_requests"], 1);
    assert_eq!(stats(&b).await["backend_requests"], 1);
    assert_eq!(stats(&a).await["loops"], 1);
    assert_eq!(stats(&b).await["loops"], 0);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_of_two_kuras_is_not_a_loop() {
    let origin = Backend::start(std::time::Duration::ZERO, |_| {
        reply(200, &[("cache-control", "max-age=60")], "page")
    })
    .await;
    // Both with the default (random) name.
    let shield = proxy(origin.addr, "").await;
    let edge = proxy(shield.http[0], "").await;
    let got = get_bounded(edge.http[0], "/x", &[]).await;
    assert_eq!(got.status, 200);
    assert_eq!(&got.body[..], b"page");
    let via = origin.last().headers["via"].to_str().unwrap().to_owned();
    let names: Vec<&str> = via
        .split(", ")
        .map(|e| e.strip_prefix("1.1 kura-").expect("a kura entry"))
        .collect();
    assert_eq!(names.len(), 2, "{via}");
    assert_ne!(names[0], names[1], "{via}");
    edge.shutdown().await;
    shield.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_via_fails_only_its_own_request() {
    let origin = Backend::start(std::time::Duration::ZERO, |_| {
        reply(200, &[("cache-control", "max-age=60")], "page")
    })
    .await;
    let server = proxy(origin.addr, "via_name = \"edge-1\"\nmax_via_hops = 4").await;
    let addr = server.http[0];
    // A client naming this kura: its own request fails, nothing reaches the backend.
    let forged = get_bounded(addr, "/x", &[("via", "1.1 cdn, 1.1 edge-1")]).await;
    assert_eq!(forged.status, 508);
    let many = "1.1 a, 1.1 b, 1.1 c, 1.1 d, 1.1 e";
    assert_eq!(get_bounded(addr, "/x", &[("via", many)]).await.status, 508);
    assert_eq!(origin.count(), 0);
    // Nothing was stored nor marked: the next client gets the page, and it is cached.
    let got = get_bounded(addr, "/x", &[("via", "1.1 cdn")]).await;
    assert_eq!((got.status.as_u16(), got.cache()), (200, "miss"));
    assert_eq!(origin.last().headers["via"], "1.1 cdn, 1.1 edge-1");
    assert_eq!(get_bounded(addr, "/x", &[]).await.cache(), "hit");
    // A forged Via on a hit is served: it goes nowhere.
    let hit = get_bounded(addr, "/x", &[("via", "1.1 edge-1")]).await;
    assert_eq!((hit.status.as_u16(), hit.cache()), (200, "hit"));
    assert_eq!(origin.count(), 1);
    assert_eq!(stats(&server).await["loops"], 2);
    server.shutdown().await;
}
