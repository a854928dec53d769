//! A crash between the commit and the invalidation: a child process (this
//! test binary, re-run as `crash_child`) commits a change and is killed
//! with SIGKILL at that point (the commit hook announces it and waits).
//! The cache still holds the old entries; a restart's start-up drains the
//! outbox and expires them.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;

use kura_record::{Config, Hooks};
use support::{item, servers, Item, Setup};

const CHILD: &str = "KURA_RECORD_CRASH_CHILD";

/// In the child: commit the change and stop at the hook. Does nothing in
/// an ordinary run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [url, addrs, table, outbox] = parts[..] else {
        panic!("bad {CHILD}: {spec}")
    };
    let addrs: Vec<String> = addrs.split(',').map(str::to_string).collect();
    let pool = support::pool(url).await.expect("the parent reached it");
    let hooks = Hooks {
        after_commit: Some(Arc::new(|| {
            println!("COMMITTED");
            std::thread::sleep(std::time::Duration::from_secs(3600));
        })),
        ..Hooks::default()
    };
    let cfg = Config {
        outbox_table: outbox.to_string(),
        ..Config::default()
    };
    let cache = support::cache_with(&pool, &addrs, cfg, hooks).await;
    let items = cache
        .table::<Item>(support::items_table(table))
        .await
        .expect("declaration");
    let table = table.to_string();
    cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.touch(&items, &[5]).await?;
                tx.execute(
                    &format!("UPDATE {table} SET user_id = 2, count = 777 WHERE id = 5"),
                    &[],
                )
                .await?;
                Ok(())
            })
        })
        .await
        .expect("commit");
    unreachable!("the hook never returns");
}

async fn crash(url: &str) {
    let Some(procs) = servers::servers(false, 2) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let rows: Vec<Item> = (1..=10).map(|id| item(id, 1)).collect();
    let Some(s) = Setup::new(url, &addrs, &rows, Hooks::default()).await else {
        return;
    };
    // Warm: the record and both users' entries are cached.
    assert_eq!(s.items.fetch(5).await.expect("fetch"), Some(item(5, 1)));
    assert_eq!(
        s.items
            .fetch_by_index(&["user_id"], &[1.into()])
            .await
            .expect("u1")
            .len(),
        10
    );
    assert!(s
        .items
        .fetch_by_index(&["user_id"], &[2.into()])
        .await
        .expect("u2")
        .is_empty());

    let outbox = support::outbox_name(&s.cache);
    let spec = format!("{url}|{}|{}|{outbox}", addrs.join(","), s.table);
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CHILD, spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child");
    let out = child.stdout.take().expect("stdout");
    let committed = BufReader::new(out)
        .lines()
        .map_while(std::result::Result::ok)
        .any(|l| l.contains("COMMITTED"));
    child.kill().expect("SIGKILL the child");
    let _ = child.wait();
    assert!(
        committed,
        "the child reached the point between commit and invalidation"
    );

    // The database has the change, the cache the old entries: the crash's
    // window, which identity_cache leaves stale until the TTL.
    let db = support::db_items(&s.pool, &s.table).await;
    assert_eq!((db[4].user_id, db[4].count), (2, 777));
    assert_eq!(
        s.items.peek(5).await,
        Some(item(5, 1)),
        "stale after the crash"
    );
    assert_eq!(
        s.items
            .peek_index(&["user_id"], &[2.into()])
            .await
            .expect("key"),
        Some(vec![])
    );

    // The restart: start-up drains the outbox.
    let restarted = support::cache_with(
        &s.pool,
        &addrs,
        Config {
            outbox_table: outbox.clone(),
            ..Config::default()
        },
        Hooks::default(),
    )
    .await;
    assert_eq!(restarted.stats().outbox_drained, 1);
    assert_eq!(s.items.peek(5).await, None, "expired by the drain");
    let mut want = item(5, 2);
    want.count = 777;
    assert_eq!(s.items.fetch(5).await.expect("fetch"), Some(want.clone()));
    let u1 = s
        .items
        .fetch_by_index(&["user_id"], &[1.into()])
        .await
        .expect("u1");
    assert!(u1.iter().all(|r| r.id != 5));
    let u2 = s
        .items
        .fetch_by_index(&["user_id"], &[2.into()])
        .await
        .expect("u2");
    assert_eq!(u2, vec![want]);
    assert_eq!(
        restarted.drain_outbox().await.expect("drain"),
        0,
        "drained once"
    );
    s.teardown().await;
}

per_database!(crash() => mysql_crash_then_drain, postgres_crash_then_drain);
