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
