//! Build a [`World`] from a scenario and a variant, run it, and measure.

use crate::host::{App, PingApp, UdpApp};
use crate::report::{FlowResult, PingResult, RunResult};
use crate::scenario::{substitute, value_text, LinkSpec, Scenario, WorkloadSpec};
use crate::world::World;
use sluice_core::port::{PortConfig, TxBuffer};
use sluice_core::time::{Duration, Time};
use sluice_core::units::{parse_rate, parse_size, parse_time_ns};
use sluice_tc::net::Net;
use sluice_tc::{ip, tc};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// A scenario made concrete for one variant.
pub struct Built {
    /// The network, ready to run.
    pub world: World,
    /// How long to run.
    pub duration: Time,
    /// Workload labels, in the order of the scenario, with where to find their results.
    pub labels: Vec<(String, Measure)>,
}

/// Where a workload's results live.
#[derive(Clone, Debug)]
pub enum Measure {
    /// Ping app `app` on node `node`.
    Ping { node: usize, app: usize },
    /// UDP received at `node` from (src, sport, dport).
    Udp { node: usize, key: (Ipv4Addr, u16, u16), start: Time, stop: Time },
}

fn time(s: &str, what: &str) -> Result<Time, String> {
    Ok(Time(dur(s, what)?.0))
}

fn dur(s: &str, what: &str) -> Result<Duration, String> {
    parse_time_ns(s).map(Duration).map_err(|_| format!("{what}: not a time: {s:?}"))
}

fn num(v: &toml::Value, what: &str) -> Result<u64, String> {
    let t = value_text(v);
    sluice_core::units::strtoul(&t, 0)
        .filter(|(_, rest)| rest.is_empty())
        .map(|(n, _)| n)
        .ok_or_else(|| format!("{what}: not a number: {t:?}"))
}

fn split_end(s: &str) -> Result<(&str, &str), String> {
    s.split_once(':').ok_or_else(|| format!("link end {s:?}: expected node:device"))
}

fn buffer(s: Option<&String>) -> Result<TxBuffer, String> {
    let Some(s) = s else { return Ok(TxBuffer::Packets(1000)) };
    if let Some(n) = s.strip_suffix('p') {
        return n.parse().map(TxBuffer::Packets).map_err(|_| format!("buffer {s:?}"));
    }
    let b = s.strip_suffix('b').unwrap_or(s);
    parse_size(b).map(|v| TxBuffer::Bytes(v as u64)).map_err(|_| format!("buffer {s:?}"))
}

/// Build the network for `vars` (already resolved for a variant).
pub fn build(sc: &Scenario, vars: &BTreeMap<String, String>) -> Result<Built, String> {
    let sub = |s: &str| substitute(s, vars);
    let duration = time(&sub(&sc.duration)?, "duration")?;
    // Every node gets a namespace with the devices its links name.
    let mut nets: Vec<(String, Ipv4Addr, bool, Net)> = vec![];
    for n in &sc.nodes {
        let addr: Ipv4Addr = sub(&n.addr)?.parse().map_err(|_| format!("node {}: bad addr {:?}", n.name, n.addr))?;
        let mut net = Net::new();
        net.seed = sc.seed;
        nets.push((n.name.clone(), addr, n.router, net));
    }
    let node_ix = |name: &str| nets.iter().position(|n| n.0 == name).ok_or_else(|| format!("unknown node {name:?}"));
    let mut link_ends = vec![];
    for (li, l) in sc.links.iter().enumerate() {
        let (an, ad) = split_end(&l.a)?;
        let (bn, bd) = split_end(&l.b)?;
        let (ai, bi) = (node_ix(an)?, node_ix(bn)?);
        for (ni, dev, q) in [(ai, ad, l.txqueuelen_a.as_ref()), (bi, bd, l.txqueuelen_b.as_ref())] {
            let q = q.or(l.txqueuelen.as_ref()).map(|v| num(v, "txqueuelen")).transpose()?.unwrap_or(1000);
            let net = &mut nets[ni].3;
            for cmd in [
                format!("link add dev {dev} type ether"),
                format!("link set dev {dev} txqueuelen {q}"),
                format!("link set dev {dev} up"),
            ] {
                let words: Vec<String> = cmd.split_whitespace().map(String::from).collect();
                let o = ip::run(net, &words);
                if o.code != 0 {
                    return Err(format!("link {li}: ip {cmd}: {}", o.stderr.trim()));
                }
            }
        }
        link_ends.push(((ai, ad.to_string()), (bi, bd.to_string())));
    }
    // tc policies, in-process.
    for (ni, n) in sc.nodes.iter().enumerate() {
        for line in &n.tc {
            let line = sub(line)?;
            let words: Vec<String> = line.split_whitespace().map(String::from).collect();
            let net = &mut nets[ni].3;
            let o = match words.first().map(String::as_str) {
                Some("tc") => match tc::parse_global(&words[1..]) {
                    Ok((opts, rest)) => tc::run(net, &opts, &rest),
                    Err(o) => o,
                },
                Some("ip") => ip::run(net, &words[1..]),
                _ => return Err(format!("node {}: not a tc/ip command: {line:?}", n.name)),
            };
            if o.code != 0 {
                return Err(format!("node {}: `{line}` failed: {}", n.name, o.stderr.trim()));
            }
        }
        if n.script.is_some() {
            return Err(format!("node {}: scripts need the sluice binary (sluice sim); use `tc = [...]` here", n.name));
        }
    }
    let mut world = World::default();
    for (name, addr, router, net) in nets {
        world.add_node(&name, addr, router, net);
    }
    for (l, ((ai, ad), (bi, bd))) in sc.links.iter().zip(link_ends) {
        let (ca, cb) = port_configs(l, vars, sc.seed)?;
        world.connect((ai, &ad, ca), (bi, &bd, cb))?;
    }
    world.compute_routes();
    let mut labels = vec![];
    for (wi, w) in sc.workloads.iter().enumerate() {
        labels.push(add_workload(&mut world, w, wi, vars, duration)?);
    }
    world.start_apps();
    Ok(Built { world, duration, labels })
}

