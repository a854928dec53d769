//! Every column type real schemas use, on MariaDB and on PostgreSQL: a
//! table with one of each, a row of values at their edges and a row of
//! NULLs, read through the cache (cold from the database, then warm from
//! the cache) and directly with sqlx's own decoding: equal, value for
//! value. A column kura-record cannot represent is refused when its table
//! is declared, with its name and SQL type.

mod support;

use kura_record::{Error, Hooks, Kind, Record, Table};
use support::rows::{MyDirect, MyRow, PgDirect, PgRow};
use support::servers;

const MY_COLUMNS: &str = "id BIGINT PRIMARY KEY, ti TINYINT, si SMALLINT, mi MEDIUMINT, i INT, \
    bi BIGINT, tu TINYINT UNSIGNED, su SMALLINT UNSIGNED, iu INT UNSIGNED, bu BIGINT UNSIGNED, \
    flag BOOLEAN, price DECIMAL(30,6), f FLOAT, d DOUBLE, c CHAR(4), vc VARCHAR(50), txt TEXT, \
    vb VARBINARY(16), bl BLOB, day DATE, tm TIME(6), dt DATETIME(6), ts TIMESTAMP(6) NULL, \
    js JSON, en ENUM('common','rare'), uid UUID";

const MY_VALUES: &str = "(1, -128, -32768, -8388608, -2147483648, -9223372036854775808, 255, 65535, \
    4294967295, 18446744073709551615, TRUE, -123456789012345678.123456, 1.5, -0.1, 'ab', \
    'h\u{e9}llo \u{65e5}\u{672c}', 'a long text', X'00FF10', X'DEADBEEF', '2024-02-29', \
    '23:59:58.123456', '2024-02-29 23:59:58.123456', '2024-03-01 01:02:03.5', \
    '{\"a\": [1, 2, {\"b\": null}], \"c\": \"d\"}', 'rare', '123e4567-e89b-12d3-a456-426614174000'), \
    (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)";

fn declaration(name: &str, columns: &str) -> Table {
    columns
        .split(", ")
        .skip(1)
        .filter_map(|c| c.split_whitespace().next())
        .filter(|c| c.chars().all(|x| x.is_ascii_alphanumeric() || x == '_'))
        .fold(Table::new(name, "id"), |t, c| t.column(c, Kind::Other))
}

/// Reads `table` through the cache twice (cold, warm) and returns both.
async fn through_cache<T: Record + Clone>(
    cache: &kura_record::RecordCache,
    decl: Table,
) -> (Vec<T>, Vec<T>) {
    let rows = cache.table::<T>(decl).await.expect("declared");
    let cold = rows.fetch_multi(&[1, 2]).await.expect("cold");
    let before = cache.stats();
    let warm = rows.fetch_multi(&[1, 2]).await.expect("warm");
    let after = cache.stats();
    assert_eq!(after.db_queries, before.db_queries, "warm: from the cache");
    assert_eq!(after.record_hits, before.record_hits + 2);
    (cold, warm)
}

