//! `Ring`: a kind of placement and a list of servers, answering "which
//! server holds this key".

use std::fmt;
use std::str::FromStr;

use crate::continuum::Continuum;
use crate::hash::{fnv1a_64_full, Hash};
use crate::modula::{KeyPart, Modula};
use crate::server::Server;
use crate::{ch3, dalli, jump, ketama, modula};

/// Whose placement a ring reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// libmemcached's weighted ketama (pylibmc `ketama_weighted`, PHP
    /// memcached's libketama compatibility).
    Libmemcached,
    /// Dalli's ring (Ruby).
    Dalli,
    /// twemproxy's ketama with the given key hash (its default:
    /// [`Hash::Fnv1a64`]); servers may carry node names.
    Twemproxy(Hash),
    /// mcrouter's `ch3` (furc hash); no weights.
    Ch3,
    /// Jump consistent hash over the key's 64-bit FNV-1a; no weights.
    Jump,
    /// twemproxy's `distribution: modula`: the key's hash modulo the
    /// total weight, each server taking as many slots as its weight.
    Modula(Hash),
    /// twemproxy's `distribution: random`: any server, weights ignored
    /// (for pools whose servers all hold the same keys).
    Random,
}

impl Kind {
    /// The names [`Kind::from_str`] accepts (`twemproxy` with its default
    /// hash).
    pub const NAMES: [&'static str; 7] = [
        "libmemcached",
        "dalli",
        "twemproxy",
        "ch3",
        "jump",
        "modula",
        "random",
    ];

    /// The kind's name (without a twemproxy hash).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Libmemcached => "libmemcached",
            Kind::Dalli => "dalli",
            Kind::Twemproxy(_) => "twemproxy",
            Kind::Ch3 => "ch3",
            Kind::Jump => "jump",
            Kind::Modula(_) => "modula",
            Kind::Random => "random",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Twemproxy(h) => write!(f, "twemproxy ({h})"),
            Kind::Modula(h) => write!(f, "modula ({h})"),
            k => f.write_str(k.name()),
        }
    }
}

impl FromStr for Kind {
    type Err = RingError;

    fn from_str(s: &str) -> Result<Kind, RingError> {
        match s {
            "libmemcached" => Ok(Kind::Libmemcached),
            "dalli" => Ok(Kind::Dalli),
            "twemproxy" => Ok(Kind::Twemproxy(Hash::Fnv1a64)),
            "ch3" => Ok(Kind::Ch3),
            "jump" => Ok(Kind::Jump),
            "modula" => Ok(Kind::Modula(Hash::Fnv1a64)),
            "random" => Ok(Kind::Random),
            _ => Err(RingError::UnknownKind(s.to_string())),
        }
    }
}

