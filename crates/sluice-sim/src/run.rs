//! Build a [`World`] from a scenario and a variant, run it, and measure.

use crate::host::{App, PingApp, TcpApp, UdpApp};
use crate::report::{FlowResult, PingResult, RunResult, WebResult};
use crate::scenario::{substitute, value_text, LinkSpec, Scenario, WorkloadSpec};
use crate::tcp::{CongestionAlgorithm, EcnMode, TcpConfig};
use crate::web::{WebApp, WebParams, REQUEST_BYTES};
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
    /// Goodput is measured from here on.
    pub warmup: Time,
    /// Workload labels, in the order of the scenario, with where to find their results.
    pub labels: Vec<(String, Measure)>,
}

/// Where a workload's results live.
#[derive(Clone, Debug)]
#[allow(missing_docs)] // node/app indices and flow keys, as their variants say
pub enum Measure {
    /// Ping app `app` on node `node`.
    Ping { node: usize, app: usize },
    /// UDP received at `node` from (src, sport, dport).
    Udp {
        node: usize,
        /// The sending node and its application index.
        sender: (usize, usize),
        key: (Ipv4Addr, u16, u16),
        start: Time,
        stop: Time,
    },
    /// TCP delivered at `node` from (src, sport, dport).
    Tcp {
        node: usize,
        key: (Ipv4Addr, u16, u16),
        start: Time,
    },
    /// Web app `app` on node `node`.
    Web { node: usize, app: usize },
    /// Several flows of one workload, reported as NAME.0, NAME.1, ...
    Group(Vec<Measure>),
}

fn time(s: &str, what: &str) -> Result<Time, String> {
    Ok(Time(dur(s, what)?.0))
}

fn dur(s: &str, what: &str) -> Result<Duration, String> {
    parse_time_ns(s)
        .ok()
        .filter(|t| *t >= 0)
        .map(|t| Duration(t as u64))
        .ok_or(sluice_core::units::BadUnit)
        .map_err(|_| format!("{what}: not a time: {s:?}"))
}

fn num(v: &toml::Value, what: &str) -> Result<u64, String> {
    let t = value_text(v);
    sluice_core::units::strtoul(&t, 0)
        .filter(|(_, rest)| rest.is_empty())
        .map(|(n, _)| n)
        .ok_or_else(|| format!("{what}: not a number: {t:?}"))
}

fn split_end(s: &str) -> Result<(&str, &str), String> {
    s.split_once(':')
        .ok_or_else(|| format!("link end {s:?}: expected node:device"))
}

/// Bytes: tc's sizes (`64k`, `1m`) plus `KiB`/`MiB`.
fn bytes(s: &str, what: &str) -> Result<u64, String> {
    let (num, mult) = if let Some(n) = s.strip_suffix("KiB") {
        (n, 1024)
    } else if let Some(n) = s.strip_suffix("MiB") {
        (n, 1024 * 1024)
    } else if let Some(n) = s.strip_suffix("GiB") {
        (n, 1024 * 1024 * 1024)
    } else {
        return parse_size(s)
            .map(u64::from)
            .map_err(|_| format!("{what}: not a size: {s:?}"));
    };
    num.trim()
        .parse::<u64>()
        .map(|n| n * mult)
        .map_err(|_| format!("{what}: not a size: {s:?}"))
}

fn buffer(s: Option<&String>) -> Result<TxBuffer, String> {
    let Some(s) = s else {
        return Ok(TxBuffer::Packets(1000));
    };
    if let Some(n) = s.strip_suffix('p') {
        return n
            .parse()
            .map(TxBuffer::Packets)
            .map_err(|_| format!("buffer {s:?}"));
    }
    bytes(s.strip_suffix('b').unwrap_or(s), "buffer").map(TxBuffer::Bytes)
}

/// Runs a node's shell script against its namespace: given the commands
/// that set the namespace up so far, returns the namespace after the script
/// (run with bash, sluice's `tc`/`ip` links first on PATH). The binary
/// provides it; the library spawns no processes.
pub trait ScriptRunner {
    /// Run `script` (inline text, or a file name to resolve) for `node`.
    fn run_script(
        &self,
        node: &str,
        setup: &[Vec<String>],
        script: &str,
        seed: u64,
    ) -> Result<Net, String>;
}

