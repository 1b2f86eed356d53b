//! Scenario files: a topology, tc policies, workloads, a duration and a seed,
//! in TOML; named variants turn one file into a table of runs.
//!
//! ```toml
//! name = "dumbbell"
//! duration = "30s"
//! seed = 1
//! [vars]                     # referenced as ${name} in any string below
//! qdisc = "pfifo_fast"
//! [[variant]]                # one row of the result table each
//! name = "fq_codel"
//! set = { qdisc = "fq_codel" }
//! [[node]]
//! name = "router"
//! addr = "10.0.0.254"
//! router = true
//! tc = ["tc qdisc replace dev eth1 root ${qdisc}"]   # run in-process, in order
//! script = "path/or/inline bash"                     # run with bash, tc/ip/iptables links on PATH
//! [[link]]
//! a = "sender:eth0"          # node:device (created by the link)
//! b = "router:eth0"
//! rate = "1gbit"             # or rate_ab / rate_ba
//! delay = "1ms"
//! buffer = "1p"              # the transmit buffer: packets (p) or bytes (b)
//! txqueuelen = 1000          # of both devices (txqueuelen_a / txqueuelen_b)
//! txqueues = 1               # transmit queues of both devices (txqueues_a / txqueues_b)
//! # a link whose capacity or delay changes over time (docs/time-varying-links.md):
//! # trace_ab = "lte.up"      # a Mahimahi trace file, or { model = "walk", ... }
//! # schedule_ba = "sched.csv" # or inline CSV rows; delay_trace_ab = "delays.txt"
//! [[event]]                  # at a simulated time: commands on a node, or a wire change
//! at = "10s"
//! node = "router"
//! commands = ["tc qdisc change dev eth1 root fq_codel"]
//! [[workload]]
//! type = "ping"              # ping | udp | tcp | web
//! from = "sender"
//! to = "receiver"
//! ```
//! The README documents every key.

use crate::limits;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A whole scenario file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name, shown in reports.
    pub name: String,
    /// What it reproduces.
    #[serde(default)]
    pub description: String,
    /// Simulated time, e.g. "30s".
    pub duration: String,
    /// Seed of every random choice.
    #[serde(default)]
    pub seed: u64,
    /// Goodput is measured after this much time (slow start excluded).
    #[serde(default)]
    pub warmup: Option<String>,
    /// Variables for `${name}` substitution, with their default values.
    #[serde(default)]
    pub vars: BTreeMap<String, toml::Value>,
    /// Named variants: each sets some variables and is one row of the table.
    #[serde(default, rename = "variant")]
    pub variants: Vec<Variant>,
    /// Hosts and routers.
    #[serde(default, rename = "node")]
    pub nodes: Vec<NodeSpec>,
    /// Links between them.
    #[serde(default, rename = "link")]
    pub links: Vec<LinkSpec>,
    /// Traffic.
    #[serde(default, rename = "workload")]
    pub workloads: Vec<WorkloadSpec>,
    /// What the scenario expects, checked by `sluice sim --check` and CI.
    #[serde(default, rename = "expect")]
    pub expects: Vec<Expect>,
    /// Changes at given simulated times (see [`EventSpec`]).
    #[serde(default, rename = "event")]
    pub events: Vec<EventSpec>,
    /// The directory relative file names (traces, schedules) are read
    /// from: the scenario file's; `None` (a bundled scenario, a test's
    /// text) reads them from the working directory.
    #[serde(skip)]
    pub dir: Option<std::path::PathBuf>,
}

/// A change at a simulated time: commands run on a node (as its `tc`
/// lines are), or a change to a link's wire.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    /// When, e.g. `"10s"`.
    pub at: String,
    /// The node whose commands these are.
    pub node: Option<String>,
    /// tc/ip/iptables command lines, run in order.
    pub commands: Option<Vec<String>>,
    /// The link to change: its `name`, `A-B` as its ends are written, or one end.
    pub link: Option<String>,
    /// `ab`, `ba` or `both` (the default).
    pub direction: Option<String>,
    /// A new fixed rate (`0`: an outage); ends a trace.
    pub rate: Option<String>,
    /// A new propagation delay.
    pub delay: Option<String>,
    /// A new loss probability (0..1, or a percentage `"1%"`).
    pub loss: Option<toml::Value>,
    /// A new transmit buffer (`100p`, `64000b`).
    pub buffer: Option<String>,
    /// Carrier lost: what crosses the wire is lost.
    pub down: Option<bool>,
    /// Carrier back.
    pub up: Option<bool>,
    /// A trace to play from now (a file name or a model table), instead of
    /// the rate.
    pub trace: Option<toml::Value>,
    /// Play that trace once.
    pub trace_once: Option<bool>,
    /// A schedule to follow from now (a file name or CSV text), replacing
    /// any schedule the wire follows.
    pub schedule: Option<String>,
}

