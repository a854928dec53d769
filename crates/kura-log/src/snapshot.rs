//! Snapshots: the whole store at one point of the log, so that recovery
//! replays only the log after it and older segments can go.
//!
//! ```text
//! file     := header record* trailer
//! header   := "KURASNAP" version:u8 0:u8*7 seq:u64         (24 bytes)
//! record   := a log record (see `record`), numbered `seq`: Set, Flush or
//!             TablePut
//! trailer  := "KSNAPEND" records:u64 crc:u32 0:u32         (24 bytes)
//! ```
//! `seq` is the last log record whose effect the snapshot is sure to hold;
//! it may hold some later ones too (it is taken while writers go on), which
//! is harmless because replaying the log after `seq` rebuilds their result.
//! `crc` is the CRC-32 of every record byte, so a snapshot cut short or
//! damaged anywhere is told apart from a whole one.
//!
//! A snapshot is written as `NNN.ksnap.tmp`, synced, then renamed to
//! `NNN.ksnap` (20-digit `seq`), so a crash mid-write leaves only a
//! temporary file, which recovery removes.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::record::{Mutation, MutationRef, Record, MAX_BODY_LEN, RECORD_HEADER_LEN};
use crate::{io_err, LogError};

const MAGIC: &[u8; 8] = b"KURASNAP";
const VERSION: u8 = 1;
const END_MAGIC: &[u8; 8] = b"KSNAPEND";
const HEADER_LEN: usize = 24;
const TRAILER_LEN: usize = 24;
const EXTENSION: &str = "ksnap";
const TMP_SUFFIX: &str = ".ksnap.tmp";

/// One snapshot file of a data directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    pub path: PathBuf,
    /// The log record it was taken at.
    pub seq: u64,
}

/// Where the snapshot of `dir` taken at record `seq` lives.
pub fn snapshot_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}.{EXTENSION}"))
}

/// Where the snapshot of `dir` taken at record `seq` is written before it
/// is whole (such files are removed by [`remove_partial_snapshots`]).
pub fn snapshot_tmp_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}{TMP_SUFFIX}"))
}

/// The snapshots of `dir`, oldest first (temporary files are not listed).
///
/// # Errors
/// The directory cannot be read.
pub fn snapshot_files(dir: &Path) -> Result<Vec<SnapshotFile>, LogError> {
    Ok(crate::segment::numbered_files(dir, EXTENSION)?
        .into_iter()
        .map(|(path, seq)| SnapshotFile { path, seq })
        .collect())
}

/// Removes snapshots a crash left half written; returns their paths.
///
/// # Errors
/// I/O errors.
pub fn remove_partial_snapshots(dir: &Path) -> Result<Vec<PathBuf>, LogError> {
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
        let path = entry.map_err(io_err(dir))?.path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(TMP_SUFFIX))
        {
            std::fs::remove_file(&path).map_err(io_err(&path))?;
            removed.push(path);
        }
    }
    Ok(removed)
}

