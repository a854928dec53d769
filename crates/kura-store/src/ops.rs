//! The operations of the store, each carried out on one shard under its
//! lock: lookups (get, gat, touch, meta get), stores (set, add, replace,
//! append, prepend, cas), arithmetic and deletes. Their request and outcome
//! types are in `api.rs`.

use crate::api::{
    ArithOutcome, ArithRequest, DeleteOutcome, DeleteRequest, GetOptions, Hit, SetMode, SetOutcome,
    SetRequest,
};
use crate::expiry::{is_expired, Expiry};
use crate::item::{Item, ENTRY_MARKS, FETCHED, KEY_BINARY, STALE, TOKEN_SENT};
use crate::shard::{Shard, SharedRead};
/// C's `isspace`: unlike [`u8::is_ascii_whitespace`] it includes the
/// vertical tab.
fn is_c_space(b: &u8) -> bool {
    b.is_ascii_whitespace() || *b == 0x0b
}

/// Parses a stored value as memcached's `incr` does (`strtoull`: optional
/// leading whitespace and sign, digits, then whitespace or the end).
fn parse_counter(v: &[u8]) -> Option<u64> {
    let mut i = v.iter().take_while(|b| is_c_space(b)).count();
    let negative = matches!(v.get(i), Some(b'-'));
    if matches!(v.get(i), Some(b'+') | Some(b'-')) {
        i += 1;
    }
    let start = i;
    let mut n: u64 = 0;
    while let Some(d) = v.get(i).filter(|d| d.is_ascii_digit()) {
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        i += 1;
    }
    if i == start || v.get(i).is_some_and(|b| !is_c_space(b)) {
        return None;
    }
    if negative {
        let wrapped = n.wrapping_neg();
        return ((wrapped as i64) >= 0).then_some(wrapped);
    }
    Some(n)
}

impl Shard {
    /// The CAS unique for a new version: the client's explicit one (meta
    /// `E`) or a fresh one.
    fn assign_cas(&mut self, explicit: Option<u64>) -> u64 {
        match explicit {
            Some(c) => {
                self.observe_cas(c);
                c
            }
            None => self.next_cas(),
        }
    }

    pub(crate) fn get(
        &mut self,
        hash: u64,
        key: &[u8],
        opts: &GetOptions,
        now: u32,
    ) -> Option<Hit> {
        let (off, created) = match self.look_up(hash, key, now) {
            Some(off) => (off, false),
            None => {
                let expiry = opts.vivify?;
                let cas = self.next_cas();
                let deadline = expiry.deadline(now);
                let item = self.alloc(&self.contents(key, 0, &[], deadline, cas), now, None)?;
                (self.put(hash, None, item, deadline, cas, 0, now), true)
            }
        };
        let exptime_before = self.meta(off).exptime();
        let off = match opts.touch.filter(|_| !created) {
            // An entry that had to go for want of room for its deadline is
            // a miss, as an evicted one.
            Some(t) => self.set_exptime(hash, off, t.deadline(now), now)?,
            None => off,
        };
        let m = self.meta(off);
        let (marks, last_access, exptime) = (m.marks(), m.last_access(), m.exptime());
        let token_sent = marks & TOKEN_SENT != 0;
        let stale = marks & STALE != 0;
        let mut won = false;
        if created {
            won = true;
        } else if let Some(r) = opts.recache {
            let seen = if opts.recache_after_touch {
                exptime
            } else {
                exptime_before
            };
            won = !token_sent && seen != 0 && seen < r.deadline(now);
        }
        if opts.stale_token && stale && !token_sent {
            won = true;
        }
        if won {
            m.set_marks(m.marks() | TOKEN_SENT);
        }
        if !opts.no_bump {
            self.bump(hash, off, now);
        }
        let m = self.meta(off);
        Some(Hit {
            item: m.handle(),
            cas: m.cas(),
            exptime,
            exptime_before,
            last_access,
            fetched: marks & FETCHED != 0,
            stale,
            won,
            token_sent,
            created,
            binary_key: marks & KEY_BINARY != 0,
        })
    }

