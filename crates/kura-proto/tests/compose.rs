//! Composing requests: known lines compose to their canonical form, and
//! whatever the parser accepts composes into bytes that parse back into the
//! same request (see `support::text` for what "the same" means).

mod support;

use std::borrow::Cow;

use kura_proto::*;
use proptest::prelude::*;
use support::text::{assert_round_trip, check_stream};
use support::LIMITS;

/// Each input parses whole, composes to the canonical form given, and
/// round-trips.
#[test]
fn parsed_requests_compose_canonically() {
    let table: &[(&[u8], &[u8])] = &[
        (b"get a\r\n", b"get a\r\n"),
        (b"  get  a   b \r\n", b"get a b\r\n"),
        (b"bget a\n", b"get a\r\n"),
        (b"gets a b c\r\n", b"gets a b c\r\n"),
        (b"gat -1 a\r\n", b"gat -1 a\r\n"),
        (b"gats +07 a b\r\n", b"gats 7 a b\r\n"),
        (b"gat 5\r\n", b"gat 5\r\n"),
        (b"set k 1 2 3\r\nabc\r\n", b"set k 1 2 3\r\nabc\r\n"),
        (
            b"add k 0 0 0 noreply\r\n\r\n",
            b"add k 0 0 0 noreply\r\n\r\n",
        ),
        (b"replace k 0 0 1\r\nx\r\n", b"replace k 0 0 1\r\nx\r\n"),
        (b"append k 0 0 1\r\n\n\r\n", b"append k 0 0 1\r\n\n\r\n"),
        (
            b"prepend k 9 -1 2\r\n\r\n\r\n",
            b"prepend k 9 -1 2\r\n\r\n\r\n",
        ),
        (
            b"cas k 4294967295 0 1 18446744073709551615\r\nz\r\n",
            b"cas k 4294967295 0 1 18446744073709551615\r\nz\r\n",
        ),
        (
            b"set k 0 99999999999 1\r\nz\r\n",
            b"set k 0 1215752191 1\r\nz\r\n",
        ),
        (b"delete k\r\n", b"delete k\r\n"),
        (b"delete k 0 noreply\r\n", b"delete k noreply\r\n"),
        (b"delete noreply 0\r\n", b"delete noreply 0\r\n"),
        (b"delete noreply\r\n", b"delete noreply noreply\r\n"),
        (b"incr k 1\r\n", b"incr k 1\r\n"),
        (
            b"decr k 18446744073709551615 noreply\r\n",
            b"decr k 18446744073709551615 noreply\r\n",
        ),
        (b"incr k 5 junk\r\n", b"incr k 5\r\n"),
        (b"touch k -1 noreply\r\n", b"touch k -1 noreply\r\n"),
        (b"flush_all\r\n", b"flush_all\r\n"),
        (b"flush_all noreply\r\n", b"flush_all noreply\r\n"),
        (b"flush_all 10\r\n", b"flush_all 10\r\n"),
        (
            b"flush_all soon noreply\r\n",
            b"flush_all invalid noreply\r\n",
        ),
        (b"version\r\n", b"version\r\n"),
        (b"version please\r\n", b"version\r\n"),
        (b"verbosity 1\r\n", b"verbosity 1\r\n"),
        (b"verbosity noreply\r\n", b"verbosity invalid noreply\r\n"),
        (b"verbosity x\r\n", b"verbosity invalid\r\n"),
        (b"quit\r\n", b"quit\r\n"),
        (b"shutdown\r\n", b"shutdown\r\n"),
        (b"shutdown graceful\r\n", b"shutdown graceful\r\n"),
        (b"shutdown now\r\n", b"shutdown invalid\r\n"),
        (b"stats\r\n", b"stats\r\n"),
        (b"stats  detail   dump\r\n", b"stats detail dump\r\n"),
        (b"stats a\tb \x01\r\n", b"stats a\tb \x01\r\n"),
        (
            b"cache_memlimit 64 noreply\r\n",
            b"cache_memlimit 64 noreply\r\n",
        ),
        (b"cache_memlimit lots\r\n", b"cache_memlimit invalid\r\n"),
        (b"mg k\r\n", b"mg k\r\n"),
        (
            b"mg k  v  k t c f  Oabc q\r\n",
            b"mg k v k t c f Oabc q\r\n",
        ),
        (b"mg a2V5 b v\r\n", b"mg a2V5 b v\r\n"),
        (b"mg AAE= k b\r\n", b"mg AAE= k b\r\n"),
        (
            b"ms k 2 T-1 F5 I MA C9 E10\r\nhi\r\n",
            b"ms k 2 T-1 F5 I MA C9 E10\r\nhi\r\n",
        ),
        (b"ms k +2 q\r\nhi\r\n", b"ms k 2 q\r\nhi\r\n"),
        (b"ms a2V5 0 b\r\n\r\n", b"ms a2V5 0 b\r\n\r\n"),
        (b"md k q I x T30\r\n", b"md k q I x T30\r\n"),
        (
            b"ma k N0 J13 D2 MD q v t\r\n",
            b"ma k N0 J13 D2 MD q v t\r\n",
        ),
        (b"me k\r\n", b"me k\r\n"),
        (b"me a2V5 b\r\n", b"me a2V5 b\r\n"),
        (b"me k x\r\n", b"me k\r\n"),
        (b"mn\r\n", b"mn\r\n"),
        (b"mn extra\r\n", b"mn\r\n"),
        (b"mt\r\n", b"mt\r\n"),
        (b"mt on\r\n", b"mt\r\n"),
        (b"mt off\r\n", b"mt off\r\n"),
    ];
    let limits = Limits::default();
    for &(input, canonical) in table {
        let shown = String::from_utf8_lossy(input);
        let Frame::Request { request, len } = parse(input, &limits) else {
            panic!("{shown:?} does not parse as a request");
        };
        assert_eq!(len, input.len(), "{shown:?}");
        let wire = assert_round_trip(&request, &limits);
        assert_eq!(
            String::from_utf8_lossy(&wire),
            String::from_utf8_lossy(canonical),
            "composing {shown:?}"
        );
    }
}

