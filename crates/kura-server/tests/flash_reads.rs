//! Gets of values on the flash tier do not wait on the device on the
//! connection's worker: the request waits for its read from the tier's
//! reader threads while the worker serves other connections, replies keep
//! their order, a damaged record or a full read queue is a miss, and a
//! client that leaves while its read is under way harms nothing. The
//! device is held (kura-store's `Faults::hold_reads`) to keep reads under
//! way as long as a test needs.

mod common;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{bin, Client, TestServer};
use kura_server::ServerConfig;

/// The value of key `i`: 1,500 to 2,500 bytes only it has.
fn value(i: usize) -> Vec<u8> {
    kura_testkit::values::distinct(i, 1500..2500)
}

fn key(i: usize) -> String {
    format!("fk:{i:06}")
}

const N: usize = 12_000; // about 24 MB of values: three times -m 8

/// A server with `-m 8`, one worker and a flash tier of 32 MB in pages of
/// 2 MB, holding keys `0..N` (flash writes done); with the keys on flash
/// only and those in RAM.
struct Loaded {
    server: TestServer,
    /// Removed once the server (declared before it) has stopped.
    _dir: TempDir,
    flash: Vec<usize>,
    ram: Vec<usize>,
}

/// The test's directory, removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn loaded(name: &str) -> Loaded {
    loaded_with(name, 0)
}

/// A server of one worker, `-m 8` and 32 MiB of flash in a directory of its own (removed
/// when the `TempDir` drops: bind it first, so the server stops before), with `more` settings.
fn flash_server(name: &str, more: impl FnOnce(&mut ServerConfig)) -> (TempDir, TestServer) {
    let dir = std::env::temp_dir().join(format!("kura-flash-reads-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("extstore");
    let server = TestServer::with(|c| {
        c.threads = 1;
        c.memory_limit = 8;
        c.flash.paths = vec![format!("{}:32m", file.display())];
        c.flash.page_size_mb = 2;
        c.flash.wbuf_size_mb = 1;
        more(c);
    });
    (TempDir(dir), server)
}

/// [`loaded`], also serving UDP on `udp_port` (0: none).
fn loaded_with(name: &str, udp_port: u16) -> Loaded {
    let (dir, server) = flash_server(name, |c| c.udp_port = udp_port);
    let mut c = server.connect();
    for batch in (0..N).collect::<Vec<_>>().chunks(200) {
        let mut req = Vec::new();
        for &i in batch {
            let v = value(i);
            req.extend_from_slice(format!("set {} 5 0 {} noreply\r\n", key(i), v.len()).as_bytes());
            req.extend_from_slice(&v);
            req.extend_from_slice(b"\r\n");
        }
        req.extend_from_slice(b"mn\r\n");
        c.send(&req);
        c.read_until(b"MN\r\n");
    }
    let store = &server.handle().shared().store;
    store.flash_sync();
    let (flash, ram): (Vec<usize>, Vec<usize>) =
        (0..N).partition(|&i| store.on_flash_only(key(i).as_bytes()));
    assert!(flash.len() > 2_000, "{} keys on flash", flash.len());
    assert!(ram.len() > 100, "{} keys in RAM", ram.len());
    Loaded {
        server,
        _dir: dir,
        flash,
        ram,
    }
}

impl Loaded {
    /// Holds the device's reads until the guard is dropped (a failing
    /// test too lets them go, and the server stop).
    fn hold(&self) -> Held<'_> {
        self.faults().hold_reads.store(true, Ordering::Release);
        Held(self)
    }

    fn faults(&self) -> &kura_store::Faults {
        let store = &self.server.handle().shared().store;
        store.flash_faults().expect("a flash tier")
    }
}

struct Held<'a>(&'a Loaded);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.faults().hold_reads.store(false, Ordering::Release);
    }
}

/// The `VALUE` block `get` answers for key `i`.
fn value_block(i: usize) -> Vec<u8> {
    let v = value(i);
    let mut out = format!("VALUE {} 5 {}\r\n", key(i), v.len()).into_bytes();
    out.extend_from_slice(&v);
    out.extend_from_slice(b"\r\n");
    out
}

fn get_reply(keys: &[usize]) -> Vec<u8> {
    let mut out: Vec<u8> = keys.iter().flat_map(|&i| value_block(i)).collect();
    out.extend_from_slice(b"END\r\n");
    out
}

