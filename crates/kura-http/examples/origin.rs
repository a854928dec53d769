//! A benchmark origin for bench/http.sh: `origin PORT DELAY_MS`. `GET /SIZE/anything` answers
//! SIZE bytes (`1k`, `100k`, or a number) with `Cache-Control: max-age=3600`, after DELAY_MS
//! milliseconds; `GET /esi/anything` an HTML page of 5 ESI includes of `/1k/fragment-N`
//! (bench/http-esi.sh). A path segment `tag-NAME` tags the answer NAME in `X-Cache-Tags`
//! (FOSHttpCache's field) and `xkey` (bench/http-purge.sh). It counts requests and prints the
//! count on SIGTERM's way out (stderr).

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

fn size(path: &str) -> usize {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    match first.strip_suffix('k') {
        Some(k) => k.parse::<usize>().unwrap_or(1) * 1024,
        None => first.parse().unwrap_or(1024),
    }
}

/// An HTML page of about 2 KB with 5 ESI includes.
fn esi_page() -> Vec<u8> {
    let mut page = String::from("<html><body>\n");
    for n in 1..=5 {
        page.push_str("<div><p>");
        page.push_str(&"text ".repeat(60));
        page.push_str(&format!(
            "</p><esi:include src=\"/1k/fragment-{n}\"/></div>\n"
        ));
    }
    page.push_str("</body></html>\n");
    page.into_bytes()
}

/// The tag a path names in a `tag-NAME` segment.
fn tag(path: &str) -> Option<&str> {
    path.split('/')
        .find_map(|segment| segment.strip_prefix("tag-"))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let port: u16 = args.next().and_then(|p| p.parse().ok()).unwrap_or(8080);
    let delay = Duration::from_millis(args.next().and_then(|d| d.parse().ok()).unwrap_or(0));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let count = Arc::new(AtomicU64::new(0));
    runtime.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
        let counted = count.clone();
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            eprintln!("origin: {} requests", counted.load(Ordering::Relaxed));
            std::process::exit(0);
        });
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let count = count.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    count.fetch_add(1, Ordering::Relaxed);
                    async move {
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        let path = request.uri().path();
                        let (body, kind) = if path.starts_with("/esi/") {
                            (esi_page(), "text/html")
                        } else {
                            (vec![b'x'; size(path)], "application/octet-stream")
                        };
                        let mut response = Response::builder()
                            .header("cache-control", "max-age=3600")
                            .header("content-type", kind);
                        if let Some(tag) = tag(path) {
                            response = response.header("x-cache-tags", tag).header("xkey", tag);
                        }
                        let response = response
                            .body(Full::new(Bytes::from(body)))
                            .expect("a response");
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}
