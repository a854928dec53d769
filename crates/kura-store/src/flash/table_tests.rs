//! The flash map's table against a `HashMap` by tag.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

fn packing() -> Packing {
    Packing::new(64 << 20, 4 << 20, 16).unwrap()
}

fn loc(n: u32) -> Loc {
    Loc {
        page: n % 16,
        gen: n.wrapping_mul(7) | 1,
        off: n % (64 << 20),
        len: 28 + n % 4000,
        exptime: n / 3,
        last_access: n / 5,
        hits: n % 5,
    }
}

/// What the table keeps of a `Loc`: hits saturate.
fn kept(mut l: Loc) -> Loc {
    l.hits = l.hits.min(HITS_MAX);
    l
}

#[derive(Debug, Clone)]
enum Op {
    Insert(u64, u32),
    Remove(u64),
    Update(u64, u32),
    Retain(u32),
}

/// Hashes with few distinct tags, so that tags collide and runs form,
/// and bits above the tag's that differ (the shard's), which the table
/// must not tell apart.
fn hash() -> impl Strategy<Value = u64> {
    let spread = (0u64..4, 0u64..600)
        .prop_map(|(high, t)| high << 40 | ((t * 0x9e37_79b9) & 0x3fff_ffff) << 2);
    let crowded = (0u64..4, 0u64..300).prop_map(|(high, t)| high << 40 | (t * 7 + (1 << 29)) << 2);
    prop_oneof![spread, crowded]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (hash(), any::<u32>()).prop_map(|(h, n)| Op::Insert(h, n)),
        3 => hash().prop_map(Op::Remove),
        1 => (hash(), any::<u32>()).prop_map(|(h, n)| Op::Update(h, n)),
        1 => (2u32..9).prop_map(Op::Retain),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn behaves_as_a_map_by_tag(ops in proptest::collection::vec(op(), 1..2000), many_pages: bool) {
        // 30-bit tags, or 24 (a tier of 4 Mi pages).
        let p = match many_pages {
            true => Packing::new(64 << 20, 4 << 20, 1 << 22).unwrap(),
            false => packing(),
        };
        let mut t = Table::new(p);
        let mut model: HashMap<u32, Loc> = HashMap::new();
        for op in ops {
            match op {
                Op::Insert(h, n) => {
                    let d = t.insert(h, &loc(n), usize::MAX).unwrap();
                    prop_assert_eq!(d.forgotten, None);
                    prop_assert_eq!(d.replaced, model.insert(t.packing.tag_of(h), kept(loc(n))));
                }
                Op::Remove(h) => prop_assert_eq!(t.remove(h), model.remove(&t.packing.tag_of(h))),
                Op::Update(h, n) => {
                    let got = t.update(h, |l| {
                        l.hits += 1;
                        l.last_access = n;
                    });
                    let want = model.get_mut(&t.packing.tag_of(h)).map(|l| {
                        l.hits = (l.hits + 1).min(HITS_MAX);
                        l.last_access = n;
                        *l
                    });
                    prop_assert_eq!(got.map(kept), want);
                }
                Op::Retain(m) => {
                    let mut gone = Vec::new();
                    t.retain(|l| l.off % m != 0, |l| gone.push(l));
                    let mut want: Vec<Loc> = model.values().filter(|l| l.off % m == 0).copied().collect();
                    model.retain(|_, l| l.off % m != 0);
                    gone.sort_by_key(|l| (l.off, l.gen));
                    want.sort_by_key(|l| (l.off, l.gen));
                    prop_assert_eq!(gone, want);
                }
            }
            t.check();
            prop_assert_eq!(t.len(), model.len());
        }
        for (tag, l) in t.locs() {
            prop_assert_eq!(model.get(&tag), Some(&l));
        }
    }

    #[test]
    fn stays_within_its_bytes(n in 1000u32..5000, max_kib in 4usize..64) {
        let max = max_kib << 10;
        let mut t = Table::new(packing());
        let (mut forgotten, mut replaced) = (0, 0);
        for i in 0..n {
            let h = u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let d = t.insert(h, &loc(i), max).unwrap();
            forgotten += usize::from(d.forgotten.is_some());
            replaced += usize::from(d.replaced.is_some());
            t.check();
        }
        // The first table is allowed whatever the bound.
        prop_assert!(t.bytes() <= max.max((64 + 33) * 24), "{} > {}", t.bytes(), max);
        prop_assert_eq!(t.len() + forgotten + replaced, n as usize);
    }
}

#[test]
fn slots_are_24_bytes() {
    assert_eq!(std::mem::size_of::<Slot>(), 24);
}

#[test]
fn a_place_that_does_not_fit_is_refused() {
    let p = Packing::new(1 << 20, 1 << 20, 4).unwrap();
    let mut t = Table::new(p);
    let mut l = loc(1);
    l.off = 1 << 20;
    assert_eq!(t.insert(1 << 2, &l, usize::MAX), None);
    l.off = (1 << 20) - 1;
    l.len = 1 << 20;
    assert_eq!(t.insert(1 << 2, &l, usize::MAX), None);
    l.len = (1 << 20) - 1;
    l.page = 3;
    assert!(t.insert(1 << 2, &l, usize::MAX).is_some());
    assert_eq!(t.get(1 << 2), Some(kept(l)));
    l.page += 1;
    assert_eq!(t.insert(1 << 2, &l, usize::MAX), None);
    // A page past 64 bits, below the tag.
    let p = Packing::new(64 << 20, 8 << 20, 1 << 20).unwrap();
    let mut t = Table::new(p);
    let mut l = loc(9);
    l.page = (1 << 20) - 1;
    l.off = (64 << 20) - 1;
    l.len = (8 << 20) - 1;
    l.hits = 2;
    let h = u64::MAX - 5;
    assert!(t.insert(h, &l, usize::MAX).is_some());
    assert_eq!(t.get(h), Some(l));
    assert_eq!(t.locs()[0].0, p.tag_of(h));
    // The largest pages and buffers kura takes; memcached's 65,536 pages.
    assert!(Packing::new(1 << 31, 1 << 31, 4).is_ok());
    // 256 TiB with memcached's page and buffer sizes; kura http's 64 TiB.
    assert_eq!(
        Packing::new(64 << 20, 4 << 20, 1 << 22).map(|p| p.tag_bits),
        Ok(24)
    );
    assert!(Packing::new(64 << 20, 4 << 20, (1 << 22) + 1).is_err());
    assert_eq!(
        Packing::new(64 << 20, 8 << 20, 1 << 20).map(|p| p.tag_bits),
        Ok(25)
    );
    assert_eq!(
        Packing::new(64 << 20, 4 << 20, 16).map(|p| p.tag_bits),
        Ok(30)
    );
}

#[test]
fn the_least_recently_accessed_near_by_goes_at_the_bound() {
    let mut t = Table::new(packing());
    let max = t.grown_bytes();
    let mut forgotten = Vec::new();
    for i in 0..1000u32 {
        let mut l = loc(i);
        l.last_access = 1000 + i;
        let h = u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        if let Some(f) = t.insert(h, &l, max).unwrap().forgotten {
            forgotten.push(f.last_access);
        }
    }
    assert!(t.bytes() <= max);
    assert!(!forgotten.is_empty());
    // Sampled near the new record's place: never the newest.
    assert!(forgotten.iter().all(|&a| a < 1999));
}
