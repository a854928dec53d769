//! `[backends.NAME]` pools: what is read, and every mistake refused with its line.

use std::time::Duration;

use crate::config::{BackendAddr, Config, HashKey, Policy};

fn load(text: &str) -> Result<Config, String> {
    Config::from_toml(text).map_err(|e| e.to_string())
}

#[test]
fn a_url_is_a_pool_of_one() {
    let config =
        load("[backends]\ndefault = \"http://a:1\"\napi = \"unix:/run/api.sock\"\n").unwrap();
    assert_eq!(config.backends[0].servers.len(), 1);
    assert_eq!(config.backends[0].policy, Policy::RoundRobin);
    assert_eq!(
        config.backends[1].servers[0].addr,
        BackendAddr::Unix("/run/api.sock".into())
    );
    assert_eq!(config.backends[1].servers[0].weight, 1);
}

#[test]
fn pools_with_every_setting() {
    let config = load(
        "backend = \"http://a:1\"\n\
         [backends.app]\n\
         servers = [\"http://10.0.0.1:80\", { url = \"http://10.0.0.2:80\", weight = 3, max_connections = 7, probe = { url = \"/ping\", expected_response = 204 } }]\n\
         policy = \"hash\"\n\
         hash_key = \"cookie:session\"\n\
         first_byte_timeout = 5\n\
         between_bytes_timeout = 0.5\n\
         max_connections = 100\n\
         probe = { url = \"/health\", interval = 1, window = 5, threshold = 3 }\n\
         [backends.spare]\n\
         servers = [\"http://b:1\", \"http://c:1\"]\n\
         policy = \"fallback\"\n",
    )
    .unwrap();
    let app = &config.backends[1];
    assert_eq!(app.name, "app");
    assert_eq!(app.policy, Policy::Hash(HashKey::Cookie("session".into())));
    assert_eq!(app.timeouts.first_byte, Some(Duration::from_secs(5)));
    assert_eq!(app.timeouts.between_bytes, Some(Duration::from_millis(500)));
    assert_eq!(app.timeouts.connect, None);
    let (first, second) = (&app.servers[0], &app.servers[1]);
    assert_eq!((first.weight, first.max_connections), (1, Some(100)));
    let probe = first.probe.as_ref().unwrap();
    assert_eq!(
        (
            probe.path.as_str(),
            probe.window,
            probe.threshold,
            probe.initial
        ),
        ("/health", 5, 3, 3)
    );
    assert_eq!(probe.interval, Duration::from_secs(1));
    assert_eq!(probe.expected, Some(http::StatusCode::OK));
    assert_eq!((second.weight, second.max_connections), (3, Some(7)));
    let own = second.probe.as_ref().unwrap();
    assert_eq!(
        (own.path.as_str(), own.window, own.threshold),
        ("/ping", 8, 3)
    );
    assert_eq!(own.expected, Some(http::StatusCode::NO_CONTENT));
    assert_eq!(config.backends[2].policy, Policy::Fallback);
    let hashed = load("backend = \"http://a:1\"\n[backends.h]\nservers = [\"http://b:1\"]\npolicy = \"hash\"\nhash_key = \"header:X-User\"\n").unwrap();
    assert_eq!(
        hashed.backends[1].policy,
        Policy::Hash(HashKey::Header(http::HeaderName::from_static("x-user")))
    );
    // A rule may name a pool; the default backend may be one.
    let config = load("[backends.default]\nservers = [\"http://a:1\", \"http://b:1\"]\n[[rule]]\nbackend = \"default\"\n").unwrap();
    assert_eq!(config.backends[0].servers.len(), 2);
}

