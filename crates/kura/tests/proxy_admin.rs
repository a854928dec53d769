//! Introspection (issue 43): mcrouter's admin keys (`get
//! __mcrouter__.route(set,KEY)` and the rest) answered by the proxy, and
//! each backend's time to answer as a histogram on /metrics.

mod common;

use common::proxy::{backends, keys_on, proxy, reply, Kind};

/// The value of a `get` reply.
fn value(r: &str) -> &str {
    let mut lines = r.split("\r\n");
    assert!(lines.next().is_some_and(|l| l.starts_with("VALUE ")), "{r}");
    &r[r.find("\r\n").unwrap() + 2..r.len() - "\r\nEND\r\n".len()]
}

#[test]
fn mcrouter_admin_keys_say_where_a_key_goes() {
    let s = backends(Kind::Kura, 3);
    let addr = |i: usize| format!("127.0.0.1:{}", s[i].port);
    let (main, solo) = (vec![addr(0), addr(1)], addr(2));
    let dir = common::tempdir("proxy-admin-keys");
    let toml = format!(
        "default_pool = \"main\"\n[pools.main]\nservers = [\"{}\", \"{}\"]\n[pools.solo]\nservers = [\"{solo}\"]\n\
         [pools.both]\nreplicas = [\"main\", \"solo\"]\n[[routes]]\nprefix = \"r:\"\npool = \"both\"\n",
        main[0], main[1]
    );
    let cfg = dir.join("proxy.toml");
    std::fs::write(&cfg, &toml).unwrap();
    let p = proxy(&["--config", cfg.to_str().unwrap()]);
    let mut c = p.connect();
    let ask = |c: &mut std::net::TcpStream, k: &str| {
        reply(c, format!("get __mcrouter__.{k}\r\n").as_bytes())
    };
    for at in 0..2 {
        let k = &keys_on(&main, at, 1, "adm")[0];
        assert_eq!(value(&ask(&mut c, &format!("route(set,{k})"))), main[at]);
        assert_eq!(
            value(&ask(&mut c, &format!("route_handles(get,{k})"))),
            format!("pool main {}", main[at])
        );
    }
    // A replicated pool: a write goes to every replica, a read to the first.
    let k = &keys_on(&main, 1, 1, "r:")[0];
    assert_eq!(
        value(&ask(&mut c, &format!("route(set,{k})"))),
        format!("{}\r\n{solo}", main[1])
    );
    assert_eq!(value(&ask(&mut c, &format!("route(get,{k})"))), main[1]);
    assert!(value(&ask(&mut c, "version")).starts_with("kura "));
    assert_eq!(value(&ask(&mut c, "config_file")), cfg.to_str().unwrap());
    assert_eq!(
        value(&ask(&mut c, "config_md5_digest")),
        kura_ring::hash::md5_hex(toml.as_bytes())
    );
    assert!(ask(&mut c, "nope").starts_with("SERVER_ERROR"));
    // Sent to no backend.
    for b in &s {
        assert_eq!(
            reply(&mut b.connect(), b"get __mcrouter__.version\r\n"),
            "END\r\n"
        );
    }
}

#[test]
fn metrics_have_each_backends_time_to_answer() {
    let s = backends(Kind::Kura, 1);
    let metrics = common::free_port();
    let pool = format!("127.0.0.1:{}", s[0].port);
    let p = proxy(&[
        "--pool",
        &pool,
        "--metrics-listen",
        &format!("127.0.0.1:{metrics}"),
    ]);
    let mut c = p.connect();
    for i in 0..50 {
        assert_eq!(reply(&mut c, format!("get k{i}\r\n").as_bytes()), "END\r\n");
    }
    let raw = common::http_exchange(
        metrics,
        "GET /metrics HTTP/1.1",
        "Host: x\r\nConnection: close\r\n",
    );
    let page = String::from_utf8_lossy(&raw).into_owned();
    let name = "kura_proxy_backend_request_duration_seconds";
    assert!(page.contains(&format!("# TYPE {name} histogram")), "{page}");
    let figure = |what: &str| -> u64 {
        let line = format!("{name}{what}{{backend=\"{pool}\"");
        page.lines()
            .find(|l| l.starts_with(&line) && (what != "_bucket" || l.contains("le=\"+Inf\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {line}: {page}"))
    };
    let count = figure("_count");
    assert!(count >= 50, "{count}");
    assert_eq!(figure("_bucket"), count);
    // Cumulative: no bucket above the next.
    let buckets: Vec<u64> = page
        .lines()
        .filter(|l| l.starts_with(&format!("{name}_bucket{{backend=\"{pool}\"")))
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert_eq!(buckets.len(), 15);
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
}
