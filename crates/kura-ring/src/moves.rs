//! Which servers may take keys from which when a ring is replaced by
//! another (a proxy's reload): exactly for the continuum rings (their
//! owners change only at points, so one hash per stretch between the
//! points of either ring tells every move) and for jump (buckets added
//! take keys only from the others, buckets removed give theirs only to
//! the rest); unknown for ch3, modula and random, and between rings of
//! different kinds or key parts.

use std::collections::BTreeSet;

use crate::ring::{Placement, Ring};

impl Ring {
    /// The pairs (index in `self`, index in `new`) of servers such that
    /// some key placed on the first by `self` is placed on the second by
    /// `new`, pairs of one index included; `None` when that cannot be told
    /// (ch3, modula, random, or another kind, hash or key part): then any
    /// key may move anywhere.
    pub fn moves(&self, new: &Ring) -> Option<BTreeSet<(usize, usize)>> {
        if self.kind() != new.kind() || self.key_part() != new.key_part() {
            return None;
        }
        match (&self.placement, &new.placement) {
            (Placement::Continuum(a, _), Placement::Continuum(b, _)) => Some(
                a.probes()
                    .chain(b.probes())
                    .map(|h| (a.server_for(h), b.server_for(h)))
                    .collect(),
            ),
            (Placement::Jump(a), Placement::Jump(b)) => {
                let (a, b) = (*a as usize, *b as usize);
                let kept = (0..a.min(b)).map(|i| (i, i));
                let moved: Vec<(usize, usize)> = if b >= a {
                    (0..a).flat_map(|i| (a..b).map(move |j| (i, j))).collect()
                } else {
                    (b..a).flat_map(|i| (0..b).map(move |j| (i, j))).collect()
                };
                Some(kept.chain(moved).collect())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Kind, Ring, Server};

    fn ring(kind: Kind, ports: &[u16]) -> Ring {
        let servers = ports.iter().map(|&p| Server::new("10.0.0.1", p)).collect();
        Ring::new(kind, servers).unwrap()
    }

    /// The pairs seen over many keys are within what `moves` says, and a
    /// continuum's answer is exact: every pair it names is seen.
    #[test]
    fn moves_cover_every_key_and_name_no_move_a_key_cannot_make() {
        let changes: [(&[u16], &[u16]); 4] = [
            (&[1, 2], &[1, 2, 3]),
            (&[1, 2, 3], &[1, 2]),
            (&[1, 2, 3], &[1, 3, 4]),
            (&[1, 2], &[1, 2]),
        ];
        for kind in crate::ring::KINDS {
            for (old, new) in changes {
                let (a, b) = (ring(kind, old), ring(kind, new));
                // ch3 and modula cannot tell: any key may move anywhere.
                let Some(moves) = a.moves(&b) else {
                    assert!(matches!(kind, Kind::Ch3 | Kind::Modula(_)), "{kind}");
                    continue;
                };
                for i in 0..20_000 {
                    let key = format!("key:{i}");
                    let pair = (a.index_for(key.as_bytes()), b.index_for(key.as_bytes()));
                    assert!(moves.contains(&pair), "{kind} {old:?} -> {new:?}: {pair:?}");
                }
                if old == new {
                    assert!(moves.iter().all(|(i, j)| i == j), "{kind}: {moves:?}");
                }
            }
        }
        // Servers added to a consistent ring take keys; none move between
        // the servers that stay.
        let moves = ring(Kind::Libmemcached, &[1, 2]).moves(&ring(Kind::Libmemcached, &[1, 2, 3]));
        assert_eq!(
            moves.unwrap().into_iter().collect::<Vec<_>>(),
            vec![(0, 0), (0, 2), (1, 1), (1, 2)]
        );
        assert!(ring(Kind::Ch3, &[1, 2])
            .moves(&ring(Kind::Ch3, &[1]))
            .is_none());
        assert!(ring(Kind::Jump, &[1])
            .moves(&ring(Kind::Dalli, &[1]))
            .is_none());
    }
}
