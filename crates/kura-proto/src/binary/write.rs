//! Writing binary frames: the server's responses ([`response`] and its
//! helpers, a value written after its head so it can come from the cache's
//! memory) and a request's wire form ([`BinRequest::compose`]).

use super::{BinRequest, Command, Header, Status, REQUEST_MAGIC, RESPONSE_MAGIC};
use crate::request::{Data, StoreMode};

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
