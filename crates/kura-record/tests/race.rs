//! The fill race, made deterministic: a reader misses, reads the old row
//! and is held before its write-back; a writer commits and invalidates;
//! the reader's write-back must be refused (ADD over the tombstone, or
//! CAS over a tombstone that changed) and the next fetch returns the new
//! row. The same for index entries. A control run without the writer
//! shows the held fill does store.

mod support;

use futures_util::FutureExt;
use kura_record::IndexValue;
use support::gate::Gate;
use support::{item, servers, Item, Setup};

async fn update(s: &Setup, id: i64, set: &str) {
    let table = s.table.clone();
    let it = s.items.clone();
    let set = set.to_string();
    let (_, done) = s
        .cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.touch(&it, &[id]).await?;
                tx.execute(&format!("UPDATE {table} SET {set} WHERE id = {id}"), &[])
                    .await?;
                tx.touch(&it, &[id]).await?;
                Ok(())
            })
        })
        .await
        .expect("commit");
    assert!(done.expired);
}

/// The record race; `tombstoned`: the key holds a tombstone at the start
/// (CAS path) rather than nothing (ADD path); `writer`: whether the
/// writer runs (false: the control).
async fn record_race(url: &str, memcached: bool, tombstoned: bool, writer: bool) {
    let Some(procs) = servers::servers(memcached, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let gate = Gate::default();
    let rows: Vec<Item> = (1..=10).map(|id| item(id, 1)).collect();
    let Some(s) = Setup::new(url, &addrs, &rows, gate.hooks()).await else {
        return;
    };
    if tombstoned {
        update(&s, 5, "count = count").await;
    }
    let (paused, go) = gate.arm();
    let reader = {
        let items = s.items.clone();
        tokio::spawn(async move { items.fetch(5).await })
    };
    paused.await.expect("the reader reached its write-back");
    if writer {
        update(&s, 5, "count = 555").await;
    }
    let _ = go.send(());
    let old = reader.await.expect("reader task").expect("fetch");
    assert_eq!(old, Some(item(5, 1)), "the reader read before the commit");
    let st = s.cache.stats();
    if writer {
        assert_eq!((st.fills_stored, st.fills_refused), (0, 1), "{st:?}");
        let new = s.items.fetch(5).await.expect("fetch").expect("row");
        assert_eq!(new.count, 555, "the old row was not put back");
    } else {
        assert_eq!((st.fills_stored, st.fills_refused), (1, 0), "{st:?}");
        let before = s.cache.stats().db_queries;
        assert_eq!(s.items.fetch(5).await.expect("fetch"), Some(item(5, 1)));
        assert_eq!(s.cache.stats().db_queries, before, "served from the cache");
    }
    s.teardown().await;
}

/// The index race: the reader reads user 1's ids, a writer inserts a row
/// for user 1 and commits before the reader writes its list back.
async fn index_race(url: &str, memcached: bool, tombstoned: bool) {
    let Some(procs) = servers::servers(memcached, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let gate = Gate::default();
    let rows: Vec<Item> = (1..=10).map(|id| item(id, 1 + id % 2)).collect();
    let Some(s) = Setup::new(url, &addrs, &rows, gate.hooks()).await else {
        return;
    };
    if tombstoned {
        update(&s, 1, "count = count").await; // row 1 is user 2's
        update(&s, 2, "count = count").await; // row 2 is user 1's: its entry tombstoned
    }
    let (paused, go) = gate.arm();
    let reader = {
        let items = s.items.clone();
        tokio::spawn(async move {
            items
                .ids_by_index(&["user_id"], &[vec![IndexValue::Int(1)]])
                .await
        })
    };
    paused.await.expect("the reader reached its write-back");
    // Row 1 moves from user 2 to user 1.
    update(&s, 1, "user_id = 1").await;
    let _ = go.send(());
    let old = reader.await.expect("reader task").expect("ids");
    assert_eq!(old, vec![vec![2, 4, 6, 8, 10]]);
    let st = s.cache.stats();
    assert_eq!((st.fills_stored, st.fills_refused), (0, 1), "{st:?}");
    let now = s
        .items
        .fetch_by_index(&["user_id"], &[1.into()])
        .await
        .expect("index");
    let ids: Vec<i64> = now.iter().map(|r| r.id).collect();
    assert_eq!(
        ids,
        vec![1, 2, 4, 6, 8, 10],
        "the old list was not put back"
    );
    s.teardown().await;
}

/// Cached absence is as race-safe as a row: a reader that found no row
/// 50 is held before it caches the absence; a writer inserts row 50 and
/// commits; the absence is refused and the next fetch finds the row.
async fn absence_race(url: &str, memcached: bool) {
    let Some(procs) = servers::servers(memcached, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let gate = Gate::default();
    let rows: Vec<Item> = (1..=10).map(|id| item(id, 1)).collect();
    let Some(s) = Setup::new(url, &addrs, &rows, gate.hooks()).await else {
        return;
    };
    let (paused, go) = gate.arm();
    let reader = {
        let items = s.items.clone();
        tokio::spawn(async move { items.fetch(50).await })
    };
    paused.await.expect("the reader reached its write-back");
    let table = s.table.clone();
    let it = s.items.clone();
    let (_, done) = s
        .cache
        .transaction(|tx| {
            Box::pin(async move {
                let sql = format!(
                    "INSERT INTO {table} (id, user_id, kind, count, name) VALUES (50, 1, 1, 5, 'new')"
                );
                tx.execute(&sql, &[]).await?;
                tx.touch(&it, &[50]).await?;
                Ok(())
            })
        })
        .await
        .expect("commit");
    assert!(done.expired);
    let _ = go.send(());
    let none = reader.await.expect("reader task").expect("fetch");
    assert_eq!(none, None, "the reader read before the insert");
    let st = s.cache.stats();
    assert_eq!((st.fills_stored, st.fills_refused), (0, 1), "{st:?}");
    assert!(!s.items.peek_absent(50).await, "the absence was not cached");
    let row = s
        .items
        .fetch(50)
        .await
        .expect("fetch")
        .expect("the new row");
    assert_eq!(row.count, 5);
    // A missing id's absence is cached: no query the second time.
    assert_eq!(s.items.fetch(77).await.expect("fetch"), None);
    let before = s.cache.stats().db_queries;
    assert_eq!(s.items.fetch(77).await.expect("fetch"), None);
    assert_eq!(s.cache.stats().db_queries, before, "77's absence is cached");
    s.teardown().await;
}

macro_rules! on_both {
    ($($name:ident => $body:expr;)*) => {
        mod mysql {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let url = support::mysql_url();
                let f: &dyn Fn(String) -> futures_util::future::BoxFuture<'static, ()> = &$body;
                f(url).await;
            })*
        }
        mod postgres {
            use super::*;
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let url = support::postgres_url();
                let f: &dyn Fn(String) -> futures_util::future::BoxFuture<'static, ()> = &$body;
                f(url).await;
            })*
        }
    };
}

on_both! {
    record_add_refused => |u| async move { record_race(&u, false, false, true).await }.boxed();
    record_cas_refused => |u| async move { record_race(&u, false, true, true).await }.boxed();
    record_control_stores => |u| async move { record_race(&u, false, true, false).await }.boxed();
    record_add_refused_memcached => |u| async move { record_race(&u, true, false, true).await }.boxed();
    record_cas_refused_memcached => |u| async move { record_race(&u, true, true, true).await }.boxed();
    index_add_refused => |u| async move { index_race(&u, false, false).await }.boxed();
    index_cas_refused => |u| async move { index_race(&u, false, true).await }.boxed();
    index_cas_refused_memcached => |u| async move { index_race(&u, true, true).await }.boxed();
    absence_refused => |u| async move { absence_race(&u, false).await }.boxed();
    absence_refused_memcached => |u| async move { absence_race(&u, true).await }.boxed();
}