fn get_line(keys: &[usize]) -> Vec<u8> {
    let names: Vec<String> = keys.iter().map(|&i| key(i)).collect();
    format!("get {}\r\n", names.join(" ")).into_bytes()
}

fn stat(c: &mut Client, name: &str) -> u64 {
    c.send(b"stats\r\n");
    let all = String::from_utf8(c.read_until(b"END\r\n")).expect("text");
    let want = format!("STAT {name} ");
    all.lines()
        .find_map(|l| l.strip_prefix(&want))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in stats"))
}

/// Polls `ok` until it holds, for up to 20 seconds.
fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn values_on_flash_come_back_byte_for_byte_over_text_meta_and_binary() {
    let l = loaded("protocols");
    let (f, r) = (&l.flash, &l.ram);
    let mut c = l.server.connect();
    // A multi-get of keys on flash and in RAM, in its order.
    let mixed = [f[0], r[0], f[1], f[2], r[1], f[3]];
    c.send(&get_line(&mixed));
    assert!(c.read_exact(get_reply(&mixed).len()) == get_reply(&mixed));
    // One that stops at a later key: the keys before it answered once.
    let (gets, hits) = (stat(&mut c, "cmd_get"), stat(&mut c, "get_hits"));
    let later = [r[3], r[4], f[10], r[5], f[11]];
    c.send(&get_line(&later));
    assert!(c.read_exact(get_reply(&later).len()) == get_reply(&later));
    assert_eq!(stat(&mut c, "cmd_get") - gets, 5);
    assert_eq!(stat(&mut c, "get_hits") - hits, 5);
    // gets and gat: the CAS and touch variants wait for their reads too.
    c.send(format!("gets {}\r\n", key(f[4])).as_bytes());
    let reply = c.read_until(b"END\r\n");
    let v = value(f[4]);
    let head = format!("VALUE {} 5 {} ", key(f[4]), v.len());
    assert!(reply.starts_with(head.as_bytes()), "{:?}", &reply[..40]);
    assert!(reply.windows(v.len()).any(|w| w == v.as_slice()));
    let touched = [f[5], r[2], f[6]];
    c.send(format!("gat 0 {} {} {}\r\n", key(f[5]), key(r[2]), key(f[6])).as_bytes());
    assert!(c.read_exact(get_reply(&touched).len()) == get_reply(&touched));
    // mg.
    let v = value(f[7]);
    c.send(format!("mg {} v f k\r\n", key(f[7])).as_bytes());
    let mut want = format!("VA {} f5 k{}\r\n", v.len(), key(f[7])).into_bytes();
    want.extend_from_slice(&v);
    want.extend_from_slice(b"\r\n");
    assert!(c.read_exact(want.len()) == want, "mg of a key on flash");
    assert!(stat(&mut c, "get_extstore") >= 8);
    assert_eq!(stat(&mut c, "miss_from_extstore"), 0);
    // Binary GET and GETK (a connection speaks one protocol).
    let mut c = l.server.connect();
    for (op, i) in [(0x00u8, f[8]), (0x0c, f[9])] {
        let k = key(i);
        let resp = c.bin_call(&bin(op, &[], k.as_bytes(), &[], 7, 0));
        assert_eq!(resp.status(), 0, "binary op {op:#x}");
        assert!(resp.value() == value(i).as_slice(), "binary op {op:#x}");
        assert_eq!(resp.extras(), 5u32.to_be_bytes());
    }
    let store = &l.server.handle().shared().store;
    let st = store.flash_stats().expect("a flash tier");
    assert!(st.get_extstore >= 10, "{st:?}");
    assert_eq!(st.miss_from_extstore, 0);
}