/// Why a ring cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RingError {
    #[error("unknown ring kind {0:?} (one of: libmemcached, dalli, twemproxy, ch3, jump)")]
    UnknownKind(String),
    #[error("a ring needs at least one server")]
    NoServers,
    #[error("server {0}: weight 0 (leave the server out instead)")]
    ZeroWeight(String),
    #[error("server {server}: {kind} has no node names (only twemproxy does)")]
    NameNotUsed { kind: &'static str, server: String },
    #[error("server {server}: {kind} has no weights (leave them at 1)")]
    WeightNotUsed { kind: &'static str, server: String },
    #[error("server {0}: twemproxy hashes at most 85 bytes of NAME-i, so the name must be 80 bytes or fewer")]
    NameTooLong(String),
    #[error("{kind} places at most {max} servers")]
    TooManyServers { kind: &'static str, max: u64 },
}

/// How the ring turns a key into a server index.
#[derive(Clone, Debug)]
pub(crate) enum Placement {
    /// A continuum searched with the key's 32-bit hash.
    Continuum(Continuum, Hash),
    /// furc over `n` servers.
    Ch3(u32),
    /// jump over `n` buckets.
    Jump(u32),
    /// twemproxy's modula slots.
    Modula(Modula, Hash),
    /// Any of `n` servers.
    Random(u32),
}

/// The placement of keys on a list of servers, as a given client does it.
#[derive(Clone, Debug)]
pub struct Ring {
    kind: Kind,
    servers: Vec<Server>,
    pub(crate) placement: Placement,
    part: KeyPart,
}

impl Ring {
    /// Builds the ring of `kind` over `servers`, in the order the client is
    /// configured with them (the order matters to ch3 and jump, and breaks
    /// the rare ties between points of the continuum rings).
    ///
    /// # Errors
    /// No servers, a weight of 0, a node name outside twemproxy, a weight
    /// other than 1 for ch3 or jump, or more servers than the kind places.
    pub fn new(kind: Kind, servers: Vec<Server>) -> Result<Ring, RingError> {
        check(kind, &servers)?;
        let n = servers.len() as u32;
        let placement = match kind {
            Kind::Libmemcached => Placement::Continuum(
                ketama::continuum(&servers, ketama::libmemcached_name),
                Hash::Md5,
            ),
            Kind::Twemproxy(hash) => {
                Placement::Continuum(ketama::continuum(&servers, ketama::twemproxy_name), hash)
            }
            Kind::Dalli => Placement::Continuum(dalli::continuum(&servers), Hash::Crc32a),
            Kind::Ch3 => Placement::Ch3(n),
            Kind::Jump => Placement::Jump(n),
            Kind::Modula(hash) => Placement::Modula(Modula::new(&servers), hash),
            Kind::Random => Placement::Random(n),
        };
        Ok(Ring {
            kind,
            servers,
            placement,
            part: KeyPart::Whole,
        })
    }

    /// The same ring hashing only a part of each key (twemproxy's
    /// `hash_tag`, mcrouter's hash stop).
    pub fn with_key_part(mut self, part: KeyPart) -> Ring {
        self.part = part;
        self
    }

    /// The part of each key it hashes.
    pub fn key_part(&self) -> &KeyPart {
        &self.part
    }

    /// The index in [`Ring::servers`] of the server that holds `key`.
    pub fn index_for(&self, key: &[u8]) -> usize {
        let key = self.part.of(key);
        match &self.placement {
            Placement::Continuum(c, hash) => c.server_for(hash.hash(key)),
            Placement::Ch3(n) => ch3::furc_hash(key, *n) as usize,
            Placement::Jump(n) => jump::jump_hash(fnv1a_64_full(key), *n) as usize,
            Placement::Modula(m, hash) => m.index_for(hash.hash(key)),
            Placement::Random(n) => modula::random_below(*n),
        }
    }

    /// The server that holds `key`.
    pub fn server_for(&self, key: &[u8]) -> &Server {
        &self.servers[self.index_for(key)]
    }

    /// The servers, in the order given.
    pub fn servers(&self) -> &[Server] {
        &self.servers
    }

    /// The ring's kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }
}

fn check(kind: Kind, servers: &[Server]) -> Result<(), RingError> {
    if servers.is_empty() {
        return Err(RingError::NoServers);
    }
    let max = match kind {
        Kind::Ch3 => u64::from(ch3::MAX_SERVERS),
        Kind::Jump => i32::MAX as u64,
        // A continuum point names its server with 32 bits.
        _ => u64::from(u32::MAX),
    };
    if servers.len() as u64 > max {
        return Err(RingError::TooManyServers {
            kind: kind.name(),
            max,
        });
    }
    for s in servers {
        if s.weight == 0 {
            return Err(RingError::ZeroWeight(s.to_string()));
        }
        let name_len = s.name.as_ref().map(String::len);
        match (kind, name_len) {
            (Kind::Twemproxy(_) | Kind::Modula(_) | Kind::Random, Some(len)) if len > 80 => {
                return Err(RingError::NameTooLong(s.to_string()));
            }
            (Kind::Twemproxy(_) | Kind::Modula(_) | Kind::Random, _) | (_, None) => {}
            (_, Some(_)) => {
                return Err(RingError::NameNotUsed {
                    kind: kind.name(),
                    server: s.to_string(),
                })
            }
        }
        if matches!(kind, Kind::Ch3 | Kind::Jump) && s.weight != 1 {
            return Err(RingError::WeightNotUsed {
                kind: kind.name(),
                server: s.to_string(),
            });
        }
    }
    Ok(())
}

/// One ring of each placement, for tests.
#[cfg(test)]
pub(crate) const KINDS: [Kind; 6] = [
    Kind::Libmemcached,
    Kind::Dalli,
    Kind::Twemproxy(Hash::Fnv1a64),
    Kind::Ch3,
    Kind::Jump,
    Kind::Modula(Hash::Md5),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(n: u16) -> Vec<Server> {
        (0..n).map(|i| Server::new("10.0.0.1", 11211 + i)).collect()
    }

    #[test]
    fn kinds_parse_by_name() {
        for name in Kind::NAMES {
            assert_eq!(name.parse::<Kind>().map(Kind::name), Ok(name));
        }
        assert_eq!("twemproxy".parse(), Ok(Kind::Twemproxy(Hash::Fnv1a64)));
        assert!("ketama".parse::<Kind>().is_err());
    }

    #[test]
    fn every_kind_answers_with_an_index_in_range() {
        for kind in KINDS {
            for n in 1..6 {
                let ring = Ring::new(kind, servers(n)).unwrap_or_else(|e| panic!("{e}"));
                let mut seen = vec![false; n as usize];
                for i in 0..1000 {
                    let key = format!("key:{i}");
                    let at = ring.index_for(key.as_bytes());
                    assert_eq!(ring.server_for(key.as_bytes()), &ring.servers()[at]);
                    seen[at] = true;
                }
                assert!(
                    seen.iter().all(|&s| s),
                    "{kind} with {n}: a server got no key"
                );
            }
        }
    }

    #[test]
    fn rejects_what_the_kind_cannot_express() {
        assert_eq!(
            Ring::new(Kind::Dalli, vec![]).err(),
            Some(RingError::NoServers)
        );
        let zero = vec![Server::new("a", 1).with_weight(0)];
        assert!(matches!(
            Ring::new(Kind::Libmemcached, zero).err(),
            Some(RingError::ZeroWeight(_))
        ));
        let named = vec![Server::new("a", 1).with_name("n")];
        assert!(Ring::new(Kind::Twemproxy(Hash::Md5), named.clone()).is_ok());
        for kind in [Kind::Libmemcached, Kind::Dalli, Kind::Ch3, Kind::Jump] {
            assert!(matches!(
                Ring::new(kind, named.clone()).err(),
                Some(RingError::NameNotUsed { .. })
            ));
        }
        let heavy = vec![Server::new("a", 1).with_weight(2)];
        for kind in [Kind::Ch3, Kind::Jump] {
            assert!(matches!(
                Ring::new(kind, heavy.clone()).err(),
                Some(RingError::WeightNotUsed { .. })
            ));
        }
        let long = vec![Server::new("a", 1).with_name("n".repeat(81))];
        assert!(matches!(
            Ring::new(Kind::Twemproxy(Hash::Md5), long).err(),
            Some(RingError::NameTooLong(_))
        ));
    }
}
