//! Dalli's ring (the Ruby client, `Dalli::Ring`, 2.x and 3.x).
//!
//! A server named `host:port` with weight w among n servers of total weight
//! W gets `floor(n * 160 * w / W)` points (double-precision division); its
//! point i is the first four bytes, big-endian, of the SHA-1 digest of
//! `host:port:i`. A key hashes to the standard CRC-32 of its bytes and goes
//! to the last point at or before that hash, wrapping to the last point.
//! Dalli hashes the key it sends: with a namespace, `namespace:key`; a key
//! over 250 characters, its truncated digest form.

use sha1::{Digest, Sha1};

use crate::continuum::{Continuum, Point, Search};
use crate::server::Server;

/// Points per server with equal weights.
const POINTS_PER_SERVER: u64 = 160;

/// Dalli's point count for one server.
pub(crate) fn points_for(weight: u32, total: u64, servers: usize) -> u64 {
    let numerator = servers as u64 * POINTS_PER_SERVER * u64::from(weight);
    (numerator as f64 / total as f64).floor() as u64
}

/// The value of point `i` of the server named `name`.
pub(crate) fn point(name: &str, i: u64) -> u32 {
    let d = Sha1::digest(format!("{name}:{i}").as_bytes());
    u32::from_be_bytes([d[0], d[1], d[2], d[3]])
}

/// Dalli's continuum of `servers`.
pub(crate) fn continuum(servers: &[Server]) -> Continuum {
    let total: u64 = servers.iter().map(|s| u64::from(s.weight)).sum();
    let mut points = Vec::new();
    for (index, s) in servers.iter().enumerate() {
        // Dalli's name is always host:port, 11211 included.
        let name = format!("{}:{}", s.host, s.port);
        for i in 0..points_for(s.weight, total, servers.len()) {
            points.push(Point {
                value: point(&name, i),
                server: index as u32,
            });
        }
    }
    Continuum::new(points, Search::AtOrBefore)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_scale_with_weight() {
        assert_eq!(points_for(1, 3, 3), 160);
        assert_eq!(points_for(3, 5, 3), 288);
        assert_eq!(points_for(1, 5, 3), 96);
        assert_eq!(points_for(1, 3, 2), 106); // 320 / 3 = 106.67
    }

    #[test]
    fn a_point_is_the_head_of_a_sha1_digest() {
        // Values Ruby gives for Dalli's expression,
        // Integer("0x#{Digest::SHA1.hexdigest(name)[0..7]}").
        assert_eq!(point("localhost:11211", 0), 1_556_109_064);
        assert_eq!(point("127.0.0.1:11212", 159), 6_134_957);
    }
}