/// Bytes free for an unprivileged writer on the filesystem of `dir`.
///
/// # Errors
/// I/O errors.
pub fn available_bytes(dir: &Path) -> Result<u64, LogError> {
    let st = rustix::fs::statvfs(dir).map_err(|e| io_err(dir)(e.into()))?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// A snapshot's bytes, made anywhere (a file, or a stream to a replica):
/// the header, each record, and the trailer that counts and checks them.
#[derive(Debug)]
pub struct SnapshotEncoder {
    seq: u64,
    records: u64,
    crc: crc32fast::Hasher,
}

impl SnapshotEncoder {
    /// The bytes of a snapshot beyond its records.
    pub const OVERHEAD: u64 = (HEADER_LEN + TRAILER_LEN) as u64;

    /// A snapshot taken at record `seq`.
    pub fn new(seq: u64) -> SnapshotEncoder {
        SnapshotEncoder {
            seq,
            records: 0,
            crc: crc32fast::Hasher::new(),
        }
    }

    /// The header.
    pub fn header(&self) -> [u8; HEADER_LEN] {
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(MAGIC);
        header[8] = VERSION;
        header[16..].copy_from_slice(&self.seq.to_le_bytes());
        header
    }

    /// Appends an entry (a Set) or a pending flush to `out`.
    pub fn push(&mut self, m: &MutationRef<'_>, out: &mut Vec<u8>) {
        let start = out.len();
        m.encode(self.seq, out);
        self.crc.update(&out[start..]);
        self.records += 1;
    }

    /// The trailer, once every record is pushed.
    pub fn trailer(&self) -> [u8; TRAILER_LEN] {
        let mut trailer = [0u8; TRAILER_LEN];
        trailer[..8].copy_from_slice(END_MAGIC);
        trailer[8..16].copy_from_slice(&self.records.to_le_bytes());
        trailer[16..20].copy_from_slice(&self.crc.clone().finalize().to_le_bytes());
        trailer
    }
}

/// Writes one snapshot. Dropped before [`SnapshotWriter::finish`] (an error
/// on the way, a full disk), it removes its half-written file.
pub struct SnapshotWriter {
    /// `None` once finished.
    out: Option<BufWriter<File>>,
    tmp: PathBuf,
    path: PathBuf,
    dir: PathBuf,
    encoder: SnapshotEncoder,
    buf: Vec<u8>,
}

impl SnapshotWriter {
    /// Starts the snapshot of `dir` taken at log record `seq`.
    ///
    /// # Errors
    /// I/O errors.
    pub fn create(dir: &Path, seq: u64) -> Result<SnapshotWriter, LogError> {
        let path = snapshot_path(dir, seq);
        let tmp = snapshot_tmp_path(dir, seq);
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&tmp)
            .map_err(io_err(&tmp))?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let encoder = SnapshotEncoder::new(seq);
        if let Err(e) = out.write_all(&encoder.header()) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io_err(&tmp)(e));
        }
        Ok(SnapshotWriter {
            out: Some(out),
            tmp,
            path,
            dir: dir.to_owned(),
            encoder,
            buf: Vec::new(),
        })
    }

    /// Adds an entry (a Set), a pending flush, or a table record.
    ///
    /// # Errors
    /// I/O errors.
    pub fn push(&mut self, m: &MutationRef<'_>) -> Result<(), LogError> {
        self.buf.clear();
        self.encoder.push(m, &mut self.buf);
        let out = self.out.as_mut().ok_or_else(|| finished(&self.tmp))?;
        out.write_all(&self.buf).map_err(io_err(&self.tmp))?;
        Ok(())
    }

    /// Writes the trailer, syncs, and gives the snapshot its name; returns
    /// its path and the number of records.
    ///
    /// # Errors
    /// I/O errors.
    pub fn finish(mut self) -> Result<(PathBuf, u64), LogError> {
        let trailer = self.encoder.trailer();
        let mut out = self.out.take().ok_or_else(|| finished(&self.tmp))?;
        let done = (|| {
            out.write_all(&trailer).map_err(io_err(&self.tmp))?;
            let file = out
                .into_inner()
                .map_err(|e| io_err(&self.tmp)(e.into_error()))?;
            file.sync_all().map_err(io_err(&self.tmp))?;
            std::fs::rename(&self.tmp, &self.path).map_err(io_err(&self.path))
        })();
        if let Err(e) = done {
            let _ = std::fs::remove_file(&self.tmp);
            return Err(e);
        }
        if let Ok(d) = File::open(&self.dir) {
            d.sync_all().map_err(io_err(&self.dir))?;
        }
        Ok((self.path.clone(), self.encoder.records))
    }
}

impl Drop for SnapshotWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn finished(tmp: &Path) -> LogError {
    io_err(tmp)(std::io::Error::other("snapshot already finished"))
}

/// Why a snapshot cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("damaged snapshot {file}, offset {offset}: {reason}")]
pub struct SnapshotDamage {
    pub file: PathBuf,
    pub offset: u64,
    pub reason: String,
}

/// Reads a whole snapshot, checking every byte, and calls `each` with its
/// records in order; returns the snapshot's sequence number and record
/// count. The file is checked in a first pass, so nothing is handed to
/// `each` unless the whole of it checks out; it is streamed, never held in
/// memory whole.
///
/// # Errors
/// I/O errors; [`LogError::Snapshot`] when the file is damaged or cut short.
pub fn read_snapshot(path: &Path, mut each: impl FnMut(Record)) -> Result<(u64, u64), LogError> {
    scan(path, &mut |_| {})?;
    scan(path, &mut each)
}

/// Checks a snapshot without keeping its records; returns its sequence
/// number and record count.
///
/// # Errors
/// As [`read_snapshot`].
pub fn check_snapshot(path: &Path) -> Result<(u64, u64), LogError> {
    scan(path, &mut |_| {})
}

