//! Shared by the `kura` binary's tests.

/// A TCP port nothing listens on now, never the same one twice in this
/// process: tests run in parallel threads, and the OS may offer a port
/// again once the probe that found it closed.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
        let port = l.local_addr().expect("local addr").port();
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}
