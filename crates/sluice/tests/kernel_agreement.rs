//! The simulator held to the kernel it models: the dumbbell's path (10
//! Mbit/s, 11 ms each way, a 1000-packet byte fifo in front of the
//! bottleneck) carries CUBIC bulk flows for 20 s while a ping every 100 ms
//! measures the round trip through the queue — once in `sluice sim`, with
//! its model of Linux's TCP, and once live: iperf3 and ping over the
//! kernel's own TCP through `sluice link` (docs/validation.md, "Against
//! Linux", has the hand-measured table these cases come from).
//!
//! - Four flows, each with 128 KiB buffers (`iperf3 -P 4 -w 128K`): the
//!   windows the kernel offers for that request, 4 × 160 KiB, sit in the
//!   queue, ~0.5 s of it. The median ping RTTs must agree within 10 %.
//! - One flow with buffers left to autotuning: the receive window grows
//!   with the RTT the receiver measures, queueing included, so the queue
//!   grows by ~50 ms every second until it overflows. Each second's mean
//!   RTT over seconds 1 to 8 (the window opening) must climb at the
//!   kernel's slope within 2 %, from a level within 80 ms of the kernel's,
//!   the two ramps parallel within 10 ms; the medians must agree within
//!   15 %. The level is what slow start leaves in the queue, where the
//!   two differ: a ping 0.1 s into the flow finds 54 or 89 ms of queue
//!   in Linux, 15 ms in the simulator.
//!
//! The figures at the assertions are from 13 runs of the one-flow case and
//! 10 of the four-flow case on Linux 6.18 (stock sysctls), iperf3 3.12, 2
//! vCPUs of an Intel Xeon, 2026-12-07.
//!
//! Each ping's time is when it was sent, from the moment ping and the
//! iperf3 client start together (live: from ping's `-D` receive stamps less
//! the RTT); the simulated flows and ping start at 0. iperf3 connects and
//! exchanges its parameters before its data flows, a few round trips that
//! the simulator does not spend, so the live flows start ~0.2 s later (the
//! first two pings find the queue empty), worth ~10 ms of RTT while it
//! climbs.
//!
//! Needs root, iperf3, ping and iproute2 (CI has them; without them it
//! says loudly that it skipped). The two cases run one after the other (~25 s each).

mod common;

use common::{median, simulate, skip_live, KillOnDrop, Link};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// Seconds each case runs, in both worlds.
const SECS: u32 = 20;

/// The live link: the dumbbell's bottleneck and base RTT, and 1000 full
/// frames of byte fifo in front of it.
const LINK: [&str; 6] = [
    "--rate",
    "10mbit",
    "--delay",
    "11ms",
    "--tc",
    "qdisc add dev a0 root bfifo limit 1514000",
];

/// The same path in the simulator: a one-packet transmit buffer after the
/// qdisc, as the live wire takes one packet at a time from it.
fn scenario(flows: u32, buffer: Option<&str>) -> String {
    let buffers = buffer.map_or(String::new(), |b| {
        format!("sndbuf = \"{b}\"\nrcvbuf = \"{b}\"\n")
    });
    format!(
        r#"
name = "kernel-agreement"
duration = "{SECS}s"
seed = 1

[[node]]
name = "a"
addr = "10.0.0.1"
tc = ["tc qdisc replace dev eth0 root bfifo limit 1514000"]

[[node]]
name = "b"
addr = "10.0.0.2"

[[link]]
a = "a:eth0"
b = "b:eth0"
rate = "10mbit"
delay = "11ms"
buffer = "1p"

[[workload]]
type = "tcp"
name = "bulk"
from = "a"
to = "b"
count = {flows}
cc = "cubic"
{buffers}
[[workload]]
type = "ping"
name = "rtt"
from = "a"
to = "b"
interval = "100ms"
"#
    )
}

/// One ping: when it was sent (s from the start) and its RTT (ms).
type Ping = (f64, f64);

/// The simulated pings of `flows` CUBIC flows with `buffer` as SO_SNDBUF
/// and SO_RCVBUF (`None`: autotuned).
fn simulated(flows: u32, buffer: Option<&str>) -> Vec<Ping> {
    let dir = tempfile::tempdir().expect("tempdir");
    let j = simulate(dir.path(), &scenario(flows, buffer));
    j["runs"][0]["pings"][0]["series"]
        .as_array()
        .expect("a ping series")
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
        .collect()
}

