//! sluice-fuzz: the bodies of sluice's cargo-fuzz targets (`fuzz_targets/`),
//! one function per target, so they can also run over a fixed corpus on a
//! stable compiler (`crates/sluice-tc/tests/roundtrip.rs` runs the tc, ip
//! and u32 ones in CI). Every body must return normally for any input.
//!
//! - [`tc_parser`]: tc commands against a veth pair, then every listing.
//! - [`ip_parser`]: ip commands against a fresh namespace.
//! - [`packet_parser`]: bytes as an IPv4 packet, through the simulator's
//!   parsers and the Ultimate Traffic Conditioner's u32 filters.
//! - [`scenario_parser`]: text as a scenario file, built and run for 1 ms.
//! - [`iptables_parser`]: iptables commands, every listing, packets through the hooks.
//! - [`proxy_api`]: requests to the proxy's REST API (never binding sockets).
//! - [`proxy_http`]: raw bytes to the REST API's HTTP server over a socket.
//! - [`trace_parser`]: text as a Mahimahi trace, a delay trace and a
//!   schedule; a port driven by each that parses.
//! - [`pcap_reader`]: bytes as a capture, replayed as `sluice replay` does.

pub mod iptables_body;
pub mod pcap_body;
pub mod proxy_body;
pub mod proxy_http;
pub mod sim_bodies;
pub mod tc_bodies;
pub mod trace_body;

pub use iptables_body::iptables_parser;
pub use pcap_body::pcap_reader;
pub use proxy_body::proxy_api;
pub use proxy_http::proxy_http;
pub use sim_bodies::{packet_parser, scenario_parser};
pub use tc_bodies::{ip_parser, tc_parser};
pub use trace_body::trace_parser;
