//! The cache down or silent: reads go to the database within the
//! timeout, writes commit and leave their keys in the outbox, drained
//! once the cache is back. The database down: cached records and index
//! entries are served, a miss is a clear error. Both are counted.

mod support;

use std::time::{Duration, Instant};

use kura_record::{Config, Db, Error, Hooks, RecordCache};
use support::{item, servers, Item, Setup};

fn rows() -> Vec<Item> {
    (1..=10).map(|id| item(id, 1 + id % 2)).collect()
}

async fn set_count(s: &Setup, id: i64, count: i64) -> kura_record::Committed {
    let table = s.table.clone();
    let it = s.items.clone();
    s.cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.touch(&it, &[id]).await?;
                tx.execute(
                    &format!("UPDATE {table} SET count = {count} WHERE id = {id}"),
                    &[],
                )
                .await?;
                Ok(())
            })
        })
        .await
        .expect("the write commits whatever the cache does")
        .1
}

async fn outbox_rows(s: &Setup) -> i64 {
    sqlx::query_scalar(&format!(
        "SELECT COUNT(*) FROM {}",
        support::outbox_name(&s.cache)
    ))
    .fetch_one(&s.pool)
    .await
    .expect("count")
}

async fn cache_down(url: &str) {
    let Some(mut procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let Some(s) = Setup::new(url, &addrs, &rows(), Hooks::default()).await else {
        return;
    };
    assert_eq!(s.items.fetch(5).await.expect("fetch"), Some(item(5, 2)));
    for p in &mut procs {
        p.kill();
    }
    // Reads: from the database, counted.
    assert_eq!(s.items.fetch(5).await.expect("fetch"), Some(item(5, 2)));
    let u1 = s
        .items
        .fetch_by_index(&["user_id"], &[1.into()])
        .await
        .expect("idx");
    assert_eq!(u1.len(), 5);
    assert!(s.cache.stats().cache_errors >= 2);
    // A write commits; its keys wait in the outbox.
    let done = set_count(&s, 5, 4242).await;
    assert!(!done.expired);
    assert_eq!(outbox_rows(&s).await, 1);
    assert_eq!(
        s.items.fetch(5).await.expect("fetch").expect("row").count,
        4242
    );
    // The servers come back (on the same ports): a drain expires the keys.
    let _back: Vec<_> = procs
        .iter()
        .map(|p| servers::kura_on(p.port).expect("restart"))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(15);
    while s.cache.drain_outbox().await.expect("drain") == 0 {
        assert!(Instant::now() < deadline, "the drain never got through");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(outbox_rows(&s).await, 0);
    s.teardown().await;
}

async fn cache_silent(url: &str) {
    let addrs = vec![
        servers::silent_server().to_string(),
        servers::silent_server().to_string(),
    ];
    let Some(s) = Setup::new(url, &addrs, &rows(), Hooks::default()).await else {
        return;
    };
    assert_eq!(s.items.fetch(3).await.expect("fetch"), Some(item(3, 2)));
    let many = s
        .items
        .fetch_multi(&[1, 2, 3, 4])
        .await
        .expect("fetch_multi");
    assert_eq!(many.len(), 4);
    let done = set_count(&s, 3, 7).await;
    assert!(!done.expired);
    assert_eq!(
        s.items.fetch(3).await.expect("fetch").expect("row").count,
        7
    );
    let st = s.cache.stats();
    assert!(
        st.cache_errors >= 3 && st.invalidation_errors == 1,
        "{st:?}"
    );
    assert_eq!(outbox_rows(&s).await, 1);
    s.teardown().await;
}

async fn database_down(url: &str) {
    let Some(procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let Some(s) = Setup::new(url, &addrs, &rows(), Hooks::default()).await else {
        return;
    };
    assert_eq!(
        s.items
            .fetch_by_index(&["user_id"], &[1.into()])
            .await
            .expect("idx")
            .len(),
        5
    );
    // Another process of the same application whose database is gone:
    // nothing listens on its port.
    let port = servers::free_port();
    let dead = match support::backend_of(&s.pool) {
        kura_record::Backend::MySql => format!("mysql://root@127.0.0.1:{port}/test"),
        kura_record::Backend::Postgres => format!("postgres://postgres@127.0.0.1:{port}/test"),
    };
    let db = match support::backend_of(&s.pool) {
        kura_record::Backend::MySql => Db::MySql(
            sqlx::mysql::MySqlPoolOptions::new()
                .acquire_timeout(Duration::from_millis(500))
                .connect_lazy(&dead)
                .expect("lazy pool"),
        ),
        kura_record::Backend::Postgres => Db::Postgres(
            sqlx::postgres::PgPoolOptions::new()
                .acquire_timeout(Duration::from_millis(500))
                .connect_lazy(&dead)
                .expect("lazy pool"),
        ),
    };
    // The same scope as the first process (the database's name).
    let cfg = Config {
        db_timeout: Duration::from_secs(1),
        scope: s.cache.config().scope.clone(),
        ..Config::default()
    };
    let other = RecordCache::new(db, support::client(&addrs), cfg);
    let items = other
        .table::<Item>(support::items_table(&s.table))
        .await
        .expect("declaration");
    assert_eq!(items.fetch(4).await.expect("cached"), Some(item(4, 1)));
    let u1 = items
        .fetch_by_index(&["user_id"], &[1.into()])
        .await
        .expect("cached");
    assert_eq!(
        u1.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![2, 4, 6, 8, 10]
    );
    let miss = items.fetch(3).await;
    let err = miss.expect_err("a miss with the database down");
    assert!(
        matches!(err, Error::Database { .. } | Error::DatabaseTimeout { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("database unavailable"), "{err}");
    let many = items.fetch_multi(&[2, 3]).await;
    assert!(many.is_err(), "a partial result is not returned as whole");
    let st = other.stats();
    assert_eq!(st.db_errors, 2, "{st:?}");
    assert!(st.record_hits >= 6);
    s.teardown().await;
}

per_database!(cache_down() => mysql_cache_down, postgres_cache_down);
per_database!(cache_silent() => mysql_cache_silent, postgres_cache_silent);
per_database!(database_down() => mysql_database_down, postgres_database_down);
