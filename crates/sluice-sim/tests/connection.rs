//! Connection life cycle and the less common paths: SYN loss, orderly
//! close, ECN instead of loss, a slow reader closing the window.

mod common;

use common::{mbps, ms, secs, Flow, Sim};
use sluice_core::time::{Duration, Time};
use sluice_sim::tcp::{EcnMode, Flags, Segment, TcpConfig, TcpState};

/// A lost SYN is retransmitted after the initial RTO of 1 s (RFC 6298
/// 2.1); the connection then works normally.
#[test]
fn lost_syn_is_retransmitted_after_one_second() {
    let cfg = TcpConfig::default();
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: 100_000,
    }];
    let mut sim = Sim::new(&cfg, flows, 10_000_000, ms(10), 100);
    let mut dropped = false;
    sim.fwd.drop_fn = Some(Box::new(move |seg: &Segment, _| {
        let syn = seg.flags.contains(Flags::SYN);
        let first = syn && !dropped;
        dropped |= syn;
        first
    }));
    sim.trace = Some(Vec::new());
    sim.run(secs(10));
    let syns: Vec<Time> = sim
        .trace
        .as_ref()
        .unwrap()
        .iter()
        .filter(|t| t.forward && t.seg.flags.contains(Flags::SYN))
        .map(|t| t.time)
        .collect();
    assert_eq!(syns, vec![Time::ZERO, secs(1)]);
    assert!(sim.done_at[0].is_some());
    assert_eq!(sim.a[0].stats().syn_retransmits, 1);
}

/// Both sides close: FIN, ACK, FIN, ACK; the active closer lingers in
/// TIME-WAIT for 60 s, the passive one ends in CLOSED.
#[test]
fn orderly_close() {
    let cfg = TcpConfig::default();
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: 50_000,
    }];
    let mut sim = Sim::new(&cfg, flows, 10_000_000, ms(10), 100);
    sim.run(secs(5));
    sim.a[0].close();
    sim.run_until(sim.now + ms(200));
    assert_eq!(sim.a[0].state(), TcpState::FinWait2);
    assert_eq!(sim.b[0].state(), TcpState::CloseWait);
    assert!(sim.b[0].peer_closed());
    sim.b[0].close();
    sim.run_until(sim.now + ms(200));
    assert_eq!(sim.a[0].state(), TcpState::TimeWait);
    assert_eq!(sim.b[0].state(), TcpState::Closed);
    sim.run_until(sim.now + Duration::from_secs(61));
    assert_eq!(sim.a[0].state(), TcpState::Closed);
    assert_eq!(sim.b[0].stats().bytes_received, 50_000);
}

/// With ECN negotiated and a queue that marks instead of dropping once 50
/// packets wait, the flow reduces its window on ECE (once per window),
/// loses nothing, and keeps the link busy (β = 0.7 leaves the 50-packet
/// standing queue larger than the pipe is short).
#[test]
fn ecn_marks_replace_losses() {
    let cfg = TcpConfig {
        ecn: EcnMode::On,
        ..TcpConfig::default()
    };
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: u64::MAX,
    }];
    let mut sim = Sim::new(&cfg, flows, 10_000_000, ms(11), 1000);
    sim.fwd.ce_threshold = Some(50);
    sim.run(secs(20));
    let a = sim.a[0].stats();
    let goodput = mbps(sim.received(0), Duration::from_secs(20));
    println!(
        "goodput {goodput:.2}, marks {}, reductions {}, max backlog {}",
        sim.fwd.ce_marked, a.ecn_reductions, sim.fwd.max_backlog
    );
    assert!(sim.a[0].ecn_enabled() && sim.b[0].ecn_enabled());
    assert!(sim.fwd.ce_marked > 0);
    assert!(a.ecn_reductions > 0);
    assert_eq!(sim.fwd.drops, 0);
    assert_eq!(a.retransmits, 0);
    assert!(
        sim.fwd.max_backlog < 200,
        "marks bound the queue: {}",
        sim.fwd.max_backlog
    );
    assert!(goodput > 9.0, "goodput {goodput}");
}

/// ECN is only used when the SYN asks for it (Linux's default `tcp_ecn = 2`
/// accepts but never asks).
#[test]
fn ecn_is_not_negotiated_by_default() {
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: 10_000,
    }];
    let mut sim = Sim::new(&TcpConfig::default(), flows, 10_000_000, ms(10), 100);
    sim.run(secs(2));
    assert!(!sim.a[0].ecn_enabled());
    assert!(!sim.b[0].ecn_enabled());
}

/// A reader that takes 8 KiB every 100 ms from a 64 KiB buffer: the window
/// closes, the sender probes it, and the transfer runs at the reader's pace.
#[test]
fn slow_reader_closes_the_window_and_the_sender_waits() {
    let cfg = TcpConfig {
        recv_buffer: Some(64 << 10),
        ..TcpConfig::default()
    };
    let total = 400_000u64;
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: total,
    }];
    let mut sim = Sim::new(&cfg, flows, 10_000_000, ms(10), 100);
    sim.b[0].set_auto_read(false);
    let mut t = Time::ZERO;
    while sim.b[0].stats().bytes_read < total && t < secs(30) {
        t += ms(100);
        sim.run_until(t);
        sim.b[0].read(8 << 10, t);
    }
    let took = t.as_nanos() as f64 / 1e9;
    println!(
        "read {} bytes in {took:.1} s, zero-window probes {}",
        sim.b[0].stats().bytes_read,
        sim.a[0].stats().zero_window_probes
    );
    assert_eq!(sim.b[0].stats().bytes_read, total);
    // 400 kB at 8 KiB per 100 ms needs ≈ 4.9 s, less what the buffer holds.
    assert!((4.0..6.0).contains(&took), "took {took} s");
    assert_eq!(sim.a[0].stats().rtos, 0);
}

/// The reader stops for 3 s: the window closes to zero, the sender sends
/// zero-window probes with exponential backoff, and resumes when the
/// reader does (the window update is an ACK sent when a read frees space).
#[test]
fn zero_window_is_probed_until_the_reader_resumes() {
    let cfg = TcpConfig {
        recv_buffer: Some(64 << 10),
        ..TcpConfig::default()
    };
    let total = 300_000u64;
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: total,
    }];
    let mut sim = Sim::new(&cfg, flows, 10_000_000, ms(10), 100);
    sim.b[0].set_auto_read(false);
    sim.trace = Some(Vec::new());
    sim.run_until(secs(3));
    assert_eq!(sim.a[0].send_window(), 0);
    let probes = sim.a[0].stats().zero_window_probes;
    println!("zero-window probes during the pause: {probes}");
    assert!((2..=5).contains(&probes), "probes {probes}");
    sim.b[0].set_auto_read(true);
    sim.b[0].read(u64::MAX, secs(3));
    sim.run(secs(10));
    assert_eq!(sim.b[0].stats().bytes_read, total);
    assert_eq!(sim.a[0].stats().rtos, 0);
}
