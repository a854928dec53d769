//! The requests of memcached's text and meta protocols, as parsed values
//! borrowed from the read buffer. One command model serves every consumer:
//! the server executes these, a client or proxy composes them.

use std::borrow::Cow;

use crate::tokens::words;

/// A parsed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get`, `gets`, `gat`, `gats` (and memcached's ancient `bget`).
    Get(Get<'a>),
    /// `set`, `add`, `replace`, `append`, `prepend`, `cas`.
    Store(Store<'a>),
    /// `delete <key> [0] [noreply]`.
    Delete(Delete<'a>),
    /// `incr`/`decr`.
    Arith(Arith<'a>),
    /// `touch <key> <exptime> [noreply]`.
    Touch(Touch<'a>),
    /// `flush_all [delay] [noreply]`.
    FlushAll(FlushAll),
    /// `version`.
    Version,
    /// `verbosity <level> [noreply]`; `level` is `None` when unparsable.
    Verbosity { level: Option<u32>, noreply: bool },
    /// `quit`.
    Quit,
    /// `refresh_certs [noreply]`: load the TLS certificate, key and CA
    /// files again (the connections made before keep what they have).
    RefreshCerts { noreply: bool },
    /// `shutdown [graceful]`.
    Shutdown(ShutdownMode),
    /// `stats [group [args...]]`.
    Stats(Stats<'a>),
    /// `cache_memlimit <megabytes> [noreply]`; `None` when unparsable.
    CacheMemlimit {
        megabytes: Option<u32>,
        noreply: bool,
    },
    /// `mg`.
    MetaGet(MetaGet<'a>),
    /// `ms`.
    MetaSet(MetaSet<'a>),
    /// `md`.
    MetaDelete(MetaDelete<'a>),
    /// `ma`.
    MetaArith(MetaArith<'a>),
    /// `me`.
    MetaDebug(MetaDebug<'a>),
    /// `mn`.
    MetaNoop,
    /// `mt [on|off]`: kura's own, turns invalidation tracking on or off for
    /// the connection (docs/protocol-extensions.md).
    Track { on: bool },
    /// `replicate <history id or -> <last applied record>`: kura's own, a
    /// replica asking to follow this server (the connection then carries
    /// the replication stream). `after` is `None` when not a number.
    Replicate {
        history: &'a [u8],
        after: Option<u64>,
    },
    /// `replicaof <host> <port>` / `replicaof no one`: kura's own (Redis's
    /// name), follow another server or stop following and take writes.
    ReplicaOf { host: &'a [u8], port: &'a [u8] },
    /// `lru_crawler <subcommand> ...`.
    LruCrawler(LruCrawler<'a>),
    /// `watch [kind...]`: the connection becomes a log stream.
    Watch(WatchKinds),
}

impl Request<'_> {
    /// Whether this request may change stored data (what a server that
    /// cannot log changes, or a read-only replica, refuses): every storage,
    /// delete, arithmetic, touch and flush command, `gat`/`gats`, and `mg`
    /// with `T` (touch) or `N` (vivify on miss).
    pub fn changes_data(&self) -> bool {
        match self {
            Request::Store(_)
            | Request::Delete(_)
            | Request::Arith(_)
            | Request::Touch(_)
            | Request::FlushAll(_)
            | Request::MetaSet(_)
            | Request::MetaDelete(_)
            | Request::MetaArith(_) => true,
            Request::Get(g) => g.touch.is_some(),
            Request::MetaGet(m) => m.flags.ttl.is_some() || m.flags.vivify.is_some(),
            _ => false,
        }
    }

    /// Whether a successful reply to this request is suppressed.
    pub fn is_quiet(&self) -> bool {
        match self {
            Request::Store(s) => s.noreply,
            Request::Delete(d) => d.noreply,
            Request::Arith(a) => a.noreply,
            Request::Touch(t) => t.noreply,
            Request::FlushAll(f) => f.noreply,
            Request::Verbosity { noreply, .. } => *noreply,
            Request::CacheMemlimit { noreply, .. } => *noreply,
            Request::RefreshCerts { noreply } => *noreply,
            Request::MetaGet(m) => m.flags.quiet,
            Request::MetaSet(m) => m.flags.quiet,
            Request::MetaDelete(m) => m.flags.quiet,
            Request::MetaArith(m) => m.flags.quiet,
            _ => false,
        }
    }
}

/// A retrieval: `get`/`gets` (no touch) or `gat`/`gats` (with `touch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Get<'a> {
    /// Return CAS values (`gets`, `gats`).
    pub cas: bool,
    /// New exptime for `gat`/`gats`.
    pub touch: Option<i32>,
    keys: &'a [u8],
}

impl<'a> Get<'a> {
    /// Builds a retrieval over space-separated `keys`.
    pub fn new(cas: bool, touch: Option<i32>, keys: &'a [u8]) -> Self {
        Get { cas, touch, keys }
    }

    /// The keys, in request order.
    pub fn keys(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        words(self.keys)
    }
}

/// Which storage command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    /// kura's value rotation: append, then cut from the front so that the
    /// value is at most `max` bytes (`rotate`, meta `MW w<max>`).
    Rotate {
        max: u32,
    },
}

/// The payload of a storage command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Data<'a> {
    /// The data block, without its `\r\n`.
    Bytes(&'a [u8]),
    /// The announced payload is larger than the server's item size limit;
    /// the server replies with an error and discards `len + 2` bytes that
    /// follow the request line (see [`Frame::Request`](crate::Frame)).
    TooLarge { len: usize },
}

/// `set`/`add`/`replace`/`append`/`prepend`/`cas`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store<'a> {
    pub mode: StoreMode,
    /// The CAS unique of a `cas` command.
    pub cas: Option<u64>,
    pub key: &'a [u8],
    pub flags: u32,
    pub exptime: i32,
    pub data: Data<'a>,
    pub noreply: bool,
}

/// `delete`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete<'a> {
    pub key: &'a [u8],
    pub noreply: bool,
}

/// `incr`/`decr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arith<'a> {
    pub key: &'a [u8],
    pub incr: bool,
    pub delta: u64,
    pub noreply: bool,
}

/// `touch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch<'a> {
    pub key: &'a [u8],
    pub exptime: i32,
    pub noreply: bool,
}

/// The delay argument of `flush_all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushDelay {
    /// No delay given: flush now.
    Now,
    /// A delay (or absolute time) in memcached exptime form.
    Exptime(i32),
    /// The argument was not a number.
    Invalid,
}

/// `flush_all`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushAll {
    pub delay: FlushDelay,
    pub noreply: bool,
}

/// How `shutdown` was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShutdownMode {
    Immediate,
    Graceful,
    Invalid,
}

/// `stats` and its groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats<'a> {
    args: &'a [u8],
}

