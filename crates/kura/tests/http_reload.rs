//! `kura http` reloading its configuration while it serves: SIGHUP (`systemctl reload`) and
//! `POST /reload` on the admin listener read the file again; the cache is kept (objects stored
//! before are hits after), the new rules apply to the next lookup, a bad file keeps the
//! configuration in use, and no request fails meanwhile. SIGUSR1 opens the access log again
//! (logrotate).

mod common;

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kura_testkit::ChildGuard;

fn get(port: u16, path: &str) -> String {
    let fields = "Host: example\r\nConnection: close\r\n";
    let out = common::http_exchange(port, &format!("GET {path} HTTP/1.1"), fields);
    String::from_utf8_lossy(&out).into_owned()
}

fn post(port: u16, path: &str) -> String {
    let fields = "Host: admin\r\nContent-Length: 0\r\nConnection: close\r\n";
    let out = common::http_exchange(port, &format!("POST {path} HTTP/1.1"), fields);
    String::from_utf8_lossy(&out).into_owned()
}

fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

struct Setup {
    child: ChildGuard,
    port: u16,
    admin: u16,
    file: std::path::PathBuf,
    base: String,
    fetched: Arc<AtomicUsize>,
}

fn start(name: &str) -> Setup {
    let fetched = Arc::new(AtomicUsize::new(0));
    let counted = fetched.clone();
    let backend = common::http_backend(
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
        },
    );
    let (port, admin) = (common::free_port(), common::free_port());
    let dir = common::tempdir(name);
    let file = dir.join("http.toml");
    let base = format!(
        "backend = \"http://127.0.0.1:{backend}\"\nlisten = [\"127.0.0.1:{port}\"]\nadmin_listen = \"127.0.0.1:{admin}\"\nmemory_mb = 16\nthreads = 1\n"
    );
    std::fs::write(&file, &base).unwrap();
    let child = common::kura()
        .args(["http", "--config"])
        .arg(&file)
        .stderr(Stdio::null())
        .spawn()
        .map(ChildGuard)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", admin)).is_err() {
        assert!(Instant::now() < deadline, "kura http listens");
        std::thread::sleep(Duration::from_millis(25));
    }
    Setup {
        child,
        port,
        admin,
        file,
        base,
        fetched,
    }
}

#[test]
fn a_reload_keeps_the_cache_and_applies_the_new_rules() {
    let mut s = start("http-reload");
    assert!(get(s.port, "/kept").contains("x-cache: miss"));
    assert!(get(s.port, "/account").contains("x-cache: miss"));
    assert!(get(s.port, "/account").contains("x-cache: hit"));
    assert_eq!(s.fetched.load(Ordering::SeqCst), 2);
    // A rule that passes /account from now on.
    let with_rule = format!(
        "{}[[rule]]\npath_prefix = \"/account\"\npass = true\n",
        s.base
    );
    std::fs::write(&s.file, &with_rule).unwrap();
    let reply = post(s.admin, "/reload");
    assert!(
        reply.starts_with("HTTP/1.1 200") && reply.ends_with("reloaded\n"),
        "{reply}"
    );
    assert!(
        get(s.port, "/kept").contains("x-cache: hit"),
        "the cache was lost"
    );
    assert!(
        !get(s.port, "/account").contains("x-cache: hit"),
        "the new rule is not applied"
    );
    assert_eq!(s.fetched.load(Ordering::SeqCst), 3);
    // A bad file: 422 with the line, the configuration in use stays.
    std::fs::write(&s.file, format!("{with_rule}no_such_setting = 1\n")).unwrap();
    let reply = post(s.admin, "/reload");
    assert!(
        reply.starts_with("HTTP/1.1 422") && reply.contains("no_such_setting"),
        "{reply}"
    );
    assert!(get(s.port, "/kept").contains("x-cache: hit"));
    // What changes only on restart is said, the rest applied.
    let moved = with_rule.replace("memory_mb = 16", "memory_mb = 32");
    std::fs::write(&s.file, moved).unwrap();
    let reply = post(s.admin, "/reload");
    assert!(
        reply.starts_with("HTTP/1.1 200") && reply.contains("memory_mb"),
        "{reply}"
    );
    assert!(matches!(s.child.try_wait(), Ok(None)));
}

