//! Loss repair: fast retransmit within about one RTT for a single loss
//! (RACK with the dupack threshold folded in: RFC 8985 §6.2, Linux
//! `tcp_rack_reo_wnd`), and the RTO (RFC 6298 with Linux's 200 ms floor)
//! with exponential backoff for a retransmission that is lost as well.

mod common;

use common::{ms, secs, Flow, Sim, Trace};
use sluice_core::time::Time;
use sluice_sim::tcp::{Segment, TcpConfig};
use std::cell::RefCell;
use std::rc::Rc;

/// Offset of the first payload byte of segment `n` (0-based) of a flow.
fn seg_offset(n: u64) -> u64 {
    1 + n * 1448
}

/// Transmission times of the data segment starting at stream offset `off`.
fn sends_of(trace: &[Trace], iss: u32, off: u64) -> Vec<Time> {
    let wire = iss.wrapping_add(off as u32);
    trace
        .iter()
        .filter(|t| t.forward && t.seg.payload_len > 0 && t.seg.seq == wire)
        .map(|t| t.time)
        .collect()
}

/// Drop the first `times` transmissions of the segment whose seq is `wire`.
fn drop_nth(wire: u32, times: usize) -> (common::DropFn, Rc<RefCell<usize>>) {
    let seen = Rc::new(RefCell::new(0usize));
    let s = seen.clone();
    let f = Box::new(move |seg: &Segment, _now: Time| {
        if seg.seq != wire || seg.payload_len == 0 {
            return false;
        }
        *s.borrow_mut() += 1;
        *s.borrow() <= times
    });
    (f, seen)
}

/// The sender's ISS: its SYN is the first forward segment.
fn iss_of(sim: &mut Sim) -> u32 {
    sim.trace = Some(Vec::new());
    sim.run(Time(ms(1).as_nanos()));
    sim.trace.as_ref().unwrap()[0].seg.seq
}

/// One segment in the middle of a window is dropped once. The receiver's
/// duplicate ACKs SACK the segments after it; after three of them RACK's
/// reordering window is zero and the segment is retransmitted — about one
/// RTT after it was first sent, with no timeout, and cwnd is cut to
/// β·cwnd by PRR.
#[test]
fn single_loss_is_fast_retransmitted_within_an_rtt() {
    let cfg = TcpConfig::default();
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: 1_000_000,
    }];
    let mut sim = Sim::new(&cfg, flows, 10_000_000, ms(10), 100);
    let iss = iss_of(&mut sim);
    let lost = seg_offset(30);
    let (f, seen) = drop_nth(iss.wrapping_add(lost as u32), 1);
    sim.fwd.drop_fn = Some(f);
    sim.run(secs(10));
    let trace = sim.trace.take().unwrap();
    let sends = sends_of(&trace, iss, lost);
    let s = sim.a[0].stats();
    assert!(sim.done_at[0].is_some(), "transfer completes");
    assert_eq!(*seen.borrow(), 2);
    assert_eq!(sends.len(), 2);
    let gap = sends[1].saturating_since(sends[0]);
    let base_rtt = ms(20);
    println!(
        "retransmitted after {:?}; min RTT {:?}",
        gap,
        sim.a[0].min_rtt()
    );
    assert!(gap >= base_rtt, "cannot know before an RTT: {gap:?}");
    assert!(
        gap <= ms(50),
        "repair took {gap:?}, more than ~1 RTT + queueing"
    );
    assert_eq!(s.rtos, 0);
    assert_eq!(s.fast_retransmits, 1);
    assert_eq!(s.recoveries, 1);
    assert_eq!(sim.b[0].stats().bytes_received, 1_000_000);
}

