//! Sending records to a replica from the thread that made them, as Redis
//! writes its replicas' buffers before its event loop sleeps: no hop to
//! the thread that owns the stream's connection, no wait behind that
//! thread's other connections.
//!
//! A stream over plain TCP that has caught up with the backlog is *live*:
//! whoever adds records to the backlog sends them. A worker marks that it
//! appended (a thread-local flag, set under the shard's lock) and the
//! connection sends at the end of its batch of requests ([`batch_done`]),
//! everything the loop appended since the last frame in one write; the
//! log thread of a durable server, and a replica's thread that
//! relays records, send right after they push. Every write is a
//! non-blocking one under the stream's lock, so a send never waits on a
//! slow replica: what the socket does not take stays pending (one frame at
//! most), the stream's own task is told, waits until the socket is
//! writable, sends it and goes on from the backlog, and meanwhile nobody
//! else sends. A stream that is not live (catching up from the log's
//! files, TLS, a Unix socket) is sent to by its own task only.

use std::io::IoSlice;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kura_store::Report;
use parking_lot::Mutex;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::replication::backlog::{Backlog, Read};
use crate::replication::{wire, StreamInfo};

/// Bytes of records in one frame at most (about).
pub(super) const FRAME_BYTES: usize = 256 * 1024;

/// A replica's connection that records may be sent on from any thread.
#[derive(Debug)]
pub(crate) struct Direct {
    /// A second handle on the stream's socket (a `dup`), registered with
    /// the event loop of the stream's task, so that task can wait until it
    /// is writable.
    sock: TcpStream,
    state: Mutex<State>,
    /// Tells the stream's task that it has something to do: bytes pending,
    /// the stream no longer live, or a write failed.
    kick: Notify,
    info: Arc<StreamInfo>,
    /// Ask the replica to acknowledge each frame at once.
    wants_acks: bool,
    /// A thread holds `state` to send records (see [`Direct::flush`]).
    sending: AtomicBool,
    /// Records were added that a sender may not have seen.
    again: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// Records are sent from any thread (else by the stream's task only).
    live: bool,
    /// The first record not sent yet.
    next: u64,
    /// Bytes the socket did not take, from `sent` on: only the stream's
    /// task writes while any are left.
    pending: Vec<u8>,
    sent: usize,
    /// A write failed: the task ends the stream with this.
    failed: Option<std::io::Error>,
}

impl Direct {
    pub(super) fn new(sock: TcpStream, info: Arc<StreamInfo>, wants_acks: bool) -> Direct {
        Direct {
            sock,
            state: Mutex::new(State::default()),
            kick: Notify::new(),
            info,
            wants_acks,
            sending: AtomicBool::new(false),
            again: AtomicBool::new(false),
        }
    }

    /// Sends what the backlog holds after what was sent, if live and
    /// nothing is pending; never waits for the socket.
    ///
    /// Never waits for another thread's send either: a thread that finds
    /// one under way leaves its records to it (`again`, looked at by the
    /// sender after it lets go of the state), so the workers of a busy
    /// primary do not queue behind each other's writes (they spun on the
    /// lock: 0.37 `sched_yield`s a set at 30,000 sets/s) and their records
    /// leave together.
    pub(crate) fn flush(&self, backlog: &Backlog) {
        // Said before trying the lock: a sender that holds it looks after
        // letting it go (all sequentially consistent).
        self.again.store(true, Ordering::SeqCst);
        while self.again.load(Ordering::SeqCst) {
            let mut st = match self.state.try_lock() {
                Some(st) => st,
                None if self.sending.load(Ordering::SeqCst) => return,
                // The stream's task, for a moment: wait for it.
                None => self.state.lock(),
            };
            self.sending.store(true, Ordering::SeqCst);
            self.again.store(false, Ordering::SeqCst);
            self.send_live(&mut st, backlog);
            self.sending.store(false, Ordering::SeqCst);
        }
    }

    /// [`Direct::flush`]'s sending, under the state's lock.
    fn send_live(&self, st: &mut State, backlog: &Backlog) {
        if !st.live || !st.pending.is_empty() || st.failed.is_some() {
            return;
        }
        loop {
            match backlog.read(st.next, FRAME_BYTES) {
                Read::Records { bytes, last } => {
                    let mut head = Vec::with_capacity(5);
                    let mut tail = Vec::with_capacity(1);
                    if self.wants_acks {
                        wire::ack_now(&mut tail);
                    }
                    let mut parts = records_frame(&mut head, &bytes);
                    parts.push(&tail);
                    st.next = last + 1;
                    self.info.sent.store(last, Ordering::Relaxed);
                    if !self.write(st, &parts) {
                        return;
                    }
                    if last >= backlog.last() {
                        return;
                    }
                }
                Read::Wait => return,
                Read::Behind { .. } => {
                    // Overtaken: the task decides (the log's files, or a
                    // full resync later).
                    st.live = false;
                    self.kick.notify_one();
                    return;
                }
            }
        }
    }

