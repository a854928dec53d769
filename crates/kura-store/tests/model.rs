//! Random operation sequences run against the store and against a
//! single-threaded reference model of memcached's semantics (a `HashMap`),
//! which must agree on every reply.
//!
//! Time: the store's clock follows the wall clock, which may tick during a
//! case. Every relative TTL, flush delay and clock step is a multiple of
//! [`TICK`], and absolute exptimes sit half a tick off that grid, so a few
//! seconds of wall-clock drift can never change what is expired; the model
//! then only needs the seconds added with [`kura_store::Clock::advance`].

use std::collections::{HashMap, HashSet};

use kura_store::{
    ArithOutcome, ArithRequest, EvictionKind, Expiry, GetOptions, Hit, SetMode, SetOutcome,
    SetRequest, Store, StoreConfig,
};
use proptest::prelude::*;

/// The grid for TTLs and clock steps, in seconds.
const TICK: i64 = 1000;
/// memcached's limit for relative exptimes.
const THIRTY_DAYS: i64 = 60 * 60 * 24 * 30;

/// An exptime as a test case describes it; turned into memcached's integer
/// once the store's start time is known.
#[derive(Debug, Clone, Copy)]
enum Exp {
    /// 0.
    Never,
    /// This many ticks from now.
    Relative(i64),
    /// Exactly 30 days: still relative.
    ThirtyDays,
    /// 30 days and a second: an absolute time in 1970, so already past.
    ThirtyDaysAndOne,
    /// The Unix time this many ticks (and a half) after the case started.
    Absolute(i64),
    /// A negative exptime.
    Negative(i64),
}

