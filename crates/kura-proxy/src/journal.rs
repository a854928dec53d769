//! The rejoin journal of one backend: the keys whose values the proxy was
//! asked to change while the backend could not be reached (or may not have
//! applied the change), which must be deleted on it before it serves reads
//! again. Bounded: past `max` keys it only remembers that it overflowed.
//!
//! On disk (with a journal directory) it is a file per backend of records
//! `u16 length (big-endian) + key`, appended as keys come (no fsync: it
//! survives a crash of the proxy, not of the machine); length 0xffff marks
//! an overflow. A replayed journal is rewritten with what is left; an
//! empty one is removed. A record cut short at the end (a crash inside a
//! write) is ignored.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::PathBuf;

const OVERFLOW: u16 = 0xffff;

/// One backend's journal.
pub struct Journal {
    keys: HashSet<Vec<u8>>,
    overflowed: bool,
    max: usize,
    path: Option<PathBuf>,
    file: Option<File>,
}

/// The file name for a backend address (anything but `[A-Za-z0-9.-]`
/// becomes `_`).
fn file_name(addr: &str) -> String {
    let safe: String = addr
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.journal")
}

impl Journal {
    /// The journal of `addr`, loaded from `dir` when given.
    ///
    /// # Errors
    /// The directory or an existing file cannot be read or opened.
    pub fn open(dir: Option<&std::path::Path>, addr: &str, max: usize) -> std::io::Result<Journal> {
        let mut j = Journal {
            keys: HashSet::new(),
            overflowed: false,
            max: max.max(1),
            path: None,
            file: None,
        };
        let Some(dir) = dir else { return Ok(j) };
        std::fs::create_dir_all(dir)?;
        let path = dir.join(file_name(addr));
        match File::open(&path) {
            Ok(mut f) => {
                let mut bytes = Vec::new();
                f.read_to_end(&mut bytes)?;
                let mut at = 0;
                while at + 2 <= bytes.len() {
                    let len = u16::from_be_bytes([bytes[at], bytes[at + 1]]);
                    at += 2;
                    if len == OVERFLOW {
                        j.overflowed = true;
                        continue;
                    }
                    let Some(key) = bytes.get(at..at + len as usize) else {
                        break;
                    };
                    at += len as usize;
                    if j.keys.len() < j.max {
                        j.keys.insert(key.to_vec());
                    } else {
                        j.overflowed = true;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        j.path = Some(path);
        Ok(j)
    }

    /// Whether anything must be done before the backend serves reads.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && !self.overflowed
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// Whether the file was removed by an operator (keep-out released).
    pub fn released(&self) -> bool {
        self.path.as_ref().is_some_and(|p| !p.exists())
    }

    fn append(&mut self, record: &[u8]) {
        let Some(path) = &self.path else { return };
        if self.file.is_none() {
            self.file = OpenOptions::new().create(true).append(true).open(path).ok();
        }
        let ok = self
            .file
            .as_mut()
            .is_some_and(|f| f.write_all(record).is_ok());
        if !ok {
            tracing::error!(path = %path.display(), "cannot write the rejoin journal");
            self.file = None;
        }
    }

    /// Records `key`.
    pub fn add(&mut self, key: &[u8]) {
        if self.overflowed || self.keys.contains(key) {
            return;
        }
        if self.keys.len() >= self.max || key.len() >= OVERFLOW as usize {
            return self.mark_overflow();
        }
        let mut rec = Vec::with_capacity(2 + key.len());
        rec.extend_from_slice(&(key.len() as u16).to_be_bytes());
        rec.extend_from_slice(key);
        self.append(&rec);
        self.keys.insert(key.to_vec());
    }

    /// Records that the backend may hold any old value (a missed flush, or
    /// more keys than the journal keeps).
    pub fn mark_overflow(&mut self) {
        if !self.overflowed {
            self.overflowed = true;
            self.append(&OVERFLOW.to_be_bytes());
        }
    }

    /// Up to `n` keys to delete next.
    pub fn batch(&self, n: usize) -> Vec<Vec<u8>> {
        self.keys.iter().take(n).cloned().collect()
    }

    /// Forgets keys deleted on the backend, and rewrites the file.
    pub fn done(&mut self, keys: &[Vec<u8>]) {
        for k in keys {
            self.keys.remove(k);
        }
        self.rewrite();
    }

    /// Forgets everything (after a flush, or an operator's release).
    pub fn clear(&mut self) {
        self.keys.clear();
        self.overflowed = false;
        self.rewrite();
    }

    fn rewrite(&mut self) {
        let Some(path) = self.path.clone() else {
            return;
        };
        self.file = None;
        if self.is_empty() {
            let _ = std::fs::remove_file(&path);
            return;
        }
        let tmp = path.with_extension("journal.tmp");
        let mut out = Vec::new();
        if self.overflowed {
            out.extend_from_slice(&OVERFLOW.to_be_bytes());
        }
        for k in &self.keys {
            out.extend_from_slice(&(k.len() as u16).to_be_bytes());
            out.extend_from_slice(k);
        }
        let written = std::fs::write(&tmp, &out).and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            tracing::error!(path = %path.display(), %e, "cannot rewrite the rejoin journal");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("kura-proxy-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn survives_a_reopen_and_a_torn_tail() {
        let d = dir("reopen");
        let mut j = Journal::open(Some(&d), "127.0.0.1:11211", 10).unwrap();
        j.add(b"a");
        j.add(b"b");
        j.add(b"a");
        drop(j);
        let path = d.join("127.0.0.1_11211.journal");
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(&[0, 9, b'x']).unwrap();
        let mut j = Journal::open(Some(&d), "127.0.0.1:11211", 10).unwrap();
        assert_eq!(j.len(), 2);
        j.done(&[b"a".to_vec()]);
        let mut j2 = Journal::open(Some(&d), "127.0.0.1:11211", 10).unwrap();
        assert_eq!(j2.batch(10), vec![b"b".to_vec()]);
        j2.done(&[b"b".to_vec()]);
        assert!(j2.is_empty());
        assert!(!path.exists());
        j.clear();
    }

    #[test]
    fn overflow_is_remembered() {
        let d = dir("overflow");
        let mut j = Journal::open(Some(&d), "h:1", 2).unwrap();
        for k in [&b"a"[..], b"b", b"c"] {
            j.add(k);
        }
        assert!(j.overflowed());
        let j = Journal::open(Some(&d), "h:1", 2).unwrap();
        assert!(j.overflowed() && !j.is_empty());
        let mut mem = Journal::open(None, "h:1", 1).unwrap();
        mem.add(b"k");
        assert!(!mem.is_empty());
        mem.clear();
        assert!(mem.is_empty());
    }
}
