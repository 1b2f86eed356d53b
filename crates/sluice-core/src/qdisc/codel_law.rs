//! The CoDel control law, shared by codel, fq_codel and cake (whose COBALT
//! uses the Newton step and control law below at 32-bit precision).
//!
//! Modelled on include/net/codel.h and include/net/codel_impl.h (RFC 8289).
//! CoDel ("controlled delay") looks at the *sojourn time* of each packet it
//! dequeues — how long the packet waited in the queue — rather than at the
//! queue's length. While the sojourn time stays below `target` (5 ms by
//! default), or the queue holds at most one MTU, nothing happens. Once it has
//! stayed above `target` for a whole `interval` (100 ms), CoDel enters the
//! *dropping state*: it drops (or, with ECN, marks) the packet at hand and
//! schedules the next drop `interval / sqrt(count)` later, `count` being the
//! drops of this dropping episode; each further drop shortens the spacing,
//! so the drop rate rises until the senders slow down and the sojourn time
//! falls below `target` again, which ends the episode. An episode that starts
//! soon (within 16 intervals) after the previous one ended resumes near the
//! drop rate that controlled the queue last time (`count - lastcount`).
//!
//! As in the kernel, time is kept in a 32-bit clock of 1024 ns ticks
//! ([`CodelTime`], `codel_time_t`), compared with wrap-around arithmetic, and
//! `1/sqrt(count)` is kept as a 16-bit fixed-point number updated by one
//! Newton step per change of `count` (`codel_Newton_step`), so that the
//! control law needs neither a square root nor a division. Parameters given in
//! microseconds are converted to that clock and back exactly as the kernel
//! does, so `target 5ms` dumps as 4999 µs, as on Linux.
//!
//! [`codel_dequeue`] is generic over the queue it drains ([`CodelQueue`], the
//! kernel's `dequeue_func`/`drop_func` pair and its `backlog` pointer): codel
//! gives it its single fifo, fq_codel one flow's queue at a time.
//!
//! Packets carry their enqueue time in `Packet::tstamp`, set by
//! [`set_enqueue_time`] (the kernel's `codel_set_enqueue_time` into the skb's
//! control block).
//!
//! Deviation: newer kernels define `CODEL_MAX_DROPS_PER_DEQUEUE` in codel.h;
//! the codel_impl.h modelled here has no such cap, and neither has this file.

use crate::packet::Packet;
use crate::time::Time;

/// CoDel's clock: `ns >> CODEL_SHIFT`, i.e. ticks of 1024 ns, in 32 bits.
pub type CodelTime = u32;

/// log2 of the CoDel clock tick in nanoseconds.
pub const CODEL_SHIFT: u32 = 10;

/// A `ce_threshold` that never marks (`CODEL_DISABLED_THRESHOLD`).
pub const CODEL_DISABLED_THRESHOLD: CodelTime = i32::MAX as u32;

/// Bits of the fixed-point `1/sqrt(count)`.
const REC_INV_SQRT_BITS: u32 = 16;
/// Shift from `rec_inv_sqrt` to a Q0.32 number.
const REC_INV_SQRT_SHIFT: u32 = 32 - REC_INV_SQRT_BITS;

/// `now` on CoDel's clock (`codel_get_time`).
pub fn codel_time(t: Time) -> CodelTime {
    (t.0 >> CODEL_SHIFT) as u32
}

/// Milliseconds to CoDel time (`MS2TIME`).
pub const fn ms_to_codel(ms: u64) -> CodelTime {
    ((ms * 1_000_000) >> CODEL_SHIFT) as u32
}

/// Microseconds (as netlink carries them) to CoDel time, as `codel_change` does.
pub fn us_to_codel(us: u32) -> CodelTime {
    ((us as u64 * 1000) >> CODEL_SHIFT) as u32
}

/// CoDel time to microseconds (`codel_time_to_us`), as the kernel dumps it.
pub fn codel_time_to_us(v: CodelTime) -> u32 {
    (((v as u64) << CODEL_SHIFT) / 1000) as u32
}

/// `codel_time_after(a, b)`: `a` is later than `b`, modulo wrap-around.
pub fn time_after(a: CodelTime, b: CodelTime) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// `codel_time_after_eq(a, b)`.
pub fn time_after_eq(a: CodelTime, b: CodelTime) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// `codel_time_before(a, b)`.
pub fn time_before(a: CodelTime, b: CodelTime) -> bool {
    time_after(b, a)
}

