//! `sluice bench`: how fast the scheduler core and the simulator run, on one
//! core, in-process, one machine-readable line per case.
//!
//! Qdisc cases: a device `eth0` in a fresh namespace, its qdisc tree built
//! through `tc` commands (as a user would write them), driven directly at
//! its root node: a batch of packets is enqueued, then the root is dequeued
//! until it is empty. The packets are made once and recycled — a dequeued or
//! refused packet goes back in the pool — so the loop allocates nothing per
//! packet and measures only the qdiscs (and their statistics). A recycled
//! packet is offered again as new: its timestamp is the current time and
//! the flow hash a qdisc stored in it (`skb->hash`) is cleared, so every
//! packet is hashed as a forwarded packet without a NIC hash would be. The clock is
//! virtual: each dequeued packet advances it by its serialization time on a
//! 10 Gbit/s NIC, and a `Wait(t)` answer (a shaper's watchdog, netem's
//! delay) jumps it to `t`, so shapers shape as they would under load.
//! `mpps` is millions of packets through enqueue + dequeue per wall-clock
//! second, the best of three trials (the machine may be shared).
//!
//! The simulator case runs the bundled dumbbell scenario's variants to their
//! end and counts departures: packets that finished serialization on any
//! port of the world (`PortStats::tx_packets`, summed).
//!
//! This file is also compiled into the criterion benches
//! (`benches/qdisc.rs`), which reuse [`QdiscCase`].

use sluice_core::packet::{Packet, ETH_P_IP};
use sluice_core::qdisc::pfifo_fast::tos_to_priority;
use sluice_core::qdisc::{Cx, Dequeue};
use sluice_core::time::{Duration, Time};
use sluice_tc::net::Net;
use sluice_tc::{ip, tc};
use std::time::Instant;

const USAGE: &str =
    "usage: sluice bench [--quick] [qdisc [NAME...] | sim | all] | live [...] | proxy [...]
  qdisc   enqueue+dequeue throughput per qdisc, one core, packets recycled:
          one line per case, e.g. `qdisc=pfifo mpps=38.2`
  sim     the bundled dumbbell scenario run to its end:
          `sim=dumbbell variant=... wall_s=... departures=... departures_per_s=...`
  all     both (the default)
  state   the state directory, through this binary as a user runs it:
          a 3000-line `tc -batch` of htb classes, one command at 3000
          classes, one command after 0 to 100 000 `netem change`s
  live    real traffic through a sluice link and a kernel veth pair (root;
          `sluice bench live --help`)
  proxy   `sluice proxy` on the loopback: throughput, added RTT, toxics'
          accuracy (`sluice bench proxy --help`)
  --quick shorter trials (less precise)
  --rounds N  run each qdisc case for exactly N rounds, once, and print the
          packet count (for instruction counts under valgrind --tool=callgrind)
Build with --release for figures that mean anything:
  cargo run --release -p sluice -- bench
";

/// Accounted length of every benchmark packet (a full-size frame would be
/// 1514; 1000 is the middle of a typical mix and what the targets assume).
pub const PKT_LEN: u32 = 1000;

/// The line rate that drains the qdisc: 10 Gbit/s, in bits per second.
const NIC_BPS: u64 = 10_000_000_000;

/// One qdisc benchmark: how to build it and what traffic it gets.
pub struct Spec {
    /// Short name (`pfifo`, `htb`): what `sluice bench qdisc NAME` selects.
    pub name: &'static str,
    /// The key=value words that identify the case on its output line.
    pub label: &'static str,
    /// tc commands (without the leading `tc`) building eth0's tree.
    pub tc: Vec<String>,
    /// Distinct flows in the traffic (5-tuples: source port varies).
    pub flows: usize,
    /// Packets enqueued per round.
    pub batch: usize,
    /// Sets per-flow fields of the packet for flow `i` (TOS, priority, port).
    pub shape: fn(usize, &mut Packet),
    /// A case for a qdisc that may not be implemented yet: failing to build
    /// is reported as `skipped=not-implemented` rather than an error.
    pub optional: bool,
}

fn plain(_: usize, _: &mut Packet) {}

/// prio: spread flows over the bands by TOS, as the default priomap reads it
/// (0x10 interactive -> band 0, 0 best effort -> band 1, 0x08 bulk -> band 2).
/// prio and pfifo_fast read `skb->priority`, which a socket sending with
/// `IP_TOS` gets from the TOS (`rt_tos2priority`), so both are set.
fn prio_tos(i: usize, p: &mut Packet) {
    let tos = [0x10, 0x00, 0x08][i % 3];
    p.data[1] = tos;
    p.priority = tos_to_priority(tos);
}