/// The lost segment's fast retransmission, and then the first timeout
/// retransmission, are dropped too. Nothing sent later can reveal the
/// second loss (RACK needs a later send to be delivered, and TLP is not
/// used in Recovery), so the RTO repairs it: RTO = SRTT + RTTVAR with
/// RTTVAR ≥ 200 ms (Linux), i.e. ≥ 200 ms after the retransmission, and the
/// next timeout waits twice as long (exponential backoff).
#[test]
fn lost_retransmission_is_repaired_by_rto_with_backoff() {
    let cfg = TcpConfig::default();
    let total = 10 * 1448; // one initial window
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: total,
    }];
    let mut sim = Sim::new(&cfg, flows, 10_000_000, ms(10), 100);
    let iss = iss_of(&mut sim);
    let lost = seg_offset(4);
    let (f, _) = drop_nth(iss.wrapping_add(lost as u32), 3);
    sim.fwd.drop_fn = Some(f);
    sim.run(secs(10));
    let trace = sim.trace.take().unwrap();
    let sends = sends_of(&trace, iss, lost);
    let s = sim.a[0].stats();
    println!("sends {:?}, rtos {}", sends, s.rtos);
    assert!(sim.done_at[0].is_some());
    assert_eq!(sends.len(), 4);
    let fast = sends[1].saturating_since(sends[0]);
    let rto1 = sends[2].saturating_since(sends[1]);
    let rto2 = sends[3].saturating_since(sends[2]);
    assert!(fast <= ms(50), "fast retransmit after {fast:?}");
    assert!(rto1 >= ms(200), "first RTO {rto1:?}");
    assert!(
        rto1 <= ms(300),
        "first RTO {rto1:?} (SRTT ≈ 22 ms + 200 ms)"
    );
    let ratio = rto2.as_secs_f64() / rto1.as_secs_f64();
    assert!((ratio - 2.0).abs() < 0.01, "backoff ratio {ratio}");
    assert_eq!(s.rtos, 2);
    assert_eq!(sim.b[0].stats().bytes_received, total);
}

/// The last two segments of a transfer are lost: no later segment can be
/// SACKed, so instead of waiting for the RTO the sender probes after about
/// 2·SRTT by retransmitting the last segment (TLP, RFC 8985 §7); its SACK
/// lets RACK find the other loss, repaired by fast retransmit.
#[test]
fn tail_loss_is_repaired_by_a_probe() {
    let cfg = TcpConfig::default();
    let total = 10 * 1448;
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: total,
    }];
    let mut sim = Sim::new(&cfg, flows, 10_000_000, ms(10), 100);
    let iss = iss_of(&mut sim);
    let (w8, w9) = (seg_offset(8) as u32, seg_offset(9) as u32);
    let (w8, w9) = (iss.wrapping_add(w8), iss.wrapping_add(w9));
    let mut seen = Vec::new();
    sim.fwd.drop_fn = Some(Box::new(move |seg: &Segment, _| {
        let first = (seg.seq == w8 || seg.seq == w9) && !seen.contains(&seg.seq);
        if first {
            seen.push(seg.seq);
        }
        first
    }));
    sim.run(secs(10));
    let trace = sim.trace.take().unwrap();
    let probe = sends_of(&trace, iss, seg_offset(9));
    let repair = sends_of(&trace, iss, seg_offset(8));
    let s = sim.a[0].stats();
    assert_eq!(probe.len(), 2);
    assert_eq!(repair.len(), 2);
    let gap = probe[1].saturating_since(probe[0]);
    println!(
        "probe after {gap:?}, repair after {:?}",
        repair[1].saturating_since(repair[0])
    );
    assert!(gap < ms(100), "probe after {gap:?} (RTT + 2·SRTT ≈ 70 ms)");
    assert!(repair[1] > probe[1]);
    assert_eq!(s.rtos, 0);
    assert_eq!(s.tlp_probes, 1);
    assert_eq!(sim.b[0].stats().bytes_received, total);
}

/// A delay spike on the ACK path (10 ms → 1 s) makes the RTO fire although
/// nothing was lost. The ACKs that then arrive echo timestamps older than
/// the retransmission, so the original transmissions got through: the
/// timeout is undone (Eifel, RFC 3522, Linux `tcp_try_undo_loss`) and the
/// window restored instead of restarting from one segment.
#[test]
fn spurious_timeout_is_undone_by_timestamps() {
    let cfg = TcpConfig::default();
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: u64::MAX,
    }];
    let mut sim = Sim::new(&cfg, flows, 10_000_000, ms(10), 100);
    sim.run_until(secs(2));
    let cwnd_before = sim.a[0].cwnd();
    sim.rev.delay = ms(1000);
    sim.run_until(secs(4));
    let s = sim.a[0].stats();
    println!(
        "cwnd before {cwnd_before}, after {}, rtos {}, undos {}",
        sim.a[0].cwnd(),
        s.rtos,
        s.undos
    );
    assert!(s.rtos >= 1);
    assert!(s.undos >= 1);
    assert!(
        sim.a[0].cwnd() >= cwnd_before / 2,
        "cwnd {}",
        sim.a[0].cwnd()
    );
}
