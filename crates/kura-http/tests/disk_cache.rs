//! The disk tier (`--disk-cache DIR:SIZE`): objects evicted from a small memory served from
//! disk, and again after a clean stop (memory's objects too) and after SIGKILL (bodies
//! compared by checksum, the backend's requests counted; with `disk_cache_all`, memory's
//! objects too, and none replaced or purged before the kill back old), damaged records read as
//! misses, bans
//! issued before a restart applied after it, and bad settings refused. The restarts run the
//! proxy in a child process (this test binary again, running `child_proxy`), so a SIGKILL is
//! a real one.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{client, get, send, Backend, TestClient};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use kura_testkit::process::await_listen;
use kura_testkit::{free_port, ChildGuard};
use sha1::{Digest, Sha1};

const OBJECTS: usize = 400;
const BODY: usize = 16 << 10;
const TOKEN: &str = "disk-tier-test-token";

/// The body of object `n`: 16 KiB that differ from every other object's.
fn body(n: usize) -> Vec<u8> {
    (0..BODY)
        .map(|i| ((i * 31 + n * 7 + i / 251) % 251) as u8)
        .collect()
}

fn sum(bytes: &[u8]) -> [u8; 20] {
    Sha1::digest(bytes).into()
}

/// A backend answering `/obj/N` with [`body`]`(N)`, cacheable for an hour, tagged `tN%2`.
async fn origin() -> Backend {
    origin_versioned(Arc::default()).await
}

/// The body of object `n` once `version` is set: objects with `n % 10 < 2` change.
fn body_now(n: usize, version: u32) -> Vec<u8> {
    match n % 10 < 2 {
        true => body(n + OBJECTS * version as usize),
        false => body(n),
    }
}

/// [`origin`], serving [`body_now`] of the version `version` holds when asked.
async fn origin_versioned(version: Arc<AtomicU32>) -> Backend {
    Backend::start(Duration::ZERO, move |seen| {
        let n: usize = seen
            .uri
            .path()
            .strip_prefix("/obj/")
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let v = version.load(Relaxed);
        let mut response = Response::new(Full::new(Bytes::from(body_now(n, v))));
        let h = response.headers_mut();
        h.insert("cache-control", "max-age=3600".parse().unwrap());
        h.insert("content-type", "application/octet-stream".parse().unwrap());
        h.insert("xkey", format!("t{}", n % 2).parse().unwrap());
        response
    })
    .await
}

/// Requests the backend saw, per path.
fn origin_counts(backend: &Backend) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for seen in backend.seen.lock().iter() {
        *counts.entry(seen.uri.path().to_owned()).or_default() += 1;
    }
    counts
}

/// Gets every object through `addr`, checking each body's checksum: the backend's requests
/// meanwhile.
async fn get_all(c: &TestClient, addr: SocketAddr, backend: &Backend) -> usize {
    let before = backend.count();
    for n in 0..OBJECTS {
        // One host whatever port the proxy listens on: the cache key is the same after a
        // restart on another port.
        let got = send(
            c,
            addr,
            "GET",
            &format!("/obj/{n}"),
            &[("host", "cache.test")],
        )
        .await;
        assert_eq!(got.status, 200, "/obj/{n}");
        assert_eq!(sum(&got.body), sum(&body(n)), "/obj/{n}: not its bytes");
    }
    backend.count() - before
}

/// `/stats` of the admin listener at `admin`.
async fn stats_at(admin: SocketAddr) -> serde_json::Value {
    let got = get(&client(), admin, "/stats").await;
    serde_json::from_slice(&got.body).unwrap()
}

fn figure(stats: &serde_json::Value, name: &str) -> u64 {
    stats[name]
        .as_u64()
        .unwrap_or_else(|| panic!("no figure {name} in {stats}"))
}

