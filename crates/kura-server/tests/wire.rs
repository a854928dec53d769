//! Wire-level tests: a real server on port 0, request bytes in, reply bytes
//! compared exactly. One table per command family, then pipelining.

mod common;

use common::TestServer;

/// Runs `(request, expected reply)` pairs in order on one connection.
fn table(server: &TestServer, cases: &[(&str, &str)]) {
    let mut c = server.connect();
    for (req, want) in cases {
        c.roundtrip(req.as_bytes(), want.as_bytes());
    }
}

#[test]
fn storage_commands() {
    let s = TestServer::start();
    table(
        &s,
        &[
            ("set a 5 0 3\r\nabc\r\n", "STORED\r\n"),
            ("get a\r\n", "VALUE a 5 3\r\nabc\r\nEND\r\n"),
            ("add a 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
            ("add b 0 0 1\r\nx\r\n", "STORED\r\n"),
            ("replace c 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
            ("replace b 7 0 2\r\nyy\r\n", "STORED\r\n"),
            ("get b\r\n", "VALUE b 7 2\r\nyy\r\nEND\r\n"),
            ("append a 9 0 2\r\nde\r\n", "STORED\r\n"),
            ("prepend a 9 0 2\r\n01\r\n", "STORED\r\n"),
            // append and prepend keep the old flags.
            ("get a\r\n", "VALUE a 5 7\r\n01abcde\r\nEND\r\n"),
            ("append nope 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
            ("prepend nope 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
            ("set empty 0 0 0\r\n\r\n", "STORED\r\n"),
            ("get empty\r\n", "VALUE empty 0 0\r\n\r\nEND\r\n"),
            ("set bin 4294967295 0 4\r\n\x00\r\n\x01\r\n", "STORED\r\n"),
            (
                "get bin\r\n",
                "VALUE bin 4294967295 4\r\n\x00\r\n\x01\r\nEND\r\n",
            ),
        ],
    );
}

#[test]
fn cas() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.roundtrip(b"set k 0 0 1\r\na\r\n", b"STORED\r\n");
    c.send(b"gets k\r\n");
    let reply = c.read_until(b"END\r\n");
    let line = String::from_utf8(reply[..reply.iter().position(|&b| b == b'\r').unwrap()].to_vec())
        .unwrap();
    let cas: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    c.roundtrip(
        format!("cas k 0 0 1 {}\r\nb\r\n", cas + 1000).as_bytes(),
        b"EXISTS\r\n",
    );
    c.roundtrip(
        format!("cas k 3 0 1 {cas}\r\nb\r\n").as_bytes(),
        b"STORED\r\n",
    );
    c.roundtrip(
        format!("cas k 0 0 1 {cas}\r\nc\r\n").as_bytes(),
        b"EXISTS\r\n",
    );
    c.roundtrip(b"cas missing 0 0 1 1\r\nc\r\n", b"NOT_FOUND\r\n");
    c.roundtrip(b"get k\r\n", b"VALUE k 3 1\r\nb\r\nEND\r\n");
    c.roundtrip(
        format!("cas k 0 0 1 {cas} noreply\r\nz\r\n").as_bytes(),
        b"",
    );
    c.roundtrip(b"get k\r\n", b"VALUE k 3 1\r\nb\r\nEND\r\n");
}

#[test]
fn retrieval_commands() {
    let s = TestServer::start();
    table(
        &s,
        &[
            ("set a 1 0 1\r\nA\r\n", "STORED\r\n"),
            ("set b 2 0 1\r\nB\r\n", "STORED\r\n"),
            (
                "get a b c a\r\n",
                "VALUE a 1 1\r\nA\r\nVALUE b 2 1\r\nB\r\nVALUE a 1 1\r\nA\r\nEND\r\n",
            ),
            ("get nope\r\n", "END\r\n"),
            ("gat 100 a nope\r\n", "VALUE a 1 1\r\nA\r\nEND\r\n"),
            ("gat 100\r\n", "END\r\n"),
            ("gat x a\r\n", "CLIENT_ERROR invalid exptime argument\r\n"),
            ("get\r\n", "ERROR\r\n"),
            ("gets\r\n", "ERROR\r\n"),
        ],
    );
    let mut c = s.connect();
    c.send(b"gets a\r\n");
    let r = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    assert!(
        r.starts_with("VALUE a 1 1 ") && r.ends_with("\r\nA\r\nEND\r\n"),
        "{r}"
    );
    c.send(b"gats 0 b\r\n");
    let r = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    assert!(
        r.starts_with("VALUE b 2 1 ") && r.ends_with("\r\nB\r\nEND\r\n"),
        "{r}"
    );
}

#[test]
fn many_keys_in_one_get() {
    let s = TestServer::start();
    let mut c = s.connect();
    let mut req = Vec::new();
    let mut want = Vec::new();
    let mut get = b"get".to_vec();
    for i in 0..500 {
        req.extend_from_slice(
            format!("set key{i} {i} 0 {}\r\n{i}\r\n", i.to_string().len()).as_bytes(),
        );
        want.extend_from_slice(b"STORED\r\n");
        get.extend_from_slice(format!(" key{i}").as_bytes());
    }
    c.roundtrip(&req, &want);
    get.extend_from_slice(b"\r\n");
    let mut want = Vec::new();
    for i in 0..500 {
        want.extend_from_slice(
            format!("VALUE key{i} {i} {}\r\n{i}\r\n", i.to_string().len()).as_bytes(),
        );
    }
    want.extend_from_slice(b"END\r\n");
    c.roundtrip(&get, &want);
}

#[test]
fn delete_incr_decr_touch() {
    let s = TestServer::start();
    table(
        &s,
        &[
            ("set n 0 0 2\r\n10\r\n", "STORED\r\n"),
            ("incr n 5\r\n", "15\r\n"),
            ("decr n 6\r\n", "9\r\n"),
            // memcached rewrites a shorter number in place, space padded.
            ("get n\r\n", "VALUE n 0 2\r\n9 \r\nEND\r\n"),
            ("decr n 100\r\n", "0\r\n"),
            ("set big 0 0 20\r\n18446744073709551615\r\n", "STORED\r\n"),
            ("incr big 2\r\n", "1\r\n"),
            ("incr nope 1\r\n", "NOT_FOUND\r\n"),
            ("set s 0 0 3\r\nabc\r\n", "STORED\r\n"),
            (
                "incr s 1\r\n",
                "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
            ),
            (
                "incr n -1\r\n",
                "CLIENT_ERROR invalid numeric delta argument\r\n",
            ),
            (
                "incr n 18446744073709551616\r\n",
                "CLIENT_ERROR invalid numeric delta argument\r\n",
            ),
            ("incr n 1 noreply\r\n", ""),
            ("get n\r\n", "VALUE n 0 2\r\n1 \r\nEND\r\n"),
            ("touch n 100\r\n", "TOUCHED\r\n"),
            ("touch nope 100\r\n", "NOT_FOUND\r\n"),
            (
                "touch n abc\r\n",
                "CLIENT_ERROR invalid exptime argument\r\n",
            ),
            ("touch n 10 noreply\r\n", ""),
            ("delete n\r\n", "DELETED\r\n"),
            ("delete n\r\n", "NOT_FOUND\r\n"),
            ("delete s 0\r\n", "DELETED\r\n"),
            ("delete big noreply\r\n", ""),
            ("get big\r\n", "END\r\n"),
            (
                "delete x 1\r\n",
                "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
            ),
            ("delete x a b c\r\n", "ERROR\r\n"),
        ],
    );
}

#[test]
fn expiry_follows_memcached_rules() {
    let s = TestServer::start();
    let mut c = s.connect();
    let now = s.handle().shared().store.now();
    c.roundtrip(b"set never 0 0 1\r\na\r\n", b"STORED\r\n");
    c.roundtrip(b"set rel 0 10 1\r\nb\r\n", b"STORED\r\n");
    c.roundtrip(
        format!("set abs 0 {} 1\r\nc\r\n", now + 20).as_bytes(),
        b"STORED\r\n",
    );
    c.roundtrip(
        format!("set past 0 {} 1\r\nd\r\n", now - 20).as_bytes(),
        b"STORED\r\n",
    );
    c.roundtrip(b"set neg 0 -1 1\r\ne\r\n", b"STORED\r\n");
    c.roundtrip(b"get past neg\r\n", b"END\r\n");
    c.roundtrip(
        b"get rel abs\r\n",
        b"VALUE rel 0 1\r\nb\r\nVALUE abs 0 1\r\nc\r\nEND\r\n",
    );
    s.advance_clock(10);
    c.roundtrip(b"get rel abs\r\n", b"VALUE abs 0 1\r\nc\r\nEND\r\n");
    c.roundtrip(b"touch abs 100\r\n", b"TOUCHED\r\n");
    s.advance_clock(60);
    c.roundtrip(
        b"get never abs\r\n",
        b"VALUE never 0 1\r\na\r\nVALUE abs 0 1\r\nc\r\nEND\r\n",
    );
    c.roundtrip(b"gat 1 never\r\n", b"VALUE never 0 1\r\na\r\nEND\r\n");
    s.advance_clock(1);
    c.roundtrip(b"get never\r\n", b"END\r\n");
}

#[test]
fn flush_all() {
    let s = TestServer::start();
    table(
        &s,
        &[
            ("set a 0 0 1\r\na\r\n", "STORED\r\n"),
            ("flush_all\r\n", "OK\r\n"),
            ("get a\r\n", "END\r\n"),
            ("set a 0 0 1\r\na\r\n", "STORED\r\n"),
            ("flush_all noreply\r\n", ""),
            ("get a\r\n", "END\r\n"),
            (
                "flush_all abc\r\n",
                "CLIENT_ERROR invalid exptime argument\r\n",
            ),
            ("flush_all 1 2 3\r\n", "ERROR\r\n"),
        ],
    );
    // A delayed flush drops what was stored before its time, not after.
    let mut c = s.connect();
    c.roundtrip(b"set old 0 0 1\r\no\r\n", b"STORED\r\n");
    c.roundtrip(b"flush_all 10\r\n", b"OK\r\n");
    c.roundtrip(b"get old\r\n", b"VALUE old 0 1\r\no\r\nEND\r\n");
    s.advance_clock(10);
    c.roundtrip(b"set new 0 0 1\r\nn\r\n", b"STORED\r\n");
    c.roundtrip(b"get old new\r\n", b"VALUE new 0 1\r\nn\r\nEND\r\n");
}

#[test]
fn flush_all_drops_every_key_stored_before_it_and_none_after() {
    // Keys over every shard, by text, meta and binary requests; half of
    // them stored again after the flush, also by a delayed flush's time.
    let s = TestServer::start();
    let mut c = s.connect();
    let n = 1000;
    let keys: Vec<String> = (0..n).map(|i| format!("key{i:04}")).collect();
    let set_all = |c: &mut common::Client, value: &str, every: usize| {
        let mut req = String::new();
        for k in keys.iter().step_by(every) {
            req.push_str(&format!(
                "set {k} 0 0 {} noreply\r\n{value}\r\n",
                value.len()
            ));
        }
        req.push_str("mn\r\n");
        c.roundtrip(req.as_bytes(), b"MN\r\n");
    };
    let get_all = |c: &mut common::Client| -> Vec<(String, String)> {
        let mut found = Vec::new();
        for chunk in keys.chunks(100) {
            c.send(format!("get {}\r\n", chunk.join(" ")).as_bytes());
            let reply = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
            let mut lines = reply.split("\r\n");
            while let Some(head) = lines.next().filter(|h| h.starts_with("VALUE ")) {
                let key = head.split(' ').nth(1).unwrap().to_string();
                found.push((key, lines.next().unwrap().to_string()));
            }
        }
        found
    };
    for (flush, advance) in [("flush_all\r\n", 0), ("flush_all 5\r\n", 5)] {
        set_all(&mut c, "old", 1);
        c.roundtrip(flush.as_bytes(), b"OK\r\n");
        s.advance_clock(advance);
        assert!(
            get_all(&mut c).is_empty(),
            "{flush:?}: a flushed key was served"
        );
        c.roundtrip(b"mg key0001 v\r\n", b"EN\r\n");
        // A connection's first byte picks its protocol: binary on its own.
        let bin_get = common::bin(0x00, &[], b"key0003", &[], 0, 0);
        assert_eq!(
            s.connect().bin_call(&bin_get).status(),
            1,
            "{flush:?}: binary GET"
        );
        set_all(&mut c, "new", 2);
        let found = get_all(&mut c);
        let want: Vec<(String, String)> = keys
            .iter()
            .step_by(2)
            .map(|k| (k.clone(), "new".to_string()))
            .collect();
        assert_eq!(found, want, "{flush:?}");
    }
}

#[test]
fn flush_all_can_be_disabled() {
    let s = TestServer::with(|c| c.disable_flush_all = true);
    table(
        &s,
        &[
            ("set a 0 0 1\r\na\r\n", "STORED\r\n"),
            ("flush_all\r\n", "CLIENT_ERROR flush_all not allowed\r\n"),
            ("get a\r\n", "VALUE a 0 1\r\na\r\nEND\r\n"),
        ],
    );
}

#[test]
fn admin_commands() {
    let s = TestServer::start();
    let mut c = s.connect();
    // memcached's version, as clients parse it (npm `memcached` reads the
    // last three numbers); kura's own is in `stats`.
    c.roundtrip(b"version\r\n", b"VERSION 1.6.18\r\n");
    c.send(b"stats\r\n");
    let stats = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    assert!(stats.contains("STAT version 1.6.18\r\n"), "{stats}");
    let kura = format!("STAT kura_version {}\r\n", env!("CARGO_PKG_VERSION"));
    assert!(stats.contains(&kura), "{stats}");
    table(
        &s,
        &[
            ("verbosity 1\r\n", "OK\r\n"),
            ("verbosity 1 noreply\r\n", ""),
            ("verbosity\r\n", "ERROR\r\n"),
            ("shutdown\r\n", "ERROR: shutdown not enabled\r\n"),
            (
                "cache_memlimit 2\r\n",
                "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n",
            ),
            ("cache_memlimit 128\r\n", "OK\r\n"),
            (
                "stats detail\r\n",
                "CLIENT_ERROR usage: stats detail on|off|dump\r\n",
            ),
            ("stats nope\r\n", "ERROR\r\n"),
            ("stats reset\r\n", "RESET\r\n"),
            ("stats sizes\r\n", "STAT sizes_status disabled\r\nEND\r\n"),
        ],
    );
    let mut c = s.connect();
    c.send(b"quit\r\n");
    assert!(c.is_closed());
}

#[test]
fn shutdown_when_enabled() {
    let s = TestServer::with(|c| c.enable_shutdown = true);
    let mut c = s.connect();
    c.roundtrip(
        b"shutdown bogus\r\n",
        b"CLIENT_ERROR invalid shutdown mode\r\n",
    );
    c.send(b"shutdown\r\n");
    assert!(c.is_closed());
    assert!(s.handle().shared().is_stopping());
}

#[test]
fn stats_counts_commands() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.roundtrip(
        b"set a 0 0 1\r\na\r\nget a b\r\ndelete a\r\nincr x 1\r\ntouch a 1\r\n",
        b"STORED\r\nVALUE a 0 1\r\na\r\nEND\r\nDELETED\r\nNOT_FOUND\r\nNOT_FOUND\r\n",
    );
    c.send(b"stats\r\n");
    let r = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    for want in [
        "STAT cmd_get 2\r\n",
        "STAT get_hits 1\r\n",
        "STAT get_misses 1\r\n",
        "STAT cmd_set 1\r\n",
        "STAT delete_hits 1\r\n",
        "STAT incr_misses 1\r\n",
        "STAT touch_misses 1\r\n",
        "STAT curr_items 0\r\n",
        "STAT total_items 1\r\n",
        "STAT limit_maxbytes 67108864\r\n",
        "STAT threads 2\r\n",
        "STAT curr_connections 1\r\n",
    ] {
        assert!(r.contains(want), "missing {want:?} in\n{r}");
    }
    for name in [
        "pid",
        "uptime",
        "time",
        "version",
        "rusage_user",
        "bytes_read",
        "bytes_written",
        "bytes",
        "evictions",
        "reclaimed",
        "total_connections",
        "hash_power_level",
        "hash_bytes",
        "hash_is_expanding",
    ] {
        assert!(r.contains(&format!("STAT {name} ")), "missing {name}");
    }
    c.send(b"stats settings\r\n");
    let r = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    for want in [
        "STAT maxbytes 67108864\r\n",
        "STAT maxconns 1024\r\n",
        "STAT item_size_max 1048576\r\n",
        "STAT cas_enabled yes\r\n",
        "STAT evictions on\r\n",
    ] {
        assert!(r.contains(want), "missing {want:?} in\n{r}");
    }
    c.send(b"stats conns\r\n");
    let r = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    assert!(
        r.contains(":addr tcp:127.0.0.1:") && r.contains(":state conn_parse_cmd"),
        "{r}"
    );
    c.roundtrip(b"set a 0 0 1\r\na\r\n", b"STORED\r\n");
    c.send(b"stats items\r\n");
    let r = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    assert!(r.starts_with("STAT items:1:number 1\r\n"), "{r}");
}

#[test]
fn meta_get() {
    let s = TestServer::start();
    table(
        &s,
        &[
            ("ms k 2 F5 T0\r\nhi\r\n", "HD\r\n"),
            ("mg k v\r\n", "VA 2\r\nhi\r\n"),
            ("mg k s f t k v\r\n", "VA 2 s2 f5 t-1 kk\r\nhi\r\n"),
            ("mg k\r\n", "HD\r\n"),
            ("mg k Oabc q k\r\n", "HD Oabc kk\r\n"),
            ("mg missing\r\n", "EN\r\n"),
            ("mg missing q\r\n", ""),
            ("mg missing k Oxy\r\n", "EN kmissing Oxy\r\n"),
            ("mg a2V5 b v k\r\n", "EN ka2V5 b\r\n"),
            ("ms a2V5 3 b\r\nbin\r\n", "HD\r\n"),
            ("mg a2V5 b v k\r\n", "VA 3 ka2V5 b\r\nbin\r\n"),
            ("mg key v\r\n", "VA 3\r\nbin\r\n"),
            ("mg k zz\r\n", "CLIENT_ERROR invalid flag\r\n"),
            ("mg k v v\r\n", "CLIENT_ERROR duplicate flag\r\n"),
            (
                "mg k Tx\r\n",
                "CLIENT_ERROR bad token in command line format\r\n",
            ),
            ("mg !!!! b\r\n", "CLIENT_ERROR error decoding key\r\n"),
            (
                "mg k O123456789012345678901234567890123\r\n",
                "CLIENT_ERROR opaque token too long\r\n",
            ),
            ("mg\r\n", "ERROR\r\n"),
        ],
    );
    // TTLs: `t` after `T` reports the new TTL; before it, the old one,
    // which a real second may have shortened between two requests.
    let mut c = s.connect();
    c.roundtrip(b"mg k T30 t\r\n", b"HD t30\r\n");
    one_of(&mut c, b"mg k t T60\r\n", &["HD t30\r\n", "HD t29\r\n"]);
    one_of(&mut c, b"mg k t\r\n", &["HD t60\r\n", "HD t59\r\n"]);
}

/// Sends `req` and asserts its one-line reply is one of `want`: for
/// replies that count seconds, where the wall clock may tick between two
/// requests on a busy machine.
fn one_of(c: &mut common::Client, req: &[u8], want: &[&str]) {
    c.send(req);
    let got = String::from_utf8(c.read_until(b"\r\n")).unwrap();
    assert!(
        want.contains(&got.as_str()),
        "{:?} answered {got:?}, not one of {want:?}",
        String::from_utf8_lossy(req)
    );
}

#[test]
fn meta_get_hit_and_access_time() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.roundtrip(b"ms k 1\r\nx\r\n", b"HD\r\n");
    one_of(&mut c, b"mg k h l\r\n", &["HD h0 l0\r\n", "HD h0 l1\r\n"]);
    s.advance_clock(5);
    one_of(
        &mut c,
        b"mg k h l\r\n",
        &["HD h1 l5\r\n", "HD h1 l6\r\n", "HD h1 l7\r\n"],
    );
    one_of(&mut c, b"mg k h l u\r\n", &["HD h1 l0\r\n", "HD h1 l1\r\n"]);
}

#[test]
fn meta_vivify_and_recache() {
    let s = TestServer::start();
    table(
        &s,
        &[
            // The first miss with N creates a placeholder and wins the token.
            ("mg p N30 t v\r\n", "VA 0 t30 W\r\n\r\n"),
            ("mg p N30 v\r\n", "VA 0 Z\r\n\r\n"),
            ("ms p 3 T100\r\nnew\r\n", "HD\r\n"),
            ("mg p v\r\n", "VA 3\r\nnew\r\n"),
            // R wins once when the remaining TTL is below the token.
            ("mg p R200 v\r\n", "VA 3 W\r\nnew\r\n"),
            ("mg p R200 v\r\n", "VA 3 Z\r\nnew\r\n"),
            ("mg p R5 v\r\n", "VA 3 Z\r\nnew\r\n"),
        ],
    );
}

#[test]
fn meta_set_modes_and_cas() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.roundtrip(b"ms k 1 q c\r\na\r\n", b"");
    // `c` without q returns the new CAS value.
    c.send(b"ms k 1 c\r\nb\r\n");
    let r = String::from_utf8(c.read_until(b"\r\n")).unwrap();
    let cas: u64 = r.trim_end().strip_prefix("HD c").unwrap().parse().unwrap();
    c.roundtrip(
        format!("ms k 1 C{}\r\nc\r\n", cas + 1).as_bytes(),
        b"EX\r\n",
    );
    c.roundtrip(format!("ms k 1 C{cas} q\r\nc\r\n").as_bytes(), b"");
    c.roundtrip(b"ms nope 1 C1\r\nc\r\n", b"NF\r\n");
    c.roundtrip(b"ms k 1 ME\r\nz\r\n", b"NS\r\n");
    c.roundtrip(b"ms k2 1 ME\r\nz\r\n", b"HD\r\n");
    c.roundtrip(b"ms k 1 MA\r\nd\r\n", b"HD\r\n");
    c.roundtrip(b"ms k 1 MP\r\n_\r\n", b"HD\r\n");
    c.roundtrip(b"ms k3 1 MR\r\nz\r\n", b"NS\r\n");
    c.roundtrip(b"ms k 1 MR O9 k\r\n!\r\n", b"HD O9 kk\r\n");
    c.roundtrip(b"mg k v\r\n", b"VA 1\r\n!\r\n");
    c.roundtrip(
        b"ms k 1 MX\r\nz\r\n",
        b"CLIENT_ERROR invalid mode for ms M token\r\n",
    );
    c.roundtrip(
        b"ms k 1 Mxx\r\nz\r\n",
        b"CLIENT_ERROR incorrect length for M token\r\n",
    );
    c.roundtrip(b"ms k\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.roundtrip(b"ms k 1 S\r\nz\r\n", b"CLIENT_ERROR invalid flag\r\n");
    c.roundtrip(b"ms k abc\r\n", b"CLIENT_ERROR bad command line format\r\n");
    c.roundtrip(
        b"ms k 2\r\nabc\r\n",
        b"CLIENT_ERROR bad data chunk\r\nERROR\r\n",
    );
}

#[test]
fn meta_invalidate_and_explicit_cas() {
    let s = TestServer::start();
    table(
        &s,
        &[
            ("ms k 1 E500\r\na\r\n", "HD\r\n"),
            ("mg k c\r\n", "HD c500\r\n"),
            // md I marks stale: the next reader wins the recache token.
            ("md k I T30 E600\r\n", "HD\r\n"),
            ("mg k c v\r\n", "VA 1 c600 X W\r\na\r\n"),
            ("mg k c v\r\n", "VA 1 c600 Z X\r\na\r\n"),
            // A set with an older CAS and I is accepted but stays stale.
            ("ms k 1 C550 I E700\r\nb\r\n", "HD\r\n"),
            ("mg k c v\r\n", "VA 1 c700 Z X\r\nb\r\n"),
            ("ms k 1 C700\r\nc\r\n", "HD\r\n"),
            ("mg k v\r\n", "VA 1\r\nc\r\n"),
            // x keeps the item but drops its value.
            ("md k x\r\n", "HD\r\n"),
            ("mg k v f\r\n", "VA 0 f0\r\n\r\n"),
            ("md k C1\r\n", "EX\r\n"),
            ("md k q\r\n", ""),
            ("md k k O5\r\n", "NF kk O5\r\n"),
        ],
    );
}

#[test]
fn meta_arithmetic() {
    let s = TestServer::start();
    table(
        &s,
        &[
            ("ma n\r\n", "NF\r\n"),
            ("ma n N0 J10 v\r\n", "VA 2\r\n10\r\n"),
            ("ma n v\r\n", "VA 2\r\n11\r\n"),
            ("ma n v D5 MD\r\n", "VA 1\r\n6\r\n"),
            ("ma n v MD D100\r\n", "VA 1\r\n0\r\n"),
            ("ma n q\r\n", ""),
            ("ma n v M+\r\n", "VA 1\r\n2\r\n"),
            ("ma n t\r\n", "HD t-1\r\n"),
            ("ma n T50 t\r\n", "HD t50\r\n"),
            (
                "ma n Mx\r\n",
                "CLIENT_ERROR invalid mode for ma M token\r\n",
            ),
            ("ma n Dx\r\n", "CLIENT_ERROR invalid or duplicate flag\r\n"),
            ("ms s 1\r\nx\r\n", "HD\r\n"),
            (
                "ma s\r\n",
                "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n",
            ),
            ("ma n C1 O7\r\n", "EX O7\r\n"),
        ],
    );
}

#[test]
fn meta_debug_and_noop() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.roundtrip(b"me nope\r\n", b"EN\r\n");
    c.roundtrip(b"mn\r\n", b"MN\r\n");
    c.roundtrip(b"ms k 1 T100\r\nx\r\n", b"HD\r\n");
    c.send(b"me k\r\n");
    let r = String::from_utf8(c.read_until(b"\r\n")).unwrap();
    assert!(
        r.starts_with("ME k exp=") && r.contains(" fetch=no cls=1 size="),
        "{r}"
    );
    // The clock may tick between `ms` and `me`: the TTL shown and the
    // seconds since last access move together, one second at most.
    let field = |name: &str| -> i64 {
        r.split(' ')
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {r}"))
    };
    let (exp, la) = (field("exp="), field("la="));
    assert!(la <= 1, "{r}");
    assert_eq!(exp - la, -100, "{r}");
}

