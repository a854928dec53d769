//! PURGE, soft purge, bans, tags and the lurker, against a counting backend on loopback.

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::Request;
use http_body_util::{BodyExt, Full};

const TOKEN: &str = "0123456789abcdef-test";

/// A backend numbering its responses ("PATH vN"), with the header pairs `fields` gives for a
/// path.
async fn numbered(
    delay: Duration,
    fields: impl Fn(&str) -> Vec<(String, String)> + Send + Sync + 'static,
) -> (Backend, Arc<AtomicUsize>) {
    let version = Arc::new(AtomicUsize::new(0));
    let v = version.clone();
    let backend = Backend::start(delay, move |seen| {
        let n = v.fetch_add(1, Ordering::SeqCst) + 1;
        let path = seen.uri.path().to_owned();
        let extra = fields(&path);
        let mut pairs: Vec<(&str, &str)> = vec![("cache-control", "max-age=60")];
        pairs.extend(extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        reply(200, &pairs, &format!("{path} v{n}"))
    })
    .await;
    (backend, version)
}

fn plain(_: &str) -> Vec<(String, String)> {
    Vec::new()
}

/// Sends `method path` to the admin listener with `body` and, when given, the token.
async fn admin(
    server: &kura_http::Server,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &str,
) -> Got {
    let addr: SocketAddr = server.admin.unwrap();
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let response = client().request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    Got {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

async fn ban(server: &kura_http::Server, expr: &str) -> Got {
    admin(server, "POST", "/ban", Some(TOKEN), expr).await
}

fn text(got: &Got) -> &str {
    std::str::from_utf8(&got.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_needs_an_allowed_address_or_the_token() {
    let (backend, _) = numbered(Duration::ZERO, plain).await;
    let c = client();
    // Loopback is not in the allowed range: only the token lets a PURGE through.
    let extra = format!("[purge]\nallow = [\"10.0.0.0/8\"]\ntoken = \"{TOKEN}\"");
    let guarded = proxy(backend.addr, &extra).await;
    let addr = guarded.http[0];
    assert_eq!(get(&c, addr, "/p").await.cache(), "miss");
    let refused = send(&c, addr, "PURGE", "/p", &[]).await;
    assert_eq!(refused.status, 403, "{}", text(&refused));
    let wrong = send(
        &c,
        addr,
        "PURGE",
        "/p",
        &[("x-purge-token", "0123456789abcdef-nope")],
    )
    .await;
    assert_eq!(wrong.status, 403);
    assert_eq!(get(&c, addr, "/p").await.cache(), "hit");
    let purged = send(&c, addr, "PURGE", "/p", &[("x-purge-token", TOKEN)]).await;
    assert_eq!(purged.status, 200, "{}", text(&purged));
    let again = send(&c, addr, "PURGE", "/p", &[("x-purge-token", TOKEN)]).await;
    assert_eq!(again.status, 404);
    let refetched = get(&c, addr, "/p").await;
    assert_eq!(
        (refetched.cache(), &refetched.body[..]),
        ("miss", &b"/p v2"[..])
    );
    assert_eq!(stats(&guarded).await["purges"], 1);
    guarded.shutdown().await;

    // From an allowed address no token is needed.
    let open = proxy(backend.addr, "[purge]\nallow = [\"127.0.0.0/8\", \"::1\"]").await;
    let addr = open.http[0];
    get(&c, addr, "/p").await;
    assert_eq!(send(&c, addr, "PURGE", "/p", &[]).await.status, 200);
    assert_eq!(get(&c, addr, "/p").await.cache(), "miss");
    open.shutdown().await;

    // Without [purge], PURGE is refused, not passed to the backend.
    let off = proxy(backend.addr, "").await;
    let before = backend.count();
    let refused = send(&c, off.http[0], "PURGE", "/p", &[]).await;
    assert_eq!(refused.status, 405);
    assert!(text(&refused).contains("[purge]"), "{}", text(&refused));
    assert_eq!(backend.count(), before);
    off.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_removes_every_vary_variant() {
    let (backend, _) = numbered(Duration::ZERO, |_| vec![("vary".into(), "x-device".into())]).await;
    let server = proxy(backend.addr, "[purge]\nallow = [\"127.0.0.1\"]").await;
    let (addr, c) = (server.http[0], client());
    for device in ["pc", "sp"] {
        let got = send(&c, addr, "GET", "/v", &[("x-device", device)]).await;
        assert_eq!(got.cache(), "miss");
        let got = send(&c, addr, "GET", "/v", &[("x-device", device)]).await;
        assert_eq!(got.cache(), "hit");
    }
    assert_eq!(backend.count(), 2);
    assert_eq!(send(&c, addr, "PURGE", "/v", &[]).await.status, 200);
    for device in ["pc", "sp"] {
        let got = send(&c, addr, "GET", "/v", &[("x-device", device)]).await;
        assert_eq!(got.cache(), "miss", "{device}");
    }
    assert_eq!(backend.count(), 4);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soft_purge_serves_stale_while_one_request_refreshes() {
    // The backend answers slowly, so the refresh is still under way while requests arrive.
    let (backend, _) = numbered(Duration::from_millis(300), plain).await;
    let server = proxy(backend.addr, "grace = 60\n[purge]\nallow = [\"127.0.0.1\"]").await;
    let (addr, c) = (server.http[0], client());
    assert_eq!(get(&c, addr, "/s").await.body, "/s v1");
    assert_eq!(get(&c, addr, "/s").await.cache(), "hit");
    let soft = send(&c, addr, "PURGE", "/s", &[("x-purge-soft", "1")]).await;
    assert_eq!(soft.status, 200, "{}", text(&soft));
    assert_eq!(
        send(&c, addr, "PURGE", "/nothing", &[("x-purge-soft", "1")])
            .await
            .status,
        404
    );
    for _ in 0..5 {
        let stale = get(&c, addr, "/s").await;
        assert_eq!((stale.cache(), &stale.body[..]), ("stale", &b"/s v1"[..]));
    }
    let mut fresh = None;
    for _ in 0..300 {
        let got = get(&c, addr, "/s").await;
        if got.body == "/s v2" {
            fresh = Some(got);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(fresh.expect("the refreshed object").cache(), "hit");
    // One fetch, one refresh: the five stale answers did not each go to the backend.
    assert_eq!(backend.count(), 2);
    let figures = stats(&server).await;
    assert_eq!(figures["soft_purges"], 1);
    assert_eq!(figures["background_refreshes"], 1);
    server.shutdown().await;
}

fn ban_config() -> String {
    format!("[bans]\ntoken = \"{TOKEN}\"\nlurker_interval_ms = 3600000")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bans_by_url_pattern_and_by_header_spare_later_objects() {
    let (backend, _) = numbered(Duration::ZERO, |path| {
        vec![("x-content-id".into(), path.replace('/', "-"))]
    })
    .await;
    // The lurker is made too slow to act: these bans are checked at lookup.
    let server = proxy(backend.addr, &ban_config()).await;
    let (addr, c) = (server.http[0], client());
    for path in ["/blog/1", "/blog/2", "/news/1", "/news/2"] {
        assert_eq!(get(&c, addr, path).await.cache(), "miss");
    }
    let added = ban(&server, "obj.url ~ ^/blog/").await;
    assert_eq!(added.status, 200, "{}", text(&added));
    let seq: serde_json::Value = serde_json::from_slice(&added.body).unwrap();
    assert_eq!(seq["seq"], 1);
    assert_eq!(get(&c, addr, "/blog/1").await.cache(), "miss");
    assert_eq!(get(&c, addr, "/news/1").await.cache(), "hit");
    assert_eq!(
        ban(&server, "obj.http.x-content-id == -news-2")
            .await
            .status,
        200
    );
    assert_eq!(get(&c, addr, "/news/2").await.cache(), "miss");
    assert_eq!(get(&c, addr, "/news/1").await.cache(), "hit");
    // Stored after the bans: however often looked up, not banned.
    for _ in 0..3 {
        assert_eq!(get(&c, addr, "/blog/1").await.cache(), "hit");
        assert_eq!(get(&c, addr, "/news/2").await.cache(), "hit");
    }
    let listed = admin(&server, "GET", "/bans", Some(TOKEN), "").await;
    let listed: serde_json::Value = serde_json::from_slice(&listed.body).unwrap();
    assert_eq!(listed["bans"][0]["expr"], "obj.url ~ ^/blog/");
    assert_eq!(
        stats(&server).await["bans"],
        2,
        "/blog/2 is older than both"
    );
    // The last object older than the bans is looked up (and banned): both are complete,
    // without the lurker.
    assert_eq!(get(&c, addr, "/blog/2").await.cache(), "miss");
    let listed = admin(&server, "GET", "/bans", Some(TOKEN), "").await;
    let listed: serde_json::Value = serde_json::from_slice(&listed.body).unwrap();
    assert_eq!(listed["bans"], serde_json::json!([]));
    let figures = stats(&server).await;
    assert_eq!(figures["bans"], 0);
    assert_eq!(figures["bans_added"], 2);
    assert_eq!(figures["bans_completed_lookup"], 2);
    assert_eq!(figures["bans_completed_lurker"], 0);
    assert_eq!(figures["bans_objects_banned_lookup"], 3);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bans_need_the_token_and_refuse_bad_expressions() {
    let (backend, _) = numbered(Duration::ZERO, plain).await;
    let off = proxy(backend.addr, "").await;
    let refused = admin(&off, "POST", "/ban", Some(TOKEN), "obj.url ~ .").await;
    assert_eq!(refused.status, 403);
    assert!(
        text(&refused).contains("[bans] token"),
        "{}",
        text(&refused)
    );
    off.shutdown().await;

    let server = proxy(backend.addr, &ban_config()).await;
    assert_eq!(
        admin(&server, "POST", "/ban", None, "obj.url ~ .")
            .await
            .status,
        401
    );
    let wrong = admin(
        &server,
        "POST",
        "/ban",
        Some("0123456789abcdef-nope"),
        "obj.url ~ .",
    )
    .await;
    assert_eq!(wrong.status, 401);
    let request_field = ban(&server, "req.http.cookie ~ session").await;
    assert_eq!(request_field.status, 400);
    let reason = text(&request_field);
    assert!(
        reason.contains("req.http.cookie") && reason.contains("lurker"),
        "{reason}"
    );
    for (bad, why) in [
        ("obj.url =~ /a", "expected ==, !=, ~ or !~"),
        ("obj.url ~ \"(unclosed\"", "bad regular expression"),
        ("obj.path == /a", "unknown field"),
        ("", "empty"),
    ] {
        let got = ban(&server, bad).await;
        assert_eq!(got.status, 400, "{bad}");
        assert!(text(&got).contains(why), "{bad}: {}", text(&got));
    }
    assert_eq!(stats(&server).await["bans"], 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tags_invalidate_every_tagged_object_hard_or_soft() {
    let (backend, _) = numbered(Duration::ZERO, |path| match path {
        "/" => vec![("surrogate-key".into(), "home".into())],
        "/post/1" => vec![("surrogate-key".into(), "post-1 home".into())],
        "/post/2" => vec![("xkey".into(), "post-2".into())],
        _ => Vec::new(),
    })
    .await;
    let server = proxy(backend.addr, &format!("grace = 60\n{}", ban_config())).await;
    let (addr, c) = (server.http[0], client());
    for path in ["/", "/post/1", "/post/2", "/about"] {
        get(&c, addr, path).await;
    }
    let tagged = admin(&server, "POST", "/tags", Some(TOKEN), "home").await;
    assert_eq!(tagged.status, 200, "{}", text(&tagged));
    assert_eq!(get(&c, addr, "/").await.cache(), "miss");
    assert_eq!(get(&c, addr, "/post/1").await.cache(), "miss");
    assert_eq!(get(&c, addr, "/post/2").await.cache(), "hit");
    assert_eq!(get(&c, addr, "/about").await.cache(), "hit");
    // Soft: stale at once, refreshed in the background.
    let soft = admin(&server, "POST", "/tags?soft", Some(TOKEN), "post-2").await;
    assert_eq!(soft.status, 200);
    let stale = get(&c, addr, "/post/2").await;
    assert_eq!(
        (stale.cache(), &stale.body[..]),
        ("stale", &b"/post/2 v3"[..])
    );
    eventually("the refresh", || backend.count() == 7).await;
    let mut refreshed = false;
    for _ in 0..300 {
        let got = get(&c, addr, "/post/2").await;
        if got.cache() == "hit" && got.body.starts_with(b"/post/2 v7") {
            refreshed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refreshed);
    assert_eq!(
        admin(&server, "POST", "/tags", Some(TOKEN), "  ")
            .await
            .status,
        400
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lurker_empties_the_ban_list_with_no_request_arriving() {
    let (backend, _) = numbered(Duration::ZERO, plain).await;
    let extra = format!("[bans]\ntoken = \"{TOKEN}\"\nlurker_interval_ms = 5\nlurker_batch = 16");
    let server = proxy(backend.addr, &extra).await;
    let (addr, c) = (server.http[0], client());
    for i in 0..40 {
        get(
            &c,
            addr,
            &format!("/{}/{i}", if i % 4 == 0 { "old" } else { "keep" }),
        )
        .await;
    }
    assert_eq!(ban(&server, "obj.url ~ ^/old/").await.status, 200);
    assert_eq!(ban(&server, "obj.status == 404").await.status, 200);
    let mut figures = stats(&server).await;
    for _ in 0..500 {
        if figures["bans"] == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        figures = stats(&server).await;
    }
    assert_eq!(figures["bans"], 0, "{figures}");
    assert_eq!(figures["bans_completed_lurker"], 2);
    assert_eq!(figures["bans_objects_banned_lurker"], 10);
    assert_eq!(figures["bans_objects_banned_lookup"], 0);
    assert_eq!(figures["bans_lookup_tests"], 0);
    assert_eq!(
        backend.count(),
        40,
        "no request reached the backend meanwhile"
    );
    assert_eq!(get(&c, addr, "/old/0").await.cache(), "miss");
    assert_eq!(get(&c, addr, "/keep/1").await.cache(), "hit");
    // The list is empty: the lookups evaluated nothing.
    assert_eq!(stats(&server).await["bans_lookup_tests"], 0);
    server.shutdown().await;
}
