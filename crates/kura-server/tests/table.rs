//! Fixed-length tables over the wire (`--table`): keys `NAME:ID`, ranges
//! in interval notation, rotation, errors, and a table file surviving a
//! restart.

mod common;

use common::{bin, set_extras, TestServer};
use kura_server::config::TableSpec;

fn spec(s: &str) -> TableSpec {
    s.parse().unwrap()
}

fn table(server: &TestServer, cases: &[(&str, &str)]) {
    let mut c = server.connect();
    for (req, want) in cases {
        c.roundtrip(req.as_bytes(), want.as_bytes());
    }
}

fn with_tables(specs: &[&str]) -> TestServer {
    let specs: Vec<TableSpec> = specs.iter().map(|s| spec(s)).collect();
    TestServer::with(move |c| c.tables = specs)
}

#[test]
fn storage_and_retrieval_on_table_keys() {
    let s = with_tables(&["fp:width=16:max=1000"]);
    table(
        &s,
        &[
            ("set fp:1 5 0 3\r\nabc\r\n", "STORED\r\n"),
            ("get fp:1\r\n", "VALUE fp:1 5 3\r\nabc\r\nEND\r\n"),
            // gets has no CAS to give: 0.
            ("gets fp:1\r\n", "VALUE fp:1 5 3 0\r\nabc\r\nEND\r\n"),
            ("add fp:1 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
            ("add fp:2 0 0 1\r\nx\r\n", "STORED\r\n"),
            ("replace fp:3 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
            ("replace fp:2 7 0 2\r\nyy\r\n", "STORED\r\n"),
            ("append fp:2 0 0 2\r\nzz\r\n", "STORED\r\n"),
            ("prepend fp:2 0 0 2\r\naa\r\n", "STORED\r\n"),
            ("get fp:2\r\n", "VALUE fp:2 7 6\r\naayyzz\r\nEND\r\n"),
            ("append fp:9 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
            // Past the width: too large, and append answers NOT_STORED.
            ("set fp:4 0 0 17\r\n01234567890123456\r\n", "SERVER_ERROR object too large for cache\r\n"),
            ("set fp:4 0 0 16\r\n0123456789012345\r\n", "STORED\r\n"),
            ("append fp:4 0 0 1\r\nx\r\n", "NOT_STORED\r\n"),
            ("get fp:4\r\n", "VALUE fp:4 0 16\r\n0123456789012345\r\nEND\r\n"),
            ("delete fp:4\r\n", "DELETED\r\n"),
            ("delete fp:4\r\n", "NOT_FOUND\r\n"),
            ("get fp:4\r\n", "END\r\n"),
            // Empty is a value, not a miss.
            ("set fp:5 0 0 0\r\n\r\n", "STORED\r\n"),
            ("get fp:5\r\n", "VALUE fp:5 0 0\r\n\r\nEND\r\n"),
            // noreply.
            ("set fp:6 0 0 1 noreply\r\nn\r\n", ""),
            ("get fp:6\r\n", "VALUE fp:6 0 1\r\nn\r\nEND\r\n"),
            // An ordinary key with a colon, and table and ordinary keys
            // in one get, answered in order.
            ("set other:1 0 0 1\r\no\r\n", "STORED\r\n"),
            (
                "get fp:1 other:1 fp:404 fp:2\r\n",
                "VALUE fp:1 5 3\r\nabc\r\nVALUE other:1 0 1\r\no\r\nVALUE fp:2 7 6\r\naayyzz\r\nEND\r\n",
            ),
        ],
    );
}

#[test]
fn ranges_in_interval_notation() {
    let s = with_tables(&["r:width=8:max=100"]);
    let mut c = s.connect();
    for id in [3u64, 5, 10, 20, 21, 99] {
        c.roundtrip(
            format!("set r:{id} {id} 0 2\r\nv{}\r\n", id % 10).as_bytes(),
            b"STORED\r\n",
        );
    }
    let get = |c: &mut common::Client, range: &str| -> Vec<u64> {
        c.send(format!("get r:{range}\r\n").as_bytes());
        let r = String::from_utf8(c.read_until(b"END\r\n")).unwrap();
        r.lines()
            .filter_map(|l| l.strip_prefix("VALUE r:"))
            .map(|l| l.split(' ').next().unwrap().parse().unwrap())
            .collect()
    };
    assert_eq!(get(&mut c, "[5,20)"), [5, 10]);
    assert_eq!(get(&mut c, "(5,20]"), [10, 20]);
    assert_eq!(get(&mut c, "[5,20]"), [5, 10, 20]);
    assert_eq!(get(&mut c, "(5,20)"), [10]);
    assert_eq!(get(&mut c, "[min,max]"), [3, 5, 10, 20, 21, 99]);
    assert_eq!(get(&mut c, "(min,10]"), [5, 10]);
    assert_eq!(get(&mut c, "[21,max)"), [21]);
    assert_eq!(get(&mut c, "[40,50]"), Vec::<u64>::new());
    assert_eq!(get(&mut c, "[50,40]"), Vec::<u64>::new());
    // A range's values carry their ids and flags.
    c.roundtrip(b"get r:[10,10]\r\n", b"VALUE r:10 10 2\r\nv0\r\nEND\r\n");
}

#[test]
fn rotation_on_a_table_record() {
    let s = with_tables(&["visits:width=24:max=10"]);
    table(
        &s,
        &[
            ("rotate visits:7 3 0 8 16\r\nAAAAAAAA\r\n", "STORED\r\n"),
            ("rotate visits:7 0 0 8 16\r\nBBBBBBBB\r\n", "STORED\r\n"),
            ("rotate visits:7 0 0 8 16\r\nCCCCCCCC\r\n", "STORED\r\n"),
            (
                "get visits:7\r\n",
                "VALUE visits:7 3 16\r\nBBBBBBBBCCCCCCCC\r\nEND\r\n",
            ),
            // A window wider than the slot keeps what fits.
            (
                "rotate visits:8 0 0 30 100\r\n012345678901234567890123456789\r\n",
                "STORED\r\n",
            ),
            (
                "get visits:8\r\n",
                "VALUE visits:8 0 24\r\n678901234567890123456789\r\nEND\r\n",
            ),
            ("ms visits:9 2 MW w4 F1\r\nab\r\n", "HD\r\n"),
            ("ms visits:9 4 MW w4\r\ncdef\r\n", "HD\r\n"),
            ("mg visits:9 v f s\r\n", "VA 4 f1 s4\r\ncdef\r\n"),
        ],
    );
}

#[test]
fn meta_commands_on_table_records() {
    let s = with_tables(&["m:width=8:max=10"]);
    table(
        &s,
        &[
            ("ms m:1 2 F4 T0 k O5\r\nhi\r\n", "HD km:1 O5\r\n"),
            ("mg m:1 v f s t c k\r\n", "VA 2 f4 s2 t-1 c0 km:1\r\nhi\r\n"),
            ("mg m:1\r\n", "HD\r\n"),
            ("mg m:2 v\r\n", "EN\r\n"),
            ("mg m:2 v q\r\nmn\r\n", "MN\r\n"),
            ("ms m:1 1 ME\r\nx\r\n", "NS\r\n"),
            ("ms m:1 1 MA q\r\n!\r\nmn\r\n", "MN\r\n"),
            ("mg m:1 v\r\n", "VA 3\r\nhi!\r\n"),
            ("md m:1 q\r\nmn\r\n", "MN\r\n"),
            ("md m:1\r\n", "NF\r\n"),
            // What a table record has no use for is refused, not ignored.
            (
                "ms m:3 1 T60\r\nx\r\n",
                "CLIENT_ERROR table records do not expire: exptime must be 0\r\n",
            ),
            (
                "ms m:3 1 C5\r\nx\r\n",
                "CLIENT_ERROR not supported on table records\r\n",
            ),
            (
                "mg m:3 N30\r\n",
                "CLIENT_ERROR not supported on table records\r\n",
            ),
            (
                "ma m:3\r\n",
                "CLIENT_ERROR not supported on table records\r\n",
            ),
        ],
    );
}

#[test]
fn bad_table_keys_and_commands_are_clear_errors() {
    let s = with_tables(&["t:width=8:max=10"]);
    let bad_id = "CLIENT_ERROR bad table id: expected a number from 1 to the table's max, or a range like [10,20)\r\n";
    table(
        &s,
        &[
            ("set t:1 0 0 1\r\nx\r\n", "STORED\r\n"),
            ("get t:0\r\n", bad_id),
            ("get t:11\r\n", bad_id),
            ("get t:abc\r\n", bad_id),
            ("get t:[1,2\r\n", bad_id),
            ("get t:1 t:x\r\n", bad_id),
            ("set t:0 0 0 1\r\nx\r\n", bad_id),
            ("delete t:99\r\n", bad_id),
            ("set t:[1,2] 0 0 1\r\nx\r\n", "CLIENT_ERROR ranges are read with get\r\n"),
            ("set t:2 0 60 1\r\nx\r\n", "CLIENT_ERROR table records do not expire: exptime must be 0\r\n"),
            ("cas t:1 0 0 1 5\r\nx\r\n", "CLIENT_ERROR table records have no CAS: use set, add, replace, append, prepend or rotate\r\n"),
            ("incr t:1 1\r\n", "CLIENT_ERROR not supported on table records\r\n"),
            ("touch t:1 10\r\n", "CLIENT_ERROR not supported on table records\r\n"),
            ("gat 10 t:1\r\n", "CLIENT_ERROR not supported on table records\r\n"),
            // Nothing stored was lost on the way.
            ("get t:1\r\n", "VALUE t:1 0 1\r\nx\r\nEND\r\n"),
        ],
    );
    // A too-large value is swallowed and the connection goes on.
    let mut c = s.connect();
    let mut big = b"set t:1 0 0 2000000\r\n".to_vec();
    big.extend(std::iter::repeat_n(b'z', 2_000_000));
    big.extend_from_slice(b"\r\n");
    c.roundtrip(&big, b"SERVER_ERROR object too large for cache\r\n");
    c.roundtrip(b"get t:1\r\n", b"VALUE t:1 0 1\r\nx\r\nEND\r\n");
}

#[test]
fn binary_requests_on_table_keys_are_refused() {
    let s = with_tables(&["b:width=8:max=10"]);
    let mut c = s.connect();
    let r = c.bin_call(&bin(0x01, &set_extras(0, 0), b"b:1", b"v", 7, 0));
    assert_eq!(r.status(), 0x04, "invalid arguments");
    let r = c.bin_call(&bin(0x01, &set_extras(0, 0), b"plain", b"v", 8, 0));
    assert_eq!(r.status(), 0);
}

#[test]
fn a_table_file_survives_a_restart_and_another_shape_is_refused() {
    let dir = std::env::temp_dir().join(format!("kura-table-srv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("fp.ktbl");
    let spec_str = format!("fp:width=8:max=100:path={}", path.display());
    {
        let s = with_tables(&[&spec_str]);
        table(&s, &[("set fp:42 9 0 4\r\nkept\r\n", "STORED\r\n")]);
        s.handle().shutdown();
    }
    let s = with_tables(&[&spec_str]);
    table(
        &s,
        &[("get fp:42\r\n", "VALUE fp:42 9 4\r\nkept\r\nEND\r\n")],
    );
    drop(s);
    // Declared with another shape, the file is refused, not rewritten.
    let other = format!("fp:width=16:max=100:path={}", path.display());
    let mut config = kura_server::ServerConfig {
        port: 0,
        ..Default::default()
    };
    config.tables = vec![spec(&other)];
    let err = kura_server::Server::bind(config)
        .err()
        .expect("bind refused");
    let msg = format!("{err:#}");
    assert!(msg.contains("width 8"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn table_declarations_are_checked() {
    for (bad, why) in [
        ("fp", "expected NAME:width"),
        ("fp:width=8", "expected NAME:width"),
        ("fp:width=8:max=10:color=red", "unknown setting 'color'"),
        ("fp:width=x:max=10", "expected NAME:width"),
    ] {
        let e = bad.parse::<TableSpec>().unwrap_err();
        assert!(e.to_string().contains(why), "{bad}: {e}");
    }
    for (specs, why) in [
        (vec!["a:width=0:max=10"], "width must be"),
        (vec!["a:width=8:max=0"], "max must be"),
        (vec![":width=8:max=10"], "a name is"),
        (
            vec!["a:width=8:max=10", "a:width=8:max=10"],
            "declared twice",
        ),
    ] {
        let config = kura_server::ServerConfig {
            tables: specs.iter().map(|s| spec(s)).collect(),
            ..Default::default()
        };
        let e = config.validate().unwrap_err().to_string();
        assert!(e.contains(why), "{specs:?}: {e}");
    }
}
