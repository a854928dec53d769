//! Appending records: segment rotation and the fsync policy.
//!
//! [`LogWriter`] is the single writer of a directory. It is synchronous and
//! owns no thread: the server runs it on its own log thread (off the request
//! threads) and batches what many connections sent into one
//! [`LogWriter::append_batch`] and one [`LogWriter::sync`] (group commit).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::end::LogEnd;
use crate::record::{Mutation, MutationRef, MAX_BODY_LEN, RECORD_HEADER_LEN};
use crate::scan::{check, Damage};
use crate::segment::{header, segment_files, segment_path};
use crate::{io_err, sync_err, LogError};

/// When the log reaches the disk (Redis's `appendfsync` meanings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// fsync before a write is acknowledged (group commit shares it).
    Always,
    /// fsync in the background at most a second apart.
    #[default]
    EverySec,
    /// Leave it to the operating system.
    No,
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "always" => Ok(FsyncPolicy::Always),
            "everysec" => Ok(FsyncPolicy::EverySec),
            "no" => Ok(FsyncPolicy::No),
            other => Err(format!(
                "unknown fsync policy '{other}' (known: always, everysec, no)"
            )),
        }
    }
}

/// How a writer behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// A segment is closed and a new one started past this many bytes.
    pub segment_size: u64,
    pub fsync: FsyncPolicy,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            segment_size: 64 * 1024 * 1024,
            fsync: FsyncPolicy::EverySec,
        }
    }
}

/// The writer of one log directory.
pub struct LogWriter {
    dir: PathBuf,
    options: WriterOptions,
    file: File,
    path: PathBuf,
    size: u64,
    next_seq: u64,
    /// Bytes written but not yet fsynced.
    dirty: bool,
    last_sync: Instant,
    buf: Vec<u8>,
    /// Where the last record known to be on disk is noted.
    end: LogEnd,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("path", &self.path)
            .field("size", &self.size)
            .field("next_seq", &self.next_seq)
            .finish()
    }
}

impl LogWriter {
    /// Opens `dir` for appending (creating it), after checking it: a torn
    /// record at the end of the newest segment is cut off (the crash that
    /// left it never acknowledged it); corruption anywhere else is an
    /// error. New records continue the sequence.
    ///
    /// # Errors
    /// I/O errors, or corruption (see [`check`]).
    pub fn open(dir: &Path, options: WriterOptions) -> Result<LogWriter, LogError> {
        LogWriter::open_after(dir, options, 0)
    }