#[test]
fn errors_and_malformed_lines() {
    let s = TestServer::start();
    table(
        &s,
        &[
            ("bogus\r\n", "ERROR\r\n"),
            ("GET a\r\n", "ERROR\r\n"),
            ("\r\n", "ERROR\r\n"),
            ("set a\r\n", "ERROR\r\n"),
            (
                "set a 0 0 -1\r\n",
                "CLIENT_ERROR bad command line format\r\n",
            ),
            (
                "set a x 0 1\r\n",
                "CLIENT_ERROR bad command line format\r\n",
            ),
            (
                "set a 4294967296 0 1\r\n",
                "CLIENT_ERROR bad command line format\r\n",
            ),
            // The data block must end with \r\n; the rest is read as a command.
            (
                "set a 0 0 1\r\nabc\r\n",
                "CLIENT_ERROR bad data chunk\r\nERROR\r\n",
            ),
            // Control bytes and DEL are key bytes, as in memcached; a NUL
            // ends the line.
            ("set a\x01b 0 0 1\r\nx\r\n", "STORED\r\n"),
            ("get a\x01b a\x7fb\r\n", "VALUE a\x01b 0 1\r\nx\r\nEND\r\n"),
            ("set a\x00b 0 0 1\r\n", "ERROR\r\n"),
            ("set a 0 0 1 noreply\r\nabc\r\n", "ERROR\r\n"),
        ],
    );
    let key250 = "k".repeat(250);
    let key251 = "k".repeat(251);
    table(
        &s,
        &[
            (&format!("set {key250} 0 0 1\r\nx\r\n"), "STORED\r\n"),
            (
                &format!("get {key250}\r\n"),
                &format!("VALUE {key250} 0 1\r\nx\r\nEND\r\n"),
            ),
            (
                &format!("set {key251} 0 0 1\r\nx\r\n"),
                "CLIENT_ERROR bad command line format\r\nERROR\r\n",
            ),
            (
                &format!("get a {key251}\r\n"),
                "CLIENT_ERROR bad command line format\r\n",
            ),
        ],
    );
}

