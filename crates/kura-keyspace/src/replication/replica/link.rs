//! The replica's connection to its primary: TCP, or TLS over it
//! (`--replica-tls-ca`); memcached's ASCII authentication (`-Y` on the
//! primary) or SASL PLAIN over the binary protocol (`-S`,
//! `--replica-sasl`); and the request that turns it into a stream.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use kura_proto::binary::{self, BinRequest, Command};
use rustls_pki_types::ServerName;
use tokio_rustls::rustls::{ClientConnection, StreamOwned};

use crate::config::ReplicationConfig;

/// A connection to the primary.
pub(super) enum Link {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Link::Plain(s) => s.read(buf),
            Link::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Link::Plain(s) => s.write(buf),
            Link::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Link::Plain(s) => s.flush(),
            Link::Tls(s) => s.flush(),
        }
    }
}

impl Link {
    /// Connects to `primary` (`host:port`) within `timeout`, with TLS when
    /// the state has it; reads wait `read_timeout` at most.
    pub(super) fn connect(
        primary: &str,
        config: &ReplicationConfig,
        timeout: Duration,
        read_timeout: Duration,
    ) -> anyhow::Result<Link> {
        let addr = primary
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {primary}"))?
            .next()
            .ok_or_else(|| anyhow!("{primary} resolves to nothing"))?;
        let tcp = TcpStream::connect_timeout(&addr, timeout)
            .with_context(|| format!("cannot connect to {primary}"))?;
        tcp.set_read_timeout(Some(read_timeout))?;
        tcp.set_nodelay(true)?;
        let Some(tls) = config.tls.as_ref().map(|t| t.current()) else {
            return Ok(Link::Plain(tcp));
        };
        let host = match &config.tls_name {
            Some(name) => name.clone(),
            None => host_of(primary).to_string(),
        };
        let name = ServerName::try_from(host.clone())
            .map_err(|_| anyhow!("{host:?} is not a name a certificate can carry"))?;
        let conn =
            ClientConnection::new(tls, name).map_err(|e| anyhow!("TLS to {primary}: {e}"))?;
        let mut link = Link::Tls(Box::new(StreamOwned::new(conn, tcp)));
        // The handshake now, so that a certificate refused says so here.
        if let Link::Tls(s) = &mut link {
            while s.conn.is_handshaking() {
                s.conn
                    .complete_io(&mut s.sock)
                    .with_context(|| format!("TLS handshake with {primary}"))?;
            }
        }
        Ok(link)
    }

    /// The TCP connection underneath.
    pub(super) fn tcp(&self) -> &TcpStream {
        match self {
            Link::Plain(s) => s,
            Link::Tls(s) => &s.sock,
        }
    }

    /// memcached's ASCII authentication: `set` with `user password` as data.
    pub(super) fn ascii_auth(&mut self, user: &[u8], pass: &[u8]) -> anyhow::Result<()> {
        let mut req = format!("set auth 0 0 {}\r\n", user.len() + 1 + pass.len()).into_bytes();
        req.extend_from_slice(user);
        req.push(b' ');
        req.extend_from_slice(pass);
        req.extend_from_slice(b"\r\n");
        self.write_all(&req)?;
        let mut reply = Vec::new();
        let mut b = [0u8; 1];
        while !reply.ends_with(b"\r\n") && reply.len() < 256 {
            if self.read(&mut b)? == 0 {
                bail!("the primary closed the connection during authentication");
            }
            reply.push(b[0]);
        }
        if reply != b"STORED\r\n" {
            bail!(
                "the primary refused our credentials: {}",
                String::from_utf8_lossy(&reply).trim_end()
            );
        }
        Ok(())
    }

    /// SASL PLAIN over the binary protocol.
    pub(super) fn sasl_auth(&mut self, user: &[u8], pass: &[u8]) -> anyhow::Result<()> {
        let mut data = vec![0u8];
        data.extend_from_slice(user);
        data.push(0);
        data.extend_from_slice(pass);
        let mut req = Vec::new();
        BinRequest {
            opcode: binary::opcode::SASL_AUTH,
            opaque: 0,
            cas: 0,
            quiet: false,
            command: Command::SaslAuth {
                mechanism: b"PLAIN",
                data: &data,
            },
        }
        .compose(&mut req);
        self.write_all(&req)?;
        let mut head = [0u8; binary::HEADER_LEN];
        self.read_exact(&mut head)
            .context("the primary closed the connection during SASL authentication")?;
        let status = u16::from_be_bytes([head[6], head[7]]);
        let body = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
        let mut msg = vec![0u8; body.min(4096)];
        self.read_exact(&mut msg)?;
        if head[0] != binary::RESPONSE_MAGIC || status != 0 {
            bail!(
                "the primary refused our SASL credentials (status {status:#06x}): {}",
                String::from_utf8_lossy(&msg)
            );
        }
        Ok(())
    }

    /// Asks for the records after `after` of `history` (text, or the
    /// binary opcode on a primary that speaks binary only).
    pub(super) fn ask(&mut self, history: &str, after: u64, binary: bool) -> anyhow::Result<()> {
        if !binary {
            self.write_all(format!("replicate {history} {after}\r\n").as_bytes())?;
            return Ok(());
        }
        let mut req = Vec::new();
        BinRequest {
            opcode: binary::opcode::REPLICATE,
            opaque: 0,
            cas: 0,
            quiet: false,
            command: Command::Replicate {
                history: history.as_bytes(),
                after,
            },
        }
        .compose(&mut req);
        self.write_all(&req)?;
        Ok(())
    }
}

/// The host part of `host:port` (`[v6]:port` too).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}
