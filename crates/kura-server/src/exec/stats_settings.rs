//! `stats settings`: every line memcached 1.6.18 prints, in its order,
//! then kura's own. Settings of memcached internals kura does not have
//! (slab allocator, segmented LRU and its maintainer, crawler, logger,
//! extstore) show what memcached shows with the feature off: `no`, 0, or
//! its unset path; docs/compatibility.md lists them.

use kura_proto::reply;

use super::Session;

pub(super) fn settings(s: &mut Session<'_>) {
    let c = &s.shared.config;
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let maxbytes = s.shared.store.stats().limit_maxbytes;
    let o = &mut s.out;
    // The memory limit in force: `cache_memlimit` changes it, as in memcached.
    reply::stat(o, "maxbytes", maxbytes);
    reply::stat(o, "maxconns", c.max_connections);
    reply::stat(o, "tcpport", c.port);
    reply::stat(o, "udpport", c.udp_port);
    reply::stat(o, "inter", c.listen.join(","));
    reply::stat(o, "verbosity", s.shared.verbosity());
    reply::stat(o, "oldest", 0);
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
    reply::stat(o, "growth_factor", "0.00");
    reply::stat(o, "chunk_size", 0);
    reply::stat(o, "num_threads", c.threads);
    // UDP is served by one thread, the acceptor.
    reply::stat(o, "num_threads_per_udp", 1);
    reply::stat(o, "stat_key_prefix", ":");
    reply::stat(o, "detail_enabled", "no");
    reply::stat(o, "reqs_per_event", c.reqs_per_event);
    reply::stat(o, "cas_enabled", yes_no(!c.disable_cas));
    reply::stat(o, "tcp_backlog", c.backlog);
    reply::stat(o, "binding_protocol", c.effective_protocol().stats_name());
    reply::stat(o, "auth_enabled_sasl", yes_no(c.sasl));
    // memcached names the file when ASCII authentication is on.
    let ascii_auth = match (&c.auth_file, c.sasl) {
        (Some(path), false) => path.display().to_string(),
        _ => "no".to_string(),
    };
    reply::stat(o, "auth_enabled_ascii", ascii_auth);
    reply::stat(o, "item_size_max", c.item_size_max);
    reply::stat(o, "maxconns_fast", "yes");
    reply::stat(o, "hashpower_init", 0);
    reply::stat(o, "slab_reassign", "no");
    reply::stat(o, "slab_automove", 0);
    reply::stat(o, "slab_automove_ratio", "0.00");
    reply::stat(o, "slab_automove_window", 0);
    reply::stat(o, "slab_chunk_max", 0);
    let crawler = &s.shared.inspect.crawler;
    let load = |a: &std::sync::atomic::AtomicU32| a.load(std::sync::atomic::Ordering::Relaxed);
    reply::stat(
        o,
        "lru_crawler",
        yes_no(crawler.enabled.load(std::sync::atomic::Ordering::Relaxed)),
    );
    reply::stat(o, "lru_crawler_sleep", load(&crawler.sleep));
    reply::stat(o, "lru_crawler_tocrawl", load(&crawler.tocrawl));
    reply::stat(o, "tail_repair_time", 0);
    reply::stat(o, "flush_enabled", yes_no(!c.disable_flush_all));
    reply::stat(o, "dump_enabled", yes_no(!c.disable_dumping));
    reply::stat(o, "hash_algorithm", "foldhash");
    reply::stat(o, "lru_maintainer_thread", "no");
    reply::stat(o, "lru_segmented", "no");
    reply::stat(o, "hot_lru_pct", 0);
    reply::stat(o, "warm_lru_pct", 0);
    reply::stat(o, "hot_max_factor", "0.00");
    reply::stat(o, "warm_max_factor", "0.00");
    reply::stat(o, "temp_lru", "no");
    reply::stat(o, "temporary_ttl", 0);
    reply::stat(o, "idle_timeout", c.idle_timeout);
    reply::stat(o, "watcher_logbuf_size", crate::inspect::watch::QUEUE_MAX);
    reply::stat(o, "worker_logbuf_size", 0);
    reply::stat(o, "read_buf_mem_limit", 0);
    reply::stat(o, "track_sizes", "no");
    reply::stat(o, "inline_ascii_response", "no");
    ext_settings(o, s.shared);
    tls_settings(o, &c.tls);
    reply::stat(o, "num_napi_ids", "(null)");
    reply::stat(o, "memory_file", "(null)");
    // kura's own settings, after all of memcached's.
    reply::stat(o, "store_shards", s.shared.store.shard_count());
    reply::stat(o, "eviction_policy", &c.eviction);
    reply::stat(o, "worker_slice_us", c.worker_slice_us);
    if c.worker_cpulist.is_empty() {
        reply::stat(o, "worker_cpulist", "(null)");
    } else {
        let cpus: Vec<String> = c.worker_cpulist.iter().map(|c| c.to_string()).collect();
        reply::stat(o, "worker_cpulist", cpus.join(":"));
    }
    // The loop plain connections are served by, as the settings turned out.
    let worker_loop = if crate::conn::direct::enabled(s.shared) {
        crate::config::WorkerLoop::Direct
    } else {
        crate::config::WorkerLoop::Tasks
    };
    reply::stat(o, "worker_loop", worker_loop.name());
}

/// memcached's `ext_*` lines, in its order (`slab_automove_freeratio`
/// comes between them): the flash tier's settings as it runs them, or
/// as configured when there is no tier.
fn ext_settings(o: &mut Vec<u8>, shared: &crate::shared::Shared) {
    let f = &shared.config.flash;
    let running = shared.store.flash_config();
    let (compact_under, drop_under) = running.map_or((f.compact_under, f.drop_under), |r| {
        (r.compact_under, r.drop_under)
    });
    reply::stat(o, "ext_item_size", f.item_size);
    reply::stat(o, "ext_item_age", f.item_age);
    reply::stat(o, "ext_low_ttl", 0);
    reply::stat(o, "ext_recache_rate", f.recache_rate);
    reply::stat(o, "ext_wbuf_size", f.wbuf_size_mb << 20);
    reply::stat(o, "ext_compact_under", compact_under);
    reply::stat(o, "ext_drop_under", drop_under);
    reply::stat(o, "ext_max_sleep", kura_store::FLASH_MAINTAIN_EVERY_US);
    reply::stat(o, "ext_max_frag", format!("{:.2}", f.max_frag));
    reply::stat(o, "slab_automove_freeratio", "0.000");
    reply::stat(
        o,
        "ext_drop_unread",
        if f.drop_unread { "yes" } else { "no" },
    );
}

/// memcached's `ssl_*` settings lines. `ssl_ciphers` and `ssl_wbuf_size`
/// are memcached's unset values (rustls picks its suites and buffers),
/// `ssl_kernel_tls` is `no`.
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
    reply::stat(o, "ssl_ciphers", "NULL");
    reply::stat(o, "ssl_ca_cert", path(&t.ca_cert, "NULL"));
    reply::stat(o, "ssl_wbuf_size", 0);
    reply::stat(o, "ssl_session_cache", "yes");
    reply::stat(o, "ssl_kernel_tls", "no");
    reply::stat(o, "ssl_min_version", t.min_version.stats_name());
}
