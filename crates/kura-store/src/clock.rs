//! The store's clock: Unix seconds, read from a monotonic clock so a wall
//! clock step does not expire or revive items. Tests can move it forward.
//!
//! Its seconds begin when the wall clock's do. Deadlines are absolute Unix
//! times, and a durable server's log keeps them across a restart, so the
//! clock of the process that set an item and the clock of the one that
//! serves it after a restart must both read `floor(wall time)`: a clock
//! counting whole monotonic seconds from the wall time at its start,
//! rounded down, would tick at another phase than the wall clock and serve
//! an item up to a second after its deadline, or drop it a second early,
//! differently in every process. So the clock keeps the wall clock's offset
//! from the monotonic one in nanoseconds, read once at start, and adds it
//! to every monotonic reading before cutting to seconds.
//!
//! Every operation reads it, so on Linux it reads the coarse monotonic
//! clock, which is cheaper than the precise one but only updated every
//! tick: it can be a few milliseconds behind (7 ms seen with 4 ms ticks).
//! Within [`GUARD`] of a second's end, where the precise clock may already
//! be in the next second, the clock reads the precise clock instead. So
//! every reading is the wall clock's second, neither early nor late, unless
//! the coarse clock is more than `GUARD` behind.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

const NANOS: u64 = 1_000_000_000;

/// The last part of each second in which the precise clock is read: a
/// coarse reading there may be behind a second that has already begun.
/// Two dozen ticks, so a tenth of the readings pay for the precise clock.
const GUARD: u32 = 100_000_000;

/// Seconds since the Unix epoch as the store sees them.
#[derive(Debug)]
pub struct Clock {
    /// The wall clock minus the monotonic clock, its whole seconds
    /// (wrapping arithmetic: "negative" for a monotonic clock ahead of the
    /// wall clock) and the nanoseconds beyond them.
    offset: Stamp,
    /// The Unix second at which the clock started.
    started: u32,
    skew: AtomicU32,
}

/// A clock reading as the system gives it: seconds, and nanoseconds
/// below a second (no division to split them on every read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    secs: u64,
    nanos: u32,
}

impl Stamp {
    /// `nanos` nanoseconds (may be negative: a wrapping number of seconds).
    pub(crate) fn from_nanos(nanos: i128) -> Stamp {
        let n = i128::from(NANOS);
        Stamp {
            secs: nanos.div_euclid(n) as u64,
            nanos: nanos.rem_euclid(n) as u32,
        }
    }

    /// This reading moved by `offset`.
    #[inline(always)]
    fn plus(self, offset: Stamp) -> Stamp {
        let nanos = self.nanos + offset.nanos;
        let carry = nanos >= NANOS as u32;
        Stamp {
            secs: self
                .secs
                .wrapping_add(offset.secs)
                .wrapping_add(u64::from(carry)),
            nanos: if carry { nanos - NANOS as u32 } else { nanos },
        }
    }
}

/// The coarse monotonic clock (Linux).
#[cfg(target_os = "linux")]
#[inline(always)]
fn coarse() -> Stamp {
    read(libc::CLOCK_MONOTONIC_COARSE).unwrap_or_else(fallback)
}

/// The monotonic clock in nanoseconds, read precisely: a plain number to
/// subtract, for timing requests (`Instant`'s normalising arithmetic costs
/// some 70 instructions a reading and a subtraction more).
#[inline]
pub fn monotonic_nanos() -> u64 {
    let s = precise();
    s.secs.wrapping_mul(NANOS).wrapping_add(u64::from(s.nanos))
}

/// The precise monotonic clock, the base of the coarse one.
#[cfg(target_os = "linux")]
fn precise() -> Stamp {
    read(libc::CLOCK_MONOTONIC).unwrap_or_else(fallback)
}

#[cfg(target_os = "linux")]
#[inline(always)]
fn read(id: libc::clockid_t) -> Option<Stamp> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call, and both clocks read here exist on every Linux since 2.6.32.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return None;
    }
    Some(Stamp {
        secs: u64::try_from(ts.tv_sec).ok()?,
        nanos: u32::try_from(ts.tv_nsec).ok()?,
    })
}

#[cfg(not(target_os = "linux"))]
fn coarse() -> Stamp {
    fallback()
}

#[cfg(not(target_os = "linux"))]
fn precise() -> Stamp {
    fallback()
}

/// The time since the first call, from `Instant`.
fn fallback() -> Stamp {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let elapsed = ORIGIN.get_or_init(Instant::now).elapsed();
    Stamp {
        secs: elapsed.as_secs(),
        nanos: elapsed.subsec_nanos(),
    }
}

