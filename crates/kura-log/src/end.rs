//! The data dir's own record of how far its log is known to be on disk.
//!
//! The segments alone cannot tell a log that ends where it should from one
//! whose newest segment was deleted or cut, nor a record torn by a crash
//! from a record that was on disk and was damaged later. So after every
//! fsync of the log the writer notes the last record it covered in a small
//! file, `LOG_END`, overwritten in place with one write of 24 bytes (magic,
//! number, CRC): within one sector, so it is either the old or the new
//! note. It is itself never synced: it is written only after the log's own
//! fsync returned, so whatever a crash leaves of it is a number the log on
//! disk reaches. A record at or below the note is known to have been on
//! disk: damage there is corruption, never a torn write, and a log that
//! ends below it has lost a segment or its end.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::{io_err, LogError};

/// The file's name in a data dir.
pub const END_FILE: &str = "LOG_END";

const MAGIC: &[u8; 8] = b"KURAEND1";
const LEN: usize = 24;

/// Where the note of `dir` lives.
pub fn end_path(dir: &Path) -> PathBuf {
    dir.join(END_FILE)
}

fn encode(seq: u64) -> [u8; LEN] {
    let mut b = [0u8; LEN];
    b[..8].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    let crc = crc32fast::hash(&b[..16]);
    b[16..20].copy_from_slice(&crc.to_le_bytes());
    b
}

fn decode(b: &[u8]) -> Option<u64> {
    if b.len() < LEN || &b[..8] != MAGIC {
        return None;
    }
    let crc = u32::from_le_bytes(b[16..20].try_into().ok()?);
    if crc32fast::hash(&b[..16]) != crc {
        return None;
    }
    Some(u64::from_le_bytes(b[8..16].try_into().ok()?))
}

/// Reads the note of `dir`: the last record known to have been on disk.
/// `None` when there is none, or when it does not check out (a crash can
/// leave it so: it is not synced); that only means less is known.
///
/// # Errors
/// The file exists but cannot be read.
pub fn read_end(dir: &Path) -> Result<Option<u64>, LogError> {
    let path = end_path(dir);
    match std::fs::read(&path) {
        Ok(b) => Ok(decode(&b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&path)(e)),
    }
}

/// Writes the note of `dir` (after a repair that accepted a loss, or when
/// a writer opens).
///
/// # Errors
/// I/O errors.
pub fn write_end(dir: &Path, seq: u64) -> Result<(), LogError> {
    LogEnd::open(dir)?.note(seq)
}

/// A handle on the note, shared by the writer and whoever syncs for it.
#[derive(Debug, Clone)]
pub struct LogEnd {
    file: Arc<File>,
    path: Arc<PathBuf>,
}

impl LogEnd {
    /// Opens (creating) the note of `dir`.
    ///
    /// # Errors
    /// I/O errors.
    pub fn open(dir: &Path) -> Result<LogEnd, LogError> {
        let path = end_path(dir);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        Ok(LogEnd {
            file: Arc::new(file),
            path: Arc::new(path),
        })
    }

    /// Notes that every record up to `seq` is on disk (call it only after
    /// the fsync that made it so).
    ///
    /// # Errors
    /// I/O errors.
    pub fn note(&self, seq: u64) -> Result<(), LogError> {
        self.file
            .write_all_at(&encode(seq), 0)
            .map_err(io_err(&self.path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_reads_back_and_damage_reads_as_unknown() {
        let b = encode(12345);
        assert_eq!(decode(&b), Some(12345));
        for i in 0..LEN - 4 {
            let mut d = b;
            d[i] ^= 0x10;
            assert_eq!(decode(&d), None, "byte {i} flipped");
        }
        assert_eq!(decode(&b[..LEN - 1]), None);
        assert_eq!(decode(&[0u8; LEN]), None);
    }

    #[test]
    fn a_note_is_overwritten_in_place() {
        let dir = std::env::temp_dir().join(format!("kura-log-end-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(read_end(&dir).unwrap(), None);
        let end = LogEnd::open(&dir).unwrap();
        end.note(7).unwrap();
        end.clone().note(9).unwrap();
        assert_eq!(read_end(&dir).unwrap(), Some(9));
        write_end(&dir, 3).unwrap();
        assert_eq!(read_end(&dir).unwrap(), Some(3));
        assert_eq!(std::fs::metadata(end_path(&dir)).unwrap().len(), LEN as u64);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
