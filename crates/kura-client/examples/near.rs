//! The near cache's figures: a hit in process against a remote read, and,
//! in front of kura (its `mt` subscription) and of Redis (`CLIENT
//! TRACKING`), the delay from another client's write (sent) to the
//! invalidation arriving here, while a third client keeps writing other
//! keys.
//!
//!   cargo run --release -p kura-client --example near -- MEMCACHED_ADDR REDIS_URL SAMPLES
//!
//! MEMCACHED_ADDR is a kura or memcached server (`host:port`), REDIS_URL
//! `redis://host:port`. Prints medians and p99s in microseconds.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kura_client::{Client, NearConfig, RedisNear};

fn pct(v: &mut [Duration], p: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i].as_secs_f64() * 1e6
}

fn report(what: &str, v: &mut [Duration]) {
    println!(
        "{what}\tp50 {:.2} us\tp99 {:.2} us\t({} samples)",
        pct(v, 0.5),
        pct(v, 0.99),
        v.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, mc, redis_url, samples] = &args[..] else {
        eprintln!("usage: near MEMCACHED_ADDR REDIS_URL SAMPLES");
        std::process::exit(2);
    };
    let n: usize = samples.parse().expect("SAMPLES is a number");
    let near_cfg = NearConfig::new(64 << 20, Duration::from_secs(3600));

    // memcached protocol: near hit against a remote get
    let remote = Client::builder([mc.as_str()]).build().expect("client");
    let near = Client::builder([mc.as_str()])
        .near_cache(near_cfg)
        .build()
        .expect("client");
    remote.set("near:k", vec![b'x'; 100], 0).await.expect("set");
    near.get("near:k").await.expect("get");
    let (mut hit, mut far) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let t = Instant::now();
        assert!(near.get("near:k").await.expect("get").is_some());
        hit.push(t.elapsed());
        let t = Instant::now();
        assert!(remote.get("near:k").await.expect("get").is_some());
        far.push(t.elapsed());
    }
    report("memcached protocol: near-cache hit", &mut hit);
    report("memcached protocol: remote get", &mut far);
    kura_delay(&near, &remote, mc, n).await;

    // Redis: invalidation delay under a write load
    let c = RedisNear::connect(redis_url, near_cfg)
        .await
        .expect("redis");
    let client = redis::Client::open(redis_url.as_str()).expect("url");
    let mut writer = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .expect("connect");
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let _: () = redis::cmd("SET")
                    .arg(format!("load:{}", i % 1000))
                    .arg(i)
                    .query_async(&mut conn)
                    .await
                    .expect("load");
                i += 1;
            }
            i
        })
    };
    let (mut delay, mut hits, mut gets) = (Vec::new(), Vec::new(), Vec::new());
    let mut plain = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    for i in 0..n {
        let key = format!("inv:{}", i % 100);
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(i)
            .query_async(&mut writer)
            .await
            .expect("set");
        c.get(&key).await.expect("get"); // fill the near cache
        let t = Instant::now();
        assert!(c.get(&key).await.expect("get").is_some());
        hits.push(t.elapsed());
        let t = Instant::now();
        let _: Option<Vec<u8>> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut plain)
            .await
            .expect("get");
        gets.push(t.elapsed());
        let before = c.invalidations();
        let t = Instant::now();
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(i + 1)
            .query_async(&mut writer)
            .await
            .expect("set");
        let deadline = t + Duration::from_secs(5);
        while c.invalidations() == before {
            assert!(Instant::now() < deadline, "no invalidation within 5 s");
            tokio::task::yield_now().await;
        }
        delay.push(t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let writes = load.await.expect("load task");
    report("redis: near-cache hit", &mut hits);
    report("redis: remote GET", &mut gets);
    report(
        &format!(
            "redis: invalidation delay (write sent to invalidation here; {writes} background SETs)"
        ),
        &mut delay,
    );
}

/// In front of kura: the delay from another client's set (sent) to the
/// `IV` line arriving, under a write load of other keys. Skipped against
/// memcached (no invalidations: the near cache is TTL-bounded).
async fn kura_delay(near: &Client, writer: &Client, addr: &str, n: usize) {
    writer.set("near:probe", "1", 0).await.expect("set");
    near.get("near:probe").await.expect("get");
    writer.set("near:probe", "2", 0).await.expect("set");
    let deadline = Instant::now() + Duration::from_secs(1);
    while near.near_invalidations() == 0 {
        if Instant::now() > deadline {
            println!("memcached protocol: no invalidations (memcached?): TTL-bounded only");
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let c = Client::builder([addr]).build().expect("client");
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                c.set(format!("load:{}", i % 1000), i.to_string(), 0)
                    .await
                    .expect("load");
                i += 1;
            }
            i
        })
    };
    let mut delay = Vec::new();
    for i in 0..n {
        let key = format!("inv:{}", i % 100);
        writer.set(&key, i.to_string(), 0).await.expect("set");
        near.get(&key).await.expect("get"); // fill the near cache
        let before = near.near_invalidations();
        let t = Instant::now();
        writer.set(&key, (i + 1).to_string(), 0).await.expect("set");
        let deadline = t + Duration::from_secs(5);
        while near.near_invalidations() == before {
            assert!(Instant::now() < deadline, "no invalidation within 5 s");
            tokio::task::yield_now().await;
        }
        delay.push(t.elapsed());
    }
    stop.store(true, Ordering::Relaxed);
    let writes = load.await.expect("load task");
    report(
        &format!("kura: invalidation delay (write sent to IV here; {writes} background sets)"),
        &mut delay,
    );
}
