//! The PROXY protocol on `listen_proxy` listeners: each connection must begin with a v1 or
//! v2 header (`wire::proxy_header`) from a `trusted_proxies` address, read here before
//! anything else; the client it names is the connection's client from then on (the purge ACL,
//! the access log, `X-Forwarded-For`). A connection without one, with a broken one, or from an
//! address that is not trusted is answered `400` with the reason and closed; nothing of it
//! reaches hyper.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::config::Cidr;
use crate::wire::proxy_header::{parse, Parsed, MAX_V2};

/// Reads the PROXY header of a connection from `from`: the client it names (`from` itself for
/// `LOCAL`/`UNKNOWN`), and the bytes read after the header. A refusal has been answered.
///
/// # Errors
/// The reason the connection was refused (already written to it).
pub async fn read_header<S>(
    stream: &mut S,
    from: SocketAddr,
    trusted: &[Cidr],
    timeout: Duration,
) -> Result<(SocketAddr, BytesMut), &'static str>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    if !trusted.iter().any(|net| net.contains(from.ip())) {
        return Err(refuse(
            stream,
            "PROXY protocol from an address not in trusted_proxies",
        )
        .await);
    }
    let mut input = BytesMut::with_capacity(256);
    let reading = async {
        loop {
            match parse(&input) {
                Parsed::Complete { len, source } => {
                    let rest = input.split_off(len);
                    return Ok((source.unwrap_or(from), rest));
                }
                Parsed::Refused(why) => return Err(why),
                Parsed::Partial if input.len() >= MAX_V2 => return Err("PROXY header too long"),
                Parsed::Partial => {}
            }
            match stream.read_buf(&mut input).await {
                Ok(0) | Err(_) => return Err("the connection ended inside the PROXY header"),
                Ok(_) => {}
            }
        }
    };
    let why = match tokio::time::timeout(timeout, reading).await {
        Ok(Ok(read)) => return Ok(read),
        Ok(Err(why)) => why,
        Err(_) => "no PROXY header in time",
    };
    Err(refuse(stream, why).await)
}

/// Answers `400` with `why` and ends the connection.
async fn refuse<S: AsyncWrite + Unpin>(stream: &mut S, why: &'static str) -> &'static str {
    tracing::warn!("listen_proxy: {why}");
    let body = format!("400 {why}: this listener takes connections from trusted load balancers, each beginning with a PROXY protocol header\n");
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
    why
}
