//! A URL whose responses carry `Vary`: one store entry holding the `Vary` and every stored
//! variant, newest first.
//!
//! The variants live and die with their URL: evicted, purged, banned and expired as one entry,
//! so no variant is ever left in memory unreachable behind a lost Vary record (with one entry
//! per variant, a quarter of a full cache was such orphans). Each variant keeps its own
//! deadline (the store's entry lives as long as the longest) and the ban sequence it was
//! stored or last rewritten at, so bans are checked per variant. A new variant rewrites the
//! entry, copying the others: a few per URL (device classes, encodings), bounded by
//! [`MAX_VARIANTS`].
//!
//! Bytes: `PAGE`, the `Vary` value, a count, then per variant: its deadline (Unix seconds),
//! ban sequence, secondary key and object record (`object.rs`, with its body).

use bytes::{Buf, BufMut, Bytes};
use http::HeaderValue;
use kura_store::{DeleteOutcome, DeleteRequest, Expiry, SetMode, SetOutcome, SetRequest, Store};

/// The first byte of a page record.
pub const PAGE: u8 = 3;

/// Variants kept per URL; the oldest go first. A `Vary` on a field with many values
/// (`User-Agent`, `Cookie`) would otherwise grow one entry without bound.
pub const MAX_VARIANTS: usize = 16;

/// One stored response of a page.
#[derive(Debug, Clone)]
pub struct Variant {
    /// Unix second after which it is not served (its store deadline).
    pub until: u32,
    /// The ban sequence it was checked against when stored or last rewritten.
    pub seq: u32,
    /// The normalised request values of the fields `Vary` names.
    pub secondary: Bytes,
    /// Its object record (`object::decode` reads it).
    pub object: Bytes,
}

/// A URL's `Vary` and its variants, newest first.
#[derive(Debug, Clone)]
pub struct Page {
    /// The `Vary` value (field lines joined).
    pub vary: HeaderValue,
    /// The variants, newest first.
    pub variants: Vec<Variant>,
}

impl Page {
    /// The variant stored for `secondary` that is still within its deadline at `now`.
    pub fn find(&self, secondary: &[u8], now: u32) -> Option<&Variant> {
        self.variants
            .iter()
            .find(|v| v.secondary == secondary && v.until > now)
    }

    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let size: usize = self
            .variants
            .iter()
            .map(|v| 16 + v.secondary.len() + v.object.len())
            .sum();
        let mut out = Vec::with_capacity(8 + self.vary.len() + size);
        out.put_u8(PAGE);
        put_bytes(&mut out, self.vary.as_bytes());
        out.put_u16(u16::try_from(self.variants.len()).unwrap_or(u16::MAX));
        for v in self.variants.iter().take(usize::from(u16::MAX)) {
            out.put_u32(v.until);
            out.put_u32(v.seq);
            put_bytes(&mut out, &v.secondary);
            put_bytes(&mut out, &v.object);
        }
        out
    }

    /// Decodes a page record after its first byte (`None`: not one this version wrote).
    pub fn decode(mut r: Bytes) -> Option<Page> {
        let vary = HeaderValue::from_maybe_shared(take(&mut r)?).ok()?;
        let count = r.try_get_u16().ok()?;
        let mut variants = Vec::with_capacity(usize::from(count));
        for _ in 0..count {
            let until = r.try_get_u32().ok()?;
            let seq = r.try_get_u32().ok()?;
            let secondary = take(&mut r)?;
            let object = take(&mut r)?;
            variants.push(Variant {
                until,
                seq,
                secondary,
                object,
            });
        }
        r.is_empty().then_some(Page { vary, variants })
    }

    /// The store deadline the entry needs: its longest-lived variant's.
    pub fn until(&self) -> u32 {
        self.variants.iter().map(|v| v.until).max().unwrap_or(0)
    }

    /// The entry's item flags: its oldest variant's ban sequence, so the bans' census counts
    /// the page as old as its oldest variant.
    pub fn seq(&self) -> u32 {
        self.variants.iter().map(|v| v.seq).min().unwrap_or(0)
    }

    /// Writes this page over the entry at `key` that had CAS `cas` (none: only if absent),
    /// or deletes that entry when no variant is left.
    pub fn write(&self, store: &Store, key: &[u8], cas: Option<u64>) -> Written {
        if self.variants.is_empty() {
            let Some(cas) = cas else {
                return Written::Done;
            };
            let same = DeleteRequest {
                cas: Some(cas),
                ..DeleteRequest::default()
            };
            return match store.delete_with(key, &same) {
                DeleteOutcome::Deleted => Written::Done,
                _ => Written::Changed,
            };
        }
        let value = self.encode();
        let outcome = store.set(&SetRequest {
            mode: match cas {
                Some(_) => SetMode::Set,
                None => SetMode::Add,
            },
            key,
            value: &value,
            flags: self.seq(),
            expiry: Some(Expiry::At(self.until())),
            cas,
            ..SetRequest::default()
        });
        match outcome {
            SetOutcome::Stored { .. } => Written::Done,
            SetOutcome::NoMemory => Written::NoRoom,
            SetOutcome::Exists | SetOutcome::NotFound | SetOutcome::NotStored => Written::Changed,
        }
    }
}

/// What [`Page::write`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// Stored (or, with no variant left, deleted).
    Done,
    /// The entry changed since it was read: nothing written.
    Changed,
    /// The store had no room for it.
    NoRoom,
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.put_u32(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
    out.put_slice(bytes);
}

fn take(r: &mut Bytes) -> Option<Bytes> {
    let len = r.try_get_u32().ok()? as usize;
    (r.len() >= len).then(|| r.split_to(len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn variant(secondary: &'static [u8], until: u32) -> Variant {
        Variant {
            until,
            seq: 7,
            secondary: Bytes::from_static(secondary),
            object: Bytes::from_static(b"\0object bytes"),
        }
    }

    #[test]
    fn round_trip_find_and_garbage() {
        let page = Page {
            vary: HeaderValue::from_static("accept-encoding, x-device-class"),
            variants: vec![variant(b"gzip\0sp", 200), variant(b"gzip\0pc", 100)],
        };
        let bytes = Bytes::from(page.encode());
        assert_eq!(bytes[0], PAGE);
        let back = Page::decode(bytes.slice(1..)).unwrap();
        assert_eq!(back.vary, page.vary);
        assert_eq!(back.variants.len(), 2);
        assert_eq!(back.until(), 200);
        assert_eq!(back.find(b"gzip\0pc", 50).unwrap().until, 100);
        assert!(back.find(b"gzip\0pc", 100).is_none(), "past its deadline");
        assert!(back.find(b"gzip\0tv", 50).is_none());
        assert_eq!(back.variants[0].object, "\0object bytes");
        for cut in 1..bytes.len() - 1 {
            assert!(Page::decode(bytes.slice(1..cut)).is_none(), "{cut}");
        }
    }
}
