//! `lru_crawler`, `watch`, `stats cachedump` and `stats topkeys` (the
//! inspection commands, `crate::inspect`), and the logging of reads and
//! stores for watchers and the hot-key sketch. A dump or a watch sets the
//! session's stream and returns [`Next::Stream`]: the connection's task
//! carries it out (`conn/stream.rs`).

use std::sync::atomic::Ordering::Relaxed;

use kura_proto::{reply, LruCrawler, Stats, StoreMode, WatchKinds};
use kura_store::SetOutcome;

use super::{Next, Session};
use crate::inspect::dump::{Classes, Dump, Format};
use crate::inspect::{topkeys, watch, Stream};

const BADCLASS: &[u8] = b"BADCLASS invalid class id\r\n";
const CRAWLER_DISABLED: &[u8] = b"CLIENT_ERROR lru crawler disabled\r\n";

pub(super) fn lru_crawler(s: &mut Session<'_>, c: &LruCrawler<'_>) -> Next {
    let crawler = &s.shared.inspect.crawler;
    let enabled = crawler.enabled.load(Relaxed);
    let line: &[u8] = match *c {
        LruCrawler::Enable if enabled => b"ERROR failed to start lru crawler thread\r\n",
        LruCrawler::Enable | LruCrawler::Disable => {
            crawler
                .enabled
                .store(matches!(c, LruCrawler::Enable), Relaxed);
            reply::OK
        }
        LruCrawler::Tocrawl(n) => {
            crawler.tocrawl.store(n, Relaxed);
            reply::OK
        }
        LruCrawler::Sleep(n) if n > 1_000_000 => {
            b"CLIENT_ERROR sleep must be one second or less\r\n"
        }
        LruCrawler::Sleep(n) => {
            crawler.sleep.store(n, Relaxed);
            reply::OK
        }
        _ if !enabled => CRAWLER_DISABLED,
        // The reaper reclaims expired items every second anyway.
        LruCrawler::Crawl(b"hash") => b"ERROR an unknown error happened\r\n",
        LruCrawler::Crawl(arg) => match Classes::parse(arg) {
            Some(_) => reply::OK,
            None => BADCLASS,
        },
        LruCrawler::Metadump(_) | LruCrawler::Mgdump(_) if s.shared.config.disable_dumping => {
            match c {
                LruCrawler::Metadump(_) => b"ERROR metadump not allowed\r\n",
                _ => b"ERROR key dump not allowed\r\n",
            }
        }
        LruCrawler::Metadump(arg) | LruCrawler::Mgdump(arg) => {
            let Some(classes) = Classes::parse(arg) else {
                s.out.extend_from_slice(BADCLASS);
                return Next::Continue;
            };
            let format = match c {
                LruCrawler::Metadump(_) => Format::Meta,
                _ => Format::Mg,
            };
            return stream(s, Stream::Dump(Dump::new(format, classes)));
        }
    };
    s.out.extend_from_slice(line);
    Next::Continue
}

fn stream(s: &mut Session<'_>, stream: Stream) -> Next {
    s.stream = Some(Box::new(stream));
    Next::Stream
}

/// `watch [kinds]`: the connection becomes a log stream (its first line,
/// `OK`, is already in its queue).
pub(super) fn watch(s: &mut Session<'_>, kinds: WatchKinds) -> Next {
    if s.shared.config.disable_watch {
        s.out
            .extend_from_slice(b"CLIENT_ERROR watch commands not allowed\r\n");
        return Next::Continue;
    }
    let hub = &s.shared.inspect.watchers;
    match hub.add(kinds, &s.shared.store) {
        Some(w) => stream(s, Stream::Watch(w)),
        None => {
            s.out
                .extend_from_slice(b"WATCHER_TOO_MANY log watcher limit reached\r\n");
            Next::Continue
        }
    }
}

/// `stats cachedump <class> <limit>`: as memcached 1.6.18 answers it, but
/// over the items of the class in index order (kura has no LRU per class).
pub(super) fn cachedump(s: &mut Session<'_>, req: &Stats<'_>) -> Next {
    if s.shared.config.disable_dumping {
        s.out
            .extend_from_slice(b"CLIENT_ERROR stats cachedump not allowed\r\n");
        return Next::Continue;
    }
    let mut args = req.args();
    let (Some(id), Some(limit)) = (args.next(), args.next()) else {
        s.out
            .extend_from_slice(b"CLIENT_ERROR bad command line\r\n");
        return Next::Continue;
    };
    let number = |t: &[u8]| kura_proto::number::parse_u32(t);
    let (Some(id), Some(limit)) = (number(id), number(limit)) else {
        s.out
            .extend_from_slice(kura_proto::Error::BadFormat.as_bytes());
        return Next::Continue;
    };
    if id >= 64 {
        s.out.extend_from_slice(b"CLIENT_ERROR Illegal slab id\r\n");
        return Next::Continue;
    }
    let dump = Dump::new(Format::Cache { limit }, Classes::one(id as usize));
    stream(s, Stream::Dump(dump))
}

