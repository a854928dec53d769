//! memcached's binary protocol: 24-byte headers, opcodes, status codes.
//!
//! [`parse`] frames one request at the front of a buffer the way memcached
//! 1.6 validates it (extras, key and body lengths per opcode), and returns a
//! [`BinRequest`] built on the same command types as the text protocol
//! ([`StoreMode`], [`Data`]), an error with the status memcached answers, or
//! "close" for a byte stream that is not binary at all. [`response`] and its
//! helpers compose replies; [`BinRequest::compose`] writes a request, for
//! clients and for round-trip tests.
//!
//! Quiet opcodes (GETQ, SETQ, ...) are folded into their loud form with
//! [`BinRequest::quiet`] set: a quiet get says nothing on a miss, a quiet
//! mutation nothing on success, and errors are always sent.

use crate::frame::{Limits, KEY_MAX_LENGTH};
use crate::request::{Data, StoreMode};

/// Length of a request or response header.
pub const HEADER_LEN: usize = 24;
/// First byte of every request.
pub const REQUEST_MAGIC: u8 = 0x80;
/// First byte of every response.
pub const RESPONSE_MAGIC: u8 = 0x81;
/// `expiration` of an increment that must not create the counter.
pub const ARITH_NO_CREATE: u32 = 0xffff_ffff;
/// Longest SASL mechanism name accepted.
pub const MAX_SASL_MECH_LEN: usize = 32;
/// Longest SASL payload accepted (PLAIN credentials are far shorter).
pub const MAX_SASL_DATA_LEN: usize = 4096;

/// The opcodes memcached 1.6 implements.
#[allow(missing_docs)]
pub mod opcode {
    pub const GET: u8 = 0x00;
    pub const SET: u8 = 0x01;
    pub const ADD: u8 = 0x02;
    pub const REPLACE: u8 = 0x03;
    pub const DELETE: u8 = 0x04;
    pub const INCREMENT: u8 = 0x05;
    pub const DECREMENT: u8 = 0x06;
    pub const QUIT: u8 = 0x07;
    pub const FLUSH: u8 = 0x08;
    pub const GETQ: u8 = 0x09;
    pub const NOOP: u8 = 0x0a;
    pub const VERSION: u8 = 0x0b;
    pub const GETK: u8 = 0x0c;
    pub const GETKQ: u8 = 0x0d;
    pub const APPEND: u8 = 0x0e;
    pub const PREPEND: u8 = 0x0f;
    pub const STAT: u8 = 0x10;
    pub const SETQ: u8 = 0x11;
    pub const ADDQ: u8 = 0x12;
    pub const REPLACEQ: u8 = 0x13;
    pub const DELETEQ: u8 = 0x14;
    pub const INCREMENTQ: u8 = 0x15;
    pub const DECREMENTQ: u8 = 0x16;
    pub const QUITQ: u8 = 0x17;
    pub const FLUSHQ: u8 = 0x18;
    pub const APPENDQ: u8 = 0x19;
    pub const PREPENDQ: u8 = 0x1a;
    pub const TOUCH: u8 = 0x1c;
    pub const GAT: u8 = 0x1d;
    pub const GATQ: u8 = 0x1e;
    pub const SASL_LIST_MECHS: u8 = 0x20;
    pub const SASL_AUTH: u8 = 0x21;
    pub const SASL_STEP: u8 = 0x22;
    pub const GATK: u8 = 0x23;
    pub const GATKQ: u8 = 0x24;
    /// kura's own: a replica asks to follow this server (the key is the
    /// history it follows or `-`, the extras its last record, 8 bytes);
    /// the connection then carries the replication stream, as after the
    /// text command `replicate` (docs/replication.md). For servers that
    /// speak binary only (SASL).
    pub const REPLICATE: u8 = 0xe0;
}

