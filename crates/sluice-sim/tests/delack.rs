//! Delayed ACKs as Linux sends them: quick ACKs for every segment at the
//! start of a connection (up to 16), then one ACK per two full segments
//! (RFC 5681 §4.2, `__tcp_ack_snd_check`), and a lone segment acknowledged
//! when the 40 ms delayed-ACK timer fires (`TCP_ATO_MIN`). A pure ACK with
//! timestamps is 52 bytes of IPv4.

mod common;

use common::{ms, secs, Flow, Sim};
use sluice_core::time::{Duration, Time};
use sluice_sim::tcp::{Ipv4Meta, TcpConfig};
use std::net::Ipv4Addr;

fn acks(sim: &Sim) -> Vec<(Time, u32, usize)> {
    sim.trace
        .as_ref()
        .unwrap()
        .iter()
        .filter(|t| !t.forward && t.seg.is_pure_ack())
        .map(|t| (t.time, t.seg.ack, t.seg.ip_len()))
        .collect()
}

#[test]
fn ack_every_second_segment_after_quickacks_and_lone_segment_after_40ms() {
    let cfg = TcpConfig::default();
    let bulk = 200 * 1448;
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: bulk,
    }];
    let mut sim = Sim::new(&cfg, flows, 10_000_000, ms(10), 1000);
    sim.trace = Some(Vec::new());
    sim.run(secs(5));
    assert!(sim.done_at[0].is_some());
    let all = acks(&sim);
    // The handshake-completing ACK comes from the client; every ACK here is
    // the receiver's. Skip the quick-ACK phase.
    let steps: Vec<u32> = all
        .windows(2)
        .map(|w| w[1].1.wrapping_sub(w[0].1))
        .collect();
    let quick = steps.iter().take(16).filter(|&&d| d == 1448).count();
    assert!(quick >= 15, "quick ACKs at start: {:?}", &steps[..16]);
    let later = &steps[20..steps.len() - 1];
    let pairs = later.iter().filter(|&&d| d == 2 * 1448).count();
    println!(
        "{} ACKs after quick-ACK phase, {} cover two segments",
        later.len(),
        pairs
    );
    // A segment that lets the receiver open its window further (while
    // `rcv_ssthresh` climbs towards the clamp that autotuning raises each
    // round) is acknowledged at once (`tcp_grow_window` sets one quick
    // ACK); once the window has opened, every ACK covers two segments.
    assert!(
        later.iter().all(|&d| d == 1448 || d == 2 * 1448),
        "no ACK covers more than two segments: {later:?}"
    );
    let tail = &later[later.len() - 40..];
    assert!(tail.iter().all(|&d| d == 2 * 1448), "steps {later:?}");
    assert!(
        all.iter().all(|&(_, _, len)| len == 52),
        "pure ACKs are 52 bytes"
    );

    // A lone segment to a receiver whose application is busy: no read, no
    // push-triggered ACK, so only the delayed-ACK timer acknowledges it.
    // It is written 100 ms after the bulk (less than an RTO: no quick-ACK).
    sim.b[0].set_auto_read(false);
    let start = sim.now + ms(100);
    sim.run_until(start);
    let before = acks(&sim).len();
    sim.flows[0].bytes += 1448;
    sim.run_until(start + ms(500));
    let trace = sim.trace.as_ref().unwrap();
    let sent = trace
        .iter()
        .rev()
        .find(|t| t.forward && t.seg.payload_len > 0)
        .unwrap()
        .time;
    let arrival = sent + Duration(1500 * 8 * 100) + ms(10);
    let new_acks = &acks(&sim)[before..];
    assert_eq!(new_acks.len(), 1, "one ACK for the lone segment");
    let delay = new_acks[0].0.saturating_since(arrival);
    println!("lone segment ACKed {delay:?} after arrival");
    assert_eq!(delay, ms(40));
}

#[test]
fn pure_ack_bytes_match_the_lartc_ack_filter() {
    let cfg = TcpConfig::default();
    let flows = vec![Flow {
        start: Time::ZERO,
        bytes: 20 * 1448,
    }];
    let mut sim = Sim::new(&cfg, flows, 10_000_000, ms(10), 1000);
    sim.trace = Some(Vec::new());
    sim.run(secs(2));
    let meta = Ipv4Meta::new(Ipv4Addr::new(10, 0, 0, 2), Ipv4Addr::new(10, 0, 0, 1));
    let t = sim.trace.as_ref().unwrap();
    let ack = t
        .iter()
        .find(|t| !t.forward && t.seg.is_pure_ack())
        .unwrap();
    let bytes = ack.seg.emit_ipv4(&meta).unwrap();
    assert_eq!(bytes.len(), 52);
    assert_eq!(u16::from_be_bytes([bytes[2], bytes[3]]), 52);
}
