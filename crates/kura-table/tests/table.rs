//! Fixed-length tables against a `BTreeMap` model, across reopens, crashes,
//! damaged files and concurrent threads.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use kura_table::{Durability, RangeSpec, Table, TableError, TableOptions};
use proptest::prelude::*;

fn tmp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("kura-table-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn opts(width: u32, max: u64) -> TableOptions {
    TableOptions {
        width,
        max,
        durability: Durability::No,
    }
}

#[derive(Debug, Clone)]
enum Op {
    Put(u64, Vec<u8>, u32),
    Delete(u64),
    Rotate(u64, Vec<u8>, usize),
    Range(u64, u64, bool, bool),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0u64..=40;
    prop_oneof![
        4 => (id.clone(), prop::collection::vec(any::<u8>(), 0..=20), any::<u32>())
            .prop_map(|(i, v, f)| Op::Put(i, v, f)),
        2 => id.clone().prop_map(Op::Delete),
        3 => (id.clone(), prop::collection::vec(any::<u8>(), 0..12), 1usize..30)
            .prop_map(|(i, v, m)| Op::Rotate(i, v, m)),
        2 => (id.clone(), id, any::<bool>(), any::<bool>())
            .prop_map(|(a, b, x, y)| Op::Range(a, b, x, y)),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_table_behaves_like_a_map(ops in prop::collection::vec(op(), 1..80)) {
        const WIDTH: u32 = 16;
        const MAX: u64 = 32;
        let path = tmp("model");
        let mut t = Table::open(Some(&path), opts(WIDTH, MAX)).unwrap();
        let mut model: BTreeMap<u64, (Vec<u8>, u32)> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(id, v, f) => {
                    let r = t.put(id, &v, f);
                    if id == 0 || id > MAX {
                        let bad_id = matches!(r, Err(TableError::BadId { .. }));
                        prop_assert!(bad_id);
                    } else if v.len() > WIDTH as usize {
                        let too_wide = matches!(r, Err(TableError::TooWide { .. }));
                        prop_assert!(too_wide);
                    } else {
                        r.unwrap();
                        model.insert(id, (v, f));
                    }
                }
                Op::Delete(id) => {
                    let r = t.delete(id);
                    if id == 0 || id > MAX {
                        prop_assert!(r.is_err());
                    } else {
                        prop_assert_eq!(r.unwrap(), model.remove(&id).is_some());
                    }
                }
                Op::Rotate(id, v, max) => {
                    let r = t.rotate(id, &v, max, 0);
                    if id == 0 || id > MAX {
                        prop_assert!(r.is_err());
                    } else {
                        let (old, f) = model.remove(&id).unwrap_or_default();
                        let mut all = old;
                        all.extend_from_slice(&v);
                        let keep = max.min(WIDTH as usize);
                        let new = all[all.len().saturating_sub(keep)..].to_vec();
                        prop_assert_eq!(r.unwrap(), new.len());
                        model.insert(id, (new, f));
                    }
                }
                Op::Range(a, b, lo_inc, hi_inc) => {
                    let spec: RangeSpec = format!(
                        "{}{a},{b}{}",
                        if lo_inc { '[' } else { '(' },
                        if hi_inc { ']' } else { ')' }
                    )
                    .parse()
                    .unwrap();
                    let mut got = Vec::new();
                    t.range(&spec, usize::MAX, |id, v, f| got.push((id, v.to_vec(), f)));
                    let want: Vec<_> = model
                        .iter()
                        .filter(|(&id, _)| {
                            (if lo_inc { id >= a } else { id > a })
                                && (if hi_inc { id <= b } else { id < b })
                        })
                        .map(|(&id, (v, f))| (id, v.clone(), *f))
                        .collect();
                    prop_assert_eq!(got, want);
                }
                Op::Reopen => {
                    drop(t);
                    t = Table::open(Some(&path), opts(WIDTH, MAX)).unwrap();
                    prop_assert!(!t.open_report().checked, "a clean close needs no check");
                }
            }
            prop_assert_eq!(t.len(), model.len() as u64);
        }
        let mut buf = vec![0u8; t.buf_len()];
        let mut short = [0u8; 5];
        for id in 1..=MAX {
            let want = model.get(&id).cloned();
            prop_assert_eq!(t.get(id).unwrap(), want.clone());
            // Into a caller's buffer: the same bytes, also when it is short.
            let got = t.get_buf(id, &mut buf).unwrap();
            prop_assert_eq!(got.map(|(len, f)| (buf[..len].to_vec(), f)), want.clone());
            let got = t.get_buf(id, &mut short).unwrap();
            prop_assert_eq!(got, want.as_ref().map(|(v, f)| (v.len(), *f)));
            if let (Some((len, _)), Some((v, _))) = (got, &want) {
                let k = len.min(short.len());
                prop_assert_eq!(&short[..k], &v[..k]);
            }
        }
        // A multi-get answers like one get per id, ids out of the table included.
        let ids: Vec<u64> = (0..=MAX + 2).rev().collect();
        let mut many = Vec::new();
        t.get_many(&ids, &mut Vec::new(), |i, got| {
            many.push((ids[i], got.map(|(v, f)| (v.to_vec(), f))));
        });
        let want: Vec<_> = ids.iter().map(|id| (*id, model.get(id).cloned())).collect();
        prop_assert_eq!(many, want);
        prop_assert_eq!(t.min_id(), model.keys().next().copied());
        prop_assert_eq!(t.max_id(), model.keys().next_back().copied());
        let mut all = Vec::new();
        t.range(&"[min,max]".parse().unwrap(), usize::MAX, |id, _, _| all.push(id));
        prop_assert_eq!(all, model.keys().copied().collect::<Vec<_>>());
        drop(t);
        let _ = std::fs::remove_file(&path);
    }
}

