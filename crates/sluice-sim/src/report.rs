//! Results of a run, in the shape of the tables of the articles the examples
//! reproduce (docs/examples.md): ping min/avg/median/max and loss, per-flow
//! goodput and share, page-load times.

use crate::host::BIN;
use crate::world::LossCounters;
use serde::Serialize;
use sluice_core::time::{Duration, Time};
use std::collections::BTreeMap;

/// One ping workload's round-trip times.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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
        let series = rtts
            .iter()
            .map(|(t, d)| (t.0 as f64 / 1e9, d.0 as f64 / 1e6))
            .collect();
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
            avg_ms: if n > 0 {
                ms.iter().sum::<f64>() / n as f64
            } else {
                0.0
            },
            median_ms: median,
            max_ms: ms.last().copied().unwrap_or(0.0),
            loss_pct: if sent > 0 {
                100.0 * (sent - n as u64) as f64 / sent as f64
            } else {
                0.0
            },
            series,
        }
    }
}

/// One flow's delivered bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FlowResult {
    /// Label.
    pub name: String,
    /// `udp` or `tcp`.
    pub kind: String,
    /// Bytes delivered to the receiving application in the measured window
    /// (after the scenario's `warmup`, while the flow runs).
    pub bytes: u64,
    /// Average goodput over that window, Mbit/s.
    pub goodput_mbps: f64,
    /// Share of the total goodput of all flows in the run, 0..1.
    pub share: f64,
    /// UDP: datagrams sent, and received over the whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datagrams: Option<(u64, u64)>,
    /// UDP: percent of the datagrams sent that never arrived (`iperf -u`'s
    /// loss; datagrams still in flight at the end count as lost, so a
    /// scenario stops its UDP senders a little before the end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<f64>,
    /// `(seconds, Mbit/s)` per bin, for plots.
    pub series: Vec<(f64, f64)>,
    /// The time-varying link direction the flow crosses with the least
    /// capacity (see [`LinkResult`]), if it crosses one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Its goodput as a percentage of that link's capacity over the same
    /// window (the capacity as it reaches the receiver: shifted by the
    /// propagation delay after the link).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_pct: Option<f64>,
    /// The most the flow's packets arriving at the receiver in any whole
    /// second (IP bytes, retransmissions included: in-order delivery to
    /// the application can burst when a hole is filled, arrivals cannot)
    /// went over what the link could have carried to the receiver in that
    /// second (allowing for the path's least and greatest delay after
    /// it), in 1504-byte opportunities; below 0 when they never reached
    /// the capacity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_capacity_pkts: Option<f64>,
    /// The interval its goodput is measured over, seconds since the start.
    pub measured_s: (f64, f64),
}

/// A link direction whose capacity or delay changes over the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LinkResult {
    /// `LINK ab` or `LINK ba` (the link's `name`, or `A-B`).
    pub name: String,
    /// Mean capacity over the measured window (after `warmup`), Mbit/s.
    pub capacity_mbps: f64,
    /// Mean queueing delay of the packets that left in the measured
    /// window (from entering the interface to leaving the wire), ms;
    /// absent on a delay trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_delay_ms: Option<f64>,
    /// The largest of those, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_delay_max_ms: Option<f64>,
    /// `(seconds, Mbit/s)`: the capacity per bin, over the whole run.
    pub capacity_series: Vec<(f64, f64)>,
    /// `(seconds, ms)`: the mean queueing delay of the packets leaving in
    /// each bin (bins where none left are left out).
    pub queue_delay_series: Vec<(f64, f64)>,
}

impl FlowResult {
    /// Record a UDP flow's datagram counts and its loss.
    pub fn with_datagrams(mut self, sent: u64, received: u64) -> Self {
        self.datagrams = Some((sent, received));
        self.loss_pct = Some(if sent > 0 {
            100.0 * sent.saturating_sub(received) as f64 / sent as f64
        } else {
            0.0
        });
        self
    }

