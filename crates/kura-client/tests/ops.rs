//! Every operation against real servers on loopback: three `kura server`s
//! and three Debian memcached (skipped when it is not installed), in the
//! meta protocol and in text mode.

mod support;

use std::time::Duration;

use kura_client::{Client, Error, Protocol, StoreStatus};
use support::{addrs, raw_get, servers};

fn client(addrs: &[String], protocol: Protocol) -> Client {
    Client::builder(addrs)
        .protocol(protocol)
        .timeouts(Duration::from_secs(5), Duration::from_secs(20))
        .build()
        .expect("client")
}

/// Single-key operations, each with its success and its refusal.
async fn single_ops(c: &Client) {
    assert_eq!(c.get("absent").await.unwrap(), None);
    assert!(c.set("k", "v1", 0).await.unwrap());
    let v = c.get("k").await.unwrap().expect("hit");
    assert_eq!(&v.data[..], b"v1");
    assert!(!c.add("k", "v2", 0).await.unwrap(), "add of a present key");
    assert!(c.add("k2", "a", 0).await.unwrap());
    assert!(c.replace("k2", "b", 0).await.unwrap());
    assert!(!c.replace("nope", "b", 0).await.unwrap());
    assert!(c.append("k2", "c").await.unwrap());
    assert!(c.prepend("k2", "z").await.unwrap());
    assert!(!c.append("nope", "c").await.unwrap());
    assert_eq!(&c.get("k2").await.unwrap().unwrap().data[..], b"zbc");

    // flags travel with the value
    let opts = kura_client::SetOptions::new(0, 0xdead_beef);
    assert!(c.set("flagged", "x", opts).await.unwrap());
    assert_eq!(c.get("flagged").await.unwrap().unwrap().flags, 0xdead_beef);

    // cas: the unique read wins once, then it is stale
    let cas = c.get("k").await.unwrap().unwrap().cas;
    assert_ne!(cas, 0);
    assert_eq!(c.cas("k", "v3", cas, 0).await.unwrap(), StoreStatus::Stored);
    assert_eq!(c.cas("k", "v4", cas, 0).await.unwrap(), StoreStatus::Exists);
    assert_eq!(
        c.cas("nope", "v", 1, 0).await.unwrap(),
        StoreStatus::NotFound
    );
    assert_eq!(&c.get("k").await.unwrap().unwrap().data[..], b"v3");

    // counters
    assert_eq!(c.incr("n", 1).await.unwrap(), None);
    c.set("n", "10", 0).await.unwrap();
    assert_eq!(c.incr("n", 5).await.unwrap(), Some(15));
    assert_eq!(c.decr("n", 20).await.unwrap(), Some(0));
    c.set("big", "18446744073709551615", 0).await.unwrap();
    assert_eq!(c.incr("big", 1).await.unwrap(), Some(0), "wraps at 2^64");
    assert!(
        matches!(c.incr("k", 1).await, Err(Error::Server(_))),
        "not a number"
    );

    // touch and gat
    assert!(c.touch("k", 100).await.unwrap());
    assert!(!c.touch("nope", 100).await.unwrap());
    assert_eq!(&c.gat("k", 1000).await.unwrap().unwrap().data[..], b"v3");
    assert_eq!(c.gat("nope", 1000).await.unwrap(), None);

    // delete
    assert!(c.delete("k").await.unwrap());
    assert!(!c.delete("k").await.unwrap());
    assert_eq!(c.get("k").await.unwrap(), None);

    // a large value and binary bytes
    let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    assert!(c.set("large", &big, 0).await.unwrap());
    assert_eq!(&c.get("large").await.unwrap().unwrap().data[..], &big[..]);
    let crlf = b"a\r\nEND\r\nVA 3\r\n\0";
    assert!(c.set("crlf", crlf, 0).await.unwrap());
    assert_eq!(&c.get("crlf").await.unwrap().unwrap().data[..], crlf);
}

/// Bad input is refused per key, before anything is sent.
async fn bad_input(c: &Client) {
    let long = "x".repeat(251);
    assert!(matches!(c.get(&long).await, Err(Error::BadKey(_))));
    assert!(matches!(c.set("a b", "v", 0).await, Err(Error::BadKey(_))));
    assert!(matches!(
        c.delete("a\r\nflush_all").await,
        Err(Error::BadKey(_))
    ));
    let huge = vec![0u8; c.config().max_value_len + 1];
    assert!(matches!(
        c.set("huge", &huge, 0).await,
        Err(Error::ValueTooLarge { .. })
    ));
    // in a batch, the bad keys fail alone
    let items = vec![
        ("good1".to_string(), b"1".to_vec()),
        ("bad key".to_string(), b"2".to_vec()),
        ("good2".to_string(), b"3".to_vec()),
        ("huge".to_string(), huge),
        ("y".repeat(250), b"4".to_vec()),
    ];
    let r = c.set_multi(&items, 0).await;
    assert!(r[0].as_ref().is_ok_and(|s| *s));
    assert!(matches!(r[1], Err(Error::BadKey(_))));
    assert!(r[2].as_ref().is_ok_and(|s| *s));
    assert!(matches!(r[3], Err(Error::ValueTooLarge { .. })));
    assert!(r[4].as_ref().is_ok_and(|s| *s), "250 bytes is allowed");
    let got = c.get_multi(&["good1", "bad key", "good2"]).await;
    assert_eq!(&got[0].as_ref().unwrap().as_ref().unwrap().data[..], b"1");
    assert!(matches!(got[1], Err(Error::BadKey(_))));
    assert_eq!(&got[2].as_ref().unwrap().as_ref().unwrap().data[..], b"3");
}

