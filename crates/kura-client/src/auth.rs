//! Logging in to a server that requires it, on a new connection before
//! any request: memcached's binary SASL (`memcached -S`, mechanism PLAIN)
//! or its ASCII authentication (`memcached -Y FILE`, kura server's `-Y`),
//! and the connection itself: TCP, then TLS when configured, then the
//! login, all within the connect timeout.

use kura_proto::binary::opcode;
use kura_tls::ClientStream;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::config::Config;
use crate::error::{Error, Result};

/// Credentials a server wants before it serves a connection.
#[derive(Clone, PartialEq, Eq)]
pub enum Auth {
    /// memcached's binary SASL with mechanism PLAIN (`memcached -S`;
    /// memcached then speaks only the binary protocol).
    SaslPlain { user: String, password: String },
    /// memcached's ASCII authentication (`memcached -Y FILE`): a `set`
    /// whose data is `user password`, answered `STORED`. Text and meta
    /// requests follow on the connection.
    Ascii { user: String, password: String },
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        match self {
            Auth::SaslPlain { user, .. } => write!(f, "SaslPlain({user:?})"),
            Auth::Ascii { user, .. } => write!(f, "Ascii({user:?})"),
        }
    }
}

/// The longest reply to a login read.
const REPLY_MAX: usize = 4096;

async fn read_line<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::with_capacity(32);
    let mut b = [0u8; 256];
    while !line.ends_with(b"\r\n") {
        let n = s.read(&mut b).await?;
        if n == 0 || line.len() + n > REPLY_MAX {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        line.extend_from_slice(&b[..n]);
    }
    Ok(line)
}

/// The binary SASL_AUTH request for PLAIN with `user` and `password`.
fn sasl_plain_request(user: &str, password: &str) -> Vec<u8> {
    let mech = b"PLAIN";
    let mut data = vec![0u8];
    data.extend_from_slice(user.as_bytes());
    data.push(0);
    data.extend_from_slice(password.as_bytes());
    let body = (mech.len() + data.len()) as u32;
    let mut req = Vec::with_capacity(24 + body as usize);
    req.extend_from_slice(&[kura_proto::binary::REQUEST_MAGIC, opcode::SASL_AUTH]);
    req.extend_from_slice(&(mech.len() as u16).to_be_bytes());
    req.extend_from_slice(&[0, 0, 0, 0]); // extras, data type, vbucket
    req.extend_from_slice(&body.to_be_bytes());
    req.extend_from_slice(&[0; 12]); // opaque, cas
    req.extend_from_slice(mech);
    req.extend_from_slice(&data);
    req
}

/// Logs in on `s` to `server`.
///
/// # Errors
/// [`Error::Auth`] when the server refuses (with its answer), I/O errors.
pub(crate) async fn login<S>(s: &mut S, auth: &Auth, server: &str) -> Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let io = |e| Error::io(server, e);
    let refused = |what: String| Error::Auth {
        server: server.to_string(),
        what,
    };
    match auth {
        Auth::Ascii { user, password } => {
            let token = format!("{user} {password}");
            let req = format!("set kura-auth 0 0 {}\r\n{token}\r\n", token.len());
            s.write_all(req.as_bytes()).await.map_err(io)?;
            s.flush().await.map_err(io)?;
            let line = read_line(s).await.map_err(io)?;
            if line != b"STORED\r\n" {
                let answer = String::from_utf8_lossy(&line).trim_end().to_string();
                return Err(refused(format!("ASCII auth as {user:?}: {answer}")));
            }
        }
        Auth::SaslPlain { user, password } => {
            s.write_all(&sasl_plain_request(user, password))
                .await
                .map_err(io)?;
            s.flush().await.map_err(io)?;
            let mut header = [0u8; 24];
            s.read_exact(&mut header).await.map_err(io)?;
            if header[0] != kura_proto::binary::RESPONSE_MAGIC {
                return Err(refused(format!(
                    "SASL PLAIN as {user:?}: not a binary reply (does the server speak binary?)"
                )));
            }
            let status = u16::from_be_bytes([header[6], header[7]]);
            let len = u32::from_be_bytes([header[8], header[9], header[10], header[11]]) as usize;
            if len > REPLY_MAX {
                return Err(refused(format!(
                    "SASL PLAIN as {user:?}: a reply of {len} bytes"
                )));
            }
            let mut body = vec![0u8; len];
            s.read_exact(&mut body).await.map_err(io)?;
            if status != 0 {
                let why = String::from_utf8_lossy(&body).to_string();
                return Err(refused(format!(
                    "SASL PLAIN as {user:?}: status 0x{status:04x} {why}"
                )));
            }
        }
    }
    Ok(())
}

/// A connection to `addr` as `cfg` says: TCP (no delay), TLS when
/// `cfg.tls`, then the login when `cfg.auth`, all within the connect
/// timeout.
///
/// # Errors
/// [`Error::ConnectTimeout`], I/O errors, [`Error::Tls`] when the
/// handshake fails (a certificate that is not trusted or not the server's
/// name, a client certificate refused), [`Error::Auth`] when the login is
/// refused.
pub async fn connect(addr: &str, cfg: &Config) -> Result<ClientStream> {
    let after = cfg.connect_timeout;
    match tokio::time::timeout(after, open(addr, cfg)).await {
        Ok(r) => r,
        Err(_) => Err(Error::ConnectTimeout {
            server: addr.to_string(),
            after,
        }),
    }
}

/// As [`connect`] without its timeout, for a caller whose runtime has no
/// timers (kura proxy's workers), which bounds it itself.
///
/// # Errors
/// As [`connect`], but no [`Error::ConnectTimeout`].
pub async fn open(addr: &str, cfg: &Config) -> Result<ClientStream> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| Error::io(addr, e))?;
    let _ = tcp.set_nodelay(true);
    let mut stream = match &cfg.tls {
        None => ClientStream::Plain(tcp),
        Some(tls) => match kura_tls::connect(tcp, tls, addr).await {
            Ok(s) => ClientStream::Tls(Box::new(s)),
            Err(e) => match Error::io(addr, e) {
                tls @ Error::Tls { .. } => return Err(tls),
                Error::Io { source, .. } => {
                    return Err(Error::Tls {
                        server: addr.to_string(),
                        what: source.to_string(),
                    })
                }
                other => return Err(other),
            },
        },
    };
    if let Some(auth) = &cfg.auth {
        login(&mut stream, auth, addr).await?;
    }
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_plain_bytes() {
        let r = sasl_plain_request("u", "pw");
        assert_eq!(&r[..2], &[0x80, 0x21]);
        assert_eq!(u16::from_be_bytes([r[2], r[3]]), 5);
        assert_eq!(u32::from_be_bytes([r[8], r[9], r[10], r[11]]), 5 + 5);
        assert_eq!(&r[24..], b"PLAIN\0u\0pw");
    }

    #[test]
    fn the_password_is_not_printed() {
        let a = Auth::Ascii {
            user: "me".into(),
            password: "secret".into(),
        };
        assert!(!format!("{a:?}").contains("secret"));
    }
}
