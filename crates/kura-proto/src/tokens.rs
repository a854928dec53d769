//! The request-line tokenizer. It splits on single spaces exactly as
//! memcached does (tabs are part of a token), keeps at most
//! [`MAX_TOKENS`] tokens and remembers where the unprocessed rest of a
//! long line starts, which only multi-key gets go on to read.

/// memcached tokenizes at most this many tokens per pass (counting its
/// terminal pseudo-token, which kura models as [`Tokens::rest`]).
pub const MAX_TOKENS: usize = 24;

/// The tokens of one request line, borrowed from the read buffer.
#[derive(Debug, Clone, Copy)]
pub struct Tokens<'a> {
    toks: [&'a [u8]; MAX_TOKENS - 1],
    len: usize,
    rest: &'a [u8],
}

impl<'a> Tokens<'a> {
    /// Tokenizes `line` (without its line ending).
    pub fn new(line: &'a [u8]) -> Self {
        // Filled in place: the array is most of the value, and copying a
        // local one out cost a third of the whole tokenizing.
        let mut t = Tokens {
            toks: [&[]; MAX_TOKENS - 1],
            len: 0,
            rest: &[],
        };
        let mut left = line;
        while let Some(start) = left.iter().position(|&b| b != b' ') {
            left = &left[start..];
            if t.len == MAX_TOKENS - 1 {
                t.rest = left;
                break;
            }
            let end = left.iter().position(|&b| b == b' ').unwrap_or(left.len());
            t.toks[t.len] = &left[..end];
            t.len += 1;
            left = &left[end..];
        }
        t
    }

    /// Number of tokens seen in this pass.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the line held no token at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// memcached's `ntokens`: the token count plus its terminal token.
    pub fn ntokens(&self) -> usize {
        self.len + 1
    }

    /// Token `i`, or an empty slice past the end (memcached's terminal token).
    pub fn get(&self, i: usize) -> &'a [u8] {
        if i < self.len {
            self.toks[i]
        } else {
            &[]
        }
    }

    /// All tokens of this pass.
    pub fn as_slice(&self) -> &[&'a [u8]] {
        &self.toks[..self.len]
    }

    /// The part of the line past the last token kept, when the line held more
    /// tokens than one pass keeps.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }

    /// Whether the token before the terminal one is `noreply`, the test
    /// memcached applies (so a malformed line may still count as noreply).
    pub fn noreply(&self) -> bool {
        self.len >= 1 && self.rest.is_empty() && self.toks[self.len - 1] == b"noreply"
    }
}

/// Iterates over space-separated words of a byte string.
pub fn words(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    s.split(|&b| b == b' ').filter(|w| !w.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_spaces_only() {
        let t = Tokens::new(b"  get a\tb  c ");
        assert_eq!(t.as_slice(), &[&b"get"[..], b"a\tb", b"c"]);
        assert_eq!(t.ntokens(), 4);
        assert!(t.rest().is_empty());
    }

    #[test]
    fn long_lines_keep_a_rest() {
        let line: Vec<u8> = (0..30)
            .map(|i| format!("k{i}"))
            .collect::<Vec<_>>()
            .join(" ")
            .into_bytes();
        let t = Tokens::new(&line);
        assert_eq!(t.len(), MAX_TOKENS - 1);
        assert_eq!(t.rest(), b"k23 k24 k25 k26 k27 k28 k29");
    }

    #[test]
    fn noreply_is_the_last_token() {
        assert!(Tokens::new(b"set a 0 0 1 noreply").noreply());
        assert!(!Tokens::new(b"set a 0 0 1").noreply());
    }
}
