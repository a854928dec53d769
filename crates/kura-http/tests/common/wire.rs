//! A client that speaks raw bytes on one connection and reads the responses one by one
//! (1xx ones included), each bounded by a guard timeout: a proxy that never answers fails the
//! test instead of hanging it.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a test waits for bytes the proxy owes it before failing.
pub const GUARD: Duration = Duration::from_secs(20);

/// A response as read from the wire.
#[derive(Debug, Clone)]
pub struct RawResponse {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of field `name` (any case).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// One client connection.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Conn {
        Conn {
            stream: TcpStream::connect(addr).await.unwrap(),
            buf: Vec::new(),
        }
    }

    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Closes the sending side (the peer reads the end of the stream; answers still come).
    pub async fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown().await;
    }

    /// The next response, or `None` if the connection closed first. `head_only`: the request
    /// was a HEAD (no body follows).
    pub async fn response(&mut self, head_only: bool) -> Option<RawResponse> {
        tokio::time::timeout(GUARD, self.read_response(head_only))
            .await
            .expect("the proxy answers or closes within the guard timeout")
    }

    /// Reads whatever bytes come next: how many, `None` at the end of the stream.
    pub async fn read_some(&mut self) -> Option<usize> {
        let before = self.buf.len();
        self.fill().await?;
        let n = self.buf.len() - before;
        self.buf.clear();
        Some(n)
    }

    /// Whether the proxy closes the connection (reading and dropping anything it sends).
    pub async fn closed(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        let read = async {
            loop {
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => {}
                }
            }
        };
        tokio::time::timeout(GUARD, read).await.unwrap_or(false)
    }

    async fn fill(&mut self) -> Option<()> {
        let mut chunk = [0u8; 16 * 1024];
        match self.stream.read(&mut chunk).await {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Some(())
            }
        }
    }

    async fn read_response(&mut self, head_only: bool) -> Option<RawResponse> {
        let (status, head_len, length, chunked) = loop {
            let mut fields = [httparse::EMPTY_HEADER; 128];
            let mut response = httparse::Response::new(&mut fields);
            if let Ok(httparse::Status::Complete(len)) = response.parse(&self.buf) {
                let status = response.code.unwrap_or(0);
                let mut length = None;
                let mut chunked = false;
                for field in response.headers.iter() {
                    if field.name.eq_ignore_ascii_case("content-length") {
                        length = std::str::from_utf8(field.value).ok()?.trim().parse().ok();
                    }
                    if field.name.eq_ignore_ascii_case("transfer-encoding") {
                        chunked = true;
                    }
                }
                break (status, len, length, chunked);
            }
            self.fill().await?;
        };
        let head: Vec<u8> = self.buf.drain(..head_len).collect();
        let head = String::from_utf8_lossy(&head).into_owned();
        let bodyless = head_only || status < 200 || status == 204 || status == 304;
        let body = if bodyless {
            Vec::new()
        } else if chunked {
            self.chunked().await?
        } else if let Some(length) = length {
            while self.buf.len() < length {
                self.fill().await?;
            }
            self.buf.drain(..length).collect()
        } else {
            while self.fill().await.is_some() {}
            std::mem::take(&mut self.buf)
        };
        Some(RawResponse { status, head, body })
    }

    async fn line(&mut self) -> Option<String> {
        loop {
            if let Some(lf) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buf.drain(..lf + 2).collect();
                return Some(String::from_utf8_lossy(&line[..lf]).into_owned());
            }
            self.fill().await?;
        }
    }

    async fn chunked(&mut self) -> Option<Vec<u8>> {
        let mut body = Vec::new();
        loop {
            let line = self.line().await?;
            let size = usize::from_str_radix(line.split(';').next()?.trim(), 16).ok()?;
            if size == 0 {
                while !self.line().await?.is_empty() {}
                return Some(body);
            }
            while self.buf.len() < size + 2 {
                self.fill().await?;
            }
            body.extend(self.buf.drain(..size));
            self.buf.drain(..2);
        }
    }
}
