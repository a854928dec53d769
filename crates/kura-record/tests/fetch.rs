//! Reads and invalidation end to end, on MariaDB and PostgreSQL, against
//! kura servers and memcached servers: misses read in one query and
//! written back, hits served without the database, index entries, and a
//! transaction that moves a row between index values expiring both.

mod support;

use kura_record::{Error, Hooks, IndexValue};
use support::{item, servers, Item, Setup};

fn rows() -> Vec<Item> {
    (1..=30).map(|id| item(id, 1 + id % 3)).collect()
}

async fn scenario(url: &str, memcached: bool) {
    let Some(procs) = servers::servers(memcached, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let Some(s) = Setup::new(url, &addrs, &rows(), Hooks::default()).await else {
        return;
    };
    let items = &s.items;

    // A miss: one query, one write-back; then a hit without the database.
    assert_eq!(items.fetch(5).await.expect("fetch"), Some(item(5, 3)));
    let st = s.cache.stats();
    assert_eq!(
        (st.record_misses, st.db_queries, st.fills_stored),
        (1, 1, 1)
    );
    assert_eq!(items.fetch(5).await.expect("fetch"), Some(item(5, 3)));
    let st = s.cache.stats();
    assert_eq!((st.record_hits, st.db_queries), (1, 1));

    // Many at once: the 29 misses in one query, written back; a missing
    // id is left out, order and duplicates follow the call.
    let mut ids: Vec<i64> = (1..=30).rev().collect();
    ids.push(999);
    ids.push(7);
    let got = items.fetch_multi(&ids).await.expect("fetch_multi");
    let want: Vec<Item> = (1..=30).rev().map(|id| item(id, 1 + id % 3)).collect();
    assert_eq!(got, want);
    let st = s.cache.stats();
    assert_eq!(st.db_queries, 2, "the misses in one query");
    assert_eq!(st.fills_stored, 31, "row 5, then 29 rows and 999's absence");
    assert!(items.peek_absent(999).await, "999's absence is cached");
    assert_eq!(items.fetch_multi(&ids).await.expect("again"), want);
    assert_eq!(
        s.cache.stats().db_queries,
        2,
        "none: 999's absence is cached too"
    );

    // An index: its entry is the list of ids; the second read is all hits.
    let user1: Vec<Item> = rows().into_iter().filter(|r| r.user_id == 1).collect();
    let by = |v: i64| vec![IndexValue::Int(v)];
    assert_eq!(
        items
            .fetch_by_index(&["user_id"], &by(1))
            .await
            .expect("idx"),
        user1
    );
    let before = s.cache.stats();
    assert_eq!(
        items
            .fetch_by_index(&["user_id"], &by(1))
            .await
            .expect("idx"),
        user1
    );
    let after = s.cache.stats();
    assert_eq!(after.db_queries, before.db_queries, "warm: no database");
    assert_eq!(after.index_hits, before.index_hits + 1);

    // Several values in one call, one of them with no rows (cached empty).
    let lists = items
        .fetch_multi_by_index(&["user_id"], &[by(2), by(77), by(1)])
        .await
        .expect("multi idx");
    assert_eq!(lists[0].len(), 10);
    assert!(lists[1].is_empty());
    assert_eq!(lists[2], user1);
    let composite = items
        .fetch_by_index(&["user_id", "kind"], &[1.into(), 3.into()])
        .await
        .expect("composite");
    assert_eq!(composite, vec![item(3, 1), item(24, 1)]);
    let named = items
        .fetch_by_index(&["name"], &["item-12".into()])
        .await
        .expect("text index");
    assert_eq!(named, vec![item(12, 1)]);

    // Move row 5 from user 3 to user 1, insert row 100 for user 77 (whose
    // empty list is cached), delete row 6: old and new entries expire.
    let table = s.table.clone();
    let it = items.clone();
    let (_, done) = s
        .cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.touch(&it, &[5, 6]).await?;
                tx.execute(&format!("UPDATE {table} SET user_id = 1 WHERE id = 5"), &[]).await?;
                tx.execute(&format!("DELETE FROM {table} WHERE id = 6"), &[]).await?;
                tx.execute(&format!(
                    "INSERT INTO {table} (id, user_id, kind, count, name) VALUES (100, 77, 2, 1, 'new')"
                ), &[]).await?;
                tx.touch(&it, &[100]).await?;
                Ok(())
            })
        })
        .await
        .expect("commit");
    assert!(done.expired);
    let mut moved = item(5, 1);
    moved.user_id = 1;
    assert_eq!(items.fetch(5).await.expect("fetch"), Some(moved.clone()));
    assert_eq!(items.fetch(6).await.expect("fetch"), None);
    let u1 = items
        .fetch_by_index(&["user_id"], &by(1))
        .await
        .expect("u1");
    assert!(u1.contains(&moved), "the new value's entry was expired");
    let u3 = items
        .fetch_by_index(&["user_id"], &by(3))
        .await
        .expect("u3");
    assert!(
        u3.iter().all(|r| r.id != 5 && r.id != 6),
        "the old value's entry was expired"
    );
    let u77 = items
        .fetch_by_index(&["user_id"], &by(77))
        .await
        .expect("u77");
    assert_eq!(u77.iter().map(|r| r.id).collect::<Vec<_>>(), vec![100]);
    let outbox: i64 = sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM {}",
        support::outbox_name(&s.cache)
    ))
    .fetch_one(&s.pool)
    .await
    .expect("count the outbox");
    assert_eq!(
        outbox, 0,
        "the outbox row is removed once the cache took the tombstones"
    );

    // A failing body rolls back and expires nothing.
    let table = s.table.clone();
    let it = items.clone();
    let r = s
        .cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.touch(&it, &[7]).await?;
                tx.execute(&format!("UPDATE {table} SET count = -1 WHERE id = 7"), &[])
                    .await?;
                Err::<(), _>(Error::write("the application changed its mind"))
            })
        })
        .await;
    assert!(matches!(r, Err(Error::Write(_))));
    assert_eq!(items.fetch(7).await.expect("fetch"), Some(item(7, 2)));

    // Bad input gets clear errors before anything is sent.
    assert!(matches!(
        items.fetch_by_index(&["kind"], &by(1)).await,
        Err(Error::Declaration(_))
    ));
    assert!(matches!(
        items.fetch_by_index(&["user_id"], &["x".into()]).await,
        Err(Error::Declaration(_))
    ));
    assert!(matches!(
        items
            .fetch_by_index(&["name"], &["y".repeat(300).into()])
            .await,
        Err(Error::KeyTooLong(_))
    ));
    s.teardown().await;
}

per_database!(scenario(false) => mysql_kura, postgres_kura);
per_database!(scenario(true) => mysql_memcached, postgres_memcached);
