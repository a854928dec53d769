//! `rejoin = "caught-up"`: the backends of such a pool are kura replicas,
//! which get the writes they missed from their primary rather than from
//! the proxy's journal. One watch task per such backend reads its `stats`
//! and lets reads reach it only while it is caught up: its replication
//! link is up and it has applied every record its primary said it wrote
//! (`repl_link up`, `repl_lag_records 0`; a kura replica says its link is
//! up only once the primary has told it how far it has written, so a
//! replica that has just reconnected is never taken for caught up). A
//! backend that is no replica (a primary, or not kura) has nothing to catch
//! up with and serves as in any pool.
//!
//! Checked every `catch_up_check_ms` while it serves, every 50 ms while it
//! does not; a request that fails on it (timeout, closed connection, bad
//! reply) takes it out at once until the next check says otherwise. Its
//! journal applies as in any pool: the gate opens when both agree.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::router::Node;

/// How often a backend that is behind is looked at again.
const BEHIND_CHECK: Duration = Duration::from_millis(50);

/// What a backend's `stats` say of its replication.
#[derive(Debug, PartialEq, Eq)]
pub enum Replication {
    /// A replica with its link up and nothing left to apply, or no replica.
    CaughtUp,
    /// A replica that is not: why.
    Behind(String),
}

/// Reads the replication lines of a `stats` reply.
pub fn judge(stats: &[u8]) -> Replication {
    let text = String::from_utf8_lossy(stats);
    let stat = |name: &str| {
        crate::stats::stat_lines(&text).find_map(|(n, v)| (n == name).then(|| v.trim()))
    };
    if stat("repl_role") != Some("replica") {
        return Replication::CaughtUp;
    }
    let link = stat("repl_link").unwrap_or("-");
    let lag = stat("repl_lag_records").unwrap_or("-");
    if link == "up" && lag == "0" {
        Replication::CaughtUp
    } else {
        Replication::Behind(format!("link {link}, {lag} records behind"))
    }
}

impl Node {
    /// Whether its replication is watched; a backend newly watched is
    /// behind until its first check.
    pub(crate) fn set_watched(&self, on: bool) {
        let was = self.catch_up.swap(on, Ordering::AcqRel);
        if on && !was {
            self.behind.store(true, Ordering::Release);
        } else if !on {
            self.behind.store(false, Ordering::Release);
        }
    }

    /// Watched and not known to be caught up (`stats`: `behind`).
    pub fn is_behind(&self) -> bool {
        self.behind.load(Ordering::Acquire)
    }

    /// A request failed on it: out until a check says it caught up.
    pub(crate) fn fell_behind(&self) {
        if self.catch_up.load(Ordering::Acquire) && !self.behind.swap(true, Ordering::AcqRel) {
            tracing::info!(server = %self.addr, "failed: no reads until it says it caught up with its primary");
        }
    }

    /// Starts the watch task if the backend is watched and none runs.
    pub fn start_watch(self: &Arc<Self>) {
        if self.catch_up.load(Ordering::Acquire) && !self.watching.swap(true, Ordering::AcqRel) {
            crate::timer::spawn(watch(Arc::downgrade(self)));
        }
    }
}

/// Watches one backend until no configuration watches it or it is gone.
async fn watch(node: Weak<Node>) {
    loop {
        let Some(n) = node.upgrade() else { return };
        if !n.catch_up.load(Ordering::Acquire) {
            n.watching.store(false, Ordering::Release);
            // Watched again meanwhile: that start found this task running.
            if n.catch_up.load(Ordering::Acquire) {
                n.start_watch();
            }
            return;
        }
        let judged = if n.is_down() {
            Replication::Behind("down".into())
        } else {
            match n.text_exchange(b"stats\r\n", b"END\r\n").await {
                Ok(stats) => judge(&stats),
                Err(e) => Replication::Behind(e),
            }
        };
        match judged {
            Replication::CaughtUp => {
                if n.behind.swap(false, Ordering::AcqRel) {
                    tracing::info!(server = %n.addr, "caught up with its primary: serving reads again");
                }
            }
            Replication::Behind(why) => {
                if !n.behind.swap(true, Ordering::AcqRel) {
                    tracing::warn!(server = %n.addr, %why, "behind its primary: no reads until it catches up");
                }
            }
        }
        let pause = if n.behind.load(Ordering::Acquire) {
            BEHIND_CHECK
        } else {
            n.catch_up_check
        };
        drop(n);
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_is_caught_up_only_with_its_link_up_and_nothing_left() {
        let stats = |role: &str, link: &str, lag: &str| {
            format!("STAT pid 1\r\nSTAT repl_role {role}\r\nSTAT repl_primary h:1\r\nSTAT repl_link {link}\r\nSTAT repl_lag_records {lag}\r\nEND\r\n")
        };
        assert_eq!(
            judge(stats("replica", "up", "0").as_bytes()),
            Replication::CaughtUp
        );
        assert_eq!(
            judge(stats("replica", "up", "12").as_bytes()),
            Replication::Behind("link up, 12 records behind".into())
        );
        assert!(matches!(
            judge(stats("replica", "down", "0").as_bytes()),
            Replication::Behind(_)
        ));
        // A replica's lines cut short say nothing good.
        assert!(matches!(
            judge(b"STAT repl_role replica\r\nEND\r\n"),
            Replication::Behind(_)
        ));
        // A primary, memcached (no such lines): nothing to catch up with.
        assert_eq!(
            judge(b"STAT repl_role primary\r\nSTAT repl_history ab\r\nEND\r\n"),
            Replication::CaughtUp
        );
        assert_eq!(
            judge(b"STAT pid 1\r\nSTAT uptime 3\r\nEND\r\n"),
            Replication::CaughtUp
        );
        // A longer name with the same start is another stat.
        assert!(matches!(
            judge(b"STAT repl_role replica\r\nSTAT repl_link_x up\r\nSTAT repl_link down\r\nSTAT repl_lag_records 0\r\nEND\r\n"),
            Replication::Behind(_)
        ));
    }
}
