//! `kura http`'s compressed storage as an operator runs it (on by default): a plain backend's
//! page stored gzipped, served as it is to a gzip client and decoded for another.

mod common;

use std::io::Read;

fn page() -> Vec<u8> {
    let mut out = Vec::new();
    let mut n: u64 = 1;
    while out.len() < 20_000 {
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        out.extend_from_slice(
            format!(
                "<li class=\"entry\"><a href=\"/entry/{}\">entry {}</a></li>\n",
                n >> 40,
                n % 977
            )
            .as_bytes(),
        );
    }
    out.truncate(20_000);
    out
}

/// A backend answering every request with the page, plain, and closing.
fn backend() -> u16 {
    let body = page();
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Type: text/html\r\nETag: \"p1\"\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    common::http_backend(answer, |_| {})
}

/// An HTTP/1.0 GET (the body ends at the close): the head and the body.
fn get(port: u16, extra: &str) -> (String, Vec<u8>) {
    let out = common::http_exchange(
        port,
        "GET /p HTTP/1.0",
        &format!("Host: example\r\n{extra}"),
    );
    let at = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    (
        String::from_utf8_lossy(&out[..at]).into_owned(),
        out[at..].to_vec(),
    )
}

#[test]
fn pages_are_stored_gzipped_and_served_both_ways() {
    let (mut child, port) = common::http_proxy(backend(), &["-m", "16", "-t", "1"]);
    let (head, body) = get(port, "Accept-Encoding: gzip, br\r\n");
    assert!(head.contains("x-cache: miss"), "{head}");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(head.contains("vary: Accept-Encoding"), "{head}");
    assert!(head.contains("etag: W/\"p1\""), "{head}");
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&body[..])
        .read_to_end(&mut plain)
        .unwrap();
    assert!(plain == page());
    assert!(body.len() * 2 < plain.len(), "{} bytes", body.len());

    let (head, body) = get(port, "");
    assert!(head.contains("x-cache: hit"), "{head}");
    assert!(!head.contains("content-encoding"), "{head}");
    assert!(head.contains("content-length: 20000"), "{head}");
    assert!(head.contains("etag: \"p1\""), "{head}");
    assert!(body == page());
    let _ = child.kill();
    let _ = child.wait();
}
