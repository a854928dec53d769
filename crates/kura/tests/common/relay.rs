//! A TCP relay in front of a server whose replies it can hold back: what
//! the server sends waits in the relay (and, once its buffers are full, in
//! the server's socket) until the relay is opened, as if the client had
//! stopped reading. Clients' bytes always go through.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};

/// See the module documentation; connections close when the server's do.
pub struct Relay {
    pub addr: String,
    open: Arc<(Mutex<bool>, Condvar)>,
}

impl Relay {
    /// A relay to `to`, holding the server's bytes back from the start
    /// when `held`.
    pub fn start(to: &str, held: bool) -> Relay {
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
        Relay { addr, open }
    }

    /// Lets the server's bytes through from now on.
    pub fn open(&self) {
        *self.open.0.lock().unwrap() = true;
        self.open.1.notify_all();
    }
}

/// Copies the server's bytes to the client, reading none while held.
fn replies(mut server: TcpStream, mut client: TcpStream, gate: &(Mutex<bool>, Condvar)) {
    let mut b = vec![0u8; 64 * 1024];
    loop {
        {
            let mut open = gate.0.lock().unwrap();
            while !*open {
                open = gate.1.wait(open).unwrap();
            }
        }
        match server.read(&mut b) {
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
