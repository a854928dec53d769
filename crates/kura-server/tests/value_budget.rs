//! The budget for values being received (`budget.rs`): a large value that
//! finds no room is refused as memcached refuses one it has no memory for,
//! in each protocol, and its bytes are skipped; ordinary traffic is never
//! charged. The memory bound itself is measured on a server process in
//! `crates/kura/tests/value_budget.rs`.

mod common;

use std::time::{Duration, Instant};

use common::{bin, set_extras, Client, TestServer};

const SET: u8 = 0x01;
const GET: u8 = 0x00;
const VALUE: usize = 1_000_000;

/// The `stats` figure `name`.
fn stat(c: &mut Client, name: &str) -> u64 {
    c.send(b"stats\r\n");
    let text = String::from_utf8(c.read_until(b"END\r\n")).expect("utf-8");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no stat {name}"))
}

/// Waits until the server has read `n` bytes in all.
fn wait_read(c: &mut Client, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while stat(c, "bytes_read") < n {
        assert!(
            Instant::now() < deadline,
            "the server did not read {n} bytes"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn value(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| b'a' + ((i + seed as usize) % 26) as u8)
        .collect()
}

#[test]
fn a_value_with_no_room_is_refused_as_out_of_memory_in_each_protocol() {
    // -m 4: room for one value of -I bytes being received, not two (one
    // shard, so that the cache can hold such a value).
    let s = TestServer::with(|c| {
        c.memory_limit = 4;
        c.shards = 1;
    });
    let mut admin = s.connect();
    admin.roundtrip(b"set old 0 0 3\r\nabc\r\n", b"STORED\r\n");
    admin.roundtrip(b"set mold 0 0 3\r\nabc\r\n", b"STORED\r\n");
    admin.roundtrip(b"set bold 0 0 3\r\nabc\r\n", b"STORED\r\n");
    let before = stat(&mut admin, "bytes_read");

    // The first large value takes the room and keeps it while it arrives.
    let big = value(0, VALUE);
    let head = format!("set a 0 0 {VALUE}\r\n").into_bytes();
    let mut a = s.connect();
    a.send(&head);
    a.send(&big[..500_000]);
    wait_read(&mut admin, before + (head.len() + 500_000) as u64);

    // Every other large value finds none, waits, and is refused.
    let mut text = s.connect();
    text.send(format!("set old 0 0 {VALUE}\r\n").as_bytes());
    text.send(&big[..100]);
    let mut meta = s.connect();
    meta.send(format!("ms mold {VALUE} T0\r\n").as_bytes());
    meta.send(&big[..100]);
    let mut binary = s.connect();
    let req = bin(SET, &set_extras(0, 0), b"bold", &big, 77, 0);
    let (req_head, req_value) = req.split_at(24 + 8 + 4);
    binary.send(req_head);
    binary.send(&req_value[..100]);

    let oom = b"SERVER_ERROR out of memory storing object\r\n";
    assert_eq!(text.read_exact(oom.len()), oom);
    assert_eq!(meta.read_exact(oom.len()), oom);
    let r = binary.read_bin();
    assert_eq!(
        (r.status(), r.header.opcode, r.header.opaque),
        (0x82, SET, 77)
    );
    assert_eq!(r.value(), b"Out of memory");

    // The refused values are skipped as they arrive, and a plain set's old
    // value is gone, as memcached does when it has no memory for a set.
    let mut rest = big[100..].to_vec();
    rest.extend_from_slice(b"\r\n");
    text.send(&rest);
    text.roundtrip(b"get old\r\n", b"END\r\n");
    meta.send(&rest);
    meta.roundtrip(b"mg mold v\r\n", b"EN\r\n");
    binary.send(&req_value[100..]);
    let r = binary.bin_call(&bin(GET, &[], b"bold", &[], 1, 0));
    assert_eq!(r.status(), 0x01);

    // The holder completes and is stored whole.
    a.send(&big[500_000..]);
    a.send(b"\r\n");
    assert_eq!(a.read_exact(8), b"STORED\r\n");
    a.send(b"get a\r\n");
    let got = a.read_until(b"\r\nEND\r\n");
    let want_head = format!("VALUE a 0 {VALUE}\r\n");
    assert_eq!(&got[..want_head.len()], want_head.as_bytes());
    assert_eq!(&got[want_head.len()..want_head.len() + VALUE], &big[..]);
    assert_eq!(stat(&mut admin, "store_no_memory"), 3);
    assert_eq!(stat(&mut admin, "store_too_large"), 0);

    // With the room given back, the next large value is taken at once.
    let mut again = s.connect();
    again.send(format!("set b 0 0 {VALUE}\r\n").as_bytes());
    again.send(&big);
    again.roundtrip(b"\r\n", b"STORED\r\n");
}

#[test]
fn ordinary_traffic_beside_a_few_huge_values_is_never_refused() {
    let s = TestServer::start();
    // Four clients send values of almost -I bytes while two hundred others
    // store ordinary ones, all connected at once.
    let huge: Vec<_> = (0..4u8)
        .map(|i| {
            let addr = s.addr;
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                let v = value(i, VALUE);
                match i % 2 {
                    0 => {
                        c.send(format!("set huge{i} 0 0 {VALUE}\r\n").as_bytes());
                        c.send(&v);
                        c.roundtrip(b"\r\n", b"STORED\r\n");
                    }
                    _ => {
                        let r = c.bin_call(&bin(SET, &set_extras(0, 0), b"huge", &v, 0, 0));
                        assert_eq!(r.status(), 0);
                    }
                }
            })
        })
        .collect();
    let mut small: Vec<Client> = (0..200).map(|_| s.connect()).collect();
    for (i, c) in small.iter_mut().enumerate() {
        // 10 bytes to 20 KB: the largest are charged, and fit.
        let v = value(i as u8, 10 + i * 100);
        if i % 2 == 0 {
            c.send(format!("set small{i} 0 0 {}\r\n", v.len()).as_bytes());
        } else {
            c.send(format!("ms small{i} {}\r\n", v.len()).as_bytes());
        }
        c.send(&v);
        c.send(b"\r\n");
    }
    for (i, c) in small.iter_mut().enumerate() {
        let want: &[u8] = if i % 2 == 0 { b"STORED\r\n" } else { b"HD\r\n" };
        assert_eq!(c.read_exact(want.len()), want, "client {i}");
    }
    for h in huge {
        h.join().expect("huge value stored");
    }
    assert_eq!(stat(&mut s.connect(), "store_no_memory"), 0);
}
