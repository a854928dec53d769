//! The binary protocol's parser and writers against hand-built frames.

use super::opcode::*;
use super::*;
use crate::frame::Limits;

fn req(op: u8, extras: &[u8], key: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
    let mut v = Vec::new();
    Header {
        magic: REQUEST_MAGIC,
        opcode: op,
        key_len: key.len() as u16,
        extras_len: extras.len() as u8,
        body_len: (extras.len() + key.len() + value.len()) as u32,
        opaque,
        cas,
        ..Default::default()
    }
    .encode(&mut v);
    v.extend_from_slice(extras);
    v.extend_from_slice(key);
    v.extend_from_slice(value);
    v
}

fn request(buf: &[u8]) -> (BinRequest<'_>, usize) {
    match parse(buf, &Limits::default()) {
        BinFrame::Request { request, len } => (request, len),
        other => panic!("expected a request, got {other:?}"),
    }
}

#[test]
fn header_round_trips() {
    let h = Header {
        magic: 0x81,
        opcode: 7,
        key_len: 0x1234,
        extras_len: 4,
        data_type: 0,
        status: 0x82,
        body_len: 0xdead_beef,
        opaque: 0x0102_0304,
        cas: 0x1122_3344_5566_7788,
    };
    let mut v = Vec::new();
    h.encode(&mut v);
    assert_eq!(v.len(), HEADER_LEN);
    assert_eq!(Header::decode(&v), Some(h));
}

#[test]
fn get_set_and_quiet_forms() {
    let b = req(GETKQ, &[], b"foo", &[], 9, 0);
    let (r, len) = request(&b);
    assert_eq!(len, b.len());
    assert!(r.quiet);
    assert_eq!(r.opcode, GETKQ);
    assert_eq!(
        r.command,
        Command::Get {
            key: b"foo",
            touch: None,
            with_key: true,
            with_value: true
        }
    );
    let mut ext = Vec::new();
    ext.extend_from_slice(&5u32.to_be_bytes());
    ext.extend_from_slice(&100u32.to_be_bytes());
    let b = req(SETQ, &ext, b"k", b"value", 1, 77);
    let (r, _) = request(&b);
    assert!(r.quiet);
    assert_eq!(r.cas, 77);
    assert_eq!(
        r.command,
        Command::Store {
            mode: StoreMode::Set,
            key: b"k",
            flags: 5,
            exptime: 100,
            data: Data::Bytes(b"value")
        }
    );
}

#[test]
fn incomplete_until_whole() {
    let b = req(APPEND, &[], b"k", b"tail", 0, 0);
    for cut in 0..b.len() {
        assert!(
            matches!(
                parse(&b[..cut], &Limits::default()),
                BinFrame::Incomplete { .. }
            ),
            "cut at {cut}"
        );
    }
    assert!(matches!(
        parse(&b, &Limits::default()),
        BinFrame::Request { .. }
    ));
}

#[test]
fn bad_magic_closes() {
    let mut b = req(NOOP, &[], &[], &[], 0, 0);
    b[0] = 0x81;
    assert_eq!(parse(&b, &Limits::default()), BinFrame::Close);
}

#[test]
fn lying_lengths_are_unknown_command_and_close() {
    let mut b = req(GET, &[], b"abc", &[], 3, 0);
    b[8..12].copy_from_slice(&1u32.to_be_bytes());
    match parse(&b, &Limits::default()) {
        BinFrame::Error {
            status,
            close,
            opaque,
            stage,
            ..
        } => {
            assert_eq!(status, Status::UnknownCommand);
            assert!(close);
            assert_eq!(opaque, 3);
            assert_eq!(stage, ErrorStage::Framing);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn wrong_extras_are_invalid_arguments() {
    let b = req(GET, &[0, 0, 0, 0], b"abc", &[], 0, 0);
    assert!(matches!(
        parse(&b, &Limits::default()),
        BinFrame::Error {
            status: Status::InvalidArguments,
            close: true,
            ..
        }
    ));
    let b = req(SET, &[], b"abc", b"v", 0, 0);
    assert!(matches!(
        parse(&b, &Limits::default()),
        BinFrame::Error {
            status: Status::InvalidArguments,
            ..
        }
    ));
}

#[test]
fn unknown_opcode_skips_its_body() {
    let b = req(0x55, &[1, 2], b"key", b"payload", 0, 0);
    match parse(&b, &Limits::default()) {
        BinFrame::Error {
            status,
            len,
            swallow,
            close,
            ..
        } => {
            assert_eq!(status, Status::UnknownCommand);
            assert_eq!(len + swallow, b.len());
            assert!(!close);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn too_large_value_is_not_buffered() {
    let limits = Limits {
        item_size_max: 1024,
        ..Default::default()
    };
    let mut ext = vec![0u8; 8];
    ext[3] = 1;
    let b = req(SET, &ext, b"big", &vec![b'x'; 2000], 0, 0);
    // Only the head is needed to decide.
    match parse(&b[..HEADER_LEN + 8 + 3], &limits) {
        BinFrame::Request { request, len } => {
            assert_eq!(len, HEADER_LEN + 11);
            assert!(matches!(
                request.command,
                Command::Store {
                    data: Data::TooLarge { len: 2000 },
                    ..
                }
            ));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn compose_round_trips() {
    let reqs = [
        req(GET, &[], b"a", &[], 1, 0),
        req(GATKQ, &7u32.to_be_bytes(), b"b", &[], 2, 0),
        req(TOUCH, &7u32.to_be_bytes(), b"b", &[], 2, 0),
        req(DELETEQ, &[], b"c", &[], 3, 99),
        req(PREPEND, &[], b"d", b"xyz", 4, 5),
        req(INCREMENTQ, &[0; 20], b"n", &[], 5, 0),
        req(FLUSH, &10u32.to_be_bytes(), &[], &[], 6, 0),
        req(FLUSHQ, &[], &[], &[], 6, 0),
        req(STAT, &[], b"settings", &[], 7, 0),
        req(SASL_AUTH, &[], b"PLAIN", b"\0u\0p", 8, 0),
        req(SASL_LIST_MECHS, &[], &[], &[], 9, 0),
        req(QUITQ, &[], &[], &[], 10, 0),
    ];
    for b in &reqs {
        let (r, len) = request(b);
        assert_eq!(len, b.len());
        let mut again = Vec::new();
        r.compose(&mut again);
        assert_eq!(&again, b, "{r:?}");
    }
}

#[test]
fn error_response_carries_message() {
    let mut v = Vec::new();
    error_response(&mut v, GET, 42, Status::KeyNotFound);
    let h = Header::decode(&v).unwrap();
    assert_eq!(h.magic, RESPONSE_MAGIC);
    assert_eq!(h.status, 1);
    assert_eq!(h.opaque, 42);
    assert_eq!(&v[HEADER_LEN..], b"Not found");
    assert_eq!(h.body_len as usize, 9);
}