#[test]
fn another_shape_or_a_foreign_file_is_refused_and_left_alone() {
    let path = tmp("shape");
    let t = Table::open(Some(&path), opts(8, 100)).unwrap();
    t.put(5, b"five", 0).unwrap();
    drop(t);
    let e = Table::open(Some(&path), opts(16, 100)).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("width 8"), "{msg}");
    // The data is still there for the right shape.
    let t = Table::open(Some(&path), opts(8, 100)).unwrap();
    assert_eq!(t.get(5).unwrap(), Some((b"five".to_vec(), 0)));
    drop(t);
    // A damaged header.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[9] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let e = Table::open(Some(&path), opts(8, 100)).unwrap_err();
    assert!(e.to_string().contains("damaged header"), "{e}");
    // Not a table at all.
    std::fs::write(&path, vec![7u8; bytes.len()]).unwrap();
    let e = Table::open(Some(&path), opts(8, 100)).unwrap_err();
    assert!(e.to_string().contains("not a kura table"), "{e}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_slot_torn_by_a_crash_is_cleared_and_the_rest_kept() {
    let path = tmp("torn");
    let t = Table::open(
        Some(&path),
        TableOptions {
            width: 24,
            max: 50,
            durability: Durability::Always,
        },
    )
    .unwrap();
    for id in 1..=50 {
        t.put(id, format!("record {id}").as_bytes(), id as u32)
            .unwrap();
    }
    assert!(t.delete(20).unwrap());
    // A crash: the table is never closed, so its header still says in use.
    std::mem::forget(t);
    // The crash tore the write of record 7: its bytes changed, its CRC not.
    let mut bytes = std::fs::read(&path).unwrap();
    // A 16-byte slot header and 24 bytes of data, rounded up to 64.
    let slot = 64;
    let data_of_7 = 64 + 6 * slot + 16;
    bytes[data_of_7] ^= 0x55;
    // And it stopped writes of record 9 and of the empty slot 20 after
    // they made their slot's version odd (the high half of the second
    // header word): readers must not wait for those writers forever.
    for id in [9, 20] {
        bytes[64 + (id - 1) * slot + 12] |= 1;
    }
    std::fs::write(&path, &bytes).unwrap();
    let t = Table::open(Some(&path), opts(24, 50)).unwrap();
    let report = t.open_report();
    assert!(report.checked);
    assert_eq!((report.torn, report.records), (1, 48));
    assert_eq!(t.get(7).unwrap(), None);
    assert_eq!(t.get(20).unwrap(), None);
    let mut buf = vec![0u8; t.buf_len()];
    assert_eq!(t.get_buf(20, &mut buf).unwrap(), None);
    assert_eq!(t.get_buf(9, &mut buf).unwrap(), Some((8, 9)));
    for id in (1..=50).filter(|&i| i != 7 && i != 20) {
        assert_eq!(
            t.get(id).unwrap(),
            Some((format!("record {id}").into_bytes(), id as u32))
        );
    }
    drop(t);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn readers_never_see_a_torn_value_while_writers_write() {
    let t = Arc::new(Table::open(None, opts(64, 64)).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..2u8)
        .map(|w| {
            let t = t.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n = n.wrapping_add(1);
                    let id = u64::from(n % 64) + 1;
                    let len = (n % 64) as usize;
                    let b = w.wrapping_mul(100).wrapping_add(n as u8);
                    // Every byte equal, and the flags say which byte and length.
                    t.put(id, &vec![b; len], u32::from(b) << 8 | len as u32)
                        .unwrap();
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let t = t.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut out = vec![0u8; t.buf_len()];
                let r = t.reader();
                let mut seen = 0u64;
                for round in 0..200_000u64 {
                    let id = round % 64 + 1;
                    // Both read paths: into a Vec, and the straight-line
                    // one into a whole-width buffer.
                    let got = if round % 2 == 0 {
                        t.get_into(id, &mut buf).unwrap()
                    } else {
                        r.get_buf(id, &mut out).unwrap().map(|(len, flags)| {
                            buf.clear();
                            buf.extend_from_slice(&out[..len]);
                            flags
                        })
                    };
                    if let Some(flags) = got {
                        let (b, len) = ((flags >> 8) as u8, (flags & 0xff) as usize);
                        assert_eq!(buf.len(), len, "length and flags disagree");
                        assert!(buf.iter().all(|&x| x == b), "a torn value");
                        seen += 1;
                    }
                }
                seen
            })
        })
        .collect();
    let seen: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    assert!(seen > 0);
}

