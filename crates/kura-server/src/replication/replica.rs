//! The replica's side (`--replica-of HOST:PORT`): a thread that connects
//! to the primary's ordinary port, asks for the records after the last it
//! applied, and applies what comes, in order, each record checked (CRC,
//! number) before it touches the store. A full resync empties the store,
//! loads the snapshot as it arrives, then goes on with the records. A
//! broken stream (a bad record, a gap, a primary that goes silent for
//! three heartbeats) drops the link, and the thread tries again with
//! backoff; what it applied stays, so the next attempt is usually a partial
//! resync.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use kura_log::{read_snapshot_stream, Record};
use kura_store::Change;

use super::primary::unix_millis;
use super::wire::{self, Frame, Handshake};
use crate::durable::apply;
use crate::shared::Shared;

/// The primary is taken for gone after this long without a byte (it sends
/// a heartbeat every second).
const SILENCE: Duration = Duration::from_secs(5);

/// How long a read waits before the thread looks whether the server stops.
const POLL: Duration = Duration::from_millis(250);

/// Acknowledgements go back at most this often.
const ACK_EVERY: Duration = Duration::from_millis(100);

/// Starts following `primary` for the server `shared`.
///
/// # Errors
/// The thread cannot be started.
pub fn start(shared: Arc<Shared>, primary: String) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("kura-replica".into())
        .spawn(move || run(&shared, &primary))
}

fn run(shared: &Shared, primary: &str) {
    let mut backoff = Duration::from_millis(100);
    while !shared.is_stopping() {
        let began = Instant::now();
        if let Err(e) = follow(shared, primary) {
            shared.replication.link_up.store(false, Ordering::Relaxed);
            if shared.is_stopping() {
                break;
            }
            tracing::warn!("replication from {primary}: {e:#}; trying again in {backoff:?}");
        }
        // A link that lived a while starts the backoff over.
        if began.elapsed() > Duration::from_secs(10) {
            backoff = Duration::from_millis(100);
        }
        let until = Instant::now() + backoff;
        while Instant::now() < until && !shared.is_stopping() {
            std::thread::sleep(Duration::from_millis(20));
        }
        backoff = (backoff * 2).min(Duration::from_secs(10));
    }
}

/// One connection to the primary, until it breaks.
fn follow(shared: &Shared, primary: &str) -> anyhow::Result<()> {
    let state = &shared.replication;
    let addr = primary
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {primary}"))?
        .next()
        .ok_or_else(|| anyhow!("{primary} resolves to nothing"))?;
    let mut sock = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .with_context(|| format!("cannot connect to {primary}"))?;
    sock.set_read_timeout(Some(SILENCE))?;
    sock.set_nodelay(true)?;
    if let Some((user, pass)) = state.auth.as_ref().and_then(|c| c.first()) {
        authenticate(&mut sock, user, pass)?;
    }
    let history = state.history.lock().clone();
    let applied = state.applied.load(Ordering::Relaxed);
    let ask = format!(
        "replicate {} {applied}\r\n",
        history.as_deref().unwrap_or("-")
    );
    sock.write_all(ask.as_bytes())?;
    let mut r = BufReader::with_capacity(1 << 20, sock.try_clone()?);
    let mut line = String::new();
    // An answer is one short line; a peer that sends more is no primary.
    (&mut r).take(512).read_line(&mut line)?;
    match Handshake::parse(line.trim_end()) {
        Some(Handshake::Continue { id, after }) => {
            if after != applied {
                bail!("the primary continues after record {after}, we applied {applied}");
            }
            *state.history.lock() = Some(id);
            state.replica_partial.fetch_add(1, Ordering::Relaxed);
        }
        Some(Handshake::FullResync { id, at, bytes }) => {
            if applied > 0 {
                // Loud: everything this replica holds is replaced.
                tracing::warn!(
                    "{primary} cannot continue our history {} after record {applied} (its history is {id}: restarted empty, or too far ahead of us): full resync, replacing everything this replica holds",
                    history.as_deref().unwrap_or("-")
                );
            }
            full_resync(shared, &mut r, at, bytes)?;
            *state.history.lock() = Some(id);
            state.replica_full.fetch_add(1, Ordering::Relaxed);
        }
        Some(Handshake::Refused(why)) => bail!("the primary refused: {why}"),
        None => bail!("not a replication answer: {:?}", line.trim_end()),
    }
    sock.set_read_timeout(Some(POLL))?;
    state.link_up.store(true, Ordering::Relaxed);
    tracing::info!(
        "replicating from {primary} after record {}",
        state.applied.load(Ordering::Relaxed)
    );
    stream(shared, &mut r, &mut sock)
}

