//! A toxic whose wire changes over time: a `bandwidth` toxic playing a
//! Mahimahi trace or following a schedule's rate column, a `latency` toxic
//! following a schedule's delay column or a delay trace
//! ([`Varying`]).
//!
//! The stage is sluice-core's [`Port`]: a byte-counted FIFO in front of a
//! wire whose carrier is the toxic's fixed rate, the trace's delivery
//! opportunities, or the schedule's rate at each moment, and whose delay
//! is the toxic's latency, the schedule's delay or the delay trace's. The
//! same port `sluice replay` and the simulator use, so a rate changed
//! mid-segment, an outage (a schedule's rate `0`) holding what is queued,
//! and opportunities shared by small segments are as they are there.
//!
//! # What is counted
//!
//! Toxiproxy's `bandwidth` counts the bytes of the stream (or of the
//! datagrams), not packets, so this stage does too: a segment costs its
//! payload bytes at a fixed rate, and on a trace each delivery opportunity
//! is [`OPPORTUNITY_BYTES`](sluice_core::trace::OPPORTUNITY_BYTES) of stream (1504 bytes: what Mahimahi's
//! opportunity carries, header included, becomes stream capacity), shared
//! by the segments in turn; a constant trace `1` carries 1504 stream bytes
//! per millisecond. The port charges a packet its network length and 4
//! bytes (Mahimahi's TUN header), so the packet handed to it is a stand-in
//! whose length makes that sum the segment's payload; the segment itself
//! waits here, by the stand-in's number. (A segment under 4 bytes costs 4.)
//!
//! # Which columns
//!
//! A schedule's rows may set rate, delay and loss; a `bandwidth` toxic
//! takes each row's rate only and a `latency` toxic its delay only, so one
//! schedule file can be given to both. Loss is not taken: a byte stream
//! loses nothing (a `tc` toxic with `netem loss` shows loss as TCP does,
//! as delay). The schedule is followed from when the stage starts: when the
//! connection opens, or when the toxic is added or changed on an open one.
//! Changes are applied when something is in the stage, each at its own
//! time, so an idle connection is not woken for them; a stage idle for
//! more than a pass of a looping schedule starts from the value the last
//! pass ended with, so catching up costs at most one pass of changes.
//!
//! Jitter: a latency toxic with a schedule or delay trace adds its
//! `jitter` (uniform, ± `jitter` ms, as netem) to each packet's arrival,
//! never before the packet entered the stage.

use crate::pipe::qdisc_device;
use crate::toxic::{Kind, Varying};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sluice_core::packet::Packet;
use sluice_core::port::{Port, PortConfig, TxBuffer, WireChange};
use sluice_core::schedule::{Schedule, ScheduleCursor};
use sluice_core::time::{Duration, Time};
use sluice_tc::net::Net;
use std::collections::{BTreeSet, HashMap};

/// Bytes the stage's queue holds (counted as the stream's): twice a TCP
/// direction's window, which a stream never fills; datagrams beyond it
/// are lost, as a tbf's limit loses them.
pub const QUEUE_BYTES: u64 = 2 * crate::pipe::WINDOW;

/// Which column of a schedule the toxic follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Column {
    Rate,
    Delay,
}

impl Column {
    /// What of a schedule's change a toxic following this column takes.
    fn taken(self, c: &WireChange) -> WireChange {
        match self {
            Column::Rate => WireChange {
                rate_bps: c.rate_bps,
                ..Default::default()
            },
            Column::Delay => WireChange {
                delay: c.delay,
                ..Default::default()
            },
        }
    }
}

/// A stage whose wire changes over time.
pub struct WireStage {
    /// The queue in front of the wire: a bfifo of [`QUEUE_BYTES`].
    net: Box<Net>,
    port: Port,
    schedule: Option<ScheduleCursor>,
    /// The schedule followed and when it started (for skipping idle passes).
    plan: Option<(Schedule, Time)>,
    column: Column,
    /// Jitter added to each arrival, ns (0: none).
    jitter: u64,
    rng: Xoshiro256PlusPlus,
    /// The packets the stand-ins stand for, by number: the packet and when
    /// it entered.
    held: HashMap<u64, (Packet, Time)>,
    /// The next stand-in's number.
    serial: u64,
    /// Packets off the wire that land later: (when, number).
    landing: BTreeSet<(Time, u64)>,
}

