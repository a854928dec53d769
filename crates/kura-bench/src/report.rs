//! The report of a `kura bench`: what was run and what each run measured,
//! printed as a table for people or as JSON for scripts (and read back by
//! `--overlay`).

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use crate::args::{BenchArgs, Protocol};
use crate::stats::RunSummary;

/// Everything `kura bench` measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The name of this load in plots (`--label`, or the server).
    pub label: String,
    pub server: String,
    pub protocol: Protocol,
    pub connections: usize,
    pub threads: usize,
    pub pipeline: usize,
    /// `GETS:SETS`.
    pub ratio: String,
    pub noreply: bool,
    pub keys: u64,
    pub key_dist: String,
    /// Bytes, `N` or `MIN-MAX`.
    pub value_size: String,
    pub multiget: usize,
    /// The prefill, if one ran.
    pub prefill: Option<RunSummary>,
    /// One closed-loop run, or one run per rate.
    pub runs: Vec<RunSummary>,
}

impl Report {
    /// The report's header for `args`, with no runs yet.
    pub fn new(args: &BenchArgs) -> Report {
        Report {
            label: args.label.clone().unwrap_or_else(|| args.server.clone()),
            server: args.server.clone(),
            protocol: args.protocol,
            connections: args.connections,
            threads: args.thread_count(),
            pipeline: args.pipeline,
            ratio: args.ratio.to_string(),
            noreply: args.noreply,
            keys: args.keys,
            key_dist: args.key_dist.to_string(),
            value_size: args.value_size.to_string(),
            multiget: args.multiget,
            prefill: None,
            runs: Vec::new(),
        }
    }

    /// Errors counted in every run, the prefill included.
    pub fn errors(&self) -> u64 {
        self.prefill
            .iter()
            .chain(&self.runs)
            .map(|r| r.errors)
            .sum()
    }

    /// Writes the report as a table.
    ///
    /// # Errors
    /// If `out` fails.
    pub fn write_table(&self, out: &mut dyn Write) -> io::Result<()> {
        let gets = if self.multiget > 1 {
            format!("{}-key gets", self.multiget)
        } else {
            "gets".to_string()
        };
        let sets = if self.noreply { "quiet sets" } else { "sets" };
        writeln!(
            out,
            "kura bench: {} protocol, {}, {} connections on {} thread{}, pipeline {}",
            self.protocol,
            self.server,
            self.connections,
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.pipeline
        )?;
        writeln!(
            out,
            "load: {gets}:{sets} {}, {} keys {}, values of {} bytes",
            self.ratio, self.keys, self.key_dist, self.value_size
        )?;
        if let Some(p) = &self.prefill {
            writeln!(
                out,
                "prefill: {} sets in {:.2} s, {} errors",
                p.requests, p.elapsed_secs, p.errors
            )?;
        }
        if self.runs.is_empty() {
            return Ok(());
        }
        writeln!(out)?;
        writeln!(
            out,
            "{:>12} {:>11} {:>10} {:>7} {:>7}  {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
            "offered/s",
            "requests",
            "req/s",
            "miss%",
            "errors",
            "mean",
            "p50",
            "p90",
            "p99",
            "p99.9",
            "max"
        )?;
        for r in &self.runs {
            let offered = r
                .offered_rate
                .map_or("closed".into(), |q| format!("{q:.0}"));
            let keys = r.hits + r.misses;
            let miss = if keys > 0 {
                format!("{:.1}", 100.0 * r.misses as f64 / keys as f64)
            } else {
                "-".into()
            };
            let l = &r.latency_us;
            let us = |v: f64| {
                if l.samples == 0 {
                    "-".to_string()
                } else {
                    format!("{v:.1}")
                }
            };
            writeln!(
                out,
                "{offered:>12} {:>11} {:>10.0} {miss:>7} {:>7}  {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
                r.requests,
                r.throughput,
                r.errors,
                us(l.mean),
                us(l.p50),
                us(l.p90),
                us(l.p99),
                us(l.p999),
                us(l.max)
            )?;
        }
        writeln!(out, "{:>12} latency in microseconds", "")?;
        if self.noreply {
            writeln!(
                out,
                "{:>12} (quiet sets have no reply: their latency is not measured)",
                ""
            )?;
        }
        let samples: Vec<_> = self
            .prefill
            .iter()
            .chain(&self.runs)
            .flat_map(|r| &r.error_samples)
            .collect();
        if !samples.is_empty() {
            writeln!(out)?;
            writeln!(out, "{} errors; the first ones:", self.errors())?;
            for s in samples.iter().take(5) {
                writeln!(out, "  {s}")?;
            }
        }
        Ok(())
    }
}