/// The signed distance from `now` to `t` in microseconds, as the kernels'
/// `dump_stats` report `drop_next`.
pub fn delta_us(t: CodelTime, now: CodelTime) -> i32 {
    let delta = t.wrapping_sub(now) as i32;
    if delta >= 0 {
        codel_time_to_us(delta as u32) as i32
    } else {
        -(codel_time_to_us(delta.unsigned_abs()) as i32)
    }
}

/// `struct codel_params`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelParams {
    /// Acceptable standing sojourn time.
    pub target: CodelTime,
    /// Sojourn time above which ECN-capable packets are CE-marked.
    pub ce_threshold: CodelTime,
    /// Width of the moving window; also the initial drop spacing.
    pub interval: CodelTime,
    /// Backlog (bytes) at or below which nothing is dropped.
    pub mtu: u32,
    /// Mark ECN-capable packets instead of dropping them.
    pub ecn: bool,
    /// `ce_threshold` applies only to packets whose DS field, masked with
    /// `ce_threshold_mask`, equals this (fq_codel).
    pub ce_threshold_selector: u8,
    /// Mask for the selector; 0 = every packet.
    pub ce_threshold_mask: u8,
}

impl CodelParams {
    /// `codel_params_init` plus the backlog floor.
    pub fn new(mtu: u32) -> Self {
        CodelParams {
            target: ms_to_codel(5),
            ce_threshold: CODEL_DISABLED_THRESHOLD,
            interval: ms_to_codel(100),
            mtu,
            ecn: false,
            ce_threshold_selector: 0,
            ce_threshold_mask: 0,
        }
    }
}

/// `struct codel_vars`: the state of one CoDel queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelVars {
    /// Drops (and marks) since entering the dropping state.
    pub count: u32,
    /// `count` at the entry to the last dropping state.
    pub lastcount: u32,
    /// In the dropping state.
    pub dropping: bool,
    /// `1/sqrt(count)` in Q0.16.
    pub rec_inv_sqrt: u16,
    /// When the sojourn time will have been above target for an interval (0: below).
    pub first_above_time: CodelTime,
    /// When to drop next, or when the last drop happened.
    pub drop_next: CodelTime,
    /// Sojourn time of the last dequeued packet.
    pub ldelay: CodelTime,
}

/// `struct codel_stats`: counters shared by the queues of one qdisc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelStats {
    /// Largest packet seen at dequeue.
    pub maxpacket: u32,
    /// Packets dropped by the last dequeue (the kernel reports them to the
    /// parents afterwards; here [`CodelQueue::drop`] already has).
    pub drop_count: u32,
    /// Bytes dropped by the last dequeue.
    pub drop_len: u32,
    /// Packets ECN-marked instead of dropped.
    pub ecn_mark: u32,
    /// Packets CE-marked because their sojourn time exceeded `ce_threshold`.
    pub ce_mark: u32,
}

/// The queue CoDel drains: the kernel's `dequeue_func`, `drop_func` and the
/// `backlog` it compares with the MTU.
pub trait CodelQueue {
    /// Take the head packet off the queue, updating the owner's counters.
    fn dequeue(&mut self) -> Option<Packet>;
    /// Bytes still queued in the qdisc (`sch->qstats.backlog`, after the dequeue).
    fn backlog(&self) -> u32;
    /// Drop a packet [`CodelQueue::dequeue`] returned (report it as shed).
    fn drop(&mut self, pkt: Packet);
}

/// The enqueue time of `pkt` on CoDel's clock (`codel_get_enqueue_time`).
pub fn enqueue_time(pkt: &Packet) -> CodelTime {
    codel_time(pkt.tstamp)
}

/// Stamp `pkt` with its enqueue time (`codel_set_enqueue_time`).
pub fn set_enqueue_time(pkt: &mut Packet, now: Time) {
    pkt.tstamp = now;
}

/// `codel_Newton_step`: one Newton iteration of `1/sqrt(count)`,
/// `x' = x/2 * (3 - count * x^2)`, in fixed point.
pub fn newton_step(vars: &mut CodelVars) {
    let invsqrt = (vars.rec_inv_sqrt as u32) << REC_INV_SQRT_SHIFT;
    vars.rec_inv_sqrt = (newton_step_q32(vars.count, invsqrt) >> REC_INV_SQRT_SHIFT) as u16;
}

