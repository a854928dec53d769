//! A hook that holds a reader between its database read and its
//! write-back until the test releases it: the race tests' interleavings.

use std::sync::{Arc, Mutex};

use futures_util::FutureExt;
use kura_record::Hooks;
use tokio::sync::oneshot;

/// A hook that holds the next write-back until released.
#[derive(Clone, Default)]
pub struct Gate(Arc<Mutex<Option<Armed>>>);

/// An armed gate: tells the test the reader paused, waits for release.
type Armed = (oneshot::Sender<()>, oneshot::Receiver<()>);

impl Gate {
    /// Arms the gate: returns (paused, release).
    pub fn arm(&self) -> (oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (paused_tx, paused_rx) = oneshot::channel();
        let (go_tx, go_rx) = oneshot::channel();
        *self.0.lock().expect("gate") = Some((paused_tx, go_rx));
        (paused_rx, go_tx)
    }

    pub fn hooks(&self) -> Hooks {
        let gate = self.clone();
        Hooks {
            before_write_back: Some(Arc::new(move || {
                let armed = gate.0.lock().expect("gate").take();
                async move {
                    if let Some((paused, go)) = armed {
                        let _ = paused.send(());
                        let _ = go.await;
                    }
                }
                .boxed()
            })),
            ..Hooks::default()
        }
    }
}
