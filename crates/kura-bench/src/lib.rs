//! kura-bench: the load generator behind `kura bench`, in the line of
//! memtier_benchmark and rpc-perf. It speaks memcached's text, meta and
//! binary protocols (and Redis's, to load Redis the same way), in a closed loop (connections × pipeline depth
//! requests in flight) or an open loop (a fixed rate, latency measured from
//! each request's scheduled time), and checks every value it reads back.
//!
//! How the parts fit: [`args`] is the command line; [`run`] starts the
//! client threads and connections for each phase (prefill, then one
//! closed-loop run or one run per rate); [`conn`] drives one connection
//! with a writer and a reader; [`proto`] writes requests and frames
//! replies; [`value`] makes values that prove which key they belong to;
//! [`stats`] counts; [`report`] prints; [`plot`] draws latency against load.

pub mod args;
pub mod conn;
pub mod keys;
pub mod load;
pub mod pacer;
pub mod plot;
pub mod proto;
pub mod report;
pub mod run;
pub mod stats;
pub mod value;

use std::io::{self, Write};
use std::path::PathBuf;

pub use args::BenchArgs;
pub use report::Report;
pub use stats::RunSummary;

use run::{Phase, Plan};

/// Why `kura bench` could not run (failures during a run are counted in
/// the report instead).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Usage(String),
    #[error("cannot connect to {server}: {reason}")]
    Connect { server: String, reason: io::Error },
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error("a client thread panicked")]
    Thread,
    #[error("cannot read the report {path}: {reason}")]
    Overlay { path: PathBuf, reason: String },
    #[error("cannot draw {path}: {reason}")]
    Plot { path: PathBuf, reason: String },
}

/// Runs the load `args` describes, writes the report to `out` (a table,
/// or JSON with `--json`) and the plot (`--plot`), and returns the report.
///
/// # Errors
/// Bad arguments, a server that cannot be reached, or output that cannot
/// be written. Errors counted during the run are in the report.
pub fn run(args: &BenchArgs, out: &mut dyn Write) -> Result<Report, BenchError> {
    args.check()?;
    let overlays = args
        .overlay
        .iter()
        .map(read_report)
        .collect::<Result<Vec<_>, _>>()?;
    let plan = Plan::new(args);
    let mut report = Report::new(args);
    if args.prefill {
        report.prefill = Some(plan.run(Phase::Prefill)?);
    }
    if args.requests != Some(0) {
        let rates = args.rates();
        if rates.is_empty() {
            report.runs.push(plan.run(Phase::Closed)?);
        }
        for rate in rates {
            report.runs.push(plan.run(Phase::Open(rate))?);
        }
    }
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report).map_err(io::Error::from)?;
        writeln!(out)?;
    } else {
        report.write_table(out)?;
    }
    if let Some(path) = &args.plot {
        let mut all = vec![report.clone()];
        all.extend(overlays);
        plot::draw(path, &all).map_err(|reason| BenchError::Plot {
            path: path.clone(),
            reason,
        })?;
    }
    Ok(report)
}

fn read_report(path: &PathBuf) -> Result<Report, BenchError> {
    let overlay = |reason: String| BenchError::Overlay {
        path: path.clone(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| overlay(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| overlay(e.to_string()))
}
