//! codel: a single fifo managed by CoDel (Controlled Delay, RFC 8289).
//!
//! Modelled on net/sched/sch_codel.c (Linux 6.18). Packets are stamped with
//! their arrival time and queued at the tail; the limit (`limit`, 1000
//! packets by default) is enforced at enqueue by tail drop, counted in
//! `drop_overlimit`. All the interesting work happens at dequeue, where the
//! shared control law ([`super::codel_law`]) looks at each head packet's
//! sojourn time: once it has stayed above `target` (5 ms) for `interval`
//! (100 ms) the head packets are dropped — or CE-marked with `ecn` if they
//! are ECN-capable — at a rate growing with the square root of the drop
//! count, until the sojourn time falls below target. `ce_threshold` marks
//! (never drops) ECN-capable packets whose sojourn time exceeds it,
//! independently of the control law, for DCTCP-style senders. The backlog
//! floor below which nothing is dropped is the device's MTU plus link header
//! (`psched_mtu`), clamped to 256..=1 MiB.
//!
//! `change` applies each given option; a lower limit drops packets from the
//! head until the queue fits, as the kernel does. `tc -s` shows `count`,
//! `lastcount`, `ldelay` (the last sojourn time), `dropping`, `drop_next`
//! (relative to now), `maxpacket`, `ecn_mark`, `drop_overlimit` and
//! `ce_mark`.
//!
//! Invariants: `backlog` is the sum of the queued packets' lengths; the
//! queue never exceeds `limit` after an enqueue returns.
//!
//! Deviations: `change` has no [`Cx`] to report the packets it drops, so
//! they are reported as shed at the next enqueue or dequeue (until then the
//! node's backlog still counts them); `drop_next` in the statistics is
//! relative to the last enqueue or dequeue, not to the moment of the dump
//! (`xstats` is not told the time). The kernel's dump of `target 5ms` is
//! 4999 µs (its 1024 ns clock); so is ours, so re-creating a qdisc from its
//! dump can move target by one tick, as on Linux.

use super::codel_law::{
    self, codel_dequeue, codel_time, codel_time_to_us, us_to_codel, CodelParams, CodelQueue,
    CodelStats, CodelVars, CODEL_DISABLED_THRESHOLD,
};
use super::{wrong_kind, Cx, Dequeue, DevInfo, Qdisc, QdiscOpts, XStats};
use crate::error::TcResult;
use crate::packet::Packet;
use crate::stats::DropReason;
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Packets queued at most by default (`DEFAULT_CODEL_LIMIT`).
pub const DEFAULT_CODEL_LIMIT: u32 = 1000;

/// The `TCA_CODEL_*` attributes: what tc sends and the kernel dumps. Absent
/// attributes leave the current value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodelOpts {
    /// Packets (`TCA_CODEL_LIMIT`).
    pub limit: Option<u32>,
    /// Target sojourn time, µs (`TCA_CODEL_TARGET`).
    pub target: Option<u32>,
    /// Interval, µs (`TCA_CODEL_INTERVAL`).
    pub interval: Option<u32>,
    /// Mark instead of dropping (`TCA_CODEL_ECN`).
    pub ecn: Option<bool>,
    /// CE-marking threshold, µs (`TCA_CODEL_CE_THRESHOLD`; dumped only when set).
    pub ce_threshold: Option<u32>,
}

/// `struct tc_codel_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodelXstats {
    /// Largest packet seen at dequeue, bytes.
    pub maxpacket: u32,
    /// Drops of the current (or last) dropping state.
    pub count: u32,
    /// `count` when the last dropping state began.
    pub lastcount: u32,
    /// Sojourn time of the last dequeued packet, µs.
    pub ldelay: u32,
    /// Time to the next drop, µs (0 when not dropping; negative when overdue).
    pub drop_next: i32,
    /// Packets refused because the queue was at its limit.
    pub drop_overlimit: u32,
    /// Packets ECN-marked instead of dropped.
    pub ecn_mark: u32,
    /// In the dropping state.
    pub dropping: bool,
    /// Packets CE-marked above `ce_threshold`.
    pub ce_mark: u32,
}

