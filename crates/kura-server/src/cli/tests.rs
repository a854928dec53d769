//! Tests of the command line: memcached's flags, kura's own, `-o`.

use std::path::PathBuf;

use clap::Parser;

use super::*;
use crate::config::{Protocol, WorkerLoop};
use crate::tls::{MinVersion, VerifyMode};

#[derive(Parser)]
struct Cmd {
    #[command(flatten)]
    args: ServerArgs,
}

fn parse(args: &[&str]) -> Result<ServerConfig, String> {
    let cmd = Cmd::try_parse_from(std::iter::once("kura").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    cmd.args
        .into_config()
        .map(|(c, _, _)| c)
        .map_err(|e| e.to_string())
}

#[test]
fn memcached_flags() {
    let c = parse(&[
        "-p",
        "22122",
        "-m",
        "128",
        "-c",
        "10",
        "-t",
        "2",
        "-vv",
        "-A",
        "-I",
        "2m",
        "-l",
        "0.0.0.0,::1",
    ])
    .unwrap();
    assert_eq!(c.port, 22122);
    assert_eq!(c.memory_limit, 128);
    assert_eq!(c.max_connections, 10);
    assert_eq!(c.threads, 2);
    assert_eq!(c.verbosity, 2);
    assert!(c.enable_shutdown);
    assert_eq!(c.item_size_max, 2 * 1024 * 1024);
    assert_eq!(c.listen, vec!["0.0.0.0", "::1"]);
}

#[test]
fn large_pages_from_the_flag_and_the_file_reach_the_store() {
    assert!(!parse(&[]).unwrap().store_config().huge_pages);
    for args in [&["-L"][..], &["--enable-largepages"], &["-L", "-L"]] {
        assert!(parse(args).unwrap().store_config().huge_pages, "{args:?}");
    }
    let t: ServerConfig = toml::from_str("large_pages = true").unwrap();
    assert!(t.store_config().huge_pages);
    // -L is no longer among the flags kura accepts and ignores.
    let cmd = Cmd::try_parse_from(["kura", "-L"]).unwrap();
    let (_, _, warnings) = cmd.args.into_config().unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn repl_resync_buffer_takes_sizes_and_refuses_anything_else() {
    assert_eq!(parse(&[]).unwrap().repl_resync_buffer, 256 << 20);
    let c = parse(&["--repl-resync-buffer", "64m"]).unwrap();
    assert_eq!(c.resync_buffer_bytes(), 64 << 20);
    assert_eq!(
        parse(&["--repl-resync-buffer", "0"])
            .unwrap()
            .repl_resync_buffer,
        0
    );
    let e = parse(&["--repl-resync-buffer", "lots"]).unwrap_err();
    assert!(
        e.contains("--repl-resync-buffer") && e.contains("lots"),
        "{e}"
    );
    let t: ServerConfig = toml::from_str("repl_resync_buffer = 1048576").unwrap();
    assert_eq!(t.repl_resync_buffer, 1 << 20);
}

#[test]
fn metrics_listen() {
    assert_eq!(parse(&[]).unwrap().metrics_listen, None);
    let c = parse(&["--metrics-listen", "127.0.0.1:9150"]).unwrap();
    assert_eq!(c.metrics_listen.as_deref(), Some("127.0.0.1:9150"));
    let t: ServerConfig = toml::from_str("metrics_listen = \"[::1]:9150\"").unwrap();
    assert_eq!(t.metrics_listen.as_deref(), Some("[::1]:9150"));
}

#[test]
fn a_repeated_flag_takes_the_last_value() {
    let c = parse(&[
        "-m",
        "64",
        "-p",
        "1",
        "-c",
        "10",
        "-t",
        "1",
        "-I",
        "1m",
        "-R",
        "5",
        "-b",
        "10",
        "-B",
        "binary",
        "-a",
        "755",
        "-U",
        "7",
        "-P",
        "/a",
        "-u",
        "a",
        "--shards",
        "2",
        "--eviction",
        "lru",
        "-m",
        "4096",
        "-p",
        "22122",
        "-c",
        "20",
        "-t",
        "3",
        "-I",
        "2m",
        "-R",
        "6",
        "-b",
        "20",
        "-B",
        "ascii",
        "-a",
        "711",
        "-U",
        "0",
        "-P",
        "/b",
        "-u",
        "b",
        "--shards",
        "4",
        "--eviction",
        "sieve",
    ])
    .unwrap();
    assert_eq!(c.memory_limit, 4096);
    assert_eq!(c.port, 22122);
    assert_eq!(c.max_connections, 20);
    assert_eq!(c.threads, 3);
    assert_eq!(c.item_size_max, 2 * 1024 * 1024);
    assert_eq!(c.reqs_per_event, 6);
    assert_eq!(c.backlog, 20);
    assert_eq!(c.protocol, Protocol::Ascii);
    assert_eq!(c.unix_mask, 0o711);
    assert_eq!(c.udp_port, 0);
    assert_eq!(c.pidfile, Some(PathBuf::from("/b")));
    assert_eq!(c.user.as_deref(), Some("b"));
    assert_eq!(c.shards, 4);
    assert_eq!(c.eviction, "sieve");
    // Switches may be repeated too.
    let c = parse(&["-A", "-A", "-M", "-M", "-C", "-C", "-F", "-F", "-v", "-v"]).unwrap();
    assert!(c.enable_shutdown && c.disable_evictions && c.disable_cas);
    assert!(c.disable_flush_all);
    assert_eq!(c.verbosity, 2);
    let c = parse(&["-X", "-W"]).unwrap();
    assert!(c.disable_dumping && c.disable_watch);
}

#[test]
fn listen_addresses_and_extended_options_accumulate() {
    let c = parse(&[
        "-l",
        "127.0.0.1",
        "-l",
        "::1,127.0.0.2",
        "-o",
        "idle_timeout=5",
    ])
    .unwrap();
    assert_eq!(c.listen, vec!["127.0.0.1", "::1", "127.0.0.2"]);
    let c = parse(&["-o", "idle_timeout=5", "-o", "idle_timeout=7,modern"]).unwrap();
    assert_eq!(c.idle_timeout, 7);
}

#[test]
fn extended_options() {
    let c = parse(&["-o", "idle_timeout=5,modern", "-o", "hashpower=20"]).unwrap();
    assert_eq!(c.idle_timeout, 5);
    let e = parse(&["-o", "bogus"]).unwrap_err();
    assert!(e.contains("Illegal suboption \"bogus\""), "{e}");
    assert!(parse(&["-o", "idle_timeout=x"]).is_err());
    // The workers' time slice: 100 us by default, 0 for the kernel's,
    // else within what the kernel takes.
    assert_eq!(parse(&[]).unwrap().worker_slice_us, 100);
    assert_eq!(
        parse(&["-o", "worker_slice_us=0"]).unwrap().worker_slice_us,
        0
    );
    assert_eq!(
        parse(&["-o", "worker_slice_us=250"])
            .unwrap()
            .worker_slice_us,
        250
    );
    assert_eq!(parse(&[]).unwrap().worker_loop, WorkerLoop::Direct);
    assert_eq!(
        parse(&["-o", "worker_loop=tasks"]).unwrap().worker_loop,
        WorkerLoop::Tasks
    );
    // Pinning: none by default; a list as taskset -c takes it.
    assert!(parse(&[]).unwrap().worker_cpulist.is_empty());
    assert_eq!(
        parse(&["-o", "worker_cpulist=0-1:0"])
            .unwrap()
            .worker_cpulist,
        vec![0, 1, 0]
    );
    for bad in [
        "worker_cpulist=",
        "worker_cpulist=x",
        "worker_cpulist=2-1",
        "worker_loop=epoll",
        "worker_slice_us=50",
        "worker_slice_us=200000",
        "worker_slice_us=x",
    ] {
        let e = parse(&["-o", bad]).unwrap_err();
        assert!(e.contains(bad.split('=').next().unwrap_or(bad)), "{e}");
    }
}

#[test]
fn tls_options() {
    let c = parse(&[
        "-Z",
        "-o",
        "ssl_chain_cert=/c.pem,ssl_key=/k.pem",
        "-o",
        "ssl_ca_cert=/ca.pem,ssl_verify_mode=3,ssl_min_version=3,ssl_session_cache",
        "-l",
        "127.0.0.1,notls:127.0.0.1:11212",
    ])
    .unwrap();
    assert!(c.tls.enabled);
    assert_eq!(c.tls.chain_cert, Some(PathBuf::from("/c.pem")));
    assert_eq!(c.tls.key, Some(PathBuf::from("/k.pem")));
    assert_eq!(c.tls.ca_cert, Some(PathBuf::from("/ca.pem")));
    assert_eq!(c.tls.verify_mode, VerifyMode::Once);
    assert_eq!(c.tls.min_version, MinVersion::Tls13);
    assert_eq!(c.listen, vec!["127.0.0.1", "notls:127.0.0.1:11212"]);
    for (args, want) in [
        (
            "ssl_verify_mode=4",
            "invalid value for -o ssl_verify_mode: 4",
        ),
        (
            "ssl_min_version=tlsv1.2",
            "invalid value for -o ssl_min_version",
        ),
        ("ssl_ciphers=HIGH", "-o ssl_ciphers is not supported"),
        ("ssl_keyformat=2", "-o ssl_keyformat is not supported"),
        ("ssl_key=", "invalid value for -o ssl_key"),
    ] {
        let e = parse(&["-Z", "-o", args]).unwrap_err();
        assert!(e.contains(want), "{args}: {e}");
    }
}

#[test]
fn port_minus_one_is_a_free_port() {
    assert_eq!(parse(&["-p", "-1"]).unwrap().port, 0);
    assert_eq!(parse(&["--port=-1"]).unwrap().port, 0);
    assert!(parse(&["-p", "-1"]).unwrap().tcp);
    assert!(parse(&["-p", "-2"]).is_err());
}

/// memcached 1.6.18: `-p 0` listens on no TCP port; `-U N` without
/// `-p` moves TCP to N too; `-U -1` is a free UDP port (and, alone, a
/// free TCP port); `-U 0` is off.
#[test]
fn ports_zero_and_minus_one_as_memcached() {
    let c = parse(&["-p", "0", "-U", "11311"]).unwrap();
    assert!(!c.tcp);
    assert_eq!(c.udp_port, 11311);
    let c = parse(&["-U", "11311"]).unwrap();
    assert!(c.tcp);
    assert_eq!((c.port, c.udp_port), (11311, 11311));
    let c = parse(&["-U", "11311", "-p", "11411"]).unwrap();
    assert_eq!((c.port, c.udp_port), (11411, 11311));
    let c = parse(&["-U", "-1"]).unwrap();
    assert!(c.tcp && c.udp_free);
    assert_eq!((c.port, c.udp_port), (0, 0));
    let c = parse(&["-U", "0"]).unwrap();
    assert_eq!((c.port, c.udp_port, c.udp_free), (11211, 0, false));
    assert!(parse(&["-U", "-2"]).is_err());
}

#[test]
fn bad_values_are_errors() {
    assert!(parse(&["-p", "99999"]).is_err());
    assert!(parse(&["-B", "foo"]).is_err());
    assert!(parse(&["-I", "1g"]).is_err());
    assert!(parse(&["--bogus"]).is_err());
}

#[test]
fn sizes() {
    assert_eq!(parse_size("1024"), Some(1024));
    assert_eq!(parse_size("512k"), Some(512 * 1024));
    assert_eq!(parse_size("1m"), Some(1024 * 1024));
    assert_eq!(parse_size("x"), None);
}

#[test]
fn flash_tier_options_with_memcacheds_meanings() {
    let c = parse(&[
        "--ext-path",
        "/a/f:1g",
        "-o",
        "ext_path=/b/f:64m,ext_item_size=1024,ext_wbuf_size=8,ext_page_size=32",
        "-o",
        "ext_compact_under=3,ext_drop_under=2,ext_max_frag=0.5,ext_drop_unread,ext_recache_rate=10",
        "-o",
        "ext_threads=4,ext_item_age=4294967295,ext_low_ttl=0",
    ])
    .unwrap();
    let f = &c.flash;
    assert_eq!(f.paths, vec!["/a/f:1g".to_string(), "/b/f:64m".to_string()]);
    assert_eq!((f.item_size, f.wbuf_size_mb, f.page_size_mb), (1024, 8, 32));
    assert_eq!((f.compact_under, f.drop_under, f.recache_rate), (3, 2, 10));
    assert!(f.drop_unread && f.max_frag == 0.5);
    let store = c.flash_config().expect("a tier");
    assert_eq!(store.files.len(), 2);
    assert_eq!(store.files[0], (PathBuf::from("/a/f"), 1 << 30));
    assert_eq!((store.wbuf_size, store.page_size), (8 << 20, 32 << 20));
    assert_eq!((f.threads, store.threads), (4, 4));
    // memcached's default age: no limit.
    assert_eq!((f.item_age, store.item_age), (u32::MAX, None));
    let c = parse(&["--ext-path", "/a/f:1g", "-o", "ext_item_age=3600"]).unwrap();
    let store = c.flash_config().expect("a tier");
    assert_eq!((c.flash.item_age, store.item_age), (3600, Some(3600)));
    // Without a path there is no tier.
    assert!(parse(&[]).unwrap().flash_config().is_none());
    // Refused, each with its reason.
    for (bad, reason) in [
        ("ext_item_age=-1", "invalid value"),
        ("ext_low_ttl=60", "one pool"),
        ("ext_path=/a/f", "must supply size"),
        ("ext_path=/a/f:1g:compact", "one pool"),
        ("ext_bogus=1", "not an extstore option"),
        ("ext_item_size=x", "invalid value"),
    ] {
        let e = parse(&["-o", bad]).unwrap_err();
        assert!(e.contains(reason), "{bad}: {e}");
    }
    let e = parse(&["--ext-path", "/a/f:12"]).unwrap_err();
    assert!(e.contains("must supply size"), "{e}");
}
