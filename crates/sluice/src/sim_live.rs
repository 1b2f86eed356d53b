//! `sluice sim SCENARIO --live`: the same scenario file, instantiated for
//! real, and `--compare`, which runs it both ways and puts the figures
//! side by side.
//!
//! **What runs.** Every node becomes a network namespace
//! (`sluice-sim-PID-NODE`); every link a live wire between two of them
//! (`sluice link`'s daemon, its sides TUN devices named as in the
//! scenario, `eth0`, `eth1`…), with the link's rate, delay, transmit
//! buffer and loss in each direction. A node's `tc` lines go to the link
//! daemon that owns the device they name, as `dev a0`/`dev b0`, so the
//! qdiscs that shape a device are sluice's own, as in the simulator. Each
//! node holds its address on every device (a /32, point to point) with a
//! host route to every other node through the interface the simulator's
//! routing chose; routers forward. The workloads run as real programs
//! over the kernel's sockets: `tcp` is an iperf3 client and server per
//! flow (`-C` from `cc`; `-w` only where the scenario sets a buffer, so
//! an unset one is autotuned by the kernel, as in the model), `udp` iperf3
//! `-u`, `ping` ping, and `web` this binary's own hidden `web-server` and
//! `web-client` (web_live.rs: hyper's HTTP/1.1 over up to `connections`
//! connections, or HTTP/2 in cleartext on one, page then objects, as the
//! model loads them). They start at their scenario times, measured from
//! the moment the network is up; the run lasts the scenario's duration in
//! real time, with a progress bar. A link's trace, schedule or delay trace
//! starts with its daemon (written out as text that reads back to what the
//! simulator built, `WireSettings::from_change`), and a timed event is a
//! request to a daemon at its time: its tc lines, or the wire's change
//! (as `sluice link set`). A node with `gso = false` gets `gso_max_segs 1`
//! on its devices, so the kernel's TCP sends one segment per packet.
//!
//! **What is measured.** The same table and JSON as a simulated run: ping
//! replies (every one, with its time), each flow's bytes per second as
//! its iperf3 server counted them, each page load's time as the browser
//! timed it, and each link's qdisc drops (`tc -s`).
//! A flow's goodput is its bytes from its start (or the warm-up) to the
//! end, so the total over the interval all ran is comparable.
//!
//! A node's script runs with bash once its links are up, its `tc`, `ip`
//! and `iptables` commands sent to the daemons of the devices they name
//! (live_node.rs), as the simulator runs it against the node's state.
//!
//! **What is refused**, with the reason, before anything is made: ifb
//! devices and several transmit queues — each of these
//! the live plane can do for one link, but this front end does not map
//! yet — and web workloads' TLS handshakes (`handshake = true`: no TLS
//! live yet). Live runs need root (namespaces named in
//! `/run/netns`), iperf3 and ping.
//!
//! **Clean-up.** The link daemons die with this process (they are tied to
//! it), and the namespaces are removed at the end, on ^C, and — should
//! this process be killed — by the next `sim --live`, which removes any
//! `sluice-sim-PID-*` namespace whose PID is gone.

use crate::live_node;
use crate::sim::BashRunner;
use indicatif::{ProgressBar, ProgressStyle};
use sluice_core::port::TxBuffer;
use sluice_core::port::WireChange;
use sluice_core::time::{Duration, Time};
use sluice_net::control::Request;
use sluice_net::link::{self, LinkSpec, Side, Wire};
use sluice_net::wire::WireSettings;
use sluice_sim::events::Action;
use sluice_sim::host::{App, BIN};
use sluice_sim::report::{FlowResult, PingResult, RunResult, WebResult};
use sluice_sim::run::{build_with, Built, Measure};
use sluice_sim::scenario::{substitute, Scenario};
use sluice_sim::tcp::TcpConfig;
use sluice_sim::web::LoadSample;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// Prefix of the namespaces a live run makes.
const NS_PREFIX: &str = "sluice-sim-";
/// The first iperf3 port.
const IPERF_PORT: u16 = 5201;

/// Run the scenario's variants (or `only`) live, one after the other.
pub fn run_all(
    sc: &Scenario,
    overrides: &BTreeMap<String, String>,
    only: Option<&str>,
    runner: &BashRunner,
    tc_stats: bool,
) -> Result<Vec<RunResult>, String> {
    preflight()?;
    let mut variants: Vec<Option<&sluice_sim::scenario::Variant>> = vec![];
    if sc.variants.is_empty() {
        variants.push(None);
    }
    variants.extend(
        sc.variants
            .iter()
            .filter(|v| only.is_none_or(|o| o == v.name))
            .map(Some),
    );
    let mut runs = vec![];
    for v in variants {
        let name = v.map_or("default", |v| v.name.as_str());
        let vars = sc.vars_for(v, overrides);
        let built =
            build_with(sc, &vars, Some(runner)).map_err(|e| format!("variant {name}: {e}"))?;
        let plan =
            Plan::new(sc, &vars, &built).map_err(|e| format!("variant {name}: live: {e}"))?;
        runs.push(plan.run(name, runner, tc_stats)?);
    }
    Ok(runs)
}

/// Root, iperf3 and ping, and no leftovers of killed runs.
fn preflight() -> Result<(), String> {
    if !sluice_net::rootless::privileged() {
        return Err("--live needs root: every node is a network namespace".into());
    }
    for tool in ["iperf3", "ping", "ip"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Err(format!("--live runs {tool}, which is not installed"));
        }
    }
    reap();
    Ok(())
}

/// Remove the namespaces of live runs whose process is gone.
fn reap() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(NS_PREFIX)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = link::run("ip", &["netns", "del", &name]);
        }
    }
}

