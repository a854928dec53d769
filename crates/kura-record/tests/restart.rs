//! A cache server that loses its contents while a reader is between its
//! database read and its write-back: `flush_all`, or SIGKILL and a restart
//! empty on the same port. The reader read the row before a committed
//! update; its write-back must not put that row back.
//!
//! - `flush_all`: the reader's read left a placeholder (meta `N`) and its
//!   fill is a CAS over it; the flush removed it, so the CAS fails.
//! - A restart: the new process's CAS uniques start again from 1, so a
//!   CAS read from the old process can equal one the new process gives
//!   the writer's tombstone or another reader's placeholder. The fill is
//!   fenced: the connection the read went on is gone, and a connection
//!   made since is newer than the read, so the fill is not sent at all
//!   (`fills_fenced`, or a cache error when the dead connection is still
//!   taken for open). Against memcached the test gives the writer's
//!   tombstone on the new process the very CAS the reader read, so that
//!   only the fence stands between the old row and the cache.

mod support;

use support::gate::Gate;
use support::{item, servers, Item, Setup};

/// What happens to the cache server while the reader is held.
#[derive(Clone, Copy, Debug)]
enum Loss {
    FlushAll,
    Restart,
}

async fn set_count(s: &Setup, id: i64, count: i64) {
    let table = s.table.clone();
    let it = s.items.clone();
    let (_, done) = s
        .cache
        .transaction(|tx| {
            Box::pin(async move {
                tx.touch(&it, &[id]).await?;
                let sql = format!("UPDATE {table} SET count = ? WHERE id = ?");
                tx.execute(&sql, &[count.into(), id.into()]).await?;
                Ok(())
            })
        })
        .await
        .expect("commit");
    assert!(done.expired, "the tombstone reached the server");
}

/// One text or meta request, its reply line.
fn raw(addr: &str, req: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let mut c = std::net::TcpStream::connect(addr).expect("connect");
    c.write_all(req.as_bytes()).expect("write");
    let mut line = String::new();
    BufReader::new(c).read_line(&mut line).expect("read");
    line
}

/// A key's CAS unique (meta `mg <key> c`), None when absent.
fn raw_cas(addr: &str, key: &str) -> Option<u64> {
    let line = raw(addr, &format!("mg {key} c\r\n"));
    line.split_whitespace()
        .find_map(|t| t.strip_prefix('c'))
        .and_then(|c| c.parse().ok())
}

/// kura-record's tombstone flags (fill.rs).
const TOMBSTONE_FLAGS: u32 = 0x4b52_0003;

/// Stores the tombstone on `key` again until its CAS is `want` (each store
/// takes the server's next CAS unique); false if it went past.
fn bump_to(addr: &str, key: &str, want: u64) -> bool {
    for _ in 0..10_000 {
        match raw_cas(addr, key) {
            Some(c) if c == want => return true,
            Some(c) if c > want => return false,
            _ => {
                let line = raw(addr, &format!("ms {key} 0 F{TOMBSTONE_FLAGS} T60\r\n\r\n"));
                assert!(line.starts_with("HD"), "{line}");
            }
        }
    }
    false
}

async fn lost_contents(url: &str, memcached: bool, loss: Loss) {
    let Some(mut procs) = servers::servers(memcached, 1) else {
        return;
    };
    let addrs = servers::addrs(&procs);
    let gate = Gate::default();
    let rows: Vec<Item> = (1..=10).map(|id| item(id, 1)).collect();
    let Some(s) = Setup::new(url, &addrs, &rows, gate.hooks()).await else {
        return;
    };
    // The old process's CAS uniques run ahead of the new one's.
    for i in 0..200 {
        raw(&addrs[0], &format!("ms pad{i} 1 T60\r\nx\r\n"));
    }
    let (paused, go) = gate.arm();
    let reader = {
        let items = s.items.clone();
        tokio::spawn(async move { items.fetch(5).await })
    };
    paused.await.expect("the reader reached its write-back");
    let key = s.items.record_key(5);
    let read_cas = raw_cas(&addrs[0], &key).expect("the read left its placeholder");
    match loss {
        Loss::FlushAll => {
            set_count(&s, 5, 555).await;
            assert_eq!(raw(&addrs[0], "flush_all\r\n"), "OK\r\n");
        }
        Loss::Restart => {
            let port = procs[0].port;
            procs[0].kill();
            procs[0] = if memcached {
                servers::memcached_on(port)
            } else {
                servers::kura_on(port)
            }
            .expect("restarted on the same port");
            // The writer's tombstone lands on the new, empty process, and
            // is stored again until it has the CAS the reader read: the
            // reader's CAS would replace it.
            set_count(&s, 5, 555).await;
            let collided = bump_to(&addrs[0], &key, read_cas);
            // memcached numbers every store from one counter; kura puts the
            // shard in the low bits, and a new process may place the key
            // in another shard, where its CAS can never be the old one.
            assert!(
                collided || !memcached,
                "memcached's CAS uniques reach {read_cas}"
            );
            println!("restart: the tombstone has the reader's CAS: {collided}");
        }
    }
    let _ = go.send(());
    let old = reader.await.expect("reader task").expect("fetch");
    assert_eq!(old, Some(item(5, 1)), "the reader read before the commit");
    let st = s.cache.stats();
    assert_eq!(
        st.fills_stored, 0,
        "{loss:?}: the old row was not put back: {st:?}"
    );
    let new = s.items.fetch(5).await.expect("fetch").expect("row");
    assert_eq!(
        new.count, 555,
        "{loss:?}: the next reader reads the committed row"
    );
    let again = s.items.fetch(5).await.expect("fetch").expect("row");
    assert_eq!(again.count, 555);
    println!("{loss:?}: {st:?}");
    s.teardown().await;
}

per_database!(lost_contents(false, Loss::FlushAll) => mysql_flush_all, postgres_flush_all);
per_database!(lost_contents(true, Loss::FlushAll) => mysql_flush_all_memcached, postgres_flush_all_memcached);
per_database!(lost_contents(false, Loss::Restart) => mysql_restart, postgres_restart);
per_database!(lost_contents(true, Loss::Restart) => mysql_restart_memcached, postgres_restart_memcached);
