//! Failures: a server that never answers (requests bounded by the
//! timeout), servers that die in the middle of a batch (a fake that hangs
//! up after part of it, and a real `kura server` killed with SIGKILL),
//! replies that belong to no request, servers marked down and probed back,
//! the down policy, and the gutter pool. No key is ever reported stored
//! without its server saying so, and no key moves to another server of
//! the ring.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use kura_client::{Client, DownPolicy, Error};
use support::{kura, kura_on, raw_get, scripted_server, silent_server};

/// Fails the test instead of hanging.
async fn bounded<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("the client did not return within 60 s")
}

/// Keys of `client` that land on the server at `addr`, and on the others.
fn split_keys(c: &Client, addr: &str, n: usize) -> (Vec<String>, Vec<String>) {
    (0..n)
        .map(|i| format!("key:{i}"))
        .partition(|k| c.server_for(k) == addr)
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let silent = silent_server().to_string();
    let good = kura();
    // (2 s: the silent server's requests time out, the live one's never
    // do, loaded machine or not.)
    let c = Client::builder([silent.clone(), good.addr()])
        .timeouts(Duration::from_secs(2), Duration::from_secs(2))
        .build()
        .unwrap();
    let (on_silent, on_good) = split_keys(&c, &silent, 200);
    let r = bounded(c.get(&on_silent[0])).await;
    assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    let r = bounded(c.set(&on_silent[1], "v", 0)).await;
    assert!(
        matches!(r, Err(Error::Timeout { .. }) | Err(Error::ServerDown(_))),
        "{r:?}"
    );
    // a batch over both: the silent server's keys fail, the others succeed
    let items: Vec<(String, &str)> = on_silent
        .iter()
        .chain(&on_good)
        .map(|k| (k.clone(), "v"))
        .collect();
    let r = bounded(c.set_multi(&items, 0)).await;
    for ((k, _), r) in items.iter().zip(&r) {
        if on_good.contains(k) {
            assert!(matches!(r, Ok(true)), "{k}: {r:?}");
        } else {
            assert!(
                r.is_err(),
                "{k} reported {r:?} by a server that never answered"
            );
        }
    }
}