/// What a variant becomes live.
struct Plan {
    /// Namespace per node.
    ns: Vec<String>,
    /// Address per node.
    addrs: Vec<Ipv4Addr>,
    routers: Vec<bool>,
    /// Per link: the daemon's description.
    links: Vec<LinkSpec>,
    /// Per node: (destination, device) host routes.
    routes: Vec<Vec<(Ipv4Addr, String)>>,
    duration: Time,
    warmup: Time,
    /// The measured workloads' programs.
    programs: Vec<Program>,
    /// Per node: the sysctls its namespace is given.
    sysctls: Vec<Vec<(&'static str, String)>>,
    /// Per node: segmentation offload (`gso = false`: one segment a packet).
    gso: Vec<bool>,
    /// The scenario's timed events, as requests to link daemons, in order.
    events: Vec<LiveEvent>,
    /// Per node: its name, its `tc = [...]` lines and its script, `${}`s
    /// substituted.
    names: Vec<String>,
    lines: Vec<Vec<String>>,
    scripts: Vec<Option<String>>,
}

/// The servers' ports: a workload's own port where no other server has
/// it yet (so a script's rules that match ports see the scenario's), else
/// the next free one from [`IPERF_PORT`].
struct Ports {
    next: u16,
    used: std::collections::BTreeSet<u16>,
}

impl Ports {
    fn take(&mut self, want: u16) -> u16 {
        let mut port = want;
        while port == 0 || !self.used.insert(port) {
            port = self.next;
            self.next = self.next.wrapping_add(1).max(IPERF_PORT);
        }
        port
    }
}

/// A timed event run live, at its time.
struct LiveEvent {
    at: Time,
    /// `event at 10s`, for its messages.
    what: String,
    action: LiveAction,
}

enum LiveAction {
    /// A node's command line, as [`live_node::run`] takes it.
    Command { node: usize, words: Vec<String> },
    /// A wire's change, for link `link`'s daemon.
    Wire { link: String, request: Request },
}

impl Plan {
    fn new(sc: &Scenario, vars: &BTreeMap<String, String>, b: &Built) -> Result<Plan, String> {
        refuse_unsupported(b)?;
        let pid = std::process::id();
        let w = &b.world;
        let ns: Vec<String> = w
            .nodes
            .iter()
            .map(|n| format!("{NS_PREFIX}{pid}-{}", n.name))
            .collect();
        let dev_name = |node: usize, iface: usize| -> String {
            let n = &w.nodes[node];
            n.net.devices[n.ifaces[iface].dev].info.name.clone()
        };
        let mut links: Vec<LinkSpec> = vec![];
        // Per link: the (node, interface) of its side a and of its side b.
        let mut ends = vec![];
        let mut seen = vec![];
        for (ni, n) in w.nodes.iter().enumerate() {
            for (ii, ifc) in n.ifaces.iter().enumerate() {
                let (pn, pi) = ifc.peer;
                if seen.contains(&(pn, pi)) {
                    continue;
                }
                seen.push((ni, ii));
                let side = |node: usize, iface: usize| Side {
                    netns: Some(ns[node].clone()),
                    ifname: dev_name(node, iface),
                    addr: format!("{}/32", w.nodes[node].addr),
                    default_via: None,
                };
                let name = format!("ss{pid}l{}", links.len());
                ends.push(((ni, ii), (pn, pi)));
                // A transmit queue length other than the live device's 1000.
                let ip = [((ni, ii), "a0"), ((pn, pi), "b0")]
                    .into_iter()
                    .filter_map(|((node, iface), dev)| {
                        let q = w.nodes[node].net.devices[w.nodes[node].ifaces[iface].dev]
                            .info
                            .txqueuelen;
                        (q != 1000).then(|| {
                            ["link", "set", "dev", dev, "txqueuelen", &q.to_string()]
                                .map(String::from)
                                .to_vec()
                        })
                    })
                    .collect();
                links.push(LinkSpec {
                    ip,
                    ab: wire(ifc.port.config()),
                    ba: wire(w.nodes[pn].ifaces[pi].port.config()),
                    shared_netns: true,
                    ..LinkSpec::new(name, side(ni, ii), side(pn, pi))
                });
            }
        }
        // Each node's lines, run once its links are up.
        let lines = sc
            .nodes
            .iter()
            .map(|n| n.tc.iter().map(|l| substitute(l, vars)).collect())
            .collect::<Result<_, _>>()?;
        // What the wires start with: a trace, a schedule, a delay trace.
        let link_of = |at: (usize, usize)| {
            ends.iter().enumerate().find_map(|(k, &(a, b))| {
                [(a, true), (b, false)]
                    .into_iter()
                    .find(|e| e.0 == at)
                    .map(|(_, ab)| (k, ab))
            })
        };
        for watch in &b.links {
            if watch.start == WireChange::default() {
                continue;
            }
            let Some((k, ab)) = link_of(watch.at) else {
                continue;
            };
            let settings = WireSettings::from_change(&watch.start, &watch.name)?;
            if ab {
                links[k].ab_start = settings;
            } else {
                links[k].ba_start = settings;
            }
        }
        // Timed events: tc lines for a daemon, or a wire's change.
        let mut events = vec![];
        for t in &w.timed {
            match &t.action {
                Action::Commands { node, lines } => {
                    for (_, words) in lines {
                        events.push(LiveEvent {
                            at: t.at,
                            what: t.what.clone(),
                            action: LiveAction::Command {
                                node: *node,
                                words: words.clone(),
                            },
                        });
                    }
                }
                Action::Wire {
                    node,
                    iface,
                    change,
                } => {
                    let Some((k, ab)) = link_of((*node, *iface)) else {
                        return Err(format!("{}: no live link has that end", t.what));
                    };
                    let settings = Box::new(WireSettings::from_change(change, &t.what)?);
                    let (ab, ba) = if ab {
                        (Some(settings), None)
                    } else {
                        (None, Some(settings))
                    };
                    events.push(LiveEvent {
                        at: t.at,
                        what: t.what.clone(),
                        action: LiveAction::Wire {
                            link: links[k].name.clone(),
                            request: Request::Wire { ab, ba },
                        },
                    });
                }
            }
        }
        let routes = w
            .nodes
            .iter()
            .enumerate()
            .map(|(ni, n)| {
                n.routes
                    .iter()
                    .filter(|(dst, _)| **dst != n.addr)
                    .map(|(dst, &ifc)| (*dst, dev_name(ni, ifc)))
                    .collect()
            })
            .collect();
        let mut plan = Plan {
            ns,
            addrs: w.nodes.iter().map(|n| n.addr).collect(),
            routers: w.nodes.iter().map(|n| n.router).collect(),
            links,
            routes,
            duration: b.duration,
            warmup: b.warmup,
            programs: vec![],
            events,
            names: sc.nodes.iter().map(|n| n.name.clone()).collect(),
            lines,
            scripts: sc
                .nodes
                .iter()
                .map(|n| match &n.script {
                    Some(s) => {
                        substitute(s, vars).map(|s| Some(s).filter(|s| !s.trim().is_empty()))
                    }
                    None => Ok(None),
                })
                .collect::<Result<_, _>>()?,
            gso: sc.nodes.iter().map(|n| n.gso).collect(),
            sysctls: sc
                .nodes
                .iter()
                .map(|n| {
                    sluice_sim::sysctl::of_node(n, vars).map(|c| sluice_sim::sysctl::settings(&c))
                })
                .collect::<Result<_, _>>()?,
        };
        check_global_sysctls(&plan.sysctls)?;
        let mut ports = Ports {
            next: IPERF_PORT,
            used: Default::default(),
        };
        for (label, m) in flat_labels(&b.labels) {
            let p = plan.program(&label, &m, w, b.duration, &mut ports)?;
            plan.programs.push(p);
        }
        Ok(plan)
    }

