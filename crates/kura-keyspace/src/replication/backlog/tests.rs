use super::*;
use kura_log::MutationRef;

fn records(from: u64, to: u64) -> Bytes {
    let mut out = Vec::new();
    for seq in from..=to {
        let key = format!("k{seq}");
        MutationRef::Delete {
            key: key.as_bytes(),
        }
        .encode(seq, &mut out);
    }
    Bytes::from(out)
}

fn seqs(read: Read) -> Vec<u64> {
    let Read::Records { bytes, last } = read else {
        panic!("{read:?}");
    };
    let mut all = Vec::new();
    for b in bytes {
        let mut b = &b[..];
        while !b.is_empty() {
            let (r, len) = kura_log::Record::decode(b).unwrap();
            all.push(r.seq);
            b = &b[len..];
        }
    }
    assert_eq!(all.last(), Some(&last));
    all
}

#[test]
fn a_reader_gets_whole_records_from_where_it_asks() {
    let b = Backlog::new(1 << 20, 0);
    assert!(matches!(b.read(1, 100), Read::Wait));
    b.push(1, 10, records(1, 10));
    b.push(11, 20, records(11, 20));
    assert_eq!(seqs(b.read(1, usize::MAX)), (1..=20).collect::<Vec<_>>());
    assert_eq!(seqs(b.read(7, usize::MAX)), (7..=20).collect::<Vec<_>>());
    assert_eq!(seqs(b.read(15, 1)), (15..=20).collect::<Vec<_>>());
    assert_eq!(seqs(b.read(3, 1)), (3..=10).collect::<Vec<_>>());
    assert!(matches!(b.read(21, 100), Read::Wait));
    assert_eq!(b.last(), 20);
}

/// A live stream reads after every few appends, so each read seals a
/// small chunk (copied out of the open buffer, which is reused): the
/// chunks stay whole and in order, read from the newest or any older.
#[test]
fn records_sealed_by_reads_between_appends_stay_whole_and_in_order() {
    let b = Backlog::new(1 << 20, 0);
    let mut next = 1;
    for i in 0..300u64 {
        let key = format!("key{i}");
        let value = vec![b'a' + (i % 26) as u8; (i as usize * 7) % 500];
        b.append(&MutationRef::Set {
            key: key.as_bytes(),
            value: &value,
            flags: 0,
            exptime: 0,
            cas: i,
            stale: false,
            binary_key: false,
        });
        if i % 3 == 2 {
            let got = seqs(b.read(next, usize::MAX));
            assert_eq!(got, (next..=i + 1).collect::<Vec<_>>());
            next = i + 2;
        }
    }
    assert_eq!(seqs(b.read(1, usize::MAX)), (1..=300).collect::<Vec<_>>());
    assert_eq!(
        seqs(b.read(150, usize::MAX)),
        (150..=300).collect::<Vec<_>>()
    );
    assert_eq!(seqs(b.read(299, usize::MAX)), vec![299, 300]);
}

#[test]
fn it_keeps_to_its_size_and_says_when_a_reader_fell_behind() {
    let one = records(1, 10).len();
    let b = Backlog::new(one * 3, 0);
    for i in 0..10 {
        b.push(i * 10 + 1, i * 10 + 10, records(i * 10 + 1, i * 10 + 10));
    }
    assert!(b.bytes() <= one * 3 + 100, "{}", b.bytes());
    assert!(matches!(b.read(5, 100), Read::Behind { first } if first > 5));
    assert_eq!(seqs(b.read(95, usize::MAX)), (95..=100).collect::<Vec<_>>());
    // A gap (the backlog was not fed) starts it over.
    b.push(200, 201, records(200, 201));
    assert!(matches!(b.read(100, 100), Read::Behind { first: 200 }));
    assert_eq!(seqs(b.read(200, 100)), vec![200, 201]);
    b.restart(7);
    assert!(matches!(b.read(8, 100), Read::Wait));
    assert!(matches!(b.read(7, 100), Read::Behind { .. }));
}

#[test]
fn appended_records_are_numbered_in_order_and_kept_to_the_size() {
    let b = Backlog::new(4096, 10);
    for i in 0..1000u64 {
        let key = format!("key{i}");
        let seq = b.append(&MutationRef::Delete {
            key: key.as_bytes(),
        });
        assert_eq!(seq, 11 + i);
        if i == 3 {
            // Read while records are being appended: they seal.
            assert_eq!(seqs(b.read(11, usize::MAX)), vec![11, 12, 13, 14]);
        }
    }
    assert!(b.bytes() <= 4096 + OPEN_CHUNK, "{}", b.bytes());
    assert!(matches!(b.read(11, 100), Read::Behind { .. }));
    let tail = seqs(b.read(1005, usize::MAX));
    assert_eq!(tail, (1005..=1010).collect::<Vec<_>>());
    assert_eq!(b.bytes_after(1010), Some(0));
    // Record 1010 is the delete of `key999`.
    let one = MutationRef::Delete { key: b"key999" }.encoded_len() as u64;
    assert_eq!(b.bytes_after(1009), Some(one));
    assert_eq!(b.bytes_after(11), None);
    // Frames pushed after appended records go on from them.
    b.push(1011, 1011, records(1011, 1011));
    assert_eq!(seqs(b.read(1009, usize::MAX)), vec![1009, 1010, 1011]);
}

