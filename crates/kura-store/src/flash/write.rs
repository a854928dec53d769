//! The flash tier's write path: records appended to the open page's
//! buffer, full buffers handed to the writer thread, pages opened (the
//! oldest full page dropped when none is free), and a persistent tier's
//! last writes when it is dropped.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::index::Loc;
use super::{record, Tier, Wbuf, WriteState};

impl Tier {
    /// Appends a record (built by `fill` for the page generation it is
    /// given, `len` bytes) to the open page's buffer: its place, or `None`
    /// when it cannot be written now.
    pub(crate) fn append(&self, len: usize, fill: impl FnOnce(&mut Vec<u8>, u32)) -> Option<Loc> {
        let c = &self.counters;
        if len + record::HEADER > self.config.wbuf_size {
            c.writes_dropped.fetch_add(1, Relaxed);
            return None;
        }
        let mut st = self.st.lock();
        while self.patient.load(Relaxed) && st.pending.len() >= self.config.write_queue {
            // A spill at a stop: every record is wanted, the writer is waited for.
            self.written.wait_for(&mut st, Duration::from_millis(50));
        }
        let fits = |st: &WriteState| {
            st.open
                .as_ref()
                .is_some_and(|(cursor, _)| cursor + len as u64 <= self.config.page_size)
        };
        if !fits(&st) && (!self.close_open(&mut st) || !self.open_page(&mut st)) {
            c.writes_dropped.fetch_add(1, Relaxed);
            return None;
        }
        let (_, buf) = st.open.as_ref()?;
        if buf.data.len() + len > self.config.wbuf_size {
            if st.pending.len() >= self.config.write_queue {
                c.writes_dropped.fetch_add(1, Relaxed);
                return None;
            }
            let (cursor, buf) = st.open.as_mut()?;
            let next = Wbuf {
                page: buf.page,
                gen: buf.gen,
                start: *cursor,
                data: Vec::with_capacity(self.config.wbuf_size),
            };
            let full = std::mem::replace(buf, next);
            st.pending.push_back(Arc::new(full));
            st.open_since = None;
            self.written.notify_all();
        }
        if st.open_since.is_none() && self.config.flush_after.is_some() {
            st.open_since = Some(Instant::now());
        }
        let (cursor, buf) = st.open.as_mut()?;
        let at = buf.data.len();
        fill(&mut buf.data, buf.gen);
        debug_assert_eq!(buf.data.len() - at, len);
        let loc = Loc {
            page: buf.page,
            gen: buf.gen,
            off: *cursor as u32,
            len: len as u32,
            exptime: 0,
            last_access: 0,
            hits: 0,
        };
        *cursor += len as u64;
        let p = &self.pages[buf.page as usize];
        p.live.fetch_add(len as u64, Relaxed);
        p.objects.fetch_add(1, Relaxed);
        p.filled.store(*cursor, Relaxed);
        drop(st);
        c.objects_written.fetch_add(1, Relaxed);
        c.bytes_written.fetch_add(len as u64, Relaxed);
        Some(loc)
    }

    /// Closes the open page (its buffer goes to the writer): false when
    /// the writer is too far behind to take it.
    fn close_open(&self, st: &mut WriteState) -> bool {
        let Some((_, buf)) = &st.open else {
            return true;
        };
        if !buf.data.is_empty() && st.pending.len() >= self.config.write_queue {
            return false;
        }
        let Some((_, buf)) = st.open.take() else {
            return true;
        };
        st.open_since = None;
        st.full.push_back(buf.page);
        if !buf.data.is_empty() {
            st.pending.push_back(Arc::new(buf));
            self.written.notify_all();
        }
        true
    }

    /// Opens a free page, dropping the oldest full one when none is free.
    fn open_page(&self, st: &mut WriteState) -> bool {
        let page = match st.free.pop() {
            Some(p) => p,
            None => {
                let Some(p) = st.full.pop_front() else {
                    return false;
                };
                let c = &self.counters;
                c.page_evictions.fetch_add(1, Relaxed);
                let pg = &self.pages[p as usize];
                c.objects_evicted
                    .fetch_add(pg.objects.load(Relaxed), Relaxed);
                c.bytes_evicted.fetch_add(pg.live.load(Relaxed), Relaxed);
                self.reset_page(p);
                self.purge_due.store(true, Relaxed);
                self.wake_maintainer();
                p
            }
        };
        self.counters.page_allocs.fetch_add(1, Relaxed);
        let pg = &self.pages[page as usize];
        let gen = self.next_gen.fetch_add(1, Relaxed);
        pg.gen.store(gen, Relaxed);
        let mut data = Vec::with_capacity(self.config.wbuf_size);
        record::encode_mark(&mut data, gen);
        pg.filled.store(data.len() as u64, Relaxed);
        st.open = Some((
            data.len() as u64,
            Wbuf {
                page,
                gen,
                start: 0,
                data,
            },
        ));
        if st.free.len() < self.config.compact_under {
            self.wake_maintainer();
        }
        true
    }

