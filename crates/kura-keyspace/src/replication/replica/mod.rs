//! The replica's side (`--replica-of HOST:PORT`, `replicaof`): a thread
//! that connects to the primary's ordinary port, asks for the records after
//! the last it applied, and applies what comes, in order, each record
//! checked (CRC, number) before it touches the store; with a data dir, it
//! logs them under the primary's numbers (apply.rs). A broken stream (a bad
//! record, a gap, a primary that goes silent for five heartbeats) drops the
//! link, and the thread tries again with backoff; what it applied stays, so
//! the next attempt is usually a partial resync.

mod apply;
mod link;

use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::wire::Handshake;
use crate::Keyspace;
use link::Link;

/// The primary is taken for gone after this long without a byte (it sends
/// a heartbeat every second).
const SILENCE: Duration = Duration::from_secs(5);

/// How long a read waits before the thread looks whether it should stop.
const POLL: Duration = Duration::from_millis(250);

/// How long a connection attempt may take.
const CONNECT: Duration = Duration::from_secs(2);

/// The thread that follows a primary.
#[derive(Debug)]
pub struct Follower {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Follower {
    /// Starts following `primary` for `keyspace`.
    ///
    /// # Errors
    /// The thread cannot be started.
    pub fn start(keyspace: Arc<Keyspace>, primary: String) -> std::io::Result<Follower> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("kura-replica".into())
            .spawn(move || {
                let cx = Cx {
                    keyspace: &keyspace,
                    stop: &flag,
                    primary: &primary,
                };
                cx.run();
            })?;
        Ok(Follower { stop, thread })
    }

    /// Stops the thread and waits for it (a read in progress ends within
    /// [`POLL`], a connection attempt within [`CONNECT`]).
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.thread.join();
    }
}

/// What the thread works with.
struct Cx<'a> {
    keyspace: &'a Keyspace,
    stop: &'a AtomicBool,
    primary: &'a str,
}

/// How a connection ended without an error.
enum Ended {
    Stopped,
    /// Connect again at once (after a rewind).
    Again,
}

/// How long a replica waits before it connects again: 100 ms after a link
/// that synced (the primary answered and its first heartbeat came: a
/// primary restarted, say, is back at once), twice as long as the last time
/// after one that did not (a primary that refuses, hangs up before
/// answering or cannot be reached), up to 10 s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Backoff(Duration);

impl Backoff {
    const FIRST: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(10);

    /// The wait after a link that `synced` or not, without taking it.
    fn next_wait(self, synced: bool) -> Duration {
        if synced {
            Self::FIRST
        } else {
            self.0
        }
    }

    /// The wait after a link that `synced` or not; the next one doubles.
    fn wait(&mut self, synced: bool) -> Duration {
        let wait = self.next_wait(synced);
        self.0 = (wait * 2).min(Self::MAX);
        wait
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff(Self::FIRST)
    }
}