    /// Writes `parts` without blocking; what the socket does not take
    /// becomes pending and the task is told. False unless all went.
    fn write(&self, st: &mut State, parts: &[&[u8]]) -> bool {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut done = 0;
        while done < total {
            let slices = remaining(parts, done);
            match self.sock.try_write_vectored(&slices) {
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    st.failed = Some(e);
                    self.kick.notify_one();
                    return false;
                }
            }
        }
        if done == total {
            return true;
        }
        for s in remaining(parts, done) {
            st.pending.extend_from_slice(&s);
        }
        st.sent = 0;
        self.kick.notify_one();
        false
    }

    /// Sends `bytes` from the stream's task, in order with everything
    /// sent from other threads, waiting for the socket as needed.
    pub(super) async fn send(&self, bytes: &[u8]) -> std::io::Result<()> {
        {
            let mut st = self.state.lock();
            if let Some(e) = st.failed.take() {
                return Err(e);
            }
            if st.pending.is_empty() {
                if self.write(&mut st, &[bytes]) {
                    return Ok(());
                }
            } else {
                st.pending.extend_from_slice(bytes);
            }
        }
        self.drain().await
    }

    /// Waits until the pending bytes are written (the stream's task).
    pub(super) async fn drain(&self) -> std::io::Result<()> {
        loop {
            {
                let mut st = self.state.lock();
                if let Some(e) = st.failed.take() {
                    return Err(e);
                }
                while st.sent < st.pending.len() {
                    match self.sock.try_write(&st.pending[st.sent..]) {
                        Ok(n) => st.sent += n,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                if st.sent == st.pending.len() {
                    st.pending = Vec::new();
                    st.sent = 0;
                    return Ok(());
                }
            }
            self.sock.writable().await?;
        }
    }

    /// Makes the stream live from record `next` on (the task has sent
    /// everything before it).
    pub(super) fn set_live(&self, next: u64) {
        let mut st = self.state.lock();
        st.live = true;
        st.next = next;
    }

    /// Whether others may send, whether bytes are pending, and a failure.
    pub(super) fn status(&self) -> (bool, bool, Option<std::io::Error>) {
        let mut st = self.state.lock();
        (st.live, !st.pending.is_empty(), st.failed.take())
    }

    /// Tells the task to look.
    pub(crate) fn kick(&self) {
        self.kick.notify_one();
    }

    /// Resolves when the task has something to do.
    pub(super) async fn kicked(&self) {
        self.kick.notified().await;
    }

    /// The record after the last sent.
    pub(super) fn next(&self) -> u64 {
        self.state.lock().next
    }
}

/// A records frame of the backlog's chunks `bytes`: its head (written
/// into `head`) and the chunks, as slices to send in order.
pub(super) fn records_frame<'a>(head: &'a mut Vec<u8>, bytes: &'a [bytes::Bytes]) -> Vec<&'a [u8]> {
    let len: usize = bytes.iter().map(|b| b.len()).sum();
    head.clear();
    wire::records_head(head, len);
    let mut parts: Vec<&[u8]> = Vec::with_capacity(bytes.len() + 2);
    parts.push(head);
    parts.extend(bytes.iter().map(|b| &b[..]));
    parts
}

/// The slices of `parts` after the first `done` bytes.
fn remaining<'a>(parts: &[&'a [u8]], mut done: usize) -> Vec<IoSlice<'a>> {
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        if done >= p.len() {
            done -= p.len();
            continue;
        }
        out.push(IoSlice::new(&p[done..]));
        done = 0;
    }
    out
}

/// Said by the journal after it appended a record for the caller of
/// `report` (under the shard's lock: it only sets a flag). A batched
/// caller's records wait for its [`Keyspace::batch_done`]; anyone else's
/// (the reaper, a thread of tests) are the streams' own tasks' to send,
/// told now.
///
/// [`Keyspace::batch_done`]: crate::Keyspace::batch_done
pub(crate) fn appended(backlog: &Backlog, report: &Report) {
    if !backlog.has_directs() {
        return;
    }
    if report.is_batched() {
        report.defer();
        return;
    }
    backlog.kick_directs();
}

/// What a batch of requests appended to the journal (its caller's report
/// says whether it did) is sent, here when a frame is due, else soon after
/// (primary/sender.rs). Redis feeds its replicas in the same turn of its
/// loop; a task woken per batch to do it cost a task switch, a `Notify` and
/// a `select!` a set (bench/results/2026-11-27-replication-batch-send.txt).
#[inline]
pub(crate) fn batch_done(replication: &crate::replication::ReplicationState, report: &Report) {
    if !report.take_pending() {
        return;
    }
    send_soon(replication);
}

