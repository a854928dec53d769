//! A value's record on flash: a 28-byte header, the key, the value. The
//! header carries what a hit needs (client flags, deadline, CAS, the
//! entry's marks) and a CRC-32 over the header's other fields, the key and
//! the value, so a damaged or overwritten record is found, never served.
//!
//! ```text
//! 0  magic   u8  (0xb7)     1  marks      u8    2  key length u16
//! 4  value length u32       8  client flags u32 12 deadline  u32
//! 16 CAS u64                24 CRC-32 of bytes 0..24, key, value
//! ```
//! All little-endian.

/// Bytes before the key.
pub(crate) const HEADER: usize = 28;
const MAGIC: u8 = 0xb7;
const CRC_AT: usize = 24;

/// The fields of a record besides its key and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Fields {
    pub flags: u32,
    pub exptime: u32,
    pub cas: u64,
    pub marks: u8,
}

/// A record read back and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    pub key: &'a [u8],
    pub value: &'a [u8],
    pub fields: Fields,
}

/// Why bytes are not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Damage {
    /// Fewer bytes than the header says.
    Short,
    /// Not a record's header, or its CRC does not match.
    BadCrc,
}

/// The length of the record of a key and a value.
pub(crate) fn len(key_len: usize, value_len: usize) -> usize {
    HEADER + key_len + value_len
}

/// Appends the record of `key`, `value` and `fields` to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, key: &[u8], value: &[u8], fields: &Fields) {
    let start = out.len();
    out.push(MAGIC);
    out.push(fields.marks);
    // Keys are at most `KEY_MAX` (4,095) bytes; values fit a write buffer.
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(&fields.flags.to_le_bytes());
    out.extend_from_slice(&fields.exptime.to_le_bytes());
    out.extend_from_slice(&fields.cas.to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&out[start..start + CRC_AT]);
    h.update(key);
    h.update(value);
    out.extend_from_slice(&h.finalize().to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The length of the record starting `buf`, from its header alone: `None`
/// when `buf` is shorter than a header or does not start with one.
pub(crate) fn len_at(buf: &[u8]) -> Option<usize> {
    if buf.len() < HEADER || buf[0] != MAGIC {
        return None;
    }
    Some(len(u16_at(buf, 2) as usize, u32_at(buf, 4) as usize))
}

/// Reads and checks the record at the start of `buf`.
pub(crate) fn decode(buf: &[u8]) -> Result<Record<'_>, Damage> {
    if buf.len() < HEADER {
        return Err(Damage::Short);
    }
    let total = len_at(buf).ok_or(Damage::BadCrc)?;
    if buf.len() < total {
        return Err(Damage::Short);
    }
    let key_end = HEADER + u16_at(buf, 2) as usize;
    let (key, value) = (&buf[HEADER..key_end], &buf[key_end..total]);
    let mut h = crc32fast::Hasher::new();
    h.update(&buf[..CRC_AT]);
    h.update(key);
    h.update(value);
    if h.finalize() != u32_at(buf, CRC_AT) {
        return Err(Damage::BadCrc);
    }
    let cas = u64::from_le_bytes(buf[16..24].try_into().map_err(|_| Damage::Short)?);
    Ok(Record {
        key,
        value,
        fields: Fields {
            flags: u32_at(buf, 8),
            exptime: u32_at(buf, 12),
            cas,
            marks: buf[1],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut out = Vec::new();
        let fields = Fields {
            flags: 7,
            exptime: 1_900_000_000,
            cas: 0x0102_0304_0506_0708,
            marks: 2,
        };
        encode(&mut out, b"key:1", b"the value", &fields);
        out
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let buf = sample();
        assert_eq!(buf.len(), len(5, 9));
        assert_eq!(len_at(&buf), Some(buf.len()));
        let r = decode(&buf).expect("a record");
        assert_eq!((r.key, r.value), (&b"key:1"[..], &b"the value"[..]));
        assert_eq!(r.fields.cas, 0x0102_0304_0506_0708);
        assert_eq!(
            (r.fields.flags, r.fields.exptime, r.fields.marks),
            (7, 1_900_000_000, 2)
        );
    }

    #[test]
    fn any_flipped_bit_or_missing_byte_is_found() {
        let buf = sample();
        for i in 0..buf.len() {
            for bit in 0..8 {
                let mut bad = buf.clone();
                bad[i] ^= 1 << bit;
                assert!(decode(&bad).is_err(), "bit {bit} of byte {i}");
            }
        }
        for cut in 0..buf.len() {
            assert!(decode(&buf[..cut]).is_err(), "cut at {cut}");
        }
    }
}
