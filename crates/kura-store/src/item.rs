//! [`Item`]: one stored entry's key, value and client flags in a single
//! reference-counted allocation. Readers get a clone of the handle (one
//! atomic increment), never a copy of the bytes; an item that is replaced,
//! deleted, evicted or expired while a reader holds it stays valid for that
//! reader and is freed when the last handle drops.

use std::mem::MaybeUninit;

use bytes::Bytes;
use triomphe::{HeaderWithLength, ThinArc, UniqueArc};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ItemHeader {
    flags: u32,
    key_len: u32,
}

/// An immutable key/value/flags triple, cheap to clone and share.
#[derive(Clone, PartialEq, Eq)]
pub struct Item(ThinArc<ItemHeader, u8>);

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Item")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("flags", &self.flags())
            .field("value_len", &self.value().len())
            .finish()
    }
}

impl Item {
    /// Builds an item from a key, client flags and a value.
    pub fn new(key: &[u8], flags: u32, value: &[u8]) -> Item {
        Item::from_parts(key, flags, &[value])
    }

    /// Builds an item whose value is the concatenation of `parts` (used by
    /// append and prepend without an intermediate buffer).
    ///
    /// # Panics
    /// If the key is longer than `u32::MAX` bytes.
    pub fn from_parts(key: &[u8], flags: u32, parts: &[&[u8]]) -> Item {
        let key_len = u32::try_from(key.len()).expect("key longer than 4 GiB");
        let len = key.len() + parts.iter().map(|p| p.len()).sum::<usize>();
        let header = HeaderWithLength::new(ItemHeader { flags, key_len }, len);
        let mut uninit =
            UniqueArc::<triomphe::HeaderSlice<_, [MaybeUninit<u8>]>>::from_header_and_uninit_slice(
                header, len,
            );
        let mut at = 0;
        for part in std::iter::once(key).chain(parts.iter().copied()) {
            uninit.slice[at..at + part.len()].write_copy_of_slice(part);
            at += part.len();
        }
        debug_assert_eq!(at, len);
        // SAFETY: the loop above wrote every byte of the slice: the key and
        // the parts, whose lengths sum to `len`, back to back from offset 0.
        let init = unsafe { uninit.assume_init_slice_with_header() };
        Item(triomphe::Arc::into_thin(init.shareable()))
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.0.slice[..self.0.header.header.key_len as usize]
    }

    /// The value.
    pub fn value(&self) -> &[u8] {
        &self.0.slice[self.0.header.header.key_len as usize..]
    }

    /// The client flags.
    pub fn flags(&self) -> u32 {
        self.0.header.header.flags
    }

    /// The value as [`Bytes`] sharing this item's allocation (no copy).
    pub fn value_bytes(&self) -> Bytes {
        Bytes::from_owner(ValueOwner(self.clone()))
    }

    /// Bytes this item occupies on the heap: the allocator's chunk for the
    /// reference count, header, length, key and value.
    pub fn heap_size(&self) -> usize {
        heap_size_for(self.0.slice.len())
    }
}

/// Heap bytes of an item whose key and value total `payload` bytes: 24
/// bytes of reference count, header and length, plus the payload, rounded
/// up to the allocator's 16-byte granularity with its 8-byte chunk header.
pub(crate) fn heap_size_for(payload: usize) -> usize {
    (24 + payload + 8).div_ceil(16) * 16
}

struct ValueOwner(Item);

impl AsRef<[u8]> for ValueOwner {
    fn as_ref(&self) -> &[u8] {
        self.0.value()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_concatenated() {
        let it = Item::from_parts(b"key", 7, &[b"ab", b"", b"cde"]);
        assert_eq!(it.key(), b"key");
        assert_eq!(it.value(), b"abcde");
        assert_eq!(it.flags(), 7);
    }

    #[test]
    fn empty_value_and_key() {
        let it = Item::new(b"", 0, b"");
        assert_eq!(it.key(), b"");
        assert_eq!(it.value(), b"");
    }

    #[test]
    fn value_bytes_outlive_the_item_handle() {
        let it = Item::new(b"k", 0, b"hello");
        let v = it.value_bytes();
        drop(it);
        assert_eq!(&v[..], b"hello");
    }

    #[test]
    fn clones_share_the_allocation() {
        let it = Item::new(b"k", 0, &[1u8; 1000]);
        let c = it.clone();
        assert_eq!(it.value().as_ptr(), c.value().as_ptr());
    }
}
