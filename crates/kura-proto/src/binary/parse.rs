//! Framing and parsing one binary request ([`parse`]): the header's
//! lengths checked against each other first, then each opcode's extras,
//! key and body as memcached 1.6 validates them; storage and SASL, which
//! carry a value, in functions of their own.

use super::opcode::*;
use super::{
    BinFrame, BinRequest, Command, ErrorStage, Header, Status, HEADER_LEN, MAX_SASL_DATA_LEN,
    MAX_SASL_MECH_LEN, REQUEST_MAGIC,
};
use crate::frame::{Limits, KEY_MAX_LENGTH};
use crate::request::{Data, StoreMode};

fn be32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    u32::from_be_bytes(a)
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// The loud form of a quiet opcode, and whether it was quiet.
fn unquiet(op: u8) -> (u8, bool) {
    let loud = match op {
        GETQ => GET,
        GETKQ => GETK,
        SETQ => SET,
        ADDQ => ADD,
        REPLACEQ => REPLACE,
        DELETEQ => DELETE,
        INCREMENTQ => INCREMENT,
        DECREMENTQ => DECREMENT,
        QUITQ => QUIT,
        FLUSHQ => FLUSH,
        APPENDQ => APPEND,
        PREPENDQ => PREPEND,
        GATQ => GAT,
        GATKQ => GATK,
        _ => return (op, false),
    };
    (loud, true)
}

/// One request whose header, extras and key are buffered: where its
/// parts are, and the frames it can become.
struct Parts<'a> {
    h: Header,
    /// Whether the opcode was a quiet one.
    quiet: bool,
    ext: usize,
    nkey: usize,
    body: usize,
    extras: &'a [u8],
    key: &'a [u8],
    /// The value's length: the body after extras and key.
    rest: usize,
    /// Where extras and key end.
    head: usize,
    /// Where the frame ends, with its body.
    end: usize,
    /// The value, `None` until all of it is buffered.
    value: Option<&'a [u8]>,
}

impl<'a> Parts<'a> {
    fn error(&self, status: Status, len: usize, swallow: usize, close: bool) -> BinFrame<'a> {
        BinFrame::Error {
            opcode: self.h.opcode,
            opaque: self.h.opaque,
            status,
            len,
            swallow,
            close,
            stage: ErrorStage::Command,
        }
    }

    /// Invalid arguments for the opcode: answered, then the connection
    /// closes.
    fn invalid(&self) -> BinFrame<'a> {
        self.error(Status::InvalidArguments, self.head, 0, true)
    }

    fn request(&self, command: Command<'a>, len: usize) -> BinFrame<'a> {
        BinFrame::Request {
            request: BinRequest {
                opcode: self.h.opcode,
                opaque: self.h.opaque,
                cas: self.h.cas,
                quiet: self.quiet,
                command,
            },
            len,
        }
    }

    fn incomplete(&self) -> BinFrame<'a> {
        BinFrame::Incomplete { needed: self.end }
    }

    /// A frame whose whole body must be buffered before it is answered.
    fn whole(&self, command: Command<'a>) -> BinFrame<'a> {
        match self.value {
            Some(_) => self.request(command, self.end),
            None => self.incomplete(),
        }
    }
}

/// Frames and parses one binary request at the front of `buf`.
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> BinFrame<'a> {
    // Bad magic closes at once, without waiting for a whole header.
    if buf.first().is_some_and(|&m| m != REQUEST_MAGIC) {
        return BinFrame::Close;
    }
    let Some(h) = Header::decode(buf) else {
        return BinFrame::Incomplete { needed: HEADER_LEN };
    };
    let ext = usize::from(h.extras_len);
    let nkey = usize::from(h.key_len);
    let body = h.body_len as usize;
    // The lengths must agree before anything else is read.
    if nkey > body || nkey + ext > body {
        return BinFrame::Error {
            opcode: h.opcode,
            opaque: h.opaque,
            status: Status::UnknownCommand,
            len: HEADER_LEN,
            swallow: 0,
            close: true,
            stage: ErrorStage::Framing,
        };
    }
    let head = HEADER_LEN + ext + nkey;
    if buf.len() < head {
        return BinFrame::Incomplete { needed: head };
    }
    let (op, quiet) = unquiet(h.opcode);
    let end = HEADER_LEN + body;
    let p = Parts {
        h,
        quiet,
        ext,
        nkey,
        body,
        extras: &buf[HEADER_LEN..HEADER_LEN + ext],
        key: &buf[HEADER_LEN + ext..head],
        rest: body - ext - nkey,
        head,
        end,
        value: buf.get(head..end),
    };
    if nkey > KEY_MAX_LENGTH {
        return p.invalid();
    }
    match op {
        SET | ADD | REPLACE | APPEND | PREPEND => store(&p, op, limits),
        SASL_AUTH | SASL_STEP if ext == 0 && nkey > 0 => sasl(&p, op),
        _ => other(&p, op),
    }
}

