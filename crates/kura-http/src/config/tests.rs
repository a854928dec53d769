//! The settings: flags, the file, backends and rules, and the errors that name a line.

use super::*;

/// Checks that each text of `cases`, after `head`, is refused with an error that contains the
/// text paired with it (the modules' tests of their own settings).
pub(super) fn assert_refused(head: &str, cases: &[(&str, &str)]) {
    for (text, want) in cases {
        let error = Config::from_toml(&format!("{head}{text}"))
            .unwrap_err()
            .to_string();
        assert!(error.contains(want), "{text}: {error}");
    }
}

#[test]
fn flags_alone_are_enough() {
    let args = HttpArgs {
        backend: Some("http://127.0.0.1:8080".into()),
        ..HttpArgs::default()
    };
    let config = Config::load(&args).unwrap();
    assert_eq!(config.listen, vec!["127.0.0.1:6081".parse().unwrap()]);
    assert_eq!(config.memory, 256 << 20);
    assert_eq!(config.max_object, 32 << 20);
    assert!(config.probe.is_none());
}

#[test]
fn file_settings() {
    let config = Config::from_toml(
        "backend = \"http://[::1]:9000\"\nmemory_mb = 64\ngrace = 30\nset_cookie = \"strip\"\n\
         cdn_cache_control = true\n[probe]\npath = \"/health\"\ninterval = 0.5\n",
    )
    .unwrap();
    let BackendAddr::Tcp(uri) = &config.backends[0].servers[0].addr else {
        panic!("a TCP backend")
    };
    assert_eq!(uri.authority().unwrap().as_str(), "[::1]:9000");
    assert_eq!(config.policy.grace, Duration::from_secs(30));
    assert_eq!(config.policy.set_cookie, SetCookie::Strip);
    assert_eq!(config.policy.targeted_fields.len(), 1);
    let probe = config.probe.unwrap();
    assert_eq!(probe.interval, Duration::from_millis(500));
    // Three failures in a row make it sick, one success healthy.
    assert_eq!((probe.window, probe.threshold, probe.initial), (3, 1, 1));
}

/// The text of each ```toml block of `doc`, in order.
fn toml_examples(doc: &str) -> Vec<&str> {
    let mut examples = Vec::new();
    let mut rest = doc;
    while let Some(at) = rest.find("```toml\n") {
        let start = at + 8;
        let end = start + rest[start..].find("```").expect("its end");
        examples.push(&rest[start..end]);
        rest = &rest[end..];
    }
    examples
}

/// Every TOML example in docs/http.md (Settings, Replacing Varnish's Magento file, ...) is a
/// file kura http starts with.
#[test]
fn every_documented_toml_example_parses() {
    let examples = toml_examples(include_str!("../../../../docs/http.md"));
    for (i, example) in examples.iter().enumerate() {
        if let Err(e) = Config::from_toml(example) {
            panic!("example {} of docs/http.md: {e}", i + 1);
        }
    }
    assert!(examples.len() >= 2, "{} TOML examples", examples.len());
}

/// The Settings example in docs/http.md is a valid file, with every key this version reads.
#[test]
fn the_documented_example_parses() {
    let doc = include_str!("../../../../docs/http.md");
    // The Settings section's example (other sections have examples of their own).
    let settings = doc.find("\n### Settings\n").expect("a Settings section");
    let example = toml_examples(&doc[settings..])[0];
    let config = Config::from_toml(example).unwrap();
    assert_eq!(config.tls.len(), 1);
    assert_eq!(config.listen_unix.len(), 1);
    assert_eq!(config.max_connections, 10_000);
    assert_eq!(config.probe.unwrap().path, "/health");
}

#[test]
fn bad_settings_are_refused() {
    for text in [
        "",
        "backend = \"ftp://x\"",
        "backend = \"http://x/path\"",
        "backend = \"http://x\"\nmemory_mb = 0",
        "backend = \"http://x\"\nunknown = 1",
        "backend = \"http://x\"\nset_cookie = \"eat\"",
        "backend = \"http://x\"\n[probe]\npath = \"health\"",
        "backend = \"http://x\"\nconnect_timeout = -1.0",
    ] {
        assert!(Config::from_toml(text).is_err(), "{text}");
    }
}

const RULES: &str = "backend = \"http://127.0.0.1:1\"\n\
    [backends]\n\
    api = \"http://127.0.0.1:2\"\n\
    local = \"unix:/run/app.sock\"\n\
    [[rule]]\n\
    host = \"API.example.com\"\n\
    path_prefix = \"/v1/\"\n\
    backend = \"api\"\n\
    default_ttl = 5\n\
    authorization = \"lookup\"\n\
    [[rule]]\n\
    host = \"*.example.com\"\n\
    path = \"\\\\.css$\"\n\
    backend = \"local\"\n\
    grace = 300\n\
    [[rule]]\n\
    path_prefix = \"/account\"\n\
    pass = true\n\
    cookie = \"pass\"\n";

