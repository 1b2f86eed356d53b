//! fq: the Fair Queue packet scheduler — per-flow queues served round robin
//! by byte credits, with per-flow pacing.
//!
//! Modelled on net/sched/sch_fq.c (Linux 6.18). Each flow has its own fifo
//! and a byte `credit`. A flow that becomes active joins the tail of the
//! `new_flows` list; dequeue serves the head of `new_flows`, else of
//! `old_flows`. A flow whose credit is used up gets another `quantum` (2 MTU
//! by default) and moves to the tail of `old_flows`. A brand-new flow starts
//! with `initial_quantum` (10 MTU), and a flow that was idle for longer than
//! `refill_delay` (40 ms) gets at least a fresh `quantum` when it comes back.
//! A flow found empty leaves the lists ("detached"), except that an empty
//! *new* flow first passes through `old_flows`, so that a flow cannot stay
//! ahead of everyone by sending one packet at a time. The effect is fq_codel's
//! sparse-flow priority without CoDel: a flow that never builds a queue is
//! new whenever it has a packet and waits only for the packet in flight.
//!
//! Pacing: each flow has `time_next_packet`. When the head packet of the
//! flow being served may not leave yet, the flow is taken off its list and
//! put on the `delayed` set ("throttled"), ordered by that time; dequeue
//! first returns every throttled flow whose time has come to `old_flows`.
//! When nothing can be sent but flows are throttled, dequeue answers
//! [`Dequeue::Wait`] with the earliest `time_next_packet` (the kernel arms
//! its watchdog there, within `timer_slack`). With `maxrate`, a flow's
//! `time_next_packet` advances by `len / maxrate` after each packet; for a
//! packet without a departure time the length charged is at least one
//! `quantum` and the time advances only once the flow's credit is spent
//! (pacing by quantum-sized bursts), unless the rate is at or below
//! `low_rate_threshold`, where every packet is paced. A delay is clamped to
//! one second (`pkts_too_long`), and up to half of it is forgiven when the
//! dequeue comes late. A packet that carries an earliest departure time
//! (EDT) waits for it; one stamped beyond `horizon` (10 s) is dropped
//! (`horizon_drop`, the default) or has its time capped at the horizon
//! (`horizon_cap`). A packet sent later than `ce_threshold` after its
//! scheduled time is CE-marked.
//!
//! Limits: `flow_limit` (100) packets per flow, and (since Linux 6.7)
//! `limit` (10000) packets per *band*: packets are sorted into three bands
//! by `skb->priority` through the default priomap (`sch_default_prio2band`,
//! pfifo_fast's), and the bands share the link by weighted round robin with
//! weights 589824, 196608 and 65536 bytes. The bands' priomap and weights
//! are not configurable here, as iproute2 6.1 cannot send them.
//!
//! Fast path (Linux 6.7): a packet due now that arrives when the qdisc is
//! empty, or when no flow could send anyway and the fast queue holds fewer
//! than 8 packets, skips the flow machinery and goes to an internal fifo
//! served before everything else (not with `maxrate`).
//!
//! Flows are found through a hash table of `2^buckets_log` buckets. The
//! kernel keys a flow by its socket; packets here have no socket — they are
//! forwarded traffic, as on a router — so, exactly as the kernel does for
//! orphaned packets, the key is the flow hash masked with `orphan_mask`
//! (1023: at most 1024 flows), and no per-socket pacing rate exists
//! (`maxrate` is the only rate). Empty flows stay in the table, detached; a
//! lookup frees detached flows of its bucket idle for more than 3 s
//! (`gc_flows`), and so does a change of `buckets`.
//!
//! Invariants: every flow is in exactly one of: detached, `new_flows` or
//! `old_flows` of one band, or `delayed`; `flows - inactive_flows` is the
//! number of flows holding packets; the bands' packet counts plus the fast
//! queue's add up to `qlen`.
//!
//! Deviations: sluice's devices stamp every packet with its arrival time, so
//! `Packet::tstamp` counts as an EDT only when it lies in the future at
//! enqueue; otherwise the packet is treated as the kernel treats a forwarded
//! packet (`skb->tstamp == 0`). The kernel's lookup collects idle flows only
//! on the red-black tree path it walks; here the whole bucket is swept.
//! `jiffies` run at HZ = 1000 (as for sfq). `change` validates everything
//! before applying anything (the kernel applies attributes one by one and
//! may keep some of a refused request). Packets `change` trims to a lower
//! limit are counted as drops (the kernel dequeues them through fq and so
//! counts them as sent), reported as fq_codel does. `next_packet_delay` in
//! the statistics is relative to the last enqueue or dequeue. fq has no
//! classes, so trimmed packets leave the parents' backlog at the next
//! enqueue or dequeue rather than at once.

use super::pfifo_fast::PRIO2BAND;
use super::{flow_hash, wrong_kind, Cx, Dequeue, DevInfo, Qdisc, QdiscOpts, XStats};
use crate::error::{Errno, TcError, TcResult};
use crate::packet::Packet;
use crate::stats::DropReason;
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Bands (`FQ_BANDS`).
pub const FQ_BANDS: usize = 3;
/// Idle time after which a detached flow may be freed, in jiffies (`FQ_GC_AGE`, 3 s).
const FQ_GC_AGE: u64 = 3 * HZ;
/// Jiffies per second assumed.
const HZ: u64 = 1000;
/// The largest `buckets_log` (`ilog2(256 * 1024)`).
const FQ_MAX_BUCKETS_LOG: u32 = 18;
/// `GOLDEN_RATIO_64` of `hash_64`.
const GOLDEN_RATIO_64: u64 = 0x61C8_8646_80B5_83EB;
/// No throttled flow (`~0ULL`).
const NEVER: u64 = u64::MAX;
/// The default band weights (`9 << 16`, `3 << 16`, `1 << 16`).
const BAND_WEIGHTS: [i32; FQ_BANDS] = [9 << 16, 3 << 16, 1 << 16];
/// Packets the fast-path queue may hold while other packets are queued.
const FASTPATH_MAX: u32 = 8;

/// The `TCA_FQ_*` attributes: what tc sends and the kernel dumps. Absent
/// attributes leave the current value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqOpts {
    /// Packets per band (`TCA_FQ_PLIMIT`).
    pub limit: Option<u32>,
    /// Packets per flow (`TCA_FQ_FLOW_PLIMIT`).
    pub flow_limit: Option<u32>,
    /// Bytes of credit per round, 1..=2^20 (`TCA_FQ_QUANTUM`).
    pub quantum: Option<u32>,
    /// Credit of a new flow, at most `i32::MAX` (`TCA_FQ_INITIAL_QUANTUM`).
    pub initial_quantum: Option<u32>,
    /// Pacing on (1) or off (0) (`TCA_FQ_RATE_ENABLE`).
    pub pacing: Option<u32>,
    /// Most bytes per second of one flow; `u32::MAX` = unlimited (`TCA_FQ_FLOW_MAX_RATE`).
    pub maxrate: Option<u32>,
    /// Ignored by the kernel, never dumped (`TCA_FQ_FLOW_DEFAULT_RATE`).
    pub defrate: Option<u32>,
    /// log2 of the hash buckets, 1..=18 (`TCA_FQ_BUCKETS_LOG`).
    pub buckets_log: Option<u32>,
    /// Idle time after which a returning flow gets a fresh quantum, µs
    /// (`TCA_FQ_FLOW_REFILL_DELAY`; kept in jiffies).
    pub refill_delay: Option<u32>,
    /// Mask applied to the flow hash of packets without a socket (`TCA_FQ_ORPHAN_MASK`).
    pub orphan_mask: Option<u32>,
    /// Rate (bytes/s) at or below which every packet is paced (`TCA_FQ_LOW_RATE_THRESHOLD`).
    pub low_rate_threshold: Option<u32>,
    /// Lateness after which packets are CE-marked, µs; `u32::MAX` = never (`TCA_FQ_CE_THRESHOLD`).
    pub ce_threshold: Option<u32>,
    /// Slack of the pacing timer, ns (`TCA_FQ_TIMER_SLACK`).
    pub timer_slack: Option<u32>,
    /// How far in the future a departure time may lie, µs (`TCA_FQ_HORIZON`).
    pub horizon: Option<u32>,
    /// Drop (true) or cap (false) packets beyond the horizon (`TCA_FQ_HORIZON_DROP`).
    pub horizon_drop: Option<bool>,
}

