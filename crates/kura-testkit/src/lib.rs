//! Helpers shared by the test suites of kura's crates (a dev-dependency only; the client
//! and record benches' examples use its delaying relay too):
//!
//! * [`free_port`]: ports for test servers;
//! * [`process`]: children killed and reaped on drop, waited for until they listen;
//! * [`tools`]: third-party programs located (memcached, Redis), skipped with a message
//!   when missing, a failure under CI (`CI=true` or `KURA_REQUIRE_MEMCACHED=1`);
//! * [`memcached`]: Debian's memcached as the differential tests run it;
//! * [`servers`]: `kura server` processes of this workspace, Debian's memcached and a
//!   private redis-server, each on a free port;
//! * [`fake`]: servers that never answer, or answer what the test says;
//! * [`relay`]: TCP relays between a test and a server: delaying (a network stand-in on
//!   loopback), gated (lets a budget of bytes through, then holds), holding (replies held
//!   back until opened);
//! * [`pki`]: a throwaway CA and certificates for TLS tests;
//! * [`netns`]: test hosts in network namespaces, with links that can be slowed, made lossy
//!   or cut (root, iproute2 and nftables);
//! * [`values`]: test values that only one key has.

pub mod fake;
pub mod memcached;
pub mod netns;
pub mod pki;
mod ports;
pub mod process;
pub mod relay;
pub mod servers;
pub mod tools;
pub mod values;

pub use ports::free_port;
pub use process::{addrs, ChildGuard, Proc};
