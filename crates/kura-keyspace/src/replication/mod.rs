//! Replication: a kura server follows another's update log (issue 16;
//! docs/replication.md). The stream is the log's own records, numbered;
//! a replica's state is the history it follows and the last record it
//! applied, and everything else (partial or full resync, lag) is derived
//! from those two, as Redis's PSYNC is from (replid, offset).
//!
//! * [`wire`]: the handshake and the frames of the stream.
//! * [`primary`]: a connection that asked to `replicate` becomes a stream.
//! * [`replica`]: `--replica-of`: the thread that follows a primary and
//!   applies what it sends.

pub mod backlog;
mod control;
pub mod journal;
pub mod primary;
pub mod replica;
pub mod wire;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use kura_log::History;
use parking_lot::Mutex;

pub use control::ReplicaOfError;

/// Replication's counters and, on a replica, its state, for `stats` and
/// for refusing writes.
#[derive(Debug, Default)]
pub struct ReplicationState {
    /// Replicas streaming from this server now.
    pub replicas: AtomicU64,
    /// The highest record a replica acknowledged.
    pub acked: AtomicU64,
    /// Streams begun with a partial or a full resync (as a primary).
    pub partial_resyncs: AtomicU64,
    pub full_resyncs: AtomicU64,
    /// The primary this server follows (`--replica-of`, `replicaof`).
    primary: Mutex<Option<String>>,
    /// Whether it follows one (read on every write).
    following: AtomicBool,
    /// Whether the link to the primary is up.
    pub link_up: AtomicBool,
    /// The last record applied, and the primary's last written as its
    /// last heartbeat said.
    pub applied: AtomicU64,
    pub primary_last: AtomicU64,
    /// When the primary was last heard from, and when this replica last
    /// had everything the primary had said it wrote (Unix ms).
    pub heard_ms: AtomicU64,
    pub caught_up_ms: AtomicU64,
    /// Resyncs this replica went through.
    pub replica_partial: AtomicU64,
    pub replica_full: AtomicU64,
    /// Why the link to the primary last broke (one line), for `stats`.
    pub last_error: Mutex<Option<String>>,
    /// The history of a server without a data dir (a durable server's is
    /// its data dir's).
    pub history: Mutex<Option<History>>,
    /// The streams to this server's replicas.
    pub streams: Mutex<Vec<Arc<StreamInfo>>>,
    /// The journal of a server without a data dir, once a replica
    /// connected.
    pub journal: OnceLock<journal::Journal>,
    /// Told of every acknowledgement from a replica (writes that wait for
    /// `--min-replicas-ack` listen).
    pub acks: tokio::sync::Notify,
    /// Writes that waited for their replicas, and those that timed out.
    pub ack_waits: AtomicU64,
    pub ack_timeouts: AtomicU64,
    /// The thread following the primary, and the server it works for.
    follower: Mutex<Option<replica::Follower>>,
    server: OnceLock<Weak<crate::Keyspace>>,
}

/// One replica streaming from this server, for `stats`.
#[derive(Debug)]
pub struct StreamInfo {
    /// Its address.
    pub peer: String,
    /// The last record it acknowledged, and the last sent to it.
    pub acked: AtomicU64,
    pub sent: AtomicU64,
    /// A full resync from a data dir is being sent to it, or its stream
    /// is not yet within half the backlog of the last record: the log's files after
    /// the snapshot's record (`resync_at`) are kept for it up to
    /// `--repl-resync-buffer` more (primary/mod.rs `retain`). Not an
    /// acknowledgement: writes waiting for replicas do not count it.
    pub resyncing: AtomicBool,
    pub resync_at: AtomicU64,
}

impl ReplicationState {
    /// The state of a replica of `primary`, or of a server that is none.
    pub fn new(primary: Option<String>) -> ReplicationState {
        ReplicationState {
            following: AtomicBool::new(primary.is_some()),
            primary: Mutex::new(primary),
            ..ReplicationState::default()
        }
    }

    /// Whether this server follows a primary (and refuses writes).
    #[inline]
    pub fn is_replica(&self) -> bool {
        self.following.load(Ordering::Acquire)
    }

    /// The primary this server follows.
    pub fn primary(&self) -> Option<String> {
        self.primary.lock().clone()
    }

    /// Whether `n` replicas streaming from this server acknowledged record
    /// `seq`.
    pub fn acknowledged_by(&self, seq: u64, n: usize) -> bool {
        let streams = self.streams.lock();
        streams
            .iter()
            .filter(|s| s.acked.load(Ordering::Acquire) >= seq)
            .count()
            >= n
    }

    /// Waits until `n` replicas acknowledged record `seq`, `timeout` at
    /// most; false if they did not in time.
    pub async fn wait_acks(&self, seq: u64, n: usize, timeout: std::time::Duration) -> bool {
        self.ack_waits.fetch_add(1, Ordering::Relaxed);
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let notified = self.acks.notified();
            tokio::pin!(notified);
            // Registered before the check: an ack after it wakes us.
            notified.as_mut().enable();
            if self.acknowledged_by(seq, n) {
                return true;
            }
            if kura_timer::timeout_at(deadline, notified).await.is_none() {
                self.ack_timeouts.fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
    }

    /// Seconds since this replica last had everything its primary had
    /// written (0 while it has): how stale what it serves may be.
    pub fn lag_seconds(&self) -> f64 {
        let up = self.link_up.load(Ordering::Relaxed);
        if up && self.lag_records() == 0 {
            return 0.0;
        }
        let since = self.caught_up_ms.load(Ordering::Relaxed);
        if since == 0 {
            return -1.0;
        }
        primary::unix_millis().saturating_sub(since) as f64 / 1000.0
    }

    /// Records behind the primary, as its last heartbeat told.
    pub fn lag_records(&self) -> u64 {
        self.primary_last
            .load(Ordering::Relaxed)
            .saturating_sub(self.applied.load(Ordering::Relaxed))
    }
}
