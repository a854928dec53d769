//! kura-ring against the real clients: pylibmc (libmemcached's weighted
//! ketama), Dalli and twemproxy's nutcracker each store 10,000 keys (ASCII,
//! UTF-8, up to 250 bytes) over three Debian memcached servers on loopback,
//! with equal weights and 3:1:1; every server is then asked which keys it
//! holds, and every key must be on the server kura-ring names.
//!
//! The tools are found or, under CI=true, their absence fails the test
//! (.ci/run installs them); elsewhere a missing tool skips with a message.

mod support;

use std::path::Path;
use std::process::Command;

use kura_ring::{Hash, KeyPart, Kind, Ring, Server};
use support::{assert_placed, keys, scratch, script, write_keys, Cluster, Nutcracker};

const KEYS: usize = 10_000;
const WEIGHTINGS: [[u32; 3]; 2] = [[1, 1, 1], [3, 1, 1]];

/// `host:port:weight`, as pylibmc, Dalli and twemproxy all write a server.
fn spec(s: &Server) -> String {
    format!("{}:{}:{}", s.host, s.port, s.weight)
}

/// Stores `keys` with pylibmc over `servers` (emptied first) and checks
/// where they went.
fn pylibmc_places(
    python: &str,
    cluster: &Cluster,
    servers: Vec<Server>,
    keys: &[String],
    dir: &Path,
) {
    cluster.flush();
    let list: Vec<String> = servers.iter().map(spec).collect();
    support::run_client(
        Command::new(python)
            .arg(script("place_pylibmc.py"))
            .arg(list.join(","))
            .arg(write_keys(dir, keys)),
        "pylibmc",
    );
    let what = format!("pylibmc {list:?}");
    let ring = Ring::new(Kind::Libmemcached, servers).expect("ring");
    assert_placed(&ring, keys, &cluster.holders(keys), &what);
}

/// The same with Dalli.
fn dalli_places(ruby: &str, cluster: &Cluster, servers: Vec<Server>, keys: &[String], dir: &Path) {
    cluster.flush();
    let list: Vec<String> = servers.iter().map(spec).collect();
    support::run_client(
        Command::new(ruby)
            .arg(script("place_dalli.rb"))
            .arg(list.join(","))
            .arg(write_keys(dir, keys)),
        "dalli",
    );
    let what = format!("dalli {list:?}");
    let ring = Ring::new(Kind::Dalli, servers).expect("ring");
    assert_placed(&ring, keys, &cluster.holders(keys), &what);
}

/// The same through nutcracker with `hash` (servers may carry node names).
fn nutcracker_places(
    nutcracker: &Path,
    cluster: &Cluster,
    hash: Hash,
    servers: Vec<Server>,
    keys: &[String],
    dir: &Path,
) {
    cluster.flush();
    let lines: Vec<String> = servers
        .iter()
        .map(|s| match &s.name {
            Some(n) => format!("{} {n}", spec(s)),
            None => spec(s),
        })
        .collect();
    let proxy = Nutcracker::start(nutcracker, dir, hash.name(), &lines);
    proxy.set_all(keys);
    drop(proxy);
    let what = format!("nutcracker {hash} {lines:?}");
    let ring = Ring::new(Kind::Twemproxy(hash), servers).expect("ring");
    assert_placed(&ring, keys, &cluster.holders(keys), &what);
}

/// twemproxy's `distribution: modula` and `hash_tag` through nutcracker,
/// each pool's `settings` lines beside the ring kura builds for them.
#[test]
fn nutcracker_modula_and_hash_tags_match_kura_rings() {
    let (Some(memcached), Some(nutcracker)) = (support::memcached_bin(), support::nutcracker())
    else {
        return;
    };
    let dir = scratch("nutcracker-modula");
    let cluster = Cluster::start(&memcached, 3);
    let servers = cluster.servers(&[3, 1, 1]);
    let lines: Vec<String> = servers.iter().map(spec).collect();
    // Keys sharing tags: {0} .. {96}, and some without one.
    let keys: Vec<String> = (0..KEYS)
        .map(|i| match i % 10 {
            0 => format!("plain:{i}"),
            _ => format!("user:{i}:{{{}}}:x", i % 97),
        })
        .collect();
    let tag = KeyPart::Tag(b'{', b'}');
    let cases = [
        (
            "hash: fnv1a_64\n  distribution: modula",
            Kind::Modula(Hash::Fnv1a64),
            KeyPart::Whole,
        ),
        (
            "hash: md5\n  distribution: modula",
            Kind::Modula(Hash::Md5),
            KeyPart::Whole,
        ),
        (
            "hash: murmur\n  distribution: modula\n  hash_tag: \"{}\"",
            Kind::Modula(Hash::Murmur),
            tag.clone(),
        ),
        (
            "hash: fnv1a_64\n  distribution: ketama\n  hash_tag: \"{}\"",
            Kind::Twemproxy(Hash::Fnv1a64),
            tag,
        ),
    ];
    for (settings, kind, part) in cases {
        cluster.flush();
        let proxy = Nutcracker::start_with(&nutcracker, &dir, settings, &lines);
        proxy.set_all(&keys);
        drop(proxy);
        let ring = Ring::new(kind, servers.clone())
            .expect("ring")
            .with_key_part(part);
        assert_placed(
            &ring,
            &keys,
            &cluster.holders(&keys),
            &format!("nutcracker {settings}"),
        );
    }
}

