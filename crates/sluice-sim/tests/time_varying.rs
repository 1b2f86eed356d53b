//! Links whose capacity changes over time, and timed events, against
//! Mahimahi's semantics and physics: a delivery opportunity carries 1504
//! bytes (one 1500-byte IP packet with the TUN header), serves only packets
//! that arrived before it, and a link's capacity bounds what arrives
//! behind it in every interval. Expected values come from the trace files
//! and the scenario's numbers, never from earlier runs.

use sluice_core::time::Time;
use sluice_core::trace::Trace;
use sluice_sim::run::{build, run, run_all, Built};
use sluice_sim::scenario::Scenario;
use sluice_tc::tc;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn none() -> BTreeMap<String, String> {
    BTreeMap::new()
}

/// The measured traces shared beside the repository; the test fails, not
/// skips, when they are missing.
fn shared_trace(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: this test needs the measured traces in ../shared/traces \
         next to the repository (see that directory's README)",
        path.display()
    );
    path
}

/// sender --1 Gbit/s, 1 ms-- router --LINK, 10 ms-- receiver, with `extra`
/// keys on the router's link and `rest` (events, workloads) after it.
fn scenario(link: &str, qdisc: &str, rest: &str, dir: Option<&Path>) -> Scenario {
    let text = format!(
        r#"
name = "t"
duration = "20s"
seed = 1

[[node]]
name = "sender"
addr = "10.0.0.1"

[[node]]
name = "router"
addr = "10.0.0.254"
router = true
tc = ["tc qdisc replace dev eth1 root {qdisc}"]

[[node]]
name = "receiver"
addr = "10.0.1.1"

[[link]]
a = "sender:eth0"
b = "router:eth0"
rate = "1gbit"
delay = "1ms"
buffer = "1000p"

[[link]]
name = "bottleneck"
a = "router:eth1"
b = "receiver:eth0"
delay = "10ms"
{link}

{rest}
"#
    );
    let mut sc = Scenario::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    sc.dir = dir.map(Path::to_path_buf);
    sc
}

fn built(sc: &Scenario) -> Built {
    build(sc, &sc.vars_for(None, &none())).unwrap_or_else(|e| panic!("{e}"))
}

fn error(sc: &Scenario) -> String {
    match build(sc, &sc.vars_for(None, &none())) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

/// A UDP stream of 1500-byte IP packets (1472 bytes of payload).
fn udp(rate: &str, start: &str, stop: &str) -> String {
    format!(
        r#"
[[workload]]
type = "udp"
name = "u"
from = "sender"
to = "receiver"
rate = "{rate}"
size = 1472
start = "{start}"
stop = "{stop}"
"#
    )
}

/// IP bytes of UDP that reached the receiver, per 100 ms bin.
fn udp_bins(b: &Built) -> BTreeMap<u64, u64> {
    let rx = &b.world.nodes[2].host.udp_rx;
    assert_eq!(rx.len(), 1, "one UDP flow");
    rx.values().next().unwrap().bins.clone()
}

#[test]
fn a_constant_trace_of_1_carries_one_1500_byte_packet_a_millisecond() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("one.trace"), "1\n").unwrap();
    let sc = scenario(
        "trace_ab = \"one.trace\"\nrate_ba = \"100mbit\"\nbuffer_a = \"0p\"",
        "pfifo limit 100000",
        // 20 Mbit/s of 1500-byte packets: 1667 a second for 1000 opportunities.
        &udp("20mbit", "0s", "20s"),
        Some(dir.path()),
    );
    let mut b = built(&sc);
    b.world.run_until(Time(5 * S));
    // An opportunity every millisecond from 1 ms; a departure at T arrives
    // at T + 10 ms. Bin k (100 ms) receives the departures of
    // [k·100 − 10, k·100 + 90) ms: exactly 100 opportunities, each one
    // packet, while the queue never empties (from the first opportunity on).
    let bins = udp_bins(&b);
    for k in 1..49 {
        assert_eq!(bins.get(&k), Some(&(100 * 1500)), "bin {k}");
    }
    // 12.032 Mbit/s of opportunity, 12 Mbit/s of IP packets, over 4 s.
    let total: u64 = (10..50).map(|k| bins[&k]).sum();
    assert_eq!(total * 8, 12_000_000 * 4);
    // The capacity the report shows is the trace's, 1504 bytes an opportunity.
    let r = run(built(&sc), "t", false);
    let link = &r.links[0];
    assert_eq!(link.name, "bottleneck ab");
    assert!((link.capacity_mbps - 12.032).abs() < 1e-3, "{link:?}");
    assert!(r.flows[0].over_capacity_pkts.unwrap() <= 0.0);
}

