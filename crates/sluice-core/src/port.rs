//! An output port: a device's qdisc tree drained into a transmit buffer,
//! serialized onto a wire of a given rate, and delivered after a propagation
//! delay.
//!
//! This is the part of a real NIC (or a modem) that tc does not control and
//! where bufferbloat lives: Linux's `qdisc_run` dequeues from the root qdisc
//! only while the driver's transmit ring has room, so a big ring holds the
//! queue and a small one moves it into the qdisc where tc can manage it
//! (seed 004: `ethtool -G eth0 tx 32`). The port models exactly that: a ring
//! of N packets (or bytes), one packet on the wire at a time at `rate`, and
//! arrival at the far end `delay` after the last bit left. A device whose
//! root is `noqueue` hands packets straight to the ring and loses them when
//! it is full, as virtual devices do.
//!
//! A GSO packet ([`crate::gso`]) is on the wire for the time of its
//! segments together (each paying `overhead`), cut into pieces of at most
//! [`WIRE_CHUNK`] of wire time, and counts as its segments in a ring sized
//! in packets, so offloads change neither the wire's rate nor how much a
//! modem buffer holds (give or take one GSO packet: like a NIC's ring, the
//! ring takes a packet in whole whenever it has room).
//!
//! Sans-IO: the caller asks [`Port::next_event`] when something happens next
//! and calls [`Port::advance`] at that time; deliveries come back as
//! `(arrival time, packet)`. Random loss on the wire, if configured, comes
//! from a generator the port owns, seeded by the caller.

use crate::device::Device;
use crate::packet::Packet;
use crate::qdisc::{Cx, Dequeue};
use crate::stats::DropReason;
use crate::time::{Duration, Time};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::VecDeque;

/// The longest a GSO packet is on a wire in one piece. A real wire
/// carries a TSO packet's segments one after the other, and the receiver
/// takes in what arrived by each interrupt (GRO merges it); delivering a
/// 64 KiB packet only once all of it has crossed a slow wire would hold its
/// first segment back for the time of the others (50 ms at 10 Mbit/s) and
/// make TCP's ACKs come in clumps. So a GSO packet longer on the wire than
/// this goes as pieces of whole segments, each delivered when its last bit
/// arrives: one segment at a time at 100 Mbit/s and below, eight at 1
/// Gbit/s, whole from 10 Gbit/s on.
pub const WIRE_CHUNK: Duration = Duration(100_000);

/// How big the transmit buffer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxBuffer {
    /// At most this many packets.
    Packets(u32),
    /// At most this many bytes.
    Bytes(u64),
}

/// A port's wire.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PortConfig {
    /// Wire rate in bits per second (0: infinitely fast).
    pub rate_bps: u64,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Transmit ring / modem buffer.
    pub buffer: TxBuffer,
    /// Bytes added to every packet on the wire (preamble, FCS, gap; or PPP/ATM framing).
    pub overhead: u32,
    /// Probability of losing a packet on the wire.
    pub loss: f64,
    /// Seed for the loss generator.
    pub seed: u64,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rate_bps: 1_000_000_000,
            delay: Duration::ZERO,
            buffer: TxBuffer::Packets(1),
            overhead: 0,
            loss: 0.0,
            seed: 0,
        }
    }
}

/// Counters of the part of the path after the qdisc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets put on the wire.
    pub tx_packets: u64,
    /// Bytes put on the wire (accounted length, without `overhead`).
    pub tx_bytes: u64,
    /// Packets lost because the ring was full (noqueue roots only).
    pub ring_drops: u64,
    /// Packets the qdisc tree had accepted and then dropped (an AQM's
    /// dequeue drops, fq_codel's overflow drops from the fattest flow);
    /// packets it refused come back from [`Port::send`] as errors instead.
    pub qdisc_shed: u64,
    /// Packets lost on the wire.
    pub wire_losses: u64,
}

/// One direction of a link, from a device's qdiscs to the far end.
#[derive(Debug)]
pub struct Port {
    cfg: PortConfig,
    ring: VecDeque<Packet>,
    ring_bytes: u64,
    /// Wire packets in the ring: a GSO packet counts its segments.
    ring_segs: u64,
    on_wire: Option<(Packet, Time)>,
    qdisc_wake: Option<Time>,
    rng: Xoshiro256PlusPlus,
    /// Counters.
    pub stats: PortStats,
}

