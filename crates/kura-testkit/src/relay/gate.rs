//! A relay that lets a budget of the clients' bytes through to a server, then holds the
//! rest back until released: a test stops a batch at a known point, whatever the
//! machine's speed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// A relay to a server at `to` that forwards the first `budget` bytes its
/// clients send (all connections together), then holds the rest back until
/// [`Gate::release`]; replies flow freely, and a connection whose server
/// goes away is closed on the client's side too. A test uses it to stop a
/// batch at a known point, whatever the machine's speed.
pub fn gated_relay(to: String, budget: usize) -> (SocketAddr, Gate) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let gate = Gate(std::sync::Arc::new((
        std::sync::Mutex::new(GateState {
            left: budget,
            stalled: false,
            open: false,
        }),
        std::sync::Condvar::new(),
    )));
    let g = gate.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(client) = c else { return };
            let Ok(server) = TcpStream::connect(&to) else {
                continue;
            };
            let (mut from_server, mut to_client) = match (server.try_clone(), client.try_clone()) {
                (Ok(s), Ok(c)) => (s, c),
                _ => continue,
            };
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from_server, &mut to_client);
                let _ = to_client.shutdown(std::net::Shutdown::Both);
            });
            let g = g.clone();
            std::thread::spawn(move || g.forward(client, server));
        }
    });
    (addr, gate)
}

#[derive(Clone)]
pub struct Gate(std::sync::Arc<(std::sync::Mutex<GateState>, std::sync::Condvar)>);

struct GateState {
    left: usize,
    stalled: bool,
    open: bool,
}

impl Gate {
    /// Copies `client`'s bytes to `server` within the budget, then waits
    /// for the gate to open before sending the rest.
    fn forward(&self, mut client: TcpStream, mut server: TcpStream) {
        let (lock, cv) = &*self.0;
        let mut b = vec![0u8; 65536];
        loop {
            let n = match client.read(&mut b) {
                Ok(n) if n > 0 => n,
                _ => break,
            };
            let now = {
                let mut s = lock.lock().expect("gate");
                let now = if s.open { n } else { n.min(s.left) };
                s.left -= now.min(s.left);
                now
            };
            if server.write_all(&b[..now]).is_err() {
                break;
            }
            if now < n {
                let mut s = lock.lock().expect("gate");
                s.stalled = true;
                cv.notify_all();
                while !s.open {
                    s = cv.wait(s).expect("gate");
                }
                drop(s);
                if server.write_all(&b[now..n]).is_err() {
                    break;
                }
            }
        }
        let _ = server.shutdown(std::net::Shutdown::Write);
        let _ = client.shutdown(std::net::Shutdown::Both);
    }

    /// Waits until the budget is spent and bytes are held back; false if
    /// that has not happened within `limit`.
    pub fn wait_stalled(&self, limit: Duration) -> bool {
        let (lock, cv) = &*self.0;
        let s = lock.lock().expect("gate");
        let (s, _) = cv
            .wait_timeout_while(s, limit, |s| !s.stalled)
            .expect("gate");
        s.stalled
    }

    /// Lets everything through from now on.
    pub fn release(&self) {
        let (lock, cv) = &*self.0;
        lock.lock().expect("gate").open = true;
        cv.notify_all();
    }
}
