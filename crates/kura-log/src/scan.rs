//! Checking a log directory: how each segment ends (clean, torn, corrupt),
//! and the checks and repairs of `kura log check` / `kura log repair`.

use std::path::{Path, PathBuf};

use crate::end::{read_end, write_end, END_FILE};
use crate::lock::DirLock;
use crate::record::{DecodeError, Record, MIN_RECORD_LEN, RECORD_HEADER_LEN};
use crate::segment::{segment_files, SegmentFile, FILE_HEADER_LEN, FILE_MAGIC};
use crate::{io_err, LogError};

/// Corruption found while reading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    #[error("corrupt update log: {file}, offset {offset}: {reason}")]
    Corrupt {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
}

/// What is wrong with a directory, if anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Damage {
    /// The newest segment ends inside a record (a crash mid-write): the
    /// bytes from `offset` on are to be cut off.
    TornTail {
        file: PathBuf,
        offset: u64,
        /// Bytes after `offset`.
        len: u64,
    },
    /// Damage that is not at the tail: data would be lost by going on.
    Corrupt {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
}

/// The result of [`check`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckReport {
    pub segments: usize,
    pub records: u64,
    pub first_seq: Option<u64>,
    pub last_seq: Option<u64>,
    /// Bytes of valid records and headers.
    pub valid_bytes: u64,
    /// The last record the directory noted as on disk (`LOG_END`).
    pub known_end: Option<u64>,
    pub damage: Option<Damage>,
}

impl CheckReport {
    /// The corruption as an error, if there is corruption.
    pub fn into_error(self) -> Option<LogError> {
        match self.damage {
            Some(Damage::Corrupt {
                file,
                offset,
                reason,
            }) => Some(LogError::Scan(ScanError::Corrupt {
                file,
                offset,
                reason,
            })),
            _ => None,
        }
    }
}

/// How reading one segment ended.
pub(crate) enum End {
    Clean,
    Torn { offset: u64 },
    Corrupt { offset: u64, reason: String },
}

/// Reads the records of one segment's bytes, calling `each` for every
/// valid one in order. `prev` is the sequence number of the record before
/// this segment, if any; `newest` says whether damage at the end can be a
/// torn write.
pub(crate) fn scan_segment(
    seg: &SegmentFile,
    bytes: &[u8],
    newest: bool,
    known_end: Option<u64>,
    prev: &mut Option<u64>,
    mut each: impl FnMut(Record, u64),
) -> End {
    if bytes.len() < FILE_HEADER_LEN {
        return if newest {
            End::Torn { offset: 0 }
        } else {
            End::Corrupt {
                offset: 0,
                reason: "segment shorter than its header".into(),
            }
        };
    }
    if &bytes[..8] != FILE_MAGIC {
        return End::Corrupt {
            offset: 0,
            reason: "not a kura log segment (bad magic)".into(),
        };
    }
    let mut first = [0u8; 8];
    first.copy_from_slice(&bytes[8..16]);
    if u64::from_le_bytes(first) != seg.first_seq {
        return End::Corrupt {
            offset: 8,
            reason: format!(
                "header says first record {}, the file name says {}",
                u64::from_le_bytes(first),
                seg.first_seq
            ),
        };
    }
    let mut pos = FILE_HEADER_LEN;
    let mut expect = seg.first_seq;
    if let Some(p) = *prev {
        if p + 1 != seg.first_seq {
            return End::Corrupt {
                offset: 0,
                reason: format!(
                    "segment starts at record {} after record {p}",
                    seg.first_seq
                ),
            };
        }
    }
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        match Record::decode(rest) {
            Ok((record, len)) => {
                if record.seq != expect {
                    return End::Corrupt {
                        offset: pos as u64,
                        reason: format!("record {} where {expect} was expected", record.seq),
                    };
                }
                *prev = Some(record.seq);
                expect += 1;
                each(record, len as u64);
                pos += len;
            }
            Err(e) => {
                // At the end of the newest segment, a record cut short (it
                // runs past the end of the file) or followed only by zeros
                // (a file extended before its data landed) is a write the
                // crash interrupted. A whole record that fails its CRC is
                // not: it was written and changed since.
                let claimed = if rest.len() >= 4 {
                    RECORD_HEADER_LEN as u64
                        + u64::from(u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]))
                } else {
                    u64::MAX
                };
                let all_zeros = rest.iter().all(|&b| b == 0);
                let zeros_after =
                    claimed < rest.len() as u64 && rest[claimed as usize..].iter().all(|&b| b == 0);
                let torn_shape = e == DecodeError::Truncated || all_zeros || zeros_after;
                if newest && torn_shape {
                    if let Some(k) = known_end.filter(|&k| expect <= k) {
                        return End::Corrupt {
                            offset: pos as u64,
                            reason: format!(
                                "damaged record {expect}, yet the log was on disk up to record \
                                 {k} ({END_FILE}): not a torn write"
                            ),
                        };
                    }
                    // A crash tears only the last write: a valid later
                    // record behind the damage means the damaged one was
                    // written whole and changed since (a flipped bit in
                    // its length can make it look cut short), and cutting
                    // here would drop acknowledged records.
                    let Some((at, seq)) = later_record(rest, expect) else {
                        return End::Torn { offset: pos as u64 };
                    };
                    return End::Corrupt {
                        offset: pos as u64,
                        reason: format!(
                            "damaged record {expect}, yet record {seq} follows at offset {}: \
                             not a torn write",
                            pos + at
                        ),
                    };
                }
                let reason = match e {
                    DecodeError::Truncated => {
                        "record cut short in a segment that is not the newest"
                    }
                    DecodeError::BadCrc => "CRC mismatch",
                    DecodeError::BadLength => "impossible record length",
                    DecodeError::BadBody => "record body does not parse",
                };
                return End::Corrupt {
                    offset: pos as u64,
                    reason: reason.into(),
                };
            }
        }
    }
    End::Clean
}