/// The wall clock in nanoseconds since the Unix epoch.
fn wall_nanos() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock reading the current time.
    pub fn new() -> Clock {
        // The monotonic clock is read first: the wall clock is read at
        // that moment or later, so the offset is exact or some nanoseconds
        // large (the clock turns a second that much early, never late).
        let mono = precise();
        let mono = i128::from(mono.secs) * i128::from(NANOS) + i128::from(mono.nanos);
        Clock::from_readings(wall_nanos(), mono)
    }

    /// A clock for which the monotonic time `mono` was the wall time
    /// `wall` (nanoseconds since the Unix epoch).
    pub(crate) fn from_readings(wall: i128, mono: i128) -> Clock {
        Clock {
            offset: Stamp::from_nanos(wall - mono),
            started: u32::try_from(wall.max(0) / i128::from(NANOS)).unwrap_or(u32::MAX),
            skew: AtomicU32::new(0),
        }
    }

    /// The Unix second (without the skew) given a coarse monotonic
    /// reading, and the precise clock to read near a second's end.
    #[inline(always)]
    pub(crate) fn at(&self, coarse: Stamp, precise: impl FnOnce() -> Stamp) -> u32 {
        let t = coarse.plus(self.offset);
        if t.nanos < NANOS as u32 - GUARD {
            return u32::try_from(t.secs).unwrap_or(u32::MAX);
        }
        self.near_a_seconds_end(precise)
    }

    #[cold]
    #[inline(never)]
    fn near_a_seconds_end(&self, precise: impl FnOnce() -> Stamp) -> u32 {
        let t = precise().plus(self.offset);
        u32::try_from(t.secs).unwrap_or(u32::MAX)
    }

    /// The current time in Unix seconds.
    #[inline(always)]
    pub fn now(&self) -> u32 {
        self.at(coarse(), precise)
            .saturating_add(self.skew.load(Ordering::Relaxed))
    }

    /// The Unix time at which this clock started.
    pub fn started(&self) -> u32 {
        self.started
    }

    /// Moves the clock forward by `secs` (for tests and simulations).
    pub fn advance(&self, secs: u32) {
        self.skew.fetch_add(secs, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    // The clock turns a second as early as the time between its two start
    // readings (`Clock::new`): nanoseconds natively, milliseconds when
    // interpreted, which this check of every reading would catch.
    #[cfg_attr(miri, ignore = "Miri's readings are milliseconds apart")]
    fn seconds_are_the_wall_clocks() {
        // Over a whole second, every reading is the wall clock's second at
        // the moment of the reading.
        let c = Clock::new();
        let until = Instant::now() + Duration::from_millis(1100);
        let mut seconds = std::collections::BTreeSet::new();
        while Instant::now() < until {
            let before = wall_nanos() / i128::from(NANOS);
            let now = i128::from(c.now());
            let after = wall_nanos() / i128::from(NANOS);
            seconds.insert(now);
            assert!(
                (before..=after).contains(&now),
                "{now} read between the wall clock's {before} and {after}"
            );
            std::thread::sleep(Duration::from_micros(500));
        }
        assert!(seconds.len() >= 2, "no second passed: {seconds:?}");
    }

    #[test]
    fn every_start_phase_gives_the_wall_clocks_seconds() {
        // Processes started at any phase of the wall clock's second, on
        // machines whose monotonic clock is at any phase of its own, agree
        // with the wall clock and each other at every moment after: an
        // absolute deadline means the same moment to all of them.
        let n = i128::from(NANOS);
        let at = Stamp::from_nanos;
        // Under Miri fewer phases (pure arithmetic, no unsafe code).
        let (walls, monos) = (crate::testing::size(20, 2), crate::testing::size(60, 3));
        for wall_phase in (0..n).step_by(NANOS as usize / walls) {
            for mono_phase in (0..n).step_by(NANOS as usize / monos) {
                let wall0 = 1_700_000_000 * n + wall_phase;
                let mono0 = 86_400 * n + mono_phase;
                let c = Clock::from_readings(wall0, mono0);
                let laters = crate::testing::size(29, 5);
                for later in (0..3 * n).step_by(NANOS as usize / laters) {
                    let wall = wall0 + later;
                    let precise = mono0 + later;
                    // The coarse clock is behind by up to a few ticks.
                    for behind in [0, 1, 4_000_000, 7_500_000, i128::from(GUARD) - 1] {
                        let now = c.at(at(precise - behind), || at(precise));
                        assert_eq!(
                            i128::from(now),
                            wall / n,
                            "start {wall_phase}/{mono_phase}, {later} ns on, {behind} behind"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_precise_clock_is_read_only_near_a_seconds_end() {
        let n = i128::from(NANOS);
        let guard = i128::from(GUARD);
        let at = Stamp::from_nanos;
        let c = Clock::from_readings(7 * n, 0);
        let never = || -> Stamp { panic!("read the precise clock") };
        assert_eq!(c.at(at(n / 2), never), 7);
        assert_eq!(c.at(at(n - guard - 1), never), 7);
        assert_eq!(c.at(at(n - guard), || at(n - 1)), 7);
        assert_eq!(c.at(at(n - guard), || at(n)), 8);
    }

    #[test]
    fn a_monotonic_clock_ahead_of_the_wall_clock_is_no_trouble() {
        let n = i128::from(NANOS);
        let c = Clock::from_readings(5 * n + 300, 9 * n);
        let at = |t: i128| c.at(Stamp::from_nanos(t), || Stamp::from_nanos(t));
        assert_eq!(at(9 * n), 5);
        assert_eq!(at(10 * n - 301), 5);
        assert_eq!(at(10 * n - 300), 6);
        assert_eq!(c.started(), 5);
    }

    #[test]
    fn advance_moves_now() {
        let c = Clock::new();
        let before = c.now();
        c.advance(100);
        assert!(c.now() >= before + 100);
        assert!(c.now() <= before + 102);
    }
}
