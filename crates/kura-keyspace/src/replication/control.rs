//! What a server follows, changed at start (`--replica-of`) or at run time
//! (`replicaof HOST PORT`, `replicaof no one`): following a primary stops
//! the server's own writes and starts the thread that follows; promotion
//! stops it and gives the server a history of its own that continues the
//! one it followed, so that the other replicas of the old primary can go
//! on from it with a partial resync (docs/replication.md).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use kura_log::History;

use super::journal::Journal;
use super::replica::Follower;
use super::ReplicationState;
use crate::Keyspace;

/// Why `replicaof` could not be done.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaOfError {
    #[error("the server is not running")]
    NotRunning,
    #[error("cannot start following: {0}")]
    Thread(#[from] std::io::Error),
    #[error("cannot record the new history: {0:#}")]
    History(anyhow::Error),
}

impl ReplicationState {
    /// Ties the state to its keyspace (once it is shared), so that it can
    /// start the thread that follows a primary.
    pub(crate) fn bind(&self, server: &Arc<Keyspace>) {
        let _ = self.server.set(Arc::downgrade(server));
    }

    fn server(&self) -> Result<Arc<Keyspace>, ReplicaOfError> {
        self.server
            .get()
            .and_then(Weak::upgrade)
            .ok_or(ReplicaOfError::NotRunning)
    }

    /// Follows `primary` from now on (a server that followed another stops
    /// first; a primary stops taking writes).
    ///
    /// # Errors
    /// The thread cannot be started.
    pub fn follow(&self, primary: String) -> Result<(), ReplicaOfError> {
        let keyspace = self.server()?;
        let mut follower = self.follower.lock();
        if let Some(old) = follower.take() {
            old.stop();
        }
        *self.primary.lock() = Some(primary.clone());
        self.following.store(true, Ordering::Release);
        if let Some(d) = &keyspace.durable {
            d.set_following(true);
            self.applied.store(d.next_seq() - 1, Ordering::Relaxed);
        } else if let Some(j) = self.journal.get() {
            j.set_following(true, j.next_seq() - 1);
        }
        self.link_up.store(false, Ordering::Relaxed);
        self.primary_last.store(0, Ordering::Relaxed);
        tracing::info!("following {primary}");
        *follower = Some(Follower::start(keyspace.clone(), primary)?);
        Ok(())
    }

    /// Stops following and takes writes: the server becomes a primary
    /// whose history continues the one it followed up to its last record.
    /// Nothing happens on a server that follows none.
    ///
    /// # Errors
    /// The new history cannot be saved (the server still follows none,
    /// and refuses writes until it can).
    pub fn promote(&self) -> Result<(), ReplicaOfError> {
        let keyspace = self.server()?;
        let mut follower = self.follower.lock();
        if let Some(old) = follower.take() {
            old.stop();
        }
        if !self.is_replica() {
            return Ok(());
        }
        let last = match &keyspace.durable {
            Some(d) => {
                let last = d.next_seq() - 1;
                let promoted = d.history().promoted(last);
                promoted
                    .map_err(anyhow::Error::from)
                    .and_then(|h| d.set_history(h))
                    .map_err(ReplicaOfError::History)?;
                d.set_following(false);
                last
            }
            None => {
                let last = self.applied.load(Ordering::Relaxed);
                let mut h = self.history.lock();
                let next = match h.as_ref() {
                    Some(old) => old.promoted(last),
                    None => History::new(),
                };
                *h = Some(next.map_err(|e| ReplicaOfError::History(e.into()))?);
                if let Some(j) = self.journal.get() {
                    j.set_following(false, last);
                }
                last
            }
        };
        *self.primary.lock() = None;
        self.link_up.store(false, Ordering::Relaxed);
        self.following.store(false, Ordering::Release);
        tracing::warn!("promoted to primary after record {last}: taking writes");
        Ok(())
    }

    /// The journal of a server without a data dir, made when the first
    /// replica connects (journal.rs).
    ///
    /// # Errors
    /// Its thread cannot be started, or no history can be made.
    pub fn journal(&self, keyspace: &Keyspace) -> std::io::Result<&Journal> {
        if let Some(j) = self.journal.get() {
            return Ok(j);
        }
        let mut history = self.history.lock();
        if self.journal.get().is_none() {
            if history.is_none() {
                *history = Some(History::new()?);
            }
            let last = self.applied.load(Ordering::Acquire);
            let j = Journal::start(
                &keyspace.store,
                last,
                keyspace.config.replication.backlog_size(),
                keyspace.config.replication.resync_buffer_size(),
                self.is_replica(),
            );
            let _ = self.journal.set(j);
        }
        self.journal
            .get()
            .ok_or_else(|| std::io::Error::other("no journal"))
    }

    /// Stops following at shutdown (before the log is closed).
    pub fn stop_following(&self) {
        if let Some(f) = self.follower.lock().take() {
            f.stop();
        }
    }

    /// The history this server's log belongs to, if it has one yet.
    pub fn current_history(&self, keyspace: &Keyspace) -> Option<History> {
        match &keyspace.durable {
            Some(d) => Some(d.history()),
            None => self.history.lock().clone(),
        }
    }
}