fn port_configs(l: &LinkSpec, vars: &BTreeMap<String, String>, seed: u64) -> Result<(PortConfig, PortConfig), String> {
    let sub = |s: &String| substitute(s, vars);
    let rate = |r: Option<&String>| -> Result<u64, String> {
        let r = r.or(l.rate.as_ref()).ok_or_else(|| format!("link {}-{}: no rate", l.a, l.b))?;
        parse_rate(&sub(r)?).map(|b| b * 8).map_err(|_| format!("bad rate {r:?}"))
    };
    let delay = match &l.delay {
        Some(d) => dur(&sub(d)?, "delay")?,
        None => Duration::ZERO,
    };
    let mk = |r, b: Option<&String>, s| -> Result<PortConfig, String> {
        let b = b.or(l.buffer.as_ref()).map(sub).transpose()?;
        Ok(PortConfig {
            rate_bps: r,
            delay,
            buffer: buffer(b.as_ref())?,
            overhead: l.overhead.unwrap_or(0),
            loss: l.loss.unwrap_or(0.0),
            seed: s,
        })
    };
    Ok((
        mk(rate(l.rate_ab.as_ref())?, l.buffer_a.as_ref(), seed ^ 0xa)?,
        mk(rate(l.rate_ba.as_ref())?, l.buffer_b.as_ref(), seed ^ 0xb)?,
    ))
}

fn add_workload(
    world: &mut World,
    w: &WorkloadSpec,
    wi: usize,
    vars: &BTreeMap<String, String>,
    duration: Time,
) -> Result<(String, Measure), String> {
    let sub = |s: &String| substitute(s, vars);
    let from = world.node_id(&w.from).ok_or_else(|| format!("workload {wi}: unknown node {:?}", w.from))?;
    let to = world.node_id(&w.to).ok_or_else(|| format!("workload {wi}: unknown node {:?}", w.to))?;
    let dst = world.nodes[to].addr;
    let start = w.start.as_ref().map(|s| time(&sub(s)?, "start")).transpose()?.unwrap_or(Time::ZERO);
    let stop = w.stop.as_ref().map(|s| time(&sub(s)?, "stop")).transpose()?.unwrap_or(duration);
    let tos = w.tos.as_ref().map(|v| num(v, "tos")).transpose()?.unwrap_or(0) as u8;
    let label = w.name.clone().unwrap_or_else(|| format!("{}{}", w.kind, wi));
    match w.kind.as_str() {
        "ping" => {
            let interval = w.interval.as_ref().map(|s| dur(&sub(s)?, "interval")).transpose()?.unwrap_or(Duration::from_secs(1));
            let mut p = PingApp::new(dst, interval, start, stop, 0x100 + wi as u16);
            p.tos = tos as u16;
            if let Some(sz) = &w.size {
                p.size = num(sz, "size")? as u16;
            }
            let app = world.nodes[from].host.apps.len();
            world.nodes[from].host.apps.push(App::Ping(p));
            Ok((label, Measure::Ping { node: from, app }))
        }
        "udp" => {
            let rate = w.rate.as_ref().ok_or_else(|| format!("workload {label}: udp needs a rate"))?;
            let rate_bps = parse_rate(&sub(rate)?).map_err(|_| format!("bad rate {rate:?}"))? * 8;
            let size = w.size.as_ref().map(|v| num(v, "size")).transpose()?.unwrap_or(1472) as u16;
            let dport = w.port.as_ref().map(|v| num(v, "port")).transpose()?.unwrap_or(5001) as u16;
            let sport = 40000 + wi as u16;
            let u = UdpApp { dst, ports: (sport, dport), rate_bps, size, tos, start, stop, sent: 0 };
            world.nodes[from].host.apps.push(App::Udp(u));
            let src = world.nodes[from].addr;
            Ok((label, Measure::Udp { node: to, key: (src, sport, dport), start, stop }))
        }
        other => Err(format!("workload {label}: unknown type {other:?}")),
    }
}

/// Run a built world to its end and collect the results.
pub fn run(mut b: Built, variant: &str) -> RunResult {
    b.world.run_until(b.duration);
    let mut res = RunResult { variant: variant.to_string(), ..Default::default() };
    for (label, m) in &b.labels {
        match m {
            Measure::Ping { node, app } => {
                if let App::Ping(p) = &b.world.nodes[*node].host.apps[*app] {
                    res.pings.push(PingResult::from_samples(label, p.sent, &p.rtts));
                }
            }
            Measure::Udp { node, key, start, stop } => {
                let flow = b.world.nodes[*node].host.udp_rx.get(key).cloned().unwrap_or_default();
                let secs = (stop.0.min(b.duration.0).saturating_sub(start.0)) as f64 / 1e9;
                res.flows.push(FlowResult::new(label, "udp", flow.bytes, secs, &flow.bins));
            }
        }
    }
    res.losses = b.world.losses;
    res
}
