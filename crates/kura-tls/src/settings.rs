//! The `[tls]` settings: `-Z` and memcached's `-o ssl_*` options with
//! memcached's names and numbers (kura server's and kura proxy's listeners).

use std::path::PathBuf;

use serde::Deserialize;

/// memcached's `ssl_verify_mode`: whether clients must present a
/// certificate signed by `ssl_ca_cert`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "u8")]
pub enum VerifyMode {
    /// 0: no client certificate is asked for.
    #[default]
    None,
    /// 1: a certificate is asked for and verified if the client sends one.
    Request,
    /// 2: a verified certificate is required.
    Require,
    /// 3: memcached's "require, verify once"; kura treats it as 2 (rustls
    /// never renegotiates, so every handshake is the only one).
    Once,
}

/// An `ssl_verify_mode` or `ssl_min_version` number memcached does not
/// know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TlsSettingError {
    #[error(
        "ssl_verify_mode {0}: valid values are 0 (none), 1 (request), 2 (require) or 3 (once)"
    )]
    VerifyMode(u8),
    #[error("ssl_min_version {0}: valid values are 0 (tlsv1.0), 1 (tlsv1.1), 2 (tlsv1.2) or 3 (tlsv1.3)")]
    MinVersion(u8),
}

impl TryFrom<u8> for VerifyMode {
    type Error = TlsSettingError;
    fn try_from(n: u8) -> Result<Self, TlsSettingError> {
        match n {
            0 => Ok(VerifyMode::None),
            1 => Ok(VerifyMode::Request),
            2 => Ok(VerifyMode::Require),
            3 => Ok(VerifyMode::Once),
            other => Err(TlsSettingError::VerifyMode(other)),
        }
    }
}

impl VerifyMode {
    /// The `ssl_verify_mode` number this mode is given as.
    pub fn number(self) -> u8 {
        match self {
            VerifyMode::None => 0,
            VerifyMode::Request => 1,
            VerifyMode::Require => 2,
            VerifyMode::Once => 3,
        }
    }

    /// The number memcached's `stats settings` shows: OpenSSL's verify
    /// flags (PEER = 1, FAIL_IF_NO_PEER_CERT = 2, CLIENT_ONCE = 4).
    pub fn stats_value(self) -> u8 {
        match self {
            VerifyMode::None => 0,
            VerifyMode::Request => 1,
            VerifyMode::Require => 3,
            VerifyMode::Once => 7,
        }
    }
}

/// memcached's `ssl_min_version`: 0 TLS 1.0, 1 TLS 1.1, 2 TLS 1.2, 3 TLS 1.3.
/// rustls speaks only TLS 1.2 and 1.3, so 0 and 1 mean 1.2 in kura.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(try_from = "u8")]
pub enum MinVersion {
    #[default]
    Tls12,
    Tls13,
}

impl TryFrom<u8> for MinVersion {
    type Error = TlsSettingError;
    fn try_from(n: u8) -> Result<Self, TlsSettingError> {
        match n {
            0..=2 => Ok(MinVersion::Tls12),
            3 => Ok(MinVersion::Tls13),
            other => Err(TlsSettingError::MinVersion(other)),
        }
    }
}

impl MinVersion {
    /// The name `stats settings` shows, as memcached does.
    pub fn stats_name(self) -> &'static str {
        match self {
            MinVersion::Tls12 => "tlsv1.2",
            MinVersion::Tls13 => "tlsv1.3",
        }
    }
}

/// The `[tls]` section: `-Z` and memcached's `-o ssl_*` options.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// Serve TLS on every TCP listener not marked `notls:` (`-Z`).
    pub enabled: bool,
    /// The server's certificate chain, PEM, leaf first (`ssl_chain_cert`).
    pub chain_cert: Option<PathBuf>,
    /// The certificate's private key, PEM (`ssl_key`).
    pub key: Option<PathBuf>,
    /// CA certificates client certificates must chain to, PEM (`ssl_ca_cert`).
    pub ca_cert: Option<PathBuf>,
    /// Client certificate checking (`ssl_verify_mode`).
    pub verify_mode: VerifyMode,
    /// Oldest protocol version accepted (`ssl_min_version`).
    pub min_version: MinVersion,
    /// Seconds a client has to finish its handshake before it is dropped.
    pub handshake_timeout: u64,
}

/// Seconds a client has to finish the TLS handshake.
pub const HANDSHAKE_TIMEOUT_SECS: u64 = 10;

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig {
            enabled: false,
            chain_cert: None,
            key: None,
            ca_cert: None,
            verify_mode: VerifyMode::None,
            min_version: MinVersion::Tls12,
            handshake_timeout: HANDSHAKE_TIMEOUT_SECS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcached_numbers() {
        assert_eq!(VerifyMode::try_from(2), Ok(VerifyMode::Require));
        assert_eq!(VerifyMode::Once.stats_value(), 7);
        assert!(VerifyMode::try_from(4).is_err());
        assert_eq!(MinVersion::try_from(1), Ok(MinVersion::Tls12));
        assert_eq!(MinVersion::try_from(3), Ok(MinVersion::Tls13));
        assert!(MinVersion::try_from(9).is_err());
    }
}