    /// A flow's result from its per-bin deliveries: goodput over `[from, to)`
    /// (whole bins), the series over the whole run.
    pub fn new(name: &str, kind: &str, bins: &BTreeMap<u64, u64>, from: Time, to: Time) -> Self {
        let bin_s = BIN.0 as f64 / 1e9;
        let (b0, b1) = (from.0.div_ceil(BIN.0), to.0 / BIN.0);
        let bytes: u64 = bins.range(b0..b1.max(b0)).map(|(_, v)| v).sum();
        let secs = b1.saturating_sub(b0) as f64 * bin_s;
        FlowResult {
            name: name.to_string(),
            kind: kind.to_string(),
            bytes,
            goodput_mbps: if secs > 0.0 {
                bytes as f64 * 8.0 / secs / 1e6
            } else {
                0.0
            },
            share: 0.0,
            datagrams: None,
            loss_pct: None,
            series: series(bins, b1),
            link: None,
            capacity_pct: None,
            over_capacity_pkts: None,
            measured_s: (b0 as f64 * bin_s, b1.max(b0) as f64 * bin_s),
        }
    }

    /// Bytes delivered in `[from, to)` seconds, from the series.
    fn bytes_between(&self, from: f64, to: f64) -> f64 {
        let bin_s = BIN.0 as f64 / 1e9;
        self.series
            .iter()
            .filter(|(t, _)| *t + 1e-9 >= from && *t + 1e-9 < to)
            .map(|(_, mbps)| mbps * 1e6 * bin_s / 8.0)
            .sum()
    }
}

/// One web workload's page-load times.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WebResult {
    /// Label.
    pub name: String,
    /// Loads measured (finished before the end of the run).
    pub loads: u64,
    /// A load was still under way at the end (not counted).
    pub unfinished: bool,
    /// Mean load time, milliseconds.
    pub load_ms: f64,
    /// Shortest load, milliseconds.
    pub min_ms: f64,
    /// Longest load, milliseconds.
    pub max_ms: f64,
    /// `(seconds since start of the load, load time ms)`, one per load.
    pub series: Vec<(f64, f64)>,
}

impl WebResult {
    /// Summarize measured loads.
    pub fn from_samples(name: &str, samples: &[crate::web::LoadSample], unfinished: bool) -> Self {
        let ms: Vec<f64> = samples.iter().map(|s| s.took.0 as f64 / 1e6).collect();
        let n = ms.len();
        WebResult {
            name: name.to_string(),
            loads: n as u64,
            unfinished,
            load_ms: if n > 0 {
                ms.iter().sum::<f64>() / n as f64
            } else {
                0.0
            },
            min_ms: ms.iter().copied().reduce(f64::min).unwrap_or(0.0),
            max_ms: ms.iter().copied().reduce(f64::max).unwrap_or(0.0),
            series: samples
                .iter()
                .zip(&ms)
                .map(|(s, ms)| (s.start.0 as f64 / 1e9, *ms))
                .collect(),
        }
    }
}

/// `(seconds, Mbit/s)` for every bin from the first delivery to the last
/// one or to bin `end` (exclusive), whichever is later: bins without
/// deliveries are zeros, so a stalled flow shows as a gap, not a slope.
fn series(bins: &BTreeMap<u64, u64>, end: u64) -> Vec<(f64, f64)> {
    let bin_s = BIN.0 as f64 / 1e9;
    let (Some(&first), Some(&last)) = (bins.keys().next(), bins.keys().next_back()) else {
        return vec![];
    };
    (first..=last.max(end.saturating_sub(1)))
        .map(|b| {
            (
                b as f64 * bin_s,
                bins.get(&b).copied().unwrap_or(0) as f64 * 8.0 / bin_s / 1e6,
            )
        })
        .collect()
}

/// Everything measured in one run (one variant).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunResult {
    /// Variant name.
    pub variant: String,
    /// Ping workloads.
    pub pings: Vec<PingResult>,
    /// Flows.
    pub flows: Vec<FlowResult>,
    /// Web page loads.
    pub webs: Vec<WebResult>,
    /// Where packets were lost.
    pub losses: LossCounters,
    /// Links whose capacity or delay change over the run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<LinkResult>,
    /// Timed events that failed (a command's error, with the event's time).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// `tc -s` output of every device at the end, when asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tc_stats: Option<String>,
}