fn scan(path: &Path, each: &mut dyn FnMut(Record)) -> Result<(u64, u64), LogError> {
    let file = File::open(path).map_err(io_err(path))?;
    let size = file.metadata().map_err(io_err(path))?.len();
    let r = std::io::BufReader::with_capacity(1 << 20, file);
    scan_from(r, size, path, each)
}

/// Reads a snapshot of `size` bytes from a stream (what a replica receives
/// in a full resync), calling `each` for every record as it comes; returns
/// its sequence number and record count. The whole is checked only at the
/// end (trailer, count, CRC): on an error, what `each` was given must be
/// thrown away. `name` names the stream in errors.
///
/// # Errors
/// The stream's I/O errors; a snapshot that does not check out.
pub fn read_snapshot_stream(
    r: impl std::io::Read,
    size: u64,
    name: &Path,
    mut each: impl FnMut(Record),
) -> Result<(u64, u64), LogError> {
    scan_from(r, size, name, &mut each)
}

fn scan_from(
    mut r: impl std::io::Read,
    size: u64,
    path: &Path,
    each: &mut dyn FnMut(Record),
) -> Result<(u64, u64), LogError> {
    let damage = |offset: u64, reason: &str| {
        LogError::Snapshot(SnapshotDamage {
            file: path.to_owned(),
            offset,
            reason: reason.to_owned(),
        })
    };
    if size < (HEADER_LEN + TRAILER_LEN) as u64 {
        return Err(damage(0, "shorter than a header and a trailer"));
    }
    let mut header = [0u8; HEADER_LEN];
    r.read_exact(&mut header).map_err(io_err(path))?;
    if &header[..8] != MAGIC {
        return Err(damage(0, "not a kura snapshot (bad magic)"));
    }
    if header[8] != VERSION {
        return Err(damage(8, "unknown snapshot version"));
    }
    if header[9..16].iter().any(|&b| b != 0) {
        return Err(damage(9, "damaged header (reserved bytes are not zero)"));
    }
    let seq = u64::from_le_bytes(header[16..24].try_into().unwrap_or_default());
    let end = size - TRAILER_LEN as u64;
    let mut pos = HEADER_LEN as u64;
    let mut crc = crc32fast::Hasher::new();
    let mut buf = Vec::new();
    let mut n = 0u64;
    while pos < end {
        if end - pos < RECORD_HEADER_LEN as u64 {
            return Err(damage(pos, "record cut short"));
        }
        buf.resize(RECORD_HEADER_LEN, 0);
        r.read_exact(&mut buf).map_err(io_err(path))?;
        let len = u64::from(u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]));
        if len > MAX_BODY_LEN as u64 || pos + RECORD_HEADER_LEN as u64 + len > end {
            return Err(damage(
                pos,
                "record runs past the end: the snapshot was cut short",
            ));
        }
        buf.resize(RECORD_HEADER_LEN + len as usize, 0);
        r.read_exact(&mut buf[RECORD_HEADER_LEN..])
            .map_err(io_err(path))?;
        let Ok((record, _)) = Record::decode(&buf) else {
            return Err(damage(pos, "record does not decode (CRC or body)"));
        };
        if record.seq != seq {
            return Err(damage(pos, "record numbered apart from the snapshot"));
        }
        if !matches!(
            record.mutation,
            Mutation::Set { .. } | Mutation::Flush { .. } | Mutation::TablePut { .. }
        ) {
            return Err(damage(
                pos,
                "a snapshot holds only entries, flushes and table records",
            ));
        }
        crc.update(&buf);
        each(record);
        n += 1;
        pos += buf.len() as u64;
    }
    let mut trailer = [0u8; TRAILER_LEN];
    r.read_exact(&mut trailer).map_err(io_err(path))?;
    if &trailer[..8] != END_MAGIC {
        return Err(damage(end, "no trailer: the snapshot was cut short"));
    }
    if trailer[20..].iter().any(|&b| b != 0) {
        return Err(damage(end + 20, "damaged trailer"));
    }
    let count = u64::from_le_bytes(trailer[8..16].try_into().unwrap_or_default());
    let want = u32::from_le_bytes(trailer[16..20].try_into().unwrap_or_default());
    if crc.finalize() != want {
        return Err(damage(
            HEADER_LEN as u64,
            "CRC of the records does not match",
        ));
    }
    if n != count {
        return Err(damage(end, "record count does not match the trailer"));
    }
    Ok((seq, count))
}