/// Waits (bounded) until the disk tier's write buffers are on the device.
async fn written(admin: SocketAddr) {
    for _ in 0..1000 {
        if figure(&stats_at(admin).await, "disk_buffered_bytes") == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the disk tier's buffers were never written");
}

fn toml(backend: SocketAddr, port: u16, admin: u16, dir: &Path, all: bool) -> String {
    format!(
        "backend = \"http://{backend}\"\nlisten = [\"127.0.0.1:{port}\"]\n\
         admin_listen = \"127.0.0.1:{admin}\"\nthreads = 2\nmemory_mb = 2\n\
         disk_cache = \"{}:64M\"\ndisk_cache_all = {all}\n[bans]\ntoken = \"{TOKEN}\"\n\
         [purge]\nallow = [\"127.0.0.0/8\"]\n",
        dir.display()
    )
}

/// The proxy in a child process: listening at the returned address, admin beside it.
struct Child {
    guard: ChildGuard,
    addr: SocketAddr,
    admin: SocketAddr,
}

async fn spawn(backend: SocketAddr, dir: &Path) -> Child {
    spawn_with(backend, dir, false).await
}

/// [`spawn`], with `disk_cache_all` set to `all`.
async fn spawn_with(backend: SocketAddr, dir: &Path, all: bool) -> Child {
    let (port, admin) = (free_port(), free_port());
    let text = toml(backend, port, admin, dir, all);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let guard = tokio::task::spawn_blocking(move || {
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["child_proxy", "--exact", "--ignored", "--nocapture"])
            .env("KURA_DISK_TEST_CONFIG", text)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        await_listen(child, addr, "kura http (child)", Duration::from_secs(60))
            .expect("the child proxy exited before listening")
    })
    .await
    .unwrap();
    Child {
        guard,
        addr,
        admin: SocketAddr::from(([127, 0, 0, 1], admin)),
    }
}

impl Child {
    /// SIGTERM, and the exit waited for: a clean stop.
    async fn stop(mut self) {
        let pid = self.guard.id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(status.success());
        let exited = tokio::task::spawn_blocking(move || self.guard.wait().unwrap())
            .await
            .unwrap();
        assert!(exited.success(), "the proxy's clean stop: {exited}");
    }

    /// SIGKILL.
    fn kill(mut self) {
        self.guard.kill().unwrap();
        self.guard.wait().unwrap();
    }
}

/// The proxy of a restart test: run by the parent test as a child process.
#[test]
#[ignore = "run by the restart tests as their child process"]
fn child_proxy() {
    let Ok(text) = std::env::var("KURA_DISK_TEST_CONFIG") else {
        return;
    };
    let config = kura_http::Config::from_toml(&text).unwrap();
    kura_http::run(config).unwrap();
}

/// A fresh directory for a disk tier.
fn dir(name: &str) -> std::path::PathBuf {
    common::temp_dir(&format!("disk-{name}"))
}