impl RunResult {
    /// All flows' goodput together, Mbit/s, and the interval (seconds) it
    /// is measured over: the one in which every flow was being measured,
    /// or, if they never all ran at once, from the first start to the last
    /// end. (Adding each flow's own rate would count a staggered flow's
    /// rate over its shorter lifetime and could exceed the line rate.)
    pub fn aggregate_goodput(&self) -> (f64, f64, f64, bool) {
        let starts = self.flows.iter().map(|f| f.measured_s.0);
        let ends = self.flows.iter().map(|f| f.measured_s.1);
        let (mut lo, mut hi) = (
            starts.clone().fold(f64::MIN, f64::max),
            ends.clone().fold(f64::MAX, f64::min),
        );
        let all_ran = hi > lo;
        if !all_ran {
            (lo, hi) = (
                starts.fold(f64::MAX, f64::min),
                ends.fold(f64::MIN, f64::max),
            );
        }
        if self.flows.is_empty() || hi <= lo {
            return (0.0, 0.0, 0.0, false);
        }
        // A float sum starts at -0.0: adding 0.0 makes nothing read 0, not -0.
        let bytes = self
            .flows
            .iter()
            .map(|f| f.bytes_between(lo, hi))
            .sum::<f64>()
            + 0.0;
        (bytes * 8.0 / (hi - lo) / 1e6, lo, hi, all_ran)
    }

    /// [`RunResult::aggregate_goodput`]'s rate, Mbit/s (the `goodput_mbps` metric).
    pub fn total_goodput_mbps(&self) -> f64 {
        self.aggregate_goodput().0
    }

    /// Fill in each flow's share of the total.
    pub fn compute_shares(&mut self) {
        let total: u64 = self.flows.iter().map(|f| f.bytes).sum();
        for f in &mut self.flows {
            f.share = if total > 0 {
                f.bytes as f64 / total as f64
            } else {
                0.0
            };
        }
    }
}

/// The result table on stdout, in the terms of those articles' tables.
pub fn table(scenario: &str, runs: &[RunResult]) -> String {
    let mut out = format!("{scenario}\n");
    for r in runs {
        out.push_str(&format!("\n[{}]\n", r.variant));
        for p in &r.pings {
            out.push_str(&format!(
                "  ping {:<12} rtt min/avg/median/max = {:.1}/{:.1}/{:.1}/{:.1} ms, {} sent, {:.1}% loss\n",
                p.name, p.min_ms, p.avg_ms, p.median_ms, p.max_ms, p.sent, p.loss_pct
            ));
        }
        for f in &r.flows {
            out.push_str(&format!(
                "  {} {:<13} goodput {:8.3} Mbit/s  share {:5.1}%",
                f.kind,
                f.name,
                f.goodput_mbps,
                f.share * 100.0
            ));
            if let (Some((sent, _)), Some(loss)) = (f.datagrams, f.loss_pct) {
                out.push_str(&format!(", {sent} datagrams, {loss:.1}% loss"));
            }
            if let (Some(l), Some(pct)) = (&f.link, f.capacity_pct) {
                out.push_str(&format!(", {pct:.1}% of {l}'s capacity"));
            }
            out.push('\n');
        }
        if !r.flows.is_empty() {
            let (mbps, lo, hi, all_ran) = r.aggregate_goodput();
            let when = if all_ran {
                "while all ran"
            } else {
                "first start to last end"
            };
            out.push_str(&format!(
                "  total goodput {mbps:.3} Mbit/s (all flows' bytes from {lo:.1} to {hi:.1} s, {when}; each flow's own is over its own time)\n"
            ));
        }
        for l in &r.links {
            out.push_str(&format!(
                "  link {} capacity {:.3} Mbit/s",
                l.name, l.capacity_mbps
            ));
            if let (Some(avg), Some(max)) = (l.queue_delay_ms, l.queue_delay_max_ms) {
                out.push_str(&format!(", queueing delay avg/max = {avg:.1}/{max:.1} ms"));
            }
            out.push('\n');
        }
        for w in &r.webs {
            out.push_str(&format!(
                "  web {:<13} load min/avg/max = {:.1}/{:.1}/{:.1} ms over {} loads{}\n",
                w.name,
                w.min_ms,
                w.load_ms,
                w.max_ms,
                w.loads,
                if w.unfinished {
                    " (one more unfinished at the end)"
                } else {
                    ""
                }
            ));
        }
        let l = &r.losses;
        out.push_str(&format!(
            "  drops: egress {} ingress {} wire {} unroutable {}{}\n",
            l.egress,
            l.ingress,
            l.wire,
            l.unroutable,
            [
                ("netfilter", l.netfilter),
                ("vlan", l.vlan),
                ("mpls", l.mpls)
            ]
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!(" {k} {n}"))
            .collect::<String>()
        ));
    }
    out
}