#[test]
fn concurrent_rotations_of_one_record_keep_whole_records_once() {
    let t = Arc::new(Table::open(None, opts(480, 10)).unwrap());
    let threads: Vec<_> = (0..4u64)
        .map(|w| {
            let t = t.clone();
            std::thread::spawn(move || {
                for i in 0..1000u64 {
                    t.rotate(3, &((w << 56) | i).to_be_bytes(), 480, 0).unwrap();
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let (v, _) = t.get(3).unwrap().unwrap();
    assert_eq!(v.len(), 480);
    let mut last = [None::<u64>; 4];
    let mut seen = std::collections::HashSet::new();
    for c in v.chunks(8) {
        let r = u64::from_be_bytes(c.try_into().unwrap());
        let (w, i) = ((r >> 56) as usize, r & 0xffff_ffff);
        assert!(w < 4 && i < 1000);
        assert!(seen.insert(r), "duplicated");
        assert!(last[w].is_none_or(|l| l < i), "out of order");
        last[w] = Some(i);
    }
}

#[test]
fn ids_and_widths_are_checked() {
    let t = Table::open(None, opts(4, 10)).unwrap();
    assert!(matches!(
        t.put(0, b"x", 0),
        Err(TableError::BadId { id: 0, max: 10 })
    ));
    assert!(matches!(t.put(11, b"x", 0), Err(TableError::BadId { .. })));
    assert!(matches!(
        t.put(1, b"12345", 0),
        Err(TableError::TooWide { len: 5, width: 4 })
    ));
    assert_eq!(t.get(1).unwrap(), None);
    t.put(1, b"", 9).unwrap();
    assert_eq!(
        t.get(1).unwrap(),
        Some((Vec::new(), 9)),
        "empty is not absent"
    );
    assert!(matches!(
        Table::open(None, opts(0, 10)),
        Err(TableError::BadShape)
    ));
}
