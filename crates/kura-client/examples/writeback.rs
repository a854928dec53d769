//! Seed 000's experiment: write back missed keys (values of 100 B to
//! 1 KB) one `set` per key, awaited in turn as a request handler does,
//! against one `set_multi` (one quiet batch per server); and `get_multi`
//! of 1,000 keys over three servers against a `get` per key.
//!
//!   cargo run --release -p kura-client --example writeback -- \
//!       SET_SERVERS GET_SERVERS ROUNDS LABEL
//!
//! SET_SERVERS and GET_SERVERS are comma-separated `host:port` lists (two
//! and three servers in the benchmark). Prints one line per measurement:
//! medians over ROUNDS (the two ways alternate within each round), and
//! the ratio of the medians.

use std::time::{Duration, Instant};

use kura_client::Client;

fn value(i: usize) -> Vec<u8> {
    let len = 100 + (i * 7919) % 925;
    (0..len).map(|j| b'a' + ((i + j) % 26) as u8).collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn writeback(c: &Client, keys: usize, rounds: usize, label: &str) {
    let (mut one, mut multi) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let items: Vec<(String, Vec<u8>)> = (0..keys)
            .map(|i| (format!("wb:{r}:a:user:{i}"), value(i)))
            .collect();
        let t = Instant::now();
        for (k, v) in &items {
            assert!(c.set(k, v, 600).await.expect("set"));
        }
        one.push(t.elapsed());
        let items: Vec<(String, Vec<u8>)> = (0..keys)
            .map(|i| (format!("wb:{r}:b:user:{i}"), value(i)))
            .collect();
        let t = Instant::now();
        let out = c.set_multi(&items, 600).await;
        multi.push(t.elapsed());
        assert!(
            out.iter().all(|r| matches!(r, Ok(true))),
            "a set_multi key failed"
        );
    }
    let (a, b) = (median(one), median(multi));
    println!(
        "{label}\twrite-back {keys} keys over 2 servers\tone set per key {:.2} ms\tset_multi {:.3} ms\t{:.1}x",
        ms(a),
        ms(b),
        a.as_secs_f64() / b.as_secs_f64()
    );
}

async fn multiget(c: &Client, rounds: usize, label: &str) {
    let items: Vec<(String, Vec<u8>)> = (0..1000)
        .map(|i| (format!("mg:user:{i}"), value(i)))
        .collect();
    assert!(c
        .set_multi(&items, 600)
        .await
        .iter()
        .all(|r| matches!(r, Ok(true))));
    let keys: Vec<&str> = items.iter().map(|(k, _)| k.as_str()).collect();
    let (mut one, mut multi) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let t = Instant::now();
        for k in &keys {
            assert!(c.get(k).await.expect("get").is_some());
        }
        one.push(t.elapsed());
        let t = Instant::now();
        let got = c.get_multi(&keys).await;
        multi.push(t.elapsed());
        assert!(
            got.iter().all(|g| matches!(g, Ok(Some(_)))),
            "a get_multi key missed"
        );
    }
    let (a, b) = (median(one), median(multi));
    println!(
        "{label}\tget 1000 keys over 3 servers\tone get per key {:.2} ms\tget_multi {:.3} ms\t{:.1}x",
        ms(a),
        ms(b),
        a.as_secs_f64() / b.as_secs_f64()
    );
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, set_servers, get_servers, rounds, label] = &args[..] else {
        eprintln!("usage: writeback SET_SERVERS GET_SERVERS ROUNDS LABEL");
        std::process::exit(2);
    };
    let rounds: usize = rounds.parse().expect("ROUNDS is a number");
    let two = Client::builder(set_servers.split(','))
        .timeouts(Duration::from_secs(2), Duration::from_secs(10))
        .build()
        .expect("client");
    let three = Client::builder(get_servers.split(','))
        .timeouts(Duration::from_secs(2), Duration::from_secs(10))
        .build()
        .expect("client");
    for keys in [1000, 10_000] {
        writeback(&two, keys, rounds, label).await;
    }
    multiget(&three, rounds, label).await;
}