/// Multi-operations over three servers: every key lands on the server
/// the ring names (asked directly), and reads come back per key.
async fn multi_ops(c: &Client, servers: &[String]) {
    let items: Vec<(String, Vec<u8>)> = (0..3000)
        .map(|i| {
            let key = match i % 7 {
                0 => format!("ключ:{i}"),
                // the longest keys the protocol allows, many to a text `gets` line
                1 => format!("{i}:{}", "k".repeat(250))
                    .chars()
                    .take(250)
                    .collect(),
                _ => format!("user:{i}"),
            };
            (key, format!("value-{i}-").repeat(1 + i % 50).into_bytes())
        })
        .collect();
    let r = c.set_multi(&items, 0).await;
    assert!(
        r.iter().all(|r| matches!(r, Ok(true))),
        "{:?}",
        r.iter().find(|r| !matches!(r, Ok(true)))
    );
    for (k, v) in items.iter().step_by(97) {
        let at = c.server_for(k);
        assert!(servers.contains(&at));
        assert_eq!(raw_get(&at, k).as_deref(), Some(&v[..]), "{k} on {at}");
    }
    let mut keys: Vec<String> = items.iter().map(|(k, _)| k.clone()).collect();
    keys.push("absent-1".into());
    keys.push(keys[5].clone()); // a key twice
    let got = c.get_multi(&keys).await;
    assert_eq!(got.len(), keys.len());
    for (i, (_, v)) in items.iter().enumerate() {
        let hit = got[i].as_ref().expect("no error").as_ref().expect("a hit");
        assert_eq!(&hit.data[..], &v[..]);
    }
    assert!(matches!(got[3000], Ok(None)));
    assert_eq!(
        got[3001].as_ref().unwrap().as_ref().unwrap().data,
        items[5].1
    );

    // add_multi: only the absent keys
    let adds = vec![
        (items[0].0.clone(), b"x".to_vec()),
        ("fresh".into(), b"y".to_vec()),
    ];
    let r = c.add_multi(&adds, 0).await;
    assert!(matches!(r[..], [Ok(false), Ok(true)]), "{r:?}");

    // cas_multi: the right unique stores, a stale one does not
    let cas0 = got[0].as_ref().unwrap().as_ref().unwrap().cas;
    let cas1 = got[1].as_ref().unwrap().as_ref().unwrap().cas;
    let swaps = vec![
        (items[0].0.clone(), b"new0".to_vec(), cas0),
        (items[1].0.clone(), b"new1".to_vec(), cas1 + 1_000_000),
        ("never".to_string(), b"n".to_vec(), 5),
    ];
    let r = c.cas_multi(&swaps, 0).await;
    assert!(
        matches!(
            r[..],
            [
                Ok(StoreStatus::Stored),
                Ok(StoreStatus::Exists),
                Ok(StoreStatus::NotFound)
            ]
        ),
        "{r:?}"
    );

    // delete_multi: true where the key was
    let r = c
        .delete_multi(&[items[2].0.as_str(), "absent-2", items[3].0.as_str()])
        .await;
    assert!(matches!(r[..], [Ok(true), Ok(false), Ok(true)]), "{r:?}");
    let after = c
        .get_multi(&[items[2].0.as_str(), items[4].0.as_str()])
        .await;
    assert!(matches!(after[0], Ok(None)));
    assert!(matches!(after[1], Ok(Some(_))));
}

/// Many tasks at once on few connections: each gets its own reply.
async fn concurrent(c: &Client) {
    let mut tasks = Vec::new();
    for t in 0..16 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..200 {
                let key = format!("t{t}:{i}");
                let val = format!("{t}/{i}/").repeat(i % 20 + 1);
                assert!(c.set(&key, &val, 0).await.unwrap());
                let got = c.get(&key).await.unwrap().unwrap();
                assert_eq!(got.data, val.as_bytes(), "{key}");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
}

async fn suite(memcached: bool, protocol: Protocol) {
    let Some(procs) = servers(memcached, 3) else {
        return;
    };
    let addrs = addrs(&procs);
    let c = client(&addrs, protocol);
    single_ops(&c).await;
    bad_input(&c).await;
    multi_ops(&c, &addrs).await;
    concurrent(&c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kura_meta() {
    suite(false, Protocol::Meta).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kura_text() {
    suite(false, Protocol::Text).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_meta() {
    suite(true, Protocol::Meta).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_text() {
    suite(true, Protocol::Text).await;
}

/// A batch larger than a chunk goes in several chunks, all answered.
#[tokio::test]
async fn chunks_large_batches() {
    let procs = servers(false, 2).expect("kura");
    let c = Client::builder(addrs(&procs))
        .configure(|cfg| cfg.chunk_keys = 7)
        .build()
        .unwrap();
    let items: Vec<(String, String)> = (0..500)
        .map(|i| (format!("c{i}"), format!("v{i}")))
        .collect();
    assert!(c
        .set_multi(&items, 0)
        .await
        .iter()
        .all(|r| matches!(r, Ok(true))));
    let keys: Vec<&str> = items.iter().map(|(k, _)| k.as_str()).collect();
    let got = c.get_multi(&keys).await;
    for ((_, v), g) in items.iter().zip(&got) {
        assert_eq!(g.as_ref().unwrap().as_ref().unwrap().data, v.as_bytes());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kura_binary() {
    suite(false, Protocol::Binary).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memcached_binary() {
    suite(true, Protocol::Binary).await;
}
