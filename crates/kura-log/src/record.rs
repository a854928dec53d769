//! Records and their encoding.
//!
//! ```text
//! record   := len:u32 crc:u32 body          len = length of body
//! body     := seq:u64 kind:u8 fields        crc = CRC-32 (IEEE) of body
//! Set      := flags:u32 exptime:u32 cas:u64 marks:u8 klen:u16 key vlen:u32 value
//! Delete   := klen:u16 key                  (also Evict, same fields)
//! Touch    := exptime:u32 klen:u16 key
//! Flush    := at:u32                        (0: now)
//! TablePut := flags:u32 id:u64 nlen:u16 name vlen:u32 value
//! TableDelete := id:u64 nlen:u16 name
//! ```
//! Integers are little endian; `exptime` is an absolute Unix time, 0 for
//! never; `marks` has bit 0 for a stale entry (meta `I`) and bit 1 for a
//! key sent in base64 (meta `b`). `TablePut` and `TableDelete` (kinds 6
//! and 7) are the results of writes to a fixed-length table (`--table`):
//! record `id` of table `name` now holds `value` with `flags`, or nothing.
//! Logs without them read as before; a kura older than them takes a record
//! of these kinds for damage.

/// Bytes before a record's body: its length and CRC.
pub const RECORD_HEADER_LEN: usize = 8;
/// The smallest body: a sequence number and a kind.
const MIN_BODY_LEN: usize = 9;
/// The smallest record.
pub const MIN_RECORD_LEN: usize = RECORD_HEADER_LEN + MIN_BODY_LEN;
/// The largest body a record may have (a 1 GiB item plus its fields).
pub const MAX_BODY_LEN: usize = (1 << 30) + 4096;

const KIND_SET: u8 = 1;
const KIND_DELETE: u8 = 2;
const KIND_TOUCH: u8 = 3;
const KIND_FLUSH: u8 = 4;
const KIND_EVICT: u8 = 5;
const KIND_TABLE_PUT: u8 = 6;
const KIND_TABLE_DELETE: u8 = 7;

const MARK_STALE: u8 = 1;
const MARK_BINARY_KEY: u8 = 2;

/// One change to the store, as its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mutation {
    /// The item `key` now holds this (every storage command, incr/decr).
    Set {
        key: Vec<u8>,
        value: Vec<u8>,
        flags: u32,
        /// Absolute Unix time; 0 never expires.
        exptime: u32,
        cas: u64,
        /// Invalidated (meta `I`): served as stale.
        stale: bool,
        /// The key was sent base64-encoded (meta `b`).
        binary_key: bool,
    },
    /// `key` was deleted.
    Delete { key: Vec<u8> },
    /// `key` now expires at `exptime` (absolute; 0 never).
    Touch { key: Vec<u8>, exptime: u32 },
    /// Everything stored before is invalid from `at` (absolute; 0 now).
    Flush { at: u32 },
    /// `key` was evicted; replay removes it so a restart does not bring it
    /// back.
    Evict { key: Vec<u8> },
    /// Record `id` of the fixed-length table `table` now holds `value`
    /// with `flags` (every table write that leaves a record: the result,
    /// so a rotate or an append is its new bytes).
    TablePut {
        table: Vec<u8>,
        id: u64,
        value: Vec<u8>,
        flags: u32,
    },
    /// Record `id` of table `table` was deleted.
    TableDelete { table: Vec<u8>, id: u64 },
}

/// A [`Mutation`] borrowing its bytes: what a writer encodes without
/// copying the value first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MutationRef<'a> {
    Set {
        key: &'a [u8],
        value: &'a [u8],
        flags: u32,
        exptime: u32,
        cas: u64,
        stale: bool,
        binary_key: bool,
    },
    Delete {
        key: &'a [u8],
    },
    Touch {
        key: &'a [u8],
        exptime: u32,
    },
    Flush {
        at: u32,
    },
    Evict {
        key: &'a [u8],
    },
    TablePut {
        table: &'a [u8],
        id: u64,
        value: &'a [u8],
        flags: u32,
    },
    TableDelete {
        table: &'a [u8],
        id: u64,
    },
}

