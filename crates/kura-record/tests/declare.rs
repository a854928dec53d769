//! What identity_cache's users look for first: a unique index read as one
//! record, a table's own TTL, two databases of one schema kept apart in
//! one cache (the scope), the pool's settings from `connect`.

mod support;

use std::time::Duration;

use kura_record::{Config, Error, Hooks, PoolConfig, RecordCache};
use support::{item, servers, Item, Setup};

/// The TTL the server holds for `key` (meta `mg <key> t`).
fn ttl_of(addr: &str, key: &str) -> Option<i64> {
    use std::io::{BufRead, BufReader, Write};
    let mut c = std::net::TcpStream::connect(addr).expect("connect");
    c.write_all(format!("mg {key} t\r\n").as_bytes())
        .expect("write");
    let mut line = String::new();
    BufReader::new(c).read_line(&mut line).expect("read");
    line.split_whitespace()
        .find_map(|t| t.strip_prefix('t')?.parse().ok())
}

async fn declarations(url: &str) {
    let Some(procs) = servers::servers(false, 1) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let rows: Vec<Item> = (1..=5).map(|id| item(id, 1)).collect();
    let Some(s) = Setup::new(url, &addrs, &rows, Hooks::default()).await else {
        return;
    };

    // A unique index on name, and a TTL of the table's own.
    let by_name = s
        .cache
        .table::<Item>(
            support::items_table(&s.table)
                .unique_index(&["kind", "name"])
                .ttl(300),
        )
        .await
        .expect("declared");
    let three = by_name
        .fetch_by_unique(&["kind", "name"], &[3.into(), "item-3".into()])
        .await
        .expect("unique");
    assert_eq!(three, Some(item(3, 1)));
    let none = by_name
        .fetch_by_unique(&["kind", "name"], &[3.into(), "item-4".into()])
        .await
        .expect("unique");
    assert_eq!(none, None);
    assert!(matches!(
        by_name.fetch_by_unique(&["name"], &["item-3".into()]).await,
        Err(Error::Declaration(_))
    ));
    let ttl = ttl_of(&addrs[0], &by_name.record_key(3)).expect("cached");
    assert!(
        (1..=300).contains(&ttl),
        "the table's TTL, not two days: {ttl}"
    );

    // Another scope (another database of the same schema): its own keys.
    let cfg = Config {
        scope: Some("another-database".into()),
        outbox_table: support::outbox_name(&s.cache),
        ..Config::default()
    };
    let other = RecordCache::new(s.cache.db().clone(), support::client(&addrs), cfg);
    let theirs = other
        .table::<Item>(support::items_table(&s.table))
        .await
        .expect("declared");
    assert_ne!(theirs.record_key(3), s.items.record_key(3));

    // The pool's settings.
    let pool = PoolConfig {
        max_connections: 3,
        acquire_timeout: Duration::from_secs(2),
        ..PoolConfig::default()
    };
    let cfg = Config {
        pool,
        outbox_table: support::outbox_name(&s.cache),
        ..Config::default()
    };
    let third = RecordCache::connect(url, support::client(&addrs), cfg)
        .await
        .expect("connect");
    let max = match third.db() {
        kura_record::Db::MySql(p) => p.options().get_max_connections(),
        kura_record::Db::Postgres(p) => p.options().get_max_connections(),
    };
    assert_eq!(max, 3);
    s.teardown().await;
}

per_database!(declarations() => mysql_declarations, postgres_declarations);
