//! `stats` and its groups, with memcached's names for every figure that
//! applies to kura (so dashboards and exporters keep working), in
//! memcached's order. kura has no slab classes: `stats items` and `stats
//! slabs` report everything as class 1.

use kura_proto::{reply, Stats};

use super::Session;

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

fn general(s: &mut Session<'_>) {
    let sh = s.shared;
    let now = sh.store.now();
    let t = sh.totals();
    let st = sh.store.stats();
    let (user, system) = rusage();
    let curr = sh.counters.curr.load(std::sync::atomic::Ordering::Relaxed);
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let o = &mut s.out;
    reply::stat(o, "pid", sh.pid);
    reply::stat(o, "uptime", now.saturating_sub(sh.started));
    reply::stat(o, "time", now);
    reply::stat(o, "version", crate::shared::VERSION);
    reply::stat(o, "pointer_size", usize::BITS);
    reply::stat(o, "rusage_user", user);
    reply::stat(o, "rusage_system", system);
    reply::stat(o, "max_connections", sh.config.max_connections);
    reply::stat(o, "curr_connections", curr);
    reply::stat(o, "total_connections", load(&sh.counters.total));
    reply::stat(o, "rejected_connections", load(&sh.counters.rejected));
    reply::stat(o, "connection_structures", curr);
    reply::stat(o, "cmd_get", t.cmd_get);
    reply::stat(o, "cmd_set", t.cmd_set);
    reply::stat(o, "cmd_flush", t.cmd_flush);
    reply::stat(o, "cmd_touch", t.cmd_touch);
    reply::stat(o, "cmd_meta", t.cmd_meta);
    reply::stat(o, "get_hits", t.get_hits);
    reply::stat(o, "get_misses", t.get_misses);
    reply::stat(o, "get_expired", st.get_expired);
    reply::stat(o, "get_flushed", 0);
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
    reply::stat(o, "bytes", st.bytes);
    reply::stat(o, "curr_items", st.curr_items);
    reply::stat(o, "total_items", st.total_items);
    reply::stat(o, "expired_unfetched", st.expired_unfetched);
    reply::stat(o, "evicted_unfetched", st.evicted_unfetched);
    reply::stat(o, "evictions", st.evictions);
    reply::stat(o, "reclaimed", st.reclaimed);
    reply::stat(o, "crawler_reclaimed", st.crawler_reclaimed);
    reply::stat(o, "store_shards", st.shards);
    reply::stat(o, "kura_version", crate::shared::KURA_VERSION);
    if let Some(tls) = &sh.tls {
        let errors = load(&sh.counters.ssl_handshake_errors);
        reply::stat(o, "ssl_handshake_errors", errors);
        reply::stat(
            o,
            "time_since_server_cert_refresh",
            now.saturating_sub(tls.loaded_at),
        );
    }
    if let Some(d) = &sh.durable {
        use std::sync::atomic::Ordering::Relaxed;
        let l = &d.stats;
        reply::stat(o, "log_next_seq", d.next_seq());
        reply::stat(o, "log_written_seq", l.written.load(Relaxed));
        reply::stat(o, "log_synced_seq", l.synced.load(Relaxed));
        reply::stat(o, "log_bytes", l.bytes.load(Relaxed));
        reply::stat(o, "log_snapshots", l.snapshots.load(Relaxed));
        reply::stat(o, "log_snapshot_seq", l.snapshot_seq.load(Relaxed));
    }
}

fn settings(s: &mut Session<'_>) {
    let c = &s.shared.config;
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let o = &mut s.out;
    reply::stat(o, "maxbytes", c.memory_bytes());
    reply::stat(o, "maxconns", c.max_connections);
    reply::stat(o, "tcpport", c.port);
    reply::stat(o, "udpport", c.udp_port);
    reply::stat(o, "inter", c.listen.join(","));
    reply::stat(o, "verbosity", s.shared.verbosity());
    reply::stat(
        o,
        "evictions",
        if c.disable_evictions { "off" } else { "on" },
    );
    reply::stat(
        o,
        "domain_socket",
        c.unix_socket
            .as_ref()
            .map_or("NULL".to_string(), |p| p.display().to_string()),
    );
    reply::stat(o, "umask", format!("{:o}", c.unix_mask));
    reply::stat(o, "shutdown_command", yes_no(c.enable_shutdown));
    reply::stat(o, "num_threads", c.threads);
    reply::stat(o, "reqs_per_event", c.reqs_per_event);
    reply::stat(o, "cas_enabled", yes_no(!c.disable_cas));
    reply::stat(o, "tcp_backlog", c.backlog);
    reply::stat(o, "binding_protocol", c.effective_protocol().stats_name());
    reply::stat(o, "auth_enabled_sasl", yes_no(c.sasl));
    reply::stat(
        o,
        "auth_enabled_ascii",
        yes_no(!c.sasl && c.auth_file.is_some()),
    );
    reply::stat(o, "item_size_max", c.item_size_max);
    reply::stat(o, "maxconns_fast", "yes");
    reply::stat(o, "flush_enabled", yes_no(!c.disable_flush_all));
    reply::stat(o, "idle_timeout", c.idle_timeout);
    tls_settings(o, &c.tls);
    reply::stat(o, "store_shards", s.shared.store.shard_count());
    reply::stat(o, "eviction_policy", &c.eviction);
}

