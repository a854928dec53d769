//! kura-server: the network server behind `kura server`, a drop-in
//! replacement for memcached 1.6 speaking the text, meta and binary
//! protocols over TCP (optionally TLS), Unix sockets and UDP: the memcached
//! front end of a [`kura_keyspace::Keyspace`], which holds the keys (store,
//! tables, update log, replication).
//!
//! A request flows: [`conn`] reads bytes into a per-connection buffer,
//! `kura_proto::parse` frames one request at a time, [`exec::Session`] runs
//! it against the keyspace's [`kura_store::Store`] (or a table) and appends
//! the reply to one output buffer, and the connection writes every reply
//! of the batch at once, after the keyspace settles the batch's writes
//! (their `Ticket`) as `--fsync` and `--min-replicas-ack` ask.

pub mod auth;
pub mod budget;
pub mod cli;
pub mod config;
mod conn;
mod error;
pub mod exec;
pub mod inspect;
pub mod latency;
pub mod metrics;
pub mod output;
pub mod port_file;
pub mod prometheus;
pub mod reload;
mod server;
pub mod shared;
mod stop;
use kura_timer as timer;
pub mod tls;
pub mod tracking;
mod udp;

pub use cli::{ProcessOptions, ServerArgs};
pub use config::{LogFormat, Protocol, ServerConfig, WorkerLoop};
pub use error::ServerError;
pub use server::{Server, ServerHandle};
pub use shared::{Shared, KURA_VERSION, VERSION};
pub use tls::TlsConfig;
