//! Seed 002's cache keys: URLs normalised so that equivalent ones are one object
//! ([`query`]: tracking parameters removed, parameters sorted, default port dropped,
//! percent-encoding normalised), the query parameter names clients send counted so that an
//! operator can decide which to remove ([`count`]), and device classes that replace
//! `User-Agent` in `Vary` ([`device`]). Configured by `[normalize]`, the `normalize_*` keys
//! of a `[[rule]]` and `[device]` (`config/keys.rs`); docs/http.md describes them.

pub mod count;
pub mod device;
pub mod query;

pub use count::ParamCounter;
pub use device::DeviceRules;
pub use query::QueryRules;

/// The settings of this module that are not per route.
#[derive(Debug, Clone)]
pub struct KeySettings {
    /// Device classes, when on.
    pub device: Option<DeviceRules>,
    /// How many query parameter names are counted (0: none).
    pub count_params: usize,
}

impl Default for KeySettings {
    fn default() -> Self {
        KeySettings {
            device: Some(DeviceRules::default()),
            count_params: 256,
        }
    }
}
