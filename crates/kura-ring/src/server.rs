//! A server of a ring: host, port, weight and an optional node name, and
//! its text form `HOST[:PORT[:WEIGHT]][ NAME]` (twemproxy's `servers:`
//! syntax; an IPv6 address in brackets).

use std::fmt;
use std::str::FromStr;

/// memcached's port; libmemcached and twemproxy leave it out of the names
/// they hash.
pub const DEFAULT_PORT: u16 = 11211;

/// One server of a ring.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Server {
    /// The host exactly as the client is configured with it (a hostname or
    /// an address): the rings hash this text, not what it resolves to.
    pub host: String,
    pub port: u16,
    /// Relative share of the keys (1 by default).
    pub weight: u32,
    /// twemproxy's node name, hashed instead of the address when given.
    pub name: Option<String>,
}

impl Server {
    /// A server of weight 1 without a name.
    pub fn new(host: impl Into<String>, port: u16) -> Server {
        Server {
            host: host.into(),
            port,
            weight: 1,
            name: None,
        }
    }

    /// The same server with another weight.
    pub fn with_weight(mut self, weight: u32) -> Server {
        self.weight = weight;
        self
    }

    /// The same server with a node name.
    pub fn with_name(mut self, name: impl Into<String>) -> Server {
        self.name = Some(name.into());
        self
    }

    /// `host:port`, the host in brackets when it is an IPv6 address.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// `host:port`, then ` name` when the server has one.
impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.address())?;
        if let Some(name) = &self.name {
            write!(f, " {name}")?;
        }
        Ok(())
    }
}

/// Why a server's text form was not understood.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("bad server {text:?}: {why} (expected HOST[:PORT[:WEIGHT]][ NAME])")]
pub struct ParseServerError {
    text: String,
    why: &'static str,
}

impl FromStr for Server {
    type Err = ParseServerError;

    /// Parses `HOST[:PORT[:WEIGHT]][ NAME]`: port 11211 and weight 1 when
    /// left out; `[::1]:11211:2` for IPv6.
    fn from_str(text: &str) -> Result<Server, ParseServerError> {
        let bad = |why| ParseServerError {
            text: text.to_string(),
            why,
        };
        let text_trimmed = text.trim();
        let (addr, name) = match text_trimmed.split_once(char::is_whitespace) {
            Some((addr, name)) => (addr, Some(name.trim())),
            None => (text_trimmed, None),
        };
        let (host, rest) = if let Some(inner) = addr.strip_prefix('[') {
            let (host, rest) = inner.split_once(']').ok_or_else(|| bad("no closing ]"))?;
            let rest = match rest {
                "" => None,
                r => Some(r.strip_prefix(':').ok_or_else(|| bad("junk after ]"))?),
            };
            (host, rest)
        } else {
            match addr.split_once(':') {
                Some((host, rest)) => (host, Some(rest)),
                None => (addr, None),
            }
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        let mut fields = rest.map(|r| r.split(':')).into_iter().flatten();
        let port = match fields.next() {
            Some(p) => p.parse::<u16>().map_err(|_| bad("bad port"))?,
            None => DEFAULT_PORT,
        };
        let weight = match fields.next() {
            Some(w) => w.parse::<u32>().map_err(|_| bad("bad weight"))?,
            None => 1,
        };
        if fields.next().is_some() {
            return Err(bad("too many fields (an IPv6 address goes in brackets)"));
        }
        Ok(Server {
            host: host.to_string(),
            port,
            weight,
            name: name.filter(|n| !n.is_empty()).map(str::to_string),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Server {
        s.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn defaults_port_and_weight() {
        assert_eq!(parse("cache1"), Server::new("cache1", 11211));
        assert_eq!(parse("10.0.0.1:11212"), Server::new("10.0.0.1", 11212));
        assert_eq!(
            parse("10.0.0.1:11211:3"),
            Server::new("10.0.0.1", 11211).with_weight(3)
        );
    }

    #[test]
    fn takes_a_name_after_a_space() {
        let s = parse("127.0.0.1:11212:1 server1");
        assert_eq!(s, Server::new("127.0.0.1", 11212).with_name("server1"));
        assert_eq!(s.to_string(), "127.0.0.1:11212 server1");
    }

    #[test]
    fn reads_ipv6_in_brackets() {
        let s = parse("[::1]:22122:3");
        assert_eq!(s, Server::new("::1", 22122).with_weight(3));
        assert_eq!(s.address(), "[::1]:22122");
        assert_eq!(parse("[::1]"), Server::new("::1", 11211));
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "",
            ":11211",
            "h:port",
            "h:70000",
            "h:1:w",
            "h:1:2:3",
            "::1:11211",
            "[::1",
            "[::1]x",
        ] {
            assert!(bad.parse::<Server>().is_err(), "{bad:?} parsed");
        }
    }
}