impl Mutation {
    /// Borrows this mutation.
    pub fn as_ref(&self) -> MutationRef<'_> {
        match self {
            Mutation::Set {
                key,
                value,
                flags,
                exptime,
                cas,
                stale,
                binary_key,
            } => MutationRef::Set {
                key,
                value,
                flags: *flags,
                exptime: *exptime,
                cas: *cas,
                stale: *stale,
                binary_key: *binary_key,
            },
            Mutation::Delete { key } => MutationRef::Delete { key },
            Mutation::Touch { key, exptime } => MutationRef::Touch {
                key,
                exptime: *exptime,
            },
            Mutation::Flush { at } => MutationRef::Flush { at: *at },
            Mutation::Evict { key } => MutationRef::Evict { key },
            Mutation::TablePut {
                table,
                id,
                value,
                flags,
            } => MutationRef::TablePut {
                table,
                id: *id,
                value,
                flags: *flags,
            },
            Mutation::TableDelete { table, id } => MutationRef::TableDelete { table, id: *id },
        }
    }
}

impl MutationRef<'_> {
    /// The encoded length of a record of this mutation.
    pub fn encoded_len(&self) -> usize {
        let fields = match self {
            MutationRef::Set { key, value, .. } => 4 + 4 + 8 + 1 + 2 + key.len() + 4 + value.len(),
            MutationRef::Delete { key } | MutationRef::Evict { key } => 2 + key.len(),
            MutationRef::Touch { key, .. } => 4 + 2 + key.len(),
            MutationRef::Flush { .. } => 4,
            MutationRef::TablePut { table, value, .. } => 4 + 8 + 2 + table.len() + 4 + value.len(),
            MutationRef::TableDelete { table, .. } => 8 + 2 + table.len(),
        };
        RECORD_HEADER_LEN + 8 + 1 + fields
    }

    /// Appends the record of this mutation with sequence number `seq` to
    /// `out`.
    pub fn encode(&self, seq: u64, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0u8; RECORD_HEADER_LEN]);
        out.extend_from_slice(&seq.to_le_bytes());
        match *self {
            MutationRef::Set {
                key,
                value,
                flags,
                exptime,
                cas,
                stale,
                binary_key,
            } => {
                out.push(KIND_SET);
                out.extend_from_slice(&flags.to_le_bytes());
                out.extend_from_slice(&exptime.to_le_bytes());
                out.extend_from_slice(&cas.to_le_bytes());
                let marks = if stale { MARK_STALE } else { 0 }
                    | if binary_key { MARK_BINARY_KEY } else { 0 };
                out.push(marks);
                put_key(out, key);
                out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                out.extend_from_slice(value);
            }
            MutationRef::Delete { key } => {
                out.push(KIND_DELETE);
                put_key(out, key);
            }
            MutationRef::Evict { key } => {
                out.push(KIND_EVICT);
                put_key(out, key);
            }
            MutationRef::Touch { key, exptime } => {
                out.push(KIND_TOUCH);
                out.extend_from_slice(&exptime.to_le_bytes());
                put_key(out, key);
            }
            MutationRef::Flush { at } => {
                out.push(KIND_FLUSH);
                out.extend_from_slice(&at.to_le_bytes());
            }
            MutationRef::TablePut {
                table,
                id,
                value,
                flags,
            } => {
                out.push(KIND_TABLE_PUT);
                out.extend_from_slice(&flags.to_le_bytes());
                out.extend_from_slice(&id.to_le_bytes());
                put_key(out, table);
                out.extend_from_slice(&(value.len() as u32).to_le_bytes());
                out.extend_from_slice(value);
            }
            MutationRef::TableDelete { table, id } => {
                out.push(KIND_TABLE_DELETE);
                out.extend_from_slice(&id.to_le_bytes());
                put_key(out, table);
            }
        }
        let body = &out[start + RECORD_HEADER_LEN..];
        let len = body.len() as u32;
        let crc = crc32fast::hash(body);
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
        out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    }
}

/// A mutation with its sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub seq: u64,
    pub mutation: Mutation,
}

