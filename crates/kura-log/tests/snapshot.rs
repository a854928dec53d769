//! Snapshots: written, read back, damage detected, pruning.

use std::path::PathBuf;

use kura_log::{
    check_dir, prune, read_snapshot, read_snapshot_stream, remove_partial_snapshots,
    snapshot_files, LogError, LogWriter, Mutation, SnapshotWriter, WriterOptions,
};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kura-snap-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn entry(i: u64) -> Mutation {
    Mutation::Set {
        key: format!("k{i}").into_bytes(),
        value: vec![b'v'; (i % 50) as usize],
        flags: i as u32,
        exptime: 0,
        cas: i,
        stale: i.is_multiple_of(3),
        binary_key: false,
    }
}

fn write(d: &std::path::Path, seq: u64, n: u64) -> PathBuf {
    let mut w = SnapshotWriter::create(d, seq).unwrap();
    for i in 0..n {
        w.push(&entry(i).as_ref()).unwrap();
    }
    w.push(&Mutation::Flush { at: 1_900_000_000 }.as_ref())
        .unwrap();
    w.finish().unwrap().0
}

#[test]
fn a_snapshot_reads_back_whole() {
    let d = dir("roundtrip");
    let path = write(&d, 42, 100);
    let mut got = Vec::new();
    let (seq, n) = read_snapshot(&path, |r| got.push(r)).unwrap();
    assert_eq!((seq, n), (42, 101));
    assert!(got.iter().all(|r| r.seq == 42));
    for (i, r) in got.iter().take(100).enumerate() {
        assert_eq!(r.mutation, entry(i as u64));
    }
    assert_eq!(got[100].mutation, Mutation::Flush { at: 1_900_000_000 });
    assert_eq!(snapshot_files(&d).unwrap().len(), 1);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn damage_anywhere_is_found_and_nothing_is_handed_out() {
    let d = dir("damage");
    let path = write(&d, 7, 50);
    let whole = std::fs::read(&path).unwrap();
    // Cut short at every tenth byte, and a flipped bit every tenth byte.
    for at in (0..whole.len()).step_by(10) {
        std::fs::write(&path, &whole[..at]).unwrap();
        let mut handed = 0;
        let r = read_snapshot(&path, |_| handed += 1);
        assert!(matches!(r, Err(LogError::Snapshot(_))), "cut at {at}");
        assert_eq!(handed, 0);
        let mut flipped = whole.clone();
        flipped[at] ^= 0x04;
        std::fs::write(&path, &flipped).unwrap();
        let r = read_snapshot(&path, |_| handed += 1);
        assert!(r.is_err(), "bit flipped at {at} went unnoticed");
        assert_eq!(handed, 0);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn half_written_snapshots_are_removed_and_pruning_keeps_two_with_their_log() {
    let d = dir("prune");
    let mut log = LogWriter::open(
        &d,
        WriterOptions {
            segment_size: 4096,
            ..Default::default()
        },
    )
    .unwrap();
    for i in 0..600 {
        log.append(&entry(i)).unwrap();
    }
    log.sync().unwrap();
    let segments_before = kura_log::segment_files(&d).unwrap();
    assert!(segments_before.len() > 4);
    write(&d, 100, 10);
    assert!(
        prune(&d).unwrap().segments.is_empty(),
        "one snapshot prunes nothing"
    );
    write(&d, 300, 10);
    write(&d, 500, 10);
    std::fs::write(d.join("00000000000000000600.ksnap.tmp"), b"half").unwrap();
    assert_eq!(remove_partial_snapshots(&d).unwrap().len(), 1);
    let pruned = prune(&d).unwrap();
    assert_eq!(pruned.snapshots.len(), 1, "the oldest of three goes");
    let snaps: Vec<u64> = snapshot_files(&d).unwrap().iter().map(|s| s.seq).collect();
    assert_eq!(snaps, [300, 500]);
    // The log still reaches back to just after the older snapshot.
    let report = check_dir(&d).unwrap();
    assert!(report.log.first_seq.unwrap() <= 301, "{report:?}");
    assert!(report.gap.is_none());
    assert!(!pruned.segments.is_empty());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_snapshot_read_from_a_stream_gives_what_the_file_gives_and_checks_it() {
    let d = dir("stream");
    let path = write(&d, 77, 500);
    let bytes = std::fs::read(&path).unwrap();
    let mut from_file = Vec::new();
    read_snapshot(&path, |r| from_file.push(r)).unwrap();
    let mut from_stream = Vec::new();
    let got = read_snapshot_stream(&bytes[..], bytes.len() as u64, &path, |r| {
        from_stream.push(r)
    })
    .unwrap();
    assert_eq!(got, (77, 501));
    assert_eq!(from_stream, from_file);
    // A bit flipped on the way: the end says so.
    let mut bad = bytes.clone();
    let at = bad.len() / 2;
    bad[at] ^= 1;
    assert!(read_snapshot_stream(&bad[..], bad.len() as u64, &path, |_| {}).is_err());
    // Cut short: an error, not a hang.
    assert!(read_snapshot_stream(&bytes[..100], bytes.len() as u64, &path, |_| {}).is_err());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn pruning_keeps_what_a_replica_needs_within_a_bound() {
    let d = dir("prune-keep");
    let mut log = LogWriter::open(
        &d,
        WriterOptions {
            segment_size: 4096,
            ..Default::default()
        },
    )
    .unwrap();
    for i in 0..600 {
        log.append(&entry(i)).unwrap();
    }
    log.sync().unwrap();
    write(&d, 500, 10);
    write(&d, 550, 10);
    let first = |d: &std::path::Path| check_dir(d).unwrap().log.first_seq.unwrap();
    // A replica at record 200 keeps the segments from the one holding 201,
    // when they fit.
    let copy = dir("prune-keep-copy");
    for f in std::fs::read_dir(&d).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, copy.join(f.file_name().unwrap())).unwrap();
    }
    kura_log::prune_keeping(&d, 201, u64::MAX).unwrap();
    assert!(first(&d) <= 201 && first(&d) > 1, "{}", first(&d));
    // Not when they do not: then as without a replica.
    kura_log::prune_keeping(&copy, 201, 4096).unwrap();
    assert!(first(&copy) > 201, "{}", first(&copy));
    let unbounded = first(&copy);
    prune(&copy).unwrap();
    assert!(first(&copy) >= unbounded);
    assert!(first(&copy) <= 501);
    for d in [d, copy] {
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn table_records_go_into_a_snapshot_and_come_back_but_a_table_delete_does_not() {
    let d = dir("tables");
    let put = Mutation::TablePut {
        table: b"scores".to_vec(),
        id: 9_000_000,
        value: vec![7; 480],
        flags: 3,
    };
    let mut w = SnapshotWriter::create(&d, 5).unwrap();
    w.push(&entry(1).as_ref()).unwrap();
    w.push(&put.as_ref()).unwrap();
    let path = w.finish().unwrap().0;
    let mut got = Vec::new();
    assert_eq!(
        read_snapshot(&path, |r| got.push(r.mutation)).unwrap(),
        (5, 2)
    );
    assert_eq!(got, [entry(1), put]);
    // A snapshot holds what is present: a deletion in one is damage.
    let mut w = SnapshotWriter::create(&d, 6).unwrap();
    w.push(
        &Mutation::TableDelete {
            table: b"scores".to_vec(),
            id: 1,
        }
        .as_ref(),
    )
    .unwrap();
    let path = w.finish().unwrap().0;
    let mut handed = 0;
    let r = read_snapshot(&path, |_| handed += 1);
    assert!(matches!(r, Err(LogError::Snapshot(_))), "{r:?}");
    assert_eq!(handed, 0);
    let _ = std::fs::remove_dir_all(&d);
}