/// What the journal holds is sent, here when a frame is due, else soon.
pub(crate) fn send_soon(replication: &crate::replication::ReplicationState) {
    if let Some(j) = replication.journal.get() {
        let backlog = j.backlog();
        backlog.sender().send_soon(backlog);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kura_log::record::Record;
    use kura_log::MutationRef;
    use std::sync::atomic::AtomicU64;
    use tokio::io::AsyncReadExt;

    fn append(backlog: &Backlog, from: u64, to: u64, size: usize) {
        for seq in from..=to {
            let key = format!("k{seq}");
            let value = vec![b'v'; size];
            let m = MutationRef::Set {
                key: key.as_bytes(),
                value: &value,
                flags: 0,
                exptime: 0,
                cas: seq,
                stale: false,
                binary_key: false,
            };
            assert_eq!(backlog.append(&m), seq);
        }
    }

    /// The numbers of the records in `frames` (records frames only), in
    /// order, and whether every frame was whole.
    fn seqs(mut b: &[u8]) -> Vec<u64> {
        let mut out = Vec::new();
        while let Some((frame, len)) = wire::frame(b).expect("a well-formed stream") {
            if let wire::Frame::Records(mut r) = frame {
                while !r.is_empty() {
                    let (rec, n) = Record::decode(r).expect("whole records");
                    out.push(rec.seq);
                    r = &r[n..];
                }
            }
            b = &b[len..];
        }
        assert!(b.is_empty(), "{} bytes of a frame cut short", b.len());
        out
    }

    #[test]
    fn remaining_skips_what_was_written() {
        let parts: [&[u8]; 3] = [b"abc", b"", b"defg"];
        let flat = |v: Vec<IoSlice<'_>>| v.iter().flat_map(|s| s.to_vec()).collect::<Vec<u8>>();
        assert_eq!(flat(remaining(&parts, 0)), b"abcdefg");
        assert_eq!(flat(remaining(&parts, 2)), b"cdefg");
        assert_eq!(flat(remaining(&parts, 3)), b"defg");
        assert_eq!(flat(remaining(&parts, 7)), b"");
    }

    /// A replica's end of a loopback connection, and an active backlog
    /// that sends to the primary's end directly (not live yet).
    async fn linked() -> (
        tokio::net::TcpStream,
        Arc<Backlog>,
        Arc<Direct>,
        Arc<StreamInfo>,
    ) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let replica = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (primary, _) = listener.accept().await.unwrap();
        let sock = tokio::net::TcpStream::from_std(primary.plain_tcp_for_test()).unwrap();
        let info = Arc::new(StreamInfo {
            peer: "test".into(),
            acked: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            resyncing: Default::default(),
            resync_at: Default::default(),
        });
        let backlog = Arc::new(Backlog::new(64 << 20, 0));
        backlog.activate();
        let d = Arc::new(Direct::new(sock, info.clone(), false));
        backlog.add_direct(d.clone());
        (replica, backlog, d, info)
    }

    /// Records sent from other threads while the replica does not read
    /// stay in order with what the task sends, nothing is lost or sent
    /// twice, and what waits is one frame, not everything written.
    #[tokio::test(flavor = "current_thread")]
    async fn a_replica_that_does_not_read_gets_everything_in_order_once_it_does() {
        let (mut replica, backlog, d, info) = linked().await;
        // Not live: nothing goes.
        append(&backlog, 1, 10, 100);
        backlog.flush_directs();
        assert_eq!(d.next(), 0);
        // Live from record 1: others send, from threads of their own.
        d.set_live(1);
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let b = backlog.clone();
                std::thread::spawn(move || {
                    for i in 0..200 {
                        if i % 2 == t {
                            b.flush_directs();
                        }
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        // Far more than a socket's buffers hold, while nobody reads.
        append(&backlog, 11, 3000, 1000);
        backlog.flush_directs();
        for w in writers {
            w.join().unwrap();
        }
        let (live, pending, failed) = d.status();
        assert!(live && failed.is_none());
        assert!(pending, "the socket took 3 MB without a reader");
        assert!(d.state.lock().pending.len() <= FRAME_BYTES + 64 * 1024);
        // The task sends a heartbeat meanwhile: it goes after the pending
        // bytes, not into the middle of a frame.
        let mut hb = Vec::new();
        wire::heartbeat(&mut hb, 3000, 1);
        let task = {
            let d = d.clone();
            let b = backlog.clone();
            tokio::spawn(async move {
                d.send(&hb).await.unwrap();
                // The task's loop: drain, then go on from the backlog.
                loop {
                    d.drain().await.unwrap();
                    d.flush(&b);
                    if d.next() > 3000 && !d.status().1 {
                        break;
                    }
                }
            })
        };
        let mut got = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        while seqs_prefix_count(&got) < 3000 {
            let n = replica.read(&mut buf).await.unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        task.await.unwrap();
        assert_eq!(seqs(&got), (1..=3000).collect::<Vec<_>>());
        assert_eq!(info.sent.load(Ordering::Relaxed), 3000);
        backlog.remove_direct(&d);
        assert!(!backlog.has_directs());
    }

    /// Records handed to the sender thread by several threads at once all
    /// reach the replica once and in order, and while they keep coming they
    /// leave together: fewer frames than `send_soon` calls.
    #[tokio::test(flavor = "current_thread")]
    async fn the_sender_thread_sends_everything_once_in_order_and_coalesces() {
        let (mut replica, backlog, d, _info) = linked().await;
        d.set_live(1);
        // Two writers append in turn (the backlog numbers records in the
        // order appended) and ask the sender after each record.
        let turn = Arc::new(parking_lot::Mutex::new(1u64));
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let (b, turn) = (backlog.clone(), turn.clone());
                std::thread::spawn(move || loop {
                    {
                        let mut next = turn.lock();
                        if *next > 2000 {
                            return;
                        }
                        append(&b, *next, *next, 50);
                        *next += 1;
                    }
                    b.sender().send_soon(&b);
                })
            })
            .collect();
        // The stream's task, as in a server: when a send left bytes the
        // socket did not take (a replica slow to read, on a loaded
        // machine), it drains them and goes on from the backlog. Without
        // it the test waited for bytes nobody would send.
        let task = {
            let (d, b) = (d.clone(), backlog.clone());
            tokio::spawn(async move {
                loop {
                    d.kicked().await;
                    d.drain().await.unwrap();
                    d.flush(&b);
                }
            })
        };
        let got = receive(&mut replica, 2000)
            .await
            .expect("records left unsent");
        task.abort();
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(seqs(&got), (1..=2000).collect::<Vec<_>>());
        let mut frames = 0;
        let mut b = &got[..];
        while let Some((_, len)) = wire::frame(b).unwrap() {
            frames += 1;
            b = &b[len..];
        }
        assert!(frames < 2000, "{frames} frames for 2000 records");
        backlog.remove_direct(&d);
    }

    /// A record that no later write comes to send (added just after a
    /// frame went) still reaches the replica: the sender thread sends it.
    #[tokio::test(flavor = "current_thread")]
    async fn a_record_left_waiting_is_sent_by_the_thread() {
        let (mut replica, backlog, d, _info) = linked().await;
        d.set_live(1);
        // Once the event loop has seen the new socket writable (until then
        // a write would be left to the stream's task, which this test does
        // not run).
        d.sock.writable().await.unwrap();
        // The first goes at once (nothing sent yet), the second, right
        // after it, is not due: it waits for the thread.
        append(&backlog, 1, 1, 10);
        backlog.sender().send_soon(&backlog);
        append(&backlog, 2, 2, 10);
        backlog.sender().send_soon(&backlog);
        let got = receive(&mut replica, 2)
            .await
            .expect("the record left waiting was never sent");
        assert_eq!(seqs(&got), vec![1, 2]);
        backlog.remove_direct(&d);
    }

    /// What the replica reads until `records` records have come in whole
    /// frames; `None` if they do not within 20 s.
    async fn receive(replica: &mut tokio::net::TcpStream, records: usize) -> Option<Vec<u8>> {
        let mut got = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        let read = async {
            while seqs_prefix_count(&got) < records {
                let n = replica.read(&mut buf).await.unwrap();
                assert!(n > 0, "the primary closed the stream");
                got.extend_from_slice(&buf[..n]);
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(20), read)
            .await
            .ok()?;
        Some(got)
    }

    /// Records in the whole frames at the front of `b`.
    fn seqs_prefix_count(mut b: &[u8]) -> usize {
        let mut n = 0;
        while let Ok(Some((frame, len))) = wire::frame(b) {
            if let wire::Frame::Records(mut r) = frame {
                while let Ok((_, k)) = Record::decode(r) {
                    n += 1;
                    r = &r[k..];
                }
            }
            b = &b[len..];
        }
        n
    }

    trait PlainForTest {
        fn plain_tcp_for_test(&self) -> std::net::TcpStream;
    }

    impl PlainForTest for tokio::net::TcpStream {
        fn plain_tcp_for_test(&self) -> std::net::TcpStream {
            use std::os::fd::AsFd;
            let fd = self.as_fd().try_clone_to_owned().unwrap();
            std::net::TcpStream::from(fd)
        }
    }
}
