//! One connection of the worker's readiness loop (mod.rs): its socket,
//! buffers and session, and serving it when its socket is ready: read,
//! frame and run every complete request, write the replies, until the
//! socket has nothing more or the connection must move to a task.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use rustix::net::{SendAncillaryBuffer, SendFlags};

use crate::budget::Room;
use crate::conn::step::{configured_wire, step_one, wire_of};
use crate::conn::{End, Resume, Wire, READ_CHUNK};
use crate::exec::{Next, Session, Step};
use crate::latency::now_ns;
use crate::metrics::{add, incr, ConnGuard, ConnState, ThreadStats};
use crate::output::HIGH_WATER;
use crate::shared::Shared;
use crate::stop::StopSignal;

/// Reads that fill the buffer one connection may make before others go.
const FULL_READS: usize = 4;

/// A plain socket of the loop.
pub(super) enum Sock {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Sock {
    /// Reads into `buf`'s spare capacity; the bytes read. The loop's
    /// syscalls go through rustix, straight to the kernel: libc's wrappers
    /// of read, send and writev are cancellation points, which cost some
    /// 30 instructions a call for a cancellation no thread here uses.
    fn read_into(&self, buf: &mut BytesMut) -> io::Result<usize> {
        let (read, _) = rustix::io::read(self, buf.spare_capacity_mut())?;
        let n = read.len();
        // SAFETY: the kernel wrote these `n` bytes at the start of the
        // spare capacity (rustix hands back the part it initialised), so
        // they may now be counted in (tests: every request of the suites
        // is read here).
        unsafe { buf.set_len(buf.len() + n) };
        Ok(n)
    }

    /// Half-closes the connection: the client reads what is written, then
    /// its end of file.
    fn shutdown(&self) {
        let _ = match self {
            Sock::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            Sock::Unix(s) => s.shutdown(std::net::Shutdown::Write),
        };
    }
}

impl AsFd for Sock {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Sock::Tcp(s) => s.as_fd(),
            Sock::Unix(s) => s.as_fd(),
        }
    }
}

/// Both kinds are sockets: a client gone away is an error (EPIPE), never
/// a SIGPIPE.
impl io::Write for &Sock {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(rustix::net::send(self, buf, SendFlags::NOSIGNAL)?)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let mut control = SendAncillaryBuffer::default();
        Ok(rustix::net::sendmsg(
            self,
            bufs,
            &mut control,
            SendFlags::NOSIGNAL,
        )?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A connection leaving the loop for a task, where it goes on from where
/// it stands.
pub(super) struct Moved {
    sock: Sock,
    guard: ConnGuard,
    resume: Resume,
}

impl Moved {
    /// Serves the connection in a task of the calling thread's event loop.
    pub(super) fn spawn(
        self,
        shared: &Arc<Shared>,
        stats: &Arc<ThreadStats>,
        stop: &Rc<StopSignal>,
    ) {
        let (shared, stats, stop) = (shared.clone(), stats.clone(), stop.clone());
        let Moved {
            sock,
            guard,
            resume,
        } = self;
        tokio::task::spawn_local(async move {
            match sock {
                Sock::Tcp(s) => {
                    if let Ok(s) = tokio::net::TcpStream::from_std(s) {
                        crate::conn::serve(s, &shared, &stats, &stop, guard, Some(resume)).await;
                    }
                }
                Sock::Unix(s) => {
                    if let Ok(s) = tokio::net::UnixStream::from_std(s) {
                        crate::conn::serve(s, &shared, &stats, &stop, guard, Some(resume)).await;
                    }
                }
            }
            shared.counters.curr.fetch_sub(1, Ordering::Relaxed);
        });
    }
}

/// What serving a ready connection came to.
pub(super) enum Outcome {
    /// Everything it sent is answered: wait for its next bytes.
    Wait,
    /// It served `-R` requests in a row: others go first, then it again.
    Again,
    /// It has to wait for something else: to a task of its own, to end
    /// with `End` once its replies are written, if given.
    Task(Option<End>),
    /// It is done.
    End(End),
}

/// One connection of the loop.
pub(super) struct Client<'a> {
    pub(super) sock: Sock,
    guard: ConnGuard,
    session: Session<'a>,
    rbuf: BytesMut,
    room: Room<'a>,
    wire: Option<Wire>,
    swallow: usize,
    /// The buffer holds nothing to run until more is read.
    starved: bool,
}

/// What every connection of a worker shares.
pub(super) struct Worker<'a> {
    pub(super) shared: &'a Shared,
    pub(super) limits: kura_proto::Limits,
    pub(super) no_room: kura_proto::Limits,
    pub(super) per_event: usize,
}

