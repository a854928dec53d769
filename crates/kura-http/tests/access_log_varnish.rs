//! kura's access log line against varnishncsa's for the same requests through Varnish (the
//! same format string, the same backend): byte for byte, but for the time, whose form is
//! compared. Skipped when Varnish is not installed, unless `KURA_REQUIRE_VARNISH=1`.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::wire::Conn;
use common::{reply, temp_dir, Backend};
use kura_http::Server;

const FORMAT: &str = r#"%h %l %u "%r" %s %b "%{Referer}i" "%{User-agent}i" %m %U %q %H %{Varnish:hitmiss}x %{Varnish:handling}x %{X-Test}o %t"#;

/// A line with its time (the last field) reduced to its form: digits and letters in it made
/// `0` and `a`, so that two lines of different moments compare equal.
fn timeless(line: &str) -> String {
    let Some((rest, time)) = line.rsplit_once(" [") else {
        return line.to_owned();
    };
    let form: String = time
        .chars()
        .map(|c| match c {
            '0'..='9' => '0',
            c if c.is_ascii_alphabetic() => 'a',
            c => c,
        })
        .collect();
    format!("{rest} [{form}")
}

const REQUESTS: [&str; 3] = [
    "GET /d?x=1 HTTP/1.1\r\nHost: www.example.com\r\nReferer: http://r.example/p?q\r\nUser-Agent: ua \"q\" \\ \tx\r\n\r\n",
    "GET /d?x=1 HTTP/1.1\r\nHost: www.example.com\r\nReferer: http://r.example/p?q\r\nUser-Agent: ua \"q\" \\ \tx\r\n\r\n",
    "GET /e HTTP/1.1\r\nHost: www.example.com\r\nAuthorization: Basic Ym9iOnB3\r\n\r\n",
];

fn installed(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

async fn send_all(addr: std::net::SocketAddr) {
    for request in REQUESTS {
        let mut conn = Conn::open(addr).await;
        conn.send(request.as_bytes()).await;
        let response = conn.response(false).await.expect("a response");
        assert_eq!(response.status, 200);
    }
}

/// varnishncsa's lines for what the instance `name` logged so far, in `format`.
fn varnishncsa(program: &PathBuf, name: &PathBuf, format: &str) -> Vec<String> {
    let output = Command::new(program)
        .arg("-n")
        .arg(name)
        .args(["-d", "-F", format])
        .output()
        .expect("varnishncsa runs");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_line_as_varnishncsa() {
    let required = std::env::var("KURA_REQUIRE_VARNISH").is_ok_and(|v| v == "1");
    let (Some(varnishd), Some(ncsa)) = (installed("varnishd"), installed("varnishncsa")) else {
        assert!(!required, "varnishd or varnishncsa is not installed");
        eprintln!("Varnish is not installed: skipped");
        return;
    };
    let backend = Backend::start(Duration::ZERO, |seen| {
        reply(
            200,
            &[("cache-control", "max-age=60"), ("x-test", "t\"1")],
            &format!("body of {}", seen.uri.path()),
        )
    })
    .await;

    let dir = temp_dir("log-varnish");
    let name = dir.join("n");
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let mut child = Command::new(varnishd)
        .args(["-F", "-j", "none", "-s", "malloc,16m", "-a"])
        .arg(addr.to_string())
        .arg("-b")
        .arg(backend.addr.to_string())
        .arg("-n")
        .arg(&name)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("varnishd starts");
    let mut listening = false;
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            listening = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listening, "varnishd does not listen on {addr}");
    send_all(addr).await;
    let mut theirs = Vec::new();
    for _ in 0..100 {
        theirs = varnishncsa(&ncsa, &name, FORMAT);
        if theirs.len() >= REQUESTS.len() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();

    let log = dir.join("kura.log");
    let extra = format!(
        "access_log = {:?}\naccess_log_format = '{FORMAT}'\n",
        log.display().to_string()
    );
    let server = Server::start(common::config(backend.addr, &extra))
        .await
        .unwrap();
    send_all(server.http[0]).await;
    let mut ours = Vec::new();
    common::eventually("kura's lines", || {
        ours = std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        ours.len() >= REQUESTS.len()
    })
    .await;
    server.shutdown().await;
    assert_eq!(theirs.len(), REQUESTS.len(), "varnishncsa: {theirs:?}");
    // Line for line, in any order: each server writes a line when its
    // transaction ends, and a miss's line can land after the hit that followed
    // it (varnishncsa was seen printing the hit first).
    let mut ours: Vec<String> = ours.iter().map(|l| timeless(l)).collect();
    let mut theirs: Vec<String> = theirs.iter().map(|l| timeless(l)).collect();
    ours.sort();
    theirs.sort();
    assert_eq!(ours, theirs);
}
