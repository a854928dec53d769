//! Child processes of a test: killed and reaped when dropped (a failed test leaves no
//! server behind), and waited for until they listen.

use std::net::{SocketAddr, TcpStream};
use std::process::Child;
use std::time::{Duration, Instant};

/// A child process killed and reaped when dropped, so a test that fails (panics) leaves no
/// server behind. Derefs to the [`Child`].
pub struct ChildGuard(pub Child);

impl std::ops::Deref for ChildGuard {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for ChildGuard {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // A child already waited for is not signalled again (std keeps its status).
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A server process listening on a loopback port, killed when dropped.
pub struct Proc {
    pub child: ChildGuard,
    pub port: u16,
}

impl Proc {
    /// `127.0.0.1:port`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Kills the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.0.kill();
        let _ = self.child.0.wait();
    }
}

/// The addresses of `procs`, in order.
pub fn addrs(procs: &[Proc]) -> Vec<String> {
    procs.iter().map(Proc::addr).collect()
}

/// Waits until `child` accepts connections on `addr`: the guarded child, or `None` when it
/// exits first (most often: another process took the port meanwhile; the caller tries
/// another). Panics, naming `what`, when it neither listens nor exits within `limit`.
pub fn await_listen(
    child: Child,
    addr: SocketAddr,
    what: &str,
    limit: Duration,
) -> Option<ChildGuard> {
    let mut child = ChildGuard(child);
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        if TcpStream::connect(addr).is_ok() {
            // What answered may be another test's server on the same port, ours about to
            // exit because the port is taken: give it a moment to fail before trusting it.
            std::thread::sleep(Duration::from_millis(100));
            return match child.try_wait() {
                Ok(None) => Some(child),
                _ => None,
            };
        }
        assert!(Instant::now() < deadline, "{what} did not listen on {addr}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
