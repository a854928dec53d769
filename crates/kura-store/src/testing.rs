//! Support for the unit tests: property tests sized for where they run.
//!
//! Under Miri (`cargo +nightly miri test -p kura-store --lib`, TESTING.md)
//! an interpreted test runs some thousand times slower, and under Miri's
//! isolation a test has no file system for proptest's failure files: there,
//! each property test runs a few cases and keeps no failures on disk.
//! Elsewhere the configuration is proptest's with the cases asked.

use proptest::test_runner::Config;

/// Cases a property test runs when it asks for `cases` natively.
pub(crate) const fn cases(cases: u32) -> u32 {
    if cfg!(miri) {
        let few = cases / 64;
        if few < 2 {
            2
        } else {
            few
        }
    } else {
        cases
    }
}

/// A property test's configuration: `cases` cases natively (fewer under
/// Miri, [`cases`]), no failure persistence under Miri.
pub(crate) fn config(n: u32) -> Config {
    let mut c = Config::with_cases(cases(n));
    if cfg!(miri) {
        c.failure_persistence = None;
    }
    c
}

/// `n` natively, `small` under Miri: the size of a test's workload.
pub(crate) const fn size(n: usize, small: usize) -> usize {
    if cfg!(miri) {
        small
    } else {
        n
    }
}
