//! `kura proxy` in front of kura servers and Debian's memcached: the same
//! requests give the same bytes through the proxy (three backends) as from
//! one server directly; multi-gets split across backends come back in the
//! client's order; `noreply` and quiet requests answer exactly; binary
//! clients; memccapable -a and -b; placement equal to nutcracker's.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::proxy::{ask, backends, bin, have, pool_of, proxy, proxy_for, read_bin, silent, Kind};
use common::Server;

/// Every text and meta command with deterministic replies (no CAS values),
/// errors and `noreply` among them, ended by `mn`.
const SCRIPT: &[u8] = b"flush_all\r\n\
set a 5 0 2\r\nhi\r\nget a\r\nadd a 0 0 1\r\nx\r\nreplace zz 0 0 1\r\nx\r\n\
append a 0 0 1\r\n!\r\nprepend a 0 0 1\r\n<\r\nget a zz a\r\ndelete zz\r\n\
set n 0 0 2\r\n10\r\nincr n 5\r\ndecr n 100\r\nincr zz 1\r\nset s 0 0 1\r\nx\r\nincr s 1\r\n\
touch a 100\r\ntouch zz 100\r\ngat 100 a zz\r\ndelete a\r\nget a\r\n\
set q 0 0 1 noreply\r\nx\r\nget q\r\ndelete q noreply\r\nget q\r\nincr n 7 noreply\r\nget n\r\n\
add n 0 0 1 noreply\r\nx\r\nget n\r\n\
mg n v\r\nmg zz v\r\nmg zz v q\r\nmg n v O123 k f t\r\nms m 2 F9 T0\r\nab\r\nmg m v f O1\r\n\
ms m 1 q\r\nc\r\nms m 1 ME q\r\nd\r\nmd m q\r\nmd m\r\nmd m q O4\r\nma n\r\nma n v D5 MD O9\r\n\
ma zz v N0 J7\r\nma zz v q\r\nmg zz v q k\r\nmn\r\n\
bogus\r\nget\r\nverbosity 1\r\nset x 0 0 z\r\nversion\r\nmn\r\n";

fn run_script(port: u16, host: &str) -> String {
    let mut c = std::net::TcpStream::connect((host, port)).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut out = Vec::new();
    // The whole script in one write: the proxy must keep it in order.
    let end = b"VERSION 1.6.18\r\nMN\r\n";
    out.extend(ask(&mut c, SCRIPT, end));
    String::from_utf8_lossy(&out).into_owned()
}

fn same_bytes_as_one_server(kind: Kind) {
    let direct = backends(kind, 1);
    let three = backends(kind, 3);
    let p = proxy_for(&three, &[]);
    let want = run_script(direct[0].port, "127.0.0.1");
    let got = run_script(p.port, "127.0.0.1");
    assert_eq!(got, want);
    // The keys really are spread (over the script's few keys, at least two
    // backends).
    let mut used = 0;
    for b in &three {
        let mut c = b.connect();
        let r = ask(&mut c, b"stats\r\n", b"END\r\n");
        let s = String::from_utf8_lossy(&r);
        let cmds: u64 = s
            .lines()
            .filter_map(|l| {
                l.strip_prefix("STAT cmd_set ")
                    .or_else(|| l.strip_prefix("STAT cmd_get "))
            })
            .map(|v| v.trim().parse::<u64>().unwrap())
            .sum();
        used += usize::from(cmds > 0);
    }
    assert!(used >= 2, "one backend got every key");
}

#[test]
fn the_proxy_answers_as_one_kura_server() {
    same_bytes_as_one_server(Kind::Kura);
}

#[test]
fn the_proxy_answers_as_one_memcached() {
    if !have("/usr/bin/memcached", "memcached") {
        return;
    }
    same_bytes_as_one_server(Kind::Memcached);
}

