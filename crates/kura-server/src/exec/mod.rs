//! Executing requests. [`Session`] holds what one connection needs to run
//! commands: the shared state, its thread's counters and the output buffer
//! every reply of a read batch is appended to. One module per command
//! family carries out the request against the store and composes the reply.

mod admin;
mod arith;
mod ascii_auth;
mod binary;
mod delete;
mod flash;
mod get;
mod inspect;
mod meta_arith;
mod meta_debug;
mod meta_delete;
mod meta_get;
mod meta_set;
mod stats;
mod stats_classes;
mod stats_settings;
mod storage;
mod table;
mod touch;
mod track;

use kura_keyspace::{Keyspace, Refusal};
use kura_proto::{reply, Frame, Request};
use kura_store::{Expiry, Report, Store, Writes};

use crate::metrics::ThreadStats;
use crate::output::Output;
use crate::shared::Shared;

/// memcached's answer to any request before ASCII authentication.
pub(crate) const UNAUTHENTICATED: &[u8] = b"CLIENT_ERROR unauthenticated\r\n";

/// What the connection does after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Go on with the next request.
    Continue,
    /// Drop this many payload bytes that follow (a too-large value).
    Swallow(usize),
    /// Send what is pending, then close (`quit`).
    Close,
    /// Send what is pending, then carry the replication stream
    /// ([`Session::replicate`] says from where).
    Replicate,
    /// Send what is pending, then carry out [`Session::stream`] (a dump,
    /// then on with requests; a watch, until the client goes).
    Stream,
}

/// What a connection does after [`Session::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Read more: the frame needs `needed` bytes in all (0: unknown).
    More { needed: usize },
    /// A garbage line: close the connection.
    Garbage,
    /// The frame's `len` bytes are done; then `next`.
    Done { len: usize, next: Next },
    /// The request waits for reads from the flash tier
    /// ([`Session::unpark`]); then it is framed and run again.
    Parked,
}

/// A connection's view of the server while it executes requests.
pub struct Session<'a> {
    pub shared: &'a Shared,
    /// The server's keyspace (`shared.keyspace`, at hand).
    pub keyspace: &'a Keyspace,
    pub stats: &'a ThreadStats,
    pub out: Output,
    /// False until the client has authenticated, when the server asks for
    /// it (`-S` or `-Y`).
    pub authenticated: bool,
    /// Failed authentication attempts on this connection.
    pub auth_failures: u32,
    /// A replica's `replicate` request: its history and last record.
    pub replicate: Option<(Vec<u8>, u64)>,
    /// Set by the connection while it re-frames a storage request it has
    /// no room to receive (see `budget`): the request arrives as
    /// `Data::TooLarge` and is refused as out of memory.
    pub no_room: bool,
    /// This connection's invalidation subscription (`mt`).
    /// (Boxed: a session without one stays as small as before.)
    pub tracking: Option<Box<crate::tracking::Tracker>>,
    /// A dump or watch to carry out once the replies so far are written.
    pub stream: Option<Box<crate::inspect::Stream>>,
    /// The connection's file descriptor, as watchers' lines show it (-1:
    /// none).
    pub cfd: i64,
    /// The store's clock when the connection's loop began the batch of
    /// requests under way (what the hot-key sketch counts by, without a
    /// clock read a request).
    pub now: u32,
    /// What the change sinks told of this connection's writes: the record
    /// its replies wait for, the journal's records its batch sends
    /// (kura-keyspace's ticket.rs). Every loop that runs sessions ends its
    /// batches in `Keyspace::batch_done`.
    pub report: Report,
    /// Retrievals whose values are on flash wait for the reads
    /// ([`Step::Parked`]; exec/flash.rs): set by the task loop of a server
    /// with a flash tier.
    pub park: bool,
    /// The reads the request under way waits for, or took its values from.
    parked: flash::Parking,
}

/// A [`Session`]'s own state, detached from the server it ran on.
pub struct Detached {
    out: Output,
    authenticated: bool,
    auth_failures: u32,
    replicate: Option<(Vec<u8>, u64)>,
    no_room: bool,
    tracking: Option<Box<crate::tracking::Tracker>>,
    stream: Option<Box<crate::inspect::Stream>>,
    cfd: i64,
    report: Report,
    parked: flash::Parking,
}

impl Detached {
    /// The session again, on `shared` and this thread's counters.
    pub fn attach<'a>(self, shared: &'a Shared, stats: &'a ThreadStats) -> Session<'a> {
        Session {
            shared,
            keyspace: &shared.keyspace,
            stats,
            out: self.out,
            authenticated: self.authenticated,
            auth_failures: self.auth_failures,
            replicate: self.replicate,
            no_room: self.no_room,
            tracking: self.tracking,
            stream: self.stream,
            cfd: self.cfd,
            now: shared.store.now(),
            report: self.report,
            park: false,
            parked: self.parked,
        }
    }
}

