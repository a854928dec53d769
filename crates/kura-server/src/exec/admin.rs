//! `flush_all`, `version`, `verbosity`, `shutdown`, `cache_memlimit`,
//! `refresh_certs`.

use std::sync::atomic::Ordering;

use kura_proto::{reply, FlushAll, FlushDelay, ShutdownMode};

use super::{expiry, Next, Session};
use crate::metrics::incr;
use crate::shared::VERSION;

/// memcached caps `verbosity` at this level.
const MAX_VERBOSITY: u32 = 2;

pub(super) fn flush_all(s: &mut Session<'_>, f: &FlushAll) {
    incr(&s.stats.cmd_flush);
    if s.shared.config.disable_flush_all {
        s.reply(f.noreply, reply::FLUSH_DISABLED);
        return;
    }
    match f.delay {
        FlushDelay::Invalid => {
            s.reply(f.noreply, kura_proto::Error::InvalidExptime.as_bytes());
            return;
        }
        FlushDelay::Exptime(e) if e > 0 => s.writes().flush(Some(expiry(e))),
        FlushDelay::Now | FlushDelay::Exptime(_) => s.writes().flush(None),
    }
    s.reply(f.noreply, reply::OK);
}

pub(super) fn version(s: &mut Session<'_>) {
    s.out.extend_from_slice(b"VERSION ");
    s.out.extend_from_slice(VERSION.as_bytes());
    s.out.extend_from_slice(b"\r\n");
}

pub(super) fn verbosity(s: &mut Session<'_>, level: Option<u32>, noreply: bool) {
    match level {
        Some(l) => {
            let l = l.min(MAX_VERBOSITY) as u8;
            s.shared.verbosity.store(l, Ordering::Relaxed);
            s.reply(noreply, reply::OK);
        }
        None => s.reply(noreply, kura_proto::Error::BadFormat.as_bytes()),
    }
}

pub(super) fn shutdown(s: &mut Session<'_>, mode: ShutdownMode) -> Next {
    if !s.shared.config.enable_shutdown {
        s.out.extend_from_slice(reply::SHUTDOWN_DISABLED);
        return Next::Continue;
    }
    if mode == ShutdownMode::Invalid {
        s.out.extend_from_slice(reply::SHUTDOWN_INVALID);
        return Next::Continue;
    }
    tracing::info!(?mode, "shutdown requested by a client");
    s.shared.shutdown();
    Next::Close
}

/// `refresh_certs`: the TLS files read again (crate::reload); `OK`, or
/// memcached's error line (sent even with `noreply`, as memcached does).
pub(super) fn refresh_certs(s: &mut Session<'_>, noreply: bool) {
    match crate::reload::refresh_certs(s.shared) {
        Ok(()) => {
            tracing::info!("refresh_certs: TLS files read again");
            s.reply(noreply, reply::OK);
        }
        Err(why) => {
            tracing::warn!("refresh_certs: {why}; the old certificates stay in use");
            s.out.extend_from_slice(why.to_string().as_bytes());
            s.out.extend_from_slice(b"\r\n");
        }
    }
}

pub(super) fn memlimit(s: &mut Session<'_>, megabytes: Option<u32>, noreply: bool) {
    let line: &[u8] = match megabytes {
        None => b"ERROR\r\n",
        Some(m) if m < 8 => b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n",
        Some(m) if m > 1_000_000_000 => {
            b"MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes\r\n"
        }
        Some(m) => {
            s.store().set_capacity(m as usize * 1024 * 1024);
            reply::OK
        }
    };
    s.reply(noreply, line);
}

/// `replicaof <host> <port>`: follow that server from now on;
/// `replicaof no one`: stop following and take writes (promotion).
/// Answers `OK` once done (docs/replication.md).
pub(super) fn replica_of(s: &mut Session<'_>, host: &[u8], port: &[u8]) {
    let state = s.keyspace.replication();
    let done = if host.eq_ignore_ascii_case(b"no") && port.eq_ignore_ascii_case(b"one") {
        state.promote()
    } else {
        let port = std::str::from_utf8(port)
            .ok()
            .and_then(|p| p.parse::<u16>().ok())
            .filter(|&p| p > 0);
        let host = std::str::from_utf8(host)
            .ok()
            .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_graphic()));
        let (Some(host), Some(port)) = (host, port) else {
            s.out.extend_from_slice(
                b"CLIENT_ERROR usage: replicaof <host> <port> | replicaof no one\r\n",
            );
            return;
        };
        // An IPv6 address is written in brackets with its port.
        let addr = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        state.follow(addr)
    };
    match done {
        Ok(()) => s.out.extend_from_slice(b"OK\r\n"),
        Err(e) => s
            .out
            .extend_from_slice(format!("SERVER_ERROR {e}\r\n").as_bytes()),
    }
}
