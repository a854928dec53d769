//! ESI as Varnish does it: includes (nested, failing with and without `onerror="continue"`),
//! `esi:remove` and `<!--esi -->`, the depth and count bounds, fragments cached by their own
//! rules, gzip pages, and what neither a page nor a client may do (other hosts, injected
//! markup, a forged stored form).

mod common;

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{client, reply, stats, Backend, Seen, TestClient};
use http::Response;
use http_body_util::{BodyExt, Full};

const PAGES: &[(&str, &str)] = &[
    (
        "/page",
        r#"<html><esi:include src="/a"/>|<esi:include src="b"/>|<esi:remove>NO</esi:remove><!--esi <i>yes</i> --></html>"#,
    ),
    ("/a", "<b>A</b>"),
    ("/b", r#"<b>B<esi:include src="/c"/></b>"#),
    ("/c", "C"),
    ("/loop", r#"<p>L<esi:include src="/loop"/></p>"#),
    (
        "/fan",
        r#"<p><esi:include src="/fan"/><esi:include src="/fan"/></p>"#,
    ),
    (
        "/failing",
        r#"<p>1<esi:include src="/missing" onerror="continue"/>2<esi:include src="/missing"/>3</p>"#,
    ),
    (
        "/other-host",
        r#"<p><esi:include src="http://evil.example/x" onerror="continue"/>|<esi:include src="//frag.example/y"/>|<esi:include src="http://evil.example/x"/></p>"#,
    ),
];

fn page(seen: &Seen, counter: &AtomicUsize) -> Response<Full<Bytes>> {
    let path = seen.uri.path();
    if path == "/live" {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        return reply(200, &[("cache-control", "no-store")], &format!("v{n}"));
    }
    if path == "/live-page" {
        return reply(
            200,
            &[("cache-control", "max-age=60")],
            r#"<p>[<esi:include src="/live"/>]</p>"#,
        );
    }
    match PAGES.iter().find(|(p, _)| *p == path) {
        Some((_, body)) => reply(
            200,
            &[("cache-control", "max-age=60"), ("etag", "\"e\"")],
            body,
        ),
        None => reply(404, &[], "not here"),
    }
}

async fn site() -> (Backend, Arc<AtomicUsize>) {
    let counter = Arc::new(AtomicUsize::new(0));
    let live = counter.clone();
    let backend = Backend::start(Duration::ZERO, move |seen| page(seen, &live)).await;
    (backend, counter)
}

/// GET `path` with header pairs: the response head and its body, or the body's error.
async fn fetch(
    client: &TestClient,
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> (http::response::Parts, Result<String, String>) {
    let response = client
        .request(common::request(addr, "GET", path, headers))
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = match body.collect().await {
        Ok(body) => Ok(String::from_utf8_lossy(&body.to_bytes()).into_owned()),
        Err(error) => Err(error.to_string()),
    };
    (parts, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_includes_remove_and_comments() {
    let (backend, _) = site().await;
    let server = common::proxy(backend.addr, "do_esi = true").await;
    let client = client();
    for round in ["miss", "hit"] {
        let (head, body) = fetch(&client, server.http[0], "/page", &[]).await;
        assert_eq!(
            body.unwrap(),
            "<html><b>A</b>|<b>BC</b>| <i>yes</i> </html>",
            "{round}"
        );
        assert_eq!(head.headers["x-cache"], round);
        // The assembled page is not the stored one: no length, no validators.
        assert!(!head.headers.contains_key("content-length"));
        assert!(!head.headers.contains_key("etag"));
        assert!(!head.headers.contains_key("kura-esi"));
    }
    // Fragments are ordinary cached objects: fetched once each.
    let paths: Vec<String> = backend
        .seen
        .lock()
        .iter()
        .map(|s| s.uri.path().to_owned())
        .collect();
    for path in ["/page", "/a", "/b", "/c"] {
        assert_eq!(
            paths.iter().filter(|p| *p == path).count(),
            1,
            "{path}: {paths:?}"
        );
    }
    let s = stats(&server).await;
    assert_eq!(s["esi_includes"], 6);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_include_continues_or_cuts_the_page() {
    let (backend, _) = site().await;
    let server = common::proxy(backend.addr, "do_esi = true").await;
    let (head, body) = fetch(&client(), server.http[0], "/failing", &[]).await;
    assert_eq!(head.status, 200);
    // onerror="continue": left out; without it, the page ends there, short of its end.
    assert!(body.is_err(), "{body:?}");
    let s = stats(&server).await;
    assert_eq!(s["esi_errors"], 2);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depth_and_count_are_bounded() {
    let (backend, _) = site().await;
    let server = common::proxy(backend.addr, "do_esi = true\n[esi]\nmax_includes = 10").await;
    let client = client();
    let (_, body) = fetch(&client, server.http[0], "/loop", &[]).await;
    // Levels 0 to 5 (max_depth 5); level 5's include is skipped.
    assert_eq!(
        body.unwrap(),
        format!("{}{}", "<p>L".repeat(6), "</p>".repeat(6))
    );
    let (_, body) = fetch(&client, server.http[0], "/fan", &[]).await;
    assert!(body.unwrap().starts_with("<p><p>"));
    let s = stats(&server).await;
    // 5 for /loop, then at most 10 for the fan-out of /fan (2^5 - 2 without the bound).
    assert_eq!(s["esi_includes"], 15, "{s}");
    assert!(s["esi_skipped"].as_u64().unwrap() > 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fragment_keeps_its_own_lifetime() {
    let (backend, _) = site().await;
    let server = common::proxy(backend.addr, "do_esi = true").await;
    let client = client();
    let (head, first) = fetch(&client, server.http[0], "/live-page", &[]).await;
    assert_eq!(head.headers["x-cache"], "miss");
    let (head, second) = fetch(&client, server.http[0], "/live-page", &[]).await;
    assert_eq!(head.headers["x-cache"], "hit");
    assert_eq!(first.unwrap(), "<p>[v1]</p>");
    assert_eq!(second.unwrap(), "<p>[v2]</p>");
    let pages = backend
        .seen
        .lock()
        .iter()
        .filter(|s| s.uri.path() == "/live-page")
        .count();
    assert_eq!(pages, 1);
    server.shutdown().await;
}

fn gzip(text: &str) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(text.as_bytes()).unwrap();
    encoder.finish().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_pages_are_decoded_and_assembled() {
    let backend = Backend::start(Duration::ZERO, |seen| match seen.uri.path() {
        // gzip from the backend itself.
        "/gz" => {
            let mut response = Response::new(Full::new(Bytes::from(gzip(
                r#"<p><esi:include src="/frag"/></p>"#,
            ))));
            let headers = response.headers_mut();
            headers.insert("content-encoding", "gzip".parse().unwrap());
            headers.insert("cache-control", "max-age=60".parse().unwrap());
            response
        }
        // Large enough for kura's own compressed storage.
        "/big" => reply(
            200,
            &[
                ("cache-control", "max-age=60"),
                ("content-type", "text/html"),
            ],
            &format!("<p>{}<esi:include src=\"/frag\"/></p>", "x".repeat(4000)),
        ),
        _ => reply(200, &[("cache-control", "max-age=60")], "F"),
    })
    .await;
    let server = common::proxy(backend.addr, "do_esi = true").await;
    let client = client();
    for _ in 0..2 {
        for accept in ["gzip", "identity"] {
            let (head, body) = fetch(
                &client,
                server.http[0],
                "/gz",
                &[("accept-encoding", accept)],
            )
            .await;
            assert!(!head.headers.contains_key("content-encoding"));
            assert_eq!(body.unwrap(), "<p>F</p>");
            let (head, body) = fetch(
                &client,
                server.http[0],
                "/big",
                &[("accept-encoding", accept)],
            )
            .await;
            assert!(!head.headers.contains_key("content-encoding"));
            assert_eq!(body.unwrap(), format!("<p>{}F</p>", "x".repeat(4000)));
        }
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn includes_reach_only_the_pages_host_and_listed_hosts() {
    let (backend, _) = site().await;
    let server = common::proxy(
        backend.addr,
        "do_esi = true\n[esi]\nhosts = [\"frag.example\"]",
    )
    .await;
    let (_, body) = fetch(&client(), server.http[0], "/other-host", &[]).await;
    // The first is refused and left out, the second is fetched (404 here: the page is cut
    // there).
    assert!(body.is_err(), "{body:?}");
    let hosts: Vec<String> = backend
        .seen
        .lock()
        .iter()
        .filter_map(|s| {
            s.headers
                .get("host")
                .map(|h| h.to_str().unwrap().to_owned())
        })
        .collect();
    assert!(hosts.iter().all(|h| h != "evil.example"), "{hosts:?}");
    assert!(hosts.iter().any(|h| h == "frag.example"), "{hosts:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_backends_response_is_processed() {
    let backend = Backend::start(Duration::ZERO, |seen| match seen.uri.path() {
        // Processed only when its Surrogate-Control asks for it.
        "/sc" => reply(
            200,
            &[
                ("cache-control", "max-age=60"),
                ("surrogate-control", "content=\"ESI/1.0\""),
            ],
            r#"<p><esi:include src="/f"/></p>"#,
        ),
        // ESI markup without the backend asking: a client's field cannot ask for it; a forged
        // stored form is ignored.
        "/plain" | "/forged" => reply(
            200,
            &[
                ("cache-control", "max-age=60"),
                ("kura-esi", r#"[{"Include":["/secret",false]}]"#),
            ],
            r#"<p><esi:include src="/f"/></p>"#,
        ),
        "/secret" => reply(200, &[], "SECRET"),
        _ => reply(200, &[("cache-control", "max-age=60")], "F"),
    })
    .await;
    let server = common::proxy(
        backend.addr,
        "[esi]\nsurrogate_control = true\n[[rule]]\npath_prefix = \"/forged\"\ndo_esi = true",
    )
    .await;
    let client = client();
    for _ in 0..2 {
        let (head, body) = fetch(&client, server.http[0], "/sc", &[]).await;
        assert_eq!(body.unwrap(), "<p>F</p>");
        assert!(!head.headers.contains_key("surrogate-control"));
        let injected = [("surrogate-control", "content=\"ESI/1.0\"")];
        let (head, body) = fetch(&client, server.http[0], "/plain", &injected).await;
        assert_eq!(body.unwrap(), r#"<p><esi:include src="/f"/></p>"#);
        assert!(!head.headers.contains_key("kura-esi"));
        // A route that processes ESI reads the page itself, miss or hit.
        let (_, body) = fetch(&client, server.http[0], "/forged", &[]).await;
        assert_eq!(body.unwrap(), "<p>F</p>");
    }
    assert!(backend
        .seen
        .lock()
        .iter()
        .all(|s| s.uri.path() != "/secret"));
    server.shutdown().await;
}
