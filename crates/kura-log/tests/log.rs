//! The update log on disk: writing across segments, reading back from any
//! sequence number, torn tails, flipped bits, repair.

use std::path::{Path, PathBuf};

use kura_log::{
    check, repair, segment_files, Damage, DirLock, FsyncPolicy, LogReader, LogWriter, Mutation,
    WriterOptions,
};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "kura-log-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn mutation(i: u64) -> Mutation {
    match i % 5 {
        0 => Mutation::Delete {
            key: format!("k{}", i % 17).into_bytes(),
        },
        1 => Mutation::Touch {
            key: format!("k{}", i % 17).into_bytes(),
            exptime: i as u32,
        },
        2 if i % 50 == 2 => Mutation::Flush { at: 0 },
        3 if i % 11 == 3 => Mutation::TableDelete {
            table: b"t".to_vec(),
            id: i % 13 + 1,
        },
        4 if i % 7 == 4 => Mutation::TablePut {
            table: b"t".to_vec(),
            id: i % 13 + 1,
            value: vec![b'0' + (i % 10) as u8; (i % 64) as usize],
            flags: i as u32,
        },
        _ => Mutation::Set {
            key: format!("k{}", i % 17).into_bytes(),
            value: vec![b'a' + (i % 26) as u8; (i % 300) as usize],
            flags: i as u32,
            exptime: 0,
            cas: i,
            stale: false,
            binary_key: i.is_multiple_of(2),
        },
    }
}

fn small(fsync: FsyncPolicy) -> WriterOptions {
    WriterOptions {
        segment_size: 4096,
        fsync,
    }
}

fn write(dir: &Path, n: u64) {
    let mut w = LogWriter::open(dir, small(FsyncPolicy::No)).unwrap();
    for i in 1..=n {
        assert_eq!(w.append(&mutation(i)).unwrap(), i);
    }
    w.sync().unwrap();
}

fn read_all(dir: &Path, from: u64) -> Vec<(u64, Mutation)> {
    LogReader::from_seq(dir, from)
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (r.seq, r.mutation)
        })
        .collect()
}

#[test]
fn writes_rotate_and_read_back_from_any_sequence_number() {
    let d = TempDir::new("rw");
    write(&d.0, 500);
    let segs = segment_files(&d.0).unwrap();
    assert!(
        segs.len() > 5,
        "expected rotation, got {} segments",
        segs.len()
    );
    for s in &segs {
        assert!(std::fs::metadata(&s.path).unwrap().len() <= 4096 + 400);
    }
    let all = read_all(&d.0, 1);
    assert_eq!(all.len(), 500);
    for (i, (seq, m)) in all.iter().enumerate() {
        assert_eq!(*seq, i as u64 + 1);
        assert_eq!(*m, mutation(*seq));
    }
    for from in [1, 2, 77, 250, 499, 500] {
        let got = read_all(&d.0, from);
        assert_eq!(got.len() as u64, 501 - from);
        assert_eq!(got[0].0, from);
    }
    assert!(read_all(&d.0, 501).is_empty());

    // Reopening continues the sequence.
    let mut w = LogWriter::open(&d.0, small(FsyncPolicy::Always)).unwrap();
    assert_eq!(w.next_seq(), 501);
    let last = w.append_batch(&[mutation(501), mutation(502)]).unwrap();
    assert_eq!(last, 502);
    drop(w);
    assert_eq!(read_all(&d.0, 1).len(), 502);
    let report = check(&d.0).unwrap();
    assert_eq!(
        (report.records, report.first_seq, report.last_seq),
        (502, Some(1), Some(502))
    );
    assert_eq!(report.damage, None);
}

#[test]
fn a_torn_tail_at_any_byte_is_cut_off_and_writing_goes_on() {
    let d = TempDir::new("torn");
    write(&d.0, 40);
    let last = segment_files(&d.0).unwrap().pop().unwrap().path;
    let full = std::fs::read(&last).unwrap();
    // Find where the last record starts: the newest file holding fewer
    // records makes the same check report.
    let mut w = LogWriter::open(&d.0, small(FsyncPolicy::No)).unwrap();
    w.append(&mutation(41)).unwrap();
    w.sync().unwrap();
    drop(w);
    let with_41 = std::fs::read(&last).unwrap();
    assert!(
        with_41.len() > full.len(),
        "record 41 went to the same segment"
    );
    // A write torn by a crash never made it through an fsync: the data
    // dir's note still says 40.
    kura_log::write_end(&d.0, 40).unwrap();
    for cut in full.len() + 1..with_41.len() {
        std::fs::write(&last, &with_41[..cut]).unwrap();
        let report = check(&d.0).unwrap();
        assert_eq!(report.last_seq, Some(40), "cut at {cut}");
        match &report.damage {
            Some(Damage::TornTail { file, offset, len }) => {
                assert_eq!(file, &last);
                assert_eq!(*offset, full.len() as u64);
                assert_eq!(*len, (cut - full.len()) as u64);
            }
            other => panic!("cut at {cut}: {other:?}"),
        }
        // Reading stops quietly before the torn record.
        assert_eq!(read_all(&d.0, 1).len(), 40);
    }
    // Opening for writing cuts the tail and continues at 41.
    let mut w = LogWriter::open(&d.0, small(FsyncPolicy::No)).unwrap();
    assert_eq!(w.next_seq(), 41);
    w.append(&mutation(41)).unwrap();
    w.sync().unwrap();
    drop(w);
    assert_eq!(check(&d.0).unwrap().damage, None);
    assert_eq!(read_all(&d.0, 1).len(), 41);
}