/// The Newton step on a Q0.32 `1/sqrt(count)`: codel keeps the top 16 bits
/// of the result, cake's COBALT (`cobalt_newton_step`) all 32.
pub fn newton_step_q32(count: u32, invsqrt: u32) -> u32 {
    let invsqrt2 = ((invsqrt as u64 * invsqrt as u64) >> 32) as u32;
    let mut val = (3u64 << 32).wrapping_sub(count as u64 * invsqrt2 as u64);
    val >>= 2; // avoid overflow in the following multiply
    val = val.wrapping_mul(invsqrt as u64) >> (32 - 2 + 1);
    val as u32
}

/// `codel_control_law`: `t + interval / sqrt(count)`.
pub fn control_law(t: CodelTime, interval: CodelTime, rec_inv_sqrt: u16) -> CodelTime {
    let scale = (rec_inv_sqrt as u32) << REC_INV_SQRT_SHIFT;
    t.wrapping_add(((interval as u64 * scale as u64) >> 32) as u32)
}

/// The control law in nanoseconds with a Q0.32 `1/sqrt(count)`
/// (`cobalt_control`: `reciprocal_scale` of the interval, which it takes
/// as 32 bits).
pub fn control_law_ns(t: i64, interval: u64, rec_inv_sqrt: u32) -> i64 {
    t.wrapping_add(((interval as u32 as u64 * rec_inv_sqrt as u64) >> 32) as i64)
}

/// `codel_should_drop`: has the sojourn time been above target for an interval?
pub fn should_drop(
    pkt: Option<&Packet>,
    vars: &mut CodelVars,
    params: &CodelParams,
    stats: &mut CodelStats,
    backlog: u32,
    now: CodelTime,
) -> bool {
    let Some(pkt) = pkt else {
        vars.first_above_time = 0;
        return false;
    };
    vars.ldelay = now.wrapping_sub(enqueue_time(pkt));
    stats.maxpacket = stats.maxpacket.max(pkt.len);
    if time_before(vars.ldelay, params.target) || backlog <= params.mtu {
        // Went below: stay below for at least an interval.
        vars.first_above_time = 0;
        return false;
    }
    if vars.first_above_time == 0 {
        // Just went above: if we stay above for an interval, it is ok to drop.
        vars.first_above_time = now.wrapping_add(params.interval);
        false
    } else {
        time_after(now, vars.first_above_time)
    }
}

/// Drop `pkt` through the queue, counting it (the kernel's drop sequence).
fn drop_one<Q: CodelQueue>(q: &mut Q, stats: &mut CodelStats, pkt: Packet) {
    stats.drop_len = stats.drop_len.wrapping_add(pkt.len);
    q.drop(pkt);
    stats.drop_count += 1;
}

/// `codel_dequeue`: the next packet of `q` that CoDel lets through, dropping
/// or marking on the way as the control law says. Always inlined: the
/// packet then goes from the queue to the caller's result without a copy
/// in between.
#[inline(always)]
pub fn codel_dequeue<Q: CodelQueue>(
    q: &mut Q,
    params: &CodelParams,
    vars: &mut CodelVars,
    stats: &mut CodelStats,
    now: CodelTime,
) -> Option<Packet> {
    // The packet stays in `skb` from here to the return: the fast path
    // never moves it again.
    let mut skb = q.dequeue();
    if skb.is_none() {
        vars.dropping = false;
        return None;
    }
    let drop = should_drop(skb.as_ref(), vars, params, stats, q.backlog(), now);
    if vars.dropping {
        if !drop {
            // Sojourn time below target: leave the dropping state.
            vars.dropping = false;
        } else if time_after_eq(now, vars.drop_next) {
            // Time for the next drop. Drop the current packet and dequeue the
            // next, which may end the dropping state; if not, schedule the
            // next drop. A large backlog may call for several drops at once.
            while vars.dropping && time_after_eq(now, vars.drop_next) {
                vars.count = vars.count.wrapping_add(1);
                newton_step(vars);
                let Some(mut p) = skb.take() else { break };
                if params.ecn && p.set_ce() {
                    stats.ecn_mark += 1;
                    vars.drop_next =
                        control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                    skb = Some(p);
                    ce_threshold_mark(skb.as_mut(), params, vars, stats);
                    return skb;
                }
                drop_one(q, stats, p);
                skb = q.dequeue();
                if !should_drop(skb.as_ref(), vars, params, stats, q.backlog(), now) {
                    vars.dropping = false;
                } else {
                    vars.drop_next =
                        control_law(vars.drop_next, params.interval, vars.rec_inv_sqrt);
                }
            }
        }
    } else if drop {
        let mut p = skb.take()?;
        if params.ecn && p.set_ce() {
            stats.ecn_mark += 1;
            skb = Some(p);
        } else {
            drop_one(q, stats, p);
            skb = q.dequeue();
            should_drop(skb.as_ref(), vars, params, stats, q.backlog(), now);
        }
        vars.dropping = true;
        // If we went above target soon after we last went below, assume the
        // drop rate that controlled the queue last time is a good start.
        let delta = vars.count.wrapping_sub(vars.lastcount);
        if delta > 1
            && time_before(
                now.wrapping_sub(vars.drop_next),
                params.interval.wrapping_mul(16),
            )
        {
            vars.count = delta;
            // The approximation need not be precise: the next Newton
            // steps correct it quadratically.
            newton_step(vars);
        } else {
            vars.count = 1;
            vars.rec_inv_sqrt = (!0u32 >> REC_INV_SQRT_SHIFT) as u16;
        }
        vars.lastcount = vars.count;
        vars.drop_next = control_law(now, params.interval, vars.rec_inv_sqrt);
    }
    ce_threshold_mark(skb.as_mut(), params, vars, stats);
    skb
}

