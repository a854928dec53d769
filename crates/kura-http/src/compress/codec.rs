//! gzip both ways, streaming: the encoder a fetch runs the backend's body through before it
//! reaches the flight (and the store), and the decoding body that serves a gzip object to a
//! client that does not accept gzip.

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use flate2::write::{GzEncoder, MultiGzDecoder};
use flate2::Compression;
use http_body::{Body as _, Frame, SizeHint};

use crate::body::Body;

/// Compressed input decoded per step: bounds the output of one step (about 1 MiB for ordinary
/// text, more only for content that compresses a thousandfold).
const STEP: usize = 4 << 10;

/// A streaming gzip encoder.
pub struct Encoder {
    inner: GzEncoder<Vec<u8>>,
    /// Bytes of plain input.
    pub input: usize,
}

impl Encoder {
    /// An encoder at `level` (1 fastest .. 9 smallest).
    pub fn new(level: u32) -> Encoder {
        Encoder {
            inner: GzEncoder::new(Vec::new(), Compression::new(level.clamp(1, 9))),
            input: 0,
        }
    }

    /// Compresses `chunk` and returns what is ready, flushed (a sync flush) so that the
    /// readers get each backend chunk's content without waiting for the next.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        self.input += chunk.len();
        // Writing into a Vec cannot fail.
        let _ = self.inner.write_all(chunk);
        let _ = self.inner.flush();
        Bytes::from(std::mem::take(self.inner.get_mut()))
    }

    /// The end of the stream (the gzip trailer); nothing more may be pushed.
    pub fn finish(&mut self) -> Bytes {
        // Writing into a Vec cannot fail.
        let _ = self.inner.try_finish();
        Bytes::from(std::mem::take(self.inner.get_mut()))
    }
}

/// Compresses `data` whole (for tests and tools).
pub fn gzip(data: &[u8], level: u32) -> Vec<u8> {
    let mut encoder = Encoder::new(level);
    let mut out = encoder.push(data).to_vec();
    out.extend_from_slice(&encoder.finish());
    out
}

/// The error of a [`Body`].
type BodyError = Box<dyn std::error::Error + Send + Sync>;

/// A body that decodes the gzip body it wraps, chunk by chunk.
pub struct Gunzip {
    inner: Body,
    decoder: MultiGzDecoder<Vec<u8>>,
    pending: Bytes,
    done: bool,
}

impl Gunzip {
    /// Decodes `inner`.
    pub fn new(inner: Body) -> Gunzip {
        Gunzip {
            inner,
            decoder: MultiGzDecoder::new(Vec::new()),
            pending: Bytes::new(),
            done: false,
        }
    }

    fn take(&mut self) -> Option<Bytes> {
        let out = std::mem::take(self.decoder.get_mut());
        (!out.is_empty()).then(|| Bytes::from(out))
    }

    /// The next decoded chunk.
    pub fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        loop {
            if !self.pending.is_empty() {
                let step = self.pending.len().min(STEP);
                let piece = self.pending.split_to(step);
                // The decoder hands its output on at a flush (else at the next write).
                let written = self.decoder.write_all(&piece);
                if let Err(error) = written.and_then(|()| self.decoder.flush()) {
                    self.done = true;
                    return Poll::Ready(Some(Err(error.into())));
                }
                if let Some(out) = self.take() {
                    return Poll::Ready(Some(Ok(Frame::data(out))));
                }
                continue;
            }
            if self.done {
                return Poll::Ready(None);
            }
            match Pin::new(&mut self.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.pending = data;
                    }
                }
                Poll::Ready(Some(Err(error))) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(error)));
                }
                Poll::Ready(None) => {
                    self.done = true;
                    if let Err(error) = self.decoder.try_finish() {
                        return Poll::Ready(Some(Err(error.into())));
                    }
                    if let Some(out) = self.take() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Whether the body has ended.
    pub fn is_end_stream(&self) -> bool {
        self.done && self.pending.is_empty()
    }

    /// The decoded length is not known in advance.
    pub fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
