//! The binary protocol on the wire: every opcode, every status, quiet
//! pipelines, SASL, and bad input.

mod common;

use std::io::Write;
use std::time::Duration;

use common::{arith_extras, bin, set_extras, Client, TestServer};
use kura_proto::binary::{opcode::*, Status, ARITH_NO_CREATE, HEADER_LEN};

const OK: u16 = Status::Success as u16;

fn st(s: Status) -> u16 {
    s as u16
}

fn set(c: &mut Client, key: &[u8], value: &[u8], flags: u32) -> u64 {
    let r = c.bin_call(&bin(SET, &set_extras(flags, 0), key, value, 0, 0));
    assert_eq!(r.status(), OK, "{r:?}");
    assert_ne!(r.header.cas, 0);
    r.header.cas
}

#[test]
fn get_family() {
    let s = TestServer::start();
    let mut c = s.connect();
    let cas = set(&mut c, b"k", b"hello", 0xdead_beef);

    let r = c.bin_call(&bin(GET, &[], b"k", &[], 7, 0));
    assert_eq!(r.status(), OK);
    assert_eq!(r.header.opcode, GET);
    assert_eq!(r.header.opaque, 7);
    assert_eq!(r.header.cas, cas);
    assert_eq!(r.extras(), 0xdead_beefu32.to_be_bytes());
    assert_eq!(r.key(), b"");
    assert_eq!(r.value(), b"hello");

    let r = c.bin_call(&bin(GETK, &[], b"k", &[], 8, 0));
    assert_eq!((r.key(), r.value()), (&b"k"[..], &b"hello"[..]));

    // Misses: GET says "Not found"; GETK returns the key instead.
    let r = c.bin_call(&bin(GET, &[], b"nope", &[], 9, 0));
    assert_eq!(r.status(), st(Status::KeyNotFound));
    assert_eq!(r.body, b"Not found");
    assert_eq!(r.header.opaque, 9);
    let r = c.bin_call(&bin(GETK, &[], b"nope", &[], 9, 0));
    assert_eq!(r.status(), st(Status::KeyNotFound));
    assert_eq!(r.key(), b"nope");
    assert_eq!(r.value(), b"");

    // TOUCH answers flags only; GAT and GATK the value too.
    let r = c.bin_call(&bin(TOUCH, &100u32.to_be_bytes(), b"k", &[], 1, 0));
    assert_eq!(r.status(), OK);
    assert_eq!(r.extras(), 0xdead_beefu32.to_be_bytes());
    assert_eq!(r.value(), b"");
    let r = c.bin_call(&bin(GAT, &100u32.to_be_bytes(), b"k", &[], 1, 0));
    assert_eq!(r.value(), b"hello");
    let r = c.bin_call(&bin(GATK, &100u32.to_be_bytes(), b"k", &[], 1, 0));
    assert_eq!((r.key(), r.value()), (&b"k"[..], &b"hello"[..]));
    let r = c.bin_call(&bin(TOUCH, &100u32.to_be_bytes(), b"gone", &[], 1, 0));
    assert_eq!(r.status(), st(Status::KeyNotFound));

    // A GAT that sets a TTL: the item expires with it.
    let r = c.bin_call(&bin(GAT, &2u32.to_be_bytes(), b"k", &[], 1, 0));
    assert_eq!(r.status(), OK);
    s.advance_clock(3);
    let r = c.bin_call(&bin(GET, &[], b"k", &[], 1, 0));
    assert_eq!(r.status(), st(Status::KeyNotFound));
}