#[test]
fn a_packet_waits_for_the_first_opportunity_after_its_arrival() {
    // One opportunity at 500 ms of each 1000 ms. A ping request sent at
    // 497 ms reaches the router (1 ms on) before it and leaves at 500 ms; one
    // sent at 499 ms arrives just after it (its serialization at 1 Gbit/s)
    // and waits a whole period, for 1000 ms. Back: 10 ms + 1 ms.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("sparse.trace"), "500\n1000\n").unwrap();
    let ping = |name: &str, at: &str, stop: &str| {
        format!(
            "[[workload]]\ntype = \"ping\"\nname = \"{name}\"\nfrom = \"sender\"\nto = \"receiver\"\n\
             start = \"{at}\"\nstop = \"{stop}\"\n"
        )
    };
    let sc = scenario(
        "trace_ab = \"sparse.trace\"\nrate_ba = \"100mbit\"\nbuffer_a = \"0p\"",
        "pfifo",
        &(ping("early", "497ms", "498ms") + &ping("late", "499ms", "500ms")),
        Some(dir.path()),
    );
    let r = run(built(&sc), "t", false);
    let rtt = |i: usize| {
        assert_eq!(r.pings[i].received, 1, "{:?}", r.pings[i]);
        r.pings[i].min_ms
    };
    assert!((rtt(0) - (3.0 + 10.0 + 11.0)).abs() < 0.1, "{}", rtt(0));
    assert!((rtt(1) - (501.0 + 10.0 + 11.0)).abs() < 0.1, "{}", rtt(1));
}

/// Bytes per 100 ms bin of the TCP segments that reached the receiver.
fn tcp_arrivals(b: &Built) -> BTreeMap<u64, u64> {
    let a = b.world.nodes[2]
        .host
        .tcp_arrivals
        .as_ref()
        .expect("watched");
    assert_eq!(a.len(), 1);
    a.values().next().unwrap().bins.clone()
}

#[test]
fn a_bulk_flow_on_a_measured_lte_trace_stays_under_its_capacity_every_second() {
    let path = shared_trace("TMobile-LTE-short.up");
    let trace = Trace::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut sc = scenario(
        &format!(
            "trace_ab = {:?}\nrate_ba = \"100mbit\"\nbuffer_a = \"0p\"",
            path.display().to_string()
        ),
        "pfifo limit 500",
        r#"
[[workload]]
type = "tcp"
name = "bulk"
from = "sender"
to = "receiver"
sndbuf = "16MiB"
rcvbuf = "16MiB"
"#,
        None,
    );
    sc.duration = "140s".into();
    let mut b = built(&sc);
    b.world.run_until(Time(140 * S));
    let arrived = tcp_arrivals(&b);
    let delay = 10 * MS;
    let capacity = |from: u64, to: u64| {
        trace.opportunities_between(Time(from - delay), Time(to - delay), false) * 1504
    };
    for s in 1..140 {
        let got: u64 = arrived.range(s * 10..(s + 1) * 10).map(|(_, v)| v).sum();
        let could = capacity(s * S, (s + 1) * S);
        assert!(
            got <= could + 1504,
            "second {s}: {got} bytes arrived, the trace carried {could}"
        );
    }
    // Goodput over 5-140 s against the capacity of the same window.
    let rx = b.world.nodes[2].host.tcp_rx.values().next().unwrap();
    let goodput: u64 = rx.bins.range(50..1400).map(|(_, v)| v).sum();
    let offered = capacity(5 * S, 140 * S);
    assert!(
        goodput as f64 >= 0.8 * offered as f64,
        "goodput {goodput} bytes of {offered} offered"
    );
    // The trace's mean as its README gives it (counting 1500 bytes an
    // opportunity; Mahimahi's link carries 1504, the TUN header included).
    let readme = trace.opportunities().len() as f64 * 1500.0 * 8.0 / 140.0 / 1e6;
    assert!((readme - 13.32).abs() < 0.01, "{readme}");
    assert!((trace.mean_bps() / 1e6 - readme * 1504.0 / 1500.0).abs() < 1e-9);
}

