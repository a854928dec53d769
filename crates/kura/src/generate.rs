//! `kura generate`: the files a package installs beside the binary, made
//! from the command-line definitions themselves so they never drift: man
//! pages (`kura.1`, `kura-server.1`, `kura-proxy.1`, `kura-http.1`, ...)
//! and shell completions (bash, zsh, fish).

use std::path::{Path, PathBuf};

use clap::{CommandFactory, Subcommand};
use clap_complete::Shell;

#[derive(Subcommand)]
pub enum GenerateCommand {
    /// Write a man page for kura and for each subcommand into DIR.
    Man {
        /// The directory (created if missing).
        dir: PathBuf,
    },
    /// Write the completion script of each shell into DIR: kura.bash,
    /// _kura (zsh) and kura.fish.
    Completions {
        /// The directory (created if missing).
        dir: PathBuf,
    },
}

/// `kura generate ...` with the binary's own command definition.
///
/// # Errors
/// A file cannot be written.
pub fn run<C: CommandFactory>(cmd: &GenerateCommand) -> anyhow::Result<()> {
    match cmd {
        GenerateCommand::Man { dir } => man_pages(C::command(), dir),
        GenerateCommand::Completions { dir } => completions(C::command(), dir),
    }
}

fn create(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))
}

fn man_pages(cmd: clap::Command, dir: &Path) -> anyhow::Result<()> {
    create(dir)?;
    let mut cmd = cmd.disable_help_subcommand(true);
    // Built, so that global flags (--log-format) show on every page.
    cmd.build();
    write_page(&cmd, "kura", dir)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("kura-{}", sub.get_name());
        let sub = sub
            .clone()
            .display_name(name.clone())
            .bin_name(format!("kura {}", sub.get_name()));
        write_page(&sub, &name, dir)?;
    }
    Ok(())
}

fn write_page(cmd: &clap::Command, name: &str, dir: &Path) -> anyhow::Result<()> {
    let path = dir.join(format!("{name}.1"));
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    std::fs::write(&path, out).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

fn completions(mut cmd: clap::Command, dir: &Path) -> anyhow::Result<()> {
    create(dir)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cmd, "kura", dir)?;
    }
    Ok(())
}