#[test]
fn storage_family_and_cas() {
    let s = TestServer::start();
    let mut c = s.connect();
    let ext = set_extras(3, 0);

    let r = c.bin_call(&bin(ADD, &ext, b"a", b"1", 0, 0));
    assert_eq!(r.status(), OK);
    let r = c.bin_call(&bin(ADD, &ext, b"a", b"2", 0, 0));
    assert_eq!(r.status(), st(Status::KeyExists));
    assert_eq!(r.body, b"Data exists for key.");
    let r = c.bin_call(&bin(REPLACE, &ext, b"missing", b"2", 0, 0));
    assert_eq!(r.status(), st(Status::KeyNotFound));
    let r = c.bin_call(&bin(REPLACE, &ext, b"a", b"2", 0, 0));
    assert_eq!(r.status(), OK);

    // APPEND/PREPEND keep the flags; on a missing key: not stored.
    assert_eq!(c.bin_call(&bin(APPEND, &[], b"a", b"3", 0, 0)).status(), OK);
    assert_eq!(
        c.bin_call(&bin(PREPEND, &[], b"a", b"1", 0, 0)).status(),
        OK
    );
    let r = c.bin_call(&bin(GET, &[], b"a", &[], 0, 0));
    assert_eq!(r.value(), b"123");
    assert_eq!(r.extras(), 3u32.to_be_bytes());
    let r = c.bin_call(&bin(APPEND, &[], b"missing", b"x", 0, 0));
    assert_eq!(r.status(), st(Status::NotStored));
    assert_eq!(r.body, b"Not stored.");

    // CAS: a stale one is refused, the current one wins, a CAS on a
    // missing key is not found.
    let cas = c.bin_call(&bin(GET, &[], b"a", &[], 0, 0)).header.cas;
    let r = c.bin_call(&bin(SET, &ext, b"a", b"new", 0, cas + 1000));
    assert_eq!(r.status(), st(Status::KeyExists));
    let r = c.bin_call(&bin(SET, &ext, b"a", b"new", 0, cas));
    assert_eq!(r.status(), OK);
    assert_ne!(r.header.cas, cas);
    let r = c.bin_call(&bin(SET, &ext, b"nokey", b"v", 0, 5));
    assert_eq!(r.status(), st(Status::KeyNotFound));
    let r = c.bin_call(&bin(APPEND, &[], b"a", b"x", 0, cas));
    assert_eq!(r.status(), st(Status::KeyExists));

    // DELETE, with and without CAS.
    let cas = c.bin_call(&bin(GET, &[], b"a", &[], 0, 0)).header.cas;
    let r = c.bin_call(&bin(DELETE, &[], b"a", &[], 0, cas + 1));
    assert_eq!(r.status(), st(Status::KeyExists));
    let r = c.bin_call(&bin(DELETE, &[], b"a", &[], 0, cas));
    assert_eq!(r.status(), OK);
    let r = c.bin_call(&bin(DELETE, &[], b"a", &[], 0, 0));
    assert_eq!(r.status(), st(Status::KeyNotFound));

    // Text and binary see the same items.
    set(&mut c, b"shared", b"xyz", 9);
    let mut t = s.connect();
    t.roundtrip(b"get shared\r\n", b"VALUE shared 9 3\r\nxyz\r\nEND\r\n");
}

#[test]
fn arithmetic() {
    let s = TestServer::start();
    let mut c = s.connect();
    let u64_of = |b: &[u8]| u64::from_be_bytes(b.try_into().unwrap());

    // A miss with "do not create" is not found; otherwise the initial
    // value is stored and returned.
    let r = c.bin_call(&bin(
        INCREMENT,
        &arith_extras(1, 5, ARITH_NO_CREATE),
        b"n",
        &[],
        0,
        0,
    ));
    assert_eq!(r.status(), st(Status::KeyNotFound));
    let r = c.bin_call(&bin(INCREMENT, &arith_extras(1, 5, 0), b"n", &[], 0, 0));
    assert_eq!((r.status(), u64_of(r.value())), (OK, 5));
    let r = c.bin_call(&bin(INCREMENT, &arith_extras(10, 5, 0), b"n", &[], 0, 0));
    assert_eq!(u64_of(r.value()), 15);
    let r = c.bin_call(&bin(DECREMENT, &arith_extras(100, 0, 0), b"n", &[], 0, 0));
    assert_eq!(u64_of(r.value()), 0, "decr stops at zero");
    let r = c.bin_call(&bin(
        INCREMENT,
        &arith_extras(u64::MAX, 0, 0),
        b"n",
        &[],
        0,
        0,
    ));
    assert_eq!(u64_of(r.value()), u64::MAX);
    let r = c.bin_call(&bin(INCREMENT, &arith_extras(2, 0, 0), b"n", &[], 0, 0));
    assert_eq!(u64_of(r.value()), 1, "incr wraps");
    let cas = r.header.cas;
    let r = c.bin_call(&bin(
        INCREMENT,
        &arith_extras(1, 0, 0),
        b"n",
        &[],
        0,
        cas + 1,
    ));
    assert_eq!(r.status(), st(Status::KeyExists));

    set(&mut c, b"text", b"abc", 0);
    let r = c.bin_call(&bin(DECREMENT, &arith_extras(1, 0, 0), b"text", &[], 0, 0));
    assert_eq!(r.status(), st(Status::NonNumeric));
    assert_eq!(r.body, b"Non-numeric server-side value for incr or decr");

    // The counter is decimal text to the other protocols (rewritten in
    // place with space padding, like memcached).
    let mut t = s.connect();
    t.roundtrip(
        b"get n\r\n",
        b"VALUE n 0 20\r\n1                   \r\nEND\r\n",
    );
    let r = c.bin_call(&bin(INCREMENT, &arith_extras(5, 40, 0), b"m", &[], 0, 0));
    assert_eq!(u64_of(r.value()), 40);
    t.roundtrip(b"get m\r\n", b"VALUE m 0 2\r\n40\r\nEND\r\n");
}

