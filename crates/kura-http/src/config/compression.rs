//! `[compression]` as read from the file, checked.

use super::file::{self, Source};
use super::ConfigError;
use crate::compress::{Coding, Compression};

/// `[compression]`: on by default, level 1..=9, media types `type/subtype` or `type/*`.
pub(super) fn compression(
    file: Option<file::CompressionFile>,
    src: Source<'_>,
) -> Result<Compression, ConfigError> {
    let mut compression = Compression::default();
    let Some(file) = file else {
        return Ok(compression);
    };
    if let Some(enabled) = file.enabled {
        compression.enabled = enabled;
    }
    if let Some(level) = file.level {
        let value = *level.get_ref();
        if !(1..=9).contains(&value) {
            return Err(ConfigError::Invalid(format!(
                "{}compression.level: {value} is not between 1 and 9",
                src.at(Some(level.span().start))
            )));
        }
        compression.level = value;
    }
    if let Some(types) = file.types {
        compression.types.clear();
        for listed in types {
            let value = listed.get_ref().trim().to_ascii_lowercase();
            let valid = value.split_once('/').is_some_and(|(top, sub)| {
                let token = |s: &str| {
                    !s.is_empty()
                        && s.bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
                };
                token(top) && (sub == "*" || token(sub))
            });
            if !valid {
                return Err(ConfigError::Invalid(format!(
                    "{}compression.types: {:?} is not a media type (type/subtype or type/*)",
                    src.at(Some(listed.span().start)),
                    listed.get_ref()
                )));
            }
            compression.types.push(value);
        }
    }
    if let Some(min_size) = file.min_size {
        compression.min_size = min_size;
    }
    if let Some(names) = file.backend_accept {
        compression.backend_accept.clear();
        for name in names {
            let coding = Coding::parse(name.get_ref()).ok_or_else(|| {
                ConfigError::Invalid(format!(
                    "{}compression.backend_accept: {:?} is not gzip, br or zstd",
                    src.at(Some(name.span().start)),
                    name.get_ref()
                ))
            })?;
            if !compression.backend_accept.contains(&coding) {
                compression.backend_accept.push(coding);
            }
        }
    }
    if let Some(coding) = file.coding {
        compression.coding = match coding.get_ref().as_str() {
            "gzip" => Coding::Gzip,
            "br" => Coding::Br,
            other => {
                return Err(ConfigError::Invalid(format!(
                    "{}compression.coding: {other:?} is not gzip or br",
                    src.at(Some(coding.span().start))
                )))
            }
        };
    }
    if let Some(level) = file.brotli_level {
        let value = *level.get_ref();
        if value > 11 {
            return Err(ConfigError::Invalid(format!(
                "{}compression.brotli_level: {value} is not between 0 and 11",
                src.at(Some(level.span().start))
            )));
        }
        compression.brotli_level = value;
    }
    if let Some(mb) = file.max_decoded_mb {
        compression.max_decoded = mb.max(1).saturating_mul(1 << 20);
    }
    Ok(compression)
}

#[cfg(test)]
mod tests {
    use crate::compress::Coding;
    use crate::config::Config;

    fn load(section: &str) -> Result<Config, String> {
        Config::from_toml(&format!("backend = \"http://x\"\n[compression]\n{section}"))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_and_values() {
        let config = Config::from_toml("backend = \"http://x\"").unwrap();
        assert!(config.compression.enabled);
        assert_eq!(config.compression.level, 6);
        assert_eq!(config.compression.min_size, 1024);
        let config = load(
            "enabled = false\nlevel = 9\nmin_size = 0\ntypes = [\"Text/*\", \"application/json\"]",
        )
        .unwrap();
        assert!(!config.compression.enabled);
        assert_eq!(config.compression.level, 9);
        assert_eq!(config.compression.min_size, 0);
        assert_eq!(config.compression.types, ["text/*", "application/json"]);
        assert_eq!(config.compression.backend_accept, Coding::ALL);
        assert_eq!(config.compression.max_decoded, 64 << 20);
        let config = load("backend_accept = [\"gzip\"]\nmax_decoded_mb = 8").unwrap();
        assert_eq!(config.compression.backend_accept, [Coding::Gzip]);
        assert_eq!(config.compression.max_decoded, 8 << 20);
        let config = load("coding = \"br\"\nbrotli_level = 11").unwrap();
        assert_eq!(
            (config.compression.coding, config.compression.brotli_level),
            (Coding::Br, 11)
        );
        assert!(load("coding = \"zstd\"")
            .unwrap_err()
            .contains("not gzip or br"));
        assert!(load("brotli_level = 12")
            .unwrap_err()
            .contains("between 0 and 11"));
        let error = load("backend_accept = [\"deflate\"]").unwrap_err();
        assert!(
            error.contains("line 3") && error.contains("not gzip, br or zstd"),
            "{error}"
        );
    }

    #[test]
    fn mistakes_are_refused_with_the_line() {
        let error = load("level = 0").unwrap_err();
        assert!(
            error.contains("line 3") && error.contains("level"),
            "{error}"
        );
        let error = load("level = 10").unwrap_err();
        assert!(error.contains("between 1 and 9"), "{error}");
        for bad in ["\"html\"", "\"text/\"", "\"*/*\"", "\"text/ html\""] {
            let error = load(&format!("types = [{bad}]")).unwrap_err();
            assert!(error.contains("not a media type"), "{bad}: {error}");
        }
        assert!(load("brotli = true").is_err());
    }
}
