//! The configuration files the Debian package installs (packaging/etc/):
//! each loads as its command loads it, and the defaults they show, commented
//! out, are the defaults (uncommenting every `# key = value` line changes
//! nothing), so the files cannot drift from the code.

use std::path::{Path, PathBuf};

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../packaging/etc")
        .join(name)
}

/// The file with every `# key = value` line (a default shown) uncommented,
/// and `# [section]` headers too; `#example:` lines stay comments.
fn defaults_uncommented(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| match line.strip_prefix("# ") {
            Some(rest) if is_setting(rest) => rest.to_string(),
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_setting(s: &str) -> bool {
    let key = |k: &str| !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    match s.split_once(" = ") {
        Some((k, _)) => key(k),
        None => s.starts_with('[') && s.ends_with(']') && key(s.trim_matches(['[', ']'])),
    }
}

fn write_temp(name: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("kura-pkg-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn the_server_file_shows_the_defaults() {
    let path = shipped("server.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let as_shipped: kura_server::ServerConfig = toml::from_str(&text).unwrap();
    assert_eq!(as_shipped, kura_server::ServerConfig::default());
    let all: kura_server::ServerConfig = toml::from_str(&defaults_uncommented(&path))
        .unwrap_or_else(|e| panic!("the defaults shown do not parse: {e}"));
    assert_eq!(all, kura_server::ServerConfig::default());
    // The check sees the settings: a wrong default shown is caught.
    let wrong = defaults_uncommented(&path).replace("port = 11211", "port = 11212");
    assert_ne!(
        toml::from_str::<kura_server::ServerConfig>(&wrong).unwrap(),
        kura_server::ServerConfig::default()
    );
}

#[test]
fn the_proxy_and_http_files_load_with_their_defaults_shown() {
    for (name, uncommented) in [("proxy.toml", false), ("proxy.toml", true)] {
        let path = shipped(name);
        let file = if uncommented {
            write_temp(name, &defaults_uncommented(&path))
        } else {
            path
        };
        let args = kura_proxy::ProxyArgs {
            config: Some(file.clone()),
            ..Default::default()
        };
        let c = kura_proxy::Config::load(&args).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(c.listen, "127.0.0.1:11311");
        assert_eq!(c.threads, 2);
    }
    for uncommented in [false, true] {
        let path = shipped("http.toml");
        let file = if uncommented {
            write_temp("http.toml", &defaults_uncommented(&path))
        } else {
            path
        };
        let args = kura_http::HttpArgs {
            config: Some(file.clone()),
            ..Default::default()
        };
        let c = kura_http::Config::load(&args).unwrap_or_else(|e| panic!("http.toml: {e}"));
        assert_eq!(c.listen, vec!["127.0.0.1:6081".parse().unwrap()]);
    }
}
