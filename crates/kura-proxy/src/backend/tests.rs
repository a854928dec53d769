//! A worker's backend connection against scripted servers on loopback:
//! one write per round, replies to their own requests, a reply out of
//! step or a silent server failing every request on the connection, and
//! a new connection after that.

use std::io::{Read, Write};
use std::net::TcpStream as StdStream;
use std::sync::mpsc;
use std::time::Duration;

use kura_client::raw::Expect;
use kura_client::Error;
use kura_proto::client::Status;

use super::{send, Timeouts};

fn timeouts(request_ms: u64) -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(5),
        request: Duration::from_millis(request_ms),
        client: std::sync::Arc::new(kura_client::Config::default()),
    }
}

/// A server on loopback that runs `script` on each connection it accepts
/// (with the connection's number), each on a thread of its own.
fn server(script: impl Fn(usize, StdStream) + Send + Sync + 'static) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let script = std::sync::Arc::new(script);
    std::thread::spawn(move || {
        for (i, s) in l.incoming().enumerate() {
            let Ok(s) = s else { return };
            let script = script.clone();
            std::thread::spawn(move || script(i, s));
        }
    });
    addr
}

/// Reads until the peer closes (or a minute passes).
fn hold(mut s: StdStream) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
    let mut b = [0u8; 4096];
    while matches!(s.read(&mut b), Ok(n) if n > 0) {}
}

/// Runs `f` on an event loop like a worker's: I/O, no time driver.
fn local<F: std::future::Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&rt, f)
}

#[test]
fn requests_of_one_round_go_in_one_write_and_get_their_own_replies() {
    let (tx, rx) = mpsc::channel();
    let addr = server(move |_, mut s| {
        let mut b = [0u8; 4096];
        let n = s.read(&mut b).unwrap();
        let _ = tx.send(b[..n].to_vec());
        s.write_all(b"HD O1\r\nVA 2 O2\r\nhi\r\n").unwrap();
        hold(s);
    });
    local(async move {
        let t = timeouts(5000);
        // Two clients' requests in one round (lanes 0 and 3 of one connection).
        let a = send(0, 1, 0, &addr, &t, b"md a O1\r\n", Expect::Meta(1))
            .await
            .unwrap();
        let b = send(0, 1, 3, &addr, &t, b"mg b v O2\r\n", Expect::Meta(2))
            .await
            .unwrap();
        let (ra, rb) = (a.await.unwrap(), b.await.unwrap());
        assert_eq!((ra.len(), ra[0].status), (1, Status::Done));
        assert_eq!(rb[0].status, Status::Value);
        assert_eq!(rb[0].value.as_deref(), Some(&b"hi"[..]));
    });
    assert_eq!(rx.recv().unwrap(), b"md a O1\r\nmg b v O2\r\n");
}

#[test]
fn a_reply_out_of_step_fails_every_request_and_the_next_gets_a_new_connection() {
    let addr = server(|i, mut s| {
        let mut b = [0u8; 4096];
        let _ = s.read(&mut b).unwrap();
        // The first connection answers with another request's opaque.
        let r: &[u8] = if i == 0 { b"HD O9\r\n" } else { b"HD O3\r\n" };
        s.write_all(r).unwrap();
        hold(s);
    });
    local(async move {
        let t = timeouts(5000);
        let a = send(1, 1, 0, &addr, &t, b"md a O1\r\n", Expect::Meta(1))
            .await
            .unwrap();
        let b = send(1, 1, 0, &addr, &t, b"md b O2\r\n", Expect::Meta(2))
            .await
            .unwrap();
        for r in [a.await, b.await] {
            assert!(matches!(r, Err(Error::Protocol { .. })), "{r:?}");
        }
        let c = send(1, 1, 0, &addr, &t, b"md c O3\r\n", Expect::Meta(3))
            .await
            .unwrap();
        assert_eq!(c.await.unwrap()[0].status, Status::Done);
    });
}

#[test]
fn a_silent_backend_fails_its_requests_at_the_request_timeout() {
    let addr = server(|_, s| hold(s));
    local(async move {
        let t = timeouts(200);
        let a = send(2, 1, 0, &addr, &t, b"md a O1\r\n", Expect::Meta(1))
            .await
            .unwrap();
        let b = send(
            2,
            1,
            0,
            &addr,
            &t,
            b"md b q O0\r\nmn\r\n",
            Expect::MetaBatch(1),
        )
        .await
        .unwrap();
        for r in [a.await, b.await] {
            assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
        }
    });
}

/// A backend busy with a long run of replies (a client's many big values)
/// is not silent: the requests queued behind wait for its progress, and
/// none times out although the last comes long after the request timeout
/// (issue 43: before, the tail timed out and the healthy backend was
/// marked down).
#[test]
fn requests_behind_a_backend_that_keeps_answering_do_not_time_out() {
    const N: u32 = 12;
    let addr = server(|_, mut s| {
        let mut got = Vec::new();
        let mut b = [0u8; 4096];
        while got.iter().filter(|&&c| c == b'\n').count() < N as usize {
            let n = s.read(&mut b).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&b[..n]);
        }
        // One reply every 150 ms: 1.8 s in all, the timeout 600 ms.
        for i in 1..=N {
            std::thread::sleep(Duration::from_millis(150));
            s.write_all(format!("HD O{i}\r\n").as_bytes()).unwrap();
        }
        hold(s);
    });
    local(async move {
        let t = timeouts(600);
        let mut pending = Vec::new();
        for i in 1..=N {
            let req = format!("md k{i} O{i}\r\n");
            let p = send(7, 1, 0, &addr, &t, req.as_bytes(), Expect::Meta(i))
                .await
                .unwrap();
            pending.push(p);
        }
        for p in pending {
            assert_eq!(p.await.unwrap()[0].status, Status::Done);
        }
    });
}
