//! `sluice proxy`: a TCP proxy whose two directions run through sluice-core
//! qdiscs, configured through Toxiproxy's REST API, so that programs can be
//! tested under bad networks without privileges, and existing Toxiproxy
//! clients drive it unchanged. A proxy created with `"protocol":"udp"`
//! (sluice's own field) carries datagrams instead.
//!
//! - [`toxic`]: the toxics and their JSON form.
//! - [`pipe`]: one direction of a connection without I/O (segments through
//!   the toxics' stages, back in stream order).
//! - [`wire`]: the stage of a `bandwidth` or `latency` toxic that changes
//!   over time (a Mahimahi trace, a schedule, a delay trace).
//! - [`datagram`]: one direction of a UDP session without I/O (datagrams
//!   through the toxics' qdisc stages, lost and reordered as they are).
//! - [`conn`]: the proxies as the API holds them: started, stopped, told
//!   of toxic changes.
//! - [`event_loop`]: what the event loops share: their threads and the
//!   handle that stops them, the wait on epoll with a waker and a timer,
//!   the connections or sessions by slot with their wake-ups.
//! - [`reactor`]: a TCP proxy's event loops, a few threads for all of its
//!   connections.
//! - [`udp`]: a UDP proxy's event loop, one thread for all of its sessions.
//! - [`api`]: the REST API.

pub mod api;
pub mod conn;
pub mod datagram;
pub mod event_loop;
pub mod pipe;
pub mod reactor;
pub mod toxic;
pub mod udp;
pub mod wire;
