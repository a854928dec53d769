//! A meta reply's numeric flags (`O` on every reply, `f` and `c` on
//! hits) read as kura-client's `Reply::number` reads them, with the
//! common case, plain digits, read here in one pass: no UTF-8 check and
//! `FromStr` for every reply. Anything else (a sign, too many digits, no
//! digits) goes to `Reply::number`, so the answer is always the same.

use std::str::FromStr;

use kura_client::raw::Reply;

/// The meta flag `f` of `r` as a number (`Reply::number`).
pub fn number<T: FromStr + TryFrom<u64>>(r: &Reply, f: u8) -> Option<T> {
    let digits = flag(&r.tokens, f)?;
    // 19 digits always fit a u64; T takes the value when FromStr would.
    if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
        return r.number(f);
    }
    let n = digits
        .iter()
        .fold(0u64, |n, &c| n * 10 + u64::from(c - b'0'));
    T::try_from(n).ok()
}

/// The first token of `tokens` (split at each space) that starts with
/// `f`, without it: `Reply::flag` in a plain loop.
fn flag(tokens: &[u8], f: u8) -> Option<&[u8]> {
    let mut start = 0;
    loop {
        let rest = tokens.get(start..)?;
        let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
        if rest.first() == Some(&f) {
            return rest.get(1..end);
        }
        if end == rest.len() {
            return None;
        }
        start += end + 1;
    }
}

/// The opaque of a reply (`Reply::opaque_token`).
pub fn opaque(r: &Reply) -> Option<u32> {
    r.opaque.or_else(|| number(r, b'O'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kura_client::raw::Status;

    fn reply(tokens: &'static str) -> Reply {
        Reply {
            status: Status::Done,
            tokens: Bytes::from_static(tokens.as_bytes()),
            value: None,
            opaque: None,
            flags: None,
            cas: None,
        }
    }

    #[test]
    fn reads_as_kura_client_does() {
        for t in [
            "O12 f7",
            "f0 O4294967295",
            "O4294967296",
            "O+5 f-1",
            "O f",
            "O00012 c18446744073709551615",
            "c18446744073709551616 O99999999999999999999",
            "t-1 k O1 O2",
            "  O7  f1 ",
            "O",
            "f",
            "",
        ] {
            let r = reply(t);
            assert_eq!(opaque(&r), r.opaque_token(), "{t}");
            assert_eq!(number::<u32>(&r, b'f'), r.number::<u32>(b'f'), "{t}");
            assert_eq!(number::<u64>(&r, b'c'), r.number::<u64>(b'c'), "{t}");
            assert_eq!(number::<i64>(&r, b't'), r.number::<i64>(b't'), "{t}");
        }
    }
}