/// The first valid record after the damaged one at the front of `rest`
/// whose number is after `expect` (and no further than the bytes left
/// could hold): its offset in `rest` and its number. The number is checked
/// before the CRC, so the search is one pass over the bytes.
fn later_record(rest: &[u8], expect: u64) -> Option<(usize, u64)> {
    const SEQ_AT: usize = RECORD_HEADER_LEN;
    let most = expect.saturating_add(rest.len() as u64 / MIN_RECORD_LEN as u64);
    (1..rest.len().saturating_sub(SEQ_AT + 8)).find_map(|at| {
        let seq_bytes: [u8; 8] = rest[at + SEQ_AT..at + SEQ_AT + 8].try_into().ok()?;
        let seq = u64::from_le_bytes(seq_bytes);
        if seq <= expect || seq > most {
            return None;
        }
        match Record::decode(&rest[at..]) {
            Ok((record, _)) if record.seq == seq => Some((at, seq)),
            _ => None,
        }
    })
}

pub(crate) fn read(path: &Path) -> Result<Vec<u8>, LogError> {
    std::fs::read(path).map_err(io_err(path))
}

/// Checks every segment of `dir`, and that the log reaches the last record
/// the directory noted as on disk (`LOG_END`).
///
/// # Errors
/// Only I/O errors; damage is in the report.
pub fn check(dir: &Path) -> Result<CheckReport, LogError> {
    check_against(dir, read_end(dir)?)
}

/// [`check`] with `known_end` as the last record known to have been on
/// disk (none: nothing is known).
fn check_against(dir: &Path, known_end: Option<u64>) -> Result<CheckReport, LogError> {
    let segments = segment_files(dir)?;
    let mut report = CheckReport {
        segments: segments.len(),
        known_end,
        ..Default::default()
    };
    let mut prev = None;
    for (i, seg) in segments.iter().enumerate() {
        let bytes = read(&seg.path)?;
        let newest = i + 1 == segments.len();
        report.valid_bytes += FILE_HEADER_LEN.min(bytes.len()) as u64;
        let end = scan_segment(seg, &bytes, newest, known_end, &mut prev, |r, len| {
            report.records += 1;
            report.first_seq.get_or_insert(r.seq);
            report.last_seq = Some(r.seq);
            report.valid_bytes += len;
        });
        match end {
            End::Clean => {}
            End::Torn { offset } => {
                report.damage = Some(Damage::TornTail {
                    file: seg.path.clone(),
                    offset,
                    len: bytes.len() as u64 - offset,
                });
                break;
            }
            End::Corrupt { offset, reason } => {
                report.damage = Some(Damage::Corrupt {
                    file: seg.path.clone(),
                    offset,
                    reason,
                });
                break;
            }
        }
    }
    // The log goes on to the record before the newest segment's first,
    // or to its last record: it must reach what was known on disk.
    let reaches = segments
        .last()
        .map_or(0, |s| s.first_seq.saturating_sub(1))
        .max(report.last_seq.unwrap_or(0));
    if let (None, Some(k)) = (&report.damage, known_end.filter(|&k| k > reaches)) {
        let (file, offset) = match segments.last() {
            Some(s) => (
                s.path.clone(),
                std::fs::metadata(&s.path).map_or(0, |m| m.len()),
            ),
            None => (crate::end::end_path(dir), 0),
        };
        report.damage = Some(Damage::Corrupt {
            file,
            offset,
            reason: format!(
                "the log ends at record {reaches}, but it was on disk up to record {k} \
                 ({END_FILE}): a segment, or the end of one, is missing"
            ),
        });
    }
    Ok(report)
}

/// Repairs the locked directory the way `redis-check-aof --fix` does: a
/// torn tail is cut off; with `truncate_corrupt`, everything from the first
/// corruption on is removed too (the records there are lost; the report
/// says how many bytes were). Returns the report from before the repair.
/// The lock keeps a running server's directory out of reach.
///
/// # Errors
/// I/O errors.
pub fn repair(lock: &DirLock, truncate_corrupt: bool) -> Result<CheckReport, LogError> {
    let dir = lock.dir();
    let report = check(dir)?;
    let (file, offset) = match &report.damage {
        None => return Ok(report),
        Some(Damage::TornTail { file, offset, .. }) => (file.clone(), *offset),
        Some(Damage::Corrupt { file, offset, .. }) if truncate_corrupt => (file.clone(), *offset),
        Some(Damage::Corrupt { .. }) => return Ok(report),
    };
    // Cut the damaged file at the damage (a file left without a whole
    // header goes), and remove every later segment.
    if offset < FILE_HEADER_LEN as u64 {
        std::fs::remove_file(&file).map_err(io_err(&file))?;
    } else {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .map_err(io_err(&file))?;
        f.set_len(offset).map_err(io_err(&file))?;
        f.sync_all().map_err(io_err(&file))?;
    }
    for seg in segment_files(dir)? {
        if seg.path > file {
            std::fs::remove_file(&seg.path).map_err(io_err(&seg.path))?;
        }
    }
    // What was cut is given up: the note must not claim it any more.
    if let Some(k) = report.known_end {
        let left = check_against(dir, None)?;
        let reaches = segment_files(dir)?
            .last()
            .map_or(0, |s| s.first_seq.saturating_sub(1))
            .max(left.last_seq.unwrap_or(0));
        if reaches < k {
            write_end(dir, reaches)?;
        }
    }
    Ok(report)
}
