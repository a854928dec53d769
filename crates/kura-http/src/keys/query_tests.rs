use super::*;

fn rules() -> QueryRules {
    QueryRules::default()
}

fn key(uri: &str) -> String {
    key_of(&uri.parse().unwrap(), &rules())
}

#[test]
fn percent_encoding_is_normalised() {
    assert_eq!(normalise_percent("/a%7eb%2fc%41"), "/a~b%2FcA");
    assert_eq!(normalise_percent("/%e3%81%82"), "/%E3%81%82");
    assert_eq!(normalise_percent("/100%"), "/100%");
    assert_eq!(normalise_percent("/%zz%4"), "/%zz%4");
    assert_eq!(normalise_percent("q=%2B%20"), "q=%2B%20");
    assert!(matches!(normalise_percent("/plain"), Cow::Borrowed(_)));
}

#[test]
fn tracking_parameters_are_removed_and_the_rest_sorted() {
    let want = "http://example.com/p?a=1&b=2";
    for uri in [
        "http://example.com/p?b=2&a=1",
        "http://example.com/p?utm_source=x&a=1&utm_medium=y&b=2",
        "http://example.com/p?a=1&_ga=1.2.3&b=2&fbclid=Z&gclid=Q",
        "http://example.com:80/p?a=1&b=2&__twitter_impression=true",
        "http://example.com/p?a=%31&b=2&utm%5Fcampaign=c",
        "http://example.com/p?&a=1&&b=2&",
    ] {
        assert_eq!(key(uri), want, "{uri}");
    }
    assert_eq!(
        key("http://example.com/p?utm_source=x"),
        "http://example.com/p"
    );
    assert_eq!(key("http://example.com/p?"), "http://example.com/p");
    assert_eq!(key("https://example.com:443/p"), "https://example.com/p");
    assert_eq!(key("http://example.com:443/p"), "http://example.com:443/p");
    assert_eq!(key("https://example.com:80/p"), "https://example.com:80/p");
    assert_eq!(key("http://example.com:/p"), "http://example.com/p");
}

#[test]
fn sorting_is_stable_for_repeated_names() {
    assert_eq!(
        key("http://h/p?tag=b&x=1&tag=a&tag[]=2&tag[]=1"),
        "http://h/p?tag=b&tag=a&tag[]=2&tag[]=1&x=1"
    );
    let unsorted = QueryRules {
        sort: false,
        ..rules()
    };
    assert_eq!(
        key_of(&"http://h/p?b=1&a=2".parse().unwrap(), &unsorted),
        "http://h/p?b=1&a=2"
    );
}

#[test]
fn patterns() {
    let utm = ParamPattern::parse("utm_*").unwrap();
    assert!(utm.matches("utm_source") && utm.matches("utm_"));
    assert!(!utm.matches("xutm_source") && !utm.matches("utm"));
    let middle = ParamPattern::parse("a*b*c").unwrap();
    assert!(middle.matches("abc") && middle.matches("a-x-b-y-c"));
    assert!(!middle.matches("acb"));
    let dot = ParamPattern::parse("a.b").unwrap();
    assert!(dot.matches("a.b") && !dot.matches("axb"));
    let encoded = ParamPattern::parse("q%5fid").unwrap();
    assert!(encoded.matches("q_id"));
    for bad in ["", "a=b", "a&b", "a b", "a#", "é"] {
        assert!(ParamPattern::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn stripped_targets_for_the_backend() {
    let uri: Uri = "/p?utm_source=x&b=2&a=1".parse().unwrap();
    assert_eq!(stripped(&uri, &rules()).unwrap(), "/p?a=1&b=2");
    let clean: Uri = "/p?a=1&b=2".parse().unwrap();
    assert!(stripped(&clean, &rules()).is_none());
    let absolute: Uri = "http://h:8080/p?utm_source=x".parse().unwrap();
    assert_eq!(stripped(&absolute, &rules()).unwrap(), "http://h:8080/p");
}

/// The long way to an origin-form request's key: its absolute URI, then `key_of`.
fn long_way(scheme: &str, host: &str, target: &str) -> Option<String> {
    let request = http::Request::builder()
        .uri(target)
        .header(http::header::HOST, host)
        .body(())
        .ok()?;
    let (parts, ()) = request.into_parts();
    let uri = crate::rules::invalidation::target_uri((&parts).into(), scheme)?;
    Some(key_of(&uri, &rules()))
}

fn short_way(scheme: &str, host: &str, target: &str) -> Option<String> {
    let uri: Uri = target.parse().ok()?;
    key_of_origin_form(scheme, host, &uri, &rules())
}

#[test]
fn an_origin_form_key_is_the_long_ways_key() {
    for (scheme, host, target) in [
        ("http", "Example.COM", "/a%7eb?utm_source=x&b=2&a=1"),
        ("http", "example.com:80", "/"),
        ("https", "example.com:443", "/x"),
        ("https", "example.com:80", "/x"),
        ("http", "example.com:", "/x"),
        ("http", " example.com ", "/x?"),
        ("http", "[::1]:8080", "/x"),
        ("http", "user@example.com", "/x"),
    ] {
        let short = short_way(scheme, host, target);
        assert!(short.is_some(), "{host} {target}");
        assert_eq!(short, long_way(scheme, host, target), "{host} {target}");
    }
    // Not the simple case: the long way decides.
    for (host, target) in [
        ("example.com?x", "/a"),
        ("example.com/x", "/a"),
        ("example.com#x", "/a"),
        ("", "/a"),
        ("example.com", "*"),
        ("example.com", "http://other.example/a"),
    ] {
        assert_eq!(short_way("http", host, target), None, "{host} {target}");
    }
}

proptest::proptest! {
    /// Hosts and targets from characters that matter to URI parsing: wherever the short way
    /// answers, it answers the long way's key.
    #[test]
    fn the_short_way_never_differs(
        host in proptest::prop_oneof![
            "[a-zA-Z0-9.-]{1,16}(:[0-9]{0,6})?",
            "[a-zA-Z0-9.:@\\[\\]%?/#_~ -]{0,24}",
        ],
        path in "/[a-zA-Z0-9%/?=&._~:@!$'()*+,;-]{0,40}",
        https in proptest::bool::ANY,
    ) {
        let scheme = if https { "https" } else { "http" };
        if let Some(short) = short_way(scheme, &host, &path) {
            proptest::prop_assert_eq!(Some(short), long_way(scheme, &host, &path));
        }
    }
}
