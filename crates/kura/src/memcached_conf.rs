//! `kura server --memcached-conf FILE`: Debian's `/etc/memcached.conf`
//! (memcached's flags, one per line, as Debian's `start-memcached` reads
//! them), so kura can take memcached's place with its configuration as it
//! is.
//!
//! The rules are start-memcached's: `#` starts a comment, blank lines are
//! skipped, `-d` and `-h` are ignored (a service manager runs the process),
//! a line not starting with `-` is a directive (`logfile PATH`, which kura
//! ignores: it logs to standard error, the journal under systemd), and any
//! other line is a flag and its value. The file's flags go where
//! `--memcached-conf` stands, so flags after it win, as in memcached a flag
//! given twice takes its last value.

use std::ffi::OsString;
use std::path::Path;

const FLAG: &str = "--memcached-conf";

/// `args` with `--memcached-conf FILE` (after `server`) replaced by the
/// file's flags; warnings for what was ignored.
///
/// # Errors
/// The file cannot be read, or the flag has no file.
pub fn expand(args: Vec<OsString>) -> anyhow::Result<(Vec<OsString>, Vec<String>)> {
    let mut out = Vec::with_capacity(args.len());
    let mut warnings = Vec::new();
    let mut args = args.into_iter();
    let mut in_server = false;
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if !in_server {
            in_server = text == "server";
            out.push(arg);
            continue;
        }
        let path = if text == FLAG {
            match args.next() {
                Some(p) => p,
                None => anyhow::bail!("{FLAG} needs a file"),
            }
        } else if let Some(p) = text.strip_prefix("--memcached-conf=") {
            OsString::from(p)
        } else {
            out.push(arg);
            continue;
        };
        let path = Path::new(&path);
        let file = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        out.extend(flags(&file, &mut warnings).into_iter().map(OsString::from));
    }
    Ok((out, warnings))
}

/// The flags of a memcached.conf text.
fn flags(text: &str, warnings: &mut Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.lines() {
        let line = uncommented(raw).trim();
        if line.is_empty() || line.starts_with("-d") || line.starts_with("-h") {
            continue;
        }
        let (first, rest) = match line.split_once(char::is_whitespace) {
            Some((a, b)) => (a, b.trim()),
            None => (line, ""),
        };
        if !first.starts_with('-') {
            warnings.push(format!(
                "memcached.conf: '{line}' ignored (kura logs to standard error, the journal under systemd)"
            ));
            continue;
        }
        out.push(first.to_string());
        if !rest.is_empty() {
            out.push(rest.to_string());
        }
    }
    out
}

/// The line up to its first `#` not escaped by a backslash.
fn uncommented(line: &str) -> &str {
    let b = line.as_bytes();
    (0..b.len())
        .find(|&i| b[i] == b'#' && (i == 0 || b[i - 1] != b'\\'))
        .map_or(line, |i| &line[..i])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debian 12's /etc/memcached.conf, as the memcached package ships it.
    const DEBIAN: &str = "# memcached default config file\n# 2003 - Jay Bonci <jaybonci@debian.org>\n\n# Run memcached as a daemon. This command is implied, and is not needed for the\n# daemon to run. See the README.Debian that comes with this package for more\n# information.\n-d\n\n# Log memcached's output to /var/log/memcached\nlogfile /var/log/memcached.log\n\n# memory\n-m 64\n\n# Default connection port is 11211\n-p 11211\n\n# Run the daemon as root. The start-memcached will default to running as root if no\n# -u command is present in this config file\n-u memcache\n\n# Specify which IP address to listen on.\n-l 127.0.0.1\n\n# Limit the number of simultaneous incoming connections.\n# -c 1024\n\n# Lock down all paged memory.\n# -k\n-P /var/run/memcached/memcached.pid\n";

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn debians_file_becomes_its_flags_in_place() {
        let (args, warnings) = {
            let path = std::env::temp_dir().join(format!("kura-mc-conf-{}", std::process::id()));
            std::fs::write(&path, DEBIAN).unwrap();
            let p = path.to_str().unwrap();
            let r = expand(os(&[
                "kura",
                "server",
                "-t",
                "2",
                "--memcached-conf",
                p,
                "-m",
                "128",
            ]));
            let _ = std::fs::remove_file(&path);
            r.unwrap()
        };
        assert_eq!(
            args,
            os(&[
                "kura",
                "server",
                "-t",
                "2",
                "-m",
                "64",
                "-p",
                "11211",
                "-u",
                "memcache",
                "-l",
                "127.0.0.1",
                "-P",
                "/var/run/memcached/memcached.pid",
                "-m",
                "128"
            ])
        );
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("logfile"));
    }

    #[test]
    fn other_commands_and_missing_files() {
        let args = os(&["kura", "proxy", "--memcached-conf", "x"]);
        assert_eq!(expand(args.clone()).unwrap().0, args);
        let e = expand(os(&[
            "kura",
            "server",
            "--memcached-conf=/nonexistent/memcached.conf",
        ]))
        .unwrap_err()
        .to_string();
        assert!(e.contains("/nonexistent/memcached.conf"), "{e}");
        assert!(expand(os(&["kura", "server", "--memcached-conf"])).is_err());
        assert_eq!(uncommented(r"-o a\#b # c"), r"-o a\#b ");
    }
}
