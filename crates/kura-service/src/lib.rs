//! What a service manager is told about kura's long-running commands
//! (`kura server`, `kura proxy`, `kura http`): systemd's readiness protocol
//! (`Type=notify`). `READY=1` goes once the listeners accept connections
//! (for `kura server --data-dir`, only after recovery, which comes before
//! them); `RELOADING=1` and `READY=1` again around a SIGHUP's reload;
//! `STOPPING=1` when a stop begins. Outside systemd (no `NOTIFY_SOCKET`)
//! nothing is sent.

use sd_notify::NotifyState;

fn tell(states: &[NotifyState<'_>]) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!("cannot notify the service manager: {e}");
    }
}

/// The listeners accept connections.
pub fn ready() {
    tell(&[NotifyState::Ready]);
}

/// A reload begins (`done` once it is over).
pub fn reloading() {
    let now = sd_notify::NotifyState::monotonic_usec_now();
    match now {
        Ok(now) => tell(&[NotifyState::Reloading, now]),
        Err(_) => tell(&[NotifyState::Reloading]),
    }
}

/// A reload is over: ready again, saying how it went.
pub fn reloaded(status: &str) {
    tell(&[NotifyState::Ready, NotifyState::Status(status)]);
}

/// A stop begins.
pub fn stopping() {
    tell(&[NotifyState::Stopping]);
}