async fn ban(admin: SocketAddr, expr: &str) {
    let request = Request::builder()
        .method("POST")
        .uri(format!("http://{admin}/ban"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Full::new(Bytes::from(expr.to_owned())))
        .unwrap();
    let response = client().request(request).await.unwrap();
    let status = response.status();
    let text = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(status, 200, "{text:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_evicted_from_memory_are_served_from_disk() {
    let backend = origin().await;
    let dir = dir("evicted");
    let text = format!(
        "backend = \"http://{}\"\nlisten = [\"127.0.0.1:0\"]\nadmin_listen = \"127.0.0.1:0\"\n\
         threads = 2\nmemory_mb = 2\ndisk_cache = \"{}:64M\"\n[bans]\ntoken = \"{TOKEN}\"",
        backend.addr,
        dir.display()
    );
    let config = kura_http::Config::from_toml(&text).unwrap();
    let server = kura_http::Server::start(config.clone()).await.unwrap();
    let (c, addr) = (client(), server.http[0]);
    assert_eq!(get_all(&c, addr, &backend).await, OBJECTS);
    let admin = server.admin.unwrap();
    let filled = stats_at(admin).await;
    assert!(
        figure(&filled, "disk_writes") >= 200,
        "2 MiB of memory holds at most half of 6 MiB: {filled}"
    );
    // Again, four requests at once for each: every object from memory or disk (four reads of
    // one record at once: the first brings it into memory, the others find it there), none
    // from the backend.
    let before = backend.count();
    for n in 0..OBJECTS {
        let path = format!("/obj/{n}");
        let one = || send(&c, addr, "GET", &path, &[("host", "cache.test")]);
        let got = tokio::join!(one(), one(), one(), one());
        for got in [got.0, got.1, got.2, got.3] {
            assert_eq!(sum(&got.body), sum(&body(n)), "{path}");
        }
    }
    // The writer may fall behind (a loaded machine's disk): the evicted objects it then
    // drops, by design never waited for, are the only ones fetched again.
    let after = stats_at(admin).await;
    let dropped = figure(&after, "disk_writes_dropped");
    assert!(
        (backend.count() - before) as u64 <= dropped,
        "objects fetched again: {}, writes dropped: {dropped}",
        backend.count() - before
    );
    assert!(figure(&after, "disk_reads") + dropped >= 200, "{after}");
    assert_eq!(figure(&after, "disk_read_badcrc"), 0);
    let metrics = get(&c, admin, "/metrics").await;
    let text = std::str::from_utf8(&metrics.body).unwrap();
    for name in [
        "kura_http_disk_objects ",
        "kura_http_disk_reads_total ",
        "kura_http_disk_read_badcrc_total ",
        "kura_http_disk_writes_dropped_total ",
    ] {
        assert!(text.contains(name), "{name} not on /metrics");
    }
    // A ban completed while objects older than it wait on disk (the lurker checked every
    // object in memory) still applies to them when they are read back.
    ban(admin, "obj.http.xkey == t1").await;
    for _ in 0..1000 {
        let s = stats_at(admin).await;
        if figure(&s, "bans") == 0 && figure(&s, "bans_completed_lurker") == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        figure(&stats_at(admin).await, "bans"),
        0,
        "the ban completed"
    );
    let before = origin_counts(&backend);
    get_all(&c, addr, &backend).await;
    let after = origin_counts(&backend);
    for n in 0..OBJECTS {
        let path = format!("/obj/{n}");
        let fetched = after.get(&path) > before.get(&path);
        assert_eq!(
            fetched,
            n % 2 == 1,
            "{path}: banned objects only are fetched again"
        );
    }
    // A second instance on the same directory is refused.
    let again = kura_http::Server::start(config).await;
    let error = again.err().expect("a second instance on the directory");
    assert!(error.to_string().contains("in use"), "{error}");
    server.shutdown().await;
}

/// Fills a child proxy on `dir` with every object, gets them all again (so objects move
/// between memory and disk), and waits until its disk tier's buffers are written.
async fn fill(backend: &Backend, dir: &Path) -> Child {
    let child = spawn(backend.addr, dir).await;
    let c = client();
    assert_eq!(get_all(&c, child.addr, backend).await, OBJECTS);
    let again = get_all(&c, child.addr, backend).await as u64;
    written(child.admin).await;
    // Only objects whose write to disk was dropped (the writer behind) are fetched again.
    let dropped = figure(&stats_at(child.admin).await, "disk_writes_dropped");
    assert!(
        again <= dropped,
        "fetched again: {again}, writes dropped: {dropped}"
    );
    child
}

/// After a restart on the same directory: every object with its own bytes, the backend asked
/// only for those that were in memory (not on disk) at the stop.
async fn after_restart(backend: &Backend, dir: &Path) -> Child {
    let child = spawn(backend.addr, dir).await;
    let on_disk = figure(&stats_at(child.admin).await, "disk_objects") as usize;
    assert!(on_disk >= 200, "objects indexed again: {on_disk}");
    let asked = get_all(&client(), child.addr, backend).await;
    assert_eq!(
        asked,
        OBJECTS - on_disk,
        "only objects not on disk are fetched"
    );
    let stats = stats_at(child.admin).await;
    assert!(figure(&stats, "disk_reads") >= on_disk as u64, "{stats}");
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_on_disk_survive_a_clean_stop() {
    let backend = origin().await;
    let dir = dir("clean");
    let filled = fill(&backend, &dir).await;
    let dropped = figure(&stats_at(filled.admin).await, "disk_writes_dropped");
    filled.stop().await;
    assert_eq!(last_journal_line(&dir), "C", "a clean stop is marked");
    // The objects in memory at the stop were written too: none is fetched again (but for
    // any whose eviction's write the writer, behind, dropped).
    let child = after_restart(&backend, &dir).await;
    let rebuilt = figure(&stats_at(child.admin).await, "disk_rebuilt_objects");
    assert!(
        rebuilt + dropped >= OBJECTS as u64,
        "rebuilt {rebuilt}, writes dropped {dropped}"
    );
    child.stop().await;
}

fn last_journal_line(dir: &Path) -> String {
    let text = std::fs::read_to_string(dir.join("bans")).unwrap();
    text.lines().last().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_on_disk_survive_sigkill() {
    let backend = origin().await;
    let dir = dir("sigkill");
    fill(&backend, &dir).await.kill();
    let child = after_restart(&backend, &dir).await;
    written(child.admin).await;
    child.kill();
    // Twice: the records the first restart wrote (and marked dead) read back as well.
    after_restart(&backend, &dir).await.kill();
    assert_ne!(last_journal_line(&dir), "C");
    // Had the machine restarted since (another boot in the journal), what the kernel had
    // not written may be lost: the objects are dropped, all fetched again.
    let journal = std::fs::read_to_string(dir.join("bans")).unwrap();
    let other: String = journal
        .lines()
        .map(|l| {
            if l.starts_with("K ") {
                "K another-boot\n".to_owned()
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    std::fs::write(dir.join("bans"), other).unwrap();
    let child = spawn(backend.addr, &dir).await;
    assert_eq!(figure(&stats_at(child.admin).await, "disk_objects"), 0);
    assert_eq!(get_all(&client(), child.addr, &backend).await, OBJECTS);
    child.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_disk_cache_all_sigkill_loses_nothing_and_brings_nothing_back_old() {
    let version = Arc::new(AtomicU32::new(0));
    let backend = origin_versioned(Arc::clone(&version)).await;
    let dir = dir("all");
    let child = spawn_with(backend.addr, &dir, true).await;
    let c = client();
    assert_eq!(get_all(&c, child.addr, &backend).await, OBJECTS);
    // Objects with n % 10 == 0 are replaced (purged, fetched in their new version), those
    // with n % 10 == 1 purged: most of them from memory, some from disk.
    version.store(1, Relaxed);
    for n in (0..OBJECTS).filter(|n| n % 10 < 2) {
        let path = format!("/obj/{n}");
        let purged = send(&c, child.addr, "PURGE", &path, &[("host", "cache.test")]).await;
        assert_eq!(purged.status, 200, "{path}");
        if n % 10 == 0 {
            let got = send(&c, child.addr, "GET", &path, &[("host", "cache.test")]).await;
            assert_eq!(sum(&got.body), sum(&body_now(n, 1)), "{path}");
        }
    }
    written(child.admin).await;
    let stats = stats_at(child.admin).await;
    let dropped = figure(&stats, "disk_writes_dropped");
    child.kill();
    let child = spawn_with(backend.addr, &dir, true).await;
    let before = origin_counts(&backend);
    for n in 0..OBJECTS {
        let path = format!("/obj/{n}");
        let got = send(&c, child.addr, "GET", &path, &[("host", "cache.test")]).await;
        assert_eq!(got.status, 200, "{path}");
        assert_eq!(
            sum(&got.body),
            sum(&body_now(n, 1)),
            "{path}: old or other bytes"
        );
    }
    let after = origin_counts(&backend);
    let fetched: Vec<usize> = (0..OBJECTS)
        .filter(|n| after.get(&format!("/obj/{n}")) > before.get(&format!("/obj/{n}")))
        .collect();
    let purged: Vec<usize> = (0..OBJECTS).filter(|n| n % 10 == 1).collect();
    // Every purged object is fetched again; of the rest (memory's objects at the kill among
    // them), only any whose write the writer, behind, dropped.
    assert!(purged.iter().all(|n| fetched.contains(n)), "{fetched:?}");
    assert!(
        (fetched.len() - purged.len()) as u64 <= dropped,
        "fetched again besides the purged: {}, writes dropped: {dropped} ({stats})",
        fetched.len() - purged.len()
    );
    child.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_records_are_misses_fetched_again() {
    let backend = origin().await;
    let dir = dir("damaged");
    fill(&backend, &dir).await.stop().await;
    let child = spawn(backend.addr, &dir).await;
    let on_disk = figure(&stats_at(child.admin).await, "disk_objects");
    assert!(on_disk >= 200);
    // Indexed: now one byte in every 40 KiB of the file is flipped under it, which damages
    // about every other record (16 KiB and their headers each).
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join("objects"))
        .unwrap();
    use std::os::unix::fs::FileExt;
    for at in (4096..(64u64 << 20)).step_by(40 << 10) {
        let mut byte = [0u8];
        file.read_at(&mut byte, at).unwrap();
        file.write_at(&[byte[0] ^ 0x55], at).unwrap();
    }
    let before = origin_counts(&backend);
    let asked = get_all(&client(), child.addr, &backend).await;
    let stats = stats_at(child.admin).await;
    let bad = figure(&stats, "disk_read_badcrc");
    assert!(bad >= 50, "damaged records found: {stats}");
    // Each damaged record was fetched again, with its own bytes (checked by get_all).
    assert_eq!(asked as u64, OBJECTS as u64 - on_disk + bad, "{stats}");
    let refetched = origin_counts(&backend)
        .iter()
        .filter(|(path, n)| **n > before.get(*path).copied().unwrap_or(0))
        .count();
    assert_eq!(refetched, asked);
    child.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ban_before_a_restart_applies_after_it() {
    let backend = origin().await;
    let dir = dir("ban");
    let child = fill(&backend, &dir).await;
    // Odd objects are tagged t1: banned, then SIGKILL.
    ban(child.admin, "obj.http.xkey == t1").await;
    child.kill();
    let child = spawn(backend.addr, &dir).await;
    let stats = stats_at(child.admin).await;
    assert_eq!(figure(&stats, "disk_bans_kept"), 1, "{stats}");
    let before = origin_counts(&backend);
    get_all(&client(), child.addr, &backend).await;
    let after = origin_counts(&backend);
    let fetched = |n: usize| {
        let path = format!("/obj/{n}");
        after.get(&path).copied().unwrap_or(0) > before.get(&path).copied().unwrap_or(0)
    };
    // Every banned object came from the backend again, on disk or not.
    assert!((1..OBJECTS).step_by(2).all(fetched));
    // Unbanned objects on disk did not.
    let spared = (0..OBJECTS).step_by(2).filter(|&n| !fetched(n)).count();
    assert!(spared >= 100, "even objects served from disk: {spared}");
    child.stop().await;
    // A clean restart after the ban's objects were replaced keeps it too.
    let child = spawn(backend.addr, &dir).await;
    let stats = stats_at(child.admin).await;
    assert_eq!(figure(&stats, "disk_bans_kept"), 1, "{stats}");
    child.stop().await;
}

#[test]
fn bad_disk_cache_settings_are_refused() {
    let dir = dir("settings");
    let refused = |value: &str| {
        let text = format!("backend = \"http://127.0.0.1:1\"\ndisk_cache = \"{value}\"");
        match kura_http::Config::from_toml(&text) {
            Ok(_) => panic!("{value} accepted"),
            Err(e) => e.to_string(),
        }
    };
    let shown = dir.display();
    let missing = refused(&format!("{shown}/none:1G"));
    assert!(missing.contains("does not exist"), "{missing}");
    assert!(missing.contains("line 2"), "names the line: {missing}");
    assert!(refused(&format!("{shown}:0")).contains("size is 0"));
    assert!(refused(&format!("{shown}:512K")).contains("under one page"));
    assert!(refused(&format!("{shown}:lots")).contains("not a number"));
    assert!(refused(&shown.to_string()).contains("expected DIR:SIZE"));
    // /proc/self takes no new file, even from root.
    assert!(refused("/proc/self:1G").contains("not writable"));
    let alone = "backend = \"http://127.0.0.1:1\"\ndisk_cache_all = true";
    let e = kura_http::Config::from_toml(alone).unwrap_err().to_string();
    assert!(
        e.contains("line 2") && e.contains("needs a disk tier"),
        "{e}"
    );
    // The flag as `kura http` reads it.
    let args = kura_http::HttpArgs {
        backend: Some("http://127.0.0.1:1".into()),
        disk_cache: Some(format!("{shown}:0M")),
        ..kura_http::HttpArgs::default()
    };
    let e = kura_http::Config::load(&args).unwrap_err().to_string();
    assert!(e.contains("size is 0"), "{e}");
    let args = kura_http::HttpArgs {
        disk_cache: Some(format!("{shown}:64M")),
        ..args
    };
    let ok = kura_http::Config::load(&args).unwrap();
    assert_eq!(ok.disk_cache.unwrap().size, 64 << 20);
    let all = kura_http::HttpArgs {
        disk_cache_all: true,
        ..args
    };
    assert!(
        kura_http::Config::load(&all)
            .unwrap()
            .disk_cache
            .unwrap()
            .all
    );
}
