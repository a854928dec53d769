//! A data dir's key-hash seed: the seed of the hash that places keys in the store's shards.
//!
//! Each shard of a store has its own share of `-m`, and a store's hash is randomly seeded so
//! that nobody can choose keys that all land in one shard. A durable store that reloaded its
//! entries under a new seed would place them in other shards, and a full cache's entries do not
//! fit other shards' budgets: a restart evicted 4-6% of a full cache of 50 KB values. So the
//! seed is made once, with the directory, and kept here: a restart (with the same shard count)
//! puts every key back where it was. The file, `HASH_SEED`, is one line of text, written whole
//! to a temporary name, synced and renamed. It is as secret as the data beside it.

use std::io::Read;
use std::path::Path;

use crate::{io_err, LogError};

/// The file's name in a data dir.
pub const SEED_FILE: &str = "HASH_SEED";

/// Reads the seed of `dir`, or makes (and saves) one when it has none.
///
/// # Errors
/// I/O errors; a file that does not parse (delete it to make a new one: keys are then placed
/// anew and a full cache may not fit the same shards).
pub fn load_or_create_seed(dir: &Path) -> Result<u64, LogError> {
    let path = dir.join(SEED_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            return decode(&text).ok_or_else(|| {
                io_err(&path)(std::io::Error::other(
                    "not a hash seed (want `seed <16 hex digits>`); delete it to make a new one",
                ))
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(&path)(e)),
    }
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io_err(Path::new("/dev/urandom")))?;
    let seed = u64::from_le_bytes(bytes);
    crate::write_whole(dir, SEED_FILE, &format!("seed {seed:016x}\n"))?;
    Ok(seed)
}

fn decode(text: &str) -> Option<u64> {
    let hex = text.strip_prefix("seed ")?.strip_suffix('\n')?;
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_is_made_once_and_read_back() {
        let dir = std::env::temp_dir().join(format!("kura-seed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let seed = load_or_create_seed(&dir).unwrap();
        assert_eq!(load_or_create_seed(&dir).unwrap(), seed);
        let other = std::env::temp_dir().join(format!("kura-seed-{}-2", std::process::id()));
        let _ = std::fs::remove_dir_all(&other);
        assert_ne!(load_or_create_seed(&other).unwrap(), seed, "random per dir");
        for bad in [
            "",
            "seed 12\n",
            "seed zzzzzzzzzzzzzzzz\n",
            "seed 0123456789abcdef",
        ] {
            std::fs::write(dir.join(SEED_FILE), bad).unwrap();
            let err = load_or_create_seed(&dir).unwrap_err().to_string();
            assert!(err.contains("not a hash seed"), "{bad:?}: {err}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&other).unwrap();
    }
}