/// The `end:` of `codel_dequeue`: CE-mark a packet that waited longer than
/// `ce_threshold` (if its DS field matches the selector).
#[inline]
fn ce_threshold_mark(
    skb: Option<&mut Packet>,
    params: &CodelParams,
    vars: &CodelVars,
    stats: &mut CodelStats,
) {
    let Some(pkt) = skb else {
        return;
    };
    if time_after(vars.ldelay, params.ce_threshold) {
        let set_ce = params.ce_threshold_mask == 0
            || pkt
                .dsfield()
                .is_some_and(|ds| ds & params.ce_threshold_mask == params.ce_threshold_selector);
        if set_ce && pkt.set_ce() {
            stats.ce_mark += 1;
        }
    }
}

/// `INET_ECN_set_ce`; see [`Packet::set_ce`].
pub fn inet_ecn_set_ce(pkt: &mut Packet) -> bool {
    pkt.set_ce()
}

/// Helpers for the tests of the CoDel qdiscs: packets, and a link that drains
/// a qdisc at a fixed rate on a virtual clock.
#[cfg(test)]
pub(crate) mod testing {
    use crate::packet::{Packet, ETH_P_IP};
    use crate::qdisc::{Cx, Dequeue, QdiscNode};
    use crate::time::{Duration, Time};

    /// An IPv4 UDP packet of flow `f` (source port 1000+f), `len` bytes,
    /// id `f * 1_000_000 + seq`, with a valid header checksum and TOS `tos`.
    pub fn pkt(f: u32, seq: u32, len: u32, tos: u8) -> Packet {
        let mut d = vec![0u8; 28];
        d[0] = 0x45;
        d[1] = tos;
        d[2..4].copy_from_slice(&(len.min(65535) as u16).to_be_bytes());
        d[8] = 64;
        d[9] = 17;
        d[12..16].copy_from_slice(&[10, 0, 0, 1]);
        d[16..20].copy_from_slice(&[10, 0, 1, 1]);
        d[20..22].copy_from_slice(&(1000 + f as u16).to_be_bytes());
        d[22..24].copy_from_slice(&5001u16.to_be_bytes());
        let c = ipv4_checksum(&d[..20]);
        d[10..12].copy_from_slice(&c.to_be_bytes());
        let mut p = Packet::new(d, len, ETH_P_IP);
        p.id = f as u64 * 1_000_000 + seq as u64;
        p
    }

