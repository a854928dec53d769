//! The connection settings: TLS for the proxy's clients (`[tls]`, kura
//! server's `-Z` and `-o ssl_*` settings under the same names), TLS and
//! a login to the backends (`[backend_tls]`, `[backend_auth]`), the
//! Unix socket's mode and `preconnect`. docs/proxy.md has each.

use std::collections::BTreeMap;
use std::path::PathBuf;

use kura_client::{Auth, ClientTlsConfig};
use kura_tls::{ClientTls, MinVersion, TlsConfig};
use serde::Deserialize;

use super::ConfigError;

/// `[backend_tls]`: TLS to every backend.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackendTlsFile {
    /// CA certificates a backend's certificate must chain to (PEM); the
    /// system's CA bundle without one.
    pub ca_cert: Option<PathBuf>,
    /// A client certificate to offer, and its key (PEM).
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// The name every backend's certificate must carry (SNI); each
    /// backend's host without one.
    pub server_name: Option<String>,
    /// Per backend (`"HOST:PORT" = "NAME"`), over `server_name`.
    pub server_names: BTreeMap<String, String>,
    pub min_version: MinVersion,
}

/// How the proxy logs in to its backends: memcached's ASCII
/// authentication (`memcached -Y`, kura server `-Y`), the only login after
/// which a server takes the meta commands the proxy sends. Binary SASL
/// (`-S`) is not offered: memcached and kura server then speak only the
/// binary protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    #[default]
    Ascii,
}

/// `[backend_auth]`: the login of every backend connection.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendAuthFile {
    #[serde(default)]
    pub mechanism: Mechanism,
    pub user: String,
    /// The password, or `password_file` (its first line).
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub password_file: Option<PathBuf>,
}

impl std::fmt::Debug for BackendAuthFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendAuthFile")
            .field("mechanism", &self.mechanism)
            .field("user", &self.user)
            .field("password_file", &self.password_file)
            .finish_non_exhaustive()
    }
}

/// The connection settings ready to use.
#[derive(Debug, Clone, Default)]
pub struct Net {
    /// TLS for clients (`[tls]` with `enabled = true`).
    pub tls: Option<TlsConfig>,
    /// TLS to backends, its files read, and the per-backend names.
    pub backend_tls: Option<(ClientTlsConfig, BTreeMap<String, String>)>,
    /// What `[backend_tls]` said, to tell whether a reload changed it.
    pub backend_tls_file: Option<BackendTlsFile>,
    pub backend_auth: Option<Auth>,
    /// The Unix socket's permissions (memcached's `-a`, default 0700).
    pub unix_mode: u32,
    /// Open every worker's backend connections at start and after a
    /// reload, not on first use.
    pub preconnect: bool,
}

fn err(s: String) -> ConfigError {
    ConfigError(s)
}

/// Parses memcached's `-a` mode: octal digits (`"0700"`, `"700"`).
pub fn unix_mode(s: &str) -> Result<u32, ConfigError> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| {
            err(format!(
                "unix_mode {s:?}: octal permissions such as \"0700\""
            ))
        })
}

impl Net {
    /// The settings of `file`, its files read ([`Net::build`]).
    ///
    /// # Errors
    /// As [`Net::build`].
    pub fn from_file(file: &super::FileConfig) -> Result<Net, ConfigError> {
        Net::build(
            file.tls.clone(),
            file.backend_tls.clone(),
            file.backend_auth.clone(),
            file.unix_mode.as_deref(),
            file.preconnect,
        )
    }

