//! The client behind trusted proxies (`trusted_proxies`): when a request comes from one of
//! them, its `X-Forwarded-For` is read from the right, each trusted address skipped, and the
//! first address that is not trusted is the client (nginx's `real_ip_recursive on`); when every
//! address is trusted, the leftmost is. An entry that is not an address ends the walk at the
//! last address read. A request from anyone else keeps its connection's address: a client
//! cannot name itself by sending `X-Forwarded-For`.
//!
//! The address kura judges (`Peer::addr`) is what the purge ACL and the access log see; what
//! kura appends to `X-Forwarded-For` towards the backend stays the connection's peer.

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;

use super::proxy::Peer;
use crate::config::Cidr;

/// `peer` with its address replaced by the client `headers`' `X-Forwarded-For` names, when
/// `peer` is one of `trusted`.
pub fn behind_proxies(mut peer: Peer, trusted: &[Cidr], headers: &HeaderMap) -> Peer {
    let Some(mut client) = peer.addr else {
        return peer;
    };
    let is_trusted = |ip: IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(client.ip()) {
        return peer;
    }
    // The lines are one list, the last line's last member nearest.
    let lines: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let members = lines.iter().rev().flat_map(|line| line.rsplit(','));
    for member in members {
        let Some(ip) = address(member.trim()) else {
            break;
        };
        client = SocketAddr::new(ip, 0);
        if !is_trusted(ip) {
            break;
        }
    }
    peer.addr = Some(client);
    peer
}

/// An `X-Forwarded-For` member: an address, with a port or an IPv6 address in brackets too.
fn address(member: &str) -> Option<IpAddr> {
    if let Ok(ip) = member.parse() {
        return Some(ip);
    }
    member.parse::<SocketAddr>().ok().map(|a| a.ip())
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn client(from: &str, xff: &[&'static str]) -> String {
        let trusted = [
            Cidr::parse("10.0.0.0/8").unwrap(),
            Cidr::parse("2001:db8::/32").unwrap(),
        ];
        let mut headers = HeaderMap::new();
        for line in xff {
            headers.append("x-forwarded-for", HeaderValue::from_static(line));
        }
        let peer = Peer {
            addr: Some(from.parse().unwrap()),
            forwarded: None,
            scheme: "http",
            interim: None,
        };
        let judged = behind_proxies(peer, &trusted, &headers);
        judged.addr.unwrap().ip().to_string()
    }

    #[test]
    fn the_client_is_the_first_untrusted_address_from_the_right() {
        assert_eq!(client("10.0.0.2:1", &["203.0.113.9"]), "203.0.113.9");
        assert_eq!(
            client("10.0.0.2:1", &["198.51.100.1, 203.0.113.9, 10.1.1.1"]),
            "203.0.113.9"
        );
        assert_eq!(
            client("10.0.0.2:1", &["198.51.100.1", "203.0.113.9"]),
            "203.0.113.9"
        );
        assert_eq!(client("10.0.0.2:1", &["10.9.9.9, 10.1.1.1"]), "10.9.9.9");
        assert_eq!(
            client("10.0.0.2:1", &["[2001:db8::5]:80, 203.0.113.9:4711"]),
            "203.0.113.9"
        );
        assert_eq!(client("[2001:db8::1]:1", &["192.0.2.1"]), "192.0.2.1");
        // Garbage ends the walk at the last address read.
        assert_eq!(
            client("10.0.0.2:1", &["203.0.113.9, unknown, 10.1.1.1"]),
            "10.1.1.1"
        );
        assert_eq!(client("10.0.0.2:1", &[]), "10.0.0.2");
        // From an untrusted peer, its own address, whatever it sends.
        assert_eq!(client("192.0.2.66:1", &["10.0.0.1"]), "192.0.2.66");
    }
}
