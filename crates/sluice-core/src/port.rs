//! An output port: a device's qdisc tree drained into a transmit buffer,
//! serialized onto a wire of a given rate, and delivered after a propagation
//! delay.
//!
//! This is the part of a real NIC (or a modem) that tc does not control and
//! where bufferbloat lives: Linux's `qdisc_run` dequeues from the root qdisc
//! only while the driver's transmit ring has room, so a big ring holds the
//! queue and a small one moves it into the qdisc where tc can manage it
//! (the lan-bufferbloat example's `ethtool -G eth0 tx 32`). The port models exactly that: a ring
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
use crate::schedule::{Schedule, ScheduleCursor};
use crate::stats::DropReason;
use crate::time::{Duration, Time};
use crate::trace::{DelayTrace, Trace, TracePlayer, OPPORTUNITY_BYTES};
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
    /// Packets put on the wire, a GSO packet counting its segments.
    pub tx_packets: u64,
    /// Packets put on the wire as they travel: each piece of a GSO packet
    /// cut for the wire ([`WIRE_CHUNK`]) one.
    pub tx_pieces: u64,
    /// Packets added by cutting GSO packets into pieces for the wire (a
    /// packet cut in three adds two).
    pub cut: u64,
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

/// A change to a running wire ([`Port::change`]): each field set replaces
/// what the wire had, at the moment the change is made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WireChange {
    /// A fixed rate, bits/s; 0 is an outage: nothing is carried (packets
    /// wait in the qdisc and the ring) until a later rate. Ends a trace.
    pub rate_bps: Option<u64>,
    /// Capacity from a delivery-opportunity trace started now; `true`:
    /// played once (Mahimahi's `--once`), else repeated.
    pub trace: Option<(Trace, bool)>,
    /// A fixed one-way delay. Ends a delay trace.
    pub delay: Option<Duration>,
    /// Per-packet delays from a trace started now.
    pub delay_trace: Option<DelayTrace>,
    /// Probability of losing a packet on the wire.
    pub loss: Option<f64>,
    /// The transmit ring's size (a ring over the new size drains).
    pub buffer: Option<TxBuffer>,
    /// Carrier: a wire that is down loses what crosses it.
    pub up: Option<bool>,
    /// Follow a schedule of changes from now (replacing any schedule).
    pub schedule: Option<Schedule>,
}

/// The packet being serialized.
#[derive(Debug)]
struct OnWire {
    pkt: Packet,
    /// When its last bit leaves ([`Time::NEVER`] in an outage, and on a
    /// trace, whose opportunities decide).
    done: Time,
    left: Left,
}

/// What is left of the packet on the wire.
#[derive(Debug, Clone, Copy)]
enum Left {
    /// At a fixed rate: bit·ns (bits × 10⁹) as of `mark`.
    Work { work: u128, mark: Time },
    /// On a trace: bytes.
    Bytes(u128),
}

/// Bit·ns in a byte: a byte's work at 1 bit/s, in the units of [`Left::Work`].
const BIT_NS: u128 = 8 * 1_000_000_000;

/// What carries the wire's bits.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Carrier {
    /// A fixed rate, bits/s (0: unlimited).
    Rate(u64),
    /// Nothing: an outage.
    Outage,
    /// A trace's opportunities.
    Trace,
}

/// One direction of a link, from a device's qdiscs to the far end.
#[derive(Debug)]
pub struct Port {
    cfg: PortConfig,
    /// The fixed rate is 0: an outage, not an unlimited wire.
    outage: bool,
    /// Carrier.
    up: bool,
    /// Capacity from a trace instead of `cfg.rate_bps`.
    trace: Option<TracePlayer>,
    /// Per-packet delays instead of `cfg.delay`, from a start time.
    delay_trace: Option<(DelayTrace, Time)>,
    schedule: Option<ScheduleCursor>,
    ring: VecDeque<Packet>,
    ring_bytes: u64,
    /// Wire packets in the ring: a GSO packet counts its segments.
    ring_segs: u64,
    on_wire: Option<OnWire>,
    qdisc_wake: Option<Time>,
    /// The qdisc may hold packets (a trace's opportunities dequeue them).
    busy: bool,
    /// Departures made while a packet was handed in, given out by the next [`Port::advance`].
    pending: Vec<(Time, Packet)>,
    /// When the last packet reaches the far end: a wire is first in, first out.
    last_arrival: Time,
    /// The latest time the port was called at.
    clock: Time,
    rng: Xoshiro256PlusPlus,
    /// The context of every call into the qdisc tree, reset for each
    /// ([`Cx::reset`]) rather than made anew: one is needed per packet
    /// in and about two per packet out.
    cx: Cx,
    /// Counters.
    pub stats: PortStats,
}

