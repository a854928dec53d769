//! A value's record on flash: a 28-byte header, the key, the value. The
//! header carries what a hit needs (client flags, deadline, CAS, the
//! entry's marks) and a CRC-32 over the header's other fields, the key and
//! the value, so a damaged or overwritten record is found, never served.
//! The CRC starts from the generation of the page the record was written
//! in: a record left over from a page's earlier use fails it, so a scan of
//! the page after a restart ends where this generation's records end.
//!
//! A page starts with a marker: a record with no key and no value, the
//! [`PAGE_MARK`] mark, and the page's generation in its flags field (the
//! generations are given out in order, so markers say which page is older).
//! A record deleted while its page is kept has its magic byte turned to
//! [`DEAD`]: its length still reads, its CRC no longer matches.
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
/// The magic byte of a record deleted in place.
pub(crate) const DEAD: u8 = 0xb6;
/// The mark of a page's first record (never set on an entry's marks).
pub(crate) const PAGE_MARK: u8 = 0x80;
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

/// Appends the record of `key`, `value` and `fields`, written in a page of
/// generation `gen`, to `out`.
pub(crate) fn encode(out: &mut Vec<u8>, key: &[u8], value: &[u8], fields: &Fields, gen: u32) {
    let start = out.len();
    out.push(MAGIC);
    out.push(fields.marks);
    // Keys are at most `KEY_MAX` (4,095) bytes; values fit a write buffer.
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(&(value.len() as u32).to_le_bytes());
    out.extend_from_slice(&fields.flags.to_le_bytes());
    out.extend_from_slice(&fields.exptime.to_le_bytes());
    out.extend_from_slice(&fields.cas.to_le_bytes());
    let mut h = crc32fast::Hasher::new_with_initial(gen);
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

/// Appends the marker that starts a page of generation `gen`.
pub(crate) fn encode_mark(out: &mut Vec<u8>, gen: u32) {
    let fields = Fields {
        flags: gen,
        marks: PAGE_MARK,
        ..Fields::default()
    };
    encode(out, b"", b"", &fields, gen);
}

/// The generation of the page whose first bytes are `buf`, if they are a
/// whole, intact marker.
pub(crate) fn mark_at(buf: &[u8]) -> Option<u32> {
    if buf.len() < HEADER || buf[0] != MAGIC || buf[1] != PAGE_MARK {
        return None;
    }
    let gen = u32_at(buf, 8);
    let r = decode(&buf[..HEADER], gen).ok()?;
    (r.key.is_empty() && r.value.is_empty()).then_some(gen)
}

/// Whether the record starting `buf` was deleted in place.
pub(crate) fn is_dead(buf: &[u8]) -> bool {
    buf.first() == Some(&DEAD)
}

/// The length of the record starting `buf`, from its header alone: `None`
/// when `buf` is shorter than a header or does not start with one (live or
/// deleted in place).
pub(crate) fn len_at(buf: &[u8]) -> Option<usize> {
    if buf.len() < HEADER || (buf[0] != MAGIC && buf[0] != DEAD) {
        return None;
    }
    Some(len(u16_at(buf, 2) as usize, u32_at(buf, 4) as usize))
}

/// Reads and checks the record at the start of `buf`, written in a page of
/// generation `gen`.
pub(crate) fn decode(buf: &[u8], gen: u32) -> Result<Record<'_>, Damage> {
    if buf.len() < HEADER {
        return Err(Damage::Short);
    }
    if buf[0] != MAGIC {
        return Err(Damage::BadCrc);
    }
    let total = len_at(buf).ok_or(Damage::BadCrc)?;
    if buf.len() < total {
        return Err(Damage::Short);
    }
    let key_end = HEADER + u16_at(buf, 2) as usize;
    let (key, value) = (&buf[HEADER..key_end], &buf[key_end..total]);
    let mut h = crc32fast::Hasher::new_with_initial(gen);
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
        encode(&mut out, b"key:1", b"the value", &fields, 41);
        out
    }

    #[test]
    fn a_record_reads_back_as_written() {
        let buf = sample();
        assert_eq!(buf.len(), len(5, 9));
        assert_eq!(len_at(&buf), Some(buf.len()));
        let r = decode(&buf, 41).expect("a record");
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
                assert!(decode(&bad, 41).is_err(), "bit {bit} of byte {i}");
            }
        }
        for cut in 0..buf.len() {
            assert!(decode(&buf[..cut], 41).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn another_generation_or_a_dead_mark_does_not_read() {
        let mut buf = sample();
        assert_eq!(decode(&buf, 40), Err(Damage::BadCrc));
        buf[0] = DEAD;
        assert!(is_dead(&buf));
        assert_eq!(len_at(&buf), Some(buf.len()));
        assert_eq!(decode(&buf, 41), Err(Damage::BadCrc));
    }

    #[test]
    fn a_page_marker_names_its_generation() {
        let mut out = Vec::new();
        encode_mark(&mut out, 7);
        assert_eq!(out.len(), HEADER);
        assert_eq!(mark_at(&out), Some(7));
        out[12] ^= 1;
        assert_eq!(mark_at(&out), None);
        assert_eq!(mark_at(&sample()), None);
    }
}
