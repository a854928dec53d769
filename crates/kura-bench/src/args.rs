//! `kura bench`'s command line: what to load, how hard, and what to print.
//! The option types (`--ratio`, `--key-dist`, `--value-size`) parse
//! themselves here; [`BenchArgs::check`] rejects combinations that make no
//! sense before any connection is opened.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use clap::{Parser, ValueEnum};

use crate::BenchError;

/// Load a memcached-protocol (or Redis) server and measure throughput and latency.
///
/// Closed loop by default (each connection keeps `--pipeline` requests in
/// flight); `--rate` or `--sweep` switch to an open loop that sends on a
/// timetable and measures latency from each request's scheduled time.
#[derive(Debug, Clone, Parser)]
#[command(name = "kura bench")]
pub struct BenchArgs {
    /// Server to load: HOST:PORT, or the path of a Unix socket.
    #[arg(short = 's', long, default_value = "127.0.0.1:11211")]
    pub server: String,

    /// Wire protocol.
    #[arg(short = 'P', long, value_enum, default_value_t = Protocol::Text)]
    pub protocol: Protocol,

    /// Connections, spread over the threads.
    #[arg(short = 'c', long, default_value_t = 32)]
    pub connections: usize,

    /// Client threads [default: cores, at most one per connection].
    #[arg(short = 't', long)]
    pub threads: Option<usize>,

    /// Requests each connection keeps in flight (closed loop).
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,

    /// Gets to sets, as GETS:SETS (`9:1`, `0:1` for sets only).
    #[arg(long, default_value = "9:1")]
    pub ratio: Ratio,

    /// Sets ask for no reply: `noreply` (text), `q` (meta), SETQ (binary).
    #[arg(long)]
    pub noreply: bool,

    /// Size of the key space.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,

    /// Key popularity: `uniform`, or `zipf:S` with skew S (0.99 is typical).
    #[arg(long, default_value = "uniform")]
    pub key_dist: KeyDist,

    /// Text before each key's number.
    #[arg(long, default_value = "key:")]
    pub key_prefix: String,

    /// Value size in bytes: N, or MIN-MAX for uniformly random sizes (at least 16).
    #[arg(long, default_value = "100")]
    pub value_size: ValueSize,

    /// Set every key once before measuring (not counted).
    #[arg(long)]
    pub prefill: bool,

    /// Pace the prefill at this many sets per second in all (open loop),
    /// for a server that moves what it is given elsewhere in the
    /// background (memcached's extstore) [default: as fast as it answers].
    #[arg(long, requires = "prefill")]
    pub prefill_rate: Option<f64>,

    /// Seconds to run (per rate with --sweep) [default: 10].
    #[arg(short = 'd', long, conflicts_with = "requests")]
    pub duration: Option<f64>,

    /// Requests to send in all (per rate with --sweep) instead of a duration;
    /// 0 with --prefill only loads the keys, with --overlay only draws.
    #[arg(short = 'n', long)]
    pub requests: Option<u64>,

    /// Keys per get (multi-get).
    #[arg(long, default_value_t = 1)]
    pub multiget: usize,

    /// Open loop: requests per second in all, sent on a fixed timetable.
    #[arg(long, conflicts_with = "sweep")]
    pub rate: Option<f64>,

    /// Open loop at each of these rates in turn: "R1,R2,...".
    #[arg(long, value_delimiter = ',')]
    pub sweep: Vec<f64>,

    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,

    /// Draw mean and p99.9 latency against offered rate (from --sweep) to this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,

    /// Name of this run in the JSON report and the plot [default: the server].
    #[arg(long)]
    pub label: Option<String>,

    /// Also draw the sweeps of these earlier --json reports in the plot.
    #[arg(long)]
    pub overlay: Vec<PathBuf>,

    /// Seed of the key, size and get/set choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// The wire protocol the load speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// `get`/`set` (multi-get: `get k1 k2 ...`).
    Text,
    /// `mg`/`ms` (multi-get: quiet `mg`s closed by `mn`).
    Meta,
    /// memcached's binary protocol (multi-get: GETKQs closed by NOOP).
    Binary,
    /// Redis's protocol, RESP2: `GET`/`SET` (multi-get: `MGET`), for
    /// loading a Redis server the same way.
    Resp,
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Protocol::Text => "text",
            Protocol::Meta => "meta",
            Protocol::Binary => "binary",
            Protocol::Resp => "resp",
        })
    }
}

/// `--ratio GETS:SETS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ratio {
    pub gets: u32,
    pub sets: u32,
}

impl FromStr for Ratio {
    type Err = String;
    fn from_str(s: &str) -> Result<Ratio, String> {
        let bad = || format!("expected GETS:SETS such as 9:1, got {s:?}");
        let (g, st) = s.split_once(':').ok_or_else(bad)?;
        let gets = g.trim().parse().map_err(|_| bad())?;
        let sets = st.trim().parse().map_err(|_| bad())?;
        if gets == 0 && sets == 0 {
            return Err("the ratio needs at least one get or set".into());
        }
        Ok(Ratio { gets, sets })
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.gets, self.sets)
    }
}

/// `--key-dist`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum KeyDist {
    Uniform,
    /// Zipf with this exponent: key rank r is drawn with weight 1/r^s.
    Zipf(f64),
}

impl FromStr for KeyDist {
    type Err = String;
    fn from_str(s: &str) -> Result<KeyDist, String> {
        if s == "uniform" {
            return Ok(KeyDist::Uniform);
        }
        let skew = s
            .strip_prefix("zipf:")
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("expected uniform or zipf:S (S >= 0), got {s:?}"))?;
        Ok(KeyDist::Zipf(skew))
    }
}