/// htb: flows 0-3 go to ports 5001-5004, classified by the four u32 filters
/// (1:11-1:14, the fourth after trying all four); flows 4-6 carry
/// `skb->priority` = 1:21-1:23, as SO_PRIORITY or a CLASSIFY target sets it
/// (HTB takes those before its filters); flow 7 matches no filter and goes
/// to the default class 1:24. So every one of the 8 leaves is busy.
fn htb_flow(i: usize, p: &mut Packet) {
    let dport = 5001 + i as u16;
    p.data[22..24].copy_from_slice(&dport.to_be_bytes());
    if (4..7).contains(&i) {
        p.priority = 0x0001_0021 + (i as u32 - 4);
    }
}

fn words(cmds: &[&str]) -> Vec<String> {
    cmds.iter().map(|s| s.to_string()).collect()
}

/// The qdisc cases `sluice bench qdisc` runs, in order.
pub fn specs() -> Vec<Spec> {
    let root = |q: &str| vec![format!("qdisc add dev eth0 root handle 1: {q}")];
    let mut htb = words(&[
        "qdisc add dev eth0 root handle 1: htb default 24",
        "class add dev eth0 parent 1: classid 1:1 htb rate 10gbit",
        "class add dev eth0 parent 1:1 classid 1:10 htb rate 5gbit ceil 10gbit",
        "class add dev eth0 parent 1:1 classid 1:20 htb rate 5gbit ceil 10gbit",
    ]);
    for (mid, leaves) in [(10, 11..15), (20, 21..25)] {
        for leaf in leaves {
            htb.push(format!(
                "class add dev eth0 parent 1:{mid} classid 1:{leaf} htb rate 1gbit ceil 10gbit"
            ));
        }
    }
    for i in 1..=4 {
        htb.push(format!(
            "filter add dev eth0 parent 1: protocol ip prio {i} u32 match ip dport {} 0xffff flowid 1:1{i}",
            5000 + i
        ));
    }
    // The same shape for hfsc: two link-sharing inner classes, eight leaves
    // with real-time and link-sharing curves (8 x 1 Gbit/s guaranteed on the
    // 10 Gbit/s line), the same four filters, skb->priority and default.
    let mut hfsc = words(&[
        "qdisc add dev eth0 root handle 1: hfsc default 24",
        "class add dev eth0 parent 1: classid 1:1 hfsc ls rate 10gbit",
        "class add dev eth0 parent 1:1 classid 1:10 hfsc ls rate 5gbit",
        "class add dev eth0 parent 1:1 classid 1:20 hfsc ls rate 5gbit",
    ]);
    for (mid, leaves) in [(10, 11..15), (20, 21..25)] {
        for leaf in leaves {
            hfsc.push(format!(
                "class add dev eth0 parent 1:{mid} classid 1:{leaf} hfsc sc rate 1gbit"
            ));
        }
    }
    for i in 1..=4 {
        hfsc.push(format!(
            "filter add dev eth0 parent 1: protocol ip prio {i} u32 match ip dport {} 0xffff flowid 1:1{i}",
            5000 + i
        ));
    }
    let spec = |name, label, tc, flows, batch, shape: fn(usize, &mut Packet), optional| Spec {
        name,
        label,
        tc,
        flows,
        batch,
        shape,
        optional,
    };
    vec![
        spec("pfifo", "qdisc=pfifo", root("pfifo"), 1, 64, plain, false),
        spec(
            "pfifo_fast",
            "qdisc=pfifo_fast",
            root("pfifo_fast"),
            3,
            64,
            prio_tos,
            false,
        ),
        spec(
            "tbf",
            "qdisc=tbf",
            root("tbf rate 5gbit burst 64k latency 10ms"),
            1,
            64,
            plain,
            false,
        ),
        spec("prio", "qdisc=prio", root("prio"), 3, 64, prio_tos, false),
        spec(
            "sfq",
            "qdisc=sfq flows=1024",
            root("sfq limit 4096 flows 1024 divisor 1024"),
            1024,
            1024,
            plain,
            false,
        ),
        spec(
            "htb",
            "qdisc=htb classes=8 filters=4",
            htb,
            8,
            64,
            htb_flow,
            false,
        ),
        spec(
            "hfsc",
            "qdisc=hfsc classes=8 filters=4",
            hfsc,
            8,
            64,
            htb_flow,
            false,
        ),
        spec(
            "fq_codel",
            "qdisc=fq_codel flows=1024",
            root("fq_codel"),
            1024,
            1024,
            plain,
            true,
        ),
        spec(
            "fq",
            "qdisc=fq flows=1024",
            root("fq"),
            1024,
            1024,
            plain,
            true,
        ),
        spec(
            "cake",
            "qdisc=cake bandwidth=9gbit flows=1024",
            root("cake bandwidth 9gbit"),
            1024,
            1024,
            plain,
            true,
        ),
        spec(
            "netem",
            "qdisc=netem delay=1ms",
            root("netem delay 1ms"),
            1,
            64,
            plain,
            true,
        ),
    ]
}

