//! The Prometheus endpoint (`--metrics-listen`): after some traffic a
//! scrape is valid text format (checked by the small parser below) with
//! memcached_exporter's names and the right values; garbage, oversized and
//! idle HTTP clients neither crash it nor reach the cache's clients.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{bin, set_extras, Client};
use kura_server::{Server, ServerConfig, ServerHandle};

struct Running {
    handle: Option<ServerHandle>,
    addr: SocketAddr,
    metrics: SocketAddr,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
            h.join();
        }
    }
}

fn start() -> Running {
    let config = ServerConfig {
        port: 0,
        threads: 2,
        metrics_listen: Some("127.0.0.1:0".into()),
        ..ServerConfig::default()
    };
    let server = Server::bind(config).expect("bind");
    let addr = server.local_addr().expect("tcp");
    let metrics = server.metrics_addr().expect("metrics address");
    let handle = server.start().expect("start");
    Running {
        handle: Some(handle),
        addr,
        metrics,
    }
}

/// Sends `request` as is and returns everything the server sent back
/// before closing.
fn http(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// A scrape: (status line, headers, body).
fn scrape(addr: SocketAddr) -> (String, String, String) {
    let raw = http(
        addr,
        b"GET /metrics HTTP/1.1\r\nHost: kura\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8(raw).expect("utf-8 reply");
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    (status.to_string(), headers.to_lowercase(), body.to_string())
}

#[derive(Debug)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `{a="x",b="y"}` and the text after it.
fn parse_labels(s: &str) -> (Vec<(String, String)>, &str) {
    let mut labels = Vec::new();
    let mut rest = s.strip_prefix('{').expect("labels open");
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return (labels, r);
        }
        let eq = rest.find('=').expect("label =");
        let name = &rest[..eq];
        assert!(valid_name(name), "label name {name:?}");
        let mut chars = rest[eq + 1..].char_indices();
        assert_eq!(chars.next().map(|c| c.1), Some('"'), "label value quoted");
        let mut value = String::new();
        let end = loop {
            match chars.next().expect("label value closed") {
                (_, '\\') => match chars.next().expect("escape").1 {
                    'n' => value.push('\n'),
                    c @ ('\\' | '"') => value.push(c),
                    c => panic!("bad escape \\{c}"),
                },
                (i, '"') => break eq + 1 + i + 1,
                (_, c) => value.push(c),
            }
        };
        labels.push((name.to_string(), value));
        rest = &rest[end..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// Parses the text format strictly: every sample belongs to a family
/// declared once with `# TYPE` before it, a family's samples are together,
/// names and labels are well formed, values are numbers.
fn parse(body: &str) -> (HashMap<String, String>, Vec<Sample>) {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut samples = Vec::new();
    let mut closed: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            let (kind, name) = (words.next().unwrap(), words.next().expect("a name"));
            assert!(valid_name(name), "{line}");
            if kind == "TYPE" {
                let t = words.next().expect("a type");
                assert!(
                    ["counter", "gauge", "histogram", "summary", "untyped"].contains(&t),
                    "{line}"
                );
                assert!(
                    types.insert(name.to_string(), t.to_string()).is_none(),
                    "{line}"
                );
            }
            continue;
        }
        assert!(!line.is_empty(), "an empty line");
        let name_end = line.find(['{', ' ']).expect("a sample");
        let name = &line[..name_end];
        assert!(valid_name(name), "{line}");
        let (labels, rest) = if line[name_end..].starts_with('{') {
            parse_labels(&line[name_end..])
        } else {
            (Vec::new(), &line[name_end..])
        };
        let value = match rest.trim() {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("value in {line}")),
        };
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|t| t == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "no TYPE before {line}");
        if family != current {
            assert!(!closed.contains(&family.to_string()), "{family} split");
            closed.push(std::mem::replace(&mut current, family.to_string()));
        }
        samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    (types, samples)
}

/// The value of the sample `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(a, b)| a == k && b == v))
        })
        .unwrap_or_else(|| panic!("no {name} {labels:?}"))
        .value
}

