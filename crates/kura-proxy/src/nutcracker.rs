//! `kura proxy --from-nutcracker FILE.yml`: twemproxy's configuration as
//! kura proxy's (docs/proxy.md, "From twemproxy"). It reads the YAML that
//! nutcracker's files are written in (pools of `key: value` lines and a
//! `servers:` list; comments, quotes) and nothing more, saying where a
//! file goes beyond that. Every setting without an equivalent is named in
//! the notes, unknown keys too.
//!
//! | twemproxy | kura proxy |
//! |---|---|
//! | a pool | `[pools.NAME]`; the first is `default_pool` and gives `listen` |
//! | `servers` | `servers` (the same `host:port:weight [name]`) |
//! | `distribution: ketama`, `modula`, `random` | `ring = "twemproxy"`, `"modula"`, `"random"` |
//! | `hash`, `hash_tag` | `hash`, `hash_tag` |
//! | `timeout` | `[health] request_timeout_ms` |
//! | `server_failure_limit` | `[health] failure_limit` |
//! | `server_retry_timeout` | `[health] probe_backoff_min_ms` and `_max_ms` |
//! | `server_connections` | `[health] connections_per_backend` |
//!
//! `[health]` is kura's for every pool: the first pool's values are taken
//! and a pool that differs is named.

use std::fmt::Write as _;

/// A pool of the file: its name and its settings in order.
struct Pool {
    name: String,
    settings: Vec<(String, String)>,
    servers: Vec<String>,
}

/// Why a file cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct YamlError {
    pub line: usize,
    pub what: String,
}

/// A translation: the TOML, and what it could not carry.
pub struct Translation {
    pub toml: String,
    pub notes: Vec<String>,
}

/// A value without its quotes.
fn unquote(v: &str) -> String {
    let v = v.trim();
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return v[1..v.len() - 1].to_string();
        }
    }
    v.to_string()
}

/// A line without its comment (a `#` outside quotes, at the start or
/// after a space).
fn uncomment(line: &str) -> &str {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '#') if prev.is_whitespace() => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

fn parse(text: &str) -> Result<Vec<Pool>, YamlError> {
    let mut pools: Vec<Pool> = Vec::new();
    let mut in_servers = false;
    for (n, raw) in text.lines().enumerate() {
        let err = |what: &str| YamlError {
            line: n + 1,
            what: what.to_string(),
        };
        let line = uncomment(raw).trim_end();
        if line.trim().is_empty() || line.trim() == "---" {
            continue;
        }
        let indented = line.starts_with([' ', '\t']);
        let body = line.trim();
        if !indented {
            let name = body
                .strip_suffix(':')
                .ok_or_else(|| err("a pool name ending with ':' was expected"))?;
            pools.push(Pool {
                name: unquote(name),
                settings: Vec::new(),
                servers: Vec::new(),
            });
            in_servers = false;
            continue;
        }
        let pool = pools
            .last_mut()
            .ok_or_else(|| err("a setting before any pool"))?;
        if let Some(item) = body.strip_prefix('-') {
            if !in_servers {
                return Err(err("a list item outside servers:"));
            }
            pool.servers.push(unquote(item));
            continue;
        }
        let (key, value) = body
            .split_once(':')
            .ok_or_else(|| err("a 'key: value' line was expected"))?;
        let key = key.trim().to_string();
        in_servers = key == "servers";
        if in_servers {
            if !value.trim().is_empty() {
                return Err(err(
                    "servers: takes a list, one '- host:port:weight' a line",
                ));
            }
        } else if value
            .trim_start()
            .starts_with(['[', '{', '&', '*', '|', '>'])
        {
            return Err(err("flow collections, anchors and blocks are not read"));
        } else {
            pool.settings.push((key, unquote(value)));
        }
    }
    Ok(pools)
}

/// The `[health]` lines a pool's settings give.
fn health_of(p: &Pool) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (k, v) in &p.settings {
        let name = match k.as_str() {
            "timeout" => "request_timeout_ms",
            "server_failure_limit" => "failure_limit",
            "server_connections" => "connections_per_backend",
            "server_retry_timeout" => {
                out.push(("probe_backoff_min_ms", v.clone()));
                "probe_backoff_max_ms"
            }
            _ => continue,
        };
        out.push((name, v.clone()));
    }
    out
}

/// A note for a setting kura proxy does not carry, if it is one.
fn untranslated(pool: &str, key: &str, value: &str) -> Option<String> {
    let why = match key {
        "listen" | "hash" | "hash_tag" | "distribution" | "timeout" | "server_failure_limit"
        | "server_retry_timeout" | "server_connections" => return None,
        "auto_eject_hosts" if value == "false" => return None,
        "auto_eject_hosts" => "kura proxy never moves a down server's keys to the others: they fail (down_reply), or go to a gutter pool",
        "redis" if value == "false" => return None,
        "backlog" | "client_connections" | "tcpkeepalive" | "preconnect" | "reuseport" => {
            "no equivalent in kura proxy"
        }
        "redis_auth" | "redis_db" => "a redis setting (kura proxy is memcached's)",
        _ => "unknown to twemproxy and kura proxy",
    };
    Some(format!("pool {pool}: {key}: {value}: {why}"))
}

