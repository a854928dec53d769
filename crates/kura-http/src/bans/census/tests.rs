//! Bans completed by lookups: once no stored object is older than a ban.

use std::sync::atomic::Ordering;
use std::time::Duration;

use http::HeaderMap;

use crate::bans::tests::{hit, store};
use crate::bans::Expr;
use crate::cache::{Cache, Lookup};

fn completed_lookup(cache: &Cache) -> u64 {
    cache
        .bans()
        .counters
        .completed_lookup
        .load(Ordering::Relaxed)
}

#[test]
fn a_ban_is_complete_once_every_older_object_was_looked_up() {
    let cache = Cache::new(8 << 20, 4);
    for i in 0..20 {
        assert!(store(&cache, &format!("http://h/{i}"), &[]));
    }
    let bans = cache.bans();
    bans.add(Expr::parse("obj.url ~ ^/1").unwrap(), false);
    bans.add(Expr::parse("obj.url == /2").unwrap(), false);
    // Every object but the last is looked up: the bans stay, one object is older.
    for i in 0..19 {
        let found = hit(&cache, &format!("http://h/{i}"));
        let banned = i == 1 || i == 2 || (10..20).contains(&i);
        assert_eq!(found.is_none(), banned, "/{i}");
        assert_eq!(bans.len(), 2, "after /{i}");
    }
    assert_eq!(completed_lookup(&cache), 0);
    // The last one (banned by the first) goes, and both bans are complete.
    assert!(hit(&cache, "http://h/19").is_none());
    assert_eq!(bans.len(), 0);
    assert_eq!(completed_lookup(&cache), 2);
    assert_eq!(bans.counters.completed_lurker.load(Ordering::Relaxed), 0);
    // The kept objects were stored again under the newest number: no ban is tested again.
    assert_eq!(cache.store().len(), 8);
    let tests = bans.counters.lookup_tests.load(Ordering::Relaxed);
    assert!(hit(&cache, "http://h/0").is_some());
    bans.add(Expr::parse("obj.url == /none").unwrap(), false);
    assert!(hit(&cache, "http://h/3").is_some());
    assert_eq!(
        bans.counters.lookup_tests.load(Ordering::Relaxed),
        tests + 1
    );
}

#[test]
fn an_older_object_that_left_by_any_route_no_longer_holds_a_ban() {
    let cache = Cache::new(8 << 20, 2);
    assert!(store(&cache, "http://h/a", &[]));
    assert!(store(&cache, "http://h/b", &[]));
    let bans = cache.bans();
    bans.add(Expr::parse("obj.url == /zzz").unwrap(), false);
    assert!(hit(&cache, "http://h/a").is_some());
    assert_eq!(bans.len(), 1, "/b is older than the ban");
    // /b is purged (not by a lookup); the next hit completes the ban.
    assert!(cache.invalidate(b"http://h/b"));
    assert!(hit(&cache, "http://h/a").is_some());
    assert_eq!(bans.len(), 0);
    assert_eq!(completed_lookup(&cache), 1);
}

#[test]
fn an_insert_under_way_holds_its_number() {
    let cache = Cache::new(8 << 20, 2);
    let bans = cache.bans();
    let hold = bans.hold();
    assert_eq!(hold.seq(), 0);
    bans.add(Expr::parse("obj.url == /x").unwrap(), false);
    assert_eq!(
        bans.complete_unreferenced(),
        0,
        "the held object may be older"
    );
    drop(hold);
    assert_eq!(bans.complete_unreferenced(), 1);
}

#[test]
fn a_variant_counts_as_old_until_it_is_looked_up_itself() {
    let cache = Cache::new(8 << 20, 2);
    let vary = [("vary", "x-device-class")];
    let policy = crate::rules::CachePolicy::default();
    let put = |class: &'static str| {
        let mut request = HeaderMap::new();
        request.insert("x-device-class", http::HeaderValue::from_static(class));
        let mut response = HeaderMap::new();
        response.insert("vary", http::HeaderValue::from_static(vary[0].1));
        assert!(cache.insert(
            &policy,
            Duration::ZERO,
            b"http://h/p",
            &request,
            http::StatusCode::OK,
            &crate::bans::tests::fresh_for(60),
            &response,
            &[b"page".as_slice()],
        ));
        request
    };
    let pc = put("pc");
    let sp = put("sp");
    let bans = cache.bans();
    bans.add(Expr::parse("obj.url == /other").unwrap(), false);
    assert!(matches!(cache.lookup(b"http://h/p", &pc), Lookup::Hit(_)));
    assert_eq!(bans.len(), 1, "the sp variant is still older");
    assert!(matches!(cache.lookup(b"http://h/p", &sp), Lookup::Hit(_)));
    assert_eq!(bans.len(), 0);
    assert_eq!(cache.store().len(), 1);
}

#[test]
fn hit_for_miss_markers_hold_no_ban() {
    let cache = Cache::new(8 << 20, 2);
    cache.hit_for_miss(b"http://h/private", Duration::from_secs(60));
    assert!(store(&cache, "http://h/a", &[]));
    let bans = cache.bans();
    bans.add(Expr::parse("obj.url == /zzz").unwrap(), false);
    assert!(hit(&cache, "http://h/a").is_some());
    assert_eq!(bans.len(), 0);
}

