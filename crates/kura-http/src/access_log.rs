//! The access log: one line per request in the NCSA combined format (as varnishncsa writes it)
//! followed by the cache outcome (`hit`, `miss`, `pass`, `stale`, `coalesced`, `synth`: what
//! varnishncsa's `%{Varnish:hitmiss}x` shows, with more detail) and the time taken in
//! microseconds. Lines are written by a thread of their own, so a slow disk never stalls a
//! request; its queue is bounded and a line that does not fit is counted, not waited for.

use std::fs::OpenOptions;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};
use std::time::{Duration, SystemTime};

use http::{HeaderMap, Method, StatusCode, Uri, Version};

use crate::stats::CacheOutcome;

const QUEUE: usize = 65_536;

/// The access log's writer side.
pub struct AccessLog {
    lines: SyncSender<String>,
    /// Lines dropped because the writer fell behind.
    pub dropped: AtomicU64,
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
    /// Body length when known.
    pub bytes: Option<u64>,
    /// Cache outcome.
    pub outcome: CacheOutcome,
    /// Time from the request to the response head.
    pub elapsed: Duration,
}

impl AccessLog {
    /// A log writing to `path` ("-": standard output).
    ///
    /// # Errors
    /// The file cannot be opened.
    pub fn open(path: &str) -> io::Result<AccessLog> {
        let out: Box<dyn Write + Send> = if path == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(OpenOptions::new().create(true).append(true).open(path)?)
        };
        let (lines, rx) = sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("kura-access-log".into())
            .spawn(move || write_lines(rx, BufWriter::new(out)))?;
        Ok(AccessLog {
            lines,
            dropped: AtomicU64::new(0),
        })
    }

    /// Logs one request.
    pub fn log(&self, entry: &Entry<'_>) {
        let line = format_line(entry, SystemTime::now());
        if self.lines.try_send(line).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn write_lines(rx: Receiver<String>, mut out: BufWriter<Box<dyn Write + Send>>) {
    while let Ok(line) = rx.recv() {
        let mut next = Some(line);
        while let Some(line) = next.take() {
            if out.write_all(line.as_bytes()).is_err() {
                return;
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
        if out.flush().is_err() {
            return;
        }
    }
}

fn quoted(headers: &HeaderMap, name: &str) -> String {
    match headers.get(name).and_then(|v| v.to_str().ok()) {
        Some(value) => value.replace('\\', "\\\\").replace('"', "\\\""),
        None => "-".to_owned(),
    }
}

/// The line of `entry` at `now`.
pub fn format_line(entry: &Entry<'_>, now: SystemTime) -> String {
    let host = entry
        .peer
        .map_or_else(|| "-".to_owned(), |p| p.ip().to_string());
    let bytes = entry
        .bytes
        .map_or_else(|| "-".to_owned(), |b| b.to_string());
    format!(
        "{host} - - [{}] \"{} {} {:?}\" {} {bytes} \"{}\" \"{}\" {} {}\n",
        httpdate::fmt_http_date(now),
        entry.method,
        entry.uri,
        entry.version,
        entry.status.as_u16(),
        quoted(entry.headers, "referer"),
        quoted(entry.headers, "user-agent"),
        entry.outcome.name(),
        entry.elapsed.as_micros(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_has_outcome_and_escapes_quotes() {
        let mut headers = HeaderMap::new();
        headers.insert("user-agent", "a \"b\"".parse().unwrap());
        let uri: Uri = "/x?y=1".parse().unwrap();
        let entry = Entry {
            peer: Some("10.0.0.1:5000".parse().unwrap()),
            method: &Method::GET,
            uri: &uri,
            version: Version::HTTP_11,
            headers: &headers,
            status: StatusCode::OK,
            bytes: Some(12),
            outcome: CacheOutcome::Hit,
            elapsed: Duration::from_micros(250),
        };
        let line = format_line(&entry, SystemTime::UNIX_EPOCH);
        assert_eq!(
            line,
            "10.0.0.1 - - [Thu, 01 Jan 1970 00:00:00 GMT] \"GET /x?y=1 HTTP/1.1\" 200 12 \"-\" \"a \\\"b\\\"\" hit 250\n"
        );
    }
}