    /// Waits until every buffer handed to the writer is written (tests and
    /// benchmarks: what is still in the open page's buffer stays there).
    pub fn drain(&self) {
        let mut st = self.st.lock();
        while !st.pending.is_empty() {
            self.written.wait_for(&mut st, Duration::from_millis(50));
        }
    }

    /// Hands the open page's buffer to the writer even if not full
    /// (tests: so that reads go to the device).
    pub(crate) fn flush_open(&self) {
        self.hand_over_open(&mut self.st.lock());
    }

    /// [`Tier::flush_open`] under the state lock.
    fn hand_over_open(&self, st: &mut WriteState) {
        st.open_since = None;
        let Some((cursor, buf)) = st.open.as_mut() else {
            return;
        };
        if buf.data.is_empty() {
            return;
        }
        let next = Wbuf {
            page: buf.page,
            gen: buf.gen,
            start: *cursor,
            data: Vec::new(),
        };
        let full = std::mem::replace(buf, next);
        st.pending.push_back(Arc::new(full));
        self.written.notify_all();
    }
}

impl Drop for Tier {
    /// A persistent tier writes what its buffers still hold (a clean stop
    /// keeps every record handed to it), then the dead marks of records
    /// deleted while their buffer was being written.
    fn drop(&mut self) {
        if !self.config.persist {
            return;
        }
        let st = self.st.get_mut();
        let open = st.open.take().map(|(_, b)| Arc::new(b));
        let bufs: Vec<Arc<Wbuf>> = st.pending.drain(..).chain(open).collect();
        let kills = std::mem::take(&mut st.kills);
        for w in bufs {
            if self.pages[w.page as usize].gen.load(Relaxed) == w.gen
                && self.dev.write(w.page, w.start, &w.data).is_err()
            {
                self.counters.write_errors.fetch_add(1, Relaxed);
            }
        }
        for l in kills.iter().filter(|l| self.holds(l)) {
            let _ = self.dev.write(l.page, u64::from(l.off), &[record::DEAD]);
        }
    }
}

/// The writer thread: writes the waiting buffers in order, one `pwrite`
/// each; a failed write loses its page (its records become misses).
pub(super) fn writer(tier: Weak<Tier>) {
    loop {
        let Some(t) = tier.upgrade() else {
            return;
        };
        let next = {
            let mut st = t.st.lock();
            if st.pending.is_empty() {
                t.written.wait_for(&mut st, Duration::from_millis(100));
            }
            let due = t.config.flush_after.zip(st.open_since);
            if st.pending.is_empty() && due.is_some_and(|(after, since)| since.elapsed() >= after) {
                // Records waited long enough in a buffer that is not filling.
                t.hand_over_open(&mut st);
            }
            st.pending.front().cloned()
        };
        let Some(w) = next else {
            continue;
        };
        let result = if t.pages[w.page as usize].gen.load(Relaxed) == w.gen {
            t.dev.write(w.page, w.start, &w.data)
        } else {
            Ok(())
        };
        let mut st = t.st.lock();
        if result.is_err() {
            t.counters.write_errors.fetch_add(1, Relaxed);
            t.lose_page(&mut st, w.page, w.gen);
        }
        // Records deleted while their buffer was being written.
        let kills: Vec<Loc> = {
            let st = &mut *st;
            let mut mine = Vec::new();
            st.kills.retain(|l| {
                let here = w.index_of(l).is_some();
                if here {
                    mine.push(*l);
                }
                !here
            });
            mine
        };
        for l in kills.iter().filter(|l| t.holds(l)) {
            if t.dev
                .write(l.page, u64::from(l.off), &[record::DEAD])
                .is_err()
            {
                t.counters.write_errors.fetch_add(1, Relaxed);
            }
        }
        if st.pending.front().is_some_and(|f| Arc::ptr_eq(f, &w)) {
            st.pending.pop_front();
        }
        t.written.notify_all();
    }
}
