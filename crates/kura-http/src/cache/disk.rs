//! The disk tier (`--disk-cache DIR:SIZE`): kura-store's flash tier, persistent, in
//! `DIR/objects`. Objects evicted from memory are written there whole (their record holds the
//! status, headers, freshness, `Vary` page and ban sequence: everything a hit needs), read
//! back on the flash tier's reader threads when a lookup finds one (the tokio worker awaits,
//! it never reads the device), and brought back into memory on that hit; so is an entry a new
//! `Vary` variant or a soft purge must read to write it again ([`Cache::bring_back`]). With
//! `disk_cache_all` every object is written when stored, not only when evicted. A record whose
//! CRC does not check is a miss.
//!
//! Beside the objects: `DIR/bans`, the journal of the bans the objects on disk must still
//! meet (`bans/journal.rs`), and `DIR/lock`, held while the directory is in use, so that two
//! instances never share it. At start the journal is read, then every page of the objects
//! file is scanned once and the intact records indexed again (time bounded by SIZE). Without
//! a journal that reads, the objects file is emptied: its objects could not be checked
//! against the bans issued before the restart.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderName};
use kura_store::{FlashConfig, Got};

use super::{Cache, Lookup, LOOKUP_RETRIES};
use crate::bans::{journal, Bans};
use crate::config::DiskCache;

/// The largest write buffer, so the largest object kept on disk.
const WBUF_MAX: u64 = 8 << 20;

/// How long an evicted object may wait in a write buffer that is not filling: what a SIGKILL
/// can lose besides full buffers waiting for the device.
pub const FLUSH_AFTER: Duration = Duration::from_secs(1);

/// The disk tier's directory, locked while this process uses it.
#[derive(Debug)]
pub struct Disk {
    /// The directory.
    pub dir: PathBuf,
    /// `DIR/lock`, locked (released when the process ends, however it ends).
    _lock: File,
    /// The flash tier's settings.
    flash: FlashConfig,
}

/// What opening the disk tier found.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reopened {
    /// Objects indexed again from the objects file.
    pub objects: u64,
    /// Records skipped: damaged or cut off.
    pub damaged: u64,
    /// Bans read back from the journal.
    pub bans: usize,
    /// Whether the objects file was emptied (no journal to check it against).
    pub emptied: bool,
    /// Time the scan took.
    pub took: Duration,
}

/// The flash tier's settings for `disk` and objects up to `max_object` bytes of body:
/// pages of an eighth of SIZE (1 to 64 MiB), write buffers of up to [`WBUF_MAX`].
pub fn flash_config(disk: &DiskCache, threads: usize) -> FlashConfig {
    let page = (disk.size / 8).clamp(1 << 20, 64 << 20) & !((1 << 20) - 1);
    FlashConfig {
        files: vec![(disk.dir.join("objects"), disk.size)],
        page_size: page,
        wbuf_size: page.min(WBUF_MAX) as usize,
        // Every evicted object (a hit-for-miss marker is one byte, and not worth it).
        item_size: 2,
        threads: threads.clamp(2, 8),
        // Read back into memory on the first hit.
        recache_rate: 1,
        recache_after: 1,
        flush_after: Some(FLUSH_AFTER),
        persist: true,
        write_through: disk.all,
        ..FlashConfig::default()
    }
}

impl Disk {
    /// Locks `disk`'s directory and reads its ban journal: the bans for the cache, and the
    /// directory. The objects file is emptied when the journal is missing or unreadable.
    ///
    /// # Errors
    /// The directory is in use by another process, or its files cannot be written.
    pub fn open(
        disk: &DiskCache,
        threads: usize,
        tag_fields: Vec<HeaderName>,
    ) -> io::Result<(Disk, Bans, Reopened)> {
        let dir = &disk.dir;
        let lock = File::create(dir.join("lock"))?;
        if lock.try_lock().is_err() {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("disk cache {}: in use by another process", dir.display()),
            ));
        }
        let mut reopened = Reopened::default();
        let objects = dir.join("objects");
        let loaded = match journal::load(&dir.join("bans")) {
            Ok(Some(loaded)) => Some(loaded),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!("disk cache: {error}");
                None
            }
        };
        let loaded = match loaded {
            Some(loaded) if loaded.trusted() => loaded,
            Some(loaded) => {
                // The machine restarted after an unclean stop: what the kernel had not
                // written yet may be lost, a ban line as well as a dead mark.
                reopened.emptied = empty(&objects, "the machine restarted since an unclean stop")?;
                loaded
            }
            None => {
                reopened.emptied = empty(&objects, "no ban journal")?;
                journal::Loaded::default()
            }
        };
        reopened.bans = loaded.bans.len();
        let bans = Bans::with_journal(tag_fields, &dir.join("bans"), loaded)?;
        let flash = flash_config(disk, threads);
        Ok((
            Disk {
                dir: dir.clone(),
                _lock: lock,
                flash,
            },
            bans,
            reopened,
        ))
    }
}

