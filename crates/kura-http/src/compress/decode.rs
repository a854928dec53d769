//! Decoding gzip, brotli and zstd bodies chunk by chunk, each output chunk bounded and the
//! whole output bounded by a limit (a decompression bomb is refused, not expanded), and the
//! body that serves a coded object decoded to a client that does not accept its coding.

use std::io::{Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use brotli::{BrotliDecompressStream, BrotliResult, BrotliState, HeapAlloc, HuffmanCode};
use bytes::{Buf, Bytes};
use flate2::write::MultiGzDecoder;
use http_body::{Body as _, Frame, SizeHint};
use ruzstd::decoding::{FrameDecoder, StreamingDecoder};

use super::accept::Coding;
use crate::body::Body;

/// Compressed gzip input decoded per step: gzip expands at most about 1032:1, so a step gives
/// at most about 4 MiB.
const GZIP_STEP: usize = 4 << 10;
/// Output per step of brotli and zstd, whose ratios have no such bound.
const OUT_STEP: usize = 64 << 10;

/// Why a body could not be decoded.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// The bytes are not what `Content-Encoding` says (or are cut short).
    #[error("the body is not valid {0}")]
    Corrupt(&'static str),
    /// Decoded, it would pass the limit.
    #[error("the body decodes to more than {0} bytes")]
    TooLarge(u64),
}

type Brotli = BrotliState<HeapAlloc<u8>, HeapAlloc<u32>, HeapAlloc<HuffmanCode>>;

enum Kind {
    Gzip(Box<MultiGzDecoder<Vec<u8>>>),
    Br(Box<Brotli>, bool),
    /// zstd is decoded once the input is whole (ruzstd reads, it is not written to): the
    /// input gathered, then a streaming reader over it.
    Zstd(Vec<u8>, Zstd),
}

/// A zstd decoder's reading state.
enum Zstd {
    Gathering,
    Reading(Box<ZstdReader>),
    Done,
}

type ZstdReader = StreamingDecoder<std::io::Cursor<Vec<u8>>, FrameDecoder>;

/// A streaming decoder of one coding.
pub struct Decoder {
    kind: Kind,
    coding: Coding,
    pending: Bytes,
    produced: u64,
    limit: u64,
}

impl Decoder {
    /// A decoder of `coding` whose output may be at most `limit` bytes.
    pub fn new(coding: Coding, limit: u64) -> Decoder {
        let kind = match coding {
            Coding::Gzip => Kind::Gzip(Box::new(MultiGzDecoder::new(Vec::new()))),
            // RFC 7932's windows only (at most 16 MiB), not the large-window extension.
            Coding::Br => Kind::Br(
                Box::new(BrotliState::new_strict(
                    HeapAlloc::default(),
                    HeapAlloc::default(),
                    HeapAlloc::default(),
                )),
                false,
            ),
            Coding::Zstd => Kind::Zstd(Vec::new(), Zstd::Gathering),
        };
        Decoder {
            kind,
            coding,
            pending: Bytes::new(),
            produced: 0,
            limit,
        }
    }

    /// Decoded bytes so far.
    pub fn produced(&self) -> u64 {
        self.produced
    }

    /// Gives the next input; the previous one must have been used up ([`Decoder::step`]
    /// returned `None`).
    pub fn feed(&mut self, input: Bytes) {
        debug_assert!(self.pending.is_empty());
        self.pending = input;
    }

    /// The next decoded chunk of the input fed, `None` when it is used up.
    ///
    /// # Errors
    /// Invalid input, or output past the limit.
    pub fn step(&mut self) -> Result<Option<Bytes>, DecodeError> {
        let corrupt = DecodeError::Corrupt(self.coding.name());
        let out = match &mut self.kind {
            Kind::Gzip(decoder) => loop {
                if self.pending.is_empty() {
                    return Ok(None);
                }
                let piece = self.pending.split_to(self.pending.len().min(GZIP_STEP));
                // The decoder hands its output on at a flush (else at the next write).
                decoder
                    .write_all(&piece)
                    .and_then(|()| decoder.flush())
                    .map_err(|_| corrupt.clone())?;
                if !decoder.get_ref().is_empty() {
                    break std::mem::take(decoder.get_mut());
                }
            },
            Kind::Br(state, done) => loop {
                if self.pending.is_empty() {
                    return Ok(None);
                }
                if *done {
                    // Bytes after the end of the stream.
                    return Err(corrupt);
                }
                let (out, consumed, result) = brotli_step(state, &self.pending);
                self.pending.advance(consumed);
                match result {
                    BrotliResult::ResultFailure => return Err(corrupt),
                    BrotliResult::ResultSuccess => *done = true,
                    BrotliResult::NeedsMoreInput | BrotliResult::NeedsMoreOutput => {}
                }
                if !out.is_empty() {
                    break out;
                }
            },
            Kind::Zstd(input, _) => {
                if input.len() as u64 + self.pending.len() as u64 > self.limit {
                    return Err(DecodeError::TooLarge(self.limit));
                }
                input.extend_from_slice(&self.pending);
                self.pending.clear();
                return Ok(None);
            }
        };
        self.count(out).map(Some)
    }

    /// The input has ended: the next of the remaining chunks, `None` at the end.
    ///
    /// # Errors
    /// Input cut short or invalid, or output past the limit.
    pub fn finish(&mut self) -> Result<Option<Bytes>, DecodeError> {
        if let Some(out) = self.step()? {
            return Ok(Some(out));
        }
        let corrupt = DecodeError::Corrupt(self.coding.name());
        let out = match &mut self.kind {
            Kind::Gzip(decoder) => {
                decoder.try_finish().map_err(|_| corrupt)?;
                std::mem::take(decoder.get_mut())
            }
            Kind::Br(state, done) => {
                if *done {
                    return Ok(None);
                }
                let (out, _, result) = brotli_step(state, &[]);
                match result {
                    BrotliResult::ResultSuccess => *done = true,
                    BrotliResult::NeedsMoreOutput => {}
                    BrotliResult::NeedsMoreInput | BrotliResult::ResultFailure => {
                        return Err(corrupt)
                    }
                }
                out
            }
            Kind::Zstd(input, state) => {
                if let Zstd::Gathering = state {
                    let cursor = std::io::Cursor::new(std::mem::take(input));
                    let decoder = StreamingDecoder::new(cursor).map_err(|_| corrupt.clone())?;
                    *state = Zstd::Reading(Box::new(decoder));
                }
                zstd_step(state).map_err(|_| corrupt)?
            }
        };
        if out.is_empty() {
            return Ok(None);
        }
        self.count(out).map(Some)
    }

    fn count(&mut self, out: Vec<u8>) -> Result<Bytes, DecodeError> {
        self.produced += out.len() as u64;
        if self.produced > self.limit {
            return Err(DecodeError::TooLarge(self.limit));
        }
        Ok(Bytes::from(out))
    }
}

/// One call of the brotli decoder on `input`: its output, the input it used, its result.
fn brotli_step(state: &mut Brotli, input: &[u8]) -> (Vec<u8>, usize, BrotliResult) {
    let mut out = vec![0u8; OUT_STEP];
    let (mut available_in, mut input_offset) = (input.len(), 0);
    let (mut available_out, mut output_offset, mut total) = (OUT_STEP, 0, 0);
    let result = BrotliDecompressStream(
        &mut available_in,
        &mut input_offset,
        input,
        &mut available_out,
        &mut output_offset,
        &mut out,
        &mut total,
        state,
    );
    out.truncate(output_offset);
    (out, input_offset, result)
}

/// Up to [`OUT_STEP`] bytes of the zstd reader; at the end of a frame, the next frame's
/// reader when more input follows (concatenated frames are one body).
fn zstd_step(state: &mut Zstd) -> Result<Vec<u8>, ()> {
    let mut out = vec![0u8; OUT_STEP];
    loop {
        let Zstd::Reading(decoder) = state else {
            return Ok(Vec::new());
        };
        let read = decoder.read(&mut out).map_err(|_| ())?;
        if read > 0 {
            out.truncate(read);
            return Ok(out);
        }
        let Zstd::Reading(decoder) = std::mem::replace(state, Zstd::Done) else {
            return Ok(Vec::new());
        };
        let cursor = decoder.into_inner();
        if cursor.position() < cursor.get_ref().len() as u64 {
            *state = Zstd::Reading(Box::new(StreamingDecoder::new(cursor).map_err(|_| ())?));
        }
    }
}

/// The error of a [`Body`].
type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// A body that decodes the coded body it wraps, chunk by chunk.
pub struct Decoding {
    inner: Body,
    decoder: Decoder,
    ended: bool,
    done: bool,
    /// The first chunk, decoded before the head was sent ([`Decoding::prime`]).
    held: Option<Frame<Bytes>>,
    /// The error that ended it, returned at the poll after the one that found it.
    failed: Option<BodyError>,
    /// gzip-compresses what is decoded (a transcoding), until the end.
    encoder: Option<super::codec::Encoder>,
}

impl Decoding {
    /// Decodes `inner`, coded with `coding`, to at most `limit` bytes.
    pub fn new(inner: Body, coding: Coding, limit: u64) -> Decoding {
        Decoding {
            inner,
            decoder: Decoder::new(coding, limit),
            ended: false,
            done: false,
            held: None,
            failed: None,
            encoder: None,
        }
    }

    /// This decoding, gzip-compressed again at `level` as it goes when `level` is given (a
    /// client that accepts gzip but not the stored coding).
    pub fn gzip(mut self, level: Option<u32>) -> Decoding {
        self.encoder = level.map(super::codec::Encoder::new);
        self
    }

    /// Decodes the first chunk (or finds the end) and holds it for the first poll: a body whose
    /// start cannot be decoded, or whose source fails before any byte, is known while the
    /// response's head can still say so (a `502`), rather than once the head is sent.
    ///
    /// # Errors
    /// The first bytes are not what the coding says, or the source failed.
    pub async fn prime(&mut self) -> Result<(), BodyError> {
        match std::future::poll_fn(|cx| self.poll_frame(cx)).await {
            Some(Ok(frame)) => {
                self.held = Some(frame);
                Ok(())
            }
            Some(Err(error)) => Err(error),
            None => Ok(()),
        }
    }

    /// The next decoded chunk.
    pub fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        if let Some(frame) = self.held.take() {
            return Poll::Ready(Some(Ok(frame)));
        }
        if let Some(error) = self.failed.take() {
            return Poll::Ready(Some(Err(error)));
        }
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            let step = if self.ended {
                self.decoder.finish()
            } else {
                self.decoder.step()
            };
            match step {
                Ok(Some(out)) => {
                    let out = match &mut self.encoder {
                        Some(encoder) => encoder.push(&out),
                        None => out,
                    };
                    return Poll::Ready(Some(Ok(Frame::data(out))));
                }
                Ok(None) if self.ended => {
                    self.done = true;
                    // A transcoding's last bytes: gzip's trailer.
                    return match self.encoder.take() {
                        Some(mut encoder) => Poll::Ready(Some(Ok(Frame::data(encoder.finish())))),
                        None => Poll::Ready(None),
                    };
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::debug!("decoding a body: {error}");
                    return self.fail(error.into(), cx);
                }
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.decoder.feed(data);
                    }
                }
                Poll::Ready(Some(Err(error))) => return self.fail(error, cx),
                Poll::Ready(None) => self.ended = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Ends the body with `error`, one poll later: hyper writes out what it holds (the head,
    /// the chunks before) when a body waits, so the client gets them and then the cut (the
    /// chunked body without its end), instead of a connection closed with nothing sent.
    fn fail(
        &mut self,
        error: BodyError,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.done = true;
        self.failed = Some(error);
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Whether the body has ended.
    pub fn is_end_stream(&self) -> bool {
        self.done && self.held.is_none() && self.failed.is_none()
    }

    /// The decoded length is not known in advance.
    pub fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// Decodes `data` whole (for checks, tests and tools).
///
/// # Errors
/// Invalid input, or output past `limit`.
pub fn decode_all(coding: Coding, data: &[u8], limit: u64) -> Result<Vec<u8>, DecodeError> {
    let mut decoder = Decoder::new(coding, limit);
    let mut out = Vec::new();
    decoder.feed(Bytes::copy_from_slice(data));
    while let Some(chunk) = decoder.step()? {
        out.extend_from_slice(&chunk);
    }
    while let Some(chunk) = decoder.finish()? {
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// Checks a coded body as it passes on its way to the store, keeping none of its decoded
/// bytes: a body that is not what its `Content-Encoding` says, or that decodes past the limit,
/// must not be stored (its readers get it as the backend sent it).
#[derive(Default)]
pub struct Check {
    decoder: Option<Decoder>,
    failed: Option<DecodeError>,
}

impl Check {
    /// A check of a body coded with `coding` (none: nothing to check).
    pub fn new(coding: Option<Coding>, limit: u64) -> Check {
        Check {
            decoder: coding.map(|c| Decoder::new(c, limit)),
            failed: None,
        }
    }

    /// Decodes `data`, the body's next chunk.
    pub fn feed(&mut self, data: &Bytes) {
        self.run(|decoder| {
            decoder.feed(data.clone());
            while decoder.step()?.is_some() {}
            Ok(())
        });
    }

    /// The body has ended.
    pub fn end(&mut self) {
        self.run(|decoder| {
            while decoder.finish()?.is_some() {}
            Ok(())
        });
    }

    fn run(&mut self, step: impl FnOnce(&mut Decoder) -> Result<(), DecodeError>) {
        if let Some(decoder) = &mut self.decoder {
            if let Err(error) = step(decoder) {
                self.failed = Some(error);
                self.decoder = None;
            }
        }
    }

    /// Why the body may not be stored, if it may not.
    pub fn failed(&self) -> Option<&DecodeError> {
        self.failed.as_ref()
    }
}
