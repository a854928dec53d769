//! Two keys whose hashes share a tag in a shard's flash map share its
//! slot: the later one wins, the other is a miss, never the other's bytes,
//! and not counted as damage.

use super::{store, TempFile};
use crate::{Expiry, SetOutcome, Store};

/// Two keys of one shard and one tag.
fn same_tag(s: &Store) -> (Vec<u8>, Vec<u8>) {
    let mut seen = std::collections::HashMap::new();
    for i in 0u32.. {
        let key = format!("tag:{i}").into_bytes();
        let at = s.flash_slot_of(&key).expect("a tier");
        if let Some(other) = seen.insert(at, key.clone()) {
            return (other, key);
        }
    }
    unreachable!()
}

fn set(s: &Store, key: &[u8], value: &[u8]) {
    let stored = s.insert(key, value, Expiry::Never);
    assert!(matches!(stored, SetOutcome::Stored { .. }));
}

#[test]
fn keys_of_one_tag_are_misses_for_each_other_never_damage() {
    let file = TempFile::new("tags");
    let s = store(&file, 8, |_| {});
    let (a, b) = same_tag(&s);
    let (va, vb) = (vec![b'a'; 400], vec![b'b'; 500]);
    set(&s, &a, &va);
    assert_eq!(s.flash_spill_all(), 1);
    // `b` is not stored: its lookup finds `a`'s record, a miss.
    assert!(s.get(&b).is_none());
    let f = s.flash_stats().expect("a tier");
    assert_eq!(
        (f.miss_from_extstore, f.badcrc_from_extstore),
        (1, 0),
        "{f:?}"
    );
    // `a`'s record is still `a`'s.
    assert_eq!(s.get(&a).expect("on flash").value(), &va[..]);
    // Both on flash (`a` may have come back into RAM on its second hit):
    // the later one takes the slot, the other is a miss.
    set(&s, &b, &vb);
    assert!(s.flash_spill_all() >= 1);
    let hits = [(&a, &va), (&b, &vb)].map(|(k, v)| s.get(k).map(|i| assert_eq!(i.value(), &v[..])));
    assert_eq!(hits.iter().flatten().count(), 1);
    let f = s.flash_stats().expect("a tier");
    assert_eq!(f.badcrc_from_extstore, 0, "{f:?}");
}
