//! twemproxy's other distributions and the key parts the proxies hash.
//!
//! - `modula`: twemproxy lays each server's weight in slots, in the
//!   servers' order, and gives a key the slot of its hash modulo the total
//!   weight (`nc_modula.c`). Kept here as the running sums of the weights,
//!   so a weight of 100,000 costs no table.
//! - `random`: one slot per server, weights ignored, any of them
//!   (`nc_random.c`): for pools whose servers hold the same keys.
//! - [`KeyPart`]: twemproxy's `hash_tag` hashes what lies between the
//!   tag's two characters when there is something there
//!   (`server_pool_idx`); mcrouter's hash stop hashes what comes before
//!   the first `|#|`.

use std::cell::Cell;

use crate::server::Server;

/// Which part of a key a ring hashes.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum KeyPart {
    /// The whole key.
    #[default]
    Whole,
    /// twemproxy's `hash_tag`: with `{}`, `user:{42}:name` hashes as `42`.
    /// A key without both characters in order, or with nothing between
    /// them, is hashed whole.
    Tag(u8, u8),
    /// mcrouter's hash stop (`|#|`): `foo:key|#|etc` hashes as `foo:key`.
    Stop(Vec<u8>),
}

impl KeyPart {
    /// The part of `key` to hash.
    pub fn of<'a>(&self, key: &'a [u8]) -> &'a [u8] {
        match self {
            KeyPart::Whole => key,
            KeyPart::Tag(open, close) => {
                let Some(start) = key.iter().position(|b| b == open) else {
                    return key;
                };
                match key[start + 1..].iter().position(|b| b == close) {
                    Some(len) if len > 0 => &key[start + 1..start + 1 + len],
                    _ => key,
                }
            }
            KeyPart::Stop(stop) if !stop.is_empty() => key
                .windows(stop.len())
                .position(|w| w == stop.as_slice())
                .map_or(key, |at| &key[..at]),
            KeyPart::Stop(_) => key,
        }
    }
}

/// twemproxy's modula slots, as running sums of the weights.
#[derive(Clone, Debug)]
pub(crate) struct Modula {
    /// `ends[i]`: the slots of servers 0..=i.
    ends: Vec<u64>,
}

impl Modula {
    pub fn new(servers: &[Server]) -> Modula {
        let mut total = 0u64;
        let ends = servers
            .iter()
            .map(|s| {
                total += u64::from(s.weight);
                total
            })
            .collect();
        Modula { ends }
    }

    /// The server of the slot `hash % total weight`.
    pub fn index_for(&self, hash: u32) -> usize {
        let total = self.ends.last().copied().unwrap_or(1).max(1);
        let slot = u64::from(hash) % total;
        self.ends.partition_point(|&end| end <= slot)
    }
}

thread_local! {
    static STATE: Cell<u64> = Cell::new(seed());
}

/// A seed that differs between threads and runs.
fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0x9e37_79b9_7f4a_7c15);
    h.finish() | 1
}

/// A number below `n` (xorshift64*, per thread).
pub(crate) fn random_below(n: u32) -> usize {
    let x = STATE.with(|s| {
        let mut x = s.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    });
    ((x >> 32) % u64::from(n.max(1))) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Hash, Kind, Ring};

    #[test]
    fn hash_tags_take_what_lies_between_and_stops_what_comes_before() {
        let tag = KeyPart::Tag(b'{', b'}');
        assert_eq!(tag.of(b"user:{42}:name"), b"42");
        assert_eq!(tag.of(b"{a}{b}"), b"a");
        assert_eq!(tag.of(b"user:{}:name"), b"user:{}:name");
        assert_eq!(tag.of(b"user:{42"), b"user:{42");
        assert_eq!(tag.of(b"user:}42{"), b"user:}42{");
        assert_eq!(KeyPart::Tag(b'$', b'$').of(b"a$b$c"), b"b");
        let stop = KeyPart::Stop(b"|#|".to_vec());
        assert_eq!(stop.of(b"foo:key|#|etc"), b"foo:key");
        assert_eq!(stop.of(b"foo:key"), b"foo:key");
        assert_eq!(stop.of(b"|#|x"), b"");
    }

    #[test]
    fn modula_gives_each_server_its_weight_in_slots_in_order() {
        let servers = vec![
            Server::new("a", 1).with_weight(2),
            Server::new("b", 1),
            Server::new("c", 1).with_weight(3),
        ];
        let m = Modula::new(&servers);
        let got: Vec<usize> = (0..7).map(|h| m.index_for(h)).collect();
        assert_eq!(got, [0, 0, 1, 2, 2, 2, 0]);
        // Through the ring: the configured hash of the tagged part.
        let ring = Ring::new(Kind::Modula(Hash::Fnv1a64), servers)
            .unwrap()
            .with_key_part(KeyPart::Tag(b'{', b'}'));
        let h = Hash::Fnv1a64.hash(b"42");
        assert_eq!(ring.index_for(b"x{42}"), m.index_for(h));
    }

    #[test]
    fn random_reaches_every_server() {
        let mut seen = [0usize; 3];
        for _ in 0..3000 {
            seen[random_below(3)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 500), "{seen:?}");
    }
}