/// A codel qdisc.
#[derive(Debug)]
pub struct Codel {
    /// Packets (`sch->limit`).
    limit: u32,
    params: CodelParams,
    vars: CodelVars,
    stats: CodelStats,
    drop_overlimit: u32,
    queue: VecDeque<Packet>,
    /// Bytes queued (`sch->qstats.backlog`, 32 bits as in the kernel).
    backlog: u32,
    /// The time of the last enqueue or dequeue (for `drop_next`).
    now: Time,
    /// Packets dropped by `change`, not yet reported as shed.
    purged: Vec<u32>,
}

/// The fifo as CoDel sees it (`dequeue_func`, `drop_func`).
struct Fifo<'a> {
    queue: &'a mut VecDeque<Packet>,
    backlog: &'a mut u32,
    cx: &'a mut Cx,
}

impl CodelQueue for Fifo<'_> {
    fn dequeue(&mut self) -> Option<Packet> {
        let p = self.queue.pop_front()?;
        *self.backlog = self.backlog.wrapping_sub(p.len);
        Some(p)
    }

    fn backlog(&self) -> u32 {
        *self.backlog
    }

    fn drop(&mut self, pkt: Packet) {
        self.cx.shed(pkt.len, DropReason::Aqm);
    }
}

impl Codel {
    /// `codel_init`: defaults, then the options.
    pub fn new(opts: &CodelOpts, dev: &DevInfo) -> TcResult<Self> {
        let mtu = dev
            .mtu
            .saturating_add(dev.hard_header_len)
            .clamp(256, 1 << 20);
        let mut q = Codel {
            limit: DEFAULT_CODEL_LIMIT,
            params: CodelParams::new(mtu),
            vars: CodelVars::default(),
            stats: CodelStats::default(),
            drop_overlimit: 0,
            queue: VecDeque::new(),
            backlog: 0,
            now: Time::ZERO,
            purged: Vec::new(),
        };
        q.apply(opts);
        Ok(q)
    }

    /// The assignments of `codel_change` (it validates nothing).
    fn apply(&mut self, o: &CodelOpts) {
        if let Some(t) = o.target {
            self.params.target = us_to_codel(t);
        }
        if let Some(c) = o.ce_threshold {
            self.params.ce_threshold = us_to_codel(c);
        }
        if let Some(i) = o.interval {
            self.params.interval = us_to_codel(i);
        }
        if let Some(l) = o.limit {
            self.limit = l;
        }
        if let Some(e) = o.ecn {
            self.params.ecn = e;
        }
    }

    /// Report the packets `change` dropped.
    #[inline]
    fn flush_purged(&mut self, cx: &mut Cx) {
        if self.purged.is_empty() {
            return;
        }
        for len in self.purged.drain(..) {
            cx.shed(len, DropReason::QueueFull);
        }
    }
}