#[test]
fn a_multi_get_is_split_per_backend_and_answered_in_the_clients_order() {
    let three = backends(Kind::Kura, 3);
    let p = proxy_for(&three, &[]);
    let mut c = p.connect();
    let mut req = Vec::new();
    for i in 0..300 {
        req.extend_from_slice(
            format!("set key:{i} {i} 0 {}\r\nv{i}\r\n", format!("v{i}").len()).as_bytes(),
        );
    }
    let r = ask(&mut c, &req, "STORED\r\n".repeat(300).as_bytes());
    assert_eq!(r.len(), 300 * 8);
    // Reverse order, a duplicate and misses in between.
    let mut get = b"get".to_vec();
    let mut want = Vec::new();
    for i in (0..300).rev() {
        get.extend_from_slice(format!(" key:{i} nokey:{i}").as_bytes());
        want.extend_from_slice(
            format!("VALUE key:{i} {i} {}\r\nv{i}\r\n", format!("v{i}").len()).as_bytes(),
        );
    }
    get.extend_from_slice(b" key:7\r\n");
    want.extend_from_slice(b"VALUE key:7 7 2\r\nv7\r\nEND\r\n");
    assert_eq!(
        String::from_utf8_lossy(&ask(&mut c, &get, b"END\r\n")),
        String::from_utf8_lossy(&want)
    );
    // Each key is on exactly one backend, the one libmemcached's ketama
    // names (the quick start's default ring).
    let servers: Vec<kura_ring::Server> = three
        .iter()
        .map(|s| kura_ring::Server::new("127.0.0.1", s.port))
        .collect();
    let ring = kura_ring::Ring::new(kura_ring::Kind::Libmemcached, servers).unwrap();
    let mut conns: Vec<_> = three.iter().map(Server::connect).collect();
    for i in (0..300).step_by(7) {
        let key = format!("key:{i}");
        let owner = ring.index_for(key.as_bytes());
        for (j, bc) in conns.iter_mut().enumerate() {
            let r = ask(bc, format!("get {key}\r\n").as_bytes(), b"END\r\n");
            assert_eq!(r.starts_with(b"VALUE"), j == owner, "{key} on backend {j}");
        }
    }
}

#[test]
fn noreply_and_quiet_requests_get_no_reply_and_lose_none() {
    let three = backends(Kind::Kura, 3);
    let p = proxy_for(&three, &[]);
    let mut c = p.connect();
    // memcached's proxy bug #1312: `delete k noreply` answered anyway.
    assert_eq!(ask(&mut c, b"set k 0 0 1\r\nx\r\n", b"\r\n"), b"STORED\r\n");
    c.write_all(b"delete k noreply\r\n").unwrap();
    assert!(silent(&mut c), "a reply to a noreply delete");
    assert_eq!(ask(&mut c, b"get k\r\n", b"END\r\n"), b"END\r\n");
    // A pipelined burst of noreply sets then gets, one write: every get
    // reads its own connection's write.
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..2000 {
        req.extend_from_slice(
            format!("set p{i} 0 0 5 noreply\r\n{i:05}\r\nget p{i}\r\n").as_bytes(),
        );
        want.extend_from_slice(format!("VALUE p{i} 0 5\r\n{i:05}\r\nEND\r\n").as_bytes());
    }
    let got = ask(&mut c, &req, b"VALUE p1999 0 5\r\n01999\r\nEND\r\n");
    assert_eq!(got, want);
    assert!(silent(&mut c));
    // Quiet meta: misses and successes say nothing, the MN ends the batch.
    let r = ask(
        &mut c,
        b"mg nope v q\r\nms qk 1 q\r\nz\r\nmd nope2 q\r\nmg qk v q\r\nmn\r\n",
        b"MN\r\n",
    );
    assert_eq!(r, b"NF\r\nVA 1\r\nz\r\nMN\r\n");
    assert!(silent(&mut c));
}

