//! `stats` and its groups: every figure memcached 1.6.18 reports, under
//! its name and in its order (so dashboards and exporters keep working),
//! with kura's value where kura has the thing and 0 where it has not
//! (docs/compatibility.md lists those); then kura's own figures. kura has
//! no slab classes: `stats items` and `stats slabs` report everything as
//! class 1. `stats settings` is in `stats_settings.rs`.

use kura_proto::{reply, Stats};

use kura_store::{FlashStats, StoreStats};

use super::Session;
use crate::metrics::StatsTotals;
use crate::output::Output;
use crate::shared::Shared;

fn rusage() -> (String, String) {
    // SAFETY: getrusage only writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0;
    let fmt = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    if ok {
        (fmt(ru.ru_utime), fmt(ru.ru_stime))
    } else {
        ("0.000000".into(), "0.000000".into())
    }
}

/// Appends `name 0` for each of memcached's figures kura has no
/// counterpart of (slab mover, LRU maintainer and crawler, logger, read
/// and response buffer pools...): present, so dashboards and exporters
/// that read them keep working, and always 0.
fn zeros(o: &mut Vec<u8>, names: &[&str]) {
    for name in names {
        reply::stat(o, name, 0);
    }
}

/// The general group: memcached 1.6.18's figures in its order, then
/// kura's own.
fn general(s: &mut Session<'_>) {
    let sh = s.shared;
    let now = sh.store.now();
    let t = sh.totals();
    let st = sh.store.stats();
    let o = &mut s.out;
    let flash = sh.store.flash_stats();
    process(o, sh, now);
    commands(o, &t, &st, flash.as_ref());
    server(o, sh, now, &t, &st, flash.as_ref());
    items(o, &st);
    kura_own(o, sh, &st);
    if let Some(d) = sh.keyspace.durable() {
        durable(o, d);
    }
    replication(o, sh);
}

fn load(a: &std::sync::atomic::AtomicU64) -> u64 {
    a.load(std::sync::atomic::Ordering::Relaxed)
}

/// The process and its connections.
fn process(o: &mut Output, sh: &Shared, now: u32) {
    let (user, system) = rusage();
    let curr = sh.counters.curr.load(std::sync::atomic::Ordering::Relaxed);
    reply::stat(o, "pid", sh.pid);
    reply::stat(o, "uptime", now.saturating_sub(sh.started));
    reply::stat(o, "time", now);
    reply::stat(o, "version", crate::shared::VERSION);
    reply::stat(o, "libevent", 0);
    reply::stat(o, "pointer_size", usize::BITS);
    reply::stat(o, "rusage_user", user);
    reply::stat(o, "rusage_system", system);
    reply::stat(o, "max_connections", sh.config.max_connections);
    reply::stat(o, "curr_connections", curr);
    reply::stat(o, "total_connections", load(&sh.counters.total));
    reply::stat(o, "rejected_connections", load(&sh.counters.rejected));
    reply::stat(o, "connection_structures", curr);
    zeros(
        o,
        &[
            "response_obj_oom",
            "response_obj_count",
            "response_obj_bytes",
            "read_buf_count",
            "read_buf_bytes",
            "read_buf_bytes_free",
            "read_buf_oom",
            "reserved_fds",
        ],
    );
}