/// Response status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u16)]
pub enum Status {
    Success = 0x00,
    KeyNotFound = 0x01,
    KeyExists = 0x02,
    TooLarge = 0x03,
    InvalidArguments = 0x04,
    NotStored = 0x05,
    NonNumeric = 0x06,
    AuthError = 0x20,
    AuthContinue = 0x21,
    UnknownCommand = 0x81,
    OutOfMemory = 0x82,
    /// memcached's `ETMPFAIL`: try again later.
    TemporaryFailure = 0x86,
}

impl Status {
    /// The body memcached sends with this status when it has nothing more
    /// specific to say.
    pub fn message(self) -> &'static [u8] {
        match self {
            Status::Success => b"",
            Status::KeyNotFound => b"Not found",
            Status::KeyExists => b"Data exists for key.",
            Status::TooLarge => b"Too large.",
            Status::InvalidArguments => b"Invalid arguments",
            Status::NotStored => b"Not stored.",
            Status::NonNumeric => b"Non-numeric server-side value for incr or decr",
            Status::AuthError => b"Auth failure.",
            Status::AuthContinue => b"",
            Status::UnknownCommand => b"Unknown command",
            Status::OutOfMemory => b"Out of memory",
            Status::TemporaryFailure => b"Temporary failure",
        }
    }

    /// The status for a code, if it is one of memcached's.
    pub fn from_u16(code: u16) -> Option<Status> {
        Some(match code {
            0x00 => Status::Success,
            0x01 => Status::KeyNotFound,
            0x02 => Status::KeyExists,
            0x03 => Status::TooLarge,
            0x04 => Status::InvalidArguments,
            0x05 => Status::NotStored,
            0x06 => Status::NonNumeric,
            0x20 => Status::AuthError,
            0x21 => Status::AuthContinue,
            0x81 => Status::UnknownCommand,
            0x82 => Status::OutOfMemory,
            _ => return None,
        })
    }
}

/// A decoded 24-byte header (request or response; `status` is the
/// request's vbucket field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Header {
    pub magic: u8,
    pub opcode: u8,
    pub key_len: u16,
    pub extras_len: u8,
    pub data_type: u8,
    pub status: u16,
    pub body_len: u32,
    pub opaque: u32,
    pub cas: u64,
}

impl Header {
    /// Decodes the first [`HEADER_LEN`] bytes of `b`, if there are that many.
    pub fn decode(b: &[u8]) -> Option<Header> {
        let b: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        Some(Header {
            magic: b[0],
            opcode: b[1],
            key_len: u16::from_be_bytes([b[2], b[3]]),
            extras_len: b[4],
            data_type: b[5],
            status: u16::from_be_bytes([b[6], b[7]]),
            body_len: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            opaque: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
            cas: u64::from_be_bytes([b[16], b[17], b[18], b[19], b[20], b[21], b[22], b[23]]),
        })
    }

    /// Appends the encoded header.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.magic);
        out.push(self.opcode);
        out.extend_from_slice(&self.key_len.to_be_bytes());
        out.push(self.extras_len);
        out.push(self.data_type);
        out.extend_from_slice(&self.status.to_be_bytes());
        out.extend_from_slice(&self.body_len.to_be_bytes());
        out.extend_from_slice(&self.opaque.to_be_bytes());
        out.extend_from_slice(&self.cas.to_be_bytes());
    }
}

/// What a binary request asks for, on the text protocol's command types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    /// GET, GETK, GAT, GATK, TOUCH and their quiet forms.
    Get {
        key: &'a [u8],
        /// The new expiration of GAT/GATK/TOUCH.
        touch: Option<u32>,
        /// GETK/GATK: the reply carries the key.
        with_key: bool,
        /// False for TOUCH, whose reply has the flags but no value.
        with_value: bool,
    },
    /// SET, ADD, REPLACE, APPEND, PREPEND (CAS is in the request header).
    Store {
        mode: StoreMode,
        key: &'a [u8],
        flags: u32,
        exptime: u32,
        data: Data<'a>,
    },
    Delete {
        key: &'a [u8],
    },
    /// INCREMENT/DECREMENT.
    Arith {
        key: &'a [u8],
        incr: bool,
        delta: u64,
        initial: u64,
        /// [`ARITH_NO_CREATE`] means a miss does not create the counter.
        exptime: u32,
    },
    Quit,
    /// FLUSH with an optional delay (memcached exptime form).
    Flush {
        exptime: Option<u32>,
    },
    Noop,
    Version,
    /// STAT with an optional group (the key).
    Stat {
        group: &'a [u8],
    },
    SaslListMechs,
    SaslAuth {
        mechanism: &'a [u8],
        data: &'a [u8],
    },
    SaslStep {
        mechanism: &'a [u8],
        data: &'a [u8],
    },
    /// kura's `replicate` ([`opcode::REPLICATE`]).
    Replicate {
        history: &'a [u8],
        after: u64,
    },
}