#[test]
fn a_held_read_parks_only_its_connection_and_replies_keep_their_order() {
    let l = loaded("order");
    let (f, r) = (&l.flash, &l.ram);
    let mut a = l.server.connect();
    let mut b = l.server.connect();
    let held = l.hold();
    // A pipelined batch whose first request's value is on flash.
    let mut batch = get_line(&[f[0]]);
    batch.extend_from_slice(&get_line(&[r[0], r[1]]));
    batch.extend_from_slice(format!("mg {} s\r\n", key(r[2])).as_bytes());
    batch.extend_from_slice(b"set fresh 0 0 2\r\nhi\r\nget fresh\r\n");
    a.send(&batch);
    // The one worker serves another connection meanwhile.
    b.send(&get_line(&[r[3]]));
    assert!(b.read_exact(get_reply(&[r[3]]).len()) == get_reply(&[r[3]]));
    a.expect_silence(Duration::from_millis(50));
    drop(held);
    let mut want = get_reply(&[f[0]]);
    want.extend_from_slice(&get_reply(&[r[0], r[1]]));
    want.extend_from_slice(format!("HD s{}\r\n", value(r[2]).len()).as_bytes());
    want.extend_from_slice(b"STORED\r\nVALUE fresh 0 2\r\nhi\r\nEND\r\n");
    let got = a.read_exact(want.len());
    assert!(
        got == want,
        "{}",
        String::from_utf8_lossy(&got[got.len() - 60..])
    );
}

#[test]
fn damaged_records_and_a_full_read_queue_are_misses_never_wrong_bytes() {
    let l = loaded("faults");
    let f = &l.flash;
    let store = &l.server.handle().shared().store;
    let faults = store.flash_faults().expect("a flash tier");
    let mut c = l.server.connect();
    // A byte flipped, then a short read: misses; then a whole read.
    faults.corrupt_reads.store(1, Ordering::Relaxed);
    c.send(&get_line(&[f[0], f[1]]));
    assert!(c.read_exact(get_reply(&[f[1]]).len()) == get_reply(&[f[1]]));
    faults.short_reads.store(1, Ordering::Relaxed);
    c.send(&get_line(&[f[2], f[3]]));
    assert!(c.read_exact(get_reply(&[f[3]]).len()) == get_reply(&[f[3]]));
    assert_eq!(stat(&mut c, "miss_from_extstore"), 2);
    assert_eq!(stat(&mut c, "badcrc_from_extstore"), 1);
    // The reader thread held: at most `read_queue` (1,024) reads wait, the
    // rest of 1,300 are misses at once (26 clients of 50 keys each: one
    // request starts at most 64 reads at a time).
    let held = l.hold();
    let keys: Vec<usize> = f[10..1310].to_vec();
    let mut conns: Vec<Client> = keys
        .chunks(50)
        .map(|chunk| {
            let mut k = l.server.connect();
            k.send(&get_line(chunk));
            k
        })
        .collect();
    wait_for("the read queue to refuse reads", || {
        stat(&mut c, "miss_from_extstore") >= 2 + 1300 - 1025
    });
    drop(held);
    let mut hits = 0;
    for (k, chunk) in conns.iter_mut().zip(keys.chunks(50)) {
        let reply = k.read_until(b"END\r\n");
        // Every block returned is its key's value, in request order.
        let mut want_order = chunk.iter();
        let mut at = 0;
        while !reply[at..].starts_with(b"END\r\n") {
            let line_end = at
                + reply[at..]
                    .windows(2)
                    .position(|w| w == b"\r\n")
                    .expect("line");
            let line = String::from_utf8_lossy(&reply[at..line_end]).into_owned();
            let name = line.split(' ').nth(1).expect("key");
            let i = *want_order.find(|&&i| key(i) == name).expect("in order");
            let block = value_block(i);
            assert!(reply[at..].starts_with(&block), "{name}: wrong bytes");
            at += block.len();
            hits += 1;
        }
    }
    assert!((1000..1300).contains(&hits), "{hits} hits");
}

#[test]
fn a_client_that_leaves_while_its_read_is_held_harms_nothing() {
    let l = loaded("leave");
    let (f, r) = (&l.flash, &l.ram);
    let mut b = l.server.connect();
    let before = stat(&mut b, "curr_connections");
    let held = l.hold();
    {
        let mut a = l.server.connect();
        a.send(&get_line(&[f[0], f[1]]));
        // One read held on the reader thread, the other queued.
        let store = &l.server.handle().shared().store;
        wait_for("the reads to be under way", || {
            store.flash_stats().is_some_and(|s| s.reads_waiting == 1)
        });
    }
    b.send(&get_line(&[r[0]]));
    assert!(b.read_exact(get_reply(&[r[0]]).len()) == get_reply(&[r[0]]));
    drop(held);
    wait_for("the connection to be closed", || {
        stat(&mut b, "curr_connections") == before
    });
    b.send(&get_line(&[f[2]]));
    assert!(b.read_exact(get_reply(&[f[2]]).len()) == get_reply(&[f[2]]));
}

