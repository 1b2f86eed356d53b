//! sluice-tc: the `tc`, `ip` and `iptables` command languages over sluice-core.
//!
//! # Layout
//!
//! - [`args`]: iproute2's argument conventions (prefix matching, stock errors).
//! - [`out`]: text and JSON output exactly as iproute2's printers write it.
//! - [`net`]: a namespace's devices and per-namespace counters.
//! - [`tc`]: `tc qdisc|class ...`: parse, apply to a device, print.
//! - [`filter`]: `tc filter` and `tc chain`; [`action`]: `tc actions`.
//! - [`ip`]: `ip link`, `ip address` and `ip route` (`ipaddr`), over the
//!   namespace's addresses and routes ([`l3`]).
//! - [`iptables`]: `iptables` for the mangle and filter tables (marks for fw, CLASSIFY).
//! - [`state`]: the state directory: commands persist between invocations.
//! - [`tc_core`]: iproute2's byte/time/tick conversions.
//! - `q/`: per-kind option syntax, one file per qdisc kind.
//!
//! Every command yields an [`Outcome`]: stdout, stderr and exit status, as the
//! iproute2 tool would have produced them.
#![warn(missing_docs)]

pub mod action;
pub mod args;
mod f;
pub mod filter;
mod graph;
pub mod ip;
mod ipaddr;
pub mod iptables;
pub mod l3;
mod m;
pub mod net;
pub mod out;
mod q;
pub mod state;
pub mod tc;
pub mod tc_core;

/// What a command printed and how it exited.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Exit status.
    pub code: i32,
}
