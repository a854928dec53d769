//! A connection's task while its request waits for reads from the flash
//! tier (exec/flash.rs, `Step::Parked`).
//!
//! The client's side is not read meanwhile: a client that sent its
//! requests and then shut down its side of the connection (`printf 'get
//! k\r\n' | nc`) still gets every reply, as from memcached. A client gone
//! for good is let go once the reads end (one record each from the tier's
//! reader threads, a bounded wait): writing its replies fails, or its end
//! of file is read next.

use std::future::Future;
use std::pin::Pin;

use super::End;
use crate::exec::Session;
use crate::shared::Shared;

/// Whether this server's gets wait for reads from flash in their task
/// rather than read the device on the worker.
pub(crate) fn parks(shared: &Shared) -> bool {
    shared.store.flash_config().is_some()
}

/// Waits for the reads the request under way waits for, or the stop.
pub(super) async fn unpark<F>(session: &mut Session<'_>, stop: Pin<&mut F>) -> Result<(), End>
where
    F: Future<Output = ()>,
{
    tokio::select! {
        biased;
        _ = stop => Err(End::Stopping),
        () = session.unpark() => Ok(()),
    }
}
