//! 100 concurrent tasks, half writing (updates, moves between users,
//! deletes, inserts, each in a transaction through the helper) and half
//! reading (by id, by index, many at once, with the fill lock), on random
//! rows and index values: when they stop, every record and index entry
//! the cache holds equals the database.

mod support;

use std::collections::BTreeMap;

use kura_record::{Hooks, IndexValue, Result};
use rand::{Rng, SeedableRng};
use support::{item, servers, Item, Setup};

const ROWS: i64 = 500;
const USERS: i64 = 100;
const TASKS: usize = 100;
const OPS: usize = 30;

async fn write_once(s: &Setup, rng: &mut rand::rngs::StdRng, next_id: i64) -> Result<()> {
    let table = s.table.clone();
    let it = s.items.clone();
    let id = rng.gen_range(1..=ROWS);
    let user = rng.gen_range(1..=USERS);
    let op = rng.gen_range(0..100);
    s.cache
        .transaction(|tx| {
            Box::pin(async move {
                let text = match op {
                    0..=49 => format!("UPDATE {table} SET count = count + 1 WHERE id = {id}"),
                    50..=89 => format!("UPDATE {table} SET user_id = {user}, kind = {} WHERE id = {id}", id % 5),
                    90..=94 => format!("DELETE FROM {table} WHERE id = {id}"),
                    _ => format!(
                        "INSERT INTO {table} (id, user_id, kind, count, name) VALUES ({next_id}, {user}, 1, 0, 'n{next_id}')"
                    ),
                };
                let target = if op >= 95 { next_id } else { id };
                if op < 95 {
                    tx.touch(&it, &[target]).await?;
                }
                tx.execute(&text, &[]).await?;
                tx.touch(&it, &[target]).await?;
                Ok(())
            })
        })
        .await
        .map(|_| ())
}

async fn read_once(s: &Setup, rng: &mut rand::rngs::StdRng) -> Result<()> {
    let user = |rng: &mut rand::rngs::StdRng| vec![IndexValue::Int(rng.gen_range(1..=USERS))];
    match rng.gen_range(0..5) {
        0 => {
            let ids: Vec<i64> = (0..20).map(|_| rng.gen_range(1..=ROWS + 50)).collect();
            s.items.fetch_multi(&ids).await.map(|_| ())
        }
        1 => s
            .items
            .fetch_by_index(&["user_id"], &user(rng))
            .await
            .map(|_| ()),
        2 => {
            let vs = vec![user(rng), user(rng), user(rng)];
            s.items
                .fetch_multi_by_index(&["user_id"], &vs)
                .await
                .map(|_| ())
        }
        3 => s
            .items
            .fetch_locked(rng.gen_range(1..=ROWS))
            .await
            .map(|_| ()),
        _ => s.items.fetch(rng.gen_range(1..=ROWS)).await.map(|_| ()),
    }
}

/// Readers that pause 0-5 ms between their database read and their
/// write-back (a scheduling hiccup, a slow network): the window in which
/// a write can commit and invalidate is wide enough to be hit often.
fn slow_readers() -> Hooks {
    Hooks {
        before_write_back: Some(std::sync::Arc::new(|| {
            let pause = std::time::Duration::from_micros(rand::random::<u64>() % 5_000);
            Box::pin(tokio::time::sleep(pause))
        })),
        ..Hooks::default()
    }
}

async fn run(url: &str, memcached: bool) {
    let Some(procs) = servers::servers(memcached, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let rows: Vec<Item> = (1..=ROWS).map(|id| item(id, 1 + id % USERS)).collect();
    let Some(s) = Setup::new(url, &addrs, &rows, slow_readers()).await else {
        return;
    };
    let s = std::sync::Arc::new(s);
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let s = s.clone();
        tasks.push(tokio::spawn(async move {
            let mut rng = rand::rngs::StdRng::seed_from_u64(t as u64);
            let mut failures = 0;
            // Readers go on twice as long, so that entries filled while
            // writes still ran are among those checked.
            let ops = if t % 2 == 0 { OPS } else { 2 * OPS };
            for op in 0..ops {
                let r = if t % 2 == 0 {
                    let next_id = 10_000 + (t * OPS + op) as i64;
                    write_once(&s, &mut rng, next_id).await
                } else {
                    read_once(&s, &mut rng).await
                };
                // Deadlocks and lock timeouts under this load are the
                // database's answer; the transaction rolled back.
                if r.is_err() {
                    failures += 1;
                }
            }
            failures
        }));
    }
    let mut failures = 0;
    for t in tasks {
        failures += t.await.expect("task");
    }
    assert!(failures < TASKS * OPS / 10, "{failures} failed operations");
    let during = s.cache.stats();

    // Invalidations the cache did not take in time (a busy machine: the
    // 200 ms cache timeout) wait in the outbox; a deployment's drainer
    // (`spawn_drainer`) expires them, as this drain does.
    let left = s.cache.drain_outbox().await.expect("drain");
    println!("outbox rows drained after the run: {left}; {during:?}");

    // Every cached record and index entry equals the database.
    let db = support::db_items(&s.pool, &s.table).await;
    let by_id: BTreeMap<i64, &Item> = db.iter().map(|r| (r.id, r)).collect();
    let mut cached = 0;
    let max_id = 10_000 + (TASKS * OPS) as i64;
    for id in (1..=ROWS).chain(10_000..max_id) {
        if let Some(c) = s.items.peek(id).await {
            assert_eq!(
                Some(&&c),
                by_id.get(&id),
                "cached record {id} differs from the database"
            );
            cached += 1;
        }
    }
    let mut lists = 0;
    for u in 1..=USERS {
        let want: Vec<i64> = db.iter().filter(|r| r.user_id == u).map(|r| r.id).collect();
        if let Some(ids) = s
            .items
            .peek_index(&["user_id"], &[u.into()])
            .await
            .expect("key")
        {
            assert_eq!(
                ids, want,
                "cached index entry of user {u} differs from the database"
            );
            lists += 1;
        }
        let through = s
            .items
            .fetch_by_index(&["user_id"], &[u.into()])
            .await
            .expect("read");
        let got: Vec<Item> = through;
        let want_rows: Vec<Item> = db.iter().filter(|r| r.user_id == u).cloned().collect();
        assert_eq!(got, want_rows, "user {u} through the cache");
    }
    println!("{failures} failed operations; {cached} cached records and {lists} index entries checked; {during:?}");
    // Index entries survive to the end only where no write came after the
    // last reader's fill, which may be none; records always are. Both were
    // compared above, and every user's list read through the cache equals
    // the database.
    assert!(
        cached > 0,
        "no record was cached: the check checked nothing"
    );
    match std::sync::Arc::try_unwrap(s) {
        Ok(s) => s.teardown().await,
        Err(_) => unreachable!("all tasks joined"),
    }
}

per_database!(run(false) => mysql_100_tasks, postgres_100_tasks);
per_database!(run(true) => mysql_100_tasks_memcached, postgres_100_tasks_memcached);