impl Port {
    /// An idle port.
    pub fn new(cfg: PortConfig) -> Self {
        Port {
            cfg,
            outage: false,
            up: true,
            trace: None,
            delay_trace: None,
            schedule: None,
            ring: VecDeque::new(),
            ring_bytes: 0,
            ring_segs: 0,
            on_wire: None,
            qdisc_wake: None,
            busy: false,
            pending: Vec::new(),
            last_arrival: Time::ZERO,
            clock: Time::ZERO,
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            cx: Cx::default(),
            stats: PortStats::default(),
        }
    }

    /// The configuration as it is now (a change or schedule updates it;
    /// while a trace plays, `rate_bps` is the fixed rate it replaced).
    pub fn config(&self) -> &PortConfig {
        &self.cfg
    }

    /// The trace giving the wire's capacity, if one does.
    pub fn trace(&self) -> Option<&Trace> {
        self.trace.as_ref().map(TracePlayer::trace)
    }

    /// Is the wire in an outage (a rate of 0) or down?
    pub fn carries_nothing(&self) -> bool {
        self.outage || !self.up
    }

    /// Packets in the ring and on the wire (not yet delivered by serialization).
    pub fn backlog_packets(&self) -> usize {
        self.ring.len() + self.on_wire.is_some() as usize
    }

    fn ring_has_room(&self, len: u32) -> bool {
        // On a trace a ring of 0 is no ring: opportunities dequeue from the
        // qdisc, as Mahimahi's link takes from its queue.
        let least = if self.trace.is_some() { 0 } else { 1 };
        match self.cfg.buffer {
            TxBuffer::Packets(n) => self.ring_segs < n.max(least) as u64,
            TxBuffer::Bytes(b) => self.ring.is_empty() || self.ring_bytes + len as u64 <= b,
        }
    }

    /// The wire work of a packet in bit·ns: a GSO packet's `len` is its
    /// segments' lengths summed, and each segment pays the framing
    /// `overhead` (and the 4 bytes of a VLAN tag carried beside it, which
    /// the device writes into the frame).
    fn work(&self, pkt: &Packet) -> u128 {
        let per_segment = self.cfg.overhead as u64 + if pkt.vlan.is_some() { 4 } else { 0 };
        let bits = (pkt.len as u64 + per_segment * pkt.segs() as u64) * 8;
        bits as u128 * 1_000_000_000
    }

    /// How long `work` bit·ns takes at the current fixed rate.
    fn wire_time(&self, work: u128) -> Option<Duration> {
        match (self.outage, self.cfg.rate_bps) {
            (true, _) => None,
            (false, 0) => Some(Duration::ZERO),
            // In 64 bits when the work fits (up to 2.3 GB at once): the
            // same quotient without a 128-bit division per packet.
            (false, r) => Some(Duration(match u64::try_from(work) {
                Ok(w) => (w / r).min(u64::MAX / 2),
                Err(_) => (work / r as u128).min(u64::MAX as u128 / 2) as u64,
            })),
        }
    }

    /// The wire time of a packet at the current fixed rate.
    fn serialization(&self, pkt: &Packet) -> Duration {
        self.wire_time(self.work(pkt)).unwrap_or(Duration::ZERO)
    }

    /// Hand a packet to the device for transmission at `now` (`dev_queue_xmit`).
    pub fn send(&mut self, dev: &mut Device, pkt: Packet, now: Time) -> Result<(), DropReason> {
        let now = self.tick(now);
        // A trace spends what is due before the packet joins the queue
        // (Mahimahi's `rationalize` before `enqueue`).
        if self.trace.is_some() {
            let mut out = std::mem::take(&mut self.pending);
            self.run_due(dev, now, &mut out);
            self.pending = out;
            if !self.has_backlog() {
                if let Some(p) = &mut self.trace {
                    p.skip_through(now);
                }
            }
        }
        // clsact's egress filters come first (`sch_handle_egress`).
        let mut pkt = dev.egress_hook(pkt, now)?;
        pkt.tstamp = now;
        if dev.root.kind() == "noqueue" {
            // On a trace without a ring, a noqueue device still hands over one.
            let room =
                self.ring_has_room(pkt.len) || (self.trace.is_some() && self.ring.is_empty());
            if !room {
                self.stats.ring_drops += 1;
                return Err(DropReason::QueueFull);
            }
            self.push_ring(pkt);
        } else {
            self.cx.reset(now);
            let r = dev.root.enqueue_root(pkt, &mut self.cx);
            self.stats.qdisc_shed += self.cx.drops.len() as u64;
            r?;
            self.busy = true;
        }
        self.pump(dev, now);
        Ok(())
    }

