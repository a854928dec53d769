use proptest::prelude::*;

use super::*;

fn read(input: &[u8]) -> (usize, Progress) {
    Chunked::new(1024, 10).feed(input)
}

#[test]
fn well_formed_bodies_end_after_their_last_line() {
    for body in [
        &b"0\r\n\r\n"[..],
        b"5\r\nhello\r\n0\r\n\r\n",
        b"5;ext=1;b\r\nhello\r\n000\r\n\r\n",
        b"5 \t;x\r\nhello\r\n0\r\nTrailer: t\r\nOther: u\r\n\r\n",
        b"00000000000000000000005\r\nhello\r\n0\r\n\r\n",
        b"A\r\n0123456789\r\n0\r\n\r\n",
        // A bare LF inside a trailer line is one of its bytes (hyper's reading).
        b"0\r\nX: a\nb\r\n\r\n",
    ] {
        let mut with_next = body.to_vec();
        with_next.extend_from_slice(b"GET / HTTP/1.1\r\n");
        assert_eq!(
            read(&with_next),
            (body.len(), Progress::Done),
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn malformed_bodies_stop_at_the_bad_byte() {
    for (body, at) in [
        (&b"zz\r\n"[..], 0),
        (b"\r\n", 0),
        (b" 5\r\n", 0),
        (b"5\nhello\r\n", 1),
        (b"5;a\nhello\r\n", 3),
        (b"5 5\r\n", 2),
        (b"5\r\nhelloX\r\n", 8),
        (b"5\r\nhello\rX", 9),
        (b"5\r\nhello\n0\r\n\r\n", 8),
        // A trailer line may begin with a bare LF, but must end with CRLF.
        (b"0\r\n\nX\r\r", 6),
        (b"0\r\n\r\r", 4),
        (b"0\r\nX: y\rz", 8),
        (b"-1\r\n", 0),
        (b"0x5\r\n", 1),
        // 17 significant hex digits overflow 64 bits.
        (b"10000000000000000\r\n", 16),
    ] {
        assert_eq!(
            read(body),
            (at, Progress::Malformed),
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn limits_on_extensions_and_trailers() {
    let mut many = b"1;".to_vec();
    many.extend(std::iter::repeat_n(b'e', 20_000));
    assert_eq!(read(&many).1, Progress::Malformed);
    let mut lines = b"0\r\n".to_vec();
    for i in 0..11 {
        lines.extend_from_slice(format!("T{i}: v\r\n").as_bytes());
    }
    lines.extend_from_slice(b"\r\n");
    assert_eq!(read(&lines).1, Progress::Malformed);
    let mut long = b"0\r\nT: ".to_vec();
    long.extend(std::iter::repeat_n(b'v', 2000));
    assert_eq!(read(&long).1, Progress::Malformed);
}

fn encode(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts.iter().filter(|p| !p.is_empty()) {
        out.extend_from_slice(format!("{:X}\r\n", part.len()).as_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

proptest! {
    #[test]
    fn any_split_reads_the_same(
        parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..200), 0..6),
        cuts in proptest::collection::vec(1usize..64, 1..20),
    ) {
        let body = encode(&parts);
        let mut input = body.clone();
        input.extend_from_slice(b"NEXT");
        let mut chunked = Chunked::new(1024, 10);
        let (mut at, mut progress) = (0, Progress::More);
        for cut in cuts.iter().cycle() {
            let end = (at + cut).min(input.len());
            let (used, now) = chunked.feed(&input[at..end]);
            at += used;
            progress = now;
            if progress != Progress::More || end == input.len() {
                break;
            }
        }
        prop_assert_eq!((at, progress), (body.len(), Progress::Done));
    }

    #[test]
    fn arbitrary_input_never_reads_past_a_verdict(input in proptest::collection::vec(any::<u8>(), 0..300)) {
        let whole = read(&input);
        prop_assert!(whole.0 <= input.len());
        let mut chunked = Chunked::new(1024, 10);
        let mut at = 0;
        let mut progress = Progress::More;
        for byte in &input {
            let (used, now) = chunked.feed(std::slice::from_ref(byte));
            at += used;
            progress = now;
            if now != Progress::More {
                break;
            }
        }
        prop_assert_eq!((at, progress), whole);
    }
}
