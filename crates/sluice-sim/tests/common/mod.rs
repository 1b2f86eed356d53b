//! A tiny dumbbell for testing the TCP model on a virtual clock.
//!
//! Senders `a[i]` and receivers `b[i]` are joined by a forward link (a
//! drop-tail FIFO of `limit` packets drained at `rate` bit/s, then `delay` of
//! propagation) and a reverse link (same rate and delay, effectively
//! unlimited queue). Rates count IPv4 bytes (no link-layer overhead), so a
//! full segment occupies 1500 bytes of line rate for 1448 of payload.
//! The qdiscs of sluice-core are deliberately not used: this tests TCP
//! against physics, not against the rest of sluice.
#![allow(dead_code)]

use sluice_core::time::{Duration, Time};
use sluice_sim::tcp::{Ecn, Segment, TcpConfig, TcpConnection};
use std::collections::VecDeque;

/// Port of sender `i`.
pub fn a_port(i: usize) -> u16 {
    10000 + i as u16
}
/// Port of receiver `i`.
pub fn b_port(i: usize) -> u16 {
    5000 + i as u16
}

/// A decision to drop a segment before it enters a link.
pub type DropFn = Box<dyn FnMut(&Segment, Time) -> bool>;

/// One direction of the dumbbell.
pub struct Link {
    pub rate_bps: u64,
    pub delay: Duration,
    pub limit: usize,
    queue: VecDeque<(Segment, Time)>,
    tx: Option<(Segment, Time)>,
    prop: VecDeque<(Time, Segment)>,
    pub drops: u64,
    pub forced_drops: u64,
    pub sent: u64,
    /// Queueing delays (enqueue to start of transmission) after `measure_from`.
    pub sojourns: Vec<Duration>,
    pub measure_from: Time,
    pub max_backlog: usize,
    pub drop_fn: Option<DropFn>,
    /// Mark ECT packets CE when this many packets are queued (a step AQM).
    pub ce_threshold: Option<usize>,
    pub ce_marked: u64,
}

impl Link {
    pub fn new(rate_bps: u64, delay: Duration, limit: usize) -> Self {
        Link {
            rate_bps,
            delay,
            limit,
            queue: VecDeque::new(),
            tx: None,
            prop: VecDeque::new(),
            drops: 0,
            forced_drops: 0,
            sent: 0,
            sojourns: Vec::new(),
            measure_from: Time::ZERO,
            max_backlog: 0,
            drop_fn: None,
            ce_threshold: None,
            ce_marked: 0,
        }
    }

    fn tx_time(&self, seg: &Segment) -> Duration {
        Duration(seg.ip_len() as u64 * 8 * 1_000_000_000 / self.rate_bps)
    }

    pub fn send(&mut self, mut seg: Segment, now: Time) {
        if let Some(f) = self.drop_fn.as_mut() {
            if f(&seg, now) {
                self.forced_drops += 1;
                return;
            }
        }
        if self.queue.len() >= self.limit {
            self.drops += 1;
            return;
        }
        let ect = matches!(seg.ecn, Ecn::Ect0 | Ecn::Ect1);
        if ect && self.ce_threshold.is_some_and(|k| self.queue.len() >= k) {
            seg.ecn = Ecn::Ce;
            self.ce_marked += 1;
        }
        self.queue.push_back((seg, now));
        self.max_backlog = self.max_backlog.max(self.queue.len());
        self.start_next(now);
    }

    fn start_next(&mut self, now: Time) {
        if self.tx.is_some() {
            return;
        }
        if let Some((seg, enq)) = self.queue.pop_front() {
            if enq >= self.measure_from {
                self.sojourns.push(now.saturating_since(enq));
            }
            let done = now + self.tx_time(&seg);
            self.tx = Some((seg, done));
        }
    }

    pub fn next_event(&self) -> Option<Time> {
        let tx = self.tx.as_ref().map(|(_, t)| *t);
        let arr = self.prop.front().map(|(t, _)| *t);
        [tx, arr].into_iter().flatten().min()
    }

    /// Move time to `now`; returns segments arriving at the far end.
    pub fn advance(&mut self, now: Time) -> Vec<Segment> {
        while let Some((_, done)) = self.tx.as_ref().map(|(s, t)| (s.clone(), *t)) {
            if done > now {
                break;
            }
            let (seg, done) = self.tx.take().unwrap();
            self.sent += 1;
            self.prop.push_back((done + self.delay, seg));
            self.start_next(done);
        }
        let mut out = Vec::new();
        while self.prop.front().is_some_and(|(t, _)| *t <= now) {
            out.push(self.prop.pop_front().unwrap().1);
        }
        out
    }

    pub fn backlog(&self) -> usize {
        self.queue.len()
    }
}

/// A recorded transmission.
#[derive(Clone, Debug)]
pub struct Trace {
    pub time: Time,
    /// true: a → b (data direction).
    pub forward: bool,
    pub seg: Segment,
}

/// One flow: when it opens and how much it sends (`u64::MAX`: forever).
#[derive(Clone, Copy, Debug)]
pub struct Flow {
    pub start: Time,
    pub bytes: u64,
}