    /// Change the wire at `now` ([`WireChange`]).
    pub fn change(&mut self, dev: &mut Device, now: Time, change: WireChange) {
        let now = self.tick(now);
        let mut out = std::mem::take(&mut self.pending);
        self.run_due(dev, now, &mut out);
        self.pending = out;
        self.apply(now, change);
        self.pump(dev, now);
    }

    fn apply(&mut self, now: Time, c: WireChange) {
        if let Some(s) = c.schedule {
            self.schedule = Some(ScheduleCursor::new(s, now));
        }
        let before = self.carrier();
        if let Some(r) = c.rate_bps {
            self.outage = r == 0;
            self.cfg.rate_bps = r;
            self.trace = None;
        }
        if let Some((t, once)) = c.trace {
            self.outage = false;
            self.trace = Some(TracePlayer::new(t, now, once));
        }
        self.carry_on(now, before);
        if let Some(d) = c.delay {
            self.cfg.delay = d;
            self.delay_trace = None;
        }
        if let Some(d) = c.delay_trace {
            self.delay_trace = Some((d, now));
        }
        if let Some(l) = c.loss {
            self.cfg.loss = l;
        }
        if let Some(b) = c.buffer {
            self.cfg.buffer = b;
        }
        if let Some(u) = c.up {
            self.up = u;
        }
    }

    fn carrier(&self) -> Carrier {
        match (&self.trace, self.outage) {
            (Some(_), _) => Carrier::Trace,
            (None, true) => Carrier::Outage,
            (None, false) => Carrier::Rate(self.cfg.rate_bps),
        }
    }

    /// The carrier changed at `now` from `before`: what is left of the
    /// packet on the wire goes on at the new rate (or waits out an outage,
    /// or is carried by the trace's opportunities from now).
    fn carry_on(&mut self, now: Time, before: Carrier) {
        let after = self.carrier();
        if before == after && after != Carrier::Trace {
            return;
        }
        let Some(mut w) = self.on_wire.take() else {
            return;
        };
        let bitns = match (w.left, before) {
            (Left::Bytes(b), _) => b * BIT_NS,
            (Left::Work { work, mark }, Carrier::Rate(r)) if r > 0 => {
                work.saturating_sub(now.saturating_since(mark).0 as u128 * r as u128)
            }
            (Left::Work { work, .. }, Carrier::Outage) => work,
            (Left::Work { .. }, _) => 0, // an unlimited wire: done already
        };
        if after == Carrier::Trace {
            w.left = Left::Bytes(bitns.div_ceil(BIT_NS));
            w.done = Time::NEVER;
        } else {
            w.left = Left::Work {
                work: bitns,
                mark: now,
            };
            w.done = self.wire_time(bitns).map_or(Time::NEVER, |d| now + d);
        }
        self.on_wire = Some(w);
    }

    fn tick(&mut self, now: Time) -> Time {
        self.clock = self.clock.max(now);
        self.clock
    }