/// A full resync's hold keeps what is written while it is sent, beyond
/// the backlog's size, until the stream has read it or the resync buffer
/// is outgrown; then the backlog goes back to its size.
#[test]
fn a_hold_keeps_the_records_after_it_up_to_the_resync_buffer() {
    let one = records(1, 10).len();
    let b = Arc::new(Backlog::new(one * 2, 0).holding(one * 20));
    b.push(1, 10, records(1, 10));
    let (hold, at) = b.hold();
    assert_eq!(at, 10);
    for i in 1..10 {
        b.push(i * 10 + 1, i * 10 + 10, records(i * 10 + 1, i * 10 + 10));
    }
    // Nine chunks after it are held, where the backlog keeps two.
    assert_eq!(seqs(b.read(11, usize::MAX)), (11..=100).collect::<Vec<_>>());
    assert!(matches!(b.read(1, 1), Read::Behind { first: 11 }));
    // The stream read up to 50: what is before it may go; what is after
    // it is more than the backlog's size.
    assert!(!b.within_size(50));
    assert!(!b.within_size(85));
    assert!(b.within_size(95));
    assert!(b.within_size(100));
    hold.advance(51);
    b.push(101, 110, records(101, 110));
    assert!(matches!(b.read(11, 1), Read::Behind { .. }));
    assert_eq!(seqs(b.read(51, usize::MAX)), (51..=110).collect::<Vec<_>>());
    assert!(!hold.lost());
    // Let go: back to the backlog's size at once.
    drop(hold);
    assert!(b.bytes() <= one * 2, "{}", b.bytes());
    assert!(matches!(b.read(51, 1), Read::Behind { .. }));
    assert_eq!(b.holds_lost(), 0);
}

#[test]
fn a_hold_that_outgrows_the_resync_buffer_is_given_up() {
    let one = records(1, 10).len();
    let b = Arc::new(Backlog::new(one * 2, 0).holding(one * 4));
    let (hold, at) = b.hold();
    assert_eq!(at, 0);
    let (other, _) = b.hold();
    for i in 0..5 {
        b.push(i * 10 + 1, i * 10 + 10, records(i * 10 + 1, i * 10 + 10));
    }
    assert!(!hold.lost());
    assert_eq!(seqs(b.read(1, usize::MAX)), (1..=50).collect::<Vec<_>>());
    // Two more take it past the backlog and the buffer: both holds go,
    // and the backlog keeps its size.
    b.push(51, 60, records(51, 60));
    b.push(61, 70, records(61, 70));
    assert!(hold.lost() && other.lost());
    assert_eq!(b.holds_lost(), 2);
    assert!(b.bytes() <= one * 2, "{}", b.bytes());
    assert!(matches!(b.read(1, 1), Read::Behind { .. }));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(hold.until_lost());
    // A backlog without a resync buffer holds nothing beyond its size;
    // what it holds within it stays held, full backlog or not.
    let b = Arc::new(Backlog::new(one * 3, 0));
    for i in 0..5 {
        b.push(i * 10 + 1, i * 10 + 10, records(i * 10 + 1, i * 10 + 10));
    }
    let (hold, at) = b.hold();
    b.push(51, 60, records(51, 60));
    b.push(61, 70, records(61, 70));
    assert!(!hold.lost());
    assert_eq!(
        seqs(b.read(at + 1, usize::MAX)),
        (51..=70).collect::<Vec<_>>()
    );
    b.push(71, 80, records(71, 80));
    b.push(81, 90, records(81, 90));
    assert!(hold.lost());
    assert!(matches!(b.read(51, 1), Read::Behind { .. }));
}

/// A backlog that starts over (a new history, or records that do not
/// follow) gives its holds up: what they kept is gone.
#[test]
fn a_backlog_that_starts_over_gives_its_holds_up() {
    let b = Arc::new(Backlog::new(1 << 20, 0).holding(1 << 20));
    b.push(1, 10, records(1, 10));
    let (hold, _) = b.hold();
    b.restart(5);
    assert!(hold.lost());
    let (hold, _) = b.hold();
    b.push(100, 101, records(100, 101));
    assert!(hold.lost());
    assert_eq!(b.holds(), 0);
    assert_eq!(b.holds_lost(), 2);
}

/// Records appended one by one (an in-memory primary's journal) are held
/// too, sealed or not.
#[test]
fn appended_records_are_held() {
    let b = Arc::new(Backlog::new(1024, 0).holding(1 << 20));
    let (hold, at) = b.hold();
    for i in 0..2000u64 {
        let key = format!("key{i}");
        b.append(&MutationRef::Delete {
            key: key.as_bytes(),
        });
    }
    assert_eq!(
        seqs(b.read(at + 1, usize::MAX)),
        (1..=2000).collect::<Vec<_>>()
    );
    drop(hold);
    b.append(&MutationRef::Delete { key: b"one more" });
    assert!(b.bytes() <= 1024 + OPEN_CHUNK, "{}", b.bytes());
    assert!(matches!(b.read(1, 1), Read::Behind { .. }));
}
