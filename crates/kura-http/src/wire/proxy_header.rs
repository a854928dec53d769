//! The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and 2) that a load
//! balancer sends before a connection's first byte to say whom it comes from, without I/O:
//! [`parse`] reads it from the start of a buffer, or says it needs more bytes, or refuses it.
//! Only `std` is used, so the fuzz target includes this file as it is.
//!
//! - v1: `PROXY TCP4|TCP6 SRC DST SPORT DPORT\r\n` (at most 107 bytes) or `PROXY UNKNOWN...\r\n`
//!   (the connection's own address stands).
//! - v2: the 12-byte signature, version 2 with command `PROXY` (or `LOCAL`: the balancer's own
//!   health check, the connection's address stands), family TCP or UDP over IPv4 or IPv6 (or
//!   `UNSPEC`), the addresses, then TLVs, which are skipped. A header longer than
//!   [`MAX_V2`] bytes is refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// v2's signature.
pub const SIGNATURE_V2: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The longest v1 header (its specification's limit).
pub const MAX_V1: usize = 107;
/// The longest v2 header taken (16 bytes and addresses and TLVs): real balancers send a few
/// dozen bytes of TLVs.
pub const MAX_V2: usize = 4096;

/// What the start of a connection holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parsed {
    /// Not a whole header yet.
    Partial,
    /// A header of `len` bytes; `source`: the client it names (`None`: `LOCAL` or `UNKNOWN`,
    /// the connection's own address stands).
    Complete {
        /// Bytes of the header.
        len: usize,
        /// The client's address.
        source: Option<SocketAddr>,
    },
    /// Not a PROXY header, or a broken one: the reason.
    Refused(&'static str),
}

/// Reads a PROXY header (v1 or v2) at the start of `input`.
pub fn parse(input: &[u8]) -> Parsed {
    let v2_prefix = input.len().min(SIGNATURE_V2.len());
    if input[..v2_prefix] == SIGNATURE_V2[..v2_prefix] {
        return if input.len() < 16 {
            Parsed::Partial
        } else {
            parse_v2(input)
        };
    }
    let v1_prefix = input.len().min(6);
    if input[..v1_prefix] == b"PROXY "[..v1_prefix] {
        return parse_v1(input);
    }
    Parsed::Refused("no PROXY protocol header (v1 or v2) at the start of the connection")
}

fn parse_v1(input: &[u8]) -> Parsed {
    let Some(end) = input.iter().take(MAX_V1).position(|&b| b == b'\n') else {
        return if input.len() >= MAX_V1 {
            Parsed::Refused("PROXY v1 header longer than 107 bytes")
        } else {
            Parsed::Partial
        };
    };
    if end == 0 || input[end - 1] != b'\r' {
        return Parsed::Refused("PROXY v1 header not ended by CRLF");
    }
    let Ok(line) = std::str::from_utf8(&input[..end - 1]) else {
        return Parsed::Refused("PROXY v1 header not ASCII");
    };
    let mut words = line.split(' ');
    let (_, family) = (words.next(), words.next());
    let len = end + 1;
    match family {
        Some("UNKNOWN") => Parsed::Complete { len, source: None },
        Some(family @ ("TCP4" | "TCP6")) => {
            let fields: Vec<&str> = words.collect();
            let [src, dst, sport, dport] = fields[..] else {
                return Parsed::Refused("PROXY v1 header: expected SRC DST SPORT DPORT");
            };
            let v4 = family == "TCP4";
            let address = |text: &str| -> Option<IpAddr> {
                if v4 {
                    text.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
                } else {
                    text.parse::<Ipv6Addr>().ok().map(IpAddr::V6)
                }
            };
            // A port is 0-65535 in decimal, without a sign or leading zeros.
            let port = |text: &str| -> Option<u16> {
                let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
                let canonical = text == "0" || !text.starts_with('0');
                (digits && canonical).then(|| text.parse().ok()).flatten()
            };
            match (address(src), address(dst), port(sport), port(dport)) {
                (Some(ip), Some(_), Some(port), Some(_)) => Parsed::Complete {
                    len,
                    source: Some(SocketAddr::new(ip, port)),
                },
                _ => Parsed::Refused("PROXY v1 header: a bad address or port"),
            }
        }
        _ => Parsed::Refused("PROXY v1 header: the family is not TCP4, TCP6 or UNKNOWN"),
    }
}

fn parse_v2(input: &[u8]) -> Parsed {
    let version_command = input[12];
    let family = input[13];
    let length = usize::from(u16::from_be_bytes([input[14], input[15]]));
    let len = 16 + length;
    if version_command >> 4 != 2 {
        return Parsed::Refused("PROXY v2 header: not version 2");
    }
    let local = match version_command & 0x0f {
        0 => true,
        1 => false,
        _ => return Parsed::Refused("PROXY v2 header: the command is not LOCAL or PROXY"),
    };
    if len > MAX_V2 {
        return Parsed::Refused("PROXY v2 header longer than 4096 bytes");
    }
    if input.len() < len {
        return Parsed::Partial;
    }
    let body = &input[16..len];
    let source = match family >> 4 {
        // AF_UNSPEC: nothing to say (the addresses are ignored).
        0 => None,
        1 if body.len() >= 12 => {
            let ip = Ipv4Addr::new(body[0], body[1], body[2], body[3]);
            Some(SocketAddr::new(
                IpAddr::V4(ip),
                u16::from_be_bytes([body[8], body[9]]),
            ))
        }
        2 if body.len() >= 36 => {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(&body[..16]);
            Some(SocketAddr::new(
                IpAddr::V6(Ipv6Addr::from(octets)),
                u16::from_be_bytes([body[32], body[33]]),
            ))
        }
        // AF_UNIX: no IP address to give.
        3 => None,
        1 | 2 => return Parsed::Refused("PROXY v2 header: addresses shorter than the family's"),
        _ => return Parsed::Refused("PROXY v2 header: an unknown address family"),
    };
    // Transport: UNSPEC, STREAM or DGRAM.
    if family & 0x0f > 2 {
        return Parsed::Refused("PROXY v2 header: an unknown transport");
    }
    Parsed::Complete {
        len,
        source: if local { None } else { source },
    }
}

#[cfg(test)]
mod tests;
