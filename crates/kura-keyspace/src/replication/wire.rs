//! The replication stream on the wire (kura's own extension of the text
//! protocol, on the server's ordinary port; docs/replication.md).
//!
//! A replica opens a connection (authenticating first when the primary asks
//! for it) and sends `replicate <history id or -> <last applied record>`.
//! The primary answers with one line:
//!
//! * `CONTINUE <id> <record>`: the records after `<record>` follow;
//! * `FULLRESYNC <id> <record> <bytes>`: a snapshot taken at `<record>`
//!   follows, `<bytes>` long, then the records after it;
//! * `REWIND <id> <record>`: the replica holds records after `<record>`
//!   that this history does not (it was a primary that lost its place, or
//!   followed one): it cuts its log back to `<record>` and asks again;
//! * `SERVER_ERROR <why>`.
//!
//! After a promotion a history continues another up to a record; the
//! `CONTINUE` and `FULLRESYNC` lines then end with `<previous id> <record>`,
//! which a replica keeps, so that its own replicas can go on from it.
//!
//! Then frames, each a kind byte and a body: `R`, a 4-byte length and
//! whole log records as the log holds them (length, CRC, number: the
//! replica checks every one); `H`, a heartbeat with the last record the
//! primary has written and its clock in milliseconds, first thing after the
//! answer (the replica's link is up from then) and every second the stream
//! is otherwise quiet; `A`,
//! asking for an acknowledgement at once (a write waits for it). The
//! replica writes `ack <record>` lines back as it applies: at once when
//! asked, else at most ten a second.

use kura_log::History;

/// The largest frame body a replica accepts.
pub const MAX_FRAME: usize = 64 << 20;

/// The primary's answer to `replicate`. A history travels as its id and,
/// after a promotion, the id it continues and the last record they share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handshake {
    Continue {
        history: History,
        after: u64,
    },
    FullResync {
        history: History,
        at: u64,
        bytes: u64,
    },
    /// The replica holds records after `to` that the primary's history
    /// does not: it cuts its log back to `to`, then asks again.
    Rewind {
        id: String,
        to: u64,
    },
    Refused(String),
}

fn history(id: &str, previous: &[&str]) -> Option<History> {
    let previous = match previous {
        [] => None,
        [prev, end] => Some((prev.to_string(), end.parse().ok()?)),
        _ => return None,
    };
    Some(History {
        id: id.to_string(),
        previous,
    })
}

impl Handshake {
    /// Parses the answer line (without its CRLF).
    pub fn parse(line: &str) -> Option<Handshake> {
        if let Some(why) = line.strip_prefix("SERVER_ERROR ") {
            return Some(Handshake::Refused(why.to_string()));
        }
        let w: Vec<&str> = line.split(' ').collect();
        match w.as_slice() {
            ["CONTINUE", id, after, previous @ ..] => Some(Handshake::Continue {
                history: history(id, previous)?,
                after: after.parse().ok()?,
            }),
            ["FULLRESYNC", id, at, bytes, previous @ ..] => Some(Handshake::FullResync {
                history: history(id, previous)?,
                at: at.parse().ok()?,
                bytes: bytes.parse().ok()?,
            }),
            ["REWIND", id, to] => Some(Handshake::Rewind {
                id: id.to_string(),
                to: to.parse().ok()?,
            }),
            _ => None,
        }
    }

    /// The line, with its CRLF.
    pub fn line(&self) -> String {
        match self {
            Handshake::Continue { history, after } => {
                let (id, rest) = split_previous(history);
                format!("CONTINUE {id} {after}{rest}\r\n")
            }
            Handshake::FullResync { history, at, bytes } => {
                let (id, rest) = split_previous(history);
                format!("FULLRESYNC {id} {at} {bytes}{rest}\r\n")
            }
            Handshake::Rewind { id, to } => format!("REWIND {id} {to}\r\n"),
            Handshake::Refused(why) => format!("SERVER_ERROR {why}\r\n"),
        }
    }
}

/// A history's id, and its previous id and end as trailing words.
fn split_previous(h: &History) -> (&str, String) {
    let rest = match &h.previous {
        Some((prev, end)) => format!(" {prev} {end}"),
        None => String::new(),
    };
    (&h.id, rest)
}

/// A frame from the primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Whole log records.
    Records(&'a [u8]),
    /// The primary's last written record and its clock (ms).
    Heartbeat { last: u64, millis: u64 },
    /// Acknowledge what you have now: a write waits for it
    /// (`--min-replicas-ack`). Otherwise a replica acknowledges at most
    /// ten times a second.
    AckNow,
}

