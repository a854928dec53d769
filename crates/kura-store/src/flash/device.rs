//! The flash tier's files, cut into pages: page `n` is a range of one
//! file. Reads and writes are positioned (`pread`/`pwrite`), so any thread
//! may do either without a shared cursor. Faults can be injected for tests
//! ([`Faults`]).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// Faults a test can inject into the device: every write failing (as on a
/// file the system made read-only, or a full device), the next reads cut
/// short, the next reads returning a flipped byte.
#[derive(Debug, Default)]
pub struct Faults {
    /// Every write fails with an I/O error while set.
    pub fail_writes: AtomicBool,
    /// This many of the next device reads return half the bytes asked.
    pub short_reads: AtomicU32,
    /// This many of the next device reads return a byte flipped.
    pub corrupt_reads: AtomicU32,
    /// Device reads wait while set: a read stays under way for as long as
    /// a test needs (a slow device).
    pub hold_reads: AtomicBool,
    /// Device reads waiting now because of `hold_reads` (so a test knows a
    /// read is under way).
    pub reads_held: AtomicU32,
    /// The page cache never answers a read by itself (a cold device): every
    /// read goes to a reader thread.
    pub uncached: AtomicBool,
}

fn take_one(n: &AtomicU32) -> bool {
    n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1))
        .is_ok()
}

/// The files, and where each page is.
#[derive(Debug)]
pub(crate) struct Device {
    files: Vec<File>,
    /// (file, offset in it) of each page.
    pages: Vec<(usize, u64)>,
    pub(crate) faults: Faults,
}

impl Device {
    /// Opens (creating them) the files, emptied unless `keep` (a persistent
    /// tier reads them back): a tier that is not kept starts with nothing.
    /// A size under one page is refused.
    pub(crate) fn open(files: &[(PathBuf, u64)], page_size: u64, keep: bool) -> io::Result<Device> {
        let mut dev = Device {
            files: Vec::new(),
            pages: Vec::new(),
            faults: Faults::default(),
        };
        for (path, size) in files {
            let pages = size / page_size;
            if pages == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}: {size} bytes is less than one page of {page_size}",
                        path.display()
                    ),
                ));
            }
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            let meta = file.metadata()?;
            if meta.is_file() && !keep {
                // Drop whatever an earlier run left: nothing of it is read.
                file.set_len(0)?;
                file.set_len(pages * page_size)?;
            } else if meta.is_file() && meta.len() < pages * page_size {
                // Pages past the end read as empty.
                file.set_len(pages * page_size)?;
            }
            let n = dev.files.len();
            dev.pages.extend((0..pages).map(|p| (n, p * page_size)));
            dev.files.push(file);
        }
        Ok(dev)
    }

    /// Pages in all the files.
    pub(crate) fn pages(&self) -> usize {
        self.pages.len()
    }

    /// Writes `data` at `off` of `page`, all of it or an error.
    pub(crate) fn write(&self, page: u32, off: u64, data: &[u8]) -> io::Result<()> {
        if self.faults.fail_writes.load(Ordering::Relaxed) {
            return Err(io::Error::other("injected write fault"));
        }
        let (file, base) = self.pages[page as usize];
        self.files[file].write_all_at(data, base + off)
    }

    /// Reads all of `buf` from `off` of `page` only if the system has those
    /// bytes in its page cache, without waiting on the device
    /// (`preadv2(RWF_NOWAIT)`): false when it would have to wait (or the
    /// file system cannot say, or a fault is being injected: then the read
    /// goes to [`Device::read`] on a reader thread, as without this).
    pub(crate) fn read_cached(&self, page: u32, off: u64, buf: &mut [u8]) -> bool {
        let f = &self.faults;
        if f.hold_reads.load(Ordering::Acquire)
            || f.uncached.load(Ordering::Relaxed)
            || f.short_reads.load(Ordering::Relaxed) > 0
            || f.corrupt_reads.load(Ordering::Relaxed) > 0
        {
            return false;
        }
        let (file, base) = self.pages[page as usize];
        let Ok(at) = i64::try_from(base + off) else {
            return false;
        };
        nowait_read(&self.files[file], at, buf)
    }

    /// Reads into `buf` from `off` of `page`; the bytes read (fewer at the
    /// file's end or on a fault).
    pub(crate) fn read(&self, page: u32, off: u64, buf: &mut [u8]) -> io::Result<usize> {
        let (file, base) = self.pages[page as usize];
        let mut want = buf.len();
        if self.faults.hold_reads.load(Ordering::Acquire) {
            self.faults.reads_held.fetch_add(1, Ordering::AcqRel);
            while self.faults.hold_reads.load(Ordering::Acquire) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            self.faults.reads_held.fetch_sub(1, Ordering::AcqRel);
        }
        if take_one(&self.faults.short_reads) {
            want /= 2;
        }
        let mut got = 0;
        while got < want {
            match self.files[file].read_at(&mut buf[got..want], base + off + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if got > 0 && take_one(&self.faults.corrupt_reads) {
            buf[got / 2] ^= 0x20;
        }
        Ok(got)
    }
}

/// `preadv2(fd, buf, at, RWF_NOWAIT)` until `buf` is full: false on
/// `EAGAIN` (not all in the page cache), any error, or the file's end.
#[cfg(all(target_os = "linux", not(miri)))]
fn nowait_read(file: &File, at: i64, buf: &mut [u8]) -> bool {
    use std::os::fd::AsRawFd;
    let mut got = 0;
    while got < buf.len() {
        let rest = &mut buf[got..];
        let iov = libc::iovec {
            iov_base: rest.as_mut_ptr().cast(),
            iov_len: rest.len(),
        };
        // SAFETY: `iov` describes `rest`, a live, writable slice of
        // `rest.len()` bytes borrowed for this call only; the kernel writes
        // at most that many bytes into it. The descriptor is `file`'s, open
        // for the call's length (`file` is borrowed).
        let n =
            unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, at + got as i64, libc::RWF_NOWAIT) };
        match n {
            n if n > 0 => got += n as usize,
            _ => return false,
        }
    }
    true
}

/// Elsewhere (and under Miri, which has no `preadv2`): never from the cache
/// alone; every read goes to the reader threads.
#[cfg(not(all(target_os = "linux", not(miri))))]
fn nowait_read(_: &File, _: i64, _: &mut [u8]) -> bool {
    false
}