#[test]
fn binary_clients_are_answered_as_memcached_does() {
    let three = backends(Kind::Kura, 3);
    let p = proxy_for(&three, &[]);
    let mut c = p.connect();
    let flags = 0xdead_beefu32.to_be_bytes();
    let mut set_extras = flags.to_vec();
    set_extras.extend_from_slice(&0u32.to_be_bytes());
    // A key meta cannot carry as is (a space): it goes base64.
    let key = b"with space\x01";
    let mut req = bin(0x01, key, &set_extras, b"val", 1, 0);
    req.extend(bin(0x0d, b"missing", b"", b"", 2, 0)); // GETKQ miss: silent
    req.extend(bin(0x0c, key, b"", b"", 3, 0)); // GETK hit
    req.extend(bin(0x02, key, &set_extras, b"x", 4, 0)); // ADD existing
    req.extend(bin(0x04, b"missing", b"", b"", 5, 0)); // DELETE miss
    let mut arith = 3u64.to_be_bytes().to_vec();
    arith.extend_from_slice(&40u64.to_be_bytes());
    arith.extend_from_slice(&0u32.to_be_bytes());
    req.extend(bin(0x05, b"ctr", &arith, b"", 6, 0)); // INCR creates 40
    req.extend(bin(0x05, b"ctr", &arith, b"", 7, 0)); // 43
    req.extend(bin(0x0a, b"", b"", b"", 8, 0)); // NOOP
    c.write_all(&req).unwrap();
    let r = read_bin(&mut c);
    assert_eq!((r.opcode, r.status, r.opaque), (0x01, 0, 1));
    let cas = r.cas;
    let r = read_bin(&mut c);
    assert_eq!((r.opcode, r.status, r.opaque, r.cas), (0x0c, 0, 3, cas));
    assert_eq!(
        (r.extras.as_slice(), r.key.as_slice(), r.value.as_slice()),
        (&flags[..], &key[..], &b"val"[..])
    );
    let r = read_bin(&mut c);
    assert_eq!((r.opcode, r.status, r.opaque), (0x02, 2, 4));
    let r = read_bin(&mut c);
    assert_eq!((r.opcode, r.status, r.opaque), (0x04, 1, 5));
    let r = read_bin(&mut c);
    assert_eq!((r.status, r.value), (0, 40u64.to_be_bytes().to_vec()));
    let r = read_bin(&mut c);
    assert_eq!((r.status, r.value), (0, 43u64.to_be_bytes().to_vec()));
    let r = read_bin(&mut c);
    assert_eq!((r.opcode, r.status, r.opaque), (0x0a, 0, 8));
    assert!(silent(&mut c));
    // CAS through the text protocol on the same key space.
    let mut t = p.connect();
    let r =
        String::from_utf8(ask(&mut t, b"set ck 0 0 1\r\na\r\ngets ck\r\n", b"END\r\n")).unwrap();
    let cas: u64 = r
        .lines()
        .nth(1)
        .unwrap()
        .split(' ')
        .nth(4)
        .unwrap()
        .parse()
        .unwrap();
    let r = ask(
        &mut t,
        format!("cas ck 0 0 1 {cas}\r\nb\r\ncas ck 0 0 1 {cas}\r\nc\r\ncas nock 0 0 1 1\r\nd\r\n")
            .as_bytes(),
        b"NOT_FOUND\r\n",
    );
    assert_eq!(r, b"STORED\r\nEXISTS\r\nNOT_FOUND\r\n");
}

fn memccapable(kind: Kind) {
    if !have("/usr/bin/memccapable", "libmemcached-tools") {
        return;
    }
    let three = backends(kind, 3);
    let p = proxy_for(&three, &[]);
    for mode in ["-a", "-b"] {
        let out = Command::new("memccapable")
            .args(["-h", "127.0.0.1", "-p", &p.port.to_string(), mode])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("All tests passed"),
            "memccapable {mode}:\n{text}"
        );
    }
}

#[test]
fn memccapable_passes_through_the_proxy_to_kura() {
    memccapable(Kind::Kura);
}

#[test]
fn memccapable_passes_through_the_proxy_to_memcached() {
    if !have("/usr/bin/memcached", "memcached") {
        return;
    }
    memccapable(Kind::Memcached);
}