    /// Node `i`'s devices: each side of a link in its namespace, with the
    /// link and the device's name in its daemon.
    fn devices_of(&self, i: usize) -> impl Iterator<Item = (&Side, &LinkSpec, &'static str)> {
        self.links.iter().flat_map(move |spec| {
            [(&spec.a, "a0"), (&spec.b, "b0")]
                .into_iter()
                .filter(move |(side, _)| side.netns.as_ref() == Some(&self.ns[i]))
                .map(move |(side, dev)| (side, spec, dev))
        })
    }

    /// `$SLUICE_LIVE_NODE` of node `i` ([`live_node::encode`]).
    fn devices_env(&self, i: usize) -> String {
        let devices: Vec<_> = self
            .devices_of(i)
            .map(|(side, spec, dev)| (side.ifname.clone(), spec.name.clone(), dev))
            .collect();
        live_node::encode(&devices)
    }

    /// Run node `i`'s command line `words` (`tc ...`, `ip ...`,
    /// `iptables ...`) on its daemons.
    fn command(&self, i: usize, words: &[String]) -> Result<(), String> {
        let o = live_node::run(&self.devices_env(i), &words[0], &words[1..]);
        match o.code {
            0 => Ok(()),
            _ => Err(o.stderr.trim().to_string()),
        }
    }

    /// Make the network, run the workloads, measure, remove everything.
    fn run(&self, variant: &str, runner: &BashRunner, tc_stats: bool) -> Result<RunResult, String> {
        let mut net = Network {
            ns: vec![],
            links: vec![],
        };
        let result = self
            .setup(&mut net, runner)
            .and_then(|()| self.measure(variant, &net, tc_stats));
        net.remove();
        result
    }

    fn setup(&self, net: &mut Network, runner: &BashRunner) -> Result<(), String> {
        for (i, ns) in self.ns.iter().enumerate() {
            link::run("ip", &["netns", "add", ns])?;
            net.ns.push(ns.clone());
            let sysctl = |k: &str, v: &str| {
                link::run(
                    "ip",
                    &["netns", "exec", ns, "sysctl", "-qw", &format!("{k}={v}")],
                )
            };
            sysctl(
                "net.ipv4.ip_forward",
                if self.routers[i] { "1" } else { "0" },
            )?;
            for c in ["all", "default"] {
                sysctl(&format!("net.ipv4.conf.{c}.rp_filter"), "0")?;
            }
        }
        let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
        for spec in &self.links {
            link::up_tied(&exe, spec.clone(), true)
                .map_err(|e| format!("link {}: {e}", spec.name))?;
            net.links.push(spec.name.clone());
        }
        // Each node's lines, then its script: their commands go to the
        // daemons of the devices they name (live_node.rs).
        for i in 0..self.ns.len() {
            for line in &self.lines[i] {
                let words: Vec<String> = line.split_whitespace().map(String::from).collect();
                self.command(i, &words)
                    .map_err(|e| format!("node {}: `{line}`: {e}", self.names[i]))?;
            }
            if let Some(script) = &self.scripts[i] {
                runner.run_live(&self.names[i], script, self.devices_env(i))?;
            }
        }
        // A node without offload: its TCP sizes packets to the devices'
        // `gso_max_segs`, so one segment each (`tcp_tso_segs`).
        for i in (0..self.ns.len()).filter(|&i| !self.gso[i]) {
            for (side, _, _) in self.devices_of(i) {
                let dev = side.ifname.as_str();
                let ns = self.ns[i].as_str();
                link::run(
                    "ip",
                    &["-n", ns, "link", "set", "dev", dev, "gso_max_segs", "1"],
                )?;
            }
        }
        for (i, routes) in self.routes.iter().enumerate() {
            for (dst, dev) in routes {
                let dst = format!("{dst}/32");
                let src = self.addrs[i].to_string();
                link::run(
                    "ip",
                    &[
                        "-n",
                        &self.ns[i],
                        "route",
                        "replace",
                        &dst,
                        "dev",
                        dev,
                        "src",
                        &src,
                    ],
                )?;
            }
        }
        Ok(())
    }