    /// A plain read (default [`GetOptions`]) under the shared lock: a hit
    /// when it needs no change but the policy's atomic bookkeeping (the
    /// entry was fetched before, and already accessed this second), a miss,
    /// or [`SharedRead::Exclusive`] to do it again with the lock held
    /// exclusively. Answers as [`get`](Self::get) would.
    // Inlined into `Store::get_with` (where its `SharedRead` is built in
    // place): called, it returned through memory, 38 more instructions a
    // read in `examples/get_loop.rs` (bench/results/history.md).
    #[inline(always)]
    pub(crate) fn get_shared(&self, hash: u64, key: &[u8], now: u32) -> SharedRead {
        let Some(off) = self.find(hash, key) else {
            // A flushed entry is let go (and counted) under the lock held
            // exclusively.
            if self.is_flushed(hash, key) {
                return SharedRead::Exclusive;
            }
            return SharedRead::Miss;
        };
        let m = self.meta(off);
        let marks = m.marks();
        if is_expired(m.exptime(), now)
            || marks & FETCHED == 0
            || m.last_access() != now
            || !self.touch_shared(off)
        {
            return SharedRead::Exclusive;
        }
        SharedRead::Hit(Hit {
            item: m.handle(),
            cas: m.cas(),
            exptime: m.exptime(),
            exptime_before: m.exptime(),
            last_access: m.last_access(),
            fetched: true,
            stale: marks & STALE != 0,
            won: false,
            token_sent: marks & TOKEN_SENT != 0,
            created: false,
            binary_key: marks & KEY_BINARY != 0,
        })
    }

    /// Carries out a storage request: builds the new item in the arena
    /// (from the request, or from the old value for append, prepend and
    /// rotate) and links it.
    ///
    /// `prebuilt`, when given, is a block holding this request's key, flags
    /// and value (a large value, copied while the lock was not held), used
    /// when the new item is the request's.
    pub(crate) fn set(
        &mut self,
        hash: u64,
        req: &SetRequest<'_>,
        now: u32,
        prebuilt: Option<Item>,
    ) -> SetOutcome {
        let existing = self.find_live(hash, req.key, now);
        let deadline = req.expiry.unwrap_or(Expiry::Never).deadline(now);
        let mut marks = if req.binary_key { KEY_BINARY } else { 0 };
        let mut exptime = deadline;
        let mut flags = req.flags;
        // A handle on the old item while the new one is built from it.
        let old: Option<Item>;
        let mut parts: [&[u8]; 2] = [req.value, b""];
        match existing {
            None => {
                old = None;
                match (req.mode, req.cas) {
                    (SetMode::Set, None) | (SetMode::Add, _) => {}
                    (SetMode::Set | SetMode::Replace | SetMode::Rotate { .. }, Some(_)) => {
                        return SetOutcome::NotFound
                    }
                    (SetMode::Rotate { max }, None) => {
                        parts[0] = &req.value[req.value.len().saturating_sub(max as usize)..];
                    }
                    (SetMode::Replace | SetMode::Append | SetMode::Prepend, _) => {
                        return SetOutcome::NotStored
                    }
                }
            }
            Some(off) => {
                let m = self.meta(off);
                let cas_now = m.cas();
                match req.mode {
                    SetMode::Add => {
                        // memcached moves the entry up the LRU but, as this
                        // is not a read, does not mark it fetched.
                        self.promote(hash, off, now);
                        return SetOutcome::NotStored;
                    }
                    SetMode::Set | SetMode::Replace => {
                        old = None;
                        if let Some(want) = req.cas.filter(|&c| c != cas_now) {
                            // CAS 0 never matches, not even as an older one.
                            if !(req.invalidate && want != 0 && want < cas_now) {
                                return SetOutcome::Exists;
                            }
                            // A stale write: keeps the TTL and the token state.
                            exptime = m.exptime();
                            marks |= STALE | (m.marks() & TOKEN_SENT);
                        }
                    }
                    SetMode::Rotate { .. } | SetMode::Append | SetMode::Prepend => {
                        let rotate = matches!(req.mode, SetMode::Rotate { .. });
                        if req.cas.is_some_and(|c| (rotate || c != 0) && c != cas_now) {
                            return SetOutcome::Exists;
                        }
                        // A new item, as in memcached: it keeps the flags and
                        // TTL but is not fetched, stale or token-holding, and
                        // its key is as this request sent it.
                        exptime = m.exptime();
                        old = Some(m.handle());
                    }
                }
            }
        }
        if let Some(old) = &old {
            flags = old.flags();
            let v = old.value();
            parts = match req.mode {
                SetMode::Rotate { max } => {
                    let max = max as usize;
                    if req.value.len() >= max {
                        [&b""[..], &req.value[req.value.len() - max..]]
                    } else {
                        let keep = (max - req.value.len()).min(v.len());
                        [&v[v.len() - keep..], req.value]
                    }
                }
                SetMode::Append => [v, req.value],
                _ => [req.value, v],
            };
            let len = parts[0].len() + parts[1].len();
            if req
                .size_limit
                .is_some_and(|l| !l.fits(req.key.len(), flags, len))
            {
                return SetOutcome::NotStored;
            }
        }
        let cas = self.assign_cas(req.new_cas);
        let contents = self.contents(req.key, flags, &parts, exptime, cas);
        if let (Some(off), None) = (existing, &prebuilt) {
            if self.overwrite(hash, off, &contents, exptime, cas, marks, now) {
                return SetOutcome::Stored { cas };
            }
        }
        let item = match prebuilt {
            Some(item) if old.is_none() && self.still_fits(&item, existing, &contents) => {
                Some(item)
            }
            // Built again under the lock, making room as any set does.
            _ => self.alloc(&contents, now, existing),
        };
        let Some(item) = item else {
            if let (Some(off), SetMode::Set) = (existing, req.mode) {
                // Like memcached: a failed set must not leave the old
                // value to be served as if it were current.
                self.unlink(hash, off);
            }
            return SetOutcome::NoMemory;
        };
        self.put(hash, existing, item, exptime, cas, marks, now);
        SetOutcome::Stored { cas }
    }

