//! kura's update log: every mutation of a durable store as a record with a
//! monotonically increasing sequence number, appended to segment files of
//! bounded size in one directory.
//!
//! The log records the *result* of each mutation (the item as it now is,
//! with an absolute expiry), not the command that produced it, so replay is
//! idempotent and independent of the clock: an append is logged as the whole
//! new value, an incr as the new number, a touch as the new deadline. A
//! replica can stream the log from any sequence number with
//! [`LogReader::from_seq`].
//!
//! Layout of a directory: `NNNNNNNNNNNNNNNNNNNN.klog` files, named by the
//! sequence number of their first record (20 digits, so names sort in
//! order). Each file starts with a 16-byte header: `KURALOG`, a version
//! byte and the first sequence number. Each record is `len:u32 crc32:u32
//! seq:u64 kind:u8 fields` (little endian), the CRC covering everything
//! after itself. See [`record`] for the fields.
//!
//! Damage is told apart by where and what it is: a record cut short (or
//! followed only by zeros) at the very end of the newest file, past the last
//! record the directory knows was on disk (`LOG_END`, see [`LogEnd`]), is a
//! torn write (a crash mid-append) and [`repair`] truncates it; anything
//! else that does not check out is corruption, reported with the file and
//! byte offset, and so is a log that ends before a record known to have been
//! on disk (a deleted or cut segment).

mod end;
mod history;
mod lock;
mod reader;
pub mod record;
mod rewind;
mod scan;
mod seed;
mod segment;
pub mod snapshot;
mod tail;
mod writer;

pub use end::{end_path, read_end, write_end, LogEnd, END_FILE};
pub use history::{History, HISTORY_FILE};
pub use lock::{DirLock, LOCK_FILE};
pub use reader::LogReader;
pub use record::{Mutation, MutationRef, Record};
pub use rewind::{clear_dir, rewind_base, truncate_after};
pub use scan::{check, repair, CheckReport, Damage, ScanError};
pub use seed::{load_or_create_seed, SEED_FILE};
pub use segment::{segment_files, SegmentFile, FILE_HEADER_LEN, FILE_MAGIC};
pub use snapshot::{
    available_bytes, check_dir, check_snapshot, prune, prune_keeping, read_snapshot,
    read_snapshot_stream, remove_partial_snapshots, snapshot_files, snapshot_path,
    snapshot_tmp_path, DirReport, Pruned, SnapshotDamage, SnapshotEncoder, SnapshotFile,
    SnapshotStatus, SnapshotWriter,
};
pub use tail::{LogTail, TailError};
pub use writer::{FsyncPolicy, LogWriter, WriterOptions};

/// Errors of the log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// An fsync failed: what was written since the last good one may not
    /// be on disk, whatever the file reads back now.
    #[error("{path}: fsync failed: {source}")]
    Sync {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Scan(#[from] ScanError),
    #[error(transparent)]
    Tail(#[from] TailError),
    #[error("record too large for the log: {0} bytes")]
    TooLarge(usize),
    #[error(transparent)]
    Snapshot(#[from] snapshot::SnapshotDamage),
    #[error("record {got} written where {expected} was next")]
    OutOfOrder { expected: u64, got: u64 },
    #[error("data dir {} is in use by {}", dir.display(), match pid { Some(p) => format!("process {p} (a running kura server?)"), None => "another process".to_string() })]
    InUse {
        dir: std::path::PathBuf,
        pid: Option<u32>,
    },
}

pub(crate) fn sync_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> LogError + '_ {
    move |source| LogError::Sync {
        path: path.to_owned(),
        source,
    }
}

/// Writes `text` as `dir`/`name` whole or not at all: to a temporary name, synced, renamed,
/// and the directory synced.
pub(crate) fn write_whole(dir: &std::path::Path, name: &str, text: &str) -> Result<(), LogError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, text).map_err(io_err(&tmp))?;
    std::fs::File::open(&tmp)
        .and_then(|f| f.sync_all())
        .map_err(io_err(&tmp))?;
    std::fs::rename(&tmp, &path).map_err(io_err(&path))?;
    if let Ok(d) = std::fs::File::open(dir) {
        d.sync_all().map_err(io_err(dir))?;
    }
    Ok(())
}

pub(crate) fn io_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.to_owned(),
        source,
    }
}
