//! How a flash map slot (`table.rs`) packs a record's place: its hits,
//! offset, length and page, and the key's tag, share 96 bits. The widths
//! come from the tier's sizes (pages, write buffers, pages in all); the
//! tag takes what is left, up to [`TAG_BITS_MAX`] bits.
//!
//! ```text
//! bit 0   hits (2)   2  offset   .. length   .. page   ..  tag (top bits)
//! ```
//! The offset and length are below bit 64 (each under 2^31), so a slot in
//! use is never all zeros there: a length is never 0.

use super::index::Loc;

/// Hits a slot counts up to (two bits).
pub(crate) const HITS_MAX: u32 = 3;
const HITS_BITS: u32 = 2;
/// The tag's widest: bits of the key hash's low half.
pub(crate) const TAG_BITS_MAX: u32 = 30;
/// Below this a tag would name too many keys at once.
const TAG_BITS_MIN: u32 = 24;

/// The widths of a tier's places (see the module's notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Packing {
    off_bits: u32,
    len_bits: u32,
    page_bits: u32,
    pub(crate) tag_bits: u32,
}

fn bits(n: u64) -> u32 {
    u64::BITS - n.leading_zeros()
}

impl Packing {
    /// The packing for `pages` pages of `page_size` bytes with records of
    /// less than `wbuf_size` bytes, or why they do not fit.
    pub(crate) fn new(page_size: u64, wbuf_size: usize, pages: usize) -> Result<Packing, String> {
        let off_bits = bits(page_size.saturating_sub(1));
        // A record is shorter than a write buffer (`Tier::append`).
        let len_bits = bits((wbuf_size as u64).saturating_sub(1));
        let page_bits = bits(pages.saturating_sub(1) as u64);
        let place = HITS_BITS + off_bits + len_bits + page_bits;
        if off_bits > 31 || len_bits > 31 || place + TAG_BITS_MIN > 96 {
            return Err(format!(
                "{pages} pages of {page_size} bytes with write buffers of {wbuf_size}: \
                 too many pages for the flash map's slots (use larger pages or smaller buffers)"
            ));
        }
        Ok(Packing {
            off_bits,
            len_bits,
            page_bits,
            tag_bits: (96 - place).min(TAG_BITS_MAX),
        })
    }

    /// The tag of a key hash: bits of its low half, which the shard's
    /// choice does not use.
    pub(crate) fn tag_of(&self, hash: u64) -> u32 {
        (hash as u32) >> (32 - self.tag_bits)
    }

    /// The tag of a packed `hi` word.
    pub(crate) fn tag(&self, hi: u32) -> u32 {
        hi >> (32 - self.tag_bits)
    }

    /// `l`'s place and hits with `tag`, as (high 32 bits, low 64), or
    /// `None` if a field is too wide.
    pub(crate) fn pack(&self, l: &Loc, tag: u32) -> Option<(u32, u64)> {
        let fits = |v: u32, b: u32| b >= 32 || v >> b == 0;
        if !fits(l.off, self.off_bits)
            || !fits(l.len, self.len_bits)
            || !fits(l.page, self.page_bits)
            || !fits(tag, self.tag_bits)
        {
            return None;
        }
        let mut v = u128::from(l.hits.min(HITS_MAX));
        let mut at = HITS_BITS;
        for (field, width) in [
            (l.off, self.off_bits),
            (l.len, self.len_bits),
            (l.page, self.page_bits),
        ] {
            v |= u128::from(field) << at;
            at += width;
        }
        v |= u128::from(tag) << (96 - self.tag_bits);
        Some(((v >> 64) as u32, v as u64))
    }

    /// (page, offset, length, hits) of a packed place.
    pub(crate) fn unpack(&self, hi: u32, lo: u64) -> (u32, u32, u32, u32) {
        let v = u128::from(hi) << 64 | u128::from(lo);
        let field = |at: u32, width: u32| ((v >> at) & ((1u128 << width) - 1)) as u32;
        let off = field(HITS_BITS, self.off_bits);
        let len = field(HITS_BITS + self.off_bits, self.len_bits);
        let page = field(HITS_BITS + self.off_bits + self.len_bits, self.page_bits);
        (page, off, len, field(0, HITS_BITS))
    }

    /// `lo` with its hits set to `hits` (saturated).
    pub(crate) fn with_hits(lo: u64, hits: u32) -> u64 {
        (lo & !u64::from(HITS_MAX)) | u64::from(hits.min(HITS_MAX))
    }
}
