//! Oracles shared by the property tests and the fuzz targets in `../fuzz`
//! (which include this module by path): parse a stream of requests frame
//! by frame, never panicking and always making progress, and check that
//! every request composes into bytes that parse back whole into the same
//! request; frame a stream of replies the same way (`reply.rs`).

// Each test binary uses only one protocol's half.
#![allow(dead_code)]

pub mod binary;
pub mod reply;
pub mod text;

use kura_proto::Limits;

/// Limits under which generated and fuzzed streams are parsed: the defaults, a
/// small item size so that storage requests come out `Data::TooLarge`, and
/// CAS off (which changes the size test).
pub const LIMITS: [Limits; 3] = [
    Limits {
        item_size_max: 1024 * 1024,
        cas_enabled: true,
        max_get_line: 1024 * 1024,
    },
    Limits {
        item_size_max: 64,
        cas_enabled: true,
        max_get_line: 4096,
    },
    Limits {
        item_size_max: 70,
        cas_enabled: false,
        max_get_line: 1024 * 1024,
    },
];