impl Port {
    /// An idle port.
    pub fn new(cfg: PortConfig) -> Self {
        Port {
            cfg,
            ring: VecDeque::new(),
            ring_bytes: 0,
            ring_segs: 0,
            on_wire: None,
            qdisc_wake: None,
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            stats: PortStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PortConfig {
        &self.cfg
    }

    /// Packets in the ring and on the wire (not yet delivered by serialization).
    pub fn backlog_packets(&self) -> usize {
        self.ring.len() + self.on_wire.is_some() as usize
    }

    fn ring_has_room(&self, len: u32) -> bool {
        match self.cfg.buffer {
            TxBuffer::Packets(n) => self.ring_segs < n.max(1) as u64,
            TxBuffer::Bytes(b) => self.ring.is_empty() || self.ring_bytes + len as u64 <= b,
        }
    }

    /// The wire time of a packet: a GSO packet's `len` is its segments'
    /// lengths summed, and each segment pays the framing `overhead` (and
    /// the 4 bytes of a VLAN tag carried beside it, which the device
    /// writes into the frame).
    fn serialization(&self, pkt: &Packet) -> Duration {
        if self.cfg.rate_bps == 0 {
            return Duration::ZERO;
        }
        let per_segment = self.cfg.overhead as u64 + if pkt.vlan.is_some() { 4 } else { 0 };
        let bits = (pkt.len as u64 + per_segment * pkt.segs() as u64) * 8;
        Duration((bits as u128 * 1_000_000_000 / self.cfg.rate_bps as u128) as u64)
    }

    /// Hand a packet to the device for transmission at `now` (`dev_queue_xmit`).
    pub fn send(&mut self, dev: &mut Device, pkt: Packet, now: Time) -> Result<(), DropReason> {
        let mut cx = Cx::new(now);
        // clsact's egress filters come first (`sch_handle_egress`).
        let mut pkt = dev.egress_hook(pkt, now)?;
        pkt.tstamp = now;
        if dev.root.kind() == "noqueue" {
            if !self.ring_has_room(pkt.len) {
                self.stats.ring_drops += 1;
                return Err(DropReason::QueueFull);
            }
            self.push_ring(pkt);
        } else {
            let r = dev.root.enqueue_root(pkt, &mut cx);
            self.stats.qdisc_shed += cx.drops.len() as u64;
            r?;
        }
        self.pump(dev, now);
        Ok(())
    }

    fn push_ring(&mut self, pkt: Packet) {
        self.ring_bytes += pkt.len as u64;
        self.ring_segs += pkt.segs() as u64;
        self.ring.push_back(pkt);
    }

    fn pop_ring(&mut self) -> Option<Packet> {
        let pkt = self.ring.pop_front()?;
        self.ring_bytes -= pkt.len as u64;
        self.ring_segs -= pkt.segs() as u64;
        Some(pkt)
    }

    /// The ring's head, to go on the wire: a GSO packet longer on the wire
    /// than [`WIRE_CHUNK`] is cut into pieces of at most that long (whole
    /// segments), the rest going back to the ring's head.
    fn next_for_wire(&mut self) -> Option<Packet> {
        let pkt = self.pop_ring()?;
        let Some(g) = pkt.gso else {
            return Some(pkt);
        };
        let wire = self.serialization(&pkt);
        if self.cfg.rate_bps == 0 || wire <= WIRE_CHUNK {
            return Some(pkt);
        }
        let per_seg = wire.0 / g.segs.max(1) as u64;
        let per_piece = (WIRE_CHUNK.0 / per_seg.max(1)).clamp(1, u16::MAX as u64) as u16;
        let Ok(mut pieces) = crate::gso::split(&pkt, per_piece) else {
            return Some(pkt);
        };
        let first = pieces.remove(0);
        for p in pieces.into_iter().rev() {
            self.ring_bytes += p.len as u64;
            self.ring_segs += p.segs() as u64;
            self.ring.push_front(p);
        }
        Some(first)
    }

    /// When the port next needs [`Port::advance`]: a packet finishing on the
    /// wire, or a throttled qdisc becoming ready.
    pub fn next_event(&self) -> Option<Time> {
        let wire = self.on_wire.as_ref().map(|(_, t)| *t);
        match (wire, self.qdisc_wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Process what is due at `now`, appending `(arrival time, packet)` for
    /// packets that will reach the far end.
    pub fn advance(&mut self, dev: &mut Device, now: Time, delivered: &mut Vec<(Time, Packet)>) {
        if let Some((_, done)) = &self.on_wire {
            if *done <= now {
                let (pkt, done) = self.on_wire.take().expect("checked");
                self.stats.tx_packets += pkt.segs() as u64;
                self.stats.tx_bytes += pkt.len as u64;
                if self.cfg.loss > 0.0 && self.rng.gen::<f64>() < self.cfg.loss {
                    self.stats.wire_losses += 1;
                } else {
                    delivered.push((done + self.cfg.delay, pkt));
                }
            }
        }
        if self.qdisc_wake.is_some_and(|t| t <= now) {
            self.qdisc_wake = None;
        }
        self.pump(dev, now);
    }

    /// `qdisc_run`: fill the ring from the qdisc while it has room, and start
    /// the wire if it is idle.
    fn pump(&mut self, dev: &mut Device, now: Time) {
        let mut cx = Cx::new(now);
        loop {
            if self.on_wire.is_none() {
                if let Some(pkt) = self.next_for_wire() {
                    let done = now + self.serialization(&pkt);
                    self.on_wire = Some((pkt, done));
                }
            }
            // The ring's head moved to the wire: is there room for one more?
            if !self.ring_has_room(0) {
                break;
            }
            match dev.root.dequeue(&mut cx) {
                Dequeue::Packet(mut p) => {
                    self.qdisc_wake = None;
                    p.restore_len();
                    self.push_ring(p);
                }
                Dequeue::Wait(t) => {
                    self.qdisc_wake = Some(t.max(now));
                    break;
                }
                Dequeue::Empty => {
                    self.qdisc_wake = None;
                    break;
                }
            }
        }
        self.stats.qdisc_shed += cx.drops.len() as u64;
        if self.on_wire.is_none() {
            if let Some(pkt) = self.next_for_wire() {
                let done = now + self.serialization(&pkt);
                self.on_wire = Some((pkt, done));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{DevKind, NlFlags, QdiscRequest};
    use crate::handle::Handle;
    use crate::packet::Skb;
    use crate::qdisc::fifo::FifoOpts;
    use crate::qdisc::DevInfo;
    use crate::qdisc::QdiscOpts;

    fn device_with_pfifo(limit: u32) -> Device {
        let mut d = Device::new(2, DevInfo::default(), DevKind::Ether);
        d.set_up(true);
        let req = QdiscRequest {
            parent: Handle::ROOT,
            handle: Handle::new(1, 0),
            kind: Some("pfifo".into()),
            opts: Some(QdiscOpts::Pfifo(FifoOpts { limit: Some(limit) })),
            ..Default::default()
        };
        d.modify_qdisc(&req, NlFlags::ADD, &mut |_| None).unwrap();
        d
    }

    fn run(port: &mut Port, dev: &mut Device, until: Time) -> Vec<(Time, Packet)> {
        let mut out = vec![];
        while let Some(t) = port.next_event() {
            if t > until {
                break;
            }
            port.advance(dev, t, &mut out);
        }
        out
    }

    #[test]
    fn a_burst_leaves_at_the_wire_rate_and_arrives_after_the_delay() {
        // 10 Mbit/s, 1500-byte packets: 1.2 ms each; 5 ms propagation.
        let mut dev = device_with_pfifo(100);
        let cfg = PortConfig {
            rate_bps: 10_000_000,
            delay: Duration::from_millis(5),
            ..Default::default()
        };
        let mut port = Port::new(cfg);
        for i in 0..10 {
            port.send(
                &mut dev,
                Packet::from(Skb {
                    id: i,
                    len: 1500,
                    ..Default::default()
                }),
                Time(0),
            )
            .unwrap();
        }
        let out = run(&mut port, &mut dev, Time(1_000_000_000));
        assert_eq!(out.len(), 10);
        for (i, (t, p)) in out.iter().enumerate() {
            assert_eq!(p.id, i as u64);
            assert_eq!(t.0, (i as u64 + 1) * 1_200_000 + 5_000_000);
        }
        assert_eq!(dev.root.stats().packets, 10);
    }

    #[test]
    fn a_size_table_changes_what_the_qdisc_counts_not_what_the_wire_sends() {
        // `stab overhead 10 linklayer atm`: 1500 bytes count as 32 ATM cells
        // (ceil(1510 / 48) * 53 = 1696 bytes) in the qdisc; the wire still
        // carries 1500 and takes 1.2 ms per packet at 10 Mbit/s.
        let mut dev = Device::new(2, DevInfo::default(), DevKind::Ether);
        dev.set_up(true);
        let req = QdiscRequest {
            parent: Handle::ROOT,
            handle: Handle::new(1, 0),
            kind: Some("bfifo".into()),
            opts: Some(QdiscOpts::Bfifo(FifoOpts {
                limit: Some(3 * 1696),
            })),
            estimator: None,
            stab: Some(crate::stab::SizeSpec {
                overhead: 10,
                linklayer: crate::rate::LinkLayer::Atm,
                ..Default::default()
            }),
            ..Default::default()
        };
        dev.modify_qdisc(&req, NlFlags::ADD, &mut |_| None).unwrap();
        let mut port = Port::new(PortConfig {
            rate_bps: 10_000_000,
            buffer: TxBuffer::Packets(1),
            ..Default::default()
        });
        let sent: Vec<_> = (0..6)
            .map(|i| {
                let p = Packet::from(Skb {
                    id: i,
                    len: 1500,
                    ..Default::default()
                });
                port.send(&mut dev, p, Time(0)).is_ok()
            })
            .collect();
        // One on the wire, one in the ring, three cells' worth in the bfifo
        // (three 1500-byte packets would fit 3 * 1696 only as 1696 each).
        assert_eq!(sent, [true, true, true, true, true, false]);
        let out = run(&mut port, &mut dev, Time(1_000_000_000));
        assert_eq!(out.len(), 5);
        assert!(out
            .iter()
            .all(|(_, p)| p.len == 1500 && p.skb_len.is_none()));
        assert_eq!(out[4].0, Time(5 * 1_200_000));
        let st = dev.root.stats();
        assert_eq!((st.packets, st.bytes), (5, 5 * 1696));
    }

    #[test]
    fn the_ring_holds_at_most_its_size_and_the_rest_waits_in_the_qdisc() {
        let mut dev = device_with_pfifo(1000);
        let cfg = PortConfig {
            rate_bps: 1_000_000,
            buffer: TxBuffer::Packets(4),
            ..Default::default()
        };
        let mut port = Port::new(cfg);
        for i in 0..20 {
            port.send(
                &mut dev,
                Packet::from(Skb {
                    id: i,
                    len: 1000,
                    ..Default::default()
                }),
                Time(0),
            )
            .unwrap();
        }
        // One on the wire, four in the ring, fifteen in the qdisc.
        assert_eq!(port.backlog_packets(), 5);
        assert_eq!(dev.root.stats().qlen, 15);
    }

    #[test]
    fn noqueue_roots_drop_when_the_ring_is_full() {
        let mut dev = Device::new(2, DevInfo::default(), DevKind::Dummy);
        dev.set_up(true);
        let mut port = Port::new(PortConfig {
            rate_bps: 1_000_000,
            buffer: TxBuffer::Packets(2),
            ..Default::default()
        });
        let sent: Vec<bool> = (0..5)
            .map(|i| {
                port.send(
                    &mut dev,
                    Packet::from(Skb {
                        id: i,
                        len: 100,
                        ..Default::default()
                    }),
                    Time(0),
                )
                .is_ok()
            })
            .collect();
        // One goes straight onto the wire, two wait in the ring, the rest are lost.
        assert_eq!(sent, vec![true, true, true, false, false]);
        assert_eq!(port.stats.ring_drops, 2);
    }
}