const COMMANDS: &[&str] = &[
    "get",
    "bget",
    "gets",
    "gat",
    "gats",
    "set",
    "add",
    "replace",
    "append",
    "prepend",
    "cas",
    "delete",
    "incr",
    "decr",
    "touch",
    "flush_all",
    "version",
    "verbosity",
    "quit",
    "shutdown",
    "stats",
    "cache_memlimit",
    "mg",
    "ms",
    "md",
    "ma",
    "me",
    "mn",
];

/// Arguments that steer lines into the parser's accepting paths: keys,
/// numbers at their limits, `noreply`, base64 keys and meta flags.
const WORDS: &[&str] = &[
    "k",
    "key",
    "0",
    "1",
    "-1",
    "+5",
    "007",
    "4294967295",
    "4294967296",
    "18446744073709551615",
    "99999999999",
    "noreply",
    "graceful",
    "detail",
    "a2V5",
    "AAE=",
    "b",
    "v",
    "q",
    "t",
    "c",
    "f",
    "s",
    "h",
    "l",
    "u",
    "I",
    "x",
    "O123",
    "P",
    "L",
    "T5",
    "T-1",
    "N0",
    "R30",
    "F7",
    "C12",
    "E99",
    "MS",
    "ME",
    "MA",
    "MP",
    "MR",
    "MI",
    "MD",
    "M+",
    "M-",
    "D3",
    "J0",
];

fn token() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::sample::select(WORDS).prop_map(|w| w.as_bytes().to_vec()),
        1 => prop::collection::vec(any::<u8>(), 1..6).prop_map(|mut v| {
            v.retain(|&b| b != b' ' && b != b'\n');
            v
        }),
    ]
}

/// Tokens joined by one or two spaces, after up to two leading spaces,
/// ending in `\r\n` or `\n`.
fn line_of(lead: usize, parts: &[(bool, Vec<u8>)], crlf: bool) -> Vec<u8> {
    let mut line = vec![b' '; lead];
    for (i, (wide, part)) in parts.iter().enumerate() {
        if i > 0 {
            line.extend_from_slice(if *wide { b"  " } else { b" " });
        }
        line.extend_from_slice(part);
    }
    line.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
    line
}

/// A command line with arbitrary arguments.
fn command_line() -> impl Strategy<Value = Vec<u8>> {
    (
        0..3usize,
        prop::sample::select(COMMANDS),
        prop::collection::vec((any::<bool>(), token()), 0..7),
        any::<bool>(),
    )
        .prop_map(|(lead, cmd, args, crlf)| {
            let mut parts = vec![(false, cmd.as_bytes().to_vec())];
            parts.extend(args);
            line_of(lead, &parts, crlf)
        })
}