    /// Start the programs at their times; collect what they measured.
    fn measure(&self, variant: &str, net: &Network, tc_stats: bool) -> Result<RunResult, String> {
        let end = self.duration;
        let programs = &self.programs;
        // Servers first; then the clock starts.
        let mut servers = vec![];
        for p in programs {
            if let Some(cmd) = &p.server {
                match spawn(cmd) {
                    Ok(r) => servers.push(r),
                    Err(e) => {
                        stop_all(&mut servers);
                        return Err(e);
                    }
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        let t0 = Instant::now();
        let bar = progress(end);
        let mut clients: Vec<Option<Running>> = programs.iter().map(|_| None).collect();
        let end_wall = std::time::Duration::from_nanos(end.0);
        let mut events = self.events.iter().peekable();
        let mut errors = vec![];
        loop {
            let now = t0.elapsed();
            while let Some(e) = events.next_if(|e| now >= std::time::Duration::from_nanos(e.at.0)) {
                let done = match &e.action {
                    LiveAction::Command { node, words } => self.command(*node, words),
                    LiveAction::Wire { link, request } => {
                        match sluice_net::control::request(link, request) {
                            Ok(r) if r.code == 0 => Ok(()),
                            Ok(r) => Err(r.stderr.trim().to_string()),
                            Err(err) => Err(err),
                        }
                    }
                };
                if let Err(err) = done {
                    errors.push(format!("{}: {err}", e.what));
                }
            }
            for (i, p) in programs.iter().enumerate() {
                if clients[i].is_some()
                    || p.client.is_empty()
                    || now < std::time::Duration::from_nanos(p.start.0)
                {
                    continue;
                }
                match spawn(&p.client) {
                    Ok(r) => clients[i] = Some(r),
                    Err(e) => {
                        let mut started: Vec<Running> =
                            clients.iter_mut().filter_map(Option::take).collect();
                        stop_all(&mut started);
                        stop_all(&mut servers);
                        return Err(e);
                    }
                }
            }
            bar.set_position(now.as_millis().min(u128::from(u64::MAX)) as u64);
            if now >= end_wall + std::time::Duration::from_secs(2) {
                break;
            }
            // Until the next event, so that it runs at its time rather
            // than up to a tick late; at most 20 ms.
            let tick = std::time::Duration::from_millis(20);
            let wait = events.peek().map_or(tick, |e| {
                std::time::Duration::from_nanos(e.at.0)
                    .saturating_sub(t0.elapsed())
                    .min(tick)
            });
            std::thread::sleep(wait);
        }
        bar.finish_and_clear();
        let outputs: Vec<(usize, String)> = clients
            .into_iter()
            .enumerate()
            .map(|(i, c)| (i, c.map(finish).unwrap_or_default()))
            .collect();
        let mut server_out = vec![];
        for s in servers {
            server_out.push(finish(s));
        }
        let mut result = RunResult {
            variant: variant.to_string(),
            pings: vec![],
            flows: vec![],
            webs: vec![],
            losses: Default::default(),
            links: vec![],
            errors,
            tc_stats: None,
        };
        // Servers' outputs are in the order of the programs that have one.
        let mut server_out = server_out.iter();
        for (i, out) in outputs {
            let p = &programs[i];
            let server = match p.server {
                Some(_) => server_out.next().map_or("", String::as_str),
                None => "",
            };
            match p.kind {
                Kind::Ping { sent } => result.pings.push(ping_result(&p.label, sent, &out, t0)),
                Kind::Tcp | Kind::Udp => {
                    result.flows.push(flow_result(p, server, self.warmup, end)?);
                }
                Kind::Web => result.webs.push(web_result(p, &out)?),
            }
        }
        result.compute_shares();
        let mut stats = String::new();
        for name in &net.links {
            let out = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
                .args(["tc", "-n", name, "-s", "qdisc", "show"])
                .output()
                .map_err(|e| format!("tc -s: {e}"))?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            result.losses.egress += root_drops(&text);
            stats.push_str(&format!("link {name}:\n{text}"));
        }
        if tc_stats {
            result.tc_stats = Some(stats);
        }
        Ok(result)
    }

    /// The program (and iperf3 server) of one measured workload.
    fn program(
        &self,
        label: &str,
        m: &Measure,
        w: &sluice_sim::world::World,
        end: Time,
        ports: &mut Ports,
    ) -> Result<Program, String> {
        // Whole seconds from `from` to `to` (iperf3's -t), at least one.
        let secs =
            |from: Time, to: Time| to.0.saturating_sub(from.0).div_ceil(1_000_000_000).max(1);
        match m {
            Measure::Ping { node, app } => {
                let App::Ping(p) = &w.nodes[*node].host.apps[*app] else {
                    return Err(format!("{label}: not a ping"));
                };
                let stop = p.stop.min(end);
                let sent = stop
                    .0
                    .saturating_sub(p.start.0)
                    .div_ceil(p.interval.0.max(1));
                let interval = format!("{:.6}", p.interval.0 as f64 / 1e9);
                let client = self.exec(
                    *node,
                    &[
                        "ping",
                        "-n",
                        "-D",
                        "-i",
                        &interval,
                        "-c",
                        &sent.to_string(),
                        "-s",
                        &p.size.to_string(),
                        "-Q",
                        &p.tos.to_string(),
                        &p.dst.to_string(),
                    ],
                );
                Ok(Program {
                    label: label.into(),
                    start: p.start,
                    client,
                    server: None,
                    kind: Kind::Ping { sent },
                })
            }
            Measure::Tcp { node, key, start } => {
                let (sender, app) =
                    find_sender(w, key.0, key.1, key.2, |a| matches!(a, App::Tcp(_)))
                        .ok_or_else(|| format!("{label}: sender not found"))?;
                let App::Tcp(t) = app else {
                    unreachable!("matched above")
                };
                if t.bytes == Some(0) {
                    // Sends nothing (iperf3's `-n 0` would mean no limit).
                    return Ok(Program {
                        label: label.into(),
                        start: *start,
                        client: vec![],
                        server: None,
                        kind: Kind::Tcp,
                    });
                }
                let p = ports.take(key.2).to_string();
                let mut args: Vec<String> = [
                    "iperf3",
                    "-c",
                    &t.dst.to_string(),
                    "-p",
                    &p,
                    "-C",
                    t.cfg.congestion.name(),
                    "-S",
                    &t.tos.to_string(),
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                match t.bytes {
                    Some(n) => args.extend(["-n".into(), n.to_string()]),
                    None => args.extend(["-t".into(), secs(*start, end).to_string()]),
                }
                if let Some(buf) = t.cfg.recv_buffer.or(t.cfg.send_buffer) {
                    args.extend(["-w".into(), buf.to_string()]);
                }
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                Ok(Program {
                    label: label.into(),
                    start: *start,
                    client: self.exec(sender, &args),
                    server: Some(self.server(*node, &p)),
                    kind: Kind::Tcp,
                })
            }
            Measure::Udp {
                node,
                key,
                start,
                stop,
                ..
            } => {
                let (sender, app) =
                    find_sender(w, key.0, key.1, key.2, |a| matches!(a, App::Udp(_)))
                        .ok_or_else(|| format!("{label}: sender not found"))?;
                let App::Udp(u) = app else {
                    unreachable!("matched above")
                };
                let p = ports.take(key.2).to_string();
                // The scenario's rate counts IP packets; iperf3's -b counts payload.
                let ip_len = u64::from(u.size) + 28;
                let payload_bps = u.rate_bps * u64::from(u.size) / ip_len.max(1);
                let t_secs = secs(*start, (*stop).min(end));
                Ok(Program {
                    label: label.into(),
                    start: *start,
                    client: self.exec(
                        sender,
                        &[
                            "iperf3",
                            "-u",
                            "-c",
                            &u.dst.to_string(),
                            "-p",
                            &p,
                            "-b",
                            &payload_bps.to_string(),
                            "-l",
                            &u.size.to_string(),
                            "-t",
                            &t_secs.to_string(),
                            "-S",
                            &u.tos.to_string(),
                        ],
                    ),
                    server: Some(self.server(*node, &p)),
                    kind: Kind::Udp,
                })
            }
            Measure::Web { node, app } => {
                let App::Web(web) = &w.nodes[*node].host.apps[*app] else {
                    return Err(format!("{label}: not a web workload"));
                };
                let port = ports.take(web.params.port);
                self.web_program(label, *node, &web.params, w, end, port)
            }
            Measure::Group(_) => Err(format!("{label}: nested groups do not run live")),
        }
    }

    /// `sluice web-server` on the web workload's server node and `sluice
    /// web-client` on its own, the server on `port`.
    fn web_program(
        &self,
        label: &str,
        node: usize,
        p: &sluice_sim::web::WebParams,
        w: &sluice_sim::world::World,
        end: Time,
        port: u16,
    ) -> Result<Program, String> {
        if p.handshake {
            return Err(format!(
                "{label}: TLS handshakes (handshake = true) do not run live yet"
            ));
        }
        let server = w
            .nodes
            .iter()
            .position(|n| n.addr == p.dst)
            .ok_or_else(|| format!("{label}: no node has the server's address {}", p.dst))?;
        let exe = std::env::current_exe().map_err(|e| format!("own path: {e}"))?;
        let exe = exe.to_string_lossy();
        let words = |w: &[&str]| -> Vec<String> { w.iter().map(|s| s.to_string()).collect() };
        // Milliseconds, rounded up, from the workload's start.
        let ms = |d: Duration| d.0.div_ceil(1_000_000).to_string();
        let server_cfg = w.nodes[server]
            .host
            .listeners
            .get(&p.port)
            .unwrap_or(&p.cfg);
        // The server outlives the run by a second, then exits by itself.
        let serve_for = ms(Duration(end.0) + Duration::from_secs(1));
        let mut server_cmd = words(&[
            &exe,
            "web-server",
            "--listen",
            &format!("{}:{port}", p.dst),
            "--page",
            &p.page.to_string(),
            "--objects",
            &crate::web_live::format_sizes(&p.objects),
            "--for",
            &serve_for,
        ]);
        server_cmd.extend(web_socket_args(server_cfg, 0));
        let mut client_cmd = words(&[
            &exe,
            "web-client",
            "--url",
            &format!("http://{}:{port}/", p.dst),
            if p.multiplexed { "--h2" } else { "--h1" },
            "--connections",
            &p.connections.to_string(),
            "--repeat",
            &p.repeat.to_string(),
            "--interval",
            &ms(p.interval),
            "--request",
            &p.request.to_string(),
            "--stop",
            &ms(p.stop.min(end) - p.start),
            "--end",
            &ms(end - p.start),
        ]);
        if p.warm {
            client_cmd.push("--warm".into());
        }
        client_cmd.extend(web_socket_args(&p.cfg, p.tos));
        Ok(Program {
            label: label.into(),
            start: p.start,
            client: self.exec(node, &client_cmd),
            server: Some(self.exec(server, &server_cmd)),
            kind: Kind::Web,
        })
    }

    /// An iperf3 server for one test on `port`, reporting every
    /// [`BIN`] as the simulator's series are binned.
    fn server(&self, node: usize, port: &str) -> Vec<String> {
        let interval = format!("{}", BIN.0 as f64 / 1e9);
        self.exec(
            node,
            &["iperf3", "-s", "-1", "-J", "-i", &interval, "-p", port],
        )
    }

    fn exec(&self, node: usize, cmd: &[impl AsRef<str>]) -> Vec<String> {
        ["ip", "netns", "exec", &self.ns[node]]
            .into_iter()
            .chain(cmd.iter().map(AsRef::as_ref))
            .map(String::from)
            .collect()
    }
}

/// The settings a namespace shares with the host: a live run cannot give
/// a node its own.
const GLOBAL_SYSCTLS: &[&str] = &["net.core.rmem_max", "net.core.wmem_max"];

/// A node that asks for a host-wide setting the host does not have is
/// refused: changing the host's is not a live run's business.
fn check_global_sysctls(nodes: &[Vec<(&'static str, String)>]) -> Result<(), String> {
    for (k, v) in nodes
        .iter()
        .flatten()
        .filter(|(k, _)| GLOBAL_SYSCTLS.contains(k))
    {
        let path = format!("/proc/sys/{}", k.replace('.', "/"));
        let host = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        if host.trim() != v {
            return Err(format!(
                "{k} is the host's, {} here; a node that asks for {v} can only run live on a host set so",
                host.trim()
            ));
        }
    }
    Ok(())
}

/// The scenario's features this front end does not map to a live network.
fn refuse_unsupported(b: &Built) -> Result<(), String> {
    for (ni, n) in b.world.nodes.iter().enumerate() {
        for (i, ifc) in n.ifaces.iter().enumerate() {
            let dev = &n.net.devices[ifc.dev];
            if ifc.peer == (ni, i) {
                return Err(format!(
                    "node {}: device {}: ifb devices do not run live yet",
                    n.name, dev.info.name
                ));
            }
            if dev.info.num_tx_queues != 1 {
                return Err(format!(
                    "node {}: device {}: {} transmit queues (a live device has one)",
                    n.name, dev.info.name, dev.info.num_tx_queues
                ));
            }
        }
    }
    Ok(())
}

/// A simulated port's wire, for the link daemon.
fn wire(c: &sluice_core::port::PortConfig) -> Wire {
    let (buffer_packets, buffer_bytes) = match c.buffer {
        TxBuffer::Packets(p) => (Some(p), None),
        TxBuffer::Bytes(b) => (None, Some(b)),
    };
    Wire {
        rate_bps: c.rate_bps,
        delay_ns: c.delay.0,
        buffer_packets,
        buffer_bytes,
        loss: c.loss,
    }
}

/// The sending node and app of the flow keyed (source address, ports).
fn find_sender(
    w: &sluice_sim::world::World,
    src: Ipv4Addr,
    sport: u16,
    dport: u16,
    kind: impl Fn(&App) -> bool,
) -> Option<(usize, &App)> {
    let node = w.nodes.iter().position(|n| n.addr == src)?;
    let app = w.nodes[node].host.apps.iter().find(|a| {
        kind(a)
            && match a {
                App::Tcp(t) => t.ports == (sport, dport),
                App::Udp(u) => u.ports == (sport, dport),
                _ => false,
            }
    })?;
    Some((node, app))
}

/// Labels with groups spread out as `NAME.0`, `NAME.1`…, as the report names them.
fn flat_labels(labels: &[(String, Measure)]) -> Vec<(String, Measure)> {
    let mut out = vec![];
    for (l, m) in labels {
        match m {
            Measure::Group(ms) => {
                for (i, m) in ms.iter().enumerate() {
                    out.push((format!("{l}.{i}"), m.clone()));
                }
            }
            m => out.push((l.clone(), m.clone())),
        }
    }
    out
}

/// What a measured workload runs.
struct Program {
    label: String,
    start: Time,
    client: Vec<String>,
    server: Option<Vec<String>>,
    kind: Kind,
}

enum Kind {
    Ping { sent: u64 },
    Tcp,
    Udp,
    Web,
}

/// What a live run made, removed on the way out whatever happened.
struct Network {
    ns: Vec<String>,
    links: Vec<String>,
}

impl Network {
    fn remove(&mut self) {
        for l in self.links.drain(..) {
            let _ = link::down(&l);
        }
        for ns in self.ns.drain(..) {
            let _ = link::run("ip", &["netns", "del", &ns]);
        }
    }
}

/// A program running, and the thread that reads what it prints (so that
/// a long report never blocks it on a full pipe).
struct Running {
    child: Child,
    output: std::thread::JoinHandle<String>,
}

fn spawn(cmd: &[String]) -> Result<Running, String> {
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", cmd.join(" ")))?;
    let mut stdout = child.stdout.take().expect("piped");
    let output = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
        out
    });
    Ok(Running { child, output })
}

/// Kill programs a failed start leaves behind.
fn stop_all(running: &mut Vec<Running>) {
    for mut r in running.drain(..) {
        let _ = r.child.kill();
        let _ = r.child.wait();
    }
}

/// Stop a program that outlived the run, and return what it printed.
fn finish(mut r: Running) -> String {
    let deadline = Instant::now() + std::time::Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = r.child.try_wait() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if let Ok(None) = r.child.try_wait() {
        // iperf3 writes its report when interrupted.
        let _ = Command::new("kill")
            .args(["-INT", &r.child.id().to_string()])
            .status();
        std::thread::sleep(std::time::Duration::from_millis(300));
        let _ = r.child.kill();
    }
    let _ = r.child.wait();
    r.output.join().unwrap_or_default()
}

fn progress(end: Time) -> ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(end.0 / 1_000_000);
    bar.set_style(
        ProgressStyle::with_template("live {bar:40} {pos}/{len} ms")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// ping -D output: `[EPOCH] … time=RTT ms` per reply.
fn ping_result(label: &str, sent: u64, out: &str, t0: Instant) -> PingResult {
    let start_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
        - t0.elapsed().as_secs_f64();
    let mut rtts = vec![];
    for line in out.lines() {
        let stamp = line
            .strip_prefix('[')
            .and_then(|r| r.split(']').next())
            .and_then(|s| s.parse::<f64>().ok());
        let rtt = line
            .split("time=")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|s| s.parse::<f64>().ok());
        if let (Some(t), Some(ms)) = (stamp, rtt) {
            let sent_at = (t - ms / 1e3 - start_epoch).max(0.0);
            rtts.push((Time((sent_at * 1e9) as u64), Duration((ms * 1e6) as u64)));
        }
    }
    PingResult::from_samples(label, sent, &rtts)
}

/// A flow's result from its iperf3 server's JSON report.
fn flow_result(p: &Program, server: &str, warmup: Time, end: Time) -> Result<FlowResult, String> {
    // A flow without programs (it sends nothing) has no report.
    let j: serde_json::Value = match p.server {
        None => serde_json::Value::Null,
        Some(_) => serde_json::from_str(server)
            .map_err(|e| format!("{}: iperf3 server report: {e}", p.label))?,
    };
    let start_s = p.start.0 as f64 / 1e9;
    let end_s = end.0 as f64 / 1e9;
    let from_s = start_s.max(warmup.0 as f64 / 1e9);
    let mut series = vec![];
    let mut bytes = 0u64;
    let mut last = from_s;
    for i in j["intervals"].as_array().into_iter().flatten() {
        let s = &i["sum"];
        let (a, bb) = (
            s["start"].as_f64().unwrap_or(0.0),
            s["end"].as_f64().unwrap_or(0.0),
        );
        let n = s["bytes"].as_u64().unwrap_or(0);
        let (a, bb) = (start_s + a, start_s + bb);
        if bb > end_s + 1e-6 {
            break;
        }
        // Per bin of the simulator's width, so that the report's sums of
        // series bins are the bytes iperf3 counted.
        series.push((a, n as f64 * 8.0 / 1e6 / (BIN.0 as f64 / 1e9)));
        if a >= from_s - 1e-6 {
            bytes += n;
            last = bb;
        }
    }
    let secs = (last - from_s).max(1e-9);
    let kind = matches!(p.kind, Kind::Udp);
    let (datagrams, loss_pct) = if kind {
        let s = &j["end"]["sum"];
        let total = s["packets"].as_u64().unwrap_or(0);
        let lost = s["lost_packets"].as_u64().unwrap_or(0);
        (
            Some((total, total - lost.min(total))),
            s["lost_percent"].as_f64(),
        )
    } else {
        (None, None)
    };
    Ok(FlowResult {
        name: p.label.clone(),
        kind: if kind { "udp" } else { "tcp" }.into(),
        bytes,
        goodput_mbps: bytes as f64 * 8.0 / 1e6 / secs,
        share: 0.0,
        datagrams,
        loss_pct,
        series,
        link: None,
        capacity_pct: None,
        over_capacity_pkts: None,
        measured_s: (from_s, last),
    })
}

/// `sluice web-server` and `web-client`'s socket options for `cfg`: its
/// congestion control, the buffers it sets (as iperf3's `-w` passes them),
/// and the TOS byte.
fn web_socket_args(cfg: &TcpConfig, tos: u8) -> Vec<String> {
    let mut args = vec!["--cc".to_string(), cfg.congestion.name().to_string()];
    if let Some(b) = cfg.send_buffer {
        args.extend(["--sndbuf".into(), b.to_string()]);
    }
    if let Some(b) = cfg.recv_buffer {
        args.extend(["--rcvbuf".into(), b.to_string()]);
    }
    if tos != 0 {
        args.extend(["--tos".into(), tos.to_string()]);
    }
    args
}

/// A web workload's result from its browser's lines (web_live.rs says
/// what they are): `load start_ns=S took_ns=T ...` per load, then `done`,
/// `unfinished` or `error MESSAGE`.
fn web_result(p: &Program, out: &str) -> Result<WebResult, String> {
    let mut samples = vec![];
    let mut last = None;
    for line in out.lines() {
        if let Some(e) = line.strip_prefix("error ") {
            return Err(format!("{}: web client: {e}", p.label));
        }
        let Some(fields) = line.strip_prefix("load ") else {
            last = Some(line);
            continue;
        };
        let field = |k: &str| {
            fields
                .split_whitespace()
                .find_map(|f| f.strip_prefix(k)?.strip_prefix('='))
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| format!("{}: web client: no {k} in {line:?}", p.label))
        };
        samples.push(LoadSample {
            start: p.start + Duration(field("start_ns")?),
            took: Duration(field("took_ns")?),
        });
    }
    let unfinished = match last {
        Some("done") => false,
        Some("unfinished") => true,
        _ => {
            return Err(format!(
                "{}: the web client stopped before the end of the run: {out:?}",
                p.label
            ))
        }
    };
    Ok(WebResult::from_samples(&p.label, &samples, unfinished))
}

/// The drops of the root qdiscs in `tc -s qdisc show` output.
fn root_drops(text: &str) -> u64 {
    let mut total = 0;
    let mut root = false;
    for line in text.lines() {
        if line.starts_with("qdisc ") {
            root = line.contains(" root ");
        } else if root {
            if let Some(n) = line
                .split("(dropped ")
                .nth(1)
                .and_then(|r| r.split(',').next())
                .and_then(|n| n.trim().parse::<u64>().ok())
            {
                total += n;
                root = false;
            }
        }
    }
    total
}

/// How far a live figure may be from the simulated one.
pub struct Tolerances {
    /// The total goodput, percent of the live value (each flow's is
    /// judged by its share).
    pub goodput_pct: f64,
    /// A ping's median RTT, percent of the live value.
    pub rtt_pct: f64,
    /// A flow's share of the total, percentage points.
    pub share_points: f64,
}

/// Both worlds' figures side by side, variant by variant; false if one is
/// beyond its tolerance.
pub fn compare(sim: &[RunResult], live: &[RunResult], tol: &Tolerances) -> (String, bool) {
    let mut out = String::new();
    let mut all_ok = true;
    // A figure of both worlds; `limit` None: shown, not judged.
    let mut row =
        |out: &mut String, what: String, s: f64, l: f64, points: bool, limit: Option<f64>| {
            let (diff, unit) = if points {
                ((s - l) * 100.0, "pt")
            } else if l != 0.0 {
                ((s - l) / l * 100.0, "%")
            } else {
                (if s == 0.0 { 0.0 } else { f64::INFINITY }, "%")
            };
            let verdict = match limit {
                Some(limit) if diff.abs() <= limit => format!("{limit:>5} {unit:<2} ok"),
                Some(limit) => {
                    all_ok = false;
                    format!("{limit:>5} {unit:<2} BEYOND")
                }
                None => String::new(),
            };
            let (s, l) = if points {
                (s * 100.0, l * 100.0)
            } else {
                (s, l)
            };
            out.push_str(&format!(
                "  {what:<34} {s:>10.3} {l:>10.3} {diff:>+8.1} {unit:<2} {verdict}\n"
            ));
        };
    for l in live {
        let Some(s) = sim.iter().find(|s| s.variant == l.variant) else {
            continue;
        };
        out.push_str(&format!(
            "[{}]\n  {:<34} {:>10} {:>10} {:>11} {:>8}\n",
            l.variant, "figure", "simulated", "live", "difference", "limit"
        ));
        for lp in &l.pings {
            if let Some(sp) = s.pings.iter().find(|p| p.name == lp.name) {
                let what = format!("ping {} median RTT ms", lp.name);
                row(
                    &mut out,
                    what,
                    sp.median_ms,
                    lp.median_ms,
                    false,
                    Some(tol.rtt_pct),
                );
            }
        }
        for lf in &l.flows {
            if let Some(sf) = s.flows.iter().find(|f| f.name == lf.name) {
                let what = format!("{} {} goodput Mbit/s", lf.kind, lf.name);
                row(
                    &mut out,
                    what,
                    sf.goodput_mbps,
                    lf.goodput_mbps,
                    false,
                    None,
                );
                let what = format!("{} {} share %", lf.kind, lf.name);
                row(
                    &mut out,
                    what,
                    sf.share,
                    lf.share,
                    true,
                    Some(tol.share_points),
                );
            }
        }
        for lw in &l.webs {
            if let Some(sw) = s.webs.iter().find(|w| w.name == lw.name) {
                let what = format!("web {} mean load ms", lw.name);
                row(&mut out, what, sw.load_ms, lw.load_ms, false, None);
            }
        }
        if !l.flows.is_empty() {
            let (sg, ..) = s.aggregate_goodput();
            let (lg, ..) = l.aggregate_goodput();
            row(
                &mut out,
                "total goodput Mbit/s".into(),
                sg,
                lg,
                false,
                Some(tol.goodput_pct),
            );
        }
    }
    (out, all_ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_drops_sum_only_root_qdiscs() {
        let text = "qdisc pfifo 1: dev a0 root refcnt 2 limit 100p\n Sent 100 bytes 1 pkt (dropped 7, overlimits 0 requeues 0)\nqdisc pfifo 2: dev a0 parent 1:1 limit 10p\n Sent 1 bytes 1 pkt (dropped 3, overlimits 0 requeues 0)\nqdisc fq_codel 0: dev b0 root refcnt 2\n Sent 1 bytes 1 pkt (dropped 5, overlimits 0 requeues 0)\n";
        assert_eq!(root_drops(text), 12);
    }

    #[test]
    fn web_client_lines_become_load_samples() {
        let p = Program {
            label: "page".into(),
            start: Time(2_000_000_000),
            client: vec![],
            server: None,
            kind: Kind::Web,
        };
        let out = "load start_ns=1000000 took_ns=300000000 bytes=50000 connections=6\n\
                   load start_ns=1001000000 took_ns=500000000 bytes=50000 connections=6\n\
                   unfinished\n";
        let r = web_result(&p, out).unwrap();
        assert_eq!((r.loads, r.unfinished), (2, true));
        assert_eq!((r.min_ms, r.load_ms, r.max_ms), (300.0, 400.0, 500.0));
        // From the run's start: the workload's, plus the browser's offset.
        assert_eq!(r.series, [(2.001, 300.0), (3.001, 500.0)]);
        let e = web_result(&p, "error connect: Connection refused (os error 111)\n");
        assert_eq!(
            e.unwrap_err(),
            "page: web client: connect: Connection refused (os error 111)"
        );
        let killed = "load start_ns=1000000 took_ns=300000000 bytes=50000 connections=6\n";
        assert!(web_result(&p, killed).is_err());
        assert!(
            !web_result(&p, &format!("{killed}done\n"))
                .unwrap()
                .unfinished
        );
    }

    #[test]
    fn ping_lines_become_samples() {
        let t0 = Instant::now();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let out = format!(
            "PING 10.0.1.1 (10.0.1.1) 56(84) bytes of data.\n[{:.6}] 64 bytes from 10.0.1.1: icmp_seq=1 ttl=63 time=22.4 ms\n[{:.6}] 64 bytes from 10.0.1.1: icmp_seq=2 ttl=63 time=30.0 ms\n",
            now + 0.5224,
            now + 0.63
        );
        let r = ping_result("rtt", 3, &out, t0);
        assert_eq!(r.received, 2);
        assert_eq!(r.sent, 3);
        assert!((r.median_ms - 26.2).abs() < 1e-9);
        // Sent 0.5 s and 0.6 s after the start.
        assert!((r.series[0].0 - 0.5).abs() < 0.01, "{:?}", r.series);
        assert!((r.series[1].0 - 0.6).abs() < 0.01, "{:?}", r.series);
    }
}
