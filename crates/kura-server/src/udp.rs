//! The UDP protocol (`-U`), as memcached serves it: every datagram starts
//! with an 8-byte frame header (request id, sequence number, datagram
//! count, reserved); a request must fit in one datagram; the reply is cut
//! into datagrams of at most 1400 bytes, each with its own header.

use std::sync::Arc;

use kura_proto::parse;
use tokio::net::UdpSocket;

use crate::exec::{Next, Session, Step};
use crate::metrics::{add, ThreadStats};
use crate::shared::{RunState, Shared};

pub(crate) const HEADER_LEN: usize = 8;
/// Largest reply datagram, header included (memcached's limit).
pub(crate) const MAX_DATAGRAM: usize = 1400;

/// Runs the requests in one datagram payload, appending their replies to
/// the session's output. A payload announced by a refused request is
/// skipped as on TCP; an incomplete request ends the datagram.
pub(crate) fn handle_payload(session: &mut Session<'_>, payload: &[u8]) {
    let mut pos = 0;
    while pos < payload.len() {
        match session.step(parse(&payload[pos..], &session.shared.limits)) {
            Step::Done {
                len,
                next: Next::Continue,
            } => pos += len,
            Step::Done {
                len,
                next: Next::Swallow(n),
            } => pos += len + n,
            Step::Done {
                next: Next::Close, ..
            }
            | Step::More { .. }
            | Step::Garbage => break,
        }
    }
}

/// Splits `reply` into datagrams for request `id`.
pub(crate) fn datagrams(id: [u8; 2], reply: &[u8]) -> Vec<Vec<u8>> {
    let chunk = MAX_DATAGRAM - HEADER_LEN;
    let parts: Vec<&[u8]> = if reply.is_empty() {
        Vec::new()
    } else {
        reply.chunks(chunk).collect()
    };
    let total = u16::try_from(parts.len()).unwrap_or(u16::MAX);
    parts
        .iter()
        .enumerate()
        .map(|(seq, part)| {
            let mut d = Vec::with_capacity(HEADER_LEN + part.len());
            d.extend_from_slice(&id);
            d.extend_from_slice(&(seq as u16).to_be_bytes());
            d.extend_from_slice(&total.to_be_bytes());
            d.extend_from_slice(&[0, 0]);
            d.extend_from_slice(part);
            d
        })
        .collect()
}

pub(crate) async fn serve(sock: UdpSocket, shared: Arc<Shared>, stats: Arc<ThreadStats>) {
    let mut rx = shared.watch();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let (n, peer) = tokio::select! {
            _ = rx.wait_for(|s| *s == RunState::Stopping) => return,
            r = sock.recv_from(&mut buf) => match r {
                Ok(x) => x,
                Err(_) => continue,
            },
        };
        add(&stats.bytes_read, n as u64);
        if n < HEADER_LEN {
            continue;
        }
        let id = [buf[0], buf[1]];
        let mut session = Session::new(&shared, &stats);
        if buf[4] != 0 || buf[5] != 1 {
            session
                .out
                .extend_from_slice(b"SERVER_ERROR multi-packet request not supported\r\n");
        } else {
            handle_payload(&mut session, &buf[HEADER_LEN..n]);
        }
        for d in datagrams(id, &session.out.to_vec()) {
            if sock.send_to(&d, peer).await.is_ok() {
                add(&stats.bytes_written, d.len() as u64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_payload_is_skipped_like_on_tcp() {
        let shared = Shared::new(crate::ServerConfig::default(), Arc::default());
        let stats = ThreadStats::default();
        let mut session = Session::new(&shared, &stats);
        handle_payload(&mut session, b"ms k 3 Zbad\r\nabc\r\nmn\r\n");
        assert_eq!(session.out.to_vec(), b"CLIENT_ERROR invalid flag\r\nMN\r\n");
    }

    #[test]
    fn replies_are_cut_into_numbered_datagrams() {
        let reply = vec![b'x'; 3000];
        let ds = datagrams([0, 7], &reply);
        assert_eq!(ds.len(), 3);
        for (i, d) in ds.iter().enumerate() {
            assert_eq!(&d[..2], &[0, 7]);
            assert_eq!(u16::from_be_bytes([d[2], d[3]]), i as u16);
            assert_eq!(u16::from_be_bytes([d[4], d[5]]), 3);
            assert!(d.len() <= MAX_DATAGRAM);
        }
        let total: usize = ds.iter().map(|d| d.len() - HEADER_LEN).sum();
        assert_eq!(total, 3000);
    }
}