impl<'a> Client<'a> {
    pub(super) fn new(
        sock: Sock,
        guard: ConnGuard,
        shared: &'a Shared,
        stats: &'a ThreadStats,
    ) -> Self {
        let mut session = Session::new(shared, stats);
        session.cfd = guard.id() as i64;
        session.park = crate::conn::park::parks(shared);
        Client {
            sock,
            guard,
            session,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            room: Room::new(&shared.values),
            wire: configured_wire(shared),
            swallow: 0,
            starved: true,
        }
    }

    /// Reads, runs and answers until the socket has nothing more to read or
    /// the connection has to go elsewhere.
    /// `closed`: the event said the client's side is closed (or failed):
    /// then the socket is read until it says so, however short the reads,
    /// since no further event will come for the end of file.
    pub(super) fn serve(&mut self, w: &Worker<'_>, closed: bool) -> Outcome {
        let stats = self.session.stats;
        // Whether the last read may have left bytes behind (it filled the
        // buffer): edge-triggered readiness says nothing more until new
        // bytes come.
        let mut more = true;
        // Reads that filled the buffer, in this turn: a client that sends
        // without pause gives way after a few, as after `-R` requests.
        let mut full_reads = 0;
        loop {
            if !self.starved {
                let ran = self.frames(w);
                if matches!(ran, Outcome::Again) {
                    return ran;
                }
                w.shared.keyspace.batch_done(&self.session.report);
                if !self.session.out.is_empty() {
                    self.guard.info.set_state(ConnState::Write);
                    let pending = self.session.out.pending();
                    match self.session.out.write_now(&mut &self.sock) {
                        Ok(true) => add(&stats.bytes_written, pending as u64),
                        Ok(false) => {
                            let then = match ran {
                                Outcome::End(e) => Some(e),
                                _ => None,
                            };
                            return Outcome::Task(then);
                        }
                        Err(_) => return Outcome::End(End::Io),
                    }
                }
                match ran {
                    Outcome::Wait if self.session.tracking.is_some() => {
                        return Outcome::Task(None);
                    }
                    Outcome::Wait => {}
                    Outcome::End(End::Replicate) => return Outcome::Task(Some(End::Replicate)),
                    other => return other,
                }
                if self.rbuf.is_empty() && self.rbuf.capacity() > crate::conn::KEEP_CAPACITY {
                    self.rbuf = BytesMut::with_capacity(READ_CHUNK);
                }
            }
            self.guard.info.set_state(ConnState::Waiting);
            if !more {
                return Outcome::Wait;
            }
            if full_reads == FULL_READS {
                return Outcome::Again;
            }
            // A buffer grown for a large frame already has room for the rest.
            // (And never a read of nothing, which would look like the end.)
            let spare = self.rbuf.capacity() - self.rbuf.len();
            if spare == 0 || (spare < READ_CHUNK / 4 && !self.room.holds()) {
                self.rbuf.reserve(READ_CHUNK);
            }
            let asked = self.rbuf.capacity() - self.rbuf.len();
            let n = match self.sock.read_into(&mut self.rbuf) {
                Ok(0) => return Outcome::End(End::Eof),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Outcome::Wait,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Outcome::End(End::Io),
            };
            more = n == asked || closed;
            full_reads += usize::from(more);
            add(&stats.bytes_read, n as u64);
            self.wire.get_or_insert_with(|| wire_of(self.rbuf.first()));
            if self.swallow > 0 {
                let k = self.swallow.min(self.rbuf.len());
                self.rbuf.advance(k);
                self.swallow -= k;
                if self.swallow > 0 {
                    self.guard.info.set_state(ConnState::Swallow);
                    continue;
                }
            }
            self.starved = false;
        }
    }

