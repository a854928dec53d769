//! Seed 000's login, measured: a user with 1,000 items over two cache
//! servers. Each round, in turn (A B C D, ROUNDS times):
//!
//! - A, cold, batched: `fetch_by_index(user_id)` on an empty namespace, the
//!   misses written back with one quiet multi-add per server;
//! - B, cold, one write per key: the same with an awaited write per key
//!   (a CAS over the read's placeholder, or an `add` without one)
//!   (identity_cache's and second_level_cache's write-back);
//! - C, the database alone: `SELECT ... WHERE user_id = ?`, rows decoded;
//! - D, warm: `fetch_by_index` again on A's namespace.
//!
//! Prints medians of time, of the write-back's time, and the database
//! queries and cache round trips each mode made. With `--delay-us N` the
//! cache servers are reached through a relay that holds every chunk N µs
//! in each direction (a network stand-in; pipelined bytes are not
//! serialised behind each other).
//!
//! cargo run --release -p kura-record --example login -- \
//!   --db mysql://root@127.0.0.1:3306/test --servers 127.0.0.1:11211,127.0.0.1:11212 \
//!   [--rounds 7] [--items 1000] [--delay-us 500] [--label kura]

use std::time::{Duration, Instant};

use kura_client::Client;
use kura_record::{Config, Db, Kind, Record, RecordCache, Stats, Table, WriteBack};
use serde::Deserialize;

// The fields are read by the cache's decoding, not by the bench.
#[allow(dead_code)]
#[derive(Debug, Clone, Deserialize)]
struct UserItem {
    id: i64,
    user_id: i64,
    item_id: i64,
    count: i64,
    name: String,
}

impl Record for UserItem {
    fn id(&self) -> i64 {
        self.id
    }
}

struct Args {
    db: String,
    servers: Vec<String>,
    rounds: usize,
    items: i64,
    delay_us: u64,
    label: String,
}

fn args() -> Args {
    let mut a = Args {
        db: "mysql://root@127.0.0.1:3306/test".into(),
        servers: Vec::new(),
        rounds: 7,
        items: 1000,
        delay_us: 0,
        label: "cache".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_default();
        match k.as_str() {
            "--db" => a.db = v,
            "--servers" => a.servers = v.split(',').map(str::to_string).collect(),
            "--rounds" => a.rounds = v.parse().unwrap_or(7),
            "--items" => a.items = v.parse().unwrap_or(1000),
            "--delay-us" => a.delay_us = v.parse().unwrap_or(0),
            "--label" => a.label = v,
            _ => panic!("unknown argument {k}"),
        }
    }
    assert!(!a.servers.is_empty(), "--servers a,b");
    a
}

fn table(name: &str) -> Table {
    Table::new(name, "id")
        .column("user_id", Kind::Int)
        .column("item_id", Kind::Int)
        .column("count", Kind::Int)
        .column("name", Kind::Text)
        .index(&["user_id"])
}

async fn create(db: &Db, name: &str, items: i64) {
    db.execute(
        &format!(
            "CREATE TABLE {name} (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, item_id BIGINT NOT NULL, \
             count BIGINT NOT NULL, name VARCHAR(100) NOT NULL)"
        ),
        &[],
    )
    .await
    .expect("create");
    db.execute(&format!("CREATE INDEX {name}_u ON {name} (user_id)"), &[])
        .await
        .expect("index");
    // The user's items, and as many of another user's.
    let rows: Vec<String> = (1..=2 * items)
        .map(|id| {
            let user = if id <= items { 1 } else { 2 };
            format!(
                "({id}, {user}, {}, {}, 'item number {id} of the game')",
                id % 997,
                id * 3
            )
        })
        .collect();
    for part in rows.chunks(500) {
        let sql = format!(
            "INSERT INTO {name} (id, user_id, item_id, count, name) VALUES {}",
            part.join(", ")
        );
        db.execute(&sql, &[]).await.expect("insert");
    }
}

