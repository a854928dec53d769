//! Key dumps: `lru_crawler metadump` (a line of metadata per item, in
//! memcached 1.6.18's format), `lru_crawler mgdump` (an `mg` line per key,
//! newer memcached's) and `stats cachedump` (memcached's old, capped
//! listing of one class). A dump walks the shards with `Store::inspect`,
//! a bounded step under one shard's lock at a time, appending lines to the
//! connection's output, which its task writes out before the next steps:
//! memory stays bounded and no worker waits for the dump.

use kura_proto::reply::{put_base64, put_i64, put_u64};
use kura_store::{EntryView, Store, MAX_CLASS};

use super::put_uri_encoded;

/// Index positions visited per lock hold.
const STEP: usize = 256;
/// memcached's cap on a `stats cachedump` reply.
const CACHEDUMP_MAX: usize = 2 * 1024 * 1024;
/// Class ids memcached accepts (it has at most 63 classes).
const CLASS_IDS: usize = 64;

/// What a dump writes per item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `key=... exp=... la=... cas=... fetch=... cls=... size=...\n`, then `END`.
    Meta,
    /// `OK`, then `mg <key>` (`mg <base64> b` for a binary key), then `EN`.
    Mg,
    /// `ITEM <key> [<bytes> b; <exptime> s]`, at most `limit` (0: all) and
    /// 2 MiB of them, then `END`.
    Cache { limit: u32 },
}

/// The classes a dump covers (bit `c` for class `c`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classes(u64);

impl Classes {
    pub const ALL: Classes = Classes(u64::MAX);

    /// memcached's argument: `all`, `hash` or ids `1,3,10` (each from 1 to
    /// 63); `None` for anything else (memcached's `BADCLASS`).
    pub fn parse(arg: &[u8]) -> Option<Classes> {
        if arg == b"all" || arg == b"hash" {
            return Some(Classes::ALL);
        }
        let mut set = 0u64;
        for id in arg.split(|&b| b == b',') {
            let id = std::str::from_utf8(id).ok()?.parse::<usize>().ok()?;
            if !(1..CLASS_IDS).contains(&id) {
                return None;
            }
            set |= 1 << id;
        }
        Some(Classes(set))
    }

    /// One class (`stats cachedump`).
    pub fn one(class: usize) -> Classes {
        Classes(if class < CLASS_IDS { 1 << class } else { 0 })
    }

    fn has(self, class: usize) -> bool {
        class <= MAX_CLASS && self.0 & (1 << class) != 0
    }
}

/// A dump in progress.
#[derive(Debug)]
pub struct Dump {
    format: Format,
    classes: Classes,
    shard: usize,
    cursor: usize,
    started: bool,
    /// Lines written (`stats cachedump`'s limit) and their bytes.
    shown: u32,
    bytes: usize,
}

impl Dump {
    pub fn new(format: Format, classes: Classes) -> Dump {
        Dump {
            format,
            classes,
            shard: 0,
            cursor: 0,
            started: false,
            shown: 0,
            bytes: 0,
        }
    }

    /// Appends the next step's lines to `out`; true once the dump is done
    /// and its last line written.
    pub fn step(&mut self, store: &Store, out: &mut Vec<u8>) -> bool {
        if !self.started {
            self.started = true;
            if self.format == Format::Mg {
                out.extend_from_slice(b"OK\r\n");
            }
        }
        if self.shard < store.shard_count() && !self.full() {
            let (format, classes) = (self.format, self.classes);
            let (mut shown, mut bytes) = (self.shown, self.bytes);
            let shard_done = store.inspect(self.shard, &mut self.cursor, STEP, |e| {
                if !classes.has(e.class) {
                    return;
                }
                let before = out.len();
                if line(format, e, out, shown, bytes) {
                    shown += 1;
                    bytes += out.len() - before;
                }
            });
            (self.shown, self.bytes) = (shown, bytes);
            if shard_done {
                self.shard += 1;
                self.cursor = 0;
            }
        }
        if self.shard < store.shard_count() && !self.full() {
            return false;
        }
        out.extend_from_slice(match self.format {
            Format::Mg => b"EN\r\n",
            Format::Meta | Format::Cache { .. } => b"END\r\n",
        });
        true
    }

    fn full(&self) -> bool {
        match self.format {
            Format::Cache { limit } => limit != 0 && self.shown >= limit,
            _ => false,
        }
    }
}

