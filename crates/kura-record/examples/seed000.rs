//! Seed 000's scenario, runnable: a mobile game's `users` and `user_items`
//! (Rails-shaped: timestamps, a `user_id` index, a DECIMAL balance, a
//! boolean), a cold login and a warm one, an item updated, an item moved
//! to another user (once through `RecordTx`, once in plain SQL and
//! expired), an item deleted and a missing user, each checked against the
//! database. Against MariaDB and PostgreSQL (`$KURA_RECORD_MYSQL`,
//! `$KURA_RECORD_POSTGRES`, or the URLs given), with a kura server in the
//! process. CI runs it (.ci/run, step `record-seed000`).
//!
//! cargo run -p kura-record --example seed000 [-- URL...]

use std::error::Error as StdError;

use chrono::NaiveDateTime;
use kura_client::Client;
use kura_record::{Backend, Cached, Config, Kind, Record, RecordCache, Table};
use serde::Deserialize;

type Res<T> = Result<T, Box<dyn StdError>>;

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct User {
    id: i64,
    name: String,
    level: i32,
    coins: String,
    banned: bool,
    created_at: NaiveDateTime,
    updated_at: NaiveDateTime,
}

impl Record for User {
    fn id(&self) -> i64 {
        self.id
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
struct UserItem {
    id: i64,
    user_id: i64,
    item_id: i32,
    count: i32,
    created_at: NaiveDateTime,
    updated_at: NaiveDateTime,
}

impl Record for UserItem {
    fn id(&self) -> i64 {
        self.id
    }
}

fn check(what: &str, ok: bool) -> Res<()> {
    println!("  {} {what}", if ok { "ok  " } else { "FAIL" });
    if ok {
        Ok(())
    } else {
        Err(format!("seed 000 scenario: {what}").into())
    }
}

async fn create(cache: &RecordCache, users: &str, items: &str) -> Res<()> {
    let (ts, boolean) = match cache.backend() {
        Backend::MySql => ("DATETIME(6)", "BOOLEAN"),
        Backend::Postgres => ("TIMESTAMP(6)", "BOOLEAN"),
    };
    let db = cache.db();
    db.execute(
        &format!(
            "CREATE TABLE {users} (id BIGINT PRIMARY KEY, name VARCHAR(100) NOT NULL, \
             level INT NOT NULL, coins DECIMAL(20,2) NOT NULL, banned {boolean} NOT NULL, \
             created_at {ts} NOT NULL, updated_at {ts} NOT NULL)"
        ),
        &[],
    )
    .await?;
    db.execute(
        &format!(
            "CREATE TABLE {items} (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, \
             item_id INT NOT NULL, count INT NOT NULL, created_at {ts} NOT NULL, \
             updated_at {ts} NOT NULL)"
        ),
        &[],
    )
    .await?;
    db.execute(&format!("CREATE INDEX {items}_u ON {items} (user_id)"), &[])
        .await?;
    let at = "'2026-12-01 09:00:00.123456'";
    db.execute(
        &format!(
            "INSERT INTO {users} VALUES (42, 'hikari', 57, 12345.67, FALSE, {at}, {at}), \
             (44, 'sora', 12, 0.50, FALSE, {at}, {at})"
        ),
        &[],
    )
    .await?;
    let rows: Vec<String> = (1..=103)
        .map(|id| {
            let user = if id <= 100 { 42 } else { 44 };
            format!(
                "({id}, {user}, {}, {}, {at}, {at})",
                1000 + id % 37,
                id % 9 + 1
            )
        })
        .collect();
    db.execute(
        &format!("INSERT INTO {items} VALUES {}", rows.join(", ")),
        &[],
    )
    .await?;
    Ok(())
}

/// What the database holds for a user's items, by id.
async fn db_items(cache: &RecordCache, items: &str, user: i64) -> Res<Vec<UserItem>> {
    Ok(cache
        .db()
        .fetch_as(
            &format!("SELECT * FROM {items} WHERE user_id = ? ORDER BY id"),
            &[user.into()],
        )
        .await?)
}

async fn login(
    users: &Cached<User>,
    of: &kura_record::HasMany<UserItem>,
    id: i64,
) -> Res<Option<(User, Vec<UserItem>)>> {
    Ok(users.fetch_with(&[id], of).await?.pop())
}

async fn scenario(url: &str, addr: &str) -> Res<()> {
    let client = Client::builder([addr]).build()?;
    let tag = std::process::id();
    let cfg = Config {
        outbox_table: format!("seed000_outbox_{tag}"),
        ..Config::default()
    };
    let cache = RecordCache::connect(url, client, cfg).await?;
    println!("{:?} ({url})", cache.backend());
    let (u, i) = (
        format!("seed000_users_{tag}"),
        format!("seed000_items_{tag}"),
    );
    create(&cache, &u, &i).await?;
    let users = cache
        .table::<User>(
            Table::new(&u, "id")
                .column("name", Kind::Text)
                .column("level", Kind::Int)
                .column("coins", Kind::Other)
                .column("banned", Kind::Other)
                .column("created_at", Kind::Other)
                .column("updated_at", Kind::Other),
        )
        .await?;
    let items = cache
        .table::<UserItem>(
            Table::new(&i, "id")
                .column("user_id", Kind::Int)
                .column("item_id", Kind::Int)
                .column("count", Kind::Int)
                .column("created_at", Kind::Other)
                .column("updated_at", Kind::Other)
                .index(&["user_id"]),
        )
        .await?;
    let of_user = items.has_many("user_id")?;

    let s0 = cache.stats();
    let (user, mine) = login(&users, &of_user, 42).await?.ok_or("user 42")?;
    let s1 = cache.stats();
    check(
        &format!(
            "cold login: {} with {} items, {} database queries, {} write-back fills",
            user.name,
            mine.len(),
            s1.db_queries - s0.db_queries,
            s1.fills_stored - s0.fills_stored
        ),
        mine == db_items(&cache, &i, 42).await? && user.coins == "12345.67",
    )?;
    let (_, again) = login(&users, &of_user, 42).await?.ok_or("user 42")?;
    let s2 = cache.stats();
    check(
        &format!(
            "warm login: {} database queries",
            s2.db_queries - s1.db_queries
        ),
        again == mine && s2.db_queries == s1.db_queries,
    )?;

    // An update through RecordTx (the item count and its updated_at).
    let it = items.clone();
    let t = i.clone();
    cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.touch(&it, &[5]).await?;
                let sql = format!("UPDATE {t} SET count = count + 10, updated_at = ? WHERE id = ?");
                let now = chrono::Utc::now().naive_utc();
                tx.execute(&sql, &[now.into(), 5.into()]).await?;
                Ok(())
            })
        })
        .await?;
    let (_, mine) = login(&users, &of_user, 42).await?.ok_or("user 42")?;
    check(
        "an item updated in a transaction: read back new",
        mine == db_items(&cache, &i, 42).await?,
    )?;

    // A move through RecordTx, and one in plain SQL then expired.
    let it = items.clone();
    let t = i.clone();
    cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.touch(&it, &[7]).await?;
                tx.execute(&format!("UPDATE {t} SET user_id = 44 WHERE id = 7"), &[])
                    .await?;
                Ok(())
            })
        })
        .await?;
    cache
        .db()
        .execute(&format!("UPDATE {i} SET user_id = 44 WHERE id = 8"), &[])
        .await?;
    items.expire(&[8]).await?;
    let (_, mine) = login(&users, &of_user, 42).await?.ok_or("user 42")?;
    let (_, theirs) = login(&users, &of_user, 44).await?.ok_or("user 44")?;
    check(
        "items moved to another user (a transaction; plain SQL and expire)",
        mine == db_items(&cache, &i, 42).await?
            && theirs == db_items(&cache, &i, 44).await?
            && theirs.iter().any(|x| x.id == 7)
            && theirs.iter().any(|x| x.id == 8),
    )?;

    // A delete.
    let it = items.clone();
    let t = i.clone();
    cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.touch(&it, &[9]).await?;
                tx.execute(&format!("DELETE FROM {t} WHERE id = 9"), &[])
                    .await?;
                Ok(())
            })
        })
        .await?;
    let (_, mine) = login(&users, &of_user, 42).await?.ok_or("user 42")?;
    check(
        "an item deleted",
        mine == db_items(&cache, &i, 42).await? && mine.iter().all(|x| x.id != 9),
    )?;

    // A user who does not exist: one query, then none (cached absence).
    let a = cache.stats();
    let first = users.fetch(999).await?;
    let b = cache.stats();
    let second = users.fetch(999).await?;
    let c = cache.stats();
    check(
        &format!(
            "a missing user: {} query, then {}",
            b.db_queries - a.db_queries,
            c.db_queries - b.db_queries
        ),
        first.is_none() && second.is_none() && c.db_queries == b.db_queries,
    )?;
    for name in [&u, &i, &cache.config().outbox_table.clone()] {
        cache
            .db()
            .execute(&format!("DROP TABLE {name}"), &[])
            .await?;
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Res<()> {
    let mut urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        urls.push(
            std::env::var("KURA_RECORD_MYSQL")
                .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into()),
        );
        urls.push(
            std::env::var("KURA_RECORD_POSTGRES")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into()),
        );
    }
    let config = kura_server::ServerConfig {
        port: 0,
        threads: 1,
        ..Default::default()
    };
    let server = kura_server::Server::bind(config)?;
    let addr = server.local_addr().ok_or("no TCP address")?.to_string();
    let server = server.start()?;
    for url in &urls {
        scenario(url, &addr).await?;
    }
    server.shutdown();
    println!("seed 000 scenario: passed on {} database(s)", urls.len());
    Ok(())
}