/// `struct tc_fq_qd_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqXstats {
    /// Detached flows freed.
    pub gc_flows: u64,
    /// Always 0 since Linux 6.7.
    pub highprio_packets: u64,
    /// Always 0.
    pub tcp_retrans: u64,
    /// Times a flow was throttled.
    pub throttled: u64,
    /// Packets dropped for `flow_limit`.
    pub flows_plimit: u64,
    /// Packets whose pacing delay was clamped to 1 s.
    pub pkts_too_long: u64,
    /// Flows that could not be allocated (never, here).
    pub allocation_errors: u64,
    /// Nanoseconds (plus timer slack) to the next throttled flow's time;
    /// negative when none.
    pub time_next_delayed_flow: i64,
    /// Flows in the table.
    pub flows: u32,
    /// Of those, flows without packets.
    pub inactive_flows: u32,
    /// Of those, flows waiting for their pacing time.
    pub throttled_flows: u32,
    /// EWMA of how late throttled flows were released, ns.
    pub unthrottle_latency_ns: u32,
    /// Packets CE-marked above `ce_threshold`.
    pub ce_mark: u64,
    /// Packets dropped beyond the horizon.
    pub horizon_drops: u64,
    /// Packets whose departure time was capped at the horizon.
    pub horizon_caps: u64,
    /// Packets that took the fast path.
    pub fastpath_packets: u64,
    /// Packets dropped because their band was full.
    pub band_drops: [u64; FQ_BANDS],
    /// Packets queued per band.
    pub band_pkt_count: [u32; FQ_BANDS],
}

/// Validated parameters (`struct fq_sched_data`'s read-mostly part).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FqParams {
    limit: u32,
    flow_plimit: u32,
    quantum: u32,
    initial_quantum: u32,
    /// Jiffies.
    flow_refill_delay: u64,
    /// Bytes per second; `u64::MAX` = unlimited.
    flow_max_rate: u64,
    low_rate_threshold: u32,
    rate_enable: bool,
    orphan_mask: u32,
    /// Nanoseconds.
    ce_threshold: u64,
    /// Nanoseconds.
    timer_slack: u32,
    /// Nanoseconds.
    horizon: u64,
    horizon_drop: bool,
    trees_log: u32,
}

/// `usecs_to_jiffies` at HZ = 1000 (rounds up).
fn usecs_to_jiffies(us: u32) -> u64 {
    (us as u64).div_ceil(1000)
}

/// `jiffies_to_usecs` at HZ = 1000 (an `unsigned int`: wraps).
fn jiffies_to_usecs(j: u64) -> u32 {
    (j as u32).wrapping_mul(1000)
}

/// `hash_64(val, bits)`, which `hash_ptr` is on 64-bit machines.
fn hash_64(val: u64, bits: u32) -> usize {
    (val.wrapping_mul(GOLDEN_RATIO_64) >> (64 - bits)) as usize
}

impl FqParams {
    /// `fq_init`'s defaults.
    fn defaults(dev: &DevInfo) -> Self {
        let mtu = dev.mtu.saturating_add(dev.hard_header_len);
        FqParams {
            limit: 10_000,
            flow_plimit: 100,
            quantum: 2 * mtu,
            initial_quantum: 10 * mtu,
            flow_refill_delay: 40 * HZ / 1000,
            flow_max_rate: u64::MAX,
            low_rate_threshold: 550_000 / 8,
            rate_enable: true,
            orphan_mask: 1024 - 1,
            ce_threshold: 1000 * u32::MAX as u64,
            timer_slack: 10_000,
            horizon: 10_000_000_000,
            horizon_drop: true,
            trees_log: 10,
        }
    }

    /// `fq_change`: validate every attribute, then apply them to a copy.
    fn with(&self, o: &FqOpts) -> TcResult<Self> {
        let mut p = *self;
        if let Some(log) = o.buckets_log {
            if !(1..=FQ_MAX_BUCKETS_LOG).contains(&log) {
                return Err(TcError::errno(Errno::EINVAL));
            }
            p.trees_log = log;
        }
        if o.initial_quantum.is_some_and(|q| q > i32::MAX as u32) {
            // The netlink policy's range check, before fq_change runs.
            return Err(TcError::inval("integer out of range"));
        }
        if let Some(q) = o.quantum {
            if q == 0 || q > 1 << 20 {
                return Err(TcError::inval("sch_fq: invalid quantum"));
            }
            p.quantum = q;
        }
        if let Some(e) = o.pacing {
            if e > 1 {
                return Err(TcError::errno(Errno::EINVAL));
            }
            p.rate_enable = e == 1;
        }
        if let Some(l) = o.limit {
            p.limit = l;
        }
        if let Some(l) = o.flow_limit {
            p.flow_plimit = l;
        }
        if let Some(q) = o.initial_quantum {
            p.initial_quantum = q;
        }
        if let Some(r) = o.maxrate {
            p.flow_max_rate = if r == u32::MAX { u64::MAX } else { r as u64 };
        }
        if let Some(r) = o.low_rate_threshold {
            p.low_rate_threshold = r;
        }
        if let Some(d) = o.refill_delay {
            p.flow_refill_delay = usecs_to_jiffies(d);
        }
        if let Some(m) = o.orphan_mask {
            p.orphan_mask = m;
        }
        if let Some(c) = o.ce_threshold {
            p.ce_threshold = 1000 * c as u64;
        }
        if let Some(s) = o.timer_slack {
            p.timer_slack = s;
        }
        if let Some(h) = o.horizon {
            p.horizon = 1000 * h as u64;
        }
        if let Some(d) = o.horizon_drop {
            p.horizon_drop = d;
        }
        Ok(p)
    }
}

/// What fq keeps beside a queued packet (`struct fq_skb_cb`).
#[derive(Debug)]
struct Queued {
    /// When the packet may leave, ns.
    time_to_send: u64,
    band: u8,
    /// It carried a departure time (the kernel's non-zero `skb->tstamp`).
    edt: bool,
    pkt: Packet,
}

