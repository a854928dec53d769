//! Weighted ketama as libmemcached (`MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED`:
//! pylibmc's `ketama_weighted`, PHP memcached's libketama compatibility)
//! and twemproxy (`distribution: ketama`) build it.
//!
//! Each server gets `floor(weight / total * 160 / 4 * servers) * 4` points,
//! computed in single-precision floats as both do (so with equal weights,
//! 160 each). Its points come four at a time from the MD5 digest of
//! `NAME-i` for i = 0, 1, ..., each digest read as four little-endian
//! words. NAME is the host when the port is 11211 and `host:port`
//! otherwise; twemproxy hashes a server's node name instead when it has
//! one. libmemcached hashes a key with the first word of its MD5 digest,
//! twemproxy with its configured hash; both take the first point at or
//! after the key's hash.

use crate::continuum::{Continuum, Point, Search};
use crate::hash::md5;
use crate::server::{Server, DEFAULT_PORT};

/// Points per server with equal weights.
const POINTS_PER_SERVER: f32 = 160.0;
/// Points per MD5 digest.
const POINTS_PER_HASH: u32 = 4;

/// The number of points of a server of `weight` among `servers` servers
/// whose weights add up to `total`, with the float arithmetic of
/// libmemcached and twemproxy (the tiny addend is theirs too).
pub(crate) fn points_for(weight: u32, total: u64, servers: usize) -> u32 {
    let pct = weight as f32 / total as f32;
    let quads =
        (pct * POINTS_PER_SERVER / POINTS_PER_HASH as f32 * servers as f32 + 1e-10_f32).floor();
    quads as u32 * POINTS_PER_HASH
}

/// The text libmemcached hashes for a server's points (before `-i`).
pub(crate) fn libmemcached_name(s: &Server) -> String {
    if s.port == DEFAULT_PORT {
        s.host.clone()
    } else {
        format!("{}:{}", s.host, s.port)
    }
}

/// The text twemproxy hashes: the node name, else as libmemcached.
pub(crate) fn twemproxy_name(s: &Server) -> String {
    s.name.clone().unwrap_or_else(|| libmemcached_name(s))
}

/// The continuum of `servers`, each hashed under `name(server)`.
pub(crate) fn continuum(servers: &[Server], name: impl Fn(&Server) -> String) -> Continuum {
    let total: u64 = servers.iter().map(|s| u64::from(s.weight)).sum();
    let mut points = Vec::new();
    for (index, s) in servers.iter().enumerate() {
        let base = name(s);
        for i in 0..points_for(s.weight, total, servers.len()) / POINTS_PER_HASH {
            for value in md5::words(format!("{base}-{i}").as_bytes()) {
                points.push(Point {
                    value,
                    server: index as u32,
                });
            }
        }
    }
    Continuum::new(points, Search::AtOrAfter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_weights_give_160_points_each() {
        for n in 1..=20 {
            assert_eq!(points_for(1, n as u64, n), 160, "{n} servers");
            assert_eq!(points_for(7, 7 * n as u64, n), 160, "{n} servers of 7");
        }
    }

    #[test]
    fn weights_scale_points_in_float_arithmetic() {
        // 3:1:1 => 3/5 * 40 * 3 = 72.0000x and 1/5 * 120 = 24.0000x.
        assert_eq!(points_for(3, 5, 3), 288);
        assert_eq!(points_for(1, 5, 3), 96);
        // A share that is not a multiple of 4 points rounds down.
        assert_eq!(points_for(1, 3, 2), 104); // 1/3 * 80 = 26.67
        assert_eq!(points_for(2, 3, 2), 212); // 2/3 * 80 = 53.33
                                              // A server with a tiny share may get no points at all.
        assert_eq!(points_for(1, 1000, 2), 0);
    }

    #[test]
    fn names_leave_out_the_default_port() {
        let a = Server::new("10.0.0.1", 11211);
        let b = Server::new("10.0.0.1", 11212);
        assert_eq!(libmemcached_name(&a), "10.0.0.1");
        assert_eq!(libmemcached_name(&b), "10.0.0.1:11212");
        assert_eq!(twemproxy_name(&b), "10.0.0.1:11212");
        assert_eq!(twemproxy_name(&b.with_name("server1")), "server1");
    }

    #[test]
    fn a_continuum_has_the_points_of_every_server() {
        let servers = [
            Server::new("a", 11211).with_weight(3),
            Server::new("b", 11211),
            Server::new("c", 11211),
        ];
        let c = continuum(&servers, libmemcached_name);
        assert_eq!(c.points_per_server(3), [288, 96, 96]);
    }
}