/// A storage command or `ms` whose data block usually matches its length.
fn with_data() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(&["set", "add", "replace", "append", "prepend", "cas", "ms"][..]),
        token(),
        prop::collection::vec((any::<bool>(), token()), 0..5),
        prop::collection::vec(any::<u8>(), 0..100),
        prop_oneof![8 => Just(0i64), 1 => -2..3i64],
        any::<bool>(),
    )
        .prop_map(|(cmd, key, mut args, data, skew, crlf)| {
            let len = (data.len() as i64 + skew).to_string().into_bytes();
            let mut parts = vec![(false, cmd.as_bytes().to_vec()), (false, key)];
            if cmd == "ms" {
                parts.push((false, len));
            } else {
                // flags and exptime from the arguments when there are any,
                // then the length, then the rest (a CAS value, `noreply`)
                let mut numbers = args.drain(..args.len().min(2)).collect::<Vec<_>>();
                numbers.resize(2, (false, b"0".to_vec()));
                parts.extend(numbers);
                parts.push((false, len));
            }
            parts.extend(args);
            let mut wire = line_of(0, &parts, crlf);
            wire.extend_from_slice(&data);
            wire.extend_from_slice(b"\r\n");
            wire
        })
}

/// A key the text protocols accept (at most 250 bytes of anything but a
/// space, a NUL or a newline: control bytes, DEL and bytes above 0x7f are
/// keys' bytes as in memcached).
fn key() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        2 => prop::sample::select(&["k", "noreply", "0", "a2V5", "\x10\x10\x10\x10\x10\x10\x10\x10k"][..]).prop_map(|k| k.as_bytes().to_vec()),
        1 => prop::collection::vec((1u8..=0xff).prop_map(|b| if b == b' ' || b == b'\n' { b'~' } else { b }), 1..=250),
    ]
}

/// The owned parts of a request, built by hand as a client would.
#[derive(Debug, Clone)]
enum Spec {
    /// The keys joined by spaces.
    Get(bool, Option<i32>, Vec<u8>),
    Store(StoreMode, Option<u64>, Vec<u8>, u32, i32, Vec<u8>, bool),
    Delete(Vec<u8>, bool),
    Arith(Vec<u8>, bool, u64, bool),
    Touch(Vec<u8>, i32, bool),
    FlushAll(FlushAll),
    Verbosity(Option<u32>, bool),
    CacheMemlimit(Option<u32>, bool),
    Shutdown(ShutdownMode),
    Stats(Vec<u8>),
    MetaGet(Vec<u8>),
    MetaSet(Vec<u8>, Vec<u8>),
    MetaDebug(Vec<u8>, bool),
}

impl Spec {
    fn request(&self) -> Request<'_> {
        let key = |k: &[u8], binary| MetaKey {
            bytes: Cow::Owned(k.to_vec()),
            binary,
        };
        match self {
            Spec::Get(cas, touch, keys) => Request::Get(Get::new(*cas, *touch, keys)),
            Spec::Store(mode, cas, k, flags, exptime, data, noreply) => Request::Store(Store {
                mode: *mode,
                cas: *cas,
                key: k,
                flags: *flags,
                exptime: *exptime,
                data: Data::Bytes(data),
                noreply: *noreply,
            }),
            Spec::Delete(k, noreply) => Request::Delete(Delete {
                key: k,
                noreply: *noreply,
            }),
            Spec::Arith(k, incr, delta, noreply) => Request::Arith(Arith {
                key: k,
                incr: *incr,
                delta: *delta,
                noreply: *noreply,
            }),
            Spec::Touch(k, exptime, noreply) => Request::Touch(Touch {
                key: k,
                exptime: *exptime,
                noreply: *noreply,
            }),
            Spec::FlushAll(f) => Request::FlushAll(f.clone()),
            Spec::Verbosity(level, noreply) => Request::Verbosity {
                level: *level,
                noreply: *noreply,
            },
            Spec::CacheMemlimit(megabytes, noreply) => Request::CacheMemlimit {
                megabytes: *megabytes,
                noreply: *noreply,
            },
            Spec::Shutdown(mode) => Request::Shutdown(*mode),
            Spec::Stats(args) => Request::Stats(Stats::new(args)),
            Spec::MetaGet(k) => Request::MetaGet(MetaGet {
                key: key(k, false),
                flags: MetaFlags::default(),
            }),
            Spec::MetaSet(k, data) => Request::MetaSet(MetaSet {
                key: key(k, false),
                mode: StoreMode::Set,
                data: Data::Bytes(data),
                flags: MetaFlags::default(),
            }),
            Spec::MetaDebug(k, binary) => Request::MetaDebug(MetaDebug {
                key: key(k, *binary),
            }),
        }
    }
}

