//! Backends that are pools of servers (directors): each policy with real servers stopped and
//! started, probes per server (waited for by polling `/stats`, never by sleeping), connection
//! limits, per-backend and per-server timeouts, and a hash key that must not let a client choose who fills a
//! shared object.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::*;
use kura_http::{Config, Server};

const NO_DELAY: Duration = Duration::ZERO;

/// A server answering every request with its own name, `cache_control` and `Vary`-free.
async fn named(name: &'static str, cache_control: &'static str) -> Backend {
    Backend::start(NO_DELAY, move |seen| {
        if seen.uri.path() == "/health" {
            return reply(200, &[], "ok");
        }
        reply(200, &[("cache-control", cache_control)], name)
    })
    .await
}

async fn named_on(addr: SocketAddr, name: &'static str) -> Backend {
    Backend::start_on(addr, NO_DELAY, move |_| {
        reply(200, &[("cache-control", "no-store")], name)
    })
    .await
}

/// A proxy whose default backend is the pool of `servers` with the pool settings `pool`.
async fn pool_proxy(servers: &[&Backend], pool: &str, extra: &str) -> Server {
    let list: Vec<String> = servers
        .iter()
        .map(|b| format!("\"http://{}\"", b.addr))
        .collect();
    let text = format!(
        "listen = [\"127.0.0.1:0\"]\nadmin_listen = \"127.0.0.1:0\"\nthreads = 2\nmemory_mb = 16\n{extra}\n\
         [backends.default]\nservers = [{}]\n{pool}\n",
        list.join(", ")
    );
    Server::start(Config::from_toml(&text).unwrap())
        .await
        .unwrap()
}

/// A probe polling every 20 ms, sick after one failure, healthy after one success.
const FAST_PROBE: &str =
    "probe = { url = \"/health\", interval = 0.02, timeout = 0.5, window = 1, threshold = 1 }";