    /// Runs the requests buffered: `Wait` when what is left is an incomplete
    /// frame (or nothing), `Again` after `-R` of them, `Task` when a frame
    /// needs room the budget does not have, `End` for `quit`, garbage and a
    /// replica's `replicate`.
    fn frames(&mut self, w: &Worker<'_>) -> Outcome {
        let Some(wire) = self.wire else {
            return Outcome::Wait;
        };
        let stats = self.session.stats;
        let info = &self.guard.info;
        info.set_state(ConnState::ParseCmd);
        self.session.now = w.shared.store.now();
        info.set_last_cmd(self.session.now);
        let mut pos = 0;
        let mut served = 0;
        let mut shrink = false;
        let mut clock = now_ns();
        let outcome = loop {
            if pos >= self.rbuf.len() {
                self.starved = true;
                break Outcome::Wait;
            }
            // A request refused for lack of room is framed as if its value
            // were too large: answered at once, its value skipped.
            let refusing = self.session.no_room;
            let limits = if refusing { &w.no_room } else { &w.limits };
            let (step, family) = step_one(
                &mut self.session,
                wire,
                &self.rbuf[pos..],
                limits,
                &info.addr,
            );
            self.session.no_room = false;
            let (len, next) = match step {
                Step::More { needed } => {
                    let have = self.rbuf.len() - pos;
                    if needed > have && !refusing && !self.room.try_cover(needed) {
                        break Outcome::Task(None);
                    }
                    if needed > have {
                        self.rbuf.reserve(needed - have);
                    }
                    self.starved = true;
                    break Outcome::Wait;
                }
                Step::Garbage => break Outcome::End(End::Garbage),
                // Its reads from flash started: its task waits for them,
                // then runs it (conn/task.rs's `resume`).
                Step::Parked => break Outcome::Task(None),
                Step::Done { len, next } => {
                    shrink |= self.room.release();
                    clock = stats.latency.record_since(family, clock);
                    (len, next)
                }
            };
            pos += len;
            match next {
                Next::Continue => {}
                Next::Swallow(n) => {
                    let k = n.min(self.rbuf.len() - pos);
                    pos += k;
                    self.swallow = n - k;
                }
                Next::Close => break Outcome::End(End::Quit),
                Next::Replicate => break Outcome::End(End::Replicate),
                // Its task carries the stream out (conn/stream.rs).
                Next::Stream => break Outcome::Task(None),
            }
            served += 1;
            if self.session.out.pending() > HIGH_WATER {
                let pending = self.session.out.pending();
                match self.session.out.write_now(&mut &self.sock) {
                    Ok(true) => add(&stats.bytes_written, pending as u64),
                    Ok(false) => break Outcome::Task(None),
                    Err(_) => break Outcome::End(End::Io),
                }
                clock = now_ns();
            }
            if served >= w.per_event {
                incr(&stats.conn_yields);
                break Outcome::Again;
            }
        };
        self.rbuf.advance(pos.min(self.rbuf.len()));
        if shrink {
            // The buffer grew for a large frame that is done: its memory
            // goes back with the room.
            self.rbuf = BytesMut::from(&self.rbuf[..]);
        }
        outcome
    }

    /// What the connection's task goes on from (sent to the worker's task
    /// thread).
    pub(super) fn into_moved(self, then: Option<End>) -> Moved {
        Moved {
            sock: self.sock,
            guard: self.guard,
            resume: Resume {
                rbuf: self.rbuf,
                session: self.session.detach(),
                wire: self.wire,
                swallow: self.swallow,
                then,
            },
        }
    }

    /// Closes the connection (its replies are written).
    pub(super) fn close(self, shared: &Shared, end: End) {
        crate::conn::closed(shared, &self.guard, end);
        self.sock.shutdown();
        shared.counters.curr.fetch_sub(1, Ordering::Relaxed);
    }
}