#[test]
fn a_client_that_shuts_down_its_side_while_its_read_is_held_gets_its_reply() {
    let l = loaded("half-close");
    let (f, r) = (&l.flash, &l.ram);
    let held = l.hold();
    let mut a = l.server.connect();
    a.send(&get_line(&[f[0], r[0]]));
    a.stream
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown");
    // The request and the end of file may come in one read or two: either
    // way the request parks before the end is read.
    a.expect_silence(Duration::from_millis(50));
    drop(held);
    let want = get_reply(&[f[0], r[0]]);
    assert!(a.read_exact(want.len()) == want);
    assert!(a.is_closed(), "closed after the reply");
}

#[test]
fn a_held_me_parks_only_its_connection() {
    let l = loaded("me");
    let (f, r) = (&l.flash, &l.ram);
    let mut a = l.server.connect();
    let mut b = l.server.connect();
    let held = l.hold();
    a.send(format!("me {}\r\nmn\r\n", key(f[0])).as_bytes());
    // The one worker serves another connection meanwhile.
    b.send(&get_line(&[r[0]]));
    assert!(b.read_exact(get_reply(&[r[0]]).len()) == get_reply(&[r[0]]));
    a.expect_silence(Duration::from_millis(50));
    drop(held);
    let reply = String::from_utf8(a.read_until(b"MN\r\n")).expect("text");
    let want = format!("ME {} exp=-1 la=", key(f[0]));
    assert!(reply.starts_with(&want), "{reply}");
    assert!(reply.contains(" cls=1 size="), "{reply}");
    assert!(reply.ends_with("\r\nMN\r\n"), "{reply}");
}

/// A UDP request's datagram: the frame header, then `body`.
fn datagram(id: u16, body: &[u8]) -> Vec<u8> {
    let mut d = id.to_be_bytes().to_vec();
    d.extend_from_slice(&[0, 0, 0, 1, 0, 0]);
    d.extend_from_slice(body);
    d
}

/// Reads datagrams until the replies of `want` (request id and the bytes
/// its messages hold, in order) are all in; each id's bodies are joined.
fn udp_replies(sock: &std::net::UdpSocket, want: &[(u16, Vec<u8>)]) -> Vec<Vec<u8>> {
    let mut got = vec![Vec::new(); want.len()];
    let mut buf = [0u8; 2048];
    // Bounded: a datagram holds at least one byte of a reply.
    let most: usize = want.iter().map(|(_, w)| w.len()).sum();
    for _ in 0..most {
        if got.iter().zip(want).all(|(g, (_, w))| g.len() >= w.len()) {
            break;
        }
        let (n, _) = sock.recv_from(&mut buf).expect("a reply datagram");
        let id = u16::from_be_bytes([buf[0], buf[1]]);
        let at = want
            .iter()
            .position(|(i, _)| *i == id)
            .expect("a request's id");
        got[at].extend_from_slice(&buf[8..n]);
    }
    got
}

#[test]
fn a_held_udp_get_waits_without_holding_up_the_socket() {
    let port = {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("a free port");
        sock.local_addr().expect("its address").port()
    };
    let l = loaded_with("udp", port);
    let (f, r) = (&l.flash, &l.ram);
    let udp = l.server.udp.expect("a UDP listener");
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").expect("a client socket");
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    let held = l.hold();
    // A multi-get that stops at its second key, on flash.
    let first = [r[0], f[0], r[1], f[1]];
    sock.send_to(&datagram(1, &get_line(&first)), udp)
        .expect("sent");
    // The socket's next datagram is answered meanwhile, and the thread
    // serving it (the acceptor) takes new connections.
    let next = [r[2]];
    sock.send_to(&datagram(2, &get_line(&next)), udp)
        .expect("sent");
    let got = udp_replies(&sock, &[(2, get_reply(&next))]);
    assert!(got[0] == get_reply(&next));
    let mut c = l.server.connect();
    c.send(&get_line(&[r[3]]));
    assert!(c.read_exact(get_reply(&[r[3]]).len()) == get_reply(&[r[3]]));
    drop(held);
    let got = udp_replies(&sock, &[(1, get_reply(&first))]);
    assert!(got[0] == get_reply(&first), "the waiting datagram's reply");
    // `mg` over UDP too.
    let v = value(f[2]);
    sock.send_to(
        &datagram(3, format!("mg {} v\r\n", key(f[2])).as_bytes()),
        udp,
    )
    .expect("sent");
    let mut want = format!("VA {}\r\n", v.len()).into_bytes();
    want.extend_from_slice(&v);
    want.extend_from_slice(b"\r\n");
    assert!(udp_replies(&sock, &[(3, want.clone())])[0] == want);
}