#[test]
fn a_scrape_after_traffic_has_the_exporters_names_and_values() {
    let s = start();
    let mut c = Client::connect(s.addr);
    for i in 0..5 {
        c.roundtrip(
            format!("set k{i} 0 0 2\r\nhi\r\n").as_bytes(),
            b"STORED\r\n",
        );
    }
    c.roundtrip(
        b"get k0 k1 nope\r\n",
        b"VALUE k0 0 2\r\nhi\r\nVALUE k1 0 2\r\nhi\r\nEND\r\n",
    );
    c.roundtrip(b"delete k4\r\ndelete k4\r\n", b"DELETED\r\nNOT_FOUND\r\n");
    c.roundtrip(b"set n 0 0 1\r\n1\r\nincr n 5\r\n", b"STORED\r\n6\r\n");
    c.roundtrip(b"touch k0 100\r\n", b"TOUCHED\r\n");
    c.roundtrip(b"cas k0 0 0 1 999\r\nx\r\n", b"EXISTS\r\n");
    c.roundtrip(b"ms m 1\r\nx\r\nmg m v\r\n", b"HD\r\nVA 1\r\nx\r\n");
    let r = Client::connect(s.addr).bin_call(&bin(0x01, &set_extras(0, 0), b"b", b"v", 0, 0));
    assert_eq!(r.status(), 0);

    let (status, headers, body) = scrape(s.metrics);
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("content-type: text/plain; version=0.0.4"),
        "{headers}"
    );
    let (types, samples) = parse(&body);
    let v = |name: &str| value(&samples, name, &[]);
    let cmd = |c: &str, st: &str| {
        value(
            &samples,
            "memcached_commands_total",
            &[("command", c), ("status", st)],
        )
    };
    // The same figures `stats` gives, under the exporter's names.
    c.send(b"stats\r\n");
    let stats = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    let stat = |name: &str| -> f64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no stat {name}"))
    };
    for (command, status, figure) in [
        ("get", "hit", "get_hits"),
        ("get", "miss", "get_misses"),
        ("delete", "hit", "delete_hits"),
        ("delete", "miss", "delete_misses"),
        ("incr", "hit", "incr_hits"),
        ("decr", "miss", "decr_misses"),
        ("touch", "hit", "touch_hits"),
        ("cas", "badval", "cas_badval"),
        ("flush", "hit", "cmd_flush"),
    ] {
        assert_eq!(cmd(command, status), stat(figure), "{figure}");
    }
    assert_eq!(v("memcached_up"), 1.0);
    assert_eq!(cmd("get", "miss"), 1.0);
    assert_eq!(cmd("delete", "hit"), 1.0);
    assert_eq!(cmd("delete", "miss"), 1.0);
    assert_eq!(cmd("cas", "badval"), 1.0);
    // cmd_set less the CAS commands, as the exporter counts sets.
    assert_eq!(cmd("set", "hit"), stat("cmd_set") - 1.0);
    assert_eq!(cmd("set", "hit"), 8.0);
    assert_eq!(v("memcached_current_items"), 7.0);
    assert_eq!(v("memcached_current_items"), stat("curr_items"));
    assert_eq!(v("memcached_items_evicted_total"), 0.0);
    assert!(v("memcached_current_bytes") > 0.0);
    assert_eq!(v("memcached_limit_bytes"), 64.0 * 1024.0 * 1024.0);
    assert_eq!(v("memcached_max_connections"), 1024.0);
    assert!(v("memcached_current_connections") >= 1.0);
    assert!(v("memcached_read_bytes_total") > 0.0);
    assert!(v("memcached_written_bytes_total") > 0.0);
    assert!(v("memcached_uptime_seconds") >= 0.0);
    assert_eq!(types["memcached_commands_total"], "counter");
    assert_eq!(types["memcached_current_items"], "gauge");
    let version = samples
        .iter()
        .find(|s| s.name == "memcached_version")
        .expect("memcached_version");
    assert_eq!(version.labels[0].1, "1.6.18");
    // Other stats figures under kura_, and kura's own.
    assert_eq!(v("kura_cmd_get"), stat("cmd_get"));
    assert_eq!(v("kura_values_receiving_bytes"), 0.0);
    assert!(v("kura_values_receiving_limit_bytes") >= 16.0 * 1024.0 * 1024.0);

    // Latency: one sample per request, cumulative buckets.
    let h = "kura_command_duration_seconds";
    assert_eq!(types[h], "histogram");
    let count = |c: &str| value(&samples, &format!("{h}_count"), &[("command", c)]);
    assert_eq!(count("get"), 1.0);
    assert_eq!(count("set"), 8.0, "5 sets, n, cas, the binary set");
    assert_eq!(count("ms"), 1.0);
    assert_eq!(count("mg"), 1.0);
    assert_eq!(count("delete"), 2.0);
    assert_eq!(count("incr_decr"), 1.0);
    assert_eq!(count("touch"), 1.0);
    let buckets: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == format!("{h}_bucket") && s.labels[0].1 == "set")
        .collect();
    assert_eq!(buckets.last().map(|b| b.labels[1].1.as_str()), Some("+Inf"));
    assert!(buckets.windows(2).all(|w| w[0].value <= w[1].value));
    assert_eq!(buckets.last().map(|b| b.value), Some(8.0));
    assert!(value(&samples, &format!("{h}_sum"), &[("command", "set")]) > 0.0);
}

