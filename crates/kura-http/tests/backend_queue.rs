//! A pool's queue (`wait_timeout`, `wait_limit`, Varnish's backend `wait_timeout` and
//! `wait_limit`): a request that finds every server at `max_connections` waits for one to have
//! room instead of getting 503 at once; at most `wait_limit` wait, each at most
//! `wait_timeout`. The backend holds each request until the test opens its gate, so nothing
//! here depends on timing.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::*;
use kura_http::{Config, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// A backend that answers each request once the gate gives it a permit; `arrived` counts the
/// requests it got.
struct Gated {
    addr: SocketAddr,
    gate: Arc<Semaphore>,
    arrived: Arc<AtomicUsize>,
}

async fn gated() -> Gated {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let arrived = Arc::new(AtomicUsize::new(0));
    let (g, a) = (gate.clone(), arrived.clone());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (gate, arrived) = (g.clone(), a.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        let mut chunk = [0u8; 1024];
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                    buf.drain(..end);
                    arrived.fetch_add(1, Ordering::SeqCst);
                    gate.acquire().await.unwrap().forget();
                    let answer =
                        "HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: 2\r\n\r\nok";
                    if stream.write_all(answer.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Gated {
        addr,
        gate,
        arrived,
    }
}

async fn queued_proxy(backend: SocketAddr, pool: &str) -> Server {
    let text = format!(
        "listen = [\"127.0.0.1:0\"]\nadmin_listen = \"127.0.0.1:0\"\nthreads = 2\nmemory_mb = 16\n\
         [backends.default]\nservers = [\"http://{backend}\"]\nmax_connections = 1\n{pool}\n"
    );
    Server::start(Config::from_toml(&text).unwrap())
        .await
        .unwrap()
}

fn waiting(server: &Server) -> usize {
    server.proxy().backends[0].waiting()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_queues_requests_until_a_server_has_room() {
    let backend = gated().await;
    let server = queued_proxy(backend.addr, "wait_timeout = 60\nwait_limit = 1").await;
    let addr = server.http[0];
    let first = tokio::spawn(async move { get(&client(), addr, "/1").await });
    eventually("the server has the first request", || {
        backend.arrived.load(Ordering::SeqCst) == 1
    })
    .await;
    let second = tokio::spawn(async move { get(&client(), addr, "/2").await });
    eventually("the second request waits", || waiting(&server) == 1).await;
    // The queue is full (wait_limit = 1): refused at once, while the others are held.
    let third = get(&client(), addr, "/3").await;
    assert_eq!(third.status, 503);
    assert_eq!(backend.arrived.load(Ordering::SeqCst), 1);
    // The first ends; the waiting one gets the server.
    backend.gate.add_permits(1);
    assert_eq!(first.await.unwrap().status, 200);
    eventually("the waiting request reaches the server", || {
        backend.arrived.load(Ordering::SeqCst) == 2
    })
    .await;
    assert_eq!(waiting(&server), 0);
    backend.gate.add_permits(1);
    let second = second.await.unwrap();
    assert_eq!(
        (second.status.as_u16(), &second.body[..]),
        (200, &b"ok"[..])
    );
    assert_eq!(
        stats(&server).await["backends"]["default"]["servers"][backend.addr.to_string()]
            ["connections"],
        0
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_waits_at_most_wait_timeout() {
    let backend = gated().await;
    let server = queued_proxy(backend.addr, "wait_timeout = 0.2").await;
    let addr = server.http[0];
    let first = tokio::spawn(async move { get(&client(), addr, "/1").await });
    eventually("the server has the first request", || {
        backend.arrived.load(Ordering::SeqCst) == 1
    })
    .await;
    // The server stays full (the gate is shut): the second gives up and gets 503.
    let second = get(&client(), addr, "/2").await;
    assert_eq!(second.status, 503);
    assert_eq!(waiting(&server), 0);
    assert_eq!(backend.arrived.load(Ordering::SeqCst), 1);
    backend.gate.add_permits(1);
    assert_eq!(first.await.unwrap().status, 200);
    server.shutdown().await;
}

#[test]
fn queue_settings_are_checked() {
    let pool = |extra: &str| {
        Config::from_toml(&format!(
            "[backends.default]\nservers = [\"http://127.0.0.1:1\"]\n{extra}\n"
        ))
    };
    assert!(pool("max_connections = 1\nwait_timeout = 1").is_ok());
    for (extra, want) in [
        ("wait_timeout = 1", "max_connections"),
        (
            "max_connections = 1\nwait_limit = 3",
            "wait_limit is for a pool with wait_timeout",
        ),
        ("max_connections = 1\nwait_timeout = -1", "wait_timeout"),
    ] {
        let error = pool(extra).unwrap_err().to_string();
        assert!(error.contains(want), "{extra}: {error}");
    }
}
