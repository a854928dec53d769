//! Replies as the connection reads them: a server's invalidation lines
//! (`IV`, for the near cache) and which replies complete which request.

use bytes::BytesMut;

use super::Expect;
use kura_proto::client::{Reply, Status};

/// A server's invalidation line.
pub(super) enum Iv {
    Key(BytesMut),
    All,
}

/// An `IV` line at the front of `buf`, taken out: `Ok(None)` when the
/// front is not one, `Err` when it may be but is not complete yet. A key
/// in base64 (`IV <key> b`) drops everything: this client's keys are text.
pub(super) fn invalidation(buf: &mut BytesMut) -> std::result::Result<Option<Iv>, ()> {
    const IV: &[u8] = b"IV ";
    if buf.len() < IV.len() {
        return if IV.starts_with(buf) && !buf.is_empty() {
            Err(())
        } else {
            Ok(None)
        };
    }
    if !buf.starts_with(IV) {
        return Ok(None);
    }
    let Some(end) = memchr::memmem::find(buf, b"\r\n") else {
        // A line longer than any key's is no invalidation: the reply
        // framer refuses it and the connection closes.
        return if buf.len() > 1024 { Ok(None) } else { Err(()) };
    };
    let mut line = buf.split_to(end + 2);
    line.truncate(end);
    let _ = line.split_to(IV.len());
    if &line[..] == b"*" || line.contains(&b' ') {
        Ok(Some(Iv::All))
    } else {
        Ok(Some(Iv::Key(line)))
    }
}

/// Adds `r` to the replies `got` of a request expecting `expect` (`done`
/// counts the text replies complete so far): `Ok(true)` when the request
/// is complete with it, `Err` when `r` cannot be this request's (wrong
/// opaque, a reply outside the batch).
pub(crate) fn take_reply(
    expect: Expect,
    got: &mut Vec<Reply>,
    done: &mut u32,
    r: Reply,
) -> std::result::Result<bool, String> {
    Ok(match expect {
        Expect::Meta(opaque) => {
            if r.status != Status::Error && r.opaque_token() != Some(opaque) {
                return Err(format!(
                    "reply with opaque {:?} to the request with O{opaque}",
                    r.opaque_token()
                ));
            }
            got.push(r);
            true
        }
        Expect::MetaBatch(n) => {
            if r.status == Status::Noop {
                true
            } else {
                if r.status != Status::Error && r.opaque_token().is_none_or(|o| o >= n) {
                    return Err(format!(
                        "a batch reply without an opaque of the batch: {:?}",
                        r.status
                    ));
                }
                got.push(r);
                false
            }
        }
        Expect::Text(n) => {
            let ends = r.status != Status::Value || r.tokens.is_empty();
            got.push(r);
            if ends {
                *done += 1;
            }
            *done >= n
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{invalidation, Iv};
    use bytes::BytesMut;

    fn take(bytes: &[u8]) -> (std::result::Result<Option<Iv>, ()>, usize) {
        let mut b = BytesMut::from(bytes);
        let r = invalidation(&mut b);
        (r, b.len())
    }

    #[test]
    fn invalidation_lines_are_taken_from_the_front_only() {
        assert!(matches!(take(b"IV k1\r\nHD\r\n"), (Ok(Some(Iv::Key(k))), 4) if &k[..] == b"k1"));
        assert!(matches!(take(b"IV *\r\n"), (Ok(Some(Iv::All)), 0)));
        // base64 keys are not this client's: everything goes.
        assert!(matches!(take(b"IV YSBi b\r\n"), (Ok(Some(Iv::All)), 0)));
        // Not yet complete: wait for more.
        assert!(matches!(take(b"I"), (Err(()), 1)));
        assert!(matches!(take(b"IV som"), (Err(()), 6)));
        // Replies are left to the reply framer.
        assert!(matches!(take(b"HD\r\n"), (Ok(None), 4)));
        assert!(matches!(take(b"VA 2\r\nIV\r\n"), (Ok(None), 10)));
        assert!(matches!(take(b""), (Ok(None), 0)));
        // A line longer than any key's without an end is refused by the
        // framer, not buffered for ever.
        let long = [b"IV ".as_slice(), &[b'x'; 2000]].concat();
        assert!(matches!(take(&long), (Ok(None), 2003)));
    }
}
