//! The worker's two loops for plain connections (`-o worker_loop`): the
//! readiness loop (`direct`, the default) and a task per connection
//! (`tasks`). Every test runs under both, and the cases are the ones where
//! a connection of the readiness loop has to move to a task of its own
//! part-way: a client that does not read its replies while more requests
//! wait in the server's buffer, a value that waits for room, a
//! subscription; and requests cut at every byte, `-R` turns, the stop.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{Client, TestServer};
use kura_server::{ServerConfig, WorkerLoop};

const LOOPS: [WorkerLoop; 2] = [WorkerLoop::Direct, WorkerLoop::Tasks];

fn server(wl: WorkerLoop, tweak: impl FnOnce(&mut ServerConfig)) -> TestServer {
    TestServer::with(|c| {
        c.worker_loop = wl;
        tweak(c);
    })
}

fn stat(c: &mut Client, group: &str, name: &str) -> String {
    c.send(
        format!("stats {group}\r\n")
            .trim_end_matches(' ')
            .as_bytes(),
    );
    let text = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
    let prefix = format!("STAT {name} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .to_string()
}

#[test]
fn stats_settings_say_which_loop_serves() {
    for wl in LOOPS {
        let s = server(wl, |_| {});
        let mut c = s.connect();
        let want = match wl {
            WorkerLoop::Direct => "direct",
            WorkerLoop::Tasks => "tasks",
        };
        assert_eq!(stat(&mut c, "settings", "worker_loop"), want);
    }
    // Where every request may wait, the readiness loop is not used.
    let s = server(WorkerLoop::Direct, |c| c.idle_timeout = 30);
    let mut c = s.connect();
    assert_eq!(stat(&mut c, "settings", "worker_loop"), "tasks");
}

/// 1,000 gets of a 60 KB value in one write of 9 KB (one read for the
/// server), not read for a while: the replies (60 MB) fill the socket, the
/// server stops writing with requests still to run in its buffer and none
/// to come, and every reply arrives once the client reads, in order; the
/// connection then goes on serving.
#[test]
fn a_client_that_reads_late_gets_every_reply_in_order() {
    for wl in LOOPS {
        let s = server(wl, |_| {});
        let mut c = s.connect();
        let value: Vec<u8> = (0..60_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let mut set = format!("set big 0 0 {}\r\n", value.len()).into_bytes();
        set.extend_from_slice(&value);
        set.extend_from_slice(b"\r\n");
        c.roundtrip(&set, b"STORED\r\n");
        let n = 1_000;
        let mut batch = Vec::new();
        for i in 0..n {
            batch.extend_from_slice(b"get big\r\n");
            if i % 400 == 399 {
                batch.extend_from_slice(format!("set mark{i} 0 0 1\r\nx\r\n").as_bytes());
            }
        }
        batch.extend_from_slice(b"get mark799\r\n");
        c.send(&batch);
        std::thread::sleep(Duration::from_millis(300));
        let mut one = format!("VALUE big 0 {}\r\n", value.len()).into_bytes();
        one.extend_from_slice(&value);
        one.extend_from_slice(b"\r\nEND\r\n");
        let mut want = Vec::new();
        for i in 0..n {
            want.extend_from_slice(&one);
            if i % 400 == 399 {
                want.extend_from_slice(b"STORED\r\n");
            }
        }
        want.extend_from_slice(b"VALUE mark799 0 1\r\nx\r\nEND\r\n");
        let got = c.read_exact(want.len());
        assert!(got == want, "{wl:?}: replies differ");
        c.roundtrip(b"get mark399\r\n", b"VALUE mark399 0 1\r\nx\r\nEND\r\n");
    }
}

/// Requests arrive a byte at a time, and pipelined with one cut anywhere:
/// each is answered once, whole.
#[test]
fn requests_cut_anywhere_are_answered_whole() {
    for wl in LOOPS {
        let s = server(wl, |_| {});
        let mut c = s.connect();
        c.stream.set_nodelay(true).unwrap();
        for &b in b"set k 5 0 3\r\nabc\r\n".iter() {
            c.stream.write_all(&[b]).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(c.read_exact(8), b"STORED\r\n");
        let pipeline = b"get k\r\nincr n 1\r\nset n 0 0 1\r\n7\r\nincr n 2\r\nmn\r\n";
        let want = b"VALUE k 5 3\r\nabc\r\nEND\r\nNOT_FOUND\r\nSTORED\r\n9\r\nMN\r\n";
        for cut in 1..pipeline.len() {
            c.send(b"delete n\r\n");
            let _ = c.read_until(b"\r\n");
            c.stream.write_all(&pipeline[..cut]).unwrap();
            std::thread::sleep(Duration::from_millis(2));
            c.stream.write_all(&pipeline[cut..]).unwrap();
            assert_eq!(c.read_exact(want.len()), want, "{wl:?}: cut at {cut}");
        }
    }
}

/// With `-R 1` each connection gives way after every request; pipelines on
/// several connections at once are all answered, in order.
#[test]
fn connections_giving_way_after_each_request_are_all_answered() {
    for wl in LOOPS {
        let s = server(wl, |c| c.reqs_per_event = 1);
        let addr = s.addr;
        let clients: Vec<_> = (0..8)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut c = Client::connect(addr);
                    let mut batch = Vec::new();
                    let mut want = Vec::new();
                    for i in 0..500 {
                        let v = format!("{t}-{i}");
                        batch.extend_from_slice(
                            format!("set k{t}-{i} 0 0 {}\r\n{v}\r\nget k{t}-{i}\r\n", v.len())
                                .as_bytes(),
                        );
                        want.extend_from_slice(
                            format!("STORED\r\nVALUE k{t}-{i} 0 {}\r\n{v}\r\nEND\r\n", v.len())
                                .as_bytes(),
                        );
                    }
                    c.send(&batch);
                    assert_eq!(c.read_exact(want.len()), want);
                })
            })
            .collect();
        for t in clients {
            t.join().unwrap();
        }
        let mut c = s.connect();
        let yields: u64 = stat(&mut c, "", "conn_yields").parse().unwrap();
        assert!(yields >= 8 * 1000, "{wl:?}: conn_yields {yields}");
    }
}