impl<'a> Stats<'a> {
    /// Builds a stats request from the text after `stats`.
    pub fn new(args: &'a [u8]) -> Self {
        Stats { args }
    }

    /// The group name (`settings`, `items`, ...), if any.
    pub fn group(&self) -> Option<&'a [u8]> {
        words(self.args).next()
    }

    /// The arguments after the group name.
    pub fn args(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        words(self.args).skip(1)
    }
}

/// A meta command's key: as sent, or decoded from base64 with the `b` flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaKey<'a> {
    /// The key bytes used for the lookup.
    pub bytes: Cow<'a, [u8]>,
    /// True when the key was sent base64-encoded (`b`).
    pub binary: bool,
}

/// Flags shared by all meta commands, parsed once (memcached parses every
/// flag for every meta command and ignores those that do not apply).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaFlags<'a> {
    raw: &'a [u8],
    /// `q`: suppress the nominal reply.
    pub quiet: bool,
    /// `v`: return the value.
    pub value: bool,
    /// `u`: do not bump in the LRU.
    pub no_bump: bool,
    /// `N(ttl)`: vivify on miss.
    pub vivify: Option<i32>,
    /// `T(ttl)`: new TTL.
    pub ttl: Option<i32>,
    /// `R(ttl)`: win the recache token when the remaining TTL is below this.
    pub recache: Option<i32>,
    /// `F(flags)`: client flags for `ms`.
    pub client_flags: Option<u32>,
    /// `C(cas)`: compare CAS.
    pub compare_cas: Option<u64>,
    /// `E(cas)`: use this as the item's new CAS value.
    pub explicit_cas: Option<u64>,
    /// `M(mode)`: mode switch.
    pub mode: Option<u8>,
    /// `D(delta)` for `ma` (default 1).
    pub delta: Option<u64>,
    /// `J(initial)` for `ma` (default 0).
    pub initial: Option<u64>,
    /// `I`: invalidate (mark stale).
    pub invalidate: bool,
    /// `x`: on `md`, drop the value but keep the item.
    pub remove_value: bool,
    /// `w(bytes)`: the window of `ms` rotation mode (`MW`), kura's own.
    pub window: Option<u32>,
}