/// Commands and their outcomes.
fn commands(o: &mut Output, t: &StatsTotals, st: &StoreStats, flash: Option<&FlashStats>) {
    reply::stat(o, "cmd_get", t.cmd_get);
    reply::stat(o, "cmd_set", t.cmd_set);
    reply::stat(o, "cmd_flush", t.cmd_flush);
    reply::stat(o, "cmd_touch", t.cmd_touch);
    reply::stat(o, "cmd_meta", t.cmd_meta);
    reply::stat(o, "get_hits", t.get_hits);
    reply::stat(o, "get_misses", t.get_misses);
    reply::stat(o, "get_expired", st.get_expired);
    reply::stat(o, "get_flushed", st.get_flushed);
    if let Some(f) = flash {
        flash_reads(o, f);
    }
    reply::stat(o, "delete_misses", t.delete_misses);
    reply::stat(o, "delete_hits", t.delete_hits);
    reply::stat(o, "incr_misses", t.incr_misses);
    reply::stat(o, "incr_hits", t.incr_hits);
    reply::stat(o, "decr_misses", t.decr_misses);
    reply::stat(o, "decr_hits", t.decr_hits);
    reply::stat(o, "cas_misses", t.cas_misses);
    reply::stat(o, "cas_hits", t.cas_hits);
    reply::stat(o, "cas_badval", t.cas_badval);
    reply::stat(o, "touch_hits", t.touch_hits);
    reply::stat(o, "touch_misses", t.touch_misses);
    reply::stat(o, "store_too_large", t.store_too_large);
    reply::stat(o, "store_no_memory", t.store_no_memory);
    reply::stat(o, "auth_cmds", t.auth_cmds);
    reply::stat(o, "auth_errors", t.auth_errors);
}

/// The server: traffic, threads, the hash table, watchers, TLS.
fn server(
    o: &mut Output,
    sh: &Shared,
    now: u32,
    t: &StatsTotals,
    st: &StoreStats,
    flash: Option<&FlashStats>,
) {
    // As memcached: only with an idle timeout.
    if sh.config.idle_timeout > 0 {
        reply::stat(o, "idle_kicks", t.idle_kicks);
    }
    reply::stat(o, "bytes_read", t.bytes_read);
    reply::stat(o, "bytes_written", t.bytes_written);
    reply::stat(o, "limit_maxbytes", st.limit_maxbytes);
    reply::stat(o, "accepting_conns", u8::from(!sh.is_stopping()));
    reply::stat(o, "listen_disabled_num", 0);
    reply::stat(o, "time_in_listen_disabled_us", 0);
    reply::stat(o, "threads", sh.config.threads);
    reply::stat(o, "conn_yields", t.conn_yields);
    // memcached's table has 2^hash_power_level buckets; kura's are sized
    // freely per shard: the power of two nearest below all their slots.
    reply::stat(o, "hash_power_level", st.hash_slots.max(1).ilog2());
    reply::stat(o, "hash_bytes", st.hash_bytes);
    reply::stat(o, "hash_is_expanding", u8::from(st.hash_is_expanding));
    zeros(
        o,
        &[
            "slab_reassign_rescues",
            "slab_reassign_chunk_rescues",
            "slab_reassign_evictions_nomem",
            "slab_reassign_inline_reclaim",
            "slab_reassign_busy_items",
            "slab_reassign_busy_deletes",
            "slab_reassign_running",
            "slabs_moved",
            "lru_crawler_running",
            "lru_crawler_starts",
            "lru_maintainer_juggles",
            "malloc_fails",
            "log_worker_dropped",
            "log_worker_written",
        ],
    );
    let w = &sh.inspect.watchers;
    reply::stat(o, "log_watcher_skipped", load(&w.skipped));
    reply::stat(o, "log_watcher_sent", load(&w.sent));
    reply::stat(o, "log_watchers", w.len());
    if let Some(f) = flash {
        flash_tier(o, f);
    }
    // Where memcached 1.6.18 puts its TLS figures.
    if let Some(tls) = &sh.tls {
        let errors = load(&sh.counters.ssl_handshake_errors);
        reply::stat(o, "ssl_handshake_errors", errors);
        reply::stat(
            o,
            "time_since_server_cert_refresh",
            now.saturating_sub(tls.loaded_at()),
        );
    }
    zeros(o, &["unexpected_napi_ids", "round_robin_fallback"]);
}

/// The flash tier's reads, where memcached 1.6.18 puts its extstore's.
/// A get refused by a full read queue went to flash and missed there, as
/// memcached counts one.
fn flash_reads(o: &mut Output, f: &FlashStats) {
    reply::stat(o, "get_extstore", f.get_extstore + f.read_queue_full);
    // kura never gives up a read it started, nor lacks memory for one.
    reply::stat(o, "get_aborted_extstore", 0);
    reply::stat(o, "get_oom_extstore", 0);
    reply::stat(o, "recache_from_extstore", f.recache_from_extstore);
    reply::stat(
        o,
        "miss_from_extstore",
        f.miss_from_extstore + f.read_queue_full,
    );
    reply::stat(o, "badcrc_from_extstore", f.badcrc_from_extstore);
}