/// One row of the result table.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    /// Row name.
    pub name: String,
    /// Variables it sets.
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
}

/// A host or router.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Name.
    pub name: String,
    /// IPv4 address.
    pub addr: String,
    /// Does it forward?
    #[serde(default)]
    pub router: bool,
    /// tc/ip/iptables commands, run in order inside the simulator.
    #[serde(default)]
    pub tc: Vec<String>,
    /// A shell script (inline text or a path relative to the scenario), run
    /// with bash, sluice's tc/ip/iptables links first on PATH, against this node.
    #[serde(default)]
    pub script: Option<String>,
    /// Kernel settings of the node's TCP ([`crate::sysctl`]), by sysctl name.
    #[serde(default)]
    pub sysctl: BTreeMap<String, toml::Value>,
    /// Segmentation offload on the node's interfaces (Linux's default):
    /// its TCP sends packets of several segments (`crate::tcp::tso`);
    /// false is `ethtool -K DEV gso off tso off`, one segment per packet.
    #[serde(default = "yes")]
    pub gso: bool,
}

fn yes() -> bool {
    true
}

/// A link between two node devices.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// `node:device` of one end.
    pub a: String,
    /// `node:device` of the other end.
    pub b: String,
    /// Rate of both directions.
    pub rate: Option<String>,
    /// Rate a → b.
    pub rate_ab: Option<String>,
    /// Rate b → a.
    pub rate_ba: Option<String>,
    /// One-way propagation delay.
    #[serde(default)]
    pub delay: Option<String>,
    /// Transmit buffer of both directions: `100p` packets or `64000b` bytes.
    pub buffer: Option<String>,
    /// Transmit buffer at a.
    pub buffer_a: Option<String>,
    /// Transmit buffer at b.
    pub buffer_b: Option<String>,
    /// Random loss probability on the wire (both directions), 0..1.
    #[serde(default)]
    pub loss: Option<f64>,
    /// txqueuelen of both devices (default 1000).
    pub txqueuelen: Option<toml::Value>,
    /// txqueuelen at a.
    pub txqueuelen_a: Option<toml::Value>,
    /// txqueuelen at b.
    pub txqueuelen_b: Option<toml::Value>,
    /// Transmit queues of both devices (`numtxqueues`, default 1; more make
    /// the device multi-queue, with an mq root).
    pub txqueues: Option<toml::Value>,
    /// Transmit queues at a.
    pub txqueues_a: Option<toml::Value>,
    /// Transmit queues at b.
    pub txqueues_b: Option<toml::Value>,
    /// Bytes of framing per packet on the wire.
    #[serde(default)]
    pub overhead: Option<u32>,
    /// A name for events and reports (default `A-B`, the ends as written).
    pub name: Option<String>,
    /// Capacity a → b from a Mahimahi trace: a file name, or a generated
    /// model (`{ model = "walk", ... }`, [`sluice_core::trace_model`]).
    pub trace_ab: Option<toml::Value>,
    /// Capacity b → a from a trace.
    pub trace_ba: Option<toml::Value>,
    /// Play the traces once (Mahimahi's `--once`) instead of repeating them.
    pub trace_once: Option<toml::Value>,
    /// A schedule of rate/delay/loss changes a → b: a file name or CSV text.
    pub schedule_ab: Option<String>,
    /// A schedule b → a.
    pub schedule_ba: Option<String>,
    /// Per-packet delays a → b from a delay trace file.
    pub delay_trace_ab: Option<String>,
    /// Per-packet delays b → a.
    pub delay_trace_ba: Option<String>,
    /// How long each line of a delay trace holds (default 1ms).
    pub delay_trace_step: Option<String>,
}

impl LinkSpec {
    /// The link's name in events, messages and reports: its `name`, else
    /// `A-B` with its ends as written.
    pub fn label(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("{}-{}", self.a, self.b))
    }
}

