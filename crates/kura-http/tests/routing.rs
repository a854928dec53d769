//! Several backends and per-URL rules from the TOML file: two real backends on loopback (and
//! one on a Unix socket), rules by host, path prefix and pattern choosing the backend and the
//! TTL, grace, pass, and whether requests with cookies or credentials are passed.

mod common;

use std::time::Duration;

use common::*;
use kura_http::{Config, Server};

/// A backend answering `NAME PATH`, cacheable by default TTL only (no freshness information)
/// unless the path says `public`.
async fn named(name: &'static str) -> Backend {
    Backend::start(Duration::ZERO, move |seen| {
        let body = format!("{name} {}", seen.uri.path());
        if seen.uri.path().contains("public") {
            reply(200, &[("cache-control", "public, max-age=100")], &body)
        } else {
            reply(200, &[], &body)
        }
    })
    .await
}

async fn start(text: &str) -> Server {
    Server::start(Config::from_toml(text).unwrap())
        .await
        .unwrap()
}

async fn get_host(client: &TestClient, server: &Server, host: &str, path: &str) -> Got {
    send(client, server.http[0], "GET", path, &[("host", host)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_choose_the_backend_by_host_and_path() {
    let (a, b) = (named("a").await, named("b").await);
    let server = start(&format!(
        "backend = \"http://{}\"\nlisten = [\"127.0.0.1:0\"]\nthreads = 2\nmemory_mb = 16\n\
         [backends]\nb = \"http://{}\"\n\
         [[rule]]\nhost = \"api.example.com\"\nbackend = \"b\"\n\
         [[rule]]\nhost = \"*.example.com\"\npath_prefix = \"/b/\"\nbackend = \"b\"\n\
         [[rule]]\npath = \"^/img/[0-9]+\\\\.png$\"\nbackend = \"b\"\n",
        a.addr, b.addr
    ))
    .await;
    let c = client();
    for (host, path, want) in [
        ("api.example.com", "/x", "b /x"),
        ("API.Example.COM:6081", "/y", "b /y"),
        ("www.example.com", "/b/z", "b /b/z"),
        ("www.example.com", "/a/z", "a /a/z"),
        ("example.com", "/b/z", "a /b/z"),
        ("other.org", "/img/12.png", "b /img/12.png"),
        ("other.org", "/img/12.png.txt", "a /img/12.png.txt"),
        ("other.org", "/x", "a /x"),
    ] {
        let got = get_host(&c, &server, host, path).await;
        assert_eq!(got.body, want.as_bytes(), "{host}{path}");
        assert_eq!(got.cache(), "miss");
        // The object is stored under its URL and served from the same backend's copy.
        let again = get_host(&c, &server, host, path).await;
        assert_eq!((again.cache(), &again.body[..]), ("hit", want.as_bytes()));
    }
    assert_eq!(a.count(), 4);
    assert_eq!(b.count(), 4);
    // The backends keep their own Host: the client's is forwarded.
    assert_eq!(b.last().headers["host"], "other.org");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_set_ttl_grace_and_pass() {
    let a = named("a").await;
    let server = start(&format!(
        "backend = \"http://{}\"\nlisten = [\"127.0.0.1:0\"]\nthreads = 2\nmemory_mb = 16\n\
         grace = 0\nstale_if_error = 0\n\
         [[rule]]\npath_prefix = \"/short/\"\ndefault_ttl = 1\n\
         [[rule]]\npath_prefix = \"/graced/\"\ndefault_ttl = 1\ngrace = 60\n\
         [[rule]]\npath_prefix = \"/live/\"\npass = true\n",
        a.addr
    ))
    .await;
    let (addr, c) = (server.http[0], client());
    for path in ["/short/x", "/graced/x", "/long/x"] {
        assert_eq!(get(&c, addr, path).await.cache(), "miss");
        assert_eq!(get(&c, addr, path).await.cache(), "hit");
    }
    // Past the rule's TTL of 1 s (the top level's is 120 s).
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let seen = a.count();
    assert_eq!(get(&c, addr, "/long/x").await.cache(), "hit");
    assert_eq!(get(&c, addr, "/short/x").await.cache(), "miss");
    assert_eq!(a.count(), seen + 1);
    // The graced rule serves the expired object stale and refreshes it.
    let graced = get(&c, addr, "/graced/x").await;
    assert_eq!(graced.cache(), "stale");
    assert!(graced.age() >= 2);
    eventually("the background refresh", || a.count() == seen + 2).await;
    // A passed URL is never stored.
    for _ in 0..3 {
        assert_eq!(get(&c, addr, "/live/x").await.cache(), "pass");
    }
    assert_eq!(a.count(), seen + 5);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_decide_whether_cookies_and_credentials_pass() {
    let a = named("a").await;
    let server = start(&format!(
        "backend = \"http://{}\"\nlisten = [\"127.0.0.1:0\"]\nthreads = 2\nmemory_mb = 16\n\
         cookie = \"lookup\"\nheuristic_with_credentials = true\n\
         [[rule]]\npath_prefix = \"/app/\"\ncookie = \"pass\"\n\
         [[rule]]\npath_prefix = \"/shared/\"\nauthorization = \"lookup\"\n",
        a.addr
    ))
    .await;
    let (addr, c) = (server.http[0], client());
    let cookie = [("cookie", "session=1")];
    let credentials = [("authorization", "Basic YTpi")];
    // Top level: cookies are looked up (set explicitly: since issue 37 they are passed by
    // default) and stored for the default TTL, credentials passed (as Varnish).
    assert_eq!(send(&c, addr, "GET", "/x", &cookie).await.cache(), "miss");
    assert_eq!(send(&c, addr, "GET", "/x", &cookie).await.cache(), "hit");
    assert_eq!(
        send(&c, addr, "GET", "/x", &credentials).await.cache(),
        "pass"
    );
    // /app/: a request with a cookie is passed; one without is cached.
    assert_eq!(
        send(&c, addr, "GET", "/app/a", &cookie).await.cache(),
        "pass"
    );
    assert_eq!(
        send(&c, addr, "GET", "/app/a", &cookie).await.cache(),
        "pass"
    );
    assert_eq!(get(&c, addr, "/app/a").await.cache(), "miss");
    assert_eq!(get(&c, addr, "/app/a").await.cache(), "hit");
    // /shared/: credentials are looked up; RFC 9111 §3.5 stores only `public` (or s-maxage,
    // must-revalidate) answers to them.
    let path = "/shared/public";
    assert_eq!(
        send(&c, addr, "GET", path, &credentials).await.cache(),
        "miss"
    );
    assert_eq!(
        send(&c, addr, "GET", path, &credentials).await.cache(),
        "hit"
    );
    let private = "/shared/mine";
    assert_eq!(
        send(&c, addr, "GET", private, &credentials).await.cache(),
        "pass"
    );
    assert_eq!(
        send(&c, addr, "GET", private, &credentials).await.cache(),
        "pass"
    );
    assert_eq!(a.last().headers["authorization"], "Basic YTpi");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_on_a_unix_socket() {
    let a = named("a").await;
    let dir = temp_dir("unix-backend");
    let socket = dir.join("app.sock");
    let local = Backend::start_unix(&socket, |seen| {
        reply(
            200,
            &[("cache-control", "max-age=100")],
            &format!("unix {}", seen.uri.path()),
        )
    });
    let server = start(&format!(
        "backend = \"http://{}\"\nlisten = [\"127.0.0.1:0\"]\nadmin_listen = \"127.0.0.1:0\"\n\
         threads = 2\nmemory_mb = 16\n[backends]\nlocal = \"unix:{}\"\n\
         [[rule]]\npath_prefix = \"/local/\"\nbackend = \"local\"\n",
        a.addr,
        socket.display()
    ))
    .await;
    let (addr, c) = (server.http[0], client());
    let got = get(&c, addr, "/local/page").await;
    assert_eq!(
        (got.cache(), &got.body[..]),
        ("miss", &b"unix /local/page"[..])
    );
    assert_eq!(get(&c, addr, "/local/page").await.cache(), "hit");
    assert_eq!(get(&c, addr, "/other").await.body, "a /other");
    assert_eq!(local.count(), 1);
    // Each backend's health and errors are reported by name.
    let stats = stats(&server).await;
    assert_eq!(stats["backends"]["local"]["healthy"], 1);
    assert_eq!(stats["backends"]["default"]["errors"], 0);
    // The socket gone: 503, and its errors are its own.
    local.stop();
    std::fs::remove_file(&socket).unwrap();
    assert_eq!(get(&c, addr, "/local/new").await.status, 503);
    let stats = common::stats(&server).await;
    assert_eq!(stats["backends"]["local"]["errors"], 1);
    assert_eq!(stats["backends"]["default"]["errors"], 0);
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(dir);
}
