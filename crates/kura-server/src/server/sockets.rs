//! The server's sockets: listen addresses resolved, TCP addresses bound
//! early and listened on late (after recovery), the Unix socket, and the
//! list `stats conns` shows.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs, UdpSocket};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use socket2::{Domain, Socket, Type};

use crate::error::ServerError;

/// Splits `host` or `host:port` (IPv6 as `[::1]:port` or bare `::1`).
pub(super) fn host_port(addr: &str, default_port: u16) -> (String, u16) {
    if let Some(rest) = addr.strip_prefix('[') {
        if let Some((host, port)) = rest.split_once("]:") {
            return (host.to_string(), port.parse().unwrap_or(default_port));
        }
        return (rest.trim_end_matches(']').to_string(), default_port);
    }
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => {
            (host.to_string(), port.parse().unwrap_or(default_port))
        }
        _ => (addr.to_string(), default_port),
    }
}

pub(super) fn resolve(addr: &str, port: u16) -> Result<Vec<SocketAddr>, ServerError> {
    let (host, port) = host_port(addr, port);
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| ServerError::Resolve(addr.to_string(), e))?
        .collect();
    if addrs.is_empty() {
        return Err(ServerError::NoAddress(addr.to_string()));
    }
    Ok(addrs)
}

/// Binds a TCP address without listening yet: the address is taken (a
/// port in use fails the start at once, `-p 0` gets its port), but a
/// client's connect is refused until [`listen`], after recovery.
pub(super) fn bind_tcp(addr: SocketAddr) -> Result<Socket, ServerError> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket
        .bind(&addr.into())
        .map_err(|e| ServerError::Tcp(addr, e))?;
    Ok(socket)
}

/// Starts listening on a socket from [`bind_tcp`].
pub(super) fn listen(socket: Socket, backlog: u32) -> std::io::Result<TcpListener> {
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Binds and listens on the Unix socket at `path`.
pub(super) fn bind_unix(path: &std::path::Path, mask: u32) -> Result<UnixListener, ServerError> {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).map_err(|error| ServerError::Unix {
        path: path.to_owned(),
        error,
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mask))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// The listening sockets as `stats conns` shows them.
pub(super) fn listeners(
    tcp: &[(TcpListener, bool)],
    unix: Option<&(UnixListener, PathBuf)>,
    udp: &[UdpSocket],
) -> Vec<crate::metrics::Listener> {
    use std::os::fd::AsRawFd;
    let entry = |fd: i32, addr: String, udp: bool| crate::metrics::Listener {
        id: fd as u64,
        addr,
        udp,
    };
    let mut all = Vec::new();
    for (l, _) in tcp {
        if let Ok(a) = l.local_addr() {
            all.push(entry(l.as_raw_fd(), format!("tcp:{a}"), false));
        }
    }
    if let Some((l, path)) = unix {
        all.push(entry(
            l.as_raw_fd(),
            format!("unix:{}", path.display()),
            false,
        ));
    }
    for s in udp {
        if let Ok(a) = s.local_addr() {
            all.push(entry(s.as_raw_fd(), format!("udp:{a}"), true));
        }
    }
    all
}
