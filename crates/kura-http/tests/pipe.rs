//! WebSocket (and other `Upgrade` requests) piped to the backend: an echo backend written
//! for the test speaks RFC 6455 frames by hand; the client sends a handshake and frames
//! through kura http and reads them back. Also the refusals: a backend that refuses the
//! upgrade, the pipe limit, a backend that is down, and bytes sent after a refused upgrade.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine as _;
use common::wire::GUARD;
use common::*;
use parking_lot::Mutex;
use sha1::{Digest, Sha1};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// RFC 6455 §4.2.2: the accept value of a key.
fn accept(key: &str) -> String {
    let mut sha = Sha1::new();
    sha.update(key.as_bytes());
    sha.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(sha.finalize())
}

/// A frame: FIN, `opcode`, masked when a client sends it.
fn frame(opcode: u8, payload: &[u8], masked: bool) -> Vec<u8> {
    let mut out = vec![0x80 | opcode];
    let mask_bit = if masked { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(mask_bit | n as u8),
        n if n <= 0xffff => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let mask = [0x12, 0x34, 0x56, 0x78];
    if masked {
        out.extend_from_slice(&mask);
    }
    out.extend(
        payload
            .iter()
            .enumerate()
            .map(|(i, b)| if masked { b ^ mask[i % 4] } else { *b }),
    );
    out
}

/// Reads one frame: its opcode and unmasked payload; `None` at the end of the stream.
async fn read_frame(stream: &mut (impl AsyncRead + Unpin)) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 2];
    stream.read_exact(&mut head).await.ok()?;
    let len = match head[1] & 0x7f {
        126 => {
            let mut n = [0u8; 2];
            stream.read_exact(&mut n).await.ok()?;
            u64::from(u16::from_be_bytes(n))
        }
        127 => {
            let mut n = [0u8; 8];
            stream.read_exact(&mut n).await.ok()?;
            u64::from_be_bytes(n)
        }
        n => u64::from(n),
    };
    let mut mask = [0u8; 4];
    if head[1] & 0x80 != 0 {
        stream.read_exact(&mut mask).await.ok()?;
    }
    let mut payload = vec![0u8; usize::try_from(len).ok()?];
    stream.read_exact(&mut payload).await.ok()?;
    if head[1] & 0x80 != 0 {
        payload
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b ^= mask[i % 4]);
    }
    Some((head[0] & 0x0f, payload))
}

/// Reads an HTTP head (to the empty line) byte by byte, so nothing after it is consumed.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        if stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

fn field<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// The echo backend: `/refuse` answers 403; anything else with a WebSocket handshake is
/// switched and its frames echoed until a close. Every head it got is kept.
async fn echo_backend() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let Some(head) = read_head(&mut stream).await else {
                    return;
                };
                seen.lock().push(head.clone());
                if field(&head, "upgrade") != Some("websocket") {
                    let plain = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nplain\n";
                    let _ = stream.write_all(plain.as_bytes()).await;
                    return;
                }
                if head.starts_with("GET /refuse ") {
                    let refusal = "HTTP/1.1 403 Forbidden\r\nContent-Length: 6\r\n\r\nno ws\n";
                    let _ = stream.write_all(refusal.as_bytes()).await;
                    return;
                }
                let key = field(&head, "sec-websocket-key").unwrap_or_default();
                let switched = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
                    accept(key)
                );
                if stream.write_all(switched.as_bytes()).await.is_err() {
                    return;
                }
                while let Some((opcode, payload)) = read_frame(&mut stream).await {
                    let _ = stream.write_all(&frame(opcode, &payload, false)).await;
                    if opcode == 8 {
                        return;
                    }
                }
            });
        }
    });
    (addr, heads)
}

fn handshake(path: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: chat.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
}

/// Opens a connection to kura, sends `bytes`, and reads the answer's head.
async fn open(addr: SocketAddr, bytes: &[u8]) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(bytes).await.unwrap();
    let head = tokio::time::timeout(GUARD, read_head(&mut stream))
        .await
        .expect("an answer within the guard time")
        .expect("a head");
    (stream, head)
}

/// Whether the connection ends (within the guard time) without more than `max` bytes.
async fn ends(stream: &mut TcpStream, max: usize) -> bool {
    let mut rest = Vec::new();
    let read = tokio::time::timeout(GUARD, stream.read_to_end(&mut rest)).await;
    matches!(read, Ok(Ok(_))) && rest.len() <= max
}

