//! A text retrieval's `VALUE` entries framed as one run, for a proxy: a
//! backend connection hands a multi-get the entries exactly as the backend
//! wrote them (`VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n` after
//! one another) in one buffer, instead of a reply per hit, and the
//! multi-get copies each hit's entry to its client whole.
//!
//! Only well-formed entries are taken here; any other line (`END`, an
//! error, something that is no reply) and any entry this framer does not
//! find plain (a size that is not all digits, too large, a data block not
//! ended by `\r\n`) is left at the front of the buffer for the text
//! framer ([`super::text::frame`]), which answers it as it always did (a
//! reply, or the error that closes the connection).

use bytes::{Bytes, BytesMut};

// The longest line looked at and the largest value taken: the text
// framer refuses longer and larger ones.
use super::reply::{LINE_MAX, VALUE_MAX};

/// One entry at the front of `buf`.
enum Entry {
    /// Complete: the entry's length.
    Whole { len: usize },
    /// A plain entry not all here yet: `need` bytes in all.
    Partial { need: usize },
    /// Not a plain `VALUE` entry, or its line is not complete.
    Other,
}

/// The `VALUE` entry at the front of `b`.
fn entry(b: &[u8]) -> Entry {
    if !b.starts_with(b"VALUE ") {
        return Entry::Other;
    }
    let Some(nl) = memchr::memchr(b'\n', &b[..b.len().min(LINE_MAX)]) else {
        return Entry::Other;
    };
    if nl < 7 || b[nl - 1] != b'\r' {
        return Entry::Other;
    }
    // `<key> <flags> <bytes>[ <cas>]`: the size is the third token.
    let line = &b[6..nl - 1];
    let space = |t: &[u8]| t.iter().position(|&c| c == b' ');
    let Some(key_len) = space(line) else {
        return Entry::Other;
    };
    let rest = &line[key_len + 1..];
    let Some(flags_len) = space(rest) else {
        return Entry::Other;
    };
    let rest = &rest[flags_len + 1..];
    let size_len = space(rest).unwrap_or(rest.len());
    let Some(size) = digits(&rest[..size_len]) else {
        return Entry::Other;
    };
    let len = nl + 1 + size + 2;
    if b.len() < len {
        return Entry::Partial { need: len };
    }
    if &b[len - 2..len] != b"\r\n" {
        return Entry::Other;
    }
    Entry::Whole { len }
}

/// A size of plain digits, at most [`VALUE_MAX`].
fn digits(t: &[u8]) -> Option<usize> {
    if t.is_empty() || t.len() > 10 {
        return None;
    }
    let mut n = 0usize;
    for &c in t {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + usize::from(c - b'0');
    }
    (n <= VALUE_MAX).then_some(n)
}

/// Takes the complete `VALUE` entries at the front of `buf` once the line
/// after them is there: `Some(entries)` (never empty), or None when there
/// are none at the front or more bytes are needed first. `scanned` is how
/// many bytes at the front are known entries already (0 to begin with;
/// reset when the entries are taken), so a long retrieval arriving in many
/// reads is looked at once.
pub fn take(buf: &mut BytesMut, scanned: &mut usize) -> Option<Bytes> {
    loop {
        match entry(&buf[*scanned..]) {
            Entry::Whole { len, .. } => *scanned += len,
            Entry::Partial { need } => {
                buf.reserve(*scanned + need - buf.len());
                return None;
            }
            Entry::Other => {
                // The line after the entries must be complete too: they
                // go together with it, so a retrieval is woken once.
                let at = *scanned;
                let complete = memchr::memchr(b'\n', &buf[at..]).is_some();
                if at == 0 || !complete {
                    return None;
                }
                *scanned = 0;
                return Some(buf.split_to(at).freeze());
            }
        }
    }
}

/// The end of the entry at `at` in a run [`take`] framed.
pub fn end(run: &[u8], at: usize) -> Option<usize> {
    match entry(run.get(at..)?) {
        Entry::Whole { len, .. } => Some(at + len),
        _ => None,
    }
}

/// As [`end`], for an entry whose key the caller knows is `key_len`
/// bytes long: the line is not looked at again up to the size.
pub fn skip(run: &[u8], at: usize, key_len: usize) -> Option<usize> {
    // `VALUE <key> <flags> <bytes>[ <cas>]\r\n`, as the framer found it.
    let mut i = at + b"VALUE ".len() + key_len + 1;
    while *run.get(i)? != b' ' {
        i += 1;
    }
    i += 1;
    let mut size = 0usize;
    let mut c = *run.get(i)?;
    while c.is_ascii_digit() {
        size = size * 10 + usize::from(c - b'0');
        i += 1;
        c = *run.get(i)?;
    }
    // At the line's `\r`, or the CAS's space.
    let nl = i + memchr::memchr(b'\n', run.get(i..)?)?;
    Some(nl + 1 + size + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(s: &[u8]) -> (Option<Bytes>, usize, usize) {
        let mut b = BytesMut::from(s);
        let mut scanned = 0;
        let r = take(&mut b, &mut scanned);
        (r, scanned, b.len())
    }

    #[test]
    fn entries_go_together_once_the_next_line_is_here() {
        let two = b"VALUE a 0 2\r\nab\r\nVALUE bc 5 1 9\r\nx\r\n";
        let (r, _, left) = run(&[&two[..], b"END\r\n"].concat());
        assert_eq!(r.as_deref(), Some(&two[..]));
        assert_eq!(left, 5);
        assert_eq!(end(two, 0), Some(17));
        assert_eq!(skip(two, 0, 1), Some(17));
        assert_eq!(end(two, 17), Some(36));
        assert_eq!(skip(two, 17, 2), Some(36));
        // The line after them not complete yet: wait, remembering.
        let (r, scanned, left) = run(&[&two[..], b"EN"].concat());
        assert!(r.is_none());
        assert_eq!((scanned, left), (36, 38));
        // A value not all here yet.
        assert!(run(b"VALUE a 0 5\r\nab").0.is_none());
    }

    #[test]
    fn anything_else_is_left_for_the_text_framer() {
        for s in [
            b"END\r\n".as_slice(),
            b"SERVER_ERROR out of memory\r\n",
            b"VALUE a 0 +2\r\nab\r\nEND\r\n",
            b"VALUE a 0 2\r\nabc\r\nEND\r\n",
            b"VALUE a 0 2\nab\r\nEND\r\n",
            b"VALUE a 0\r\nEND\r\n",
        ] {
            assert_eq!(
                run(s),
                (None, 0, s.len()),
                "{:?}",
                String::from_utf8_lossy(s)
            );
        }
        // After entries: those go first.
        let s = b"VALUE a 0 2\r\nab\r\nVALUE b 0 x\r\n";
        let (r, scanned, left) = run(s);
        assert_eq!(r.as_deref(), Some(&s[..17]));
        assert_eq!((scanned, left), (0, s.len() - 17));
    }
}
