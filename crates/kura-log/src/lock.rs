//! One writer per data dir: the `LOCK` file, held (`flock`) by a running
//! server for its whole life and by any tool that changes the directory
//! (`kura log repair`), so that a repair never cuts the record a server is
//! writing. The holder's process id is written into the file, for the
//! message of whoever is refused.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::{io_err, LogError};

/// The lock file's name in a data dir.
pub const LOCK_FILE: &str = "LOCK";

/// The lock of a data dir, held until dropped.
#[derive(Debug)]
pub struct DirLock {
    dir: PathBuf,
    _file: File,
}

impl DirLock {
    /// Takes the lock of `dir` (creating the directory and the file).
    ///
    /// # Errors
    /// [`LogError::InUse`] when another process holds it; I/O errors.
    pub fn take(dir: &Path) -> Result<DirLock, LogError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let path = dir.join(LOCK_FILE);
        let mut file = File::options()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        if file.try_lock().is_err() {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            return Err(LogError::InUse {
                dir: dir.to_owned(),
                pid: holder.trim().parse().ok(),
            });
        }
        // Ours now: say who holds it.
        file.set_len(0).map_err(io_err(&path))?;
        file.rewind().map_err(io_err(&path))?;
        write!(file, "{}", std::process::id()).map_err(io_err(&path))?;
        Ok(DirLock {
            dir: dir.to_owned(),
            _file: file,
        })
    }

    /// Whether another process holds the lock of `dir` now.
    /// Only looks: changes nothing in `dir`.
    pub fn is_held(dir: &Path) -> bool {
        File::open(dir.join(LOCK_FILE)).is_ok_and(|f| f.try_lock_shared().is_err())
    }

    /// The directory locked.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = std::env::temp_dir().join(format!("kura-log-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let first = DirLock::take(&dir).unwrap();
        match DirLock::take(&dir) {
            Err(LogError::InUse { dir: d, pid }) => {
                assert_eq!(d, dir);
                assert_eq!(pid, Some(std::process::id()));
            }
            other => panic!("{other:?}"),
        }
        assert!(DirLock::is_held(&dir));
        drop(first);
        assert!(!DirLock::is_held(&dir));
        let again = DirLock::take(&dir).unwrap();
        assert_eq!(again.dir(), dir.as_path());
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