/// A flow's packets: a fifo for packets in departure-time order, and a
/// sorted map for those that arrive with an earlier time than the fifo's
/// tail (`flow_queue_add`'s linear list and red-black tree).
#[derive(Debug, Default)]
struct PktQueue {
    head: VecDeque<Queued>,
    tree: BTreeMap<(u64, u64), Queued>,
}

impl PktQueue {
    /// `flow_queue_add`; `seq` keeps equal times in arrival order.
    fn add(&mut self, q: Queued, seq: u64) {
        match self.head.back() {
            Some(tail) if q.time_to_send < tail.time_to_send => {
                self.tree.insert((q.time_to_send, seq), q);
            }
            _ => self.head.push_back(q),
        }
    }

    /// `fq_peek`: the earlier of the tree's first and the fifo's head.
    fn peek(&self) -> Option<&Queued> {
        let h = self.head.front();
        match (self.tree.values().next(), h) {
            (Some(t), Some(h)) if t.time_to_send < h.time_to_send => Some(t),
            (Some(t), None) => Some(t),
            (_, h) => h,
        }
    }

    /// Take what [`PktQueue::peek`] shows.
    fn pop(&mut self) -> Option<Queued> {
        let from_tree = match (self.tree.keys().next(), self.head.front()) {
            (Some(k), Some(h)) => k.0 < h.time_to_send,
            (Some(_), None) => true,
            _ => false,
        };
        if from_tree {
            self.tree.pop_first().map(|(_, q)| q)
        } else {
            self.head.pop_front()
        }
    }

    fn clear(&mut self) {
        self.head.clear();
        self.tree.clear();
    }
}

/// Where a flow is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Where {
    /// On no list; `age` says since when.
    Detached,
    New,
    Old,
    /// On the `delayed` set.
    Throttled,
}

/// `struct fq_flow`.
#[derive(Debug)]
struct Flow {
    /// The socket key: `(hash & orphan_mask) << 1 | 1`.
    key: u64,
    q: PktQueue,
    qlen: u32,
    credit: i32,
    band: u8,
    /// ns; 0 = never sent.
    time_next_packet: u64,
    at: Where,
    /// `jiffies | 1` when the flow was detached.
    age: u64,
}

/// One band's lists (`struct fq_perband_flows`).
#[derive(Debug, Default)]
struct Band {
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    credit: i32,
    quantum: i32,
}

/// An fq qdisc.
#[derive(Debug)]
pub struct Fq {
    p: FqParams,
    hashrnd: u32,
    /// Flow slots; `None` when free.
    slab: Vec<Option<Flow>>,
    free: Vec<u32>,
    /// The hash table: flow slots per bucket.
    buckets: Vec<Vec<u32>>,
    bands: [Band; FQ_BANDS],
    band_nr: usize,
    /// The fast-path queue (`q->internal`).
    internal: PktQueue,
    internal_qlen: u32,
    /// Throttled flows by `(time_next_packet, seq)`.
    delayed: BTreeSet<(u64, u64, u32)>,
    time_next_delayed_flow: u64,
    unthrottle_latency_ns: u64,
    band_pkt_count: [u32; FQ_BANDS],
    flows: u32,
    inactive_flows: u32,
    throttled_flows: u32,
    qlen: u32,
    seq: u64,
    st: FqXstats,
    /// The time of the last enqueue or dequeue.
    now: Time,
    /// Packets `change` dropped, not yet reported.
    purged: Vec<(DropReason, u32)>,
}

impl Fq {
    /// `fq_init`: defaults, then the options.
    pub fn new(opts: &FqOpts, dev: &DevInfo) -> TcResult<Self> {
        let p = FqParams::defaults(dev).with(opts)?;
        let s = dev.seed ^ 0x0f0f_fa1e_5eed_0f0f;
        let mut bands: [Band; FQ_BANDS] = Default::default();
        for (b, w) in bands.iter_mut().zip(BAND_WEIGHTS) {
            b.quantum = w;
        }
        Ok(Fq {
            p,
            hashrnd: (s ^ (s >> 32)) as u32,
            slab: Vec::new(),
            free: Vec::new(),
            buckets: vec![Vec::new(); 1 << p.trees_log],
            bands,
            band_nr: 0,
            internal: PktQueue::default(),
            internal_qlen: 0,
            delayed: BTreeSet::new(),
            time_next_delayed_flow: NEVER,
            unthrottle_latency_ns: 0,
            band_pkt_count: [0; FQ_BANDS],
            flows: 0,
            inactive_flows: 0,
            throttled_flows: 0,
            qlen: 0,
            seq: 0,
            st: FqXstats::default(),
            now: Time::ZERO,
            purged: Vec::new(),
        })
    }

    fn flow(&mut self, i: u32) -> &mut Flow {
        self.slab[i as usize].as_mut().expect("live flow")
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// `fq_flow_add_tail`: onto the band's new or old list.
    fn add_tail(&mut self, i: u32, new: bool) {
        let f = self.flow(i);
        f.at = if new { Where::New } else { Where::Old };
        let band = &mut self.bands[f.band as usize];
        if new {
            band.new_flows.push_back(i);
        } else {
            band.old_flows.push_back(i);
        }
    }

    /// `fq_flow_set_throttled`.
    fn set_throttled(&mut self, i: u32) {
        let seq = self.next_seq();
        let f = self.flow(i);
        f.at = Where::Throttled;
        let t = f.time_next_packet;
        self.delayed.insert((t, seq, i));
        self.throttled_flows += 1;
        self.st.throttled += 1;
        self.time_next_delayed_flow = self.time_next_delayed_flow.min(t);
    }

    /// `fq_check_throttled`: release the flows whose time has come.
    fn check_throttled(&mut self, now: u64) {
        if self.time_next_delayed_flow > now {
            return;
        }
        let sample = now.wrapping_sub(self.time_next_delayed_flow);
        if (sample as i64) > 0 {
            self.unthrottle_latency_ns -= self.unthrottle_latency_ns >> 3;
            self.unthrottle_latency_ns = self.unthrottle_latency_ns.wrapping_add(sample >> 3);
        }
        self.time_next_delayed_flow = NEVER;
        while let Some(&(t, seq, i)) = self.delayed.first() {
            if t > now {
                self.time_next_delayed_flow = t;
                break;
            }
            self.delayed.remove(&(t, seq, i));
            self.throttled_flows -= 1;
            self.add_tail(i, false);
        }
    }

    /// Is the flow detached and idle long enough to be freed (`fq_gc_candidate`)?
    fn gc_candidate(f: &Flow, jiffies: u64) -> bool {
        f.at == Where::Detached && jiffies_after(jiffies, f.age.wrapping_add(FQ_GC_AGE))
    }

    /// `fq_gc`: free the bucket's idle detached flows other than `key`'s.
    fn gc(&mut self, bucket: usize, key: u64, jiffies: u64) {
        let mut freed = 0;
        let mut k = 0;
        while k < self.buckets[bucket].len() {
            let i = self.buckets[bucket][k];
            let f = self.slab[i as usize].as_ref().expect("live flow");
            if f.key != key && Self::gc_candidate(f, jiffies) {
                self.buckets[bucket].swap_remove(k);
                self.slab[i as usize] = None;
                self.free.push(i);
                freed += 1;
            } else {
                k += 1;
            }
        }
        self.flows -= freed;
        self.inactive_flows -= freed;
        self.st.gc_flows += freed as u64;
    }

    /// `fq_fastpath_check`.
    fn fastpath_ok(&self, time_to_send: u64, now: u64) -> bool {
        if time_to_send > now {
            return false;
        }
        if self.qlen != 0
            && (self.flows != self.inactive_flows + self.throttled_flows
                || self.internal_qlen >= FASTPATH_MAX
                || self.time_next_delayed_flow <= now)
        {
            return false;
        }
        self.p.flow_max_rate == u64::MAX
    }

    /// `fq_classify`: the flow slot, or `None` for the fast path.
    fn classify(&mut self, pkt: &mut Packet, time_to_send: u64, now: u64) -> Option<u32> {
        if pkt.hash == 0 {
            // skb_get_hash computes the hash once and keeps it.
            pkt.hash = flow_hash::flow_hash(pkt, self.hashrnd);
        }
        // An orphaned packet: the key is odd, so it never equals a socket.
        let key = (((pkt.hash & self.p.orphan_mask) as u64) << 1) | 1;
        if self.fastpath_ok(time_to_send, now) {
            self.st.fastpath_packets += 1;
            return None;
        }
        let bucket = hash_64(key, self.p.trees_log);
        let jiffies = now / (1_000_000_000 / HZ);
        self.gc(bucket, key, jiffies);
        for &i in &self.buckets[bucket] {
            if self.slab[i as usize].as_ref().is_some_and(|f| f.key == key) {
                return Some(i);
            }
        }
        let f = Flow {
            key,
            q: PktQueue::default(),
            qlen: 0,
            credit: self.p.initial_quantum as i32,
            band: 0,
            time_next_packet: 0,
            at: Where::Detached,
            age: jiffies | 1,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.slab[i as usize] = Some(f);
                i
            }
            None => {
                self.slab.push(Some(f));
                (self.slab.len() - 1) as u32
            }
        };
        self.buckets[bucket].push(i);
        self.flows += 1;
        self.inactive_flows += 1;
        Some(i)
    }