/// Build the network for `vars` (already resolved for a variant); nodes with
/// scripts are refused (see [`build_with`]).
pub fn build(sc: &Scenario, vars: &BTreeMap<String, String>) -> Result<Built, String> {
    build_with(sc, vars, None)
}

/// Build the network, running node scripts with `runner`.
pub fn build_with(
    sc: &Scenario,
    vars: &BTreeMap<String, String>,
    runner: Option<&dyn ScriptRunner>,
) -> Result<Built, String> {
    let sub = |s: &str| substitute(s, vars);
    let duration = time(&sub(&sc.duration)?, "duration")?;
    let warmup = sc
        .warmup
        .as_ref()
        .map(|w| time(&sub(w)?, "warmup"))
        .transpose()?
        .unwrap_or(Time::ZERO);
    // Every node gets a namespace with the devices its links name.
    let mut nets: Vec<(String, Ipv4Addr, bool, Net)> = vec![];
    for n in &sc.nodes {
        let addr: Ipv4Addr = sub(&n.addr)?
            .parse()
            .map_err(|_| format!("node {}: bad addr {:?}", n.name, n.addr))?;
        let mut net = Net::new();
        net.seed = sc.seed;
        nets.push((n.name.clone(), addr, n.router, net));
    }
    let node_ix = |nets: &[(String, Ipv4Addr, bool, Net)], name: &str| {
        nets.iter()
            .position(|n| n.0 == name)
            .ok_or_else(|| format!("unknown node {name:?}"))
    };
    let mut logs: Vec<Vec<Vec<String>>> = vec![vec![]; nets.len()];
    let mut link_ends = vec![];
    for (li, l) in sc.links.iter().enumerate() {
        let (an, ad) = split_end(&l.a)?;
        let (bn, bd) = split_end(&l.b)?;
        let (ai, bi) = (node_ix(&nets, an)?, node_ix(&nets, bn)?);
        for (ni, dev, q, txq) in [
            (ai, ad, l.txqueuelen_a.as_ref(), l.txqueues_a.as_ref()),
            (bi, bd, l.txqueuelen_b.as_ref(), l.txqueues_b.as_ref()),
        ] {
            let q = opt_num(q.or(l.txqueuelen.as_ref()), "txqueuelen", vars)?.unwrap_or(1000);
            let txq = opt_num(txq.or(l.txqueues.as_ref()), "txqueues", vars)?.unwrap_or(1);
            let net = &mut nets[ni].3;
            // A locally administered address of its own: 02:00, the node's
            // number, 00, the interface's number on the node (from 1).
            let k = link_ends
                .iter()
                .flat_map(|(a, b): &((usize, String), (usize, String))| [a.0, b.0])
                .filter(|n| *n == ni)
                .count()
                + 1;
            let mac = format!(
                "02:00:{:02x}:{:02x}:00:{:02x}",
                ni >> 8 & 0xff,
                ni & 0xff,
                k & 0xff
            );
            for cmd in [
                format!("link add dev {dev} numtxqueues {txq} type ether address {mac}"),
                format!("link set dev {dev} txqueuelen {q}"),
                format!("link set dev {dev} up"),
            ] {
                let words: Vec<String> = cmd.split_whitespace().map(String::from).collect();
                let o = ip::run(net, &words);
                if o.code != 0 {
                    return Err(format!("link {li}: ip {cmd}: {}", o.stderr.trim()));
                }
                logs[ni].push(std::iter::once("ip".to_string()).chain(words).collect());
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
                Some("ip") if ip::object(&words[1..]).is_some_and(|o| o != "link") => {
                    return Err(format!(
                        "node {}: `{line}`: a simulated node's address and routes come from \
                         the scenario (its `addr` and the links), not from ip address/route",
                        n.name
                    ))
                }
                Some("ip") => ip::run(net, &words[1..]),
                Some("iptables") => sluice_tc::iptables::run(net, &words[1..]),
                _ => {
                    return Err(format!(
                        "node {}: not a tc/ip/iptables command: {line:?}",
                        n.name
                    ))
                }
            };
            if o.code != 0 {
                return Err(format!(
                    "node {}: `{line}` failed: {}",
                    n.name,
                    o.stderr.trim()
                ));
            }
            logs[ni].push(words);
        }
        let Some(script) = n.script.as_ref().map(|s| sub(s)).transpose()? else {
            continue;
        };
        if script.trim().is_empty() {
            continue;
        }
        let runner = runner.ok_or_else(|| {
            format!("node {}: scripts run with bash and the sluice binary (use `sluice sim`); use `tc = [...]` here", n.name)
        })?;
        nets[ni].3 = runner.run_script(&n.name, &logs[ni], &script, sc.seed)?;
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
        let enabled = w.enabled.as_ref().map(|e| sub(e)).transpose()?;
        if enabled.is_some_and(|e| matches!(e.trim(), "false" | "0" | "no" | "")) {
            continue;
        }
        labels.push(add_workload(&mut world, w, wi, vars, duration)?);
    }
    world.start_apps();
    Ok(Built {
        world,
        duration,
        warmup,
        labels,
    })
}

