//! The HTTP-date fields a cache reads (`Date`, `Expires`, `Last-Modified`, `If-Modified-Since`;
//! RFC 9110 §5.6.7), parsed with the `httpdate` crate, which accepts the three formats
//! recipients must accept (IMF-fixdate, RFC 850, asctime).
//!
//! Each of these fields is a single date. Several lines that all give the same instant are
//! that instant; lines that disagree, an unparsable value (`Expires: 0`) or bytes that are not
//! ASCII make the field [`FieldDate::Invalid`]; what invalid means is the caller's rule (for
//! `Expires`: already expired, RFC 9111 §5.3).

use std::time::SystemTime;

use http::{HeaderMap, HeaderName};

/// A date field as read from a header map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldDate {
    /// The field is not there.
    Absent,
    /// The field's instant.
    Valid(SystemTime),
    /// The field is there but is not one valid date.
    Invalid,
}

impl FieldDate {
    /// The instant, when valid.
    pub fn valid(self) -> Option<SystemTime> {
        match self {
            FieldDate::Valid(time) => Some(time),
            FieldDate::Absent | FieldDate::Invalid => None,
        }
    }
}

/// Reads date field `name` from `headers`.
pub fn read(headers: &HeaderMap, name: &HeaderName) -> FieldDate {
    let mut found = FieldDate::Absent;
    for value in headers.get_all(name) {
        let parsed = value
            .to_str()
            .ok()
            .and_then(|text| httpdate::parse_http_date(text.trim()).ok());
        found = match (found, parsed) {
            (_, None) => return FieldDate::Invalid,
            (FieldDate::Absent, Some(time)) => FieldDate::Valid(time),
            (FieldDate::Valid(seen), Some(time)) if seen == time => FieldDate::Valid(seen),
            _ => return FieldDate::Invalid,
        };
    }
    found
}

/// Formats `time` as an IMF-fixdate (RFC 9110 §5.6.7), the form a sender generates.
pub fn format(time: SystemTime) -> String {
    httpdate::fmt_http_date(time)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{DATE, EXPIRES};
    use http::HeaderValue;
    use std::time::Duration;

    fn map(values: &[&'static str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(EXPIRES, HeaderValue::from_static(value));
        }
        headers
    }

    const T: u64 = 784_111_777; // Sun, 06 Nov 1994 08:49:37 GMT

    // RFC 9110 §5.6.7: the three formats a recipient accepts.
    #[test]
    fn three_formats() {
        let expected = FieldDate::Valid(SystemTime::UNIX_EPOCH + Duration::from_secs(T));
        for value in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            " Sun, 06 Nov 1994 08:49:37 GMT ",
        ] {
            assert_eq!(read(&map(&[value]), &EXPIRES), expected, "{value}");
        }
    }

    // RFC 9111 §5.3: invalid dates, especially "0", are invalid (the caller: already expired).
    #[test]
    fn invalid_values() {
        for value in [
            "0",
            "-1",
            "tomorrow",
            "",
            "Sun, 06 Nov 1994 08:49:37",
            "Sun, 32 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(
                read(&map(&[value]), &EXPIRES),
                FieldDate::Invalid,
                "{value}"
            );
        }
        let mut headers = HeaderMap::new();
        headers.insert(EXPIRES, HeaderValue::from_bytes(b"\xff\xfe").unwrap());
        assert_eq!(read(&headers, &EXPIRES), FieldDate::Invalid);
    }

    // A singleton field given twice: the same instant is fine, disagreement is invalid.
    #[test]
    fn repeated_lines() {
        let same = map(&[
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
        ]);
        assert!(matches!(read(&same, &EXPIRES), FieldDate::Valid(_)));
        let differ = map(&[
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:38 GMT",
        ]);
        assert_eq!(read(&differ, &EXPIRES), FieldDate::Invalid);
        let one_bad = map(&["Sun, 06 Nov 1994 08:49:37 GMT", "0"]);
        assert_eq!(read(&one_bad, &EXPIRES), FieldDate::Invalid);
        assert_eq!(read(&HeaderMap::new(), &DATE), FieldDate::Absent);
    }

    #[test]
    fn format_round_trips() {
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(T);
        assert_eq!(format(time), "Sun, 06 Nov 1994 08:49:37 GMT");
    }
}
