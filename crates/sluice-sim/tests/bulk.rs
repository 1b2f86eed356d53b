//! Bulk transfers through a drop-tail bottleneck, checked against physics
//! and against what Linux and ns-3 measure (docs/simulator.md,
//! docs/validation.md).

mod common;

use common::{jain, mbps, ms, secs, Flow, Sim};
use sluice_core::time::{Duration, Time};
use sluice_sim::tcp::TcpConfig;

const RATE: u64 = 10_000_000;
/// Payload share of line rate for full segments: 1448 of 1500 IP bytes.
const PAYLOAD_SHARE: f64 = 1448.0 / 1500.0;

/// 10 MB over 10 Mbit/s, 10 ms each way, 100-packet buffer (≈ 6 BDP):
/// the transfer should run at line rate less header overhead
/// (10 × 1448/1500 ≈ 9.65 Mbit/s) apart from the handshake and slow start.
#[test]
fn ten_megabytes_at_line_rate() {
    let cfg = TcpConfig::default();
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: 10_000_000,
    }];
    let mut sim = Sim::new(&cfg, flows, RATE, ms(10), 100);
    sim.run(secs(60));
    let done = sim.done_at[0].expect("transfer completes");
    let goodput = mbps(10_000_000, done.saturating_since(Time::ZERO));
    let s = sim.a[0].stats();
    println!(
        "goodput {goodput:.2} Mbit/s in {:.2} s, drops {}, rtos {}, retrans {}",
        done.saturating_since(Time::ZERO).as_secs_f64(),
        sim.fwd.drops,
        s.rtos,
        s.retransmits
    );
    assert!(goodput >= 9.0, "goodput {goodput}");
    assert!(goodput <= 10.0 * PAYLOAD_SHARE + 0.01);
    assert_eq!(s.rtos, 0);
    assert_eq!(sim.b[0].stats().bytes_received, 10_000_000);
}

/// The probe of docs/simulator.md: one flow, 4 MiB buffers, 1000-packet FIFO, 22 ms
/// base RTT, 30 s. Linux/ns-3 CUBIC+SACK fill the queue (1000 packets ×
/// 1.2 ms = 1.2 s of delay) and still reach ≈ 9.6 Mbit/s; losses when the
/// queue overflows are repaired by SACK recovery, not by timeouts.
#[test]
fn one_flow_fills_a_bloated_buffer_without_losing_rate() {
    let cfg = TcpConfig {
        send_buffer: Some(4 << 20),
        recv_buffer: Some(4 << 20),
        ..TcpConfig::default()
    };
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: u64::MAX,
    }];
    let mut sim = Sim::new(&cfg, flows, RATE, ms(11), 1000);
    sim.run(secs(30));
    let goodput = mbps(sim.received(0), Duration::from_secs(30));
    let s = sim.a[0].stats().clone();
    println!(
        "goodput {goodput:.2} Mbit/s, max RTT {:.3} s, drops {}, rtos {}, retrans {}, \
         recoveries {}, tlp {}, undos {}, cwnd {} ssthresh {}",
        s.max_rtt.as_secs_f64(),
        sim.fwd.drops,
        s.rtos,
        s.retransmits,
        s.recoveries,
        s.tlp_probes,
        s.undos,
        sim.a[0].cwnd(),
        sim.a[0].ssthresh()
    );
    assert!(goodput >= 9.3, "goodput {goodput}");
    assert!(s.max_rtt >= ms(700), "max RTT {:?}", s.max_rtt);
    assert!(
        s.max_rtt <= ms(1300),
        "RTT beyond a full queue: {:?}",
        s.max_rtt
    );
    assert!(s.rtos <= 2, "RTO cascade: {} timeouts", s.rtos);
}

/// Four window-limited flows (`SO_SNDBUF` = `SO_RCVBUF` = 128 KiB, as
/// `iperf3 -w 128K` sets them) share the bottleneck. The kernel doubles
/// the receive buffer to 256 KiB of memory, worth W = 256 KiB × 160/256 =
/// 160 KiB of window once the first full segment has measured the
/// payload-to-memory ratio (buffers.rs), so 4·W payload bytes — 4·W ×
/// 1500/1448 bytes on the wire — are outstanding. The pipe holds one
/// bandwidth-delay product (rate × 22 ms = 27.5 kB); everything else waits
/// in the queue, which never overflows (≈ 430 of 1000 packets), so the
/// queueing delay is (4·W·1500/1448 − BDP) / rate ≈ 0.52 s. Linux 6.18
/// through `sluice link` (iperf3 -w 128K, 4 flows) measures a ping RTT of
/// ~520 ms: 0.50 s of queue plus 22 ms. No loss, full utilization, equal
/// shares.
#[test]
fn four_window_limited_flows_share_fairly_and_fill_the_queue() {
    let cfg = TcpConfig {
        send_buffer: Some(128 << 10),
        recv_buffer: Some(128 << 10),
        ..TcpConfig::default()
    };
    let flows = (0..4)
        .map(|i| Flow {
            start: Time(ms(10 * i).as_nanos()),
            bytes: u64::MAX,
        })
        .collect();
    let mut sim = Sim::new(&cfg, flows, RATE, ms(11), 1000);
    sim.fwd.measure_from = secs(5);
    sim.run(secs(30));
    let shares: Vec<f64> = (0..4)
        .map(|i| mbps(sim.received(i), Duration::from_secs(30)))
        .collect();
    let total: f64 = shares.iter().sum();
    let q = &sim.fwd.sojourns;
    let mean_q = q.iter().map(|d| d.as_secs_f64()).sum::<f64>() / q.len() as f64;
    let w = 4.0 * (160 << 10) as f64 / PAYLOAD_SHARE;
    let bdp = RATE as f64 / 8.0 * 0.022;
    let expect = (w - bdp) / (RATE as f64 / 8.0);
    println!(
        "shares {shares:.2?} total {total:.2} jain {:.3} queue delay {mean_q:.3} s (expect {expect:.3}) drops {}",
        jain(&shares),
        sim.fwd.drops
    );
    assert!(total >= 9.3, "total {total}");
    assert!(jain(&shares) >= 0.9);
    assert!(
        (mean_q - expect).abs() <= 0.1 * expect,
        "queue delay {mean_q} vs {expect}"
    );
    assert_eq!(sim.fwd.drops, 0);
}