/// Waits (bounded) until the default backend's server at `addr` has `healthy` in `/stats`.
async fn wait_health(server: &Server, addr: SocketAddr, healthy: u8) {
    for _ in 0..500 {
        let stats = stats(server).await;
        if stats["backends"]["default"]["servers"][addr.to_string()]["healthy"] == healthy {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("server {addr} never became healthy={healthy}");
}

/// The server names that answered `count` GETs of distinct uncacheable URLs.
async fn answers(addr: SocketAddr, count: usize, headers: &[(&str, &str)]) -> Vec<String> {
    let c = client();
    let mut out = Vec::new();
    for i in 0..count {
        let got = send(&c, addr, "GET", &format!("/r/{i}"), headers).await;
        assert_eq!(got.status, 200);
        out.push(String::from_utf8(got.body.to_vec()).unwrap());
    }
    out
}

fn count(names: &[String], name: &str) -> usize {
    names.iter().filter(|n| *n == name).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_takes_turns_and_skips_a_stopped_server() {
    let (a, b, c) = (
        named("a", "no-store").await,
        named("b", "no-store").await,
        named("c", "no-store").await,
    );
    let server = pool_proxy(
        &[&a, &b, &c],
        &format!("policy = \"round-robin\"\n{FAST_PROBE}"),
        "",
    )
    .await;
    let addr = server.http[0];
    let got = answers(addr, 9, &[]).await;
    assert_eq!(
        (count(&got, "a"), count(&got, "b"), count(&got, "c")),
        (3, 3, 3),
        "{got:?}"
    );
    b.stop();
    wait_health(&server, b.addr, 0).await;
    let got = answers(addr, 8, &[]).await;
    assert_eq!(
        (count(&got, "a"), count(&got, "b"), count(&got, "c")),
        (4, 0, 4),
        "{got:?}"
    );
    let stats = stats(&server).await;
    assert_eq!(stats["backends"]["default"]["healthy"], 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_follows_the_weights() {
    let (a, b) = (named("a", "no-store").await, named("b", "no-store").await);
    // Weight 0 is a spare: never drawn while the other can serve.
    let spare = format!(
        "policy = \"random\"\nservers = [\"http://{}\", {{ url = \"http://{}\", weight = 0 }}]",
        a.addr, b.addr
    );
    let text = format!(
        "listen = [\"127.0.0.1:0\"]\nadmin_listen = \"127.0.0.1:0\"\n[backends.default]\n{spare}\n"
    );
    let server = Server::start(Config::from_toml(&text).unwrap())
        .await
        .unwrap();
    let got = answers(server.http[0], 40, &[]).await;
    assert_eq!(count(&got, "a"), 40, "{got:?}");
    server.shutdown().await;
    // 1:3 with a fixed seed: the draws are the same every run; the bounds are wide anyway.
    let weighted = format!(
        "policy = \"random\"\nseed = 42\nservers = [\"http://{}\", {{ url = \"http://{}\", weight = 3 }}]",
        a.addr, b.addr
    );
    let text = format!("listen = [\"127.0.0.1:0\"]\nadmin_listen = \"127.0.0.1:0\"\n[backends.default]\n{weighted}\n");
    let server = Server::start(Config::from_toml(&text).unwrap())
        .await
        .unwrap();
    let got = answers(server.http[0], 200, &[]).await;
    let (on_a, on_b) = (count(&got, "a"), count(&got, "b"));
    assert_eq!(on_a + on_b, 200);
    assert!((25..=75).contains(&on_a), "a {on_a}, b {on_b}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hash_on_a_cookie_is_sticky_and_a_sick_server_moves_only_its_keys() {
    let servers = [
        named("a", "no-store").await,
        named("b", "no-store").await,
        named("c", "no-store").await,
    ];
    let refs: Vec<&Backend> = servers.iter().collect();
    let pool = format!("policy = \"hash\"\nhash_key = \"cookie:sid\"\n{FAST_PROBE}");
    let server = pool_proxy(&refs, &pool, "").await;
    let addr = server.http[0];
    // Twenty sessions, each asked five times (cookies: passed): always the same server.
    let mut placed = Vec::new();
    for s in 0..20 {
        let cookie = format!("sid=session-{s}; theme=dark");
        let got = answers(addr, 5, &[("cookie", &cookie)]).await;
        assert!(got.iter().all(|n| *n == got[0]), "session {s}: {got:?}");
        placed.push(got[0].clone());
    }
    let on = |name: &str| placed.iter().filter(|p| *p == name).count();
    assert!(on("a") > 0 && on("b") > 0 && on("c") > 0, "{placed:?}");
    // b stops: its sessions move, the others stay where they were.
    servers[1].stop();
    wait_health(&server, servers[1].addr, 0).await;
    for (s, was) in placed.iter().enumerate() {
        let cookie = format!("sid=session-{s}");
        let now = &answers(addr, 2, &[("cookie", &cookie)]).await[0];
        if was == "b" {
            assert_ne!(now, "b");
        } else {
            assert_eq!(now, was, "session {s} moved although its server is healthy");
        }
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_uses_the_first_healthy_server_in_order() {
    let (a, b) = (named("a", "no-store").await, named("b", "no-store").await);
    let a_addr = a.addr;
    let server = pool_proxy(
        &[&a, &b],
        &format!("policy = \"fallback\"\n{FAST_PROBE}"),
        "",
    )
    .await;
    let addr = server.http[0];
    assert_eq!(count(&answers(addr, 5, &[]).await, "a"), 5);
    a.stop();
    wait_health(&server, a_addr, 0).await;
    assert_eq!(count(&answers(addr, 5, &[]).await, "b"), 5);
    // a comes back on its port: first again once its probe says so.
    let _a = named_on(a_addr, "a").await;
    wait_health(&server, a_addr, 1).await;
    assert_eq!(count(&answers(addr, 5, &[]).await, "a"), 5);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_servers_sick_serves_stale_content() {
    let (a, b) = (named("a", "max-age=1").await, named("b", "max-age=1").await);
    let pool = format!("policy = \"round-robin\"\n{FAST_PROBE}");
    let server = pool_proxy(&[&a, &b], &pool, "grace = 0\nstale_if_error = 3600").await;
    let (addr, c) = (server.http[0], client());
    let first = get(&c, addr, "/page").await;
    assert_eq!(first.cache(), "miss");
    a.stop();
    b.stop();
    wait_health(&server, a.addr, 0).await;
    wait_health(&server, b.addr, 0).await;
    assert_eq!(stats(&server).await["backends"]["default"]["healthy"], 0);
    // Past its second of freshness ("Date" has whole seconds: up to two).
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let stale = get(&c, addr, "/page").await;
    assert_eq!((stale.status.as_u16(), stale.cache()), (200, "stale"));
    assert_eq!(stale.body, first.body);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_connections_sends_the_next_request_elsewhere_then_503() {
    let slow = |name: &'static str| {
        Backend::start(Duration::from_millis(1500), move |_| {
            reply(200, &[("cache-control", "no-store")], name)
        })
    };
    let (a, b) = (slow("a").await, slow("b").await);
    let server = pool_proxy(&[&a, &b], "policy = \"fallback\"\nmax_connections = 1", "").await;
    let addr = server.http[0];
    let first = tokio::spawn(async move { get(&client(), addr, "/1").await });
    eventually("a has the first request", || a.count() == 1).await;
    let second = tokio::spawn(async move { get(&client(), addr, "/2").await });
    eventually("b has the second request", || b.count() == 1).await;
    // Both full: refused at once with 503, as Varnish's .max_connections does.
    let third = get(&client(), addr, "/3").await;
    assert_eq!(third.status, 503);
    assert_eq!((a.count(), b.count()), (1, 1));
    assert_eq!(first.await.unwrap().body, "a");
    assert_eq!(second.await.unwrap().body, "b");
    let stats = stats(&server).await;
    let servers = &stats["backends"]["default"]["servers"];
    let a_state = &servers[a.addr.to_string()];
    assert_eq!(a_state["max_connections"], 1);
    assert_eq!(a_state["connections"], 0, "released when the body was read");
    assert!(a_state["busy"].as_u64().unwrap() >= 1);
    // With room again, a serves.
    assert_eq!(get(&client(), addr, "/4").await.body, "a");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_per_backend() {
    let slow = Backend::start(Duration::from_millis(1500), |_| {
        reply(200, &[("cache-control", "no-store")], "late")
    })
    .await;
    let text = format!(
        "backend = \"http://{0}\"\nlisten = [\"127.0.0.1:0\"]\nfirst_byte_timeout = 30\n\
         [backends.hurried]\nservers = [\"http://{0}\"]\nfirst_byte_timeout = 0.2\n\
         [[rule]]\npath_prefix = \"/hurried/\"\nbackend = \"hurried\"\n",
        slow.addr
    );
    let server = Server::start(Config::from_toml(&text).unwrap())
        .await
        .unwrap();
    let (addr, c) = (server.http[0], client());
    let hurried = get(&c, addr, "/hurried/x").await;
    assert_eq!(hurried.status, 503);
    let patient = get(&c, addr, "/x").await;
    assert_eq!(
        (patient.status.as_u16(), &patient.body[..]),
        (200, &b"late"[..])
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_per_server_in_a_pool() {
    // Both servers answer after 1.5 s; a's own first_byte_timeout is 0.2 s, b has the pool's
    // 30 s. Round-robin gives each one of two requests.
    let slow = |name: &'static str| {
        Backend::start(Duration::from_millis(1500), move |_| {
            reply(200, &[("cache-control", "no-store")], name)
        })
    };
    let (a, b) = (slow("a").await, slow("b").await);
    let text = format!(
        "listen = [\"127.0.0.1:0\"]\nfirst_byte_timeout = 0.1\n[backends.default]\n\
         servers = [{{ url = \"http://{}\", first_byte_timeout = 0.2 }}, \"http://{}\"]\n\
         first_byte_timeout = 30\nbetween_bytes_timeout = 30\n",
        a.addr, b.addr
    );
    let config = Config::from_toml(&text).unwrap();
    let servers = &config.backends[0].servers;
    assert_eq!(
        servers[0].timeouts.first_byte,
        Some(Duration::from_millis(200))
    );
    assert_eq!(
        servers[1].timeouts,
        Default::default(),
        "b takes the pool's"
    );
    let server = Server::start(config).await.unwrap();
    let (addr, c) = (server.http[0], client());
    let mut got = Vec::new();
    for i in 0..2 {
        let answer = get(&c, addr, &format!("/r/{i}")).await;
        got.push((answer.status.as_u16(), answer.body.to_vec()));
    }
    got.sort();
    assert_eq!(got[0], (200, b"b".to_vec()), "b waited: {got:?}");
    assert_eq!(got[1].0, 503, "a timed out: {got:?}");
    assert_eq!((a.count(), b.count()), (1, 1));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_server_health_in_stats_and_metrics() {
    let (a, b) = (named("a", "no-store").await, named("b", "no-store").await);
    let server = pool_proxy(&[&a, &b], FAST_PROBE, "").await;
    b.stop();
    wait_health(&server, b.addr, 0).await;
    let stats = stats(&server).await;
    let servers = &stats["backends"]["default"]["servers"];
    assert_eq!(servers[a.addr.to_string()]["healthy"], 1);
    assert_eq!(servers[a.addr.to_string()]["probe"], "1/1");
    assert_eq!(servers[b.addr.to_string()]["probe"], "0/1");
    let metrics = get(&client(), server.admin.unwrap(), "/metrics").await;
    let text = String::from_utf8(metrics.body.to_vec()).unwrap();
    let line = |addr: SocketAddr, up: u8| {
        format!("kura_http_backend_server_up{{backend=\"default\",server=\"{addr}\"}} {up}")
    };
    assert!(text.contains(&line(a.addr, 1)), "{text}");
    assert!(text.contains(&line(b.addr, 0)), "{text}");
    assert!(
        text.contains("kura_http_backend_up{backend=\"default\"} 1"),
        "{text}"
    );
    server.shutdown().await;
}

// Issue 42's security point: a hash key from a client's field picks the server of that
// client's passes, never the server that fills an object every client gets, and it is not in
// the cache key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_header_does_not_choose_who_fills_a_shared_object() {
    let (a, b) = (
        named("a", "max-age=60").await,
        named("b", "max-age=60").await,
    );
    let pool = "policy = \"hash\"\nhash_key = \"header:x-user\"";
    let server = pool_proxy(&[&a, &b], pool, "[purge]\nallow = [\"127.0.0.0/8\"]").await;
    let (addr, c) = (server.http[0], client());
    // Passes (POST) follow the header: both servers get some users, each user one server.
    let mut by_user = Vec::new();
    for u in 0..16 {
        let user = format!("user-{u}");
        let one = send(&c, addr, "POST", "/form", &[("x-user", &user)])
            .await
            .body;
        let two = send(&c, addr, "POST", "/form", &[("x-user", &user)])
            .await
            .body;
        assert_eq!(one, two);
        by_user.push(one);
    }
    assert!(
        by_user.iter().any(|n| n == "a") && by_user.iter().any(|n| n == "b"),
        "{by_user:?}"
    );
    // A shared object: whatever the header, the URL picks the server that fills it.
    for i in 0..8 {
        let path = format!("/shared/{i}");
        let mut fillers = Vec::new();
        for u in 0..4 {
            let user = format!("user-{u}");
            let got = send(&c, addr, "GET", &path, &[("x-user", &user)]).await;
            assert_eq!(got.cache(), "miss", "{path}");
            fillers.push(got.body);
            let purge = send(&c, addr, "PURGE", &path, &[]).await;
            assert_eq!(purge.status, 200);
        }
        assert!(
            fillers.iter().all(|f| *f == fillers[0]),
            "{path}: {fillers:?}"
        );
    }
    // The header is not in the key: another user's request is a hit of the same object.
    let filled = send(&c, addr, "GET", "/page", &[("x-user", "user-1")]).await;
    let other = send(&c, addr, "GET", "/page", &[("x-user", "user-2")]).await;
    assert_eq!((filled.cache(), other.cache()), ("miss", "hit"));
    assert_eq!(filled.body, other.body);
    server.shutdown().await;
}