#[test]
fn mistakes_name_the_line() {
    let head = "backend = \"http://a:1\"\n[backends.app]\n";
    for (body, says) in [
        ("servers = []", "servers is empty"),
        ("servers = [\"ftp://x\"]", "only http://"),
        (
            "servers = [\"http://x\"]\ntls_sni = \"x\"",
            "are for https://",
        ),
        ("servers = [\"http://x:1\", \"http://x:1\"]", "listed twice"),
        ("servers = [1]", "a server is a URL"),
        (
            "servers = [{ url = \"http://x:1\", wieght = 2 }]",
            "unknown field",
        ),
        (
            "servers = [\"http://x:1\"]\npolicy = \"least-conn\"",
            "not round-robin",
        ),
        (
            "servers = [\"http://x:1\"]\nhash_key = \"url\"",
            "hash_key is for",
        ),
        (
            "servers = [\"http://x:1\"]\npolicy = \"hash\"\nhash_key = \"query:x\"",
            "not url, header:NAME",
        ),
        (
            "servers = [\"http://x:1\"]\npolicy = \"hash\"\nhash_key = \"header:a b\"",
            "not a field name",
        ),
        (
            "servers = [\"http://x:1\"]\nmax_connections = 0",
            "at least 1",
        ),
        (
            "servers = [\"http://x:1\"]\nfirst_byte_timeout = -1",
            "not a duration",
        ),
        (
            "servers = [\"http://x:1\"]\nprobe = { url = \"health\" }",
            "must start with /",
        ),
        (
            "servers = [\"http://x:1\"]\nprobe = { url = \"/h\", window = 65 }",
            "between 1 and 64",
        ),
        (
            "servers = [\"http://x:1\"]\nprobe = { url = \"/h\", window = 4, threshold = 5 }",
            "threshold 5",
        ),
        (
            "servers = [\"http://x:1\"]\nprobe = { url = \"/h\", initial = 9 }",
            "initial 9",
        ),
        (
            "servers = [\"http://x:1\"]\nprobe = { url = \"/h\", expected_response = 99 }",
            "not a status",
        ),
        (
            "servers = [\"http://x:1\"]\nprobe = { url = \"/h\", interval = 0 }",
            "interval",
        ),
        // The TLS keys are a flattened table, so serde reports a required key misspelled as
        // missing, and any other unknown key by its name.
        ("servrs = [\"http://x:1\"]", "missing field `servers`"),
        (
            "servers = [\"http://x:1\"]\npolcy = \"random\"",
            "unknown field `polcy`",
        ),
        (
            "servers = [{ url = \"https://x:1\", tls_sin = \"x\" }]",
            "unknown field `tls_sin`",
        ),
    ] {
        let error = load(&format!("{head}{body}\n")).unwrap_err();
        assert!(error.contains(says), "{body}: {error}");
        assert!(
            error.contains("line 2") || error.contains("line 3"),
            "{body}: {error}"
        );
        assert!(
            error.contains("backend \"app\"") || error.contains("backend \"http"),
            "{body}: {error}"
        );
    }
    let error = load("backend = \"http://a:1\"\n[backends]\napp = 3\n").unwrap_err();
    assert!(error.contains("a URL or a table"), "{error}");
}

#[test]
fn a_server_may_have_its_own_timeouts() {
    let config = load(
        "backend = \"http://a:1\"\n\
         [backends.app]\n\
         servers = [{ url = \"http://10.0.0.1:80\", connect_timeout = 0.5, first_byte_timeout = 2, between_bytes_timeout = 1.5 }, \"http://10.0.0.2:80\"]\n\
         first_byte_timeout = 30\n",
    )
    .unwrap();
    let servers = &config.backends[1].servers;
    let own = &servers[0].timeouts;
    assert_eq!(own.connect, Some(Duration::from_millis(500)));
    assert_eq!(own.first_byte, Some(Duration::from_secs(2)));
    assert_eq!(own.between_bytes, Some(Duration::from_millis(1500)));
    assert_eq!(servers[1].timeouts, Default::default());
    assert_eq!(
        config.backends[1].timeouts.first_byte,
        Some(Duration::from_secs(30))
    );
    let bad = load(
        "backend = \"http://a:1\"\n[backends.app]\n\
         servers = [{ url = \"http://10.0.0.1:80\", first_byte_timeout = -1 }]\n",
    )
    .unwrap_err();
    assert!(
        bad.contains("line 2") && bad.contains("first_byte_timeout: -1"),
        "{bad}"
    );
}
