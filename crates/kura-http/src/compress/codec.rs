//! The gzip encoder a fetch runs the backend's body through before it reaches the flight (and
//! the store); decoding is in `decode.rs`.

use std::io::Write;

use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;

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