#[test]
fn ext_item_age_moves_idle_values_to_flash_while_ram_has_room() {
    let (_dir, server) = flash_server("age", |c| c.flash.item_age = 60);
    let mut c = server.connect();
    let keys: Vec<usize> = (0..40).collect();
    for &i in &keys {
        let v = value(i);
        c.send(format!("set {} 5 0 {}\r\n", key(i), v.len()).as_bytes());
        c.send(&v);
        c.send(b"\r\n");
        assert_eq!(c.read_exact(8), b"STORED\r\n");
    }
    let store = &server.handle().shared().store;
    let on_flash = || {
        keys.iter()
            .filter(|&&i| store.on_flash_only(key(i).as_bytes()))
            .count()
    };
    assert_eq!(on_flash(), 0, "RAM has room: nothing evicted");
    // Half read at 30 s: idle 31 s at 61 s, the rest 61 s.
    server.advance_clock(30);
    c.send(&get_line(&keys[..20]));
    assert!(c.read_exact(get_reply(&keys[..20]).len()) == get_reply(&keys[..20]));
    server.advance_clock(31);
    wait_for("the idle half on flash", || on_flash() == 20);
    for &i in &keys[20..] {
        assert!(store.on_flash_only(key(i).as_bytes()), "key {i} idle 61 s");
    }
    // Each comes back byte for byte.
    c.send(&get_line(&keys));
    assert!(c.read_exact(get_reply(&keys).len()) == get_reply(&keys));
}

/// A multi-get of thousands of keys on flash (more than the reader
/// threads' queue takes at once), each named twice, as a page's
/// `get_multi` sends them: every value comes back, byte for byte and in
/// order, none answered as a miss for want of room in the queue; over text
/// and over meta (`mg` pipelined, one request a key).
#[test]
fn a_multi_get_of_thousands_of_keys_on_flash_gets_every_value() {
    let l = loaded("many");
    let f = &l.flash;
    assert!(f.len() > 2_000, "{} keys on flash", f.len());
    let mut c = l.server.connect();
    let twice: Vec<usize> = f.iter().flat_map(|&i| [i, i]).collect();
    let (misses, flash_misses) = (
        stat(&mut c, "get_misses"),
        stat(&mut c, "miss_from_extstore"),
    );
    // On a slow device: the reads wait until the request has started
    // them all (the one worker has answered another connection since).
    let held = l.hold();
    c.send(&get_line(&twice));
    wait_for("a read under way", || {
        l.faults().reads_held.load(Ordering::Acquire) > 0
    });
    let mut other = l.server.connect();
    stat(&mut other, "curr_items");
    drop(held);
    let want = get_reply(&twice);
    let got = c.read_exact(want.len());
    assert!(got == want, "the values of {} keys", twice.len());
    assert_eq!(stat(&mut c, "get_misses"), misses, "misses");
    assert_eq!(stat(&mut c, "miss_from_extstore"), flash_misses);
    // The same keys again (read back, some recached), then as pipelined mg.
    c.send(&get_line(&twice));
    assert!(c.read_exact(want.len()) == want, "again");
    let keys: Vec<usize> = f.iter().copied().take(3_000).collect();
    let mut line = Vec::new();
    let mut want = Vec::new();
    for &i in &keys {
        let v = value(i);
        line.extend_from_slice(format!("mg {} v\r\n", key(i)).as_bytes());
        want.extend_from_slice(format!("VA {}\r\n", v.len()).as_bytes());
        want.extend_from_slice(&v);
        want.extend_from_slice(b"\r\n");
    }
    c.send(&line);
    assert!(c.read_exact(want.len()) == want, "pipelined mg");
    assert_eq!(stat(&mut c, "get_misses"), misses, "misses");
}
