//! What a running server reads again from its files: on SIGHUP (what
//! logrotate's `postrotate`, an init script's `reload` and systemd's
//! `ExecReload` send) the credentials (`-Y`, `--replica-auth-file`) and
//! every TLS file (`-o ssl_chain_cert`, `ssl_key`, `ssl_ca_cert`, the
//! replica's `--replica-tls-*`); on memcached's `refresh_certs` the TLS
//! files of the listeners.
//!
//! Each part fails safe: a file that cannot be read or used leaves that
//! part as it was (and says why), so a reload never takes a working server
//! into a broken one. Connections already open keep what they began with:
//! an authenticated client stays authenticated, a TLS session keeps its
//! certificate.

pub use kura_keyspace::Reloadable;

use crate::auth::{AuthFileError, Credentials};
use crate::shared::Shared;
use crate::tls::TlsError;

/// What one part of a reload came to.
#[derive(Debug)]
pub struct Reloaded {
    /// The part: `auth file`, `TLS certificates`, ...
    pub what: &'static str,
    /// `Err` with why the old one was kept.
    pub outcome: Result<(), ReloadError>,
}

/// Why a part of a reload kept what it had.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// `refresh_certs` on a server without TLS (memcached's wording).
    #[error("Error TLS not enabled")]
    TlsNotEnabled,
    /// The listeners' certificates (memcached's wording, on one line: it
    /// is `refresh_certs`'s reply).
    #[error("Error loading the certificates: {}", one_line(.0))]
    Certificates(TlsError),
    #[error(transparent)]
    Auth(#[from] AuthFileError),
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// An error's text on one line, whatever it holds.
fn one_line(e: &TlsError) -> String {
    e.to_string().replace(['\r', '\n'], " ")
}

/// Reads again every file the server was started with (SIGHUP); one entry
/// per part it has, each logged.
pub fn reload(shared: &Shared) -> Vec<Reloaded> {
    let mut done = Vec::new();
    let config = &shared.config;
    if let (Some(creds), Some(path)) = (&shared.credentials, config.credentials_file()) {
        done.push(Reloaded {
            what: "auth file",
            outcome: Credentials::load(&path)
                .map(|c| creds.replace(c))
                .map_err(ReloadError::from),
        });
    }
    if shared.tls.is_some() {
        done.push(Reloaded {
            what: "TLS certificates",
            outcome: refresh_certs(shared),
        });
    }
    let repl = &shared.keyspace.config().replication;
    if let (Some(login), Some(path)) = (&repl.login, &config.replica_auth_file) {
        done.push(Reloaded {
            what: "replica auth file",
            outcome: Credentials::load(path)
                .map(|c| login.replace(crate::server::replica_login(&c)))
                .map_err(ReloadError::from),
        });
    }
    let rt = &config.replica_tls;
    if let (Some(tls), Some(ca)) = (&repl.tls, &rt.ca) {
        let cert_key = rt.cert.as_deref().zip(rt.key.as_deref());
        done.push(Reloaded {
            what: "replica TLS files",
            outcome: crate::tls::replica_config(ca, cert_key)
                .map(|c| tls.replace(c))
                .map_err(ReloadError::from),
        });
    }
    for r in &done {
        match &r.outcome {
            Ok(()) => tracing::info!("reload: {} read again", r.what),
            Err(why) => tracing::error!("reload: kept the old {}: {why}", r.what),
        }
    }
    done
}

/// One line saying what a reload did (for the service manager's status).
pub fn summary(done: &[Reloaded]) -> String {
    if done.is_empty() {
        return "reloaded: no files to read".into();
    }
    let parts: Vec<String> = done
        .iter()
        .map(|r| match &r.outcome {
            Ok(()) => format!("{} read", r.what),
            Err(_) => format!("{} kept (see the log)", r.what),
        })
        .collect();
    format!("reloaded: {}", parts.join(", "))
}

/// Loads the listeners' TLS files again (`refresh_certs`, and SIGHUP).
///
/// # Errors
/// memcached's wording: "Error TLS not enabled" without `-Z`, else which
/// file could not be used and why; the old certificates stay in use.
pub fn refresh_certs(shared: &Shared) -> Result<(), ReloadError> {
    let Some(tls) = &shared.tls else {
        return Err(ReloadError::TlsNotEnabled);
    };
    tls.reload(&shared.config.tls, shared.store.now())
        .map_err(ReloadError::Certificates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_the_value_it_took() {
        let r = Reloadable::new(1);
        let before = r.current();
        r.replace(2);
        assert_eq!((*before, *r.current()), (1, 2));
    }
}
