//! sluice-sim: the discrete-event simulator behind `sluice sim`.
//!
//! # Layout
//!
//! - [`tcp`]: a Linux-faithful TCP endpoint in sans-IO form (CUBIC/Reno,
//!   SACK, RACK-TLP, PRR, RTO, delayed ACKs, window scaling, ECN) and the
//!   wire format of its segments (real IPv4 + TCP header bytes).
//! - [`web`]: web page loads (HTTP/1.1 over up to 6 connections, or one
//!   multiplexed connection, with or without TLS) and the server answering them.
//! - [`limits`]: the type and range of every value of a scenario file, and
//!   the packet budget of a run ([`run`] checks them before anything runs).
//! - [`plot`]: SVG and PNG charts of a run's RTT, goodput and page loads over
//!   time, and of a time-varying link's capacity and queueing delay.
//! - [`varying`]: links whose capacity or delay change (Mahimahi traces,
//!   generated models, schedules, delay traces) and the capacity they offer.
//! - [`events`]: a scenario's timed events (commands on a node, link changes).
//! - [`sweep`]: a scenario over a grid of its variables and many seeds, as one tidy table.
//! - [`sweep_plot`]: a sweep's results as SVG and PNG charts (`sluice sweep --plot`).
//! - [`bundled`]: the scenarios shipped in `examples/`, by name, and the files
//!   they refer to.
//!
//! Nothing here reads a clock or a global RNG: every call takes `now`
//! (virtual time from the engine), so a run is a pure function of its inputs.
#![warn(missing_docs)]

pub mod bundled;
pub mod engine;
pub mod events;
pub mod host;
pub mod ip;
pub mod limits;
pub mod plot;
pub mod report;
pub mod run;
pub mod scenario;
pub mod sweep;
pub mod sweep_plot;
pub mod sysctl;
pub mod tcp;
pub mod varying;
pub mod web;
pub mod world;
