//! `kura bench` against servers that misbehave: a tiny text-protocol server
//! in this test that stores nothing and answers every get with a value it
//! makes up, with a fault. Wrong values, error replies and a dropped
//! connection must all be reported as errors, never as hits.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

use common::bench;

#[derive(Clone, Copy)]
enum Fault {
    /// Answer gets with the right value (a control).
    None,
    /// One byte of the value changed.
    FlipByte,
    /// The value of the next key.
    OtherKeysValue,
    /// Flags that do not match the value.
    WrongFlags,
    /// `SERVER_ERROR` to every set.
    RefuseSets,
    /// Close the connection instead of answering request number n+1.
    HangUpAfter(usize),
}

/// Starts the fake server; returns its address.
fn fake(fault: Fault) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream, fault));
        }
    });
    addr
}

fn serve(stream: TcpStream, fault: Fault) {
    let mut out = stream.try_clone().expect("clone");
    let mut input = BufReader::new(stream);
    let mut line = String::new();
    let mut answered = 0;
    loop {
        line.clear();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Fault::HangUpAfter(n) = fault {
            if answered == n {
                return;
            }
        }
        answered += 1;
        let words: Vec<&str> = line.split_whitespace().collect();
        let reply = match words.first().copied() {
            Some("get") => {
                let mut r = Vec::new();
                for key in &words[1..] {
                    r.extend(fake_value(key, fault));
                }
                r.extend_from_slice(b"END\r\n");
                r
            }
            Some("set") => {
                let len: usize = words[4].parse().expect("set length");
                let mut data = vec![0; len + 2];
                input.read_exact(&mut data).expect("set data");
                if words.last() == Some(&"noreply") {
                    continue;
                }
                match fault {
                    Fault::RefuseSets => b"SERVER_ERROR out of memory storing object\r\n".to_vec(),
                    _ => b"STORED\r\n".to_vec(),
                }
            }
            Some("version") => b"VERSION fake\r\n".to_vec(),
            _ => b"ERROR\r\n".to_vec(),
        };
        if out.write_all(&reply).is_err() {
            return;
        }
    }
}

/// `VALUE` for `key` (named `key:<digits>`), with the fault applied.
fn fake_value(key: &str, fault: Fault) -> Vec<u8> {
    let id: u64 = key.trim_start_matches("key:").parse().expect("key number");
    let salt = 7;
    let mut flags = kura_bench::value::flags_for(salt);
    let mut value = Vec::new();
    match fault {
        Fault::OtherKeysValue => kura_bench::value::fill(id + 1, salt, 100, &mut value),
        _ => kura_bench::value::fill(id, salt, 100, &mut value),
    }
    match fault {
        Fault::FlipByte => value[60] ^= 0x20,
        Fault::WrongFlags => flags += 1,
        _ => {}
    }
    let mut r = format!("VALUE {key} {flags} {}\r\n", value.len()).into_bytes();
    r.extend(value);
    r.extend_from_slice(b"\r\n");
    r
}

/// 200 gets over `conns` connections.
fn gets(addr: &str, conns: usize, extra: &str) -> kura_bench::RunSummary {
    let report = bench(&format!("-s {addr} -c {conns} --ratio 1:0 -n 200 {extra}"));
    assert_eq!(report.errors(), report.runs[0].errors);
    report.runs[0].clone()
}

#[test]
fn right_values_from_the_fake_are_hits() {
    let run = gets(&fake(Fault::None), 2, "--multiget 3");
    assert_eq!(
        (run.requests, run.errors),
        (200, 0),
        "{:?}",
        run.error_samples
    );
    assert_eq!((run.hits, run.misses), (600, 0));
}

#[test]
fn wrong_values_are_errors_not_hits() {
    for fault in [Fault::FlipByte, Fault::OtherKeysValue, Fault::WrongFlags] {
        let run = gets(&fake(fault), 2, "");
        assert_eq!(run.requests, 200);
        assert_eq!(run.errors, 200);
        assert_eq!(run.error_kinds.wrong_value, 200);
        assert_eq!(run.hits, 0);
        assert!(
            run.error_samples[0].contains("wrong value"),
            "{:?}",
            run.error_samples
        );
    }
    // In a multi-get, every key's value is wrong: one error per request.
    let run = gets(&fake(Fault::FlipByte), 2, "--multiget 4");
    assert_eq!((run.errors, run.hits, run.misses), (200, 0, 0));
}

#[test]
fn error_replies_are_errors() {
    let addr = fake(Fault::RefuseSets);
    let report = bench(&format!("-s {addr} -c 2 --ratio 0:1 -n 100"));
    let run = &report.runs[0];
    assert_eq!((run.requests, run.sets), (100, 100));
    assert_eq!(run.error_kinds.server, 100);
    assert!(run.error_samples[0].contains("SERVER_ERROR"));
}

#[test]
fn a_dropped_connection_loses_what_was_in_flight() {
    let addr = fake(Fault::HangUpAfter(50));
    let run = gets(&addr, 1, "");
    // 50 answered, the 51st sent and never answered; nothing after it.
    assert_eq!(run.requests, 51);
    assert_eq!(run.error_kinds.lost, 1);
    assert_eq!(run.error_kinds.connections, 1);
    assert_eq!(run.errors, 2);
    assert_eq!(run.latency_us.samples, 50);
}

#[test]
fn an_unreachable_server_is_an_error_before_any_run() {
    let port = common::free_port();
    let argv = ["kura bench", "-s", &format!("127.0.0.1:{port}"), "-n", "10"];
    let args = <kura_bench::BenchArgs as clap::Parser>::try_parse_from(argv).expect("args");
    let err = kura_bench::run(&args, &mut Vec::new()).expect_err("nothing listens");
    assert!(err.to_string().contains("cannot connect"), "{err}");
}
