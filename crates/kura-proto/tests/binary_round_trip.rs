//! Binary requests: whatever the parser accepts composes, with
//! `BinRequest::compose`, into bytes that parse back into the same request,
//! and no stream of headers makes the parser panic or stall.

mod support;

use kura_proto::binary::{opcode::*, Header, REQUEST_MAGIC};
use proptest::prelude::*;
use support::binary::check_stream;
use support::LIMITS;

const OPCODES: &[u8] = &[
    GET,
    SET,
    ADD,
    REPLACE,
    DELETE,
    INCREMENT,
    DECREMENT,
    QUIT,
    FLUSH,
    GETQ,
    NOOP,
    VERSION,
    GETK,
    GETKQ,
    APPEND,
    PREPEND,
    STAT,
    SETQ,
    ADDQ,
    REPLACEQ,
    DELETEQ,
    INCREMENTQ,
    DECREMENTQ,
    QUITQ,
    FLUSHQ,
    APPENDQ,
    PREPENDQ,
    TOUCH,
    GAT,
    GATQ,
    SASL_LIST_MECHS,
    SASL_AUTH,
    SASL_STEP,
    GATK,
    GATKQ,
];

/// The extras length an opcode takes, and whether it has a key and a value.
fn shape(op: u8) -> (usize, bool, bool) {
    match op {
        GET | GETQ | GETK | GETKQ | DELETE | DELETEQ | STAT => (0, true, false),
        SET | SETQ | ADD | ADDQ | REPLACE | REPLACEQ => (8, true, true),
        APPEND | APPENDQ | PREPEND | PREPENDQ | SASL_AUTH | SASL_STEP => (0, true, true),
        INCREMENT | INCREMENTQ | DECREMENT | DECREMENTQ => (20, true, false),
        TOUCH | GAT | GATQ | GATK | GATKQ | FLUSH | FLUSHQ => {
            (4, !matches!(op, FLUSH | FLUSHQ), false)
        }
        _ => (0, false, false),
    }
}

/// One request frame: mostly a known opcode shaped as memcached expects,
/// with a body length that agrees; sometimes any of that is off.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    let op = prop_oneof![8 => prop::sample::select(OPCODES), 1 => any::<u8>()];
    let header = (
        prop_oneof![20 => Just(REQUEST_MAGIC), 1 => any::<u8>()],
        any::<u8>(),
        any::<u16>(),
        any::<u32>(),
        prop_oneof![Just(0u64), any::<u64>()],
    );
    let bytes = |n| prop::collection::vec(any::<u8>(), n);
    let body = (op, prop::bool::weighted(0.8)).prop_flat_map(move |(op, shaped)| {
        let (ext, has_key, has_value) = shape(op);
        let (ext, key, value) = if shaped {
            let key = if has_key { 1..12 } else { 0..1 };
            let value = if has_value { 0..80 } else { 0..1 };
            (ext..ext + 1, key, value)
        } else {
            (0..24, 0..12, 0..80)
        };
        (
            Just(op),
            bytes(ext),
            prop_oneof![12 => bytes(key), 1 => Just(vec![b'k'; 251])],
            bytes(value),
        )
    });
    let skew = prop_oneof![8 => Just(0i64), 1 => -3..4i64];
    (body, header, skew).prop_map(
        |((opcode, extras, key, value), (magic, data_type, vbucket, opaque, cas), skew)| {
            let body = (extras.len() + key.len() + value.len()) as i64 + skew;
            let mut wire = Vec::new();
            Header {
                magic,
                opcode,
                key_len: key.len() as u16,
                extras_len: extras.len() as u8,
                data_type,
                status: vbucket,
                body_len: body.max(0) as u32,
                opaque,
                cas,
            }
            .encode(&mut wire);
            wire.extend_from_slice(&extras);
            wire.extend_from_slice(&key);
            wire.extend_from_slice(&value);
            wire
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn binary_streams_round_trip(frames in prop::collection::vec(frame(), 1..6)) {
        let buf = frames.concat();
        for limits in &LIMITS {
            check_stream(&buf, limits);
        }
    }
}