/// memcached's `ssl_*` settings lines, for the options kura has (not
/// `ssl_ciphers`, `ssl_wbuf_size`: rustls picks its suites and buffers).
fn tls_settings(o: &mut Vec<u8>, t: &crate::tls::TlsConfig) {
    // memcached prints an unset path as C's "(null)" and an unset CA as "NULL".
    let path = |p: &Option<std::path::PathBuf>, none: &str| {
        p.as_ref()
            .map_or(none.to_string(), |p| p.display().to_string())
    };
    reply::stat(o, "ssl_enabled", if t.enabled { "yes" } else { "no" });
    reply::stat(o, "ssl_chain_cert", path(&t.chain_cert, "(null)"));
    reply::stat(o, "ssl_key", path(&t.key, "(null)"));
    reply::stat(o, "ssl_verify_mode", t.verify_mode.stats_value());
    reply::stat(o, "ssl_keyformat", 1);
    reply::stat(o, "ssl_ca_cert", path(&t.ca_cert, "NULL"));
    reply::stat(o, "ssl_session_cache", "yes");
    reply::stat(o, "ssl_min_version", t.min_version.stats_name());
}

fn items(s: &mut Session<'_>) {
    let st = s.shared.store.stats();
    if st.curr_items == 0 {
        return;
    }
    let o = &mut s.out;
    reply::stat(o, "items:1:number", st.curr_items);
    reply::stat(o, "items:1:mem_requested", st.bytes);
    reply::stat(o, "items:1:evicted", st.evictions);
    reply::stat(o, "items:1:evicted_nonzero", st.evicted_nonzero);
    reply::stat(o, "items:1:outofmemory", st.out_of_memory);
    reply::stat(o, "items:1:reclaimed", st.reclaimed);
    reply::stat(o, "items:1:expired_unfetched", st.expired_unfetched);
    reply::stat(o, "items:1:evicted_unfetched", st.evicted_unfetched);
    reply::stat(o, "items:1:crawler_reclaimed", st.crawler_reclaimed);
}

fn slabs(s: &mut Session<'_>) {
    let st = s.shared.store.stats();
    let t = s.shared.totals();
    let o = &mut s.out;
    if st.curr_items > 0 {
        reply::stat(o, "1:used_chunks", st.curr_items);
        reply::stat(o, "1:get_hits", t.get_hits);
        reply::stat(o, "1:cmd_set", t.cmd_set);
        reply::stat(o, "1:delete_hits", t.delete_hits);
        reply::stat(o, "1:incr_hits", t.incr_hits);
        reply::stat(o, "1:decr_hits", t.decr_hits);
        reply::stat(o, "1:cas_hits", t.cas_hits);
        reply::stat(o, "1:cas_badval", t.cas_badval);
        reply::stat(o, "1:touch_hits", t.touch_hits);
    }
    reply::stat(o, "active_slabs", u8::from(st.curr_items > 0));
    reply::stat(o, "total_malloced", st.bytes);
}

fn conns(s: &mut Session<'_>) {
    let now = s.shared.store.now();
    for (id, addr, listen, state, last) in s.shared.conns.snapshot() {
        reply::stat(&mut s.out, &format!("{id}:addr"), addr);
        reply::stat(&mut s.out, &format!("{id}:listen_addr"), listen);
        reply::stat(&mut s.out, &format!("{id}:state"), state);
        reply::stat(
            &mut s.out,
            &format!("{id}:secs_since_last_cmd"),
            now.saturating_sub(last),
        );
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
        Some(b"settings") => settings(s),
        Some(b"items") => items(s),
        Some(b"slabs") => slabs(s),
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
        Some(b"cachedump") => {
            s.out
                .extend_from_slice(b"CLIENT_ERROR stats cachedump not allowed\r\n");
        }
        _ => s.out.extend_from_slice(b"ERROR\r\n"),
    }
}
