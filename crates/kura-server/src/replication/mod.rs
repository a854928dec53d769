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

pub(crate) mod primary;
pub mod replica;
pub mod wire;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

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
    /// `--replica-of`, when this server is a replica.
    pub primary: Option<String>,
    /// Whether the link to the primary is up.
    pub link_up: AtomicBool,
    /// The last record applied, and the primary's last written as its
    /// last heartbeat said.
    pub applied: AtomicU64,
    pub primary_last: AtomicU64,
    /// When the primary was last heard from (Unix ms).
    pub heard_ms: AtomicU64,
    /// Resyncs this replica went through.
    pub replica_partial: AtomicU64,
    pub replica_full: AtomicU64,
    /// The history this replica follows.
    pub history: Mutex<Option<String>>,
    /// What this replica authenticates with (`--replica-auth-file`).
    pub auth: Option<crate::auth::Credentials>,
}

impl ReplicationState {
    /// The state of a replica of `primary`, or of a server that is none.
    pub fn new(primary: Option<String>) -> ReplicationState {
        ReplicationState {
            primary,
            ..ReplicationState::default()
        }
    }

    /// Whether this server follows a primary (and refuses writes).
    pub fn is_replica(&self) -> bool {
        self.primary.is_some()
    }

    /// The reply a write gets on a replica.
    pub fn refusal(&self) -> Option<Vec<u8>> {
        let p = self.primary.as_deref()?;
        Some(
            format!(
                "SERVER_ERROR this server is a read-only replica of {p}: write to the primary\r\n"
            )
            .into_bytes(),
        )
    }

    /// Records behind the primary, as its last heartbeat told.
    pub fn lag_records(&self) -> u64 {
        self.primary_last
            .load(Ordering::Relaxed)
            .saturating_sub(self.applied.load(Ordering::Relaxed))
    }
}
