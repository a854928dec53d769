//! The access log: one line per request, in a `varnishncsa -F` format (default: varnishncsa's
//! own, NCSA combined; `format.rs`) or as JSON lines. Lines are written by a thread of their
//! own, so a slow disk never stalls a request; its queue is bounded and a line that does not
//! fit is counted, not waited for. [`AccessLog::reopen`] (SIGUSR1, and every reload: SIGHUP)
//! closes the file and opens the path again after the lines queued before it, so logrotate can
//! rename the file and signal, and no line is lost: the ones before the signal end the old
//! file, the ones after begin the new.

pub mod format;

use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::time::{Duration, SystemTime};

use http::{HeaderMap, Method, StatusCode, Uri, Version};

use crate::stats::CacheOutcome;
pub use format::Format;

const QUEUE: usize = 65_536;

/// How lines are written.
#[derive(Debug, Clone, PartialEq)]
pub enum LogFormat {
    /// A `varnishncsa -F` format string (default: varnishncsa's default).
    Ncsa(Format),
    /// One JSON object a line.
    Json,
}

impl Default for LogFormat {
    fn default() -> Self {
        LogFormat::Ncsa(Format::default())
    }
}

impl LogFormat {
    /// The format named by the setting `access_log_format`: `"json"`, or a format string.
    ///
    /// # Errors
    /// The format string's error, naming the column.
    pub fn parse(text: &str) -> Result<LogFormat, String> {
        if text == "json" {
            return Ok(LogFormat::Json);
        }
        Format::parse(text).map(LogFormat::Ncsa)
    }
}

enum Message {
    Line(String),
    Reopen,
}

/// The access log's writer side.
pub struct AccessLog {
    queue: SyncSender<Message>,
    format: LogFormat,
    /// The path it writes to.
    pub path: String,
    /// Lines dropped because the writer fell behind.
    pub dropped: AtomicU64,
    /// Requests logged (`%{Varnish:vxid}x`).
    logged: AtomicU64,
}

/// One request as the log shows it.
pub struct Entry<'a> {
    /// The client.
    pub peer: Option<SocketAddr>,
    /// Request method.
    pub method: &'a Method,
    /// Request target.
    pub uri: &'a Uri,
    /// Protocol version.
    pub version: Version,
    /// Request fields (Referer, User-Agent).
    pub headers: &'a HeaderMap,
    /// Response status.
    pub status: StatusCode,
    /// Response fields (`%{X}o`).
    pub response: &'a HeaderMap,
    /// Body length when known.
    pub bytes: Option<u64>,
    /// Cache outcome.
    pub outcome: CacheOutcome,
    /// Time from the request to the response head.
    pub elapsed: Duration,
}

fn open_path(path: &str) -> io::Result<Box<dyn Write + Send>> {
    Ok(if path == "-" {
        Box::new(io::stdout())
    } else {
        Box::new(OpenOptions::new().create(true).append(true).open(path)?)
    })
}

impl AccessLog {
    /// A log writing to `path` ("-": standard output) in `format`.
    ///
    /// # Errors
    /// The file cannot be opened.
    pub fn open(path: &str, format: LogFormat) -> io::Result<AccessLog> {
        let out = open_path(path)?;
        let (queue, rx) = sync_channel(QUEUE);
        let reopen = path.to_owned();
        std::thread::Builder::new()
            .name("kura-access-log".into())
            .spawn(move || write_lines(rx, BufWriter::new(out), &reopen))?;
        Ok(AccessLog {
            queue,
            format,
            path: path.to_owned(),
            dropped: AtomicU64::new(0),
            logged: AtomicU64::new(0),
        })
    }

    /// Whether this log writes `path` in `format` (a reload keeps it, reopened).
    pub fn same(&self, path: &str, format: &LogFormat) -> bool {
        self.path == path && self.format == *format
    }

    /// Closes the file and opens its path again, after the lines already queued (logrotate).
    /// Waits for room in the queue rather than lose the request.
    pub fn reopen(&self) {
        let _ = self.queue.send(Message::Reopen);
    }

    /// Logs one request.
    pub fn log(&self, entry: &Entry<'_>) {
        let received = SystemTime::now()
            .checked_sub(entry.elapsed)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let id = self.logged.fetch_add(1, Ordering::Relaxed) + 1;
        let line = match &self.format {
            LogFormat::Ncsa(format) => format.render(entry, received, id),
            LogFormat::Json => json_line(entry, received),
        };
        if self.queue.try_send(Message::Line(line)).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn write_lines(rx: Receiver<Message>, mut out: BufWriter<Box<dyn Write + Send>>, path: &str) {
    while let Ok(message) = rx.recv() {
        let mut next = Some(message);
        while let Some(message) = next.take() {
            match message {
                Message::Line(line) => {
                    if let Err(error) = out.write_all(line.as_bytes()) {
                        tracing::error!("access log {path}: {error}");
                    }
                }
                Message::Reopen if path != "-" => {
                    let _ = out.flush();
                    match open_path(path) {
                        Ok(file) => out = BufWriter::new(file),
                        // The old file stays in use: better a line in the rotated file than none.
                        Err(error) => tracing::error!("access log {path}: reopen: {error}"),
                    }
                }
                Message::Reopen => {}
            }
            match rx.try_recv() {
                Ok(more) => next = Some(more),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => {
                    let _ = out.flush();
                    return;
                }
            }
        }
        let _ = out.flush();
    }
}

/// The JSON line of `entry`: the combined format's fields by name, and kura's outcome.
fn json_line(entry: &Entry<'_>, received: SystemTime) -> String {
    let header = |name: &str| {
        entry
            .headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let time: chrono::DateTime<chrono::Utc> = received.into();
    let mut line = serde_json::json!({
        "time": time.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "client": entry.peer.map(|p| p.ip().to_string()),
        "method": entry.method.as_str(),
        "host": header("host"),
        "url": entry.uri.path_and_query().map_or("", |p| p.as_str()),
        "protocol": format!("{:?}", entry.version),
        "status": entry.status.as_u16(),
        "bytes": entry.bytes,
        "referer": header("referer"),
        "user_agent": header("user-agent"),
        "outcome": entry.outcome.name(),
        "duration_us": u64::try_from(entry.elapsed.as_micros()).unwrap_or(u64::MAX),
    })
    .to_string();
    line.push('\n');
    line
}
