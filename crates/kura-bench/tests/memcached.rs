//! `kura bench` against Debian's memcached 1.6, in all three protocols: a
//! correct server, so every request must be counted and none may fail.
//!
//! memcached is found at `$KURA_MEMCACHED` or `/usr/bin/memcached`; when it
//! is missing each test prints "skipped: memcached not installed", unless
//! `KURA_REQUIRE_MEMCACHED=1`, which makes it fail.

mod common;

use common::{bench, bench_output, Memcached};
use kura_bench::{Report, RunSummary};

const PROTOCOLS: [&str; 3] = ["text", "meta", "binary"];

/// The one run of a report, checked for what every run must satisfy.
fn clean_run(report: &Report, requests: u64) -> RunSummary {
    assert_eq!(report.runs.len(), 1);
    let run = report.runs[0].clone();
    assert_eq!(run.errors, 0, "errors: {:?}", run.error_samples);
    assert_eq!(run.requests, requests, "every request counted once");
    assert_eq!(run.gets + run.sets, run.requests);
    run
}

#[test]
fn an_empty_server_answers_every_get_with_a_miss() {
    for proto in PROTOCOLS {
        let Some(mc) = Memcached::start() else { return };
        let report = bench(&format!(
            "-s {} -P {proto} -c 4 -n 1000 --ratio 1:0",
            mc.addr
        ));
        let run = clean_run(&report, 1000);
        assert_eq!((run.gets, run.hits, run.misses), (1000, 0, 1000), "{proto}");
        assert_eq!(run.latency_us.samples, 1000, "{proto}");
    }
}

#[test]
fn a_prefilled_mix_has_no_misses_and_no_errors() {
    for proto in PROTOCOLS {
        let Some(mc) = Memcached::start() else { return };
        let report = bench(&format!(
            "-s {} -P {proto} -c 3 --pipeline 8 -n 3001 --keys 500 --prefill --value-size 20-300",
            mc.addr
        ));
        let prefill = report.prefill.clone().expect("prefill ran");
        assert_eq!((prefill.sets, prefill.errors), (500, 0), "{proto}");
        let run = clean_run(&report, 3001);
        assert_eq!(run.misses, 0, "{proto}");
        assert_eq!(run.hits, run.gets, "{proto}");
        assert!(run.sets > 0 && run.gets > run.sets, "{proto}: 9:1 mix");
    }
}

#[test]
fn multi_gets_count_every_key() {
    for proto in PROTOCOLS {
        let Some(mc) = Memcached::start() else { return };
        // Half of the key space is set, so multi-gets mix hits and misses
        // (500 and 1000 keys have names of the same length).
        bench(&format!(
            "-s {} -P {proto} --keys 500 --prefill -n 0",
            mc.addr
        ));
        let report = bench(&format!(
            "-s {} -P {proto} -c 2 --pipeline 4 --keys 1000 --multiget 10 --ratio 1:0 -n 400",
            mc.addr
        ));
        let run = clean_run(&report, 400);
        assert_eq!(run.hits + run.misses, 4000, "{proto}");
        assert!(run.hits > 0 && run.misses > 0, "{proto}: {run:?}");
    }
}

#[test]
fn quiet_sets_are_counted_and_stored() {
    for proto in PROTOCOLS {
        let Some(mc) = Memcached::start() else { return };
        let sets = bench(&format!(
            "-s {} -P {proto} -c 1 --keys 50 --ratio 0:1 --noreply -n 3000",
            mc.addr
        ));
        let run = clean_run(&sets, 3000);
        assert_eq!(run.sets, 3000);
        assert_eq!(
            run.latency_us.samples, 0,
            "quiet sets have no reply to time"
        );
        // 3000 random sets over 50 keys leave none unset: every get hits.
        let gets = bench(&format!(
            "-s {} -P {proto} -c 2 --keys 50 --ratio 1:0 -n 500",
            mc.addr
        ));
        let run = clean_run(&gets, 500);
        assert_eq!((run.hits, run.misses), (500, 0), "{proto}");
    }
}

#[test]
fn an_open_loop_sends_exactly_what_it_was_asked() {
    let Some(mc) = Memcached::start() else { return };
    for proto in PROTOCOLS {
        let report = bench(&format!(
            "-s {} -P {proto} -c 3 --rate 4000 -n 400",
            mc.addr
        ));
        let run = clean_run(&report, 400);
        assert_eq!(run.offered_rate, Some(4000.0));
        assert_eq!(run.latency_us.samples, 400);
    }
}

#[test]
fn a_sweep_reports_every_rate_as_json_and_draws_them() {
    let Some(mc) = Memcached::start() else { return };
    let dir = std::env::temp_dir().join(format!("kura-bench-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let svg = dir.join("sweep.svg");
    let (report, out) = bench_output(&format!(
        "-s {} -c 2 --sweep 2000,4000 -n 200 --json --label mc --plot {}",
        mc.addr,
        svg.display()
    ));
    let json: serde_json::Value = serde_json::from_str(&out).expect("--json prints JSON");
    assert_eq!(json["label"], "mc");
    let runs = json["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["offered_rate"], 2000.0);
    assert_eq!(runs[1]["requests"], 200);
    assert_eq!(runs[1]["errors"], 0);
    assert!(runs[1]["latency_us"]["p999"].as_f64().is_some());
    // --overlay reads such reports back (floats may differ in the last bit).
    let back: Report = serde_json::from_str(&out).expect("reads back");
    assert_eq!(
        (&back.label, back.protocol),
        (&report.label, report.protocol)
    );
    let requests = |r: &Report| r.runs.iter().map(|r| r.requests).collect::<Vec<_>>();
    assert_eq!(requests(&back), vec![200, 200]);
    let drawing = std::fs::read_to_string(&svg).expect("--plot wrote the SVG");
    assert!(drawing.starts_with("<svg"), "{}", &drawing[..100]);
    assert!(drawing.contains("p99.9 latency") && drawing.contains("\nmc\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_duration_run_over_a_unix_socket() {
    let dir = std::env::temp_dir().join(format!("kura-bench-unix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("mc.sock");
    let Some(mc) = Memcached::start_unix(&path) else {
        return;
    };
    let (report, table) = bench_output(&format!("-s {} -c 2 -d 0.3", mc.addr));
    let run = &report.runs[0];
    assert!(run.requests > 0);
    assert_eq!(run.errors, 0, "{:?}", run.error_samples);
    assert!(table.contains("closed"), "{table}");
    drop(mc);
    let _ = std::fs::remove_dir_all(&dir);
}
