//! The access log as an operator reads it: varnishncsa's default line, `-F`-style formats,
//! JSON lines, formats refused with their line and column, and the file opened again after
//! logrotate renames it (SIGUSR1's reopen and SIGHUP's reload), no line lost.

mod common;

use std::path::Path;
use std::time::Duration;

use common::wire::Conn;
use common::{eventually, reply, temp_dir, Backend};
use kura_http::{Config, HttpArgs, Server};

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

async fn wait_lines(path: &Path, n: usize) -> Vec<String> {
    eventually(&format!("{n} lines in {}", path.display()), || {
        lines(path).len() >= n
    })
    .await;
    lines(path)
}

/// Sends `request` raw and reads the response whole.
async fn raw(server: &Server, request: &str) -> u16 {
    let mut conn = Conn::open(server.http[0]).await;
    conn.send(request.as_bytes()).await;
    conn.response(false).await.expect("a response").status
}

async fn backend() -> Backend {
    Backend::start(Duration::ZERO, |seen| {
        reply(
            200,
            &[("cache-control", "max-age=60"), ("x-test", "t\"1")],
            &format!("body of {}", seen.uri.path()),
        )
    })
    .await
}

fn proxy_config(backend: &Backend, log: &Path, extra: &str) -> Config {
    common::config(
        backend.addr,
        &format!("access_log = {:?}\n{extra}", log.display().to_string()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_line_is_varnishncsas() {
    let backend = backend().await;
    let dir = temp_dir("log-default");
    let log = dir.join("access.log");
    let server = Server::start(proxy_config(&backend, &log, ""))
        .await
        .unwrap();
    let request = "GET /a/b?c=1 HTTP/1.1\r\nHost: www.example.com\r\nReferer: http://r.example/\r\nUser-Agent: ua \"q\" \\ x\r\nAuthorization: Basic Ym9iOnB3\r\n\r\n";
    assert_eq!(raw(&server, request).await, 200);
    let line = wait_lines(&log, 1).await.remove(0);
    // 127.0.0.1 - bob [02/Dec/2026:13:00:00 +0000] "GET http://... HTTP/1.1" 200 14 ...
    let (before, rest) = line.split_once(" [").expect("a bracketed time");
    assert_eq!(before, "127.0.0.1 - bob");
    let (time, after) = rest.split_once("] ").unwrap();
    assert!(
        chrono::DateTime::parse_from_str(time, "%d/%b/%Y:%H:%M:%S %z").is_ok(),
        "{time}"
    );
    assert_eq!(
        after,
        "\"GET http://www.example.com/a/b?c=1 HTTP/1.1\" 200 12 \"http://r.example/\" \"ua \\\"q\\\" \\\\ x\""
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_format_string_and_json_lines() {
    let backend = backend().await;
    let dir = temp_dir("log-formats");
    let log = dir.join("custom.log");
    let format = r#"access_log_format = "%m %U%q %s %b %{X-Test}o %{Varnish:hitmiss}x %{Varnish:handling}x %{x-cache}o""#;
    let server = Server::start(proxy_config(&backend, &log, format))
        .await
        .unwrap();
    let get = "GET /p?q=2 HTTP/1.1\r\nHost: h\r\n\r\n";
    raw(&server, get).await;
    raw(&server, get).await;
    raw(
        &server,
        "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
    )
    .await;
    let lines = wait_lines(&log, 3).await;
    assert_eq!(
        lines,
        [
            "GET /p?q=2 200 10 t\\\"1 miss miss miss",
            "GET /p?q=2 200 10 t\\\"1 hit hit hit",
            "POST /p 200 10 t\\\"1 miss pass pass",
        ]
    );
    server.shutdown().await;

    let log = dir.join("json.log");
    let server = Server::start(proxy_config(&backend, &log, "access_log_format = \"json\""))
        .await
        .unwrap();
    raw(
        &server,
        "GET /j HTTP/1.1\r\nHost: h\r\nUser-Agent: a\"b\r\n\r\n",
    )
    .await;
    let line = wait_lines(&log, 1).await.remove(0);
    let json: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(json["method"], "GET");
    assert_eq!(json["url"], "/j");
    assert_eq!(json["host"], "h");
    assert_eq!(json["status"], 200);
    assert_eq!(json["bytes"], 10);
    assert_eq!(json["user_agent"], "a\"b");
    assert_eq!(json["outcome"], "miss");
    assert_eq!(json["client"], "127.0.0.1");
    assert!(json["duration_us"].is_u64());
    server.shutdown().await;
}

#[test]
fn a_bad_format_names_its_line_and_column() {
    let error =
        Config::from_toml("backend = \"http://127.0.0.1:9\"\naccess_log_format = \"%h %Q\"\n")
            .unwrap_err()
            .to_string();
    assert!(error.contains("line 2"), "{error}");
    assert!(error.contains("column 4"), "{error}");
    assert!(error.contains("%Q"), "{error}");
    let error = Config::from_toml(
        "backend = \"http://127.0.0.1:9\"\naccess_log_format = \"%{VCL_Log:key}x\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("VCL_Log"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_after_rename_loses_no_line() {
    let backend = backend().await;
    let dir = temp_dir("log-rotate");
    let log = dir.join("access.log");
    let file = dir.join("kura.toml");
    let settings = format!(
        "backend = \"http://{}\"\nlisten = [\"127.0.0.1:0\"]\nthreads = 2\nmemory_mb = 16\naccess_log = {:?}\n",
        backend.addr,
        log.display().to_string()
    );
    std::fs::write(&file, &settings).unwrap();
    let args = HttpArgs {
        config: Some(file.clone()),
        ..HttpArgs::default()
    };
    let server = Server::start(Config::load(&args).unwrap()).await.unwrap();
    let get = |path: &str| format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n");
    raw(&server, &get("/1")).await;
    wait_lines(&log, 1).await;

    // logrotate: rename, then SIGUSR1 (the reopen alone).
    std::fs::rename(&log, dir.join("access.log.1")).unwrap();
    raw(&server, &get("/2")).await;
    server.live.reopen_log();
    raw(&server, &get("/3")).await;
    let now = wait_lines(&log, 1).await;
    let rotated = wait_lines(&dir.join("access.log.1"), 2).await;
    assert!(rotated[0].contains("GET http://h/1 "), "{rotated:?}");
    assert!(rotated[1].contains("GET http://h/2 "), "{rotated:?}");
    assert_eq!(now.len(), 1);
    assert!(now[0].contains("GET http://h/3 "), "{now:?}");

    // Again with SIGHUP's reload: the same writer, the file opened again.
    std::fs::rename(&log, dir.join("access.log.2")).unwrap();
    raw(&server, &get("/4")).await;
    server.live.reload().unwrap();
    raw(&server, &get("/5")).await;
    let now = wait_lines(&log, 1).await;
    let rotated = wait_lines(&dir.join("access.log.2"), 2).await;
    assert!(rotated[1].contains("GET http://h/4 "), "{rotated:?}");
    assert_eq!(now.len(), 1);
    assert!(now[0].contains("GET http://h/5 "), "{now:?}");
    server.shutdown().await;
}
