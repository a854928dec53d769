//! The consistency test under the cache's own failures: writers (through
//! `RecordTx`, and in plain SQL followed by the public `expire`), readers
//! pausing 0-5 ms between their database read and their write-back, and a
//! task that `flush_all`s a cache server or SIGKILLs it and restarts it
//! empty on its port, at random, while they run.
//!
//! Every write learns the count it committed (counts only grow) and reads
//! the row back through the cache once its invalidation was taken
//! (`expired`): a smaller count is a stale read. There must be none. A
//! write whose invalidation the cache did not take (a server down at that
//! moment) is left to the outbox, as documented, and not counted. At the
//! end, with the servers up and the outbox drained, every cached record
//! and index entry equals the database.
//!
//! At this size (a few seconds) the load did not catch the old behaviour
//! either (fills by ADD, no fence: 0 stale reads in two runs of the four
//! tests, checked); tests/restart.rs makes each interleaving happen and is
//! the proof. This one shows that nothing else goes wrong around them.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kura_record::{Hooks, IndexValue, Value};
use rand::{Rng, SeedableRng};
use support::{item, servers, Item, Setup};

const ROWS: i64 = 200;
const USERS: i64 = 20;
const WRITERS: u64 = 10;
const READERS: u64 = 10;
const OPS: usize = 30;
const EVENTS: usize = 12;

/// One write; returns whether its invalidation was taken and the count it
/// committed.
async fn write_once(
    s: &Setup,
    rng: &mut rand::rngs::StdRng,
    id: i64,
) -> kura_record::Result<(bool, i64)> {
    let user = rng.gen_range(1..=USERS);
    let t = s.table.clone();
    if rng.gen_bool(0.5) {
        let it = s.items.clone();
        let (count, done) = s
            .cache
            .transaction(|tx| {
                Box::pin(async move {
                    tx.touch(&it, &[id]).await?;
                    let sql = format!("UPDATE {t} SET count = count + 1, user_id = ? WHERE id = ?");
                    tx.execute(&sql, &[user.into(), id.into()]).await?;
                    let rows: Vec<(i64,)> = match tx.conn() {
                        kura_record::Conn::MySql(c) => {
                            sqlx::query_as(&format!("SELECT count FROM {t} WHERE id = ?"))
                                .bind(id)
                                .fetch_all(c)
                                .await
                        }
                        kura_record::Conn::Postgres(c) => {
                            sqlx::query_as(&format!("SELECT count FROM {t} WHERE id = $1"))
                                .bind(id)
                                .fetch_all(c)
                                .await
                        }
                    }
                    .map_err(kura_record::Error::write)?;
                    Ok(rows.first().map_or(0, |r| r.0))
                })
            })
            .await?;
        Ok((done.expired, count))
    } else {
        // Plain SQL, autocommitted, then the public expire.
        let db = s.cache.db();
        db.execute(
            &format!("UPDATE {t} SET count = count + 1, user_id = ? WHERE id = ?"),
            &[user.into(), id.into()],
        )
        .await
        .map_err(kura_record::Error::write)?;
        let rows: Vec<CountRow> = db
            .fetch_as(
                &format!("SELECT count FROM {t} WHERE id = ?"),
                &[Value::Int(id)],
            )
            .await?;
        let done = s.items.expire(&[id]).await?;
        Ok((done.expired, rows.first().map_or(0, |r| r.count)))
    }
}

#[derive(serde::Deserialize)]
struct CountRow {
    count: i64,
}

async fn read_once(s: &Setup, rng: &mut rand::rngs::StdRng) {
    let _ = match rng.gen_range(0..3) {
        0 => s.items.fetch(rng.gen_range(1..=ROWS)).await.map(|_| ()),
        1 => {
            let ids: Vec<i64> = (0..10).map(|_| rng.gen_range(1..=ROWS)).collect();
            s.items.fetch_multi(&ids).await.map(|_| ())
        }
        _ => s
            .items
            .fetch_by_index(&["user_id"], &[IndexValue::Int(rng.gen_range(1..=USERS))])
            .await
            .map(|_| ()),
    };
}

fn slow_readers() -> Hooks {
    Hooks {
        before_write_back: Some(Arc::new(|| {
            let pause = Duration::from_micros(rand::random::<u64>() % 5_000);
            Box::pin(tokio::time::sleep(pause))
        })),
        ..Hooks::default()
    }
}