/// Appends the request for an acknowledgement at once.
pub fn ack_now(out: &mut Vec<u8>) {
    out.push(b'A');
}

/// Appends a frame of records.
pub fn records(out: &mut Vec<u8>, bytes: &[u8]) {
    records_head(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// Appends the head of a frame of `len` bytes of records (the records
/// follow it on the wire).
pub fn records_head(out: &mut Vec<u8>, len: usize) {
    out.push(b'R');
    out.extend_from_slice(&(len as u32).to_le_bytes());
}

/// Appends a heartbeat.
pub fn heartbeat(out: &mut Vec<u8>, last: u64, millis: u64) {
    out.push(b'H');
    out.extend_from_slice(&last.to_le_bytes());
    out.extend_from_slice(&millis.to_le_bytes());
}

/// Why a stream is broken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("unknown frame kind {0:#04x}")]
    Kind(u8),
    #[error("frame of {0} bytes is too large")]
    TooLarge(usize),
}

/// The frame at the front of `b` and its length; `Ok(None)` when more
/// bytes are needed.
///
/// # Errors
/// A kind or length no primary sends.
pub fn frame(b: &[u8]) -> Result<Option<(Frame<'_>, usize)>, StreamError> {
    let Some(&kind) = b.first() else {
        return Ok(None);
    };
    match kind {
        b'R' => {
            let Some(len) = b.get(1..5) else {
                return Ok(None);
            };
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            if len > MAX_FRAME {
                return Err(StreamError::TooLarge(len));
            }
            Ok(b.get(5..5 + len).map(|r| (Frame::Records(r), 5 + len)))
        }
        b'H' => Ok(b.get(1..17).map(|h| {
            let last = u64::from_le_bytes(h[..8].try_into().unwrap_or_default());
            let millis = u64::from_le_bytes(h[8..].try_into().unwrap_or_default());
            (Frame::Heartbeat { last, millis }, 17)
        })),
        b'A' => Ok(Some((Frame::AckNow, 1))),
        other => Err(StreamError::Kind(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_lines_round_trip() {
        let plain = History {
            id: "ab".repeat(20),
            previous: None,
        };
        let promoted = History {
            id: "cd".repeat(20),
            previous: Some(("ef".repeat(20), 77)),
        };
        for h in [
            Handshake::Continue {
                history: plain.clone(),
                after: 17,
            },
            Handshake::Continue {
                history: promoted.clone(),
                after: 17,
            },
            Handshake::FullResync {
                history: promoted,
                at: 9,
                bytes: 1234,
            },
            Handshake::FullResync {
                history: plain,
                at: 9,
                bytes: 1234,
            },
            Handshake::Rewind {
                id: "ab".repeat(20),
                to: 5,
            },
            Handshake::Refused("no data dir".into()),
        ] {
            let line = h.line();
            assert_eq!(Handshake::parse(line.trim_end()), Some(h));
        }
        assert_eq!(Handshake::parse("CONTINUE x"), None);
        assert_eq!(Handshake::parse("FULLRESYNC x 1 y"), None);
        assert_eq!(Handshake::parse("CONTINUE x 1 y"), None);
        assert_eq!(Handshake::parse("CONTINUE x 1 y z"), None);
        assert_eq!(Handshake::parse("REWIND x"), None);
        assert_eq!(Handshake::parse("STORED"), None);
    }

    #[test]
    fn frames_come_back_whole_or_not_at_all() {
        let mut b = Vec::new();
        records(&mut b, b"abc");
        heartbeat(&mut b, 7, 99);
        for cut in 0..b.len() {
            let got = frame(&b[..cut]).unwrap();
            assert!(got.is_none_or(|(_, len)| len <= cut));
        }
        let (f, len) = frame(&b).unwrap().unwrap();
        assert_eq!((f, len), (Frame::Records(b"abc"), 8));
        let (f, _) = frame(&b[len..]).unwrap().unwrap();
        assert_eq!(
            f,
            Frame::Heartbeat {
                last: 7,
                millis: 99
            }
        );
        assert_eq!(frame(b"A"), Ok(Some((Frame::AckNow, 1))));
        assert_eq!(frame(b"X"), Err(StreamError::Kind(b'X')));
        let mut huge = vec![b'R'];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(frame(&huge), Err(StreamError::TooLarge(_))));
    }
}