    /// The one's-complement sum of an IPv4 header (0 when the checksum is right).
    pub fn ipv4_checksum(h: &[u8]) -> u16 {
        let mut sum: u32 = h
            .chunks(2)
            .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
            .sum();
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    /// Dequeue everything at the context's time; the ids in order.
    pub fn drain(n: &mut QdiscNode, cx: &mut Cx) -> Vec<u64> {
        std::iter::from_fn(|| match n.dequeue(cx) {
            Dequeue::Packet(p) => Some(p.id),
            _ => None,
        })
        .collect()
    }

    /// The median of some durations.
    pub fn median(d: &[Duration]) -> Duration {
        let mut v = d.to_vec();
        v.sort();
        v.get(v.len() / 2).copied().unwrap_or_default()
    }

    /// A packet arriving at a time.
    #[derive(Clone, Debug)]
    pub struct Arrival {
        pub at: Time,
        pub pkt: Packet,
    }

    impl Arrival {
        /// `n` packets of flow `f`, `len` bytes, one every `period` from 0.
        pub fn periodic(
            f: u32,
            len: u32,
            period: Duration,
            n: u32,
        ) -> impl Iterator<Item = Arrival> {
            (0..n).map(move |i| Arrival {
                at: Time(i as u64 * period.0),
                pkt: pkt(f, i, len, 0),
            })
        }

        /// Several arrival sequences merged in time order.
        pub fn merge(mut all: Vec<Arrival>) -> std::vec::IntoIter<Arrival> {
            all.sort_by_key(|a| a.at);
            all.into_iter()
        }
    }

    /// One packet that left.
    #[derive(Clone, Copy, Debug)]
    pub struct Sent {
        pub at: Time,
        pub sojourn: Duration,
        pub id: u64,
    }

    /// What a run of [`run_link`] saw.
    #[derive(Debug, Default)]
    pub struct LinkRun {
        pub sent: Vec<Sent>,
        pub sojourns: Vec<Duration>,
        /// Packets that left CE-marked.
        pub ce: usize,
        /// Every IPv4 header that left had a valid checksum.
        pub checksums_ok: bool,
    }

    impl LinkRun {
        /// Sojourn times of the packets sent at or after `t`.
        pub fn sojourns_after(&self, t: Time) -> impl Iterator<Item = Duration> + '_ {
            self.sent
                .iter()
                .filter(move |s| s.at >= t)
                .map(|s| s.sojourn)
        }

        /// Sojourn times of flow `f`'s packets sent at or after `t`.
        pub fn flow_sojourns_after(&self, f: u32, t: Time) -> Vec<Duration> {
            self.sent
                .iter()
                .filter(|s| s.at >= t && s.id / 1_000_000 == f as u64)
                .map(|s| s.sojourn)
                .collect()
        }
    }

    /// Greedy senders that respond to congestion as TCP Reno does, ack-clocked:
    /// each flow keeps up to `cwnd` packets in flight, adds one packet to
    /// `cwnd` per window acknowledged, and halves it (at most once per RTT)
    /// when it learns, one RTT later, that a packet was dropped (a gap in its
    /// sequence at the link, or a refused enqueue) or arrived CE-marked. A
    /// flow that hears nothing for a second while packets are out starts
    /// over (the retransmission timeout). Acks return `rtt` after a packet
    /// has crossed the link.
    pub struct Reno {
        pub flows: u32,
        pub rtt: Duration,
        pub len: u32,
        pub tos: u8,
        /// Initial window, packets.
        pub iw: u32,
        pub until: Time,
    }

    struct RenoFlow {
        cwnd: f64,
        inflight: u32,
        seq: u32,
        /// The next sequence number the link expects from this flow.
        expected: u32,
        last_cut: Time,
        last_progress: Time,
        /// Base RTT plus the queueing delay the last packet met.
        srtt: Duration,
    }