/// A workload.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// `ping`, `udp`, `tcp`, `web`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Sending node.
    pub from: String,
    /// Receiving node.
    pub to: String,
    /// Label in reports.
    pub name: Option<String>,
    /// Start time (default 0s).
    pub start: Option<String>,
    /// Stop time (default: the end).
    pub stop: Option<String>,
    /// ping: interval; web: least time between the starts of two loads.
    pub interval: Option<String>,
    /// udp: rate.
    pub rate: Option<String>,
    /// ping/udp: payload bytes.
    pub size: Option<toml::Value>,
    /// TOS byte (e.g. 0x10 as 16 or "0x10").
    pub tos: Option<toml::Value>,
    /// tcp: how many parallel flows.
    pub count: Option<toml::Value>,
    /// tcp: time between flow starts.
    pub stagger: Option<String>,
    /// tcp: bytes to send (default: unlimited until stop).
    pub bytes: Option<String>,
    /// tcp/web: send buffer.
    pub sndbuf: Option<String>,
    /// tcp/web: receive buffer.
    pub rcvbuf: Option<String>,
    /// tcp/web: congestion control (`cubic`, `reno`).
    pub cc: Option<String>,
    /// tcp/web: ask for ECN (`net.ipv4.tcp_ecn = 1` on both hosts; the
    /// default is Linux's 2: accept it, never ask).
    pub ecn: Option<toml::Value>,
    /// web: bytes of the HTML page.
    pub page: Option<String>,
    /// web: how many objects the page refers to (each `object_size`).
    pub objects: Option<toml::Value>,
    /// web: bytes of each object.
    pub object_size: Option<String>,
    /// web: the objects' sizes one by one (instead of `objects` × `object_size`).
    pub object_sizes: Option<Vec<toml::Value>>,
    /// web: most parallel HTTP/1.1 connections (default 6).
    pub connections: Option<toml::Value>,
    /// web: one multiplexed (HTTP/2-like) connection instead of HTTP/1.1.
    pub multiplexed: Option<toml::Value>,
    /// web: a TLS handshake (2 round trips) on every new connection.
    pub handshake: Option<toml::Value>,
    /// web: keep connections open between loads (the first load is an
    /// uncounted warm-up).
    pub warm: Option<toml::Value>,
    /// web: how many loads to measure (default 1).
    pub repeat: Option<toml::Value>,
    /// web: bytes of a request (default 400).
    pub request_size: Option<String>,
    /// Destination port.
    pub port: Option<toml::Value>,
    /// `false`/`0`/empty (after substitution) leaves the workload out of a variant.
    pub enabled: Option<String>,
}

/// An expectation about a result, checked against every variant it names.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Variant names it applies to (empty: all).
    #[serde(default)]
    pub variants: Vec<String>,
    /// The metric: e.g. `ping.avg_ms`, `ping.median_ms`, `ping.loss_pct`,
    /// `goodput_mbps` (total), `flow.NAME.goodput_mbps`, `share.NAME`,
    /// `web.NAME.load_ms` (also `min_ms`, `max_ms`, `loads`).
    pub metric: String,
    /// Lower bound.
    pub min: Option<f64>,
    /// Upper bound.
    pub max: Option<f64>,
    /// Why this range (the reproduced article's number, or the physics).
    #[serde(default)]
    pub why: String,
}

impl Scenario {
    /// Parse a scenario file's text: its syntax and types, then
    /// [`Scenario::check_shape`]. Values that may hold `${}` variables are
    /// checked when a variant is built (`run::build`).
    pub fn parse(text: &str) -> Result<Scenario, String> {
        let sc: Scenario = toml::from_str(text).map_err(|e| e.to_string())?;
        sc.check_shape()?;
        Ok(sc)
    }

