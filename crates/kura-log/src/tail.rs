//! Following a log while it is written: what a primary streams to a
//! replica. [`LogTail`] hands out the records' bytes as they are on disk
//! (length, CRC and all, so the receiver checks them), from any sequence
//! number the directory still holds, then whatever is appended, segment
//! after segment. It reads only what the writer has written: a record cut
//! short at the end of the newest segment is one being written, and waits.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::record::{MAX_BODY_LEN, RECORD_HEADER_LEN};
use crate::segment::{segment_files, SegmentFile, FILE_HEADER_LEN, FILE_MAGIC};
use crate::{io_err, LogError};

/// Why a tail cannot start where it was asked to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TailError {
    /// The records from `wanted` on are no longer all in the directory
    /// (its oldest segment starts at `oldest`): a full resync is needed.
    #[error("record {wanted} is no longer in the log (it starts at {oldest})")]
    Gone { wanted: u64, oldest: u64 },
    /// `wanted` is past the end of the log (which ends at `last`).
    #[error("record {wanted} is past the end of the log (record {last})")]
    Ahead { wanted: u64, last: u64 },
}

/// Reads a log directory's records in order as they are written.
#[derive(Debug)]
pub struct LogTail {
    dir: std::path::PathBuf,
    /// The segment being read, and where in it.
    segment: SegmentFile,
    file: File,
    /// Bytes read from the file but not yet handed out (a record's start).
    pending: Vec<u8>,
    /// The number of the next record to hand out.
    next: u64,
}

impl LogTail {
    /// A tail that hands out the records from `from` on; `last` is the
    /// last record written now (the caller knows it: the log thread's
    /// count), so that a tail asked for the record after it waits for it.
    ///
    /// # Errors
    /// [`TailError`] (in [`LogError::Tail`]) when `from` is not in the
    /// log; I/O errors.
    pub fn from_seq(dir: &Path, from: u64, last: u64) -> Result<LogTail, LogError> {
        if from > last.saturating_add(1) {
            return Err(TailError::Ahead { wanted: from, last }.into());
        }
        let segments = segment_files(dir)?;
        let oldest = segments
            .first()
            .map_or(last.saturating_add(1), |s| s.first_seq);
        let Some(segment) = segments.iter().rev().find(|s| s.first_seq <= from).cloned() else {
            return Err(TailError::Gone {
                wanted: from,
                oldest,
            }
            .into());
        };
        let mut file = File::open(&segment.path).map_err(io_err(&segment.path))?;
        let mut header = [0u8; FILE_HEADER_LEN];
        file.read_exact(&mut header)
            .map_err(io_err(&segment.path))?;
        if &header[..8] != FILE_MAGIC {
            return Err(io_err(&segment.path)(std::io::Error::other(
                "not a kura log segment",
            )));
        }
        let mut tail = LogTail {
            dir: dir.to_owned(),
            next: segment.first_seq,
            segment,
            file,
            pending: Vec::new(),
        };
        // Skip to `from`, record by record.
        let mut skipped = Vec::new();
        while tail.next < from {
            skipped.clear();
            if tail.read(&mut skipped, 1)? == 0 {
                return Err(TailError::Gone {
                    wanted: from,
                    oldest,
                }
                .into());
            }
        }
        Ok(tail)
    }

    /// The number of the next record [`LogTail::read`] hands out.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// Appends to `out` the bytes of the whole records written since the
    /// last call, at most `max_records` of them (at least one if any is
    /// there); returns how many. 0 means none is written yet: call again
    /// when the log has grown.
    ///
    /// # Errors
    /// I/O errors; a record whose length is impossible.
    pub fn read(&mut self, out: &mut Vec<u8>, max_records: usize) -> Result<usize, LogError> {
        let mut n = 0;
        while n < max_records.max(1) {
            if let Some(len) = self.whole_record() {
                out.extend_from_slice(&self.pending[..len]);
                self.pending.drain(..len);
                self.next += 1;
                n += 1;
                continue;
            }
            if self.fill()? == 0 && !self.next_segment()? {
                break;
            }
        }
        Ok(n)
    }

    /// The length of the whole record at the front of `pending`, if it is
    /// all there.
    fn whole_record(&self) -> Option<usize> {
        let p = &self.pending;
        let head: [u8; 4] = p.get(..4)?.try_into().ok()?;
        let len = RECORD_HEADER_LEN + u32::from_le_bytes(head) as usize;
        (p.len() >= len).then_some(len)
    }

    /// Reads what the file has beyond what was read; returns the bytes.
    fn fill(&mut self) -> Result<usize, LogError> {
        if let Some(head) = self.pending.get(..4) {
            let body = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
            if body > MAX_BODY_LEN {
                return Err(io_err(&self.segment.path)(std::io::Error::other(format!(
                    "record {} claims {body} bytes",
                    self.next
                ))));
            }
        }
        let mut chunk = [0u8; 64 * 1024];
        let got = self
            .file
            .read(&mut chunk)
            .map_err(io_err(&self.segment.path))?;
        self.pending.extend_from_slice(&chunk[..got]);
        Ok(got)
    }

    /// At the end of the segment being read: moves to the next one if the
    /// writer has started it (then this one is whole). False if it has not.
    fn next_segment(&mut self) -> Result<bool, LogError> {
        let segments = segment_files(&self.dir)?;
        let Some(next) = segments
            .iter()
            .find(|s| s.first_seq > self.segment.first_seq)
        else {
            return Ok(false);
        };
        // A write may have landed between the last read and the listing.
        if self.fill()? > 0 {
            return Ok(true);
        }
        if !self.pending.is_empty() || next.first_seq != self.next {
            return Err(io_err(&next.path)(std::io::Error::other(format!(
                "segment starts at record {} where record {} was next",
                next.first_seq, self.next
            ))));
        }
        let mut file = File::open(&next.path).map_err(io_err(&next.path))?;
        file.seek(SeekFrom::Start(FILE_HEADER_LEN as u64))
            .map_err(io_err(&next.path))?;
        self.file = file;
        self.segment = next.clone();
        Ok(true)
    }
}
