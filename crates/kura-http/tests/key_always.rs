//! Hash inputs a route keys on whatever the request carried: `key_headers_always` (a field
//! whose absence is a variant of its own, such as `Accept-Language`) and `key_device_class`
//! (the device class, for a backend that does not say `Vary`). With `key_headers` alone, the
//! first request (without the field) stores a response without `Vary`, and it is served to
//! every later client, whatever language it asks for.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_field_and_the_device_class_key_the_route_whether_present_or_not() {
    // The backend answers by language and device class and never says Vary.
    let backend = Backend::start(Duration::ZERO, |seen| {
        let field = |name: &str| {
            seen.headers
                .get(name)
                .map_or("none".to_owned(), |v| v.to_str().unwrap().to_owned())
        };
        let body = format!("{} {}", field("accept-language"), field("x-device-class"));
        reply(200, &[("cache-control", "max-age=60")], &body)
    })
    .await;
    let rules = "[[rule]]\npath_prefix = \"/lang/\"\nkey_headers_always = [\"accept-language\"]\n\
                 [[rule]]\npath_prefix = \"/device/\"\nkey_device_class = true\n";
    let server = proxy(backend.addr, rules).await;
    let (addr, c) = (server.http[0], client());
    let ask = |path: &'static str, headers: &'static [(&'static str, &'static str)]| {
        let c = c.clone();
        async move {
            let got = send(&c, addr, "GET", path, headers).await;
            (
                String::from_utf8(got.body.to_vec()).unwrap(),
                got.cache().to_owned(),
            )
        }
    };
    let french: &[(&str, &str)] = &[("accept-language", "fr")];
    assert_eq!(ask("/lang/p", &[]).await, ("none pc".into(), "miss".into()));
    assert_eq!(
        ask("/lang/p", french).await,
        ("fr pc".into(), "miss".into())
    );
    assert_eq!(ask("/lang/p", &[]).await, ("none pc".into(), "hit".into()));
    assert_eq!(ask("/lang/p", french).await, ("fr pc".into(), "hit".into()));
    let phone: &[(&str, &str)] = &[("user-agent", "Mozilla/5.0 (iPhone) Mobile Safari")];
    let desktop: &[(&str, &str)] = &[("user-agent", "Mozilla/5.0 (X11; Linux) Firefox")];
    assert_eq!(
        ask("/device/p", phone).await,
        ("none sp".into(), "miss".into())
    );
    assert_eq!(
        ask("/device/p", desktop).await,
        ("none pc".into(), "miss".into())
    );
    assert_eq!(
        ask("/device/p", phone).await,
        ("none sp".into(), "hit".into())
    );
    // Clients see what the response varies on: the field, and User-Agent for the class.
    let got = send(&c, addr, "GET", "/device/p", desktop).await;
    assert!(got
        .header("vary")
        .to_ascii_lowercase()
        .contains("user-agent"));
    server.shutdown().await;

    // Without [device], key_device_class is refused at load.
    let error = kura_http::Config::from_toml(
        "backend = \"http://127.0.0.1:1\"\nkey_device_class = true\n[device]\nenabled = false\n",
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("key_device_class"), "{error}");
}
