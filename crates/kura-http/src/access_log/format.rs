//! `varnishncsa -F` format strings: parsed once at start (an unknown specifier is refused with
//! its column), then rendered for each request. The meanings are varnishncsa's (client mode),
//! and so is the escaping of header values: `"` and `\` get a backslash, control characters
//! their C escape (`\n`, `\t`, ...) or `\xNN`.

use std::fmt::Write;
use std::time::SystemTime;

use base64::Engine;
use chrono::format::{Item, StrftimeItems};
use chrono::{DateTime, Local};
use http::header::{AUTHORIZATION, HOST};
use http::HeaderName;

use super::Entry;
use crate::stats::CacheOutcome;

/// varnishncsa's default format (NCSA combined).
pub const DEFAULT: &str = r#"%h %l %u %t "%r" %s %b "%{Referer}i" "%{User-agent}i""#;

/// One piece of a format.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Host,
    Dash,
    User,
    /// `%t` (`None`: the NCSA form) or `%{X}t`.
    Time(Option<TimeFormat>),
    RequestLine,
    Status,
    Bytes,
    Method,
    Protocol,
    Query,
    Path,
    RequestHeader(HeaderName),
    ResponseHeader(HeaderName),
    Micros,
    Millis,
    Seconds,
    HitMiss,
    Handling,
    Side,
    FirstByte,
    Vxid,
}

#[derive(Debug, Clone, PartialEq)]
enum TimeFormat {
    Strftime(String),
    Sec,
    Msec,
    Usec,
    MsecFrac,
    UsecFrac,
}

/// A parsed format string.
#[derive(Debug, Clone, PartialEq)]
pub struct Format {
    pieces: Vec<Piece>,
}

impl Default for Format {
    fn default() -> Self {
        Format::parse(DEFAULT).expect("the default format parses")
    }
}

impl Format {
    /// Parses a `varnishncsa -F` format string.
    ///
    /// # Errors
    /// A specifier kura does not know, or one it cannot fill, named with its column (from 1).
    pub fn parse(text: &str) -> Result<Format, String> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            let column = text[..at].chars().count() + 1;
            if c == '\\' {
                match chars.peek().map(|&(_, c)| c) {
                    Some('n') => literal.push('\n'),
                    Some('t') => literal.push('\t'),
                    _ => {
                        literal.push('\\');
                        continue;
                    }
                }
                chars.next();
                continue;
            }
            if c != '%' {
                literal.push(c);
                continue;
            }
            let mut argument = None;
            if chars.peek().map(|&(_, c)| c) == Some('{') {
                chars.next();
                let mut arg = String::new();
                loop {
                    match chars.next() {
                        Some((_, '}')) => break,
                        Some((_, c)) => arg.push(c),
                        None => return Err(format!("column {column}: %{{ without a closing }}")),
                    }
                }
                argument = Some(arg);
            }
            let Some((_, letter)) = chars.next() else {
                return Err(format!("column {column}: % at the end of the format"));
            };
            let piece = piece(letter, argument.as_deref())
                .map_err(|why| format!("column {column}: {why}"))?;
            if let Some(piece) = piece {
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(piece);
            } else {
                literal.push('%');
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Ok(Format { pieces })
    }

    /// The line of `entry` (with its newline), received at `received`, the `id`th request
    /// logged (`%{Varnish:vxid}x`).
    pub fn render(&self, entry: &Entry<'_>, received: SystemTime, id: u64) -> String {
        let mut out = String::with_capacity(160);
        for piece in &self.pieces {
            render(piece, entry, (received, id), &mut out);
        }
        out.push('\n');
        out
    }
}

fn piece(letter: char, argument: Option<&str>) -> Result<Option<Piece>, String> {
    let header = |what: &str| -> Result<HeaderName, String> {
        let name =
            argument.ok_or_else(|| format!("%{letter} needs a header name: %{{Name}}{letter}"))?;
        HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("%{{{name}}}{letter}: not a {what} header name"))
    };
    Ok(Some(match (letter, argument) {
        ('%', None) => return Ok(None),
        ('h', None) => Piece::Host,
        ('l', None) => Piece::Dash,
        ('u', None) => Piece::User,
        ('t', None) => Piece::Time(None),
        ('t', Some(spec)) => Piece::Time(Some(time_format(spec)?)),
        ('r', None) => Piece::RequestLine,
        ('s', None) => Piece::Status,
        ('b', None) => Piece::Bytes,
        ('m', None) => Piece::Method,
        ('H', None) => Piece::Protocol,
        ('q', None) => Piece::Query,
        ('U', None) => Piece::Path,
        ('i', _) => Piece::RequestHeader(header("request")?),
        ('o', _) => Piece::ResponseHeader(header("response")?),
        ('D', None) => Piece::Micros,
        ('T', None) => Piece::Seconds,
        ('T', Some("s")) => Piece::Seconds,
        ('T', Some("ms")) => Piece::Millis,
        ('T', Some("us")) => Piece::Micros,
        ('x', Some("Varnish:hitmiss")) => Piece::HitMiss,
        ('x', Some("Varnish:handling")) => Piece::Handling,
        ('x', Some("Varnish:side")) => Piece::Side,
        ('x', Some("Varnish:time_firstbyte")) => Piece::FirstByte,
        ('x', Some("Varnish:vxid")) => Piece::Vxid,
        ('I' | 'O', None) => {
            return Err(format!(
                "%{letter} (bytes on the wire, headers included) is not known to kura; %b is the body's length"
            ))
        }
        ('x', Some(other)) => {
            return Err(format!(
                "%{{{other}}}x is not supported (Varnish:hitmiss, Varnish:handling, Varnish:side, Varnish:time_firstbyte and Varnish:vxid are; VCL_Log and VSL have no kura equivalent)"
            ))
        }
        (letter, Some(arg)) => return Err(format!("%{{{arg}}}{letter} is not a known specifier")),
        (letter, None) => return Err(format!("%{letter} is not a known specifier")),
    }))
}