/// A built qdisc case, ready to run rounds.
pub struct QdiscCase {
    net: Net,
    dev: usize,
    pool: Vec<Packet>,
    back: Vec<Packet>,
    template: Vec<Packet>,
    now: Time,
}

/// Why a case could not be built.
pub enum BuildError {
    /// A tc command failed (for an optional case: the qdisc is not there yet).
    Tc(String),
}

impl QdiscCase {
    /// Build the device, the tree and the packets.
    pub fn build(spec: &Spec) -> Result<QdiscCase, BuildError> {
        let mut net = Net::new();
        for cmd in [
            "link add dev eth0 type ether",
            "link set dev eth0 txqueuelen 1000",
            "link set dev eth0 up",
        ] {
            let o = ip::run(&mut net, &words(&cmd.split(' ').collect::<Vec<_>>()));
            if o.code != 0 {
                return Err(BuildError::Tc(format!("ip {cmd}: {}", o.stderr.trim())));
            }
        }
        for cmd in &spec.tc {
            let w: Vec<String> = cmd.split_whitespace().map(String::from).collect();
            let o = tc::run(&mut net, &tc::Opts::default(), &w);
            if o.code != 0 {
                return Err(BuildError::Tc(format!("tc {cmd}: {}", o.stderr.trim())));
            }
        }
        let dev = net
            .devices
            .iter()
            .position(|d| d.info.name == "eth0")
            .expect("eth0 exists");
        let template: Vec<Packet> = (0..spec.batch)
            .map(|i| {
                let mut p = udp_packet(i % spec.flows);
                (spec.shape)(i % spec.flows, &mut p);
                p.id = i as u64;
                p
            })
            .collect();
        Ok(QdiscCase {
            net,
            dev,
            pool: template.clone(),
            back: Vec::with_capacity(spec.batch),
            template,
            now: Time(1_000_000_000),
        })
    }

    /// Enqueue the batch, then dequeue until the tree is empty; returns the
    /// packets dequeued.
    pub fn round(&mut self) -> u64 {
        let root = &mut self.net.devices[self.dev].root;
        let mut cx = Cx::new(self.now);
        for mut p in self.pool.drain(..) {
            p.tstamp = cx.now;
            // A recycled packet arrives as new: without the `skb->hash` a
            // qdisc computed and kept on it last round (fq_codel, fq).
            p.hash = 0;
            if let Err((p, _)) = root.offer(p, &mut cx) {
                self.back.push(p);
            }
        }
        let mut n = 0;
        loop {
            match root.dequeue(&mut cx) {
                Dequeue::Packet(p) => {
                    cx.now += Duration(p.len as u64 * 8 * 1_000_000_000 / NIC_BPS);
                    self.back.push(p);
                    n += 1;
                }
                Dequeue::Wait(t) => cx.now = t.max(cx.now),
                Dequeue::Empty => break,
            }
        }
        self.now = cx.now;
        std::mem::swap(&mut self.pool, &mut self.back);
        // Packets an AQM shed are gone; make up the batch (rare, so the
        // allocation does not count).
        if self.pool.len() < self.template.len() {
            let missing = self.template.len() - self.pool.len();
            self.pool.extend(self.template[..missing].iter().cloned());
        }
        n
    }
}