/// memcached's ASCII authentication: `set` with `user password` as data.
fn authenticate(sock: &mut TcpStream, user: &[u8], pass: &[u8]) -> anyhow::Result<()> {
    let mut req = format!("set auth 0 0 {}\r\n", user.len() + 1 + pass.len()).into_bytes();
    req.extend_from_slice(user);
    req.push(b' ');
    req.extend_from_slice(pass);
    req.extend_from_slice(b"\r\n");
    sock.write_all(&req)?;
    let mut reply = Vec::new();
    let mut b = [0u8; 1];
    while !reply.ends_with(b"\r\n") && reply.len() < 256 {
        if sock.read(&mut b)? == 0 {
            bail!("the primary closed the connection during authentication");
        }
        reply.push(b[0]);
    }
    if reply != b"STORED\r\n" {
        bail!(
            "the primary refused our credentials: {}",
            String::from_utf8_lossy(&reply).trim_end()
        );
    }
    Ok(())
}

/// Replaces the store's contents with a snapshot of `bytes` taken at
/// record `at`.
fn full_resync(shared: &Shared, r: &mut impl Read, at: u64, bytes: u64) -> anyhow::Result<()> {
    let store = &shared.store;
    store.replay(Change::Flush { at: 0 });
    let name = std::path::Path::new("the primary's snapshot");
    let (seq, n) = read_snapshot_stream(r.take(bytes), bytes, name, |rec| {
        apply(store, &rec.mutation);
    })
    .inspect_err(|_| {
        // Half a snapshot is no state to serve.
        store.replay(Change::Flush { at: 0 });
        shared.replication.applied.store(0, Ordering::Relaxed);
    })?;
    if seq != at {
        store.replay(Change::Flush { at: 0 });
        bail!("the snapshot is at record {seq}, the primary said {at}");
    }
    shared.replication.applied.store(at, Ordering::Relaxed);
    tracing::info!("full resync: {n} entries at record {at}");
    Ok(())
}

/// Applies the records that come until the stream breaks.
fn stream(shared: &Shared, r: &mut impl BufRead, sock: &mut TcpStream) -> anyhow::Result<()> {
    let state = &shared.replication;
    let mut applied = state.applied.load(Ordering::Relaxed);
    let mut acked = applied;
    let mut last_ack = Instant::now();
    let mut buf: Vec<u8> = Vec::new();
    let mut heard = Instant::now();
    loop {
        if shared.is_stopping() {
            return Ok(());
        }
        let mut chunk = [0u8; 64 * 1024];
        let n = match r.read(&mut chunk) {
            Ok(0) => bail!("the primary closed the stream"),
            Ok(n) => n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                if heard.elapsed() > SILENCE {
                    bail!("nothing from the primary for {SILENCE:?}");
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        heard = Instant::now();
        buf.extend_from_slice(&chunk[..n]);
        state.heard_ms.store(unix_millis(), Ordering::Relaxed);
        let mut pos = 0;
        while let Some((frame, len)) = wire::frame(&buf[pos..])? {
            match frame {
                Frame::Records(mut records) => {
                    while !records.is_empty() {
                        let (rec, len) = Record::decode(records)
                            .map_err(|e| anyhow!("a damaged record after {applied}: {e:?}"))?;
                        if rec.seq != applied + 1 {
                            bail!("record {} where {} was next", rec.seq, applied + 1);
                        }
                        apply(&shared.store, &rec.mutation);
                        applied = rec.seq;
                        // Said at once: a bad record later in the frame
                        // drops the link, and the next asks from here.
                        state.applied.store(applied, Ordering::Relaxed);
                        records = &records[len..];
                    }
                    state.primary_last.fetch_max(applied, Ordering::Relaxed);
                }
                Frame::Heartbeat { last, .. } => {
                    state
                        .primary_last
                        .store(last.max(applied), Ordering::Relaxed);
                }
            }
            pos += len;
        }
        buf.drain(..pos);
        if applied != acked && last_ack.elapsed() >= ACK_EVERY {
            sock.write_all(format!("ack {applied}\r\n").as_bytes())?;
            acked = applied;
            last_ack = Instant::now();
        }
    }
}
