//! memcached's binary protocol, the server's side: 24-byte headers,
//! opcodes, status codes and the request types (this file).
//!
//! [`parse`] (`parse.rs`) frames one request at the front of a buffer the
//! way memcached 1.6 validates it (extras, key and body lengths per
//! opcode), and returns a [`BinRequest`] built on the same command types as
//! the text protocol ([`StoreMode`], [`Data`]), an error with the status
//! memcached answers, or "close" for a byte stream that is not binary at
//! all. [`response`] and its helpers compose replies and
//! [`BinRequest::compose`] writes a request, for round-trip tests
//! (`write.rs`). A client's side (commands composed, responses framed) is
//! [`crate::client::binary`].
//!
//! Quiet opcodes (GETQ, SETQ, ...) are folded into their loud form with
//! [`BinRequest::quiet`] set: a quiet get says nothing on a miss, a quiet
//! mutation nothing on success, and errors are always sent.

mod parse;
#[cfg(test)]
mod tests;
mod write;

pub use parse::parse;
pub use write::{error_response, message_response, response, Response};

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
