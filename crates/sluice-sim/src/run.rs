//! Build a [`World`] from a scenario and a variant, run it, and measure.

use crate::host::{App, PingApp, TcpApp, UdpApp};
use crate::limits::{self, MAX_TIME};
use crate::report::{FlowResult, LinkResult, PingResult, RunResult, WebResult};
use crate::scenario::{substitute, value_text, LinkSpec, Scenario, WorkloadSpec};
use crate::tcp::{CongestionAlgorithm, EcnMode, TcpConfig};
use crate::varying::{self, Timeline};
use crate::web::{WebApp, WebParams, REQUEST_BYTES};
use crate::world::{Event, World};
use crate::{events, host::BIN};
use sluice_core::port::{PortConfig, TxBuffer, WireChange};
use sluice_core::time::{Duration, Time};
use sluice_tc::net::Net;
use sluice_tc::{ip, tc};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;

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
    /// What the user should know before the run starts (a long run's
    /// estimate); `sluice sim` prints them on stderr.
    pub warnings: Vec<String>,
    /// The link directions whose capacity or delay change over the run.
    pub links: Vec<LinkWatch>,
}

/// A link direction whose capacity or delay changes (a trace, a schedule,
/// a delay trace, or link events): its capacity over the run, and the port
/// whose queueing delay is recorded.
pub struct LinkWatch {
    /// `LINK ab` or `LINK ba`.
    pub name: String,
    /// The sending node and its interface.
    pub at: (usize, usize),
    /// The capacity it offers.
    pub timeline: Timeline,
    /// Its queueing delay is recorded (not on a delay trace, where a
    /// packet's propagation delay is not known from outside).
    pub watched: bool,
    /// What the wire starts with at time 0 (a trace, a schedule, a delay
    /// trace; nothing when only events change it).
    pub start: WireChange,
}

