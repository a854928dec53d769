//! The UDP protocol (`-U`), as memcached 1.6 serves it: every datagram
//! starts with an 8-byte frame header (request id, sequence number,
//! datagram count, reserved) and holds whole requests, text or binary: a
//! payload that starts with the binary magic byte is binary, any other is
//! text, datagram by datagram whatever `-B` says. An incomplete or garbled
//! request ends the datagram silently; a request spread over several
//! datagrams gets no answer at all.
//!
//! Replies go out as memcached sends its response objects: each request's
//! reply (each key's, for a text multi-get) is a message of its own, cut
//! into datagrams of at most 1400 bytes numbered from 0, each with the
//! request's id. Replies are held until a request that flushes them (a text
//! `get` family command, `mn`, `quit`; a binary NOOP, QUIT or error status)
//! or the datagram's end. Then each one goes out, except that the empty
//! replies (binary quiet requests, `quit`, a multi-get's missed keys) and
//! the suppressed ones (`noreply`, meta `q`) right behind a sent reply are
//! dropped with it: an empty reply is sent, as one bare header with a count
//! of 0, only when it comes first.
//!
//! With a flash tier, a get of a value on flash does not read the device on
//! the thread that serves the socket: its read goes to the tier's reader
//! threads, and the rest of its datagram waits for it in a task of its own
//! (exec/flash.rs), which then runs the rest and answers, while the socket's
//! next datagrams are served (their answers may go out first, as each
//! carries its request id).

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use kura_proto::binary::{self, opcode, BinFrame};
use kura_proto::{parse, Frame, Request};
use tokio::net::UdpSocket;

use crate::conn::park::parks;
use crate::exec::{Detached, Next, Session, Step};
use crate::latency::Family;
use crate::metrics::{add, ThreadStats};
use crate::output::Output;
use crate::shared::{RunState, Shared};

pub(crate) const HEADER_LEN: usize = 8;
/// Largest reply datagram, header included (memcached's limit).
pub(crate) const MAX_DATAGRAM: usize = 1400;

/// One reply held for sending: memcached's response object.
enum Reply {
    /// Suppressed (`noreply`, meta `q`): never sent.
    Skip,
    /// The reply's bytes; an empty one may still be sent.
    Bytes(Vec<u8>),
}

/// Moves the held replies to `sent` as memcached transmits them: each in
/// turn, and once one has gone out the empty and suppressed replies right
/// behind it go with it unsent.
fn flush(held: &mut Vec<Reply>, sent: &mut Vec<Vec<u8>>) {
    let mut replies = held.drain(..).peekable();
    while let Some(reply) = replies.next() {
        let Reply::Bytes(bytes) = reply else {
            continue;
        };
        sent.push(bytes);
        while replies
            .next_if(|r| matches!(r, Reply::Skip) || matches!(r, Reply::Bytes(b) if b.is_empty()))
            .is_some()
        {}
    }
}

/// How far [`Datagram::run`] got.
enum Ran {
    /// Every request ran: the reply messages to send, in order.
    Done(Vec<Vec<u8>>),
    /// A request waits for reads from the flash tier
    /// ([`Session::unpark`]); then `run` goes on from it.
    Parked,
}

/// The requests of one datagram payload, run in turn; a get of a value on
/// flash stops them until its read is done (exec/flash.rs).
struct Datagram {
    is_binary: bool,
    held: Vec<Reply>,
    sent: Vec<Vec<u8>>,
    /// The first request not yet run.
    pos: usize,
    clock: Instant,
    /// The request at `pos` waited for its reads: it runs on them.
    unparked: bool,
}

impl Datagram {
    fn new(payload: &[u8]) -> Datagram {
        Datagram {
            is_binary: payload.first() == Some(&binary::REQUEST_MAGIC),
            held: Vec::new(),
            sent: Vec::new(),
            pos: 0,
            clock: Instant::now(),
            unparked: false,
        }
    }