/// nutcracker with a twemproxy pool of named nodes fills 10,000 keys;
/// the proxy with the same pool in its TOML finds every one of them.
#[test]
fn placement_equals_nutcrackers_for_ten_thousand_keys() {
    if !have("/usr/sbin/nutcracker", "nutcracker") {
        return;
    }
    let three = backends(Kind::Kura, 3);
    let dir = common::tempdir("proxy-nutcracker");
    let nport = common::free_port();
    let servers: Vec<String> = three
        .iter()
        .enumerate()
        .map(|(i, s)| format!("127.0.0.1:{}:{} node{i}", s.port, i + 1))
        .collect();
    let yml = format!(
        "pool:\n  listen: 127.0.0.1:{nport}\n  hash: murmur\n  distribution: ketama\n  auto_eject_hosts: false\n  servers:\n{}",
        servers.iter().map(|s| format!("    - {s}\n")).collect::<String>()
    );
    std::fs::write(dir.join("n.yml"), yml).unwrap();
    let child = Command::new("/usr/sbin/nutcracker")
        .arg("-c")
        .arg(dir.join("n.yml"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let nut = Server::adopt(child, "127.0.0.1", nport);
    let mut c = nut.connect();
    for chunk in (0..10_000).collect::<Vec<_>>().chunks(500) {
        let mut req = Vec::new();
        for i in chunk {
            req.extend_from_slice(
                format!("set nk{i} 0 0 {}\r\n{i}\r\n", i.to_string().len()).as_bytes(),
            );
        }
        let r = ask(&mut c, &req, "STORED\r\n".repeat(chunk.len()).as_bytes());
        assert_eq!(r.len(), chunk.len() * 8);
    }
    let toml = format!(
        "[pools.tw]\nring = \"twemproxy\"\nhash = \"murmur\"\nservers = [{}]\n",
        servers
            .iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    std::fs::write(dir.join("p.toml"), toml).unwrap();
    let cfg = dir.join("p.toml");
    let p = proxy(&["--config", cfg.to_str().unwrap()]);
    let mut c = p.connect();
    for chunk in (0..10_000).collect::<Vec<_>>().chunks(200) {
        let mut req = b"get".to_vec();
        let mut want = Vec::new();
        for i in chunk {
            req.extend_from_slice(format!(" nk{i}").as_bytes());
            want.extend_from_slice(
                format!("VALUE nk{i} 0 {}\r\n{i}\r\n", i.to_string().len()).as_bytes(),
            );
        }
        req.extend_from_slice(b"\r\n");
        want.extend_from_slice(b"END\r\n");
        assert_eq!(
            String::from_utf8_lossy(&ask(&mut c, &req, b"END\r\n")),
            String::from_utf8_lossy(&want)
        );
    }
    // And the ring really matters: the quick start's ketama misses some.
    let q = proxy(&["--pool", &pool_of(&three)]);
    let mut c = q.connect();
    let mut req = b"get".to_vec();
    for i in 0..300 {
        req.extend_from_slice(format!(" nk{i}").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    let r = ask(&mut c, &req, b"END\r\n");
    let hits = r.windows(5).filter(|w| w == b"VALUE").count();
    assert!(hits < 300, "another ring found every key");
}

#[test]
fn stats_and_metrics_count_per_pool_and_backend() {
    let three = backends(Kind::Kura, 3);
    let mport = common::free_port();
    let maddr = format!("127.0.0.1:{mport}");
    let p = proxy_for(&three, &["--metrics-listen", &maddr]);
    let mut c = p.connect();
    let mut req = Vec::new();
    for i in 0..30 {
        req.extend_from_slice(format!("set s{i} 0 0 1\r\nx\r\n").as_bytes());
    }
    ask(&mut c, &req, "STORED\r\n".repeat(30).as_bytes());
    ask(&mut c, b"get s1 s2 nope\r\n", b"END\r\n");
    let stats = String::from_utf8(ask(&mut c, b"stats\r\n", b"END\r\n")).unwrap();
    let stat = |name: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
            .unwrap_or_else(|| panic!("no {name} in {stats}"))
            .parse()
            .unwrap()
    };
    assert_eq!(
        (
            stat("cmd_set"),
            stat("cmd_get"),
            stat("get_hits"),
            stat("get_misses")
        ),
        (30, 3, 2, 1)
    );
    assert_eq!(stat("curr_connections"), 1);
    let per_backend: u64 = three
        .iter()
        .map(|b| stat(&format!("backend:127.0.0.1:{}:requests", b.port)))
        .sum();
    assert_eq!(per_backend, stat("pool:default:requests"));
    assert!(per_backend >= 31);
    assert_eq!(
        stat(&format!("backend:127.0.0.1:{}:journal_keys", three[0].port)),
        0
    );
    let mut m = std::net::TcpStream::connect(&maddr).unwrap();
    m.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    std::io::Read::read_to_string(&mut m, &mut page).unwrap();
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("memcached_up 1\n"));
    assert!(
        page.contains("memcached_commands_total{command=\"get\",status=\"hit\"} 2\n"),
        "{page}"
    );
    let line = format!(
        "kura_proxy_backend_serving{{backend=\"127.0.0.1:{}\"}} 1\n",
        three[1].port
    );
    assert!(page.contains(&line), "{page}");
}
