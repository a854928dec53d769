//! kura-ring: which server holds a key, bit for bit as the memcached
//! clients and proxies already in production place it, so that kura's
//! client and proxy can join an existing cluster without moving keys.
//!
//! A [`Ring`] is built from a [`Kind`] and the servers in the order the
//! client is configured with them, and answers [`Ring::index_for`] in
//! O(log n) (the ketama rings' binary search) or without a table (ch3,
//! jump). No I/O: placement is a pure function of the key and the list.
//!
//! | kind | compatible with | points | key hash |
//! |---|---|---|---|
//! | `libmemcached` | libmemcached's weighted ketama: pylibmc `ketama_weighted`, PHP memcached with libketama compatibility | 160 × weight share × servers, 4 per MD5 of `host-i` (port 11211) or `host:port-i` | MD5, first word |
//! | `dalli` | Dalli (Ruby) | 160 × weight share × servers, SHA-1 of `host:port:i` | CRC-32 |
//! | `twemproxy` | twemproxy / nutcracker `distribution: ketama`, any `hash:`, node names | as libmemcached, or the node name's `name-i` | the configured hash (fnv1a_64 by default) |
//! | `ch3` | mcrouter's `ch3` | none: furc hash | MurmurHash64A bit stream |
//! | `jump` | jump consistent hash with 64-bit FNV-1a keys | none | FNV-1a 64 |
//! | `modula` | twemproxy's `distribution: modula` | none: hash modulo the total weight | the configured hash |
//! | `random` | twemproxy's `distribution: random` | none: any server | none |
//!
//! A ring may hash only a part of each key ([`KeyPart`]): twemproxy's
//! `hash_tag` or mcrouter's hash stop.
//!
//! The reference vectors of each hash and algorithm (from the software's
//! own tests) are unit tests beside it; `tests/differential.rs` checks the
//! rings against pylibmc, Dalli and nutcracker themselves on loopback.
//! docs/ring.md has the exact naming rules.

mod ch3;
mod continuum;
mod dalli;
pub mod hash;
mod jump;
mod ketama;
mod modula;
mod moves;
mod ring;
mod server;

pub use ch3::{furc_hash, MAX_SERVERS as CH3_MAX_SERVERS};
pub use hash::{Hash, UnknownHash};
pub use jump::jump_hash;
pub use modula::KeyPart;
pub use ring::{Kind, Ring, RingError};
pub use server::{ParseServerError, Server, DEFAULT_PORT};
