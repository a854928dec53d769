//! Embedded associations: a user fetched with its items
//! (`Cached::fetch_with` over `has_many("user_id")`), warm without the
//! database, and a child's write (an item moved to another user through
//! `RecordTx`) seen under both parents with nothing of the parents'
//! expired.

mod support;

use kura_record::{Error, Hooks, Kind, Record, Table};
use serde::Deserialize;
use support::{item, servers, Item, Setup};

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct User {
    id: i64,
    name: String,
}

impl Record for User {
    fn id(&self) -> i64 {
        self.id
    }
}

fn ids(items: &[Item]) -> Vec<i64> {
    items.iter().map(|r| r.id).collect()
}

async fn with_children(url: &str) {
    let Some(procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let rows: Vec<Item> = (1..=8).map(|id| item(id, 1 + id % 2)).collect();
    let Some(s) = Setup::new(url, &addrs, &rows, Hooks::default()).await else {
        return;
    };
    let users_table = format!("{}_users", s.table);
    let db = s.cache.db();
    db.execute(
        &format!("CREATE TABLE {users_table} (id BIGINT PRIMARY KEY, name VARCHAR(20) NOT NULL)"),
        &[],
    )
    .await
    .expect("create");
    db.execute(
        &format!("INSERT INTO {users_table} VALUES (1, 'one'), (2, 'two')"),
        &[],
    )
    .await
    .expect("insert");
    let users = s
        .cache
        .table::<User>(Table::new(&users_table, "id").column("name", Kind::Text))
        .await
        .expect("declared");
    let of_user = s.items.has_many("user_id").expect("an index on user_id");
    assert!(matches!(
        s.items.has_many("count"),
        Err(Error::Declaration(_))
    ));

    let got = users
        .fetch_with(&[2, 1, 2, 9], &of_user)
        .await
        .expect("cold");
    let shape: Vec<(i64, Vec<i64>)> = got.iter().map(|(u, c)| (u.id, ids(c))).collect();
    assert_eq!(shape, vec![(2, vec![1, 3, 5, 7]), (1, vec![2, 4, 6, 8])]);
    let before = s.cache.stats();
    let again = users.fetch_with(&[2, 1], &of_user).await.expect("warm");
    let after = s.cache.stats();
    assert_eq!(again, got);
    assert_eq!(after.db_queries, before.db_queries, "warm: no database");

    // Item 3 moves from user 2 to user 1: the child's write expires its
    // record and both users' lists, nothing of the users'.
    let it = s.items.clone();
    let table = s.table.clone();
    let (_, done) = s
        .cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.touch(&it, &[3]).await?;
                tx.execute(&format!("UPDATE {table} SET user_id = 1 WHERE id = 3"), &[])
                    .await?;
                Ok(())
            })
        })
        .await
        .expect("commit");
    assert!(done.expired);
    let got = users
        .fetch_with(&[1, 2], &of_user)
        .await
        .expect("after the move");
    let shape: Vec<(i64, Vec<i64>)> = got.iter().map(|(u, c)| (u.id, ids(c))).collect();
    assert_eq!(shape, vec![(1, vec![2, 3, 4, 6, 8]), (2, vec![1, 5, 7])]);
    assert!(got[0].1.iter().all(|i| i.user_id == 1));
    support::drop_table(&s.pool, &users_table).await;
    s.teardown().await;
}

per_database!(with_children() => mysql_fetch_with, postgres_fetch_with);
