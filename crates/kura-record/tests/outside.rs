//! Writes made outside `RecordTx` (plain SQL: a console, another service):
//! the public expire calls, index members that no longer match their
//! entry (dropped and the entry refilled), and the outbox drainer leaving
//! commits still in flight to their committers.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kura_record::{Hooks, IndexValue};
use support::{item, servers, Item, Setup};

fn user(v: i64) -> Vec<IndexValue> {
    vec![IndexValue::Int(v)]
}

fn ids(rows: &[Item]) -> Vec<i64> {
    rows.iter().map(|r| r.id).collect()
}

async fn plain_sql(s: &Setup, set: &str, id: i64) {
    s.cache
        .db()
        .execute(
            &format!("UPDATE {} SET {set} WHERE id = ?", s.table),
            &[id.into()],
        )
        .await
        .expect("plain SQL");
}

/// A row moved from user 42 to user 44 in plain SQL, then expired.
async fn expire_after_plain_sql(url: &str) {
    let Some(procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let rows: Vec<Item> = (1..=6)
        .map(|id| item(id, if id <= 4 { 42 } else { 44 }))
        .collect();
    let Some(s) = Setup::new(url, &addrs, &rows, Hooks::default()).await else {
        return;
    };
    let items = &s.items;
    assert_eq!(
        ids(&items
            .fetch_by_index(&["user_id"], &user(42))
            .await
            .expect("42")),
        vec![1, 2, 3, 4]
    );
    assert_eq!(
        ids(&items
            .fetch_by_index(&["user_id"], &user(44))
            .await
            .expect("44")),
        vec![5, 6]
    );

    // expire: the record, the new value's entry (the database) and the old
    // value's (the cached copy).
    plain_sql(&s, "user_id = 44, count = 7", 2).await;
    let done = items.expire(&[2]).await.expect("expire");
    assert!(done.expired);
    assert_eq!(
        ids(&items
            .fetch_by_index(&["user_id"], &user(42))
            .await
            .expect("42")),
        vec![1, 3, 4]
    );
    assert_eq!(
        ids(&items
            .fetch_by_index(&["user_id"], &user(44))
            .await
            .expect("44")),
        vec![2, 5, 6]
    );
    assert_eq!(
        items.fetch(2).await.expect("fetch").map(|r| r.count),
        Some(7)
    );

    // expire_moved: the old and new values named by the caller.
    plain_sql(&s, "user_id = 44", 3).await;
    let done = items
        .expire_moved(3, &[("user_id", 42.into())], &[("user_id", 44.into())])
        .await
        .expect("expire_moved");
    assert!(done.expired);
    assert_eq!(
        ids(&items
            .fetch_by_index(&["user_id"], &user(42))
            .await
            .expect("42")),
        vec![1, 4]
    );
    assert_eq!(
        ids(&items
            .fetch_by_index(&["user_id"], &user(44))
            .await
            .expect("44")),
        vec![2, 3, 5, 6]
    );

    // expire_index: one entry (a row inserted in plain SQL).
    s.cache
        .db()
        .execute(
            &format!(
                "INSERT INTO {} (id, user_id, kind, count, name) VALUES (?, ?, ?, ?, ?)",
                s.table
            ),
            &[9.into(), 42.into(), 1.into(), 0.into(), "nine".into()],
        )
        .await
        .expect("insert");
    items
        .expire_index(&["user_id"], &[42.into()])
        .await
        .expect("expire_index");
    assert_eq!(
        ids(&items
            .fetch_by_index(&["user_id"], &user(42))
            .await
            .expect("42")),
        vec![1, 4, 9]
    );

    // In a transaction: the keys go through its outbox.
    let it = items.clone();
    let table = s.table.clone();
    let (_, done) = s
        .cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.execute(
                    &format!("UPDATE {table} SET user_id = 42 WHERE id = 5"),
                    &[],
                )
                .await?;
                tx.expire_moved(&it, 5, &[("user_id", 44.into())], &[("user_id", 42.into())])?;
                Ok(())
            })
        })
        .await
        .expect("commit");
    assert!(done.expired && done.keys >= 3, "{done:?}");
    assert_eq!(
        ids(&items
            .fetch_by_index(&["user_id"], &user(42))
            .await
            .expect("42")),
        vec![1, 4, 5, 9]
    );

    let st = s.cache.stats();
    assert_eq!(st.expires, 3, "{st:?}");
    s.teardown().await;
}

