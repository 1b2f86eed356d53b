//! Results of a run, in the shape of the seed documents' tables: ping
//! min/avg/median/max and loss, per-flow goodput and share.

use crate::host::BIN;
use crate::world::LossCounters;
use sluice_core::time::{Duration, Time};
use std::collections::BTreeMap;

/// One ping workload's round-trip times.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PingResult {
    /// Label.
    pub name: String,
    /// Requests sent.
    pub sent: u64,
    /// Replies received.
    pub received: u64,
    /// Milliseconds.
    pub min_ms: f64,
    /// Milliseconds.
    pub avg_ms: f64,
    /// Milliseconds.
    pub median_ms: f64,
    /// Milliseconds.
    pub max_ms: f64,
    /// Percent of requests without a reply.
    pub loss_pct: f64,
    /// `(seconds since start, rtt ms)` for plots.
    pub series: Vec<(f64, f64)>,
}

impl PingResult {
    /// Summarize `(sent at, rtt)` samples.
    pub fn from_samples(name: &str, sent: u64, rtts: &[(Time, Duration)]) -> Self {
        let mut ms: Vec<f64> = rtts.iter().map(|(_, d)| d.0 as f64 / 1e6).collect();
        let series = rtts.iter().map(|(t, d)| (t.0 as f64 / 1e9, d.0 as f64 / 1e6)).collect();
        ms.sort_by(|a, b| a.total_cmp(b));
        let n = ms.len();
        let median = if n == 0 {
            0.0
        } else if n % 2 == 1 {
            ms[n / 2]
        } else {
            (ms[n / 2 - 1] + ms[n / 2]) / 2.0
        };
        PingResult {
            name: name.to_string(),
            sent,
            received: n as u64,
            min_ms: ms.first().copied().unwrap_or(0.0),
            avg_ms: if n > 0 { ms.iter().sum::<f64>() / n as f64 } else { 0.0 },
            median_ms: median,
            max_ms: ms.last().copied().unwrap_or(0.0),
            loss_pct: if sent > 0 { 100.0 * (sent - n as u64) as f64 / sent as f64 } else { 0.0 },
            series,
        }
    }
}

/// One flow's delivered bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlowResult {
    /// Label.
    pub name: String,
    /// `udp` or `tcp`.
    pub kind: String,
    /// Bytes delivered to the receiving application.
    pub bytes: u64,
    /// Average goodput over the flow's active time, Mbit/s.
    pub goodput_mbps: f64,
    /// Share of the total goodput of all flows in the run, 0..1.
    pub share: f64,
    /// `(seconds, Mbit/s)` per bin, for plots.
    pub series: Vec<(f64, f64)>,
}

impl FlowResult {
    /// A flow that delivered `bytes` over `secs` seconds, with per-bin counts.
    pub fn new(name: &str, kind: &str, bytes: u64, secs: f64, bins: &BTreeMap<u64, u64>) -> Self {
        let bin_s = BIN.0 as f64 / 1e9;
        FlowResult {
            name: name.to_string(),
            kind: kind.to_string(),
            bytes,
            goodput_mbps: if secs > 0.0 { bytes as f64 * 8.0 / secs / 1e6 } else { 0.0 },
            share: 0.0,
            series: bins.iter().map(|(b, v)| (*b as f64 * bin_s, *v as f64 * 8.0 / bin_s / 1e6)).collect(),
        }
    }
}

/// Everything measured in one run (one variant).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunResult {
    /// Variant name.
    pub variant: String,
    /// Ping workloads.
    pub pings: Vec<PingResult>,
    /// Flows.
    pub flows: Vec<FlowResult>,
    /// Where packets were lost.
    pub losses: LossCounters,
}

impl RunResult {
    /// Total goodput of all flows, Mbit/s.
    pub fn total_goodput_mbps(&self) -> f64 {
        self.flows.iter().map(|f| f.goodput_mbps).sum()
    }

    /// Fill in each flow's share of the total.
    pub fn compute_shares(&mut self) {
        let total: u64 = self.flows.iter().map(|f| f.bytes).sum();
        for f in &mut self.flows {
            f.share = if total > 0 { f.bytes as f64 / total as f64 } else { 0.0 };
        }
    }
}
