//! Range requests (RFC 9110 §14, RFC 9111 §3.3-3.4): single ranges cut from a stored complete
//! object (206 with `Content-Range`), 416 when unsatisfiable, `If-Range`, several ranges
//! answered whole, and a range asked of an uncached object fetches the whole object (without
//! `Range`) to store it, while the client gets its range.

mod common;

use std::time::Duration;

use common::*;

fn body(len: usize) -> String {
    (0..len)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect()
}

async fn origin(len: usize) -> Backend {
    Backend::start(Duration::ZERO, move |seen| {
        if seen.uri.path().starts_with("/private") {
            return reply(200, &[("cache-control", "private")], &body(len));
        }
        reply(
            200,
            &[
                ("cache-control", "max-age=100"),
                ("etag", "\"v1\""),
                ("last-modified", "Tue, 24 Nov 2026 03:00:00 GMT"),
            ],
            &body(len),
        )
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_are_cut_from_a_stored_object() {
    let backend = origin(1000).await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    let whole = body(1000);
    assert_eq!(get(&c, addr, "/o").await.body, whole);
    let ranged = |range: &'static str| {
        let c = c.clone();
        async move { send(&c, addr, "GET", "/o", &[("range", range)]).await }
    };
    for (range, start, end) in [
        ("bytes=0-9", 0, 9),
        ("bytes=-5", 995, 999),
        ("bytes=990-", 990, 999),
        ("bytes=500-5000", 500, 999),
    ] {
        let got = ranged(range).await;
        assert_eq!(got.status, 206, "{range}");
        assert_eq!(got.cache(), "hit");
        assert_eq!(
            got.header("content-range"),
            format!("bytes {start}-{end}/1000")
        );
        assert_eq!(got.header("content-length"), (end - start + 1).to_string());
        assert_eq!(got.body, whole[start..=end], "{range}");
        assert_eq!(got.header("etag"), "\"v1\"");
    }
    let unsatisfiable = ranged("bytes=1000-").await;
    assert_eq!(unsatisfiable.status, 416);
    assert_eq!(unsatisfiable.header("content-range"), "bytes */1000");
    // Several ranges, or a range that does not parse: the whole object.
    for range in ["bytes=0-1,5-6", "bytes=9-1", "pages=1-2"] {
        let got = ranged(range).await;
        assert_eq!(
            (got.status.as_u16(), got.body.len()),
            (200, 1000),
            "{range}"
        );
        assert!(got.headers.get("content-range").is_none());
    }
    // If-Range: a strong match gets the range, anything else the whole object.
    for (if_range, status) in [
        ("\"v1\"", 206),
        ("\"v2\"", 200),
        ("W/\"v1\"", 200),
        ("Tue, 24 Nov 2026 03:00:00 GMT", 206),
        ("Tue, 24 Nov 2026 02:59:59 GMT", 200),
    ] {
        let headers = [("range", "bytes=0-0"), ("if-range", if_range)];
        let got = send(&c, addr, "GET", "/o", &headers).await;
        assert_eq!(got.status, status, "If-Range: {if_range}");
    }
    // Preconditions come before the range (RFC 9110 §13.2.2).
    let headers = [("range", "bytes=0-0"), ("if-none-match", "\"v1\"")];
    assert_eq!(send(&c, addr, "GET", "/o", &headers).await.status, 304);
    // HEAD ignores Range.
    let head = send(&c, addr, "HEAD", "/o", &[("range", "bytes=0-0")]).await;
    assert_eq!(head.status, 200);
    assert_eq!(backend.count(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_of_an_uncached_object_fetches_and_stores_it_whole() {
    let len = 300_000;
    let backend = origin(len).await;
    let server = proxy(backend.addr, "").await;
    let (addr, c) = (server.http[0], client());
    let whole = body(len);
    // The range spans the backend body's chunks.
    let got = send(&c, addr, "GET", "/big", &[("range", "bytes=100000-250000")]).await;
    assert_eq!(got.status, 206);
    assert_eq!(got.cache(), "miss");
    assert_eq!(
        got.header("content-range"),
        format!("bytes 100000-250000/{len}")
    );
    assert_eq!(got.body, whole[100_000..=250_000]);
    assert!(
        backend.last().headers.get("range").is_none(),
        "the backend is asked for the whole object"
    );
    // The client's range can end before the fetch does: wait (bounded) until it is stored.
    for _ in 0..500 {
        if stats(&server).await["stored"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let full = get(&c, addr, "/big").await;
    assert_eq!((full.cache(), full.body.len()), ("hit", len));
    assert_eq!(backend.count(), 1);
    // Unsatisfiable on a miss: 416 too, and the object is still stored.
    let got = send(&c, addr, "GET", "/big2", &[("range", "bytes=400000-")]).await;
    assert_eq!(got.status, 416);
    assert_eq!(got.header("content-range"), format!("bytes */{len}"));
    // A response that may not be stored is passed whole.
    let got = send(&c, addr, "GET", "/private", &[("range", "bytes=0-9")]).await;
    assert_eq!(
        (got.status.as_u16(), got.body.len(), got.cache()),
        (200, len, "pass")
    );
    server.shutdown().await;
}
