//! Replacing or cutting back a data dir's history (replication): a full
//! resync replaces everything a replica logged with the primary's snapshot
//! ([`clear_dir`]); a server that rejoins a primary whose history forked
//! from its own cuts its log back to the last record they share
//! ([`rewind_base`], [`truncate_after`]), dropping the writes only it had.
//! The caller holds the dir (its lock, and the log writer closed or about
//! to be reopened).

use std::fs::OpenOptions;
use std::path::Path;

use crate::end::{read_end, write_end};
use crate::segment::{segment_files, FILE_HEADER_LEN};
use crate::snapshot::{check_snapshot, snapshot_files};
use crate::{io_err, LogError, Record};

/// Removes every log segment and snapshot of `dir` and lowers the note of
/// the last record on disk to nothing, so that a snapshot of another
/// history can take their place.
///
/// # Errors
/// I/O errors.
pub fn clear_dir(dir: &Path) -> Result<(), LogError> {
    // The note first: a crash after it leaves a log that claims less.
    write_end(dir, 0)?;
    for s in snapshot_files(dir)? {
        std::fs::remove_file(&s.path).map_err(io_err(&s.path))?;
    }
    for s in segment_files(dir)? {
        std::fs::remove_file(&s.path).map_err(io_err(&s.path))?;
    }
    sync_dir(dir)
}

/// Where `dir` would be rebuilt from if its log were cut back to record
/// `to`: the newest whole snapshot taken at or before `to` from which the
/// log reaches `to` without a gap (its record number), `Some(0)` when the
/// log itself starts at record 1 and reaches `to`, `None` when there is no
/// way back to `to` (the records before it were pruned).
///
/// # Errors
/// I/O errors.
pub fn rewind_base(dir: &Path, to: u64) -> Result<Option<u64>, LogError> {
    if to == 0 {
        return Ok(Some(0));
    }
    let log = crate::check(dir)?;
    // Records after the damage are not counted on.
    let first = log.first_seq;
    let last = log.last_seq.unwrap_or(0);
    let reaches = |from: u64| from > to || (first.is_some_and(|f| f <= from) && last >= to);
    for s in snapshot_files(dir)?.iter().rev() {
        if s.seq > to || check_snapshot(&s.path).is_err() {
            continue;
        }
        if reaches(s.seq + 1) {
            return Ok(Some(s.seq));
        }
    }
    Ok(reaches(1).then_some(0))
}

/// Cuts the log of `dir` back so that record `to` is its last: segments
/// that start after it are removed, the one that holds it is truncated
/// after it, snapshots taken after it are removed, and the note of the last
/// record on disk is lowered to it.
///
/// # Errors
/// I/O errors; a damaged record before the cut.
pub fn truncate_after(dir: &Path, to: u64) -> Result<(), LogError> {
    if read_end(dir)?.is_some_and(|k| k > to) {
        write_end(dir, to)?;
    }
    for s in snapshot_files(dir)? {
        if s.seq > to {
            std::fs::remove_file(&s.path).map_err(io_err(&s.path))?;
        }
    }
    for seg in segment_files(dir)? {
        if seg.first_seq > to {
            std::fs::remove_file(&seg.path).map_err(io_err(&seg.path))?;
            continue;
        }
        let bytes = std::fs::read(&seg.path).map_err(io_err(&seg.path))?;
        let mut at = FILE_HEADER_LEN;
        while at < bytes.len() {
            let Ok((rec, len)) = Record::decode(&bytes[at..]) else {
                // A torn or damaged end: it goes too.
                break;
            };
            if rec.seq > to {
                break;
            }
            at += len;
        }
        if at < bytes.len() {
            let f = OpenOptions::new()
                .write(true)
                .open(&seg.path)
                .map_err(io_err(&seg.path))?;
            f.set_len(at as u64).map_err(io_err(&seg.path))?;
            f.sync_all().map_err(io_err(&seg.path))?;
        }
    }
    sync_dir(dir)
}

fn sync_dir(dir: &Path) -> Result<(), LogError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LogReader, LogWriter, Mutation, SnapshotWriter, WriterOptions};

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("kura-rewind-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn set(i: u64) -> Mutation {
        Mutation::Set {
            key: format!("k{i}").into_bytes(),
            value: vec![b'v'; 40],
            flags: 0,
            exptime: 0,
            cas: i,
            stale: false,
            binary_key: false,
        }
    }

    fn write(d: &Path, n: u64) {
        let opts = WriterOptions {
            segment_size: 1024,
            ..WriterOptions::default()
        };
        let mut w = LogWriter::open(d, opts).unwrap();
        for i in 1..=n {
            w.append(&set(i)).unwrap();
        }
        w.sync().unwrap();
    }

    fn seqs(d: &Path, from: u64) -> Vec<u64> {
        LogReader::from_seq(d, from)
            .unwrap()
            .map(|r| r.unwrap().seq)
            .collect()
    }

    #[test]
    fn a_log_cut_back_ends_at_the_record_asked_and_goes_on_from_it() {
        let d = dir("cut");
        write(&d, 100);
        assert!(segment_files(&d).unwrap().len() > 3);
        assert_eq!(rewind_base(&d, 57).unwrap(), Some(0));
        truncate_after(&d, 57).unwrap();
        assert_eq!(seqs(&d, 1), (1..=57).collect::<Vec<_>>());
        assert!(crate::check(&d).unwrap().damage.is_none());
        // The writer numbers on from the cut.
        let mut w = LogWriter::open(&d, WriterOptions::default()).unwrap();
        assert_eq!(w.next_seq(), 58);
        w.append(&set(58)).unwrap();
        w.sync().unwrap();
        assert_eq!(seqs(&d, 50), (50..=58).collect::<Vec<_>>());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_way_back_needs_a_snapshot_or_the_whole_log() {
        let d = dir("base");
        write(&d, 100);
        let mut s = SnapshotWriter::create(&d, 40).unwrap();
        s.push(&set(1).as_ref()).unwrap();
        s.finish().unwrap();
        let mut s = SnapshotWriter::create(&d, 90).unwrap();
        s.push(&set(1).as_ref()).unwrap();
        s.finish().unwrap();
        // The newest snapshot at or before the cut is the base.
        assert_eq!(rewind_base(&d, 95).unwrap(), Some(90));
        assert_eq!(rewind_base(&d, 60).unwrap(), Some(40));
        // The log's first segments gone: before the older snapshot there
        // is no way back.
        let segs = segment_files(&d).unwrap();
        for s in segs.iter().take_while(|s| s.first_seq <= 30) {
            std::fs::remove_file(&s.path).unwrap();
        }
        assert_eq!(rewind_base(&d, 60).unwrap(), Some(40));
        assert_eq!(rewind_base(&d, 20).unwrap(), None);
        // A cut removes the snapshots taken after it.
        truncate_after(&d, 60).unwrap();
        let left: Vec<u64> = snapshot_files(&d).unwrap().iter().map(|s| s.seq).collect();
        assert_eq!(left, vec![40]);
        clear_dir(&d).unwrap();
        assert!(segment_files(&d).unwrap().is_empty());
        assert!(snapshot_files(&d).unwrap().is_empty());
        assert_eq!(read_end(&d).unwrap(), Some(0));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
