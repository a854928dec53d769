//! A value read from a file that a reload (SIGHUP) may replace while
//! readers keep the one they took: the replica's login and TLS settings
//! here, the server's credentials and certificates in kura-server.

use std::sync::Arc;

use parking_lot::RwLock;

/// See the module documentation.
pub struct Reloadable<T>(RwLock<Arc<T>>);

impl<T> Reloadable<T> {
    pub fn new(value: impl Into<Arc<T>>) -> Reloadable<T> {
        Reloadable(RwLock::new(value.into()))
    }

    /// The current value (a reference count, never a copy).
    pub fn current(&self) -> Arc<T> {
        self.0.read().clone()
    }

    /// Puts `value` in place for every later [`Reloadable::current`].
    pub fn replace(&self, value: impl Into<Arc<T>>) {
        *self.0.write() = value.into();
    }
}

impl<T> std::fmt::Debug for Reloadable<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reloadable")
    }
}
