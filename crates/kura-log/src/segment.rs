//! Segment files: naming, headers, listing.

use std::path::{Path, PathBuf};

use crate::{io_err, LogError};

/// The first bytes of every segment file (the last one is the version).
pub const FILE_MAGIC: &[u8; 8] = b"KURALOG\x01";
/// The header: magic, then the sequence number of the first record.
pub const FILE_HEADER_LEN: usize = 16;
const EXTENSION: &str = "klog";

/// One segment file of a log directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentFile {
    pub path: PathBuf,
    /// The sequence number in its name: that of its first record.
    pub first_seq: u64,
}

/// The path of the segment whose first record is `seq`.
pub(crate) fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}.{EXTENSION}"))
}

pub(crate) fn header(first_seq: u64) -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(FILE_MAGIC);
    h[8..].copy_from_slice(&first_seq.to_le_bytes());
    h
}

/// The segment files of `dir`, oldest first. Files that are not segments
/// are ignored.
///
/// # Errors
/// The directory cannot be read.
pub fn segment_files(dir: &Path) -> Result<Vec<SegmentFile>, LogError> {
    Ok(numbered_files(dir, EXTENSION)?
        .into_iter()
        .map(|(path, first_seq)| SegmentFile { path, first_seq })
        .collect())
}

/// The files `NNNNNNNNNNNNNNNNNNNN.<extension>` of `dir` (20-digit numbers),
/// with their numbers, in number order. Other files are ignored.
pub(crate) fn numbered_files(dir: &Path, extension: &str) -> Result<Vec<(PathBuf, u64)>, LogError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let path = entry.map_err(io_err(dir))?.path();
        if path.extension().and_then(|e| e.to_str()) != Some(extension) {
            continue;
        }
        let Some(n) = path
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| s.len() == 20)
            .and_then(|s| s.parse::<u64>().ok())
        else {
            continue;
        };
        out.push((path, n));
    }
    out.sort_by_key(|(_, n)| *n);
    Ok(out)
}