/// The live pings while iperf3 runs `flows` CUBIC flows through the link,
/// with `window` as iperf3's `-w` (`None`: autotuned).
fn live(flows: u32, window: Option<&str>) -> Vec<Ping> {
    let link = Link::new("ka", "");
    link.up(&LINK);
    let b_addr = link.addr_b();
    let netns_exec = |side: char| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &link.ns(side)]);
        c
    };
    let _server = KillOnDrop(
        netns_exec('b')
            .args(["iperf3", "-s", "-1"])
            .stdout(Stdio::null())
            .spawn()
            .expect("iperf3 -s"),
    );
    wait_listening(&link, 5201);
    let dir = tempfile::tempdir().expect("tempdir");
    let ping_out = dir.path().join("ping.txt");
    let start = SystemTime::now();
    let mut ping = KillOnDrop(
        netns_exec('a')
            .args(["ping", "-n", "-D", "-i", "0.1", "-c"])
            .arg((SECS * 10).to_string())
            .arg(&b_addr)
            .stdout(std::fs::File::create(&ping_out).expect("ping output"))
            .spawn()
            .expect("ping"),
    );
    let mut client = netns_exec('a');
    client.args([
        "iperf3",
        "-c",
        &b_addr,
        "-C",
        "cubic",
        "-t",
        &SECS.to_string(),
    ]);
    client.args(["-P", &flows.to_string()]);
    if let Some(w) = window {
        client.args(["-w", w]);
    }
    common::ok(client.output().expect("iperf3 -c"), "iperf3 client");
    ping.0.wait().expect("ping");
    link.ok(&["link", "down", &link.name]);
    let t0 = start
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    sent_at(
        &std::fs::read_to_string(&ping_out).expect("ping output"),
        t0,
    )
}