fn port_configs(
    l: &LinkSpec,
    vars: &BTreeMap<String, String>,
    seed: u64,
) -> Result<(PortConfig, PortConfig), String> {
    let sub = |s: &String| substitute(s, vars);
    let rate = |r: Option<&String>| -> Result<u64, String> {
        let r = r
            .or(l.rate.as_ref())
            .ok_or_else(|| format!("link {}-{}: no rate", l.a, l.b))?;
        parse_rate(&sub(r)?)
            .and_then(|b| b.checked_mul(8).ok_or(sluice_core::units::BadUnit))
            .map_err(|_| format!("bad rate {r:?}"))
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
    let from = world
        .node_id(&w.from)
        .ok_or_else(|| format!("workload {wi}: unknown node {:?}", w.from))?;
    let to = world
        .node_id(&w.to)
        .ok_or_else(|| format!("workload {wi}: unknown node {:?}", w.to))?;
    let dst = world.nodes[to].addr;
    let start = w
        .start
        .as_ref()
        .map(|s| time(&sub(s)?, "start"))
        .transpose()?
        .unwrap_or(Time::ZERO);
    let stop = w
        .stop
        .as_ref()
        .map(|s| time(&sub(s)?, "stop"))
        .transpose()?
        .unwrap_or(duration);
    let tos = opt_num(w.tos.as_ref(), "tos", vars)?.unwrap_or(0) as u8;
    let label = w
        .name
        .clone()
        .unwrap_or_else(|| format!("{}{}", w.kind, wi));
    match w.kind.as_str() {
        "ping" => {
            let interval = w
                .interval
                .as_ref()
                .map(|s| dur(&sub(s)?, "interval"))
                .transpose()?
                .unwrap_or(Duration::from_secs(1));
            if interval == Duration::ZERO {
                // Every echo would be due at the same instant, for ever.
                return Err(format!("workload {wi}: ping interval must be more than 0"));
            }
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
            let rate = w
                .rate
                .as_ref()
                .ok_or_else(|| format!("workload {label}: udp needs a rate"))?;
            let rate_bps = parse_rate(&sub(rate)?)
                .ok()
                .and_then(|b| b.checked_mul(8))
                .ok_or_else(|| format!("bad rate {rate:?}"))?;
            let size = opt_num(w.size.as_ref(), "size", vars)?.unwrap_or(1472) as u16;
            let dport = opt_num(w.port.as_ref(), "port", vars)?.unwrap_or(5001) as u16;
            let sport = 40000 + wi as u16;
            let u = UdpApp {
                dst,
                ports: (sport, dport),
                rate_bps,
                size,
                tos,
                start,
                stop,
                sent: 0,
            };
            let app = world.nodes[from].host.apps.len();
            world.nodes[from].host.apps.push(App::Udp(u));
            let src = world.nodes[from].addr;
            Ok((
                label,
                Measure::Udp {
                    node: to,
                    sender: (from, app),
                    key: (src, sport, dport),
                    start,
                    stop,
                },
            ))
        }
        "tcp" => {
            let count = opt_num(w.count.as_ref(), "count", vars)?.unwrap_or(1);
            let stagger = w
                .stagger
                .as_ref()
                .map(|s| dur(&sub(s)?, "stagger"))
                .transpose()?
                .unwrap_or(Duration::ZERO);
            let dport = opt_num(w.port.as_ref(), "port", vars)?.unwrap_or(5001) as u16;
            let cfg = tcp_config(w, &label, vars)?;
            let total = w
                .bytes
                .as_ref()
                .map(|b| bytes(&sub(b)?, "bytes"))
                .transpose()?;
            world.nodes[to].host.listeners.insert(dport, cfg.clone());
            let src = world.nodes[from].addr;
            let mut measures = vec![];
            for i in 0..count {
                let sport = 10_000 + (wi as u16) * 100 + i as u16;
                let st = start + Duration(stagger.0.saturating_mul(i));
                let app = TcpApp {
                    dst,
                    ports: (sport, dport),
                    tos,
                    start: st,
                    bytes: total,
                    cfg: cfg.clone(),
                    conn: None,
                };
                world.nodes[from].host.apps.push(App::Tcp(app));
                measures.push(Measure::Tcp {
                    node: to,
                    key: (src, sport, dport),
                    start: st,
                });
            }
            if measures.len() == 1 {
                return Ok((label, measures.pop().expect("one")));
            }
            Ok((label, Measure::Group(measures)))
        }
        "web" => {
            let params = web_params(w, &label, vars, dst, start, stop, tos)?;
            let server = &mut world.nodes[to].host;
            // One directory per server port, shared by every workload that uses it.
            let dir = server.web_servers.entry(params.port).or_default().clone();
            let mut server_cfg = params.cfg.clone();
            server_cfg.nodelay = true;
            server.listeners.insert(params.port, server_cfg);
            let client = &mut world.nodes[from].host;
            let app = client.apps.len();
            client.apps.push(App::Web(WebApp::new(params, dir)));
            Ok((label, Measure::Web { node: from, app }))
        }
        other => Err(format!("workload {label}: unknown type {other:?}")),
    }
}

/// The TCP endpoint configuration a workload asks for.
fn tcp_config(
    w: &WorkloadSpec,
    label: &str,
    vars: &BTreeMap<String, String>,
) -> Result<TcpConfig, String> {
    let mut cfg = TcpConfig::default();
    if let Some(b) = &w.sndbuf {
        cfg.send_buffer = bytes(&substitute(b, vars)?, "sndbuf")?;
    }
    if let Some(b) = &w.rcvbuf {
        cfg.recv_buffer = bytes(&substitute(b, vars)?, "rcvbuf")?;
    }
    match w.cc.as_deref() {
        None | Some("cubic") => {}
        Some("reno") => cfg.congestion = CongestionAlgorithm::Reno,
        Some(other) => {
            return Err(format!(
                "workload {label}: unknown congestion control {other:?}"
            ))
        }
    }
    if flag(w.ecn.as_ref(), &format!("workload {label}: ecn"), vars)? {
        cfg.ecn = EcnMode::On;
    }
    Ok(cfg)
}

/// A TOML value after `${}` substitution, as text.
fn text(v: &toml::Value, vars: &BTreeMap<String, String>) -> Result<String, String> {
    substitute(&value_text(v), vars)
}

fn flag(
    v: Option<&toml::Value>,
    what: &str,
    vars: &BTreeMap<String, String>,
) -> Result<bool, String> {
    let Some(v) = v else { return Ok(false) };
    match text(v, vars)?.trim() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" | "" => Ok(false),
        other => Err(format!("{what}: not true or false: {other:?}")),
    }
}

