//! `watch`: log streams in memcached's line format
//! (`ts=<sec>.<usec> gid=<n> type=... key=value ...`). Each watcher has a
//! queue of at most [`QUEUE_MAX`] bytes, filled by whichever thread logs a
//! line and emptied by the watcher's task into its socket. A line that
//! does not fit is dropped and counted; the next one that fits is preceded
//! by `skipped=<n>`, as memcached writes it. A worker never waits for a
//! watcher: it takes the queue's lock only to copy a line in, and the
//! watcher's task only to swap the queue out.
//!
//! Logging costs one relaxed load while nobody watches ([`Hub::wants`]).

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Once};

use kura_proto::reply::{put_i64, put_u64};
use kura_proto::WatchKinds;
use kura_store::{EntryView, EvictionWatch};
use tokio::sync::Notify;

use super::put_uri_encoded;

/// Bytes a watcher's queue holds (memcached's `watcher_logbuf_size`).
pub const QUEUE_MAX: usize = 256 * 1024;
/// Watchers at once (memcached's limit).
pub const WATCHERS_MAX: usize = 20;

/// The server's watchers and the counts `stats` shows.
pub struct Hub {
    /// The kinds some watcher wants.
    kinds: AtomicU16,
    watchers: parking_lot::RwLock<Vec<Arc<Watcher>>>,
    gid: AtomicU64,
    /// Lines queued for watchers, and dropped (`log_watcher_sent`,
    /// `log_watcher_skipped`).
    pub sent: AtomicU64,
    pub skipped: AtomicU64,
    evictions_heard: Once,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            kinds: AtomicU16::new(0),
            watchers: Default::default(),
            gid: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            evictions_heard: Once::new(),
        }
    }
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("watchers", &self.len())
            .finish()
    }
}

/// A watcher's place in the hub: dropping it removes the watcher.
pub struct Subscription {
    hub: Arc<Hub>,
    pub watcher: Arc<Watcher>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.remove(&self.watcher);
    }
}

/// One watching connection's side.
pub struct Watcher {
    kinds: WatchKinds,
    queue: Mutex<Queue>,
    /// Told when the queue gets its first bytes.
    pub notify: Notify,
}

#[derive(Default)]
struct Queue {
    bytes: Vec<u8>,
    skipped: u64,
}

impl Hub {
    /// Whether some watcher wants lines of `kind`.
    #[inline]
    pub fn wants(&self, kind: WatchKinds) -> bool {
        self.kinds.load(Ordering::Relaxed) & kind.bits() != 0
    }