/// Empties the objects file if it holds anything, saying `why`: true if it did.
fn empty(objects: &Path, why: &str) -> io::Result<bool> {
    match std::fs::metadata(objects) {
        Ok(meta) if meta.len() > 0 => {
            tracing::warn!(
                "disk cache: {why}: the objects in {} are dropped",
                objects.display()
            );
            File::create(objects)?;
            Ok(true)
        }
        _ => Ok(false),
    }
}

impl Cache {
    /// A cache of `capacity` bytes of memory and the disk tier `disk`, whose objects are
    /// checked against `bans` (from [`Disk::open`]). The objects file is scanned now.
    ///
    /// # Errors
    /// The objects file cannot be opened or made its size.
    pub fn with_disk(
        capacity: usize,
        shards: usize,
        bans: Bans,
        disk: Disk,
        mut reopened: Reopened,
    ) -> io::Result<(Cache, Reopened)> {
        let mut cache = Cache::with_bans(capacity, shards, bans);
        let started = Instant::now();
        cache.store.attach_flash(disk.flash.clone())?;
        reopened.took = started.elapsed();
        if let Some(stats) = cache.store.flash_stats() {
            reopened.objects = stats.rebuild_records;
            reopened.damaged = stats.rebuild_damaged;
        }
        tracing::info!(
            "disk cache {}: {} objects indexed in {} ms \
             ({} damaged records skipped, {} bans kept{})",
            disk.dir.display(),
            reopened.objects,
            reopened.took.as_millis(),
            reopened.damaged,
            reopened.bans,
            if reopened.emptied { "; emptied" } else { "" }
        );
        cache.disk = Some(disk);
        Ok((cache, reopened))
    }

    /// The disk tier's directory, if the cache has one.
    pub fn disk_dir(&self) -> Option<&Path> {
        self.disk.as_ref().map(|d| d.dir.as_path())
    }

    /// [`Cache::lookup`] without reading the disk on the calling thread: an object on disk is
    /// read by the disk tier's reader threads while this awaits.
    pub async fn lookup_nonblocking(&self, primary: &[u8], request: &HeaderMap) -> Lookup {
        for _ in 0..LOOKUP_RETRIES {
            let hit = match self.store.get_or_read(primary) {
                Got::Hit(hit) => Some(hit),
                Got::Miss => None,
                Got::Flash(read) => match read.await {
                    Some(hit) => Some(hit),
                    // Read back into memory by a concurrent lookup meanwhile (its read wins,
                    // this one answers none), or gone: memory says which.
                    None => match self.store.get_or_read(primary) {
                        Got::Hit(hit) => Some(hit),
                        Got::Miss | Got::Flash(_) => None,
                    },
                },
            };
            if let Some(found) = self.lookup_once(primary, request, hit) {
                return found;
            }
        }
        Lookup::Miss
    }

    /// Before a change that reads `primary`'s entry to write it again (a new `Vary` variant, a
    /// soft purge): an entry on disk only is brought back into memory by the disk tier's reader
    /// threads while this awaits, so that the change finds it in memory and the calling (tokio
    /// worker) thread does not read the device. When the readers' queue is full, the entry on
    /// disk is dropped instead (a plain delete reads nothing): its variants are fetched again.
    /// (An entry evicted to disk again between this and the change is read by the change.)
    pub async fn bring_back(&self, primary: &[u8]) {
        if self.disk.is_none() || !self.store.on_flash_only(primary) {
            return;
        }
        match self.store.read_later(primary, true) {
            Some(read) => {
                read.await;
            }
            None => {
                self.store.delete(primary);
            }
        }
    }

    /// [`Cache::bring_back`] before an insert of a response with fields `headers`: only one
    /// with `Vary` reads the stored entry (its page of variants).
    pub async fn bring_back_for_insert(&self, primary: &[u8], headers: &HeaderMap) {
        if self.disk.is_some() && super::joined_vary(headers).is_some() {
            self.bring_back(primary).await;
        }
    }

    /// A clean stop of the disk tier: the objects in memory written to it too, every write
    /// buffer written, the objects file synced, then the journal marked clean (so a machine
    /// restart before the next start keeps it).
    pub(super) fn close_disk(&self) {
        let Some(disk) = &self.disk else {
            return;
        };
        let started = Instant::now();
        let moved = self.store.flash_spill_all();
        tracing::info!(
            "disk cache {}: {moved} objects written from memory in {} ms",
            disk.dir.display(),
            started.elapsed().as_millis()
        );
        let synced = File::open(disk.dir.join("objects")).and_then(|f| f.sync_all());
        match synced {
            Ok(()) => {
                if let Some(bans) = self.bans.disk() {
                    bans.close();
                }
            }
            Err(error) => tracing::warn!("disk cache: syncing the objects: {error}"),
        }
    }
}

#[cfg(test)]
#[path = "disk_tests.rs"]
mod tests;
