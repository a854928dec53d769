//! `stats topkeys` (kura's): the most requested keys over a window of
//! seconds, from a bounded sketch per thread. While on, each read's key
//! goes into its thread's count-min sketch ([`ROWS`] x [`WIDTH`] counters,
//! by the time its connection's batch of requests began)
//! and, when its estimate reaches the smallest of them, into the thread's
//! [`CANDIDATES`] most requested keys. At each window's end a thread's
//! candidates become its last window's; `stats topkeys` sums the threads'
//! estimates per key. Off (the default), a read pays one relaxed load.

use std::sync::atomic::{AtomicU32, Ordering};

use foldhash::fast::FixedState;
use std::hash::BuildHasher;

/// Counters per row of a thread's sketch.
const WIDTH: usize = 8192;
/// Rows (independent hashes) of the sketch.
const ROWS: usize = 2;
/// Keys each thread keeps as candidates.
pub const CANDIDATES: usize = 32;
/// Keys `stats topkeys` lists per window.
pub const SHOWN: usize = 20;
/// The window when `stats topkeys on` names none.
pub const DEFAULT_WINDOW: u32 = 60;

/// The server's switch: the window in seconds while on, 0 while off.
#[derive(Debug, Default)]
pub struct HotKeys {
    window: AtomicU32,
}

impl HotKeys {
    /// The window, 0 while off.
    #[inline]
    pub fn window(&self) -> u32 {
        self.window.load(Ordering::Relaxed)
    }

    pub fn set(&self, window: u32) {
        self.window.store(window, Ordering::Relaxed);
    }
}

/// One key's estimated count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    pub key: Box<[u8]>,
    pub count: u64,
}

/// One thread's sketch (allocated when first used).
#[derive(Debug, Default)]
pub struct Sketch(parking_lot::Mutex<Option<Box<Counts>>>);

#[derive(Debug)]
struct Counts {
    /// The window being counted (`now / window`) and its length.
    index: u32,
    window: u32,
    cells: Box<[[u32; WIDTH]; ROWS]>,
    top: Vec<(u64, Counted)>,
    /// The smallest count among `top` once it is full.
    floor: u64,
    /// The last window's candidates, and its index.
    last: (u32, Vec<Counted>),
}

fn hasher() -> FixedState {
    FixedState::with_seed(0x6b75_7261_746f_706b)
}

impl Sketch {
    /// Counts a request for `key` at `now`, in windows of `window` seconds.
    pub fn note(&self, key: &[u8], now: u32, window: u32) {
        let index = now / window.max(1);
        let mut guard = self.0.lock();
        let c = guard.get_or_insert_with(|| {
            Box::new(Counts {
                index,
                window,
                cells: vec![[0u32; WIDTH]; ROWS]
                    .into_boxed_slice()
                    .try_into()
                    .unwrap_or_else(|_| Box::new([[0; WIDTH]; ROWS])),
                top: Vec::with_capacity(CANDIDATES),
                floor: 0,
                last: (u32::MAX, Vec::new()),
            })
        });
        if c.index != index || c.window != window {
            c.roll(index, window);
        }
        let h = hasher().hash_one(key);
        let mut est = u32::MAX;
        for (row, cells) in c.cells.iter_mut().enumerate() {
            let cell = &mut cells[(h >> (row * 32)) as usize % WIDTH];
            *cell = cell.saturating_add(1);
            est = est.min(*cell);
        }
        let est = u64::from(est);
        if c.top.len() == CANDIDATES && est < c.floor {
            return;
        }
        if let Some((_, e)) = c.top.iter_mut().find(|(hh, e)| *hh == h && &*e.key == key) {
            e.count = est;
        } else if c.top.len() < CANDIDATES {
            c.top.push((
                h,
                Counted {
                    key: key.into(),
                    count: est,
                },
            ));
        } else if let Some(min) = c.top.iter_mut().min_by_key(|(_, e)| e.count) {
            *min = (
                h,
                Counted {
                    key: key.into(),
                    count: est,
                },
            );
        }
        if c.top.len() == CANDIDATES {
            c.floor = c.top.iter().map(|(_, e)| e.count).min().unwrap_or(0);
        }
    }

    /// This thread's candidates of window `index` (of `window` seconds), if
    /// it has them.
    pub fn window_of(&self, index: u32, window: u32) -> Vec<Counted> {
        let guard = self.0.lock();
        let Some(c) = guard.as_ref().filter(|c| c.window == window) else {
            return Vec::new();
        };
        if c.index == index {
            c.top.iter().map(|(_, e)| e.clone()).collect()
        } else if c.last.0 == index {
            c.last.1.clone()
        } else {
            Vec::new()
        }
    }

    /// Frees the sketch (`stats topkeys off`).
    pub fn clear(&self) {
        *self.0.lock() = None;
    }
}

impl Counts {
    fn roll(&mut self, index: u32, window: u32) {
        let top = std::mem::take(&mut self.top)
            .into_iter()
            .map(|(_, e)| e)
            .collect();
        // Only the window just before this one is worth keeping.
        self.last = if self.window == window && self.index + 1 == index {
            (self.index, top)
        } else {
            (u32::MAX, Vec::new())
        };
        self.index = index;
        self.window = window;
        self.floor = 0;
        for row in self.cells.iter_mut() {
            row.fill(0);
        }
    }
}

/// The threads' candidates for one window summed by key, most requested
/// first, at most [`SHOWN`].
pub fn merge<'a>(windows: impl IntoIterator<Item = &'a [Counted]>) -> Vec<Counted> {
    let mut sums: std::collections::HashMap<&[u8], u64> = Default::default();
    for w in windows {
        for e in w {
            *sums.entry(&e.key).or_default() += e.count;
        }
    }
    let mut all: Vec<Counted> = sums
        .into_iter()
        .map(|(k, count)| Counted {
            key: k.into(),
            count,
        })
        .collect();
    all.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
    all.truncate(SHOWN);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hot_keys_of_a_window_come_out_on_top() {
        let s = Sketch::default();
        // Window 100 (of 10 s): a hot key among 10,000 cold ones.
        for i in 0..10_000u32 {
            s.note(format!("cold{i}").as_bytes(), 1000, 10);
            if i % 10 == 0 {
                s.note(b"hot", 1001, 10);
            }
            if i % 20 == 0 {
                s.note(b"warm", 1002, 10);
            }
        }
        let now = s.window_of(100, 10);
        let top = merge([now.as_slice()]);
        assert_eq!(&*top[0].key, b"hot");
        assert!(top[0].count >= 1_000);
        assert_eq!(&*top[1].key, b"warm");
        // The next window starts empty and keeps the last one.
        s.note(b"other", 1010, 10);
        assert_eq!(merge([s.window_of(100, 10).as_slice()])[0].key, top[0].key);
        assert_eq!(&*s.window_of(101, 10)[0].key, b"other");
        assert!(s.window_of(99, 10).is_empty());
    }
}
