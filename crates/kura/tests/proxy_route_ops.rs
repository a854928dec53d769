//! Routes by operation and pools that answer for their replicas (issue 43,
//! point 7): a route's `ops` (mcrouter's OperationSelectorRoute), a
//! replicated pool's `write = "fire-and-forget"` (mcrouter's
//! AllAsyncRoute), a pool's rate limit, mcrouter's
//! `--max-client-outstanding-reqs`, and `--check-config` naming the key of
//! each setting it refuses.

mod common;

use std::process::Output;
use std::time::{Duration, Instant};

use common::proxy::{
    backends, bin, has, proxy, proxy_with, quoted, read_bin, reply, signal, stat, Kind,
};

#[test]
fn each_operation_goes_to_its_pool() {
    let s = backends(Kind::Kura, 4);
    let toml = format!(
        "default_pool = \"main\"\n[pools.main]\nservers = [{}]\n[pools.reads]\nservers = [{}]\n\
         [pools.writes]\nservers = [{}]\n[pools.deletes]\nservers = [{}]\n\
         [[routes]]\nprefix = \"\"\npool = \"main\"\n[routes.ops]\nget = \"reads\"\nset = \"writes\"\ndelete = \"deletes\"\n",
        quoted(&s[0]),
        quoted(&s[1]),
        quoted(&s[2]),
        quoted(&s[3])
    );
    let (p, _) = proxy_with("proxy-ops", &toml);
    let mut c = p.connect();
    assert_eq!(reply(&mut c, b"set k 0 0 1\r\nw\r\n"), "STORED\r\n");
    assert!(has(&s[2], "k", "w") && !has(&s[0], "k", "w"));
    // get reads the reads pool, which does not have it; gets is no get:
    // the route's own pool.
    assert_eq!(reply(&mut c, b"get k\r\n"), "END\r\n");
    let mut reads = s[1].connect();
    assert_eq!(reply(&mut reads, b"set k 0 0 1\r\nr\r\n"), "STORED\r\n");
    assert_eq!(reply(&mut c, b"get k\r\n"), "VALUE k 0 1\r\nr\r\nEND\r\n");
    assert_eq!(
        reply(&mut c, b"get k k\r\n")
            .matches("VALUE k 0 1\r\nr")
            .count(),
        2
    );
    assert_eq!(reply(&mut c, b"gets k\r\n"), "END\r\n");
    // add and the meta set by their own names: add is not set.
    assert_eq!(reply(&mut c, b"add a 0 0 1\r\nm\r\n"), "STORED\r\n");
    assert!(has(&s[0], "a", "m"));
    let ms = common::proxy::ask(&mut c, b"ms m 1 O7\r\nz\r\n", b"\r\n");
    assert_eq!(ms, b"HD O7\r\n");
    assert!(has(&s[2], "m", "z"));
    // Binary set: the writes pool too.
    let mut b = p.connect();
    use std::io::Write;
    b.write_all(&bin(0x01, b"bk", &[0; 8], b"v", 9, 0)).unwrap();
    assert_eq!(read_bin(&mut b).status, 0);
    assert!(has(&s[2], "bk", "v"));
    assert_eq!(reply(&mut c, b"delete k\r\n"), "NOT_FOUND\r\n");
    let mut deletes = s[3].connect();
    assert_eq!(reply(&mut deletes, b"set k 0 0 1\r\nd\r\n"), "STORED\r\n");
    assert_eq!(reply(&mut c, b"delete k\r\n"), "DELETED\r\n");
    assert!(has(&s[2], "k", "w"));
    // The admin keys say the same.
    let port = |i: usize| format!("127.0.0.1:{}", s[i].port);
    let route = |c: &mut std::net::TcpStream, op: &str| {
        reply(c, format!("get __mcrouter__.route({op},k)\r\n").as_bytes())
    };
    assert!(route(&mut c, "get").contains(&port(1)));
    assert!(route(&mut c, "set").contains(&port(2)));
    assert!(route(&mut c, "delete").contains(&port(3)));
    assert!(route(&mut c, "incr").contains(&port(0)));
    assert!(route(&mut c, "fetch").starts_with("SERVER_ERROR unknown operation"));
}