/// The opcodes without a value: their lengths checked, then the whole
/// frame buffered.
#[inline]
fn other<'a>(p: &Parts<'a>, op: u8) -> BinFrame<'a> {
    let (ext, nkey, body, rest, key, extras) = (p.ext, p.nkey, p.body, p.rest, p.key, p.extras);
    let bare = ext == 0 && nkey == 0 && body == 0;
    match op {
        VERSION if bare => p.whole(Command::Version),
        NOOP if bare => p.whole(Command::Noop),
        QUIT if bare => p.whole(Command::Quit),
        SASL_LIST_MECHS if bare => p.whole(Command::SaslListMechs),
        FLUSH if nkey == 0 && body == ext && (ext == 0 || ext == 4) => p.whole(Command::Flush {
            exptime: (ext == 4).then(|| be32(extras)),
        }),
        GET | GETK if ext == 0 && nkey > 0 && body == nkey => p.whole(Command::Get {
            key,
            touch: None,
            with_key: op == GETK,
            with_value: true,
        }),
        TOUCH | GAT | GATK if ext == 4 && nkey > 0 && rest == 0 => p.whole(Command::Get {
            key,
            touch: Some(be32(extras)),
            with_key: op == GATK,
            with_value: op != TOUCH,
        }),
        DELETE if ext == 0 && nkey > 0 && body == nkey => p.whole(Command::Delete { key }),
        INCREMENT | DECREMENT if ext == 20 && nkey > 0 && rest == 0 => p.whole(Command::Arith {
            key,
            incr: op == INCREMENT,
            delta: be64(extras),
            initial: be64(&extras[8..]),
            exptime: be32(&extras[16..]),
        }),
        STAT if ext == 0 && rest == 0 => p.whole(Command::Stat { group: key }),
        REPLICATE if ext == 8 && nkey > 0 && rest == 0 => p.whole(Command::Replicate {
            history: key,
            after: be64(extras),
        }),
        VERSION | NOOP | QUIT | SASL_LIST_MECHS | FLUSH | GET | GETK | TOUCH | GAT | GATK
        | DELETE | INCREMENT | DECREMENT | STAT | SASL_AUTH | SASL_STEP | REPLICATE => p.invalid(),
        // An opcode memcached does not know: say so and skip its body.
        _ => p.error(Status::UnknownCommand, p.head, rest, false),
    }
}

/// SET, ADD, REPLACE (flags and exptime in 8 bytes of extras), APPEND and
/// PREPEND (none). A value over the limits is decided from the head alone
/// and skipped, not buffered.
#[inline]
fn store<'a>(p: &Parts<'a>, op: u8, limits: &Limits) -> BinFrame<'a> {
    let (mode, flags, exptime) = match op {
        SET | ADD | REPLACE if p.ext == 8 && p.nkey > 0 => {
            let mode = match op {
                SET => StoreMode::Set,
                ADD => StoreMode::Add,
                _ => StoreMode::Replace,
            };
            (mode, be32(p.extras), be32(&p.extras[4..]))
        }
        APPEND | PREPEND if p.ext == 0 && p.nkey > 0 => {
            let mode = if op == APPEND {
                StoreMode::Append
            } else {
                StoreMode::Prepend
            };
            (mode, 0, 0)
        }
        _ => return p.invalid(),
    };
    let command = |data| Command::Store {
        mode,
        key: p.key,
        flags,
        exptime,
        data,
    };
    if limits.too_large(p.nkey, flags, p.rest) {
        return p.request(command(Data::TooLarge { len: p.rest }), p.head);
    }
    match p.value {
        Some(v) => p.request(command(Data::Bytes(v)), p.end),
        None => p.incomplete(),
    }
}

/// SASL_AUTH and SASL_STEP: the mechanism as the key, the payload as the
/// value, both bounded.
#[inline]
fn sasl<'a>(p: &Parts<'a>, op: u8) -> BinFrame<'a> {
    if p.nkey > MAX_SASL_MECH_LEN || p.rest > MAX_SASL_DATA_LEN {
        return p.error(Status::InvalidArguments, p.head, p.rest, false);
    }
    let Some(data) = p.value else {
        return p.incomplete();
    };
    let mechanism = p.key;
    p.whole(if op == SASL_AUTH {
        Command::SaslAuth { mechanism, data }
    } else {
        Command::SaslStep { mechanism, data }
    })
}