#[test]
fn a_fifo_packet_waits_the_backlog_ahead_of_it_over_the_current_capacity() {
    // Constant 12 Mbit/s of opportunities and a stream of 1500-byte packets
    // at 18 Mbit/s into an unlimited fifo: the backlog grows by 500 packets
    // a second, and each packet leaves after the opportunities it waits for,
    // one per packet ahead of it: at 10 s the queue holds ~5000 packets,
    // which take ~5 s.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("one.trace"), "1\n").unwrap();
    let sc = scenario(
        "trace_ab = \"one.trace\"\nrate_ba = \"100mbit\"\nbuffer_a = \"0p\"",
        "pfifo limit 100000",
        &udp("18mbit", "0s", "20s"),
        Some(dir.path()),
    );
    let r = run(built(&sc), "t", false);
    let series = &r.links[0].queue_delay_series;
    // Packets arrive at 1500 a second and leave at 1000: the one leaving
    // at time t arrived at t·1000/1500 and waited t/3.
    for &(t, ms) in series.iter().filter(|(t, _)| (2.0..19.0).contains(t)) {
        let expected = (t + 0.05) / 3.0 * 1000.0;
        assert!(
            (ms - expected).abs() < 2.0,
            "at {t} s: {ms} ms, backlog over capacity says {expected}"
        );
    }
}

