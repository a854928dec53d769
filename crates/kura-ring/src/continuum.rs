//! A ketama continuum: points on the 32-bit circle, each owned by a server,
//! sorted so that a key's point is found by binary search (O(log n)).
//!
//! libmemcached and twemproxy give a key the first point at or after its
//! hash, wrapping to the first point; Dalli gives it the last point at or
//! before its hash, wrapping to the last. Points of equal value are ordered
//! by server index (libmemcached's order; twemproxy and Dalli leave it to
//! their sort, and with a few hundred 32-bit points per server such ties
//! are rare: about one ring in 40,000 for three servers).

/// Which neighbour of the key's hash owns the key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Search {
    /// The first point `>= hash`, else the first point.
    AtOrAfter,
    /// The last point `<= hash`, else the last point.
    AtOrBefore,
}

/// A point of the circle and the index of the server that owns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Point {
    pub value: u32,
    pub server: u32,
}

/// The sorted points of a ring.
#[derive(Clone, Debug)]
pub(crate) struct Continuum {
    points: Vec<Point>,
    search: Search,
}

impl Continuum {
    /// Sorts `points`; there must be at least one.
    pub fn new(mut points: Vec<Point>, search: Search) -> Continuum {
        debug_assert!(!points.is_empty());
        points.sort_unstable();
        Continuum { points, search }
    }

    /// The index of the server owning `hash`.
    pub fn server_for(&self, hash: u32) -> usize {
        let p = &self.points;
        let at = match self.search {
            Search::AtOrAfter => {
                let i = p.partition_point(|pt| pt.value < hash);
                if i == p.len() {
                    0
                } else {
                    i
                }
            }
            Search::AtOrBefore => {
                let i = p.partition_point(|pt| pt.value <= hash);
                if i == 0 {
                    p.len() - 1
                } else {
                    i - 1
                }
            }
        };
        p[at].server as usize
    }

    /// One hash in each stretch of the circle whose owner is constant:
    /// every point's value, and both ends of the circle. Owners change
    /// only at points, so two continua owning the same hashes here own
    /// the same hashes everywhere.
    pub fn probes(&self) -> impl Iterator<Item = u32> + '_ {
        let ends = [0, u32::MAX];
        let after = self.points.iter().map(|p| p.value.wrapping_add(1));
        self.points.iter().map(|p| p.value).chain(after).chain(ends)
    }

    /// How many points each of `servers` servers has.
    #[cfg(test)]
    pub fn points_per_server(&self, servers: usize) -> Vec<usize> {
        let mut n = vec![0; servers];
        for p in &self.points {
            n[p.server as usize] += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(search: Search) -> Continuum {
        let pts = [(300, 2), (100, 0), (200, 1), (200, 0)];
        Continuum::new(
            pts.iter()
                .map(|&(value, server)| Point { value, server })
                .collect(),
            search,
        )
    }

    #[test]
    fn at_or_after_takes_the_next_point_and_wraps_to_the_first() {
        let c = ring(Search::AtOrAfter);
        assert_eq!(c.server_for(0), 0);
        assert_eq!(c.server_for(100), 0);
        assert_eq!(c.server_for(101), 0); // the tie at 200: lower index first
        assert_eq!(c.server_for(201), 2);
        assert_eq!(c.server_for(300), 2);
        assert_eq!(c.server_for(301), 0);
        assert_eq!(c.server_for(u32::MAX), 0);
    }

    #[test]
    fn at_or_before_takes_the_previous_point_and_wraps_to_the_last() {
        let c = ring(Search::AtOrBefore);
        assert_eq!(c.server_for(0), 2);
        assert_eq!(c.server_for(99), 2);
        assert_eq!(c.server_for(100), 0);
        assert_eq!(c.server_for(200), 1); // the tie at 200: the last of them
        assert_eq!(c.server_for(299), 1);
        assert_eq!(c.server_for(300), 2);
        assert_eq!(c.server_for(u32::MAX), 2);
    }
}