fn named(mut servers: Vec<Server>) -> Vec<Server> {
    for (i, s) in servers.iter_mut().enumerate() {
        s.name = Some(format!("cache-{i}"));
    }
    servers
}

#[test]
fn pylibmc_ketama_weighted_matches_libmemcached_ring() {
    let (Some(memcached), Some(python)) = (support::memcached_bin(), support::python()) else {
        return;
    };
    let (dir, keys) = (scratch("pylibmc"), keys(KEYS));
    let cluster = Cluster::start(&memcached, 3);
    for weights in WEIGHTINGS {
        pylibmc_places(&python, &cluster, cluster.servers(&weights), &keys, &dir);
    }
}

#[test]
fn dalli_matches_dalli_ring() {
    let (Some(memcached), Some(ruby)) = (support::memcached_bin(), support::ruby()) else {
        return;
    };
    let (dir, keys) = (scratch("dalli"), keys(KEYS));
    let cluster = Cluster::start(&memcached, 3);
    for weights in WEIGHTINGS {
        dalli_places(&ruby, &cluster, cluster.servers(&weights), &keys, &dir);
    }
}

/// nutcracker with `hash`, each weighting, without and with node names.
fn nutcracker_matches(name: &str, hash: Hash, keys: &[String], weightings: &[[u32; 3]]) {
    let (Some(memcached), Some(nutcracker)) = (support::memcached_bin(), support::nutcracker())
    else {
        return;
    };
    let dir = scratch(name);
    let cluster = Cluster::start(&memcached, 3);
    for weights in weightings {
        let servers = cluster.servers(weights);
        nutcracker_places(&nutcracker, &cluster, hash, servers.clone(), keys, &dir);
        nutcracker_places(&nutcracker, &cluster, hash, named(servers), keys, &dir);
    }
}

#[test]
fn nutcracker_md5_matches_twemproxy_ring() {
    nutcracker_matches("nutcracker-md5", Hash::Md5, &keys(KEYS), &WEIGHTINGS);
}

#[test]
fn nutcracker_fnv1a_64_matches_twemproxy_ring() {
    nutcracker_matches(
        "nutcracker-fnv1a_64",
        Hash::Fnv1a64,
        &keys(KEYS),
        &WEIGHTINGS,
    );
}

/// The other ten hashes, on fewer keys each (still ASCII, UTF-8 and long).
#[test]
fn nutcracker_every_other_hash_matches_twemproxy_ring() {
    let keys = keys(2_000);
    for hash in Hash::ALL {
        if !matches!(hash, Hash::Md5 | Hash::Fnv1a64) {
            nutcracker_matches(&format!("nutcracker-{hash}"), hash, &keys, &[[3, 1, 1]]);
        }
    }
}

/// On port 11211 libmemcached and twemproxy hash the host alone (`host-i`):
/// servers on 127.61.x.y:11211. Skipped, even under CI, only when port
/// 11211 is taken on every loopback address tried (a memcached listening on
/// all interfaces): that is the machine's state, not a missing tool.
#[test]
fn default_port_names_match_on_port_11211() {
    let Some(memcached) = support::memcached_bin() else {
        return;
    };
    let (python, ruby, nutcracker) = (support::python(), support::ruby(), support::nutcracker());
    let Some(cluster) = Cluster::start_on_default_port(&memcached, 3) else {
        println!("skipped: port 11211 is taken on every loopback address tried");
        return;
    };
    let (dir, keys) = (scratch("default-port"), keys(KEYS));
    let servers = cluster.servers(&[3, 1, 1]);
    if let Some(python) = python {
        pylibmc_places(&python, &cluster, servers.clone(), &keys, &dir);
    }
    if let Some(ruby) = ruby {
        dalli_places(&ruby, &cluster, servers.clone(), &keys, &dir);
    }
    if let Some(nutcracker) = nutcracker {
        nutcracker_places(&nutcracker, &cluster, Hash::Fnv1a64, servers, &keys, &dir);
    }
}
