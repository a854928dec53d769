//! Reading a page for the ESI subset Varnish implements: `<esi:include src="..."/>` (with
//! `onerror="continue"`), `<esi:remove>...</esi:remove>`, `<!--esi ... -->` (the markers go,
//! what is between them is kept and read too) and `<esi:comment .../>`. The page becomes a list
//! of segments: byte ranges of the page to send as they are, and includes. Anything else,
//! other `esi:` elements included, is text. As Varnish (without `esi_disable_xml_check`), a
//! body whose first byte that is not white space is not `<` is not processed.

use memchr::{memchr, memchr2, memmem};
use serde::{Deserialize, Serialize};

/// A piece of a processed page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Segment {
    /// Bytes `start..end` of the page.
    Text(usize, usize),
    /// An `<esi:include>`: its `src` (with `&amp;` read as `&`), and whether it says
    /// `onerror="continue"`.
    Include(String, bool),
}

/// The segments of `page`, or `None` when it is not to be processed (not markup).
pub fn parse(page: &[u8]) -> Option<Vec<Segment>> {
    let first = page.iter().find(|b| !b.is_ascii_whitespace())?;
    if *first != b'<' {
        return None;
    }
    let mut out = Vec::new();
    let mut text = 0;
    let mut at = 0;
    let mut in_comment = false;
    let push = |out: &mut Vec<Segment>, start: usize, end: usize| {
        if end > start {
            if let Some(Segment::Text(_, last)) = out.last_mut() {
                if *last == start {
                    *last = end;
                    return;
                }
            }
            out.push(Segment::Text(start, end));
        }
    };
    while at < page.len() {
        let next = if in_comment {
            memchr2(b'<', b'-', &page[at..])
        } else {
            memchr(b'<', &page[at..])
        };
        let Some(offset) = next else {
            break;
        };
        at += offset;
        let rest = &page[at..];
        if in_comment && rest.starts_with(b"-->") {
            push(&mut out, text, at);
            at += 3;
            text = at;
            in_comment = false;
            continue;
        }
        if !in_comment && rest.starts_with(b"<!--esi") {
            push(&mut out, text, at);
            at += 7;
            text = at;
            in_comment = true;
            continue;
        }
        if !starts_with_ci(rest, b"<esi:") {
            at += 1;
            continue;
        }
        let Some(tag_len) = tag_length(rest) else {
            // An unterminated tag: the rest is text.
            break;
        };
        let tag = &rest[..tag_len];
        let name_len = tag[5..]
            .iter()
            .position(|b| b.is_ascii_whitespace() || *b == b'/' || *b == b'>')
            .unwrap_or(tag.len() - 5);
        let name = &tag[5..5 + name_len];
        let closed = tag.ends_with(b"/>");
        let after = at + tag_len;
        if name.eq_ignore_ascii_case(b"include") {
            push(&mut out, text, at);
            if let Some((src, onerror)) = include_attributes(&tag[5 + name_len..]) {
                out.push(Segment::Include(src, onerror));
            }
            at = if closed {
                after
            } else {
                skip_closing(page, after, b"</esi:include>")
            };
            text = at;
        } else if name.eq_ignore_ascii_case(b"remove") && !closed {
            push(&mut out, text, at);
            at = match find_ci(&page[after..], b"</esi:remove>") {
                Some(end) => after + end + b"</esi:remove>".len(),
                None => page.len(),
            };
            text = at;
        } else if name.eq_ignore_ascii_case(b"comment") {
            push(&mut out, text, at);
            at = if closed {
                after
            } else {
                skip_closing(page, after, b"</esi:comment>")
            };
            text = at;
        } else {
            at = after;
        }
    }
    push(&mut out, text, page.len());
    Some(out)
}

fn starts_with_ci(bytes: &[u8], prefix: &[u8]) -> bool {
    bytes.len() >= prefix.len() && bytes[..prefix.len()].eq_ignore_ascii_case(prefix)
}

fn find_ci(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    // Closing tags are written in lowercase nearly always; the case-blind search is the
    // fallback.
    memmem::find(haystack, needle).or_else(|| {
        haystack
            .windows(needle.len())
            .position(|w| w.eq_ignore_ascii_case(needle))
    })
}

/// The length of the tag at the start of `rest` (through its `>`, quoted `>` skipped).
fn tag_length(rest: &[u8]) -> Option<usize> {
    let mut quote = None;
    for (i, &b) in rest.iter().enumerate() {
        match (quote, b) {
            (None, b'"' | b'\'') => quote = Some(b),
            (Some(q), _) if q == b => quote = None,
            (None, b'>') => return Some(i + 1),
            _ => {}
        }
    }
    None
}

/// `from` past `closing` when only white space comes before it, else `from`.
fn skip_closing(page: &[u8], from: usize, closing: &[u8]) -> usize {
    let mut at = from;
    while page.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    if starts_with_ci(&page[at..], closing) {
        at + closing.len()
    } else {
        from
    }
}

/// An include's `src` and whether `onerror="continue"`; `None` without a usable `src`.
fn include_attributes(attributes: &[u8]) -> Option<(String, bool)> {
    let mut src = None;
    let mut onerror = false;
    let mut at = 0;
    let bytes = attributes;
    loop {
        while bytes
            .get(at)
            .is_some_and(|b| b.is_ascii_whitespace() || *b == b'/')
        {
            at += 1;
        }
        if at >= bytes.len() || bytes[at] == b'>' {
            break;
        }
        let name_start = at;
        while bytes
            .get(at)
            .is_some_and(|b| !b.is_ascii_whitespace() && !matches!(b, b'=' | b'>' | b'/'))
        {
            at += 1;
        }
        let name = &bytes[name_start..at];
        while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
            at += 1;
        }
        let mut value: &[u8] = b"";
        if bytes.get(at) == Some(&b'=') {
            at += 1;
            while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
                at += 1;
            }
            match bytes.get(at) {
                Some(&q) if q == b'"' || q == b'\'' => {
                    let end = memchr(q, &bytes[at + 1..]).map_or(bytes.len(), |e| at + 1 + e);
                    value = &bytes[at + 1..end];
                    at = end + 1;
                }
                _ => {
                    let start = at;
                    while bytes
                        .get(at)
                        .is_some_and(|b| !b.is_ascii_whitespace() && *b != b'>')
                    {
                        at += 1;
                    }
                    value = &bytes[start..at];
                }
            }
        }
        if name.eq_ignore_ascii_case(b"src") {
            src = Some(String::from_utf8_lossy(value).replace("&amp;", "&"));
        } else if name.eq_ignore_ascii_case(b"onerror") {
            onerror = value.eq_ignore_ascii_case(b"continue");
        }
    }
    let src = src.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())?;
    Some((src, onerror))
}

#[cfg(test)]
mod tests;
