//! The helpers the text, meta and inspection parsers share: what a
//! command's parser returns ([`Parsed`], a storage request waiting for its
//! data block), token positions in the line, and the key and data-length
//! rules memcached applies to every command.

use crate::error::Error;
use crate::frame::KEY_MAX_LENGTH;
use crate::request::Request;
use crate::tokens::Tokens;

/// What a command parser found after the request line.
pub(crate) enum Parsed<'a> {
    /// A request whose frame ends with the line.
    Line(Request<'a>),
    /// A request that carries a data block of `data_len` bytes (plus `\r\n`).
    WithData(DataRequest<'a>),
    /// A bad request; the payload of `swallow` bytes after the line is
    /// dropped, and the reply is suppressed when `quiet`.
    Error {
        error: Error,
        swallow: usize,
        quiet: bool,
    },
    /// A line after which the connection is closed, unanswered.
    Close,
}

/// A storage request whose data block has yet to be framed; its `data`
/// field is filled in once the block is here.
pub(crate) struct DataRequest<'a> {
    pub request: Request<'a>,
    pub data_len: usize,
    pub too_large: bool,
    pub quiet_errors: bool,
}

impl<'a> DataRequest<'a> {
    pub(crate) fn with_data(mut self, data: crate::Data<'a>) -> Request<'a> {
        match &mut self.request {
            Request::Store(s) => s.data = data,
            Request::MetaSet(s) => s.data = data,
            _ => {}
        }
        self.request
    }
}

/// A bad request answered with `error`, nothing skipped.
pub(crate) fn err<'a>(error: Error) -> Parsed<'a> {
    Parsed::Error {
        error,
        swallow: 0,
        quiet: false,
    }
}

/// Byte offset of `part` (a subslice of `whole`) within `whole`.
pub(crate) fn offset_in(whole: &[u8], part: &[u8]) -> usize {
    (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize)
}

/// The part of `line` after token `i` ends (empty past the last token).
pub(crate) fn after_token<'a>(line: &'a [u8], t: &Tokens<'a>, i: usize) -> &'a [u8] {
    if i >= t.len() {
        return t.rest();
    }
    let tok = t.get(i);
    let end = offset_in(line, tok) + tok.len();
    &line[end.min(line.len())..]
}

/// A key the text protocols accept: 1 to 250 bytes. Like memcached, any
/// byte but the space (which ends a token) and NUL (which ends the line) may
/// be in a key: control bytes, DEL, bytes of 0x80 and above.
pub(crate) fn valid_key(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= KEY_MAX_LENGTH
}

/// A storage command's length: memcached refuses a negative one and one
/// above `INT_MAX - 2` (the length with its `\r\n` must fit in an `int`)
/// as a format error, without reading the data.
pub(crate) fn data_length(len: i32) -> Option<usize> {
    usize::try_from(len)
        .ok()
        .filter(|&n| n <= i32::MAX as usize - 2)
}
