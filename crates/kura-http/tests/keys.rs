//! Seed 002's cache keys against a real backend on loopback that counts its requests: URLs
//! that differ only in tracking parameters, parameter order, host case, default port or
//! percent-encoding are one object; removed parameters stripped or forwarded; per-rule
//! settings; device classes instead of User-Agent; the parameter names counted on /stats.

mod common;

use std::time::Duration;

use common::*;

const IPAD_IOS12: &str = "Mozilla/5.0 (iPad; CPU OS 12_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/12.1 Mobile/15E148 Safari/604.1";
const IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1";
const ANDROID_PHONE: &str = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36";
const ANDROID_TABLET: &str = "Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
const DESKTOP: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";

/// The five User-Agents and the class seed 002's rules give them.
const AGENTS: [(&str, &str); 5] = [
    (IPAD_IOS12, "pc"),
    (IPHONE, "sp"),
    (ANDROID_PHONE, "sp"),
    (ANDROID_TABLET, "pc"),
    (DESKTOP, "pc"),
];

/// A backend answering with the target it saw, cacheable for 100 s.
async fn echo() -> Backend {
    Backend::start(Duration::ZERO, |seen| {
        reply(
            200,
            &[("cache-control", "max-age=100")],
            &seen.uri.to_string(),
        )
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn equivalent_urls_are_one_object() {
    let backend = echo().await;
    let server = proxy(backend.addr, "").await;
    let c = client();
    let addr = server.http[0];
    let first = send(&c, addr, "GET", "/p?a=1&b=2", &[("host", "example.com")]).await;
    assert_eq!(first.cache(), "miss");
    for (host, path) in [
        ("example.com", "/p?b=2&a=1"),
        ("example.com", "/p?utm_source=news&a=1&utm_medium=mail&b=2"),
        (
            "example.com",
            "/p?a=1&_ga=2.1.3&b=2&fbclid=IwAR&gclid=Cj0&__twitter_impression=true",
        ),
        ("EXAMPLE.Com", "/p?a=1&b=2"),
        ("example.com:80", "/p?a=1&b=2"),
        ("example.com", "/%70?a=%31&b=2"),
        ("example.com", "/p?a=1&&b=2&utm%5Fcampaign=x"),
    ] {
        let got = send(&c, addr, "GET", path, &[("host", host)]).await;
        assert_eq!(got.cache(), "hit", "{host} {path}");
        assert_eq!(got.body, "/p?a=1&b=2", "{host} {path}");
    }
    assert_eq!(backend.count(), 1);
    // Different values, another port or another path are other objects.
    for (host, path) in [
        ("example.com", "/p?a=2&b=2"),
        ("example.com:8080", "/p?a=1&b=2"),
        ("example.com", "/p%2F?a=1&b=2"),
    ] {
        let got = send(&c, addr, "GET", path, &[("host", host)]).await;
        assert_eq!(got.cache(), "miss", "{host} {path}");
    }
    assert_eq!(backend.count(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_parameters_are_stripped_or_forwarded() {
    let backend = echo().await;
    let server = proxy(backend.addr, "").await;
    let c = client();
    let got = get(&c, server.http[0], "/s?utm_source=x&z=1&a=2").await;
    assert_eq!(got.cache(), "miss");
    assert_eq!(backend.last().uri, "/s?a=2&z=1", "stripped and sorted");

    let backend = echo().await;
    let server = proxy(backend.addr, "[normalize]\nforward_removed = true\n").await;
    let got = get(&c, server.http[0], "/s?utm_source=x&z=1&a=2").await;
    assert_eq!(got.cache(), "miss");
    assert_eq!(backend.last().uri, "/s?utm_source=x&z=1&a=2", "as sent");
    let got = get(&c, server.http[0], "/s?a=2&z=1&utm_source=y").await;
    assert_eq!(got.cache(), "hit");
    assert_eq!(backend.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_override_the_parameters_removed() {
    let backend = echo().await;
    let server = proxy(
        backend.addr,
        "[normalize]\nalso_remove = [\"ref\"]\n\
         [[rule]]\npath_prefix = \"/search\"\nnormalize_remove = [\"sid\"]\n\
         normalize_forward_removed = true\nnormalize_sort = false\n",
    )
    .await;
    let c = client();
    let addr = server.http[0];
    // In /search: only sid is removed, forwarded as sent, order kept.
    assert_eq!(get(&c, addr, "/search?q=1&sid=5").await.cache(), "miss");
    assert_eq!(backend.last().uri, "/search?q=1&sid=5");
    assert_eq!(get(&c, addr, "/search?sid=6&q=1").await.cache(), "hit");
    assert_eq!(
        get(&c, addr, "/search?q=1&utm_source=x").await.cache(),
        "miss"
    );
    assert_eq!(get(&c, addr, "/search?q=1&ref=x").await.cache(), "miss");
    assert_eq!(get(&c, addr, "/search?r=1&q=1").await.cache(), "miss");
    assert_eq!(get(&c, addr, "/search?q=1&r=1").await.cache(), "miss");
    assert_eq!(backend.count(), 5);
    // Elsewhere: the top level's list (tracking parameters and ref), stripped.
    assert_eq!(get(&c, addr, "/other?q=1&ref=a").await.cache(), "miss");
    assert_eq!(backend.last().uri, "/other?q=1");
    assert_eq!(
        get(&c, addr, "/other?utm_source=b&q=1").await.cache(),
        "hit"
    );
    assert_eq!(get(&c, addr, "/other?q=1&sid=5").await.cache(), "miss");
    assert_eq!(backend.count(), 7);
}

/// A backend answering with the device class it was sent, varying on it (or on `vary`).
async fn by_class(vary: &'static str) -> Backend {
    Backend::start(Duration::ZERO, move |seen| {
        let class = seen
            .headers
            .get("x-device-class")
            .map_or("none", |v| v.to_str().unwrap());
        let mut headers = vec![("cache-control", "max-age=100")];
        if !vary.is_empty() {
            headers.push(("vary", vary));
        }
        reply(200, &headers, class)
    })
    .await
}

async fn as_agent(
    c: &TestClient,
    server: &kura_http::Server,
    agent: &str,
    extra: &[(&str, &str)],
) -> Got {
    let mut headers = vec![("user-agent", agent)];
    headers.extend_from_slice(extra);
    send(c, server.http[0], "GET", "/page", &headers).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_classes_make_two_variants() {
    let backend = by_class("X-Device-Class").await;
    let server = proxy(backend.addr, "").await;
    let c = client();
    for round in 0..2 {
        for (agent, class) in AGENTS {
            let got = as_agent(&c, &server, agent, &[]).await;
            assert_eq!(got.body, class, "{agent}");
            if round == 1 {
                assert_eq!(got.cache(), "hit", "{agent}");
            }
            // Downstream caches, which never see the class header, vary on what it is made of.
            assert_eq!(got.header("vary"), "user-agent");
        }
    }
    assert_eq!(backend.count(), 2, "one fetch per class");
    let classes: Vec<String> = backend
        .seen
        .lock()
        .iter()
        .map(|s| {
            s.headers
                .get("x-device-class")
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(classes, ["pc", "sp"]);
    // A client's own class header is not trusted.
    let forged = as_agent(&c, &server, DESKTOP, &[("x-device-class", "sp")]).await;
    assert_eq!(
        (forged.body.as_ref(), forged.cache()),
        (b"pc".as_ref(), "hit")
    );
    let forged = as_agent(&c, &server, IPHONE, &[("x-device-class", "admin")]).await;
    assert_eq!(forged.body, "sp");
    assert_eq!(backend.count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vary_user_agent_is_read_as_the_class_when_asked() {
    // As the backend says: one variant per User-Agent.
    let backend = by_class("User-Agent").await;
    let server = proxy(backend.addr, "").await;
    let c = client();
    for (agent, _) in AGENTS.iter().chain(AGENTS.iter()) {
        as_agent(&c, &server, agent, &[]).await;
    }
    assert_eq!(backend.count(), AGENTS.len());

    let backend = by_class("Accept-Encoding, User-Agent").await;
    let server = proxy(backend.addr, "[device]\nvary_user_agent = true\n").await;
    for (agent, class) in AGENTS.iter().chain(AGENTS.iter()) {
        let got = as_agent(&c, &server, agent, &[]).await;
        assert_eq!(got.body, *class, "{agent}");
        assert_eq!(got.header("vary"), "accept-encoding, user-agent");
    }
    assert_eq!(backend.count(), 2, "one fetch per class");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_does_not_vary_gives_one_copy() {
    let backend = by_class("").await;
    let server = proxy(backend.addr, "").await;
    let c = client();
    for (agent, _) in AGENTS {
        let got = as_agent(&c, &server, agent, &[]).await;
        assert_eq!(got.body, "pc", "the first request's class serves everyone");
        assert_eq!(got.header("vary"), "");
    }
    assert_eq!(backend.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_classes_can_be_configured_or_turned_off() {
    let backend = by_class("X-Class").await;
    let server = proxy(
        backend.addr,
        "[device]\nheader = \"X-Class\"\ndefault = \"desktop\"\n\
         [[device.rule]]\npattern = \"Android(?:.*Mobile)\"\nclass = \"android\"\n",
    )
    .await;
    let c = client();
    let classes = |backend: &Backend| -> Vec<String> {
        backend
            .seen
            .lock()
            .iter()
            .map(|s| {
                s.headers
                    .get("x-class")
                    .map_or("-".into(), |v| v.to_str().unwrap().to_owned())
            })
            .collect()
    };
    for agent in [ANDROID_PHONE, ANDROID_TABLET, IPHONE] {
        as_agent(&c, &server, agent, &[]).await;
    }
    assert_eq!(classes(&backend), ["android", "desktop"]);

    let backend = by_class("").await;
    let server = proxy(backend.addr, "[device]\nenabled = false\n").await;
    as_agent(&c, &server, IPHONE, &[]).await;
    assert!(backend.last().headers.get("x-device-class").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameter_names_are_counted_on_the_admin_pages() {
    let backend = echo().await;
    let server = proxy(backend.addr, "").await;
    let c = client();
    for n in 0..5 {
        get(&c, server.http[0], &format!("/a?utm_source=x&id={n}")).await;
    }
    get(&c, server.http[0], "/b?id=1&id=2&page=3").await;
    let stats = stats(&server).await;
    let params = stats["query_params"].as_array().expect("query_params");
    let count = |name: &str| {
        params
            .iter()
            .find(|p| p["name"] == name)
            .map(|p| p["count"].as_u64().unwrap())
    };
    assert_eq!(count("id"), Some(6));
    assert_eq!(count("utm_source"), Some(5));
    assert_eq!(count("page"), Some(1));
    assert_eq!(params[0]["name"], "id", "most frequent first");
    let metrics = get(&c, server.admin.unwrap(), "/metrics").await;
    let text = String::from_utf8_lossy(&metrics.body);
    assert!(
        text.contains("kura_http_query_param_requests{name=\"utm_source\"} 5\n"),
        "{text}"
    );
}

#[test]
fn bad_settings_name_the_file_and_line() {
    let dir = temp_dir("keys-config");
    for (text, line, says) in [
        (
            "[normalize]\nremove = [\"utm_*\",\n  \"a b\"]\n",
            4,
            "\"a b\"",
        ),
        ("[device]\nheader = \"\"\n", 3, "device.header"),
    ] {
        let file = dir.join("http.toml");
        std::fs::write(&file, format!("backend = \"http://127.0.0.1:1\"\n{text}")).unwrap();
        let args = kura_http::HttpArgs {
            config: Some(file.clone()),
            ..kura_http::HttpArgs::default()
        };
        let error = kura_http::Config::load(&args).expect_err(text).to_string();
        let want = format!("{} line {line}: ", file.display());
        assert!(error.starts_with(&want), "{error}");
        assert!(error.contains(says), "{error}");
    }
    std::fs::remove_dir_all(dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsafe_method_invalidates_the_normalised_key() {
    let backend = echo().await;
    let server = proxy(backend.addr, "").await;
    let c = client();
    let addr = server.http[0];
    assert_eq!(get(&c, addr, "/a?x=1&y=2").await.cache(), "miss");
    assert_eq!(get(&c, addr, "/a?y=2&x=1").await.cache(), "hit");
    let post = send(&c, addr, "POST", "/a?utm_source=mail&y=2&x=1", &[]).await;
    assert_eq!(post.cache(), "pass");
    assert_eq!(
        backend.last().uri,
        "/a?utm_source=mail&y=2&x=1",
        "a pass reaches the backend as sent"
    );
    assert_eq!(get(&c, addr, "/a?x=1&y=2").await.cache(), "miss");
}
