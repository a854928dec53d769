//! Sleeping until a request is due, for the open loop. tokio's timers tick
//! in whole milliseconds, which would add up to a millisecond of the
//! generator's own lateness to every latency measured from the timetable;
//! a Linux timerfd, watched by the runtime like a socket, wakes within
//! microseconds.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// A one-shot timer for one task.
pub struct Pacer {
    fd: AsyncFd<OwnedFd>,
}

impl Pacer {
    /// # Errors
    /// If the kernel refuses a timerfd, or the runtime cannot watch it.
    pub fn new() -> io::Result<Pacer> {
        // SAFETY: timerfd_create takes no pointers; a non-negative result
        // is a new descriptor that nothing else owns.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor owned by no one else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an OwnedFd stays open, and is the same descriptor, until
        // the AsyncFd that owns it is dropped.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }?;
        Ok(Pacer { fd })
    }

    /// Returns at `when` (at once if it has passed).
    ///
    /// # Errors
    /// If arming or reading the timer fails.
    pub async fn sleep_until(&mut self, when: Instant) -> io::Result<()> {
        let now = Instant::now();
        if when <= now {
            return Ok(());
        }
        let wait = when - now;
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: the descriptor is a timerfd we own; `spec` outlives the
        // call and the old value is not asked for (null).
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            let mut ready = self.fd.readable().await?;
            let read = ready.try_io(|fd| {
                let mut expirations = [0u8; 8];
                // SAFETY: reads at most 8 bytes into a buffer of 8.
                let n = unsafe { libc::read(fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            match read {
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn wakes_no_earlier_than_asked() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut p = Pacer::new().unwrap();
            let start = Instant::now();
            for i in 1..=3 {
                let due = start + Duration::from_micros(300 * i);
                p.sleep_until(due).await.unwrap();
                assert!(Instant::now() >= due);
            }
            // a time already past returns at once
            p.sleep_until(start).await.unwrap();
        });
    }
}
