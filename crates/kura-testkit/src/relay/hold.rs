//! A TCP relay in front of a server whose replies it can hold back: what
//! the server sends waits in the relay (and, once its buffers are full, in
//! the server's socket) until the relay is opened, as if the link were
//! very slow. A byte trickles through every 200 ms meanwhile, so that a
//! client that drops a silent link (a replica: five seconds) keeps it
//! however long the test takes. Clients' bytes always go through.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// See the module documentation; connections close when the server's do.
pub struct HoldingRelay {
    pub addr: String,
    open: Arc<(Mutex<bool>, Condvar)>,
}

impl HoldingRelay {
    /// A relay to `to`, holding the server's bytes back from the start
    /// when `held`.
    pub fn start(to: &str, held: bool) -> HoldingRelay {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let open = Arc::new((Mutex::new(!held), Condvar::new()));
        let (to, gate) = (to.to_string(), open.clone());
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(client) = c else { return };
                let Ok(server) = TcpStream::connect(&to) else {
                    continue;
                };
                let (Ok(mut c_in), Ok(mut s_out)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c_in, &mut s_out);
                    let _ = s_out.shutdown(Shutdown::Write);
                });
                let gate = gate.clone();
                std::thread::spawn(move || replies(server, client, &gate));
            }
        });
        HoldingRelay { addr, open }
    }

    /// Lets the server's bytes through from now on.
    pub fn open(&self) {
        *self.open.0.lock().unwrap() = true;
        self.open.1.notify_all();
    }
}

/// Copies the server's bytes to the client, a byte each 200 ms while held.
fn replies(mut server: TcpStream, mut client: TcpStream, gate: &(Mutex<bool>, Condvar)) {
    let mut b = vec![0u8; 64 * 1024];
    loop {
        let up_to = {
            let open = gate.0.lock().unwrap();
            let (open, _) = gate
                .1
                .wait_timeout_while(open, Duration::from_millis(200), |open| !*open)
                .unwrap();
            if *open {
                b.len()
            } else {
                1
            }
        };
        match server.read(&mut b[..up_to]) {
            Ok(n) if n > 0 => {
                if client.write_all(&b[..n]).is_err() {
                    break;
                }
            }
            _ => break,
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}