    fn has_backlog(&self) -> bool {
        self.on_wire.is_some() || !self.ring.is_empty() || self.busy
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

    /// Put a packet at the ring's head back (the rest of a cut-up GSO packet).
    fn push_ring_front(&mut self, pkt: Packet) {
        self.ring_bytes += pkt.len as u64;
        self.ring_segs += pkt.segs() as u64;
        self.ring.push_front(pkt);
    }

    /// The ring's head, to go on the wire: a GSO packet longer on the wire
    /// than [`WIRE_CHUNK`] (or any GSO packet, on a trace, whose
    /// opportunities count each segment) is cut into pieces of whole
    /// segments, the rest going back to the ring's head.
    fn next_for_wire(&mut self) -> Option<Packet> {
        let pkt = self.pop_ring()?;
        let Some(g) = pkt.gso else {
            return Some(pkt);
        };
        let per_piece = if self.trace.is_some() {
            1
        } else {
            let wire = self.serialization(&pkt);
            if wire <= WIRE_CHUNK {
                return Some(pkt);
            }
            let per_seg = wire.0 / g.segs.max(1) as u64;
            (WIRE_CHUNK.0 / per_seg.max(1)).clamp(1, u16::MAX as u64) as u16
        };
        if g.segs <= 1 {
            return Some(pkt);
        }
        let Ok(mut pieces) = crate::gso::split(&pkt, per_piece) else {
            return Some(pkt);
        };
        let first = pieces.remove(0);
        self.stats.cut += pieces.len() as u64;
        for p in pieces.into_iter().rev() {
            self.push_ring_front(p);
        }
        Some(first)
    }

    /// When the port next needs [`Port::advance`]: a packet finishing on the
    /// wire, a trace's opportunity while packets wait, a throttled qdisc
    /// becoming ready, a scheduled change.
    pub fn next_event(&self) -> Option<Time> {
        let wire = if self.trace.is_some() {
            self.has_backlog()
                .then(|| self.trace.as_ref().and_then(TracePlayer::next_opportunity))
                .flatten()
        } else {
            self.on_wire
                .as_ref()
                .map(|w| w.done)
                .filter(|&t| t != Time::NEVER)
        };
        let earliest = Dequeue::earliest;
        let mut next = earliest(wire, self.qdisc_wake);
        if let Some(s) = &self.schedule {
            next = earliest(next, s.next_time());
        }
        for &(t, _) in &self.pending {
            next = earliest(next, Some(t));
        }
        next
    }

    /// Process what is due at `now`, appending `(arrival time, packet)` for
    /// packets that will reach the far end.
    pub fn advance(&mut self, dev: &mut Device, now: Time, delivered: &mut Vec<(Time, Packet)>) {
        let now = self.tick(now);
        delivered.append(&mut self.pending);
        self.run_due(dev, now, delivered);
        if self.qdisc_wake.is_some_and(|t| t <= now) {
            self.qdisc_wake = None;
        }
        self.pump(dev, now);
    }

    /// Everything due at or before `now`, in order of time: scheduled
    /// changes (first, at a tie), packets finishing on the wire, a trace's
    /// opportunities.
    fn run_due(&mut self, dev: &mut Device, now: Time, delivered: &mut Vec<(Time, Packet)>) {
        loop {
            let change = self.schedule.as_ref().and_then(ScheduleCursor::next_time);
            let wire = if self.trace.is_some() {
                self.has_backlog()
                    .then(|| self.trace.as_ref().and_then(TracePlayer::next_opportunity))
                    .flatten()
            } else {
                self.on_wire.as_ref().map(|w| w.done)
            };
            match (change.filter(|&t| t <= now), wire.filter(|&t| t <= now)) {
                (Some(c), w) if w.is_none_or(|w| c <= w) => {
                    let ch = self
                        .schedule
                        .as_mut()
                        .and_then(|s| s.pop_due(c))
                        .expect("due");
                    self.apply(c, ch);
                    self.pump(dev, c);
                }
                (_, Some(t)) if self.trace.is_some() => self.opportunity(dev, t, delivered),
                (_, Some(t)) => {
                    let w = self.on_wire.take().expect("a packet on the wire");
                    self.depart(w.pkt, t, delivered);
                    self.pump(dev, t);
                }
                _ => return,
            }
        }
    }

    /// Spend one delivery opportunity at `t` (Mahimahi's `rationalize`).
    fn opportunity(&mut self, dev: &mut Device, t: Time, delivered: &mut Vec<(Time, Packet)>) {
        if let Some(p) = &mut self.trace {
            p.advance();
        }
        let mut budget = OPPORTUNITY_BYTES as u128;
        while budget > 0 {
            if self.on_wire.is_none() {
                let Some(pkt) = self.take_for_opportunity(dev, t) else {
                    break;
                };
                // Mahimahi counts what it reads from its TUN: the IP packet
                // and the 4-byte packet information in front of it.
                let left = Left::Bytes(pkt.network_len() as u128 + 4);
                self.on_wire = Some(OnWire {
                    pkt,
                    done: Time::NEVER,
                    left,
                });
            }
            let w = self.on_wire.as_mut().expect("just set");
            // `carry_on` turns a fixed rate's remainder into bytes when a
            // trace starts; a remainder found here is converted the same way.
            if let Left::Work { work, .. } = w.left {
                w.left = Left::Bytes(work.div_ceil(BIT_NS));
            }
            let Left::Bytes(left) = &mut w.left else {
                continue;
            };
            let used = budget.min(*left);
            *left -= used;
            budget -= used;
            if *left == 0 {
                let w = self.on_wire.take().expect("checked");
                self.depart(w.pkt, t, delivered);
            }
        }
        self.pump(dev, t);
    }

    /// The next packet for a trace's opportunity: the ring's head, or
    /// straight from the qdisc.
    fn take_for_opportunity(&mut self, dev: &mut Device, t: Time) -> Option<Packet> {
        if let Some(p) = self.next_for_wire() {
            return Some(p);
        }
        if !self.busy {
            return None;
        }
        self.cx.reset(t);
        let got = dev.root.dequeue(&mut self.cx);
        self.stats.qdisc_shed += self.cx.drops.len() as u64;
        match got {
            Dequeue::Packet(mut p) => {
                p.restore_len();
                self.push_ring(p);
                self.next_for_wire()
            }
            Dequeue::Wait(_) => None,
            Dequeue::Empty => {
                self.busy = false;
                None
            }
        }
    }

    /// A packet's last bit left at `t`: it arrives after the delay, never
    /// before the one ahead of it (unless a delay trace may reorder), or
    /// is lost.
    fn depart(&mut self, pkt: Packet, t: Time, delivered: &mut Vec<(Time, Packet)>) {
        self.stats.tx_packets += pkt.segs() as u64;
        self.stats.tx_pieces += 1;
        self.stats.tx_bytes += pkt.len as u64;
        if !self.up || (self.cfg.loss > 0.0 && self.rng.gen::<f64>() < self.cfg.loss) {
            self.stats.wire_losses += 1;
            return;
        }
        let (delay, fifo) = match &self.delay_trace {
            Some((d, start)) => (d.delay_at(t.saturating_since(*start)), !d.reorder),
            None => (self.cfg.delay, true),
        };
        let mut at = t + delay;
        if fifo {
            at = at.max(self.last_arrival);
        }
        self.last_arrival = self.last_arrival.max(at);
        delivered.push((at, pkt));
    }

    /// Start the ring's head on an idle wire (at a fixed rate).
    fn start_wire(&mut self, now: Time) {
        if self.on_wire.is_some() || self.trace.is_some() || self.ring.is_empty() {
            return;
        }
        if let Some(pkt) = self.next_for_wire() {
            let work = self.work(&pkt);
            let done = self.wire_time(work).map_or(Time::NEVER, |d| now + d);
            self.on_wire = Some(OnWire {
                pkt,
                done,
                left: Left::Work { work, mark: now },
            });
        }
    }

    /// `qdisc_run`: fill the ring from the qdisc while it has room, and start
    /// the wire if it is idle.
    fn pump(&mut self, dev: &mut Device, now: Time) {
        self.start_wire(now);
        // A full ring takes nothing from the qdisc (and the wire is busy).
        if !self.ring_has_room(0) {
            return;
        }
        self.cx.reset(now);
        loop {
            match dev.root.dequeue(&mut self.cx) {
                Dequeue::Packet(mut p) => {
                    self.qdisc_wake = None;
                    p.restore_len();
                    self.push_ring(p);
                    self.start_wire(now);
                    // The ring's head moved to the wire: is there room for one more?
                    if !self.ring_has_room(0) {
                        break;
                    }
                }
                Dequeue::Wait(t) => {
                    self.qdisc_wake = Some(t.max(now));
                    break;
                }
                Dequeue::Empty => {
                    self.qdisc_wake = None;
                    self.busy = false;
                    break;
                }
            }
        }
        self.stats.qdisc_shed += self.cx.drops.len() as u64;
        self.start_wire(now);
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

    /// An IPv4 packet of `ip_len` bytes (its header says so), `id`.
    fn ip(id: u64, ip_len: u16) -> Packet {
        let mut data = vec![0x45, 0, 0, 0];
        data[2..4].copy_from_slice(&ip_len.to_be_bytes());
        data.resize(20, 0);
        let mut p = Packet::new(data, ip_len as u32, crate::packet::ETH_P_IP);
        p.id = id;
        p
    }

    const MS: u64 = 1_000_000;

    fn traced(trace: &str, once: bool, ring: u32) -> (Port, Device) {
        let mut dev = device_with_pfifo(1000);
        let mut port = Port::new(PortConfig {
            rate_bps: 0,
            buffer: TxBuffer::Packets(ring),
            ..Default::default()
        });
        let change = WireChange {
            trace: Some((Trace::parse(trace).unwrap(), once)),
            ..Default::default()
        };
        port.change(&mut dev, Time(0), change);
        (port, dev)
    }

    /// A pfifo device and a port at `rate_bps` that follows `schedule`
    /// from time 0, with `n` packets of `ip_len` bytes sent at 0.
    fn scheduled(rate_bps: u64, schedule: &str, n: u64, ip_len: u16) -> Vec<(Time, Packet)> {
        let mut dev = device_with_pfifo(100);
        let mut port = Port::new(PortConfig {
            rate_bps,
            ..Default::default()
        });
        let change = WireChange {
            schedule: Some(Schedule::parse(schedule).unwrap()),
            ..Default::default()
        };
        port.change(&mut dev, Time(0), change);
        for i in 0..n {
            port.send(&mut dev, ip(i, ip_len), Time(0)).unwrap();
        }
        run(&mut port, &mut dev, Time(100 * MS))
    }

    fn departures(out: &[(Time, Packet)]) -> Vec<(u64, u64)> {
        out.iter().map(|(t, p)| (p.id, t.0 / MS)).collect()
    }

    #[test]
    fn a_full_size_packet_takes_one_opportunity_and_the_trace_repeats() {
        // Opportunities at 1, 1, 3 ms, then 4, 4, 6 ms, then 7, 7 ms...
        let (mut port, mut dev) = traced("1\n1\n3\n", false, 0);
        for i in 0..8 {
            port.send(&mut dev, ip(i, 1500), Time(0)).unwrap();
        }
        let out = run(&mut port, &mut dev, Time(100 * MS));
        assert_eq!(
            departures(&out),
            [
                (0, 1),
                (1, 1),
                (2, 3),
                (3, 4),
                (4, 4),
                (5, 6),
                (6, 7),
                (7, 7)
            ]
        );
        assert_eq!(port.next_event(), None, "an idle link asks for nothing");
    }

    #[test]
    fn small_packets_share_an_opportunity_and_a_partly_sent_one_goes_on() {
        // 500-byte IP packets count 504 bytes: two fit in 1504 with 496 to
        // spare, which the third uses; its last 8 bytes take the next
        // opportunity, with the fourth (504) and fifth (504).
        let (mut port, mut dev) = traced("1\n", false, 0);
        for i in 0..6 {
            port.send(&mut dev, ip(i, 500), Time(0)).unwrap();
        }
        let out = run(&mut port, &mut dev, Time(100 * MS));
        assert_eq!(
            departures(&out),
            [(0, 1), (1, 1), (2, 2), (3, 2), (4, 2), (5, 3)]
        );
    }

    #[test]
    fn unused_bytes_are_lost_and_a_late_packet_misses_the_opportunity_at_its_time() {
        let (mut port, mut dev) = traced("2\n4\n", false, 0);
        port.send(&mut dev, ip(0, 100), Time(MS)).unwrap();
        // At 2 ms packet 0 leaves; the rest of that opportunity is wasted.
        // Packet 1 arrives exactly at 4 ms: Mahimahi has spent the
        // opportunity at 4 before it enqueues, so 1 leaves at 6.
        let mut out = run(&mut port, &mut dev, Time(3 * MS));
        port.send(&mut dev, ip(1, 100), Time(4 * MS)).unwrap();
        out.extend(run(&mut port, &mut dev, Time(100 * MS)));
        assert_eq!(departures(&out), [(0, 2), (1, 6)]);
    }

    #[test]
    fn a_trace_played_once_stops_for_good() {
        let (mut port, mut dev) = traced("1\n2\n", true, 0);
        for i in 0..4 {
            port.send(&mut dev, ip(i, 1500), Time(0)).unwrap();
        }
        let out = run(&mut port, &mut dev, Time(1000 * MS));
        assert_eq!(departures(&out), [(0, 1), (1, 2)]);
        assert_eq!(dev.root.stats().qlen, 2, "the rest wait for ever");
        assert_eq!(port.next_event(), None);
    }

    #[test]
    fn a_long_idle_spell_skips_opportunities_without_visiting_them() {
        let (mut port, mut dev) = traced(&"1\n".repeat(84), false, 0);
        port.send(&mut dev, ip(0, 1500), Time(3_600_000 * MS + MS / 2))
            .unwrap();
        let out = run(&mut port, &mut dev, Time(3_600_002 * MS));
        assert_eq!(departures(&out), [(0, 3_600_001)]);
    }

    #[test]
    fn a_scheduled_step_changes_the_rate_mid_packet_and_an_outage_holds_it() {
        // 1500 bytes at 12 Mbit/s take 1 ms. At 0.5 ms the rate halves: the
        // other half takes 1 ms more (done at 1.5 ms). The next packet
        // starts at 1.5 ms; an outage from 2 ms to 5 ms stops it after a
        // quarter, and the rest (1.5 ms at 6 Mbit/s) ends at 6.5 ms.
        let out = scheduled(12_000_000, "0.5ms,6mbit,,\n2ms,0,,\n5ms,6mbit,,\n", 2, 1500);
        let t: Vec<u64> = out.iter().map(|(t, _)| t.0 / 1000).collect();
        assert_eq!(t, [1500, 6500]);
    }

    #[test]
    fn a_ramp_raises_the_rate_step_by_step() {
        // 1 Mbit/s rising to 11 Mbit/s over 10 ms: 1 ms at each rate from
        // 2 to 10 Mbit/s carries 250..1250 bytes; 1250-byte packets sent
        // back to back finish ever sooner after one another.
        let out = scheduled(1_000_000, "0s,1mbit,,\n10ms,11mbit,,,ramp\n", 4, 1250);
        let gaps: Vec<u64> = out
            .windows(2)
            .map(|w| (w[1].0 .0 - w[0].0 .0) / 1000)
            .collect();
        assert!(gaps.windows(2).all(|g| g[1] < g[0]), "{gaps:?}");
        // Bits carried by each finish equal the integral of the rate.
        let bits_by = |t_us: u64| -> f64 {
            (0..t_us)
                .map(|u| (1.0 + (u / 1000) as f64 * 1.0).min(11.0))
                .sum::<f64>()
        };
        for (k, (t, _)) in out.iter().enumerate() {
            let want = (k as f64 + 1.0) * 10_000.0;
            let got = bits_by(t.0 / 1000);
            assert!(
                (got - want).abs() <= 11.0,
                "packet {k}: {got} bits by {t:?}"
            );
        }
    }

    /// Two 1500-byte packets at 12 Mbit/s (leaving at 1 and 2 ms) under
    /// delay trace `trace` (1 ms steps): their arrivals, ms.
    fn delayed(trace: &str, reorder: bool) -> Vec<(u64, u64)> {
        let mut dev = device_with_pfifo(100);
        let mut port = Port::new(PortConfig {
            rate_bps: 12_000_000,
            ..Default::default()
        });
        let mut d = DelayTrace::parse(trace, Duration::from_millis(1)).unwrap();
        d.reorder = reorder;
        let change = WireChange {
            delay_trace: Some(d),
            ..Default::default()
        };
        port.change(&mut dev, Time(0), change);
        for i in 0..2 {
            port.send(&mut dev, ip(i, 1500), Time(0)).unwrap();
        }
        departures(&run(&mut port, &mut dev, Time(100 * MS)))
    }

    #[test]
    fn a_delay_trace_never_reorders_unless_asked() {
        for reorder in [false, true] {
            // Packet 0 leaves at 1 ms (delay 10 ms: step 1), packet 1 at
            // 2 ms (delay 50 ms: step 2 wraps to the first line).
            assert_eq!(delayed("50\n10\n", reorder), [(0, 11), (1, 52)]);
            // A slow one ahead of a fast one: held behind it unless asked.
            let want = if reorder {
                [(0, 51), (1, 12)]
            } else {
                [(0, 51), (1, 51)]
            };
            assert_eq!(delayed("0\n50\n10\n", reorder), want, "reorder {reorder}");
        }
    }

    #[test]
    fn a_link_set_down_loses_what_crosses_it() {
        let mut dev = device_with_pfifo(100);
        let mut port = Port::new(PortConfig {
            rate_bps: 12_000_000,
            ..Default::default()
        });
        port.change(
            &mut dev,
            Time(0),
            WireChange {
                up: Some(false),
                ..Default::default()
            },
        );
        port.send(&mut dev, ip(0, 1500), Time(0)).unwrap();
        assert!(run(&mut port, &mut dev, Time(100 * MS)).is_empty());
        assert_eq!(port.stats.wire_losses, 1);
    }
}