    /// Runs the requests of `payload` (the one [`Datagram::new`] was given)
    /// from the first not yet run. A payload announced by a refused request
    /// is skipped as on TCP; an incomplete or garbled request, or one that
    /// closes a TCP connection, ends the datagram.
    fn run(&mut self, session: &mut Session<'_>, payload: &[u8]) -> Ran {
        while self.pos < payload.len() {
            let rest = &payload[self.pos..];
            let limits = &session.shared.limits;
            let family;
            let (step, flushes) = if self.is_binary {
                let frame = binary::parse(rest, limits);
                family = Family::of_binary(&frame);
                let noop = matches!(&frame, BinFrame::Request { request, .. } if request.opcode == opcode::NOOP);
                (session.step_binary(frame), noop)
            } else {
                let frame = parse(rest, limits);
                family = Family::of_text(&frame);
                let flushes = matches!(
                    &frame,
                    Frame::Request {
                        request: Request::Get(_) | Request::MetaNoop,
                        ..
                    }
                );
                (session.step(&frame), flushes)
            };
            if self.unparked && !matches!(step, Step::Parked) {
                // It ran on the values read: they are done with (unless it
                // stopped again, at a later key on flash).
                session.parked_done();
                self.unparked = false;
            }
            let (len, next) = match step {
                Step::Done { len, next } => (len, next),
                Step::Parked => {
                    self.unparked = true;
                    return Ran::Parked;
                }
                Step::More { .. } | Step::Garbage => break,
            };
            let now = Instant::now();
            session
                .stats
                .latency
                .record(family, now.duration_since(self.clock));
            self.clock = now;
            self.replied(session, next, flushes);
            self.pos = match next {
                Next::Continue => self.pos + len,
                Next::Swallow(n) => self.pos.saturating_add(len).saturating_add(n),
                // A stream needs a connection: over UDP it ends the datagram.
                Next::Close | Next::Replicate => break,
                // A dump or watch has no connection to go to: dropped unheard.
                Next::Stream => {
                    session.stream = None;
                    break;
                }
            };
        }
        flush(&mut self.held, &mut self.sent);
        Ran::Done(std::mem::take(&mut self.sent))
    }

    /// Holds the reply of the request just run, and sends what it flushes.
    fn replied(&mut self, session: &mut Session<'_>, next: Next, flushes: bool) {
        let mut parts = session.out.take_messages();
        let last = parts.pop().unwrap_or_default();
        self.held.extend(parts.into_iter().map(Reply::Bytes));
        // A binary error status flushes like NOOP.
        let error = self.is_binary && last.len() >= 8 && last[6..8] != [0, 0];
        if last.is_empty() && !self.is_binary && next != Next::Close {
            self.held.push(Reply::Skip);
        } else {
            self.held.push(Reply::Bytes(last));
        }
        if flushes || error || next == Next::Close {
            flush(&mut self.held, &mut self.sent);
        }
    }
}

/// Splits one reply message into datagrams for request `id`; an empty
/// message is one bare header with a count of 0.
pub(crate) fn datagrams(id: [u8; 2], reply: &[u8]) -> Vec<Vec<u8>> {
    let header = |seq: usize, total: u16| {
        let mut d = Vec::with_capacity(MAX_DATAGRAM);
        d.extend_from_slice(&id);
        d.extend_from_slice(&(seq as u16).to_be_bytes());
        d.extend_from_slice(&total.to_be_bytes());
        d.extend_from_slice(&[0, 0]);
        d
    };
    if reply.is_empty() {
        return vec![header(0, 0)];
    }
    let parts: Vec<&[u8]> = reply.chunks(MAX_DATAGRAM - HEADER_LEN).collect();
    let total = u16::try_from(parts.len()).unwrap_or(u16::MAX);
    parts
        .iter()
        .enumerate()
        .map(|(seq, part)| {
            let mut d = header(seq, total);
            d.extend_from_slice(part);
            d
        })
        .collect()
}

/// Where a datagram's replies go.
#[derive(Clone, Copy)]
struct Peer {
    id: [u8; 2],
    addr: SocketAddr,
}

pub(crate) async fn serve(sock: UdpSocket, shared: Arc<Shared>, stats: Arc<ThreadStats>) {
    let sock = Rc::new(sock);
    let mut rx = shared.watch();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let (n, addr) = tokio::select! {
            _ = rx.wait_for(|s| *s == RunState::Stopping) => return,
            r = sock.recv_from(&mut buf) => match r {
                Ok(x) => x,
                Err(_) => continue,
            },
        };
        add(&stats.bytes_read, n as u64);
        // memcached answers a request of several datagrams with nothing.
        if n < HEADER_LEN || buf[4] != 0 || buf[5] != 1 {
            continue;
        }
        let peer = Peer {
            id: [buf[0], buf[1]],
            addr,
        };
        let payload = &buf[HEADER_LEN..n];
        let mut session = Session::new(&shared, &stats);
        session.out = Output::for_datagrams();
        session.park = parks(&shared);
        let mut datagram = Datagram::new(payload);
        match datagram.run(&mut session, payload) {
            Ran::Done(messages) => answer(&sock, &session, peer, messages).await,
            // Its reads from flash go on in a task of its own, which
            // answers it; the socket's next datagrams are served meanwhile.
            Ran::Parked => {
                let waiting = Waiting {
                    sock: Rc::clone(&sock),
                    shared: Arc::clone(&shared),
                    stats: Arc::clone(&stats),
                    payload: payload.to_vec(),
                    peer,
                };
                tokio::task::spawn_local(waiting.finish(session.detach(), datagram));
            }
        }
    }
}

