//! Carrying out a session's stream in its connection's task (task.rs): a
//! key dump, a bounded step at a time, its lines written out whenever
//! they pass [`DUMP_CHUNK`] so the connection holds at most about that
//! much, then back to requests; or a watch, whose queued lines are written
//! as they come until the client goes or the server stops. The client's
//! bytes during a dump wait in the socket; during a watch they are read
//! and dropped, as memcached does.

use std::future::Future;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::task::flush;
use super::End;
use crate::exec::Session;
use crate::inspect::dump::Dump;
use crate::inspect::watch::Subscription;
use crate::inspect::Stream;
use crate::metrics::{add, ConnGuard, ConnState};

/// A dump's output is written out once it holds this much.
const DUMP_CHUNK: usize = 64 * 1024;

/// Carries out `stream`; `Ok` when the connection goes on with requests.
pub(super) async fn run<S, F>(
    job: Stream,
    stream: &mut S,
    session: &mut Session<'_>,
    mut stop: Pin<&mut F>,
    conn: &ConnGuard,
) -> Result<(), End>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Future<Output = ()>,
{
    match job {
        Stream::Dump(d) => dump(d, stream, session, stop.as_mut(), conn).await,
        Stream::Watch(sub) => Err(watch(sub, stream, session, stop, conn).await),
    }
}

async fn dump<S, F>(
    mut d: Dump,
    stream: &mut S,
    session: &mut Session<'_>,
    mut stop: Pin<&mut F>,
    conn: &ConnGuard,
) -> Result<(), End>
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Future<Output = ()>,
{
    let shared = session.shared;
    loop {
        conn.info.set_state(ConnState::Write);
        let done = d.step(&shared.store, &mut session.out);
        if (done || session.out.pending() >= DUMP_CHUNK)
            && !flush(stream, session, stop.as_mut(), conn).await
        {
            return Err(End::Io);
        }
        if done {
            return Ok(());
        }
        if shared.is_stopping() {
            return Err(End::Stopping);
        }
        // The worker's other connections go between steps.
        tokio::task::yield_now().await;
    }
}

async fn watch<S, F>(
    sub: Subscription,
    stream: &mut S,
    session: &mut Session<'_>,
    mut stop: Pin<&mut F>,
    conn: &ConnGuard,
) -> End
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Future<Output = ()>,
{
    let w = &sub.watcher;
    let mut spare = Vec::new();
    let mut dropped = [0u8; 1024];
    conn.info.set_state(ConnState::Waiting);
    loop {
        let mut lines = w.take(spare);
        if !lines.is_empty() {
            let written = tokio::select! {
                biased;
                _ = stop.as_mut() => return End::Stopping,
                r = stream.write_all(&lines) => r.and(Ok(())),
            };
            if written.is_err() {
                return End::Io;
            }
            add(&session.stats.bytes_written, lines.len() as u64);
            lines.clear();
            spare = lines;
            continue;
        }
        spare = lines;
        tokio::select! {
            biased;
            _ = stop.as_mut() => return End::Stopping,
            () = w.notify.notified() => {}
            r = stream.read(&mut dropped) => match r {
                Ok(0) => return End::Eof,
                Ok(_) => {}
                Err(_) => return End::Io,
            },
        }
    }
}
