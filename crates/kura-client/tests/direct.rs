//! The direct path (docs/client.md): a request on an idle connection is
//! written and read by its caller. Checked with fake servers: requests
//! other tasks queue while a direct request is in flight share its
//! connection and each gets its own reply; a wrong reply to it fails
//! those queued behind it too; its timeout is bounded and the next request
//! gets a new connection; an idle connection the server closed is
//! replaced instead of failing the next request.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use kura_client::{Client, Error};

/// What the fake server does with a command line.
enum Act {
    Reply(Vec<u8>),
    /// Reply, then close the connection.
    Last(Vec<u8>),
    Nothing,
}

/// A server that reads meta command lines and gives each to `on_line`
/// with the number of its connection (from 0); returns its address and
/// the count of connections it accepted.
fn fake(
    on_line: impl Fn(usize, &str) -> Act + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let on_line = Arc::new(on_line);
    let conns = Arc::new(AtomicUsize::new(0));
    let counted = conns.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { return };
            let n = counted.fetch_add(1, Ordering::SeqCst);
            let on_line = on_line.clone();
            std::thread::spawn(move || {
                let mut w = c.try_clone().expect("clone");
                let mut r = BufReader::new(c);
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|k| k > 0) {
                    let cmd = line.trim_end().to_string();
                    line.clear();
                    match on_line(n, &cmd) {
                        Act::Reply(b) if w.write_all(&b).is_ok() => {}
                        Act::Nothing => {}
                        Act::Last(b) => {
                            let _ = w.write_all(&b);
                            return;
                        }
                        _ => return,
                    }
                }
            });
        }
    });
    (addr, conns)
}

fn opaque(cmd: &str) -> String {
    cmd.split(' ')
        .find_map(|t| t.strip_prefix('O'))
        .expect("an opaque token")
        .to_string()
}

fn key(cmd: &str) -> String {
    cmd.split(' ').nth(1).expect("key").to_string()
}

/// The key as its own value, with the request's opaque.
fn value(o: &str, k: &str) -> Vec<u8> {
    format!("VA {} O{o}\r\n{k}\r\n", k.len()).into_bytes()
}

fn client(addr: SocketAddr, request_timeout: Duration) -> Client {
    Client::builder([addr.to_string()])
        .configure(|c| c.connections_per_server = 1)
        .timeouts(Duration::from_secs(2), request_timeout)
        .build()
        .unwrap()
}

/// Holds commands until `n` arrived, then answers them in order with
/// `answer` (given the index of the command); returns its address, the
/// connections it accepted and the commands it has seen.
fn answer_when(
    n: usize,
    answer: impl Fn(usize, &str, &str) -> Vec<u8> + Send + Sync + 'static,
) -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let held: Mutex<Vec<String>> = Mutex::default();
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    let (addr, conns) = fake(move |_, cmd| {
        let mut h = held.lock().unwrap();
        h.push(cmd.to_string());
        counted.fetch_add(1, Ordering::SeqCst);
        if h.len() < n {
            return Act::Nothing;
        }
        let all = h.drain(..).enumerate();
        Act::Reply(
            all.flat_map(|(i, c)| answer(i, &opaque(&c), &key(&c)))
                .collect(),
        )
    });
    (addr, conns, seen)
}

/// One request, alone on its connection (the direct path), then, once the
/// server has it (`seen`), `n - 1` concurrent ones while it waits for its
/// reply.
async fn one_then_many(
    c: &Client,
    n: usize,
    seen: &AtomicUsize,
) -> Vec<(String, kura_client::Result<Option<String>>)> {
    let get = |k: String| async move {
        let r = c.get(&k).await;
        (
            k,
            r.map(|v| v.map(|v| String::from_utf8_lossy(&v.data).into_owned())),
        )
    };
    let first = get("first".to_string());
    let rest = async {
        // the first is written before these are queued
        while seen.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        join_all((1..n).map(|i| get(format!("key{i}")))).await
    };
    let (first, mut rest) =
        tokio::time::timeout(Duration::from_secs(60), async { tokio::join!(first, rest) })
            .await
            .expect("bounded");
    rest.insert(0, first);
    rest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_queued_behind_a_direct_one_share_its_connection() {
    const N: usize = 10;
    let (addr, conns, seen) = answer_when(N, |_, o, k| value(o, k));
    let c = client(addr, Duration::from_secs(5));
    for (k, r) in one_then_many(&c, N, &seen).await {
        assert_eq!(r.unwrap().as_deref(), Some(k.as_str()), "{k}");
    }
    assert_eq!(conns.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_reply_to_a_direct_request_fails_those_queued_behind_it() {
    const N: usize = 10;
    let (addr, _, seen) = answer_when(N, |i, o, k| {
        // the direct request's reply carries another opaque
        let o = if i == 0 { "4000000000" } else { o };
        value(o, k)
    });
    let c = client(addr, Duration::from_secs(5));
    let r = one_then_many(&c, N, &seen).await;
    assert!(
        matches!(r[0].1, Err(Error::Protocol { .. })),
        "{:?}",
        r[0].1
    );
    for (k, r) in &r[1..] {
        assert!(
            matches!(r, Err(Error::Protocol { .. } | Error::ConnectionClosed(_))),
            "{k}: {r:?}"
        );
    }
}

#[tokio::test]
async fn a_direct_request_without_a_reply_times_out_and_the_next_reconnects() {
    // the first connection never answers; later ones do
    let (addr, conns) = fake(|n, cmd| {
        if n == 0 {
            Act::Nothing
        } else {
            Act::Reply(value(&opaque(cmd), &key(cmd)))
        }
    });
    let c = client(addr, Duration::from_millis(300));
    let r = tokio::time::timeout(Duration::from_secs(60), c.get("a"))
        .await
        .expect("bounded by the request timeout");
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    let r = c.get("b").await.unwrap();
    assert_eq!(r.map(|v| v.data.to_vec()), Some(b"b".to_vec()));
    assert_eq!(conns.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_idle_connection_the_server_closed_is_replaced() {
    // each connection answers one request, then the server closes it
    let (addr, conns) = fake(|_, cmd| Act::Last(value(&opaque(cmd), &key(cmd))));
    let c = client(addr, Duration::from_secs(5));
    for k in ["a", "b", "c"] {
        let r = c.get(k).await.unwrap();
        assert_eq!(r.map(|v| v.data.to_vec()), Some(k.as_bytes().to_vec()));
        // the server's close reaches the client while the connection is idle
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(conns.load(Ordering::SeqCst), 3);
}