fn time_format(spec: &str) -> Result<TimeFormat, String> {
    Ok(match spec {
        "sec" => TimeFormat::Sec,
        "msec" => TimeFormat::Msec,
        "usec" => TimeFormat::Usec,
        "msec_frac" => TimeFormat::MsecFrac,
        "usec_frac" => TimeFormat::UsecFrac,
        _ => {
            if StrftimeItems::new(spec).any(|item| matches!(item, Item::Error)) {
                return Err(format!("%{{{spec}}}t: not a strftime(3) format"));
            }
            TimeFormat::Strftime(spec.to_owned())
        }
    })
}

/// Appends `bytes` with varnishncsa's escapes.
fn escaped(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            0x0b => out.push_str("\\v"),
            0x0c => out.push_str("\\f"),
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
}

fn header_or_dash(value: Option<&http::HeaderValue>, out: &mut String) {
    match value {
        Some(value) => escaped(value.as_bytes(), out),
        None => out.push('-'),
    }
}

/// The user name of a `Basic` `Authorization`, as varnishncsa's `%u`.
fn user(entry: &Entry<'_>) -> Option<String> {
    let value = entry.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, credentials) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(credentials.trim())
        .ok()?;
    let user = decoded.split(|&b| b == b':').next()?;
    Some(String::from_utf8_lossy(user).into_owned())
}

fn render(piece: &Piece, entry: &Entry<'_>, (received, id): (SystemTime, u64), out: &mut String) {
    let path_and_query = entry.uri.path_and_query();
    match piece {
        Piece::Text(text) => out.push_str(text),
        Piece::Host => match entry.peer {
            Some(peer) => {
                let _ = write!(out, "{}", peer.ip());
            }
            None => out.push('-'),
        },
        Piece::Dash => out.push('-'),
        Piece::User => match user(entry) {
            Some(user) => escaped(user.as_bytes(), out),
            None => out.push('-'),
        },
        Piece::Time(format) => time(format.as_ref(), received, out),
        Piece::RequestLine => {
            let _ = write!(out, "{} http://", entry.method);
            match entry.headers.get(HOST) {
                Some(host) => escaped(host.as_bytes(), out),
                None => match entry.uri.authority() {
                    Some(authority) => out.push_str(authority.as_str()),
                    None => out.push_str("localhost"),
                },
            }
            escaped(path_and_query.map_or("", |p| p.as_str()).as_bytes(), out);
            let _ = write!(out, " {:?}", entry.version);
        }
        Piece::Status => {
            let _ = write!(out, "{}", entry.status.as_u16());
        }
        Piece::Bytes => match entry.bytes {
            Some(bytes) if bytes > 0 => {
                let _ = write!(out, "{bytes}");
            }
            _ => out.push('-'),
        },
        Piece::Method => out.push_str(entry.method.as_str()),
        Piece::Protocol => {
            let _ = write!(out, "{:?}", entry.version);
        }
        Piece::Query => {
            if let Some(query) = entry.uri.query() {
                out.push('?');
                escaped(query.as_bytes(), out);
            }
        }
        Piece::Path => escaped(entry.uri.path().as_bytes(), out),
        Piece::RequestHeader(name) => {
            header_or_dash(entry.headers.get_all(name).iter().next_back(), out)
        }
        Piece::ResponseHeader(name) => {
            header_or_dash(entry.response.get_all(name).iter().next_back(), out);
        }
        Piece::Micros => {
            let _ = write!(out, "{}", entry.elapsed.as_micros());
        }
        Piece::Millis => {
            let _ = write!(out, "{}", entry.elapsed.as_millis());
        }
        Piece::Seconds => {
            let _ = write!(out, "{}", entry.elapsed.as_secs());
        }
        Piece::HitMiss => out.push_str(match entry.outcome {
            CacheOutcome::Hit | CacheOutcome::Stale | CacheOutcome::Coalesced => "hit",
            _ => "miss",
        }),
        Piece::Handling => out.push_str(match entry.outcome {
            CacheOutcome::Hit | CacheOutcome::Stale | CacheOutcome::Coalesced => "hit",
            CacheOutcome::Miss => "miss",
            CacheOutcome::Pass => "pass",
            CacheOutcome::Synth => "synth",
            CacheOutcome::Pipe => "pipe",
        }),
        Piece::Side => out.push('c'),
        Piece::FirstByte => {
            let _ = write!(out, "{:.6}", entry.elapsed.as_secs_f64());
        }
        Piece::Vxid => {
            let _ = write!(out, "{id}");
        }
    }
}

fn time(format: Option<&TimeFormat>, received: SystemTime, out: &mut String) {
    let since = received
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let local: DateTime<Local> = received.into();
    let _ = match format {
        None => write!(out, "{}", local.format("[%d/%b/%Y:%H:%M:%S %z]")),
        Some(TimeFormat::Strftime(spec)) => write!(out, "{}", local.format(spec)),
        Some(TimeFormat::Sec) => write!(out, "{}", since.as_secs()),
        Some(TimeFormat::Msec) => write!(out, "{}", since.as_millis()),
        Some(TimeFormat::Usec) => write!(out, "{}", since.as_micros()),
        Some(TimeFormat::MsecFrac) => write!(out, "{:03}", since.subsec_millis()),
        Some(TimeFormat::UsecFrac) => write!(out, "{:06}", since.subsec_micros()),
    };
}

#[cfg(test)]
mod tests;
