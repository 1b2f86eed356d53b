//! sluice-core: Linux traffic control as a sans-IO library.
//!
//! # Layout
//!
//! - [`time`]: nanosecond [`time::Time`] and psched ticks; the caller owns the clock.
//! - [`units`]: rates, sizes and times parsed and printed exactly as tc(8) does.
//! - [`rate`]: the kernel's `psched_ratecfg` (length to transmission time).
//! - [`handle`]: `major:minor` handles.
//! - [`packet`]: the packet and the skb metadata qdiscs read.
//! - [`gso`]: GSO packets: their accounted length, software segmentation, checksum completion.
//! - [`stats`]: counters, drop reasons and the rate estimator.
//! - [`qdisc`]: the [`qdisc::Qdisc`] trait, the stats-keeping [`qdisc::QdiscNode`], one file per qdisc.
//! - [`act`]: actions (police, gact) and the per-namespace action table.
//! - [`cls`]: classifiers and the filter blocks qdiscs hold.
//! - [`netfilter`]: iptables mangle/filter tables and the connection table (marks for fw, CLASSIFY).
//! - [`device`]: a device's qdisc tree and the kernel's rules for changing it.
//! - [`port`]: a device drained into a transmit ring, a wire of some rate, a delay.
//! - [`trace`], [`schedule`]: wires that change over time (Mahimahi traces, delay traces, schedules).
//! - [`error`]: refusals shaped like the kernel's netlink answers.
//!
//! Nothing here reads a clock, touches a file or socket, or uses a global RNG:
//! time and seeds come in from the front ends (sluice-tc, the simulator, the
//! live data plane).
#![warn(missing_docs)]

pub mod act;
pub mod cls;
pub mod device;
pub mod error;
pub mod gso;
pub mod handle;
pub mod netfilter;
pub mod packet;
pub mod port;
pub mod qdisc;
pub mod rate;
pub mod schedule;
pub mod stab;
pub mod stats;
pub mod time;
pub mod trace;
pub mod trace_model;
pub mod units;
