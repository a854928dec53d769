//! The reply framers of `kura_proto::client` on random streams built from
//! reply fragments (the oracle is `support::reply`, shared with the fuzz
//! targets): no panic, progress, the same replies whatever the reads.

mod support;

use proptest::prelude::*;
use support::reply::{check_split, check_stream, check_text};

/// Pieces that steer random input into the framers' paths.
fn fragment() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(vec![
            "VA ",
            "HD",
            "EN",
            "NF",
            "NS",
            "EX",
            "MN",
            "VALUE ",
            "END",
            "STORED",
            "NOT_STORED",
            "EXISTS",
            "NOT_FOUND",
            "DELETED",
            "TOUCHED",
            "VERSION ",
            "ERROR",
            "SERVER_ERROR x",
            "CLIENT_ERROR y",
            " f5",
            " c77",
            " O12",
            " t-1",
            " k",
            " W",
            " 2",
            " 0",
            "10",
            "99999999999",
            "+3",
            "\r\n",
            "\r\n",
            "\r\n",
            "\n",
            " ",
            "hi",
            "k",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..6),
    ]
}

fn stream() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(fragment(), 0..40).prop_map(|v| v.concat())
}

/// Binary responses: a header with small lengths and a body of bytes.
fn binary_stream() -> impl Strategy<Value = Vec<u8>> {
    let response = (
        prop::sample::select(vec![0x81u8, 0x81, 0x81, 0x80]),
        prop::sample::select(vec![0x00u8, 0x01, 0x05, 0x0a, 0x1c, 0x1d]),
        0u8..4,
        prop::sample::select(vec![0u8, 4, 8]),
        0u16..8,
        prop::collection::vec(any::<u8>(), 0..24),
        any::<u32>(),
    )
        .prop_map(|(magic, op, key, extras, status, body, opaque)| {
            let mut b = vec![magic, op, 0, key, extras, 0];
            b.extend_from_slice(&status.to_be_bytes());
            b.extend_from_slice(&(body.len() as u32).to_be_bytes());
            b.extend_from_slice(&opaque.to_be_bytes());
            b.extend_from_slice(&7u64.to_be_bytes());
            b.extend_from_slice(&body);
            b
        });
    prop::collection::vec(response, 0..8).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn meta_replies(data in stream()) {
        check_stream(kura_proto::client::meta::frame, &data);
    }

    #[test]
    fn text_replies_and_value_runs(data in stream()) {
        check_text(&data);
    }

    #[test]
    fn binary_responses(data in binary_stream()) {
        check_stream(kura_proto::client::binary::frame, &data);
    }
}

#[test]
fn known_replies_frame_alike_in_any_two_reads() {
    let text = b"VALUE k 5 2 77\r\nhi\r\nVALUE kk 0 0\r\n\r\nEND\r\nSTORED\r\n42\r\nNOT_FOUND\r\n";
    let meta = b"VA 2 f3 c1 O9\r\nhi\r\nEN O12\r\nHD\r\nMN\r\nVA 0 W\r\n\r\n";
    for at in 0..=text.len() {
        check_split(kura_proto::client::text::frame, text, at);
    }
    for at in 0..=meta.len() {
        check_split(kura_proto::client::meta::frame, meta, at);
    }
    check_text(text);
}
