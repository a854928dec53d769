//! The attack suite of issue 37: every probe in `attacks/probes.rs` (request smuggling, cache
//! poisoning, deception, credential leaks, malformed framing, limits, slow clients, backends
//! that never answer or never stop) sent through kura http with its defaults in front of a
//! lenient backend, and kura must be safe against each.
//!
//! With `KURA_ATTACKS_SIDE_BY_SIDE=1` the same probes go through Varnish (default VCL) and nginx
//! (`proxy_cache`) too, when installed (required under CI), and one line per probe shows the
//! three results: `cargo test -p kura-http --test attacks -- --nocapture`. Only kura's results
//! decide whether the test passes.

mod common;
#[path = "attacks/poisoning.rs"]
mod poisoning;
#[path = "attacks/probes.rs"]
mod probes;
#[path = "attacks/smuggling.rs"]
mod smuggling;
#[path = "attacks/systems.rs"]
mod systems;

use common::lenient::Lenient;
use probes::{backend, Verdict, PROBES};
use systems::System;

async fn run_all(system: &System) -> Vec<Verdict> {
    let mut verdicts = Vec::new();
    for probe in PROBES {
        verdicts.push((probe.run)(system).await);
    }
    verdicts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attacks_do_not_work_on_kura() {
    let side_by_side = std::env::var("KURA_ATTACKS_SIDE_BY_SIDE").is_ok_and(|v| v == "1");
    let mut columns: Vec<(&str, Vec<Verdict>)> = Vec::new();
    let kura = systems::kura(Lenient::start(backend).await).await;
    columns.push(("kura", run_all(&kura).await));
    kura.stop().await;
    if side_by_side {
        let required = std::env::var("CI").is_ok_and(|v| v == "true");
        for (name, program) in [("varnish", "varnishd"), ("nginx", "nginx")] {
            let Some(path) = systems::installed(program) else {
                assert!(!required, "{program} is not installed (CI installs it)");
                eprintln!("{program} is not installed: its column is left out");
                continue;
            };
            let backend = Lenient::start(backend).await;
            let system = match name {
                "varnish" => systems::varnish(path, backend).await,
                _ => systems::nginx(path, backend).await,
            };
            columns.push((name, run_all(&system).await));
            system.stop().await;
        }
    }
    let mut table = String::from(
        "\nsafe/UNSAFE: smuggling, poisoning, leaks; ok/differs: behaviour beside kura's\n\
         probe (issue 37 finding)",
    );
    for (name, _) in &columns {
        table.push_str(&format!(" | {name}"));
    }
    table.push('\n');
    let mut unsafe_on_kura = Vec::new();
    for (i, probe) in PROBES.iter().enumerate() {
        table.push_str(probe.name);
        for (name, verdicts) in &columns {
            let v = &verdicts[i];
            let word = match (probe.security, v.safe) {
                (true, true) => "safe",
                (true, false) => "UNSAFE",
                (false, true) => "ok",
                (false, false) => "differs",
            };
            table.push_str(&format!(" | {word}: {}", v.note));
            if *name == "kura" && !v.safe {
                unsafe_on_kura.push(probe.name);
            }
        }
        table.push('\n');
    }
    println!("{table}");
    assert!(
        unsafe_on_kura.is_empty(),
        "unsafe on kura: {unsafe_on_kura:?}\n{table}"
    );
}
