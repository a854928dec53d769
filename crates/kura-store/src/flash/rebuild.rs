//! Reading a persistent tier back when it is opened: every page is read
//! once, from its start, in chunks of a write buffer (no record is longer),
//! so the work is bounded by the files' size whatever they hold. A page
//! whose first bytes are not an intact marker is free. In a page, records
//! follow each other until bytes that are not a record's header: the rest
//! (a write cut by a crash, or an earlier generation's records, which fail
//! the CRC of this one) is cut. A record whose CRC or key does not check is
//! skipped, never indexed; a record marked dead is skipped.

use std::sync::atomic::Ordering::Relaxed;

use super::index::Loc;
use super::record::{self, Record, HEADER, PAGE_MARK};
use super::Tier;

/// What a scan found.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Rebuilt {
    /// Pages holding this run's records.
    pub pages: u64,
    /// Intact records handed to the store.
    pub records: u64,
    /// Records skipped: their CRC or length did not check.
    pub damaged: u64,
    /// Records skipped: deleted in place.
    pub dead: u64,
    /// Device reads made.
    pub reads: u64,
}

impl Tier {
    /// Scans every page (see the module documentation), handing each
    /// intact record and its place to `found`; each counts as live until
    /// the store [`forgo`](Tier::forgo)es it. Afterwards the pages with
    /// records are full (oldest first) and the others free.
    pub(crate) fn rebuild(&self, now: u32, mut found: impl FnMut(Loc, &Record<'_>)) -> Rebuilt {
        let mut seen = Rebuilt::default();
        let chunk = self.config.wbuf_size.min(self.config.page_size as usize);
        let mut buf = vec![0u8; chunk];
        let mut marked = Vec::new();
        for page in 0..self.pages.len() as u32 {
            seen.reads += 1;
            let got = self.dev.read(page, 0, &mut buf).unwrap_or(0);
            let Some(gen) = record::mark_at(&buf[..got]) else {
                continue;
            };
            let pg = &self.pages[page as usize];
            pg.gen.store(gen, Relaxed);
            pg.live.store(0, Relaxed);
            pg.objects.store(0, Relaxed);
            let (mut off, mut got, mut at) = (0u64, got, HEADER);
            loop {
                let whole = at + HEADER <= got;
                let len = if whole {
                    record::len_at(&buf[at..got])
                } else {
                    None
                };
                let partial = match len {
                    None => !whole,
                    Some(len) => at + len > got,
                };
                if partial {
                    // The chunk ends inside a header or a record: read on
                    // from it, unless the page or the data ended.
                    let next = off + at as u64;
                    if at == 0 || got < buf.len() || next >= self.config.page_size {
                        break;
                    }
                    off = next;
                    seen.reads += 1;
                    got = self.dev.read(page, off, &mut buf).unwrap_or(0);
                    at = 0;
                    continue;
                }
                let Some(len) = len else {
                    break;
                };
                if len < HEADER || off + (at + len) as u64 > self.config.page_size {
                    break;
                }
                let bytes = &buf[at..at + len];
                let rec_off = off + at as u64;
                at += len;
                pg.filled.store(off + at as u64, Relaxed);
                if record::is_dead(bytes) {
                    seen.dead += 1;
                    continue;
                }
                match record::decode(bytes, gen) {
                    Ok(r) if r.fields.marks & PAGE_MARK == 0 => {
                        seen.records += 1;
                        pg.live.fetch_add(len as u64, Relaxed);
                        pg.objects.fetch_add(1, Relaxed);
                        let loc = Loc {
                            page,
                            gen,
                            off: rec_off as u32,
                            len: len as u32,
                            exptime: r.fields.exptime,
                            last_access: now,
                            hits: 0,
                        };
                        found(loc, &r);
                    }
                    _ => seen.damaged += 1,
                }
            }
            if pg.filled.load(Relaxed) < HEADER as u64 {
                pg.filled.store(HEADER as u64, Relaxed);
            }
            marked.push((gen, page));
        }
        marked.sort_unstable();
        seen.pages = marked.len() as u64;
        let mut st = self.st.lock();
        let newest = marked.last().map_or(0, |&(gen, _)| gen);
        self.next_gen.store(newest.wrapping_add(1).max(1), Relaxed);
        let mut in_use = vec![false; self.pages.len()];
        for &(_, p) in &marked {
            in_use[p as usize] = true;
        }
        st.full = marked.iter().map(|&(_, p)| p).collect();
        st.free = (0..self.pages.len() as u32)
            .rev()
            .filter(|&p| !in_use[p as usize])
            .collect();
        // Pages from before were never handed out in this run: their
        // generations must not name a future page's records.
        for p in &st.free {
            self.pages[*p as usize].gen.store(0, Relaxed);
        }
        drop(st);
        let c = &self.counters;
        c.rebuild_records.fetch_add(seen.records, Relaxed);
        c.rebuild_damaged.fetch_add(seen.damaged, Relaxed);
        c.rebuild_reads.fetch_add(seen.reads, Relaxed);
        seen
    }

    /// A record handed out by [`Tier::rebuild`] that the store does not
    /// keep (replaced by a newer one of its key, or expired): no longer
    /// live, and not marked dead (a restart skips it again the same way).
    pub(crate) fn forgo(&self, loc: &Loc) {
        let p = &self.pages[loc.page as usize];
        if p.gen.load(Relaxed) == loc.gen {
            p.live.fetch_sub(u64::from(loc.len), Relaxed);
            p.objects.fetch_sub(1, Relaxed);
        }
    }
}
