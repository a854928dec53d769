//! The in-process comparison of `benches/in_process.rs` with the caches
//! taking turns: each round runs every load on every cache for a moment,
//! in turn, and the medians over the rounds are printed with each cache's
//! ratio to kura-s3fifo. On a shared machine, where throughput drifts from
//! one minute to the next, this is the figure to quote (bench/results/history.md).
//!
//! ```sh
//! cargo run --release -p kura-store --example alternate [ROUNDS] [MILLIS]
//! ```

#[path = "../benches/common/mod.rs"]
mod common;

use common::{caches, run, Workload};

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(7);
    let millis: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(500);
    let w = Workload::new();
    let caches = caches(&w);
    let loads = [("get", 0usize), ("mix90-10", 10)];
    let mut rates: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); caches.len()]; loads.len() * 2];
    for round in 0..rounds {
        for (l, &(_, set_every)) in loads.iter().enumerate() {
            for threads in [1usize, 2] {
                let row = l * 2 + threads - 1;
                for (c, (_, cache)) in caches.iter().enumerate() {
                    // Operations for about `millis`, sized from a short trial.
                    let trial = run(cache.as_ref(), &w, threads, set_every, 20_000);
                    let per_op = trial.as_secs_f64() / 20_000.0;
                    let iters = ((millis as f64 / 1000.0) / per_op.max(1e-9)) as u64;
                    let iters = iters.max(1000);
                    let took = run(cache.as_ref(), &w, threads, set_every, iters);
                    let ops = iters as f64 * threads as f64;
                    rates[row][c].push(ops / took.as_secs_f64().max(1e-9));
                }
            }
        }
        eprintln!("round {} of {rounds} done", round + 1);
    }
    let base = caches
        .iter()
        .position(|(n, _)| *n == "kura-s3fifo")
        .unwrap_or(0);
    println!(
        "{rounds} rounds, {millis} ms per cache and load; medians in millions of operations/s \
         (ratio to kura-s3fifo)"
    );
    for (l, (load, _)) in loads.iter().enumerate() {
        for threads in [1usize, 2] {
            let row = l * 2 + threads - 1;
            let medians: Vec<f64> = rates[row].iter().map(|r| median(r)).collect();
            let cells: Vec<String> = caches
                .iter()
                .zip(&medians)
                .map(|((name, _), m)| format!("{name} {:.2} ({:.2})", m / 1e6, m / medians[base]))
                .collect();
            println!("{load}/{threads}t: {}", cells.join("  "));
        }
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