    /// `fq_dequeue` without the reporting.
    fn dequeue_one(&mut self, now: u64) -> Option<Packet> {
        if self.qlen == 0 {
            return None;
        }
        if let Some(q) = self.internal.pop() {
            self.internal_qlen -= 1;
            self.qlen -= 1;
            return Some(q.pkt);
        }
        self.check_throttled(now);
        let mut retry = 0;
        loop {
            let b = self.band_nr;
            let band = &self.bands[b];
            let head = if band.credit <= 0 {
                None
            } else if let Some(&i) = band.new_flows.front() {
                Some((i, true))
            } else {
                band.old_flows.front().map(|&i| (i, false))
            };
            let Some((i, from_new)) = head else {
                retry += 1;
                let mut found = false;
                while retry <= FQ_BANDS {
                    self.band_nr = (self.band_nr + 1) % FQ_BANDS;
                    let band = &mut self.bands[self.band_nr];
                    band.credit = band.credit.saturating_add(band.quantum).min(band.quantum);
                    if band.credit > 0 {
                        found = true;
                        break;
                    }
                    retry = 1;
                }
                if found {
                    continue;
                }
                return None;
            };
            retry = 0;
            let quantum = self.p.quantum as i32;
            let pop = |s: &mut Self| {
                let band = &mut s.bands[b];
                if from_new {
                    band.new_flows.pop_front();
                } else {
                    band.old_flows.pop_front();
                }
            };
            let f = self.flow(i);
            if f.credit <= 0 {
                f.credit = f.credit.wrapping_add(quantum);
                pop(self);
                self.add_tail(i, false);
                continue;
            }
            let Some(head) = f.q.peek() else {
                pop(self);
                // Force a pass through old_flows to prevent starvation.
                if from_new {
                    self.add_tail(i, false);
                } else {
                    let f = self.flow(i);
                    f.at = Where::Detached;
                    f.age = (now / (1_000_000_000 / HZ)) | 1;
                }
                continue;
            };
            let time_next_packet = head.time_to_send.max(f.time_next_packet);
            if now < time_next_packet {
                f.time_next_packet = time_next_packet;
                pop(self);
                self.set_throttled(i);
                continue;
            }
            let q = f.q.pop().expect("peeked");
            f.qlen -= 1;
            let emptied = f.qlen == 0;
            let mut pkt = q.pkt;
            self.qlen -= 1;
            if (now
                .wrapping_sub(time_next_packet)
                .wrapping_sub(self.p.ce_threshold) as i64)
                > 0
            {
                // Counted whether or not the packet could carry the mark.
                pkt.set_ce();
                self.st.ce_mark += 1;
            }
            if emptied {
                self.inactive_flows += 1;
            }
            self.band_pkt_count[q.band as usize] -= 1;
            let mut plen = pkt.len;
            let f = self.flow(i);
            f.credit = f.credit.wrapping_sub(plen as i32);
            self.bands[b].credit = self.bands[b].credit.wrapping_sub(plen as i32);
            if !self.p.rate_enable {
                return Some(pkt);
            }
            let rate = self.p.flow_max_rate;
            let f = self.slab[i as usize].as_mut().expect("live flow");
            if !q.edt {
                if rate <= self.p.low_rate_threshold as u64 {
                    f.credit = 0;
                } else {
                    plen = plen.max(self.p.quantum);
                    if f.credit > 0 {
                        return Some(pkt);
                    }
                }
            }
            if rate != u64::MAX {
                // A zero rate divides nothing (the kernel skips the division).
                let ns_bytes = plen as u64 * 1_000_000_000;
                let mut len = ns_bytes.checked_div(rate).unwrap_or(ns_bytes);
                // The socket's rate may change later: clamp to one second.
                if len > 1_000_000_000 {
                    len = 1_000_000_000;
                    self.st.pkts_too_long += 1;
                }
                // Forgive part of a late dequeue.
                if f.time_next_packet != 0 {
                    len -= (len / 2).min(now.wrapping_sub(f.time_next_packet));
                }
                f.time_next_packet = now + len;
            }
            return Some(pkt);
        }
    }

    /// Report the packets `change` dropped.
    #[inline]
    fn flush_purged(&mut self, cx: &mut Cx) {
        if self.purged.is_empty() {
            return;
        }
        for (reason, len) in self.purged.drain(..) {
            cx.shed(len, reason);
        }
    }

    /// Rebuild the hash table with `2^log` buckets (`fq_resize` + `fq_rehash`),
    /// freeing idle detached flows.
    fn resize(&mut self, log: u32) {
        if log == self.p.trees_log && !self.buckets.is_empty() {
            return;
        }
        let jiffies = self.now.0 / (1_000_000_000 / HZ);
        let mut buckets = vec![Vec::new(); 1 << log];
        let mut freed = 0;
        for i in std::mem::take(&mut self.buckets).into_iter().flatten() {
            let f = self.slab[i as usize].as_ref().expect("live flow");
            if Self::gc_candidate(f, jiffies) {
                self.slab[i as usize] = None;
                self.free.push(i);
                freed += 1;
                continue;
            }
            buckets[hash_64(f.key, log)].push(i);
        }
        self.buckets = buckets;
        self.flows -= freed;
        self.inactive_flows -= freed;
        self.st.gc_flows += freed as u64;
    }
}

