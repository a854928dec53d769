//! Per-route logic without a language: a rule's request fields set, removed and appended before
//! the lookup and the fetch, its response fields before delivery, and its synthetic answers.

mod common;

use std::time::Duration;

use common::*;

const RULES: &str = r#"
[[rule]]
path_prefix = "/old/"
synthetic = { status = 301, headers = { location = "https://site.example/new/", "cache-control" = "max-age=3600" }, body = "moved\n" }

[[rule]]
path_prefix = "/app/"
request_set = { "x-forwarded-proto" = "https" }
request_unset = ["cookie", "x-debug"]
request_append = { "x-trace" = "kura" }
response_set = { "strict-transport-security" = "max-age=31536000" }
response_unset = ["x-cache-tags", "x-powered-by"]
response_append = { "x-served-by" = "kura" }
[purge]
allow = ["127.0.0.1"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_edits_apply_to_its_requests_and_responses_only() {
    let backend = Backend::start(Duration::ZERO, |_| {
        reply(
            200,
            &[
                ("cache-control", "max-age=60"),
                ("x-cache-tags", "page-1"),
                ("x-powered-by", "php"),
            ],
            "page",
        )
    })
    .await;
    let server = proxy(backend.addr, RULES).await;
    let (addr, c) = (server.http[0], client());
    // The cookie is removed before the cookie rule: the request is looked up and stored.
    let headers = [
        ("cookie", "_session=1"),
        ("x-debug", "1"),
        ("x-trace", "client"),
    ];
    let first = send(&c, addr, "GET", "/app/a", &headers).await;
    let seen = backend.last();
    assert_eq!(first.cache(), "miss");
    assert_eq!(seen.headers.get("cookie"), None);
    assert_eq!(seen.headers.get("x-debug"), None);
    assert_eq!(seen.headers["x-forwarded-proto"], "https");
    let trace: Vec<_> = seen.headers.get_all("x-trace").iter().collect();
    assert_eq!(trace, ["client", "kura"]);
    let again = send(&c, addr, "GET", "/app/a", &headers).await;
    for got in [&first, &again] {
        assert_eq!(got.header("strict-transport-security"), "max-age=31536000");
        assert_eq!(got.header("x-served-by"), "kura");
        assert_eq!(
            (got.header("x-cache-tags"), got.header("x-powered-by")),
            ("", "")
        );
    }
    assert_eq!(again.cache(), "hit");
    // The stored object keeps its tags: a tag ban still finds it.
    let ban = "BAN / HTTP/1.1\r\nHost: x\r\nX-Cache-Tags: ^page-1$\r\n\r\n";
    let mut conn = common::wire::Conn::open(addr).await;
    conn.send(ban.as_bytes()).await;
    assert_eq!(conn.response(false).await.unwrap().status, 200);
    assert_eq!(
        send(&c, addr, "GET", "/app/a", &headers).await.cache(),
        "miss"
    );
    // Other routes are untouched.
    let other = get(&c, addr, "/else").await;
    assert_eq!(other.header("x-cache-tags"), "page-1");
    assert_eq!(other.header("strict-transport-security"), "");
    assert_eq!(backend.last().headers.get("x-forwarded-proto"), None);
    // A synthetic redirect never reaches the backend.
    let before = backend.count();
    let moved = get(&c, addr, "/old/page").await;
    assert_eq!(moved.status, 301);
    assert_eq!(moved.header("location"), "https://site.example/new/");
    assert_eq!((moved.cache(), &moved.body[..]), ("synth", &b"moved\n"[..]));
    assert_eq!(backend.count(), before);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cookies_value_keys_the_page_and_cannot_be_forged() {
    // The backend renders the page in the language of the `lang` cookie.
    let backend = Backend::start(Duration::ZERO, |seen| {
        let cookie = seen
            .headers
            .get("cookie")
            .map_or("", |v| v.to_str().unwrap_or(""));
        let lang = cookie
            .split(';')
            .find_map(|p| p.trim().strip_prefix("lang="))
            .unwrap_or("en");
        reply(
            200,
            &[("cache-control", "max-age=60")],
            &format!("page in {lang}"),
        )
    })
    .await;
    let extra = "[[rule]]\npath_prefix = \"/\"\nkey_cookies = [\"lang\"]\n";
    let server = proxy(backend.addr, extra).await;
    let (addr, c) = (server.http[0], client());
    let fr = [("cookie", "lang=fr")];
    let first = send(&c, addr, "GET", "/p", &fr).await;
    assert_eq!(
        (first.cache(), &first.body[..]),
        ("miss", &b"page in fr"[..])
    );
    assert_eq!(first.header("vary"), "Cookie");
    let again = send(&c, addr, "GET", "/p", &fr).await;
    assert_eq!(
        (again.cache(), &again.body[..]),
        ("hit", &b"page in fr"[..])
    );
    // Another value, and none, are other variants.
    let de = send(&c, addr, "GET", "/p", &[("cookie", "lang=de")]).await;
    assert_eq!((de.cache(), &de.body[..]), ("miss", &b"page in de"[..]));
    let plain = get(&c, addr, "/p").await;
    assert_eq!(
        (plain.cache(), &plain.body[..]),
        ("miss", &b"page in en"[..])
    );
    // kura's own field sent by a client chooses nothing: it gets the cookie-less variant.
    let forged = send(&c, addr, "GET", "/p", &[("kura-key-cookie-lang", "fr")]).await;
    assert_eq!(
        (forged.cache(), &forged.body[..]),
        ("hit", &b"page in en"[..])
    );
    // Any other cookie still passes the request (Varnish's rule).
    let session = send(&c, addr, "GET", "/p", &[("cookie", "lang=fr; session=1")]).await;
    assert_eq!(session.cache(), "pass");
    server.shutdown().await;
}