#[test]
fn bad_http_does_not_hurt_the_server() {
    let s = start();
    // Garbage, a head over the limit, a wrong path and method.
    let garbage = http(s.metrics, b"\x00\x01\x02 garbage \xff\r\n\r\n");
    assert!(garbage.is_empty() || garbage.starts_with(b"HTTP/1.1 400"));
    let mut huge = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 64 * 1024));
    huge.extend_from_slice(b"\r\n\r\n");
    let reply = http(s.metrics, &huge);
    assert!(
        reply.is_empty() || reply.starts_with(b"HTTP/1.1 431"),
        "{:?}",
        String::from_utf8_lossy(&reply)
    );
    let reply = http(s.metrics, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(reply.starts_with(b"HTTP/1.1 404"));
    let reply = http(
        s.metrics,
        b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
    );
    assert!(reply.starts_with(b"HTTP/1.1 405"));

    // Scrapers that connect and say nothing fill the slots; one more is
    // closed at once, and the cache's own clients are served meanwhile.
    let idle: Vec<TcpStream> = (0..kura_server::prometheus::MAX_SCRAPERS)
        .map(|_| TcpStream::connect(s.metrics).expect("connect"))
        .collect();
    let mut c = Client::connect(s.addr);
    c.roundtrip(
        b"set a 0 0 1\r\nx\r\nget a\r\n",
        b"STORED\r\nVALUE a 0 1\r\nx\r\nEND\r\n",
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = http(s.metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        if reply.is_empty() {
            break;
        }
        // The slots were not all taken yet when this one came.
        assert!(
            Instant::now() < deadline,
            "a scraper beyond the limit was served"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = http(s.metrics, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        if reply.starts_with(b"HTTP/1.1 200 OK") {
            let (_, _, body) = scrape(s.metrics);
            parse(&body);
            break;
        }
        assert!(Instant::now() < deadline, "the slots never came back");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_metrics_address_needs_a_port() {
    let config = ServerConfig {
        port: 0,
        metrics_listen: Some("127.0.0.1".into()),
        ..ServerConfig::default()
    };
    let err = Server::bind(config).err().expect("refused");
    assert!(err.to_string().contains("host:port"), "{err}");
}

/// The status line and body of `METHOD path` on the metrics listener.
fn call(addr: SocketAddr, method: &str, path: &str) -> (String, String) {
    let raw = http(
        addr,
        format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    );
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.lines().next().unwrap_or_default().to_string();
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// What a load balancer, an orchestrator and an operator without signals
/// ask: live, ready, reload.
#[test]
fn health_readiness_and_reload_on_the_metrics_listener() {
    let s = start();
    assert_eq!(
        call(s.metrics, "GET", "/healthz"),
        ("HTTP/1.1 200 OK".into(), "ok\n".into())
    );
    assert_eq!(
        call(s.metrics, "GET", "/readyz"),
        ("HTTP/1.1 200 OK".into(), "ready\n".into())
    );
    // No auth or TLS files: nothing to read, and said so.
    let (status, body) = call(s.metrics, "POST", "/reload");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(body, "reloaded: no files to read\n");
    let raw = http(
        s.metrics,
        b"GET /reload HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    assert!(
        text.starts_with("http/1.1 405") && text.contains("allow: post"),
        "{text}"
    );
}