/// Translates nutcracker's `text`.
///
/// # Errors
/// The file goes beyond the YAML nutcracker's files are written in.
pub fn translate(text: &str, source: &str) -> Result<Translation, YamlError> {
    let pools = parse(text)?;
    let mut notes = Vec::new();
    let (mut body, mut health, mut first) = (String::new(), Vec::new(), None);
    for p in &pools {
        let get = |k: &str| {
            p.settings
                .iter()
                .find(|(x, _)| x == k)
                .map(|(_, v)| v.as_str())
        };
        if get("redis") == Some("true") {
            notes.push(format!("pool {}: a redis pool, left out", p.name));
            continue;
        }
        let listen = get("listen").unwrap_or_default();
        match first {
            None => {
                if listen.starts_with('/') {
                    notes.push(format!(
                        "pool {}: listen: {listen}: kura proxy listens on TCP only",
                        p.name
                    ));
                }
                first = Some((p.name.clone(), listen.to_string()));
                health = health_of(p);
            }
            Some(_) => {
                notes.push(format!(
                    "pool {}: listen: {listen}: kura proxy listens on one address; this pool's keys reach it through a [[routes]] prefix, or run another kura proxy with default_pool = {:?}",
                    p.name, p.name
                ));
                if health_of(p) != health {
                    notes.push(format!("pool {}: its timeouts and failure settings differ from the first pool's, whose [health] applies to every pool", p.name));
                }
            }
        }
        for (k, v) in &p.settings {
            notes.extend(untranslated(&p.name, k, v));
        }
        let _ = writeln!(body, "\n[pools.{}]", toml_key(&p.name));
        let servers: Vec<String> = p.servers.iter().map(|s| toml_str(s)).collect();
        let _ = writeln!(body, "servers = [{}]", servers.join(", "));
        let ring = match get("distribution").unwrap_or("ketama") {
            "ketama" => "twemproxy",
            "modula" => "modula",
            "random" => "random",
            other => {
                notes.push(format!(
                    "pool {}: distribution: {other}: unknown, ketama taken",
                    p.name
                ));
                "twemproxy"
            }
        };
        let _ = writeln!(body, "ring = \"{ring}\"");
        for k in ["hash", "hash_tag"] {
            if let Some(v) = get(k) {
                let _ = writeln!(body, "{k} = {}", toml_str(v));
            }
        }
    }
    let mut toml = format!("# kura proxy's configuration, translated from twemproxy's {source}\n");
    if let Some((name, listen)) = &first {
        if !listen.starts_with('/') && !listen.is_empty() {
            let _ = writeln!(toml, "listen = {}", toml_str(listen));
        }
        let _ = writeln!(toml, "default_pool = {}", toml_str(name));
    }
    if !health.is_empty() {
        toml.push_str("\n[health]\n");
        for (k, v) in &health {
            let _ = writeln!(toml, "{k} = {v}");
        }
    }
    toml.push_str(&body);
    Ok(Translation { toml, notes })
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A table name: bare when it can be.
fn toml_key(s: &str) -> String {
    let bare = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        s.to_string()
    } else {
        toml_str(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_translates_whole_and_the_rest_is_named() {
        let yml = "# a comment\nalpha:\n  listen: 127.0.0.1:22121\n  hash: fnv1a_64\n  hash_tag: \"{}\"\n  \
                   distribution: modula  # trailing\n  timeout: 400\n  auto_eject_hosts: true\n  \
                   server_retry_timeout: 2000\n  server_failure_limit: 3\n  frobnicate: 1\n  servers:\n   \
                   - 127.0.0.1:11212:1 one\n   - '127.0.0.1:11213:2'\n\
                   beta:\n  listen: /tmp/beta\n  redis: true\n  servers:\n   - 127.0.0.1:6379:1\n";
        let t = translate(yml, "x.yml").unwrap();
        let want = "listen = \"127.0.0.1:22121\"\ndefault_pool = \"alpha\"\n\n[health]\n\
                    request_timeout_ms = 400\nprobe_backoff_min_ms = 2000\nprobe_backoff_max_ms = 2000\n\
                    failure_limit = 3\n\n[pools.alpha]\nservers = [\"127.0.0.1:11212:1 one\", \"127.0.0.1:11213:2\"]\n\
                    ring = \"modula\"\nhash = \"fnv1a_64\"\nhash_tag = \"{}\"\n";
        assert!(t.toml.ends_with(want), "{}", t.toml);
        let notes = t.notes.join("\n");
        for named in ["frobnicate", "auto_eject_hosts", "pool beta: a redis pool"] {
            assert!(notes.contains(named), "{named}: {notes}");
        }
        let cfg: crate::config::FileConfig = toml::from_str(&t.toml).unwrap();
        assert_eq!(cfg.pools["alpha"].hash_tag.as_deref(), Some("{}"));
    }

    #[test]
    fn what_it_does_not_read_is_refused_with_its_line() {
        for (yml, line) in [
            ("a:\n  servers: [x]\n", 2),
            ("  listen: x\n", 1),
            ("a:\n  - x\n", 2),
            ("a:\n  listen: *anchor\n", 2),
        ] {
            let e = translate(yml, "x").err().expect(yml);
            assert_eq!(e.line, line, "{yml}: {e}");
        }
    }
}