#[test]
fn admin_opcodes() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = c.bin_call(&bin(VERSION, &[], &[], &[], 3, 0));
    assert_eq!(r.status(), OK);
    assert_eq!(r.value(), kura_server::VERSION.as_bytes());

    let r = c.bin_call(&bin(NOOP, &[], &[], &[], 4, 0));
    assert_eq!((r.status(), r.header.opaque, r.body.len()), (OK, 4, 0));

    set(&mut c, b"x", b"1", 0);
    assert_eq!(c.bin_call(&bin(FLUSH, &[], &[], &[], 0, 0)).status(), OK);
    let r = c.bin_call(&bin(GET, &[], b"x", &[], 0, 0));
    assert_eq!(r.status(), st(Status::KeyNotFound));

    // A delayed flush.
    set(&mut c, b"x", b"1", 0);
    let r = c.bin_call(&bin(FLUSH, &5u32.to_be_bytes(), &[], &[], 0, 0));
    assert_eq!(r.status(), OK);
    assert_eq!(c.bin_call(&bin(GET, &[], b"x", &[], 0, 0)).status(), OK);
    s.advance_clock(6);
    let r = c.bin_call(&bin(GET, &[], b"x", &[], 0, 0));
    assert_eq!(r.status(), st(Status::KeyNotFound));

    // STAT: one packet per figure, then an empty one.
    c.send(&bin(STAT, &[], &[], &[], 11, 0));
    let mut names = Vec::new();
    loop {
        let r = c.read_bin();
        assert_eq!(
            (r.header.opcode, r.status(), r.header.opaque),
            (STAT, OK, 11)
        );
        if r.key().is_empty() {
            assert!(r.body.is_empty());
            break;
        }
        names.push(String::from_utf8(r.key().to_vec()).unwrap());
    }
    for want in [
        "pid",
        "uptime",
        "cmd_get",
        "get_hits",
        "curr_items",
        "auth_cmds",
    ] {
        assert!(names.iter().any(|n| n == want), "no {want} in {names:?}");
    }
    c.send(&bin(STAT, &[], b"settings", &[], 0, 0));
    let rs = c.read_bin_until(STAT);
    let r = &rs[0];
    assert_eq!(r.key(), b"maxbytes");
    let mut seen = 1;
    loop {
        let r = c.read_bin();
        if r.key().is_empty() {
            break;
        }
        seen += 1;
        if r.key() == b"binding_protocol" {
            assert_eq!(r.value(), b"auto-negotiate");
        }
    }
    assert!(seen > 20);
    let r = c.bin_call(&bin(STAT, &[], b"nonsense", &[], 0, 0));
    assert_eq!(r.status(), st(Status::KeyNotFound));
    let r = c.bin_call(&bin(STAT, &[], b"reset", &[], 0, 0));
    assert_eq!((r.status(), r.body.len()), (OK, 0));

    // QUIT answers, then closes; QUITQ just closes.
    let r = c.bin_call(&bin(QUIT, &[], &[], &[], 5, 0));
    assert_eq!((r.header.opcode, r.status()), (QUIT, OK));
    assert!(c.is_closed());
    let mut c = s.connect();
    c.send(&bin(QUITQ, &[], &[], &[], 5, 0));
    assert!(c.is_closed());
}

#[test]
fn flush_refused_with_disable_flush_all() {
    let s = TestServer::with(|c| c.disable_flush_all = true);
    let mut c = s.connect();
    let r = c.bin_call(&bin(FLUSH, &[], &[], &[], 0, 0));
    assert_eq!(r.status(), st(Status::AuthError));
}

