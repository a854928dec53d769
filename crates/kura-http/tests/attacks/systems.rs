//! The caches the attack probes are sent through, each in front of a lenient backend of its own:
//! kura http (in process), and, when asked for and installed, Varnish (`varnishd`, default VCL,
//! malloc storage) and nginx (`proxy_cache`), each started on a free port in a temporary
//! directory and stopped on drop. All three wait at most 3 s for the backend.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::lenient::Lenient;
use crate::common::temp_dir;

/// One cache under test.
pub struct System {
    #[allow(dead_code)]
    pub name: &'static str,
    pub addr: SocketAddr,
    pub backend: Lenient,
    running: Running,
}

enum Running {
    Kura(Option<kura_http::Server>),
    Process(Child, PathBuf),
}

impl System {
    /// Stops it.
    pub async fn stop(mut self) {
        match &mut self.running {
            Running::Kura(server) => {
                if let Some(server) = server.take() {
                    server.shutdown().await;
                }
            }
            Running::Process(child, _) => {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

impl Drop for System {
    fn drop(&mut self) {
        if let Running::Process(child, dir) = &mut self.running {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// kura http with its defaults (and the 3 s backend timeouts).
pub async fn kura(backend: Lenient) -> System {
    let config = kura_http::Config::from_toml(&format!(
        "backend = \"http://{}\"\nlisten = [\"127.0.0.1:0\"]\nthreads = 2\nmemory_mb = 16\n\
         first_byte_timeout = 3\nbetween_bytes_timeout = 3\n",
        backend.addr
    ))
    .unwrap();
    let server = kura_http::Server::start(config).await.unwrap();
    System {
        name: "kura",
        addr: server.http[0],
        backend,
        running: Running::Kura(Some(server)),
    }
}

/// Whether `program` is on the PATH (or in /usr/sbin, where Debian puts both).
pub fn installed(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

fn free_port() -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

async fn wait_listening(addr: SocketAddr, child: &mut Child, name: &str) {
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{name} exited at start: {status}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{name} does not listen on {addr}");
}

/// Varnish with its default VCL and malloc storage.
pub async fn varnish(program: PathBuf, backend: Lenient) -> System {
    let addr = free_port();
    let dir = temp_dir("attacks-varnish");
    let mut child = Command::new(program)
        .args(["-F", "-j", "none", "-s", "malloc,64m"])
        .args([
            "-p",
            "first_byte_timeout=3",
            "-p",
            "between_bytes_timeout=3",
        ])
        .arg("-a")
        .arg(addr.to_string())
        .arg("-b")
        .arg(backend.addr.to_string())
        .arg("-n")
        .arg(dir.join("n"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("varnishd starts");
    wait_listening(addr, &mut child, "varnishd").await;
    System {
        name: "varnish",
        addr,
        backend,
        running: Running::Process(child, dir),
    }
}

/// nginx as a caching reverse proxy (`proxy_cache`, `Host` from the request).
pub async fn nginx(program: PathBuf, backend: Lenient) -> System {
    let addr = free_port();
    let dir = temp_dir("attacks-nginx");
    let d = dir.display();
    let user = if running_as_root() {
        "user root;\n"
    } else {
        ""
    };
    let conf = format!(
        "{user}daemon off;\nworker_processes 1;\nerror_log {d}/error.log;\npid {d}/nginx.pid;\n\
         events {{}}\nhttp {{\n  access_log off;\n\
         client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         proxy_cache_path {d}/cache keys_zone=attacks:10m;\n\
         server {{\n    listen {addr};\n    location / {{\n\
         proxy_pass http://{backend};\n      proxy_cache attacks;\n\
         proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n\
         proxy_set_header Host $host;\n      proxy_read_timeout 3s;\n    }}\n  }}\n}}\n",
        backend = backend.addr
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let mut child = Command::new(program)
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx starts");
    wait_listening(addr, &mut child, "nginx").await;
    System {
        name: "nginx",
        addr,
        backend,
        running: Running::Process(child, dir),
    }
}

fn running_as_root() -> bool {
    std::env::var("USER").is_ok_and(|u| u == "root")
        || std::fs::metadata("/proc/self")
            .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
            .unwrap_or(false)
}