/// Start every link direction's trace, schedule and delay trace at time 0,
/// and watch those whose wire changes over the run.
fn watch_links(
    world: &mut World,
    sc: &Scenario,
    ends: &events::LinkEnds,
    initial: Vec<(WireChange, WireChange)>,
    timed: &[events::Timed],
    duration: Time,
) -> Result<Vec<LinkWatch>, String> {
    let mut out = vec![];
    for ((l, &(a, b)), (ia, ib)) in sc.links.iter().zip(ends).zip(initial) {
        for (dir, (node, iface), init) in [("ab", a, ia), ("ba", b, ib)] {
            let changes: Vec<(Time, WireChange)> = timed
                .iter()
                .filter_map(|t| match &t.action {
                    events::Action::Wire {
                        node: n,
                        iface: i,
                        change,
                    } if (*n, *i) == (node, iface) => Some((t.at, change.clone())),
                    _ => None,
                })
                .collect();
            if init == WireChange::default() && changes.is_empty() {
                continue;
            }
            let name = format!("{} {dir}", l.label());
            let cfg = *world.nodes[node].ifaces[iface].port.config();
            let timeline = Timeline::replay(cfg.rate_bps, cfg.delay, &init, &changes, duration)
                .map_err(|e| format!("link {name}: {e}"))?;
            let watched = init.delay_trace.is_none();
            if init != WireChange::default() {
                world.change_wire(node, iface, Time::ZERO, init.clone());
            }
            if watched {
                world.watch(node, iface);
            }
            out.push(LinkWatch {
                name,
                at: (node, iface),
                timeline,
                watched,
                start: init,
            });
        }
    }
    Ok(out)
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

/// A time field, `${}`s substituted, in `min..=MAX_TIME`.
fn time_in(s: &str, what: &str, min: Duration) -> Result<Duration, String> {
    limits::time(s, what, min, MAX_TIME)
}

/// An optional whole number from the scenario, `${var}`s substituted, in `min..=max`.
fn opt_int(
    v: Option<&toml::Value>,
    what: &str,
    vars: &BTreeMap<String, String>,
    (min, max): (u64, u64),
) -> Result<Option<u64>, String> {
    v.map(|v| limits::integer(&text(v, vars)?, what, min, max))
        .transpose()
}

fn split_end(s: &str) -> Result<(&str, &str), String> {
    s.split_once(':')
        .ok_or_else(|| format!("link end {s:?}: expected node:device"))
}

/// A transmit buffer: `100p` packets, or bytes (`64000b`, `64k`).
fn buffer(s: Option<&String>, what: &str) -> Result<TxBuffer, String> {
    s.map_or(Ok(TxBuffer::Packets(1000)), |s| {
        crate::events::buffer(s, what, 1)
    })
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
    sc.check_shape()?;
    let sub = |s: &str| substitute(s, vars);
    let duration = Time(time_in(&sub(&sc.duration)?, "duration", Duration(1))?.0);
    let warmup = match &sc.warmup {
        Some(w) => Time(time_in(&sub(w)?, "warmup", Duration::ZERO)?.0),
        None => Time::ZERO,
    };
    if warmup >= duration {
        return Err(format!(
            "warmup: {} is not before the end of the run (duration {})",
            limits::fmt_duration(Duration(warmup.0)),
            limits::fmt_duration(Duration(duration.0))
        ));
    }
    let wires = sc
        .links
        .iter()
        .map(|l| port_configs(l, vars, sc.seed, sc.dir.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let (nets, link_ends) = build_nets(sc, vars, runner)?;
    let mut world = World::default();
    for (name, addr, router, net) in nets {
        world.add_node(&name, addr, router, net);
    }
    let mut ends = vec![];
    let mut initial = vec![];
    for ((wa, wb), ((ai, ad), (bi, bd))) in wires.into_iter().zip(link_ends) {
        let (ia, ib) = world.connect((ai, &ad, wa.cfg), (bi, &bd, wb.cfg))?;
        ends.push(((ai, ia), (bi, ib)));
        initial.push((wa.initial, wb.initial));
    }
    world.compute_routes();
    let node_index = |n: &str| sc.nodes.iter().position(|o| o.name == n);
    let timed = events::build(
        &sc.events,
        &events::Context {
            links: &sc.links,
            ends: &ends,
            node_index: &node_index,
            vars,
            duration,
            dir: sc.dir.as_deref(),
        },
    )?;
    check_commands(sc, vars, runner, &timed)?;
    let watches = watch_links(&mut world, sc, &ends, initial, &timed, duration)?;
    if !watches.is_empty() {
        for n in &mut world.nodes {
            n.host.tcp_arrivals = Some(BTreeMap::new());
        }
    }
    world.timed = timed;
    for (i, t) in world.timed.iter().enumerate() {
        world.queue.schedule(t.at, Event::Timed(i));
    }
    let node_tcp = sc
        .nodes
        .iter()
        .map(|n| crate::sysctl::of_node(n, vars))
        .collect::<Result<Vec<_>, _>>()?;
    let mut labels: Vec<(String, Measure)> = vec![];
    let mut servers = Servers::new();
    let mut packets: Vec<(String, u64)> = vec![];
    for (wi, w) in sc.workloads.iter().enumerate() {
        let label = w
            .name
            .clone()
            .unwrap_or_else(|| format!("{}{}", w.kind, wi));
        let what = format!("workload {label}");
        // `false`, `0`, `no`, `off` or empty leave it out; anything else
        // but `true`, `1`, `yes`, `on` is a mistake.
        if let Some(e) = &w.enabled {
            let e = toml::Value::String(e.clone());
            if !flag(Some(&e), &format!("{what}: enabled"), vars)? {
                continue;
            }
        }
        if labels.iter().any(|(l, _)| *l == label) {
            return Err(format!("{what}: another workload has this name"));
        }
        let cx = Workload {
            w,
            wi,
            what: &what,
            vars,
            duration,
            node_tcp: &node_tcp,
        };
        let (measure, estimate) = add_workload(&mut world, &cx, &mut servers)?;
        packets.push((label.clone(), estimate));
        labels.push((label, measure));
    }
    let warnings = packet_budget(&packets)?;
    world.start_apps();
    Ok(Built {
        world,
        duration,
        warmup,
        labels,
        warnings,
        links: watches,
    })
}

/// Run the timed events' commands once, in time order, on a copy of the
/// network as the run will start it, so a command that fails is an error
/// before the run, not in the middle of it.
fn check_commands(
    sc: &Scenario,
    vars: &BTreeMap<String, String>,
    runner: Option<&dyn ScriptRunner>,
    timed: &[events::Timed],
) -> Result<(), String> {
    if !timed
        .iter()
        .any(|t| matches!(t.action, events::Action::Commands { .. }))
    {
        return Ok(());
    }
    let (mut copy, _) = build_nets(sc, vars, runner)?;
    for t in timed {
        if let events::Action::Commands { node, lines } = &t.action {
            let (name, _, _, net) = &mut copy[*node];
            net.now = t.at;
            for (line, words) in lines {
                node_command(net, name, line, words).map_err(|e| format!("{}: {e}", t.what))?;
            }
        }
    }
    Ok(())
}

/// A node's namespace under construction: name, address, router, devices.
type NodeNet = (String, Ipv4Addr, bool, Net);
/// Each link's ends: (node, device name) of a and of b.
type Ends = Vec<((usize, String), (usize, String))>;

/// Every node's namespace with the devices its links name, its tc lines
/// run and its script: the nodes of `sc` as they start the run.
fn build_nets(
    sc: &Scenario,
    vars: &BTreeMap<String, String>,
    runner: Option<&dyn ScriptRunner>,
) -> Result<(Vec<NodeNet>, Ends), String> {
    let sub = |s: &str| substitute(s, vars);
    // Every node gets a namespace with the devices its links name.
    let mut nets: Vec<NodeNet> = vec![];
    for n in &sc.nodes {
        let addr = node_addr(&sub(&n.addr)?, &format!("node {}: addr", n.name))?;
        if let Some(other) = nets.iter().find(|o| o.1 == addr) {
            return Err(format!(
                "node {}: addr {addr} is node {}'s address too",
                n.name, other.0
            ));
        }
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
    for l in &sc.links {
        let (an, ad) = split_end(&l.a)?;
        let (bn, bd) = split_end(&l.b)?;
        let what = link_name(l);
        let ix = |name| node_ix(&nets, name).map_err(|e| format!("{what}: {e}"));
        let (ai, bi) = (ix(an)?, ix(bn)?);
        for (ni, dev, end, q, txq) in [
            (ai, ad, "a", l.txqueuelen_a.as_ref(), l.txqueues_a.as_ref()),
            (bi, bd, "b", l.txqueuelen_b.as_ref(), l.txqueues_b.as_ref()),
        ] {
            // ip link reads txqueuelen with get_integer (0 to INT_MAX); a
            // device has 1 to 4096 transmit queues.
            let key = |k: &str, own: bool| {
                format!(
                    "{what}: {k}{}",
                    if own {
                        format!("_{end}")
                    } else {
                        String::new()
                    }
                )
            };
            let q = opt_int(
                q.or(l.txqueuelen.as_ref()),
                &key("txqueuelen", q.is_some()),
                vars,
                (0, i32::MAX as u64),
            )?
            .unwrap_or(1000);
            let txq = opt_int(
                txq.or(l.txqueues.as_ref()),
                &key("txqueues", txq.is_some()),
                vars,
                (1, limits::MAX_TXQUEUES),
            )?
            .unwrap_or(1);
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
                    return Err(format!("{what}: ip {cmd}: {}", o.stderr.trim()));
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
            node_command(net, &n.name, &line, &words)?;
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
    Ok((nets, link_ends))
}

/// Run one tc/ip/iptables command line on a node, as its `tc = [...]`
/// lines and its events' commands run: an error names the node and line.
pub fn node_command(net: &mut Net, node: &str, line: &str, words: &[String]) -> Result<(), String> {
    let o = match words.first().map(String::as_str) {
        Some("tc") => match tc::parse_global(&words[1..]) {
            Ok((opts, rest)) => tc::run(net, &opts, &rest),
            Err(o) => o,
        },
        Some("ip") if ip::object(&words[1..]).is_some_and(|o| o != "link") => {
            return Err(format!(
                "node {}: `{line}`: a simulated node's address and routes come from \
                         the scenario (its `addr` and the links), not from ip address/route",
                node
            ))
        }
        Some("ip") => ip::run(net, &words[1..]),
        Some("iptables") => sluice_tc::iptables::run(net, &words[1..]),
        _ => {
            return Err(format!(
                "node {}: not a tc/ip/iptables command: {line:?}",
                node
            ))
        }
    };
    if o.code != 0 {
        return Err(format!("node {node}: `{line}` failed: {}", o.stderr.trim()));
    }
    Ok(())
}

/// A link's name in messages: `link a:eth0-b:eth0`.
fn link_name(l: &LinkSpec) -> String {
    format!("link {}-{}", l.a, l.b)
}

/// A node's address: IPv4, and one a host can have (not 0.0.0.0, the
/// broadcast address, a multicast or a loopback address).
fn node_addr(text: &str, what: &str) -> Result<Ipv4Addr, String> {
    let addr: Ipv4Addr = text
        .trim()
        .parse()
        .map_err(|_| format!("{what}: not an IPv4 address: {text:?}"))?;
    if addr.is_unspecified() || addr.is_broadcast() || addr.is_multicast() || addr.is_loopback() {
        return Err(format!(
            "{what}: {addr} is not a host's address (unspecified, broadcast, multicast or loopback)"
        ));
    }
    Ok(addr)
}

/// Refuse a run whose workloads are estimated to send more than
/// [`limits::PACKETS_MAX`] packets; above [`limits::PACKETS_WARN`], a
/// warning with the estimate.
fn packet_budget(packets: &[(String, u64)]) -> Result<Vec<String>, String> {
    let total = packets.iter().fold(0u64, |t, (_, n)| t.saturating_add(*n));
    let Some((top, most)) = packets.iter().max_by_key(|(_, n)| *n) else {
        return Ok(vec![]);
    };
    let about = format!(
        "the workloads would send about {} packets ({} of them workload {top}'s)",
        millions(total),
        millions(*most)
    );
    if total > limits::PACKETS_MAX {
        return Err(format!(
            "{about}: more than the {} a run may send (at a few million packets a second \
             that is more than ten minutes); shorten the run or lower the rates",
            millions(limits::PACKETS_MAX)
        ));
    }
    if total > limits::PACKETS_WARN {
        return Ok(vec![format!(
            "{about}; at 1.5 to 3 million packets a second that is {} of wall time",
            wall_time(total)
        )]);
    }
    Ok(vec![])
}

fn millions(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.0} million", n as f64 / 1e6)
    } else {
        n.to_string()
    }
}

/// Wall time for `packets` at 1.5 to 3 million packets a second (see
/// [`limits::PACKETS_WARN`]).
fn wall_time(packets: u64) -> String {
    let (least, most) = (packets / 3_000_000, packets / 1_500_000);
    if most < 120 {
        format!("{least} to {most} s")
    } else {
        format!("{} to {} min", least / 60, most / 60)
    }
}

/// One direction of a link as the scenario sets it up: the port's
/// configuration and what it starts with at time 0 (a trace, a schedule,
/// a delay trace), or nothing.
struct WireSpec {
    cfg: PortConfig,
    initial: WireChange,
}

/// Both directions of a link.
fn port_configs(
    l: &LinkSpec,
    vars: &BTreeMap<String, String>,
    seed: u64,
    dir: Option<&Path>,
) -> Result<(WireSpec, WireSpec), String> {
    let sub = |s: &String| substitute(s, vars);
    let what = link_name(l);
    let once = flag(l.trace_once.as_ref(), &format!("{what}: trace_once"), vars)?;
    let step = match &l.delay_trace_step {
        Some(s) => time_in(
            &sub(s)?,
            &format!("{what}: delay_trace_step"),
            Duration::from_nanos(1),
        )?,
        None => Duration::from_millis(1),
    };
    let varying = |d: &str| -> Result<WireChange, String> {
        let (t, sched, dt) = match d {
            "ab" => (&l.trace_ab, &l.schedule_ab, &l.delay_trace_ab),
            _ => (&l.trace_ba, &l.schedule_ba, &l.delay_trace_ba),
        };
        let key = |k: &str| format!("{what}: {k}_{d}");
        Ok(WireChange {
            trace: t
                .as_ref()
                .map(|t| varying::trace(t, &key("trace"), dir, vars).map(|t| (t, once)))
                .transpose()?,
            schedule: sched
                .as_ref()
                .map(|s| varying::schedule(&sub(s)?, &key("schedule"), dir))
                .transpose()?,
            delay_trace: dt
                .as_ref()
                .map(|f| varying::delay_trace(&sub(f)?, step, &key("delay_trace"), dir))
                .transpose()?,
            ..Default::default()
        })
    };
    let (init_ab, init_ba) = (varying("ab")?, varying("ba")?);
    if l.trace_once.is_some() && init_ab.trace.is_none() && init_ba.trace.is_none() {
        return Err(format!(
            "{what}: trace_once: the link has no trace_ab or trace_ba"
        ));
    }
    if l.delay_trace_step.is_some()
        && init_ab.delay_trace.is_none()
        && init_ba.delay_trace.is_none()
    {
        return Err(format!(
            "{what}: delay_trace_step: the link has no delay_trace_ab or delay_trace_ba"
        ));
    }
    // A direction's rate: its own key, else `rate`; a trace instead of
    // either; a schedule that sets one from 0s may stand for it.
    let rate = |r: Option<&String>, key: &str, init: &WireChange| -> Result<u64, String> {
        let d = &key[key.len() - 2..];
        let given = r.map(|r| (r, key)).or(l.rate.as_ref().map(|r| (r, "rate")));
        if let Some(t) = &init.trace {
            if let Some((_, k)) = given {
                return Err(format!(
                    "{what}: trace_{d} and {k}: a direction's capacity is a trace or a rate, not both"
                ));
            }
            return Ok(t.0.mean_bps().round().max(8.0) as u64);
        }
        if let Some((r, k)) = given {
            return limits::rate(&sub(r)?, &format!("{what}: {k}"));
        }
        let first = init.schedule.as_ref().and_then(|s| s.steps().first());
        match first {
            Some((at, c)) if at.0 == 0 => c.rate_bps.filter(|r| *r > 0).ok_or_else(|| {
                format!("{what}: schedule_{d}: its first row (0s) sets no rate and the link has no {key} or rate")
            }),
            Some(_) => Err(format!(
                "{what}: schedule_{d}: it starts after 0s and the link has no {key} or rate for the time before"
            )),
            None => Err(format!("{what}: no rate (rate, {key}, trace_{d} or schedule_{d})")),
        }
    };
    let delay = match &l.delay {
        Some(d) => time_in(&sub(d)?, &format!("{what}: delay"), Duration::ZERO)?,
        None => Duration::ZERO,
    };
    let loss = limits::probability(l.loss.unwrap_or(0.0), &format!("{what}: loss"))?;
    let overhead = limits::integer(
        &l.overhead.unwrap_or(0).to_string(),
        &format!("{what}: overhead"),
        0,
        limits::MAX_OVERHEAD,
    )? as u32;
    let mk = |r, b: Option<&String>, key: &str, s, init: WireChange| -> Result<WireSpec, String> {
        let key = if b.is_some() { key } else { "buffer" };
        let b = b.or(l.buffer.as_ref()).map(sub).transpose()?;
        let what = format!("{what}: {key}");
        let buffer = match &b {
            // On a trace, `0p` is no ring: opportunities take from the
            // qdisc, as Mahimahi's link takes from its queue; that is the
            // default there.
            Some(b) if init.trace.is_some() => events::buffer(b, &what, 0)?,
            None if init.trace.is_some() => TxBuffer::Packets(0),
            b => buffer(b.as_ref(), &what)?,
        };
        Ok(WireSpec {
            cfg: PortConfig {
                rate_bps: r,
                delay,
                buffer,
                overhead,
                loss,
                seed: s,
            },
            initial: init,
        })
    };
    Ok((
        mk(
            rate(l.rate_ab.as_ref(), "rate_ab", &init_ab)?,
            l.buffer_a.as_ref(),
            "buffer_a",
            seed ^ 0xa,
            init_ab,
        )?,
        mk(
            rate(l.rate_ba.as_ref(), "rate_ba", &init_ba)?,
            l.buffer_b.as_ref(),
            "buffer_b",
            seed ^ 0xb,
            init_ba,
        )?,
    ))
}

/// One workload being added, with what its messages and estimates need.
struct Workload<'a> {
    w: &'a WorkloadSpec,
    wi: usize,
    /// `workload NAME`, the start of its messages.
    what: &'a str,
    vars: &'a BTreeMap<String, String>,
    duration: Time,
    /// Each node's TCP configuration from its sysctls.
    node_tcp: &'a [TcpConfig],
}

impl Workload<'_> {
    fn key(&self, k: &str) -> String {
        format!("{}: {k}", self.what)
    }
    fn sub(&self, s: &str) -> Result<String, String> {
        substitute(s, self.vars)
    }
    fn time(&self, v: Option<&String>, k: &str, min: Duration) -> Result<Option<Duration>, String> {
        v.map(|s| time_in(&self.sub(s)?, &self.key(k), min))
            .transpose()
    }
    fn int(
        &self,
        v: Option<&toml::Value>,
        k: &str,
        range: (u64, u64),
    ) -> Result<Option<u64>, String> {
        opt_int(v, &self.key(k), self.vars, range)
    }
    fn bytes(&self, v: Option<&String>, k: &str, min: u64) -> Result<Option<u64>, String> {
        v.map(|s| limits::bytes(&self.sub(s)?, &self.key(k), min, limits::MAX_TRANSFER))
            .transpose()
    }
    fn port(&self, default: u16) -> Result<u16, String> {
        match &self.w.port {
            Some(p) => limits::port(&text(p, self.vars)?, &self.key("port")),
            None => Ok(default),
        }
    }
    fn flag(&self, v: Option<&toml::Value>, k: &str) -> Result<bool, String> {
        flag(v, &self.key(k), self.vars)
    }
}

/// The keys each workload type reads, beyond `type`, `from`, `to`, `name`,
/// `start`, `tos` and `enabled`; any other key given is refused, not ignored.
const KEYS: &[(&str, &[&str])] = &[
    ("ping", &["interval", "size", "stop"]),
    ("udp", &["rate", "size", "port", "stop"]),
    (
        "tcp",
        &[
            "count", "stagger", "bytes", "sndbuf", "rcvbuf", "cc", "ecn", "port",
        ],
    ),
    (
        "web",
        &[
            "page",
            "objects",
            "object_size",
            "object_sizes",
            "connections",
            "multiplexed",
            "handshake",
            "warm",
            "repeat",
            "interval",
            "request_size",
            "sndbuf",
            "rcvbuf",
            "cc",
            "ecn",
            "port",
            "stop",
        ],
    ),
];

/// The type-specific keys a workload gives.
fn given_keys(w: &WorkloadSpec) -> Vec<&'static str> {
    [
        ("stop", w.stop.is_some()),
        ("interval", w.interval.is_some()),
        ("rate", w.rate.is_some()),
        ("size", w.size.is_some()),
        ("count", w.count.is_some()),
        ("stagger", w.stagger.is_some()),
        ("bytes", w.bytes.is_some()),
        ("sndbuf", w.sndbuf.is_some()),
        ("rcvbuf", w.rcvbuf.is_some()),
        ("cc", w.cc.is_some()),
        ("ecn", w.ecn.is_some()),
        ("page", w.page.is_some()),
        ("objects", w.objects.is_some()),
        ("object_size", w.object_size.is_some()),
        ("object_sizes", w.object_sizes.is_some()),
        ("connections", w.connections.is_some()),
        ("multiplexed", w.multiplexed.is_some()),
        ("handshake", w.handshake.is_some()),
        ("warm", w.warm.is_some()),
        ("repeat", w.repeat.is_some()),
        ("request_size", w.request_size.is_some()),
        ("port", w.port.is_some()),
    ]
    .into_iter()
    .filter_map(|(k, given)| given.then_some(k))
    .collect()
}

/// What listens on each (node, port): a bulk TCP sink or a web server, and
/// the configuration of the connections it accepts.
type Servers = BTreeMap<(usize, u16), (&'static str, TcpConfig)>;

/// Register a listener; two workloads may share one only if they ask for
/// the same kind of server with the same TCP configuration.
fn listen(
    servers: &mut Servers,
    at: (usize, u16),
    kind: &'static str,
    cfg: &TcpConfig,
    what: &str,
) -> Result<(), String> {
    match servers.get(&at) {
        Some((k, c)) if *k != kind || c != cfg => Err(format!(
            "{what}: port {}: another workload listens there with a different {}",
            at.1,
            if *k != kind {
                "server"
            } else {
                "TCP configuration"
            }
        )),
        _ => {
            servers.insert(at, (kind, cfg.clone()));
            Ok(())
        }
    }
}

/// Add one workload to the world: where its results will be, and an
/// estimate of the packets it makes the network carry.
fn add_workload(
    world: &mut World,
    cx: &Workload,
    servers: &mut Servers,
) -> Result<(Measure, u64), String> {
    let (w, what) = (cx.w, cx.what);
    let allowed = KEYS
        .iter()
        .find(|(k, _)| *k == w.kind)
        .map(|(_, keys)| *keys)
        .ok_or_else(|| format!("{what}: unknown type {:?} (ping, udp, tcp or web)", w.kind))?;
    if let Some(k) = given_keys(w).into_iter().find(|k| !allowed.contains(k)) {
        return Err(format!("{what}: {k}: not a key of a {} workload", w.kind));
    }
    let from = world
        .node_id(&w.from)
        .ok_or_else(|| format!("{what}: from: unknown node {:?}", w.from))?;
    let to = world
        .node_id(&w.to)
        .ok_or_else(|| format!("{what}: to: unknown node {:?}", w.to))?;
    if from == to {
        return Err(format!("{what}: from and to are the same node"));
    }
    let (path_bps, path_delay) = world.path(from, to).ok_or_else(|| {
        format!(
            "{what}: no route from {} to {} (only routers forward)",
            w.from, w.to
        )
    })?;
    let dst = world.nodes[to].addr;
    let duration = Duration(cx.duration.0);
    let start = Time(
        cx.time(w.start.as_ref(), "start", Duration::ZERO)?
            .unwrap_or_default()
            .0,
    );
    if start >= cx.duration {
        return Err(format!(
            "{what}: start: {} is not before the end of the run (duration {})",
            limits::fmt_duration(Duration(start.0)),
            limits::fmt_duration(duration)
        ));
    }
    let stop = match cx.time(w.stop.as_ref(), "stop", Duration::ZERO)? {
        Some(s) if Time(s.0) <= start => {
            return Err(format!(
                "{what}: stop: {} is not after start ({})",
                limits::fmt_duration(s),
                limits::fmt_duration(Duration(start.0))
            ))
        }
        Some(s) => Time(s.0),
        None => cx.duration,
    };
    // Virtual time the workload is active for, within the run.
    let active = stop.min(cx.duration) - start;
    let tos = cx.int(w.tos.as_ref(), "tos", (0, 255))?.unwrap_or(0) as u8;
    match w.kind.as_str() {
        "ping" => {
            let interval = cx
                .time(w.interval.as_ref(), "interval", Duration::ZERO)?
                .unwrap_or(Duration::from_secs(1));
            if interval < limits::MIN_PING_INTERVAL {
                return Err(format!(
                    "{}: {} is less than {}, the least interval iputils ping allows",
                    cx.key("interval"),
                    limits::fmt_duration(interval),
                    limits::fmt_duration(limits::MIN_PING_INTERVAL)
                ));
            }
            let mut p = PingApp::new(dst, interval, start, stop, 0x100 + cx.wi as u16);
            p.tos = tos as u16;
            if let Some(sz) = cx.int(w.size.as_ref(), "size", (0, limits::MAX_IP_PAYLOAD))? {
                p.size = sz as u16;
            }
            let app = world.nodes[from].host.apps.len();
            world.nodes[from].host.apps.push(App::Ping(p));
            // A request and its reply per interval.
            let requests = active.0.div_ceil(interval.0);
            Ok((
                Measure::Ping { node: from, app },
                requests.saturating_mul(2),
            ))
        }
        "udp" => {
            let rate = w
                .rate
                .as_ref()
                .ok_or_else(|| format!("{what}: udp needs a rate"))?;
            let rate_bps = limits::rate(&cx.sub(rate)?, &cx.key("rate"))?;
            let size = cx
                .int(w.size.as_ref(), "size", (0, limits::MAX_IP_PAYLOAD))?
                .unwrap_or(1472) as u16;
            let dport = cx.port(5001)?;
            let sport = reserve(world, from, Proto::Udp, 1, &cx.key("port"))?.0;
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
            let bits = (u64::from(size) + 28) * 8;
            let datagrams =
                u128::from(active.0) * u128::from(rate_bps) / 1_000_000_000 / u128::from(bits);
            Ok((
                Measure::Udp {
                    node: to,
                    sender: (from, app),
                    key: (src, sport, dport),
                    start,
                    stop,
                },
                u64::try_from(datagrams).unwrap_or(u64::MAX),
            ))
        }
        "tcp" => {
            let count = cx
                .int(w.count.as_ref(), "count", (1, limits::EPHEMERAL_PORTS))
                .map_err(|e| match e.contains("at most") {
                    true => format!(
                        "{e}: each flow takes one of its host's ephemeral ports ({}-{})",
                        limits::EPHEMERAL.0,
                        limits::EPHEMERAL.1
                    ),
                    false => e,
                })?
                .unwrap_or(1);
            let stagger = cx
                .time(w.stagger.as_ref(), "stagger", Duration::ZERO)?
                .unwrap_or(Duration::ZERO);
            let last_start = start + Duration(stagger.0.saturating_mul(count - 1));
            if last_start >= cx.duration {
                return Err(format!(
                    "{}: the last of {count} flows would start at {}, not before the end of the run ({})",
                    cx.key("stagger"),
                    limits::fmt_duration(Duration(last_start.0)),
                    limits::fmt_duration(duration)
                ));
            }
            let dport = cx.port(5001)?;
            let cfg = tcp_config(cx, from)?;
            let server_cfg = tcp_config(cx, to)?;
            let total = cx.bytes(w.bytes.as_ref(), "bytes", 0)?;
            listen(servers, (to, dport), "bulk TCP", &server_cfg, what)?;
            let first = reserve(world, from, Proto::Tcp, count, &cx.key("count"))?.0;
            world.nodes[to].host.listeners.insert(dport, server_cfg);
            let src = world.nodes[from].addr;
            let mut measures = vec![];
            for i in 0..count {
                let sport = first + i as u16;
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
            let window = crate::tcp::buffers::max_window(&cfg).saturating_mul(count);
            let mut estimate = tcp_packets(path_bps, path_delay, window, active);
            if let Some(b) = total {
                estimate = estimate.min(b.saturating_mul(count) / 1000 * 2 + 10 * count);
            }
            let m = if measures.len() == 1 {
                measures.pop().expect("one")
            } else {
                Measure::Group(measures)
            };
            Ok((m, estimate))
        }
        "web" => {
            let params = web_params(cx, world, from, dst, (start, stop), tos)?;
            let mut server_cfg = tcp_config(cx, to)?;
            server_cfg.nodelay = true;
            listen(servers, (to, params.port), "web", &server_cfg, what)?;
            let estimate = web_packets(&params, path_bps, active);
            let server = &mut world.nodes[to].host;
            // One directory per server port, shared by every workload that uses it.
            let dir = server.web_servers.entry(params.port).or_default().clone();
            server.listeners.insert(params.port, server_cfg);
            let client = &mut world.nodes[from].host;
            let app = client.apps.len();
            client.apps.push(App::Web(WebApp::new(params, dir)));
            Ok((Measure::Web { node: from, app }, estimate))
        }
        _ => unreachable!("KEYS lists every type"),
    }
}

/// Packets TCP carries over a path of `path_bps` (its slowest link) and
/// `delay` one way in `active` time, with `window` bytes in flight at most:
/// full-sized segments at the lower of the path's rate and window / RTT,
/// and an ACK for every two.
fn tcp_packets(path_bps: u64, delay: Duration, window: u64, active: Duration) -> u64 {
    let mut bps = u128::from(path_bps);
    let rtt = u128::from(delay.0) * 2;
    if let Some(by_window) = (u128::from(window) * 8 * 1_000_000_000).checked_div(rtt) {
        bps = bps.min(by_window);
    }
    let segments = bps * u128::from(active.0) / 1_000_000_000 / (1500 * 8);
    u64::try_from(segments * 3 / 2).unwrap_or(u64::MAX)
}

/// Packets `p`'s loads make a path of `path_bps` carry in `active` time:
/// per load, its bytes in full segments, a request and the last segment of
/// an answer per exchange, connection set-ups, and an ACK for every two;
/// at most what the path carries in 64-byte packets.
fn web_packets(p: &WebParams, path_bps: u64, active: Duration) -> u64 {
    let exchanges = 1 + p.objects.len() as u128 + if p.handshake { 2 } else { 0 };
    let bytes = p
        .objects
        .iter()
        .fold(u128::from(p.page), |t, o| t + u128::from(*o));
    let per_load = bytes / 1448 + 2 * exchanges + 4 * p.connections as u128;
    let loads = u128::from(p.repeat) + u128::from(p.warm);
    let mut packets = loads * per_load * 3 / 2;
    if path_bps > 0 {
        packets = packets.min(u128::from(path_bps) * u128::from(active.0) / 1_000_000_000 / 512);
    }
    u64::try_from(packets).unwrap_or(u64::MAX)
}

/// Which port table.
enum Proto {
    Tcp,
    Udp,
}

/// `n` consecutive ephemeral ports of node `node`, or an error naming the field.
fn reserve(
    world: &mut World,
    node: usize,
    proto: Proto,
    n: u64,
    what: &str,
) -> Result<(u16, u16), String> {
    let name = world.nodes[node].name.clone();
    let host = &mut world.nodes[node].host;
    let ports = match proto {
        Proto::Tcp => &mut host.tcp_ports,
        Proto::Udp => &mut host.udp_ports,
    };
    let left = ports.left();
    ports.reserve(n).ok_or_else(|| {
        format!(
            "{what}: {n} more ports wanted on node {name}, which has {left} of its {} ephemeral {} ports ({}-{}) left",
            limits::EPHEMERAL_PORTS,
            match proto {
                Proto::Tcp => "TCP",
                Proto::Udp => "UDP",
            },
            limits::EPHEMERAL.0,
            limits::EPHEMERAL.1
        )
    })
}

/// The TCP endpoint configuration a workload asks for on node `node`: the
/// node's own, with the workload's keys over it.
fn tcp_config(cx: &Workload, node: usize) -> Result<TcpConfig, String> {
    let w = cx.w;
    let mut cfg = cx.node_tcp[node].clone();
    let buf = |v: Option<&String>, k: &str| {
        v.map(|s| {
            limits::bytes(
                &cx.sub(s)?,
                &cx.key(k),
                limits::MIN_SOCKET_BUFFER,
                limits::MAX_SOCKET_BUFFER,
            )
        })
        .transpose()
    };
    if let Some(b) = buf(w.sndbuf.as_ref(), "sndbuf")? {
        cfg.send_buffer = Some(b);
    }
    if let Some(b) = buf(w.rcvbuf.as_ref(), "rcvbuf")? {
        cfg.recv_buffer = Some(b);
    }
    // The workload's choice over its node's (`cc = "cubic"` on a node
    // whose sysctl says bbr runs CUBIC).
    if let Some(name) = w.cc.as_ref().map(|c| cx.sub(c)).transpose()? {
        cfg.congestion = CongestionAlgorithm::from_name(&name).ok_or_else(|| {
            format!(
                "{}: unknown congestion control {name:?} (cubic, reno or bbr)",
                cx.key("cc")
            )
        })?;
    }
    if cx.flag(w.ecn.as_ref(), "ecn")? {
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

/// A web workload's parameters from its keys; reserves on node `from` a
/// port for every connection its loads may open.
fn web_params(
    cx: &Workload,
    world: &mut World,
    from: usize,
    dst: Ipv4Addr,
    (start, stop): (Time, Time),
    tos: u8,
) -> Result<WebParams, String> {
    let w = cx.w;
    let page = cx
        .bytes(w.page.as_ref(), "page", 1)?
        .ok_or_else(|| format!("{}: web needs a page size", cx.what))?;
    let objects = match (
        &w.object_sizes,
        cx.int(w.objects.as_ref(), "objects", (0, limits::MAX_OBJECTS))?,
    ) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "{}: give objects + object_size or object_sizes, not both",
                cx.what
            ))
        }
        (Some(list), None) if list.len() as u64 > limits::MAX_OBJECTS => {
            return Err(format!(
                "{}: at most {} objects",
                cx.key("object_sizes"),
                limits::MAX_OBJECTS
            ))
        }
        (Some(list), None) => list
            .iter()
            .map(|v| {
                limits::bytes(
                    &text(v, cx.vars)?,
                    &cx.key("object_sizes"),
                    1,
                    limits::MAX_TRANSFER,
                )
            })
            .collect::<Result<_, _>>()?,
        (None, Some(n)) => {
            let each = w
                .object_size
                .as_ref()
                .ok_or_else(|| format!("{}: objects needs an object_size", cx.what))?;
            let each = cx.bytes(Some(each), "object_size", 1)?.unwrap_or(1);
            vec![each; n as usize]
        }
        (None, None) if w.object_size.is_some() => {
            return Err(format!("{}: object_size needs objects", cx.what))
        }
        (None, None) => vec![],
    };
    let whole = objects.iter().fold(page, |t: u64, o| t.saturating_add(*o));
    if whole > limits::MAX_TRANSFER {
        return Err(format!(
            "{}: the page and its objects come to {whole} bytes, more than {} (1 TiB)",
            cx.what,
            limits::MAX_TRANSFER
        ));
    }
    let handshake = cx.flag(w.handshake.as_ref(), "handshake")?;
    let multiplexed = cx.flag(w.multiplexed.as_ref(), "multiplexed")?;
    let warm = cx.flag(w.warm.as_ref(), "warm")?;
    let connections = cx
        .int(
            w.connections.as_ref(),
            "connections",
            (1, limits::EPHEMERAL_PORTS),
        )?
        .unwrap_or(6);
    let repeat = cx
        .int(w.repeat.as_ref(), "repeat", (1, limits::MAX_REPEAT))?
        .unwrap_or(1);
    let interval = cx.time(w.interval.as_ref(), "interval", Duration::ZERO)?;
    let port = cx.port(if handshake { 443 } else { 80 })?;
    let request = cx
        .bytes(w.request_size.as_ref(), "request_size", 1)?
        .unwrap_or(REQUEST_BYTES);
    // Connections a load opens: one multiplexed, or up to `connections`
    // (the page's, then one per object waiting). Cold loads close theirs and
    // open new ones; warm loads keep the first load's.
    let per_load = if multiplexed {
        1
    } else {
        connections.min(objects.len().max(1) as u64)
    };
    let loads = repeat + u64::from(warm);
    let wanted = if warm {
        per_load
    } else {
        per_load.saturating_mul(loads)
    };
    let ports = reserve(
        world,
        from,
        Proto::Tcp,
        wanted,
        &format!("{} (repeat × connections)", cx.what),
    )?;
    let mut cfg = tcp_config(cx, from)?;
    cfg.nodelay = true; // browsers set TCP_NODELAY
    Ok(WebParams {
        dst,
        port,
        tos,
        page,
        objects,
        connections: connections as usize,
        multiplexed,
        handshake,
        warm,
        repeat: repeat as u32,
        interval: interval.unwrap_or(Duration::ZERO),
        request,
        start,
        stop,
        cfg,
        client_ports: ports,
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
    res.errors = b.world.errors.clone();
    res.links = b.links.iter().map(|l| link_result(&b, l)).collect();
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
            let mut f = FlowResult::new(label, "udp", &flow.bins, from, (*stop).min(end))
                .with_datagrams(sent, flow.packets);
            against_capacity(
                b,
                &mut f,
                (sender.0, *node),
                &flow.bins,
                (from, (*stop).min(end)),
            );
            res.flows.push(f);
        }
        Measure::Tcp { node, key, start } => {
            let flow = b.world.nodes[*node]
                .host
                .tcp_rx
                .get(key)
                .cloned()
                .unwrap_or_default();
            let from = (*start).max(b.warmup);
            let mut f = FlowResult::new(label, "tcp", &flow.bins, from, end);
            let arrivals = b.world.nodes[*node]
                .host
                .tcp_arrivals
                .as_ref()
                .and_then(|a| a.get(key));
            let sender = b.world.nodes.iter().position(|n| n.addr == key.0);
            if let (Some(sender), Some(arrivals)) = (sender, arrivals) {
                against_capacity(b, &mut f, (sender, *node), &arrivals.bins, (from, end));
            }
            res.flows.push(f);
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

/// What a time-varying link direction offered and how long packets
/// queued before it.
fn link_result(b: &Built, l: &LinkWatch) -> LinkResult {
    let bin_s = BIN.0 as f64 / 1e9;
    let capacity_series = l
        .timeline
        .bins(BIN, b.duration)
        .iter()
        .enumerate()
        .map(|(k, bits)| (k as f64 * bin_s, bits / bin_s / 1e6))
        .collect();
    let window = (b.duration.0 - b.warmup.0) as f64 / 1e9;
    let mut res = LinkResult {
        name: l.name.clone(),
        capacity_mbps: l.timeline.bits_between(b.warmup, b.duration) / window / 1e6,
        capacity_series,
        ..Default::default()
    };
    let (node, iface) = l.at;
    if let Some(m) = &b.world.nodes[node].ifaces[iface].monitor {
        let first = b.warmup.0.div_ceil(BIN.0) as usize;
        let (mut sum, mut n, mut max) = (0u64, 0u64, 0u64);
        for (k, &(s, c, m)) in m.bins.iter().enumerate() {
            if c == 0 {
                continue;
            }
            res.queue_delay_series
                .push((k as f64 * bin_s, s as f64 / c as f64 / 1e6));
            if k >= first && (k as u64) < b.duration.0 / BIN.0 {
                (sum, n, max) = (sum + s, n + c, max.max(m));
            }
        }
        if n > 0 {
            res.queue_delay_ms = Some(sum as f64 / n as f64 / 1e6);
            res.queue_delay_max_ms = Some(max as f64 / 1e6);
        }
    }
    res
}

/// Compare a flow with the capacity of the time-varying link direction on
/// its path that offers least (see [`FlowResult::link`]): its goodput over
/// its measured window `[from, to)` (whole bins, as its goodput), and what
/// arrived of it (`arrived`, IP bytes per bin: a UDP flow's datagrams, a
/// TCP flow's segments) second by second.
fn against_capacity(
    b: &Built,
    f: &mut FlowResult,
    (sender, receiver): (usize, usize),
    arrived: &BTreeMap<u64, u64>,
    (from, to): (Time, Time),
) {
    let hops = b.world.route_ifaces(sender, receiver);
    let Some((hop, l)) = b
        .links
        .iter()
        .filter(|l| !l.timeline.unlimited())
        .filter_map(|l| hops.iter().position(|h| *h == l.at).map(|i| (i, l)))
        .min_by(|(_, x), (_, y)| {
            let run = |l: &LinkWatch| l.timeline.bits_between(Time::ZERO, b.duration);
            run(x).total_cmp(&run(y))
        })
    else {
        return;
    };
    // The propagation delay from the link's far end to the receiver.
    let after: u64 = hops[hop + 1..]
        .iter()
        .map(|&(n, i)| b.world.nodes[n].ifaces[i].port.config().delay.0)
        .sum();
    let (least, most) = l.timeline.delay_range;
    let (least, most) = (least.0 + after, most.0 + after);
    let back = |t: Time, d: u64| Time(t.0.saturating_sub(d));
    let (b0, b1) = (from.0.div_ceil(BIN.0), to.0 / BIN.0);
    let (w0, w1) = (Time(b0 * BIN.0), Time(b1 * BIN.0));
    let offered = l.timeline.bits_between(back(w0, least), back(w1, least));
    f.link = Some(l.name.clone());
    if offered > 0.0 {
        f.capacity_pct = Some(f.bytes as f64 * 8.0 / offered * 100.0);
    }
    // Each whole second of the window: what arrived, against what the link
    // could have sent that arrives in it.
    let per_s = 1_000_000_000 / BIN.0;
    let mut over = f64::NEG_INFINITY;
    for s in b0.div_ceil(per_s)..b1 / per_s {
        let got: u64 = arrived
            .range(s * per_s..(s + 1) * per_s)
            .map(|(_, v)| v)
            .sum();
        let (t0, t1) = (Time(s * 1_000_000_000), Time((s + 1) * 1_000_000_000));
        let could = l.timeline.bits_between(back(t0, most), back(t1, least));
        over = over.max((got as f64 * 8.0 - could) / varying::OPPORTUNITY_BITS as f64);
    }
    if over.is_finite() {
        f.over_capacity_pkts = Some(over);
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
    run_all_observed(
        sc,
        overrides,
        only,
        tc_stats,
        runner,
        &mut |_, _, _| {},
        &mut |_, _| {},
    )
}

/// [`run_all`], telling `progress` how far each variant has got. Every
/// variant is built (and so checked) before any runs, and `warn` is told
/// what each build warns about (see [`Built::warnings`]) then. Overrides
/// must name variables the scenario has, and `only` one of its variants.
pub fn run_all_observed(
    sc: &Scenario,
    overrides: &BTreeMap<String, String>,
    only: Option<&str>,
    tc_stats: bool,
    runner: Option<&dyn ScriptRunner>,
    progress: Progress,
    warn: &mut dyn FnMut(&str, &str),
) -> Result<Vec<RunResult>, String> {
    sc.check_overrides(overrides)?;
    if let Some(o) = only {
        if !sc.variants.iter().any(|v| v.name == o) {
            let names: Vec<&str> = sc.variants.iter().map(|v| v.name.as_str()).collect();
            return Err(format!(
                "--variant {o}: the scenario has no such variant (it has: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ));
        }
    }
    let mut builds = vec![];
    if sc.variants.is_empty() {
        let vars = sc.vars_for(None, overrides);
        builds.push(("default", build_with(sc, &vars, runner)?));
    }
    for v in &sc.variants {
        if only.is_some_and(|o| o != v.name) {
            continue;
        }
        let vars = sc.vars_for(Some(v), overrides);
        let built =
            build_with(sc, &vars, runner).map_err(|e| format!("variant {}: {e}", v.name))?;
        builds.push((v.name.as_str(), built));
    }
    for (name, b) in &builds {
        for w in &b.warnings {
            warn(name, w);
        }
    }
    let runs: Vec<RunResult> = builds
        .into_iter()
        .map(|(name, b)| run_observed(b, name, tc_stats, progress))
        .collect();
    if let Some(r) = runs.iter().find(|r| !r.errors.is_empty()) {
        return Err(format!("variant {}: {}", r.variant, r.errors.join("; ")));
    }
    Ok(runs)
}
