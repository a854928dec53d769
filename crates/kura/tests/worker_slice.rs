//! The server's worker threads run with a short scheduler time slice
//! (`-o worker_slice_us`, 100 us by default: kura-sched), so a worker woken
//! on a busy machine gets a CPU sooner; its other threads keep the
//! kernel's. Read back from /proc/<pid>/task/<tid>/sched (`se.slice`, ns).

mod common;

use common::cluster::wait_for;
use common::Server;

/// Each thread's name and `se.slice` in nanoseconds.
fn slices(server: &Server) -> Vec<(String, u64)> {
    let pid = server.child.id();
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = t.unwrap().path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap();
        let sched = std::fs::read_to_string(dir.join("sched")).unwrap();
        let slice = sched
            .lines()
            .find_map(|l| l.strip_prefix("se.slice"))
            .and_then(|v| v.trim_start_matches([' ', ':']).trim().parse().ok())
            .expect("se.slice in /proc/<pid>/task/<tid>/sched");
        out.push((name.trim().to_string(), slice));
    }
    out
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