/// The dumbbell.
pub struct Sim {
    pub now: Time,
    pub a: Vec<TcpConnection>,
    pub b: Vec<TcpConnection>,
    pub fwd: Link,
    pub rev: Link,
    pub flows: Vec<Flow>,
    written: Vec<u64>,
    opened: Vec<bool>,
    pub done_at: Vec<Option<Time>>,
    pub trace: Option<Vec<Trace>>,
    /// Sender-side RTT samples (time, latest RTT) of flow 0, when recorded.
    pub rtt_log: Vec<(Time, Duration)>,
    events: u64,
}

pub fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

pub fn secs(x: u64) -> Time {
    Time(Duration::from_secs(x).as_nanos())
}

impl Sim {
    /// `n` flows with configs from `cfg`, over links of `rate_bps`,
    /// one-way `delay`, forward queue `limit` packets.
    pub fn new(
        cfg: &TcpConfig,
        flows: Vec<Flow>,
        rate_bps: u64,
        delay: Duration,
        limit: usize,
    ) -> Self {
        let n = flows.len();
        let a = (0..n)
            .map(|i| TcpConnection::new(cfg.clone(), a_port(i), b_port(i)))
            .collect();
        let b = (0..n)
            .map(|i| {
                let mut c = TcpConnection::new(cfg.clone(), b_port(i), 0);
                c.listen();
                c
            })
            .collect();
        Sim {
            now: Time::ZERO,
            a,
            b,
            fwd: Link::new(rate_bps, delay, limit),
            rev: Link::new(rate_bps, delay, 1 << 20),
            flows,
            written: vec![0; n],
            opened: vec![false; n],
            done_at: vec![None; n],
            trace: None,
            rtt_log: Vec::new(),
            events: 0,
        }
    }

    fn feed_apps(&mut self) {
        for i in 0..self.a.len() {
            let f = self.flows[i];
            if !self.opened[i] {
                if self.now >= f.start {
                    self.opened[i] = true;
                    self.a[i].connect(self.now);
                } else {
                    continue;
                }
            }
            let want = f.bytes.saturating_sub(self.written[i]);
            if want > 0 {
                self.written[i] += self.a[i].write(want);
            }
        }
    }

    fn flush(&mut self) {
        let now = self.now;
        for c in self.a.iter_mut() {
            while let Some(seg) = c.poll_transmit(now) {
                if let Some(t) = self.trace.as_mut() {
                    t.push(Trace {
                        time: now,
                        forward: true,
                        seg: seg.clone(),
                    });
                }
                self.fwd.send(seg, now);
            }
        }
        for c in self.b.iter_mut() {
            while let Some(seg) = c.poll_transmit(now) {
                if let Some(t) = self.trace.as_mut() {
                    t.push(Trace {
                        time: now,
                        forward: false,
                        seg: seg.clone(),
                    });
                }
                self.rev.send(seg, now);
            }
        }
    }

    fn next_time(&self) -> Option<Time> {
        let conns = self
            .a
            .iter()
            .chain(self.b.iter())
            .filter_map(|c| c.poll_timeout());
        let starts = self
            .flows
            .iter()
            .zip(&self.opened)
            .filter(|(_, o)| !**o)
            .map(|(f, _)| f.start);
        [self.fwd.next_event(), self.rev.next_event()]
            .into_iter()
            .flatten()
            .chain(conns)
            .chain(starts)
            .min()
    }

    fn deliver(&mut self) {
        let now = self.now;
        for seg in self.fwd.advance(now) {
            let i = usize::from(seg.dst_port - 5000);
            self.b[i].on_segment(&seg, now);
        }
        for seg in self.rev.advance(now) {
            let i = usize::from(seg.dst_port - 10000);
            let before = self.a[i].stats().rtt_samples;
            self.a[i].on_segment(&seg, now);
            if i == 0 && self.a[0].stats().rtt_samples > before {
                if let Some(r) = self.a[0].latest_rtt() {
                    self.rtt_log.push((now, r));
                }
            }
        }
        for c in self.a.iter_mut().chain(self.b.iter_mut()) {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.on_timeout(now);
            }
        }
        for i in 0..self.b.len() {
            let f = self.flows[i];
            if self.done_at[i].is_none()
                && f.bytes != u64::MAX
                && self.b[i].stats().bytes_received >= f.bytes
            {
                self.done_at[i] = Some(now);
            }
        }
    }

    /// Run until `end` or until every finite flow is delivered.
    pub fn run(&mut self, end: Time) {
        self.run_inner(end, true);
    }

    /// Run until `end` whatever the flows do.
    pub fn run_until(&mut self, end: Time) {
        self.run_inner(end, false);
    }

    fn run_inner(&mut self, end: Time, stop_when_done: bool) {
        loop {
            self.feed_apps();
            self.flush();
            if stop_when_done && self.all_done() {
                return;
            }
            let Some(t) = self.next_time() else { return };
            if t > end {
                self.now = end;
                return;
            }
            self.now = self.now.max(t);
            self.deliver();
            self.events += 1;
            assert!(self.events < 50_000_000, "runaway simulation");
        }
    }

    fn all_done(&self) -> bool {
        self.flows
            .iter()
            .zip(&self.done_at)
            .all(|(f, d)| f.bytes != u64::MAX && d.is_some())
    }

    /// Payload goodput of flow `i` in bit/s over `[from, to]` using bytes
    /// received (caller samples `bytes_received` at `from`).
    pub fn received(&self, i: usize) -> u64 {
        self.b[i].stats().bytes_received
    }
}

/// Jain's fairness index of the throughputs.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * q)
}

pub fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 * 8.0 / d.as_secs_f64() / 1e6
}
