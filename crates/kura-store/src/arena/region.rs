//! An arena's region of address space: reserved, made usable up to a
//! length, and given back; the only code of the arena that talks to the
//! operating system.
//!
//! Outside Miri a region is reserved with `mmap(PROT_NONE)` and made usable
//! with `mprotect`, so pages are paid for only once touched. Miri cannot run
//! either call, so under `cfg(miri)` a region is one zeroed allocation of
//! the global allocator with the same size and alignment; making part of it
//! usable changes nothing (the whole allocation is usable from the start)
//! and giving it back deallocates it. Everything above this file (the
//! allocator, the walk, item handles, the last handle giving a region back)
//! is the same code in both, which is what Miri then checks.

use std::ptr::NonNull;

use super::REGION;

/// Reserves REGION bytes of address space aligned to REGION, inaccessible,
/// advised for huge pages if `huge` (before any page of it is touched: a
/// 2 MiB range that already has a small page gets no huge one).
#[cfg(not(miri))]
pub(super) fn reserve(huge: bool) -> std::io::Result<NonNull<u8>> {
    let len = 2 * REGION;
    // SAFETY: an anonymous private mapping with no access; no memory of
    // ours is involved.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    let start = p as usize;
    let aligned = (start + REGION - 1) & !(REGION - 1);
    // SAFETY: both trimmed ranges lie in the mapping just made and are
    // page aligned (REGION is a multiple of the page size).
    unsafe {
        if aligned > start {
            libc::munmap(p, aligned - start);
        }
        let tail = start + len - (aligned + REGION);
        if tail > 0 {
            libc::munmap(p.cast::<u8>().add(aligned + REGION - start).cast(), tail);
        }
    }
    // The same provenance as the mapping's pointer, moved to the aligned
    // address inside it.
    let base = p.cast::<u8>().wrapping_add(aligned - start);
    if huge {
        // Advice only: without huge pages the arena works on small ones.
        crate::pages::advise_huge(base, REGION);
    }
    NonNull::new(base).ok_or_else(|| std::io::Error::other("null mapping"))
}

/// Under Miri: one zeroed allocation of REGION bytes aligned to REGION
/// (zeroed as a fresh mapping is, so the first page is a valid `Shared`).
#[cfg(miri)]
pub(super) fn reserve(_huge: bool) -> std::io::Result<NonNull<u8>> {
    // SAFETY: the layout's size is not zero.
    let p = unsafe { std::alloc::alloc_zeroed(layout()) };
    NonNull::new(p).ok_or_else(|| std::io::Error::other("the allocator refused the region"))
}

#[cfg(miri)]
fn layout() -> std::alloc::Layout {
    // REGION is a power of two and far below isize::MAX.
    std::alloc::Layout::from_size_align(REGION, REGION).unwrap_or_else(|_| unreachable!())
}

/// Makes `[from, to)` of the region at `base` readable and writable.
#[cfg(not(miri))]
pub(super) fn open(base: NonNull<u8>, from: usize, to: usize) -> std::io::Result<()> {
    // SAFETY: [from, to) lies in the reservation (callers keep `to` at most
    // REGION); mprotect only changes the access rights of our own pages.
    let rc = unsafe {
        libc::mprotect(
            base.as_ptr().add(from).cast(),
            to - from,
            libc::PROT_READ | libc::PROT_WRITE,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Under Miri the whole allocation is usable already.
#[cfg(miri)]
pub(super) fn open(_base: NonNull<u8>, _from: usize, _to: usize) -> std::io::Result<()> {
    Ok(())
}

/// Gives back a region from [`reserve`].
///
/// # Safety
/// `base` is a region from `reserve` that nothing refers to any more.
pub(super) unsafe fn release(base: NonNull<u8>) {
    #[cfg(not(miri))]
    // SAFETY: the caller's promise; the reservation is REGION bytes.
    unsafe {
        libc::munmap(base.as_ptr().cast(), REGION);
    }
    #[cfg(miri)]
    // SAFETY: the caller's promise; allocated in `reserve` with `layout()`.
    unsafe {
        std::alloc::dealloc(base.as_ptr(), layout());
    }
}