/// One flag token as it appears in a meta request, for building a reply in
/// request order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetaFlag<'a> {
    /// The flag character.
    pub code: u8,
    /// The token after the flag character.
    pub token: &'a [u8],
}

impl<'a> MetaFlags<'a> {
    pub(crate) fn with_raw(raw: &'a [u8]) -> Self {
        MetaFlags {
            raw,
            ..Default::default()
        }
    }

    /// The flags in request order.
    pub fn iter(&self) -> impl Iterator<Item = MetaFlag<'a>> + 'a {
        words(self.raw).map(|w| MetaFlag {
            code: w[0],
            token: &w[1..],
        })
    }
}

/// `mg <key> <flags>*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaGet<'a> {
    pub key: MetaKey<'a>,
    pub flags: MetaFlags<'a>,
}

/// `ms <key> <datalen> <flags>*` with its data block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaSet<'a> {
    pub key: MetaKey<'a>,
    /// The mode from `M` (set when absent); the CAS to compare is in `flags`.
    pub mode: StoreMode,
    pub data: Data<'a>,
    pub flags: MetaFlags<'a>,
}

/// `md <key> <flags>*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaDelete<'a> {
    pub key: MetaKey<'a>,
    pub flags: MetaFlags<'a>,
}

/// `ma <key> <flags>*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaArith<'a> {
    pub key: MetaKey<'a>,
    pub incr: bool,
    pub flags: MetaFlags<'a>,
}

/// `me <key> [b]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaDebug<'a> {
    pub key: MetaKey<'a>,
}

/// `lru_crawler`'s subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LruCrawler<'a> {
    Enable,
    Disable,
    /// `crawl <classes|all>`: reclaim expired items of those classes.
    Crawl(&'a [u8]),
    /// `metadump <classes|all|hash>`: a line of metadata per item.
    Metadump(&'a [u8]),
    /// `mgdump <classes|all|hash>`: an `mg <key>` line per item (newer
    /// memcached's).
    Mgdump(&'a [u8]),
    /// `tocrawl <n>`.
    Tocrawl(u32),
    /// `sleep <microseconds>` (memcached refuses more than a second).
    Sleep(u32),
}

/// The log streams a `watch` asks for, as a set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WatchKinds(u16);

impl WatchKinds {
    pub const FETCHERS: WatchKinds = WatchKinds(1);
    pub const MUTATIONS: WatchKinds = WatchKinds(2);
    pub const EVICTIONS: WatchKinds = WatchKinds(4);
    pub const CONNEVENTS: WatchKinds = WatchKinds(8);
    pub const RAWCMDS: WatchKinds = WatchKinds(16);
    pub const SYSEVENTS: WatchKinds = WatchKinds(32);
    pub const PROXYREQS: WatchKinds = WatchKinds(64);
    pub const PROXYEVENTS: WatchKinds = WatchKinds(128);
    pub const PROXYUSER: WatchKinds = WatchKinds(256);

    /// Every kind with its name, in the order they are composed.
    pub const NAMES: [(WatchKinds, &'static [u8]); 9] = [
        (WatchKinds::FETCHERS, b"fetchers"),
        (WatchKinds::MUTATIONS, b"mutations"),
        (WatchKinds::EVICTIONS, b"evictions"),
        (WatchKinds::CONNEVENTS, b"connevents"),
        (WatchKinds::RAWCMDS, b"rawcmds"),
        (WatchKinds::SYSEVENTS, b"sysevents"),
        (WatchKinds::PROXYREQS, b"proxyreqs"),
        (WatchKinds::PROXYEVENTS, b"proxyevents"),
        (WatchKinds::PROXYUSER, b"proxyuser"),
    ];

    /// The kind called `name`.
    pub fn named(name: &[u8]) -> Option<WatchKinds> {
        Self::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(k, _)| *k)
    }

    /// This set with `other`'s kinds too.
    pub fn with(self, other: WatchKinds) -> WatchKinds {
        WatchKinds(self.0 | other.0)
    }

    /// Whether every kind of `other` is in the set.
    pub fn has(self, other: WatchKinds) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set shares a kind with `other`.
    pub fn meets(self, other: WatchKinds) -> bool {
        self.0 & other.0 != 0
    }

    /// The set as bits (for an atomic).
    pub fn bits(self) -> u16 {
        self.0
    }

    /// The set of `bits`.
    pub fn from_bits(bits: u16) -> WatchKinds {
        WatchKinds(bits)
    }
}
