//! A TCP relay that delays every chunk by a fixed time in each direction,
//! as a network stand-in on loopback (netem is not available here). A
//! chunk is held until its own deadline, so bytes that follow each other
//! closely arrive closely: a pipelined batch pays the delay once.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Starts one relay per server; returns their addresses.
pub async fn start(servers: &[String], delay: Duration) -> Vec<String> {
    let mut out = Vec::new();
    for s in servers {
        let l = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the relay");
        out.push(l.local_addr().expect("addr").to_string());
        let upstream = s.clone();
        tokio::spawn(async move {
            while let Ok((down, _)) = l.accept().await {
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(up) = TcpStream::connect(&upstream).await else {
                        return;
                    };
                    let _ = up.set_nodelay(true);
                    let _ = down.set_nodelay(true);
                    let (dr, dw) = down.into_split();
                    let (ur, uw) = up.into_split();
                    tokio::spawn(pipe(dr, uw, delay));
                    tokio::spawn(pipe(ur, dw, delay));
                });
            }
        });
    }
    out
}

async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    tokio::spawn(async move {
        while let Some((at, chunk)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}
