//! sluice-net: the live data plane. Real packets of real programs run
//! through sluice-core devices between network namespaces joined by TUN
//! devices (the Mahimahi model), with live `sluice tc` changes.
//!
//! # Layout
//!
//! - [`plane`]: the forwarding engine without I/O: two directions, each an
//!   egress `Device`, a `Port` wire and a delay line, then the far side's
//!   ingress. Driven by any clock; unit-tested in virtual time.
//! - [`io`]: the packet I/O trait, with an in-memory loopback for tests.
//! - [`tun`]: TUN devices (Linux) with offloads, the real [`io::PacketIo`].
//! - [`vnet`]: the virtio-net header: GSO and checksum offload metadata.
//! - [`awake`]: pollers that keep a virtual machine's CPUs out of their
//!   idle halt while the link carries traffic (wake-ups within microseconds).
//! - [`clock`]: the monotonic clock and a precise timer (timerfd plus a
//!   short busy-wait tail).
//! - [`link`]: `sluice link up/down/list`: namespaces, addresses, the
//!   links directory, leftovers of killed daemons.
//! - [`daemon`]: the event loop that carries a link's packets.
//! - [`control`]: the owner-only Unix control socket: `sluice tc -n LINK`.
//! - [`control_thread`]: the thread that reads the control socket's
//!   requests (bounded in size, time and number) off the packet path.
//! - [`rootless`]: links made without root, inside a user namespace.
//! - [`wire`]: traces, schedules and settings a wire starts with or is
//!   changed to (`sluice link up --trace-ab`, `sluice link set`).
//! - [`mmlog`]: Mahimahi's link log, written from a direction's events.
//! - [`shell`]: `sluice shell`: a command in a namespace behind a link, NAT to the host.
//! - [`traffic`]: bulk TCP and UDP floods between namespaces, and a kernel veth pair (`sluice bench live`).
//!
//! Everything here except `plane` and `io` is Linux-only I/O at the edge.
#![warn(missing_docs)]

pub mod awake;
pub mod clock;
pub mod control;
pub mod control_thread;
pub mod daemon;
pub mod io;
pub mod link;
pub mod mmlog;
pub mod plane;
pub mod rootless;
pub mod shell;
pub mod traffic;
pub mod tun;
pub mod vnet;
pub mod wire;