/// Why bytes are not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// More bytes are needed: the record runs past the end of the data.
    Truncated,
    /// The CRC does not match.
    BadCrc,
    /// The length field is impossible.
    BadLength,
    /// The body does not parse (unknown kind, fields past its end).
    BadBody,
}

impl Record {
    /// Appends the encoded record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.mutation.as_ref().encode(self.seq, out);
    }

    /// The encoded length of this record.
    pub fn encoded_len(&self) -> usize {
        self.mutation.as_ref().encoded_len()
    }

    /// Decodes the record at the front of `b`; returns it and its length.
    ///
    /// # Errors
    /// [`DecodeError::Truncated`] when `b` ends inside the record, else what
    /// is wrong with it.
    pub fn decode(b: &[u8]) -> Result<(Record, usize), DecodeError> {
        if b.len() < RECORD_HEADER_LEN {
            return Err(DecodeError::Truncated);
        }
        let len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let crc = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        if !(MIN_BODY_LEN..=MAX_BODY_LEN).contains(&len) {
            return Err(DecodeError::BadLength);
        }
        let Some(body) = b.get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + len) else {
            return Err(DecodeError::Truncated);
        };
        if crc32fast::hash(body) != crc {
            return Err(DecodeError::BadCrc);
        }
        let record = decode_body(body).ok_or(DecodeError::BadBody)?;
        Ok((record, RECORD_HEADER_LEN + len))
    }
}

fn put_key(out: &mut Vec<u8>, key: &[u8]) {
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key);
}

/// A cursor over a body that fails (returns `None`) past its end.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        let b = self.take(2)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        let b = self.take(4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_le_bytes(a))
    }
    fn key(&mut self) -> Option<Vec<u8>> {
        let n = self.u16()? as usize;
        Some(self.take(n)?.to_vec())
    }
}