    pub(crate) fn arith(
        &mut self,
        hash: u64,
        key: &[u8],
        req: &ArithRequest,
        now: u32,
    ) -> ArithOutcome {
        let Some(off) = self.look_up(hash, key, now) else {
            let Some((initial, expiry)) = req.vivify else {
                return ArithOutcome::NotFound;
            };
            let mut digits = itoa::Buffer::new();
            let digits = digits.format(initial).as_bytes();
            let exptime = expiry.deadline(now);
            let cas = req.new_cas.unwrap_or_else(|| self.next_cas());
            let parts = [digits];
            let contents = self.contents(key, 0, &parts, exptime, cas);
            let Some(item) = self.alloc(&contents, now, None) else {
                return ArithOutcome::NoMemory;
            };
            self.put(hash, None, item, exptime, cas, 0, now);
            return ArithOutcome::Updated {
                value: initial,
                cas,
                exptime,
                exptime_before: exptime,
                created: true,
            };
        };
        let m = self.meta(off);
        let old = m.handle();
        // memcached's order: an empty value, then the CAS, then the number.
        if old.value().is_empty() {
            return ArithOutcome::NonNumeric;
        }
        if req.cas.is_some_and(|c| c != m.cas()) {
            return ArithOutcome::Exists;
        }
        let (exptime_before, marks) = (m.exptime(), m.marks() & ENTRY_MARKS);
        let Some(current) = parse_counter(old.value()) else {
            return ArithOutcome::NonNumeric;
        };
        let value = if req.incr {
            current.wrapping_add(req.delta)
        } else {
            current.saturating_sub(req.delta)
        };
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(value).as_bytes();
        // memcached rewrites a counter in place when the new number is not
        // longer, padding with spaces to the old length.
        let pad = old.value().len().saturating_sub(digits.len());
        let spaces = [b' '; 20];
        // A counter with leading or trailing blanks can be longer than any
        // number; its padding then needs a buffer of its own.
        let long_padding;
        let padding: &[u8] = if pad <= spaces.len() {
            &spaces[..pad]
        } else {
            long_padding = vec![b' '; pad];
            &long_padding
        };
        // A number that no longer fits is a new item to memcached, which is
        // not fetched, stale or token-holding; an incr is not a read either.
        let marks = if digits.len() > old.value().len() {
            marks & KEY_BINARY
        } else {
            marks
        };
        let parts = [digits, padding];
        let flags = old.flags();
        let exptime = req.touch.map_or(exptime_before, |t| t.deadline(now));
        let cas = self.assign_cas(req.new_cas);
        let contents = self.contents(key, flags, &parts, exptime, cas);
        // A number that fits is written over the old one, as memcached
        // does, unless a handle still holds the old value (this function's
        // own handle goes first: the new bytes are in local buffers).
        drop(old);
        let in_place = self.overwrite(hash, off, &contents, exptime, cas, marks, now);
        if in_place {
            return ArithOutcome::Updated {
                value,
                cas,
                exptime,
                exptime_before,
                created: false,
            };
        }
        let Some(item) = self.alloc(&contents, now, Some(off)) else {
            return ArithOutcome::NoMemory;
        };
        // `put` promotes the entry and notes the access time.
        self.put(hash, Some(off), item, exptime, cas, marks, now);
        ArithOutcome::Updated {
            value,
            cas,
            exptime,
            exptime_before,
            created: false,
        }
    }

