//! Value rotation (seed 003's footprints), kura's own command: `rotate` and
//! meta `ms ... MW w<max>`, over a real socket.

mod common;

use common::{Client, TestServer};

/// Sends one request and reads its whole reply (a line, a meta value or a
/// text `get`).
fn call(c: &mut Client, req: &[u8]) -> Vec<u8> {
    c.send(req);
    let mut r = c.read_until(b"\r\n");
    let line_end = r.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
    if r.starts_with(b"VALUE ") {
        if !r.ends_with(b"END\r\n") {
            r.extend(c.read_until(b"END\r\n"));
        }
    } else if let Some(rest) = r.strip_prefix(b"VA ") {
        let len: usize = String::from_utf8_lossy(rest)
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap();
        let want = line_end + len + 2;
        if r.len() < want {
            r.extend(c.read_exact(want - r.len()));
        }
    }
    r
}

fn table(server: &TestServer, cases: &[(&str, &str)]) {
    let mut c = server.connect();
    for (req, want) in cases {
        c.roundtrip(req.as_bytes(), want.as_bytes());
    }
}

#[test]
fn rotate_appends_and_trims_from_the_front() {
    let s = TestServer::start();
    table(
        &s,
        &[
            // Creates the item, with the request's flags.
            ("rotate fp 5 0 4 12\r\naaaa\r\n", "STORED\r\n"),
            ("get fp\r\n", "VALUE fp 5 4\r\naaaa\r\nEND\r\n"),
            ("rotate fp 0 0 4 12\r\nbbbb\r\n", "STORED\r\n"),
            // Exactly at the window.
            ("rotate fp 0 0 4 12\r\ncccc\r\n", "STORED\r\n"),
            ("get fp\r\n", "VALUE fp 5 12\r\naaaabbbbcccc\r\nEND\r\n"),
            // Past it: the oldest bytes go; the flags stay those of the item.
            ("rotate fp 9 0 4 12\r\ndddd\r\n", "STORED\r\n"),
            ("get fp\r\n", "VALUE fp 5 12\r\nbbbbccccdddd\r\nEND\r\n"),
            // Data longer than the window keeps its last bytes.
            (
                "rotate fp 0 0 20 12\r\n0123456789abcdefghij\r\n",
                "STORED\r\n",
            ),
            ("get fp\r\n", "VALUE fp 5 12\r\n89abcdefghij\r\nEND\r\n"),
            ("rotate new 0 0 6 4\r\nabcdef\r\n", "STORED\r\n"),
            ("get new\r\n", "VALUE new 0 4\r\ncdef\r\nEND\r\n"),
            // A smaller window trims what is there too.
            ("rotate fp 0 0 1 3\r\nZ\r\n", "STORED\r\n"),
            ("get fp\r\n", "VALUE fp 5 3\r\nijZ\r\nEND\r\n"),
            // noreply.
            ("rotate fp 0 0 1 3 noreply\r\nY\r\n", ""),
            ("get fp\r\n", "VALUE fp 5 3\r\njZY\r\nEND\r\n"),
        ],
    );
}

#[test]
fn rotate_keeps_the_ttl_of_an_existing_item_and_sets_a_new_ones() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.roundtrip(b"rotate t 0 100 2 8\r\nab\r\n", b"STORED\r\n");
    c.roundtrip(b"rotate t 0 0 2 8\r\ncd\r\n", b"STORED\r\n");
    // The TTL of 100 s is still there (0 did not clear it).
    let r = String::from_utf8(call(&mut c, b"mg t t v\r\n")).unwrap();
    let ttl: i64 = r
        .split_whitespace()
        .find_map(|w| w.strip_prefix('t'))
        .and_then(|t| t.parse().ok())
        .unwrap();
    assert!((98..=100).contains(&ttl), "{r}");
    assert!(r.ends_with("abcd\r\n"), "{r}");
}

#[test]
fn rotate_errors_are_clear_and_lose_nothing() {
    let s = TestServer::start();
    table(
        &s,
        &[
            ("set keep 0 0 4\r\nkeep\r\n", "STORED\r\n"),
            // A window of 0, or not a number.
            (
                "rotate keep 0 0 1 0\r\n",
                "CLIENT_ERROR bad command line format\r\n",
            ),
            ("x\r\n", "ERROR\r\n"),
            (
                "rotate keep 0 0 1 -5\r\n",
                "CLIENT_ERROR bad command line format\r\n",
            ),
            ("x\r\n", "ERROR\r\n"),
            (
                "rotate keep 0 0 1 many\r\n",
                "CLIENT_ERROR bad command line format\r\n",
            ),
            ("x\r\n", "ERROR\r\n"),
            // Missing the window: the wrong number of tokens.
            ("rotate keep 0 0 1\r\n", "ERROR\r\n"),
            ("x\r\n", "ERROR\r\n"),
            ("get keep\r\n", "VALUE keep 0 4\r\nkeep\r\nEND\r\n"),
            // A data block of the wrong length.
            (
                "rotate keep 0 0 1 8\r\nxyz\r\n",
                "CLIENT_ERROR bad data chunk\r\nERROR\r\n",
            ),
            ("get keep\r\n", "VALUE keep 0 4\r\nkeep\r\nEND\r\n"),
        ],
    );
}

