//! Gets that never wait on the flash device: [`Store::get_or_read`] answers
//! from RAM at once, as [`Store::get`] does, and from flash at once when
//! the record's bytes are in a write buffer or the system's page cache
//! ([`Store::read_now`]); else a key whose value is on flash comes back as
//! a [`FlashRead`] that one of the tier's reader threads completes
//! (`flash/pool.rs`). kura http awaits it on its tokio workers.
//!
//! The RAM side is `get_in`'s without the flash step; a miss whose key has
//! no record on flash stays a plain miss, with no thread hop.

use std::hash::BuildHasher;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use crate::api::{GetOptions, Hit};
use crate::changes::Report;
use crate::flash::pool::Slot;
use crate::flash::FlashRead;
use crate::shard::Shard;

use super::flash::Back;
use super::Store;

/// What [`Store::get_or_read`] found.
#[derive(Debug)]
pub enum Got {
    /// In RAM: here it is.
    Hit(Hit),
    /// Nowhere.
    Miss,
    /// On flash: being read by a reader thread.
    Flash(FlashRead),
}

/// A key whose value is on flash and not in RAM, not read
/// ([`Writes::get_in_ram`](super::Writes::get_in_ram)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnFlash;

/// Whether the shard holds a flash record for `hash`.
#[inline]
pub(super) fn on_flash(shard: &Shard, hash: u64) -> bool {
    shard.flash.as_ref().is_some_and(|f| f.contains(hash))
}

impl Store {
    /// Looks up `key` as [`Store::get_with`] with default options does,
    /// but without waiting on the flash device on the calling thread: a
    /// value on flash whose bytes are in a write buffer or the page cache is
    /// read here ([`Store::read_now`]), else by the tier's reader threads
    /// ([`Got::Flash`]). When `read_queue` reads are already waiting, the
    /// key is a miss.
    pub fn get_or_read(self: &Arc<Self>, key: &[u8]) -> Got {
        self.ram_then_flash(key, true)
    }

    /// [`Store::get_or_read`]; `inline`: a record in the page cache may be
    /// read here ([`Store::read_now`]).
    fn ram_then_flash(self: &Arc<Self>, key: &[u8], inline: bool) -> Got {
        match self.lookup_in(key, &GetOptions::default(), &Report::default(), true) {
            Ok(Some(hit)) => Got::Hit(hit),
            Ok(None) => Got::Miss,
            Err(OnFlash) => self.read_in_pool(key, inline),
        }
    }

    /// Whether `key`'s value is on flash and not in RAM: a get of it would
    /// read the device. Changes nothing (the shard's lock is taken shared).
    /// A caller that must not wait on the device (kura server's connection
    /// loop) asks this first, then [`Store::read_later`].
    pub fn on_flash_only(&self, key: &[u8]) -> bool {
        if self.flash.get().is_none() {
            return false;
        }
        let hash = self.hasher.hash_one(key);
        let shard = self.cell(hash).read();
        shard.find(hash, key).is_none() && on_flash(&shard, hash)
    }

    /// Starts reading `key`'s flash record on a reader thread: its answer
    /// is [`Store::get`]'s (`for_change` false), or, with `for_change`, the
    /// record is first taken back into RAM (or forgotten if it cannot be),
    /// as before a get that touches or otherwise changes the entry, which
    /// then finds it in RAM. `None` when there is no tier, or `read_queue`
    /// reads are already waiting (counted in `read_queue_full`): the key is
    /// then a miss.
    pub fn read_later(self: &Arc<Self>, key: &[u8], for_change: bool) -> Option<FlashRead> {
        let back = if for_change {
            Back::ForChange
        } else {
            Back::Read
        };
        self.submit_read(key, back)
    }

    /// Reads `key`'s flash record here if that cannot wait on the device:
    /// its bytes in a write buffer or in the system's page cache
    /// (`preadv2(RWF_NOWAIT)`, `flash/device.rs`), as a record read again
    /// soon after it was written or read usually is. `None` when it would
    /// wait (then nothing changed: hand it to [`Store::read_later`]), else
    /// the answer [`Store::read_later`] would have given (`for_change`: the
    /// record is back in RAM, or forgotten, and the caller reads RAM).
    pub fn read_now(&self, key: &[u8], for_change: bool) -> Option<Option<Hit>> {
        let back = if for_change {
            Back::ForChange
        } else {
            Back::Read
        };
        self.read_flash_as(key, back, &Report::default(), true)
    }

    /// Reads `key`'s flash record here if `inline` and that cannot wait on
    /// the device ([`Store::read_now`]), else hands it to a reader thread.
    #[cold]
    #[inline(never)]
    fn read_in_pool(self: &Arc<Self>, key: &[u8], inline: bool) -> Got {
        if inline {
            match self.read_now(key, false) {
                Some(Some(hit)) => return Got::Hit(hit),
                // Gone from flash as it was read (another read brought it
                // back into RAM, or it was deleted or replaced): RAM answers.
                Some(None) => return self.ram_then_flash(key, false),
                None => {}
            }
        }
        match self.submit_read(key, Back::Read) {
            Some(read) => Got::Flash(read),
            None => Got::Miss,
        }
    }

    fn submit_read(self: &Arc<Self>, key: &[u8], back: Back) -> Option<FlashRead> {
        let tier = self.flash.get()?;
        let slot = Arc::new(Slot::default());
        let (store, filled, key) = (Arc::clone(self), Arc::clone(&slot), key.to_vec());
        let job = Box::new(move || {
            let hit = store.read_flash(&key, back, &Report::default());
            filled.fill(hit);
        });
        if !tier.pool.submit(job) {
            tier.counters.read_queue_full.fetch_add(1, Relaxed);
            return None;
        }
        Some(FlashRead { slot })
    }
}
