//! sluice-sim: the discrete-event simulator behind `sluice sim`.
//!
//! # Layout
//!
//! - [`tcp`]: a Linux-faithful TCP endpoint in sans-IO form (CUBIC/Reno,
//!   SACK, RACK-TLP, PRR, RTO, delayed ACKs, window scaling, ECN) and the
//!   wire format of its segments (real IPv4 + TCP header bytes).
//!
//! Nothing here reads a clock or a global RNG: every call takes `now`
//! (virtual time from the engine), so a run is a pure function of its inputs.
#![warn(missing_docs)]

pub mod tcp;
pub mod engine;
pub mod host;
pub mod ip;
pub mod world;
pub mod report;
pub mod run;
pub mod scenario;
