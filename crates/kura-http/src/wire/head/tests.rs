use super::*;

const LIMITS: HeadLimits = HeadLimits {
    max_head: 1024,
    max_headers: 100,
};

fn parse(input: &[u8]) -> Parsed {
    parse_head(input, &LIMITS)
}

fn complete(len: usize, body: BodyFraming) -> Parsed {
    Parsed::Complete { len, body }
}

#[test]
fn a_head_ends_where_httparse_says_bare_lf_included() {
    let crlf = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nrest";
    assert_eq!(parse(crlf), complete(crlf.len() - 4, BodyFraming::None));
    // RFC 9112 §2.2: a recipient may take a bare LF for a line end; hyper does.
    let lf = b"GET / HTTP/1.1\nHost: x\n\nrest";
    assert_eq!(parse(lf), complete(lf.len() - 4, BodyFraming::None));
    // The head of finding 6: CRLF lines ended by a bare LF.
    let mixed = b"GET / HTTP/1.1\r\nHost: x\r\n\nrest";
    assert_eq!(parse(mixed), complete(mixed.len() - 4, BodyFraming::None));
    assert_eq!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n"), Parsed::Partial);
}

#[test]
fn framing_fields_as_hyper_reads_them() {
    let head = |fields: &str| format!("POST / HTTP/1.1\r\nHost: x\r\n{fields}\r\n");
    let body = |fields: &str| match parse(head(fields).as_bytes()) {
        Parsed::Complete { body, .. } => Ok(body),
        Parsed::Refused(why) => Err(why),
        Parsed::Partial => panic!("partial"),
    };
    assert_eq!(body("Content-Length: 5\r\n"), Ok(BodyFraming::Length(5)));
    assert_eq!(body("Content-Length: 0\r\n"), Ok(BodyFraming::None));
    assert_eq!(
        body("Content-Length: 5\r\nContent-Length: 5\r\n"),
        Ok(BodyFraming::Length(5))
    );
    assert_eq!(
        body("Transfer-Encoding: gzip, chunked\r\n"),
        Ok(BodyFraming::Chunked)
    );
    assert_eq!(
        body("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"),
        Ok(BodyFraming::Chunked)
    );
    for bad_length in [
        "Content-Length: +5\r\n",
        "Content-Length: 5, 5\r\n",
        "Content-Length: -1\r\n",
        "Content-Length: 0x5\r\n",
        "Content-Length:\r\n",
        "Content-Length: 99999999999999999999999\r\n",
        "Content-Length: 5\r\nContent-Length: 6\r\n",
    ] {
        assert_eq!(body(bad_length), Err(Refusal::BadLength), "{bad_length}");
    }
    for bad_te in [
        "Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: chunked, gzip\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
        "Transfer-Encoding: xchunked\r\n",
        "Transfer-Encoding: chunked\x0b\r\n",
    ] {
        assert!(
            matches!(
                body(bad_te),
                Err(Refusal::BadTransferEncoding | Refusal::Malformed)
            ),
            "{bad_te:?}"
        );
    }
    for both in [
        "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
        "transfer-encoding: CHUNKED\r\ncontent-length: 0\r\n",
    ] {
        assert_eq!(body(both), Err(Refusal::BothFramings), "{both}");
    }
    let http10 = b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(parse(http10), Parsed::Refused(Refusal::BadTransferEncoding));
}

#[test]
fn malformed_heads_and_limits_are_refused() {
    for malformed in [
        &b"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n",
        b"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
        b"GET / HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
        b"GET / HTTP/1.1\r\n : x\r\n\r\n",
        b"GET  / HTTP/1.1\r\n\r\n",
        b"\x01 / HTTP/1.1\r\n\r\n",
    ] {
        assert_eq!(
            parse(malformed),
            Parsed::Refused(Refusal::Malformed),
            "{:?}",
            String::from_utf8_lossy(malformed)
        );
    }
    let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(1100));
    assert_eq!(parse(big.as_bytes()), Parsed::Refused(Refusal::TooLarge));
    assert_eq!(
        parse(&big.as_bytes()[..1050]),
        Parsed::Refused(Refusal::TooLarge)
    );
    let fields = |n: usize| {
        let mut head = String::from("GET / HTTP/1.1\r\n");
        for i in 0..n {
            head.push_str(&format!("X{i}: v\r\n"));
        }
        head + "\r\n"
    };
    let limits = HeadLimits {
        max_head: 1 << 20,
        max_headers: 300,
    };
    assert!(matches!(
        parse_head(fields(300).as_bytes(), &limits),
        Parsed::Complete { .. }
    ));
    assert_eq!(
        parse_head(fields(301).as_bytes(), &limits),
        Parsed::Refused(Refusal::TooManyHeaders)
    );
    let few = HeadLimits {
        max_head: 1 << 20,
        max_headers: 10,
    };
    assert_eq!(
        parse_head(fields(11).as_bytes(), &few),
        Parsed::Refused(Refusal::TooManyHeaders)
    );
}

#[test]
fn upgrade_requests_are_told_apart() {
    let framing = |head: &str| match parse(head.as_bytes()) {
        Parsed::Complete { body, .. } => body,
        other => panic!("{head}: {other:?}"),
    };
    let ws = "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n";
    assert_eq!(framing(ws), BodyFraming::Upgrade);
    for not in [
        // No Connection: upgrade, h2c only, HTTP/1.0, another method, a body.
        "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
        "GET / HTTP/1.0\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    ] {
        assert_eq!(framing(not), BodyFraming::None, "{not}");
    }
    let with_body = "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 2\r\n\r\n";
    assert_eq!(framing(with_body), BodyFraming::Length(2));
}
