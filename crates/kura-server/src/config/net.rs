//! The network's section of the settings: listeners, authentication and
//! TLS.

use std::path::PathBuf;

use super::{ConfigError, Protocol, ServerConfig};
use crate::tls::VerifyMode;

impl ServerConfig {
    /// Checks the listeners, authentication and TLS.
    pub(super) fn validate_net(&self) -> Result<(), ConfigError> {
        if self.listen.is_empty() && self.unix_socket.is_none() {
            return Err(ConfigError::NoListener);
        }
        if self.sasl && self.protocol == Protocol::Ascii {
            return Err(ConfigError::SaslWithAscii);
        }
        if !self.sasl && self.auth_file.is_some() && self.protocol == Protocol::Binary {
            return Err(ConfigError::AsciiAuthWithBinary);
        }
        if self.sasl && self.credentials_file().is_none() {
            return Err(ConfigError::SaslWithoutCredentials);
        }
        if !self.tcp && !self.udp() && self.unix_socket.is_none() {
            return Err(ConfigError::NothingToListenOn);
        }
        if self.udp() && (self.sasl || self.auth_file.is_some()) {
            return Err(ConfigError::UdpWithAuth);
        }
        let tls = &self.tls;
        if tls.enabled && (tls.chain_cert.is_none() || tls.key.is_none()) {
            return Err(ConfigError::TlsWithoutCert);
        }
        if tls.enabled && tls.verify_mode != VerifyMode::None && tls.ca_cert.is_none() {
            return Err(ConfigError::VerifyWithoutCa(tls.verify_mode.number()));
        }
        Ok(())
    }

    /// The protocols connections may speak once authentication is taken
    /// into account: SASL makes the server binary-only and ASCII
    /// authentication ASCII-only, as in memcached.
    pub fn effective_protocol(&self) -> Protocol {
        if self.sasl {
            Protocol::Binary
        } else if self.auth_file.is_some() {
            Protocol::Ascii
        } else {
            self.protocol
        }
    }

    /// Whether UDP is on (`-U` with a port, or `-U -1`).
    pub fn udp(&self) -> bool {
        self.udp_port != 0 || self.udp_free
    }

    /// Where the credentials come from: `-Y FILE`, or for SASL memcached's
    /// `MEMCACHED_SASL_PWDB` environment variable.
    pub fn credentials_file(&self) -> Option<PathBuf> {
        self.auth_file.clone().or_else(|| {
            self.sasl
                .then(|| std::env::var_os("MEMCACHED_SASL_PWDB").map(PathBuf::from))
                .flatten()
        })
    }
}