    /// The number of watchers.
    pub fn len(&self) -> usize {
        self.watchers.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds a watcher of `kinds`, its queue starting with `OK`; `None`
    /// when there are [`WATCHERS_MAX`] already.
    pub fn add(
        self: &Arc<Self>,
        kinds: WatchKinds,
        store: &kura_store::Store,
    ) -> Option<Subscription> {
        if kinds.meets(WatchKinds::EVICTIONS) {
            self.evictions_heard.call_once(|| {
                store.watch_evictions(Arc::new(Evictions(Arc::clone(self))));
            });
        }
        let w = Arc::new(Watcher {
            kinds,
            queue: Mutex::new(Queue {
                bytes: b"OK\r\n".to_vec(),
                skipped: 0,
            }),
            notify: Notify::new(),
        });
        let mut all = self.watchers.write();
        if all.len() >= WATCHERS_MAX {
            return None;
        }
        all.push(Arc::clone(&w));
        self.kinds.fetch_or(kinds.bits(), Ordering::Relaxed);
        Some(Subscription {
            hub: Arc::clone(self),
            watcher: w,
        })
    }

    /// Removes a watcher whose connection is gone.
    fn remove(&self, w: &Arc<Watcher>) {
        let mut all = self.watchers.write();
        all.retain(|x| !Arc::ptr_eq(x, w));
        let kinds = all.iter().fold(0, |k, x| k | x.kinds.bits());
        self.kinds.store(kinds, Ordering::Relaxed);
    }

    /// Queues a line of `kind` for every watcher of it: the timestamp and
    /// number, then what `body` writes. Out of line: callers test
    /// [`Hub::wants`] first.
    #[cold]
    #[inline(never)]
    pub fn log(&self, kind: WatchKinds, body: impl FnOnce(&mut Vec<u8>)) {
        let gid = self.gid.fetch_add(1, Ordering::Relaxed) + 1;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut line = Vec::with_capacity(160);
        line.extend_from_slice(b"ts=");
        put_u64(&mut line, now.as_secs());
        // memcached prints the microseconds without leading zeros.
        line.push(b'.');
        put_u64(&mut line, u64::from(now.subsec_micros()));
        line.extend_from_slice(b" gid=");
        put_u64(&mut line, gid);
        line.push(b' ');
        body(&mut line);
        line.push(b'\n');
        for w in self.watchers.read().iter() {
            if w.kinds.meets(kind) {
                self.offer(w, &line);
            }
        }
    }

    fn offer(&self, w: &Watcher, line: &[u8]) {
        let mut q = w.queue.lock().unwrap_or_else(|e| e.into_inner());
        // Room for the line and a `skipped=` line before it.
        if q.bytes.len() + line.len() + 32 > QUEUE_MAX {
            q.skipped += 1;
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let was_empty = q.bytes.is_empty();
        if q.skipped > 0 {
            q.bytes.extend_from_slice(b"skipped=");
            let n = std::mem::take(&mut q.skipped);
            put_u64(&mut q.bytes, n);
            q.bytes.push(b'\n');
        }
        q.bytes.extend_from_slice(line);
        drop(q);
        self.sent.fetch_add(1, Ordering::Relaxed);
        if was_empty {
            w.notify.notify_one();
        }
    }
}

impl Watcher {
    /// Takes what is queued, leaving `spare` (an emptied buffer) in its
    /// place.
    pub fn take(&self, spare: Vec<u8>) -> Vec<u8> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut q.bytes, spare)
    }
}

/// Appends memcached's `key=<key>` field.
fn key(out: &mut Vec<u8>, k: &[u8]) {
    out.extend_from_slice(b"key=");
    put_uri_encoded(out, k);
}

/// A read's line (`fetchers`): `found` with the item's class and value
/// length, or `not_found`.
pub fn item_get(out: &mut Vec<u8>, k: &[u8], found: Option<(usize, usize)>, cfd: i64) {
    out.extend_from_slice(b"type=item_get ");
    key(out, k);
    let (status, class, size): (&[u8], _, _) = match found {
        Some((class, size)) => (b"found", class, size),
        None => (b"not_found", 0, 0),
    };
    out.extend_from_slice(b" status=");
    out.extend_from_slice(status);
    out.extend_from_slice(b" clsid=");
    put_u64(out, class as u64);
    out.extend_from_slice(b" cfd=");
    put_i64(out, cfd);
    out.extend_from_slice(b" size=");
    put_u64(out, size as u64);
}

/// A store's line (`mutations`).
#[allow(clippy::too_many_arguments)]
pub fn item_store(
    out: &mut Vec<u8>,
    k: &[u8],
    status: &str,
    cmd: &str,
    ttl: u32,
    class: usize,
    cfd: i64,
    size: usize,
) {
    out.extend_from_slice(b"type=item_store ");
    key(out, k);
    for (name, v) in [(&b" status="[..], status), (b" cmd=", cmd)] {
        out.extend_from_slice(name);
        out.extend_from_slice(v.as_bytes());
    }
    out.extend_from_slice(b" ttl=");
    put_u64(out, u64::from(ttl));
    out.extend_from_slice(b" clsid=");
    put_u64(out, class as u64);
    out.extend_from_slice(b" cfd=");
    put_i64(out, cfd);
    out.extend_from_slice(b" size=");
    put_u64(out, size as u64);
}

