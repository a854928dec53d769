//! A scheduling hint for the worker threads of kura's servers: a short
//! time slice (Linux 6.12 and later, EEVDF's `sched_attr::sched_runtime` for
//! `SCHED_OTHER` threads). The slice sets how far ahead a thread's virtual
//! deadline lies when it becomes runnable, not its share of the CPU: a
//! worker woken by a request on a busy machine (clients, sidecars or a load
//! generator on the same cores) gets the CPU within about its slice, where
//! with the default slice (0.75 ms times 1 + log2 of the CPUs) it may wait
//! for a whole slice of whatever runs there. On the 2-vCPU machine of
//! bench/results/2026-11-28-curve.txt, a kura worker's average wait for a
//! CPU at 110,000 req/s was ~1 ms with the default, and the p99.9 half of
//! that with 100 us.
//!
//! No privilege is needed. A kernel without custom slices ignores the value
//! (older EEVDF or CFS kernels accept the call and keep their own slice);
//! one that refuses it costs nothing but a log line.
//!
//! And, asked for, a CPU of its own for each worker (affinity.rs).

use std::io;

mod affinity;

pub use affinity::{allowed_cpus, parse_cpulist, pin_to};

/// The shortest slice the kernel accepts, in microseconds.
pub const MIN_SLICE_US: u64 = 100;
/// The longest.
pub const MAX_SLICE_US: u64 = 100_000;

/// Whether `us` is a slice setting the kernel can take: 0 (keep the
/// kernel's own slice) or within [`MIN_SLICE_US`]..=[`MAX_SLICE_US`].
pub fn valid_setting(us: u64) -> bool {
    us == 0 || (MIN_SLICE_US..=MAX_SLICE_US).contains(&us)
}

/// The kernel's `struct sched_attr` (include/uapi/linux/sched/types.h),
/// in its first published size (48 bytes) plus the utilisation clamps (56).
#[repr(C)]
#[derive(Default, Debug, Clone, Copy)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
    sched_util_min: u32,
    sched_util_max: u32,
}

/// Gives the calling thread a time slice of `us` microseconds (clamped to
/// the kernel's range), keeping its policy (`SCHED_OTHER`) and nice value.
///
/// # Errors
/// The kernel refused (`sched_setattr` is missing, or forbidden by a
/// seccomp filter).
pub fn set_slice(us: u64) -> io::Result<()> {
    let us = us.clamp(MIN_SLICE_US, MAX_SLICE_US);
    let mut attr = current()?;
    attr.size = std::mem::size_of::<SchedAttr>() as u32;
    attr.sched_flags = 0;
    attr.sched_runtime = us * 1000;
    // SAFETY: sched_setattr(2) reads `size` bytes from the pointer, which
    // is a live, initialised SchedAttr of exactly that size; pid 0 is the
    // calling thread; flags 0. The struct outlives the call.
    let rc = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0u32) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's slice as the kernel reports it, in microseconds
/// (0 from a kernel that does not report one).
///
/// # Errors
/// As [`set_slice`].
pub fn slice_us() -> io::Result<u64> {
    Ok(current()?.sched_runtime / 1000)
}

fn current() -> io::Result<SchedAttr> {
    let mut attr = SchedAttr::default();
    let size = std::mem::size_of::<SchedAttr>() as u32;
    // SAFETY: sched_getattr(2) writes at most `size` bytes into the
    // pointer, which is a live SchedAttr of exactly that size; pid 0 is
    // the calling thread; flags 0.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            size,
            0u32,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(attr)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a kernel with custom slices (6.12 and later, as CI's), the slice
    /// set is the slice read back, and the thread's policy and nice value
    /// are untouched.
    #[test]
    fn a_thread_gets_the_slice_it_asks_for_and_keeps_its_policy() {
        std::thread::spawn(|| {
            let before = current().unwrap();
            set_slice(300).unwrap();
            let after = current().unwrap();
            assert_eq!(
                (after.sched_policy, after.sched_nice),
                (before.sched_policy, before.sched_nice)
            );
            if before.sched_runtime == 0 {
                // A kernel that reports no slice has no custom slices.
                eprintln!("this kernel has no per-thread slices: nothing to check");
                return;
            }
            assert_eq!(slice_us().unwrap(), 300);
            // Out of range: clamped.
            set_slice(1).unwrap();
            assert_eq!(slice_us().unwrap(), MIN_SLICE_US);
        })
        .join()
        .unwrap();
    }
}