/// An IPv4/UDP packet of flow `i` (headers only, as the simulator carries
/// them): 10.0.0.1 -> 10.1.x.y, source port 10000 + i, destination 5001.
pub fn udp_packet(i: usize) -> Packet {
    let mut d = vec![0u8; 28];
    d[0] = 0x45;
    d[2..4].copy_from_slice(&(PKT_LEN as u16 - 14).to_be_bytes());
    d[8] = 64;
    d[9] = 17;
    d[12..16].copy_from_slice(&[10, 0, 0, 1]);
    d[16..20].copy_from_slice(&[10, 1, (i >> 8) as u8, i as u8]);
    d[20..22].copy_from_slice(&(10_000 + i as u16).to_be_bytes());
    d[22..24].copy_from_slice(&5001u16.to_be_bytes());
    d[24..26].copy_from_slice(&(PKT_LEN as u16 - 34).to_be_bytes());
    Packet::new(d, PKT_LEN, ETH_P_IP)
}

/// Run rounds for about `secs` of wall time; returns packets per second.
fn trial(case: &mut QdiscCase, secs: f64) -> f64 {
    let start = Instant::now();
    let mut packets = 0u64;
    loop {
        for _ in 0..16 {
            packets += case.round();
        }
        let el = start.elapsed().as_secs_f64();
        if el >= secs {
            return packets as f64 / el;
        }
    }
}

/// How long to measure.
#[derive(Clone, Copy)]
enum Length {
    /// Three trials of about this many seconds each (after a warm-up).
    Timed(f64),
    /// Exactly this many rounds, once (for profiling).
    Rounds(u64),
}

fn bench_qdisc(spec: &Spec, length: Length) -> String {
    let mut case = match QdiscCase::build(spec) {
        Ok(c) => c,
        Err(BuildError::Tc(msg)) => {
            eprintln!("sluice bench: {}: {msg}", spec.name);
            return if spec.optional {
                format!("{} skipped=not-implemented", spec.label)
            } else {
                format!("{} error=build-failed", spec.label)
            };
        }
    };
    if case.round() == 0 {
        eprintln!(
            "sluice bench: {}: no packet came out of the qdisc",
            spec.name
        );
        let why = if spec.optional {
            "not-implemented"
        } else {
            "no-output"
        };
        return format!("{} skipped={why}", spec.label);
    }
    let secs = match length {
        Length::Timed(s) => s,
        Length::Rounds(n) => {
            let packets: u64 = (0..n).map(|_| case.round()).sum();
            return format!("{} rounds={n} packets={packets}", spec.label);
        }
    };
    trial(&mut case, secs / 2.0);
    let best = (0..3).map(|_| trial(&mut case, secs)).fold(0.0, f64::max);
    format!(
        "{} mpps={:.2} ns_per_pkt={:.1}",
        spec.label,
        best / 1e6,
        1e9 / best
    )
}

/// One run of a bundled scenario's variant: wall time and departures.
pub struct SimRun {
    /// The variant's name.
    pub variant: String,
    /// Wall time to build and run it, in seconds.
    pub wall_s: f64,
    /// Packets that finished serialization on any port.
    pub departures: u64,
}

/// Build and run every variant of the bundled scenario `name`.
pub fn run_sim(name: &str) -> Result<Vec<SimRun>, String> {
    use sluice_sim::scenario::Scenario;
    let text = sluice_sim::bundled::scenario(name)
        .ok_or_else(|| format!("no bundled scenario {name:?}"))?;
    let sc = Scenario::parse(text)?;
    let none = Default::default();
    let variants: Vec<Option<&sluice_sim::scenario::Variant>> = if sc.variants.is_empty() {
        vec![None]
    } else {
        sc.variants.iter().map(Some).collect()
    };
    let mut out = vec![];
    for v in variants {
        let vars = sc.vars_for(v, &none);
        let start = Instant::now();
        let mut built = sluice_sim::run::build(&sc, &vars)?;
        built.world.run_until(built.duration);
        let wall_s = start.elapsed().as_secs_f64();
        let departures = built
            .world
            .nodes
            .iter()
            .flat_map(|n| n.ifaces.iter())
            .map(|i| i.port.stats.tx_packets)
            .sum();
        let variant = v.map_or("default".to_string(), |v| v.name.clone());
        out.push(SimRun {
            variant,
            wall_s,
            departures,
        });
    }
    Ok(out)
}

fn bench_sim(name: &str) -> Result<Vec<String>, String> {
    let runs = run_sim(name)?;
    let mut lines = vec![];
    let (mut wall, mut deps) = (0.0, 0);
    for r in &runs {
        lines.push(format!(
            "sim={name} variant={} wall_s={:.3} departures={} departures_per_s={:.0}",
            r.variant,
            r.wall_s,
            r.departures,
            r.departures as f64 / r.wall_s
        ));
        wall += r.wall_s;
        deps += r.departures;
    }
    lines.push(format!(
        "sim={name} wall_s={wall:.3} departures={deps} departures_per_s={:.0}",
        deps as f64 / wall
    ));
    Ok(lines)
}

