//! Transparent huge pages for the store's own mappings (the shards' arenas
//! and index tables), asked for with [`StoreConfig::huge_pages`] (`kura
//! server -L`, as memcached's `-L` asks for them on Linux).
//!
//! A read of a large cache touches two places nobody touched lately: the
//! key's index group and its entry's block. With 4 KiB pages each of those
//! also misses the TLB, and a page walk under virtualisation is itself a
//! chain of memory reads; 2 MiB pages cover a cache of gigabytes with a few
//! hundred TLB entries. The price: memory is taken from the system 2 MiB at
//! a time (up to that much more per shard than the blocks need), and with
//! the kernel's `defrag` setting at its default a fault in an advised
//! mapping may wait while the kernel compacts memory into a huge page.
//!
//! [`StoreConfig::huge_pages`]: crate::StoreConfig::huge_pages

/// Asks the kernel to back the mapping at `[ptr, ptr + len)` with huge
/// pages where it can. Advice only: a kernel without transparent huge pages
/// refuses it and the mapping keeps its small pages; nothing else about it
/// changes, so nobody needs to know whether it was taken.
pub(crate) fn advise_huge(ptr: *mut u8, len: usize) {
    // Miri has no `madvise`; advice changes nothing it checks.
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        // SAFETY: MADV_HUGEPAGE changes neither the contents nor the access
        // rights of any page; callers pass a page-aligned range of a
        // mapping of their own.
        unsafe {
            libc::madvise(ptr.cast(), len, libc::MADV_HUGEPAGE);
        }
    }
    #[cfg(any(not(target_os = "linux"), miri))]
    {
        let _ = (ptr, len);
    }
}

/// Whether the mapping holding `addr` is advised for huge pages, from its
/// `VmFlags` in /proc/self/smaps (`hg`); `None` where that cannot be read.
#[cfg(test)]
pub(crate) fn advised(addr: usize) -> Option<bool> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) = first.split_once('-') {
            if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&addr);
                continue;
            }
        }
        if inside {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                return Some(flags.split_whitespace().any(|f| f == "hg"));
            }
        }
    }
    None
}

/// Whether this kernel has transparent huge pages at all.
#[cfg(test)]
pub(crate) fn kernel_has_them() -> bool {
    std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists()
}
