//! `sluice proxy`: a TCP proxy whose two directions run through sluice-core
//! qdiscs, configured through Toxiproxy's REST API, so that programs can be
//! tested under bad networks without privileges, and existing Toxiproxy
//! clients drive it unchanged. A proxy created with `"protocol":"udp"`
//! (sluice's own field) carries datagrams instead.
//!
//! - [`toxic`]: the toxics and their JSON form.
//! - [`pipe`]: one direction of a connection without I/O (segments through
//!   the toxics' stages, back in stream order).
//! - [`datagram`]: one direction of a UDP session without I/O (datagrams
//!   through the toxics' qdisc stages, lost and reordered as they are).
//! - [`conn`]: a proxy's sockets: its TCP event loop, its UDP sessions.
//! - [`reactor`]: a TCP proxy's event loop, one thread for all of its
//!   connections.
//! - [`api`]: the REST API.

pub mod api;
pub mod conn;
pub mod datagram;
pub mod pipe;
pub mod reactor;
pub mod toxic;
