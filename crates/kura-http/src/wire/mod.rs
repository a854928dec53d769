//! HTTP/1.1 request framing without I/O (RFC 9112 §2-§7): where a request head ends, how its
//! body is framed, and where a chunked body ends, read exactly as hyper reads them (the same
//! `httparse` parser and settings for heads, the same grammar and limits for chunked bodies).
//!
//! The framing guard in front of hyper (`server/framing.rs`) follows a client connection with
//! these, so that it and hyper always agree on where each request starts: a disagreement is
//! how requests are smuggled. Anything these functions do not accept, the guard refuses; it
//! never hands hyper bytes it could not follow. The fuzz targets in `fuzz/` drive both.

pub mod chunked;
pub mod head;
pub mod proxy_header;

pub use chunked::{Chunked, Progress};
pub use head::{parse_head, BodyFraming, HeadLimits, Parsed, Refusal};