impl WireStage {
    /// The stage of a `bandwidth` or `latency` toxic with time-varying
    /// attributes, starting at `now`; `None` for any other toxic.
    pub fn new(kind: &Kind, now: Time, seed: u64) -> Result<Option<WireStage>, String> {
        let ms = |v: i64| v.max(0) as u64 * 1_000_000;
        let (wire, cfg, column, jitter) = match kind {
            Kind::Bandwidth { rate, wire } if wire.any() => {
                // Toxiproxy's rate is KB/s; 0 or less: no limit.
                let rate_bps = (*rate).max(0) as u64 * 8000;
                (
                    wire,
                    PortConfig {
                        rate_bps,
                        ..Self::cfg(seed)
                    },
                    Column::Rate,
                    0,
                )
            }
            Kind::Latency {
                latency,
                jitter,
                wire,
            } if wire.any() => {
                let delay = Duration(ms(*latency));
                (
                    wire,
                    PortConfig {
                        delay,
                        ..Self::cfg(seed)
                    },
                    Column::Delay,
                    ms(*jitter),
                )
            }
            _ => return Ok(None),
        };
        let net = Box::new(qdisc_device(&format!("bfifo limit {QUEUE_BYTES}"), seed)?);
        let mut s = WireStage {
            net,
            port: Port::new(cfg),
            schedule: None,
            plan: None,
            column,
            jitter,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            held: HashMap::new(),
            serial: 0,
            landing: BTreeSet::new(),
        };
        s.start(wire, now);
        Ok(Some(s))
    }

    /// A port of unlimited rate, no delay, no ring: what the toxic's
    /// attributes set comes on top.
    fn cfg(seed: u64) -> PortConfig {
        PortConfig {
            rate_bps: 0,
            delay: Duration::ZERO,
            buffer: TxBuffer::Packets(1),
            overhead: 0,
            loss: 0.0,
            seed,
        }
    }

    fn start(&mut self, wire: &Varying, now: Time) {
        let change = WireChange {
            trace: wire
                .trace
                .as_ref()
                .map(|t| (t.value.clone(), wire.trace_once)),
            delay_trace: wire.delay_trace.as_ref().map(|d| d.value.clone()),
            ..Default::default()
        };
        if let Some(dev) = self.net.devices.last_mut() {
            self.port.change(dev, now, change);
        }
        self.schedule = wire
            .schedule
            .as_ref()
            .map(|s| ScheduleCursor::new(s.value.clone(), now));
        self.plan = wire.schedule.as_ref().map(|s| (s.value.clone(), now));
    }

    /// What of a schedule's change this toxic takes (its column).
    fn taken(&self, c: &WireChange) -> WireChange {
        self.column.taken(c)
    }

    /// Apply the schedule's changes due by `now`, each at its time.
    fn catch_up(&mut self, now: Time) {
        self.skip_idle_passes(now);
        let Some(dev) = self.net.devices.last_mut() else {
            return;
        };
        while let Some(cursor) = &mut self.schedule {
            let Some(at) = cursor.next_time().filter(|&t| t <= now) else {
                break;
            };
            let Some(c) = cursor.pop_due(at) else { break };
            let change = self.column.taken(&c);
            if change != WireChange::default() {
                self.port.change(dev, at, change);
            }
        }
    }

    /// An idle stage more than a pass behind a looping schedule: the
    /// column's value is the one the last complete pass ended with (every
    /// pass sets it: a schedule that never does is refused), so set that
    /// and follow the schedule from the start of the pass `now` is in.
    fn skip_idle_passes(&mut self, now: Time) {
        let (Some((plan, start)), Some(cursor)) = (&self.plan, &self.schedule) else {
            return;
        };
        let Some(period) = plan.period().filter(|p| p.0 > 0) else {
            return;
        };
        let pass = Time(start.0 + now.saturating_since(*start).0 / period.0 * period.0);
        let behind = cursor.next_time().is_some_and(|t| t < pass);
        if !self.held.is_empty() || pass == *start || !behind {
            return;
        }
        let last = plan
            .steps()
            .iter()
            .rev()
            .map(|(_, c)| self.taken(c))
            .find(|c| *c != WireChange::default());
        let cursor = ScheduleCursor::new(plan.clone(), pass);
        if let (Some(change), Some(dev)) = (last, self.net.devices.last_mut()) {
            self.port.change(dev, pass, change);
        }
        self.schedule = Some(cursor);
    }