/// An optional number from the scenario, `${var}`s substituted.
fn opt_num(
    v: Option<&toml::Value>,
    what: &str,
    vars: &BTreeMap<String, String>,
) -> Result<Option<u64>, String> {
    v.map(|v| num(&toml::Value::String(text(v, vars)?), what))
        .transpose()
}

/// More objects than any page has; a bound so a typo cannot exhaust memory.
const MAX_OBJECTS: u64 = 100_000;

/// A web workload's parameters from its keys.
fn web_params(
    w: &WorkloadSpec,
    label: &str,
    vars: &BTreeMap<String, String>,
    dst: Ipv4Addr,
    start: Time,
    stop: Time,
    tos: u8,
) -> Result<WebParams, String> {
    let what = |key: &str| format!("workload {label}: {key}");
    let size = |s: &String, key: &str| bytes(&substitute(s, vars)?, &what(key));
    let page = w
        .page
        .as_ref()
        .map(|p| size(p, "page"))
        .transpose()?
        .ok_or_else(|| what("web needs a page size"))?;
    let objects = match (
        &w.object_sizes,
        opt_num(w.objects.as_ref(), &what("objects"), vars)?,
    ) {
        (Some(_), Some(_)) => {
            return Err(what("give objects + object_size or object_sizes, not both"))
        }
        (Some(list), None) => list
            .iter()
            .map(|v| size(&text(v, vars)?, "object_sizes"))
            .collect::<Result<_, _>>()?,
        (None, Some(n)) if n > MAX_OBJECTS => {
            return Err(what(&format!("at most {MAX_OBJECTS} objects")))
        }
        (None, Some(n)) => {
            let each = w
                .object_size
                .as_ref()
                .ok_or_else(|| what("objects needs an object_size"))?;
            vec![size(each, "object_size")?; n as usize]
        }
        (None, None) => vec![],
    };
    let handshake = flag(w.handshake.as_ref(), &what("handshake"), vars)?;
    let connections = opt_num(w.connections.as_ref(), &what("connections"), vars)?.unwrap_or(6);
    if connections == 0 {
        return Err(what("connections must be at least 1"));
    }
    let repeat = opt_num(w.repeat.as_ref(), &what("repeat"), vars)?.unwrap_or(1);
    let interval = w
        .interval
        .as_ref()
        .map(|s| dur(&substitute(s, vars)?, &what("interval")))
        .transpose()?;
    let port =
        opt_num(w.port.as_ref(), &what("port"), vars)?.unwrap_or(if handshake { 443 } else { 80 });
    let port = u16::try_from(port)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| what("port: 1 to 65535"))?;
    let mut cfg = tcp_config(w, label, vars)?;
    cfg.nodelay = true; // browsers set TCP_NODELAY
    Ok(WebParams {
        dst,
        port,
        tos,
        page,
        objects,
        connections: connections as usize,
        multiplexed: flag(w.multiplexed.as_ref(), &what("multiplexed"), vars)?,
        handshake,
        warm: flag(w.warm.as_ref(), &what("warm"), vars)?,
        repeat: repeat.min(u32::MAX as u64) as u32,
        interval: interval.unwrap_or(Duration::ZERO),
        request: w
            .request_size
            .as_ref()
            .map(|s| size(s, "request_size"))
            .transpose()?
            .unwrap_or(REQUEST_BYTES),
        start,
        stop,
        cfg,
    })
}