/// A parsed binary request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinRequest<'a> {
    /// The opcode as sent (echoed in the response, quiet forms included).
    pub opcode: u8,
    pub opaque: u32,
    /// The CAS field: compare-and-swap on mutations when nonzero.
    pub cas: u64,
    /// A quiet opcode.
    pub quiet: bool,
    pub command: Command<'a>,
}

impl Command<'_> {
    /// Whether this command may change stored data: storage, delete,
    /// arithmetic, flush, and the touching forms of get (GAT, TOUCH).
    pub fn changes_data(&self) -> bool {
        match self {
            Command::Store { .. }
            | Command::Delete { .. }
            | Command::Arith { .. }
            | Command::Flush { .. } => true,
            Command::Get { touch, .. } => touch.is_some(),
            _ => false,
        }
    }
}

/// When an error is detected, relative to authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorStage {
    /// The header's lengths contradict each other: answered before any
    /// authentication check, as memcached does.
    Framing,
    /// The request is malformed for its opcode: an unauthenticated
    /// connection gets the authentication error instead.
    Command,
}

/// The outcome of looking for one binary request at the front of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BinFrame<'a> {
    /// More bytes are needed; `needed` is the frame's total length when
    /// known, else 0.
    Incomplete { needed: usize },
    /// A request in the first `len` bytes. For a store whose data is
    /// [`Data::TooLarge`], `len` ends before the value and the value's
    /// `len` bytes that follow must be discarded.
    Request { request: BinRequest<'a>, len: usize },
    /// A bad request: answer `status` (with its message) echoing `opcode`
    /// and `opaque`, drop `len` bytes now and `swallow` more as they
    /// arrive, and close the connection afterwards if `close`.
    Error {
        opcode: u8,
        opaque: u32,
        status: Status,
        len: usize,
        swallow: usize,
        close: bool,
        stage: ErrorStage,
    },
    /// Not a binary request (wrong magic): close the connection.
    Close,
}

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
    use opcode::*;
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