/// Replicas r1 (stopped, so nothing it is sent is answered) and r2, and a
/// replicated pool "r" with `write = "fire-and-forget"`: writes are
/// answered at once, before either replica answered.
#[test]
fn fire_and_forget_answers_before_any_replica() {
    let s = backends(Kind::Kura, 2);
    // A request timeout far above the wait for the reply below: a proxy
    // that waited for the stopped replica could not answer within it.
    let toml = format!(
        "default_pool = \"r\"\n[pools.r1]\nservers = [{}]\n[pools.r2]\nservers = [{}]\n\
         [pools.r]\nreplicas = [\"r1\", \"r2\"]\nwrite = \"fire-and-forget\"\n\
         [health]\nrequest_timeout_ms = 60000\n",
        quoted(&s[0]),
        quoted(&s[1])
    );
    let (p, _) = proxy_with("proxy-fire-and-forget", &toml);
    let mut c = p.connect();
    assert_eq!(reply(&mut c, b"set warm 0 0 1\r\nx\r\n"), "STORED\r\n");
    signal(&s[0], libc::SIGSTOP);
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(reply(&mut c, b"set k 0 0 1\r\nv\r\n"), "STORED\r\n");
    // add answers STORED too: the client is told it was sent.
    assert_eq!(reply(&mut c, b"add warm 0 0 1\r\ny\r\n"), "STORED\r\n");
    assert_eq!(reply(&mut c, b"delete gone\r\n"), "DELETED\r\n");
    let ms = common::proxy::ask(&mut c, b"ms m 1 O3\r\nz\r\n", b"\r\n");
    assert_eq!(ms, b"HD O3\r\n");
    // (`stats` asks every backend: after the stopped one goes on.)
    signal(&s[0], libc::SIGCONT);
    assert_eq!(stat(&mut c, "pool:r:unawaited_writes"), 5);
    // Both replicas apply them all the same.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(has(&s[0], "k", "v") && has(&s[1], "k", "v") && has(&s[0], "m", "z")) {
        assert!(
            Instant::now() < deadline,
            "the replicas never got the writes"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(has(&s[1], "warm", "x"));
    // incr answers a number: it waits for the first replica.
    assert_eq!(reply(&mut c, b"set n 0 0 1\r\n5\r\n"), "STORED\r\n");
    assert_eq!(reply(&mut c, b"incr n 2\r\n"), "7\r\n");
}

#[test]
fn a_pool_over_its_rate_limit_refuses_and_counts() {
    let s = backends(Kind::Kura, 2);
    // One request in 100 s after a burst of 3: the test never sees a
    // token come back.
    let toml = format!(
        "default_pool = \"main\"\n[pools.main]\nservers = [{}]\nrate_limit = 0.01\nrate_burst = 3\n\
         [pools.free]\nservers = [{}]\n[[routes]]\nprefix = \"f:\"\npool = \"free\"\n",
        quoted(&s[0]),
        quoted(&s[1])
    );
    let (p, _) = proxy_with("proxy-rate-limit", &toml);
    let mut c = p.connect();
    let refused = "SERVER_ERROR pool main: over its rate limit\r\n";
    assert_eq!(reply(&mut c, b"set k 0 0 1\r\nx\r\n"), "STORED\r\n");
    assert_eq!(reply(&mut c, b"get k\r\n"), "VALUE k 0 1\r\nx\r\nEND\r\n");
    assert_eq!(
        reply(&mut c, b"get k f:1\r\n"),
        "VALUE k 0 1\r\nx\r\nEND\r\n"
    );
    assert_eq!(reply(&mut c, b"get k\r\n"), refused);
    assert_eq!(reply(&mut c, b"set k 0 0 1\r\ny\r\n"), refused);
    assert_eq!(reply(&mut c, b"get k f:1\r\n"), refused);
    let md = common::proxy::ask(&mut c, b"md k\r\n", b"\r\n");
    assert_eq!(md, refused.as_bytes());
    // Other pools are not limited.
    for _ in 0..10 {
        assert_eq!(reply(&mut c, b"set f:1 0 0 1\r\nz\r\n"), "STORED\r\n");
    }
    assert_eq!(stat(&mut c, "pool:main:rate_limited"), 4);
    assert_eq!(stat(&mut c, "pool:free:rate_limited"), 0);
    assert!(has(&s[0], "k", "x"));
}

#[test]
fn the_rate_limit_shows_on_metrics() {
    let s = backends(Kind::Kura, 1);
    let metrics = common::free_port();
    let toml = format!(
        "metrics_listen = \"127.0.0.1:{metrics}\"\n[pools.main]\nservers = [{}]\nrate_limit = 0.01\nrate_burst = 1\n",
        quoted(&s[0])
    );
    let (p, _) = proxy_with("proxy-rate-metrics", &toml);
    let mut c = p.connect();
    assert_eq!(reply(&mut c, b"get a\r\n"), "END\r\n");
    assert!(reply(&mut c, b"get a\r\n").starts_with("SERVER_ERROR"));
    let raw = common::http_exchange(
        metrics,
        "GET /metrics HTTP/1.1",
        "Host: x\r\nConnection: close\r\n",
    );
    let body = String::from_utf8_lossy(&raw).into_owned();
    assert!(
        body.contains("kura_proxy_pool_rate_limited_total{pool=\"main\"} 1\n"),
        "{body}"
    );
    assert!(body.contains("kura_proxy_pool_miss_failovers_total{pool=\"main\"} 0\n"));
}

fn check(dir: &std::path::Path, toml: &str, extra: &[&str]) -> Output {
    let path = dir.join("proxy.toml");
    std::fs::write(&path, toml).unwrap();
    common::kura()
        .args([
            "proxy",
            "--check-config",
            "--config",
            path.to_str().unwrap(),
        ])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn check_config_names_the_key_it_refuses() {
    let dir = common::tempdir("proxy-routes-check");
    let repl = "default_pool = \"r\"\n[pools.a]\nservers = [\"127.0.0.1:1\"]\n[pools.b]\nservers = [\"127.0.0.1:2\"]\n[pools.r]\nreplicas = [\"a\", \"b\"]\n";
    let good = format!(
        "{repl}read = \"round-robin\"\nmiss_failover = true\nrate_limit = 1000\n\
         [[routes]]\nprefix = \"\"\npool = \"r\"\n[routes.ops]\nget = \"a\"\nincr = \"b\"\n"
    );
    let out = check(&dir, &good, &["--max-client-outstanding-reqs", "16"]);
    assert!(out.status.success(), "{out:?}");
    let cases = [
        ("[pools.a]\nservers = [\"127.0.0.1:1\"]\nread = \"round-robin\"\n", "pool a: read = \"round-robin\""),
        ("[pools.a]\nservers = [\"127.0.0.1:1\"]\nmiss_failover = true\n", "pool a: miss_failover"),
        ("[pools.a]\nservers = [\"127.0.0.1:1\"]\nrate_burst = 5\n", "pool a: rate_burst without rate_limit"),
        ("[pools.a]\nservers = [\"127.0.0.1:1\"]\nrate_limit = -1\n", "pool a: rate_limit = -1"),
        ("[pools.a]\nservers = [\"127.0.0.1:1\"]\nread = \"closest\"\n", "line 3"),
        ("[pools.a]\nservers = [\"127.0.0.1:1\"]\n[[routes]]\nprefix = \"x\"\npool = \"a\"\n[routes.ops]\nfetch = \"a\"\n", "route \"x\": ops.fetch: no such operation"),
        ("[pools.a]\nservers = [\"127.0.0.1:1\"]\n[[routes]]\nprefix = \"x\"\npool = \"a\"\n[routes.ops]\nget = \"nope\"\n", "route \"x\": ops.get: no pool named \"nope\""),
    ];
    for (toml, said) in cases {
        let out = check(&dir, toml, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(said), "{toml}: {err}");
    }
    let async_rr = repl.replace(
        "replicas = [\"a\", \"b\"]\n",
        "replicas = [\"a\", \"b\"]\nwrite = \"all-async\"\nread = \"round-robin\"\n",
    );
    let out = check(&dir, &async_rr, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pool r: read = \"round-robin\" needs write = \"all-sync\" or \"majority\""),
        "{err}"
    );
}

/// mcrouter's `--max-client-outstanding-reqs` is `[limits]
/// client_max_requests` (its mapping is unit-tested in config/routing.rs,
/// the bound itself in proxy_memory.rs): the flag is taken, and a client
/// held to one request in flight still gets every pipelined reply, in
/// order.
#[test]
fn max_client_outstanding_reqs_is_taken_and_every_reply_comes() {
    let s = backends(Kind::Kura, 1);
    let pool = format!("127.0.0.1:{}", s[0].port);
    let p = proxy(&["--pool", &pool, "--max-client-outstanding-reqs", "1"]);
    let mut c = p.connect();
    // Many pipelined requests still all get their replies, in order.
    let mut req = Vec::new();
    for i in 0..50 {
        req.extend_from_slice(format!("set k{i} 0 0 1\r\n{}\r\n", i % 10).as_bytes());
    }
    let got = common::proxy::ask(&mut c, &req, &b"STORED\r\n".repeat(50));
    assert_eq!(got.len(), 8 * 50);
}
