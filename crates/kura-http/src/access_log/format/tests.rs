use std::time::{Duration, SystemTime};

use http::{HeaderMap, Method, StatusCode, Uri, Version};

use super::*;

fn line(format: &str, outcome: CacheOutcome) -> String {
    let mut headers = HeaderMap::new();
    headers.insert("host", "example.com".parse().unwrap());
    headers.insert("user-agent", "a \"b\"\\".parse().unwrap());
    headers.insert("authorization", "Basic YWxpY2U6c2VjcmV0".parse().unwrap());
    let mut response = HeaderMap::new();
    response.insert("content-type", "text/html".parse().unwrap());
    let uri: Uri = "/x/y?z=1".parse().unwrap();
    let entry = Entry {
        peer: Some("10.0.0.1:5000".parse().unwrap()),
        method: &Method::GET,
        uri: &uri,
        version: Version::HTTP_11,
        headers: &headers,
        status: StatusCode::OK,
        response: &response,
        bytes: Some(12),
        outcome,
        elapsed: Duration::from_micros(2_500_250),
    };
    let at = SystemTime::UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
    Format::parse(format).unwrap().render(&entry, at, 7)
}

#[test]
fn the_default_is_varnishncsas_combined_format() {
    let text = line(DEFAULT, CacheOutcome::Hit);
    let time = DateTime::<Local>::from(
        SystemTime::UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456),
    )
    .format("[%d/%b/%Y:%H:%M:%S %z]")
    .to_string();
    assert_eq!(
        text,
        format!(
            "10.0.0.1 - alice {time} \"GET http://example.com/x/y?z=1 HTTP/1.1\" 200 12 \"-\" \"a \\\"b\\\"\\\\\"\n"
        )
    );
}

#[test]
fn every_specifier_renders() {
    let text = line(
        "%m|%U|%q|%H|%s|%D|%T|%{ms}T|%{us}T|%{Content-Type}o|%{Varnish:hitmiss}x|%{Varnish:handling}x|%{Varnish:side}x|%{Varnish:vxid}x|%{sec}t|%{msec_frac}t|%{usec_frac}t|100%%\\t.",
        CacheOutcome::Stale,
    );
    assert_eq!(
        text,
        "GET|/x/y|?z=1|HTTP/1.1|200|2500250|2|2500|2500250|text/html|hit|hit|c|7|1700000000|123|123456|100%\t.\n"
    );
    assert_eq!(
        line(
            "%{Varnish:hitmiss}x %{Varnish:handling}x",
            CacheOutcome::Pass
        ),
        "miss pass\n"
    );
    assert_eq!(
        line("%{Varnish:time_firstbyte}x", CacheOutcome::Miss),
        "2.500250\n"
    );
    assert_eq!(line("%{%Y}t", CacheOutcome::Miss), "2023\n");
}

#[test]
fn unknown_specifiers_are_refused_with_their_column() {
    let error = Format::parse("%h %Z").unwrap_err();
    assert!(error.starts_with("column 4:"), "{error}");
    assert!(error.contains("%Z"), "{error}");
    let error = Format::parse("%h %{VSL:Begin}x").unwrap_err();
    assert!(
        error.starts_with("column 4:") && error.contains("VSL"),
        "{error}"
    );
    assert!(Format::parse("%O").unwrap_err().contains("%b"));
    assert!(Format::parse("%{Referer").unwrap_err().contains("closing"));
    assert!(Format::parse("%{bad name}i").is_err());
    assert!(Format::parse("%{%Q}t").is_err());
    assert!(Format::parse("abc %").is_err());
}

#[test]
fn control_bytes_are_escaped_as_varnishncsa_does() {
    let mut out = String::new();
    escaped(b"a\tb\x01\xff\"", &mut out);
    assert_eq!(out, "a\\tb\\x01\\xff\\\"");
}
