//! A deliberately lenient backend for the security tests: it reads requests as permissive
//! origins do (a head ends at an empty line, CRLF or bare LF; a body is chunked when any
//! `Transfer-Encoding` mentions `chunked`, else as long as the first `Content-Length` says,
//! waiting for it as nginx does), logs the exact bytes of every request, and answers with
//! whatever bytes the test gives it, keep-alive. A cache in front of it must never make it read
//! one request as part of another.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request as the backend read it.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request head as sent, up to and including its empty line.
    pub head: String,
    /// The body, as framed by the lenient reading.
    pub body: Vec<u8>,
    /// The backend connection it came on (numbered from 0).
    pub connection: usize,
}

impl Received {
    /// The request line.
    pub fn line(&self) -> &str {
        self.head.lines().next().unwrap_or("")
    }
    /// The request target.
    pub fn target(&self) -> &str {
        self.line().split(' ').nth(1).unwrap_or("")
    }
    /// The first value of field `name` (any case).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// What the backend does with a request.
pub enum Reply {
    /// Writes these bytes, then reads the next request.
    Bytes(Vec<u8>),
    /// Never answers (the connection stays open).
    Hang,
    /// Closes the connection.
    Close,
    /// Writes this head, then body bytes forever.
    Endless(Vec<u8>),
}

type Handler = dyn Fn(&Received) -> Reply + Send + Sync;

/// The lenient backend.
pub struct Lenient {
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<Received>>>,
    /// Bytes written by `Reply::Endless` answers, all connections together.
    pub endless_written: Arc<std::sync::atomic::AtomicU64>,
    /// Connections whose `Reply::Endless` answer stopped because the reader went away.
    pub endless_stopped: Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Lenient {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A 200 with `body`, `Content-Length` and the extra `fields` (`Name: value` lines).
pub fn ok(body: &str, fields: &[&str]) -> Reply {
    let mut head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n", body.len());
    for field in fields {
        head.push_str(field);
        head.push_str("\r\n");
    }
    Reply::Bytes(format!("{head}\r\n{body}").into_bytes())
}

impl Lenient {
    /// Starts the backend on loopback.
    pub async fn start(handler: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Lenient {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log: Arc<Mutex<Vec<Received>>> = Arc::default();
        let handler: Arc<Handler> = Arc::new(handler);
        let written = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let stopped = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (log2, written2, stopped2) = (log.clone(), written.clone(), stopped.clone());
        let task = tokio::spawn(async move {
            let mut connection = 0;
            while let Ok((stream, _)) = listener.accept().await {
                let (log, handler) = (log2.clone(), handler.clone());
                let (written, stopped) = (written2.clone(), stopped2.clone());
                tokio::spawn(serve(stream, connection, log, handler, written, stopped));
                connection += 1;
            }
        });
        Lenient {
            addr,
            log,
            endless_written: written,
            endless_stopped: stopped,
            task,
        }
    }

    /// Every request read so far.
    pub fn requests(&self) -> Vec<Received> {
        self.log.lock().clone()
    }
}

async fn serve(
    mut stream: TcpStream,
    connection: usize,
    log: Arc<Mutex<Vec<Received>>>,
    handler: Arc<Handler>,
    written: Arc<std::sync::atomic::AtomicU64>,
    stopped: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut buf = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buf, connection).await else {
            return;
        };
        log.lock().push(request.clone());
        match handler(&request) {
            Reply::Bytes(bytes) => {
                if stream.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Reply::Hang => {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return;
            }
            Reply::Close => return,
            Reply::Endless(head) => {
                if stream.write_all(&head).await.is_err() {
                    return;
                }
                let chunk = vec![b'x'; 16 * 1024];
                while stream.write_all(&chunk).await.is_ok() {
                    written.fetch_add(chunk.len() as u64, std::sync::atomic::Ordering::Relaxed);
                }
                stopped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return;
            }
        }
    }
}

/// Reads one request leniently; `None` at the end of the stream.
async fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    connection: usize,
) -> Option<Received> {
    let head_end = loop {
        if let Some(end) = head_end(buf) {
            break end;
        }
        fill(stream, buf).await?;
    };
    let head: Vec<u8> = buf.drain(..head_end).collect();
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut received = Received {
        head,
        body: Vec::new(),
        connection,
    };
    let chunked = received.head.lines().skip(1).any(|line| {
        line.split_once(':').is_some_and(|(n, v)| {
            n.trim().eq_ignore_ascii_case("transfer-encoding")
                && v.to_ascii_lowercase().contains("chunked")
        })
    });
    if chunked {
        received.body = read_chunked(stream, buf).await?;
    } else if let Some(length) = received.field("content-length") {
        let digits: String = length.chars().take_while(char::is_ascii_digit).collect();
        let length: usize = digits.parse().unwrap_or(0);
        while buf.len() < length {
            fill(stream, buf).await?;
        }
        received.body = buf.drain(..length).collect();
    }
    Some(received)
}

/// Where the head ends: after an empty line, CRLF or bare LF.
fn head_end(buf: &[u8]) -> Option<usize> {
    let mut at = 0;
    while let Some(lf) = buf[at..].iter().position(|&b| b == b'\n') {
        let line = &buf[at..at + lf];
        if (line.is_empty() || line == b"\r") && at > 0 {
            return Some(at + lf + 1);
        }
        at += lf + 1;
    }
    None
}

async fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 16 * 1024];
    let n = stream.read(&mut chunk).await.ok()?;
    if n == 0 {
        return None;
    }
    buf.extend_from_slice(&chunk[..n]);
    Some(())
}

/// A chunked body, read leniently (bare LF line ends, anything after the size ignored).
async fn read_chunked(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line = read_line(stream, buf).await?;
        let hex: String = line.chars().take_while(char::is_ascii_hexdigit).collect();
        let size = usize::from_str_radix(&hex, 16).unwrap_or(0);
        if size == 0 {
            // Trailers up to an empty line.
            while !read_line(stream, buf).await?.is_empty() {}
            return Some(body);
        }
        while buf.len() < size {
            fill(stream, buf).await?;
        }
        body.extend(buf.drain(..size));
        read_line(stream, buf).await?;
    }
}

async fn read_line(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    loop {
        if let Some(lf) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=lf).collect();
            let text = String::from_utf8_lossy(&line);
            return Some(text.trim_end_matches(['\r', '\n']).to_owned());
        }
        fill(stream, buf).await?;
    }
}