/// A connection's line (`connevents`): `addr` as `stats conns` shows it
/// (`tcp:HOST:PORT`, `unix:PATH`), `reason` for a close.
pub fn conn_event(out: &mut Vec<u8>, addr: &str, cfd: u64, reason: Option<&str>) {
    let (transport, rest) = match addr.split_once(':') {
        Some(("tcp", rest)) => ("tcp", rest),
        Some(("udp", rest)) => ("udp", rest),
        _ => ("local", ""),
    };
    let (ip, port) = match rest.rsplit_once(':') {
        Some((ip, port)) => (ip.trim_start_matches('[').trim_end_matches(']'), port),
        None => ("unix", "0"),
    };
    let kind: &[u8] = if reason.is_some() {
        b"type=conn_close rip="
    } else {
        b"type=conn_new rip="
    };
    out.extend_from_slice(kind);
    out.extend_from_slice(ip.as_bytes());
    out.extend_from_slice(b" rport=");
    out.extend_from_slice(port.as_bytes());
    out.extend_from_slice(b" transport=");
    out.extend_from_slice(transport.as_bytes());
    if let Some(r) = reason {
        out.extend_from_slice(b" reason=");
        out.extend_from_slice(r.as_bytes());
    }
    out.extend_from_slice(b" cfd=");
    put_u64(out, cfd);
}

/// Hears the store's evictions for the `evictions` watchers.
struct Evictions(Arc<Hub>);

impl EvictionWatch for Evictions {
    fn evicted(&self, e: &EntryView<'_>, now: u32) {
        if !self.0.wants(WatchKinds::EVICTIONS) {
            return;
        }
        self.0.log(WatchKinds::EVICTIONS, |out| {
            out.extend_from_slice(b"type=eviction ");
            key(out, e.key);
            out.extend_from_slice(if e.fetched {
                b" fetch=yes"
            } else {
                b" fetch=no"
            });
            out.extend_from_slice(b" ttl=");
            let ttl = if e.exptime == 0 {
                -1
            } else {
                i64::from(e.exptime) - i64::from(now)
            };
            put_i64(out, ttl);
            out.extend_from_slice(b" la=");
            put_i64(out, i64::from(now) - i64::from(e.last_access));
            out.extend_from_slice(b" clsid=");
            put_u64(out, e.class as u64);
            out.extend_from_slice(b" size=");
            put_u64(out, e.value_len as u64);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_says_how_many() {
        let hub = Arc::new(Hub::default());
        let store = kura_store::Store::new(kura_store::StoreConfig::with_capacity(8 << 20));
        let sub = hub.add(WatchKinds::FETCHERS, &store).expect("a watcher");
        let w = Arc::clone(&sub.watcher);
        assert!(hub.wants(WatchKinds::FETCHERS) && !hub.wants(WatchKinds::MUTATIONS));
        let line = |out: &mut Vec<u8>| item_get(out, b"k", None, 7);
        for _ in 0..10_000 {
            hub.log(WatchKinds::FETCHERS, line);
        }
        let skipped = hub.skipped.load(Ordering::Relaxed);
        assert!(skipped > 0);
        let first = w.take(Vec::new());
        assert!(first.starts_with(b"OK\r\nts="));
        assert!(first.len() <= QUEUE_MAX);
        hub.log(WatchKinds::FETCHERS, line);
        let next = String::from_utf8(w.take(Vec::new())).unwrap_or_default();
        assert!(
            next.starts_with(&format!("skipped={skipped}\nts=")),
            "{next}"
        );
        assert!(next.ends_with(" type=item_get key=k status=not_found clsid=0 cfd=7 size=0\n"));
        drop(sub);
        assert!(!hub.wants(WatchKinds::FETCHERS));
    }

    #[test]
    fn conn_lines() {
        let mut out = Vec::new();
        conn_event(&mut out, "tcp:127.0.0.1:5000", 9, None);
        assert_eq!(
            out,
            b"type=conn_new rip=127.0.0.1 rport=5000 transport=tcp cfd=9"
        );
        out.clear();
        conn_event(&mut out, "unix:/tmp/s", 9, Some("normal"));
        assert_eq!(
            out,
            b"type=conn_close rip=unix rport=0 transport=local reason=normal cfd=9"
        );
    }
}
