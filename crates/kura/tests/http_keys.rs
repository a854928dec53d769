//! `kura http` with a `[normalize]` and `[device]` file, as an operator runs it: equivalent
//! URLs are one backend request, the backend sees the key's target and the device class, and
//! mistakes in the file are refused naming the file and the line.

mod common;

use std::process::Command;
use std::sync::{Arc, Mutex};

/// A backend that answers every request with a cacheable page varying on the device class,
/// and keeps the request heads it got.
fn backend() -> (u16, Arc<Mutex<Vec<String>>>) {
    let heads: Arc<Mutex<Vec<String>>> = Arc::default();
    let kept = heads.clone();
    let port = common::http_backend(
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nVary: X-Device-Class\r\nContent-Length: 4\r\nConnection: close\r\n\r\npage",
        move |head| {
            kept.lock()
                .unwrap()
                .push(String::from_utf8_lossy(head).to_lowercase());
        },
    );
    (port, heads)
}

fn get(port: u16, path: &str, host: &str, agent: &str) -> String {
    let fields = format!(
        "Host: {host}\r\nUser-Agent: {agent}\r\nX-Device-Class: forged\r\nConnection: close\r\n"
    );
    let out = common::http_exchange(port, &format!("GET {path} HTTP/1.1"), &fields);
    String::from_utf8_lossy(&out).into_owned()
}

fn config_file(name: &str, text: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("kura-http-keys-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("kura-http.toml");
    std::fs::write(&file, text).unwrap();
    (dir, file)
}

#[test]
fn equivalent_urls_and_devices_share_objects() {
    let (backend, heads) = backend();
    let (dir, file) = config_file("run", "[normalize]\nalso_remove = [\"ref\"]\n");
    let (mut child, port) = common::http_proxy(
        backend,
        &["-m", "16", "-t", "1", "--config", file.to_str().unwrap()],
    );
    let iphone = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148";
    let desktop = "Mozilla/5.0 (X11; Linux x86_64) Firefox/120.0";
    let miss = get(
        port,
        "/p?utm_source=x&b=2&ref=top&a=1",
        "Example.COM:80",
        iphone,
    );
    assert!(miss.contains("x-cache: miss"), "{miss}");
    assert!(miss.contains("vary: user-agent"), "{miss}");
    let hit = get(port, "/%70?a=%31&b=2&fbclid=z", "example.com", iphone);
    assert!(hit.contains("x-cache: hit"), "{hit}");
    let other_class = get(port, "/p?a=1&b=2", "example.com", desktop);
    assert!(other_class.contains("x-cache: miss"), "{other_class}");
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2, "{heads:?}");
    assert!(
        heads[0].starts_with("get /p?a=1&b=2 http/1.1\r\n"),
        "{}",
        heads[0]
    );
    assert!(
        heads[0].contains("\r\nx-device-class: sp\r\n"),
        "{}",
        heads[0]
    );
    assert!(!heads[0].contains("forged"), "{}", heads[0]);
    assert!(
        heads[1].contains("\r\nx-device-class: pc\r\n"),
        "{}",
        heads[1]
    );
    child.kill().ok();
    child.wait().ok();
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn mistakes_in_normalize_and_device_are_refused_naming_the_line() {
    for (name, text, message) in [
        (
            "pattern",
            "backend = \"http://127.0.0.1:1\"\n\n[normalize]\nremove = [\"utm_*\", \"a=b\"]\n",
            "kura-http.toml line 4: normalize.remove: parameter pattern \"a=b\"",
        ),
        (
            "header",
            "backend = \"http://127.0.0.1:1\"\n[device]\nheader = \"\"\n",
            "kura-http.toml line 3: device.header: \"\" is not a header name",
        ),
    ] {
        let (dir, file) = config_file(name, text);
        let out = Command::new(env!("CARGO_BIN_EXE_kura"))
            .args(["http", "--config", file.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{name}: {stderr}");
        std::fs::remove_dir_all(dir).ok();
    }
}