#[test]
fn quiet_gets_say_nothing_on_a_miss() {
    let s = TestServer::start();
    let mut c = s.connect();
    set(&mut c, b"k1", b"v1", 0);
    set(&mut c, b"k3", b"v3", 0);
    let mut req = Vec::new();
    for (i, k) in [b"k1", b"k2", b"k3", b"k4"].iter().enumerate() {
        req.extend(bin(GETKQ, &[], *k, &[], i as u32, 0));
    }
    req.extend(bin(GETQ, &[], b"k1", &[], 10, 0));
    req.extend(bin(GATKQ, &0u32.to_be_bytes(), b"k3", &[], 11, 0));
    req.extend(bin(GATQ, &0u32.to_be_bytes(), b"k9", &[], 12, 0));
    req.extend(bin(NOOP, &[], &[], &[], 99, 0));
    c.send(&req);
    let rs = c.read_bin_until(NOOP);
    let got: Vec<(u8, u32, &[u8], &[u8])> = rs
        .iter()
        .map(|r| (r.header.opcode, r.header.opaque, r.key(), r.value()))
        .collect();
    assert_eq!(
        got,
        vec![
            (GETKQ, 0, &b"k1"[..], &b"v1"[..]),
            (GETKQ, 2, b"k3", b"v3"),
            (GETQ, 10, b"", b"v1"),
            (GATKQ, 11, b"k3", b"v3"),
            (NOOP, 99, b"", b""),
        ]
    );
    c.expect_silence(Duration::from_millis(30));
}

#[test]
fn quiet_mutations_say_nothing_on_success_but_report_errors() {
    let s = TestServer::start();
    let mut c = s.connect();
    let ext = set_extras(0, 0);
    let mut req = Vec::new();
    req.extend(bin(SETQ, &ext, b"a", b"1", 1, 0));
    req.extend(bin(ADDQ, &ext, b"a", b"2", 2, 0)); // exists: reported
    req.extend(bin(REPLACEQ, &ext, b"a", b"3", 3, 0));
    req.extend(bin(APPENDQ, &[], b"a", b"4", 4, 0));
    req.extend(bin(PREPENDQ, &[], b"a", b"0", 5, 0));
    req.extend(bin(APPENDQ, &[], b"zz", b"4", 6, 0)); // not stored: reported
    req.extend(bin(INCREMENTQ, &arith_extras(1, 0, 0), b"a", &[], 7, 0));
    req.extend(bin(DELETEQ, &[], b"nope", &[], 8, 0)); // not found: reported
    req.extend(bin(INCREMENTQ, &arith_extras(1, 7, 0), b"c", &[], 9, 0));
    req.extend(bin(DECREMENTQ, &arith_extras(2, 0, 0), b"c", &[], 10, 0));
    req.extend(bin(FLUSHQ, &100u32.to_be_bytes(), &[], &[], 11, 0));
    req.extend(bin(NOOP, &[], &[], &[], 12, 0));
    c.send(&req);
    let rs = c.read_bin_until(NOOP);
    let got: Vec<(u8, u32, u16)> = rs
        .iter()
        .map(|r| (r.header.opcode, r.header.opaque, r.status()))
        .collect();
    assert_eq!(
        got,
        vec![
            (ADDQ, 2, st(Status::KeyExists)),
            (APPENDQ, 6, st(Status::NotStored)),
            (DELETEQ, 8, st(Status::KeyNotFound)),
            (NOOP, 12, OK),
        ]
    );
    let r = c.bin_call(&bin(GET, &[], b"a", &[], 0, 0));
    // memcached rewrites a counter in place, padding with spaces.
    assert_eq!(r.value(), b"35 ");
    let r = c.bin_call(&bin(GET, &[], b"c", &[], 0, 0));
    assert_eq!(r.value(), b"5");
}

