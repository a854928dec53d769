//! The flash tier's section of the settings (`--ext-path FILE:SIZE`,
//! memcached's `-o ext_*`, `[flash]` in TOML): checked here and turned
//! into kura-store's [`FlashConfig`](kura_store::FlashConfig).

use std::path::PathBuf;

use serde::Deserialize;

use super::{ConfigError, ServerConfig};

/// The flash tier's settings, with memcached's defaults.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlashSettings {
    /// `FILE:SIZE` each (`--ext-path`, `-o ext_path`); SIZE with
    /// memcached's units: `64m`, `1g`, `2t`. None: no flash tier.
    pub paths: Vec<String>,
    /// Values at least this many bytes go to flash (`ext_item_size`).
    pub item_size: usize,
    /// Entries idle (not read or written) for more than this many seconds
    /// go to flash before the cache needs their room (`ext_item_age`);
    /// memcached's default, 4294967295, is no age limit: only when evicted.
    pub item_age: u32,
    /// Megabytes a page (`ext_page_size`).
    pub page_size_mb: u64,
    /// Megabytes a write buffer (`ext_wbuf_size`).
    pub wbuf_size_mb: u64,
    /// Compact when fewer pages than this are free; 0: 1% of the pages
    /// (`ext_compact_under`).
    pub compact_under: usize,
    /// Under this many free pages, `drop_unread` drops records never read
    /// (`ext_drop_under`; 0: as `compact_under`).
    pub drop_under: usize,
    /// Compact only pages less full than this fraction (`ext_max_frag`).
    pub max_frag: f64,
    /// `ext_drop_unread`.
    pub drop_unread: bool,
    /// Read a value back into RAM one in this many repeated hits
    /// (`ext_recache_rate`).
    pub recache_rate: u32,
    /// Reader threads: gets of values on flash wait for them, not the
    /// workers (`ext_threads`).
    pub threads: usize,
}

impl Default for FlashSettings {
    fn default() -> Self {
        FlashSettings {
            paths: Vec::new(),
            item_size: 512,
            item_age: u32::MAX,
            page_size_mb: 64,
            wbuf_size_mb: 4,
            compact_under: 0,
            drop_under: 0,
            max_frag: 0.8,
            drop_unread: false,
            recache_rate: 2000,
            threads: 1,
        }
    }
}

/// Parses `FILE:SIZE` as memcached's `ext_path` does: SIZE is a number and
/// a unit, m, g, t or p (any case). memcached's third field, a page bucket
/// (`:compact`, `:lowttl`...), is refused: kura's pages are one pool.
pub fn parse_ext_path(s: &str) -> Result<(PathBuf, u64), String> {
    let mut parts = s.split(':');
    let file = parts.next().filter(|f| !f.is_empty());
    let size = parts.next();
    let (Some(file), Some(size)) = (file, size) else {
        return Err(format!(
            "ext_path {s}: must supply size to ext_path, ie: ext_path=/f/e:64m (m|g|t|p supported)"
        ));
    };
    if let Some(bucket) = parts.next() {
        return Err(format!(
            "ext_path {s}: page bucket '{bucket}' not supported: kura's flash pages are one pool"
        ));
    }
    let (digits, unit) = size.split_at(size.len().saturating_sub(1));
    let shift = match unit {
        "m" | "M" => 20,
        "g" | "G" => 30,
        "t" | "T" => 40,
        "p" | "P" => 50,
        _ => {
            return Err(format!(
            "ext_path {s}: must supply size to ext_path, ie: ext_path=/f/e:64m (m|g|t|p supported)"
        ))
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("ext_path {s}: '{digits}' is not a number"))?;
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("ext_path {s}: too large"))?;
    Ok((PathBuf::from(file), bytes))
}