fn decode_body(body: &[u8]) -> Option<Record> {
    let mut c = Cursor(body);
    let seq = c.u64()?;
    let mutation = match c.u8()? {
        KIND_SET => {
            let flags = c.u32()?;
            let exptime = c.u32()?;
            let cas = c.u64()?;
            let marks = c.u8()?;
            if marks & !(MARK_STALE | MARK_BINARY_KEY) != 0 {
                return None;
            }
            let key = c.key()?;
            let n = c.u32()? as usize;
            let value = c.take(n)?.to_vec();
            Mutation::Set {
                key,
                value,
                flags,
                exptime,
                cas,
                stale: marks & MARK_STALE != 0,
                binary_key: marks & MARK_BINARY_KEY != 0,
            }
        }
        KIND_DELETE => Mutation::Delete { key: c.key()? },
        KIND_EVICT => Mutation::Evict { key: c.key()? },
        KIND_TOUCH => {
            let exptime = c.u32()?;
            Mutation::Touch {
                key: c.key()?,
                exptime,
            }
        }
        KIND_FLUSH => Mutation::Flush { at: c.u32()? },
        KIND_TABLE_PUT => {
            let flags = c.u32()?;
            let id = c.u64()?;
            let table = c.key()?;
            let n = c.u32()? as usize;
            Mutation::TablePut {
                table,
                id,
                value: c.take(n)?.to_vec(),
                flags,
            }
        }
        KIND_TABLE_DELETE => {
            let id = c.u64()?;
            Mutation::TableDelete {
                table: c.key()?,
                id,
            }
        }
        _ => return None,
    };
    // Trailing bytes inside a CRC-valid body mean a format mismatch.
    if !c.0.is_empty() {
        return None;
    }
    Some(Record { seq, mutation })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Record> {
        vec![
            Record {
                seq: 1,
                mutation: Mutation::Set {
                    key: b"k".to_vec(),
                    value: b"value".to_vec(),
                    flags: 7,
                    exptime: 1_900_000_000,
                    cas: 42,
                    stale: true,
                    binary_key: false,
                },
            },
            Record {
                seq: 2,
                mutation: Mutation::Delete { key: b"k".to_vec() },
            },
            Record {
                seq: 3,
                mutation: Mutation::Touch {
                    key: b"t".to_vec(),
                    exptime: 0,
                },
            },
            Record {
                seq: u64::MAX,
                mutation: Mutation::Flush { at: 5 },
            },
            Record {
                seq: 9,
                mutation: Mutation::Evict {
                    key: vec![0, 255, b' '],
                },
            },
            Record {
                seq: 10,
                mutation: Mutation::TablePut {
                    table: b"footprints".to_vec(),
                    id: u64::MAX,
                    value: vec![0, 1, 2, 255, b'\r', b'\n'],
                    flags: u32::MAX,
                },
            },
            Record {
                seq: 11,
                mutation: Mutation::TablePut {
                    table: b"t".to_vec(),
                    id: 1,
                    value: Vec::new(),
                    flags: 0,
                },
            },
            Record {
                seq: 12,
                mutation: Mutation::TableDelete {
                    table: b"scores".to_vec(),
                    id: 42,
                },
            },
        ]
    }

    /// The records of a log written before tables were logged: exactly the
    /// bytes such a log holds, which must still read.
    #[test]
    fn records_of_older_logs_still_read() {
        // seq 7, Delete of "ab", as written since the first version.
        let body = [7, 0, 0, 0, 0, 0, 0, 0, KIND_DELETE, 2, 0, b'a', b'b'];
        let mut b = Vec::new();
        b.extend_from_slice(&(body.len() as u32).to_le_bytes());
        b.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        b.extend_from_slice(&body);
        let want = Record {
            seq: 7,
            mutation: Mutation::Delete {
                key: b"ab".to_vec(),
            },
        };
        assert_eq!(Record::decode(&b), Ok((want, b.len())));
    }

    #[test]
    fn table_records_with_bad_bodies_are_refused() {
        // A CRC-valid body whose fields do not add up is no record: a
        // value length past the end, a name past the end, a byte too many.
        let mut put = Vec::new();
        Mutation::TablePut {
            table: b"t".to_vec(),
            id: 3,
            value: b"abc".to_vec(),
            flags: 0,
        }
        .as_ref()
        .encode(1, &mut put);
        let body = put[RECORD_HEADER_LEN..].to_vec();
        let reseal = |body: &[u8]| {
            let mut b = Vec::new();
            b.extend_from_slice(&(body.len() as u32).to_le_bytes());
            b.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
            b.extend_from_slice(body);
            b
        };
        assert!(Record::decode(&reseal(&body)).is_ok());
        let mut long_value = body.clone();
        let vlen_at = 9 + 4 + 8 + 2 + 1;
        long_value[vlen_at] = 4;
        assert_eq!(
            Record::decode(&reseal(&long_value)),
            Err(DecodeError::BadBody)
        );
        let mut long_name = body.clone();
        long_name[9 + 4 + 8] = 200;
        assert_eq!(
            Record::decode(&reseal(&long_name)),
            Err(DecodeError::BadBody)
        );
        let mut extra = body.clone();
        extra.push(0);
        assert_eq!(Record::decode(&reseal(&extra)), Err(DecodeError::BadBody));
        let mut unknown = body;
        unknown[8] = 8;
        assert_eq!(Record::decode(&reseal(&unknown)), Err(DecodeError::BadBody));
    }

    #[test]
    fn round_trip() {
        for r in samples() {
            let mut b = Vec::new();
            r.encode(&mut b);
            assert_eq!(b.len(), r.encoded_len());
            assert_eq!(Record::decode(&b), Ok((r.clone(), b.len())));
            // Every prefix is truncated, never an error or a record.
            for cut in 0..b.len() {
                assert_eq!(
                    Record::decode(&b[..cut]).map(|_| ()),
                    Err(DecodeError::Truncated),
                    "{r:?} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn every_flipped_bit_is_detected() {
        for r in [&samples()[0], &samples()[5], &samples()[7]] {
            let mut b = Vec::new();
            r.encode(&mut b);
            for i in 0..b.len() * 8 {
                let mut c = b.clone();
                c[i / 8] ^= 1 << (i % 8);
                assert!(
                    Record::decode(&c).is_err(),
                    "{r:?}: bit {i} flipped went unnoticed"
                );
            }
        }
    }
}