    /// Reads the files the settings name.
    ///
    /// # Errors
    /// A file that cannot be read or used, `[tls]` enabled without a
    /// certificate, a password and a password file both or neither.
    pub fn build(
        tls: Option<TlsConfig>,
        backend_tls: Option<BackendTlsFile>,
        backend_auth: Option<BackendAuthFile>,
        unix_mode_s: Option<&str>,
        preconnect: bool,
    ) -> Result<Net, ConfigError> {
        let tls = tls.filter(|t| t.enabled);
        if let Some(t) = &tls {
            // Read now so a bad file fails the configuration.
            kura_tls::server_config(t).map_err(|e| err(format!("[tls]: {e}")))?;
        }
        let loaded = match &backend_tls {
            Some(b) => {
                let c = ClientTls {
                    ca_cert: b.ca_cert.clone(),
                    cert: b.cert.clone(),
                    key: b.key.clone(),
                    server_name: b.server_name.clone(),
                    min_version: b.min_version,
                };
                let loaded = c.load().map_err(|e| err(format!("[backend_tls]: {e}")))?;
                Some((loaded, b.server_names.clone()))
            }
            None => None,
        };
        let auth = match backend_auth {
            None => None,
            Some(a) => {
                let password = match (a.password, &a.password_file) {
                    (Some(p), None) => p,
                    (None, Some(path)) => std::fs::read_to_string(path)
                        .map_err(|e| {
                            err(format!(
                                "[backend_auth] password_file {}: {e}",
                                path.display()
                            ))
                        })?
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                    _ => {
                        return Err(err(
                            "[backend_auth]: password or password_file (one of them)".into(),
                        ))
                    }
                };
                Some(match a.mechanism {
                    Mechanism::Ascii => Auth::Ascii {
                        user: a.user,
                        password,
                    },
                })
            }
        };
        Ok(Net {
            tls,
            backend_tls: loaded,
            backend_tls_file: backend_tls,
            backend_auth: auth,
            unix_mode: unix_mode_s.map(unix_mode).transpose()?.unwrap_or(0o700),
            preconnect,
        })
    }

    /// The settings of `addr`'s connections: TLS with its server name, and
    /// the login.
    pub fn apply(&self, addr: &str, c: &mut kura_client::Config) {
        c.tls = self.backend_tls.as_ref().map(|(tls, names)| {
            let mut tls = tls.clone();
            if let Some(name) = names.get(addr) {
                tls.server_name = Some(name.clone());
            }
            tls
        });
        c.auth = self.backend_auth.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Config, FileConfig, ProxyArgs};
    use super::*;

    fn build(text: &str) -> Result<Config, ConfigError> {
        let file: FileConfig = toml::from_str(&format!(
            "[pools.main]\nservers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\n{text}"
        ))
        .map_err(|e| ConfigError(e.to_string()))?;
        Config::build(&ProxyArgs::default(), file)
    }

    #[test]
    fn unix_modes_are_octal() {
        assert_eq!(unix_mode("0700").unwrap(), 0o700);
        assert_eq!(unix_mode("660").unwrap(), 0o660);
        assert!(unix_mode("0800").is_err());
        assert!(unix_mode("1777").is_err());
        assert_eq!(build("").unwrap().net.unix_mode, 0o700);
    }

    #[test]
    fn logins_and_their_passwords() {
        let c = build("[backend_auth]\nuser = \"u\"\npassword = \"p\"\n").unwrap();
        let mut client = kura_client::Config::default();
        c.net.apply("127.0.0.1:1", &mut client);
        assert_eq!(
            client.auth,
            Some(Auth::Ascii {
                user: "u".into(),
                password: "p".into()
            })
        );
        let e = build("[backend_auth]\nuser = \"u\"\n").unwrap_err();
        assert!(e.0.contains("password or password_file"), "{e}");
        let e = build("[backend_auth]\nuser = \"u\"\npassword_file = \"/nonexistent/pw\"\n")
            .unwrap_err();
        assert!(e.0.contains("/nonexistent/pw"), "{e}");
        // SASL leaves memcached and kura speaking binary only: refused.
        let e =
            build("[backend_auth]\nmechanism = \"sasl-plain\"\nuser = \"u\"\npassword = \"p\"\n")
                .unwrap_err();
        assert!(e.0.contains("ascii"), "{e}");
        let c = build("[backend_auth]\nuser = \"u\"\npassword = \"p\"\n").unwrap();
        // The password stays out of the configuration's Debug.
        assert!(!format!("{:?}", c.net).contains("\"p\""));
    }

    #[test]
    fn tls_files_are_read_when_the_configuration_is() {
        let e = build("[tls]\nenabled = true\nchain_cert = \"/nonexistent/c.pem\"\nkey = \"/nonexistent/k.pem\"\n")
            .unwrap_err();
        assert!(
            e.0.contains("[tls]") && e.0.contains("/nonexistent/c.pem"),
            "{e}"
        );
        // Not enabled: not read.
        assert!(build("[tls]\nchain_cert = \"/nonexistent/c.pem\"\n")
            .unwrap()
            .net
            .tls
            .is_none());
        let e = build("[backend_tls]\nca_cert = \"/nonexistent/ca.pem\"\n").unwrap_err();
        assert!(
            e.0.contains("[backend_tls]") && e.0.contains("ca_cert"),
            "{e}"
        );
        let e = build("[tls]\nenabled = true\nverify_mode = 7\n").unwrap_err();
        assert!(e.0.contains("ssl_verify_mode 7"), "{e}");
    }
}