    #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Ev {
        LinkFree,
        Ack { flow: usize, ce: bool },
        Loss { flow: usize, n: u32 },
        Tick,
    }

    /// Run [`Reno`] senders through `n` and a link of `rate_bps`.
    pub fn run_reno(n: &mut QdiscNode, rate_bps: u64, a: &Reno) -> LinkRun {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut flows: Vec<RenoFlow> = (0..a.flows)
            .map(|_| RenoFlow {
                cwnd: a.iw as f64,
                inflight: 0,
                seq: 0,
                expected: 0,
                last_cut: Time(0),
                last_progress: Time(0),
                srtt: a.rtt,
            })
            .collect();
        let mut run = LinkRun {
            checksums_ok: true,
            ..Default::default()
        };
        let mut heap = BinaryHeap::new();
        let mut order = 0u64;
        let mut push = |heap: &mut BinaryHeap<_>, t: Time, ev: Ev| {
            order += 1;
            heap.push(Reverse((t, order, ev)));
        };
        let mut link_busy = false;
        let cut = |fl: &mut RenoFlow, t: Time| {
            if t >= fl.last_cut + fl.srtt {
                fl.cwnd = (fl.cwnd / 2.0).max(2.0);
                fl.last_cut = t;
            }
        };
        for (f, fl) in flows.iter_mut().enumerate() {
            push(
                &mut heap,
                Time(f as u64 * 1000),
                Ev::Ack { flow: f, ce: false },
            );
            fl.inflight = 1;
        }
        push(&mut heap, Time(0), Ev::Tick);
        while let Some(Reverse((t, _, ev))) = heap.pop() {
            if t > a.until {
                break;
            }
            let mut sender = None;
            match ev {
                Ev::LinkFree => {
                    link_busy = false;
                    if let Dequeue::Packet(p) = n.dequeue(&mut Cx::new(t)) {
                        let (pf, seq) = ((p.id / 1_000_000) as usize, (p.id % 1_000_000) as u32);
                        let tx = Duration(p.len as u64 * 8 * 1_000_000_000 / rate_bps);
                        let sojourn = t - p.tstamp;
                        run.sojourns.push(sojourn);
                        run.sent.push(Sent {
                            at: t,
                            sojourn,
                            id: p.id,
                        });
                        run.checksums_ok &= ipv4_checksum(&p.data[..20]) == 0;
                        let ce = p.data[1] & 3 == 3;
                        run.ce += ce as usize;
                        let fl = &mut flows[pf];
                        fl.srtt = a.rtt + sojourn;
                        if seq >= fl.expected {
                            if seq > fl.expected {
                                push(
                                    &mut heap,
                                    t + tx + a.rtt,
                                    Ev::Loss {
                                        flow: pf,
                                        n: seq - fl.expected,
                                    },
                                );
                            }
                            fl.expected = seq + 1;
                            push(&mut heap, t + tx + a.rtt, Ev::Ack { flow: pf, ce });
                        }
                        push(&mut heap, t + tx, Ev::LinkFree);
                        link_busy = true;
                    }
                }
                Ev::Ack { flow, ce } => {
                    let fl = &mut flows[flow];
                    fl.inflight = fl.inflight.saturating_sub(1);
                    fl.last_progress = t;
                    if ce {
                        cut(fl, t);
                    } else {
                        fl.cwnd += 1.0 / fl.cwnd;
                    }
                    sender = Some(flow);
                }
                Ev::Loss { flow, n: lost } => {
                    let fl = &mut flows[flow];
                    fl.inflight = fl.inflight.saturating_sub(lost);
                    fl.last_progress = t;
                    cut(fl, t);
                    sender = Some(flow);
                }
                Ev::Tick => {
                    for (f, fl) in flows.iter_mut().enumerate() {
                        if fl.inflight > 0 && t >= fl.last_progress + Duration::from_secs(1) {
                            fl.inflight = 0;
                            fl.cwnd = 2.0;
                            fl.expected = fl.seq;
                            fl.last_progress = t;
                            push(&mut heap, t, Ev::Ack { flow: f, ce: false });
                            fl.inflight = 1;
                        }
                    }
                    push(&mut heap, t + Duration::from_millis(200), Ev::Tick);
                }
            }
            if let Some(f) = sender {
                let fl = &mut flows[f];
                while (fl.inflight as f64) < fl.cwnd.floor() {
                    let p = pkt(f as u32, fl.seq, a.len, a.tos);
                    fl.seq += 1;
                    fl.inflight += 1;
                    let _ = n.enqueue(p, &mut Cx::new(t));
                }
                if !link_busy && n.stats().qlen > 0 {
                    push(&mut heap, t, Ev::LinkFree);
                    link_busy = true;
                }
            }
        }
        run
    }

    /// Drain `n` through a link of `rate_bps`, feeding it `arrivals` (in time
    /// order): the link takes the next packet whenever it is free, and a
    /// packet's sojourn time is from its enqueue stamp to that moment.
    pub fn run_link(
        n: &mut QdiscNode,
        rate_bps: u64,
        arrivals: impl Iterator<Item = Arrival>,
    ) -> LinkRun {
        let mut arr = arrivals.peekable();
        let mut free = Time(0);
        let mut run = LinkRun {
            checksums_ok: true,
            ..Default::default()
        };
        loop {
            while let Some(a) = arr.next_if(|a| a.at <= free) {
                let _ = n.enqueue(a.pkt, &mut Cx::new(a.at));
            }
            match n.dequeue(&mut Cx::new(free)) {
                Dequeue::Packet(p) => {
                    let sojourn = free - p.tstamp;
                    run.sojourns.push(sojourn);
                    run.sent.push(Sent {
                        at: free,
                        sojourn,
                        id: p.id,
                    });
                    if p.data[1] & 3 == 3 {
                        run.ce += 1;
                    }
                    run.checksums_ok &= ipv4_checksum(&p.data[..20]) == 0;
                    free += Duration(p.len as u64 * 8 * 1_000_000_000 / rate_bps);
                }
                _ => match arr.peek() {
                    Some(a) => free = a.at,
                    None => break,
                },
            }
        }
        run
    }
}