    pub(crate) fn delete(
        &mut self,
        hash: u64,
        key: &[u8],
        req: &DeleteRequest,
        now: u32,
    ) -> DeleteOutcome {
        let Some(off) = self.look_up(hash, key, now) else {
            return DeleteOutcome::NotFound;
        };
        let m = self.meta(off);
        let (cas_now, exptime, marks) = (m.cas(), m.exptime(), m.marks() & ENTRY_MARKS);
        if req.cas.is_some_and(|c| c != cas_now) {
            return DeleteOutcome::Exists;
        }
        if req.invalidate {
            let cas = self.assign_cas(req.new_cas);
            // No room for the new CAS unique or deadline: the entry went,
            // as a delete.
            let Some(off) = self.set_cas(hash, off, cas, now) else {
                return DeleteOutcome::Deleted;
            };
            let off = match req.touch {
                Some(t) => match self.set_exptime(hash, off, t.deadline(now), now) {
                    Some(off) => off,
                    None => return DeleteOutcome::Deleted,
                },
                None => off,
            };
            let m = self.meta(off);
            m.set_marks((m.marks() | STALE) & !TOKEN_SENT);
            return DeleteOutcome::Deleted;
        }
        if let Some(flags) = req.remove_value {
            let cas = self.assign_cas(req.new_cas);
            let contents = self.contents(key, flags, &[], exptime, cas);
            if let Some(item) = self.alloc(&contents, now, Some(off)) {
                self.put(hash, Some(off), item, exptime, cas, marks, now);
                return DeleteOutcome::Deleted;
            }
            // No room even for an empty value: the value goes all the same,
            // with its entry.
        }
        self.unlink(hash, off);
        DeleteOutcome::Deleted
    }