#[test]
fn quiet_gets_and_sets_mixed_in_one_pipeline() {
    let s = TestServer::start();
    let mut c = s.connect();
    let e = set_extras(1, 0);
    let mut req = Vec::new();
    req.extend(bin(SETQ, &e, b"a", b"1", 1, 0));
    req.extend(bin(GETKQ, &[], b"a", &[], 2, 0));
    req.extend(bin(SETQ, &e, b"a", b"2", 3, 0));
    req.extend(bin(GETKQ, &[], b"b", &[], 4, 0)); // miss: silent
    req.extend(bin(GETKQ, &[], b"a", &[], 5, 0));
    req.extend(bin(DELETEQ, &[], b"a", &[], 6, 0));
    req.extend(bin(GETKQ, &[], b"a", &[], 7, 0)); // deleted: silent
    req.extend(bin(ADDQ, &e, b"b", b"3", 8, 0));
    req.extend(bin(GETQ, &[], b"b", &[], 9, 0));
    req.extend(bin(NOOP, &[], &[], &[], 10, 0));
    c.send(&req);
    let rs = c.read_bin_until(NOOP);
    let got: Vec<(u32, &[u8])> = rs.iter().map(|r| (r.header.opaque, r.value())).collect();
    assert_eq!(
        got,
        vec![(2, &b"1"[..]), (5, b"2"), (9, b"3"), (10, b"")],
        "only hits and the NOOP answer, in order"
    );
    c.expect_silence(Duration::from_millis(30));
}

#[test]
fn ten_thousand_quiet_sets_and_one_noop_are_one_round_trip() {
    let s = TestServer::start();
    let mut c = s.connect();
    let mut req = Vec::new();
    for i in 0..10_000u32 {
        let key = format!("key:{i}");
        let value = format!("value:{i}");
        req.extend(bin(
            SETQ,
            &set_extras(i, 0),
            key.as_bytes(),
            value.as_bytes(),
            i,
            0,
        ));
    }
    req.extend(bin(NOOP, &[], &[], &[], 77, 0));
    // One write of everything, then exactly one response: the NOOP's.
    c.send(&req);
    let r = c.read_bin();
    assert_eq!((r.header.opcode, r.header.opaque), (NOOP, 77));
    c.expect_silence(Duration::from_millis(50));
    // Everything is there, read back with one batched GETKQ pipeline.
    let mut req = Vec::new();
    for i in 0..10_000u32 {
        req.extend(bin(GETKQ, &[], format!("key:{i}").as_bytes(), &[], i, 0));
    }
    req.extend(bin(NOOP, &[], &[], &[], 78, 0));
    c.send(&req);
    let rs = c.read_bin_until(NOOP);
    assert_eq!(rs.len(), 10_001);
    for (i, r) in rs[..10_000].iter().enumerate() {
        assert_eq!(r.header.opaque, i as u32);
        assert_eq!(r.value(), format!("value:{i}").as_bytes());
        assert_eq!(r.extras(), (i as u32).to_be_bytes());
    }
}

#[test]
fn too_large_values_are_refused_and_skipped() {
    let s = TestServer::with(|c| c.item_size_max = 1024);
    let mut c = s.connect();
    set(&mut c, b"big", b"old", 0);
    let mut req = bin(SET, &set_extras(0, 0), b"big", &vec![b'x'; 5000], 1, 0);
    req.extend(bin(GET, &[], b"big", &[], 2, 0));
    c.send(&req);
    let r = c.read_bin();
    assert_eq!((r.status(), r.header.opaque), (st(Status::TooLarge), 1));
    assert_eq!(r.body, b"Too large.");
    // The old value is gone (a failed set must not leave it), and the
    // 5000 bytes were skipped: the GET after them is answered.
    let r = c.read_bin();
    assert_eq!((r.status(), r.header.opaque), (st(Status::KeyNotFound), 2));
    // Quiet forms report it too.
    let r = c.bin_call(&bin(
        SETQ,
        &set_extras(0, 0),
        b"big",
        &vec![b'x'; 5000],
        3,
        0,
    ));
    assert_eq!(r.status(), st(Status::TooLarge));
    // Append past the limit: not stored.
    set(&mut c, b"grow", &[b'y'; 900], 0);
    let r = c.bin_call(&bin(APPEND, &[], b"grow", &[b'z'; 200], 0, 0));
    assert_eq!(r.status(), st(Status::NotStored));
}

#[test]
fn out_of_memory_without_eviction() {
    let s = TestServer::with(|c| {
        c.memory_limit = 2;
        c.disable_evictions = true;
    });
    let mut c = s.connect();
    let value = vec![b'v'; 100_000];
    let mut saw_oom = false;
    for i in 0..100 {
        let r = c.bin_call(&bin(
            SET,
            &set_extras(0, 0),
            format!("k{i}").as_bytes(),
            &value,
            0,
            0,
        ));
        if r.status() == st(Status::OutOfMemory) {
            assert_eq!(r.body, b"Out of memory allocating item");
            saw_oom = true;
            break;
        }
        assert_eq!(r.status(), OK);
    }
    assert!(saw_oom, "2 MB never filled up");
    assert_eq!(c.bin_call(&bin(GET, &[], b"k0", &[], 0, 0)).status(), OK);
}