impl Cx<'_> {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire) || self.keyspace.is_stopping()
    }

    fn run(&self) {
        let primary = self.primary;
        let mut backoff = Backoff::default();
        // Set when what the server holds can no longer be continued (a
        // full resync broke off, a rewind was impossible): the next
        // connection asks for everything.
        let mut whole = false;
        while !self.stopping() {
            let outcome = self.follow(&mut whole);
            // Synced: the primary answered and its first heartbeat came.
            let synced = self.keyspace.replication.link_up.load(Ordering::Relaxed);
            match outcome {
                Ok(Ended::Stopped) => break,
                Ok(Ended::Again) => continue,
                Err(e) => {
                    self.keyspace
                        .replication
                        .link_up
                        .store(false, Ordering::Relaxed);
                    if self.stopping() {
                        break;
                    }
                    tracing::warn!(
                        "replication from {primary}: {e:#}; trying again in {:?}",
                        backoff.next_wait(synced)
                    );
                    let line: String = format!("{e:#}")
                        .chars()
                        .map(|c| if c.is_control() { ' ' } else { c })
                        .collect();
                    *self.keyspace.replication.last_error.lock() = Some(line);
                }
            }
            let until = Instant::now() + backoff.wait(synced);
            while Instant::now() < until && !self.stopping() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.keyspace
            .replication
            .link_up
            .store(false, Ordering::Relaxed);
    }

    /// The history and last record this server would go on from.
    fn position(&self, whole: bool) -> (String, u64) {
        let state = &self.keyspace.replication;
        let diverged = self
            .keyspace
            .durable
            .as_ref()
            .is_some_and(|d| d.take_diverged());
        if whole || diverged {
            if diverged {
                tracing::warn!(
                    "a write reached this server after it began to follow {}: resyncing whole",
                    self.primary
                );
            }
            return ("-".into(), 0);
        }
        let history = state.current_history(self.keyspace);
        let applied = match &self.keyspace.durable {
            Some(d) => d.next_seq() - 1,
            None => state.applied.load(Ordering::Relaxed),
        };
        let id = history.map_or_else(|| "-".to_string(), |h| h.id);
        (id, applied)
    }

    /// One connection to the primary, until it breaks.
    fn follow(&self, whole: &mut bool) -> anyhow::Result<Ended> {
        let (primary, state) = (self.primary, &self.keyspace.replication);
        let config = &self.keyspace.config.replication;
        let mut link = Link::connect(primary, config, CONNECT, SILENCE)?;
        let login = config.login.as_ref().map(|c| c.current());
        match login.as_deref().and_then(Option::as_ref) {
            Some(l) if config.sasl => link.sasl_auth(&l.user, &l.pass)?,
            Some(l) => link.ascii_auth(&l.user, &l.pass)?,
            None if config.sasl => bail!("--replica-sasl needs --replica-auth-file"),
            None => {}
        }
        let (history, applied) = self.position(*whole);
        state.applied.store(applied, Ordering::Relaxed);
        link.ask(&history, applied, config.sasl)?;
        let mut r = BufReader::with_capacity(1 << 20, link);
        let mut line = String::new();
        // An answer is one short line; a peer that sends more is no primary.
        match (&mut r).take(512).read_line(&mut line) {
            Ok(0) => bail!("the primary closed the connection before it answered"),
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                bail!("the primary closed the connection before it answered (reset)")
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                bail!("no answer from the primary within {SILENCE:?}")
            }
            Err(e) => return Err(e.into()),
        }
        match Handshake::parse(line.trim_end()) {
            Some(Handshake::Continue { history, after }) => {
                if after != applied {
                    bail!("the primary continues after record {after}, we applied {applied}");
                }
                self.adopt(history)?;
                state.replica_partial.fetch_add(1, Ordering::Relaxed);
            }
            Some(Handshake::FullResync {
                history: h,
                at,
                bytes,
            }) => {
                // A replica whose last full resync was at record 0 holds
                // data without having applied a record.
                if applied > 0 || !self.keyspace.store.is_empty() {
                    // Loud: everything this replica holds is replaced.
                    tracing::warn!(
                        "{primary} cannot continue our history {history} after record {applied} (its history is {}: restarted empty, or too far ahead of us): full resync, replacing everything this replica holds",
                        h.id
                    );
                }
                // Until it is whole, what this server holds continues nothing.
                *whole = true;
                self.full_resync(&mut r, h, at, bytes)?;
                *whole = false;
                state.replica_full.fetch_add(1, Ordering::Relaxed);
            }
            Some(Handshake::Rewind { id, to }) => {
                self.rewind(&id, to, applied, whole);
                return Ok(Ended::Again);
            }
            Some(Handshake::Refused(why)) => bail!("the primary refused: {why}"),
            None => bail!("not a replication answer: {:?}", line.trim_end()),
        }
        r.get_ref().tcp().set_read_timeout(Some(POLL))?;
        // The link is up once the primary's first heartbeat says how far it
        // has written (stream): until then the lag is not known.
        tracing::info!(
            "replicating from {primary} after record {}",
            state.applied.load(Ordering::Relaxed)
        );
        self.stream(&mut r)?;
        Ok(Ended::Stopped)
    }

    /// Takes the primary's history as this server's.
    fn adopt(&self, history: kura_log::History) -> anyhow::Result<()> {
        match &self.keyspace.durable {
            Some(d) if d.history() != history => d.set_history(history),
            Some(_) => Ok(()),
            None => {
                *self.keyspace.replication.history.lock() = Some(history);
                Ok(())
            }
        }
    }

    /// The primary's history forked from ours after record `to`: cut back
    /// to it (with a data dir), or else resync whole.
    fn rewind(&self, id: &str, to: u64, applied: u64, whole: &mut bool) {
        let primary = self.primary;
        let ours = self.keyspace.replication.current_history(self.keyspace);
        let Some(d) = self
            .keyspace
            .durable
            .as_ref()
            .filter(|_| ours.is_some_and(|h| h.id == id))
        else {
            tracing::warn!("{primary} holds fewer of our records ({to} of {applied}): without a data dir to cut back, resyncing whole");
            *whole = true;
            return;
        };
        tracing::warn!("{primary}'s history forked from ours after record {to}: dropping records {} to {applied}, which only this server had", to + 1);
        let done = d
            .hold_snapshots()
            .and_then(|_hold| d.rewind(to, &self.keyspace.store));
        match done {
            Ok(()) => {
                self.keyspace
                    .replication
                    .applied
                    .store(to, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::warn!("cannot cut back to record {to}: {e:#}; resyncing whole");
                *whole = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synced_link_starts_the_backoff_over_and_refusals_double_it() {
        let mut b = Backoff::default();
        let ms = |d: Duration| d.as_millis();
        // A primary that refuses again and again: 100, 200, ... up to 10 s.
        let waits: Vec<_> = (0..10).map(|_| ms(b.wait(false))).collect();
        assert_eq!(
            waits,
            [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000]
        );
        // A link that synced, however short it lived: at once again.
        assert_eq!(ms(b.wait(true)), 100);
        assert_eq!(ms(b.wait(false)), 200);
        // A primary restarted every few seconds: each relink synced, so the
        // wait never grows.
        for _ in 0..20 {
            assert_eq!(ms(b.wait(true)), 100);
        }
    }
}
