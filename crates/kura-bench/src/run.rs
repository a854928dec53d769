//! Running one phase (the prefill, a closed-loop run, or one rate of a
//! sweep): `--threads` OS threads, each with a single-threaded tokio
//! runtime driving its share of the connections. Every connection is open
//! before the clock starts; the tallies are merged when all are done.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::thread::ScopedJoinHandle;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::args::{BenchArgs, DEFAULT_DURATION_SECS};
use crate::conn::{self, Pacing, Target, Wire};
use crate::keys::Keyspace;
use crate::load::{Mix, OpSource};
use crate::proto::Verifier;
use crate::stats::{RunSummary, Tally};
use crate::BenchError;

/// Connections keep at least this many sets in flight while prefilling.
const PREFILL_WINDOW: usize = 16;

/// What a phase does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Phase {
    /// Set every key once.
    Prefill,
    /// The mix, closed loop.
    Closed,
    /// The mix at this many requests per second, open loop.
    Open(f64),
}

/// Everything the phases of one `kura bench` share.
pub struct Plan {
    pub target: Target,
    pub server: String,
    pub threads: usize,
    pub connections: usize,
    pub pipeline: usize,
    pub duration: Option<Duration>,
    pub requests: Option<u64>,
    pub mix: Mix,
    pub seed: u64,
    pub progress_bar: bool,
    /// Sets a second in all while prefilling (`--prefill-rate`).
    pub prefill_rate: Option<f64>,
    proto: crate::args::Protocol,
}

impl Plan {
    /// The plan for checked arguments.
    pub fn new(args: &BenchArgs) -> Plan {
        let keys = Arc::new(Keyspace::new(&args.key_prefix, args.keys, args.key_dist));
        Plan {
            target: Target::parse(&args.server),
            server: args.server.clone(),
            threads: args.thread_count(),
            connections: args.connections,
            pipeline: args.pipeline,
            duration: match args.requests {
                Some(_) => None,
                None => Some(Duration::from_secs_f64(
                    args.duration.unwrap_or(DEFAULT_DURATION_SECS),
                )),
            },
            requests: args.requests,
            mix: Mix {
                keys,
                ratio: args.ratio,
                multiget: args.multiget,
                sizes: args.value_size,
                noreply: args.noreply,
            },
            seed: args.seed,
            progress_bar: std::io::stderr().is_terminal(),
            prefill_rate: args.prefill_rate,
            proto: args.protocol,
        }
    }

    /// Runs `phase` to the end.
    ///
    /// # Errors
    /// When a connection cannot be opened; failures after that are counted
    /// in the summary instead.
    pub fn run(&self, phase: Phase) -> Result<RunSummary, BenchError> {
        let progress = Arc::new(AtomicU64::new(0));
        let wire = Arc::new(Wire {
            proto: self.proto,
            verifier: Verifier {
                keys: Keyspace::clone(&self.mix.keys),
                sizes: self.mix.sizes,
            },
            progress: Arc::clone(&progress),
        });
        let barrier = Barrier::new(self.threads + 1);
        let start = OnceLock::new();
        let (started, results) = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..self.threads)
                .map(|t| {
                    let job = Job {
                        thread: t,
                        phase,
                        wire: Arc::clone(&wire),
                        barrier: &barrier,
                        start: &start,
                    };
                    // Like `scope.spawn`, give up only when the OS has no
                    // thread left to give.
                    std::thread::Builder::new()
                        .name(format!("kura-bench-{t}"))
                        .spawn_scoped(scope, move || job.run(self))
                        .expect("start a client thread")
                })
                .collect();
            barrier.wait();
            let started = *start.get_or_init(Instant::now);
            if self.progress_bar {
                self.show_progress(phase, &workers, &progress, started);
            }
            let results: Vec<_> = workers.into_iter().map(|w| w.join()).collect();
            (started, results)
        });
        let mut tally = Tally::default();
        for r in results {
            match r {
                Ok(Ok(t)) => tally.merge(&t),
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(BenchError::Thread),
            }
        }
        let rate = match phase {
            Phase::Open(r) => Some(r),
            _ => None,
        };
        Ok(tally.summary(started, rate))
    }

    fn show_progress(
        &self,
        phase: Phase,
        workers: &[ScopedJoinHandle<'_, Result<Tally, BenchError>>],
        progress: &AtomicU64,
        started: Instant,
    ) {
        let total = match phase {
            Phase::Prefill => Some(self.mix.keys.count()),
            _ => self.requests,
        };
        let bar = match total {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::new(self.duration.map_or(0, |d| d.as_millis() as u64)),
        };
        let name = match phase {
            Phase::Prefill => "prefill".to_string(),
            Phase::Closed => "closed loop".to_string(),
            Phase::Open(r) => format!("{r:.0} req/s"),
        };
        let template = "{prefix:>12} [{bar:30}] {elapsed:>4} {msg}";
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(name);
        while !workers.iter().all(ScopedJoinHandle::is_finished) {
            std::thread::sleep(Duration::from_millis(100));
            let done = progress.load(Ordering::Relaxed);
            let secs = started.elapsed().as_secs_f64();
            bar.set_message(format!("{done} requests, {:.0}/s", done as f64 / secs));
            match total {
                Some(_) => bar.set_position(done),
                None => bar.set_position(started.elapsed().as_millis() as u64),
            }
        }
        bar.finish_and_clear();
    }
}