    /// Like [`LogWriter::open`], but new records are numbered after
    /// `after` at least (the sequence number of a snapshot, when the log
    /// that led up to it is gone).
    ///
    /// # Errors
    /// I/O errors, or corruption (see [`check`]).
    pub fn open_after(
        dir: &Path,
        options: WriterOptions,
        after: u64,
    ) -> Result<LogWriter, LogError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let report = check(dir)?;
        match &report.damage {
            None => {}
            Some(Damage::TornTail { file, offset, .. }) => {
                let f = OpenOptions::new()
                    .write(true)
                    .open(file)
                    .map_err(io_err(file))?;
                f.set_len(*offset).map_err(io_err(file))?;
                f.sync_all().map_err(io_err(file))?;
            }
            Some(Damage::Corrupt { .. }) => {
                return Err(report.into_error().unwrap_or_else(|| LogError::Io {
                    path: dir.to_owned(),
                    source: std::io::Error::other("corrupt log"),
                }));
            }
        }
        let from_log = report.last_seq.map_or(1, |s| s + 1);
        let next_seq = from_log.max(after.saturating_add(1));
        // Continue the newest segment if it has room and the numbers go on
        // from it, else start one.
        let segments = segment_files(dir)?;
        if let Some(last) = segments.last().filter(|_| next_seq == from_log) {
            let size = std::fs::metadata(&last.path)
                .map_err(io_err(&last.path))?
                .len();
            if size < options.segment_size {
                let file = OpenOptions::new()
                    .append(true)
                    .open(&last.path)
                    .map_err(io_err(&last.path))?;
                return Ok(LogWriter {
                    dir: dir.to_owned(),
                    options,
                    file,
                    path: last.path.clone(),
                    size,
                    next_seq,
                    dirty: false,
                    last_sync: Instant::now(),
                    buf: Vec::new(),
                    end: LogEnd::open(dir)?,
                });
            }
        }
        let (file, path) = new_segment(dir, next_seq)?;
        Ok(LogWriter {
            dir: dir.to_owned(),
            options,
            file,
            path,
            size: crate::segment::FILE_HEADER_LEN as u64,
            next_seq,
            dirty: false,
            last_sync: Instant::now(),
            buf: Vec::new(),
            end: LogEnd::open(dir)?,
        })
    }

    /// The sequence number the next record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The segment being written.
    pub fn current_segment(&self) -> &Path {
        &self.path
    }

    /// Appends one mutation; returns its sequence number. It is written to
    /// the file (the OS has it) but not synced: see [`LogWriter::sync`].
    ///
    /// # Errors
    /// I/O errors; a record too large for the format.
    pub fn append(&mut self, m: &Mutation) -> Result<u64, LogError> {
        let seq = self.append_batch(std::slice::from_ref(m))?;
        Ok(seq)
    }

    /// Appends mutations in order with one write per segment; returns the
    /// sequence number of the last (or of the next record, when empty).
    ///
    /// # Errors
    /// I/O errors; a record too large for the format.
    pub fn append_batch(&mut self, ms: &[Mutation]) -> Result<u64, LogError> {
        for m in ms {
            self.push(self.next_seq, &m.as_ref())?;
        }
        self.commit()?;
        Ok(self.next_seq - 1)
    }

    /// Adds the record `seq` to the batch being built; it reaches the file
    /// with [`LogWriter::commit`] (or earlier, when a segment fills up).
    /// Sequence numbers must follow each other without gaps.
    ///
    /// # Errors
    /// `seq` out of order; a record too large for the format; I/O errors
    /// when a full segment is written out and a new one started.
    pub fn push(&mut self, seq: u64, m: &MutationRef<'_>) -> Result<(), LogError> {
        if seq != self.next_seq {
            return Err(LogError::OutOfOrder {
                expected: self.next_seq,
                got: seq,
            });
        }
        let len = m.encoded_len();
        if len - RECORD_HEADER_LEN > MAX_BODY_LEN {
            return Err(LogError::TooLarge(len));
        }
        if self.size + (self.buf.len() + len) as u64 > self.options.segment_size
            && self.size + (self.buf.len() as u64) > crate::segment::FILE_HEADER_LEN as u64
        {
            self.write_buf()?;
            self.rotate()?;
        }
        m.encode(seq, &mut self.buf);
        self.next_seq += 1;
        Ok(())
    }

    /// [`LogWriter::push`], and the record's bytes, as the file will hold
    /// them, appended to `copy` too (a replication backlog).
    ///
    /// # Errors
    /// As [`LogWriter::push`].
    pub fn push_copy(
        &mut self,
        seq: u64,
        m: &MutationRef<'_>,
        copy: &mut Vec<u8>,
    ) -> Result<(), LogError> {
        // A full segment is written out inside `push`, before the record
        // is encoded: the record is the end of the batch either way.
        let len = m.encoded_len();
        self.push(seq, m)?;
        copy.extend_from_slice(&self.buf[self.buf.len() - len..]);
        Ok(())
    }

    /// Writes the batch to the file (the OS has it), and under `always`
    /// syncs it.
    ///
    /// # Errors
    /// I/O errors.
    pub fn commit(&mut self) -> Result<(), LogError> {
        self.write_buf()?;
        if self.options.fsync == FsyncPolicy::Always {
            self.sync()?;
        }
        Ok(())
    }

    /// Writes the batch. On an error (a full disk) the batch is kept and
    /// whatever part of it reached the file is cut off again, so that a
    /// later [`LogWriter::commit`] can write it whole once there is room.
    fn write_buf(&mut self) -> Result<(), LogError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.file.write_all(&self.buf) {
            // Appends go to the end of the file: it must end where the
            // last whole batch did.
            let _ = self.file.set_len(self.size);
            return Err(io_err(&self.path)(e));
        }
        self.size += self.buf.len() as u64;
        self.buf.clear();
        self.dirty = true;
        Ok(())
    }

    /// Makes everything appended durable.
    ///
    /// # Errors
    /// The fsync failed.
    pub fn sync(&mut self) -> Result<(), LogError> {
        self.write_buf()?;
        if self.dirty {
            self.file.sync_data().map_err(sync_err(&self.path))?;
            self.dirty = false;
            self.end.note(self.next_seq - 1)?;
        }
        self.last_sync = Instant::now();
        Ok(())
    }

    /// The note of the last record known to be on disk: whoever syncs a
    /// handle from [`LogWriter::sync_due`] updates it once that sync is
    /// done.
    pub fn end(&self) -> &LogEnd {
        &self.end
    }

    /// Under `everysec`, when a second has passed since the last sync and
    /// something was written since: a handle on the segment being written,
    /// for the caller to sync off this thread (as Redis does), so that
    /// writes go on meanwhile. The writer counts it as synced from now on;
    /// a segment it closes is synced by the writer itself before the next
    /// is started, so a log on disk never has a hole.
    ///
    /// # Errors
    /// The file handle could not be duplicated.
    pub fn sync_due(&mut self) -> Result<Option<File>, LogError> {
        if self.options.fsync == FsyncPolicy::EverySec
            && self.dirty
            && self.last_sync.elapsed() >= Duration::from_secs(1)
        {
            let file = self.file.try_clone().map_err(io_err(&self.path))?;
            self.dirty = false;
            self.last_sync = Instant::now();
            return Ok(Some(file));
        }
        Ok(None)
    }

    fn rotate(&mut self) -> Result<(), LogError> {
        if self.options.fsync != FsyncPolicy::No {
            // Whether or not a sync handed out by `sync_due` has finished:
            // the closed segment is on disk before the next one exists.
            self.file.sync_data().map_err(sync_err(&self.path))?;
            self.dirty = false;
            self.last_sync = Instant::now();
            self.end.note(self.next_seq - 1)?;
        }
        let (file, path) = new_segment(&self.dir, self.next_seq)?;
        self.file = file;
        self.path = path;
        self.size = crate::segment::FILE_HEADER_LEN as u64;
        Ok(())
    }
}

fn new_segment(dir: &Path, first_seq: u64) -> Result<(File, PathBuf), LogError> {
    let path = segment_path(dir, first_seq);
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(&path)
        .map_err(io_err(&path))?;
    file.write_all(&header(first_seq)).map_err(io_err(&path))?;
    file.sync_all().map_err(io_err(&path))?;
    // The new name must survive a crash too.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    let file = OpenOptions::new()
        .append(true)
        .open(&path)
        .map_err(io_err(&path))?;
    Ok((file, path))
}
