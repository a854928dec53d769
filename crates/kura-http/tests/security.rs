//! Issue 37's findings 1-5, each against the lenient backend (`common/lenient.rs`), which reads
//! requests as permissive origins do and logs their exact bytes. Findings 6-9 and the unkeyed
//! fields are in `security_wire.rs`; the side-by-side attack suite is `attacks.rs`.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::lenient::{ok, Lenient, Reply};
use common::wire::Conn;
use common::*;

/// A backend answering `page for TARGET (Host: HOST)`, cacheable for a minute.
async fn pages() -> Lenient {
    Lenient::start(|r| {
        let body = format!(
            "page for {} (Host: {})",
            r.target(),
            r.field("host").unwrap_or("")
        );
        ok(&body, &["Cache-Control: max-age=60"])
    })
    .await
}

// Finding 1: a GET or HEAD body on the lookup path is read and dropped; the backend request's
// framing is kura's own, so the backend never reads the next request as a body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_request_s_body_never_reaches_the_backend() {
    let backend = pages().await;
    let server = proxy(backend.addr, "first_byte_timeout = 5").await;
    let mut conn = Conn::open(server.http[0]).await;
    let smuggled = "GET /evil HTTP/1.1\r\nHost: x\r\n\r\n";
    conn.send(
        format!(
            "GET /victim HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{smuggled}\
             HEAD /other HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc\
             GET /second HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            smuggled.len()
        )
        .as_bytes(),
    )
    .await;
    let first = conn.response(false).await.expect("an answer to /victim");
    assert_eq!(
        (first.status, first.text()),
        (200, "page for /victim (Host: x)".into())
    );
    let head = conn.response(true).await.expect("an answer to /other");
    assert_eq!(head.status, 200);
    let second = conn.response(false).await.expect("an answer to /second");
    assert_eq!(second.text(), "page for /second (Host: x)");
    let seen = backend.requests();
    let targets: Vec<&str> = seen.iter().map(|r| r.target()).collect();
    assert_eq!(targets, ["/victim", "/other", "/second"]);
    for request in &seen {
        assert_eq!(request.field("content-length"), None, "{}", request.head);
        assert_eq!(request.field("transfer-encoding"), None, "{}", request.head);
        assert!(request.body.is_empty());
    }
    // A passed request keeps its body, framed by kura from the body itself.
    let mut pass = Conn::open(server.http[0]).await;
    pass.send(b"POST /form HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nPOST /empty HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").await;
    assert_eq!(pass.response(false).await.unwrap().status, 200);
    assert_eq!(pass.response(false).await.unwrap().status, 200);
    let seen = backend.requests();
    let form = seen.iter().find(|r| r.target() == "/form").unwrap();
    assert_eq!(form.body, b"abc");
    let empty = seen.iter().find(|r| r.target() == "/empty").unwrap();
    assert_eq!(empty.field("content-length"), Some("0"));
    server.shutdown().await;
}

// Finding 2: the absolute-form target's authority is the host fetched, keyed and routed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absolute_target_s_host_replaces_the_host_field() {
    let backend = pages().await;
    let server = proxy(backend.addr, "").await;
    let mut conn = Conn::open(server.http[0]).await;
    conn.send(b"GET http://victim.example/x HTTP/1.1\r\nHost: evil.example\r\n\r\n")
        .await;
    let got = conn.response(false).await.unwrap();
    assert_eq!(got.text(), "page for /x (Host: victim.example)");
    assert_eq!(backend.requests()[0].field("host"), Some("victim.example"));
    let c = client();
    let victim = send(
        &c,
        server.http[0],
        "GET",
        "/x",
        &[("host", "victim.example")],
    )
    .await;
    assert_eq!(
        (victim.cache(), &victim.body[..]),
        ("hit", &b"page for /x (Host: victim.example)"[..])
    );
    // A Host that is not uri-host[:port], or userinfo: 400.
    for bad in [
        "GET /x HTTP/1.1\r\nHost: evil.example/x\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a b\r\n\r\n",
        "GET http://evil@victim.example/x HTTP/1.1\r\nHost: victim.example\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: victim.example:80:80\r\n\r\n",
    ] {
        let mut conn = Conn::open(server.http[0]).await;
        conn.send(bad.as_bytes()).await;
        let got = conn.response(false).await.unwrap();
        assert_eq!(got.status, 400, "{bad:?}");
    }
    assert_eq!(backend.requests().len(), 1);
    server.shutdown().await;
}

/// A backend whose page names the cookie and credentials it got, saying nothing about caching.
async fn personal() -> Lenient {
    Lenient::start(|r| {
        let body = format!(
            "hello [{}] [{}]",
            r.field("cookie").unwrap_or(""),
            r.field("authorization").unwrap_or("")
        );
        ok(&body, &["Content-Type: text/css"])
    })
    .await
}

