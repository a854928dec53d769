//! `kura ring`: prints the server of each key read from standard input, as
//! a given client places it (kura-ring), for operators debugging placement.

use std::io::{BufRead, ErrorKind, Write};

use anyhow::{bail, Context};
use clap::Args;
use kura_ring::{Hash, Kind, Ring, Server};

/// Print the server of each key read from stdin (one per line) as
/// `KEY<TAB>HOST:PORT[ NAME]`, placed as the chosen client places it.
#[derive(Args, Debug)]
pub struct RingArgs {
    /// Whose placement: libmemcached (weighted ketama: pylibmc
    /// ketama_weighted, PHP memcached libketama), dalli, twemproxy, ch3
    /// (mcrouter), jump.
    #[arg(long, short = 'k', value_name = "KIND")]
    kind: String,
    /// twemproxy's `hash:` (default fnv1a_64): one_at_a_time, md5, crc16,
    /// crc32, crc32a, fnv1_64, fnv1a_64, fnv1_32, fnv1a_32, hsieh, murmur,
    /// jenkins.
    #[arg(long, value_name = "HASH")]
    hash: Option<String>,
    /// The servers in the client's order, as HOST[:PORT[:WEIGHT]][ NAME]
    /// (port 11211 and weight 1 by default; a twemproxy node name after a
    /// space, so quote it; IPv6 in brackets).
    #[arg(required = true, value_name = "SERVER")]
    servers: Vec<String>,
}

/// Builds the ring the arguments describe.
fn ring(args: &RingArgs) -> anyhow::Result<Ring> {
    let mut kind: Kind = args.kind.parse()?;
    if let Some(hash) = &args.hash {
        let Kind::Twemproxy(_) = kind else {
            bail!(
                "--hash is twemproxy's setting; {} has its own hash",
                kind.name()
            );
        };
        kind = Kind::Twemproxy(hash.parse::<Hash>()?);
    }
    let servers = args
        .servers
        .iter()
        .map(|s| s.parse::<Server>())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Ring::new(kind, servers)?)
}

/// Reads keys from `input` and writes `key<TAB>server` lines to `out`.
/// A line's `\n` (and a `\r` before it) is not part of the key; empty lines
/// are skipped.
pub fn run(args: &RingArgs, mut input: impl BufRead, mut out: impl Write) -> anyhow::Result<()> {
    let ring = ring(args)?;
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).context("reading keys")? == 0 {
            break;
        }
        let key = line.strip_suffix(b"\n").unwrap_or(&line);
        let key = key.strip_suffix(b"\r").unwrap_or(key);
        if key.is_empty() {
            continue;
        }
        let server = ring.server_for(key);
        let written = out
            .write_all(key)
            .and_then(|()| writeln!(out, "\t{server}"));
        if let Err(e) = written {
            // `kura ring ... | head` is done when head is.
            if e.kind() == ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(e).context("writing placements");
        }
    }
    match out.flush() {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => Err(e).context("writing placements"),
        _ => Ok(()),
    }
}
