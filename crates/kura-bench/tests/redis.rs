//! `kura bench -P resp` against a real Redis server (redis-server on a
//! free port, no persistence): the same verified load as against memcached,
//! so that replication's benchmark can drive Redis at a fixed rate.
//!
//! redis-server is found at `$KURA_REDIS_SERVER` or `/usr/bin/redis-server`;
//! when it is missing each test says "skipped", unless
//! `KURA_REQUIRE_MEMCACHED=1` (CI), which makes it fail.

mod common;

use common::{bench, Redis};

#[test]
fn an_empty_redis_answers_every_get_with_a_miss() {
    let Some(redis) = Redis::start() else { return };
    let report = bench(&format!(
        "-s {} -P resp -c 4 -n 1000 --ratio 1:0",
        redis.addr
    ));
    let run = &report.runs[0];
    assert_eq!(run.errors, 0, "errors: {:?}", run.error_samples);
    assert_eq!((run.gets, run.hits, run.misses), (1000, 0, 1000));
}

#[test]
fn a_prefilled_mix_multi_gets_and_an_open_loop_are_verified() {
    let Some(redis) = Redis::start() else { return };
    let report = bench(&format!(
        "-s {} -P resp -c 3 --pipeline 8 -n 3001 --keys 500 --prefill --value-size 20-300",
        redis.addr
    ));
    let prefill = report.prefill.clone().expect("prefill ran");
    assert_eq!((prefill.sets, prefill.errors), (500, 0));
    let run = &report.runs[0];
    assert_eq!(run.errors, 0, "errors: {:?}", run.error_samples);
    assert_eq!(run.requests, 3001);
    assert_eq!(
        (run.misses, run.hits),
        (0, run.gets),
        "every get of a set key hits"
    );
    assert!(run.sets > 0 && run.gets > run.sets, "9:1 mix");

    // Keys 500..999 were never set: multi-gets of 1,000 keys mix hits and
    // misses, and MGET answers every key in place.
    let multi = bench(&format!(
        "-s {} -P resp -c 2 --pipeline 4 --keys 1000 --multiget 10 --ratio 1:0 -n 400 --value-size 20-300",
        redis.addr
    ));
    let run = &multi.runs[0];
    assert_eq!(run.errors, 0, "errors: {:?}", run.error_samples);
    assert_eq!(run.hits + run.misses, 4000);
    assert!(run.hits > 0 && run.misses > 0, "{run:?}");

    let open = bench(&format!(
        "-s {} -P resp -c 3 --rate 4000 -n 400 --keys 500 --ratio 0:1",
        redis.addr
    ));
    let run = &open.runs[0];
    assert_eq!(run.errors, 0, "errors: {:?}", run.error_samples);
    assert_eq!((run.sets, run.offered_rate), (400, Some(4000.0)));
    assert_eq!(run.latency_us.samples, 400);
}

#[test]
fn a_value_redis_did_not_get_from_the_load_is_an_error() {
    let Some(redis) = Redis::start() else { return };
    // Another client writes a value without the load's header under one
    // of its keys: a get of it must be an error, not a hit.
    let mut s = std::net::TcpStream::connect(&redis.addr).expect("connect");
    use std::io::{Read, Write};
    s.write_all(b"*3\r\n$3\r\nSET\r\n$5\r\nkey:0\r\n$20\r\nxxxxxxxxxxxxxxxxxxxx\r\n")
        .expect("write");
    let mut ok = [0u8; 5];
    s.read_exact(&mut ok).expect("read");
    assert_eq!(&ok, b"+OK\r\n");
    let report = bench(&format!(
        "-s {} -P resp -c 1 -n 10 --keys 1 --ratio 1:0",
        redis.addr
    ));
    let run = &report.runs[0];
    assert_eq!((run.errors, run.hits), (10, 0), "{run:?}");
}

#[test]
fn noreply_is_refused_for_redis() {
    let args = ["kura bench", "-P", "resp", "--noreply"];
    let args = <kura_bench::BenchArgs as clap::Parser>::try_parse_from(args).expect("parses");
    let err = args.check().expect_err("refused");
    assert!(err.to_string().contains("no quiet sets"), "{err}");
}