    /// Put `pkt` in at `now`, costing `bytes` of the stream; it comes back
    /// when refused (the queue is full).
    pub fn send(&mut self, pkt: Packet, bytes: u32, now: Time) -> Result<(), Packet> {
        self.catch_up(now);
        let Some(dev) = self.net.devices.last_mut() else {
            return Err(pkt);
        };
        // network_len() + 4 = bytes, at a fixed rate `len` = bytes.
        let stand_in_len = bytes.saturating_sub(4) as usize;
        let mut stand_in = Packet::new(vec![0; stand_in_len], bytes, 0);
        stand_in.id = self.serial;
        match self.port.send(dev, stand_in, now) {
            Ok(()) => {
                self.held.insert(self.serial, (pkt, now));
                self.serial += 1;
                Ok(())
            }
            Err(_) => Err(pkt),
        }
    }

    /// The packets that have landed by `now`, each with its time.
    pub fn poll(&mut self, now: Time, out: &mut Vec<(Time, Packet)>) {
        loop {
            // Wire events and schedule changes in order of time.
            let change = self.schedule.as_ref().and_then(ScheduleCursor::next_time);
            let event = self.port.next_event();
            let step = match (change, event) {
                _ if self.held.is_empty() => None,
                (Some(c), e) if e.is_none_or(|e| c <= e) => Some((c, true)),
                (_, Some(e)) => Some((e, false)),
                (Some(c), None) => Some((c, true)),
                (None, None) => None,
            };
            match step {
                Some((t, true)) if t <= now => self.catch_up(t),
                Some((t, false)) if t <= now => self.advance(t),
                _ => break,
            }
        }
        while let Some(&(t, n)) = self.landing.first() {
            if t > now {
                break;
            }
            self.landing.pop_first();
            if let Some((p, _)) = self.held.remove(&n) {
                out.push((t, p));
            }
        }
    }

    fn advance(&mut self, t: Time) {
        let Some(dev) = self.net.devices.last_mut() else {
            return;
        };
        let mut off = Vec::new();
        self.port.advance(dev, t, &mut off);
        for (at, stand_in) in off {
            let n = stand_in.id;
            let Some((_, entered)) = self.held.get(&n) else {
                continue;
            };
            let mut at = at;
            if self.jitter > 0 {
                let j = self.rng.gen_range(0..=2 * self.jitter);
                at = Time((at.0 + j).saturating_sub(self.jitter).max(entered.0));
            }
            self.landing.insert((at, n));
        }
    }

