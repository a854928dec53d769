//! The server's worker threads run with a short scheduler time slice
//! (`-o worker_slice_us`, 100 us by default: kura-sched), so a worker woken
//! on a busy machine gets a CPU sooner; its other threads keep the
//! kernel's. Read back from /proc/<pid>/task/<tid>/sched (`se.slice`, ns).
//! Asked to (`-o worker_cpulist`), each worker runs on a CPU of its own
//! (`Cpus_allowed_list` in /proc/<pid>/task/<tid>/status).

mod common;

use common::cluster::wait_for;
use common::{ask, Server};

/// Each thread's name and the value of `field` in its /proc file `file`.
fn per_thread(server: &Server, file: &str, field: &str) -> Vec<(String, String)> {
    let pid = server.child.id();
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = t.unwrap().path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap();
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let value = text
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .map(|v| v.trim_start_matches([' ', ':', '\t']).trim().to_string())
            .unwrap_or_else(|| panic!("{field} in /proc/<pid>/task/<tid>/{file}"));
        out.push((name.trim().to_string(), value));
    }
    out.sort();
    out
}

/// Each thread's name and `se.slice` in nanoseconds.
fn slices(server: &Server) -> Vec<(String, u64)> {
    per_thread(server, "sched", "se.slice")
        .into_iter()
        .map(|(name, ns)| (name, ns.parse().expect("se.slice in ns")))
        .collect()
}

/// Waits until the workers (which set their slice as they start) show
/// `ns`, and returns every thread's.
fn workers_at(server: &Server, ns: u64) -> Vec<(String, u64)> {
    wait_for(&format!("the workers' slices at {ns} ns"), 10, || {
        let t = slices(server);
        let w: Vec<_> = t
            .iter()
            .filter(|(n, _)| n.starts_with("kura-worker"))
            .collect();
        w.len() == 2 && w.iter().all(|(_, s)| *s == ns)
    });
    slices(server)
}

#[test]
fn workers_run_with_the_slice_asked_for_and_the_rest_with_the_kernels() {
    let s = Server::start_in_memory(&["-t", "2"]);
    let threads = workers_at(&s, 100_000);
    let default = threads
        .iter()
        .find(|(n, _)| n == "kura-acceptor")
        .unwrap()
        .1;
    assert_ne!(default, 100_000, "{threads:?}");

    let s = Server::start_in_memory(&["-t", "2", "-o", "worker_slice_us=400"]);
    workers_at(&s, 400_000);

    // 0: the kernel's slice, as every other thread has.
    let s = Server::start_in_memory(&["-t", "2", "-o", "worker_slice_us=0"]);
    std::thread::sleep(std::time::Duration::from_millis(200));
    workers_at(&s, default);
}

/// Each thread's name and the CPUs it may run on (`Cpus_allowed_list`).
fn affinities(server: &Server) -> Vec<(String, String)> {
    per_thread(server, "status", "Cpus_allowed_list")
}

#[test]
fn workers_are_pinned_to_the_cpus_asked_for_and_the_rest_are_not() {
    let allowed = kura_sched::allowed_cpus().unwrap();
    let (first, last) = (allowed[0], allowed[allowed.len() - 1]);
    // Not pinned by default: every thread may run where the process may.
    let s = Server::start_in_memory(&["-t", "2"]);
    let all = affinities(&s);
    let everywhere = all[0].1.clone();
    assert!(all.iter().all(|(_, c)| *c == everywhere), "{all:?}");

    // Worker i on the i-th CPU of the list, wrapping; the workers' task
    // threads beside them; the acceptor and the rest where they were.
    let list = format!("{last}:{first}");
    let s = Server::start_in_memory(&["-t", "3", "-o", &format!("worker_cpulist={list}")]);
    let want = |name: &str| match name {
        "kura-worker-0" | "kura-wtask-0" | "kura-worker-2" | "kura-wtask-2" => last.to_string(),
        "kura-worker-1" | "kura-wtask-1" => first.to_string(),
        _ => everywhere.clone(),
    };
    wait_for("the workers pinned", 10, || {
        affinities(&s).iter().all(|(n, c)| *c == want(n))
    });
    let threads = affinities(&s);
    assert!(
        threads.iter().any(|(n, _)| n == "kura-worker-2"),
        "{threads:?}"
    );
    assert!(
        threads.iter().any(|(n, _)| n == "kura-acceptor"),
        "{threads:?}"
    );

    // `stats settings` says what was asked.
    let settings = ask(&mut s.connect(), b"stats settings\r\n", b"END\r\n");
    let pinned = String::from_utf8(settings)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("STAT worker_cpulist "))
        .map(str::to_string);
    assert_eq!(pinned, Some(list));
}

#[test]
fn a_cpu_the_process_cannot_use_is_refused_at_start() {
    let allowed = kura_sched::allowed_cpus().unwrap();
    let outside = (0..1024).find(|c| !allowed.contains(c)).unwrap();
    let out = common::kura()
        .args([
            "server",
            "-p",
            "0",
            "-o",
            &format!("worker_cpulist={outside}"),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("CPU {outside} is not one this process may run on")),
        "{err}"
    );
}
