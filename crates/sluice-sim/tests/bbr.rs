//! BBR (v1, `tcp_bbr.c`) in the simulator against the real kernel's BBR.
//!
//! The reference runs were made on a 10 Mbit/s, 11 ms one-way `sluice
//! link` (a 1-packet transmit buffer under pfifo_fast's 1000 packets; Linux
//! 6.18's BBR, iperf3 3.12 for 30 s, a ping every 100 ms; medians from 1 s
//! on): four flows with `-w 128K` gave a median RTT of 105 ms and 9.61
//! Mbit/s; one flow with the kernel's own buffers 30.5 ms and 9.51 Mbit/s.
//! The same path with CUBIC sits at ~520 ms (4 × 128 KiB in the queue):
//! BBR's window of about twice the bandwidth-delay product, not the
//! buffers, sets the queue. The simulated topology is the dumbbell's
//! (1 Gbit/s, 1 ms; 10 Mbit/s, 10 ms): the same 22 ms base RTT.

use sluice_sim::report::RunResult;
use sluice_sim::run::run_all;
use sluice_sim::scenario::Scenario;
use std::collections::BTreeMap;

fn scenario(flows: u32, buf: &str) -> Scenario {
    let text = format!(
        r#"
name = "bbr"
duration = "30s"
seed = 1

[[node]]
name = "sender"
addr = "10.0.0.1"

[[node]]
name = "router"
addr = "10.0.0.254"
router = true

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
a = "router:eth1"
b = "receiver:eth0"
rate = "10mbit"
delay = "10ms"
buffer = "1p"

[[workload]]
type = "tcp"
name = "bulk"
from = "sender"
to = "receiver"
count = {flows}
sndbuf = "{buf}"
rcvbuf = "{buf}"
cc = "bbr"

[[workload]]
type = "ping"
name = "rtt"
from = "sender"
to = "receiver"
interval = "100ms"
start = "1s"
"#
    );
    Scenario::parse(&text).expect("scenario")
}

fn run(flows: u32, buf: &str) -> RunResult {
    let runs = run_all(&scenario(flows, buf), &BTreeMap::new(), None, false, None).expect("run");
    runs.into_iter().next().expect("one run")
}

fn goodput(r: &RunResult) -> f64 {
    r.flows.iter().map(|f| f.goodput_mbps).sum()
}

#[test]
fn four_bbr_flows_keep_the_queue_near_the_kernels_not_at_their_buffers() {
    let r = run(4, "128KiB");
    let p = &r.pings[0];
    // Kernel: 105 ms; CUBIC's buffers would give ~440 ms.
    assert!(
        (85.0..=125.0).contains(&p.median_ms),
        "median {} ms",
        p.median_ms
    );
    let g = goodput(&r);
    assert!((9.2..=9.6).contains(&g), "goodput {g} Mbit/s (kernel 9.61)");
}

#[test]
fn one_bbr_flow_queues_about_one_bdp_and_probes_the_rtt_every_ten_seconds() {
    let r = run(1, "4MiB");
    let p = &r.pings[0];
    // Kernel: 30.5 ms; at most the 22 ms path plus one BDP (22 ms) of queue.
    assert!(
        (24.0..=44.0).contains(&p.median_ms),
        "median {} ms",
        p.median_ms
    );
    assert!(goodput(&r) >= 9.2, "goodput {}", goodput(&r));
    // PROBE_RTT: ten seconds after the min-RTT was measured, four packets
    // in flight for 200 ms let a ping see the path nearly empty.
    let near_10s = p
        .series
        .iter()
        .filter(|(t, _)| (10.0..11.5).contains(t))
        .map(|(_, rtt)| *rtt)
        .fold(f64::INFINITY, f64::min);
    assert!(near_10s < 26.0, "lowest RTT around 10 s: {near_10s} ms");
}