#[test]
fn too_large_values_are_swallowed() {
    let s = TestServer::start();
    let mut c = s.connect();
    // 1048516 is the largest value memcached stores for a 1-byte key with
    // flags 0 under the default 1 MiB limit.
    let ok = vec![b'x'; 1_048_516];
    let mut req = b"set a 0 0 1048516\r\n".to_vec();
    req.extend_from_slice(&ok);
    req.extend_from_slice(b"\r\n");
    c.roundtrip(&req, b"STORED\r\n");
    let mut req = b"set a 0 0 1048517\r\n".to_vec();
    req.extend_from_slice(&[b'y'; 1_048_517]);
    req.extend_from_slice(b"\r\nget a\r\n");
    // The payload is discarded, and a failed set drops the old value.
    c.roundtrip(&req, b"SERVER_ERROR object too large for cache\r\nEND\r\n");
    let mut req = b"set b 0 0 5000000 noreply\r\n".to_vec();
    req.extend_from_slice(&vec![b'z'; 5_000_000]);
    req.extend_from_slice(b"\r\nmn\r\n");
    c.roundtrip(&req, b"MN\r\n");
    let mut req = b"ms b 2000000 T0\r\n".to_vec();
    req.extend_from_slice(&vec![b'z'; 2_000_000]);
    req.extend_from_slice(b"\r\nmn\r\n");
    c.roundtrip(&req, b"SERVER_ERROR object too large for cache\r\nMN\r\n");
}

