//! Whether a request accepts gzip: `Accept-Encoding` (RFC 9110 §12.5.3) read with its weights.

use http::header::ACCEPT_ENCODING;
use http::HeaderMap;

/// Whether the request's `Accept-Encoding` accepts gzip: `gzip` (or `x-gzip`) with a weight
/// above zero, or else `*` with a weight above zero. A `gzip;q=0` refuses it even with `*`.
/// No `Accept-Encoding` at all counts as identity only: RFC 9110 would allow any coding, but
/// clients that send nothing are scripts and old tools that expect plain bytes (Varnish and
/// nginx choose the same).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut gzip = None;
    let mut star = None;
    for line in headers.get_all(ACCEPT_ENCODING) {
        let Ok(line) = line.to_str() else {
            continue;
        };
        for member in line.split(',') {
            let mut parts = member.split(';');
            let coding = parts.next().unwrap_or("").trim();
            if coding.is_empty() {
                continue;
            }
            let mut weight = Some(1000);
            for param in parts {
                let Some((name, value)) = param.split_once('=') else {
                    weight = None;
                    continue;
                };
                if name.trim().eq_ignore_ascii_case("q") {
                    weight = qvalue(value.trim());
                }
            }
            // A member with a malformed weight is ignored (neither accepted nor refused).
            let Some(weight) = weight else {
                continue;
            };
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                gzip = Some(gzip.map_or(weight, |w: u32| w.max(weight)));
            } else if coding == "*" {
                star = Some(weight);
            }
        }
    }
    match (gzip, star) {
        (Some(weight), _) => weight > 0,
        (None, Some(weight)) => weight > 0,
        (None, None) => false,
    }
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
