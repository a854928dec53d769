//! Reading a log directory back in order from a sequence number on: what
//! recovery does, and what a replica will stream.

use std::path::Path;

use crate::end::read_end;
use crate::record::Record;
use crate::scan::{read, scan_segment, End, ScanError};
use crate::segment::{segment_files, SegmentFile};
use crate::LogError;

/// Reads records in order, from a sequence number on (what recovery and a
/// replica do). A torn tail ends the iteration; corruption is an error
/// after the good records before it.
pub struct LogReader {
    segments: Vec<SegmentFile>,
    next_segment: usize,
    records: std::vec::IntoIter<Record>,
    from: u64,
    prev: Option<u64>,
    pending_error: Option<LogError>,
    done: bool,
    known_end: Option<u64>,
}

impl LogReader {
    /// Records with sequence numbers `from` and later.
    ///
    /// # Errors
    /// The directory cannot be read.
    pub fn from_seq(dir: &Path, from: u64) -> Result<LogReader, LogError> {
        let segments = segment_files(dir)?;
        // Start with the last segment whose first record is at or before
        // `from`: the ones before hold nothing wanted.
        let start = segments
            .iter()
            .rposition(|s| s.first_seq <= from)
            .unwrap_or(0);
        Ok(LogReader {
            segments,
            next_segment: start,
            records: Vec::new().into_iter(),
            from,
            prev: None,
            pending_error: None,
            done: false,
            known_end: read_end(dir)?,
        })
    }

    /// Loads the next segment's records; false when there is none.
    fn load_next(&mut self) -> Result<bool, LogError> {
        let Some(seg) = self.segments.get(self.next_segment).cloned() else {
            return Ok(false);
        };
        let newest = self.next_segment + 1 == self.segments.len();
        self.next_segment += 1;
        let bytes = read(&seg.path)?;
        let mut records = Vec::new();
        let from = self.from;
        let end = scan_segment(
            &seg,
            &bytes,
            newest,
            self.known_end,
            &mut self.prev,
            |r, _| {
                if r.seq >= from {
                    records.push(r);
                }
            },
        );
        match end {
            End::Clean => {}
            End::Torn { .. } => self.done = true,
            End::Corrupt { offset, reason } => {
                self.done = true;
                self.pending_error = Some(LogError::Scan(ScanError::Corrupt {
                    file: seg.path,
                    offset,
                    reason,
                }));
            }
        }
        self.records = records.into_iter();
        Ok(true)
    }
}

impl Iterator for LogReader {
    type Item = Result<Record, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(r) = self.records.next() {
                return Some(Ok(r));
            }
            if let Some(e) = self.pending_error.take() {
                return Some(Err(e));
            }
            if self.done {
                return None;
            }
            match self.load_next() {
                Ok(true) => {}
                Ok(false) => {
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
