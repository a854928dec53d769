//! Pinning a worker thread to one CPU (`-o worker_cpulist`, as Redis's
//! `server_cpulist`): on a machine whose cores the server shares with its
//! clients, the scheduler can wake both workers onto the core their client
//! runs on while the other idles (bench/results/2026-11-29-cpu-share.txt);
//! a worker pinned to its own core is never stacked with the other.

use std::io;

use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

/// Parses a CPU list as `taskset -c` takes it: numbers and inclusive
/// ranges, separated by commas or colons (`0-3,8,10-11` or `0-3:8:10-11`:
/// memcached's `-o` separates its suboptions with commas), in the order
/// given.
///
/// # Errors
/// An empty item, a number that is not one, a range whose end is below
/// its start, or a CPU the kernel's sets cannot hold.
pub fn parse_cpulist(list: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for item in list.split([',', ':']) {
        let (first, last) = match item.split_once('-') {
            Some((a, b)) => (cpu_number(a)?, cpu_number(b)?),
            None => {
                let n = cpu_number(item)?;
                (n, n)
            }
        };
        if last < first {
            return Err(format!("the range {item} ends below its start"));
        }
        cpus.extend(first..=last);
    }
    Ok(cpus)
}

fn cpu_number(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a CPU number"))?;
    if n >= CpuSet::MAX_CPU {
        return Err(format!(
            "CPU {n} is beyond the {} a set holds",
            CpuSet::MAX_CPU
        ));
    }
    Ok(n)
}

/// The CPUs the calling thread may run on.
///
/// # Errors
/// The kernel refused `sched_getaffinity`.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let set = sched_getaffinity(None)?;
    Ok((0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect())
}

/// Pins the calling thread to `cpu`.
///
/// # Errors
/// The CPU is not one this process may use (offline, or outside its
/// cpuset), or the kernel refused.
pub fn pin_to(cpu: usize) -> io::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu);
    Ok(sched_setaffinity(None, &set)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_read_as_taskset_reads_them() {
        assert_eq!(parse_cpulist("0"), Ok(vec![0]));
        assert_eq!(
            parse_cpulist("0-3,8,10-11"),
            Ok(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(
            parse_cpulist("0-3:8:10-11"),
            Ok(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist("3,1"), Ok(vec![3, 1]), "in the order given");
        for bad in ["", "a", "1,", "1:", "-1", "3-1", "1-", "0-99999", "1.5"] {
            assert!(parse_cpulist(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_pinned_thread_runs_only_on_its_cpu() {
        std::thread::spawn(|| {
            let allowed = allowed_cpus().unwrap();
            let last = *allowed.last().expect("a thread runs somewhere");
            pin_to(last).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![last]);
            // A CPU outside the process's set is refused, and changes nothing.
            let outside = (0..CpuSet::MAX_CPU).find(|c| !allowed.contains(c));
            if let Some(c) = outside {
                assert!(pin_to(c).is_err());
                assert_eq!(allowed_cpus().unwrap(), vec![last]);
            }
        })
        .join()
        .unwrap();
    }
}
