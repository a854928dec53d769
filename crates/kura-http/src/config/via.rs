//! `via_name` and `max_via_hops`: the name this instance gives itself in the `Via` field of
//! the requests it forwards (RFC 9110 §7.6.3's `received-by`), and the most `Via` entries a
//! request may carry. A request that names this instance in its `Via` has come back to it (a
//! loop: its backend is itself, or a chain of proxies leads back to it) and is refused with
//! `508` instead of being forwarded again (`server/loops.rs`).

use http::HeaderValue;
use toml::Spanned;

use super::file::Source;
use super::ConfigError;
use crate::rules::cache_control::lexer::is_tchar;

/// The most `Via` entries a request may carry by default: far more than real chains (a CDN
/// with shielding, a load balancer and a cache add three or four).
pub const DEFAULT_MAX_HOPS: usize = 20;

/// Longest `via_name`.
const MAX_NAME: usize = 64;

/// This instance's `Via` identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Via {
    /// Its name: `via_name`, or `kura-` and eight random hex digits chosen at start.
    pub name: String,
    /// The entry it appends to `Via`: `1.1 NAME`.
    pub entry: HeaderValue,
    /// Whether the file named it (a random name is kept across reloads: `server/live.rs`).
    pub named: bool,
    /// The most `Via` entries a request may carry (`max_via_hops`); more is taken as a loop.
    pub max_hops: usize,
}

impl Via {
    /// The identity named `name` (checked by [`read`]).
    fn named(name: String, named: bool, max_hops: usize) -> Option<Via> {
        let entry = HeaderValue::try_from(format!("1.1 {name}")).ok()?;
        Some(Via {
            name,
            entry,
            named,
            max_hops,
        })
    }

    /// A random name: two instances never share it, even on one host, so a chain of kuras is
    /// never mistaken for a loop.
    fn random(max_hops: usize) -> Via {
        let name = format!("kura-{:08x}", rand::random::<u32>());
        // Hex digits and a dash always make a valid field value.
        Via::named(name, false, max_hops).unwrap_or_else(|| Via {
            name: "kura".into(),
            entry: HeaderValue::from_static("1.1 kura"),
            named: false,
            max_hops,
        })
    }

    /// This identity with `other`'s random name when neither was named in the file: a reload
    /// keeps the name the running instance forwards with.
    pub fn keeping(mut self, other: &Via) -> Via {
        if !self.named && !other.named {
            self.name.clone_from(&other.name);
            self.entry = other.entry.clone();
        }
        self
    }
}

/// `via_name` and `max_via_hops` as read: a name is a token (a host name is one), at most 64
/// bytes; `max_via_hops` is at least 1.
pub(super) fn read(
    name: Option<&Spanned<String>>,
    max_hops: Option<usize>,
    src: Source<'_>,
) -> Result<Via, ConfigError> {
    let max_hops = max_hops.unwrap_or(DEFAULT_MAX_HOPS).max(1);
    let Some(value) = name else {
        return Ok(Via::random(max_hops));
    };
    let text = value.get_ref();
    let token = !text.is_empty()
        && text.len() <= MAX_NAME
        && text
            .bytes()
            .all(|b| is_tchar(b) || matches!(b, b':' | b'[' | b']'));
    match Via::named(text.clone(), true, max_hops) {
        Some(via) if token => Ok(via),
        _ => Err(ConfigError::Invalid(format!(
            "{}via_name: {text:?} is not a token of at most {MAX_NAME} bytes (letters, digits and !#$%&'*+-.^_`|~:[])",
            src.at(Some(value.span().start))
        ))),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const BACKEND: &str = "backend = \"http://127.0.0.1:1\"\n";

    #[test]
    fn a_name_is_a_token_and_the_default_is_random() {
        let one = Config::from_toml(BACKEND).unwrap().via;
        let two = Config::from_toml(BACKEND).unwrap().via;
        assert!(one.name.starts_with("kura-") && one.name.len() == 13);
        assert_ne!(
            one.name, two.name,
            "two instances never share a default name"
        );
        assert_eq!(one.entry, format!("1.1 {}", one.name));
        assert_eq!(one.max_hops, super::DEFAULT_MAX_HOPS);
        // A reload without a name keeps the running one; a named one is taken as it is.
        assert_eq!(two.clone().keeping(&one).name, one.name);
        let named = Config::from_toml(&format!("{BACKEND}via_name = \"edge-1.example:6081\"\n"))
            .unwrap()
            .via;
        assert_eq!(named.entry, "1.1 edge-1.example:6081");
        assert_eq!(named.clone().keeping(&one).name, "edge-1.example:6081");
        assert_eq!(one.keeping(&named).name.len(), 13);
        for bad in ["", "two words", "a,b", "x(y)"] {
            let error = Config::from_toml(&format!("{BACKEND}via_name = {bad:?}\n"))
                .unwrap_err()
                .to_string();
            assert!(error.contains("line 2: via_name"), "{bad}: {error}");
        }
    }
}