async fn pipes_active(server: &kura_http::Server) -> u64 {
    stats(server).await["pipes_active"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_echo_through_the_cache() {
    let (backend, heads) = echo_backend().await;
    let server = proxy(backend, "").await;
    let addr = server.http[0];
    // The handshake and a first frame in one write: the frame waits for the 101.
    let mut first = handshake("/chat").into_bytes();
    first.extend(frame(1, b"hello", true));
    let (mut ws, head) = open(addr, &first).await;
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    assert_eq!(
        field(&head, "sec-websocket-accept"),
        Some(accept(KEY).as_str())
    );
    assert_eq!(field(&head, "x-cache"), Some("pipe"));
    assert_eq!(read_frame(&mut ws).await, Some((1, b"hello".to_vec())));
    // A binary frame with a 64-bit length, then a close.
    let big: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    ws.write_all(&frame(2, &big, true)).await.unwrap();
    assert_eq!(read_frame(&mut ws).await, Some((2, big)));
    assert_eq!(pipes_active(&server).await, 1);
    ws.write_all(&frame(8, &[3, 232], true)).await.unwrap();
    assert_eq!(read_frame(&mut ws).await, Some((8, vec![3, 232])));
    assert!(ends(&mut ws, 0).await);
    drop(ws);
    eventually_zero(&server).await;
    let counters = stats(&server).await;
    assert_eq!(counters["pipes"], 1);
    assert_eq!(counters["requests"]["pipe"], 1);
    // The backend got the handshake with kura's forwarding fields.
    let got = heads.lock()[0].clone();
    assert_eq!(field(&got, "upgrade"), Some("websocket"));
    assert_eq!(field(&got, "host"), Some("chat.example"));
    assert!(field(&got, "via").is_some_and(|via| via.starts_with("1.1 kura-")));
    assert_eq!(field(&got, "x-forwarded-for"), Some("127.0.0.1"));
    server.shutdown().await;
}

/// Waits (bounded) until no pipe is open.
async fn eventually_zero(server: &kura_http::Server) {
    for _ in 0..500 {
        if pipes_active(server).await == 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("a pipe stayed open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upgrade_is_passed_and_nothing_after_it_is_read() {
    let (backend, heads) = echo_backend().await;
    let server = proxy(backend, "").await;
    let addr = server.http[0];
    // An upgrade the backend refuses, with a request smuggled behind it in the same write.
    let mut bytes = handshake("/refuse").into_bytes();
    bytes.extend_from_slice(b"GET /secret HTTP/1.1\r\nHost: chat.example\r\n\r\n");
    let (mut conn, head) = open(addr, &bytes).await;
    assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
    assert_eq!(field(&head, "connection"), Some("close"));
    // The 403's body, then the end: /secret is never answered nor sent anywhere.
    assert!(ends(&mut conn, 6).await);
    assert_eq!(heads.lock().len(), 1);
    assert!(!heads.lock()[0].contains("/secret"));
    // h2c is not piped: answered over HTTP/1.1 as before, Upgrade removed.
    let h2c = "GET /x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n";
    let (_, head) = open(addr, h2c.as_bytes()).await;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert_eq!(field(&heads.lock()[1], "upgrade"), None);
    assert_eq!(stats(&server).await["pipes"], 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipes_are_bounded_and_a_dead_backend_is_a_503() {
    let (backend, _) = echo_backend().await;
    let server = proxy(backend, "max_pipes = 1").await;
    let addr = server.http[0];
    let (mut held, head) = open(addr, handshake("/one").as_bytes()).await;
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    let (mut refused, head) = open(addr, handshake("/two").as_bytes()).await;
    assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
    assert!(ends(&mut refused, 1024).await);
    assert_eq!(stats(&server).await["pipes_refused"], 1);
    // The first one still works; once it closes, a new one opens.
    held.write_all(&frame(1, b"still", true)).await.unwrap();
    assert_eq!(read_frame(&mut held).await, Some((1, b"still".to_vec())));
    held.write_all(&frame(8, &[], true)).await.unwrap();
    assert_eq!(read_frame(&mut held).await, Some((8, Vec::new())));
    drop(held);
    eventually_zero(&server).await;
    let (_again, head) = open(addr, handshake("/three").as_bytes()).await;
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    server.shutdown().await;

    // A backend that is down: 503, and the connection ends. The port is one nothing listens
    // on, below the kernel's ephemeral range: a port freed by dropping a listener could be the
    // one kura's own listener takes next (it forwarded the request to itself, in a loop, and
    // answered 502 once in a fresh-clone CI run).
    let dead = std::net::SocketAddr::from(([127, 0, 0, 1], kura_testkit::free_port()));
    let server = proxy(dead, "").await;
    let (mut conn, head) = open(server.http[0], handshake("/x").as_bytes()).await;
    assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
    assert!(ends(&mut conn, 1024).await);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipe_idle_for_pipe_idle_timeout_is_closed() {
    let (backend, _) = echo_backend().await;
    let server = proxy(backend, "pipe_idle_timeout = 2").await;
    let (mut ws, head) = open(server.http[0], handshake("/idle").as_bytes()).await;
    assert!(head.starts_with("HTTP/1.1 101 "), "{head}");
    // Traffic every 100 ms for longer than the timeout keeps the pipe open: each byte
    // received restarts the wait.
    let began = std::time::Instant::now();
    while began.elapsed() < std::time::Duration::from_secs(3) {
        ws.write_all(&frame(1, b"ping", true)).await.unwrap();
        assert_eq!(read_frame(&mut ws).await, Some((1, b"ping".to_vec())));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(pipes_active(&server).await, 1);
    // Silence: kura closes both connections (the client reads the end), counted.
    assert!(ends(&mut ws, 0).await, "the idle pipe was not closed");
    eventually_zero(&server).await;
    assert_eq!(stats(&server).await["pipes_idle_closed"], 1);
    server.shutdown().await;
}
