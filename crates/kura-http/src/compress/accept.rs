//! The content codings a request accepts: `Accept-Encoding` (RFC 9110 §12.5.3) read with its
//! weights, for the codings kura can decode.

use http::header::ACCEPT_ENCODING;
use http::HeaderMap;

/// A content coding kura decodes (and so may store and serve whatever a client accepts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// gzip (RFC 9110 §8.4.1.3; `x-gzip` is the same).
    Gzip,
    /// Brotli (RFC 7932).
    Br,
    /// Zstandard (RFC 8878).
    Zstd,
}

impl Coding {
    /// Every coding, in the order kura names them to a backend.
    pub const ALL: [Coding; 3] = [Coding::Gzip, Coding::Br, Coding::Zstd];

    /// Its name in `Content-Encoding` and `Accept-Encoding`.
    pub fn name(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// The coding a `Content-Encoding` member names (any case), if kura decodes it.
    pub fn parse(name: &str) -> Option<Coding> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("gzip") || name.eq_ignore_ascii_case("x-gzip") {
            Some(Coding::Gzip)
        } else if name.eq_ignore_ascii_case("br") {
            Some(Coding::Br)
        } else if name.eq_ignore_ascii_case("zstd") {
            Some(Coding::Zstd)
        } else {
            None
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// The codings a request accepts (each with a weight above zero); identity is always served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Accepted(u8);

impl Accepted {
    /// None but identity.
    pub const IDENTITY: Accepted = Accepted(0);

    /// The set of `codings`.
    pub fn of_codings(codings: &[Coding]) -> Accepted {
        Accepted(codings.iter().fold(0, |bits, c| bits | c.bit()))
    }

    /// Whether `coding` is accepted.
    pub fn accepts(self, coding: Coding) -> bool {
        self.0 & coding.bit() != 0
    }

    /// What the request's `Accept-Encoding` accepts: a coding listed with a weight above
    /// zero, or else `*` with a weight above zero (a `gzip;q=0` refuses gzip even with `*`).
    /// No `Accept-Encoding` at all counts as identity only: RFC 9110 would allow any coding,
    /// but clients that send nothing are scripts and old tools that expect plain bytes
    /// (Varnish and nginx choose the same).
    pub fn of(headers: &HeaderMap) -> Accepted {
        let mut weights: [Option<u32>; 3] = [None; 3];
        let mut star = None;
        for line in headers.get_all(ACCEPT_ENCODING) {
            let Ok(line) = line.to_str() else {
                continue;
            };
            for member in line.split(',') {
                let mut parts = member.split(';');
                let name = parts.next().unwrap_or("").trim();
                if name.is_empty() {
                    continue;
                }
                let mut weight = Some(1000);
                for param in parts {
                    let Some((key, value)) = param.split_once('=') else {
                        weight = None;
                        continue;
                    };
                    if key.trim().eq_ignore_ascii_case("q") {
                        weight = qvalue(value.trim());
                    }
                }
                // A member with a malformed weight is ignored (neither accepted nor refused).
                let Some(weight) = weight else {
                    continue;
                };
                if let Some(coding) = Coding::parse(name) {
                    let slot = &mut weights[coding as usize];
                    *slot = Some(slot.map_or(weight, |w| w.max(weight)));
                } else if name == "*" {
                    star = Some(weight);
                }
            }
        }
        let mut accepted = Accepted::IDENTITY;
        for coding in Coding::ALL {
            if weights[coding as usize].or(star).is_some_and(|w| w > 0) {
                accepted.0 |= coding.bit();
            }
        }
        accepted
    }
}

/// Whether the request's `Accept-Encoding` accepts gzip ([`Accepted::of`]).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    Accepted::of(headers).accepts(Coding::Gzip)
}

/// A `qvalue` (RFC 9110 §12.4.2: `0[.ddd]` or `1[.000]`) in thousandths, `None` if malformed.
fn qvalue(text: &str) -> Option<u32> {
    let (int, frac) = match text.split_once('.') {
        Some((int, frac)) => (int, frac),
        None => (text, ""),
    };
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut thousandths: u32 = 0;
    for (i, digit) in frac.bytes().enumerate() {
        thousandths += u32::from(digit - b'0') * [100, 10, 1][i];
    }
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn accepts(values: &[&'static str]) -> bool {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(ACCEPT_ENCODING, HeaderValue::from_static(value));
        }
        accepts_gzip(&headers)
    }

    // RFC 9110 §12.5.3: codings with weights; q=0 means "not acceptable".
    #[test]
    fn weights() {
        assert!(accepts(&["gzip"]));
        assert!(accepts(&["gzip, deflate, br"]));
        assert!(accepts(&["br;q=1.0, gzip;q=0.8, *;q=0.1"]));
        assert!(accepts(&["GZIP"]));
        assert!(accepts(&["x-gzip"]));
        assert!(accepts(&["deflate", "gzip"]));
        assert!(accepts(&["gzip ; q=0.001"]));
        assert!(!accepts(&["gzip;q=0"]));
        assert!(!accepts(&["gzip;q=0.000"]));
        assert!(!accepts(&["gzip;Q=0"]));
        assert!(!accepts(&["br, deflate"]));
        assert!(!accepts(&["identity"]));
        assert!(!accepts(&[""]));
        assert!(!accepts(&[]));
    }

    // `*` matches any coding not listed; an explicit gzip;q=0 wins over it.
    #[test]
    fn star() {
        assert!(accepts(&["*"]));
        assert!(accepts(&["br, *;q=0.5"]));
        assert!(!accepts(&["*;q=0"]));
        assert!(!accepts(&["gzip;q=0, *"]));
        assert!(!accepts(&["*", "gzip;q=0"]));
    }

    // Malformed weights do not make a coding acceptable.
    #[test]
    fn malformed_weights_are_ignored() {
        assert!(!accepts(&["gzip;q=2"]));
        assert!(!accepts(&["gzip;q=1.5"]));
        assert!(!accepts(&["gzip;q=0.0001"]));
        assert!(!accepts(&["gzip;q=abc"]));
        assert!(!accepts(&["gzip;q"]));
        assert!(accepts(&["gzip;q=1.000"]));
        assert!(accepts(&["gzip;q=bad, gzip"]));
    }

    fn accepted(value: &'static str) -> Accepted {
        let mut headers = HeaderMap::new();
        headers.append(ACCEPT_ENCODING, HeaderValue::from_static(value));
        Accepted::of(&headers)
    }

    // What browsers and tools send.
    #[test]
    fn every_coding() {
        let all = Accepted::of_codings(&Coding::ALL);
        assert_eq!(accepted("gzip, deflate, br, zstd"), all);
        assert_eq!(
            accepted("gzip, deflate, br"),
            Accepted::of_codings(&[Coding::Gzip, Coding::Br])
        );
        assert_eq!(accepted("br;q=1.0, gzip;q=0.8, *;q=0.1"), all);
        assert_eq!(
            accepted("*, br;q=0"),
            Accepted::of_codings(&[Coding::Gzip, Coding::Zstd])
        );
        assert_eq!(accepted("ZSTD"), Accepted::of_codings(&[Coding::Zstd]));
        assert_eq!(accepted("identity"), Accepted::IDENTITY);
        assert_eq!(accepted("deflate"), Accepted::IDENTITY);
        assert_eq!(accepted("br;q=x"), Accepted::IDENTITY);
        assert_eq!(Accepted::of(&HeaderMap::new()), Accepted::IDENTITY);
        assert_eq!(Coding::parse(" X-GZIP "), Some(Coding::Gzip));
        assert_eq!(Coding::parse("compress"), None);
    }

    #[test]
    fn qvalues() {
        assert_eq!(qvalue("0"), Some(0));
        assert_eq!(qvalue("0.5"), Some(500));
        assert_eq!(qvalue("0.25"), Some(250));
        assert_eq!(qvalue("1"), Some(1000));
        assert_eq!(qvalue("1."), Some(1000));
        assert_eq!(qvalue("1.001"), None);
        assert_eq!(qvalue("-0"), None);
    }
}
