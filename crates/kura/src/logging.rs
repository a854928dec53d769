//! Where and how every `kura` command writes its log: standard error, one
//! event a line, as text or JSON (`--log-format`, the server's also
//! `-o log_format`).
//!
//! What a log shipper or the journal needs: no ANSI colour codes unless
//! standard error is a terminal (and never with `NO_COLOR` set); no
//! timestamp of our own when standard error is the systemd journal's stream
//! (`JOURNAL_STREAM` names it), which stamps each line itself.

use std::io::IsTerminal;
use std::os::fd::AsFd;

pub use kura_server::LogFormat;

/// Sets up the process's log at `verbosity` (0 warnings, 1 info, 2 debug,
/// 3 trace; `KURA_LOG` overrides with a tracing filter).
pub fn init(verbosity: u8, format: LogFormat) {
    let level = match verbosity {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // What the durable mode says about recovery and snapshots is worth
    // seeing at any verbosity (like Redis's loading messages).
    let filter = tracing_subscriber::EnvFilter::try_from_env("KURA_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{level},kura_keyspace::durable=info"))
    });
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    match (format, to_journal()) {
        (LogFormat::Json, false) => builder.json().init(),
        (LogFormat::Json, true) => builder.json().without_time().init(),
        (LogFormat::Text, false) => builder.init(),
        (LogFormat::Text, true) => builder.without_time().init(),
    }
}

/// Whether standard error is the journal's stream: systemd sets
/// `JOURNAL_STREAM=<device>:<inode>` of the socket it connects it to.
fn to_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(stat) = rustix::fs::fstat(std::io::stderr().as_fd()) else {
        return false;
    };
    stream.to_str() == Some(&format!("{}:{}", stat.st_dev, stat.st_ino))
}