/// Wait (up to 5 s) for a listener on `port` in side b.
fn wait_listening(link: &Link, port: u16) {
    let begin = Instant::now();
    let listening = || {
        Command::new("ip")
            .args(["netns", "exec", &link.ns('b'), "ss", "-Hltn"])
            .arg(format!("sport = :{port}"))
            .output()
            .is_ok_and(|o| !o.stdout.is_empty())
    };
    while !listening() {
        assert!(
            begin.elapsed() < Duration::from_secs(5),
            "nothing listens on port {port} in {}",
            link.ns('b')
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Pings from `ping -D` output: `[EPOCH] 64 bytes from ...: icmp_seq=N
/// ttl=64 time=RTT ms`, sent at EPOCH less the RTT, counted from `t0`.
fn sent_at(ping_output: &str, t0: f64) -> Vec<Ping> {
    ping_output
        .lines()
        .filter_map(|l| {
            let stamp: f64 = l.strip_prefix('[')?.split(']').next()?.parse().ok()?;
            let rtt: f64 = l
                .split("time=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            Some((stamp - rtt / 1000.0 - t0, rtt))
        })
        .collect()
}

/// The mean RTT of the pings sent in each whole second `0..SECS` (NaN for
/// a second without any).
fn per_second_means(pings: &[Ping]) -> Vec<f64> {
    (0..SECS)
        .map(|s| {
            let rtts: Vec<f64> = pings
                .iter()
                .filter(|(t, _)| t.floor() as u32 == s)
                .map(|&(_, rtt)| rtt)
                .collect();
            rtts.iter().sum::<f64>() / rtts.len() as f64
        })
        .collect()
}

/// Both worlds' medians and per-second means, side by side.
fn report(case: &str, sim: &[Ping], real: &[Ping]) -> String {
    let rtts = |p: &[Ping]| p.iter().map(|&(_, r)| r).collect::<Vec<_>>();
    let (ms, mr) = (median(&rtts(sim)), median(&rtts(real)));
    let mut text = format!(
        "{case}: ping median: sim {ms:.1} ms ({} pings), Linux {mr:.1} ms ({} pings)\n  second    sim  Linux  (mean RTT, ms)\n",
        sim.len(),
        real.len()
    );
    let (s, r) = (per_second_means(sim), per_second_means(real));
    for (i, (a, b)) in s.iter().zip(&r).enumerate() {
        text += &format!("  {i:6} {a:6.0} {b:6.0}\n");
    }
    text
}

/// One case: its flows and the buffers they ask for.
struct Case {
    name: &'static str,
    flows: u32,
    /// SO_SNDBUF and SO_RCVBUF in the simulator, and iperf3's `-w` for
    /// the same request; `None` for both: autotuned.
    buffer: Option<(&'static str, &'static str)>,
}

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Run a case in both worlds (one case at a time): the simulated and the
/// live pings, after printing them side by side; `None` if it cannot run here.
fn both(case: &Case) -> Option<(Vec<Ping>, Vec<Ping>)> {
    if skip_live(&["iperf3", "ping", "ss"]) {
        return None;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let sim = simulated(case.flows, case.buffer.map(|(sim, _)| sim));
    let real = live(case.flows, case.buffer.map(|(_, iperf3)| iperf3));
    eprintln!("{}", report(case.name, &sim, &real));
    Some((sim, real))
}

/// Medians within `tolerance` of the kernel's.
fn assert_medians_agree(case: &str, sim: &[Ping], real: &[Ping], tolerance: f64) {
    let rtts = |p: &[Ping]| p.iter().map(|&(_, r)| r).collect::<Vec<_>>();
    let (ms, mr) = (median(&rtts(sim)), median(&rtts(real)));
    assert!(
        real.len() >= (SECS * 10 * 9 / 10) as usize,
        "{case}: only {} of {} live pings answered",
        real.len(),
        SECS * 10
    );
    assert!(
        (ms - mr).abs() <= tolerance * mr,
        "{case}: ping medians {ms:.1} ms (sim) and {mr:.1} ms (Linux) differ by more than {} %\n{}",
        tolerance * 100.0,
        report(case, sim, real)
    );
}

#[test]
fn four_cubic_flows_with_128k_buffers_queue_as_long_as_the_kernels() {
    let case = Case {
        name: "4 CUBIC flows, 128 KiB buffers",
        flows: 4,
        buffer: Some(("128KiB", "128K")),
    };
    let Some((sim, real)) = both(&case) else {
        return;
    };
    // Over 10 runs Linux's median was 508-515 ms, the simulator's 540 ms,
    // 5-6 % higher.
    assert_medians_agree(case.name, &sim, &real, 0.10);
}

/// The least-squares slope of `y`, one value a second: units of `y` a second.
fn slope(y: &[f64]) -> f64 {
    let n = y.len() as f64;
    let (mx, my) = ((n - 1.0) / 2.0, y.iter().sum::<f64>() / n);
    let cov: f64 = y
        .iter()
        .enumerate()
        .map(|(x, v)| (x as f64 - mx) * (v - my))
        .sum();
    let var: f64 = (0..y.len()).map(|x| (x as f64 - mx).powi(2)).sum();
    cov / var
}

#[test]
fn one_autotuned_cubic_flow_grows_the_queue_as_the_kernels_does() {
    let case = Case {
        name: "1 CUBIC flow, autotuned buffers",
        flows: 1,
        buffer: None,
    };
    let Some((sim, real)) = both(&case) else {
        return;
    };
    // The median falls in the ramp, so it carries the start-up's offset
    // (below): over 13 runs Linux's median was 537-609 ms, the
    // simulator's 532 ms, up to 13 % lower.
    assert_medians_agree(case.name, &sim, &real, 0.15);
    // Seconds 1 to 8, the window opening.
    let (s, r) = (
        &per_second_means(&sim)[1..9],
        &per_second_means(&real)[1..9],
    );
    let explain = || {
        format!(
            "sim   {s:.0?}\nLinux {r:.0?}\n{}",
            report(case.name, &sim, &real)
        )
    };
    // The queue grows by the same ~50 ms every second: over 13 runs the
    // kernel's slope was 49.68-50.23 ms/s, the simulator's 50.00.
    let (ss, sr) = (slope(s), slope(r));
    eprintln!(
        "{}: RTT slope over seconds 1-8: sim {ss:.2} ms/s, Linux {sr:.2}",
        case.name
    );
    assert!(
        (ss - sr).abs() <= 0.02 * sr,
        "slopes {ss:.2} (sim) and {sr:.2} ms/s (Linux) differ by more than 2 %\n{}",
        explain()
    );
    // From a level that slow start sets: 0.1 s into the flow Linux's
    // queue holds 54 or 89 ms, the simulator's 15 ms, so over 13 runs
    // Linux's ramp ran ~30 ms (7 runs) or 65-69 ms (6 runs) above the
    // simulator's, and within 4.1 ms of that offset every second.
    let diff: Vec<f64> = r.iter().zip(s).map(|(r, s)| r - s).collect();
    let offset = diff.iter().sum::<f64>() / diff.len() as f64;
    let apart = diff.iter().map(|d| (d - offset).abs()).fold(0.0, f64::max);
    eprintln!(
        "{}: Linux's ramp {offset:.1} ms above the simulator's, within {apart:.1} ms every second",
        case.name
    );
    assert!(
        offset.abs() <= 80.0,
        "Linux's ramp {offset:.0} ms above the simulator's\n{}",
        explain()
    );
    assert!(
        apart <= 10.0,
        "the ramps differ by {diff:.0?} ms, more than 10 ms off their mean {offset:.0}\n{}",
        explain()
    );
}
