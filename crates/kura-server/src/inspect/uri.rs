//! Keys in log and dump lines, URI-encoded as memcached writes them:
//! letters, digits and `-._~` as they are, any other byte as `%XX`
//! (upper-case hex).

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// Appends `key` URI-encoded to `out`.
pub fn put_uri_encoded(out: &mut Vec<u8>, key: &[u8]) {
    for &b in key {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_as_memcached() {
        let mut out = Vec::new();
        super::put_uri_encoded(&mut out, b"a%20b c,\xff-._~Z9");
        assert_eq!(out, b"a%2520b%20c%2C%FF-._~Z9");
    }
}