#[test]
fn a_large_object_is_not_copied_and_keeps_its_ban_for_the_lurker() {
    let cache = Cache::new(8 << 20, 2);
    let body = vec![b'x'; 300 * 1024];
    assert!(cache.insert(
        &crate::rules::CachePolicy::default(),
        Duration::ZERO,
        b"http://h/big",
        &HeaderMap::new(),
        http::StatusCode::OK,
        &crate::bans::tests::fresh_for(60),
        &HeaderMap::new(),
        &[body.as_slice()],
    ));
    let bans = cache.bans();
    bans.add(Expr::parse("obj.url == /other").unwrap(), false);
    for _ in 0..3 {
        assert!(hit(&cache, "http://h/big").is_some());
    }
    assert_eq!(bans.len(), 1);
    assert_eq!(bans.counters.lookup_tests.load(Ordering::Relaxed), 3);
    let mut lurker = crate::bans::lurker::Lurker::default();
    while !lurker.step(&cache, 100).idle {}
    assert_eq!(bans.len(), 0);
}

/// Inserts whose fetch began before a ban, lookups that re-store and complete, and the lurker,
/// all at once: once every insert that could have begun before a ban has ended, no lookup
/// finds an object the ban covers. A ban completed too early lets one through: so it did
/// before a fetch held its number from its start rather than from its insert, and before a
/// lookup made sure the entry it checked was still stored (another lookup could drop it for a
/// ban and complete the ban between this lookup's read and its check).
#[test]
fn concurrent_inserts_lookups_and_the_lurker_never_let_a_banned_object_through() {
    use std::sync::atomic::{AtomicBool, AtomicU32};
    use std::sync::Arc;

    const URLS: u32 = 64;
    const INSERTERS: usize = 2;
    let cache = Arc::new(Cache::new(16 << 20, 4));
    let generation = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // The generation each inserter's last finished insert read.
    let finished: Arc<Vec<AtomicU32>> =
        Arc::new((0..INSERTERS).map(|_| AtomicU32::new(0)).collect());
    let url = |i: u32| format!("http://h/{i}");
    let mut threads = Vec::new();
    for t in 0..INSERTERS {
        let (cache, generation, stop, finished) = (
            cache.clone(),
            generation.clone(),
            stop.clone(),
            finished.clone(),
        );
        threads.push(std::thread::spawn(move || {
            let mut i = t as u32;
            while !stop.load(Ordering::Relaxed) {
                i = (i + 7) % URLS;
                // The fetch begins: the newest ban then, and the generation it serves.
                let since = cache.bans().hold();
                let g = generation.load(Ordering::SeqCst);
                std::thread::yield_now();
                let mut headers = HeaderMap::new();
                headers.insert("x-gen", g.to_string().parse().unwrap());
                cache.insert_since(
                    &since,
                    &crate::rules::CachePolicy::default(),
                    Duration::ZERO,
                    url(i).as_bytes(),
                    &HeaderMap::new(),
                    http::StatusCode::OK,
                    &crate::bans::tests::fresh_for(60),
                    &headers,
                    &[b"body".as_slice()],
                );
                finished[t].store(g, Ordering::SeqCst);
            }
        }));
    }
    {
        let (cache, stop) = (cache.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i = (i + 5) % URLS;
                let _ = cache.lookup(url(i).as_bytes(), &HeaderMap::new());
            }
        }));
    }
    {
        let (cache, stop) = (cache.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut lurker = crate::bans::lurker::Lurker::default();
            while !stop.load(Ordering::Relaxed) {
                lurker.step(&cache, 8);
            }
        }));
    }
    let gen_of = |lookup: Lookup| match lookup {
        Lookup::Hit(object) => object.headers["x-gen"]
            .to_str()
            .unwrap()
            .parse::<u32>()
            .ok(),
        _ => None,
    };
    for k in 0..150u32 {
        generation.store(k + 1, Ordering::SeqCst);
        cache.bans().add(
            Expr::parse(&format!("obj.http.x-gen == {k}")).unwrap(),
            false,
        );
        // Every insert that read generation k has ended once each inserter finished one
        // that read k + 1.
        while finished.iter().any(|f| f.load(Ordering::SeqCst) <= k) {
            std::thread::yield_now();
        }
        for i in 0..URLS {
            if let Some(g) = gen_of(cache.lookup(url(i).as_bytes(), &HeaderMap::new())) {
                assert!(g > k, "/{i} of generation {g} served after the ban on {k}");
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let bans = cache.bans();
    let c = &bans.counters;
    let done = |c: &crate::bans::Counters| {
        c.completed_lookup.load(Ordering::Relaxed)
            + c.completed_lurker.load(Ordering::Relaxed)
            + c.completed_superseded.load(Ordering::Relaxed)
    };
    assert_eq!(done(c) + bans.len() as u64, 150);
    assert!(c.completed_lookup.load(Ordering::Relaxed) > 0);
    // With nothing in flight, one lookup of everything completes what is left.
    for i in 0..URLS {
        let _ = cache.lookup(url(i).as_bytes(), &HeaderMap::new());
    }
    assert_eq!(bans.len(), 0);
}
