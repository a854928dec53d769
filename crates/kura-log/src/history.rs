//! A data dir's replication history: which history of writes its log
//! belongs to. A random id is made when the directory is first used; a
//! replica takes its primary's; a promotion starts a new one and remembers
//! the previous id and the last record written under it, so that replicas
//! of the old primary can go on from the new one without starting over (as
//! Redis's PSYNC2 does). The file, `REPLICATION`, is small text, written
//! whole to a temporary name, synced and renamed.

use std::io::Read;
use std::path::Path;

use crate::{io_err, LogError};

/// The file's name in a data dir.
pub const HISTORY_FILE: &str = "REPLICATION";

/// Which history a log belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    /// 40 hex digits.
    pub id: String,
    /// The history this one continues, and its last record: records up to
    /// that number are the same in both.
    pub previous: Option<(String, u64)>,
}

impl History {
    /// A new history with a random id.
    ///
    /// # Errors
    /// The system's random source cannot be read.
    pub fn new() -> std::io::Result<History> {
        Ok(History {
            id: random_id()?,
            previous: None,
        })
    }

    /// The history after a promotion at record `last`: a new id that
    /// continues this one.
    ///
    /// # Errors
    /// The system's random source cannot be read.
    pub fn promoted(&self, last: u64) -> std::io::Result<History> {
        Ok(History {
            id: random_id()?,
            previous: Some((self.id.clone(), last)),
        })
    }

    /// Whether a log of history `id` that ends at record `last` is a
    /// prefix of this history (so it can go on from `last + 1`).
    pub fn continues(&self, id: &str, last: u64) -> bool {
        id == self.id
            || self
                .previous
                .as_ref()
                .is_some_and(|(prev, end)| prev == id && last <= *end)
    }

    fn encode(&self) -> String {
        let mut s = format!("id {}\n", self.id);
        if let Some((prev, end)) = &self.previous {
            s.push_str(&format!("previous {prev} {end}\n"));
        }
        s
    }

    fn decode(text: &str) -> Option<History> {
        let mut id = None;
        let mut previous = None;
        for line in text.lines() {
            let mut words = line.split(' ');
            match (words.next(), words.next(), words.next(), words.next()) {
                (Some("id"), Some(v), None, None) if valid_id(v) => id = Some(v.to_string()),
                (Some("previous"), Some(v), Some(end), None) if valid_id(v) => {
                    previous = Some((v.to_string(), end.parse().ok()?));
                }
                _ => return None,
            }
        }
        Some(History { id: id?, previous })
    }

    /// Reads the history of `dir`; `None` if it has none yet.
    ///
    /// # Errors
    /// I/O errors; a file that does not parse.
    pub fn load(dir: &Path) -> Result<Option<History>, LogError> {
        let path = dir.join(HISTORY_FILE);
        let mut text = String::new();
        match std::fs::File::open(&path) {
            Ok(mut f) => f.read_to_string(&mut text).map_err(io_err(&path))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        History::decode(&text).map(Some).ok_or_else(|| {
            io_err(&path)(std::io::Error::other(
                "not a replication history (want `id <40 hex digits>` and maybe `previous <id> <record>`)",
            ))
        })
    }

    /// The history of `dir`, made (and saved) if it has none.
    ///
    /// # Errors
    /// I/O errors.
    pub fn load_or_create(dir: &Path) -> Result<History, LogError> {
        if let Some(h) = History::load(dir)? {
            return Ok(h);
        }
        let h = History::new().map_err(io_err(dir))?;
        h.save(dir)?;
        Ok(h)
    }

    /// Saves this as the history of `dir`: whole or not at all.
    ///
    /// # Errors
    /// I/O errors.
    pub fn save(&self, dir: &Path) -> Result<(), LogError> {
        crate::write_whole(dir, HISTORY_FILE, &self.encode())
    }
}

fn valid_id(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn random_id() -> std::io::Result<String> {
    let mut bytes = [0u8; 20];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_is_made_once_and_read_back() {
        let dir = std::env::temp_dir().join(format!("kura-history-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(History::load(&dir).unwrap(), None);
        let h = History::load_or_create(&dir).unwrap();
        assert!(valid_id(&h.id));
        assert_eq!(History::load_or_create(&dir).unwrap(), h);
        let p = h.promoted(42).unwrap();
        assert_ne!(p.id, h.id);
        p.save(&dir).unwrap();
        assert_eq!(History::load(&dir).unwrap(), Some(p.clone()));
        std::fs::write(dir.join(HISTORY_FILE), "id nothex\n").unwrap();
        assert!(History::load(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_promoted_history_continues_the_old_one_up_to_where_it_changed() {
        let old = History::new().unwrap();
        let new = old.promoted(100).unwrap();
        assert!(new.continues(&new.id, 5000));
        assert!(new.continues(&old.id, 100));
        assert!(new.continues(&old.id, 7));
        // Records the old primary wrote after the switch are not ours.
        assert!(!new.continues(&old.id, 101));
        assert!(!new.continues(&History::new().unwrap().id, 1));
        assert!(!old.continues(&new.id, 1));
    }
}