#[test]
fn out_of_memory_without_evictions() {
    let s = TestServer::with(|c| {
        c.memory_limit = 2;
        c.disable_evictions = true;
        c.shards = 1;
    });
    let mut c = s.connect();
    let value = vec![b'v'; 100_000];
    let mut stored = 0;
    for i in 0..100 {
        let mut req = format!("set k{i} 0 0 {}\r\n", value.len()).into_bytes();
        req.extend_from_slice(&value);
        req.extend_from_slice(b"\r\n");
        c.send(&req);
        let r = c.read_until(b"\r\n");
        if r == b"STORED\r\n" {
            stored += 1;
        } else {
            assert_eq!(r, b"SERVER_ERROR out of memory storing object\r\n");
            break;
        }
    }
    assert!(stored > 5 && stored < 100, "stored {stored}");
    // What was stored before is still there.
    c.send(b"get k0\r\n");
    let r = c.read_until(b"END\r\n");
    assert_eq!(r.len(), "VALUE k0 0 100000\r\n".len() + 100_002 + 5);
}

#[test]
fn pipelined_mixed_requests_answer_in_order() {
    let s = TestServer::start();
    let mut c = s.connect();
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..3000 {
        match i % 6 {
            0 => {
                req.extend_from_slice(
                    format!("set k{i} 0 0 1 noreply\r\n{}\r\n", i % 10).as_bytes(),
                );
            }
            1 => {
                req.extend_from_slice(format!("ms k{i} 1 q\r\n{}\r\n", i % 10).as_bytes());
            }
            2 => {
                req.extend_from_slice(format!("get k{}\r\n", i - 2).as_bytes());
                want.extend_from_slice(
                    format!("VALUE k{} 0 1\r\n{}\r\nEND\r\n", i - 2, (i - 2) % 10).as_bytes(),
                );
            }
            3 => {
                req.extend_from_slice(
                    format!("mg k{} v q\r\nmg missing{i} v q\r\n", i - 2).as_bytes(),
                );
                want.extend_from_slice(format!("VA 1\r\n{}\r\n", (i - 2) % 10).as_bytes());
            }
            4 => {
                req.extend_from_slice(
                    format!("delete k{} noreply\r\nmd k{} q\r\n", i - 4, i - 3).as_bytes(),
                );
            }
            _ => {
                req.extend_from_slice(format!("get k{} k{}\r\n", i - 5, i - 4).as_bytes());
                want.extend_from_slice(b"END\r\n");
            }
        }
    }
    req.extend_from_slice(b"mn\r\n");
    want.extend_from_slice(b"MN\r\n");
    c.roundtrip(&req, &want);
}