impl fmt::Display for KeyDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyDist::Uniform => f.write_str("uniform"),
            KeyDist::Zipf(s) => write!(f, "zipf:{s}"),
        }
    }
}

/// `--value-size N` or `MIN-MAX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueSize {
    pub min: usize,
    pub max: usize,
}

impl FromStr for ValueSize {
    type Err = String;
    fn from_str(s: &str) -> Result<ValueSize, String> {
        let bad = || format!("expected N or MIN-MAX, got {s:?}");
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            ),
            None => {
                let n = s.trim().parse().map_err(|_| bad())?;
                (n, n)
            }
        };
        if min > max {
            return Err(format!("value size {min}-{max}: MIN is above MAX"));
        }
        if min < crate::value::HEADER_LEN {
            return Err(format!(
                "values must be at least {} bytes so replies can be verified",
                crate::value::HEADER_LEN
            ));
        }
        Ok(ValueSize { min, max })
    }
}

impl fmt::Display for ValueSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}-{}", self.min, self.max)
        }
    }
}

/// Default run length when neither `--duration` nor `--requests` is given.
pub const DEFAULT_DURATION_SECS: f64 = 10.0;

impl BenchArgs {
    /// Rejects settings that cannot run.
    ///
    /// # Errors
    /// [`BenchError::Usage`] naming the offending option.
    pub fn check(&self) -> Result<(), BenchError> {
        let usage = |m: &str| Err(BenchError::Usage(m.to_string()));
        if self.connections == 0 {
            return usage("--connections must be at least 1");
        }
        if self.threads == Some(0) {
            return usage("--threads must be at least 1");
        }
        if self.pipeline == 0 {
            return usage("--pipeline must be at least 1");
        }
        if self.keys == 0 || self.keys >= 1 << 48 {
            return usage("--keys must be between 1 and 2^48-1");
        }
        if self.noreply && self.protocol == Protocol::Resp {
            return usage("--noreply: Redis's protocol has no quiet sets");
        }
        if self.multiget == 0 {
            return usage("--multiget must be at least 1");
        }
        if self.key_prefix.is_empty() || self.key_prefix.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return usage("--key-prefix must be non-empty, without spaces or control characters");
        }
        let key_len = self.key_prefix.len() + crate::keys::digits(self.keys - 1);
        if key_len > 250 {
            return usage("keys would be longer than memcached's 250 bytes");
        }
        if let Some(d) = self.duration {
            if !(d.is_finite() && d > 0.0) {
                return usage("--duration must be a positive number of seconds");
            }
        }
        if self.requests == Some(0) && !self.prefill && self.overlay.is_empty() {
            return usage("--requests 0 only loads keys (--prefill) or draws reports (--overlay)");
        }
        let rates = self
            .rate
            .iter()
            .chain(&self.sweep)
            .chain(&self.prefill_rate);
        if rates.clone().any(|r| !(r.is_finite() && *r > 0.0)) {
            return usage("rates must be positive numbers of requests per second");
        }
        if self.plot.is_some() && self.sweep.is_empty() && self.overlay.is_empty() {
            return usage("--plot draws a --sweep (or --overlay reports)");
        }
        Ok(())
    }

    /// Client threads to use.
    pub fn thread_count(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.threads.unwrap_or(cores).min(self.connections).max(1)
    }

    /// The rates to run in open loop; empty for a closed-loop run.
    pub fn rates(&self) -> Vec<f64> {
        match self.rate {
            Some(r) => vec![r],
            None => self.sweep.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ratios_sizes_and_distributions() {
        assert_eq!("9:1".parse(), Ok(Ratio { gets: 9, sets: 1 }));
        assert!("0:0".parse::<Ratio>().is_err());
        assert!("9".parse::<Ratio>().is_err());
        assert_eq!("100".parse(), Ok(ValueSize { min: 100, max: 100 }));
        assert_eq!("32-4096".parse(), Ok(ValueSize { min: 32, max: 4096 }));
        assert!("8".parse::<ValueSize>().is_err());
        assert!("200-100".parse::<ValueSize>().is_err());
        assert_eq!("uniform".parse(), Ok(KeyDist::Uniform));
        assert_eq!("zipf:0.99".parse(), Ok(KeyDist::Zipf(0.99)));
        assert!("zipf:-1".parse::<KeyDist>().is_err());
        assert!("pareto".parse::<KeyDist>().is_err());
    }

    #[test]
    fn rejects_what_cannot_run() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["kura bench"];
            argv.extend_from_slice(extra);
            BenchArgs::try_parse_from(argv).map_err(|e| e.to_string())
        };
        assert!(parse(&["--rate", "10", "--sweep", "1,2"]).is_err());
        assert!(parse(&["--duration", "1", "--requests", "5"]).is_err());
        for bad in [
            &["--pipeline", "0"][..],
            &["--connections", "0"],
            &["--requests", "0"],
            &["--plot", "x.svg"],
            &["--sweep", "100,-5"],
            &["--key-prefix", "a b"],
        ] {
            let args = parse(bad).expect("parses");
            assert!(args.check().is_err(), "{bad:?} should be refused");
        }
        let ok = parse(&["--sweep", "1000,2000", "--plot", "x.svg"]).expect("parses");
        ok.check().expect("a sweep can be plotted");
        assert_eq!(ok.rates(), vec![1000.0, 2000.0]);
    }
}