/// Appends `e`'s line in `format`; false when it wrote none (`stats
/// cachedump` skips binary keys, and stops at its limits).
fn line(format: Format, e: &EntryView<'_>, out: &mut Vec<u8>, shown: u32, bytes: usize) -> bool {
    match format {
        Format::Meta => {
            out.extend_from_slice(b"key=");
            put_uri_encoded(out, e.key);
            out.extend_from_slice(b" exp=");
            put_i64(
                out,
                if e.exptime == 0 {
                    -1
                } else {
                    i64::from(e.exptime)
                },
            );
            out.extend_from_slice(b" la=");
            put_u64(out, u64::from(e.last_access));
            out.extend_from_slice(b" cas=");
            put_u64(out, e.cas);
            out.extend_from_slice(if e.fetched {
                b" fetch=yes"
            } else {
                b" fetch=no"
            });
            out.extend_from_slice(b" cls=");
            put_u64(out, e.class as u64);
            out.extend_from_slice(b" size=");
            put_u64(out, e.block_bytes as u64);
            out.push(b'\n');
        }
        Format::Mg => {
            out.extend_from_slice(b"mg ");
            if e.binary_key {
                put_base64(out, e.key);
                out.extend_from_slice(b" b\r\n");
            } else {
                out.extend_from_slice(e.key);
                out.extend_from_slice(b"\r\n");
            }
        }
        Format::Cache { limit } => {
            if e.binary_key || (limit != 0 && shown >= limit) {
                return false;
            }
            let start = out.len();
            out.extend_from_slice(b"ITEM ");
            out.extend_from_slice(e.key);
            out.extend_from_slice(b" [");
            put_u64(out, e.value_len as u64);
            out.extend_from_slice(b" b; ");
            put_u64(out, u64::from(e.exptime));
            out.extend_from_slice(b" s]\r\n");
            // memcached keeps room for its `END` within the cap.
            if bytes + (out.len() - start) + 6 > CACHEDUMP_MAX {
                out.truncate(start);
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use kura_store::{Expiry, Store, StoreConfig};

    use super::*;

    fn run(store: &Store, mut dump: Dump) -> String {
        let mut out = Vec::new();
        let mut steps = 0;
        while !dump.step(store, &mut out) {
            steps += 1;
            assert!(steps < 100_000);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn classes_as_memcached_reads_them() {
        assert_eq!(Classes::parse(b"all"), Some(Classes::ALL));
        assert_eq!(Classes::parse(b"1,3"), Some(Classes(0b1010)));
        for bad in [&b"0"[..], b"64", b"x", b"1,", b"", b"-1"] {
            assert_eq!(Classes::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn formats() {
        let store = Store::new(StoreConfig {
            shards: 4,
            ..StoreConfig::with_capacity(16 << 20)
        });
        store.insert(b"a b", b"12345", Expiry::Never);
        let (mut cas, mut size) = (0, 0);
        for shard in 0..store.shard_count() {
            store.inspect(shard, &mut 0, usize::MAX, |e| {
                (cas, size) = (e.cas, e.block_bytes)
            });
        }
        let meta = run(&store, Dump::new(Format::Meta, Classes::ALL));
        let la = store.now();
        assert_eq!(
            meta,
            format!("key=a%20b exp=-1 la={la} cas={cas} fetch=no cls=1 size={size}\nEND\r\n")
        );
        assert_eq!(
            run(&store, Dump::new(Format::Mg, Classes::ALL)),
            "OK\r\nmg a b\r\nEN\r\n"
        );
        assert_eq!(
            run(
                &store,
                Dump::new(Format::Cache { limit: 0 }, Classes::one(1))
            ),
            "ITEM a b [5 b; 0 s]\r\nEND\r\n"
        );
        assert_eq!(
            run(
                &store,
                Dump::new(Format::Cache { limit: 0 }, Classes::one(2))
            ),
            "END\r\n"
        );
    }

    #[test]
    fn cachedump_stops_at_its_limit() {
        let store = Store::new(StoreConfig::with_capacity(16 << 20));
        for i in 0..100 {
            store.insert(format!("k{i}").as_bytes(), b"v", Expiry::Never);
        }
        let out = run(
            &store,
            Dump::new(Format::Cache { limit: 7 }, Classes::one(1)),
        );
        assert_eq!(out.matches("ITEM ").count(), 7);
        let all = run(
            &store,
            Dump::new(Format::Meta, Classes::parse(b"1,2").unwrap_or(Classes::ALL)),
        );
        assert_eq!(all.matches("key=").count(), 100);
    }
}