impl Exp {
    fn exptime(self, base: i64) -> i64 {
        match self {
            Exp::Never => 0,
            Exp::Relative(n) => n * TICK,
            Exp::ThirtyDays => THIRTY_DAYS,
            Exp::ThirtyDaysAndOne => THIRTY_DAYS + 1,
            Exp::Absolute(n) => base + n * TICK + TICK / 2,
            Exp::Negative(n) => -n,
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Store {
        mode: SetMode,
        key: u8,
        value: Vec<u8>,
        flags: u32,
        exp: Exp,
    },
    /// A `cas`: with the key's current unique when `unique` is `None`.
    Cas {
        key: u8,
        value: Vec<u8>,
        flags: u32,
        exp: Exp,
        unique: Option<u64>,
    },
    Arith {
        key: u8,
        incr: bool,
        delta: u64,
    },
    Touch {
        key: u8,
        exp: Exp,
    },
    GetAndTouch {
        key: u8,
        exp: Exp,
    },
    Delete {
        key: u8,
    },
    Get {
        key: u8,
    },
    /// `flush_all`, delayed by this many ticks.
    Flush {
        delay: Option<i64>,
    },
    Advance {
        secs: i64,
    },
    Reap {
        batch: usize,
    },
}

#[derive(Debug, Clone)]
struct Entry {
    value: Vec<u8>,
    flags: u32,
    cas: u64,
    /// Model seconds at which the entry disappears; `None` never.
    deadline: Option<i64>,
}

/// The reference: memcached's rules over a map, one operation at a time.
#[derive(Debug)]
struct Model {
    /// The Unix time when the case started.
    base: i64,
    /// Seconds the clock has been advanced.
    now: i64,
    map: HashMap<Vec<u8>, Entry>,
    /// A pending delayed flush, in model seconds.
    flush_at: Option<i64>,
}

impl Model {
    fn new(base: i64) -> Model {
        Model {
            base,
            now: 0,
            map: HashMap::new(),
            flush_at: None,
        }
    }

    /// memcached's exptime: 0 never; negative already expired; up to 30
    /// days relative to now; larger an absolute Unix time.
    fn deadline(&self, exptime: i64) -> Option<i64> {
        match exptime {
            0 => None,
            e if e < 0 => Some(i64::MIN),
            e if e <= THIRTY_DAYS => Some(self.now + e),
            e => Some(e - self.base),
        }
    }

    /// Applies a due flush and forgets expired entries.
    fn sync(&mut self) {
        if self.flush_at.is_some_and(|t| t <= self.now) {
            self.map.clear();
            self.flush_at = None;
        }
        let now = self.now;
        self.map.retain(|_, e| e.deadline.is_none_or(|d| d > now));
    }

    fn live(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.sync();
        self.map.get_mut(key)
    }
}

/// What the model expects of a storage command.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Stored,
    NotStored,
    Exists,
    NotFound,
}

fn outcome_kind(o: SetOutcome) -> Reply {
    match o {
        SetOutcome::Stored { .. } => Reply::Stored,
        SetOutcome::NotStored => Reply::NotStored,
        SetOutcome::Exists => Reply::Exists,
        SetOutcome::NotFound => Reply::NotFound,
        SetOutcome::NoMemory => panic!("no eviction or refusal expected in the model test"),
    }
}

/// memcached's `safe_strtoull`: C `isspace` before and after, an optional
/// sign, decimal digits, no overflow, and no minus on a number that would be
/// negative as a signed 64-bit integer.
fn memcached_strtoull(v: &[u8]) -> Option<u64> {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut rest = v;
    while let [b, tail @ ..] = rest {
        if !is_space(*b) {
            break;
        }
        rest = tail;
    }
    let (negative, rest) = match rest {
        [b'-', tail @ ..] => (true, tail),
        [b'+', tail @ ..] => (false, tail),
        _ => (false, rest),
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    if rest.get(digits).is_some_and(|&b| !is_space(b)) {
        return None;
    }
    let n: u64 = std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()?;
    let n = if negative { n.wrapping_neg() } else { n };
    if negative && (n as i64) < 0 {
        return None;
    }
    Some(n)
}

/// Runs one case: every reply of the store must be the model's.
struct Harness {
    store: Store,
    model: Model,
    /// Every CAS unique handed out so far: each must be new.
    uniques: HashSet<u64>,
}

fn key_name(k: u8) -> Vec<u8> {
    format!("key:{k}").into_bytes()
}

impl Harness {
    fn new(shards: usize, eviction: EvictionKind) -> Harness {
        let store = Store::new(StoreConfig {
            shards,
            eviction,
            ..StoreConfig::with_capacity(1 << 30)
        });
        let base = i64::from(store.now());
        Harness {
            store,
            model: Model::new(base),
            uniques: HashSet::new(),
        }
    }

    fn expiry(&self, exp: Exp) -> (Expiry, Option<i64>) {
        let exptime = exp.exptime(self.model.base);
        (Expiry::from_exptime(exptime), self.model.deadline(exptime))
    }

    fn fresh_cas(&mut self, cas: u64) {
        assert_ne!(cas, 0, "CAS uniques are on by default");
        assert!(
            self.uniques.insert(cas),
            "CAS unique {cas} handed out twice"
        );
    }

    fn check_hit(&mut self, key: &[u8], hit: Option<Hit>) {
        let want = self.model.live(key).cloned();
        match (hit, want) {
            (None, None) => {}
            (Some(hit), Some(e)) => {
                assert_eq!(hit.item.key(), key);
                assert_eq!(hit.item.value(), &e.value[..], "value of {key:?}");
                assert_eq!(hit.item.flags(), e.flags);
                assert_eq!(hit.cas, e.cas);
            }
            (got, want) => panic!("{key:?}: store has {got:?}, model has {want:?}"),
        }
    }

    fn apply(&mut self, op: Op) {
        match op {
            Op::Store {
                mode,
                key,
                value,
                flags,
                exp,
            } => {
                let key = key_name(key);
                let (expiry, deadline) = self.expiry(exp);
                let got = self.store.set(&SetRequest {
                    mode,
                    flags,
                    expiry: Some(expiry),
                    ..SetRequest::new(&key, &value)
                });
                let model = &mut self.model;
                let present = model.live(&key).is_some();
                let want = match (mode, present) {
                    (SetMode::Add, true)
                    | (SetMode::Replace | SetMode::Append | SetMode::Prepend, false) => {
                        Reply::NotStored
                    }
                    _ => Reply::Stored,
                };
                assert_eq!(outcome_kind(got), want, "{mode:?} {key:?}");
                if let SetOutcome::Stored { cas } = got {
                    self.fresh_cas(cas);
                    let entry = match (mode, self.model.map.remove(&key)) {
                        (SetMode::Append, Some(old)) => Entry {
                            value: [&old.value[..], &value[..]].concat(),
                            cas,
                            ..old
                        },
                        (SetMode::Prepend, Some(old)) => Entry {
                            value: [&value[..], &old.value[..]].concat(),
                            cas,
                            ..old
                        },
                        // Rotation: append, then keep the last `max` bytes.
                        (SetMode::Rotate { max }, Some(old)) => {
                            let all = [&old.value[..], &value[..]].concat();
                            Entry {
                                value: all[all.len().saturating_sub(max as usize)..].to_vec(),
                                cas,
                                ..old
                            }
                        }
                        (SetMode::Rotate { max }, None) => Entry {
                            value: value[value.len().saturating_sub(max as usize)..].to_vec(),
                            flags,
                            cas,
                            deadline,
                        },
                        _ => Entry {
                            value,
                            flags,
                            cas,
                            deadline,
                        },
                    };
                    self.model.map.insert(key, entry);
                }
            }
            Op::Cas {
                key,
                value,
                flags,
                exp,
                unique,
            } => {
                let key = key_name(key);
                let (expiry, deadline) = self.expiry(exp);
                let current = self.model.live(&key).map(|e| e.cas);
                let unique = unique.or(current).unwrap_or(1);
                let got = self.store.set(&SetRequest {
                    flags,
                    expiry: Some(expiry),
                    cas: Some(unique),
                    ..SetRequest::new(&key, &value)
                });
                let want = match current {
                    None => Reply::NotFound,
                    Some(c) if c != unique => Reply::Exists,
                    Some(_) => Reply::Stored,
                };
                assert_eq!(outcome_kind(got), want, "cas {key:?} {unique}");
                if let SetOutcome::Stored { cas } = got {
                    self.fresh_cas(cas);
                    let entry = Entry {
                        value,
                        flags,
                        cas,
                        deadline,
                    };
                    self.model.map.insert(key, entry);
                }
            }
            Op::Arith { key, incr, delta } => {
                let key = key_name(key);
                let got = self.store.arith(&key, &ArithRequest::new(incr, delta));
                let Some(entry) = self.model.live(&key) else {
                    assert_eq!(got, ArithOutcome::NotFound);
                    return;
                };
                let Some(old) = memcached_strtoull(&entry.value) else {
                    assert_eq!(got, ArithOutcome::NonNumeric, "{:?}", entry.value);
                    return;
                };
                let value = if incr {
                    old.wrapping_add(delta)
                } else {
                    old.saturating_sub(delta)
                };
                let ArithOutcome::Updated {
                    value: got_value,
                    cas,
                    created: false,
                    ..
                } = got
                else {
                    panic!("arith on {:?}: {got:?}", entry.value);
                };
                assert_eq!(got_value, value);
                // A shorter number is padded with spaces to the old length.
                let mut text = value.to_string().into_bytes();
                if text.len() < entry.value.len() {
                    text.resize(entry.value.len(), b' ');
                }
                entry.value = text;
                entry.cas = cas;
                self.fresh_cas(cas);
            }
            Op::Touch { key, exp } => {
                let key = key_name(key);
                let (expiry, deadline) = self.expiry(exp);
                let got = self.store.touch(&key, expiry);
                let entry = self.model.live(&key);
                assert_eq!(got, entry.is_some(), "touch {key:?}");
                if let Some(e) = entry {
                    e.deadline = deadline;
                }
            }
            Op::GetAndTouch { key, exp } => {
                let key = key_name(key);
                let (expiry, deadline) = self.expiry(exp);
                let opts = GetOptions {
                    touch: Some(expiry),
                    ..Default::default()
                };
                let hit = self.store.get_with(&key, &opts);
                self.check_hit(&key, hit);
                if let Some(e) = self.model.live(&key) {
                    e.deadline = deadline;
                }
            }
            Op::Delete { key } => {
                let key = key_name(key);
                let got = self.store.delete(&key);
                let want = self.model.live(&key).is_some();
                assert_eq!(got, want, "delete {key:?}");
                self.model.map.remove(&key);
            }
            Op::Get { key } => {
                let key = key_name(key);
                let hit = self.store.get_with(&key, &GetOptions::default());
                self.check_hit(&key, hit);
                assert_eq!(self.store.contains(&key), self.model.live(&key).is_some());
            }
            Op::Flush { delay } => {
                self.model.sync();
                match delay {
                    None | Some(0) => {
                        self.store.flush(delay.map(|_| Expiry::In(0)));
                        self.model.map.clear();
                        self.model.flush_at = None;
                    }
                    Some(ticks) => {
                        let secs = ticks * TICK;
                        self.store.flush(Some(Expiry::In(secs as u32)));
                        self.model.flush_at = Some(self.model.now + secs);
                    }
                }
            }
            Op::Advance { secs } => {
                self.store.clock().advance(secs as u32);
                self.model.now += secs;
            }
            Op::Reap { batch } => {
                self.store.reap(batch);
                self.model.sync();
                // Everything expired or flushed is gone now.
                assert_eq!(self.store.len(), self.model.map.len());
                assert_eq!(self.store.stats().curr_items, self.model.map.len() as u64);
            }
        }
    }

    /// Compares every key the case could have used.
    fn check_all(&mut self) {
        for k in 0..KEYS {
            let key = key_name(k);
            let hit = self.store.get_with(&key, &GetOptions::default());
            self.check_hit(&key, hit);
        }
    }
}

const KEYS: u8 = 8;

fn exp() -> impl Strategy<Value = Exp> {
    prop_oneof![
        4 => Just(Exp::Never),
        4 => (1i64..=4).prop_map(Exp::Relative),
        1 => Just(Exp::ThirtyDays),
        1 => Just(Exp::ThirtyDaysAndOne),
        2 => (-2i64..=4).prop_map(Exp::Absolute),
        1 => prop_oneof![Just(1i64), Just(1000), Just(i64::from(u32::MAX))].prop_map(Exp::Negative),
    ]
}

/// Values that are numbers in memcached's eyes, nearly numbers, or not.
fn value() -> impl Strategy<Value = Vec<u8>> {
    let numeric_bytes = prop::sample::select(&b"0123456789 +-\t\x0ba"[..]);
    prop_oneof![
        3 => (0u64..1000).prop_map(|n| n.to_string().into_bytes()),
        2 => any::<u64>().prop_map(|n| n.to_string().into_bytes()),
        1 => Just(u64::MAX.to_string().into_bytes()),
        1 => Just(b"18446744073709551616".to_vec()),
        1 => (0u64..100, 0usize..40).prop_map(|(n, pad)| {
            let mut v = n.to_string().into_bytes();
            v.resize(v.len() + pad, b' ');
            v
        }),
        3 => prop::collection::vec(numeric_bytes, 0..8),
        2 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

fn mode() -> impl Strategy<Value = SetMode> {
    prop::sample::select(vec![
        SetMode::Set,
        SetMode::Set,
        SetMode::Add,
        SetMode::Replace,
        SetMode::Append,
        SetMode::Prepend,
        SetMode::Rotate { max: 8 },
        SetMode::Rotate { max: 24 },
    ])
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS;
    let flags = prop_oneof![Just(0u32), any::<u32>()];
    let delta = prop_oneof![0u64..10, any::<u64>(), Just(u64::MAX)];
    prop_oneof![
        8 => (mode(), key.clone(), value(), flags.clone(), exp()).prop_map(
            |(mode, key, value, flags, exp)| Op::Store { mode, key, value, flags, exp }
        ),
        2 => (key.clone(), value(), flags, exp(), prop::option::of(1u64..8)).prop_map(
            |(key, value, flags, exp, unique)| Op::Cas { key, value, flags, exp, unique }
        ),
        4 => (key.clone(), any::<bool>(), delta)
            .prop_map(|(key, incr, delta)| Op::Arith { key, incr, delta }),
        2 => (key.clone(), exp()).prop_map(|(key, exp)| Op::Touch { key, exp }),
        1 => (key.clone(), exp()).prop_map(|(key, exp)| Op::GetAndTouch { key, exp }),
        2 => key.clone().prop_map(|key| Op::Delete { key }),
        6 => key.prop_map(|key| Op::Get { key }),
        2 => prop::option::of(0i64..4).prop_map(|delay| Op::Flush { delay }),
        3 => prop_oneof![
            4 => (1i64..=3).prop_map(|n| n * TICK),
            1 => Just(THIRTY_DAYS),
        ]
        .prop_map(|secs| Op::Advance { secs }),
        1 => prop::sample::select(vec![1usize, 2, 3, 8, 256])
            .prop_map(|batch| Op::Reap { batch }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn store_agrees_with_the_model(
        shards in prop::sample::select(vec![1usize, 4]),
        eviction in prop::sample::select(EvictionKind::ALL.to_vec()),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let mut h = Harness::new(shards, eviction);
        for op in ops {
            h.apply(op);
        }
        h.check_all();
    }
}

#[test]
fn strtoull_reference_behaves_like_c() {
    assert_eq!(memcached_strtoull(b" \x0b12\t"), Some(12));
    assert_eq!(memcached_strtoull(b"-0"), Some(0));
    assert_eq!(memcached_strtoull(b"-1"), None);
    assert_eq!(memcached_strtoull(b"-18446744073709551615"), Some(1));
    assert_eq!(memcached_strtoull(b"18446744073709551616"), None);
    assert_eq!(memcached_strtoull(b"1 2"), Some(1));
    assert_eq!(memcached_strtoull(b"1a"), None);
    assert_eq!(memcached_strtoull(b" "), None);
}
