//! The disk tier's setting: `--disk-cache DIR:SIZE`, or `disk_cache = "DIR:SIZE"` in the file
//! (the flag wins). The directory must exist and be
//! writable; SIZE takes a K, M, G or T suffix (powers of 1024) and must hold at least one
//! page of the tier ([`DISK_PAGE_MIN`]) and at most [`DISK_MAX`]. `--disk-cache-all` (or
//! `disk_cache_all = true`) writes every object to the tier when it is stored, not only when
//! memory evicts it; it needs a disk tier.

use std::path::{Path, PathBuf};

use toml::Spanned;

use super::file::Source;
use super::ConfigError;

/// The smallest page of the disk tier, so the smallest SIZE.
pub const DISK_PAGE_MIN: u64 = 1 << 20;

/// The largest SIZE: 64 TiB.
pub const DISK_MAX: u64 = 64 << 40;

/// Where the disk tier keeps its files, and how large they may grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskCache {
    /// The directory (objects, the ban journal, a lock).
    pub dir: PathBuf,
    /// Bytes of the objects file.
    pub size: u64,
    /// Every object written to disk when stored (`disk_cache_all`), not only when evicted.
    pub all: bool,
}

/// Reads `DIR:SIZE` (the last colon separates them), checking SIZE but not the directory.
///
/// # Errors
/// A message naming what is wrong.
pub fn parse_disk_cache(text: &str) -> Result<DiskCache, String> {
    let Some((dir, size)) = text.rsplit_once(':') else {
        return Err(format!(
            "disk cache {text:?}: expected DIR:SIZE, such as /var/cache/kura:4G"
        ));
    };
    if dir.is_empty() {
        return Err(format!(
            "disk cache {text:?}: no directory before the colon"
        ));
    }
    let size = parse_size(size).ok_or_else(|| {
        format!(
            "disk cache {text:?}: size {size:?} is not a number of bytes \
             with an optional K, M, G or T suffix"
        )
    })?;
    if size == 0 {
        return Err(format!("disk cache {text:?}: size is 0"));
    }
    if size < DISK_PAGE_MIN {
        return Err(format!(
            "disk cache {text:?}: size {size} bytes is under one page of the disk tier (1M)"
        ));
    }
    if size > DISK_MAX {
        return Err(format!(
            "disk cache {text:?}: size is over the limit of 64T"
        ));
    }
    Ok(DiskCache {
        dir: PathBuf::from(dir),
        size,
        all: false,
    })
}

/// `512M`, `4G`, `4096`: bytes.
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, shift) = match text.char_indices().last()? {
        (i, 'k' | 'K') => (&text[..i], 10),
        (i, 'm' | 'M') => (&text[..i], 20),
        (i, 'g' | 'G') => (&text[..i], 30),
        (i, 't' | 'T') => (&text[..i], 40),
        _ => (text, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    n.checked_mul(1u64 << shift)
}

/// Whether `dir` is a directory this process can create files in.
fn check_dir(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(format!("disk cache: {shown} is not a directory")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("disk cache: directory {shown} does not exist"))
        }
        Err(e) => return Err(format!("disk cache: {shown}: {e}")),
    }
    let probe = dir.join(format!(".kura-http-probe-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(format!(
            "disk cache: directory {shown} is not writable: {e}"
        )),
    }
}

/// The disk tier of the flag (first) or the file, and `disk_cache_all` (the flag's, or the
/// file's).
pub(super) fn read(
    flag: Option<&String>,
    file: Option<&Spanned<String>>,
    (all_flag, all_file): (bool, Option<&Spanned<bool>>),
    src: Source<'_>,
) -> Result<Option<DiskCache>, ConfigError> {
    let all = all_flag || all_file.is_some_and(|v| *v.get_ref());
    let (text, at) = match (flag, file) {
        (Some(text), _) => (text.as_str(), None),
        (None, Some(value)) => (value.get_ref().as_str(), Some(value.span().start)),
        (None, None) if all => {
            let at = all_file.map(|v| v.span().start).filter(|_| !all_flag);
            return Err(ConfigError::Invalid(format!(
                "{}disk_cache_all: needs a disk tier (--disk-cache DIR:SIZE)",
                src.at(at)
            )));
        }
        (None, None) => return Ok(None),
    };
    let invalid = |m: String| ConfigError::Invalid(format!("{}{m}", src.at(at)));
    let disk = parse_disk_cache(text).map_err(invalid)?;
    check_dir(&disk.dir).map_err(invalid)?;
    Ok(Some(DiskCache { all, ..disk }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_their_errors() {
        let ok = parse_disk_cache("/var/cache/kura:4G").unwrap();
        assert_eq!(
            (ok.dir.to_str(), ok.size),
            (Some("/var/cache/kura"), 4 << 30)
        );
        assert_eq!(parse_disk_cache("/a:b:512m").unwrap().size, 512 << 20);
        assert_eq!(parse_disk_cache("/d:1048576").unwrap().size, 1 << 20);
        let err = |t| parse_disk_cache(t).unwrap_err();
        assert!(err("/d").contains("expected DIR:SIZE"), "{}", err("/d"));
        assert!(err(":4G").contains("no directory"));
        assert!(err("/d:0").contains("size is 0"));
        assert!(err("/d:0M").contains("size is 0"));
        assert!(err("/d:512K").contains("under one page"));
        assert!(err("/d:4X").contains("not a number"));
        assert!(err("/d:-1G").contains("not a number"));
        assert!(err("/d:65T").contains("over the limit"));
        assert!(err("/d:99999999999999999999").contains("not a number"));
    }

    #[test]
    fn the_directory_must_exist_and_be_writable() {
        let missing = std::env::temp_dir().join("kura-http-no-such-dir/inner");
        let e = check_dir(&missing).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        let file = std::env::temp_dir().join(format!("kura-http-file-{}", std::process::id()));
        std::fs::write(&file, b"").unwrap();
        assert!(check_dir(&file).unwrap_err().contains("not a directory"));
        let _ = std::fs::remove_file(&file);
        assert!(check_dir(&std::env::temp_dir()).is_ok());
    }
}