impl Qdisc for Codel {
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.flush_purged(cx);
        self.now = cx.now;
        if (self.queue.len() as u64) < self.limit as u64 {
            codel_law::set_enqueue_time(&mut pkt, cx.now);
            self.backlog = self.backlog.wrapping_add(pkt.len);
            self.queue.push_back(pkt);
            return Ok(());
        }
        self.drop_overlimit += 1;
        Err((pkt, DropReason::QueueFull))
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.flush_purged(cx);
        self.now = cx.now;
        let now = codel_time(cx.now);
        let mut fifo = Fifo {
            queue: &mut self.queue,
            backlog: &mut self.backlog,
            cx,
        };
        let pkt = codel_dequeue(
            &mut fifo,
            &self.params,
            &mut self.vars,
            &mut self.stats,
            now,
        );
        // `codel_dequeue_drop`: the drops were reported as they happened.
        self.stats.drop_count = 0;
        self.stats.drop_len = 0;
        pkt.map_or(Dequeue::Empty, Dequeue::Packet)
    }

    /// `codel_reset`: empty the queue and forget the CoDel state.
    fn reset(&mut self) {
        self.queue.clear();
        self.backlog = 0;
        self.vars = CodelVars::default();
        self.purged.clear();
    }

    /// `codel_change`: apply what is given, then drop from the head down to
    /// the (possibly lower) limit.
    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Codel(o) = opts else {
            return Err(wrong_kind("codel", opts));
        };
        self.apply(o);
        while self.queue.len() as u64 > self.limit as u64 {
            let Some(p) = self.queue.pop_front() else {
                break;
            };
            self.backlog = self.backlog.wrapping_sub(p.len);
            self.purged.push(p.len);
        }
        Ok(())
    }

    /// `codel_dump`.
    fn dump(&self) -> QdiscOpts {
        let p = &self.params;
        QdiscOpts::Codel(CodelOpts {
            limit: Some(self.limit),
            target: Some(codel_time_to_us(p.target)),
            interval: Some(codel_time_to_us(p.interval)),
            ecn: Some(p.ecn),
            ce_threshold: (p.ce_threshold != CODEL_DISABLED_THRESHOLD)
                .then(|| codel_time_to_us(p.ce_threshold)),
        })
    }

    /// `codel_dump_stats`.
    fn xstats(&self) -> XStats {
        let v = &self.vars;
        XStats::Codel(CodelXstats {
            maxpacket: self.stats.maxpacket,
            count: v.count,
            lastcount: v.lastcount,
            ldelay: codel_time_to_us(v.ldelay),
            drop_next: if v.dropping {
                codel_law::delta_us(v.drop_next, codel_time(self.now))
            } else {
                0
            },
            drop_overlimit: self.drop_overlimit,
            ecn_mark: self.stats.ecn_mark,
            dropping: v.dropping,
            ce_mark: self.stats.ce_mark,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;
    use crate::qdisc::codel_law::testing::{
        drain, ipv4_checksum, median, pkt, run_link, run_reno, Arrival, Reno,
    };
    use crate::qdisc::QdiscNode;
    use crate::time::Duration;
    use proptest::prelude::*;

    const H: Handle = Handle::new(1, 0);

    fn node(o: CodelOpts) -> QdiscNode {
        QdiscNode::new(
            H,
            Handle::ROOT,
            Box::new(Codel::new(&o, &DevInfo::default()).unwrap()),
        )
    }

    fn dump(n: &QdiscNode) -> CodelOpts {
        match n.qdisc.dump() {
            QdiscOpts::Codel(o) => o,
            other => panic!("{other:?}"),
        }
    }

    fn xstats(n: &QdiscNode) -> CodelXstats {
        match n.qdisc.xstats() {
            XStats::Codel(x) => x,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_dump_as_the_kernel_does() {
        // tc-testing 983a: "limit 1000p target 5ms interval 100ms"; the
        // kernel's 1024 ns clock makes those 4999 and 99999 µs.
        let o = dump(&node(CodelOpts::default()));
        assert_eq!(
            o,
            CodelOpts {
                limit: Some(1000),
                target: Some(4999),
                interval: Some(99999),
                ecn: Some(false),
                ce_threshold: None,
            }
        );
        let o = dump(&node(CodelOpts {
            ce_threshold: Some(20_000),
            ecn: Some(true),
            limit: Some(1500),
            ..Default::default()
        }));
        assert_eq!(
            (o.ce_threshold, o.ecn, o.limit),
            (Some(19999), Some(true), Some(1500))
        );
    }

    #[test]
    fn the_limit_is_enforced_at_enqueue() {
        let mut n = node(CodelOpts {
            limit: Some(3),
            ..Default::default()
        });
        let mut cx = Cx::new(Time(0));
        for i in 0..5 {
            let r = n.enqueue(pkt(0, i, 100, 0), &mut cx);
            assert_eq!(r.is_ok(), i < 3);
        }
        assert_eq!((n.stats().qlen, n.stats().drops), (3, 2));
        assert_eq!(xstats(&n).drop_overlimit, 2);
    }

    #[test]
    fn a_lower_limit_drops_from_the_head() {
        let mut n = node(CodelOpts::default());
        let mut cx = Cx::new(Time(0));
        for i in 0..10 {
            n.enqueue(pkt(0, i, 100, 0), &mut cx).unwrap();
        }
        let lower = QdiscOpts::Codel(CodelOpts {
            limit: Some(4),
            ..Default::default()
        });
        n.qdisc.change(&lower, &DevInfo::default()).unwrap();
        assert_eq!(dump(&n).limit, Some(4));
        let out = drain(&mut n, &mut cx);
        assert_eq!(out, vec![6, 7, 8, 9], "the oldest six went");
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops, s.packets), (0, 0, 6, 4));
    }

    #[test]
    fn below_target_nothing_is_dropped() {
        // 1000-byte packets at 80% of a 10 Mbit/s link for 10 s.
        let mut n = node(CodelOpts::default());
        let arrivals = Arrival::periodic(0, 1000, Duration::from_micros(1000), 10_000);
        let r = run_link(&mut n, 10_000_000, arrivals);
        assert_eq!(n.stats().drops, 0);
        assert!(median(&r.sojourns) < Duration::from_millis(1));
    }

    #[test]
    fn newton_steps_track_the_inverse_square_root() {
        let mut v = CodelVars {
            count: 1,
            rec_inv_sqrt: u16::MAX,
            ..Default::default()
        };
        for count in 2..2000u32 {
            v.count = count;
            codel_law::newton_step(&mut v);
            let exact = 65536.0 / (count as f64).sqrt();
            let err = (v.rec_inv_sqrt as f64 - exact).abs() / exact;
            // One step per increment from a poor start: rough at first,
            // within half a percent from count 10 on.
            let bound = if count < 10 { 0.3 } else { 0.005 };
            assert!(err < bound, "count {count}: {} vs {exact}", v.rec_inv_sqrt);
        }
        // The control law: interval / sqrt(count).
        let interval = codel_law::ms_to_codel(100);
        assert_eq!(
            codel_law::control_law(1000, interval, u16::MAX),
            1000 + 97654
        );
        assert_eq!(codel_law::control_law(0, interval, 32768), 48828);
    }

    /// The essential CoDel property: greedy TCP-like senders, which always
    /// want more than the link carries and back off only when told, meet a
    /// standing queue of about `target`, where a fifo of the same limit
    /// would fill to ~0.8 s. (More flows per link raise it: 16 such flows
    /// hold ~15-20 ms, as CoDel's one signal per drop interval halves only
    /// one flow's window.)
    #[test]
    fn greedy_responsive_senders_are_held_near_target() {
        let mut n = node(CodelOpts::default());
        let load = Reno {
            flows: 4,
            rtt: Duration::from_millis(50),
            len: 1000,
            tos: 0,
            iw: 10,
            until: Time(60_000_000_000),
        };
        let r = run_reno(&mut n, 10_000_000, &load);
        let late: Vec<Duration> = r.sojourns_after(Time(10_000_000_000)).collect();
        let m = median(&late);
        let s = n.stats();
        eprintln!(
            "codel, 4 greedy Reno flows: median sojourn {:.2} ms, {} sent, {} dropped",
            m.as_secs_f64() * 1e3,
            s.packets,
            s.drops
        );
        assert!(m <= Duration::from_millis(10), "median {m:?}");
        assert!(m >= Duration::from_millis(1), "median {m:?}");
        // The link stays busy: 10 Mbit/s of 1000-byte packets is 1250 pkt/s.
        assert!(s.packets > 1250 * 60 * 95 / 100, "{s:?}");
        let x = xstats(&n);
        assert!(x.count >= 1 && x.maxpacket == 1000, "{x:?}");
    }

    /// Unresponsive traffic is CoDel's weak point, in Linux as here: a
    /// constant 2x overload is cut to the link rate, but each dropping
    /// episode restarts from the drop count of the previous one
    /// (`count - lastcount`), so the queue swings between empty and full.
    #[test]
    fn a_two_fold_unresponsive_overload_is_cut_to_the_link_rate() {
        let mut n = node(CodelOpts::default());
        let arrivals = Arrival::periodic(0, 1000, Duration::from_micros(400), 150_000);
        let r = run_link(&mut n, 10_000_000, arrivals);
        let late: Vec<Duration> = r.sojourns_after(Time(20_000_000_000)).collect();
        let m = median(&late);
        let s = n.stats();
        eprintln!(
            "codel, unresponsive 2x overload: median sojourn {:.1} ms after 20 s; {} sent, {} dropped",
            m.as_secs_f64() * 1e3,
            s.packets,
            s.drops
        );
        assert!(m < Duration::from_millis(800), "below a full fifo: {m:?}");
        assert!(s.packets > 74_000, "the link stays busy: {s:?}");
        assert_eq!(150_000, s.packets + s.drops + s.qlen as u64);
        assert!(xstats(&n).count > 100);
    }

    #[test]
    fn ecn_capable_packets_are_marked_instead_of_dropped() {
        let run = |tos: u8| {
            let mut n = node(CodelOpts {
                ecn: Some(true),
                ..Default::default()
            });
            let load = Reno {
                flows: 2,
                rtt: Duration::from_millis(20),
                len: 1000,
                tos,
                iw: 10,
                until: Time(20_000_000_000),
            };
            let r = run_reno(&mut n, 10_000_000, &load);
            (n, r)
        };
        let (n, r) = run(0x02); // ECT(0)
        let x = xstats(&n);
        assert!(x.ecn_mark > 10, "{x:?}");
        assert_eq!(n.stats().drops, 0, "marked, never dropped");
        assert_eq!(r.ce as u32, x.ecn_mark);
        assert!(r.checksums_ok, "the IPv4 checksum follows the mark");
        // Not ECN-capable: the same senders are dropped instead.
        let (n, r) = run(0x00);
        assert!(n.stats().drops > 10);
        assert_eq!((xstats(&n).ecn_mark, r.ce), (0, 0));
    }

    #[test]
    fn ce_threshold_marks_whatever_the_control_law_says() {
        let mut n = node(CodelOpts {
            ce_threshold: Some(1000),
            ..Default::default()
        });
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(0, 0, 100, 0x01), &mut cx).unwrap(); // ECT(1)
        n.enqueue(pkt(0, 1, 100, 0x00), &mut cx).unwrap();
        let mut cx = Cx::new(Time(2_000_000));
        let Dequeue::Packet(p) = n.dequeue(&mut cx) else {
            panic!()
        };
        assert_eq!(p.data[1] & 3, 3);
        assert_eq!(ipv4_checksum(&p.data[..20]), 0);
        let Dequeue::Packet(p) = n.dequeue(&mut cx) else {
            panic!()
        };
        assert_eq!(p.data[1] & 3, 0);
        let x = xstats(&n);
        assert_eq!((x.ce_mark, x.ecn_mark, x.ldelay), (1, 0, 1999));
    }

    #[test]
    fn xstats_show_the_dropping_state() {
        let mut n = node(CodelOpts::default());
        let arrivals = Arrival::periodic(0, 1000, Duration::from_micros(400), 1_000);
        run_link(&mut n, 10_000_000, arrivals);
        let x = xstats(&n);
        assert!(x.count >= 1 && x.lastcount >= 1 && x.maxpacket == 1000);
        let mut n = node(CodelOpts::default());
        let mut cx = Cx::new(Time(0));
        for i in 0..100 {
            n.enqueue(pkt(0, i, 1000, 0), &mut cx).unwrap();
        }
        // Above target at 10 ms, for an interval at 111 ms: dropping.
        n.dequeue(&mut Cx::new(Time(10_000_000)));
        n.dequeue(&mut Cx::new(Time(111_000_000)));
        let x = xstats(&n);
        assert!(x.dropping, "{x:?}");
        assert_eq!((x.count, x.lastcount), (1, 1));
        assert!(x.drop_next > 99_000 && x.drop_next <= 100_000, "{x:?}");
        assert_eq!(n.stats().drops, 1);
    }

    proptest! {
        /// offered = sent + dropped + queued at every step, whatever the
        /// timing and whatever `change` does in between.
        #[test]
        fn packets_are_conserved(
            ops in proptest::collection::vec((0..4u8, 1..2000u32, 0..30_000u64), 1..400),
            limit in 1..50u32,
        ) {
            let mut n = node(CodelOpts { limit: Some(limit), ecn: Some(limit % 2 == 0), ..Default::default() });
            let mut t = 0u64;
            let mut offered = 0u64;
            for (i, &(op, len, dt)) in ops.iter().enumerate() {
                t += dt * 1000;
                let mut cx = Cx::new(Time(t));
                match op {
                    0 | 1 => {
                        offered += 1;
                        let _ = n.enqueue(pkt(0, i as u32, len, (i % 3) as u8), &mut cx);
                    }
                    2 => { n.dequeue(&mut cx); }
                    _ => {
                        let o = QdiscOpts::Codel(CodelOpts { limit: Some(len % 40 + 1), ..Default::default() });
                        n.qdisc.change(&o, &DevInfo::default()).unwrap();
                    }
                }
                let s = n.stats();
                if op != 3 {
                    prop_assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
                }
            }
            drain(&mut n, &mut Cx::new(Time(t)));
            let s = n.stats();
            prop_assert_eq!((s.qlen, s.backlog), (0, 0));
            prop_assert_eq!(offered, s.packets + s.drops);
        }
    }
}
