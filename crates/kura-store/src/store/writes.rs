//! [`Writes`]: the store's operations that may change it, carried out for
//! a caller that keeps a [`Report`] of what the change sinks told it (a
//! server's connection: the record its reply waits for, the journal's
//! records its batch sends). The plain operations on [`Store`] are these
//! with a fresh report, dropped.

use crate::api::{
    ArithOutcome, ArithRequest, DeleteOutcome, DeleteRequest, GetOptions, Hit, SetOutcome,
    SetRequest,
};
use crate::changes::Report;
use crate::expiry::Expiry;

use super::{OnFlash, Store};

/// The store's changing operations, reporting into one [`Report`]
/// ([`Store::reporting`]).
#[derive(Debug, Clone, Copy)]
pub struct Writes<'r> {
    store: &'r Store,
    report: &'r Report,
}

impl Store {
    /// The store's changing operations, each telling `report` what the
    /// change sinks said of it (see [`Report`]).
    #[inline]
    pub fn reporting<'r>(&'r self, report: &'r Report) -> Writes<'r> {
        Writes {
            store: self,
            report,
        }
    }
}

impl Writes<'_> {
    /// [`Store::get_with`].
    #[inline]
    pub fn get_with(&self, key: &[u8], opts: &GetOptions) -> Option<Hit> {
        self.store.get_in(key, opts, self.report)
    }

    /// [`Store::get_with`] without reading the flash device: a key whose
    /// value is on flash and not in RAM is [`OnFlash`], found by the same
    /// lookup (for a caller that hands that read to the tier's reader
    /// threads, [`Store::read_later`]). With `opts` other than the default
    /// the entry is left as it was then (nothing touched or created).
    #[inline]
    pub fn get_in_ram(&self, key: &[u8], opts: &GetOptions) -> Result<Option<Hit>, OnFlash> {
        self.store.lookup_in(key, opts, self.report, true)
    }

    /// [`Store::set`].
    #[inline]
    pub fn set(&self, req: &SetRequest<'_>) -> SetOutcome {
        self.store.set_in(req, self.report)
    }

    /// [`Store::touch`].
    #[inline]
    pub fn touch(&self, key: &[u8], expiry: Expiry) -> bool {
        self.store.touch_in(key, expiry, self.report)
    }

    /// [`Store::arith`].
    #[inline]
    pub fn arith(&self, key: &[u8], req: &ArithRequest) -> ArithOutcome {
        self.store.arith_in(key, req, self.report)
    }

    /// [`Store::delete`].
    #[inline]
    pub fn delete(&self, key: &[u8]) -> bool {
        self.delete_with(key, &DeleteRequest::default()) == DeleteOutcome::Deleted
    }

    /// [`Store::delete_with`].
    #[inline]
    pub fn delete_with(&self, key: &[u8], req: &DeleteRequest) -> DeleteOutcome {
        self.store.delete_in(key, req, self.report)
    }

    /// [`Store::flush`].
    #[inline]
    pub fn flush(&self, at: Option<Expiry>) {
        self.store.flush_in(at, self.report)
    }
}
