//! The key space: key number `i` is the prefix followed by `i` in decimal,
//! zero-padded so that every key has the same length, and the choice of the
//! next key (uniform or Zipf).

use rand::Rng;
use rand_distr::{Distribution, Zipf};

use crate::args::KeyDist;

/// Decimal digits of `n` (at least one).
pub fn digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Names keys and draws them.
#[derive(Debug, Clone)]
pub struct Keyspace {
    prefix: Vec<u8>,
    count: u64,
    width: usize,
    zipf: Option<Zipf<f64>>,
}

impl Keyspace {
    /// `count` keys named `prefix` + number, drawn by `dist`.
    ///
    /// # Panics
    /// If `count` is 0 (the arguments are checked before).
    pub fn new(prefix: &str, count: u64, dist: KeyDist) -> Keyspace {
        assert!(count > 0, "empty key space");
        let zipf = match dist {
            KeyDist::Uniform => None,
            // Zipf::new fails only for n < 1 or s < 0, both refused earlier.
            KeyDist::Zipf(s) => Zipf::new(count, s).ok(),
        };
        Keyspace {
            prefix: prefix.as_bytes().to_vec(),
            count,
            width: digits(count - 1),
            zipf,
        }
    }

    /// Number of keys.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Length in bytes of every key.
    pub fn key_len(&self) -> usize {
        self.prefix.len() + self.width
    }

    /// Draws a key number in `0..count`.
    pub fn sample<R: Rng>(&self, rng: &mut R) -> u64 {
        match &self.zipf {
            None => rng.gen_range(0..self.count),
            // Zipf yields ranks 1..=count as floats; rank 1 is the hottest key.
            Some(z) => (z.sample(rng) as u64).clamp(1, self.count) - 1,
        }
    }

    /// Appends key `id` to `out`.
    pub fn write_key(&self, id: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.prefix);
        let start = out.len();
        out.resize(start + self.width, b'0');
        let mut n = id;
        for slot in out[start..].iter_mut().rev() {
            *slot = b'0' + (n % 10) as u8;
            n /= 10;
        }
    }

    /// True when `key` is the name of key `id`.
    pub fn matches(&self, id: u64, key: &[u8]) -> bool {
        if key.len() != self.key_len() || !key.starts_with(&self.prefix) {
            return false;
        }
        let mut n = id;
        for &b in key[self.prefix.len()..].iter().rev() {
            if b != b'0' + (n % 10) as u8 {
                return false;
            }
            n /= 10;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn keys_have_one_length_and_match_only_themselves() {
        let ks = Keyspace::new("key:", 1000, KeyDist::Uniform);
        let mut k = Vec::new();
        ks.write_key(7, &mut k);
        assert_eq!(k, b"key:007");
        assert!(ks.matches(7, b"key:007"));
        assert!(!ks.matches(70, b"key:007"));
        assert!(!ks.matches(7, b"key:0007"));
        assert!(!ks.matches(7, b"kez:007"));
        k.clear();
        ks.write_key(999, &mut k);
        assert_eq!(k, b"key:999");
        assert_eq!(ks.key_len(), 7);
        assert_eq!(digits(0), 1);
        assert_eq!(digits(10), 2);
    }

    #[test]
    fn zipf_prefers_low_ranks_and_stays_in_range() {
        let ks = Keyspace::new("k", 100, KeyDist::Zipf(1.0));
        let mut rng = SmallRng::seed_from_u64(3);
        let mut hits = [0u32; 100];
        for _ in 0..20_000 {
            hits[ks.sample(&mut rng) as usize] += 1;
        }
        assert!(hits[0] > 5 * hits[50], "{} vs {}", hits[0], hits[50]);
        let uni = Keyspace::new("k", 10, KeyDist::Uniform);
        assert!((0..1000).all(|_| uni.sample(&mut rng) < 10));
    }
}
