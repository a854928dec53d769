//! Applying what the primary sends: a snapshot (a full resync) and then the
//! records, each checked before it touches the store; with a data dir the
//! snapshot is kept as the replica's own and each record is logged under
//! the primary's number once the store holds it.

use std::io::{BufReader, Read, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use kura_log::{read_snapshot_stream, History, Record};
use kura_store::Change;

use super::super::primary::unix_millis;
use super::super::wire::{self, Frame};
use super::link::Link;
use super::Cx;
use crate::durable::{apply, clear_tables};

/// Acknowledgements nobody waits for go back at most this often.
const ACK_EVERY: Duration = Duration::from_millis(100);

/// How often a replica under `--fsync always` looks whether what it applied
/// is on disk, to acknowledge it.
const SYNC_POLL: Duration = Duration::from_millis(1);

/// Reads through to `out`: the snapshot a durable replica keeps is the
/// bytes it received.
struct Tee<R, W> {
    inner: R,
    out: W,
}

impl<R: Read, W: Write> Read for Tee<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.out.write_all(&buf[..n])?;
        Ok(n)
    }
}

impl Cx<'_> {
    /// Replaces what the server holds with a snapshot of `bytes` taken at
    /// record `at` of `history`.
    pub(super) fn full_resync(
        &self,
        r: &mut impl Read,
        history: History,
        at: u64,
        bytes: u64,
    ) -> anyhow::Result<()> {
        let (keyspace, store) = (self.keyspace, &self.keyspace.store);
        let name = std::path::Path::new("the primary's snapshot");
        // A table record this server cannot hold stops the resync (the
        // records after it are not applied; the next attempt starts over).
        let misfit = std::cell::RefCell::new(None);
        let each = |rec: Record| {
            if misfit.borrow().is_none() {
                if let Err(e) = apply(store, &keyspace.tables, &rec.mutation) {
                    *misfit.borrow_mut() = Some(e);
                }
            }
        };
        let state = &keyspace.replication;
        let seq = match &keyspace.durable {
            None => {
                store.replay(Change::Flush { at: 0 });
                clear_tables(&keyspace.tables);
                state.applied.store(0, Ordering::Relaxed);
                let (seq, n) = read_snapshot_stream(r.take(bytes), bytes, name, each)?;
                if let Some(e) = misfit.take() {
                    bail!("in the primary's snapshot: {e}");
                }
                *state.history.lock() = Some(history);
                if let Some(j) = state.journal.get() {
                    j.restart(seq);
                }
                tracing::info!("full resync: {n} entries at record {seq}");
                seq
            }
            Some(d) => {
                let _hold = d.hold_snapshots()?;
                store.replay(Change::Flush { at: 0 });
                clear_tables(&keyspace.tables);
                let tmp = kura_log::snapshot_tmp_path(d.dir(), at);
                let file = std::fs::File::create(&tmp)?;
                let mut tee = Tee {
                    inner: r.take(bytes),
                    out: std::io::BufWriter::with_capacity(1 << 20, file),
                };
                let got = read_snapshot_stream(&mut tee, bytes, name, each)
                    .map_err(anyhow::Error::from)
                    .and_then(|(seq, n)| {
                        let file = tee.out.into_inner().map_err(|e| e.into_error())?;
                        file.sync_all()?;
                        Ok((seq, n))
                    });
                let got = got.and_then(|x| match misfit.take() {
                    Some(e) => Err(anyhow!("in the primary's snapshot: {e}")),
                    None => Ok(x),
                });
                let (seq, n) = match got {
                    Ok(x) if x.0 == at => x,
                    other => {
                        let _ = std::fs::remove_file(&tmp);
                        other?;
                        bail!("the snapshot is not at record {at}, as the primary said");
                    }
                };
                d.replace(at, tmp, history)?;
                tracing::info!(
                    "full resync: {n} entries at record {seq}, kept in {}",
                    d.dir().display()
                );
                seq
            }
        };
        if seq != at {
            bail!("the snapshot is at record {seq}, the primary said {at}");
        }
        state.applied.store(at, Ordering::Relaxed);
        Ok(())
    }

    /// Applies the records that come until the stream breaks or the thread
    /// is told to stop.
    pub(super) fn stream(&self, r: &mut BufReader<Link>) -> anyhow::Result<()> {
        let (keyspace, state) = (self.keyspace, &self.keyspace.replication);
        let durable = keyspace.durable.as_deref();
        let mut applied = state.applied.load(Ordering::Relaxed);
        let mut acked = applied;
        let mut short_poll = false;
        // The primary asked for an acknowledgement at once (a write waits).
        let mut ack_now = false;
        let mut last_ack = Instant::now();
        let mut buf: Vec<u8> = Vec::new();
        let mut heard = Instant::now();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if self.stopping() {
                return Ok(());
            }
            let n = match r.read(&mut chunk) {
                Ok(0) => bail!("the primary closed the stream"),
                Ok(n) => n,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    if heard.elapsed() > super::SILENCE {
                        bail!("nothing from the primary for {:?}", super::SILENCE);
                    }
                    0
                }
                Err(e) => return Err(e.into()),
            };
            if n > 0 {
                heard = Instant::now();
                buf.extend_from_slice(&chunk[..n]);
                state.heard_ms.store(unix_millis(), Ordering::Relaxed);
            }
            let mut pos = 0;
            while let Some((frame, len)) = wire::frame(&buf[pos..])? {
                match frame {
                    Frame::Records(all) => {
                        let mut records = all;
                        let first = applied + 1;
                        while !records.is_empty() {
                            let (rec, len) = Record::decode(records)
                                .map_err(|e| anyhow!("a damaged record after {applied}: {e:?}"))?;
                            if rec.seq != applied + 1 {
                                bail!("record {} where {} was next", rec.seq, applied + 1);
                            }
                            // Never half-applied: a table record that does
                            // not fit changes nothing and drops the link.
                            apply(&keyspace.store, &keyspace.tables, &rec.mutation)
                                .map_err(|e| anyhow!("record {}: {e}", rec.seq))?;
                            applied = rec.seq;
                            if let Some(d) = durable {
                                d.append_replicated(rec)?;
                            }
                            // Said at once: a bad record later in the frame
                            // drops the link, and the next asks from here.
                            state.applied.store(applied, Ordering::Relaxed);
                            records = &records[len..];
                        }
                        state.primary_last.fetch_max(applied, Ordering::Relaxed);
                        // Replicas of this one (without a data dir) are
                        // fed from the journal's backlog.
                        if let (None, Some(j)) = (durable, state.journal.get()) {
                            j.replicated(first, applied, all);
                        }
                    }
                    Frame::AckNow => ack_now = true,
                    Frame::Heartbeat { last, .. } => {
                        state
                            .primary_last
                            .store(last.max(applied), Ordering::Relaxed);
                        // The primary's position is known: the lag is true.
                        state.link_up.store(true, Ordering::Relaxed);
                    }
                }
                pos += len;
            }
            buf.drain(..pos);
            // Caught up as of what was just heard (not as of a silence).
            if n > 0 && applied >= state.primary_last.load(Ordering::Relaxed) {
                state.caught_up_ms.store(unix_millis(), Ordering::Relaxed);
            }
            if let Some(d) = durable {
                // Read no faster than the log is written.
                d.wait_for_room(|| self.stopping());
            }
            // Under `--fsync always` a record is acknowledged once on disk.
            // At once when the primary asked (a write's reply waits for it:
            // --min-replicas-ack), else at most ten times a second.
            let ackable = durable.map_or(applied, |d| d.acknowledgeable(applied));
            if ackable != acked && (ack_now || last_ack.elapsed() >= ACK_EVERY) {
                r.get_mut()
                    .write_all(format!("ack {ackable}\r\n").as_bytes())?;
                acked = ackable;
                last_ack = Instant::now();
                ack_now = ackable < applied;
            }
            // Records applied and not yet on disk, or an acknowledgement
            // due: look again soon.
            let waiting = ackable < applied || (ackable != acked);
            if waiting != short_poll {
                short_poll = waiting;
                let poll = if waiting { SYNC_POLL } else { super::POLL };
                r.get_ref().tcp().set_read_timeout(Some(poll))?;
            }
        }
    }
}
