//! Where a chunked body ends (RFC 9112 §7.1), read with hyper's grammar and limits: hex size
//! digits (any number of leading zeros, no overflow), optional white space, extensions up to
//! a CR (never a bare LF), CRLF after the size line and after the data, then trailer lines ending
//! in CRLF and an empty line. A bare LF anywhere hyper requires CRLF is malformed, as are more
//! extension bytes or trailer bytes and lines than hyper takes.

/// Extension bytes a whole body may carry (hyper's limit).
const EXTENSIONS_LIMIT: u64 = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The first digit of a size line.
    Start,
    /// More size digits.
    Size,
    /// White space after the size.
    SizeLws,
    /// A chunk extension, up to CR.
    Extension,
    /// The LF of a size line.
    SizeLf,
    /// Chunk data.
    Data,
    /// The CR after chunk data.
    DataCr,
    /// The LF after chunk data.
    DataLf,
    /// After the last chunk's size line: CR of the final empty line, or a trailer line.
    EndCr,
    /// The LF of the final empty line.
    EndLf,
    /// A trailer line, up to CR.
    Trailer,
    /// The LF of a trailer line.
    TrailerLf,
    /// The body is over.
    End,
}

/// How far a chunked body has been read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More bytes are needed.
    More,
    /// The body ended with the last byte consumed.
    Done,
    /// The byte after those consumed breaks the grammar or a limit.
    Malformed,
}

/// A chunked body being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunked {
    state: State,
    /// The size being read, then the data bytes left in the chunk.
    size: u64,
    extensions: u64,
    /// Trailer bytes read (when the trailer section has begun).
    trailer_bytes: Option<usize>,
    trailer_lines: usize,
    max_trailer_bytes: usize,
    max_trailer_lines: usize,
}

impl Chunked {
    /// A body whose trailer section may hold at most `max_trailer_bytes` bytes and
    /// `max_trailer_lines` lines (hyper's `max_header_size` and `max_headers`).
    pub fn new(max_trailer_bytes: usize, max_trailer_lines: usize) -> Chunked {
        Chunked {
            state: State::Start,
            size: 0,
            extensions: 0,
            trailer_bytes: None,
            trailer_lines: 0,
            max_trailer_bytes,
            max_trailer_lines,
        }
    }

    /// Reads from `input`: the bytes consumed, and what they reached. After `Done` or
    /// `Malformed` nothing more is consumed.
    pub fn feed(&mut self, input: &[u8]) -> (usize, Progress) {
        let mut at = 0;
        while at < input.len() {
            match self.state {
                State::End => return (at, Progress::Done),
                State::Data => {
                    let left = usize::try_from(self.size).unwrap_or(usize::MAX);
                    let take = left.min(input.len() - at);
                    at += take;
                    self.size -= take as u64;
                    if self.size == 0 {
                        self.state = State::DataCr;
                    }
                }
                _ => match self.step(input[at]) {
                    Some(next) => {
                        self.state = next;
                        at += 1;
                    }
                    None => return (at, Progress::Malformed),
                },
            }
        }
        let progress = if self.state == State::End {
            Progress::Done
        } else {
            Progress::More
        };
        (at, progress)
    }

    /// The state after `byte`, or `None` when it is malformed.
    fn step(&mut self, byte: u8) -> Option<State> {
        use State::*;
        Some(match (self.state, byte) {
            (Start | Size, b) if b.is_ascii_hexdigit() => {
                let digit = u64::from(char::from(b).to_digit(16)?);
                self.size = self.size.checked_mul(16)?.checked_add(digit)?;
                Size
            }
            (Start, _) => return None,
            (Size | SizeLws, b'\t' | b' ') => SizeLws,
            (Size | SizeLws | Extension, b'\r') => SizeLf,
            (Size | SizeLws, b';') => Extension,
            (Extension, b'\n') => return None,
            (Extension, _) => {
                self.extensions += 1;
                if self.extensions >= EXTENSIONS_LIMIT {
                    return None;
                }
                Extension
            }
            (SizeLf, b'\n') if self.size == 0 => EndCr,
            (SizeLf, b'\n') => Data,
            (DataCr, b'\r') => DataLf,
            (DataLf, b'\n') => {
                self.size = 0;
                Start
            }
            (EndCr, b'\r') => {
                self.trailer_byte()?;
                EndLf
            }
            (EndCr, _) => {
                // A trailer line begins.
                self.trailer_bytes.get_or_insert(0);
                self.trailer_byte()?;
                Trailer
            }
            (EndLf, b'\n') => {
                self.trailer_byte()?;
                End
            }
            (Trailer, b) => {
                self.trailer_byte()?;
                if b == b'\r' {
                    TrailerLf
                } else {
                    Trailer
                }
            }
            (TrailerLf, b'\n') => {
                if self.trailer_lines >= self.max_trailer_lines {
                    return None;
                }
                self.trailer_lines += 1;
                self.trailer_byte()?;
                EndCr
            }
            _ => return None,
        })
    }

    /// Counts a byte of the trailer section (once it has begun); `None` past the limit.
    fn trailer_byte(&mut self) -> Option<()> {
        if let Some(bytes) = &mut self.trailer_bytes {
            *bytes += 1;
            if *bytes >= self.max_trailer_bytes {
                return None;
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests;