#[test]
fn a_timed_command_changes_the_qdisc_at_exactly_its_time() {
    let sc = scenario(
        "rate = \"100mbit\"\nbuffer = \"1p\"",
        "tbf rate 8mbit burst 20k latency 50ms",
        &(udp("12mbit", "0s", "20s")
            + r#"
[[event]]
at = "10s"
node = "router"
commands = ["tc qdisc change dev eth1 root tbf rate 3mbit burst 20k latency 50ms"]
"#),
        None,
    );
    let mut b = built(&sc);
    let show = |b: &mut Built| {
        let words: Vec<String> = ["qdisc", "show", "dev", "eth1"]
            .iter()
            .map(|w| w.to_string())
            .collect();
        tc::run(&mut b.world.nodes[1].net, &tc::Opts::default(), &words).stdout
    };
    b.world.run_until(Time(10 * S - 1));
    assert!(show(&mut b).contains("rate 8Mbit"), "{}", show(&mut b));
    b.world.run_until(Time(10 * S));
    assert!(show(&mut b).contains("rate 3Mbit"), "{}", show(&mut b));
    b.world.run_until(Time(20 * S));
    // And the packets' treatment: 8 Mbit/s of 1514-byte frames before,
    // 3 Mbit/s after (TBF counts the Ethernet header), in IP bytes.
    let bins = udp_bins(&b);
    let rate = |k0: u64, k1: u64| {
        (k0..k1).map(|k| bins[&k]).sum::<u64>() as f64 * 8.0 / ((k1 - k0) as f64 / 10.0)
    };
    assert!((rate(20, 100) / (8e6 * 1500.0 / 1514.0) - 1.0).abs() < 0.01);
    assert!((rate(120, 200) / (3e6 * 1500.0 / 1514.0) - 1.0).abs() < 0.01);
}

#[test]
fn a_link_event_stops_and_restarts_the_wire_at_its_time() {
    // 6 Mbit/s of 1500-byte packets: one every 2 ms. An outage from 5 s to
    // 6 s holds them in the qdisc; carrier loss from 12 s to 13 s loses
    // what crosses.
    let sc = scenario(
        "rate = \"10mbit\"\nbuffer = \"1p\"",
        "pfifo limit 10000",
        &(udp("6mbit", "0s", "20s")
            + r#"
[[event]]
at = "5s"
link = "bottleneck"
direction = "ab"
rate = "0"

[[event]]
at = "6s"
link = "router:eth1-receiver:eth0"
direction = "ab"
rate = "10mbit"

[[event]]
at = "12s"
link = "router:eth1"
down = true

[[event]]
at = "13s"
link = "bottleneck"
up = true
"#),
        None,
    );
    let mut b = built(&sc);
    b.world.run_until(Time(20 * S));
    let bins = udp_bins(&b);
    // Before 5 s every packet arrives (1.2 ms on the wire, 10 ms of
    // propagation); in the outage nothing leaves: bins 5.1-6.0 s are empty.
    assert_eq!(bins[&40], 50 * 1500);
    for k in 51..60 {
        assert_eq!(bins.get(&k).copied().unwrap_or(0), 0, "bin {k}");
    }
    // From 6 s the 500 held packets drain at 10 Mbit/s (1.2 ms each) while
    // 6 Mbit/s keeps coming: nothing is lost by the outage.
    assert_eq!(b.world.losses.egress, 0);
    // Carrier loss: the packets that cross the wire from 12 s to 13 s are
    // lost (one every 2 ms: 500, give or take the one on the wire).
    let lost = b.world.losses.wire;
    assert!((499..=501).contains(&lost), "{lost}");
    // Nothing arrives from 12.1 s to 13 s.
    for k in 121..130 {
        assert_eq!(bins.get(&k).copied().unwrap_or(0), 0, "bin {k}");
    }
}

#[test]
fn the_same_seed_gives_byte_identical_json() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/lte-drive.toml"),
    )
    .unwrap();
    let sc = Scenario::parse(&text).unwrap();
    let json = |seed: &str| {
        let set: BTreeMap<String, String> = [("trace_seed".to_string(), seed.to_string())].into();
        let runs = run_all(&sc, &set, Some("fq_codel"), false, None).unwrap();
        serde_json::to_string(&runs).unwrap()
    };
    let a = json("7");
    assert_eq!(a, json("7"));
    assert!(a.contains("capacity_series") && a.contains("queue_delay_series"));
    // Another seed of the model: another trace, another result.
    assert_ne!(a, json("8"));
}

