//! The director of a pool: the order in which its servers are tried for one request. Sick
//! servers are left out (all of them sick: every server is tried, in the policy's order, since
//! the request has no other chance); the caller takes the first with room
//! (`max_connections`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use http::header::COOKIE;
use http::HeaderMap;
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::server::Server;
use crate::config::{HashKey, Policy};

/// Which key a hash director uses for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    /// The configured one (a header or cookie: stickiness): for requests whose answer goes
    /// to their client only (passes, pipes).
    Client,
    /// The URL, whatever is configured: for fetches whose answer may be stored and served to
    /// other clients, so that no client chooses which server fills a shared object.
    Shared,
}

/// A pool's policy and its state.
pub struct Director {
    policy: Policy,
    next: AtomicUsize,
    rng: Mutex<SmallRng>,
}

impl Director {
    /// A director with `policy`; `seed` makes the random policy's choices reproducible.
    pub fn new(policy: Policy, seed: Option<u64>) -> Director {
        let rng = match seed {
            Some(seed) => SmallRng::seed_from_u64(seed),
            None => SmallRng::from_entropy(),
        };
        Director {
            policy,
            next: AtomicUsize::new(0),
            rng: Mutex::new(rng),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The key of a request with `path` (and query) and `headers` for a hash director, `None`
    /// for the other policies.
    pub fn key(&self, path: &str, headers: &HeaderMap, pick: Pick) -> Option<u64> {
        let Policy::Hash(key) = &self.policy else {
            return None;
        };
        let by_client = match (key, pick) {
            (_, Pick::Shared) | (HashKey::Url, _) => None,
            (HashKey::Header(name), Pick::Client) => {
                headers.get(name).map(|v| hash_bytes(v.as_bytes()))
            }
            (HashKey::Cookie(name), Pick::Client) => cookie(headers, name).map(hash_bytes),
        };
        Some(by_client.unwrap_or_else(|| hash_bytes(path.as_bytes())))
    }

    /// The servers to try, best first, for a request of `key` (from [`Director::key`]).
    pub fn order(&self, servers: &[Arc<Server>], key: Option<u64>) -> Vec<usize> {
        let mut candidates: Vec<usize> = (0..servers.len())
            .filter(|&i| servers[i].health.is_healthy())
            .collect();
        if candidates.is_empty() {
            candidates = (0..servers.len()).collect();
        }
        match &self.policy {
            Policy::Fallback => {}
            Policy::RoundRobin => {
                let start = self.next.fetch_add(1, Ordering::Relaxed) % candidates.len();
                candidates.rotate_left(start);
            }
            Policy::Random => {
                let total: u64 = candidates
                    .iter()
                    .map(|&i| u64::from(servers[i].weight))
                    .sum();
                if total > 0 {
                    let mut draw = self.rng.lock().gen_range(0..total);
                    let chosen = candidates
                        .iter()
                        .position(|&i| {
                            let weight = u64::from(servers[i].weight);
                            let here = draw < weight;
                            draw = draw.saturating_sub(weight);
                            here
                        })
                        .unwrap_or(0);
                    let first = candidates.remove(chosen);
                    // The others by weight, the spares (weight 0) last.
                    candidates.sort_by_key(|&i| std::cmp::Reverse(servers[i].weight));
                    candidates.insert(0, first);
                }
            }
            Policy::Hash(_) => {
                let key = key.unwrap_or(0);
                let score = |i: usize| rendezvous(key, servers[i].id, servers[i].weight);
                candidates.sort_by(|&a, &b| score(b).total_cmp(&score(a)));
            }
        }
        candidates
    }
}

/// The value of cookie `name` in the request's `Cookie` fields.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a [u8]> {
    headers
        .get_all(COOKIE)
        .iter()
        .flat_map(|line| line.as_bytes().split(|&b| b == b';'))
        .find_map(|pair| {
            let pair = pair.trim_ascii();
            let eq = pair.iter().position(|&b| b == b'=')?;
            (pair[..eq].trim_ascii() == name.as_bytes()).then(|| pair[eq + 1..].trim_ascii())
        })
}

/// Rendezvous (highest random weight) hashing: each server's score for a key; the key goes to
/// the highest. Removing a server moves only its own keys, each to its next-highest server;
/// weights give shares in proportion (`weight / -ln(u)` with `u` uniform in (0, 1)).
fn rendezvous(key: u64, server: u64, weight: u32) -> f64 {
    if weight == 0 {
        return 0.0;
    }
    let h = mix(key ^ mix(server));
    // 53 bits into (0, 1).
    let u = ((h >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    f64::from(weight) / -u.ln()
}

/// FNV-1a of `bytes`, then mixed: stable across runs and builds, so that every kura in front
/// of the same pool sends a key to the same server.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    mix(h)
}

/// splitmix64's finaliser.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
#[path = "director_tests.rs"]
mod tests;
