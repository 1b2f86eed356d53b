//! The simulator and a live link agree on a time-varying link: the same
//! measured LTE trace (the first 40 s of Mahimahi's T-Mobile downlink), the
//! same 100-packet fifo in front of it, the same 10 ms each way, one CUBIC
//! bulk flow for 30 s — `sluice sim` with its model of Linux's TCP, and
//! iperf3 over the kernel's own TCP through `sluice link`. Their mean
//! goodput must be within 5 % and their per-second goodput series must
//! correlate at 0.9 or better (seconds 2 to 28: the ends hold the start-up
//! and the last queue's drain).
//!
//! The live trace starts with `sluice link set --trace-ab` just before
//! iperf3 does, so both worlds see the trace from its start. Needs root and
//! iperf3 (CI has both; without them it says loudly that it skipped); the
//! trace is read from `../shared/traces` and its absence is a failure.

mod common;

use common::{correlation, ok, shared_traces, simulate, skip_live, KillOnDrop, Link};
use std::path::Path;
use std::process::Command;

const SCENARIO: &str = r#"
name = "lte-agreement"
duration = "30s"
seed = 1

[[node]]
name = "a"
addr = "10.0.0.1"
tc = ["tc qdisc replace dev eth0 root pfifo limit 100"]

[[node]]
name = "b"
addr = "10.0.0.2"

[[link]]
a = "a:eth0"
b = "b:eth0"
trace_ab = "lte.down"
rate_ba = "1gbit"
delay = "10ms"
buffer = "1p"

[[workload]]
type = "tcp"
name = "bulk"
from = "a"
to = "b"
cc = "cubic"
"#;

/// Per-second goodput, Mbit/s, of the simulated flow.
fn simulated(dir: &Path) -> Vec<f64> {
    let j = simulate(dir, SCENARIO);
    let series = j["runs"][0]["flows"][0]["series"]
        .as_array()
        .expect("a goodput series")
        .clone();
    let pts: Vec<(f64, f64)> = series
        .iter()
        .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
        .collect();
    let bin = pts[1].0 - pts[0].0;
    let mut per_s = vec![0.0; 30];
    for (t, mbps) in pts {
        let s = (t + 1e-9) as usize;
        if s < 30 {
            per_s[s] += mbps * bin;
        }
    }
    per_s
}

/// Per-second goodput, Mbit/s, that iperf3's server measured live.
fn live(dir: &Path, trace: &Path) -> Vec<f64> {
    let link = Link::new("ta", "");
    link.up(&[
        "--delay",
        "10ms",
        "--tc",
        "qdisc add dev a0 root pfifo limit 100",
    ]);
    let b_addr = link.addr_b();
    let report = dir.join("server.json");
    let mut server = KillOnDrop(
        Command::new("ip")
            .args(["netns", "exec", &link.ns('b'), "iperf3", "-s", "-1", "-J"])
            .stdout(std::fs::File::create(&report).unwrap())
            .spawn()
            .expect("iperf3 server"),
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    link.ok(&[
        "link",
        "set",
        &link.name,
        "--trace-ab",
        trace.to_str().unwrap(),
    ]);
    let client = Command::new("ip")
        .args(["netns", "exec", &link.ns('a'), "iperf3", "-c", &b_addr])
        .args(["-C", "cubic", "-t", "30"])
        .output()
        .unwrap();
    ok(client, "iperf3 client");
    server.0.wait().unwrap();
    link.ok(&["link", "down", &link.name]);
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).expect("iperf3 JSON");
    j["intervals"]
        .as_array()
        .expect("intervals")
        .iter()
        .map(|i| i["sum"]["bits_per_second"].as_f64().unwrap() / 1e6)
        .collect()
}

#[test]
fn the_simulator_and_a_live_link_agree_on_an_lte_trace() {
    let source = shared_traces().join("TMobile-LTE-short.down");
    let text = std::fs::read_to_string(&source).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (the shared traces are test data this test needs)",
            source.display()
        )
    });
    if skip_live(&["iperf3"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let first_40s: String = text
        .lines()
        .filter(|l| l.trim().parse::<u64>().is_ok_and(|ms| ms <= 40_000))
        .map(|l| format!("{}\n", l.trim()))
        .collect();
    let trace = dir.path().join("lte.down");
    std::fs::write(&trace, first_40s).unwrap();
    let sim = simulated(dir.path());
    let real = live(dir.path(), &trace);
    assert!(real.len() >= 29, "iperf3 reported {} intervals", real.len());
    let (s, r) = (&sim[2..28], &real[2..28]);
    let (ms, mr) = (s.iter().sum::<f64>() / 26.0, r.iter().sum::<f64>() / 26.0);
    let c = correlation(s, r);
    eprintln!(
        "mean goodput: sim {ms:.2} Mbit/s, live {mr:.2} Mbit/s; per-second correlation {c:.3}"
    );
    assert!(
        (ms - mr).abs() / mr <= 0.05,
        "means {ms:.2} vs {mr:.2} Mbit/s\nsim  {s:.1?}\nlive {r:.1?}"
    );
    assert!(c >= 0.9, "correlation {c:.3}\nsim  {s:.1?}\nlive {r:.1?}");
}
