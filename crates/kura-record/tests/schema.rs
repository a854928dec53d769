//! A schema change moves the keys: after a column is added (to the table
//! and to the declaration), the old entries are not read; the new
//! declaration reads the row again, with the column.

mod support;

use kura_record::{Hooks, Kind, Record};
use serde::{Deserialize, Serialize};
use support::{item, servers, Item, Setup};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct ItemV2 {
    id: i64,
    user_id: i64,
    kind: i64,
    count: i64,
    name: String,
    rarity: i64,
}

impl Record for ItemV2 {
    fn id(&self) -> i64 {
        self.id
    }
}

async fn schema(url: &str) {
    let Some(procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let rows: Vec<Item> = (1..=10).map(|id| item(id, 1)).collect();
    let Some(s) = Setup::new(url, &addrs, &rows, Hooks::default()).await else {
        return;
    };
    assert_eq!(s.items.fetch(3).await.expect("fetch"), Some(item(3, 1)));
    assert_eq!(
        s.items
            .fetch_by_index(&["user_id"], &[1.into()])
            .await
            .expect("idx")
            .len(),
        10
    );

    sqlx::query(&format!(
        "ALTER TABLE {} ADD COLUMN rarity BIGINT NOT NULL DEFAULT 4",
        s.table
    ))
    .execute(&s.pool)
    .await
    .expect("add a column");
    let v2 = s
        .cache
        .table::<ItemV2>(support::items_table(&s.table).column("rarity", Kind::Int))
        .await
        .expect("declaration");
    assert_ne!(
        v2.record_key(3),
        s.items.record_key(3),
        "the digest moved the key"
    );
    assert_ne!(
        v2.index_key(&["user_id"], &[1.into()]).expect("key"),
        s.items.index_key(&["user_id"], &[1.into()]).expect("key")
    );
    let before = s.cache.stats();
    let got = v2.fetch(3).await.expect("fetch").expect("row");
    assert_eq!(got.rarity, 4);
    let list = v2
        .fetch_by_index(&["user_id"], &[1.into()])
        .await
        .expect("idx");
    assert!(list.iter().all(|r| r.rarity == 4) && list.len() == 10);
    let after = s.cache.stats();
    // One hit: row 3, which the new declaration itself filled just before.
    assert_eq!(
        after.record_hits,
        before.record_hits + 1,
        "no old entry was read"
    );
    assert_eq!(after.index_hits, before.index_hits);
    assert_eq!(
        after.db_queries,
        before.db_queries + 3,
        "record, index, its records"
    );
    // The old declaration's entries are still there, untouched and unused.
    assert_eq!(s.items.peek(3).await, Some(item(3, 1)));
    s.teardown().await;
}

per_database!(schema() => mysql_added_column, postgres_added_column);
