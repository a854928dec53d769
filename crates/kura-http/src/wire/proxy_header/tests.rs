use super::*;

fn v2(command: u8, family: u8, body: &[u8]) -> Vec<u8> {
    let mut out = SIGNATURE_V2.to_vec();
    out.push(0x20 | command);
    out.push(family);
    out.extend_from_slice(&(body.len() as u16).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn source(input: &[u8]) -> Option<SocketAddr> {
    match parse(input) {
        Parsed::Complete { len, source } => {
            assert!(len <= input.len());
            source
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn version_1() {
    let line = b"PROXY TCP4 192.0.2.7 198.51.100.1 51234 80\r\nGET / HTTP/1.1\r\n";
    assert_eq!(
        parse(line),
        Parsed::Complete {
            len: 44,
            source: Some("192.0.2.7:51234".parse().unwrap())
        }
    );
    let v6 = b"PROXY TCP6 2001:db8::7 2001:db8::1 443 8443\r\n";
    assert_eq!(source(v6), Some("[2001:db8::7]:443".parse().unwrap()));
    assert_eq!(source(b"PROXY UNKNOWN\r\n"), None);
    assert_eq!(source(b"PROXY UNKNOWN ffff:: ffff:: 1 2\r\n"), None);
    for cut in 1..line.len() - 20 {
        assert_eq!(parse(&line[..cut]), Parsed::Partial, "{cut}");
    }
    for bad in [
        &b"PROXY TCP4 192.0.2.7 198.51.100.1 51234\r\n"[..],
        b"PROXY TCP4 2001:db8::7 198.51.100.1 1 2\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 65536 80\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 080 80\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 +80 80\r\n",
        b"PROXY TCP4 192.0.2.7 198.51.100.1 1 2\n",
        b"PROXY TCP5 192.0.2.7 198.51.100.1 1 2\r\n",
        b"PROXY TCP4  192.0.2.7 198.51.100.1 1 2\r\n",
        b"GET / HTTP/1.1\r\n",
        b"proxy TCP4 192.0.2.7 198.51.100.1 1 2\r\n",
    ] {
        assert!(
            matches!(parse(bad), Parsed::Refused(_)),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    let long = [b"PROXY ".as_slice(), &[b'x'; 200]].concat();
    assert!(matches!(parse(&long), Parsed::Refused(_)));
}

#[test]
fn version_2() {
    let mut v4 = vec![192, 0, 2, 7, 198, 51, 100, 1];
    v4.extend_from_slice(&51234u16.to_be_bytes());
    v4.extend_from_slice(&80u16.to_be_bytes());
    let header = v2(1, 0x11, &v4);
    assert_eq!(source(&header), Some("192.0.2.7:51234".parse().unwrap()));
    // TLVs after the addresses are skipped, and what follows the header is not its.
    let mut with_tlv = v4.clone();
    with_tlv.extend_from_slice(&[0x01, 0x00, 0x02, b'h', b'2']);
    let mut input = v2(1, 0x11, &with_tlv);
    let header_len = input.len();
    input.extend_from_slice(b"GET / HTTP/1.1\r\n");
    assert_eq!(
        parse(&input),
        Parsed::Complete {
            len: header_len,
            source: Some("192.0.2.7:51234".parse().unwrap())
        }
    );
    let mut v6 = Vec::new();
    v6.extend_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().unwrap().octets());
    v6.extend_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
    v6.extend_from_slice(&[0x01, 0xbb, 0x00, 0x50]);
    assert_eq!(
        source(&v2(1, 0x21, &v6)),
        Some("[2001:db8::7]:443".parse().unwrap())
    );
    // LOCAL (a health check) and UNSPEC name no client.
    assert_eq!(source(&v2(0, 0x11, &v4)), None);
    assert_eq!(source(&v2(1, 0x00, &[])), None);
    for cut in 1..header.len() {
        assert_eq!(parse(&header[..cut]), Parsed::Partial, "{cut}");
    }
    for bad in [
        v2(2, 0x11, &v4),
        v2(1, 0x11, &v4[..8]),
        v2(1, 0x41, &v4),
        v2(1, 0x13, &v4),
        v2(1, 0x11, &vec![0; MAX_V2]),
    ] {
        assert!(matches!(parse(&bad), Parsed::Refused(_)), "{bad:?}");
    }
    let mut version_1 = v2(1, 0x11, &v4);
    version_1[12] = 0x11;
    assert!(matches!(parse(&version_1), Parsed::Refused(_)));
}

proptest::proptest! {
    /// The fuzz target's invariants (fuzz/fuzz_targets/proxy_header.rs), on random bytes and
    /// on valid headers cut and flipped: no panic, a header inside its input, every prefix of
    /// a header `Partial`, no prefix of a refused input a header.
    #[test]
    fn prefixes_agree_with_the_whole(
        kind in 0u8..3,
        noise in proptest::collection::vec(proptest::num::u8::ANY, 0..80),
        flip in proptest::option::of((0usize..60, proptest::num::u8::ANY)),
    ) {
        let mut data = match kind {
            0 => v2(1, 0x11, &[192, 0, 2, 7, 127, 0, 0, 1, 1, 2, 3, 4]),
            1 => b"PROXY TCP4 192.0.2.7 127.0.0.1 1 2\r\n".to_vec(),
            _ => Vec::new(),
        };
        data.extend_from_slice(&noise);
        if let Some((at, byte)) = flip {
            if at < data.len() {
                data[at] = byte;
            }
        }
        let whole = parse(&data);
        if let Parsed::Complete { len, .. } = whole {
            proptest::prop_assert!(len <= data.len());
            for cut in 0..len {
                proptest::prop_assert_eq!(parse(&data[..cut]), Parsed::Partial);
            }
        }
        if let Parsed::Refused(_) = whole {
            for cut in 0..data.len() {
                let prefix = parse(&data[..cut]);
                proptest::prop_assert!(
                    !matches!(prefix, Parsed::Complete { .. }),
                    "a prefix of {} bytes of a refused input is a header",
                    cut
                );
            }
        }
    }
}