/// A value larger than the room left for values being received waits for
/// room (here: for another client's value to finish), then is stored; or,
/// past the wait's bound on a slow machine, refused as memcached refuses a
/// value it has no memory for. Either way the connection goes on serving.
#[test]
fn a_value_waiting_for_room_is_answered_and_the_connection_serves_on() {
    for wl in LOOPS {
        // -m 4: room for about 1 MB of values being received.
        let s = server(wl, |c| {
            c.memory_limit = 4;
            c.shards = 1;
        });
        let big = 700 * 1024;
        let head = |k: &str| format!("set {k} 0 0 {big}\r\n").into_bytes();
        // The first client holds room for its value, sending half of it.
        let mut a = s.connect();
        a.send(&head("a"));
        a.send(&vec![b'a'; big / 2]);
        std::thread::sleep(Duration::from_millis(100));
        // The second asks for as much: it waits.
        let mut b = s.connect();
        b.send(&head("b"));
        b.send(&vec![b'b'; big]);
        b.send(b"\r\n");
        std::thread::sleep(Duration::from_millis(100));
        a.send(&vec![b'a'; big - big / 2]);
        a.send(b"\r\n");
        assert_eq!(a.read_exact(8), b"STORED\r\n");
        let answer = b.read_until(b"\r\n");
        let mut want = match &answer[..] {
            b"STORED\r\n" => {
                let mut v = format!("VALUE b 0 {big}\r\n").into_bytes();
                v.extend_from_slice(&vec![b'b'; big]);
                v.extend_from_slice(b"\r\n");
                v
            }
            b"SERVER_ERROR out of memory storing object\r\n" => Vec::new(),
            other => panic!("{wl:?}: {:?}", String::from_utf8_lossy(other)),
        };
        want.extend_from_slice(b"END\r\n");
        b.send(b"get b\r\n");
        assert!(b.read_exact(want.len()) == want, "{wl:?}: value differs");
    }
}

/// A connection that subscribes to invalidations (`mt`) hears them while
/// it sits idle, whichever loop it started in.
#[test]
fn a_subscriber_hears_invalidations_while_idle() {
    for wl in LOOPS {
        let s = server(wl, |_| {});
        let mut sub = s.connect();
        sub.roundtrip(b"set w 0 0 1\r\n1\r\n", b"STORED\r\n");
        sub.roundtrip(b"mt\r\nget w\r\n", b"HD\r\nVALUE w 0 1\r\n1\r\nEND\r\n");
        let mut other = s.connect();
        other.roundtrip(b"set w 0 0 1\r\n2\r\n", b"STORED\r\n");
        assert_eq!(sub.read_exact(6), b"IV w\r\n", "{wl:?}");
        other.roundtrip(b"set w 0 0 1\r\n3\r\n", b"STORED\r\n");
        sub.roundtrip(b"get w\r\n", b"VALUE w 0 1\r\n3\r\nEND\r\n");
    }
}

/// At the stop, idle connections are closed and a request sent before it
/// is answered.
#[test]
fn the_stop_closes_idle_connections() {
    for wl in LOOPS {
        let s = server(wl, |_| {});
        let mut idle: Vec<Client> = (0..4).map(|_| s.connect()).collect();
        for c in &mut idle {
            c.roundtrip(b"set s 0 0 1\r\n1\r\n", b"STORED\r\n");
        }
        let mut raw = TcpStream::connect(s.addr).unwrap();
        raw.write_all(b"get s\r\n").unwrap();
        let want = b"VALUE s 0 1\r\n1\r\nEND\r\n";
        let mut got = vec![0; want.len()];
        raw.read_exact(&mut got).unwrap();
        assert_eq!(got, want);
        s.handle().shutdown();
        for c in &mut idle {
            assert!(c.is_closed(), "{wl:?}: a connection stayed open");
        }
        drop(s);
    }
}

fn curr_connections(s: &TestServer) -> u64 {
    let mut c = s.connect();
    stat(&mut c, "", "curr_connections").parse().unwrap()
}

/// Clients that send their requests and their end of file at once, then
/// read the replies and close, are all let go: the server's count of open
/// connections comes back down, as memcached's does (the end of file came
/// with the requests: no later event announces it).
#[test]
fn clients_that_send_and_close_at_once_are_let_go() {
    for wl in LOOPS {
        let s = server(wl, |_| {});
        let before = curr_connections(&s);
        for i in 0..300 {
            let mut raw = TcpStream::connect(s.addr).unwrap();
            let req = format!("set gone{i} 0 0 1\r\nx\r\nget gone{i}\r\n");
            raw.write_all(req.as_bytes()).unwrap();
            raw.shutdown(std::net::Shutdown::Write).unwrap();
            let want = format!("STORED\r\nVALUE gone{i} 0 1\r\nx\r\nEND\r\n");
            let mut replies = vec![0; want.len()];
            raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            raw.read_exact(&mut replies).unwrap();
            assert_eq!(replies, want.as_bytes(), "{wl:?}");
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut now = curr_connections(&s);
        while now != before && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            now = curr_connections(&s);
        }
        assert_eq!(now, before, "{wl:?}: connections left open");
    }
}