impl<'a> Session<'a> {
    pub fn new(shared: &'a Shared, stats: &'a ThreadStats) -> Self {
        Session {
            shared,
            keyspace: &shared.keyspace,
            stats,
            out: Output::with_capacity(16 * 1024),
            authenticated: shared.credentials.is_none(),
            auth_failures: 0,
            replicate: None,
            no_room: false,
            tracking: None,
            stream: None,
            cfd: -1,
            now: shared.store.now(),
            report: Report::batched(),
            park: false,
            parked: flash::Parking::default(),
        }
    }

    /// What the session owns, apart from its references to the server:
    /// so that a connection can move to another loop (conn/direct/).
    pub fn detach(self) -> Detached {
        Detached {
            out: self.out,
            authenticated: self.authenticated,
            auth_failures: self.auth_failures,
            replicate: self.replicate,
            no_room: self.no_room,
            tracking: self.tracking,
            stream: self.stream,
            cfd: self.cfd,
            report: self.report,
            parked: self.parked,
        }
    }

    pub fn store(&self) -> &'a Store {
        &self.shared.store
    }

    /// The store's changing operations, reporting into this session's
    /// [`Report`].
    #[inline]
    pub fn writes(&self) -> Writes<'_> {
        self.shared.store.reporting(&self.report)
    }

    /// Appends `bytes` unless the request asked for no reply.
    pub fn reply(&mut self, quiet: bool, bytes: &[u8]) {
        if !quiet {
            self.out.extend_from_slice(bytes);
        }
    }

    /// Answers one frame: runs a request, or appends the error reply of a
    /// bad one (unless it was quiet) and says what payload to skip.
    pub fn step(&mut self, frame: &Frame<'_>) -> Step {
        // Taken and matched by reference: moving the frame or the request
        // out of it copied it whole (a memcpy a request).
        match frame {
            &Frame::Incomplete { needed } => Step::More { needed },
            Frame::Close => Step::Garbage,
            // Before ASCII authentication the connection frames its bytes
            // with `step_auth`; a frame that gets here anyway is refused.
            &Frame::Request { len, .. } | &Frame::Error { len, .. } if !self.authenticated => {
                self.out.extend_from_slice(UNAUTHENTICATED);
                Step::Done {
                    len,
                    next: Next::Continue,
                }
            }
            Frame::Request { request, len } => {
                let next = self.execute(request);
                if self.parked_now() {
                    return Step::Parked;
                }
                Step::Done { len: *len, next }
            }
            &Frame::Error {
                ref error,
                len,
                swallow,
                quiet,
            } => {
                self.reply(quiet, error.as_bytes());
                Step::Done {
                    len,
                    next: Next::Swallow(swallow),
                }
            }
        }
    }

    /// The error line a request that changes data gets, if it is refused:
    /// on a read-only replica, or when the update log cannot be written
    /// (kura-keyspace's durable/health.rs). Out of line: it is rare, and
    /// inlined its formatting made `execute` too large for the commands'
    /// own functions to be inlined into it (instructions a request).
    #[cold]
    #[inline(never)]
    pub fn refused_change(&self) -> Option<Vec<u8>> {
        Some(match self.keyspace.refusal()? {
            Refusal::Replica(p) => format!(
                "SERVER_ERROR this server is a read-only replica of {p}: write to the primary\r\n"
            )
            .into_bytes(),
            Refusal::LogUnwritable(Some(error)) => format!(
                "SERVER_ERROR the update log cannot be written ({error}); writes are refused until it can\r\n"
            )
            .into_bytes(),
            // The log thread stopped without a write failing first.
            Refusal::LogUnwritable(None) => Vec::new(),
        })
    }

    /// Refuses a request that would change data with `line`: classic
    /// `noreply` hears nothing, meta's `q` still hears errors; a value too
    /// large is still swallowed.
    fn refuse(&mut self, req: &Request<'_>, line: &[u8]) -> Next {
        let silent = match req {
            Request::MetaSet(_)
            | Request::MetaDelete(_)
            | Request::MetaArith(_)
            | Request::MetaGet(_) => false,
            other => other.is_quiet(),
        };
        self.reply(silent, line);
        let data = match req {
            Request::Store(s) => &s.data,
            Request::MetaSet(m) => &m.data,
            _ => return Next::Continue,
        };
        match data {
            // The text protocol's value ends with \r\n.
            kura_proto::Data::TooLarge { len } => Next::Swallow(len + 2),
            kura_proto::Data::Bytes(_) => Next::Continue,
        }
    }

    /// Runs one request, appending its reply to `self.out`.
    pub fn execute(&mut self, req: &Request<'_>) -> Next {
        // Table writes too: a replica refuses them, and so does a server
        // whose log cannot be written.
        if self.keyspace.guarded() && req.changes_data() {
            if let Some(line) = self.refused_change() {
                return self.refuse(req, &line);
            }
        }
        if !self.keyspace.tables().is_empty() {
            if let Some(next) = table::route(self, req) {
                return next;
            }
        }
        match req {
            Request::Get(g) => get::run(self, g),
            Request::Store(s) => return storage::run(self, s),
            Request::Delete(d) => delete::run(self, d),
            Request::Arith(a) => arith::run(self, a),
            Request::Touch(t) => touch::run(self, t),
            Request::FlushAll(f) => admin::flush_all(self, f),
            Request::Version => admin::version(self),
            Request::Verbosity { level, noreply } => admin::verbosity(self, *level, *noreply),
            Request::Quit => return Next::Close,
            Request::RefreshCerts { noreply } => admin::refresh_certs(self, *noreply),
            Request::Shutdown(mode) => return admin::shutdown(self, *mode),
            Request::Stats(s) if s.group() == Some(b"cachedump") => {
                return inspect::cachedump(self, s)
            }
            Request::Stats(s) if s.group() == Some(b"topkeys") => inspect::topkeys(self, s),
            Request::Stats(s) => stats::run(self, s),
            Request::CacheMemlimit { megabytes, noreply } => {
                admin::memlimit(self, *megabytes, *noreply)
            }
            Request::MetaGet(m) => meta_get::run(self, m),
            Request::MetaSet(m) => return meta_set::run(self, m),
            Request::MetaDelete(m) => meta_delete::run(self, m),
            Request::MetaArith(m) => meta_arith::run(self, m),
            Request::MetaDebug(m) => meta_debug::run(self, m),
            Request::MetaNoop => self.out.extend_from_slice(reply::MN),
            Request::Track { on } => track::run(self, *on),
            Request::ReplicaOf { host, port } => admin::replica_of(self, host, port),
            Request::LruCrawler(c) => return inspect::lru_crawler(self, c),
            Request::Watch(kinds) => return inspect::watch(self, *kinds),
            Request::Replicate { history, after } => {
                let Some(after) = after else {
                    self.out
                        .extend_from_slice(kura_proto::Error::BadFormat.as_bytes());
                    return Next::Continue;
                };
                self.replicate = Some((history.to_vec(), *after));
                return Next::Replicate;
            }
        }
        Next::Continue
    }
}

