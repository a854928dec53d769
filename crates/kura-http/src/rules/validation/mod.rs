//! Validation (RFC 9111 §4.3): entity tags ([`etag`]), the conditional request to the backend
//! ([`conditional`]), a 304's update of stored responses ([`update`]) and answering a client's
//! own conditional request from the cache ([`client`]).

pub mod client;
pub mod conditional;
pub mod etag;
pub mod update;
