//! TCP relays a test puts between a client and a server, on loopback:
//!
//! * [`delay`]: every chunk delayed by a fixed time each way (a network stand-in; this
//!   kernel has no netem), used by the client and record benches too;
//! * [`gate`]: the clients' first bytes through, the rest held until released;
//! * [`hold`]: the server's replies held back (a byte trickling) until opened.

pub mod delay;
pub mod gate;
pub mod hold;

pub use gate::{gated_relay, Gate};
pub use hold::HoldingRelay;