async fn mysql_types() {
    let url = support::mysql_url();
    let Some(procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let Some(pool) = support::pool(&url).await else {
        return;
    };
    let cache = support::cache(&pool, &addrs, Hooks::default()).await;
    let t = support::unique("types");
    let db = cache.db();
    db.execute(&format!("CREATE TABLE {t} ({MY_COLUMNS})"), &[])
        .await
        .expect("create");
    db.execute(&format!("INSERT INTO {t} VALUES {MY_VALUES}"), &[])
        .await
        .expect("insert");
    let decl = declaration(&t, MY_COLUMNS);
    let (cold, warm) = through_cache::<MyRow>(&cache, decl).await;
    let direct: Vec<MyRow> = sqlx::query_as::<_, MyDirect>(&format!(
        "SELECT id, ti, si, mi, i, bi, tu, su, iu, bu, flag, CAST(price AS CHAR) AS price, f, d, \
         c, vc, txt, vb, bl, day, tm, dt, ts, CAST(js AS CHAR) AS js, en, CAST(uid AS CHAR) AS uid \
         FROM {t} ORDER BY id"
    ))
    .fetch_all(db.mysql().expect("MariaDB"))
    .await
    .expect("direct")
    .into_iter()
    .map(MyRow::from)
    .collect();
    assert_eq!(cold, direct, "cold read equals sqlx's");
    assert_eq!(warm, direct, "cached read equals sqlx's");
    assert_eq!(cold[0].price.as_deref(), Some("-123456789012345678.123456"));
    assert_eq!(cold[0].bu, Some(u64::MAX));
    let apps: Vec<MyRow> = db
        .fetch_as(
            &format!("SELECT * FROM {t} WHERE id IN (?, ?) ORDER BY id"),
            &[1.into(), 2.into()],
        )
        .await
        .expect("fetch_as");
    assert_eq!(
        apps, direct,
        "the application's own query builds the same rows"
    );

    // Columns kura-record cannot represent, refused at declaration.
    let bad = support::unique("badtypes");
    db.execute(
        &format!("CREATE TABLE {bad} (id BIGINT PRIMARY KEY, shape POINT, bits BIT(3))"),
        &[],
    )
    .await
    .expect("create");
    let refused = |decl| async { cache.table::<MyRow>(decl).await.err() };
    let e = refused(Table::new(&bad, "id").column("shape", Kind::Other)).await;
    assert!(
        matches!(&e, Some(Error::Declaration(m)) if m.contains("shape") && m.contains("GEOMETRY")),
        "{e:?}"
    );
    let e = refused(Table::new(&bad, "id").column("bits", Kind::Other)).await;
    assert!(
        matches!(&e, Some(Error::Declaration(m)) if m.contains("bits") && m.contains("BIT")),
        "{e:?}"
    );
    let e = refused(Table::new(&t, "id").column("vc", Kind::Int).index(&["vc"])).await;
    assert!(
        matches!(&e, Some(Error::Declaration(m)) if m.contains("vc") && m.contains("VARCHAR")),
        "{e:?}"
    );
    let e = refused(Table::new(&t, "id").column("nope", Kind::Other)).await;
    assert!(
        matches!(&e, Some(Error::Declaration(m)) if m.contains("nope")),
        "{e:?}"
    );
    assert_eq!(
        cache.stats().db_errors,
        0,
        "refusals are not database errors"
    );
    for name in [&t, &bad] {
        support::drop_table(&pool, name).await;
    }
    support::drop_outbox(&cache).await;
}

const PG_COLUMNS: &str = "id BIGINT PRIMARY KEY, si SMALLINT, i INT, bi BIGINT, flag BOOLEAN, \
    price NUMERIC(30,6), big NUMERIC, f REAL, d DOUBLE PRECISION, c CHAR(4), vc VARCHAR(50), \
    txt TEXT, bl BYTEA, day DATE, tm TIME(6), ts TIMESTAMP(6), tz TIMESTAMPTZ, js JSON, jb JSONB, \
    uid UUID, en ENUMTYPE";

async fn postgres_types() {
    let url = support::postgres_url();
    let Some(procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let Some(pool) = support::pool(&url).await else {
        return;
    };
    let cache = support::cache(&pool, &addrs, Hooks::default()).await;
    let t = support::unique("types");
    let rarity = format!("{t}_rarity");
    let db = cache.db();
    db.execute(
        &format!("CREATE TYPE {rarity} AS ENUM ('common', 'rare')"),
        &[],
    )
    .await
    .expect("create type");
    let columns = PG_COLUMNS.replace("ENUMTYPE", &rarity);
    db.execute(&format!("CREATE TABLE {t} ({columns})"), &[])
        .await
        .expect("create");
    db.execute(
        &format!(
            "INSERT INTO {t} VALUES (1, -32768, -2147483648, -9223372036854775808, TRUE, \
             -123456789012345678.123456, 123456789012345678901234567890.000000000000000000001, \
             1.5, -0.1, 'ab', 'h\u{e9}llo \u{65e5}\u{672c}', 'a long text', '\\x00ff10', \
             '2024-02-29', '23:59:58.123456', '2024-02-29 23:59:58.123456', \
             '2024-03-01 01:02:03.5+09', '{{\"a\": [1, 2, {{\"b\": null}}], \"c\": \"d\"}}', \
             '{{\"x\": 1.25}}', '123e4567-e89b-12d3-a456-426614174000', 'rare'), \
             (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
             NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
        ),
        &[],
    )
    .await
    .expect("insert");
    let (cold, warm) = through_cache::<PgRow>(&cache, declaration(&t, &columns)).await;
    let direct: Vec<PgRow> = sqlx::query_as::<_, PgDirect>(&format!(
        "SELECT id, si, i, bi, flag, price::text AS price, big::text AS big, f, d, c, vc, txt, bl, \
         day, tm, ts, tz, js, jb, uid, en::text AS en FROM {t} ORDER BY id"
    ))
    .fetch_all(db.postgres().expect("PostgreSQL"))
    .await
    .expect("direct")
    .into_iter()
    .map(PgRow::from)
    .collect();
    assert_eq!(cold, direct, "cold read equals sqlx's");
    assert_eq!(warm, direct, "cached read equals sqlx's");
    assert_eq!(
        cold[0].big.as_deref(),
        Some("123456789012345678901234567890.000000000000000000001")
    );
    let apps: Vec<PgRow> = db
        .fetch_as(
            &format!("SELECT * FROM {t} WHERE id IN (?, ?) ORDER BY id"),
            &[1.into(), 2.into()],
        )
        .await
        .expect("fetch_as");
    assert_eq!(
        apps, direct,
        "the application's own query builds the same rows"
    );

    let bad = support::unique("badtypes");
    db.execute(
        &format!("CREATE TABLE {bad} (id BIGINT PRIMARY KEY, span INTERVAL, tags TEXT[])"),
        &[],
    )
    .await
    .expect("create");
    let refused = |decl| async { cache.table::<PgRow>(decl).await.err() };
    let e = refused(Table::new(&bad, "id").column("span", Kind::Other)).await;
    assert!(
        matches!(&e, Some(Error::Declaration(m)) if m.contains("span") && m.contains("INTERVAL")),
        "{e:?}"
    );
    let e = refused(Table::new(&bad, "id").column("tags", Kind::Other)).await;
    assert!(
        matches!(&e, Some(Error::Declaration(m)) if m.contains("tags") && m.contains("TEXT[]")),
        "{e:?}"
    );
    assert_eq!(
        cache.stats().db_errors,
        0,
        "refusals are not database errors"
    );
    for name in [&t, &bad] {
        support::drop_table(&pool, name).await;
    }
    let _ = db
        .execute(&format!("DROP TYPE IF EXISTS {rarity}"), &[])
        .await;
    support::drop_outbox(&cache).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_every_type_round_trips() {
    mysql_types().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_every_type_round_trips() {
    postgres_types().await;
}