#[test]
fn rotate_of_too_much_data_is_swallowed_and_the_item_kept() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.roundtrip(b"rotate big 0 0 3 8\r\nabc\r\n", b"STORED\r\n");
    let mut req = b"rotate big 0 0 2000000 8\r\n".to_vec();
    req.extend(std::iter::repeat_n(b'z', 2_000_000));
    req.extend_from_slice(b"\r\n");
    c.roundtrip(&req, b"SERVER_ERROR object too large for cache\r\n");
    c.roundtrip(b"get big\r\n", b"VALUE big 0 3\r\nabc\r\nEND\r\n");
}

#[test]
fn meta_set_rotation_mode() {
    let s = TestServer::start();
    table(
        &s,
        &[
            ("ms m 2 MW w4 F3 T0\r\nab\r\n", "HD\r\n"),
            ("ms m 2 MW w4\r\ncd\r\n", "HD\r\n"),
            ("ms m 2 MW w4 k O77\r\nef\r\n", "HD km O77\r\n"),
            ("mg m v f\r\n", "VA 4 f3\r\ncdef\r\n"),
            // q hides HD; the item is still rotated.
            ("ms m 1 MW w4 q\r\ng\r\nmn\r\n", "MN\r\n"),
            ("mg m v\r\n", "VA 4\r\ndefg\r\n"),
            // A compare-and-swap: the wrong CAS is EX, nothing changes.
            ("ms m 1 MW w4 C1\r\nh\r\n", "EX\r\n"),
            ("mg m v\r\n", "VA 4\r\ndefg\r\n"),
            // Rotation without a window, or a zero one, is refused.
            (
                "ms m 1 MW\r\nh\r\n",
                "CLIENT_ERROR bad token in command line format\r\n",
            ),
            (
                "ms m 1 MW w0\r\nh\r\n",
                "CLIENT_ERROR bad token in command line format\r\n",
            ),
            (
                "ms m 1 MW wx\r\nh\r\n",
                "CLIENT_ERROR bad token in command line format\r\n",
            ),
            ("mg m v\r\n", "VA 4\r\ndefg\r\n"),
        ],
    );
    // The CAS that matches swaps.
    let mut c = s.connect();
    let r = String::from_utf8(call(&mut c, b"mg m c\r\n")).unwrap();
    let cas = r.trim_end().strip_prefix("HD c").unwrap().to_string();
    c.roundtrip(
        format!("ms m 1 MW w4 C{cas}\r\nh\r\n").as_bytes(),
        b"HD\r\n",
    );
    c.roundtrip(b"mg m v\r\n", b"VA 4\r\nefgh\r\n");
}

#[test]
fn rotation_with_eviction_off_reports_out_of_memory() {
    let s = TestServer::with(|c| {
        c.memory_limit = 2;
        c.disable_evictions = true;
    });
    let mut c = s.connect();
    let chunk = vec![b'r'; 100_000];
    let mut full = false;
    for i in 0..100 {
        let mut req = format!("rotate k{i} 0 0 100000 100000\r\n").into_bytes();
        req.extend_from_slice(&chunk);
        req.extend_from_slice(b"\r\n");
        c.send(&req);
        let r = c.read_until(b"\r\n");
        if r == b"SERVER_ERROR out of memory storing object\r\n" {
            full = true;
            break;
        }
        assert_eq!(r, b"STORED\r\n");
    }
    assert!(full, "a 2 MB store never filled up");
    c.roundtrip(b"get k0\r\n", &{
        let mut v = b"VALUE k0 0 100000\r\n".to_vec();
        v.extend_from_slice(&chunk);
        v.extend_from_slice(b"\r\nEND\r\n");
        v
    });
}

#[test]
fn concurrent_rotations_keep_whole_records_each_at_most_once() {
    let s = TestServer::start();
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let mut c = s.connect();
            std::thread::spawn(move || {
                for i in 0..500u64 {
                    // An 8-byte record: writer in the high byte, then i.
                    let rec = ((w << 56) | i).to_be_bytes();
                    let mut req = b"rotate visits 0 0 8 480\r\n".to_vec();
                    req.extend_from_slice(&rec);
                    req.extend_from_slice(b"\r\n");
                    c.reply_is(&req, b"STORED\r\n");
                }
                c.expect_silence(std::time::Duration::from_millis(30));
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let mut c = s.connect();
    let r = call(&mut c, b"get visits\r\n");
    let head = b"VALUE visits 0 480\r\n";
    assert!(
        r.starts_with(head),
        "{:?}",
        String::from_utf8_lossy(&r[..40])
    );
    let value = &r[head.len()..head.len() + 480];
    let records: Vec<u64> = value
        .chunks(8)
        .map(|c| u64::from_be_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(records.len(), 60);
    let mut seen = std::collections::HashSet::new();
    let mut last = [None::<u64>; 4];
    for rec in records {
        let (w, i) = ((rec >> 56) as usize, rec & 0x00ff_ffff_ffff_ffff);
        assert!(w < 4 && i < 500, "a torn record: {rec:x}");
        assert!(seen.insert(rec), "record {rec:x} twice");
        // Each writer's records are in its own order.
        assert!(last[w].is_none_or(|l| l < i), "writer {w} out of order");
        last[w] = Some(i);
    }
    // The newest record of every writer is its last one: nothing after it
    // was lost.
    assert!(last.contains(&Some(499)));
}