/// Frames and parses one binary request at the front of `buf`.
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> BinFrame<'a> {
    use opcode::*;
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
    let error = |status, len, swallow, close, stage| BinFrame::Error {
        opcode: h.opcode,
        opaque: h.opaque,
        status,
        len,
        swallow,
        close,
        stage,
    };
    // The lengths must agree before anything else is read.
    if nkey > body || nkey + ext > body {
        return error(
            Status::UnknownCommand,
            HEADER_LEN,
            0,
            true,
            ErrorStage::Framing,
        );
    }
    let head = HEADER_LEN + ext + nkey;
    if buf.len() < head {
        return BinFrame::Incomplete { needed: head };
    }
    let extras = &buf[HEADER_LEN..HEADER_LEN + ext];
    let key = &buf[HEADER_LEN + ext..head];
    let rest = body - ext - nkey;
    let invalid = || error(Status::InvalidArguments, head, 0, true, ErrorStage::Command);
    if nkey > KEY_MAX_LENGTH {
        return invalid();
    }
    let (op, quiet) = unquiet(h.opcode);
    let request = |command, len| BinFrame::Request {
        request: BinRequest {
            opcode: h.opcode,
            opaque: h.opaque,
            cas: h.cas,
            quiet,
            command,
        },
        len,
    };
    // The frame ends with its body; `value` is the body after extras and
    // key, `None` until all of it is buffered.
    let end = HEADER_LEN + body;
    let value = buf.get(head..end);
    let incomplete = BinFrame::Incomplete { needed: end };
    // A frame whose whole body must be buffered before it is answered.
    let whole = |command| match value {
        Some(_) => request(command, end),
        None => incomplete.clone(),
    };
    let bare = ext == 0 && nkey == 0 && body == 0;
    match op {
        VERSION if bare => whole(Command::Version),
        NOOP if bare => whole(Command::Noop),
        QUIT if bare => whole(Command::Quit),
        SASL_LIST_MECHS if bare => whole(Command::SaslListMechs),
        FLUSH if nkey == 0 && body == ext && (ext == 0 || ext == 4) => whole(Command::Flush {
            exptime: (ext == 4).then(|| be32(extras)),
        }),
        GET | GETK if ext == 0 && nkey > 0 && body == nkey => whole(Command::Get {
            key,
            touch: None,
            with_key: op == GETK,
            with_value: true,
        }),
        TOUCH | GAT | GATK if ext == 4 && nkey > 0 && rest == 0 => whole(Command::Get {
            key,
            touch: Some(be32(extras)),
            with_key: op == GATK,
            with_value: op != TOUCH,
        }),
        DELETE if ext == 0 && nkey > 0 && body == nkey => whole(Command::Delete { key }),
        INCREMENT | DECREMENT if ext == 20 && nkey > 0 && rest == 0 => whole(Command::Arith {
            key,
            incr: op == INCREMENT,
            delta: be64(extras),
            initial: be64(&extras[8..]),
            exptime: be32(&extras[16..]),
        }),
        STAT if ext == 0 && rest == 0 => whole(Command::Stat { group: key }),
        REPLICATE if ext == 8 && nkey > 0 && rest == 0 => whole(Command::Replicate {
            history: key,
            after: be64(extras),
        }),
        SET | ADD | REPLACE | APPEND | PREPEND => {
            let (mode, flags, exptime) = match op {
                SET | ADD | REPLACE if ext == 8 && nkey > 0 => {
                    let mode = match op {
                        SET => StoreMode::Set,
                        ADD => StoreMode::Add,
                        _ => StoreMode::Replace,
                    };
                    (mode, be32(extras), be32(&extras[4..]))
                }
                APPEND | PREPEND if ext == 0 && nkey > 0 => {
                    let mode = if op == APPEND {
                        StoreMode::Append
                    } else {
                        StoreMode::Prepend
                    };
                    (mode, 0, 0)
                }
                _ => return invalid(),
            };
            if limits.too_large(nkey, flags, rest) {
                // Decided from the head alone: the value is skipped, not
                // buffered.
                let data = Data::TooLarge { len: rest };
                return request(
                    Command::Store {
                        mode,
                        key,
                        flags,
                        exptime,
                        data,
                    },
                    head,
                );
            }
            let Some(v) = value else {
                return incomplete;
            };
            request(
                Command::Store {
                    mode,
                    key,
                    flags,
                    exptime,
                    data: Data::Bytes(v),
                },
                end,
            )
        }
        SASL_AUTH | SASL_STEP if ext == 0 && nkey > 0 => {
            if nkey > MAX_SASL_MECH_LEN || rest > MAX_SASL_DATA_LEN {
                return error(
                    Status::InvalidArguments,
                    head,
                    rest,
                    false,
                    ErrorStage::Command,
                );
            }
            let Some(data) = value else {
                return incomplete;
            };
            whole(if op == SASL_AUTH {
                Command::SaslAuth {
                    mechanism: key,
                    data,
                }
            } else {
                Command::SaslStep {
                    mechanism: key,
                    data,
                }
            })
        }
        VERSION | NOOP | QUIT | SASL_LIST_MECHS | FLUSH | GET | GETK | TOUCH | GAT | GATK
        | DELETE | INCREMENT | DECREMENT | STAT | SASL_AUTH | SASL_STEP | REPLICATE => invalid(),
        // An opcode memcached does not know: say so and skip its body.
        _ => error(
            Status::UnknownCommand,
            head,
            rest,
            false,
            ErrorStage::Command,
        ),
    }
}

