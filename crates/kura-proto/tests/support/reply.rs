//! The reply framers' oracle (kura_proto::client), shared by the property
//! tests in `tests/replies.rs` and the fuzz targets `reply_text`,
//! `reply_meta` and `reply_binary`: any bytes, framed reply after reply,
//! never panic and always make progress; framing them in two reads (split
//! anywhere) gives the same replies as in one; every reply read back as
//! the outcome of each kind of command gives an outcome or an error, never
//! a panic. For text, the `VALUE` runs a proxy takes whole
//! (`client::values`) are exactly what the text framer reads as values.

use bytes::BytesMut;
use kura_proto::client::{self, values, Cmd, Malformed, Mode, Reply};

/// A framer: one of `client::meta::frame`, `client::text::frame`,
/// `client::binary::frame`.
pub type Framer = fn(&mut BytesMut) -> Result<Option<Reply>, Malformed>;

/// A reply's every field, to compare two framings.
type Seen = (
    client::Status,
    Vec<u8>,
    Option<Vec<u8>>,
    Option<u32>,
    Option<u32>,
    Option<u64>,
);

fn seen(r: &Reply) -> Seen {
    (
        r.status,
        r.tokens.to_vec(),
        r.value.as_ref().map(|v| v.to_vec()),
        r.opaque,
        r.flags,
        r.cas,
    )
}

/// How a stream of replies ended: the bytes left when the framer asked for
/// more, or that it refused them.
#[derive(Debug, PartialEq)]
enum End {
    More(usize),
    Malformed,
}

/// Frames `buf` reply after reply until it asks for more or refuses.
fn frame_all(frame: Framer, buf: &mut BytesMut, out: &mut Vec<Seen>) -> End {
    loop {
        let before = buf.len();
        match frame(buf) {
            Ok(Some(r)) => {
                assert!(buf.len() < before, "a reply framed from no bytes");
                out.push(seen(&r));
                read_back(&r);
            }
            Ok(None) => {
                assert_eq!(buf.len(), before, "bytes taken without a reply");
                return End::More(before);
            }
            Err(_) => return End::Malformed,
        }
    }
}

/// Every kind of command reads `r` without panicking.
fn read_back(r: &Reply) {
    let cmds = [
        Cmd::Get {
            key: b"k",
            touch: None,
            vivify: None,
        },
        Cmd::Touch { key: b"k", ttl: 1 },
        Cmd::Store {
            key: b"k",
            value: b"v",
            mode: Mode::Add,
            flags: 0,
            ttl: 0,
            cas: None,
        },
        Cmd::Store {
            key: b"k",
            value: b"v",
            mode: Mode::Set,
            flags: 0,
            ttl: 0,
            cas: Some(1),
        },
        Cmd::Delete { key: b"k" },
        Cmd::Arith {
            key: b"k",
            incr: true,
            delta: 1,
        },
    ];
    for c in cmds {
        let _ = c.read_meta(r);
        let _ = c.read_text(std::slice::from_ref(r));
        let _ = c.read_binary(r);
    }
    let _ = client::text::value(r);
    let _ = r.opaque_token();
    let _ = r.number::<u64>(b'c');
    let _ = r.number::<i64>(b't');
}

/// The oracle for one framer over `data`, read in two parts split where
/// its first byte says.
pub fn check_stream(frame: Framer, data: &[u8]) {
    let at = data
        .first()
        .map_or(0, |&b| usize::from(b) * data.len() / 256);
    check_split(frame, data, at);
}

/// The oracle for one framer over `data`, in one read and in two split at
/// `at`.
pub fn check_split(frame: Framer, data: &[u8], at: usize) {
    let mut whole = Vec::new();
    let end = frame_all(frame, &mut BytesMut::from(data), &mut whole);
    let mut buf = BytesMut::from(&data[..at]);
    let mut split = Vec::new();
    let first = frame_all(frame, &mut buf, &mut split);
    let end_split = match first {
        End::Malformed => End::Malformed,
        End::More(_) => {
            buf.extend_from_slice(&data[at..]);
            frame_all(frame, &mut buf, &mut split)
        }
    };
    if end_split == End::Malformed && end != End::Malformed {
        // Refused early: what came before must agree.
        assert!(split.len() <= whole.len() && whole[..split.len()] == split[..]);
        panic!("refused in two reads what one read framed");
    }
    assert_eq!(split, whole, "two reads framed other replies than one");
    assert_eq!(end_split, end);
}

/// The text oracle, then the `VALUE` runs as kura proxy's backend
/// connection takes them: whatever `values::take` takes
/// is a run of entries the text framer reads as values, consuming it
/// exactly, and `values::end` and `values::skip` walk it entry by entry.
pub fn check_text(data: &[u8]) {
    check_stream(client::text::frame, data);
    let mut buf = BytesMut::from(data);
    let mut scanned = 0;
    loop {
        if let Some(run) = values::take(&mut buf, &mut scanned) {
            assert!(!run.is_empty());
            let mut again = BytesMut::from(&run[..]);
            let mut at = 0;
            while at < run.len() {
                let r = client::text::frame(&mut again)
                    .expect("a run's entry is a text reply")
                    .expect("a run's entry is whole");
                assert_eq!(r.status, client::Status::Value);
                let end = values::end(&run, at).expect("an entry at each step");
                let key_len = r.tokens.iter().position(|&b| b == b' ').unwrap_or(0);
                assert_eq!(values::skip(&run, at, key_len), Some(end));
                at = end;
                assert_eq!(
                    run.len() - at,
                    again.len(),
                    "framers disagree on the entry's end"
                );
            }
            assert_eq!(at, run.len());
            continue;
        }
        if scanned > 0 {
            // Entries whose next line is not here yet: kura proxy waits.
            return;
        }
        match client::text::frame(&mut buf) {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
}