/// Told how far a run has got: `(variant, virtual time reached, virtual
/// end)`, at its start, every [`PROGRESS_STEPS`]th of it, and at its end.
/// The simulation never reads a clock; a caller that wants wall-clock
/// behaviour (a progress bar after a second) reads its own.
pub type Progress<'a> = &'a mut dyn FnMut(&str, Time, Time);

/// How many times a run reports its progress.
pub const PROGRESS_STEPS: u64 = 1000;

/// Run a built world to its end and collect the results; with `tc_stats`,
/// also what `tc -s qdisc show` / `tc -s class show` print for every device.
pub fn run(b: Built, variant: &str, tc_stats: bool) -> RunResult {
    run_observed(b, variant, tc_stats, &mut |_, _, _| {})
}

/// [`run`], telling `progress` how far it has got. Running in steps changes
/// nothing: the world runs every event up to each step's end, in the same
/// order as in one go.
pub fn run_observed(mut b: Built, variant: &str, tc_stats: bool, progress: Progress) -> RunResult {
    let step = Duration((b.duration.0 / PROGRESS_STEPS).max(1));
    let mut reached = Time::ZERO;
    progress(variant, reached, b.duration);
    while reached < b.duration {
        reached = Time(reached.0.saturating_add(step.0).min(b.duration.0));
        b.world.run_until(reached);
        progress(variant, reached, b.duration);
    }
    let mut res = RunResult {
        variant: variant.to_string(),
        ..Default::default()
    };
    if tc_stats {
        res.tc_stats = Some(tc_stats_text(&mut b.world));
    }
    res.losses = b.world.losses;
    for_each_measure(&b, |label, m| collect_flow(&b, label, m, &mut res));
    // Then let the answers to the last pings come home, as ping waits for
    // them, with every application stopped.
    for n in &mut b.world.nodes {
        n.host.stop_applications();
    }
    b.world.run_until(b.duration + PING_DRAIN);
    for_each_measure(&b, |label, m| collect_ping(&b, label, m, &mut res));
    res.compute_shares();
    res
}

/// How long after the end replies to pings are still counted (ping's `-W`).
pub const PING_DRAIN: Duration = Duration::from_secs(10);