#[tokio::test]
async fn a_server_that_hangs_up_mid_batch_fails_its_keys() {
    // reads 20 KB of the batch, then closes the connection
    let dying = scripted_server(20_000, None).to_string();
    let good = kura();
    let c = Client::builder([dying.clone(), good.addr()])
        .timeouts(Duration::from_secs(2), Duration::from_secs(10))
        .build()
        .unwrap();
    let (on_dying, on_good) = split_keys(&c, &dying, 2000);
    let items: Vec<(String, Vec<u8>)> = on_dying
        .iter()
        .chain(&on_good)
        .map(|k| (k.clone(), vec![b'x'; 200]))
        .collect();
    let r = bounded(c.set_multi(&items, 0)).await;
    let mut failed = 0;
    for ((k, _), r) in items.iter().zip(&r) {
        if on_good.contains(k) {
            assert!(matches!(r, Ok(true)), "{k}: {r:?}");
            assert!(raw_get(&good.addr(), k).is_some());
        } else {
            assert!(
                r.as_ref().is_err_and(Error::is_server_failure),
                "{k}: {r:?}"
            );
            failed += 1;
        }
    }
    assert_eq!(failed, on_dying.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_during_a_batch() {
    let mut victim = kura();
    let survivor = kura();
    // The client reaches the victim through a relay that lets 4 MB of the
    // batch through and holds the rest: the kill comes mid-batch however
    // fast or loaded the machine is.
    let (relay, gate) = support::gated_relay(victim.addr(), 4 << 20);
    let victim_addr = relay.to_string();
    let c = Client::builder([victim_addr.clone(), survivor.addr()])
        .timeouts(Duration::from_secs(2), Duration::from_secs(30))
        .configure(|cfg| cfg.chunk_keys = 2000)
        .build()
        .unwrap();
    let (on_victim, _) = split_keys(&c, &victim_addr, 60_000);
    let victim_keys: std::collections::HashSet<&String> = on_victim.iter().collect();
    let items: Vec<(String, Vec<u8>)> = (0..60_000)
        .map(|i| (format!("key:{i}"), vec![b'a' + (i % 26) as u8; 1000]))
        .collect();
    let task = {
        let (c, items) = (c.clone(), items.clone());
        tokio::spawn(async move { c.set_multi(&items, 0).await })
    };
    // Kill the victim once it holds some of its keys (those the relay let
    // through) but not all.
    assert!(
        gate.wait_stalled(Duration::from_secs(60)),
        "the client never sent the victim 4 MB"
    );
    let mut stats = TcpStream::connect(victim.addr()).unwrap();
    stats
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // The relay holds the rest: polling until the victim has stored some
    // is no race with the batch (a deadline, not a count of naps).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut n = curr_items(&mut stats);
    while n == 0 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
        n = curr_items(&mut stats);
    }
    assert!(n > 0, "the victim stored none of the 4 MB it was sent");
    assert!(n < on_victim.len(), "the batch finished before the kill");
    victim.kill();
    gate.release();
    let r = bounded(task).await.expect("task");
    let (mut ok, mut failed) = (0, 0);
    for ((k, v), r) in items.iter().zip(&r) {
        if victim_keys.contains(k) {
            match r {
                Ok(true) => ok += 1,
                Ok(false) => panic!("{k}: not stored?"),
                Err(e) => {
                    assert!(
                        e.is_server_failure() || matches!(e, Error::ServerDown(_)),
                        "{e}"
                    );
                    failed += 1
                }
            }
        } else {
            assert!(matches!(r, Ok(true)), "{k} on the survivor: {r:?}");
            if k.ends_with('7') {
                assert_eq!(raw_get(&survivor.addr(), k).as_deref(), Some(&v[..]));
            }
        }
    }
    println!("victim's keys: {ok} acknowledged before the kill, {failed} failed");
    assert!(failed > 0, "no key of the killed server failed");
}

fn curr_items(c: &mut TcpStream) -> usize {
    c.write_all(b"stats\r\n").unwrap();
    let mut out = Vec::new();
    let mut b = [0u8; 8192];
    while !out.ends_with(b"END\r\n") {
        let n = c.read(&mut b).unwrap();
        assert!(n > 0);
        out.extend_from_slice(&b[..n]);
    }
    String::from_utf8_lossy(&out)
        .lines()
        .find_map(|l| l.strip_prefix("STAT curr_items "))
        .and_then(|n| n.trim().parse().ok())
        .expect("curr_items")
}

/// Replies that are not the request's never reach it.
#[tokio::test]
async fn replies_to_no_request_are_errors() {
    let wrong_opaque = scripted_server(0, Some(b"VA 5 O4000000000\r\nWRONG\r\n".to_vec()));
    let garbage = scripted_server(0, Some(b"HELLO WORLD\r\n".to_vec()));
    let short = scripted_server(0, Some(b"VA 500 O0\r\nshort".to_vec()));
    let batch = scripted_server(0, Some(b"VA 5 O77777\r\nWRONG\r\nMN\r\n".to_vec()));
    for addr in [wrong_opaque, garbage, batch] {
        let c = Client::builder([addr.to_string()])
            .timeouts(Duration::from_secs(2), Duration::from_secs(2))
            .build()
            .unwrap();
        let r = bounded(c.get("k")).await;
        assert!(matches!(r, Err(Error::Protocol { .. })), "{addr}: {r:?}");
        let r = bounded(c.get_multi(&["a", "b", "c"])).await;
        assert!(r.iter().all(|r| r.is_err()), "{addr}: {r:?}");
    }
    let c = Client::builder([short.to_string()])
        .timeouts(Duration::from_secs(2), Duration::from_millis(300))
        .build()
        .unwrap();
    assert!(bounded(c.get("k")).await.is_err());
}

#[tokio::test]
async fn a_down_server_fails_fast_and_comes_back() {
    let mut a = kura();
    let port = a.port;
    let b = kura();
    let cfg = |c: &mut kura_client::Config| {
        c.failure_limit = 2;
        c.probe_backoff_min = Duration::from_millis(20);
        c.probe_backoff_max = Duration::from_millis(200);
    };
    let c = Client::builder([a.addr(), b.addr()])
        .timeouts(Duration::from_secs(1), Duration::from_secs(2))
        .configure(cfg)
        .build()
        .unwrap();
    let miss = Client::builder([a.addr(), b.addr()])
        .configure(cfg)
        .down_policy(DownPolicy::Miss)
        .build()
        .unwrap();
    let (on_a, on_b) = split_keys(&c, &a.addr(), 100);
    assert!(c.set(&on_a[0], "before", 0).await.unwrap());
    a.kill();
    for cl in [&c, &miss] {
        for _ in 0..2 {
            let r = cl.get(&on_a[0]).await;
            assert!(matches!(&r, Err(e) if e.is_server_failure()), "{r:?}");
        }
        assert!(cl.is_down(0));
    }
    // fail fast, without the network
    assert!(matches!(c.get(&on_a[0]).await, Err(Error::ServerDown(_))));
    assert!(matches!(miss.get(&on_a[0]).await, Ok(None)));
    assert!(matches!(
        miss.set(&on_a[0], "x", 0).await,
        Err(Error::ServerDown(_))
    ));
    let r = c.get_multi(&[on_a[1].as_str(), on_b[0].as_str()]).await;
    assert!(matches!(r[0], Err(Error::ServerDown(_))) && matches!(r[1], Ok(None)));
    // never rehashed: the down server's keys do not go to b
    let items: Vec<(String, &str)> = on_a.iter().map(|k| (k.clone(), "moved?")).collect();
    assert!(c.set_multi(&items, 0).await.iter().all(|r| r.is_err()));
    assert!(on_a.iter().all(|k| raw_get(&b.addr(), k).is_none()));
    // the same port again: the probe finds it
    let _a2 = kura_on(port).expect("restart on the same port");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while c.is_down(0) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(!c.is_down(0), "not probed back within 60 s");
    assert!(c.set(&on_a[0], "after", 0).await.unwrap());
    assert_eq!(&c.get(&on_a[0]).await.unwrap().unwrap().data[..], b"after");
}

#[tokio::test]
async fn the_gutter_takes_a_down_servers_keys_with_a_short_ttl() {
    let mut a = kura();
    let b = kura();
    let g = kura();
    let c = Client::builder([a.addr(), b.addr()])
        .gutter([g.addr()], 5)
        .configure(|c| {
            c.failure_limit = 1;
            c.probe_backoff_min = Duration::from_secs(30);
        })
        .build()
        .unwrap();
    let (on_a, on_b) = split_keys(&c, &a.addr(), 50);
    a.kill();
    assert!(c.get(&on_a[0]).await.is_err());
    assert!(c.is_down(0));
    assert!(c.set(&on_a[0], "in gutter", 0).await.unwrap());
    assert_eq!(
        raw_get(&g.addr(), &on_a[0]).as_deref(),
        Some(&b"in gutter"[..])
    );
    assert_eq!(
        &c.get(&on_a[0]).await.unwrap().unwrap().data[..],
        b"in gutter"
    );
    // b's keys stay on b
    assert!(c.set(&on_b[0], "on b", 0).await.unwrap());
    assert!(raw_get(&g.addr(), &on_b[0]).is_none());
    // the gutter's copy has a TTL (never 0): ask the server for it
    let mut s = TcpStream::connect(g.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("mg {} t\r\n", on_a[0]).as_bytes())
        .unwrap();
    let mut b = [0u8; 256];
    let n = s.read(&mut b).unwrap();
    let line = String::from_utf8_lossy(&b[..n]).to_string();
    let ttl: i64 = line
        .trim()
        .strip_prefix("HD t")
        .and_then(|t| t.parse().ok())
        .expect(&line);
    assert!((1..=5).contains(&ttl), "{line}");
}

#[tokio::test]
async fn get_or_fill_computes_a_down_servers_key_under_the_miss_policy() {
    let mut a = kura();
    let c = Client::builder([a.addr()])
        .down_policy(DownPolicy::Miss)
        .configure(|c| {
            c.failure_limit = 1;
            c.probe_backoff_min = Duration::from_secs(30);
        })
        .build()
        .unwrap();
    a.kill();
    assert!(c.get("k").await.is_err(), "the first failure is an error");
    assert!(c.is_down(0));
    let f = c
        .get_or_fill("k", 60, || async {
            Ok::<_, Error>(bytes::Bytes::from_static(b"computed"))
        })
        .await
        .expect("computed while the server is down");
    assert_eq!(&f.value.data[..], b"computed");
    assert_eq!(f.origin, kura_client::Origin::Filled);
}
