//! Issue 37's findings 6-9 (the framing guard, bad bodies and line ends, 1xx responses, the
//! header-count limit) and the unkeyed request fields, spoken byte by byte to the proxy in front
//! of the lenient backend (`common/lenient.rs`).

mod common;

use common::lenient::{ok, Lenient, Reply};
use common::wire::Conn;
use common::*;

async fn echo() -> Lenient {
    Lenient::start(|r| {
        let forwarded = r.field("x-forwarded-host").unwrap_or("-");
        ok(
            &format!(
                "{} {} {forwarded}",
                r.line().split(' ').next().unwrap_or(""),
                r.target()
            ),
            &["Cache-Control: max-age=60"],
        )
    })
    .await
}

// Finding 6: a head ending in CRLF then a bare LF is followed like any other, so the request
// with both framing fields after it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_and_hyper_agree_on_where_a_head_ends() {
    let backend = echo().await;
    let server = proxy(backend.addr, "").await;
    let mut conn = Conn::open(server.http[0]).await;
    conn.send(
        b"GET /a HTTP/1.1\r\nHost: x\r\n\nPOST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\
          Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .await;
    assert_eq!(conn.response(false).await.unwrap().text(), "GET /a -");
    assert_eq!(conn.response(false).await.unwrap().status, 400);
    assert!(conn.closed().await);
    let targets: Vec<String> = backend
        .requests()
        .iter()
        .map(|r| r.target().to_owned())
        .collect();
    assert_eq!(targets, ["/a"]);
    server.shutdown().await;
}

// Finding 7: a malformed chunked body is the client's fault (400, not 502); a request with
// bare-LF line ends is answered at once (as nginx and Varnish do).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bodies_get_400_and_bare_lf_requests_are_answered() {
    let backend = echo().await;
    let server = proxy(backend.addr, "").await;
    for body in ["zz\r\n", "3\r\nabcX\r\n0\r\n\r\n", "3\nabc\n0\n\n"] {
        let mut conn = Conn::open(server.http[0]).await;
        conn.send(
            format!("POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{body}")
                .as_bytes(),
        )
        .await;
        let got = conn.response(false).await.expect("an answer");
        assert_eq!(got.status, 400, "{body:?}");
        assert!(conn.closed().await);
    }
    let mut conn = Conn::open(server.http[0]).await;
    conn.send(b"GET /lf HTTP/1.1\nHost: x\n\nGET /lf2 HTTP/1.1\nHost: x\n\n")
        .await;
    assert_eq!(conn.response(false).await.unwrap().text(), "GET /lf -");
    assert_eq!(conn.response(false).await.unwrap().text(), "GET /lf2 -");
    server.shutdown().await;
}

// Finding 8: 1xx responses from the backend reach HTTP/1.1 clients before the final one, on
// the lookup path and on a pass; never an HTTP/1.0 client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_hints_are_forwarded() {
    let backend = Lenient::start(|r| {
        Reply::Bytes(
            format!(
                "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n\
                 HTTP/1.1 200 OK\r\nContent-Length: {}\r\nCache-Control: max-age=60\r\n\r\n{}",
                r.target().len(),
                r.target()
            )
            .into_bytes(),
        )
    })
    .await;
    let server = proxy(backend.addr, "").await;
    for request in [
        "GET /hinted HTTP/1.1\r\nHost: x\r\n\r\n",
        "POST /posted HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nz",
    ] {
        let mut conn = Conn::open(server.http[0]).await;
        conn.send(request.as_bytes()).await;
        let hint = conn.response(false).await.unwrap();
        assert_eq!(hint.status, 103, "{request:?}");
        assert_eq!(hint.field("link"), Some("</style.css>; rel=preload"));
        let last = conn.response(false).await.unwrap();
        assert_eq!(last.status, 200);
        // The next request on the connection is answered as usual (a hit has no hint).
        conn.send(b"GET /hinted HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert_eq!(conn.response(false).await.unwrap().status, 200);
    }
    let mut old = Conn::open(server.http[0]).await;
    old.send(b"GET /old HTTP/1.0\r\nHost: x\r\n\r\n").await;
    assert_eq!(old.response(false).await.unwrap().status, 200);
    server.shutdown().await;
}

/// The status of a request with `n` fields besides `Host`.
async fn status_with_fields(addr: std::net::SocketAddr, n: usize) -> u16 {
    let mut head = String::from("GET /many HTTP/1.1\r\nHost: x\r\n");
    for i in 0..n {
        head.push_str(&format!("X-Field-{i}: v\r\n"));
    }
    let mut conn = Conn::open(addr).await;
    conn.send((head + "\r\n").as_bytes()).await;
    conn.response(false).await.expect("an answer").status
}

// Finding 9: the header-count limit is a setting (`max_headers`, default 512).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_count_limit_is_a_setting() {
    let backend = echo().await;
    let server = proxy(backend.addr, "max_header_kb = 64").await;
    for (fields, status) in [(300, 200), (510, 200), (520, 431)] {
        let got = status_with_fields(server.http[0], fields).await;
        assert_eq!(got, status, "{fields}");
    }
    server.shutdown().await;
    let server = proxy(backend.addr, "max_headers = 20").await;
    for (fields, status) in [(18, 200), (20, 431)] {
        let got = status_with_fields(server.http[0], fields).await;
        assert_eq!(got, status, "{fields}");
    }
    server.shutdown().await;
}

// Beyond the findings: unkeyed fields are removed on the lookup path by default
// (`strip_unkeyed`), and those that key the response (`key_headers`) vary it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unkeyed_fields_never_change_a_stored_page() {
    let backend = echo().await;
    let server = proxy(backend.addr, "").await;
    let (c, addr) = (client(), server.http[0]);
    let poisoned = [
        ("x-forwarded-host", "evil.example"),
        ("x-original-url", "/admin"),
    ];
    let first = send(&c, addr, "GET", "/home", &poisoned).await;
    assert_eq!(&first.body[..], b"GET /home -");
    let seen = backend.requests();
    assert_eq!(seen[0].field("x-forwarded-host"), None);
    assert_eq!(seen[0].field("x-original-url"), None);
    // A passed request keeps them: nothing of it is stored.
    let post = send(&c, addr, "POST", "/form", &poisoned).await;
    assert_eq!(&post.body[..], b"POST /form evil.example");
    // X-Forwarded-Proto keys the response when a request carries it.
    let http = [("x-forwarded-proto", "http")];
    let keyed = send(&c, addr, "GET", "/proto", &http).await;
    assert_eq!(keyed.cache(), "miss");
    assert!(keyed.header("vary").contains("x-forwarded-proto"));
    assert_eq!(send(&c, addr, "GET", "/proto", &http).await.cache(), "hit");
    let https = [("x-forwarded-proto", "https")];
    assert_eq!(
        send(&c, addr, "GET", "/proto", &https).await.cache(),
        "miss"
    );
    server.shutdown().await;
    // Both lists are settings.
    let server = proxy(backend.addr, "strip_unkeyed = []\n").await;
    let got = send(&client(), server.http[0], "GET", "/kept", &poisoned).await;
    assert_eq!(&got.body[..], b"GET /kept evil.example");
    server.shutdown().await;
}