/// The flash tier's figures, memcached 1.6.18's `extstore_*` lines in its
/// order, then kura's own.
fn flash_tier(o: &mut Output, f: &FlashStats) {
    for (name, v) in [
        ("extstore_compact_lost", f.compact_lost),
        ("extstore_compact_rescues", f.compact_rescues),
        ("extstore_compact_skipped", f.compact_skipped),
        ("extstore_page_allocs", f.page_allocs),
        ("extstore_page_evictions", f.page_evictions),
        ("extstore_page_reclaims", f.page_reclaims),
        ("extstore_pages_free", f.pages_free),
        ("extstore_pages_used", f.pages_used),
        ("extstore_objects_evicted", f.objects_evicted),
        ("extstore_objects_read", f.objects_read),
        ("extstore_objects_written", f.objects_written),
        ("extstore_objects_used", f.objects_used),
        ("extstore_bytes_evicted", f.bytes_evicted),
        ("extstore_bytes_written", f.bytes_written),
        ("extstore_bytes_read", f.bytes_read),
        ("extstore_bytes_used", f.bytes_used),
        ("extstore_bytes_fragmented", f.bytes_fragmented),
        ("extstore_limit_maxbytes", f.limit_maxbytes),
        ("extstore_io_queue", f.io_queue),
        ("extstore_write_errors", f.write_errors),
        ("extstore_writes_dropped", f.writes_dropped),
        ("extstore_index_bytes", f.index_bytes),
    ] {
        reply::stat(o, name, v);
    }
}

/// The items and what left.
fn items(o: &mut Output, st: &StoreStats) {
    reply::stat(o, "bytes", st.bytes);
    reply::stat(o, "curr_items", st.curr_items);
    reply::stat(o, "total_items", st.total_items);
    reply::stat(o, "slab_global_page_pool", 0);
    reply::stat(o, "expired_unfetched", st.expired_unfetched);
    reply::stat(o, "evicted_unfetched", st.evicted_unfetched);
    reply::stat(o, "evicted_active", 0);
    reply::stat(o, "evictions", st.evictions);
    reply::stat(o, "reclaimed", st.reclaimed);
    reply::stat(o, "crawler_reclaimed", st.crawler_reclaimed);
    zeros(
        o,
        &[
            "crawler_items_checked",
            "lrutail_reflocked",
            "moves_to_cold",
            "moves_to_warm",
            "moves_within_lru",
            "direct_reclaims",
            "lru_bumps_dropped",
        ],
    );
}

/// kura's own figures, after all of memcached's.
fn kura_own(o: &mut Output, sh: &Shared, st: &StoreStats) {
    reply::stat(o, "store_shards", st.shards);
    reply::stat(o, "kura_version", crate::shared::KURA_VERSION);
    {
        use std::sync::atomic::Ordering::Relaxed;
        let (subscribers, keys) = sh.tracking.counts();
        reply::stat(o, "tracking_clients", subscribers);
        reply::stat(o, "tracking_keys", keys);
        reply::stat(o, "tracking_invalidations", sh.tracking.sent.load(Relaxed));
        reply::stat(o, "tracking_overflows", sh.tracking.overflows.load(Relaxed));
    }
}

