//! Inspection, as memcached's operators do it: key dumps (`lru_crawler
//! metadump`/`mgdump`, `stats cachedump`: `dump.rs`), log streams
//! (`watch`: `watch.rs`, each watcher a bounded queue that drops rather
//! than makes a worker wait), the most requested keys (`stats topkeys`,
//! kura's: `topkeys.rs`) and the crawler's settings memcached's scripts set.
//! A dump or a watch runs in its connection's task (`conn/stream.rs`), a
//! bounded step at a time; the rest answers at once (`exec/inspect.rs`).

use std::sync::atomic::{AtomicBool, AtomicU32};
use std::sync::Arc;

pub mod dump;
pub mod topkeys;
mod uri;
pub mod watch;

pub use uri::put_uri_encoded;

/// The crawler's settings as `lru_crawler` sets them and `stats settings`
/// shows them. kura's reaper does the crawler's work whatever they say;
/// `disable` makes the dumps and `crawl` refused, as in memcached.
#[derive(Debug)]
pub struct Crawler {
    pub enabled: AtomicBool,
    pub tocrawl: AtomicU32,
    pub sleep: AtomicU32,
}

impl Default for Crawler {
    fn default() -> Self {
        Crawler {
            enabled: AtomicBool::new(true),
            tocrawl: AtomicU32::new(0),
            sleep: AtomicU32::new(0),
        }
    }
}

/// What a server keeps for inspection.
#[derive(Debug, Default)]
pub struct Inspection {
    pub crawler: Crawler,
    pub watchers: Arc<watch::Hub>,
    pub topkeys: topkeys::HotKeys,
}

/// A long answer a connection carries out in its task before reading on:
/// a dump (then back to requests) or a watch (until the client goes).
pub enum Stream {
    Dump(dump::Dump),
    Watch(watch::Subscription),
}
