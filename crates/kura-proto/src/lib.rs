//! memcached's wire formats, with no I/O: the text, meta and binary
//! protocols in both directions, parsed from and composed into byte
//! buffers. The server and the proxy parse their clients' requests and
//! compose replies with it; kura-client and the proxy's backend
//! connections compose requests and read replies with its [`client`]
//! module. (`kura bench` keeps a codec of its own on purpose, so it can
//! judge a server's bytes independently.)
//!
//! [`parse`] looks at the front of a read buffer and returns a [`Frame`]:
//! a whole [`Request`] and its length, a cheap [`Frame::Incomplete`] when
//! more bytes are needed, or a [`Frame::Error`] carrying memcached's exact
//! error reply and how many bytes to skip. [`reply`] composes responses;
//! [`binary`] is the binary protocol's side of both.
//!
//! ```
//! use kura_proto::{parse, Frame, Limits, Request};
//! let frame = parse(b"get a b\r\n", &Limits::default());
//! let Frame::Request { request: Request::Get(get), len } = frame else { panic!() };
//! assert_eq!(len, 9);
//! assert_eq!(get.keys().collect::<Vec<_>>(), [&b"a"[..], b"b"]);
//! ```

pub mod ascii_auth;
pub mod binary;
pub mod client;
mod compose;
mod error;
mod frame;
mod inspect;
mod meta;
pub mod number;
mod parsing;
pub mod reply;
mod request;
mod text;
pub mod tokens;

pub use error::Error;
pub use frame::{parse, Frame, Limits, KEY_MAX_LENGTH, MAX_LINE_WITHOUT_NEWLINE};
pub use meta::MAX_OPAQUE_LENGTH;
pub use request::*;
