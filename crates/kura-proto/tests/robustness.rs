//! The parser must never panic and must always make progress or ask for
//! more bytes, whatever it is fed.

use kura_proto::{parse, Frame, Limits};
use proptest::prelude::*;

fn check(buf: &[u8]) {
    let limits = Limits {
        item_size_max: 4096,
        ..Limits::default()
    };
    let mut pos = 0;
    while pos < buf.len() {
        match parse(&buf[pos..], &limits) {
            Frame::Incomplete { needed } => {
                assert!(needed == 0 || needed > buf.len() - pos);
                break;
            }
            Frame::Close => break,
            Frame::Request { len, .. } | Frame::Error { len, .. } => {
                assert!(len > 0 && len <= buf.len() - pos);
                pos += len;
            }
        }
    }
}

/// Words that steer random input into the parser's interesting paths.
fn fragment() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(vec![
            "get ",
            "gets ",
            "gat ",
            "set ",
            "add ",
            "cas ",
            "append ",
            "incr ",
            "decr ",
            "delete ",
            "touch ",
            "flush_all",
            "mg ",
            "ms ",
            "md ",
            "ma ",
            "me ",
            "mn",
            "stats ",
            "verbosity ",
            " noreply",
            " 0",
            " -1",
            " 5",
            " 4294967296",
            " 18446744073709551616",
            " b",
            " q",
            " v",
            " k",
            " O",
            " T",
            " N",
            " C",
            " M",
            " MA",
            " D",
            " J",
            " E",
            " x",
            "\r\n",
            "\n",
            " ",
            "a2V5",
            "\0",
            "\u{80}",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..12),
    ]
}

/// The same for the framing before ASCII authentication.
fn check_auth(buf: &[u8]) {
    use kura_proto::ascii_auth::{parse_auth, user_password, AuthFrame};
    let mut pos = 0;
    while pos < buf.len() {
        match parse_auth(&buf[pos..]) {
            AuthFrame::Incomplete { needed } => {
                assert!(needed == 0 || needed > buf.len() - pos);
                break;
            }
            AuthFrame::Close => break,
            AuthFrame::NotAuth { len } => {
                assert!(len > 0 && len <= buf.len() - pos);
                pos += len;
            }
            AuthFrame::Token { len, token } => {
                assert!(len > 0 && len <= buf.len() - pos);
                if let Some(t) = token {
                    let _ = user_password(t);
                }
                pos += len;
            }
        }
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(buf in prop::collection::vec(any::<u8>(), 0..3000)) {
        check(&buf);
        check_auth(&buf);
    }

    #[test]
    fn command_shaped_input_never_panics(parts in prop::collection::vec(fragment(), 0..40)) {
        let buf: Vec<u8> = parts.concat();
        check(&buf);
        check_auth(&buf);
    }
}
