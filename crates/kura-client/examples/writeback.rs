//! Seed 000's experiment: write back missed keys (values of 100 B to
//! 1 KB) one `set` per key, awaited in turn as a request handler does,
//! against one `set_multi` (one quiet batch per server); and `get_multi`
//! of 1,000 keys over three servers against a `get` per key.
//!
//!   cargo run --release -p kura-client --example writeback -- \
//!       SET_SERVERS GET_SERVERS ROUNDS LABEL [DELAY_US]
//!
//! SET_SERVERS and GET_SERVERS are comma-separated `host:port` lists (two
//! and three servers in the benchmark). Prints one line per measurement:
//! medians over ROUNDS (the two ways alternate within each round), and
//! the ratio of the medians. With DELAY_US > 0 each measurement is made on
//! loopback and then through `kura_testkit::relay::delay` (DELAY_US each way, a
//! network stand-in), the two lines side by side, after a line with the
//! round trip the relay adds (median of 1,000 `get`s through it, less the
//! median of 1,000 direct).

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

/// `tag` keeps each way's keys apart.
async fn writeback(c: &Client, keys: usize, rounds: usize, label: &str, tag: &str) {
    let (mut one, mut multi) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let items: Vec<(String, Vec<u8>)> = (0..keys)
            .map(|i| (format!("wb:{tag}:{r}:a:user:{i}"), value(i)))
            .collect();
        let t = Instant::now();
        for (k, v) in &items {
            assert!(c.set(k, v, 600).await.expect("set"));
        }
        one.push(t.elapsed());
        let items: Vec<(String, Vec<u8>)> = (0..keys)
            .map(|i| (format!("wb:{tag}:{r}:b:user:{i}"), value(i)))
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

/// Median time of one `get` (a hit) over `n` in turn.
async fn round_trip(c: &Client, n: usize) -> Duration {
    c.set("rtt:key", b"v", 600).await.expect("set");
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        c.get("rtt:key").await.expect("get").expect("hit");
        v.push(t.elapsed());
    }
    median(v)
}

fn client(servers: &[String]) -> Client {
    Client::builder(servers)
        .timeouts(Duration::from_secs(2), Duration::from_secs(30))
        .build()
        .expect("client")
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (set_servers, get_servers, rounds, label, delay_us) = match &args[..] {
        [_, s, g, r, l] => (s, g, r, l, "0"),
        [_, s, g, r, l, d] => (s, g, r, l, d.as_str()),
        _ => {
            eprintln!("usage: writeback SET_SERVERS GET_SERVERS ROUNDS LABEL [DELAY_US]");
            std::process::exit(2);
        }
    };
    let rounds: usize = rounds.parse().expect("ROUNDS is a number");
    let delay = Duration::from_micros(delay_us.parse().expect("DELAY_US is a number"));
    let set_servers: Vec<String> = set_servers.split(',').map(String::from).collect();
    let get_servers: Vec<String> = get_servers.split(',').map(String::from).collect();
    // (tag, two-server client, three-server client)
    let mut ways = vec![(
        "loopback".to_string(),
        client(&set_servers),
        client(&get_servers),
    )];
    if !delay.is_zero() {
        let two = kura_testkit::relay::delay::start(&set_servers, delay).expect("relay");
        let three = kura_testkit::relay::delay::start(&get_servers, delay).expect("relay");
        let tag = format!("relay {delay_us} us");
        ways.push((tag, client(&two), client(&three)));
        let direct = round_trip(&ways[0].1, 1000).await;
        let relayed = round_trip(&ways[1].1, 1000).await;
        println!(
            "{label}\trelay, {delay_us} us each way asked\tget round trip {:.1} us direct, {:.1} us through the relay\tadds {:.1} us (asked {})",
            direct.as_secs_f64() * 1e6,
            relayed.as_secs_f64() * 1e6,
            (relayed.saturating_sub(direct)).as_secs_f64() * 1e6,
            2 * delay.as_micros()
        );
    }
    for keys in [1000, 10_000] {
        for (i, (tag, two, _)) in ways.iter().enumerate() {
            writeback(
                two,
                keys,
                rounds,
                &format!("{label}, {tag}"),
                &i.to_string(),
            )
            .await;
        }
    }
    for (tag, _, three) in &ways {
        multiget(three, rounds, &format!("{label}, {tag}")).await;
    }
}
