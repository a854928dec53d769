//! Changes that read an entry on disk ([`Cache::bring_back`]): a new `Vary` variant and a soft
//! purge of a URL whose page of variants is on disk wait for the disk tier's reader threads, so
//! another task on the same, single, runtime thread is served while the device is held.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode};

use super::{Cache, Disk, Lookup};
use crate::cache::tests::fresh_for;
use crate::config::DiskCache;
use crate::rules::CachePolicy;

/// A directory of its own in the temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let name = format!("kura-http-{tag}-{}-{n}", std::process::id());
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(dir: &TempDir) -> Cache {
    let disk = DiskCache {
        dir: dir.0.clone(),
        size: 16 << 20,
        all: false,
    };
    let (disk, bans, reopened) = Disk::open(&disk, 2, Vec::new()).expect("the disk tier opens");
    Cache::with_disk(8 << 20, 1, bans, disk, reopened)
        .expect("the objects file")
        .0
}

/// Stores the variant of `key` for `x-class: class` (`Vary: x-class`), its body the class.
fn insert(cache: &Cache, key: &[u8], class: &'static str) -> bool {
    let mut request = HeaderMap::new();
    request.insert("x-class", HeaderValue::from_static(class));
    let mut response = HeaderMap::new();
    response.insert("vary", HeaderValue::from_static("x-class"));
    cache.insert(
        &CachePolicy::default(),
        Duration::ZERO,
        key,
        &request,
        StatusCode::OK,
        &fresh_for(60),
        &response,
        &[class.as_bytes()],
    )
}

fn lookup(cache: &Cache, key: &[u8], class: &'static str) -> Option<(Vec<u8>, bool)> {
    let mut request = HeaderMap::new();
    request.insert("x-class", HeaderValue::from_static(class));
    match cache.lookup(key, &request) {
        Lookup::Hit(object) => {
            let stale = !object.freshness.is_fresh(SystemTime::now());
            Some((object.body.to_vec(), stale))
        }
        _ => None,
    }
}

/// Moves everything to disk, holds the device's reads and runs `change` on a one-thread
/// runtime beside a task that waits until a read is held, then stores another object and lets
/// the reads go. True if that task was served while a read was held: `change` awaited the
/// read rather than making it on the runtime's thread. (A change that read the device on that
/// thread would block it until a watchdog lets the reads go, after a while, so the test ends;
/// the answer is then false.)
fn served_meanwhile(cache: &Cache, change: impl Future<Output = ()>) -> bool {
    cache.store().flash_spill_all();
    assert!(cache.store().on_flash_only(b"k"), "the page is on disk");
    let faults = cache.store().flash_faults().expect("a disk tier");
    faults.hold_reads.store(true, Ordering::Release);
    let done = AtomicBool::new(false);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let other = async {
        for _ in 0..2_000 {
            if faults.reads_held.load(Ordering::Acquire) > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let held = faults.reads_held.load(Ordering::Acquire) > 0;
        assert!(insert(cache, b"other", "x"));
        faults.hold_reads.store(false, Ordering::Release);
        held
    };
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // The watchdog: bounded, and quiet once the runtime is done.
            for _ in 0..400 {
                if done.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            faults.hold_reads.store(false, Ordering::Release);
        });
        let ((), held) = runtime.block_on(async { tokio::join!(change, other) });
        done.store(true, Ordering::Release);
        held
    })
}

#[test]
fn a_new_variant_of_a_page_on_disk_does_not_read_on_the_worker() {
    let dir = TempDir::new("bring-back-variant");
    let cache = open(&dir);
    assert!(insert(&cache, b"k", "a"));
    let change = async {
        cache.bring_back(b"k").await;
        assert!(insert(&cache, b"k", "b"));
    };
    assert!(
        served_meanwhile(&cache, change),
        "blocked while the device was held"
    );
    // Both variants are kept: the page was read, not replaced.
    assert_eq!(lookup(&cache, b"k", "a").map(|o| o.0), Some(b"a".to_vec()));
    assert_eq!(lookup(&cache, b"k", "b").map(|o| o.0), Some(b"b".to_vec()));
}

#[test]
fn a_soft_purge_of_a_page_on_disk_does_not_read_on_the_worker() {
    let dir = TempDir::new("bring-back-soft");
    let cache = open(&dir);
    assert!(insert(&cache, b"k", "a"));
    assert_eq!(lookup(&cache, b"k", "a"), Some((b"a".to_vec(), false)));
    let change = async {
        cache.bring_back(b"k").await;
        assert!(cache.soften(b"k", SystemTime::now()));
    };
    assert!(
        served_meanwhile(&cache, change),
        "blocked while the device was held"
    );
    assert_eq!(
        lookup(&cache, b"k", "a"),
        Some((b"a".to_vec(), true)),
        "kept, stale"
    );
}