/// Run `sluice bench`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let mut length = Length::Timed(0.4);
    let mut what: Option<&str> = None;
    let mut names: Vec<&str> = vec![];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" | "-q" => length = Length::Timed(0.05),
            "--rounds" => match it.next().and_then(|n| n.parse().ok()) {
                Some(n) => length = Length::Rounds(n),
                None => {
                    eprintln!("sluice bench: --rounds needs a number");
                    return 2;
                }
            },
            "-h" | "--help" | "help" => {
                print!("{USAGE}");
                return 0;
            }
            "qdisc" | "sim" | "all" | "state" if what.is_none() => what = Some(a),
            n if what == Some("qdisc") && specs().iter().any(|s| s.name == n) => names.push(n),
            other => {
                eprintln!("sluice bench: unknown argument {other:?}\n{USAGE}");
                return 2;
            }
        }
    }
    let what = what.unwrap_or("all");
    if cfg!(debug_assertions) {
        eprintln!("sluice bench: this is a debug build; use --release for real figures");
    }
    if what == "state" {
        return match bench_state() {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("sluice bench state: {e}");
                1
            }
        };
    }
    let mut status = 0;
    if what != "sim" {
        for spec in specs() {
            if names.is_empty() || names.contains(&spec.name) {
                let line = bench_qdisc(&spec, length);
                if line.contains("error=") {
                    status = 1;
                }
                println!("{line}");
            }
        }
    }
    if what != "qdisc" {
        match bench_sim("dumbbell") {
            Ok(lines) => lines.iter().for_each(|l| println!("{l}")),
            Err(e) => {
                eprintln!("sluice bench: sim: {e}");
                status = 1;
            }
        }
    }
    status
}

/// A private temporary state directory (sluice refuses one others can enter).
fn state_tempdir() -> Result<tempfile::TempDir, String> {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("chmod: {e}"))?;
    Ok(d)
}

