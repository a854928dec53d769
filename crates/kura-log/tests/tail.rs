//! Following a log as it is written (what a primary streams to a replica):
//! every record once, in order, across segments, from any number still in
//! the directory; nothing half-written handed out.

use std::path::PathBuf;

use kura_log::{
    segment_files, FsyncPolicy, LogError, LogTail, LogWriter, Mutation, Record, TailError,
    WriterOptions,
};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("kura-tail-{name}-{}", std::process::id()));
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

fn set(i: u64) -> Mutation {
    Mutation::Set {
        key: format!("k{i}").into_bytes(),
        value: vec![b'v'; (i % 700) as usize],
        flags: i as u32,
        exptime: 0,
        cas: i,
        stale: false,
        binary_key: false,
    }
}

fn writer(dir: &std::path::Path) -> LogWriter {
    LogWriter::open(
        dir,
        WriterOptions {
            segment_size: 8192,
            fsync: FsyncPolicy::No,
        },
    )
    .unwrap()
}

/// Decodes what a tail handed out: every record whole, checked.
fn decode(mut bytes: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (r, len) = Record::decode(bytes).expect("a whole, sound record");
        out.push(r);
        bytes = &bytes[len..];
    }
    out
}

#[test]
fn a_tail_hands_out_every_record_once_in_order_while_they_are_written() {
    let d = TempDir::new("follow");
    let mut w = writer(&d.0);
    let mut tail = LogTail::from_seq(&d.0, 1, 0).unwrap();
    let mut got = Vec::new();
    let mut bytes = Vec::new();
    for round in 0..40u64 {
        for i in round * 25 + 1..=round * 25 + 25 {
            w.append(&set(i)).unwrap();
        }
        // Read a little at a time, sometimes nothing new.
        for _ in 0..3 {
            bytes.clear();
            tail.read(&mut bytes, 7).unwrap();
            got.extend(decode(&bytes));
        }
    }
    loop {
        bytes.clear();
        if tail.read(&mut bytes, 100).unwrap() == 0 {
            break;
        }
        got.extend(decode(&bytes));
    }
    assert!(
        segment_files(&d.0).unwrap().len() > 10,
        "it crossed segments"
    );
    assert_eq!(got.len(), 1000);
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.seq, i as u64 + 1);
        assert_eq!(r.mutation, set(i as u64 + 1));
    }
    assert_eq!(tail.next_seq(), 1001);
}

#[test]
fn a_tail_starts_at_any_number_the_directory_still_holds() {
    let d = TempDir::new("from");
    let mut w = writer(&d.0);
    for i in 1..=300 {
        w.append(&set(i)).unwrap();
    }
    for from in [1, 2, 57, 150, 299, 300, 301] {
        let mut tail = LogTail::from_seq(&d.0, from, 300).unwrap();
        let mut bytes = Vec::new();
        while tail.read(&mut bytes, 1000).unwrap() > 0 {}
        let got = decode(&bytes);
        assert_eq!(got.len() as u64, 301 - from, "from {from}");
        assert!(got.first().is_none_or(|r| r.seq == from));
    }
    // Past the end: refused, not waited for.
    assert!(matches!(
        LogTail::from_seq(&d.0, 302, 300),
        Err(LogError::Tail(TailError::Ahead {
            wanted: 302,
            last: 300
        }))
    ));
    // Segments pruned: the records before the oldest left are gone.
    let segs = segment_files(&d.0).unwrap();
    std::fs::remove_file(&segs[0].path).unwrap();
    std::fs::remove_file(&segs[1].path).unwrap();
    match LogTail::from_seq(&d.0, 1, 300) {
        Err(LogError::Tail(TailError::Gone { wanted: 1, oldest })) => {
            assert_eq!(oldest, segs[2].first_seq);
        }
        other => panic!("{other:?}"),
    }
    assert!(LogTail::from_seq(&d.0, segs[2].first_seq, 300).is_ok());
}

#[test]
fn a_record_being_written_is_not_handed_out_until_it_is_whole() {
    let d = TempDir::new("partial");
    let mut w = writer(&d.0);
    w.append(&set(1)).unwrap();
    let mut record = Vec::new();
    set(2).as_ref().encode(2, &mut record);
    let seg = segment_files(&d.0).unwrap().pop().unwrap().path;
    let mut tail = LogTail::from_seq(&d.0, 1, 1).unwrap();
    let mut bytes = Vec::new();
    assert_eq!(tail.read(&mut bytes, 10).unwrap(), 1);
    // The writer is half way through record 2.
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    let half = record.len() / 2;
    f.write_all(&record[..half]).unwrap();
    bytes.clear();
    assert_eq!(tail.read(&mut bytes, 10).unwrap(), 0);
    assert!(bytes.is_empty());
    f.write_all(&record[half..]).unwrap();
    assert_eq!(tail.read(&mut bytes, 10).unwrap(), 1);
    assert_eq!(decode(&bytes)[0].seq, 2);
}
