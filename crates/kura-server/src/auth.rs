//! Credentials for SASL PLAIN (`-S`) and ASCII authentication (`-Y`):
//! memcached's auth file, one `user:password` per line.
//!
//! Passwords are compared in constant time, every entry is checked whatever
//! the outcome of the earlier ones, and nothing here ever logs a password.

use std::path::{Path, PathBuf};

use subtle::ConstantTimeEq;

/// Failed attempts after which a connection is closed.
pub const MAX_AUTH_FAILURES: u32 = 3;

/// A loaded credentials file.
#[derive(Clone)]
pub struct Credentials {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the passwords.
        f.debug_struct("Credentials")
            .field("users", &self.entries.len())
            .finish()
    }
}

/// Why a credentials file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AuthFileError {
    #[error("could not read the auth file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("auth file {path}, line {line}: expected user:password")]
    Malformed { path: PathBuf, line: usize },
    #[error("auth file {path} has no user:password line")]
    Empty { path: PathBuf },
}

impl Credentials {
    /// Reads `path`.
    ///
    /// # Errors
    /// The file cannot be read, a line has no `:` or an empty user, or
    /// there is no entry at all.
    pub fn load(path: &Path) -> Result<Credentials, AuthFileError> {
        let text = std::fs::read(path).map_err(|source| AuthFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        Credentials::parse(&text).map_err(|e| match e {
            None => AuthFileError::Empty {
                path: path.to_owned(),
            },
            Some(line) => AuthFileError::Malformed {
                path: path.to_owned(),
                line,
            },
        })
    }

    /// Parses the file's contents; the error is the bad line's number, or
    /// `None` when there is no entry.
    fn parse(text: &[u8]) -> Result<Credentials, Option<usize>> {
        let mut entries = Vec::new();
        for (n, line) in text.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            let colon = line.iter().position(|&b| b == b':').ok_or(Some(n + 1))?;
            let (user, pass) = (&line[..colon], &line[colon + 1..]);
            if user.is_empty() {
                return Err(Some(n + 1));
            }
            entries.push((user.to_vec(), pass.to_vec()));
        }
        if entries.is_empty() {
            return Err(None);
        }
        Ok(Credentials { entries })
    }

    /// The file's first user and password (what a replica sends to its
    /// primary).
    pub fn first(&self) -> Option<(&[u8], &[u8])> {
        self.entries
            .first()
            .map(|(u, p)| (u.as_slice(), p.as_slice()))
    }

    /// True when `user` and `pass` match an entry.
    pub fn check(&self, user: &[u8], pass: &[u8]) -> bool {
        let mut ok = subtle::Choice::from(0);
        for (u, p) in &self.entries {
            // ct_eq is constant time for equal lengths; a length mismatch
            // answers early but tells only the length.
            ok |= u.as_slice().ct_eq(user) & p.as_slice().ct_eq(pass);
        }
        ok.into()
    }

    /// Checks a SASL PLAIN message, `authzid NUL authcid NUL password`;
    /// returns the user name on success.
    pub fn check_plain<'a>(&self, msg: &'a [u8]) -> Result<&'a [u8], PlainError> {
        let mut parts = msg.splitn(3, |&b| b == 0);
        let (Some(_authzid), Some(user), Some(pass)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(PlainError::Malformed);
        };
        if self.check(user, pass) {
            Ok(user)
        } else {
            Err(PlainError::Denied)
        }
    }
}

/// Why a PLAIN message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlainError {
    Malformed,
    Denied,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_memcached_auth_files() {
        let c = Credentials::parse(b"alice:s3cret\r\nbob:pw:with:colons\n\n").unwrap();
        assert!(c.check(b"alice", b"s3cret"));
        assert!(c.check(b"bob", b"pw:with:colons"));
        assert!(!c.check(b"alice", b"s3cre"));
        assert!(!c.check(b"alice", b"s3cretx"));
        assert!(!c.check(b"bob", b"s3cret"));
        assert!(!c.check(b"", b""));
    }

    #[test]
    fn rejects_bad_files() {
        assert_eq!(Credentials::parse(b"ok:1\nnocolon\n").err(), Some(Some(2)));
        assert_eq!(Credentials::parse(b":nouser\n").err(), Some(Some(1)));
        assert_eq!(Credentials::parse(b"\n\n").err(), Some(None));
    }

    #[test]
    fn plain_messages() {
        let c = Credentials::parse(b"u:p\n").unwrap();
        assert_eq!(c.check_plain(b"\0u\0p"), Ok(&b"u"[..]));
        assert_eq!(c.check_plain(b"authz\0u\0p"), Ok(&b"u"[..]));
        assert_eq!(c.check_plain(b"\0u\0q"), Err(PlainError::Denied));
        assert_eq!(c.check_plain(b"u p"), Err(PlainError::Malformed));
    }

    #[test]
    fn debug_hides_passwords() {
        let c = Credentials::parse(b"user:hunter2\n").unwrap();
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