fn spec() -> impl Strategy<Value = Spec> {
    let mode = prop::sample::select(
        &[
            StoreMode::Set,
            StoreMode::Add,
            StoreMode::Replace,
            StoreMode::Append,
            StoreMode::Prepend,
            StoreMode::Rotate { max: 1 },
            StoreMode::Rotate { max: 480 },
            StoreMode::Rotate { max: u32::MAX },
        ][..],
    );
    let data = || prop::collection::vec(any::<u8>(), 0..64);
    let stats_word = prop::collection::vec(
        any::<u8>().prop_filter("separator", |&b| !matches!(b, b' ' | b'\n' | 0)),
        1..8,
    );
    prop_oneof![
        (
            any::<bool>(),
            any::<Option<i32>>(),
            prop::collection::vec(key(), 1..5)
        )
            .prop_map(|(cas, touch, keys)| Spec::Get(cas, touch, keys.join(&b' '))),
        (
            mode.clone(),
            any::<u32>(),
            any::<i32>(),
            key(),
            data(),
            any::<bool>()
        )
            .prop_map(|(m, f, e, k, d, q)| Spec::Store(m, None, k, f, e, d, q)),
        (
            any::<u64>(),
            any::<u32>(),
            any::<i32>(),
            key(),
            data(),
            any::<bool>()
        )
            .prop_map(|(c, f, e, k, d, q)| Spec::Store(
                StoreMode::Set,
                Some(c),
                k,
                f,
                e,
                d,
                q
            )),
        (key(), any::<bool>()).prop_map(|(k, q)| Spec::Delete(k, q)),
        (key(), any::<bool>(), any::<u64>(), any::<bool>())
            .prop_map(|(k, i, d, q)| Spec::Arith(k, i, d, q)),
        (key(), any::<i32>(), any::<bool>()).prop_map(|(k, e, q)| Spec::Touch(k, e, q)),
        (
            prop_oneof![
                Just(FlushDelay::Now),
                Just(FlushDelay::Invalid),
                any::<i32>().prop_map(FlushDelay::Exptime),
            ],
            any::<bool>(),
        )
            .prop_map(|(delay, noreply)| Spec::FlushAll(FlushAll { delay, noreply })),
        (any::<Option<u32>>(), any::<bool>()).prop_map(|(l, q)| Spec::Verbosity(l, q)),
        (any::<Option<u32>>(), any::<bool>()).prop_map(|(m, q)| Spec::CacheMemlimit(m, q)),
        prop::sample::select(
            &[
                ShutdownMode::Immediate,
                ShutdownMode::Graceful,
                ShutdownMode::Invalid
            ][..]
        )
        .prop_map(Spec::Shutdown),
        prop::collection::vec(stats_word, 0..4).prop_map(|w| Spec::Stats(w.join(&b' '))),
        key().prop_map(Spec::MetaGet),
        (key(), data()).prop_map(|(k, d)| Spec::MetaSet(k, d)),
        key().prop_map(|k| Spec::MetaDebug(k, false)),
        prop::collection::vec(any::<u8>(), 1..=186).prop_map(|k| Spec::MetaDebug(k, true)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parsed_streams_round_trip(
        pieces in prop::collection::vec(prop_oneof![command_line(), with_data()], 1..8),
    ) {
        let buf = pieces.concat();
        for limits in &LIMITS {
            check_stream(&buf, limits);
        }
    }

    #[test]
    fn built_requests_round_trip(spec in spec()) {
        let request = spec.request();
        assert_round_trip(&request, &Limits::default());
        if !matches!(request, Request::Get(_) | Request::Stats(_)) {
            // no raw text fields: the parsed request is `==` to the built one
            let mut wire = Vec::new();
            request.compose(&mut wire);
            let Frame::Request { request: parsed, .. } = parse(&wire, &Limits::default()) else {
                unreachable!("checked by assert_round_trip");
            };
            prop_assert_eq!(parsed, request);
        }
    }
}