fn for_each_measure(b: &Built, mut f: impl FnMut(&str, &Measure)) {
    for (label, m) in &b.labels {
        match m {
            Measure::Group(ms) => {
                for (i, m) in ms.iter().enumerate() {
                    f(&format!("{label}.{i}"), m);
                }
            }
            m => f(label, m),
        }
    }
}

fn collect_ping(b: &Built, label: &str, m: &Measure, res: &mut RunResult) {
    if let Measure::Ping { node, app } = m {
        if let App::Ping(p) = &b.world.nodes[*node].host.apps[*app] {
            res.pings
                .push(PingResult::from_samples(label, p.sent, &p.rtts));
        }
    }
}

fn collect_flow(b: &Built, label: &str, m: &Measure, res: &mut RunResult) {
    let end = b.duration;
    match m {
        Measure::Ping { .. } => {}
        Measure::Udp {
            node,
            sender,
            key,
            start,
            stop,
        } => {
            let flow = b.world.nodes[*node]
                .host
                .udp_rx
                .get(key)
                .cloned()
                .unwrap_or_default();
            let sent = match &b.world.nodes[sender.0].host.apps[sender.1] {
                App::Udp(u) => u.sent,
                _ => 0,
            };
            let from = (*start).max(b.warmup);
            res.flows.push(
                FlowResult::new(label, "udp", &flow.bins, from, (*stop).min(end))
                    .with_datagrams(sent, flow.packets),
            );
        }
        Measure::Tcp { node, key, start } => {
            let flow = b.world.nodes[*node]
                .host
                .tcp_rx
                .get(key)
                .cloned()
                .unwrap_or_default();
            res.flows.push(FlowResult::new(
                label,
                "tcp",
                &flow.bins,
                (*start).max(b.warmup),
                end,
            ));
        }
        Measure::Web { node, app } => {
            if let App::Web(w) = &b.world.nodes[*node].host.apps[*app] {
                res.webs
                    .push(WebResult::from_samples(label, &w.samples, w.loading()));
            }
        }
        Measure::Group(_) => {}
    }
}

/// What `tc -s qdisc show` and `tc -s class show` print for every device of every node.
fn tc_stats_text(world: &mut World) -> String {
    let mut text = String::new();
    let opts = tc::Opts {
        stats: true,
        ..Default::default()
    };
    let now = world.queue.now();
    for node in &mut world.nodes {
        // At the end of the run: actions' ages count on the simulated clock.
        node.net.now = now;
        let names: Vec<String> = node
            .ifaces
            .iter()
            .map(|i| node.net.devices[i.dev].info.name.clone())
            .collect();
        for dev in names {
            for obj in ["qdisc", "class"] {
                let words: Vec<String> = [obj, "show", "dev", &dev]
                    .iter()
                    .map(|w| w.to_string())
                    .collect();
                let o = tc::run(&mut node.net, &opts, &words);
                if !o.stdout.is_empty() {
                    text.push_str(&format!(
                        "# {}: tc -s {obj} show dev {dev}\n{}",
                        node.name, o.stdout
                    ));
                }
            }
        }
    }
    text
}

/// Run every variant of a scenario (or just the defaults when it has none).
pub fn run_all(
    sc: &Scenario,
    overrides: &BTreeMap<String, String>,
    only: Option<&str>,
    tc_stats: bool,
    runner: Option<&dyn ScriptRunner>,
) -> Result<Vec<RunResult>, String> {
    run_all_observed(sc, overrides, only, tc_stats, runner, &mut |_, _, _| {})
}

/// [`run_all`], telling `progress` how far each variant has got.
pub fn run_all_observed(
    sc: &Scenario,
    overrides: &BTreeMap<String, String>,
    only: Option<&str>,
    tc_stats: bool,
    runner: Option<&dyn ScriptRunner>,
    progress: Progress,
) -> Result<Vec<RunResult>, String> {
    let mut out = vec![];
    if sc.variants.is_empty() {
        let vars = sc.vars_for(None, overrides);
        out.push(run_observed(
            build_with(sc, &vars, runner)?,
            "default",
            tc_stats,
            progress,
        ));
    }
    for v in &sc.variants {
        if only.is_some_and(|o| o != v.name) {
            continue;
        }
        let vars = sc.vars_for(Some(v), overrides);
        let built =
            build_with(sc, &vars, runner).map_err(|e| format!("variant {}: {e}", v.name))?;
        out.push(run_observed(built, &v.name, tc_stats, progress));
    }
    Ok(out)
}