#[test]
fn unknown_opcodes_are_answered_and_skipped() {
    let s = TestServer::start();
    let mut c = s.connect();
    let mut req = bin(0x55, &[1, 2, 3], b"key", b"some body bytes", 5, 0);
    req.extend(bin(0x1b, &[0, 0, 0, 1], &[], &[], 6, 0)); // VERBOSITY: not in 1.6
    req.extend(bin(NOOP, &[], &[], &[], 7, 0));
    c.send(&req);
    let rs = c.read_bin_until(NOOP);
    let got: Vec<(u8, u32, u16)> = rs
        .iter()
        .map(|r| (r.header.opcode, r.header.opaque, r.status()))
        .collect();
    assert_eq!(
        got,
        vec![
            (0x55, 5, st(Status::UnknownCommand)),
            (0x1b, 6, st(Status::UnknownCommand)),
            (NOOP, 7, OK)
        ]
    );
    assert_eq!(rs[0].body, b"Unknown command");
}

#[test]
fn malformed_requests_get_invalid_arguments_and_close() {
    let s = TestServer::start();
    let cases: Vec<Vec<u8>> = vec![
        bin(GET, &[0; 4], b"k", &[], 0, 0),       // extras on GET
        bin(GET, &[], &[], &[], 0, 0),            // no key
        bin(SET, &[0; 4], b"k", b"v", 0, 0),      // short extras
        bin(INCREMENT, &[0; 8], b"k", &[], 0, 0), // short extras
        bin(NOOP, &[], b"k", &[], 0, 0),          // a key on NOOP
        bin(GET, &[], &[b'k'; 251], &[], 0, 0),   // key too long
        bin(TOUCH, &[], b"k", &[], 0, 0),         // no exptime
    ];
    for req in cases {
        let mut c = s.connect();
        let r = c.bin_call(&req);
        assert_eq!(r.status(), st(Status::InvalidArguments), "{req:?}");
        assert_eq!(r.body, b"Invalid arguments");
        assert!(c.is_closed(), "{req:?}");
    }
}

#[test]
fn lying_lengths_are_unknown_command_and_close() {
    let s = TestServer::start();
    // Body shorter than the key, and shorter than extras + key.
    let mut short_body = bin(GET, &[], b"abcdef", &[], 1, 0);
    short_body[8..12].copy_from_slice(&3u32.to_be_bytes());
    let mut extras_key = bin(SET, &set_extras(0, 0), b"abc", b"", 2, 0);
    extras_key[8..12].copy_from_slice(&9u32.to_be_bytes());
    for req in [short_body, extras_key] {
        let mut c = s.connect();
        let r = c.bin_call(&req);
        assert_eq!(r.status(), st(Status::UnknownCommand));
        assert!(c.is_closed());
    }
}

