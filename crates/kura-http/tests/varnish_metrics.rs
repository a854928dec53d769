//! `/metrics` as a Varnish operator's Prometheus reads it: latency histograms, and Varnish's
//! counters under varnish_exporter's names where a kura figure means the same.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{client, get, reply, send, Backend};

fn value(page: &str, series: &str) -> f64 {
    page.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{page}"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn histograms_and_varnish_names() {
    let backend = Backend::start(Duration::ZERO, |_| {
        reply(200, &[("cache-control", "max-age=60")], "hello")
    })
    .await;
    let server = common::proxy(backend.addr, "").await;
    let c = client();
    let addr = server.http[0];
    assert_eq!(get(&c, addr, "/x").await.cache(), "miss");
    assert_eq!(get(&c, addr, "/x").await.cache(), "hit");
    assert_eq!(send(&c, addr, "POST", "/y", &[]).await.cache(), "pass");
    let page = get(&c, server.admin.unwrap(), "/metrics").await.body;
    let page = String::from_utf8(page.to_vec()).unwrap();

    assert_eq!(value(&page, "varnish_main_client_req"), 3.0);
    assert_eq!(value(&page, "varnish_main_cache_hit"), 1.0);
    assert_eq!(value(&page, "varnish_main_cache_miss"), 1.0);
    assert_eq!(value(&page, "varnish_main_s_pass"), 1.0);
    assert_eq!(value(&page, "varnish_main_backend_req"), 2.0);
    assert_eq!(value(&page, "varnish_main_n_object"), 1.0);
    assert_eq!(value(&page, "varnish_main_threads"), 2.0);
    assert!(value(&page, "varnish_main_sessions_total") >= 1.0);
    assert_eq!(
        value(
            &page,
            "varnish_backend_up{backend=\"default\",server=\"unknown\"}"
        ),
        1.0
    );
    assert!(page.contains("# TYPE varnish_main_client_req counter\n"));
    assert!(page.contains("# TYPE varnish_main_n_object gauge\n"));

    let hit = "kura_http_request_duration_seconds";
    assert_eq!(
        value(&page, &format!("{hit}_count{{outcome=\"hit\"}}")),
        1.0
    );
    assert_eq!(
        value(
            &page,
            &format!("{hit}_bucket{{outcome=\"hit\",le=\"+Inf\"}}")
        ),
        1.0
    );
    assert_eq!(
        value(&page, &format!("{hit}_count{{outcome=\"pass\"}}")),
        1.0
    );
    assert_eq!(
        value(&page, "kura_http_backend_first_byte_seconds_count"),
        2.0
    );
    assert!(value(&page, "kura_http_backend_first_byte_seconds_sum") > 0.0);

    // Text format 0.0.4: one TYPE per family, each series once, every value a number.
    let mut families = HashSet::new();
    let mut series = HashSet::new();
    for line in page.lines() {
        if let Some(family) = line.strip_prefix("# TYPE ") {
            let name = family.split(' ').next().unwrap();
            assert!(families.insert(name.to_owned()), "TYPE {name} twice");
        } else if !line.starts_with('#') {
            let (name, number) = line.rsplit_once(' ').unwrap();
            assert!(number.parse::<f64>().is_ok(), "{line}");
            assert!(series.insert(name.to_owned()), "{name} twice");
        }
    }
    server.shutdown().await;
}