#[test]
fn quiet_meta_pipeline_ended_by_mn() {
    let s = TestServer::start();
    table(
        &s,
        &[
            ("ms a 1 q\r\n1\r\nms b 1 q\r\n2\r\nms c 1 q MR\r\n3\r\nmg a v q\r\nmg x v q\r\nmg b v q k\r\nmd a q\r\nmd zz q\r\nmn\r\n", "NS\r\nVA 1\r\n1\r\nVA 1 kb\r\n2\r\nNF\r\nMN\r\n"),
        ],
    );
}

#[test]
fn udp_requests_carry_the_frame_header() {
    let s = TestServer::with(|c| c.udp_port = 0);
    assert!(s.udp.is_none(), "UDP is off unless -U names a port");
    let port = {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.local_addr().unwrap().port()
    };
    let s = TestServer::with(|c| c.udp_port = port);
    let udp = s.udp.expect("udp listener");
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let send = |id: u16, body: &[u8]| {
        let mut d = id.to_be_bytes().to_vec();
        d.extend_from_slice(&[0, 0, 0, 1, 0, 0]);
        d.extend_from_slice(body);
        sock.send_to(&d, udp).unwrap();
    };
    send(7, b"set u 0 0 3000\r\n");
    // A request that does not fit its datagram gets nothing useful back; a
    // complete one works.
    let mut body = b"set u 0 0 3000\r\n".to_vec();
    body.extend_from_slice(&[b'q'; 3000]);
    body.extend_from_slice(b"\r\n");
    send(8, &body);
    let mut buf = [0u8; 2048];
    let (n, _) = sock.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..8], &[0, 8, 0, 0, 0, 1, 0, 0]);
    assert_eq!(&buf[8..n], b"STORED\r\n");
    send(9, b"get u\r\n");
    let mut got = Vec::new();
    let total = loop {
        let (n, _) = sock.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..2], &[0, 9]);
        let total = u16::from_be_bytes([buf[4], buf[5]]);
        got.push((u16::from_be_bytes([buf[2], buf[3]]), buf[8..n].to_vec()));
        if got.len() == total as usize {
            break total;
        }
    };
    assert_eq!(total, 3);
    got.sort();
    let reply: Vec<u8> = got.into_iter().flat_map(|(_, b)| b).collect();
    let mut want = b"VALUE u 0 3000\r\n".to_vec();
    want.extend_from_slice(&[b'q'; 3000]);
    want.extend_from_slice(b"\r\nEND\r\n");
    assert_eq!(reply, want);
}