/// The fields of one response.
#[derive(Debug, Clone, Copy, Default)]
pub struct Response<'a> {
    pub opcode: u8,
    pub status: u16,
    pub opaque: u32,
    pub cas: u64,
    pub extras: &'a [u8],
    pub key: &'a [u8],
    /// Length of the value that follows (written separately, so a large
    /// value can be sent from the cache's memory).
    pub value_len: usize,
}

impl Response<'_> {
    /// Appends the header, extras and key; the caller appends the value.
    pub fn encode_head(&self, out: &mut Vec<u8>) {
        let body = self.extras.len() + self.key.len() + self.value_len;
        Header {
            magic: RESPONSE_MAGIC,
            opcode: self.opcode,
            key_len: self.key.len() as u16,
            extras_len: self.extras.len() as u8,
            data_type: 0,
            status: self.status,
            body_len: body as u32,
            opaque: self.opaque,
            cas: self.cas,
        }
        .encode(out);
        out.extend_from_slice(self.extras);
        out.extend_from_slice(self.key);
    }
}

/// Appends a whole response with `value` as its body after extras and key.
pub fn response(out: &mut Vec<u8>, r: &Response<'_>, value: &[u8]) {
    Response {
        value_len: value.len(),
        ..*r
    }
    .encode_head(out);
    out.extend_from_slice(value);
}

/// Appends an error response: `status` with its standard message.
pub fn error_response(out: &mut Vec<u8>, opcode: u8, opaque: u32, status: Status) {
    message_response(out, opcode, opaque, status, status.message());
}

/// Appends a response whose body is a message (errors, VERSION, SASL).
pub fn message_response(out: &mut Vec<u8>, opcode: u8, opaque: u32, status: Status, msg: &[u8]) {
    response(
        out,
        &Response {
            opcode,
            status: status as u16,
            opaque,
            ..Default::default()
        },
        msg,
    );
}

