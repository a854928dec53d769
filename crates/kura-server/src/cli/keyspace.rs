//! The flags of the keyspace: the data dir and its log, replication, and
//! the fixed-length tables.

use super::{parse_bytes, CliError, ServerArgs};
use crate::config::ServerConfig;

impl ServerArgs {
    /// Applies the keyspace's flags to `c`.
    pub(super) fn apply_keyspace(&mut self, c: &mut ServerConfig) -> Result<(), CliError> {
        if let Some(v) = self.data_dir.take() {
            c.data_dir = Some(v);
        }
        if let Some(v) = self.fsync.take() {
            c.fsync = v;
        }
        self.apply_replication(c)?;
        if let Some(s) = self.log_file_size.take() {
            c.log_file_size = parse_bytes(&s).ok_or(CliError::BadBytes("--log-file-size", s))?;
        }
        if let Some(s) = self.snapshot_log_size.take() {
            c.snapshot_log_size =
                parse_bytes(&s).ok_or(CliError::BadBytes("--snapshot-log-size", s))?;
        }
        if let Some(v) = self.snapshot_interval {
            c.snapshot_interval = v;
        }
        if let Some(v) = self.log_max_lag {
            c.log_max_lag = v;
        }
        if let Some(s) = self.log_max_lag_bytes.take() {
            c.log_max_lag_bytes =
                parse_bytes(&s).ok_or(CliError::BadBytes("--log-max-lag-bytes", s))?;
        }
        for t in std::mem::take(&mut self.table) {
            c.tables.push(t.parse()?);
        }
        Ok(())
    }

    /// Applies replication's flags to `c`.
    fn apply_replication(&mut self, c: &mut ServerConfig) -> Result<(), CliError> {
        if let Some(v) = self.replica_of.take() {
            c.replica_of = Some(v);
        }
        if let Some(v) = self.min_replicas_ack {
            c.min_replicas_ack = v;
        }
        if let Some(v) = self.min_replicas_timeout {
            c.min_replicas_timeout_ms = v;
        }
        if let Some(v) = self.replica_auth_file.take() {
            c.replica_auth_file = Some(v);
        }
        c.replica_sasl |= self.replica_sasl;
        if self.replica_tls_ca.is_some() {
            c.replica_tls.ca = self.replica_tls_ca.take();
        }
        if self.replica_tls_name.is_some() {
            c.replica_tls.name = self.replica_tls_name.take();
        }
        if self.replica_tls_cert.is_some() {
            c.replica_tls.cert = self.replica_tls_cert.take();
            c.replica_tls.key = self.replica_tls_key.take();
        }
        if let Some(s) = self.repl_backlog_size.take() {
            c.repl_backlog_size =
                parse_bytes(&s).ok_or(CliError::BadBytes("--repl-backlog-size", s))?;
        }
        if let Some(s) = self.repl_resync_buffer.take() {
            c.repl_resync_buffer =
                parse_bytes(&s).ok_or(CliError::BadBytes("--repl-resync-buffer", s))?;
        }
        Ok(())
    }
}
