//! What each connection sends: the mix of the run (gets and sets in the
//! `--ratio`, keys from the key space, sizes from `--value-size`) or the
//! prefill (every key once, each connection its own share).

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::args::{Ratio, ValueSize};
use crate::keys::Keyspace;
use crate::proto::Op;

/// The settings every connection's mix shares.
#[derive(Debug, Clone)]
pub struct Mix {
    pub keys: Arc<Keyspace>,
    pub ratio: Ratio,
    pub multiget: usize,
    pub sizes: ValueSize,
    pub noreply: bool,
}

/// The operations of one connection, in order.
pub struct OpSource {
    rng: SmallRng,
    kind: Kind,
    /// Operations left to give, if the run is counted.
    remaining: Option<u64>,
}

enum Kind {
    Mix(Mix),
    /// Sets of keys `next, next + step, ...` (as many as `remaining` says).
    Fill {
        sizes: ValueSize,
        next: u64,
        step: u64,
    },
}

impl OpSource {
    /// The run's mix, `remaining` operations (or unbounded), seeded.
    pub fn mix(mix: Mix, remaining: Option<u64>, seed: u64) -> OpSource {
        OpSource {
            rng: SmallRng::seed_from_u64(seed),
            kind: Kind::Mix(mix),
            remaining,
        }
    }

    /// Connection `index` of `of` sets its share of keys `0..count`, once each.
    pub fn fill(count: u64, sizes: ValueSize, index: u64, of: u64, seed: u64) -> OpSource {
        let share = if index < count {
            (count - index).div_ceil(of)
        } else {
            0
        };
        OpSource {
            rng: SmallRng::seed_from_u64(seed),
            kind: Kind::Fill {
                sizes,
                next: index,
                step: of,
            },
            remaining: Some(share),
        }
    }

    /// The next operation, or `None` when the count is reached.
    pub fn next_op(&mut self) -> Option<Op> {
        if let Some(left) = &mut self.remaining {
            if *left == 0 {
                return None;
            }
            *left -= 1;
        }
        let rng = &mut self.rng;
        Some(match &mut self.kind {
            Kind::Fill { sizes, next, step } => {
                let key = *next;
                *next += *step;
                set(rng, key, *sizes, false)
            }
            Kind::Mix(m) => {
                let total = m.ratio.gets + m.ratio.sets;
                if rng.gen_range(0..total) < m.ratio.gets {
                    if m.multiget == 1 {
                        Op::Get(m.keys.sample(rng))
                    } else {
                        Op::MultiGet((0..m.multiget).map(|_| m.keys.sample(rng)).collect())
                    }
                } else {
                    let key = m.keys.sample(rng);
                    set(rng, key, m.sizes, m.noreply)
                }
            }
        })
    }
}

fn set(rng: &mut SmallRng, key: u64, sizes: ValueSize, quiet: bool) -> Op {
    Op::Set {
        key,
        salt: rng.gen(),
        len: rng.gen_range(sizes.min..=sizes.max),
        quiet,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::KeyDist;

    fn keys(n: u64) -> Arc<Keyspace> {
        Arc::new(Keyspace::new("k", n, KeyDist::Uniform))
    }

    #[test]
    fn fill_shares_cover_every_key_once() {
        let sizes = ValueSize { min: 16, max: 16 };
        let mut seen = Vec::new();
        for i in 0..3 {
            let mut src = OpSource::fill(10, sizes, i, 3, i);
            while let Some(op) = src.next_op() {
                match op {
                    Op::Set { key, quiet, .. } => {
                        assert!(!quiet);
                        seen.push(key)
                    }
                    other => panic!("{other:?}"),
                }
            }
        }
        seen.sort();
        assert_eq!(seen, (0..10).collect::<Vec<_>>());
        assert_eq!(OpSource::fill(2, sizes, 5, 8, 0).next_op(), None);
    }

    #[test]
    fn the_mix_follows_the_ratio_and_the_count() {
        let mix = Mix {
            keys: keys(1000),
            ratio: Ratio { gets: 3, sets: 1 },
            multiget: 4,
            sizes: ValueSize { min: 20, max: 30 },
            noreply: true,
        };
        let mut src = OpSource::mix(mix, Some(4000), 9);
        let (mut gets, mut sets) = (0, 0);
        while let Some(op) = src.next_op() {
            match op {
                Op::MultiGet(ks) => {
                    assert_eq!(ks.len(), 4);
                    gets += 1
                }
                Op::Set { len, quiet, .. } => {
                    assert!((20..=30).contains(&len) && quiet);
                    sets += 1
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(gets + sets, 4000);
        assert!((2800..3200).contains(&gets), "{gets} gets");
    }
}
