//! The fill lock: 20 readers that miss the same record at once, first on
//! an absent key (the lock taken with ADD), then right after an
//! invalidation (the lock taken with CAS over the tombstone): one of them
//! reads the database, the others wait for its value.

mod support;

use std::time::Duration;

use futures_util::future::join_all;
use kura_record::{Config, Hooks};
use support::{item, servers, Item};

async fn stampede(url: &str) {
    let Some(procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let Some(pool) = support::pool(url).await else {
        return;
    };
    let table = support::unique("lock");
    let rows: Vec<Item> = (1..=10).map(|id| item(id, 1)).collect();
    support::create_items(&pool, &table, &rows).await;
    let cfg = Config {
        outbox_table: support::unique("outbox"),
        // Generous, so that a busy machine does not turn a wait into a read.
        fill_lock_wait: Duration::from_secs(10),
        ..Config::default()
    };
    let cache = support::cache_with(&pool, &addrs, cfg, Hooks::default()).await;
    let items = cache
        .table::<Item>(support::items_table(&table))
        .await
        .expect("declaration");

    let all = join_all((0..20).map(|_| items.fetch_locked(4))).await;
    assert!(all
        .iter()
        .all(|r| matches!(r, Ok(Some(i)) if *i == item(4, 1))));
    let st = cache.stats();
    assert_eq!(st.db_queries, 1, "one reader read the database: {st:?}");
    assert_eq!(st.fills_stored, 1);

    // Invalidate: the key now holds a tombstone.
    let it = items.clone();
    let t = table.clone();
    cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.touch(&it, &[4]).await?;
                tx.execute(&format!("UPDATE {t} SET count = 99 WHERE id = 4"), &[])
                    .await?;
                Ok(())
            })
        })
        .await
        .expect("commit");
    let all = join_all((0..20).map(|_| items.fetch_locked(4))).await;
    assert!(all
        .iter()
        .all(|r| matches!(r, Ok(Some(i)) if i.count == 99)));
    let st = cache.stats();
    assert_eq!(st.db_queries, 2, "one reader read the database: {st:?}");
    assert_eq!(st.fills_stored, 2);
    // A row that does not exist: the filler leaves a tombstone and the
    // others stop waiting.
    let none = join_all((0..5).map(|_| items.fetch_locked(777))).await;
    assert!(none.iter().all(|r| matches!(r, Ok(None))));
    support::drop_table(&pool, &table).await;
    support::drop_outbox(&cache).await;
}

per_database!(stampede() => mysql_fill_lock, postgres_fill_lock);