/// Flushes or restarts a server now and then while the others run.
fn chaos(
    procs: Arc<Mutex<Vec<servers::Proc>>>,
    memcached: bool,
    seed: u64,
) -> std::thread::JoinHandle<(usize, usize)> {
    std::thread::spawn(move || {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (mut flushes, mut restarts) = (0, 0);
        for _ in 0..EVENTS {
            std::thread::sleep(Duration::from_millis(rng.gen_range(20..120)));
            let mut procs = procs.lock().expect("procs");
            let i = rng.gen_range(0..procs.len());
            if rng.gen_bool(0.5) {
                use std::io::{Read, Write};
                if let Ok(mut c) = std::net::TcpStream::connect(procs[i].addr()) {
                    let _ = c.write_all(b"flush_all\r\n");
                    let _ = c.read(&mut [0u8; 8]);
                    flushes += 1;
                }
            } else {
                let port = procs[i].port;
                procs[i].kill();
                let back = if memcached {
                    servers::memcached_on(port)
                } else {
                    servers::kura_on(port)
                };
                procs[i] = back.expect("restarted on its port");
                restarts += 1;
            }
        }
        (flushes, restarts)
    })
}

async fn run(url: &str, memcached: bool) {
    let Some(procs) = servers::servers(memcached, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let procs = Arc::new(Mutex::new(procs));
    let rows: Vec<Item> = (1..=ROWS).map(|id| item(id, 1 + id % USERS)).collect();
    let Some(s) = Setup::new(url, &addrs, &rows, slow_readers()).await else {
        return;
    };
    let s = Arc::new(s);
    let stale = Arc::new(AtomicU64::new(0));
    let checked = Arc::new(AtomicU64::new(0));
    let chaos = chaos(procs.clone(), memcached, 7);
    let mut tasks = Vec::new();
    for t in 0..WRITERS + READERS {
        let (s, stale, checked) = (s.clone(), stale.clone(), checked.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(t);
            for _ in 0..if t < WRITERS { OPS } else { 2 * OPS } {
                if t >= WRITERS {
                    read_once(&s, &mut rng).await;
                    continue;
                }
                let id = rng.gen_range(1..=ROWS);
                // Deadlocks under this load are the database's answer.
                let Ok((true, count)) = write_once(&s, &mut rng, id).await else {
                    continue;
                };
                if let Ok(Some(r)) = s.items.fetch(id).await {
                    checked.fetch_add(1, Ordering::Relaxed);
                    if r.count < count {
                        stale.fetch_add(1, Ordering::Relaxed);
                        println!(
                            "stale read of {id}: count {} after {count} committed",
                            r.count
                        );
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    let (flushes, restarts) = chaos.join().expect("chaos");
    let during = s.cache.stats();
    // The servers are up; what the cache missed waits in the outbox.
    let mut drained = 0;
    for _ in 0..20 {
        match s.cache.drain_outbox().await.expect("drain") {
            0 => break,
            n => drained += n,
        }
    }
    println!(
        "{flushes} flushes, {restarts} restarts; {} read-after-commit checks, {} stale; {drained} outbox rows drained; {during:?}",
        checked.load(Ordering::Relaxed),
        stale.load(Ordering::Relaxed)
    );
    assert_eq!(
        stale.load(Ordering::Relaxed),
        0,
        "stale reads after a commit"
    );
    assert!(checked.load(Ordering::Relaxed) > 0, "nothing was checked");
    let db = support::db_items(&s.pool, &s.table).await;
    let by_id: BTreeMap<i64, &Item> = db.iter().map(|r| (r.id, r)).collect();
    for id in 1..=ROWS {
        if let Some(c) = s.items.peek(id).await {
            assert_eq!(
                Some(&&c),
                by_id.get(&id),
                "cached record {id} differs from the database"
            );
        }
    }
    for u in 1..=USERS {
        let want: Vec<Item> = db.iter().filter(|r| r.user_id == u).cloned().collect();
        if let Some(ids) = s
            .items
            .peek_index(&["user_id"], &[u.into()])
            .await
            .expect("key")
        {
            assert_eq!(
                ids,
                want.iter().map(|r| r.id).collect::<Vec<_>>(),
                "cached entry of user {u}"
            );
        }
        let got = s
            .items
            .fetch_by_index(&["user_id"], &[u.into()])
            .await
            .expect("read");
        assert_eq!(got, want, "user {u} through the cache");
    }
    match Arc::try_unwrap(s) {
        Ok(s) => s.teardown().await,
        Err(_) => unreachable!("all tasks joined"),
    }
}

per_database!(run(false) => mysql_chaos, postgres_chaos);
per_database!(run(true) => mysql_chaos_memcached, postgres_chaos_memcached);