    /// What can be checked before any variable is substituted: how many
    /// nodes, links and workloads (see [`crate::limits`]), that names are
    /// unique, and that every expectation names variants that exist and a
    /// range that is one.
    pub fn check_shape(&self) -> Result<(), String> {
        for (what, n, max) in [
            ("nodes", self.nodes.len(), limits::MAX_NODES),
            ("links", self.links.len(), limits::MAX_LINKS),
            ("workloads", self.workloads.len(), limits::MAX_WORKLOADS),
        ] {
            if n > max {
                return Err(format!("{n} {what}: at most {max}"));
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if n.name.is_empty() || n.name.contains(':') || n.name.contains(char::is_whitespace) {
                return Err(format!(
                    "node {:?}: a name is not empty and has no ':' or blanks",
                    n.name
                ));
            }
            if self.nodes[..i].iter().any(|o| o.name == n.name) {
                return Err(format!("node {}: two nodes have this name", n.name));
            }
        }
        for (i, v) in self.variants.iter().enumerate() {
            if self.variants[..i].iter().any(|o| o.name == v.name) {
                return Err(format!("variant {}: two variants have this name", v.name));
            }
        }
        for (i, w) in self.workloads.iter().enumerate() {
            let Some(name) = &w.name else { continue };
            if self.workloads[..i]
                .iter()
                .any(|o| o.name.as_ref() == Some(name))
            {
                return Err(format!("workload {name}: two workloads have this name"));
            }
        }
        for (i, l) in self.links.iter().enumerate() {
            if let Some(n) = &l.name {
                if n.is_empty() || n.contains(['.', ':']) || n.contains(char::is_whitespace) {
                    return Err(format!(
                        "link {}-{}: name {n:?}: a name is not empty and has no '.', ':' or blanks",
                        l.a, l.b
                    ));
                }
            }
            if self.links[..i].iter().any(|o| o.label() == l.label()) {
                return Err(format!("link {}: two links have this name", l.label()));
            }
        }
        if self.events.len() > limits::MAX_EVENTS {
            return Err(format!(
                "{} events: at most {}",
                self.events.len(),
                limits::MAX_EVENTS
            ));
        }
        for e in &self.expects {
            let what = format!("expect {}", e.metric);
            if let Some(v) = e
                .variants
                .iter()
                .find(|v| !self.variants.iter().any(|o| o.name == **v))
            {
                return Err(format!("{what}: variants: no variant {v:?}"));
            }
            if e.min.is_some_and(f64::is_nan) || e.max.is_some_and(f64::is_nan) {
                return Err(format!("{what}: min and max are numbers"));
            }
            if let (Some(lo), Some(hi)) = (e.min, e.max) {
                if lo > hi {
                    return Err(format!("{what}: min {lo} is more than max {hi}"));
                }
            }
        }
        Ok(())
    }

    /// Refuse command-line overrides of variables the scenario never
    /// declares (in `[vars]` or a variant's `set`): a misspelt `--set`
    /// would otherwise change nothing, silently.
    pub fn check_overrides(&self, overrides: &BTreeMap<String, String>) -> Result<(), String> {
        for k in overrides.keys() {
            let declared =
                self.vars.contains_key(k) || self.variants.iter().any(|v| v.set.contains_key(k));
            if !declared {
                let known: Vec<&str> = self.vars.keys().map(String::as_str).collect();
                return Err(format!(
                    "--set {k}: the scenario has no variable {k:?} (it has: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            }
        }
        Ok(())
    }

    /// The variables in force for `variant` (`None`: the defaults), with
    /// command-line overrides applied last.
    pub fn vars_for(
        &self,
        variant: Option<&Variant>,
        overrides: &BTreeMap<String, String>,
    ) -> BTreeMap<String, String> {
        let mut vars: BTreeMap<String, String> = self
            .vars
            .iter()
            .map(|(k, v)| (k.clone(), value_text(v)))
            .collect();
        if let Some(v) = variant {
            for (k, val) in &v.set {
                vars.insert(k.clone(), value_text(val));
            }
        }
        for (k, v) in overrides {
            vars.insert(k.clone(), v.clone());
        }
        vars
    }
}

/// A TOML value as the text it substitutes to.
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Replace `${name}` with variables; unknown names are an error.
pub fn substitute(text: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let j = after
            .find('}')
            .ok_or_else(|| format!("unterminated ${{ in {text:?}"))?;
        let name = &after[..j];
        let v = vars
            .get(name)
            .ok_or_else(|| format!("unknown variable ${{{name}}}"))?;
        out.push_str(v);
        rest = &after[j + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_substitute_and_variants_override() {
        let s = Scenario::parse(
            r#"
            name = "x"
            duration = "1s"
            [vars]
            qdisc = "pfifo_fast"
            flows = 4
            [[variant]]
            name = "fq"
            set = { qdisc = "fq_codel" }
            "#,
        )
        .unwrap();
        let none = BTreeMap::new();
        let v = s.vars_for(Some(&s.variants[0]), &none);
        assert_eq!(
            substitute("root ${qdisc} x${flows}", &v).unwrap(),
            "root fq_codel x4"
        );
        let mut ov = BTreeMap::new();
        ov.insert("flows".to_string(), "2".to_string());
        assert_eq!(substitute("${flows}", &s.vars_for(None, &ov)).unwrap(), "2");
        assert!(substitute("${nope}", &v).is_err());
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(Scenario::parse("name = \"x\"\nduration = \"1s\"\nbogus = 1").is_err());
    }
}
