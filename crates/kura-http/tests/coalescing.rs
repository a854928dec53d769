//! Request coalescing and streaming: one backend fetch for many concurrent clients, waiters
//! released when the response is not storable, bodies sent before the backend has finished.

mod common;

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{Request, Response};
use http_body_util::BodyExt;
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_misses_make_one_backend_request() {
    let backend = Backend::start(Duration::from_millis(300), |_| {
        reply(200, &[("cache-control", "max-age=100")], "the object")
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let addr = server.http[0];
    let c = client();
    let mut requests = JoinSet::new();
    for _ in 0..1000 {
        let c = c.clone();
        requests.spawn(async move { get(&c, addr, "/cold").await });
    }
    let mut outcomes = std::collections::HashMap::new();
    while let Some(got) = requests.join_next().await {
        let got = got.unwrap();
        assert_eq!(
            (got.status.as_u16(), &got.body[..]),
            (200, &b"the object"[..])
        );
        *outcomes.entry(got.cache().to_owned()).or_insert(0) += 1;
    }
    assert_eq!(
        backend.count(),
        1,
        "exactly one backend request: {outcomes:?}"
    );
    assert_eq!(outcomes["miss"], 1);
    assert_eq!(
        outcomes.get("coalesced").unwrap_or(&0) + outcomes.get("hit").unwrap_or(&0),
        999
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_released_when_the_response_is_private() {
    let backend = Backend::start(Duration::from_millis(200), |seen| {
        let who = seen
            .headers
            .get("x-user")
            .map_or("", |v| v.to_str().unwrap())
            .to_owned();
        reply(200, &[("cache-control", "private")], &who)
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let addr = server.http[0];
    let c = client();
    let mut requests = JoinSet::new();
    for user in 0..20 {
        let c = c.clone();
        requests.spawn(async move {
            let user = user.to_string();
            let got = send(&c, addr, "GET", "/me", &[("x-user", &user)]).await;
            assert_eq!(got.body, user, "each client gets its own response");
        });
    }
    while let Some(done) = requests.join_next().await {
        done.unwrap();
    }
    assert_eq!(backend.count(), 20);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalesced_waiters_check_vary() {
    let backend = Backend::start(Duration::from_millis(200), |seen| {
        let lang = seen
            .headers
            .get("accept-language")
            .map_or("-", |v| v.to_str().unwrap())
            .to_owned();
        reply(
            200,
            &[
                ("cache-control", "max-age=100"),
                ("vary", "accept-language"),
            ],
            &lang,
        )
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let addr = server.http[0];
    let c = client();
    let mut requests = JoinSet::new();
    for i in 0..40 {
        let c = c.clone();
        requests.spawn(async move {
            let lang = if i % 2 == 0 { "ja" } else { "en" };
            let got = send(&c, addr, "GET", "/lang", &[("accept-language", lang)]).await;
            assert_eq!(got.body, lang);
        });
    }
    while let Some(done) = requests.join_next().await {
        done.unwrap();
    }
    assert!(backend.count() >= 2);
    server.shutdown().await;
}

/// A body fed chunk by chunk through a channel.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok(Frame::data(c))))
    }
}

/// A backend whose one response body the test feeds; it counts requests.
async fn streaming_backend(
    headers: &'static [(&'static str, &'static str)],
) -> (
    std::net::SocketAddr,
    mpsc::Sender<Bytes>,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel::<Bytes>(4);
    let rx = std::sync::Arc::new(parking_lot::Mutex::new(Some(rx)));
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = count.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let rx = rx.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let service = service_fn(move |_: Request<Incoming>| {
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let rx = rx.lock().take();
                    async move {
                        let mut response =
                            Response::new(ChannelBody(rx.expect("one request only")));
                        for (name, value) in headers {
                            response.headers_mut().insert(*name, value.parse().unwrap());
                        }
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, tx, count)
}

async fn next_chunk(body: &mut Incoming) -> Bytes {
    // A guard against a hang, not a speed assertion.
    let frame = tokio::time::timeout(Duration::from_secs(20), body.frame())
        .await
        .expect("a chunk arrives before the backend finishes")
        .unwrap()
        .unwrap();
    frame.into_data().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_stream_to_every_waiter_before_the_backend_finishes() {
    let (backend, tx, count) = streaming_backend(&[("cache-control", "max-age=100")]).await;
    let server = proxy(backend, "").await;
    let addr = server.http[0];
    let c = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<Bytes>>();
    let uri: http::Uri = format!("http://{addr}/big").parse().unwrap();
    let first = c.get(uri.clone()).await.unwrap();
    tx.send(Bytes::from(vec![b'a'; 100_000])).await.unwrap();
    let mut first = first.into_body();
    let mut got_first = 0;
    while got_first < 100_000 {
        got_first += next_chunk(&mut first).await.len();
    }
    // A second client joins the same fetch and gets the start of the body from it.
    let second = c.get(uri.clone()).await.unwrap();
    assert_eq!(second.headers()["x-cache"], "coalesced");
    let mut second = second.into_body();
    let mut got_second = 0;
    while got_second < 100_000 {
        got_second += next_chunk(&mut second).await.len();
    }
    tx.send(Bytes::from(vec![b'b'; 50_000])).await.unwrap();
    drop(tx);
    let rest_first = first.collect().await.unwrap().to_bytes();
    let rest_second = second.collect().await.unwrap().to_bytes();
    assert_eq!(got_first + rest_first.len(), 150_000);
    assert_eq!(got_second + rest_second.len(), 150_000);
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
    // Stored whole: a hit now.
    let third = c.get(uri).await.unwrap();
    assert_eq!(third.headers()["x-cache"], "hit");
    assert_eq!(
        third.into_body().collect().await.unwrap().to_bytes().len(),
        150_000
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_larger_than_an_object_stream_through_unstored() {
    let (backend, tx, _) = streaming_backend(&[("cache-control", "max-age=100")]).await;
    // 16 MiB of memory: objects up to 2 MiB; this body is 8 MiB, sent without Content-Length.
    let server = proxy(backend, "").await;
    let addr = server.http[0];
    let feeder = tokio::spawn(async move {
        for _ in 0..128 {
            tx.send(Bytes::from(vec![b'x'; 64 * 1024])).await.unwrap();
        }
    });
    let got = get(&client(), addr, "/huge").await;
    feeder.await.unwrap();
    assert_eq!(got.body.len(), 8 << 20);
    assert!(got.body.iter().all(|&b| b == b'x'));
    let stats = stats(&server).await;
    assert_eq!(stats["stored"], 0);
    assert_eq!(stats["in_flight_bytes"], 0);
    server.shutdown().await;
}