#[test]
fn zeros_after_a_crash_are_a_torn_tail() {
    let d = TempDir::new("zeros");
    write(&d.0, 10);
    let last = segment_files(&d.0).unwrap().pop().unwrap().path;
    let mut bytes = std::fs::read(&last).unwrap();
    let good = bytes.len();
    bytes.extend_from_slice(&[0u8; 512]);
    std::fs::write(&last, &bytes).unwrap();
    let report = check(&d.0).unwrap();
    assert!(
        matches!(report.damage, Some(Damage::TornTail { offset, .. }) if offset == good as u64),
        "{report:?}"
    );
}

#[test]
fn a_flipped_bit_in_the_middle_is_corruption_with_file_and_offset() {
    let d = TempDir::new("flip");
    write(&d.0, 300);
    let segs = segment_files(&d.0).unwrap();
    let victim = &segs[segs.len() / 2].path;
    let mut bytes = std::fs::read(victim).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(victim, &bytes).unwrap();

    let report = check(&d.0).unwrap();
    let (file, offset, reason) = match report.damage.clone() {
        Some(Damage::Corrupt {
            file,
            offset,
            reason,
        }) => (file, offset, reason),
        other => panic!("{other:?}"),
    };
    assert_eq!(&file, victim);
    assert!(
        offset as usize <= at,
        "offset {offset} after the flipped byte {at}"
    );
    assert!(!reason.is_empty());
    let err = report.into_error().unwrap().to_string();
    assert!(
        err.contains(&victim.display().to_string()) && err.contains(&offset.to_string()),
        "{err}"
    );

    // Writing refuses to start on it; reading gives the good records, then
    // the error.
    let e = LogWriter::open(&d.0, small(FsyncPolicy::No)).unwrap_err();
    assert!(e.to_string().contains("corrupt update log"), "{e}");
    let results: Vec<_> = LogReader::from_seq(&d.0, 1).unwrap().collect();
    assert!(results.last().unwrap().is_err());
    let good = results.iter().take_while(|r| r.is_ok()).count();
    assert!(good > 0 && good < 300);

    // Repair without permission to drop data leaves it as it is; with it,
    // the log is cut at the corruption and opens again.
    repair(&DirLock::take(&d.0).unwrap(), false).unwrap();
    assert!(matches!(
        check(&d.0).unwrap().damage,
        Some(Damage::Corrupt { .. })
    ));
    let before = repair(&DirLock::take(&d.0).unwrap(), true).unwrap();
    assert!(matches!(before.damage, Some(Damage::Corrupt { .. })));
    let after = check(&d.0).unwrap();
    assert_eq!(after.damage, None);
    assert_eq!(after.last_seq, Some(good as u64));
    let w = LogWriter::open(&d.0, small(FsyncPolicy::No)).unwrap();
    assert_eq!(w.next_seq(), good as u64 + 1);
}