#[test]
fn truncated_and_stalled_requests_stall_only_themselves() {
    let s = TestServer::start();
    // Half a header, a header without its key, a SET without its value.
    let mut half = s.connect();
    half.send(&bin(NOOP, &[], &[], &[], 0, 0)[..10]);
    let mut no_key = s.connect();
    no_key.send(&bin(GET, &[], b"somekey", &[], 0, 0)[..HEADER_LEN + 2]);
    let mut no_value = s.connect();
    let full = bin(SET, &set_extras(0, 0), b"k", &[b'v'; 1000], 0, 0);
    no_value.send(&full[..HEADER_LEN + 9 + 500]);
    // A huge announced body on an opcode that allows none is refused at
    // once, not waited for.
    let mut huge = s.connect();
    let mut req = bin(GET, &[], b"k", &[], 0, 0);
    req[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
    huge.send(&req);
    let r = huge.read_bin();
    assert_eq!(r.status(), st(Status::InvalidArguments));
    assert!(huge.is_closed());

    // Others are served meanwhile.
    let mut other = s.connect();
    assert_eq!(other.bin_call(&bin(NOOP, &[], &[], &[], 1, 0)).status(), OK);
    let mut text = s.connect();
    text.roundtrip(
        b"version\r\n",
        format!("VERSION {}\r\n", kura_server::VERSION).as_bytes(),
    );

    // The stalled SET completes when the rest arrives.
    no_value.send(&full[HEADER_LEN + 9 + 500..]);
    assert_eq!(no_value.read_bin().status(), OK);
    // A client that leaves mid-header does no harm.
    drop(half);
    drop(no_key);
    assert_eq!(
        other.bin_call(&bin(GET, &[], b"k", &[], 0, 0)).value(),
        &[b'v'; 1000][..]
    );
}

#[test]
fn random_garbage_never_stalls_the_server() {
    use rand::{Rng, SeedableRng};
    let s = TestServer::with(|c| c.protocol = kura_server::Protocol::Binary);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for _ in 0..200 {
        let mut c = s.connect();
        // A real header with random fields, then random bytes.
        let mut b = vec![0x80u8];
        let n = rng.gen_range(0..200);
        b.extend((0..n).map(|_| rng.gen::<u8>()));
        let _ = c.stream.write_all(&b);
        let _ = c.stream.shutdown(std::net::Shutdown::Write);
    }
    let mut c = s.connect();
    assert_eq!(c.bin_call(&bin(NOOP, &[], &[], &[], 1, 0)).status(), OK);
}

#[test]
fn protocol_selection() {
    // auto: the first byte decides, per connection.
    let s = TestServer::start();
    let mut b = s.connect();
    assert_eq!(b.bin_call(&bin(NOOP, &[], &[], &[], 1, 0)).status(), OK);
    let mut t = s.connect();
    t.roundtrip(b"mn\r\n", b"MN\r\n");
    // Once binary, a text line is bad magic: closed.
    b.send(b"get k\r\n");
    assert!(b.is_closed());

    // binary only: a text client is closed at once.
    let s = TestServer::with(|c| c.protocol = kura_server::Protocol::Binary);
    let mut t = s.connect();
    t.send(b"version\r\n");
    assert!(t.is_closed());
    let mut b = s.connect();
    assert_eq!(b.bin_call(&bin(NOOP, &[], &[], &[], 1, 0)).status(), OK);

    // ascii only: binary bytes are just text. A NOOP's first two bytes,
    // 0x80 and its opcode 0x0a, make a line that is no command.
    let s = TestServer::with(|c| c.protocol = kura_server::Protocol::Ascii);
    let mut t = s.connect();
    t.roundtrip(&bin(NOOP, &[], &[], &[], 1, 0), b"ERROR\r\n");
}

fn auth_file(dir: &std::path::Path, text: &str) -> std::path::PathBuf {
    let p = dir.join("auth");
    std::fs::write(&p, text).unwrap();
    p
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("kura-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn sasl_plain() {
    let dir = temp_dir("sasl");
    let path = auth_file(&dir, "alice:wonderland\nbob:builder\n");
    let s = TestServer::with(|c| {
        c.sasl = true;
        c.auth_file = Some(path.clone());
    });

    // Before authenticating: VERSION and the SASL opcodes only; anything
    // else is an auth error and the connection closes.
    let mut c = s.connect();
    assert_eq!(c.bin_call(&bin(VERSION, &[], &[], &[], 0, 0)).status(), OK);
    let r = c.bin_call(&bin(SASL_LIST_MECHS, &[], &[], &[], 0, 0));
    assert_eq!((r.status(), r.value()), (OK, &b"PLAIN"[..]));
    let r = c.bin_call(&bin(GET, &[], b"k", &[], 4, 0));
    assert_eq!((r.status(), r.header.opaque), (st(Status::AuthError), 4));
    assert_eq!(r.body, b"Auth failure.");
    assert!(c.is_closed());

    // A wrong password fails (and a malformed message, and an unknown
    // mechanism); the third failure closes the connection.
    let mut c = s.connect();
    let r = c.bin_call(&bin(SASL_AUTH, &[], b"PLAIN", b"\0alice\0nope", 0, 0));
    assert_eq!(r.status(), st(Status::AuthError));
    let r = c.bin_call(&bin(SASL_AUTH, &[], b"CRAM-MD5", b"alice wonderland", 0, 0));
    assert_eq!(r.status(), st(Status::AuthError));
    let r = c.bin_call(&bin(SASL_AUTH, &[], b"PLAIN", b"alice", 0, 0));
    assert_eq!(r.status(), st(Status::AuthError));
    assert!(c.is_closed());

    // The right one works, and then everything does.
    let mut c = s.connect();
    let r = c.bin_call(&bin(SASL_AUTH, &[], b"PLAIN", b"\0bob\0builder", 0, 0));
    assert_eq!((r.status(), r.value()), (OK, &b"Authenticated"[..]));
    set(&mut c, b"k", b"v", 0);
    assert_eq!(c.bin_call(&bin(GET, &[], b"k", &[], 0, 0)).value(), b"v");

    // Text clients are refused outright under -S.
    let mut t = s.connect();
    t.send(b"get k\r\n");
    assert!(t.is_closed());

    // The stats count it.
    c.send(&bin(STAT, &[], &[], &[], 0, 0));
    let mut auth = (0, 0);
    loop {
        let r = c.read_bin();
        match r.key() {
            b"" => break,
            b"auth_cmds" => auth.0 = String::from_utf8_lossy(r.value()).parse().unwrap(),
            b"auth_errors" => auth.1 = String::from_utf8_lossy(r.value()).parse().unwrap(),
            _ => {}
        }
    }
    assert_eq!(auth, (4, 3));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sasl_opcodes_are_unknown_without_sasl() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = c.bin_call(&bin(SASL_LIST_MECHS, &[], &[], &[], 0, 0));
    assert_eq!(r.status(), st(Status::UnknownCommand));
    let r = c.bin_call(&bin(SASL_AUTH, &[], b"PLAIN", b"\0a\0b", 0, 0));
    assert_eq!(r.status(), st(Status::UnknownCommand));
    assert_eq!(c.bin_call(&bin(NOOP, &[], &[], &[], 0, 0)).status(), OK);
}

#[test]
fn ascii_authentication() {
    let dir = temp_dir("ascii-auth");
    let path = auth_file(&dir, "user:pass\n");
    let s = TestServer::with(|c| c.auth_file = Some(path.clone()));

    let mut c = s.connect();
    c.roundtrip(b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    c.roundtrip(b"mg k v\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    c.roundtrip(
        b"set k 0 0 9\r\nuser nope\r\n",
        b"CLIENT_ERROR authentication failure\r\n",
    );
    c.roundtrip(
        b"set k 0 0 4\r\nuser\r\n",
        b"CLIENT_ERROR bad authentication token format\r\n",
    );
    c.roundtrip(b"set auth 0 0 9\r\nuser pass\r\n", b"STORED\r\n");
    // Authenticated: a normal connection, and the handshake stored nothing.
    c.roundtrip(b"get auth\r\n", b"END\r\n");
    c.roundtrip(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
    c.roundtrip(b"mg k v\r\n", b"VA 1\r\nv\r\n");

    // Only the length of the set line is read, as memcached does: the
    // emcache client sends `set _ _ _ <n>`.
    let mut c = s.connect();
    c.roundtrip(b"set _ _ _ 9\r\nuser pass\r\n", b"STORED\r\n");
    c.roundtrip(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
    // Not a set line: refused, and only the line is consumed.
    let mut c = s.connect();
    c.roundtrip(b"add _ _ _ 9\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    c.roundtrip(b"user pass\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    c.roundtrip(b"set _ _ _ x\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    // The token is exactly <n> bytes and \r\n, whatever they hold.
    c.roundtrip(
        b"set _ _ _ 9\r\nuser passXY",
        b"CLIENT_ERROR bad command line termination\r\n",
    );
    c.roundtrip(
        b"set _ _ _ 0\r\n\r\n",
        b"CLIENT_ERROR bad authentication token format\r\n",
    );
    // A token that arrives in pieces.
    c.send(b"set _ _ _ 15 noreply\r\n");
    c.expect_silence(Duration::from_millis(50));
    c.send(b"user pa");
    c.expect_silence(Duration::from_millis(50));
    c.roundtrip(b"ss extra\r\n", b"STORED\r\n");
    c.roundtrip(b"mn\r\n", b"MN\r\n");
    // A token longer than memcached's read buffer closes the connection.
    let mut c = s.connect();
    c.send(b"set _ _ _ 20000\r\n");
    assert!(c.is_closed());

    // Three failures close the connection.
    let mut c = s.connect();
    for _ in 0..3 {
        c.send(b"set k 0 0 3\r\nu p\r\n");
    }
    assert!(c.is_closed());
    // A binary client is not let in under ASCII authentication.
    let mut b = s.connect();
    b.send(&bin(GET, &[], b"k", &[], 0, 0));
    b.expect_silence(Duration::from_millis(100));
    let _ = std::fs::remove_dir_all(dir);
}
