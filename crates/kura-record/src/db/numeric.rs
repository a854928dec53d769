//! PostgreSQL's `NUMERIC` in its binary form, read into and written from
//! exact decimal text (`-12.50`), so that no digit is lost to a float or
//! to a fixed-precision decimal type: a header of four 16-bit numbers
//! (digit count, weight of the first digit, sign, display scale) and then
//! base-10000 digits.

const POSITIVE: u16 = 0x0000;
const NEGATIVE: u16 = 0x4000;
const NAN: u16 = 0xC000;
const PINF: u16 = 0xD000;
const NINF: u16 = 0xF000;

/// The text of a binary `NUMERIC`.
pub(crate) fn decode(b: &[u8]) -> Result<String, String> {
    let word = |i: usize| -> Result<u16, String> {
        b.get(2 * i..2 * i + 2)
            .map(|w| u16::from_be_bytes([w[0], w[1]]))
            .ok_or_else(|| "NUMERIC: short value".to_string())
    };
    let ndigits = usize::from(word(0)?);
    let weight = i64::from(word(1)? as i16);
    let sign = word(2)?;
    let dscale = usize::from(word(3)?);
    match sign {
        NAN => return Ok("NaN".into()),
        PINF => return Ok("Infinity".into()),
        NINF => return Ok("-Infinity".into()),
        POSITIVE | NEGATIVE => {}
        s => return Err(format!("NUMERIC: sign {s:#x}")),
    }
    let mut digits = Vec::with_capacity(ndigits);
    for i in 0..ndigits {
        let d = word(4 + i)?;
        if d > 9999 {
            return Err(format!("NUMERIC: digit {d}"));
        }
        digits.push(d);
    }
    // Digit i is worth 10000^(weight - i).
    let digit = |power: i64| -> u16 {
        usize::try_from(weight - power)
            .ok()
            .and_then(|i| digits.get(i).copied())
            .unwrap_or(0)
    };
    let mut out = String::new();
    if sign == NEGATIVE {
        out.push('-');
    }
    if weight < 0 {
        out.push('0');
    } else {
        out.push_str(&digit(weight).to_string());
        for p in (0..weight).rev() {
            out.push_str(&format!("{:04}", digit(p)));
        }
    }
    if dscale > 0 {
        out.push('.');
        let mut frac = String::with_capacity(dscale + 4);
        let mut p = -1;
        while frac.len() < dscale {
            frac.push_str(&format!("{:04}", digit(p)));
            p -= 1;
        }
        frac.truncate(dscale);
        out.push_str(&frac);
    }
    Ok(out)
}

/// The binary `NUMERIC` of decimal text (`-12.50`, `3`, `NaN`).
pub(crate) fn encode(text: &str) -> Result<Vec<u8>, String> {
    let bad = || format!("{text:?} is not a decimal number");
    let words = |v: &[u16]| v.iter().flat_map(|w| w.to_be_bytes()).collect::<Vec<u8>>();
    match text {
        "NaN" => return Ok(words(&[0, 0, NAN, 0])),
        "Infinity" => return Ok(words(&[0, 0, PINF, 0])),
        "-Infinity" => return Ok(words(&[0, 0, NINF, 0])),
        _ => {}
    }
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() && frac.is_empty()
        || !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit())
    {
        return Err(bad());
    }
    let int = int.trim_start_matches('0');
    let dscale = u16::try_from(frac.len()).map_err(|_| bad())?;
    // Pad the integer part on the left and the fraction on the right to
    // whole groups of four.
    let ipad = (4 - int.len() % 4) % 4;
    let fpad = (4 - frac.len() % 4) % 4;
    let all: String = "0".repeat(ipad) + int + frac + &"0".repeat(fpad);
    let mut groups: Vec<u16> = all
        .as_bytes()
        .chunks(4)
        .map(|c| c.iter().fold(0u16, |a, d| a * 10 + u16::from(d - b'0')))
        .collect();
    let mut weight = i64::try_from((ipad + int.len()) / 4).map_err(|_| bad())? - 1;
    // Leading and trailing zero groups are not sent.
    while groups.first() == Some(&0) {
        groups.remove(0);
        weight -= 1;
    }
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    let n = u16::try_from(groups.len()).map_err(|_| bad())?;
    let w = i16::try_from(weight).map_err(|_| bad())? as u16;
    let sign = if negative && !groups.is_empty() {
        NEGATIVE
    } else {
        POSITIVE
    };
    let mut out = words(&[n, w, sign, dscale]);
    out.extend(words(&groups));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_through_the_binary_form() {
        for t in [
            "0",
            "1",
            "-1",
            "12.50",
            "0.0001",
            "-0.00012",
            "10000",
            "123456789.123456789",
            "0.10",
            "99999999999999999999999999999999999999.5",
            "NaN",
            "Infinity",
            "-Infinity",
            "100.000",
        ] {
            let b = encode(t).expect(t);
            assert_eq!(decode(&b).as_deref(), Ok(t), "{t}");
        }
        // PostgreSQL's own bytes for 12.50: 2 digits, weight 0, +, scale 2: 12, 5000.
        let pg = [0, 2, 0, 0, 0, 0, 0, 2, 0, 12, 0x13, 0x88];
        assert_eq!(decode(&pg).as_deref(), Ok("12.50"));
        assert!(encode("1e5").is_err());
        assert!(encode("").is_err());
        assert!(decode(&[0, 1]).is_err());
    }
}