#[test]
fn rules_route_by_host_and_path_in_order() {
    let config = Config::from_toml(RULES).unwrap();
    assert_eq!(config.backends.len(), 3);
    let name = |host: Option<&str>, path: &str| {
        let route = &config.routes[config.route_index(host, path)];
        (config.backends[route.backend].name.as_str(), route)
    };
    let (backend, route) = name(Some("api.example.com"), "/v1/users");
    assert_eq!(backend, "api");
    assert_eq!(route.policy.default_ttl, Duration::from_secs(5));
    assert!(!route.pass_authorization);
    let (backend, route) = name(Some("www.example.com"), "/a/site.css");
    assert_eq!(backend, "local");
    assert_eq!(route.policy.grace, Duration::from_secs(300));
    assert_eq!(route.policy.default_ttl, Duration::from_secs(120));
    assert!(route.pass_authorization);
    let (backend, route) = name(Some("www.example.com"), "/account/me");
    assert_eq!(backend, "default");
    assert!(route.pass && route.pass_cookie);
    let (backend, route) = name(Some("api.example.com"), "/v2/");
    assert_eq!(backend, "default");
    // Issue 37: requests with cookies are passed by default (as Varnish's built-in rule).
    assert!(!route.pass && route.pass_cookie);
}

#[test]
fn a_bad_rule_is_named_by_its_line() {
    for (text, line, what) in [
        (
            "backend = \"http://x\"\n\n[[rule]]\npath_prefix = \"/a\"\nbackend = \"nope\"\n",
            5,
            "no backend named \"nope\"",
        ),
        (
            "backend = \"http://x\"\n[[rule]]\npath = \"(unclosed\"\n",
            3,
            "not a regular expression",
        ),
        (
            "backend = \"http://x\"\n[[rule]]\npath_prefix = \"a/\"\n",
            3,
            "must start with /",
        ),
        (
            "backend = \"http://x\"\n[[rule]]\nhost = \"a.*.com\"\n",
            3,
            "not a host name",
        ),
        (
            "backend = \"http://x\"\n[[rule]]\npath_prefix = \"/a\"\npath = \"b\"\n",
            4,
            "not both",
        ),
        (
            "backend = \"http://x\"\n[[rule]]\ncookie = \"eat\"\n",
            3,
            "not pass or lookup",
        ),
        (
            "backend = \"http://x\"\n[backends]\nb = \"ftp://y\"\n",
            3,
            "only http://, https:// and unix:",
        ),
        (
            "backend = \"http://x\"\n[backends]\n\"a b\" = \"http://y\"\n",
            3,
            "letters, digits",
        ),
        (
            "backend = \"http://x\"\n[[rule]]\npath_prefx = \"/a\"\n",
            3,
            "unknown field",
        ),
        (
            "backend = \"http://x\"\n\nconnect_timeout = -1.0\n",
            3,
            "not a duration",
        ),
    ] {
        let error = Config::from_toml(text).unwrap_err().to_string();
        assert!(
            error.contains(&format!("line {line}")) && error.contains(what),
            "{text:?} gave {error:?}"
        );
    }
}

#[test]
fn the_default_backend_may_be_named() {
    let config =
        Config::from_toml("[backends]\ndefault = \"http://a:1\"\nother = \"http://b:2\"\n")
            .unwrap();
    assert_eq!(config.backends[0].name, "default");
    assert_eq!(config.backends[1].name, "other");
    assert!(Config::from_toml("[backends]\nother = \"http://b:2\"\n").is_err());
    assert!(
        Config::from_toml("backend = \"http://a:1\"\n[backends]\ndefault = \"http://b:2\"\n")
            .is_err()
    );
}

#[test]
fn safety_settings_at_the_top_and_in_rules() {
    let config = Config::from_toml(
        "backend = \"http://127.0.0.1:1\"\n\
         max_headers = 50\n\
         cookie_ignore = [\"_ga*\", \"_gid\"]\n\
         strip_unkeyed = [\"x-forwarded-host\"]\n\
         [[rule]]\n\
         path_prefix = \"/blog/\"\n\
         cookie = \"lookup\"\n\
         heuristic_with_credentials = true\n\
         key_headers = []\n",
    )
    .unwrap();
    assert_eq!(config.max_headers, 50);
    let top = &config.routes[0];
    assert!(top.pass_cookie && top.pass_authorization);
    assert!(!top.policy.heuristic_with_credentials);
    assert_eq!(top.cookie_ignore.len(), 2);
    assert_eq!(
        top.unkeyed.strip,
        [http::HeaderName::from_static("x-forwarded-host")]
    );
    assert_eq!(
        top.unkeyed.key.len(),
        crate::config::DEFAULT_KEY_HEADERS.len()
    );
    let blog = &config.routes[config.route_index(None, "/blog/x")];
    assert!(!blog.pass_cookie && blog.policy.heuristic_with_credentials);
    assert_eq!(blog.cookie_ignore.len(), 2, "inherited from the top level");
    assert!(blog.unkeyed.key.is_empty());
    let defaults = Config::from_toml("backend = \"http://127.0.0.1:1\"\n").unwrap();
    assert_eq!(defaults.max_headers, crate::config::DEFAULT_MAX_HEADERS);
    assert_eq!(
        defaults.routes[0].unkeyed.strip.len(),
        crate::config::DEFAULT_STRIP_UNKEYED.len()
    );
    for (text, line, what) in [
        (
            "backend = \"http://x\"\n\ncookie = \"maybe\"\n",
            3,
            "cookie",
        ),
        (
            "backend = \"http://x\"\nstrip_unkeyed = [\"a b\"]\n",
            2,
            "not a header field name",
        ),
        (
            "backend = \"http://x\"\n[[rule]]\ncookie_ignore = [\"a=b\"]\n",
            3,
            "cookie_ignore",
        ),
    ] {
        let error = Config::from_toml(text).unwrap_err().to_string();
        assert!(error.contains(&format!("line {line}")), "{error}");
        assert!(error.contains(what), "{error}");
    }
}