#[test]
fn unix_socket_with_permissions() {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("kura-unix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kura.sock");
    let server = kura_server::Server::bind(kura_server::ServerConfig {
        unix_socket: Some(path.clone()),
        unix_mask: 0o770,
        threads: 1,
        ..Default::default()
    })
    .unwrap();
    assert!(server.local_addr().is_none(), "-s disables TCP");
    let handle = server.start().unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o770);
    let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    s.write_all(b"set u 0 0 1\r\nx\r\nget u\r\n").unwrap();
    let mut buf = vec![0u8; 64];
    let mut got = Vec::new();
    while !got.ends_with(b"END\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, b"STORED\r\nVALUE u 0 1\r\nx\r\nEND\r\n");
    handle.shutdown();
    handle.join();
    assert!(!path.exists(), "socket file removed at shutdown");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn s3fifo_eviction_keeps_a_hot_key_through_a_scan() {
    let s = TestServer::with(|c| {
        c.memory_limit = 2;
        c.shards = 1;
        c.eviction = "s3fifo".to_string();
    });
    let mut c = s.connect();
    c.send(b"stats settings\r\n");
    let r = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    assert!(r.contains("STAT eviction_policy s3fifo\r\n"), "{r}");

    let value = vec![b'v'; 100_000];
    let set = |key: &str| {
        let mut req = format!("set {key} 0 0 {}\r\n", value.len()).into_bytes();
        req.extend_from_slice(&value);
        req.extend_from_slice(b"\r\n");
        req
    };
    let hit = format!("VALUE hot 0 100000\r\n{}\r\nEND\r\n", "v".repeat(100_000));
    c.roundtrip(&set("hot"), b"STORED\r\n");
    c.roundtrip(b"get hot\r\n", hit.as_bytes());
    c.roundtrip(b"get hot\r\n", hit.as_bytes());
    // Ten times what fits, each key stored once and never read.
    for i in 0..200 {
        c.reply_is(&set(&format!("scan{i}")), b"STORED\r\n");
    }
    c.roundtrip(b"get scan0\r\n", b"END\r\n");
    c.roundtrip(b"get hot\r\n", hit.as_bytes());
    c.send(b"stats\r\n");
    let r = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    let evictions: u64 = r
        .lines()
        .find_map(|l| l.strip_prefix("STAT evictions "))
        .and_then(|v| v.parse().ok())
        .expect("evictions in stats");
    assert!(evictions > 150, "{r}");
}
