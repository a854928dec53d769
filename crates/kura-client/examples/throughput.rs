//! Client cost per request against an existing Rust client, the `memcache`
//! crate (0.21, synchronous, its default binary protocol), on the same
//! load (one connection, r2d2's per-checkout check off): one caller doing
//! gets of 100-byte values one after another, then sets, over 1,024 keys
//! of 16 bytes taken in turn (memcaslap's smallest window and shortest
//! key, so that bench/libmemcached.py runs libmemcached on the same load).
//! Prints requests per second and the client process's CPU time per
//! request (user + system, from /proc/self/stat); the server is another
//! process. Then kura-client with 32 concurrent tasks on its pipelined
//! connections, which a synchronous client cannot do on one thread.
//!
//!   cargo run --release -p kura-client --example throughput -- ADDR REQUESTS ROUNDS [ONLY]
//!
//! ONLY: run just the loads whose name contains it (e.g. `kura-client
//! meta, get`), to profile or count one load's system calls.

use std::time::{Duration, Instant};

use kura_client::{Client, Protocol};

/// This process's CPU time so far (user + system).
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // fields after the command name, which is in parentheses
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime");
    let hz = 100; // USER_HZ on Linux
    Duration::from_millis(ticks * 1000 / hz)
}

/// Keys the loads take in turn.
const KEYS: usize = 1024;

struct Run {
    rate: f64,
    cpu_us: f64,
}

fn measure(n: usize, f: impl FnOnce()) -> Run {
    let (t, c) = (Instant::now(), cpu());
    f();
    let (wall, used) = (t.elapsed(), cpu() - c);
    Run {
        rate: n as f64 / wall.as_secs_f64(),
        cpu_us: used.as_secs_f64() * 1e6 / n as f64,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (addr, n, rounds, only) = match &args[..] {
        [_, addr, n, rounds] => (addr, n, rounds, ""),
        [_, addr, n, rounds, only] => (addr, n, rounds, only.as_str()),
        _ => {
            eprintln!("usage: throughput ADDR REQUESTS ROUNDS [ONLY]");
            std::process::exit(2);
        }
    };
    let n: usize = n.parse().expect("REQUESTS");
    let rounds: usize = rounds.parse().expect("ROUNDS");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let value = vec![b'v'; 100];
    let ours = |p: Protocol| {
        Client::builder([addr.as_str()])
            .protocol(p)
            .build()
            .expect("client")
    };
    let meta = ours(Protocol::Meta);
    let binary = ours(Protocol::Binary);
    // One connection, and without r2d2's check on every checkout (a
    // `version` round trip per request with the crate's default pool).
    let url = memcache::Url::parse(&format!("memcache://{addr}?tcp_nodelay=true")).expect("url");
    let pool = r2d2::Pool::builder()
        .max_size(1)
        .test_on_check_out(false)
        .build(memcache::ConnectionManager::new(url))
        .expect("pool");
    let theirs = memcache::Client::with_pool(pool).expect("memcache crate");
    let keys: Vec<String> = (0..KEYS).map(|i| format!("tp:key:{i:09}")).collect();
    let key = |i: usize| keys[i % KEYS].as_str();
    rt.block_on(async {
        for k in &keys {
            meta.set(k, &value, 0).await.expect("set");
        }
    });

    type Load<'a> = (&'a str, Box<dyn Fn() -> Run + 'a>);
    let loads: Vec<Load> = vec![
        (
            "kura-client meta, get",
            Box::new(|| {
                measure(n, || {
                    rt.block_on(async {
                        for i in 0..n {
                            meta.get(key(i)).await.expect("get").expect("hit");
                        }
                    })
                })
            }),
        ),
        (
            "kura-client binary, get",
            Box::new(|| {
                measure(n, || {
                    rt.block_on(async {
                        for i in 0..n {
                            binary.get(key(i)).await.expect("get").expect("hit");
                        }
                    })
                })
            }),
        ),
        (
            "memcache crate (binary), get",
            Box::new(|| {
                measure(n, || {
                    for i in 0..n {
                        let v: Option<Vec<u8>> = theirs.get(key(i)).expect("get");
                        v.expect("hit");
                    }
                })
            }),
        ),
        (
            "kura-client meta, set",
            Box::new(|| {
                measure(n, || {
                    rt.block_on(async {
                        for i in 0..n {
                            meta.set(key(i), &value, 0).await.expect("set");
                        }
                    })
                })
            }),
        ),
        (
            "memcache crate (binary), set",
            Box::new(|| {
                measure(n, || {
                    for i in 0..n {
                        theirs.set(key(i), &value[..], 0).expect("set");
                    }
                })
            }),
        ),
        (
            "kura-client meta, get, 32 tasks",
            Box::new(|| {
                measure(n, || {
                    rt.block_on(async {
                        let tasks: Vec<_> = (0..32)
                            .map(|t| {
                                let c = meta.clone();
                                async move {
                                    for i in 0..n / 32 {
                                        let k = key(t * (n / 32) + i);
                                        c.get(k).await.expect("get").expect("hit");
                                    }
                                }
                            })
                            .collect();
                        futures_util::future::join_all(tasks).await;
                    })
                })
            }),
        ),
    ];
    let loads: Vec<Load> = loads
        .into_iter()
        .filter(|(name, _)| name.contains(only))
        .collect();
    let mut results: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); loads.len()];
    for _ in 0..rounds {
        for (i, (_, load)) in loads.iter().enumerate() {
            let r = load();
            results[i].0.push(r.rate);
            results[i].1.push(r.cpu_us);
        }
    }
    for ((name, _), (rate, cpu)) in loads.iter().zip(results) {
        println!(
            "{name}\t{:.0} req/s\t{:.2} us CPU/request (median of {rounds})",
            median(rate),
            median(cpu)
        );
    }
}