impl ServerConfig {
    /// Checks the flash tier's settings (memcached's checks where it has
    /// them).
    pub(super) fn validate_flash(&self) -> Result<(), ConfigError> {
        let f = &self.flash;
        if f.paths.is_empty() {
            return Ok(());
        }
        let bad = |m: String| Err(ConfigError::Flash(m));
        let page = f.page_size_mb << 20;
        for p in &f.paths {
            let (_, size) = parse_ext_path(p).map_err(ConfigError::Flash)?;
            if size < page {
                return bad(format!(
                    "ext_path {p}: smaller than one page (ext_page_size {} MB)",
                    f.page_size_mb
                ));
            }
        }
        if f.page_size_mb == 0 || f.page_size_mb > 2048 {
            return bad(format!("ext_page_size {}: 1 to 2048 MB", f.page_size_mb));
        }
        if f.wbuf_size_mb == 0 || f.wbuf_size_mb > f.page_size_mb {
            return bad(format!(
                "ext_wbuf_size {}: at least 1 MB and at most ext_page_size ({} MB)",
                f.wbuf_size_mb, f.page_size_mb
            ));
        }
        if self.item_size_max as u64 > f.wbuf_size_mb << 20 {
            return bad(format!(
                "-I (item_size_max: {}) cannot be larger than ext_wbuf_size: {}",
                self.item_size_max,
                f.wbuf_size_mb << 20
            ));
        }
        if f.threads == 0 {
            return bad("ext_threads 0: at least 1".into());
        }
        if !(0.0..=1.0).contains(&f.max_frag) {
            return bad(format!("ext_max_frag {}: 0 to 1", f.max_frag));
        }
        Ok(())
    }

    /// The flash tier these settings ask for, if any.
    pub fn flash_config(&self) -> Option<kura_store::FlashConfig> {
        let f = &self.flash;
        if f.paths.is_empty() {
            return None;
        }
        Some(kura_store::FlashConfig {
            files: f
                .paths
                .iter()
                .filter_map(|p| parse_ext_path(p).ok())
                .collect(),
            page_size: f.page_size_mb << 20,
            wbuf_size: usize::try_from(f.wbuf_size_mb << 20).unwrap_or(usize::MAX),
            item_size: f.item_size,
            item_age: (f.item_age != u32::MAX).then_some(f.item_age),
            compact_under: f.compact_under,
            drop_under: f.drop_under,
            max_frag: f.max_frag,
            drop_unread: f.drop_unread,
            recache_rate: f.recache_rate,
            threads: f.threads,
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ext_paths_parse_as_memcached_reads_them() {
        assert_eq!(
            parse_ext_path("/var/cache/ext:64m"),
            Ok((PathBuf::from("/var/cache/ext"), 64 << 20))
        );
        assert_eq!(
            parse_ext_path("/d/f:2G"),
            Ok((PathBuf::from("/d/f"), 2 << 30))
        );
        for bad in [
            "/d/f",
            "/d/f:64",
            "/d/f:64x",
            ":64m",
            "/d/f:xm",
            "/d/f:1m:compact",
        ] {
            assert!(parse_ext_path(bad).is_err(), "{bad}");
        }
        let e = parse_ext_path("/d/f:1g:lowttl").expect_err("a bucket");
        assert!(e.contains("one pool"), "{e}");
    }

    #[test]
    fn memcached_refuses_an_item_larger_than_a_write_buffer_and_so_does_kura() {
        let mut c = ServerConfig::default();
        c.flash.paths = vec!["/tmp/x:64m".into()];
        assert_eq!(c.validate_flash(), Ok(()));
        c.item_size_max = 8 << 20;
        c.memory_limit = 64;
        let e = c.validate_flash().expect_err("-I 8m, 4 MB buffers");
        assert!(
            e.to_string()
                .contains("cannot be larger than ext_wbuf_size"),
            "{e}"
        );
        c.item_size_max = 1 << 20;
        c.flash.threads = 0;
        let e = c.validate_flash().expect_err("no reader thread");
        assert!(e.to_string().contains("ext_threads"), "{e}");
        c.flash.threads = 1;
        c.flash.paths = vec!["/tmp/x:32m".into()];
        assert!(c.validate_flash().is_err(), "less than a 64 MB page");
    }
}