/// One worker thread's part of a phase.
struct Job<'a> {
    thread: usize,
    phase: Phase,
    wire: Arc<Wire>,
    barrier: &'a Barrier,
    start: &'a OnceLock<Instant>,
}

impl Job<'_> {
    fn run(self, plan: &Plan) -> Result<Tally, BenchError> {
        let conns: Vec<usize> = (self.thread..plan.connections)
            .step_by(plan.threads)
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build();
        let opened = match &rt {
            Ok(rt) => rt.block_on(async {
                let mut streams = Vec::with_capacity(conns.len());
                for _ in &conns {
                    streams.push(plan.target.connect().await?);
                }
                Ok(streams)
            }),
            Err(e) => Err(std::io::Error::new(e.kind(), e.to_string())),
        };
        // Wait for the others even after a failure, or they would wait forever.
        self.barrier.wait();
        let streams = opened.map_err(|reason| BenchError::Connect {
            server: plan.server.clone(),
            reason,
        })?;
        let rt = rt?;
        let start = *self.start.get_or_init(Instant::now);
        let tasks: Vec<_> = conns
            .iter()
            .zip(streams)
            .map(|(&c, stream)| {
                let (source, pacing) = self.load_of(plan, c, start);
                rt.spawn(conn::drive(stream, source, pacing, Arc::clone(&self.wire)))
            })
            .collect();
        let mut tally = Tally::default();
        rt.block_on(async {
            for t in tasks {
                match t.await {
                    Ok(t) => tally.merge(&t),
                    Err(e) => {
                        tally.connection_errors += 1;
                        tally.sample_error(|| format!("connection task failed: {e}"));
                    }
                }
            }
        });
        Ok(tally)
    }

    /// What connection `c` sends, and how fast.
    fn load_of(&self, plan: &Plan, c: usize, start: Instant) -> (OpSource, Pacing) {
        let n = plan.connections as u64;
        let i = c as u64;
        let seed = plan.seed.wrapping_mul(0x9e37_79b9).wrapping_add(i);
        if self.phase == Phase::Prefill {
            let count = plan.mix.keys.count();
            let source = OpSource::fill(count, plan.mix.sizes, i, n, seed);
            let window = plan.pipeline.max(PREFILL_WINDOW);
            let pacing = match plan.prefill_rate {
                Some(rate) => open_pacing(start, rate, i, n, None),
                None => Pacing::Closed {
                    window,
                    deadline: None,
                },
            };
            return (source, pacing);
        }
        let share = plan.requests.map(|r| r / n + u64::from(i < r % n));
        let source = OpSource::mix(plan.mix.clone(), share, seed);
        let end = plan.duration.map(|d| start + d);
        let pacing = match self.phase {
            Phase::Open(rate) => open_pacing(start, rate, i, n, end),
            _ => Pacing::Closed {
                window: plan.pipeline,
                deadline: end,
            },
        };
        (source, pacing)
    }
}

/// Connection `i` of `n`'s share of an open loop of `rate` requests a
/// second in all, staggered.
fn open_pacing(start: Instant, rate: f64, i: u64, n: u64, end: Option<Instant>) -> Pacing {
    let interval = Duration::from_secs_f64(n as f64 / rate);
    Pacing::Open {
        start,
        offset: interval.mul_f64(i as f64 / n as f64),
        interval,
        end,
    }
}