/// What [`prune`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pruned {
    pub snapshots: Vec<PathBuf>,
    pub segments: Vec<PathBuf>,
}

/// Keeps the two newest snapshots and the log from the older of them on
/// (so that a damaged newest snapshot still leaves a way back), and removes
/// the rest. With fewer than two snapshots nothing is removed. The newest
/// segment is never removed (the writer appends to it).
///
/// # Errors
/// I/O errors.
pub fn prune(dir: &Path) -> Result<Pruned, LogError> {
    prune_keeping(dir, u64::MAX, 0)
}

/// [`prune`], but a segment holding records from `keep_from` on (a
/// replica still needs them) is kept too, the newest such first, as long
/// as they come to at most `keep_bytes` in all: a replica farther behind
/// than that resyncs whole rather than hold the disk.
///
/// # Errors
/// I/O errors.
pub fn prune_keeping(dir: &Path, keep_from: u64, keep_bytes: u64) -> Result<Pruned, LogError> {
    let snapshots = snapshot_files(dir)?;
    let mut pruned = Pruned::default();
    if snapshots.len() < 2 {
        return Ok(pruned);
    }
    let older = &snapshots[snapshots.len() - 2];
    for s in &snapshots[..snapshots.len() - 2] {
        std::fs::remove_file(&s.path).map_err(io_err(&s.path))?;
        pruned.snapshots.push(s.path.clone());
    }
    // A segment can go when the next one starts at or before the first
    // record replay from the older snapshot needs.
    let segments = crate::segment_files(dir)?;
    // Segment `i` holds records up to the one before segment `i + 1`'s
    // first: it can go when that is at or before the first record replay
    // from the older snapshot needs. Those can go are the oldest `n`.
    let mut n = segments
        .windows(2)
        .take_while(|pair| pair[1].first_seq <= older.seq.saturating_add(1))
        .count();
    // Of those, the ones that hold records from `keep_from` on stay,
    // newest first, while they fit in `keep_bytes`.
    let mut kept = 0u64;
    while n > 0 && segments[n].first_seq > keep_from {
        let size = std::fs::metadata(&segments[n - 1].path).map_or(0, |m| m.len());
        if kept + size > keep_bytes {
            break;
        }
        kept += size;
        n -= 1;
    }
    let removable = &segments[..n];
    for seg in removable {
        std::fs::remove_file(&seg.path).map_err(io_err(&seg.path))?;
        pruned.segments.push(seg.path.clone());
    }
    Ok(pruned)
}

/// A snapshot and whether it checks out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotStatus {
    pub file: SnapshotFile,
    /// Its record count, or what is wrong with it.
    pub check: Result<u64, String>,
}

/// The state of a whole data directory: its log, its snapshots, and where
/// recovery would start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirReport {
    pub log: crate::CheckReport,
    pub snapshots: Vec<SnapshotStatus>,
    /// The newest snapshot that checks out.
    pub usable: Option<SnapshotFile>,
    /// Why the directory cannot be recovered whole, if it cannot: the log
    /// after the usable snapshot (or from the start) has a gap.
    pub gap: Option<String>,
}

/// Checks a data directory: every log segment, every snapshot, and that
/// the log goes on from the newest usable snapshot without a gap.
///
/// # Errors
/// I/O errors only; damage is in the report.
pub fn check_dir(dir: &Path) -> Result<DirReport, LogError> {
    let log = crate::check(dir)?;
    let mut snapshots = Vec::new();
    for file in snapshot_files(dir)? {
        let check = match check_snapshot(&file.path) {
            Ok((_, n)) => Ok(n),
            Err(LogError::Snapshot(d)) => Err(format!("offset {}: {}", d.offset, d.reason)),
            Err(e) => return Err(e),
        };
        snapshots.push(SnapshotStatus { file, check });
    }
    let usable = snapshots
        .iter()
        .rev()
        .find(|s| s.check.is_ok())
        .map(|s| s.file.clone());
    let from = usable.as_ref().map_or(1, |s| s.seq + 1);
    let gap = match log.first_seq {
        Some(first) if first > from => Some(match &usable {
            Some(s) => format!(
                "the log starts at record {first}, but the newest usable snapshot ({}) ends at record {}",
                s.path.display(),
                s.seq
            ),
            None => format!(
                "the log starts at record {first} and there is no usable snapshot for the records before it"
            ),
        }),
        _ => None,
    };
    Ok(DirReport {
        log,
        snapshots,
        usable,
        gap,
    })
}
