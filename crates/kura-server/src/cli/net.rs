//! The flags of the network (ports, addresses, sockets, authentication
//! and TLS switches, the Prometheus endpoint) and of the limits (memory,
//! connections, threads, items, protocol, what clients may do).

use super::{parse_size, CliError, CliPort, ServerArgs};
use crate::config::{Protocol, ServerConfig};

impl ServerArgs {
    /// Applies the network's flags to `c`.
    pub(super) fn apply_net(&mut self, c: &mut ServerConfig) -> Result<(), CliError> {
        c.sasl |= self.enable_sasl;
        if let Some(p) = self.auth_file.take() {
            c.auth_file = Some(p);
        }
        c.tls.enabled |= self.enable_ssl;
        // memcached: -U given without -p moves TCP to the UDP port too.
        let tcp_port = match (self.port, self.udp_port) {
            (None, Some(udp)) if udp != CliPort::Off => Some(udp),
            (tcp, _) => tcp,
        };
        match tcp_port {
            Some(CliPort::Off) => c.tcp = false,
            Some(CliPort::Free) => (c.tcp, c.port) = (true, 0),
            Some(CliPort::At(n)) => (c.tcp, c.port) = (true, n),
            None => {}
        }
        match self.udp_port {
            Some(CliPort::Off) => (c.udp_port, c.udp_free) = (0, false),
            Some(CliPort::Free) => (c.udp_port, c.udp_free) = (0, true),
            Some(CliPort::At(n)) => (c.udp_port, c.udp_free) = (n, false),
            None => {}
        }
        if let Some(v) = self.unix_socket.take() {
            c.unix_socket = Some(v);
        }
        if let Some(m) = self.unix_mask.take() {
            c.unix_mask = u32::from_str_radix(&m, 8).map_err(|_| CliError::BadMask(m))?;
        }
        c.enable_shutdown |= self.enable_shutdown;
        if !self.listen.is_empty() {
            c.listen = self
                .listen
                .iter()
                .flat_map(|l| l.split(','))
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
        }
        if let Some(v) = self.user.take() {
            c.user = Some(v);
        }
        if let Some(v) = self.pidfile.take() {
            c.pidfile = Some(v);
        }
        if let Some(v) = self.listen_backlog {
            c.backlog = v;
        }
        if let Some(v) = self.metrics_listen.take() {
            c.metrics_listen = Some(v);
        }
        Ok(())
    }

    /// Applies the flags of the limits and of what clients may do to `c`.
    pub(super) fn apply_limits(&mut self, c: &mut ServerConfig) -> Result<(), CliError> {
        if let Some(v) = self.memory_limit {
            c.memory_limit = v;
        }
        c.disable_evictions |= self.disable_evictions;
        if let Some(v) = self.conn_limit {
            c.max_connections = v;
        }
        c.verbosity = c.verbosity.max(self.verbose);
        if let Some(v) = self.threads {
            c.threads = v;
        }
        if let Some(v) = self.max_reqs_per_event {
            c.reqs_per_event = v;
        }
        c.disable_cas |= self.disable_cas;
        c.large_pages |= self.enable_largepages;
        if let Some(p) = self.protocol.take() {
            c.protocol = p.parse::<Protocol>().map_err(CliError::Protocol)?;
        }
        if let Some(s) = self.max_item_size.take() {
            c.item_size_max = parse_size(&s).ok_or(CliError::BadItemSize(s))?;
        }
        c.disable_flush_all |= self.disable_flush_all;
        c.disable_dumping |= self.disable_dumping;
        c.disable_watch |= self.disable_watch;
        if let Some(v) = self.shards {
            c.shards = v;
        }
        if let Some(v) = self.eviction.take() {
            c.eviction = v;
        }
        Ok(())
    }
}