    /// When [`WireStage::poll`] next has something to do.
    pub fn next_wake(&self) -> Option<Time> {
        if self.held.is_empty() {
            return None;
        }
        let landing = self.landing.first().map(|(t, _)| *t);
        [
            landing,
            self.port.next_event(),
            self.schedule.as_ref().and_then(ScheduleCursor::next_time),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Everything the stage holds, in the order it came in (the stage is
    /// being removed).
    pub fn drain(&mut self) -> Vec<Packet> {
        let mut all: Vec<(u64, Packet)> = self.held.drain().map(|(n, (p, _))| (n, p)).collect();
        all.sort_unstable_by_key(|(n, _)| *n);
        all.into_iter().map(|(_, p)| p).collect()
    }

    /// Is anything inside?
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// How many packets are inside.
    pub fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toxic::Kind;
    use serde_json::json;

    const MS: u64 = 1_000_000;

    fn kind(type_name: &str, attrs: serde_json::Value) -> Kind {
        Kind::parse(type_name, attrs.as_object().unwrap()).unwrap()
    }

    /// Send `n` packets of `bytes` at 0 and poll every 100 µs to `until`:
    /// (time ms, id) as they land.
    fn run(k: &Kind, n: u64, bytes: u32, until: u64) -> Vec<(u64, u64)> {
        let mut s = WireStage::new(k, Time(0), 1).unwrap().unwrap();
        for i in 0..n {
            let mut p = Packet::new(vec![0; 40 + bytes as usize], bytes, 0);
            p.id = i;
            s.send(p, bytes, Time(0)).unwrap();
        }
        let mut got = Vec::new();
        let mut now = 0;
        while now <= until {
            let mut out = Vec::new();
            s.poll(Time(now), &mut out);
            got.extend(out.into_iter().map(|(t, p)| (t.0, p.id)));
            now += MS / 10;
        }
        got
    }

    #[test]
    fn a_constant_trace_carries_1504_stream_bytes_a_millisecond() {
        let k = kind("bandwidth", json!({"trace": "1\n"}));
        // 1504-byte pieces of stream: one per opportunity, at 1, 2, 3... ms.
        let got = run(&k, 5, 1504, 10 * MS);
        let want: Vec<(u64, u64)> = (0..5).map(|i| ((i + 1) * MS, i)).collect();
        assert_eq!(got, want);
        // 752-byte pieces: two per opportunity.
        let got = run(&k, 4, 752, 10 * MS);
        let times: Vec<u64> = got.iter().map(|(t, _)| t / MS).collect();
        assert_eq!(times, [1, 1, 2, 2]);
    }

    #[test]
    fn a_schedule_steps_the_rate_and_an_outage_holds_the_stream() {
        // 1000 bytes at 8 Mbit/s: 1 ms each; from 2 ms an outage, from
        // 5 ms 4 Mbit/s (2 ms each).
        let k = kind(
            "bandwidth",
            json!({"rate": 1000, "schedule": "2ms,0,,\n5ms,4mbit,,\n"}),
        );
        let got = run(&k, 4, 1000, 20 * MS);
        let times: Vec<u64> = got.iter().map(|(t, _)| t / MS).collect();
        assert_eq!(times, [1, 2, 7, 9]);
    }

    #[test]
    fn a_latency_schedule_follows_the_delay_column_only() {
        let k = kind(
            "latency",
            json!({"latency": 10, "schedule": "0s,1kbit,30ms,50%\n"}),
        );
        // The rate and loss columns are not taken: all land at 30 ms.
        let got = run(&k, 3, 1000, 100 * MS);
        assert_eq!(got, [(30 * MS, 0), (30 * MS, 1), (30 * MS, 2)]);
        let k = kind("latency", json!({"delay_trace": "5\n", "jitter": 0}));
        assert_eq!(run(&k, 1, 10, 100 * MS), [(5 * MS, 0)]);
    }

    #[test]
    fn an_idle_stage_skips_whole_passes_of_a_looping_schedule() {
        // A 10 ms pass: 8 Mbit/s for 5 ms, then 4 Mbit/s. After 116 days
        // idle (two billion changes, which the stage does not visit), a
        // packet sent at a pass's 6 ms sees 4 Mbit/s (1000 bytes: 2 ms),
        // one sent at its 1 ms 8 Mbit/s (1 ms).
        let k = kind(
            "bandwidth",
            json!({"schedule": "0s,8mbit,,\n5ms,4mbit,,\n10ms,loop\n"}),
        );
        for (at_ms, took_ms) in [(10_000_000_006u64, 2u64), (10_000_000_001, 1)] {
            let mut s = WireStage::new(&k, Time(0), 1).unwrap().unwrap();
            let t = Time(at_ms * MS);
            s.send(Packet::new(vec![0; 1000], 1000, 0), 1000, t)
                .unwrap();
            let mut out = Vec::new();
            for k in 0..100 {
                s.poll(Time(t.0 + k * MS / 10), &mut out);
            }
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].0 .0 - t.0, took_ms * MS, "sent at {at_ms} ms");
        }
    }

    #[test]
    fn toxiproxys_toxics_have_no_wire_stage() {
        assert!(WireStage::new(&Kind::bandwidth(10), Time(0), 0)
            .unwrap()
            .is_none());
        assert!(WireStage::new(&Kind::latency(10, 1), Time(0), 0)
            .unwrap()
            .is_none());
    }
}
