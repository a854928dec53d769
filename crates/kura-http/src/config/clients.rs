//! Where clients come from when kura stands behind load balancers: `listen_proxy` (listeners
//! whose connections begin with a PROXY protocol header) and `trusted_proxies` (the balancers'
//! addresses: only they may send a PROXY header, and only their `X-Forwarded-For` names the
//! client).

use std::net::SocketAddr;

use toml::Spanned;

use super::file::Source;
use super::{Cidr, ConfigError};

/// `listen_proxy` and `trusted_proxies` as read and checked.
pub(super) fn clients(
    listen_proxy: Option<Spanned<Vec<SocketAddr>>>,
    trusted: Option<Vec<Spanned<String>>>,
    src: Source<'_>,
) -> Result<(Vec<SocketAddr>, Vec<Cidr>), ConfigError> {
    let mut nets = Vec::new();
    for entry in trusted.unwrap_or_default() {
        let net = Cidr::parse(entry.get_ref()).map_err(|e| {
            ConfigError::Invalid(format!(
                "{}trusted_proxies: {e}",
                src.at(Some(entry.span().start))
            ))
        })?;
        nets.push(net);
    }
    let Some(listen) = listen_proxy else {
        return Ok((Vec::new(), nets));
    };
    if !listen.get_ref().is_empty() && nets.is_empty() {
        return Err(ConfigError::Invalid(format!(
            "{}listen_proxy: list the load balancers' addresses in trusted_proxies (only they may send a PROXY header)",
            src.at(Some(listen.span().start))
        )));
    }
    Ok((listen.into_inner(), nets))
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const BACKEND: &str = "backend = \"http://127.0.0.1:1\"\n";

    #[test]
    fn proxy_listeners_need_trusted_balancers() {
        let config = Config::from_toml(&format!(
            "{BACKEND}listen_proxy = [\"127.0.0.1:0\"]\ntrusted_proxies = [\"10.0.0.0/8\", \"::1\"]\n"
        ))
        .unwrap();
        assert_eq!(config.listen_proxy.len(), 1);
        assert_eq!(config.trusted_proxies.len(), 2);
        crate::config::tests::assert_refused(
            BACKEND,
            &[
                (
                    "listen_proxy = [\"127.0.0.1:0\"]\n",
                    "line 2: listen_proxy: list the load balancers",
                ),
                (
                    "trusted_proxies = [\"10.0.0.0/33\"]\n",
                    "line 2: trusted_proxies",
                ),
            ],
        );
    }
}