#[test]
fn bad_traces_schedules_and_events_are_refused_naming_file_line_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = Some(dir.path());
    std::fs::write(dir.path().join("bad.trace"), "1\n2\nabc\n").unwrap();
    std::fs::write(dir.path().join("bad.csv"), "0s,10mbit,,\n0s,5mbit,,\n").unwrap();
    let wl = udp("1mbit", "0s", "1s");
    let e = error(&scenario(
        "trace_ab = \"bad.trace\"\nrate_ba = \"1mbit\"",
        "pfifo",
        &wl,
        d,
    ));
    assert!(
        e.contains("trace_ab")
            && e.contains("bad.trace")
            && e.contains("line 3")
            && e.contains("\"abc\" is not a whole number"),
        "{e}"
    );
    let e = error(&scenario(
        "trace_ab = \"missing.trace\"\nrate_ba = \"1mbit\"",
        "pfifo",
        &wl,
        d,
    ));
    assert!(e.contains("missing.trace"), "{e}");
    let e = error(&scenario(
        "schedule_ab = \"bad.csv\"\nrate = \"1mbit\"",
        "pfifo",
        &wl,
        d,
    ));
    assert!(
        e.contains("schedule_ab")
            && e.contains("bad.csv")
            && e.contains("line 2: rows must be in order"),
        "{e}"
    );
    let e = error(&scenario(
        "schedule_ab = \"0s,10mbit,,\\n1s,fast,,\\n\"\nrate = \"1mbit\"",
        "pfifo",
        &wl,
        d,
    ));
    assert!(e.contains("schedule_ab: line 2: rate \"fast\""), "{e}");
    let e = error(&scenario(
        "trace_ab = \"bad.trace\"\nrate = \"1mbit\"",
        "pfifo",
        &wl,
        d,
    ));
    assert!(e.contains("bad.trace"), "the file is read first: {e}");
    std::fs::write(dir.path().join("good.trace"), "1\n").unwrap();
    let e = error(&scenario(
        "trace_ab = \"good.trace\"\nrate = \"1mbit\"",
        "pfifo",
        &wl,
        d,
    ));
    assert!(e.contains("trace_ab and rate"), "{e}");
    let e = error(&scenario(
        "trace_ab = { model = \"walk\", mean = \"1mbit\", duration = \"10s\", wobble = 1 }\nrate_ba = \"1mbit\"",
        "pfifo",
        &wl,
        d,
    ));
    assert!(e.contains("trace_ab: wobble: not a key of a model"), "{e}");
    let ev = |body: &str| {
        error(&scenario(
            "rate = \"10mbit\"",
            "pfifo",
            &format!("{wl}\n[[event]]\n{body}\n"),
            d,
        ))
    };
    let e = ev("at = \"10s\"\nlink = \"nowhere\"\nrate = \"1mbit\"");
    assert!(e.contains("event at 10s: link: no link \"nowhere\""), "{e}");
    let e = ev("at = \"10s\"\nnode = \"nobody\"\ncommands = [\"tc qdisc show\"]");
    assert!(
        e.contains("event at 10s: node: unknown node \"nobody\""),
        "{e}"
    );
    let e = ev("at = \"30s\"\nlink = \"bottleneck\"\nrate = \"1mbit\"");
    assert!(e.contains("event at 30s: at: not before the end"), "{e}");
    let e = ev("at = \"2s\"\nlink = \"bottleneck\"\nrate = \"fast\"");
    assert!(e.contains("event at 2s: rate: \"fast\""), "{e}");
    let e = ev("at = \"2s\"\nlink = \"bottleneck\"\ndirection = \"up\"\nrate = \"1mbit\"");
    assert!(
        e.contains("event at 2s: direction: \"up\" is not ab, ba or both"),
        "{e}"
    );
    // A command that fails is refused when the scenario is built, with the
    // event's time and tc's message.
    let e = ev(
        "at = \"3s\"\nnode = \"router\"\ncommands = [\"tc qdisc change dev eth9 root fq_codel\"]",
    );
    assert!(
        e.starts_with("event at 3s: node router: `tc qdisc change dev eth9 root fq_codel` failed:"),
        "{e}"
    );
    let e = ev(
        "at = \"3s\"\nnode = \"router\"\ncommands = [\"tc qdisc chnage dev eth1 root fq_codel\"]",
    );
    assert!(
        e.starts_with("event at 3s: node router: `tc qdisc chnage"),
        "{e}"
    );
}

#[test]
fn a_generated_trace_is_the_mean_it_was_asked_for() {
    let sc = scenario(
        "trace_ab = { model = \"walk\", seed = 3, mean = \"20mbit\", duration = \"20s\", fades = 6 }\nrate_ba = \"100mbit\"\nbuffer_a = \"0p\"",
        "pfifo",
        &udp("1mbit", "0s", "1s"),
        None,
    );
    let r = run(built(&sc), "t", false);
    // Over the whole trace (the run is its one pass): 20 Mbit/s, give or
    // take the rounding to whole opportunities.
    assert!(
        (r.links[0].capacity_mbps - 20.0).abs() < 0.01,
        "{:?}",
        r.links[0].capacity_mbps
    );
}

