//! What the wire carries, checked with fake servers that parse what they
//! are sent: a multi-operation is one quiet batch (one `mn`) per server,
//! sent to all servers at once (each server here answers only once every
//! server has its batch, so a client that asked them one after another
//! would time out); concurrent requests share one connection (the server
//! answers only once all of them have arrived); and replies out of order
//! fail every request instead of reaching the wrong one.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use futures_util::future::join_all;
use kura_client::{Client, Error};

/// A server that reads meta commands (skipping `ms` data blocks) and calls
/// `on_line` with each command line; whatever it returns is sent back.
fn fake(on_line: impl Fn(&str) -> Option<Vec<u8>> + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let on_line = Arc::new(on_line);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { return };
            let on_line = on_line.clone();
            std::thread::spawn(move || {
                let mut w = c.try_clone().expect("clone");
                let mut r = BufReader::new(c);
                let mut line = String::new();
                while r.read_line(&mut line).is_ok_and(|n| n > 0) {
                    let cmd = line.trim_end().to_string();
                    line.clear();
                    if let Some(len) = cmd
                        .strip_prefix("ms ")
                        .and_then(|rest| rest.split(' ').nth(1))
                    {
                        let mut data = vec![0u8; len.parse::<usize>().expect("length") + 2];
                        r.read_exact(&mut data).expect("data block");
                    }
                    if let Some(reply) = on_line(&cmd) {
                        if w.write_all(&reply).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

fn opaque(cmd: &str) -> &str {
    cmd.split(' ')
        .find_map(|t| t.strip_prefix('O'))
        .expect("an opaque token")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_batch_per_server_all_servers_at_once() {
    let barrier = Arc::new(Barrier::new(2));
    let batches: Arc<Mutex<Vec<(usize, usize)>>> = Arc::default();
    let server = |id: usize| {
        let (barrier, batches) = (barrier.clone(), batches.clone());
        let count = Mutex::new(0usize);
        fake(move |cmd| {
            let mut n = count.lock().unwrap();
            if cmd == "mn" {
                batches.lock().unwrap().push((id, *n));
                *n = 0;
                barrier.wait();
                Some(b"MN\r\n".to_vec())
            } else {
                assert!(cmd.starts_with("ms ") && cmd.ends_with(" q"), "{cmd}");
                *n += 1;
                None
            }
        })
    };
    let (a, b) = (server(0), server(1));
    let c = Client::builder([a.to_string(), b.to_string()])
        .timeouts(Duration::from_secs(2), Duration::from_secs(5))
        .build()
        .unwrap();
    let items: Vec<(String, String)> = (0..1000)
        .map(|i| (format!("k{i}"), format!("v{i}")))
        .collect();
    let r = c.set_multi(&items, 0).await;
    assert!(
        r.iter().all(|r| matches!(r, Ok(true))),
        "{:?}",
        r.iter().find(|r| r.is_err())
    );
    let mut got = batches.lock().unwrap().clone();
    got.sort();
    let on_a = items
        .iter()
        .filter(|(k, _)| c.server_for(k) == a.to_string())
        .count();
    assert_eq!(
        got,
        [(0, on_a), (1, 1000 - on_a)],
        "one batch each, every key in it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_one_connection() {
    const N: usize = 50;
    let pending: Arc<Mutex<Vec<String>>> = Arc::default();
    let addr = {
        let pending = pending.clone();
        fake(move |cmd| {
            let mut p = pending.lock().unwrap();
            p.push(opaque(cmd).to_string());
            // answer only when all N requests are here, in order
            (p.len() == N).then(|| {
                p.drain(..)
                    .flat_map(|o| format!("EN O{o}\r\n").into_bytes())
                    .collect()
            })
        })
    };
    let c = Client::builder([addr.to_string()])
        .configure(|c| c.connections_per_server = 1)
        .timeouts(Duration::from_secs(2), Duration::from_secs(5))
        .build()
        .unwrap();
    let keys: Vec<String> = (0..N).map(|i| format!("key{i}")).collect();
    let r = join_all(keys.iter().map(|k| c.get(k))).await;
    assert!(r.iter().all(|r| matches!(r, Ok(None))), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_out_of_order_reach_no_request() {
    const N: usize = 20;
    let pending: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let addr = {
        let pending = pending.clone();
        fake(move |cmd| {
            let key = cmd.split(' ').nth(1).expect("key").to_string();
            let mut p = pending.lock().unwrap();
            p.push((opaque(cmd).to_string(), key));
            // each key's own value, with its own opaque, but in reverse order
            (p.len() == N).then(|| {
                p.drain(..)
                    .rev()
                    .flat_map(|(o, k)| format!("VA {} O{o}\r\n{k}\r\n", k.len()).into_bytes())
                    .collect()
            })
        })
    };
    let c = Client::builder([addr.to_string()])
        .configure(|c| c.connections_per_server = 1)
        .timeouts(Duration::from_secs(2), Duration::from_secs(5))
        .build()
        .unwrap();
    let keys: Vec<String> = (0..N).map(|i| format!("key{i}")).collect();
    let r = join_all(keys.iter().map(|k| c.get(k))).await;
    for (k, r) in keys.iter().zip(&r) {
        match r {
            Ok(Some(v)) => assert_eq!(
                &v.data[..],
                k.as_bytes(),
                "a reply reached the wrong request"
            ),
            Ok(None) => panic!("{k}: a miss nobody sent"),
            Err(e) => assert!(
                matches!(e, Error::Protocol { .. } | Error::ConnectionClosed(_)),
                "{e}"
            ),
        }
    }
    assert!(
        r.iter().any(|r| r.is_err()),
        "the first reply out of order fails the connection"
    );
}