/// An index entry whose member's row no longer has the value (moved in
/// plain SQL, nobody expired it, the member's record read fresh): the
/// member is not returned, the entry is refilled from the database.
async fn stale_members_are_dropped(url: &str) {
    let Some(procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let rows: Vec<Item> = (1..=6)
        .map(|id| item(id, if id <= 4 { 42 } else { 44 }))
        .collect();
    let Some(s) = Setup::new(url, &addrs, &rows, Hooks::default()).await else {
        return;
    };
    let items = &s.items;
    // The entries are cached, the records are not.
    let lists = items
        .ids_by_index(&["user_id"], &[user(42), user(44)])
        .await
        .expect("ids");
    assert_eq!(lists, vec![vec![1, 2, 3, 4], vec![5, 6]]);
    plain_sql(&s, "user_id = 44", 3).await;
    let got = items
        .fetch_by_index(&["user_id"], &user(42))
        .await
        .expect("42");
    assert_eq!(
        ids(&got),
        vec![1, 2, 4],
        "the moved row is not returned under 42"
    );
    assert!(got.iter().all(|r| r.user_id == 42));
    assert_eq!(s.cache.stats().index_stale, 1);
    assert_eq!(
        items
            .peek_index(&["user_id"], &[42.into()])
            .await
            .expect("key"),
        Some(vec![1, 2, 4]),
        "the entry was refilled"
    );
    // 44's entry does not list 3 (it was never told); its members all
    // match, so it is served as cached: the limit of what is not expired.
    let got = items
        .fetch_by_index(&["user_id"], &user(44))
        .await
        .expect("44");
    assert_eq!(ids(&got), vec![5, 6]);
    // Reading again costs no refill.
    let before = s.cache.stats();
    assert_eq!(
        ids(&items
            .fetch_by_index(&["user_id"], &user(42))
            .await
            .expect("42")),
        vec![1, 2, 4]
    );
    let after = s.cache.stats();
    assert_eq!(
        (after.index_stale, after.db_queries),
        (before.index_stale, before.db_queries)
    );
    s.teardown().await;
}

/// The drainer leaves an outbox row whose commit is still in flight (the
/// committer holds it between its commit and its tombstones) and drains
/// it once it is older than the grace.
async fn drainer_leaves_commits_in_flight(url: &str) {
    let Some(procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let rows: Vec<Item> = (1..=4).map(|id| item(id, 1)).collect();
    let hold = Arc::new(AtomicBool::new(false));
    let (committed_tx, committed_rx) = std::sync::mpsc::channel::<()>();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let go_rx = Arc::new(std::sync::Mutex::new(go_rx));
    let hooks = {
        let hold = hold.clone();
        let committed_tx = std::sync::Mutex::new(committed_tx);
        Hooks {
            after_commit: Some(Arc::new(move || {
                if hold.load(Ordering::Acquire) {
                    let _ = committed_tx.lock().expect("lock").send(());
                    let _ = go_rx.lock().expect("lock").recv();
                }
            })),
            ..Hooks::default()
        }
    };
    let Some(s) = Setup::new(url, &addrs, &rows, hooks).await else {
        return;
    };
    let s = Arc::new(s);
    hold.store(true, Ordering::Release);
    let writer = {
        let s = s.clone();
        tokio::task::spawn_blocking(move || {
            tokio::runtime::Handle::current().block_on(async {
                let it = s.items.clone();
                let table = s.table.clone();
                s.cache
                    .transaction(|tx| {
                        Box::pin(async move {
                            tx.touch(&it, &[2]).await?;
                            tx.execute(&format!("UPDATE {table} SET count = 1 WHERE id = 2"), &[])
                                .await?;
                            Ok(())
                        })
                    })
                    .await
                    .expect("commit")
            })
        })
    };
    tokio::task::spawn_blocking(move || committed_rx.recv())
        .await
        .expect("join")
        .expect("the writer committed");
    // The row is committed and its committer has not expired it yet.
    let drained = s
        .cache
        .drain_outbox_older_than(Duration::from_secs(60))
        .await
        .expect("drain");
    assert_eq!(drained, 0, "a commit in flight is left to its committer");
    assert_eq!(s.cache.stats().invalidated_keys, 0);
    let _ = go_tx.send(());
    let (_, done) = writer.await.expect("writer");
    assert!(done.expired);
    assert_eq!(
        s.cache.drain_outbox().await.expect("drain"),
        0,
        "the committer removed its row"
    );
    match Arc::try_unwrap(s) {
        Ok(s) => s.teardown().await,
        Err(_) => unreachable!("the writer joined"),
    }
}

/// An expire the cache does not take (its servers are down) goes into the
/// outbox; a drain once they are back expires the keys.
async fn expire_while_the_cache_is_down(url: &str) {
    let Some(mut procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let rows: Vec<Item> = (1..=4).map(|id| item(id, 42)).collect();
    let Some(s) = Setup::new(url, &addrs, &rows, Hooks::default()).await else {
        return;
    };
    assert_eq!(
        s.items.fetch(2).await.expect("fetch").map(|r| r.count),
        Some(20)
    );
    let ports: Vec<u16> = procs.iter().map(|p| p.port).collect();
    for p in &mut procs {
        p.kill();
    }
    plain_sql(&s, "count = 5", 2).await;
    let done = s.items.expire(&[2]).await.expect("expire");
    assert!(!done.expired, "the cache is down");
    let waiting: Vec<(i64,)> = sqlx::query_as(&format!(
        "SELECT COUNT(*) FROM {}",
        support::outbox_name(&s.cache)
    ))
    .fetch_all(&s.pool)
    .await
    .expect("count");
    assert_eq!(waiting, vec![(1,)], "the keys wait in the outbox");
    // The servers come back with what they had lost; the drain expires.
    let _back: Vec<_> = ports
        .iter()
        .map(|&p| servers::kura_on(p).expect("restart"))
        .collect();
    let mut drained = 0;
    for _ in 0..200 {
        drained = s.cache.drain_outbox().await.expect("drain");
        if drained > 0 {
            break;
        }
        // The client marked the servers down; its probe brings them back.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(drained, 1);
    assert_eq!(
        s.items.fetch(2).await.expect("fetch").map(|r| r.count),
        Some(5)
    );
    s.teardown().await;
}

per_database!(expire_after_plain_sql() => mysql_expire, postgres_expire);
per_database!(expire_while_the_cache_is_down() => mysql_expire_cache_down, postgres_expire_cache_down);
per_database!(stale_members_are_dropped() => mysql_stale_members, postgres_stale_members);
per_database!(drainer_leaves_commits_in_flight() => mysql_drainer_grace, postgres_drainer_grace);
