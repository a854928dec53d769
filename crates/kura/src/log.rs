//! `kura log check DIR` and `kura log repair DIR`, in the spirit of
//! redis-check-aof.

use std::path::PathBuf;

use clap::Subcommand;
use kura_log::{check, check_dir, remove_partial_snapshots, repair, CheckReport, Damage, DirLock};

#[derive(Subcommand)]
pub enum LogCommand {
    /// Check every log segment and snapshot of a data directory: exit 0
    /// when sound, 1 for a torn tail (a crash mid-write, which `repair`
    /// cuts off), 2 for corruption, a damaged snapshot or a gap.
    Check {
        /// The log directory.
        dir: PathBuf,
    },
    /// Cut off a torn tail and remove damaged or half-written snapshots;
    /// with --truncate-corrupt, also drop everything from the first corrupt
    /// log record on (those records are lost).
    Repair {
        /// The log directory.
        dir: PathBuf,
        /// Also truncate at corruption, not only at a torn tail.
        #[arg(long)]
        truncate_corrupt: bool,
    },
}

fn summary(r: &CheckReport) {
    println!("segments: {}", r.segments);
    match (r.first_seq, r.last_seq) {
        (Some(a), Some(b)) => println!("records: {} (sequence {a} to {b})", r.records),
        _ => println!("records: 0"),
    }
    println!("valid bytes: {}", r.valid_bytes);
}

fn damage(d: &Damage) -> String {
    match d {
        Damage::TornTail { file, offset, len } => format!(
            "torn tail: {} from offset {offset} ({len} bytes of an unfinished record)",
            file.display()
        ),
        Damage::Corrupt {
            file,
            offset,
            reason,
        } => format!("CORRUPT: {} at offset {offset}: {reason}", file.display()),
    }
}

/// Runs the command; returns the exit status.
pub fn run(cmd: LogCommand) -> i32 {
    if let LogCommand::Check { dir } = &cmd {
        // Reading is safe beside a server; what it reads may be moving.
        if DirLock::is_held(dir) {
            println!(
                "note: {} is in use by a running server: its newest segment may be mid-write",
                dir.display()
            );
        }
    }
    match cmd {
        LogCommand::Check { dir } => match check_dir(&dir) {
            Err(e) => {
                eprintln!("kura: {e}");
                2
            }
            Ok(report) => {
                let r = &report.log;
                summary(r);
                let mut status = 0;
                for snap in &report.snapshots {
                    match &snap.check {
                        Ok(n) => println!(
                            "snapshot: {} (record {}, {n} entries)",
                            snap.file.path.display(),
                            snap.file.seq
                        ),
                        Err(why) => {
                            println!("DAMAGED snapshot: {}: {why}", snap.file.path.display());
                            status = 2;
                        }
                    }
                }
                if let Some(gap) = &report.gap {
                    println!("CANNOT RECOVER WHOLE: {gap}");
                    status = 2;
                }
                match &r.damage {
                    None if status == 0 => {
                        println!("OK");
                        0
                    }
                    None => {
                        println!(
                            "`kura log repair {}` removes damaged snapshots",
                            dir.display()
                        );
                        status
                    }
                    Some(d @ Damage::TornTail { .. }) => {
                        println!("{}", damage(d));
                        println!("run `kura log repair {}` to cut it off", dir.display());
                        status.max(1)
                    }
                    Some(d) => {
                        println!("{}", damage(d));
                        println!(
                            "`kura log repair --truncate-corrupt {}` drops everything from there on",
                            dir.display()
                        );
                        2
                    }
                }
            }
        },
        LogCommand::Repair {
            dir,
            truncate_corrupt,
        } => match DirLock::take(&dir).and_then(|lock| {
            remove_bad_snapshots(&dir)?;
            repair(&lock, truncate_corrupt)
        }) {
            Err(e) => {
                eprintln!("kura: {e}");
                2
            }
            Ok(before) => match &before.damage {
                None => {
                    summary(&before);
                    println!("OK: nothing to repair");
                    0
                }
                Some(d @ Damage::Corrupt { .. }) if !truncate_corrupt => {
                    println!("{}", damage(d));
                    println!("not repaired: pass --truncate-corrupt to drop the damaged records");
                    2
                }
                Some(d) => {
                    println!("repaired {}", damage(d));
                    match check(&dir) {
                        Ok(after) => {
                            summary(&after);
                            i32::from(after.damage.is_some()) * 2
                        }
                        Err(e) => {
                            eprintln!("kura: {e}");
                            2
                        }
                    }
                }
            },
        },
    }
}

/// Removes half-written and damaged snapshots (recovery skips them anyway).
fn remove_bad_snapshots(dir: &std::path::Path) -> Result<(), kura_log::LogError> {
    for p in remove_partial_snapshots(dir)? {
        println!("removed half-written snapshot {}", p.display());
    }
    for snap in check_dir(dir)?.snapshots {
        if let Err(why) = snap.check {
            std::fs::remove_file(&snap.file.path).map_err(|source| kura_log::LogError::Io {
                path: snap.file.path.clone(),
                source,
            })?;
            println!(
                "removed damaged snapshot {}: {why}",
                snap.file.path.display()
            );
        }
    }
    Ok(())
}