/// Run this binary as `sluice ARGS` with state in `state`; its wall time
/// in seconds, or its stderr if it failed.
fn sluice_wall(state: &std::path::Path, args: &[&str]) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let t = Instant::now();
    let o = std::process::Command::new(exe)
        .args(args)
        .env("SLUICE_STATE_DIR", state)
        .env_remove("SLUICE_NETNS")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("run: {e}"))?;
    let wall = t.elapsed().as_secs_f64();
    if !o.status.success() {
        return Err(format!(
            "sluice {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(wall)
}

/// The median and the best of `n` runs of `sluice ARGS`, in milliseconds.
fn sluice_ms(state: &std::path::Path, args: &[&str], n: usize) -> Result<(f64, f64), String> {
    let mut t = (0..n)
        .map(|_| sluice_wall(state, args).map(|s| s * 1e3))
        .collect::<Result<Vec<_>, _>>()?;
    t.sort_by(f64::total_cmp);
    Ok((t[n / 2], t[0]))
}

/// `sluice bench state`: each case through the binary, as a user runs it
/// (process start, lock, load, command, commit with fsync); wall times.
fn bench_state() -> Result<(), String> {
    use sluice_tc::state::{replay, Access, Session};
    // 1. A 3000-line batch of htb classes under an htb root, best of three.
    let mut text = String::from("qdisc add dev lo root handle 1: htb\n");
    for i in 1..=3000 {
        text.push_str(&format!(
            "class add dev lo parent 1: classid 1:{i:x} htb rate {i}kbit\n"
        ));
    }
    let dir = state_tempdir()?;
    let batch = dir.path().join("classes.tc");
    std::fs::write(&batch, &text).map_err(|e| format!("write batch: {e}"))?;
    let mut best = f64::INFINITY;
    for trial in 0..3 {
        let state = dir.path().join(format!("state{trial}"));
        best = best.min(sluice_wall(
            &state,
            &["tc", "-batch", batch.to_str().unwrap_or("")],
        )?);
    }
    println!("state=batch lines=3001 wall_s={best:.3}");
    // 2. One command at 3000 classes: a listing (shared lock, no write) and
    //    a class change (exclusive lock, one append and fsync).
    let state = dir.path().join("state0");
    let (med, min) = sluice_ms(&state, &["tc", "qdisc", "show", "dev", "lo"], 21)?;
    println!("state=show classes=3000 median_ms={med:.2} best_ms={min:.2}");
    let change = [
        "tc", "class", "change", "dev", "lo", "parent", "1:", "classid", "1:1", "htb", "rate",
        "7kbit",
    ];
    let (med, min) = sluice_ms(&state, &change, 21)?;
    println!("state=change classes=3000 median_ms={med:.2} best_ms={min:.2}");
    // 3. netem: after N changes of one qdisc (committed in-process, 100 a
    //    transaction, at their own times), one change and one listing.
    let state = dir.path().join("netem");
    let now = || {
        sluice_core::time::Time(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        )
    };
    sluice_wall(
        &state,
        &[
            "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
        ],
    )?;
    let mut done = 0;
    for checkpoint in [0, 1_000, 10_000, 100_000] {
        while done < checkpoint {
            let mut s = Session::load(&state, None, replay, Some(now()), Access::Write)
                .map_err(|e| e.to_string())?;
            for _ in 0..100 {
                done += 1;
                let words: Vec<String> = format!(
                    "tc qdisc change dev lo root netem delay {}ms loss {}%",
                    done % 97,
                    done % 7
                )
                .split_whitespace()
                .map(String::from)
                .collect();
                let o = tc::run(&mut s.net, &tc::Opts::default(), &words[1..]);
                if o.code != 0 {
                    return Err(o.stderr);
                }
                s.stage(words);
            }
            s.commit().map_err(|e| e.to_string())?;
        }
        let change = [
            "tc", "qdisc", "change", "dev", "lo", "root", "netem", "delay", "5ms",
        ];
        let (cmed, cmin) = sluice_ms(&state, &change, 21)?;
        done += 21;
        let (smed, smin) = sluice_ms(&state, &["tc", "qdisc", "show", "dev", "lo"], 21)?;
        let st = Session::load(&state, None, replay, None, Access::Read)
            .map_err(|e| e.to_string())?
            .stats();
        println!(
            "state=netem changes={done} change_median_ms={cmed:.2} change_best_ms={cmin:.2} show_median_ms={smed:.2} show_best_ms={smin:.2} snapshot_commands={} journal_commands={}",
            st.snapshot_commands, st.journal_commands
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    // `cargo bench` compiles this file into benches/qdisc.rs with cfg(test)
    // but strips the tests, which leaves the import unused there.
    #[allow(unused_imports)]
    use super::*;

    #[test]
    fn every_case_moves_its_whole_batch_each_round() {
        for spec in specs() {
            let Ok(mut case) = QdiscCase::build(&spec) else {
                assert!(spec.optional, "{} did not build", spec.name);
                continue;
            };
            let n: u64 = (0..20).map(|_| case.round()).sum();
            if spec.optional && n == 0 {
                continue;
            }
            assert_eq!(n, 20 * spec.batch as u64, "{}: packets lost", spec.name);
            assert_eq!(case.pool.len(), spec.batch, "{}: pool", spec.name);
        }
    }

    #[test]
    fn the_htb_case_keeps_all_eight_leaves_busy() {
        all_eight_leaves_busy("htb");
    }

    #[test]
    fn the_hfsc_case_keeps_all_eight_leaves_busy() {
        all_eight_leaves_busy("hfsc");
    }

    fn all_eight_leaves_busy(kind: &str) {
        let spec = specs().into_iter().find(|s| s.name == kind).unwrap();
        let Ok(mut case) = QdiscCase::build(&spec) else {
            panic!("{kind} case did not build")
        };
        for _ in 0..200 {
            case.round();
        }
        let opts = tc::Opts {
            stats: true,
            ..Default::default()
        };
        let o = tc::run(
            &mut case.net,
            &opts,
            &words(&["class", "show", "dev", "eth0"]),
        );
        let text = o.stdout;
        for leaf in (11..15).chain(21..25) {
            let head = format!("class {kind} 1:{leaf} ");
            let at = text
                .find(&head)
                .unwrap_or_else(|| panic!("no {head} in {text}"));
            let sent = text[at..].lines().nth(1).unwrap();
            // Each leaf carries an eighth of the traffic.
            let want = format!(" Sent {} bytes", 200 * 8 * PKT_LEN);
            assert!(sent.starts_with(&want), "1:{leaf}: {sent}");
        }
    }
}