/// `time_after(a, b)` on jiffies.
fn jiffies_after(a: u64, b: u64) -> bool {
    (b.wrapping_sub(a) as i64) < 0
}

impl Qdisc for Fq {
    /// `fq_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.flush_purged(cx);
        self.now = cx.now;
        let now = cx.now.0;
        let band = PRIO2BAND[(pkt.priority & 15) as usize];
        if self.band_pkt_count[band as usize] >= self.p.limit {
            self.st.band_drops[band as usize] += 1;
            return Err((pkt, DropReason::QueueFull));
        }
        let edt = pkt.tstamp.0 > now;
        let time_to_send = if !edt {
            now
        } else {
            if pkt.tstamp.0 > now.saturating_add(self.p.horizon) {
                if self.p.horizon_drop {
                    self.st.horizon_drops += 1;
                    return Err((pkt, DropReason::QueueFull));
                }
                self.st.horizon_caps += 1;
                pkt.tstamp = Time(now.saturating_add(self.p.horizon));
            }
            pkt.tstamp.0
        };
        let seq = self.next_seq();
        let Some(i) = self.classify(&mut pkt, time_to_send, now) else {
            self.internal.add(
                Queued {
                    time_to_send,
                    band,
                    edt,
                    pkt,
                },
                seq,
            );
            self.internal_qlen += 1;
            self.qlen += 1;
            return Ok(());
        };
        let (plimit, quantum, refill) = (
            self.p.flow_plimit,
            self.p.quantum as i32,
            self.p.flow_refill_delay,
        );
        if self.flow(i).qlen >= plimit {
            self.st.flows_plimit += 1;
            return Err((pkt, DropReason::QueueFull));
        }
        if self.flow(i).at == Where::Detached {
            // The list is chosen by the band the flow had before this packet.
            self.add_tail(i, true);
            let jiffies = now / (1_000_000_000 / HZ);
            let f = self.flow(i);
            if jiffies_after(jiffies, f.age.wrapping_add(refill)) {
                f.credit = f.credit.max(quantum);
            }
        }
        let f = self.flow(i);
        f.band = band;
        let was_empty = f.qlen == 0;
        f.qlen += 1;
        f.q.add(
            Queued {
                time_to_send,
                band,
                edt,
                pkt,
            },
            seq,
        );
        self.band_pkt_count[band as usize] += 1;
        if was_empty {
            self.inactive_flows -= 1;
        }
        self.qlen += 1;
        Ok(())
    }

    /// `fq_dequeue`: a packet, or when the first throttled flow may send.
    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.flush_purged(cx);
        self.now = cx.now;
        match self.dequeue_one(cx.now.0) {
            Some(p) => Dequeue::Packet(p),
            None if self.time_next_delayed_flow != NEVER && self.qlen > 0 => {
                Dequeue::Wait(Time(self.time_next_delayed_flow))
            }
            None => Dequeue::Empty,
        }
    }

    /// `fq_reset`: every flow is freed.
    fn reset(&mut self) {
        self.internal.clear();
        self.internal_qlen = 0;
        self.slab.clear();
        self.free.clear();
        for b in &mut self.buckets {
            b.clear();
        }
        for b in &mut self.bands {
            b.new_flows.clear();
            b.old_flows.clear();
        }
        self.delayed.clear();
        self.flows = 0;
        self.inactive_flows = 0;
        self.throttled_flows = 0;
        self.band_pkt_count = [0; FQ_BANDS];
        self.qlen = 0;
        self.purged.clear();
    }

    /// `fq_change`: validate, apply, resize the table, then trim to the limit.
    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Fq(o) = opts else {
            return Err(wrong_kind("fq", opts));
        };
        let p = self.p.with(o)?;
        let old_log = self.p.trees_log;
        self.p = FqParams {
            trees_log: old_log,
            ..p
        };
        self.resize(p.trees_log);
        self.p.trees_log = p.trees_log;
        let now = self.now.0;
        while self.qlen > self.p.limit {
            let Some(pkt) = self.dequeue_one(now) else {
                break;
            };
            self.purged.push((DropReason::QueueFull, pkt.len));
        }
        Ok(())
    }

    /// `fq_dump`, as far as iproute2 6.1 reads it.
    fn dump(&self) -> QdiscOpts {
        let p = &self.p;
        QdiscOpts::Fq(FqOpts {
            limit: Some(p.limit),
            flow_limit: Some(p.flow_plimit),
            quantum: Some(p.quantum),
            initial_quantum: Some(p.initial_quantum),
            pacing: Some(p.rate_enable as u32),
            maxrate: Some(p.flow_max_rate.min(u32::MAX as u64) as u32),
            defrate: None,
            buckets_log: Some(p.trees_log),
            refill_delay: Some(jiffies_to_usecs(p.flow_refill_delay)),
            orphan_mask: Some(p.orphan_mask),
            low_rate_threshold: Some(p.low_rate_threshold),
            ce_threshold: Some((p.ce_threshold / 1000) as u32),
            timer_slack: Some(p.timer_slack),
            horizon: Some((p.horizon / 1000) as u32),
            horizon_drop: Some(p.horizon_drop),
        })
    }

    /// `fq_dump_stats`.
    fn xstats(&self) -> XStats {
        // With no throttled flow the kernel's sum wraps to a negative
        // number (its clock counts from boot); say so directly.
        let next = match self.time_next_delayed_flow {
            NEVER => -1,
            t => t
                .wrapping_add(self.p.timer_slack as u64)
                .wrapping_sub(self.now.0) as i64,
        };
        XStats::Fq(FqXstats {
            time_next_delayed_flow: next,
            flows: self.flows,
            inactive_flows: self.inactive_flows,
            throttled_flows: self.throttled_flows,
            unthrottle_latency_ns: self.unthrottle_latency_ns.min(u32::MAX as u64) as u32,
            band_pkt_count: self.band_pkt_count,
            ..self.st
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;
    use crate::packet::Skb;
    use crate::qdisc::codel_law::testing::{drain, pkt};
    use crate::qdisc::QdiscNode;
    use proptest::prelude::*;

    const H: Handle = Handle::new(1, 0);
    const MS: u64 = 1_000_000;

    fn node(o: FqOpts) -> QdiscNode {
        QdiscNode::new(
            H,
            Handle::ROOT,
            Box::new(Fq::new(&o, &DevInfo::default()).unwrap()),
        )
    }

    fn xstats(n: &QdiscNode) -> FqXstats {
        match n.qdisc.xstats() {
            XStats::Fq(x) => x,
            other => panic!("{other:?}"),
        }
    }

    fn dump(n: &QdiscNode) -> FqOpts {
        match n.qdisc.dump() {
            QdiscOpts::Fq(o) => o,
            other => panic!("{other:?}"),
        }
    }

    /// Flow `f`'s packet with an explicit hash (so flows never collide).
    fn fp(f: u32, seq: u32, len: u32) -> Packet {
        Packet::from(Skb {
            hash: f + 1,
            ..pkt(f, seq, len, 0).into_skb()
        })
    }

    /// Drive a backlogged qdisc as a device would: dequeue whenever
    /// allowed, sleeping until `Wait` times; refill each flow from `refill`.
    /// Returns bytes sent per flow (by `id / 1_000_000`) after `warm` up to `until`.
    fn run(
        n: &mut QdiscNode,
        flows: &[(u32, u32)],
        link_ns_per_byte: u64,
        warm: u64,
        until: u64,
    ) -> Vec<u64> {
        let mut t = 0u64;
        let mut seq = vec![0u32; flows.len()];
        let mut bytes = vec![0u64; flows.len()];
        let mut cx = Cx::new(Time(0));
        for (k, &(f, len)) in flows.iter().enumerate() {
            for _ in 0..20 {
                n.enqueue(fp(f, seq[k], len), &mut cx).unwrap();
                seq[k] += 1;
            }
        }
        while t < until {
            let mut cx = Cx::new(Time(t));
            match n.dequeue(&mut cx) {
                Dequeue::Packet(p) => {
                    let k = flows
                        .iter()
                        .position(|&(f, _)| f as u64 == p.id / 1_000_000)
                        .unwrap();
                    if t >= warm {
                        bytes[k] += p.len as u64;
                    }
                    t += p.len as u64 * link_ns_per_byte;
                    let (f, len) = flows[k];
                    n.enqueue(fp(f, seq[k], len), &mut Cx::new(Time(t)))
                        .unwrap();
                    seq[k] += 1;
                }
                Dequeue::Wait(w) => {
                    assert!(w.0 > t, "a wait in the past");
                    t = w.0;
                }
                Dequeue::Empty => panic!("a backlogged qdisc ran dry"),
            }
        }
        bytes
    }

    #[test]
    fn defaults_as_the_kernel_dumps_them() {
        // tc-testing fq.json 983b and q_fq.c's example output:
        // quantum 3028b initial_quantum 15140b for a 1500-byte MTU.
        let o = dump(&node(FqOpts::default()));
        assert_eq!(
            o,
            FqOpts {
                limit: Some(10000),
                flow_limit: Some(100),
                quantum: Some(3028),
                initial_quantum: Some(15140),
                pacing: Some(1),
                maxrate: Some(u32::MAX),
                defrate: None,
                buckets_log: Some(10),
                refill_delay: Some(40_000),
                orphan_mask: Some(1023),
                low_rate_threshold: Some(68_750),
                ce_threshold: Some(u32::MAX),
                timer_slack: Some(10_000),
                horizon: Some(10_000_000),
                horizon_drop: Some(true),
            }
        );
        // Printing and parsing back give the same qdisc.
        let again = Fq::new(&o, &DevInfo::default()).unwrap().dump();
        assert_eq!(again, QdiscOpts::Fq(o));
    }

    #[test]
    fn validation_as_the_kernel() {
        let bad = |o: FqOpts| Fq::new(&o, &DevInfo::default()).unwrap_err();
        // tc-testing 10f7: initial_quantum above INT_MAX.
        let e = bad(FqOpts {
            initial_quantum: Some(0x8000_0000),
            ..Default::default()
        });
        assert_eq!(e.extack.as_deref(), Some("integer out of range"));
        for q in [0, (1 << 20) + 1] {
            let e = bad(FqOpts {
                quantum: Some(q),
                ..Default::default()
            });
            assert_eq!(e.extack.as_deref(), Some("sch_fq: invalid quantum"));
        }
        for log in [0, 19] {
            let e = bad(FqOpts {
                buckets_log: Some(log),
                ..Default::default()
            });
            assert_eq!((e.errno, e.extack), (Errno::EINVAL, None));
        }
        assert_eq!(
            bad(FqOpts {
                pacing: Some(2),
                ..Default::default()
            })
            .errno,
            Errno::EINVAL
        );
        // A refused change changes nothing.
        let mut n = node(FqOpts::default());
        let o = QdiscOpts::Fq(FqOpts {
            limit: Some(5),
            quantum: Some(0),
            ..Default::default()
        });
        assert!(n.qdisc.change(&o, &DevInfo::default()).is_err());
        assert_eq!(dump(&n).limit, Some(10000));
        // refill_delay is kept in jiffies (HZ 1000): 1500 us becomes 2 ms.
        let n = node(FqOpts {
            refill_delay: Some(1500),
            ..Default::default()
        });
        assert_eq!(dump(&n).refill_delay, Some(2000));
    }

    #[test]
    fn an_idle_qdisc_takes_the_fast_path() {
        let mut n = node(FqOpts::default());
        let mut cx = Cx::new(Time(0));
        n.enqueue(fp(0, 0, 100), &mut cx).unwrap();
        let x = xstats(&n);
        assert_eq!((x.fastpath_packets, x.flows), (1, 0));
        // The next one finds a packet queued but no flow: still fast path.
        n.enqueue(fp(1, 0, 100), &mut cx).unwrap();
        assert_eq!(xstats(&n).fastpath_packets, 2);
        assert_eq!(drain(&mut n, &mut cx), vec![0, 1_000_000]);
        // With maxrate there is no fast path.
        let mut n = node(FqOpts {
            maxrate: Some(1_000_000),
            ..Default::default()
        });
        n.enqueue(fp(0, 0, 100), &mut cx).unwrap();
        let x = xstats(&n);
        assert_eq!((x.fastpath_packets, x.flows, x.inactive_flows), (0, 1, 0));
    }

    #[test]
    fn maxrate_paces_a_flow_at_that_rate() {
        // 1 Mbit/s = 125000 bytes/s on a 100 Mbit/s link, 1000-byte packets.
        for (len, rate) in [(1000u32, 125_000u32), (1514, 1_250_000), (200, 50_000)] {
            let mut n = node(FqOpts {
                maxrate: Some(rate),
                ..Default::default()
            });
            let bytes = run(&mut n, &[(0, len)], 80, 1_000 * MS, 11_000 * MS);
            let got = bytes[0] as f64 / 10.0;
            let err = (got - rate as f64).abs() / rate as f64;
            assert!(err < 0.02, "len {len}: {got} B/s for maxrate {rate}");
            assert!(xstats(&n).throttled > 100);
        }
    }

    #[test]
    fn at_or_below_low_rate_threshold_every_packet_is_paced() {
        // 50 kB/s <= 68750: each 1000-byte packet waits 20 ms after the last.
        let mut n = node(FqOpts {
            maxrate: Some(50_000),
            ..Default::default()
        });
        let mut cx = Cx::new(Time(0));
        for i in 0..5 {
            n.enqueue(fp(0, i, 1000), &mut cx).unwrap();
        }
        let mut times = vec![];
        let mut t = 0;
        while times.len() < 5 {
            match n.dequeue(&mut Cx::new(Time(t))) {
                Dequeue::Packet(_) => times.push(t),
                Dequeue::Wait(w) => t = w.0,
                Dequeue::Empty => panic!(),
            }
        }
        assert_eq!(times, vec![0, 20 * MS, 40 * MS, 60 * MS, 80 * MS]);
    }

    #[test]
    fn backlogged_flows_share_by_bytes() {
        let mut n = node(FqOpts::default());
        let bytes = run(
            &mut n,
            &[(0, 300), (1, 1514), (2, 64)],
            80,
            100 * MS,
            2_100 * MS,
        );
        let total: u64 = bytes.iter().sum();
        for b in bytes {
            let share = b as f64 / total as f64;
            assert!((share - 1.0 / 3.0).abs() < 0.01, "{share}");
        }
    }

    #[test]
    fn a_sparse_flow_is_served_before_a_backlogged_one() {
        // Interactive traffic (band 0): a brand-new flow joins the lists of
        // band 0 whatever its packet's band (see fq_enqueue), so both flows
        // are put there to see the new/old rule alone.
        let fp = |f, s, len| {
            Packet::from(Skb {
                priority: 6,
                ..fp(f, s, len).into_skb()
            })
        };
        let mut n = node(FqOpts::default());
        let mut cx = Cx::new(Time(0));
        n.enqueue(fp(9, 0, 1514), &mut cx).unwrap();
        for i in 1..60 {
            n.enqueue(fp(0, i, 1514), &mut cx).unwrap();
        }
        // No flow could send: the first 8 packets took the fast path.
        assert_eq!(xstats(&n).fastpath_packets, 8);
        // The bulk flow spends its initial quantum (10 MTU) and moves to old_flows.
        for _ in 0..8 + 11 {
            assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        }
        n.enqueue(fp(1, 0, 100), &mut cx).unwrap();
        match n.dequeue(&mut cx) {
            Dequeue::Packet(p) => assert_eq!(p.id, 1_000_000),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn bands_share_by_their_weights() {
        // priority 0 -> band 1 (196608), priority 1 (filler) -> band 2 (65536).
        let mut n = node(FqOpts::default());
        let mut cx = Cx::new(Time(0));
        let mk = |f: u32, s: u32| {
            Packet::from(Skb {
                priority: f,
                ..fp(f, s, 1000).into_skb()
            })
        };
        let mut seq = [0u32; 2];
        for f in 0..2 {
            for _ in 0..50 {
                n.enqueue(mk(f, seq[f as usize]), &mut cx).unwrap();
                seq[f as usize] += 1;
            }
        }
        let mut bytes = [0u64; 2];
        for _ in 0..40_000 {
            let Dequeue::Packet(p) = n.dequeue(&mut cx) else {
                panic!()
            };
            let f = (p.id / 1_000_000) as usize;
            bytes[f] += p.len as u64;
            n.enqueue(mk(f as u32, seq[f]), &mut cx).unwrap();
            seq[f] += 1;
        }
        let ratio = bytes[0] as f64 / bytes[1] as f64;
        assert!((ratio - 3.0).abs() < 0.05, "{ratio}");
    }

    #[test]
    fn limits_per_flow_and_per_band() {
        let mut n = node(FqOpts {
            flow_limit: Some(3),
            limit: Some(5),
            maxrate: Some(1000), // no fast path
            ..Default::default()
        });
        let mut cx = Cx::new(Time(0));
        for i in 0..4 {
            let r = n.enqueue(fp(0, i, 100), &mut cx);
            assert_eq!(r.is_ok(), i < 3);
        }
        for i in 0..3 {
            let r = n.enqueue(fp(1, i, 100), &mut cx);
            assert_eq!(r.is_ok(), i < 2, "band limit 5");
        }
        // Another band still has room.
        let hi = Packet::from(Skb {
            priority: 6,
            ..fp(2, 0, 100).into_skb()
        });
        n.enqueue(hi, &mut cx).unwrap();
        let x = xstats(&n);
        assert_eq!(x.flows_plimit, 1);
        assert_eq!(x.band_drops, [0, 1, 0]);
        assert_eq!(x.band_pkt_count, [1, 5, 0]);
        assert_eq!(n.stats().drops, 2);
    }

    #[test]
    fn the_horizon_drops_or_caps_departure_times() {
        let mut n = node(FqOpts::default());
        let mut cx = Cx::new(Time(MS));
        let late = |s: u64| {
            Packet::from(Skb {
                tstamp: Time(MS + s * 1_000 * MS),
                ..fp(0, 0, 100).into_skb()
            })
        };
        assert_eq!(
            n.enqueue(late(11), &mut cx).unwrap_err(),
            DropReason::QueueFull
        );
        assert_eq!(xstats(&n).horizon_drops, 1);
        let mut n = node(FqOpts {
            horizon_drop: Some(false),
            horizon: Some(2_000_000),
            ..Default::default()
        });
        n.enqueue(late(11), &mut cx).unwrap();
        assert_eq!(xstats(&n).horizon_caps, 1);
        // The packet leaves at now + horizon.
        assert_eq!(n.dequeue(&mut cx), Dequeue::Wait(Time(MS + 2_000 * MS)));
        let x = xstats(&n);
        assert_eq!(x.throttled_flows, 1);
        assert_eq!(x.time_next_delayed_flow, 2_000 * MS as i64 + 10_000);
        assert!(matches!(
            n.dequeue(&mut Cx::new(Time(MS + 2_000 * MS))),
            Dequeue::Packet(_)
        ));
    }

    #[test]
    fn departure_times_order_a_flows_packets() {
        let mut n = node(FqOpts::default());
        let mut cx = Cx::new(Time(0));
        for (i, t) in [(0, 5), (1, 3), (2, 3), (3, 9), (4, 1)] {
            let p = Packet::from(Skb {
                tstamp: Time(t * MS),
                ..fp(0, i, 100).into_skb()
            });
            n.enqueue(p, &mut cx).unwrap();
        }
        let mut out = vec![];
        let mut t = 0;
        while out.len() < 5 {
            match n.dequeue(&mut Cx::new(Time(t))) {
                Dequeue::Packet(p) => out.push((p.id, t / MS)),
                Dequeue::Wait(w) => t = w.0,
                Dequeue::Empty => panic!(),
            }
        }
        assert_eq!(out, vec![(4, 1), (1, 3), (2, 3), (0, 5), (3, 9)]);
    }

    #[test]
    fn late_packets_are_ce_marked_above_ce_threshold() {
        let mut n = node(FqOpts {
            ce_threshold: Some(1000),
            maxrate: Some(u32::MAX - 1), // no fast path: it never marks
            ..Default::default()
        });
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(0, 0, 100, 0x02), &mut cx).unwrap();
        n.enqueue(pkt(0, 1, 100, 0x02), &mut cx).unwrap();
        let Dequeue::Packet(p) = n.dequeue(&mut Cx::new(Time(MS / 2))) else {
            panic!()
        };
        assert_eq!(p.data[1] & 3, 2);
        let Dequeue::Packet(p) = n.dequeue(&mut Cx::new(Time(2 * MS))) else {
            panic!()
        };
        assert_eq!(p.data[1] & 3, 3);
        assert_eq!(xstats(&n).ce_mark, 1);
    }

    /// An fq with flows A (hash 1) detached at t = 0 with credit 500, and
    /// B (hash `b`) still on a list: A sent 600 bytes of its 100 initial
    /// credit, went round with +1000, and was found empty on `old_flows`.
    fn with_a_detached(b: u32, buckets_log: u32) -> Fq {
        let o = FqOpts {
            initial_quantum: Some(100),
            quantum: Some(1000),
            maxrate: Some(1_000_000), // no fast path...
            pacing: Some(0),          // ...and no pacing
            buckets_log: Some(buckets_log),
            ..Default::default()
        };
        let mut q = Fq::new(&o, &DevInfo::default()).unwrap();
        let mut cx = Cx::new(Time(0));
        let h = |hash: u32, seq, len| {
            Packet::from(Skb {
                hash,
                ..pkt(hash, seq, len, 0).into_skb()
            })
        };
        q.enqueue(h(1, 0, 600), &mut cx).unwrap();
        q.enqueue(h(b, 0, 400), &mut cx).unwrap();
        q.enqueue(h(b, 1, 400), &mut cx).unwrap();
        let sent: Vec<u64> = std::iter::from_fn(|| match q.dequeue(&mut cx) {
            Dequeue::Packet(p) => Some(p.id),
            _ => None,
        })
        .collect();
        assert_eq!(
            sent,
            vec![1_000_000, b as u64 * 1_000_000, b as u64 * 1_000_000 + 1]
        );
        let a = q.flow_by_hash(1).unwrap();
        assert_eq!((a.at, a.credit), (Where::Detached, 500));
        q
    }

    impl Fq {
        fn flow_by_hash(&self, hash: u32) -> Option<&Flow> {
            let key = (((hash & self.p.orphan_mask) as u64) << 1) | 1;
            self.slab.iter().flatten().find(|f| f.key == key)
        }
    }

    #[test]
    fn idle_flows_are_garbage_collected_after_three_seconds() {
        let key = |h: u32| ((h as u64 & 1023) << 1) | 1;
        let twin = (3..100)
            .find(|&h| hash_64(key(h), 1) == hash_64(key(1), 1))
            .unwrap();
        let mut q = with_a_detached(2, 1);
        let x = |q: &Fq| match q.xstats() {
            XStats::Fq(x) => x,
            _ => unreachable!(),
        };
        assert_eq!((x(&q).flows, x(&q).inactive_flows), (2, 2));
        let p = |seq| {
            Packet::from(Skb {
                hash: twin,
                ..pkt(twin, seq, 100, 0).into_skb()
            })
        };
        // 2 s later A survives a lookup in its bucket...
        q.enqueue(p(0), &mut Cx::new(Time(2_000 * MS))).unwrap();
        assert_eq!((x(&q).gc_flows, x(&q).flows), (0, 3));
        // ...but more than 3 s after it was detached it is freed.
        q.enqueue(p(1), &mut Cx::new(Time(3_100 * MS))).unwrap();
        assert_eq!((x(&q).gc_flows, x(&q).flows), (1, 2));
        assert!(q.flow_by_hash(1).is_none());
    }

    #[test]
    fn a_returning_flow_gets_a_fresh_quantum_after_refill_delay() {
        let h = |seq| {
            Packet::from(Skb {
                hash: 1,
                ..pkt(1, seq, 100, 0).into_skb()
            })
        };
        // Back within refill_delay (40 ms): the credit is what it was.
        let mut q = with_a_detached(2, 10);
        q.enqueue(h(1), &mut Cx::new(Time(30 * MS))).unwrap();
        assert_eq!(q.flow_by_hash(1).unwrap().credit, 500);
        // Back after it: at least one quantum.
        let mut q = with_a_detached(2, 10);
        q.enqueue(h(1), &mut Cx::new(Time(50 * MS))).unwrap();
        let a = q.flow_by_hash(1).unwrap();
        assert_eq!((a.at, a.credit), (Where::New, 1000));
    }

    #[test]
    fn a_lower_limit_trims_the_queue() {
        // tc-testing 9479 with its packets: limit 10, 10 queued, then limit 1.
        let mut n = node(FqOpts {
            limit: Some(10),
            ..Default::default()
        });
        let mut cx = Cx::new(Time(0));
        for i in 0..10 {
            n.enqueue(fp(0, i, 100), &mut cx).unwrap();
        }
        let o = QdiscOpts::Fq(FqOpts {
            limit: Some(1),
            ..Default::default()
        });
        n.qdisc.change(&o, &DevInfo::default()).unwrap();
        assert_eq!(dump(&n).limit, Some(1));
        assert_eq!(drain(&mut n, &mut cx), vec![9]);
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops, s.packets), (0, 0, 9, 1));
    }

    #[test]
    fn changing_buckets_keeps_the_flows() {
        let mut n = node(FqOpts {
            maxrate: Some(u32::MAX - 1),
            ..Default::default()
        });
        let mut cx = Cx::new(Time(0));
        for f in 0..20 {
            n.enqueue(fp(f, 0, 100), &mut cx).unwrap();
        }
        let o = QdiscOpts::Fq(FqOpts {
            buckets_log: Some(3),
            ..Default::default()
        });
        n.qdisc.change(&o, &DevInfo::default()).unwrap();
        assert_eq!(dump(&n).buckets_log, Some(3));
        for f in 0..20 {
            n.enqueue(fp(f, 1, 100), &mut cx).unwrap();
        }
        assert_eq!(xstats(&n).flows, 20);
        assert_eq!(drain(&mut n, &mut cx).len(), 40);
        n.reset();
        assert_eq!(xstats(&n).flows, 0);
    }

    proptest! {
        /// offered = sent + dropped + queued; flows and bands add up; a
        /// flow's packets leave in order; draining empties everything.
        #[test]
        fn packets_are_conserved(
            ops in proptest::collection::vec((0..6u8, 0..8u32, 40..1600u32, 0..8u32), 1..300),
            maxrate in prop_oneof![Just(u32::MAX), 1000..10_000_000u32],
            flow_limit in 1..20u32,
            limit in 1..40u32,
        ) {
            let mut n = node(FqOpts {
                maxrate: Some(maxrate),
                flow_limit: Some(flow_limit),
                limit: Some(limit),
                quantum: Some(1000),
                initial_quantum: Some(2000),
                ..Default::default()
            });
            let mut t = 0u64;
            let mut offered = 0u64;
            let mut last = std::collections::HashMap::new();
            for (i, &(op, f, len, prio)) in ops.iter().enumerate() {
                let mut cx = Cx::new(Time(t));
                match op {
                    0..=2 => {
                        offered += 1;
                        let p = Packet::from(Skb { priority: prio, ..fp(f, i as u32, len).into_skb() });
                        let _ = n.enqueue(p, &mut cx);
                    }
                    3 | 4 => {
                        if let Dequeue::Packet(p) = n.dequeue(&mut cx) {
                            let prev = last.insert(p.id / 1_000_000, p.id);
                            prop_assert!(prev.is_none_or(|q| q < p.id), "order");
                        }
                    }
                    _ => t += len as u64 * 10_000,
                }
                let s = n.stats();
                prop_assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
                let x = xstats(&n);
                prop_assert!(x.inactive_flows + x.throttled_flows <= x.flows);
                prop_assert!(x.band_pkt_count.iter().sum::<u32>() <= s.qlen);
            }
            loop {
                match n.dequeue(&mut Cx::new(Time(t))) {
                    Dequeue::Packet(_) => {}
                    Dequeue::Wait(w) => { prop_assert!(w.0 > t); t = w.0; }
                    Dequeue::Empty => break,
                }
            }
            let s = n.stats();
            prop_assert_eq!((s.qlen, s.backlog), (0, 0));
            prop_assert_eq!(offered, s.packets + s.drops);
            let x = xstats(&n);
            prop_assert_eq!((x.flows, x.inactive_flows, x.throttled_flows), (x.flows, x.flows, 0));
        }
    }
}