/// The figures of a `stats` group (`None`: the general one) as `(name,
/// value)` pairs, read as the `stats` command reads them. The Prometheus
/// endpoint exports these, so a figure added to `stats` is exported too.
pub(crate) fn stats_snapshot(shared: &Shared, group: Option<&[u8]>) -> Vec<(String, String)> {
    let scratch = ThreadStats::default();
    let mut s = Session::new(shared, &scratch);
    if !stats::listing(&mut s, group) {
        return Vec::new();
    }
    let text = s.out.to_vec();
    text.split(|&b| b == b'\n')
        .filter_map(|line| {
            let line = line.strip_suffix(b"\r")?.strip_prefix(b"STAT ")?;
            let space = line.iter().position(|&b| b == b' ')?;
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            Some((text(&line[..space]), text(&line[space + 1..])))
        })
        .collect()
}

/// Appends a meta status line that echoes only the opaque and key flags:
/// `<code>[ O<opaque>][ k<key>]\r\n`, in request order.
pub(crate) fn meta_status(
    out: &mut Vec<u8>,
    code: &[u8],
    flags: &kura_proto::MetaFlags<'_>,
    key: &kura_proto::MetaKey<'_>,
) {
    out.extend_from_slice(code);
    for fl in flags.iter() {
        echo_flag(out, fl, key);
    }
    out.extend_from_slice(b"\r\n");
}

/// Echoes `fl` if it is the opaque or key flag; true if it was.
pub(crate) fn echo_flag(
    out: &mut Vec<u8>,
    fl: kura_proto::MetaFlag<'_>,
    key: &kura_proto::MetaKey<'_>,
) -> bool {
    match fl.code {
        b'O' => reply::meta_opaque(out, fl.token),
        b'k' => reply::meta_key(out, &key.bytes, key.binary),
        _ => return false,
    }
    true
}

/// memcached's exptime field as an expiry.
pub(crate) fn expiry(exptime: i32) -> Expiry {
    Expiry::from_exptime(i64::from(exptime))
}

/// Where the flag `code` is among a meta request's flags (`None` sorts
/// before any position).
pub(crate) fn flag_position(f: &kura_proto::MetaFlags<'_>, code: u8) -> Option<usize> {
    f.iter().position(|fl| fl.code == code)
}

/// Seconds left before `deadline` (0 = never, reported as -1), the way
/// meta commands report TTLs.
pub(crate) fn ttl_remaining(deadline: u32, now: u32) -> i64 {
    if deadline == 0 {
        -1
    } else {
        i64::from(deadline.saturating_sub(now))
    }
}
