//! The encoder a fetch runs the backend's body through before it reaches the flight (and the
//! store): gzip (flate2), or brotli when `[compression] coding = "br"`; decoding is in
//! `decode.rs`.

use std::io::Write;

use brotli::CompressorWriter;
use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;

/// brotli's window (log2 of its size): 4 MiB, far more than a page, and what brotli's tools
/// use by default (22).
const BROTLI_WINDOW: u32 = 22;

enum Inner {
    Gzip(Box<GzEncoder<Vec<u8>>>),
    /// `None` once finished (the writer is consumed to write the stream's end).
    Br(Option<Box<CompressorWriter<Vec<u8>>>>),
}

/// A streaming encoder.
pub struct Encoder {
    inner: Inner,
    /// Bytes of plain input.
    pub input: usize,
}

impl Encoder {
    /// A gzip encoder at `level` (1 fastest .. 9 smallest).
    pub fn new(level: u32) -> Encoder {
        Encoder {
            inner: Inner::Gzip(Box::new(GzEncoder::new(
                Vec::new(),
                Compression::new(level.clamp(1, 9)),
            ))),
            input: 0,
        }
    }

    /// A brotli encoder at `quality` (0 fastest .. 11 smallest).
    pub fn brotli(quality: u32) -> Encoder {
        let writer = CompressorWriter::new(Vec::new(), 4096, quality.min(11), BROTLI_WINDOW);
        Encoder {
            inner: Inner::Br(Some(Box::new(writer))),
            input: 0,
        }
    }

    /// Compresses `chunk` and returns what is ready, flushed (a sync flush) so that the
    /// readers get each backend chunk's content without waiting for the next.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        self.input += chunk.len();
        // Writing into a Vec cannot fail.
        let out = match &mut self.inner {
            Inner::Gzip(gzip) => {
                let _ = gzip.write_all(chunk);
                let _ = gzip.flush();
                std::mem::take(gzip.get_mut())
            }
            Inner::Br(Some(br)) => {
                let _ = br.write_all(chunk);
                let _ = br.flush();
                std::mem::take(br.get_mut())
            }
            Inner::Br(None) => Vec::new(),
        };
        Bytes::from(out)
    }

    /// The end of the stream (gzip's trailer, brotli's last block); nothing more may be
    /// pushed.
    pub fn finish(&mut self) -> Bytes {
        // Writing into a Vec cannot fail.
        let out = match &mut self.inner {
            Inner::Gzip(gzip) => {
                let _ = gzip.try_finish();
                std::mem::take(gzip.get_mut())
            }
            Inner::Br(br) => br.take().map(|w| w.into_inner()).unwrap_or_default(),
        };
        Bytes::from(out)
    }
}

/// Compresses `data` whole with gzip (for tests and tools).
pub fn gzip(data: &[u8], level: u32) -> Vec<u8> {
    let mut encoder = Encoder::new(level);
    let mut out = encoder.push(data).to_vec();
    out.extend_from_slice(&encoder.finish());
    out
}