/// A datagram whose requests wait for reads from flash.
struct Waiting {
    sock: Rc<UdpSocket>,
    shared: Arc<Shared>,
    stats: Arc<ThreadStats>,
    payload: Vec<u8>,
    peer: Peer,
}

impl Waiting {
    /// Waits for the reads, runs the rest of the datagram (which may wait
    /// again) and answers it.
    async fn finish(self, session: Detached, mut datagram: Datagram) {
        let mut session = session.attach(&self.shared, &self.stats);
        session.park = true;
        // Bounded: each round runs at least the request that waited.
        for _ in 0..self.payload.len() {
            session.unpark().await;
            if let Ran::Done(messages) = datagram.run(&mut session, &self.payload) {
                answer(&self.sock, &session, self.peer, messages).await;
                return;
            }
        }
    }
}

/// Sends a datagram's reply messages, once the writes it made are settled.
async fn answer(sock: &UdpSocket, session: &Session<'_>, peer: Peer, messages: Vec<Vec<u8>>) {
    let keyspace = &session.shared.keyspace;
    keyspace.batch_done(&session.report);
    // Writes over UDP wait for a log that has fallen behind, as over
    // TCP (`--fsync always` is refused with UDP at startup).
    if keyspace.durable().is_some() {
        let ticket = keyspace.take_ticket(&session.report);
        if !ticket.is_none() && !keyspace.settle(ticket).await {
            return;
        }
    }
    for message in messages {
        for d in datagrams(peer.id, &message) {
            if sock.send_to(&d, peer.addr).await.is_ok() {
                add(&session.stats.bytes_written, d.len() as u64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(payload: &[u8]) -> Vec<Vec<u8>> {
        let shared = Shared::new(
            crate::ServerConfig::default(),
            kura_keyspace::Keyspace::in_memory(Arc::default()),
        );
        let stats = ThreadStats::default();
        let mut session = Session::new(&shared, &stats);
        session.out = Output::for_datagrams();
        match Datagram::new(payload).run(&mut session, payload) {
            Ran::Done(messages) => messages,
            Ran::Parked => panic!("no flash tier: nothing waits"),
        }
    }

    #[test]
    fn a_refused_payload_is_skipped_like_on_tcp() {
        assert_eq!(
            run(b"ms k 3 Zbad\r\nabc\r\nmn\r\n"),
            vec![
                b"CLIENT_ERROR invalid flag\r\n".to_vec(),
                b"MN\r\n".to_vec()
            ]
        );
    }

    #[test]
    fn each_reply_and_each_key_of_a_multiget_is_a_message() {
        assert_eq!(
            run(b"set k 0 0 1 noreply\r\nx\r\nget nope k nope\r\nquit\r\nmn\r\n"),
            vec![
                b"".to_vec(),
                b"VALUE k 0 1\r\nx\r\n".to_vec(),
                b"END\r\n".to_vec(),
                b"".to_vec(),
            ]
        );
    }

    #[test]
    fn binary_payloads_are_binary_and_quiet_requests_send_empty_messages() {
        let get = |op: u8, key: &[u8]| {
            let mut r = vec![0x80, op, 0, key.len() as u8, 0, 0, 0, 0];
            r.extend_from_slice(&(key.len() as u32).to_be_bytes());
            r.extend_from_slice(&[0; 12]);
            r.extend_from_slice(key);
            r
        };
        let noop = [
            0x80, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        let mut payload = get(0x09, b"nope");
        payload.extend_from_slice(&noop);
        // Text after binary is garbage: the datagram ends there.
        payload.extend_from_slice(b"mn\r\n");
        let messages = run(&payload);
        assert_eq!(messages.len(), 2);
        assert!(messages[0].is_empty());
        assert_eq!(&messages[1][..2], &[0x81, 0x0a]);
    }

    #[test]
    fn replies_are_cut_into_numbered_datagrams() {
        let reply = vec![b'x'; 3000];
        let ds = datagrams([0, 7], &reply);
        assert_eq!(ds.len(), 3);
        for (i, d) in ds.iter().enumerate() {
            assert_eq!(&d[..2], &[0, 7]);
            assert_eq!(u16::from_be_bytes([d[2], d[3]]), i as u16);
            assert_eq!(u16::from_be_bytes([d[4], d[5]]), 3);
            assert!(d.len() <= MAX_DATAGRAM);
        }
        let total: usize = ds.iter().map(|d| d.len() - HEADER_LEN).sum();
        assert_eq!(total, 3000);
        assert_eq!(datagrams([0, 7], b""), vec![vec![0, 7, 0, 0, 0, 0, 0, 0]]);
    }
}