fn delta(a: Stats, b: Stats) -> (u64, u64, u64) {
    (
        b.db_queries - a.db_queries,
        b.cache_round_trips - a.cache_round_trips,
        b.write_back_micros - a.write_back_micros,
    )
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let a = args();
    let mut pool_cfg = Config::default();
    pool_cfg.pool.max_connections = 4;
    let db = Db::connect(&a.db, &pool_cfg).await.expect("connect");
    let name = format!("kr_bench_{}", std::process::id());
    create(&db, &name, a.items).await;
    let servers = if a.delay_us > 0 {
        kura_testkit::relay::delay::start(&a.servers, Duration::from_micros(a.delay_us))
            .expect("relay")
    } else {
        a.servers.clone()
    };
    let client = || {
        Client::builder(&servers)
            .timeouts(Duration::from_secs(2), Duration::from_secs(5))
            .build()
            .expect("client")
    };
    let cache_for = |ns: String, wb: WriteBack| {
        let cfg = Config {
            namespace: ns,
            write_back: wb,
            cache_timeout: Duration::from_secs(30),
            outbox_table: format!("{name}_outbox"),
            ..Config::default()
        };
        RecordCache::new(db.clone(), client(), cfg)
    };
    // Connections made and the statement prepared before timing.
    let warmup = cache_for("warmup".into(), WriteBack::Batched);
    let _ = warmup
        .table::<UserItem>(table(&name))
        .await
        .expect("declaration")
        .fetch_by_index(&["user_id"], &[1.into()])
        .await
        .expect("warm-up");
    let select = format!("SELECT id, user_id, item_id, count, name FROM {name} WHERE user_id = ?");
    let modes = [
        "cold, batched write-back",
        "cold, one write per key",
        "database alone",
        "warm",
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); 4];
    let mut writes: Vec<Vec<f64>> = vec![Vec::new(); 4];
    let mut counts = [(0u64, 0u64); 4];
    for round in 0..a.rounds {
        let ns = format!("b{}r{round}", std::process::id());
        let batched = cache_for(ns.clone(), WriteBack::Batched);
        let per_key = cache_for(format!("{ns}k"), WriteBack::PerKey);
        for (m, cache) in [(0, &batched), (1, &per_key), (2, &batched), (3, &batched)] {
            let items = cache
                .table::<UserItem>(table(&name))
                .await
                .expect("declaration");
            let before = cache.stats();
            let t0 = Instant::now();
            let n = if m == 2 {
                let rows: Vec<UserItem> = db.fetch_as(&select, &[1.into()]).await.expect("select");
                rows.len()
            } else {
                items
                    .fetch_by_index(&["user_id"], &[1.into()])
                    .await
                    .expect("fetch_by_index")
                    .len()
            };
            let took = t0.elapsed().as_secs_f64() * 1e3;
            assert_eq!(n as i64, a.items, "every item read");
            let (q, rt, wb) = if m == 2 {
                (1, 0, 0)
            } else {
                delta(before, cache.stats())
            };
            times[m].push(took);
            writes[m].push(wb as f64 / 1e3);
            counts[m] = (q, rt);
        }
    }
    println!(
        "# {}: {} items of one user over {} servers, delay {} us each way, {} rounds, medians",
        a.label,
        a.items,
        a.servers.len(),
        a.delay_us,
        a.rounds
    );
    println!("# mode\tms\twrite-back ms\tdb queries\tcache round trips");
    let mut med = [0.0; 4];
    let mut wmed = [0.0; 4];
    for m in 0..4 {
        med[m] = median(&mut times[m]);
        wmed[m] = median(&mut writes[m]);
        println!(
            "{}\t{}\t{:.3}\t{:.3}\t{}\t{}",
            a.label, modes[m], med[m], wmed[m], counts[m].0, counts[m].1
        );
    }
    println!(
        "{}\tratios\twrite-back per key / batched {:.1}x; cold per key / batched {:.2}x; cold batched / database {:.2}x; database / warm {:.2}x",
        a.label,
        wmed[1] / wmed[0],
        med[1] / med[0],
        med[0] / med[2],
        med[2] / med[3]
    );
    // A missing id: its absence is cached after the first fetch.
    let absent = cache_for(format!("b{}absent", std::process::id()), WriteBack::Batched);
    let items = absent
        .table::<UserItem>(table(&name))
        .await
        .expect("declaration");
    let mut queries = Vec::new();
    for _ in 0..3 {
        let before = absent.stats().db_queries;
        assert!(items
            .fetch(10 * a.items + 7)
            .await
            .expect("fetch")
            .is_none());
        queries.push(absent.stats().db_queries - before);
    }
    println!(
        "{}	missing id	database queries of three fetches in a row: {queries:?}",
        a.label
    );
    let _ = db.execute(&format!("DROP TABLE {name}"), &[]).await;
}
