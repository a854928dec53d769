//! `kura http` as an operator starts it: flags only, a backend, a miss then a hit, a clean stop
//! on SIGTERM, and clear errors for bad settings.

mod common;

use std::process::Command;

/// A backend that answers every request with a cacheable "hello" and counts them.
fn backend() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = count.clone();
    let port = common::http_backend(
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
        move |_| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        },
    );
    (port, count)
}

fn get(port: u16, path: &str) -> String {
    let fields = "Host: example\r\nConnection: close\r\n";
    let out = common::http_exchange(port, &format!("GET {path} HTTP/1.1"), fields);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn serves_misses_then_hits_and_stops_on_sigterm() {
    let (backend, count) = backend();
    let (mut child, port) = common::http_proxy(backend, &["-m", "16", "-t", "1"]);
    let miss = get(port, "/a");
    assert!(miss.starts_with("HTTP/1.1 200"), "{miss}");
    assert!(miss.contains("x-cache: miss"), "{miss}");
    assert!(miss.ends_with("hello"));
    let hit = get(port, "/a");
    assert!(hit.contains("x-cache: hit"), "{hit}");
    assert!(hit.contains("age: "), "{hit}");
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
    // SAFETY: kill(2) on the child's pid, which we own and have not waited for.
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn bad_settings_are_refused_with_a_message() {
    for (args, message) in [
        (vec!["http"], "no backend"),
        (
            vec!["http", "--backend", "ftp://127.0.0.1:1"],
            "only http://, https:// and unix:",
        ),
        (
            vec![
                "http",
                "--backend",
                "http://127.0.0.1:1",
                "--config",
                "/nonexistent/kura.toml",
            ],
            "cannot read",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_kura"))
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

#[test]
fn a_bad_config_file_is_refused_naming_its_line() {
    let dir = std::env::temp_dir().join(format!("kura-http-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("kura-http.toml");
    std::fs::write(
        &file,
        "backend = \"http://127.0.0.1:1\"\n\n[backends]\napi = \"http://127.0.0.1:2\"\n\n\
         [[rule]]\npath_prefix = \"/api/\"\nbackend = \"apx\"\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kura"))
        .args(["http", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("kura-http.toml line 8: rule: no backend named \"apx\""),
        "{stderr}"
    );
    std::fs::remove_dir_all(dir).ok();
}

/// curl, a third-party HTTP/2 client, with prior knowledge on a plain listener.
#[test]
fn curl_speaks_http2_with_prior_knowledge() {
    if Command::new("curl").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI installs curl (.ci/run)"
        );
        eprintln!("skipped: no curl");
        return;
    }
    let (backend, count) = backend();
    let (mut child, port) = common::http_proxy(backend, &["-m", "16", "-t", "1"]);
    let url = format!("http://127.0.0.1:{port}/h2");
    let curl = |extra: &str| {
        let out = Command::new("curl")
            .args(["-s", "-i", "--max-time", "20", extra, &url])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = curl("--http2-prior-knowledge");
    assert!(first.starts_with("HTTP/2 200"), "{first}");
    assert!(
        first.contains("x-cache: miss") && first.ends_with("hello"),
        "{first}"
    );
    let second = curl("--http2-prior-knowledge");
    assert!(second.contains("x-cache: hit"), "{second}");
    // curl --http2 on cleartext asks for `Upgrade: h2c`: answered over HTTP/1.1.
    let upgrade = curl("--http2");
    assert!(upgrade.starts_with("HTTP/1.1 200"), "{upgrade}");
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1);
    let _ = child.kill();
    let _ = child.wait();
}
