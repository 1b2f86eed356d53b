//! The body of the `trace_parser` target: text as a Mahimahi trace, a
//! delay trace and a schedule (sluice-core's `trace` and `schedule`), and
//! a port driven by whatever parses.
//!
//! The text goes to `Trace::parse`, `DelayTrace::parse` (its step, 1 µs to
//! 25.5 ms, from the first byte) and `Schedule::parse`. A trace that
//! parses must print and parse back to itself. Each that parses is put on
//! a 10 Mbit/s wire with a pfifo in front (`Port::change` at time 0; a
//! trace is played once or repeated as the input's length is even or
//! odd) and up to 48 IPv4 packets of 20 to 1500 bytes, sizes and gaps
//! taken from the input's bytes, are sent and the port is run, for at most
//! [`EVENTS`] sends and wake-ups and up to a minute of virtual time after
//! the last send. What comes out must be packets that went in, each once,
//! in the order they went in (a pfifo and a wire that does not reorder),
//! none arriving before it was sent.

use sluice_core::device::{DevKind, Device, NlFlags, QdiscRequest};
use sluice_core::handle::Handle;
use sluice_core::packet::{Packet, ETH_P_IP};
use sluice_core::port::{Port, PortConfig, TxBuffer, WireChange};
use sluice_core::qdisc::fifo::FifoOpts;
use sluice_core::qdisc::{DevInfo, QdiscOpts};
use sluice_core::schedule::Schedule;
use sluice_core::time::{Duration, Time};
use sluice_core::trace::{DelayTrace, Trace};

/// The most sends and wake-ups one run makes.
pub const EVENTS: usize = 20_000;

const PACKETS: usize = 48;

fn device() -> Device {
    let mut d = Device::new(2, DevInfo::default(), DevKind::Ether);
    d.set_up(true);
    let req = QdiscRequest {
        parent: Handle::ROOT,
        handle: Handle::new(1, 0),
        kind: Some("pfifo".into()),
        opts: Some(QdiscOpts::Pfifo(FifoOpts { limit: Some(1000) })),
        ..Default::default()
    };
    d.modify_qdisc(&req, NlFlags::ADD, &mut |_| None)
        .expect("a pfifo root");
    d
}

/// An IPv4 packet of `len` bytes (its header says so), numbered `id`.
fn ip(id: u64, len: u16) -> Packet {
    let mut data = vec![0x45, 0, 0, 0];
    data[2..4].copy_from_slice(&len.to_be_bytes());
    data.resize(20, 0);
    let mut p = Packet::new(data, len as u32, ETH_P_IP);
    p.id = id;
    p
}

/// Send the input's packets through a port whose wire `change` set up, and
/// check what arrives.
fn drive(data: &[u8], change: WireChange) {
    let byte = |i: usize| data.get(i % data.len().max(1)).copied().unwrap_or(0) as u64;
    let mut dev = device();
    let mut port = Port::new(PortConfig {
        rate_bps: 10_000_000,
        delay: Duration::from_millis(1),
        buffer: TxBuffer::Packets(1 + (byte(1) % 4) as u32),
        seed: byte(2),
        ..Default::default()
    });
    port.change(&mut dev, Time(0), change);
    let mut plan = Vec::with_capacity(PACKETS);
    let mut t = Time(0);
    for i in 0..PACKETS.min(data.len().max(1) * 4) {
        let len = 20 + (byte(3 * i) * 7 + byte(3 * i + 1)) % 1481;
        t += Duration(byte(3 * i + 2) % 8 * 250_000);
        plan.push((t, len as u16));
    }
    let horizon = t + Duration::from_secs(60);
    let mut sent: Vec<Option<Time>> = vec![None; plan.len()];
    let mut out: Vec<(Time, Packet)> = Vec::new();
    let mut next = 0;
    for _ in 0..EVENTS {
        let send_at = plan.get(next).map(|p| p.0);
        match (send_at, port.next_event()) {
            (Some(s), e) if e.is_none_or(|e| s <= e) => {
                if port
                    .send(&mut dev, ip(next as u64, plan[next].1), s)
                    .is_ok()
                {
                    sent[next] = Some(s);
                }
                next += 1;
            }
            (_, Some(e)) if e <= horizon => port.advance(&mut dev, e, &mut out),
            _ => break,
        }
    }
    let mut last: Option<(u64, Time)> = None;
    for (at, p) in &out {
        let Some(Some(s)) = sent.get(p.id as usize) else {
            panic!("packet {} came out but was not taken in", p.id);
        };
        assert!(
            at >= s,
            "packet {} arrived at {at:?}, before it was sent at {s:?}",
            p.id
        );
        if let Some((id, t)) = last {
            assert!(p.id > id, "packet {} came out after {id}", p.id);
            assert!(
                *at >= t,
                "packet {} arrived at {at:?}, before {id} at {t:?}",
                p.id
            );
        }
        last = Some((p.id, *at));
    }
    assert!(out.len() <= sent.iter().flatten().count());
}

pub fn trace_parser(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(t) = Trace::parse(&text) {
        assert_eq!(Trace::parse(&t.to_mahimahi()).as_ref(), Ok(&t));
        let _ = t.mean_bps();
        let _ = t.opportunities_between(Time(0), Time(u64::MAX / 2), false);
        let once = data.len().is_multiple_of(2);
        drive(
            data,
            WireChange {
                trace: Some((t, once)),
                ..Default::default()
            },
        );
    }
    let step = Duration::from_micros(1 + data.first().copied().unwrap_or(0) as u64 * 100);
    if let Ok(mut d) = DelayTrace::parse(&text, step) {
        let _ = d.delay_at(Duration(u64::MAX));
        d.reorder = false;
        drive(
            data,
            WireChange {
                delay_trace: Some(d),
                ..Default::default()
            },
        );
    }
    if let Ok(s) = Schedule::parse(&text) {
        drive(
            data,
            WireChange {
                schedule: Some(s),
                ..Default::default()
            },
        );
    }
}