/// `stats topkeys [on [seconds] | off]` (kura's, docs/protocol-extensions.md).
pub(super) fn topkeys(s: &mut Session<'_>, req: &Stats<'_>) {
    let hot = &s.shared.inspect.topkeys;
    let mut args = req.args();
    match (args.next(), args.next(), args.next()) {
        (None, ..) => return topkeys_listing(s),
        (Some(b"on"), secs, None) => {
            let window = match secs.map(kura_proto::number::parse_u32) {
                None => topkeys::DEFAULT_WINDOW,
                Some(Some(w)) if (1..=86_400).contains(&w) => w,
                Some(_) => return topkeys_usage(s),
            };
            hot.set(window);
        }
        (Some(b"off"), None, _) => {
            hot.set(0);
            for t in &s.shared.thread_stats {
                t.hot_keys.clear();
            }
        }
        _ => return topkeys_usage(s),
    }
    s.out.extend_from_slice(reply::OK);
}

fn topkeys_usage(s: &mut Session<'_>) {
    s.out
        .extend_from_slice(b"CLIENT_ERROR usage: stats topkeys [on [seconds]|off]\r\n");
}

/// The last complete window's most requested keys, then the current
/// one's so far.
fn topkeys_listing(s: &mut Session<'_>) {
    let window = s.shared.inspect.topkeys.window();
    let o = &mut s.out;
    reply::stat(o, "topkeys_window", window);
    if let Some(now) = s.shared.store.now().checked_div(window) {
        for (name, index) in [("last", now.wrapping_sub(1)), ("now", now)] {
            reply::stat(
                o,
                &format!("topkeys_{name}_start"),
                u64::from(index) * u64::from(window),
            );
            let per_thread: Vec<_> = s
                .shared
                .thread_stats
                .iter()
                .map(|t| t.hot_keys.window_of(index, window))
                .collect();
            let top = topkeys::merge(per_thread.iter().map(Vec::as_slice));
            for (i, e) in top.iter().enumerate() {
                o.extend_from_slice(format!("STAT topkey_{name}:{} key=", i + 1).as_bytes());
                crate::inspect::put_uri_encoded(o, &e.key);
                o.extend_from_slice(format!(" count={}\r\n", e.count).as_bytes());
            }
        }
    }
    o.extend_from_slice(reply::END);
}

/// After a read of `key` (`hit`: what it found): the `fetchers` line and
/// the hot-key count, when either is on.
#[inline]
pub(super) fn fetched(s: &Session<'_>, key: &[u8], hit: Option<&kura_store::Hit>) {
    let sh = s.shared;
    if sh.inspect.watchers.wants(WatchKinds::FETCHERS) {
        log_fetch(s, key, hit);
    }
    let window = sh.inspect.topkeys.window();
    if window > 0 {
        s.stats.hot_keys.note(key, s.now, window);
    }
}

#[cold]
#[inline(never)]
fn log_fetch(s: &Session<'_>, key: &[u8], hit: Option<&kura_store::Hit>) {
    let found = hit.map(|h| {
        (
            kura_store::size_class(h.item.heap_size()),
            h.item.value().len(),
        )
    });
    let cfd = s.cfd;
    s.shared.inspect.watchers.log(WatchKinds::FETCHERS, |o| {
        watch::item_get(o, key, found, cfd)
    });
}

/// After a store of `key`: the `mutations` line, when it is on.
#[inline]
pub(super) fn stored(s: &Session<'_>, m: &Mutation<'_>) {
    if s.shared.inspect.watchers.wants(WatchKinds::MUTATIONS) {
        log_store(s, m);
    }
}

/// memcached's names of a store's outcome and command in `mutations` lines.
pub(super) fn store_names(
    outcome: SetOutcome,
    mode: StoreMode,
    cas: bool,
) -> (&'static str, &'static str) {
    let status = match outcome {
        SetOutcome::Stored { .. } => "stored",
        SetOutcome::NotStored => "not_stored",
        SetOutcome::Exists => "exists",
        SetOutcome::NotFound => "not_found",
        SetOutcome::NoMemory => "no_memory",
    };
    (status, cmd_name(mode, cas))
}

/// memcached's name of a storage command (kura's `rotate` is an append).
pub(super) fn cmd_name(mode: StoreMode, cas: bool) -> &'static str {
    match mode {
        _ if cas => "cas",
        StoreMode::Set => "set",
        StoreMode::Add => "add",
        StoreMode::Replace => "replace",
        StoreMode::Append | StoreMode::Rotate { .. } => "append",
        StoreMode::Prepend => "prepend",
    }
}

/// What a `mutations` line says of a store.
pub(super) struct Mutation<'a> {
    pub key: &'a [u8],
    /// memcached's status: `stored`, `not_stored`, `exists`, `not_found`,
    /// `too_large`, `no_memory`.
    pub status: &'a str,
    pub cmd: &'a str,
    pub flags: u32,
    pub exptime: i32,
    pub len: usize,
}

#[cold]
#[inline(never)]
fn log_store(s: &Session<'_>, m: &Mutation<'_>) {
    let store = &s.shared.store;
    let deadline = super::expiry(m.exptime).deadline(store.now());
    let ttl = if deadline == 0 {
        0
    } else {
        deadline.saturating_sub(store.now())
    };
    let class = store.size_class_of(m.key.len(), m.flags, m.len, deadline != 0);
    let cfd = s.cfd;
    s.shared.inspect.watchers.log(WatchKinds::MUTATIONS, |o| {
        watch::item_store(o, m.key, m.status, m.cmd, ttl, class, cfd, m.len)
    });
}
