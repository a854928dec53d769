//! What may be sent: keys memcached's text and meta protocols accept as
//! they are (1 to 250 bytes, no space or control byte; UTF-8 is fine), and
//! values under the configured limit. Checked per key before anything is
//! written, so one bad key fails alone instead of desynchronising a batch.

use crate::error::{Error, KeyError};

/// memcached's longest key.
pub const KEY_MAX: usize = 250;

/// Checks a key.
///
/// # Errors
/// Empty, longer than [`KEY_MAX`] bytes, or holding a byte at or below
/// 0x20 (space and control bytes) or 0x7f.
pub fn check_key(key: &[u8]) -> Result<(), KeyError> {
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    if key.len() > KEY_MAX {
        return Err(KeyError::TooLong(key.len()));
    }
    match key.iter().find(|&&b| b <= b' ' || b == 0x7f) {
        Some(&b) => Err(KeyError::ForbiddenByte(b)),
        None => Ok(()),
    }
}

/// Checks a key and a value against `max_value`.
pub(crate) fn check_item(key: &[u8], value: &[u8], max_value: usize) -> Result<(), Error> {
    check_key(key)?;
    if value.len() > max_value {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max: max_value,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_utf8_and_250_bytes() {
        assert_eq!(check_key("ключ-日本語".as_bytes()), Ok(()));
        assert_eq!(check_key(&[b'a'; 250]), Ok(()));
        assert_eq!(check_key(b"~!@#$%^&*()"), Ok(()));
    }

    #[test]
    fn rejects_what_the_protocol_cannot_carry() {
        assert_eq!(check_key(b""), Err(KeyError::Empty));
        assert_eq!(check_key(&[b'a'; 251]), Err(KeyError::TooLong(251)));
        for bad in [&b"a b"[..], b"a\r\nset x", b"a\0", b"tab\t", b"del\x7f"] {
            assert!(
                matches!(check_key(bad), Err(KeyError::ForbiddenByte(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn values_over_the_limit_are_refused() {
        assert!(check_item(b"k", &[0; 10], 10).is_ok());
        assert!(matches!(
            check_item(b"k", &[0; 11], 10),
            Err(Error::ValueTooLarge { len: 11, max: 10 })
        ));
        assert!(matches!(check_item(b"k k", b"", 10), Err(Error::BadKey(_))));
    }
}