/// The update log's figures (`--data-dir`).
fn durable(o: &mut Output, d: &kura_keyspace::Durable) {
    use std::sync::atomic::Ordering::Relaxed;
    let l = &d.stats;
    let lag = d.lag();
    let next = d.next_seq();
    reply::stat(o, "log_next_seq", next);
    reply::stat(o, "log_written_seq", lag.written());
    reply::stat(o, "log_synced_seq", l.synced.load(Relaxed));
    reply::stat(o, "log_bytes", l.bytes.load(Relaxed));
    reply::stat(o, "log_snapshots", l.snapshots.load(Relaxed));
    reply::stat(o, "log_snapshot_seq", l.snapshot_seq.load(Relaxed));
    reply::stat(
        o,
        "log_lag_records",
        (next - 1).saturating_sub(lag.written()),
    );
    reply::stat(o, "log_lag_bytes", lag.owed_bytes());
    reply::stat(
        o,
        "log_lag_seconds",
        format!("{:.6}", lag.age(next).as_secs_f64()),
    );
    reply::stat(o, "log_write_waits", lag.waits());
    let health = d.health();
    reply::stat(o, "log_write_errors", health.write_errors());
    reply::stat(o, "log_refusing_writes", u8::from(health.refusing()));
    reply::stat(
        o,
        "log_snapshots_skipped",
        l.snapshots_skipped.load(Relaxed),
    );
}

/// Replication's figures (docs/replication.md).
fn replication(o: &mut crate::output::Output, sh: &crate::shared::Shared) {
    use std::sync::atomic::Ordering::Relaxed;
    let ks = &*sh.keyspace;
    let r = ks.replication();
    let history = r
        .current_history(ks)
        .map_or_else(|| "-".to_string(), |h| h.id);
    match r.primary().filter(|_| r.is_replica()) {
        Some(primary) => {
            reply::stat(o, "repl_role", "replica");
            reply::stat(o, "repl_primary", primary);
            reply::stat(o, "repl_history", history);
            let up = r.link_up.load(Relaxed);
            reply::stat(o, "repl_link", if up { "up" } else { "down" });
            reply::stat(o, "repl_applied_seq", r.applied.load(Relaxed));
            reply::stat(o, "repl_lag_records", r.lag_records());
            reply::stat(o, "repl_lag_seconds", format!("{:.3}", r.lag_seconds()));
            let heard = r.heard_ms.load(Relaxed);
            let since = kura_keyspace::replication::primary::unix_millis().saturating_sub(heard);
            reply::stat(
                o,
                "repl_last_heard_seconds",
                if heard == 0 {
                    "-1".to_string()
                } else {
                    format!("{:.3}", since as f64 / 1000.0)
                },
            );
            reply::stat(o, "repl_partial_resyncs", r.replica_partial.load(Relaxed));
            reply::stat(o, "repl_full_resyncs", r.replica_full.load(Relaxed));
            let error = r.last_error.lock().clone();
            reply::stat(o, "repl_last_error", error.as_deref().unwrap_or("-"));
        }
        None => {
            reply::stat(o, "repl_role", "primary");
            reply::stat(o, "repl_history", history);
            reply::stat(o, "repl_replicas", r.replicas.load(Relaxed));
            reply::stat(o, "repl_acked_seq", r.acked.load(Relaxed));
            reply::stat(o, "repl_partial_resyncs", r.partial_resyncs.load(Relaxed));
            reply::stat(o, "repl_full_resyncs", r.full_resyncs.load(Relaxed));
        }
    }
    // The last record numbered (this server's or its primary's), and the
    // backlog replicas resume from.
    let backlog = match ks.durable() {
        Some(d) => Some(d.backlog()),
        None => r.journal.get().map(|j| j.backlog()),
    };
    let last = match ks.durable() {
        Some(d) => d.lag().written(),
        None => backlog.map_or(0, |b| b.last()),
    };
    reply::stat(o, "repl_written_seq", last);
    reply::stat(o, "repl_ack_waits", r.ack_waits.load(Relaxed));
    reply::stat(o, "repl_ack_timeouts", r.ack_timeouts.load(Relaxed));
    reply::stat(o, "repl_backlog_bytes", backlog.map_or(0, |b| b.bytes()));
    // Full resyncs holding what is written while they are sent (in the
    // backlog, or a data dir's log files), and holds given up at
    // --repl-resync-buffer.
    let on_disk = r
        .streams
        .lock()
        .iter()
        .filter(|s| s.resyncing.load(Relaxed))
        .count();
    reply::stat(
        o,
        "repl_resync_holds",
        backlog.map_or(0, |b| b.holds()) + on_disk,
    );
    reply::stat(
        o,
        "repl_resync_holds_lost",
        backlog.map_or(0, |b| b.holds_lost()),
    );
    // Each replica streaming from this server (a replica may have its own).
    for (i, s) in r.streams.lock().iter().enumerate() {
        let acked = s.acked.load(Relaxed);
        reply::stat(
            o,
            &format!("repl_replica_{i}"),
            format!(
                "addr={},acked_seq={acked},sent_seq={},lag_records={},lag_bytes={}",
                s.peer,
                s.sent.load(Relaxed),
                last.saturating_sub(acked),
                backlog.map_or_else(
                    || "-".to_string(),
                    |b| b
                        .bytes_after(acked)
                        .map_or_else(|| "-".into(), |n| n.to_string())
                )
            ),
        );
    }
}

