//! The policies' orders, with servers marked sick by their probes' results.

use std::time::Duration;

use super::*;
use crate::backend::ServerTimeouts;
use crate::config::{parse_backend, Probe, ServerSpec};

fn pool(weights: &[u32]) -> Vec<Arc<Server>> {
    weights
        .iter()
        .enumerate()
        .map(|(i, &weight)| {
            let spec = ServerSpec {
                addr: parse_backend(&format!("http://10.0.0.{}:80", i + 1)).unwrap(),
                weight,
                max_connections: Some(1),
                tls: None,
                timeouts: Default::default(),
                probe: Some(Probe {
                    path: "/".into(),
                    interval: Duration::from_secs(1),
                    timeout: Duration::from_secs(1),
                    window: 1,
                    threshold: 1,
                    initial: 1,
                    expected: None,
                }),
            };
            let second = Duration::from_secs(1);
            let timeouts = ServerTimeouts {
                connect: second,
                first_byte: second,
                between_bytes: second,
            };
            Arc::new(Server::new(&spec, timeouts, None))
        })
        .collect()
}

fn sick(server: &Server, sick: bool) {
    server.health.probed(!sick, &server.name);
}

#[test]
fn round_robin_takes_turns_and_skips_the_sick() {
    let servers = pool(&[1, 1, 1]);
    let director = Director::new(Policy::RoundRobin, None);
    let firsts: Vec<usize> = (0..6).map(|_| director.order(&servers, None)[0]).collect();
    assert_eq!(firsts, [0, 1, 2, 0, 1, 2]);
    sick(&servers[1], true);
    let firsts: Vec<usize> = (0..4).map(|_| director.order(&servers, None)[0]).collect();
    assert!(!firsts.contains(&1), "{firsts:?}");
    assert_eq!(director.order(&servers, None).len(), 2);
    // All sick: every server is still tried.
    sick(&servers[0], true);
    sick(&servers[2], true);
    assert_eq!(director.order(&servers, None).len(), 3);
}

#[test]
fn fallback_keeps_the_order() {
    let servers = pool(&[1, 1, 1]);
    let director = Director::new(Policy::Fallback, None);
    assert_eq!(director.order(&servers, None), [0, 1, 2]);
    sick(&servers[0], true);
    assert_eq!(director.order(&servers, None), [1, 2]);
    sick(&servers[0], false);
    assert_eq!(director.order(&servers, None), [0, 1, 2]);
}

#[test]
fn random_follows_the_weights() {
    let servers = pool(&[1, 0, 3]);
    let director = Director::new(Policy::Random, Some(7));
    let mut counts = [0usize; 3];
    for _ in 0..4000 {
        counts[director.order(&servers, None)[0]] += 1;
    }
    // A weight of 0 is never drawn; 1:3 with a fixed seed (about 1000:3000, wide bounds).
    assert_eq!(counts[1], 0);
    assert!((800..1200).contains(&counts[0]), "{counts:?}");
    // The spare comes last, after the weighted ones.
    assert_eq!(director.order(&servers, None)[2], 1);
    sick(&servers[0], true);
    sick(&servers[2], true);
    // Only the spare... and the sick are left out: it is the one asked.
    assert_eq!(director.order(&servers, None), [1]);
}

#[test]
fn hash_is_sticky_and_consistent() {
    let servers = pool(&[1, 1, 1, 1]);
    let director = Director::new(Policy::Hash(HashKey::Url), None);
    let keys: Vec<u64> = (0..400)
        .map(|i| hash_bytes(format!("/page/{i}").as_bytes()))
        .collect();
    let place = |k: u64| director.order(&servers, Some(k))[0];
    let before: Vec<usize> = keys.iter().map(|&k| place(k)).collect();
    let again: Vec<usize> = keys.iter().map(|&k| place(k)).collect();
    assert_eq!(before, again);
    let mut shares = [0usize; 4];
    for &s in &before {
        shares[s] += 1;
    }
    assert!(shares.iter().all(|&n| n > 50), "{shares:?}");
    // Server 2 sick: its keys move, every other key stays.
    sick(&servers[2], true);
    for (k, &was) in keys.iter().zip(&before) {
        let now = place(*k);
        if was == 2 {
            assert_ne!(now, 2);
        } else {
            assert_eq!(now, was);
        }
    }
    sick(&servers[2], false);
    assert_eq!(keys.iter().map(|&k| place(k)).collect::<Vec<_>>(), before);
}

#[test]
fn hash_keys_from_a_header_or_a_cookie_only_for_the_client() {
    let header = Director::new(
        Policy::Hash(HashKey::Header(http::HeaderName::from_static("x-user"))),
        None,
    );
    let cookie = Director::new(Policy::Hash(HashKey::Cookie("sid".into())), None);
    let mut headers = HeaderMap::new();
    headers.insert("x-user", "alice".parse().unwrap());
    headers.insert(COOKIE, "a=1; sid=abc ; b=2".parse().unwrap());
    let url = hash_bytes(b"/x");
    assert_eq!(
        header.key("/x", &headers, Pick::Client),
        Some(hash_bytes(b"alice"))
    );
    assert_eq!(
        cookie.key("/x", &headers, Pick::Client),
        Some(hash_bytes(b"abc"))
    );
    // A fetch for the cache hashes the URL: the client's field does not choose its server.
    assert_eq!(header.key("/x", &headers, Pick::Shared), Some(url));
    assert_eq!(cookie.key("/x", &headers, Pick::Shared), Some(url));
    // Absent: the URL.
    assert_eq!(header.key("/x", &HeaderMap::new(), Pick::Client), Some(url));
    let mut other = HeaderMap::new();
    other.insert(COOKIE, "xsid=1; sidx=2".parse().unwrap());
    assert_eq!(cookie.key("/x", &other, Pick::Client), Some(url));
    assert_eq!(
        Director::new(Policy::Fallback, None).key("/x", &headers, Pick::Client),
        None
    );
}

#[test]
fn a_full_server_yields_no_lease() {
    let servers = pool(&[1]);
    let first = servers[0].lease().expect("room for one");
    assert!(servers[0].lease().is_none());
    assert_eq!(servers[0].in_use(), 1);
    assert_eq!(servers[0].busy.load(Ordering::Relaxed), 1);
    drop(first);
    assert!(servers[0].lease().is_some());
}