// Finding 3: requests with cookies are passed by default, and a response to credentials is
// stored only with explicit freshness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personal_pages_are_not_shared_by_default() {
    let backend = personal().await;
    let server = proxy(backend.addr, "").await;
    let (c, addr) = (client(), server.http[0]);
    let path = "/account/profile.css";
    let alice = send(&c, addr, "GET", path, &[("cookie", "session=alice")]).await;
    assert_eq!(alice.cache(), "pass");
    assert_eq!(&alice.body[..], b"hello [session=alice] []");
    let anyone = get(&c, addr, path).await;
    assert!(!String::from_utf8_lossy(&anyone.body).contains("alice"));
    let bob = send(&c, addr, "GET", "/me", &[("authorization", "Bearer bob")]).await;
    assert_eq!(bob.cache(), "pass");
    assert!(!String::from_utf8_lossy(&get(&c, addr, "/me").await.body).contains("bob"));
    server.shutdown().await;
    // Looked up by an explicit setting, still never stored without explicit freshness.
    let server = proxy(
        backend.addr,
        "cookie = \"lookup\"\nauthorization = \"lookup\"\n",
    )
    .await;
    let addr = server.http[0];
    let alice = send(&c, addr, "GET", "/p", &[("cookie", "session=alice")]).await;
    // Fetched through the cache, not stored: a pass.
    assert_eq!(alice.cache(), "pass");
    assert_eq!(
        backend.requests().last().unwrap().field("cookie"),
        Some("session=alice")
    );
    assert!(!String::from_utf8_lossy(&get(&c, addr, "/p").await.body).contains("alice"));
    server.shutdown().await;
    // The unsafe behaviour, spelled out: stored for the default TTL.
    let server = proxy(
        backend.addr,
        "cookie = \"lookup\"\nheuristic_with_credentials = true\n",
    )
    .await;
    let addr = server.http[0];
    send(&c, addr, "GET", "/q", &[("cookie", "session=alice")]).await;
    assert_eq!(get(&c, addr, "/q").await.cache(), "hit");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_cookies_are_removed_and_the_rest_decide() {
    let backend = personal().await;
    let server = proxy(backend.addr, "cookie_ignore = [\"_ga*\", \"_gid\"]\n").await;
    let (c, addr) = (client(), server.http[0]);
    let analytics = [("cookie", "_ga=GA1.2; _gid=3; _ga_X=4")];
    let first = send(&c, addr, "GET", "/article", &analytics).await;
    assert_eq!(
        (first.cache(), &first.body[..]),
        ("miss", &b"hello [] []"[..])
    );
    assert_eq!(backend.requests()[0].field("cookie"), None);
    let second = send(&c, addr, "GET", "/article", &analytics).await;
    assert_eq!(second.cache(), "hit");
    let session = send(&c, addr, "GET", "/article", &[("cookie", "_ga=1; s=2")]).await;
    assert_eq!(
        (session.cache(), &session.body[..]),
        ("pass", &b"hello [s=2] []"[..])
    );
    server.shutdown().await;
}

// Finding 4: a 304 kura cannot match to a stored response is never passed to a client that
// sent a plain GET: the response is fetched again, unconditionally. A 304 without validators
// answers the one response kura named, and updates it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_304_kura_cannot_use_never_reaches_a_plain_get() {
    let version = Arc::new(AtomicUsize::new(0));
    let counter = version.clone();
    let backend = Lenient::start(move |r| {
        if r.field("if-none-match").is_some() {
            return Reply::Bytes(if r.target() == "/other" {
                // Another representation's validator: it updates nothing kura stored.
                b"HTTP/1.1 304 Not Modified\r\nETag: \"w\"\r\n\r\n".to_vec()
            } else {
                b"HTTP/1.1 304 Not Modified\r\n\r\n".to_vec()
            });
        }
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        ok(
            &format!("v{n}"),
            &["Cache-Control: max-age=0", "ETag: \"v\""],
        )
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let (c, addr) = (client(), server.http[0]);
    assert_eq!(&get(&c, addr, "/other").await.body[..], b"v1");
    let again = get(&c, addr, "/other").await;
    assert_eq!((again.status.as_u16(), &again.body[..]), (200, &b"v2"[..]));
    let asked: Vec<bool> = backend
        .requests()
        .iter()
        .map(|r| r.field("if-none-match").is_some())
        .collect();
    assert_eq!(asked, [false, true, false]);
    assert_eq!(&get(&c, addr, "/same").await.body[..], b"v3");
    let validated = get(&c, addr, "/same").await;
    assert_eq!(
        (validated.status.as_u16(), &validated.body[..]),
        (200, &b"v3"[..])
    );
    assert_eq!(
        backend.requests().len(),
        5,
        "one validation, no second fetch"
    );
    server.shutdown().await;
    // A 304 to a request that asked for none is the backend's error: 502.
    let rude =
        Lenient::start(|_| Reply::Bytes(b"HTTP/1.1 304 Not Modified\r\n\r\n".to_vec())).await;
    let server = proxy(rude.addr, "").await;
    assert_eq!(get(&c, server.http[0], "/s").await.status, 502);
    server.shutdown().await;
}

// Finding 5: Content-Length beside Transfer-Encoding from the backend is dropped; a transfer
// coding other than chunked is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_length_beside_chunked_is_dropped() {
    let backend = Lenient::start(|r| {
        let coding = if r.target() == "/gzip" {
            "gzip"
        } else {
            "chunked"
        };
        Reply::Bytes(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: {coding}\r\n\
                 Cache-Control: max-age=60\r\n\r\nb\r\nhello world\r\n0\r\n\r\n"
            )
            .into_bytes(),
        )
    })
    .await;
    let server = proxy(backend.addr, "").await;
    let (c, addr) = (client(), server.http[0]);
    for outcome in ["miss", "hit"] {
        let got = get(&c, addr, "/both").await;
        assert_eq!((got.cache(), &got.body[..]), (outcome, &b"hello world"[..]));
        assert_ne!(got.header("content-length"), "5");
    }
    let mut post = Conn::open(addr).await;
    post.send(b"POST /both HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        .await;
    assert_eq!(post.response(false).await.unwrap().text(), "hello world");
    assert_eq!(get(&c, addr, "/gzip").await.status, 502);
    server.shutdown().await;
}