/// `stats conns`: the listening sockets and the connections, by file
/// descriptor, as memcached lists them.
fn conns(s: &mut Session<'_>) {
    let now = s.shared.store.now();
    let since_start = now.saturating_sub(s.shared.started);
    let mut rows: Vec<(u64, Vec<(&str, String)>)> = Vec::new();
    for l in &s.shared.listeners {
        let mut fields = Vec::new();
        if l.udp {
            fields.push(("UDP", "UDP".to_string()));
        }
        fields.push(("addr", l.addr.clone()));
        let state = if l.udp { "conn_read" } else { "conn_listening" };
        fields.push(("state", state.to_string()));
        fields.push(("secs_since_last_cmd", since_start.to_string()));
        rows.push((l.id, fields));
    }
    for (id, addr, listen, state, last) in s.shared.conns.snapshot() {
        let fields = vec![
            ("addr", addr),
            ("listen_addr", listen),
            ("state", state.to_string()),
            ("secs_since_last_cmd", now.saturating_sub(last).to_string()),
        ];
        rows.push((id, fields));
    }
    rows.sort_by_key(|(id, _)| *id);
    for (id, fields) in rows {
        for (name, value) in fields {
            reply::stat(&mut s.out, &format!("{id}:{name}"), value);
        }
    }
}

pub(super) fn reset(s: &mut Session<'_>) {
    for t in &s.shared.thread_stats {
        t.reset();
    }
    s.shared.store.reset_stats();
    let c = &s.shared.counters;
    c.total.store(0, std::sync::atomic::Ordering::Relaxed);
    c.rejected.store(0, std::sync::atomic::Ordering::Relaxed);
    c.ssl_handshake_errors
        .store(0, std::sync::atomic::Ordering::Relaxed);
}

/// Appends the `STAT` lines of a group that lists figures (`None`: the
/// general one); false, appending nothing, for any other group.
pub(super) fn listing(s: &mut Session<'_>, group: Option<&[u8]>) -> bool {
    match group {
        None => general(s),
        Some(b"settings") => super::stats_settings::settings(s),
        Some(b"items") => super::stats_classes::items(s),
        Some(b"slabs") => super::stats_classes::slabs(s),
        Some(b"conns") => conns(s),
        Some(b"sizes") => reply::stat(&mut s.out, "sizes_status", "disabled"),
        _ => return false,
    }
    true
}

pub(super) fn run(s: &mut Session<'_>, req: &Stats<'_>) {
    if listing(s, req.group()) {
        s.out.extend_from_slice(reply::END);
        return;
    }
    match req.group() {
        Some(b"reset") => {
            reset(s);
            s.out.extend_from_slice(reply::RESET);
        }
        Some(b"detail") => {
            let msg: &[u8] = match req.args().next() {
                Some(b"on" | b"off" | b"dump") => {
                    b"CLIENT_ERROR kura does not keep per-prefix stats\r\n"
                }
                _ => b"CLIENT_ERROR usage: stats detail on|off|dump\r\n",
            };
            s.out.extend_from_slice(msg);
        }
        _ => s.out.extend_from_slice(b"ERROR\r\n"),
    }
}