#[test]
fn a_flipped_length_bit_in_the_newest_segment_is_corruption_not_a_torn_tail() {
    let d = TempDir::new("flip-len");
    write(&d.0, 12);
    let last = segment_files(&d.0).unwrap().pop().unwrap().path;
    let mut bytes = std::fs::read(&last).unwrap();
    // Walk to the second record of the newest segment and make its length
    // run past the end of the file, as a torn write would look.
    let first = 16;
    let len = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    let second = first + 8 + len(&bytes, first);
    assert!(
        second + 8 < bytes.len(),
        "the newest segment holds two records"
    );
    bytes[second + 3] ^= 0x40;
    std::fs::write(&last, &bytes).unwrap();
    let report = check(&d.0).unwrap();
    match &report.damage {
        Some(Damage::Corrupt {
            file,
            offset,
            reason,
        }) => {
            assert_eq!(file, &last);
            assert_eq!(*offset, second as u64);
            assert!(reason.contains("not a torn write"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Nothing is cut on open: the writer refuses the log.
    let e = LogWriter::open(&d.0, small(FsyncPolicy::No)).unwrap_err();
    assert!(e.to_string().contains("corrupt update log"), "{e}");
    assert_eq!(std::fs::read(&last).unwrap(), bytes);
}

#[test]
fn a_missing_segment_is_a_gap() {
    let d = TempDir::new("gap");
    write(&d.0, 300);
    let segs = segment_files(&d.0).unwrap();
    std::fs::remove_file(&segs[2].path).unwrap();
    let report = check(&d.0).unwrap();
    match report.damage {
        Some(Damage::Corrupt { file, reason, .. }) => {
            assert_eq!(file, segs[3].path);
            assert!(reason.contains("after record"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

/// The newest segment's bytes, and where its last record starts.
fn last_record(dir: &Path) -> (PathBuf, Vec<u8>, usize) {
    let path = segment_files(dir).unwrap().pop().unwrap().path;
    let bytes = std::fs::read(&path).unwrap();
    let len = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut at = 16;
    while at + 8 + len(at) < bytes.len() {
        at += 8 + len(at);
    }
    assert_eq!(
        at + 8 + len(at),
        bytes.len(),
        "records end at the file's end"
    );
    (path, bytes, at)
}

fn corrupt_at(dir: &Path, file: &Path, offset: usize) -> String {
    match check(dir).unwrap().damage {
        Some(Damage::Corrupt {
            file: f,
            offset: o,
            reason,
        }) => {
            assert_eq!((f.as_path(), o), (file, offset as u64), "{reason}");
            reason
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_flipped_bit_in_the_last_whole_record_is_corruption_not_a_torn_tail() {
    for byte in [8usize, 12, 17, 30] {
        let d = TempDir::new("flip-last");
        write(&d.0, 40);
        let (path, mut bytes, at) = last_record(&d.0);
        let i = (at + byte).min(bytes.len() - 1);
        bytes[i] ^= 0x04;
        std::fs::write(&path, &bytes).unwrap();
        // Known to have been on disk (the writer synced it)...
        corrupt_at(&d.0, &path, at);
        // ...and, without that note, still a whole record that fails its
        // CRC: changed after it was written, never a torn write.
        std::fs::remove_file(kura_log::end_path(&d.0)).unwrap();
        let reason = corrupt_at(&d.0, &path, at);
        assert!(reason.contains("CRC"), "{reason}");
        assert!(LogWriter::open(&d.0, small(FsyncPolicy::No)).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "nothing was cut");
    }
}

#[test]
fn a_record_cut_short_after_it_was_on_disk_is_corruption() {
    let d = TempDir::new("cut-synced");
    write(&d.0, 40);
    let (path, bytes, at) = last_record(&d.0);
    std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
    let reason = corrupt_at(&d.0, &path, at);
    assert!(reason.contains("LOG_END"), "{reason}");
}

#[test]
fn a_deleted_newest_segment_is_missing_records_until_repair_gives_them_up() {
    let d = TempDir::new("missing-newest");
    write(&d.0, 300);
    let segs = segment_files(&d.0).unwrap();
    assert!(segs.len() > 2);
    let newest = segs.last().unwrap();
    std::fs::remove_file(&newest.path).unwrap();
    let before = &segs[segs.len() - 2].path;
    let size = std::fs::metadata(before).unwrap().len() as usize;
    let reason = corrupt_at(&d.0, before, size);
    assert!(reason.contains("missing"), "{reason}");
    assert!(LogWriter::open(&d.0, small(FsyncPolicy::No)).is_err());
    // A plain repair does not give records up; --truncate-corrupt does.
    repair(&DirLock::take(&d.0).unwrap(), false).unwrap();
    assert!(check(&d.0).unwrap().damage.is_some());
    repair(&DirLock::take(&d.0).unwrap(), true).unwrap();
    let report = check(&d.0).unwrap();
    assert_eq!(report.damage, None);
    assert_eq!(report.last_seq, Some(newest.first_seq - 1));
    let mut w = LogWriter::open(&d.0, small(FsyncPolicy::No)).unwrap();
    assert_eq!(w.next_seq(), newest.first_seq);
    w.append(&mutation(1)).unwrap();
}

#[test]
fn foreign_files_are_not_logs() {
    let d = TempDir::new("foreign");
    write(&d.0, 5);
    let segs = segment_files(&d.0).unwrap();
    std::fs::write(d.0.join("notes.txt"), b"hello").unwrap();
    assert_eq!(segment_files(&d.0).unwrap(), segs);
    std::fs::write(&segs[0].path, b"GARBAGE-GARBAGE-GARBAGE").unwrap();
    assert!(matches!(
        check(&d.0).unwrap().damage,
        Some(Damage::Corrupt { offset: 0, .. })
    ));
}