impl BinRequest<'_> {
    /// Appends this request in wire form. A store with [`Data::TooLarge`]
    /// is written up to its key: the header announces the value, whose
    /// bytes are not written (they are what a server skips).
    pub fn compose(&self, out: &mut Vec<u8>) {
        let mut extras = [0u8; 20];
        let (ext, key, value): (usize, &[u8], &[u8]) = match &self.command {
            Command::Get { key, touch, .. } => match touch {
                Some(t) => {
                    extras[..4].copy_from_slice(&t.to_be_bytes());
                    (4, key, b"")
                }
                None => (0, key, b""),
            },
            Command::Store {
                mode,
                key,
                flags,
                exptime,
                data,
            } => {
                let ext = match mode {
                    StoreMode::Set | StoreMode::Add | StoreMode::Replace => {
                        extras[..4].copy_from_slice(&flags.to_be_bytes());
                        extras[4..8].copy_from_slice(&exptime.to_be_bytes());
                        8
                    }
                    // Rotation has no binary opcode; it is never parsed
                    // from one, and would carry no extras like append.
                    StoreMode::Append | StoreMode::Prepend | StoreMode::Rotate { .. } => 0,
                };
                match data {
                    Data::Bytes(v) => (ext, key, v),
                    Data::TooLarge { len } => {
                        // The header announces the value; its bytes are not
                        // written (the frame a parser returns ends there too).
                        self.head(out, ext, key.len(), *len);
                        out.extend_from_slice(&extras[..ext]);
                        out.extend_from_slice(key);
                        return;
                    }
                }
            }
            Command::Delete { key } => (0, key, b""),
            Command::Arith {
                key,
                delta,
                initial,
                exptime,
                ..
            } => {
                extras[..8].copy_from_slice(&delta.to_be_bytes());
                extras[8..16].copy_from_slice(&initial.to_be_bytes());
                extras[16..20].copy_from_slice(&exptime.to_be_bytes());
                (20, key, b"")
            }
            Command::Flush { exptime } => match exptime {
                Some(e) => {
                    extras[..4].copy_from_slice(&e.to_be_bytes());
                    (4, b"", b"")
                }
                None => (0, b"", b""),
            },
            Command::Quit | Command::Noop | Command::Version | Command::SaslListMechs => {
                (0, b"", b"")
            }
            Command::Stat { group } => (0, group, b""),
            Command::SaslAuth { mechanism, data } | Command::SaslStep { mechanism, data } => {
                (0, mechanism, data)
            }
            Command::Replicate { history, after } => {
                extras[..8].copy_from_slice(&after.to_be_bytes());
                (8, history, b"")
            }
        };
        self.head(out, ext, key.len(), value.len());
        out.extend_from_slice(&extras[..ext]);
        out.extend_from_slice(key);
        out.extend_from_slice(value);
    }

    fn head(&self, out: &mut Vec<u8>, ext: usize, nkey: usize, nvalue: usize) {
        Header {
            magic: REQUEST_MAGIC,
            opcode: self.opcode,
            key_len: nkey as u16,
            extras_len: ext as u8,
            data_type: 0,
            status: 0,
            body_len: (ext + nkey + nvalue) as u32,
            opaque: self.opaque,
            cas: self.cas,
        }
        .encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::opcode::*;
    use super::*;

    fn req(op: u8, extras: &[u8], key: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
        let mut v = Vec::new();
        Header {
            magic: REQUEST_MAGIC,
            opcode: op,
            key_len: key.len() as u16,
            extras_len: extras.len() as u8,
            body_len: (extras.len() + key.len() + value.len()) as u32,
            opaque,
            cas,
            ..Default::default()
        }
        .encode(&mut v);
        v.extend_from_slice(extras);
        v.extend_from_slice(key);
        v.extend_from_slice(value);
        v
    }

    fn request(buf: &[u8]) -> (BinRequest<'_>, usize) {
        match parse(buf, &Limits::default()) {
            BinFrame::Request { request, len } => (request, len),
            other => panic!("expected a request, got {other:?}"),
        }
    }

    #[test]
    fn header_round_trips() {
        let h = Header {
            magic: 0x81,
            opcode: 7,
            key_len: 0x1234,
            extras_len: 4,
            data_type: 0,
            status: 0x82,
            body_len: 0xdead_beef,
            opaque: 0x0102_0304,
            cas: 0x1122_3344_5566_7788,
        };
        let mut v = Vec::new();
        h.encode(&mut v);
        assert_eq!(v.len(), HEADER_LEN);
        assert_eq!(Header::decode(&v), Some(h));
    }

    #[test]
    fn get_set_and_quiet_forms() {
        let b = req(GETKQ, &[], b"foo", &[], 9, 0);
        let (r, len) = request(&b);
        assert_eq!(len, b.len());
        assert!(r.quiet);
        assert_eq!(r.opcode, GETKQ);
        assert_eq!(
            r.command,
            Command::Get {
                key: b"foo",
                touch: None,
                with_key: true,
                with_value: true
            }
        );
        let mut ext = Vec::new();
        ext.extend_from_slice(&5u32.to_be_bytes());
        ext.extend_from_slice(&100u32.to_be_bytes());
        let b = req(SETQ, &ext, b"k", b"value", 1, 77);
        let (r, _) = request(&b);
        assert!(r.quiet);
        assert_eq!(r.cas, 77);
        assert_eq!(
            r.command,
            Command::Store {
                mode: StoreMode::Set,
                key: b"k",
                flags: 5,
                exptime: 100,
                data: Data::Bytes(b"value")
            }
        );
    }

    #[test]
    fn incomplete_until_whole() {
        let b = req(APPEND, &[], b"k", b"tail", 0, 0);
        for cut in 0..b.len() {
            assert!(
                matches!(
                    parse(&b[..cut], &Limits::default()),
                    BinFrame::Incomplete { .. }
                ),
                "cut at {cut}"
            );
        }
        assert!(matches!(
            parse(&b, &Limits::default()),
            BinFrame::Request { .. }
        ));
    }

    #[test]
    fn bad_magic_closes() {
        let mut b = req(NOOP, &[], &[], &[], 0, 0);
        b[0] = 0x81;
        assert_eq!(parse(&b, &Limits::default()), BinFrame::Close);
    }

    #[test]
    fn lying_lengths_are_unknown_command_and_close() {
        let mut b = req(GET, &[], b"abc", &[], 3, 0);
        b[8..12].copy_from_slice(&1u32.to_be_bytes());
        match parse(&b, &Limits::default()) {
            BinFrame::Error {
                status,
                close,
                opaque,
                stage,
                ..
            } => {
                assert_eq!(status, Status::UnknownCommand);
                assert!(close);
                assert_eq!(opaque, 3);
                assert_eq!(stage, ErrorStage::Framing);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn wrong_extras_are_invalid_arguments() {
        let b = req(GET, &[0, 0, 0, 0], b"abc", &[], 0, 0);
        assert!(matches!(
            parse(&b, &Limits::default()),
            BinFrame::Error {
                status: Status::InvalidArguments,
                close: true,
                ..
            }
        ));
        let b = req(SET, &[], b"abc", b"v", 0, 0);
        assert!(matches!(
            parse(&b, &Limits::default()),
            BinFrame::Error {
                status: Status::InvalidArguments,
                ..
            }
        ));
    }

    #[test]
    fn unknown_opcode_skips_its_body() {
        let b = req(0x55, &[1, 2], b"key", b"payload", 0, 0);
        match parse(&b, &Limits::default()) {
            BinFrame::Error {
                status,
                len,
                swallow,
                close,
                ..
            } => {
                assert_eq!(status, Status::UnknownCommand);
                assert_eq!(len + swallow, b.len());
                assert!(!close);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn too_large_value_is_not_buffered() {
        let limits = Limits {
            item_size_max: 1024,
            ..Default::default()
        };
        let mut ext = vec![0u8; 8];
        ext[3] = 1;
        let b = req(SET, &ext, b"big", &vec![b'x'; 2000], 0, 0);
        // Only the head is needed to decide.
        match parse(&b[..HEADER_LEN + 8 + 3], &limits) {
            BinFrame::Request { request, len } => {
                assert_eq!(len, HEADER_LEN + 11);
                assert!(matches!(
                    request.command,
                    Command::Store {
                        data: Data::TooLarge { len: 2000 },
                        ..
                    }
                ));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn compose_round_trips() {
        let reqs = [
            req(GET, &[], b"a", &[], 1, 0),
            req(GATKQ, &7u32.to_be_bytes(), b"b", &[], 2, 0),
            req(TOUCH, &7u32.to_be_bytes(), b"b", &[], 2, 0),
            req(DELETEQ, &[], b"c", &[], 3, 99),
            req(PREPEND, &[], b"d", b"xyz", 4, 5),
            req(INCREMENTQ, &[0; 20], b"n", &[], 5, 0),
            req(FLUSH, &10u32.to_be_bytes(), &[], &[], 6, 0),
            req(FLUSHQ, &[], &[], &[], 6, 0),
            req(STAT, &[], b"settings", &[], 7, 0),
            req(SASL_AUTH, &[], b"PLAIN", b"\0u\0p", 8, 0),
            req(SASL_LIST_MECHS, &[], &[], &[], 9, 0),
            req(QUITQ, &[], &[], &[], 10, 0),
        ];
        for b in &reqs {
            let (r, len) = request(b);
            assert_eq!(len, b.len());
            let mut again = Vec::new();
            r.compose(&mut again);
            assert_eq!(&again, b, "{r:?}");
        }
    }

    #[test]
    fn error_response_carries_message() {
        let mut v = Vec::new();
        error_response(&mut v, GET, 42, Status::KeyNotFound);
        let h = Header::decode(&v).unwrap();
        assert_eq!(h.magic, RESPONSE_MAGIC);
        assert_eq!(h.status, 1);
        assert_eq!(h.opaque, 42);
        assert_eq!(&v[HEADER_LEN..], b"Not found");
        assert_eq!(h.body_len as usize, 9);
    }
}