/// Read a metric from a run: `goodput_mbps`, `ping.avg_ms` (first ping
/// workload) or `ping.NAME.avg_ms` (also `min_ms`, `median_ms`, `max_ms`,
/// `loss_pct`), `flow.NAME.goodput_mbps`, `flow.NAME.loss_pct` (UDP),
/// `share.NAME`, `web.NAME.load_ms`
/// (the mean; also `min_ms`, `max_ms`, `loads`) or `web.load_ms` (first web
/// workload). A web workload without a finished load has no load times.
///
/// Time-varying links: `link.LINK.DIR.capacity_mbps` (also
/// `queue_delay_ms`, `queue_delay_max_ms`; DIR is `ab` or `ba`), and
/// `flow.NAME.capacity_pct` and `flow.NAME.over_capacity_pkts` (see
/// [`FlowResult`]).
pub fn metric(r: &RunResult, name: &str) -> Option<f64> {
    if let Some(rest) = name.strip_prefix("link.") {
        let (link, field) = rest.rsplit_once('.')?;
        let (link, dir) = link.rsplit_once('.')?;
        let l = r.links.iter().find(|l| l.name == format!("{link} {dir}"))?;
        return match field {
            "capacity_mbps" => Some(l.capacity_mbps),
            "queue_delay_ms" => l.queue_delay_ms,
            "queue_delay_max_ms" => l.queue_delay_max_ms,
            _ => None,
        };
    }
    if let Some((flow, field)) = name
        .strip_prefix("flow.")
        .and_then(|rest| rest.rsplit_once('.'))
    {
        let f = || r.flows.iter().find(|x| x.name == flow);
        match field {
            "capacity_pct" => return f()?.capacity_pct,
            "over_capacity_pkts" => return f()?.over_capacity_pkts,
            _ => {}
        }
    }
    let parts: Vec<&str> = name.split('.').collect();
    let ping_field = |p: &PingResult, f: &str| match f {
        "min_ms" => Some(p.min_ms),
        "avg_ms" => Some(p.avg_ms),
        "median_ms" => Some(p.median_ms),
        "max_ms" => Some(p.max_ms),
        "loss_pct" => Some(p.loss_pct),
        _ => None,
    };
    let web_field = |w: &WebResult, f: &str| match f {
        "loads" => Some(w.loads as f64),
        _ if w.loads == 0 => None,
        "load_ms" => Some(w.load_ms),
        "min_ms" => Some(w.min_ms),
        "max_ms" => Some(w.max_ms),
        _ => None,
    };
    match parts.as_slice() {
        ["web", f] => web_field(r.webs.first()?, f),
        ["web", n, f] => web_field(r.webs.iter().find(|w| w.name == *n)?, f),
        ["goodput_mbps"] => Some(r.total_goodput_mbps()),
        ["ping", f] => ping_field(r.pings.first()?, f),
        ["ping", n, f] => ping_field(r.pings.iter().find(|p| p.name == *n)?, f),
        ["flow", n, "goodput_mbps"] => Some(r.flows.iter().find(|x| x.name == *n)?.goodput_mbps),
        ["flow", n, "loss_pct"] => r.flows.iter().find(|x| x.name == *n)?.loss_pct,
        ["share", n] => Some(r.flows.iter().find(|x| x.name == *n)?.share),
        _ => None,
    }
}

/// Check a scenario's expectations against its runs: one line per check,
/// and whether all held.
pub fn check(expects: &[crate::scenario::Expect], runs: &[RunResult]) -> (Vec<String>, bool) {
    let mut lines = vec![];
    let mut ok = true;
    for e in expects {
        for r in runs
            .iter()
            .filter(|r| e.variants.is_empty() || e.variants.contains(&r.variant))
        {
            let v = metric(r, &e.metric);
            let good =
                v.is_some_and(|v| e.min.is_none_or(|m| v >= m) && e.max.is_none_or(|m| v <= m));
            ok &= good;
            let range = format!(
                "[{}, {}]",
                e.min.map_or("-".into(), |m| m.to_string()),
                e.max.map_or("-".into(), |m| m.to_string())
            );
            lines.push(format!(
                "{} {}: {} = {} expected {} {}",
                if good { "ok  " } else { "FAIL" },
                r.variant,
                e.metric,
                v.map_or("missing".into(), |v| format!("{v:.3}")),
                range,
                e.why
            ));
        }
    }
    (lines, ok)
}
