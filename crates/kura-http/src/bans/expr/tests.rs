use http::{HeaderMap, HeaderName, HeaderValue};

use super::{Expr, ExprError, Subject};

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

fn matches(expr: &str, url: &str, fields: &[(&str, &str)]) -> bool {
    let headers = headers(fields);
    let tags = [HeaderName::from_static("surrogate-key")];
    let subject = Subject {
        url,
        host: "example.com",
        status: 200,
        headers: &headers,
        tag_fields: &tags,
    };
    Expr::parse(expr).unwrap().matches(&subject)
}

#[test]
fn url_host_status_and_fields() {
    assert!(matches("obj.url ~ ^/blog/", "/blog/1", &[]));
    assert!(!matches("obj.url ~ ^/blog/", "/news/1", &[]));
    assert!(matches("obj.url == /a?b=1", "/a?b=1", &[]));
    assert!(!matches("obj.url == /a", "/a?b=1", &[]));
    assert!(matches("obj.url != /a", "/b", &[]));
    assert!(matches("obj.url !~ \\.css$", "/a.js", &[]));
    assert!(!matches("obj.url !~ \\.css$", "/a.css", &[]));
    assert!(matches("obj.host == example.com", "/", &[]));
    assert!(matches("obj.status == 200", "/", &[]));
    assert!(!matches("obj.status != 200", "/", &[]));
    let fields = [("x-content-id", "42"), ("content-type", "text/html")];
    assert!(matches("obj.http.x-content-id == 42", "/", &fields));
    assert!(matches("obj.http.X-Content-Id == \"42\"", "/", &fields));
    assert!(!matches("obj.http.x-content-id == 4", "/", &fields));
    // A missing field equals nothing.
    assert!(!matches("obj.http.x-missing == 42", "/", &fields));
    assert!(matches("obj.http.x-missing != 42", "/", &fields));
}

#[test]
fn conditions_join_with_and() {
    let fields = [("content-type", "text/html; charset=utf-8")];
    let both = r#"obj.url ~ "^/blog/" && obj.http.content-type ~ "^text/html""#;
    assert!(matches(both, "/blog/x", &fields));
    assert!(!matches(both, "/img/x", &fields));
    assert!(!matches(both, "/blog/x", &[("content-type", "image/png")]));
    assert_eq!(Expr::parse(&format!("  {both} ")).unwrap().text(), both);
}

#[test]
fn quoted_values_keep_spaces_and_escapes() {
    let fields = [("x-title", "a \"b\" && c")];
    assert!(matches(
        r#"obj.http.x-title == "a \"b\" && c""#,
        "/",
        &fields
    ));
    assert!(matches(r#"obj.url ~ "\.png$""#, "/x.png", &[]));
}

#[test]
fn tags_are_words_of_the_tag_fields() {
    let tagged = [("surrogate-key", "post-1 user-7,home")];
    let subject_headers = headers(&tagged);
    let tags = [HeaderName::from_static("surrogate-key")];
    let subject = Subject {
        url: "/",
        host: "h",
        status: 200,
        headers: &subject_headers,
        tag_fields: &tags,
    };
    assert!(Expr::tag("post-1").matches(&subject));
    assert!(Expr::tag("user-7").matches(&subject));
    assert!(Expr::tag("home").matches(&subject));
    assert!(!Expr::tag("post").matches(&subject));
    let exact = Expr::url("h", "/");
    assert!(exact.matches(&subject));
    assert!(!Expr::url("h", "/x").matches(&subject));
}

#[test]
fn request_fields_are_refused_with_the_reason() {
    for text in ["req.url ~ ^/", "obj.url ~ ^/ && req.http.cookie == a"] {
        let error = Expr::parse(text).unwrap_err();
        assert!(matches!(error, ExprError::RequestDependent(_)), "{text}");
        assert!(error.to_string().contains("lurker"), "{error}");
    }
}

#[test]
fn malformed_expressions_are_refused_clearly() {
    let cases = [
        ("", "empty"),
        ("obj.url", "expected ==, !=, ~ or !~"),
        ("obj.url ==", "missing value"),
        ("obj.url == /a &&", "expected a field"),
        ("obj.url == /a || obj.url == /b", "expected && or the end"),
        ("obj.uri == /a", "unknown field"),
        ("obj.url ~ \"(\"", "bad regular expression"),
        ("obj.status ~ 2..", "status code"),
        ("obj.status == ok", "status code"),
        ("obj.url == \"/a", "unterminated"),
        ("obj.http.bad\u{1}name == 1", "not a header field name"),
    ];
    for (text, want) in cases {
        let error = Expr::parse(text).unwrap_err().to_string();
        assert!(error.contains(want), "{text:?}: {error}");
    }
}
