//! `kura log check DIR` and `kura log repair DIR`, in the spirit of
//! redis-check-aof.

use std::path::PathBuf;

use clap::Subcommand;
use kura_log::{check, repair, CheckReport, Damage};

#[derive(Subcommand)]
pub enum LogCommand {
    /// Check every segment: exit 0 when sound, 1 for a torn tail (a crash
    /// mid-write, which `repair` cuts off), 2 for corruption.
    Check {
        /// The log directory.
        dir: PathBuf,
    },
    /// Cut off a torn tail; with --truncate-corrupt, also drop everything
    /// from the first corrupt record on (those records are lost).
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
    match cmd {
        LogCommand::Check { dir } => match check(&dir) {
            Err(e) => {
                eprintln!("kura: {e}");
                2
            }
            Ok(r) => {
                summary(&r);
                match &r.damage {
                    None => {
                        println!("OK");
                        0
                    }
                    Some(d @ Damage::TornTail { .. }) => {
                        println!("{}", damage(d));
                        println!("run `kura log repair {}` to cut it off", dir.display());
                        1
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
        } => match repair(&dir, truncate_corrupt) {
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