/// SIGHUPs under load: no request fails, the process stays, the new file is in effect.
#[test]
fn sighup_under_load_fails_no_request() {
    let mut s = start("http-sighup");
    let port = s.port;
    let load: Vec<_> = (0..2)
        .map(|t| {
            std::thread::spawn(move || {
                for i in 0..300 {
                    let reply = get(port, &format!("/load/{t}/{}", i % 20));
                    assert!(
                        reply.starts_with("HTTP/1.1 200") && reply.ends_with("hello"),
                        "{reply}"
                    );
                }
            })
        })
        .collect();
    for _ in 0..10 {
        signal(&s.child, libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(10));
    }
    let with_rule = format!("{}[[rule]]\npath_prefix = \"/new\"\npass = true\n", s.base);
    std::fs::write(&s.file, with_rule).unwrap();
    signal(&s.child, libc::SIGHUP);
    for t in load {
        t.join().expect("a request failed under SIGHUP");
    }
    // In effect once the signal has been handled: /new is never a hit then.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = get(s.port, "/new");
        let b = get(s.port, "/new");
        if !a.contains("x-cache: hit") && !b.contains("x-cache: hit") {
            break;
        }
        assert!(Instant::now() < deadline, "the reloaded rule never applied");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        matches!(s.child.try_wait(), Ok(None)),
        "SIGHUP ended kura http"
    );
}

#[test]
fn health_and_readiness_pages() {
    let s = start("http-health");
    let fields = "Host: admin\r\nConnection: close\r\n";
    let live = String::from_utf8_lossy(&common::http_exchange(
        s.admin,
        "GET /healthz HTTP/1.1",
        fields,
    ))
    .into_owned();
    assert!(
        live.starts_with("HTTP/1.1 200") && live.ends_with("ok\n"),
        "{live}"
    );
    let ready = String::from_utf8_lossy(&common::http_exchange(
        s.admin,
        "GET /readyz HTTP/1.1",
        fields,
    ))
    .into_owned();
    assert!(
        ready.starts_with("HTTP/1.1 200") && ready.ends_with("ready\n"),
        "{ready}"
    );
    let wrong = String::from_utf8_lossy(&common::http_exchange(
        s.admin,
        "GET /reload HTTP/1.1",
        fields,
    ))
    .into_owned();
    assert!(wrong.starts_with("HTTP/1.1 405"), "{wrong}");
}

/// logrotate's way: rename the file, SIGUSR1; the lines before end the old file, the ones after
/// begin the new, and the process stays.
#[test]
fn sigusr1_reopens_the_access_log() {
    let mut s = start("http-usr1");
    let log = s.file.with_file_name("access.log");
    let with_log = format!("{}access_log = {:?}\n", s.base, log.display().to_string());
    std::fs::write(&s.file, with_log).unwrap();
    assert!(post(s.admin, "/reload").starts_with("HTTP/1.1 200"));
    let lines = |path: &std::path::Path| -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let wait = |path: &std::path::Path, n: usize| -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = lines(path);
            if got.len() >= n {
                return got;
            }
            assert!(Instant::now() < deadline, "{n} lines in {}", path.display());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    get(s.port, "/before");
    wait(&log, 1);
    let rotated = log.with_extension("log.1");
    std::fs::rename(&log, &rotated).unwrap();
    signal(&s.child, libc::SIGUSR1);
    // The reopen is asynchronous: requests until the new file appears.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !log.exists() {
        assert!(Instant::now() < deadline, "the log was not opened again");
        get(s.port, "/after");
        std::thread::sleep(Duration::from_millis(20));
    }
    get(s.port, "/after");
    let new = wait(&log, 1);
    assert!(new.iter().all(|l| l.contains("/after ")), "{new:?}");
    let old = lines(&rotated);
    assert!(old[0].contains("/before "), "{old:?}");
    assert!(
        matches!(s.child.try_wait(), Ok(None)),
        "SIGUSR1 ended kura http"
    );
}