#[test]
fn a_delay_trace_gives_each_packet_the_delay_of_the_moment_it_leaves() {
    // 20 ms for the first second, 80 ms for the second, repeating; pings
    // sent at 0.5 s and 1.5 s (each leaves the router about 1 ms later)
    // see 1 + 20 + 10 + 1 and 1 + 80 + 10 + 1 ms (10 ms back on the fixed
    // `delay`; the trace is on a → b only).
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("d.txt"), "20\n80\n").unwrap();
    let sc = scenario(
        "rate = \"100mbit\"\ndelay_trace_ab = \"d.txt\"\ndelay_trace_step = \"1s\"",
        "pfifo",
        r#"
[[workload]]
type = "ping"
name = "p"
from = "sender"
to = "receiver"
interval = "1s"
start = "500ms"
stop = "2s"
"#,
        Some(dir.path()),
    );
    let r = run(built(&sc), "t", false);
    let p = &r.pings[0];
    assert_eq!(p.received, 2, "{p:?}");
    assert!((p.min_ms - 32.0).abs() < 0.2, "{p:?}");
    assert!((p.max_ms - 92.0).abs() < 0.2, "{p:?}");
    // Its queueing delay is not measured (the wire's delay is the trace's).
    assert_eq!(r.links[0].queue_delay_ms, None);
    // A bad line is refused with the file's name and the line.
    std::fs::write(dir.path().join("bad.txt"), "20\nsoon\n").unwrap();
    let e = error(&scenario(
        "rate = \"100mbit\"\ndelay_trace_ba = \"bad.txt\"",
        "pfifo",
        "",
        Some(dir.path()),
    ));
    assert!(
        e.contains("delay_trace_ba: bad.txt: line 2: \"soon\" is not a whole number"),
        "{e}"
    );
    let e = error(&scenario(
        "rate = \"100mbit\"\ntrace_once = true",
        "pfifo",
        "",
        Some(dir.path()),
    ));
    assert!(
        e.contains("trace_once: the link has no trace_ab or trace_ba"),
        "{e}"
    );
}

#[test]
fn a_link_event_can_start_a_trace_mid_run() {
    // 100 Mbit/s until 2 s, then the trace "1" from 2 s: its opportunities
    // fall at 2.001 s, 2.002 s, ... and each carries one 1500-byte packet
    // of the 20 Mbit/s stream; bin k from 2.1 s receives the departures of
    // [k·100 − 10, k·100 + 90) ms, 100 of them.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("one.trace"), "1\n").unwrap();
    let sc = scenario(
        "rate = \"100mbit\"\nbuffer = \"1p\"",
        "pfifo limit 100000",
        &(udp("20mbit", "0s", "20s")
            + r#"
[[event]]
at = "2s"
link = "bottleneck"
direction = "ab"
trace = "one.trace"
"#),
        Some(dir.path()),
    );
    let mut b = built(&sc);
    b.world.run_until(Time(5 * S));
    let bins = udp_bins(&b);
    // Before: all of the 20 Mbit/s (1666 or 1667 packets a second).
    assert!((166..=167).contains(&(bins[&15] / 1500)), "{}", bins[&15]);
    for k in 21..49 {
        assert_eq!(bins[&k], 100 * 1500, "bin {k}");
    }
    // The report's capacity: 100 Mbit/s for 2 s, then 12.032 Mbit/s.
    let r = run(built(&sc), "t", false);
    let l = &r.links[0];
    let expected = (100.0 * 2.0 + 12.032 * 18.0 - 0.012032) / 20.0;
    assert!(
        (l.capacity_mbps - expected).abs() < 1e-3,
        "{} {expected}",
        l.capacity_mbps
    );
}
