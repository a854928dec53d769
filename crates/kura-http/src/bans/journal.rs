//! The ban journal of a cache with a disk tier: `DIR/bans`, the bans the objects on disk must
//! still meet (`kept.rs`), one line each, appended before the ban is in force (a `write`: in
//! the kernel's page cache, so a SIGKILL keeps it), read back at start.
//!
//! ```text
//! kura-http bans 1
//! K <boot id>          the machine's boot (Linux's /proc/sys/kernel/random/boot_id)
//! F <floor>            objects older than this sequence are not served
//! B <seq> <soft 0|1> <added, Unix ms> <expression as JSON (`expr/persist.rs`)>
//! C                    a clean stop: the objects file and this one were synced
//! ```
//!
//! A journal that cannot be written is removed: the next start then finds objects without
//! their bans and empties the disk tier rather than serve them.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use super::kept::Kept;
use super::{Ban, Expr};

const FIRST_LINE: &str = "kura-http bans 1";

/// What a journal held.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Objects with an older ban sequence are not served.
    pub floor: u32,
    /// The bans, oldest first.
    pub bans: Vec<Ban>,
    /// The boot of the machine the journal was written in, if known.
    pub boot: Option<String>,
    /// Whether the run that wrote it stopped cleanly (its last line).
    pub clean: bool,
}

impl Loaded {
    /// The newest sequence given out before.
    pub fn head(&self) -> u32 {
        self.bans
            .last()
            .map_or(self.floor, |b| b.seq.max(self.floor))
    }

    /// Whether the objects written beside this journal can be trusted to be no newer than its
    /// bans: a clean stop synced both; after an unclean one (SIGKILL, a crash of the process)
    /// both are whole in the page cache as long as the machine has not restarted since.
    pub fn trusted(&self) -> bool {
        self.clean || (self.boot.is_some() && self.boot == boot_id())
    }
}

/// This machine's boot (`None` where the system does not tell it).
pub fn boot_id() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty() && !id.contains(char::is_whitespace)).then(|| id.to_owned())
}

/// Reads the journal at `path`: `Ok(None)` when there is none; an error when a line is not
/// one this version writes (the caller then cannot trust the objects on disk).
pub fn load(path: &Path) -> io::Result<Option<Loaded>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let bad = |n: usize| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: line {n} is not a ban journal's", path.display()),
        )
    };
    let mut loaded = Loaded::default();
    let mut kept = Kept::default();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line?;
        loaded.clean = false;
        if i == 0 {
            if line != FIRST_LINE {
                return Err(bad(1));
            }
        } else if line == "C" {
            loaded.clean = true;
        } else if let Some(boot) = line.strip_prefix("K ") {
            loaded.boot = Some(boot.to_owned());
        } else if let Some(floor) = line.strip_prefix("F ") {
            loaded.floor = floor.parse().map_err(|_| bad(i + 1))?;
            kept.raise_floor(loaded.floor);
        } else {
            kept.push(parse_ban(&line).ok_or_else(|| bad(i + 1))?.into());
        }
    }
    loaded.bans = kept.into_bans();
    Ok(Some(loaded))
}

fn parse_ban(line: &str) -> Option<Ban> {
    let mut parts = line.strip_prefix("B ")?.splitn(4, ' ');
    let seq = parts.next()?.parse().ok()?;
    let soft = match parts.next()? {
        "0" => false,
        "1" => true,
        _ => return None,
    };
    let millis: u64 = parts.next()?.parse().ok()?;
    let expr = Expr::from_json(&serde_json::from_str(parts.next()?).ok()?)?;
    Some(Ban {
        seq,
        expr,
        soft,
        added: UNIX_EPOCH.checked_add(Duration::from_millis(millis))?,
    })
}

/// The journal line of `ban`.
pub(super) fn ban_line(ban: &Ban) -> String {
    let millis = ban
        .added
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!(
        "B {} {} {millis} {}\n",
        ban.seq,
        u8::from(ban.soft),
        ban.expr.to_json()
    )
}

/// The journal being appended to.
#[derive(Debug)]
pub(super) struct Journal {
    path: PathBuf,
    /// `None` once a write failed (the file was removed).
    file: Option<File>,
    /// Lines appended since the file was last written whole.
    pub(super) lines: usize,
}

impl Journal {
    /// Writes a journal of `floor` and `bans` in place of the one at `path` (a new file
    /// renamed over it), and opens it for appending.
    pub(super) fn create<'b>(
        path: &Path,
        floor: u32,
        bans: impl Iterator<Item = &'b Ban>,
    ) -> io::Result<Journal> {
        Ok(Journal {
            path: path.to_owned(),
            file: Some(rewrite(path, floor, bans)?),
            lines: 0,
        })
    }

    /// Appends `line` (ending with a newline).
    pub(super) fn append(&mut self, line: &str) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        match file.write_all(line.as_bytes()) {
            Ok(()) => self.lines += 1,
            Err(error) => self.fail(&error),
        }
    }

    /// Writes the file again with only `floor` and `bans`.
    pub(super) fn compact<'b>(&mut self, floor: u32, bans: impl Iterator<Item = &'b Ban>) {
        if self.file.is_none() {
            return;
        }
        match rewrite(&self.path, floor, bans) {
            Ok(file) => {
                self.file = Some(file);
                self.lines = 0;
            }
            Err(error) => self.fail(&error),
        }
    }

    /// Marks a clean stop (the caller synced the objects first): the last line, synced.
    pub(super) fn close(&mut self) {
        let Some(file) = self.file.as_mut() else {
            return;
        };
        if let Err(error) = file.write_all(b"C\n").and_then(|()| file.sync_data()) {
            tracing::warn!("disk cache: ban journal {}: {error}", self.path.display());
        }
        self.file = None;
    }

    /// A ban could not be journalled: the journal goes, so that the next start does not
    /// serve objects from disk that it would not know to check against it.
    fn fail(&mut self, error: &io::Error) {
        self.file = None;
        let removed = std::fs::remove_file(&self.path);
        tracing::error!(
            "disk cache: ban journal {}: {error}; removed ({removed:?}): the disk tier will be \
             emptied at the next start",
            self.path.display()
        );
    }
}

fn rewrite<'b>(path: &Path, floor: u32, bans: impl Iterator<Item = &'b Ban>) -> io::Result<File> {
    let tmp = path.with_extension("new");
    let boot = boot_id().unwrap_or_else(|| "unknown".into());
    let mut text = format!("{FIRST_LINE}\nK {boot}\nF {floor}\n");
    for ban in bans {
        text.push_str(&ban_line(ban));
    }
    let mut file = File::create(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    OpenOptions::new().append(true).open(path)
}

#[cfg(test)]
mod tests;
