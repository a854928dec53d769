//! Composing replies. The server appends every reply of a read batch to one
//! output buffer, so these helpers write into a `Vec<u8>` and never
//! allocate on their own.

use base64::Engine;

pub const STORED: &[u8] = b"STORED\r\n";
pub const NOT_STORED: &[u8] = b"NOT_STORED\r\n";
pub const EXISTS: &[u8] = b"EXISTS\r\n";
pub const NOT_FOUND: &[u8] = b"NOT_FOUND\r\n";
pub const DELETED: &[u8] = b"DELETED\r\n";
pub const TOUCHED: &[u8] = b"TOUCHED\r\n";
pub const END: &[u8] = b"END\r\n";
pub const OK: &[u8] = b"OK\r\n";
pub const RESET: &[u8] = b"RESET\r\n";
pub const MN: &[u8] = b"MN\r\n";
pub const EN: &[u8] = b"EN\r\n";
pub const NON_NUMERIC: &[u8] = b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n";
pub const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";
pub const OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory storing object\r\n";
/// memcached's reply when an `incr`/`decr` cannot allocate its new item.
pub const ARITH_OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory\r\n";
pub const SHUTDOWN_DISABLED: &[u8] = b"ERROR: shutdown not enabled\r\n";
pub const SHUTDOWN_INVALID: &[u8] = b"CLIENT_ERROR invalid shutdown mode\r\n";
pub const FLUSH_DISABLED: &[u8] = b"CLIENT_ERROR flush_all not allowed\r\n";
pub const TOO_MANY_CONNECTIONS: &[u8] = b"ERROR Too many open connections\r\n";

/// Appends the decimal form of `v`.
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(v).as_bytes());
}

/// Appends the decimal form of a signed `v`.
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(v).as_bytes());
}

/// Appends `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n`.
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    value_header(out, key, flags, data.len(), cas);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends the `VALUE <key> <flags> <bytes>[ <cas>]\r\n` line alone, for a
/// caller that sends the data block itself.
pub fn value_header(out: &mut Vec<u8>, key: &[u8], flags: u32, len: usize, cas: Option<u64>) {
    out.reserve(key.len() + 48);
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    let mut digits = itoa::Buffer::new();
    // Most items have no flags: their part of the line is a constant.
    if flags == 0 {
        out.extend_from_slice(b" 0 ");
    } else {
        out.push(b' ');
        out.extend_from_slice(digits.format(flags).as_bytes());
        out.push(b' ');
    }
    out.extend_from_slice(digits.format(len).as_bytes());
    if let Some(cas) = cas {
        out.push(b' ');
        out.extend_from_slice(digits.format(cas).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends `STAT <name> <value>\r\n`.
pub fn stat(out: &mut Vec<u8>, name: &str, value: impl std::fmt::Display) {
    use std::io::Write;
    // Writing into a Vec cannot fail.
    let _ = write!(out, "STAT {name} {value}\r\n");
}

/// Appends a meta return flag with a numeric token: ` <code><n>`.
pub fn meta_num(out: &mut Vec<u8>, code: u8, n: u64) {
    out.push(b' ');
    out.push(code);
    put_u64(out, n);
}

/// Appends a meta return flag with a signed numeric token.
pub fn meta_signed(out: &mut Vec<u8>, code: u8, n: i64) {
    out.push(b' ');
    out.push(code);
    put_i64(out, n);
}

/// Appends a bare meta return flag: ` <code>`.
pub fn meta_char(out: &mut Vec<u8>, code: u8) {
    out.push(b' ');
    out.push(code);
}

/// Appends the opaque flag as sent: ` O<token>`.
pub fn meta_opaque(out: &mut Vec<u8>, token: &[u8]) {
    out.push(b' ');
    out.push(b'O');
    out.extend_from_slice(token);
}

/// Appends the key flag: ` k<key>`, or ` k<base64> b` for a binary key.
pub fn meta_key(out: &mut Vec<u8>, key: &[u8], binary: bool) {
    out.extend_from_slice(b" k");
    if binary {
        put_base64(out, key);
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(key);
    }
}

/// Appends `key` base64-encoded.
pub fn put_base64(out: &mut Vec<u8>, key: &[u8]) {
    let engine = &base64::engine::general_purpose::STANDARD;
    out.extend_from_slice(engine.encode(key).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_line() {
        let mut out = Vec::new();
        value(&mut out, b"k", 5, b"hi", Some(7));
        assert_eq!(out, b"VALUE k 5 2 7\r\nhi\r\n");
    }

    proptest::proptest! {
        /// Flags of 0 take a shortcut; every header reads as memcached
        /// writes it all the same.
        #[test]
        fn value_headers_are_memcached_lines(
            key in proptest::collection::vec(33u8..=126, 1..250),
            flags in proptest::prop_oneof![proptest::strategy::Just(0u32), proptest::num::u32::ANY],
            len in 0usize..=(i32::MAX as usize),
            cas in proptest::option::of(proptest::num::u64::ANY),
        ) {
            let mut out = b"before".to_vec();
            value_header(&mut out, &key, flags, len, cas);
            let cas = cas.map(|c| format!(" {c}")).unwrap_or_default();
            let key = String::from_utf8(key).expect("printable");
            let want = format!("beforeVALUE {key} {flags} {len}{cas}\r\n");
            proptest::prop_assert_eq!(String::from_utf8(out).expect("ascii"), want);
        }
    }

    #[test]
    fn binary_key_flag() {
        let mut out = Vec::new();
        meta_key(&mut out, b"\x00\x01", true);
        assert_eq!(out, b" kAAE= b");
    }
}