    /// Whether an entry is present and not expired (no side effects).
    pub(crate) fn contains(&self, hash: u64, key: &[u8], now: u32) -> bool {
        self.find(hash, key)
            .is_some_and(|off| !is_expired(self.meta(off).exptime(), now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::SizeLimit;
    use crate::{Store, StoreConfig};

    #[test]
    fn counters_parse_like_strtoull() {
        assert_eq!(parse_counter(b"12"), Some(12));
        assert_eq!(parse_counter(b"9 "), Some(9));
        assert_eq!(parse_counter(b" 7"), Some(7));
        assert_eq!(parse_counter(b"1 2"), Some(1));
        assert_eq!(parse_counter(b"\x0b3\x0b"), Some(3));
        assert_eq!(parse_counter(b"-0"), Some(0));
        assert_eq!(parse_counter(b"-1"), None);
        assert_eq!(parse_counter(b""), None);
        assert_eq!(parse_counter(b"abc"), None);
        assert_eq!(parse_counter(b"12a"), None);
        assert_eq!(parse_counter(b"18446744073709551616"), None);
    }

    fn store() -> Store {
        Store::new(StoreConfig::default())
    }

    fn set(s: &Store, key: &[u8], value: &[u8]) -> SetOutcome {
        s.set(&SetRequest::new(key, value))
    }

    #[test]
    fn size_limit_is_memcacheds_item_size_test() {
        let l = SizeLimit {
            item_size_max: 1024 * 1024,
            cas: true,
        };
        assert!(l.fits(1, 0, 1_048_516));
        assert!(!l.fits(1, 0, 1_048_517));
        assert!(l.fits(1, 1, 1_048_512));
        assert!(!l.fits(1, 1, 1_048_513));
    }

    #[test]
    fn append_past_the_size_limit_is_not_stored() {
        let s = store();
        set(&s, b"k", &[b'v'; 1000]);
        let limit = Some(SizeLimit {
            item_size_max: 1100,
            cas: true,
        });
        for mode in [SetMode::Append, SetMode::Prepend] {
            let req = SetRequest {
                mode,
                size_limit: limit,
                ..SetRequest::new(b"k", &[b'w'; 100])
            };
            assert_eq!(s.set(&req), SetOutcome::NotStored);
        }
        assert_eq!(s.get(b"k").unwrap().value().len(), 1000);
    }

    #[test]
    fn add_and_incr_do_not_mark_fetched() {
        let s = store();
        set(&s, b"n", b"5");
        let add = SetRequest {
            mode: SetMode::Add,
            ..SetRequest::new(b"n", b"6")
        };
        assert_eq!(s.set(&add), SetOutcome::NotStored);
        s.arith(b"n", &ArithRequest::new(true, 1));
        let peek = GetOptions {
            no_bump: true,
            ..Default::default()
        };
        assert!(!s.get_with(b"n", &peek).unwrap().fetched);
    }

    #[test]
    fn incr_on_an_empty_value_is_non_numeric_before_the_cas_test() {
        let s = store();
        set(&s, b"e", b"");
        let req = ArithRequest {
            cas: Some(12345),
            ..ArithRequest::new(true, 1)
        };
        assert_eq!(s.arith(b"e", &req), ArithOutcome::NonNumeric);
    }

    #[test]
    fn stale_write_needs_a_nonzero_older_cas() {
        let s = store();
        set(&s, b"k", b"a");
        let req = SetRequest {
            cas: Some(0),
            invalidate: true,
            ..SetRequest::new(b"k", b"b")
        };
        assert_eq!(s.set(&req), SetOutcome::Exists);
    }

    #[test]
    fn recache_sees_the_touched_ttl_only_after_touch() {
        let s = store();
        for key in [&b"r"[..], b"r2"] {
            s.set(&SetRequest {
                expiry: Some(Expiry::In(100_000)),
                ..SetRequest::new(key, b"x")
            });
        }
        let opts = |after| GetOptions {
            touch: Some(Expiry::In(10)),
            recache: Some(Expiry::In(1000)),
            recache_after_touch: after,
            ..Default::default()
        };
        // R before T: the TTL was 100000, not below 1000.
        assert!(!s.get_with(b"r", &opts(false)).unwrap().won);
        // T (now 10) before R: below 1000, the token is won.
        assert!(s.get_with(b"r2", &opts(true)).unwrap().won);
    }

    #[test]
    fn only_meta_gets_win_the_token_of_a_stale_entry() {
        let s = store();
        set(&s, b"st", b"x");
        let invalidate = DeleteRequest {
            invalidate: true,
            ..Default::default()
        };
        s.delete_with(b"st", &invalidate);
        assert!(!s.get_with(b"st", &GetOptions::default()).unwrap().won);
        let meta = GetOptions {
            stale_token: true,
            ..Default::default()
        };
        assert!(s.get_with(b"st", &meta).unwrap().won);
        assert!(s.get_with(b"st", &meta).unwrap().token_sent);
    }

    #[test]
    fn vivify_keeps_its_own_ttl_over_touch() {
        let s = store();
        let opts = GetOptions {
            touch: Some(Expiry::In(10)),
            vivify: Some(Expiry::In(1000)),
            ..Default::default()
        };
        let hit = s.get_with(b"v", &opts).unwrap();
        assert!(hit.created);
        assert_eq!(hit.exptime, Expiry::In(1000).deadline(s.now()));
    }
}
