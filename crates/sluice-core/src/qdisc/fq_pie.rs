//! fq_pie: flow queueing with PIE on every flow.
//!
//! Modelled on net/sched/sch_fq_pie.c (Linux 6.18). Packets are hashed
//! into `flows` queues (1024 by default) by the shared flow hash
//! ([`super::flow_hash`]), scaled to the number of flows; a
//! `skb->priority` of `major:minor` with our major and a minor in
//! 1..=flows picks that flow instead. Each flow runs the PIE law
//! ([`super::pie_law`]) on its own backlog: the early-drop decision at
//! enqueue (CE-marking instead while the flow's probability is at most
//! `ecn_prob` percent, 10 by default, with `ecn`), the delay measurement at
//! dequeue, and the probability update of every flow each `tupdate`.
//! Flows are served as in fq_codel: deficit round robin with `quantum`
//! bytes (the device MTU plus link header by default), flows that become
//! active joining a "new" list served before the "old" one, a flow whose
//! credit is spent moving to the end of the old list, an emptied new flow
//! passing once through the old list before it leaves.
//!
//! The whole qdisc holds at most `limit` packets (10240); beyond that an
//! arrival is dropped (`overlimit`). Packet memory (`skb->truesize`, as
//! fq_codel models it) above `memory_limit` (32 MB) is only counted
//! (`overmemory`), as in the kernel. `flows` can be set only at creation
//! (1..=65536). `change` applies the given options and, with a lower
//! limit, dequeues (in service order) and drops packets until the limit
//! holds. `tc -s` shows `pkts_in`, `overlimit`, `overmemory`, `dropped`,
//! `ecn_mark`, `new_flow_count`, the lengths of the two lists and
//! `memory_used`. fq_pie has no classes and takes no filters.
//!
//! Deviations: the flow hash is lookup3 with a key drawn from
//! `DevInfo::seed`; the update timer is lazy ([`PieTimer`]) and updates all
//! flows at each due time (the kernel updates at most 2048 flows per timer
//! run and comes back at once for the rest); drop decisions draw from a
//! seeded generator; a refused `change` changes nothing (the kernel sets
//! `limit` before refusing a new `flows`); packets `change` drops are
//! reported as shed at the next enqueue or dequeue.

use super::flow_hash;
use super::fq_codel::truesize;
use super::pie::apply_pie_opts;
use super::pie_law::{
    self, jiffies_to_us, ticks_to_us, PieParams, PieStats, PieTimer, PieVars, MAX_PROB,
};
use super::{wrong_kind, Cx, Dequeue, DevInfo, Qdisc, QdiscOpts, XStats};
use crate::error::{TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::DropReason;
use crate::time::Time;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Packets by default.
pub const FQ_PIE_DEFAULT_LIMIT: u32 = 10 * 1024;
/// Flows by default.
pub const FQ_PIE_DEFAULT_FLOWS: u32 = 1024;
/// Most flows.
pub const FQ_PIE_MAX_FLOWS: u32 = 65536;
/// Packet memory by default (`SZ_32M`).
pub const FQ_PIE_DEFAULT_MEMORY_LIMIT: u32 = 32 << 20;

/// The `TCA_FQ_PIE_*` attributes; absent ones keep the current value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqPieOpts {
    /// Packets.
    pub limit: Option<u32>,
    /// Flow queues (creation only).
    pub flows: Option<u32>,
    /// Target delay, µs.
    pub target: Option<u32>,
    /// Update interval, µs.
    pub tupdate: Option<u32>,
    /// Integral gain, sixteenths.
    pub alpha: Option<u32>,
    /// Proportional gain, sixteenths.
    pub beta: Option<u32>,
    /// DRR quantum, bytes (1..=2^20).
    pub quantum: Option<u32>,
    /// Packet memory, bytes.
    pub memory_limit: Option<u32>,
    /// Mark instead of dropping up to this probability, percent.
    pub ecn_prob: Option<u32>,
    /// CE-mark ECN-capable packets.
    pub ecn: Option<bool>,
    /// Scale the probability by packet size.
    pub bytemode: Option<bool>,
    /// Delay from the dequeue rate.
    pub dq_rate_estimator: Option<bool>,
}

/// `struct tc_fq_pie_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqPieXstats {
    /// Packets queued.
    pub packets_in: u32,
    /// Packets refused at the limit.
    pub overlimit: u32,
    /// Arrivals while over the memory limit.
    pub overmemory: u32,
    /// Packets dropped.
    pub dropped: u32,
    /// Packets CE-marked.
    pub ecn_mark: u32,
    /// Flows that became active.
    pub new_flow_count: u32,
    /// Flows in the new list.
    pub new_flows_len: u32,
    /// Flows in the old list.
    pub old_flows_len: u32,
    /// Packet memory in use.
    pub memory_usage: u32,
}

/// One flow (`struct fq_pie_flow`).
#[derive(Debug, Default)]
struct Flow {
    vars: PieVars,
    deficit: i32,
    backlog: u32,
    qlen: u32,
    queue: VecDeque<Packet>,
    /// In the new or old list (`flowchain` not empty).
    listed: bool,
}

/// Validated parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FqPieParams {
    pie: PieParams,
    flows_cnt: u32,
    quantum: u32,
    memory_limit: u32,
    ecn_prob: u32,
}

/// A fq_pie qdisc.
#[derive(Debug)]
pub struct FqPie {
    p: FqPieParams,
    handle: Option<Handle>,
    hashrnd: u32,
    flows: Vec<Flow>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    stats: PieStats,
    overmemory: u32,
    new_flow_count: u32,
    memory_usage: u32,
    qlen: u32,
    timer: PieTimer,
    /// `psched_mtu`.
    mtu: u32,
    rng: Xoshiro256PlusPlus,
    now: Time,
    purged: Vec<u32>,
}

impl FqPieParams {
    /// `fq_pie_init`'s defaults.
    fn defaults(dev: &DevInfo) -> Self {
        let mtu = dev.mtu.saturating_add(dev.hard_header_len);
        FqPieParams {
            pie: PieParams {
                limit: FQ_PIE_DEFAULT_LIMIT,
                ..PieParams::default()
            },
            flows_cnt: FQ_PIE_DEFAULT_FLOWS,
            quantum: mtu.clamp(256, 1 << 20),
            memory_limit: FQ_PIE_DEFAULT_MEMORY_LIMIT,
            ecn_prob: 10,
        }
    }

    /// `fq_pie_change`'s checks and assignments, on a copy.
    fn with(&self, o: &FqPieOpts, created: bool) -> TcResult<Self> {
        if let Some(q) = o.quantum {
            if !(1..=1 << 20).contains(&q) {
                return Err(TcError::inval("integer out of range"));
            }
        }
        let mut p = *self;
        if let Some(l) = o.limit {
            p.pie.limit = l;
        }
        if let Some(f) = o.flows {
            if created {
                return Err(TcError::inval(
                    "sch_fq_pie: Number of flows cannot be changed",
                ));
            }
            if f == 0 || f > FQ_PIE_MAX_FLOWS {
                return Err(TcError::inval(
                    "sch_fq_pie: Number of flows must range in [1..65536]",
                ));
            }
            p.flows_cnt = f;
        }
        apply_pie_opts(
            &mut p.pie,
            o.target,
            o.tupdate,
            o.alpha,
            o.beta,
            o.ecn,
            o.bytemode,
            o.dq_rate_estimator,
        );
        if let Some(q) = o.quantum {
            p.quantum = q;
        }
        if let Some(m) = o.memory_limit {
            p.memory_limit = m;
        }
        if let Some(e) = o.ecn_prob {
            p.ecn_prob = e;
        }
        Ok(p)
    }
}

impl FqPie {
    /// `fq_pie_init`: defaults, the options, then the flow table.
    pub fn new(o: &FqPieOpts, dev: &DevInfo) -> TcResult<Self> {
        let p = FqPieParams::defaults(dev).with(o, false)?;
        let s = dev.seed ^ 0xf9b1_e000_f9b1_e000;
        Ok(FqPie {
            p,
            handle: None,
            hashrnd: (s ^ (s >> 32)) as u32,
            flows: (0..p.flows_cnt).map(|_| Flow::default()).collect(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            stats: PieStats::default(),
            overmemory: 0,
            new_flow_count: 0,
            memory_usage: 0,
            qlen: 0,
            timer: PieTimer::default(),
            mtu: dev.mtu.saturating_add(dev.hard_header_len),
            rng: Xoshiro256PlusPlus::seed_from_u64(s),
            now: Time::ZERO,
            purged: Vec::new(),
        })
    }

    /// The flow (0-based) for `pkt` (`fq_pie_classify` without filters).
    pub fn flow_of(&self, pkt: &mut Packet) -> usize {
        let cnt = self.p.flows_cnt;
        if let Some(h) = self.handle {
            let minor = pkt.priority & 0xffff;
            if pkt.priority & 0xffff_0000 == h.0 && minor > 0 && minor <= cnt {
                return minor as usize - 1;
            }
        }
        if pkt.hash == 0 {
            pkt.hash = flow_hash::flow_hash(pkt, self.hashrnd);
        }
        ((pkt.hash as u64 * cnt as u64) >> 32) as usize
    }

    /// Report what `change` dropped and run the updates that are due.
    fn catch_up(&mut self, cx: &mut Cx) {
        self.now = cx.now;
        for len in self.purged.drain(..) {
            cx.shed(len, DropReason::QueueFull);
        }
        let params = self.p.pie;
        let flows = &mut self.flows;
        self.timer.run(cx.now, params.tupdate, |_| {
            let mut changed = false;
            for f in flows.iter_mut() {
                let before = f.vars;
                pie_law::calculate_probability(&params, &mut f.vars, f.backlog);
                changed |= f.vars != before;
            }
            changed
        });
    }

    /// `fq_pie_qdisc_dequeue` without the timer.
    fn dequeue_one(&mut self, now: Time) -> Option<Packet> {
        loop {
            let from_new = !self.new_flows.is_empty();
            let list = if from_new {
                &mut self.new_flows
            } else {
                &mut self.old_flows
            };
            let &idx = list.front()?;
            let flow = &mut self.flows[idx];
            if flow.deficit <= 0 {
                flow.deficit += self.p.quantum as i32;
                list.pop_front();
                self.old_flows.push_back(idx);
                continue;
            }
            let Some(pkt) = flow.queue.pop_front() else {
                list.pop_front();
                if from_new && !self.old_flows.is_empty() {
                    self.old_flows.push_back(idx);
                } else {
                    flow.listed = false;
                }
                continue;
            };
            self.qlen -= 1;
            flow.qlen -= 1;
            flow.deficit -= pkt.len as i32;
            flow.backlog = flow.backlog.wrapping_sub(pkt.len);
            self.memory_usage = self.memory_usage.wrapping_sub(truesize(pkt.len));
            pie_law::process_dequeue(
                &self.p.pie,
                &mut flow.vars,
                pkt.len,
                pkt.tstamp,
                flow.backlog,
                now,
            );
            return Some(pkt);
        }
    }
}

impl Qdisc for FqPie {
    fn set_handle(&mut self, handle: Handle) {
        self.handle = Some(handle);
    }

    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.catch_up(cx);
        let idx = self.flow_of(&mut pkt);
        let ts = truesize(pkt.len);
        let memory_limited = self.memory_usage as u64 > self.p.memory_limit as u64 + ts as u64;
        let reason = if self.qlen >= self.p.pie.limit {
            self.stats.overlimit += 1;
            DropReason::QueueFull
        } else {
            if memory_limited {
                self.overmemory += 1;
            }
            let p = &self.p.pie;
            let flow = &mut self.flows[idx];
            let early = pie_law::drop_early(
                p,
                &mut flow.vars,
                flow.backlog,
                pkt.len,
                self.mtu,
                &mut self.rng,
            );
            let admit = !early
                || (p.ecn && flow.vars.prob <= (MAX_PROB / 100) * self.p.ecn_prob as u64 && {
                    let marked = pkt.set_ce();
                    if marked {
                        self.stats.ecn_mark += 1;
                    }
                    marked
                });
            if admit {
                if !p.dq_rate_estimator {
                    pkt.tstamp = cx.now;
                }
                self.stats.packets_in += 1;
                self.memory_usage = self.memory_usage.wrapping_add(ts);
                self.qlen += 1;
                let len = pkt.len;
                flow.queue.push_back(pkt);
                if !flow.listed {
                    flow.listed = true;
                    self.new_flows.push_back(idx);
                    self.new_flow_count += 1;
                    flow.deficit = self.p.quantum as i32;
                    flow.qlen = 0;
                    flow.backlog = 0;
                }
                flow.qlen += 1;
                flow.backlog = flow.backlog.wrapping_add(len);
                return Ok(());
            }
            DropReason::Aqm
        };
        self.stats.dropped += 1;
        self.flows[idx].vars.accu_prob = 0;
        Err((pkt, reason))
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.catch_up(cx);
        self.dequeue_one(cx.now)
            .map_or(Dequeue::Empty, Dequeue::Packet)
    }

    /// `fq_pie_reset`.
    fn reset(&mut self) {
        self.new_flows.clear();
        self.old_flows.clear();
        for f in &mut self.flows {
            f.queue.clear();
            f.listed = false;
            f.vars.init();
        }
        self.qlen = 0;
        self.purged.clear();
    }

    /// `fq_pie_change`.
    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::FqPie(o) = opts else {
            return Err(wrong_kind("fq_pie", opts));
        };
        self.p = self.p.with(o, true)?;
        while self.qlen > self.p.pie.limit {
            match self.dequeue_one(self.now) {
                Some(p) => self.purged.push(p.len),
                None => break,
            }
        }
        Ok(())
    }

    /// `fq_pie_dump`.
    fn dump(&self) -> QdiscOpts {
        let p = &self.p;
        QdiscOpts::FqPie(FqPieOpts {
            limit: Some(p.pie.limit),
            flows: Some(p.flows_cnt),
            target: Some(ticks_to_us(p.pie.target)),
            tupdate: Some(jiffies_to_us(p.pie.tupdate)),
            alpha: Some(p.pie.alpha),
            beta: Some(p.pie.beta),
            quantum: Some(p.quantum),
            memory_limit: Some(p.memory_limit),
            ecn_prob: Some(p.ecn_prob),
            ecn: Some(p.pie.ecn),
            bytemode: Some(p.pie.bytemode),
            dq_rate_estimator: Some(p.pie.dq_rate_estimator),
        })
    }

    /// `fq_pie_dump_stats`.
    fn xstats(&self) -> XStats {
        XStats::FqPie(FqPieXstats {
            packets_in: self.stats.packets_in,
            overlimit: self.stats.overlimit,
            overmemory: self.overmemory,
            dropped: self.stats.dropped,
            ecn_mark: self.stats.ecn_mark,
            new_flow_count: self.new_flow_count,
            new_flows_len: self.new_flows.len() as u32,
            old_flows_len: self.old_flows.len() as u32,
            memory_usage: self.memory_usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Skb;
    use crate::qdisc::codel_law::testing::{median, pkt, run_link, Arrival};
    use crate::qdisc::QdiscNode;
    use crate::time::Duration;
    use proptest::prelude::*;

    const H: Handle = Handle::new(1, 0);

    fn node(o: FqPieOpts) -> QdiscNode {
        QdiscNode::new(
            H,
            Handle::ROOT,
            Box::new(FqPie::new(&o, &DevInfo::default()).unwrap()),
        )
    }

    fn xstats(n: &QdiscNode) -> FqPieXstats {
        match n.qdisc.xstats() {
            XStats::FqPie(x) => x,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_and_validation_as_the_kernel() {
        let n = node(FqPieOpts::default());
        assert_eq!(
            n.qdisc.dump(),
            QdiscOpts::FqPie(FqPieOpts {
                limit: Some(10240),
                flows: Some(1024),
                target: Some(15_000),
                tupdate: Some(15_000),
                alpha: Some(2),
                beta: Some(20),
                quantum: Some(1514),
                memory_limit: Some(32 << 20),
                ecn_prob: Some(10),
                ecn: Some(false),
                bytemode: Some(false),
                dq_rate_estimator: Some(false),
            })
        );
        let dev = DevInfo::default();
        let e = |o: FqPieOpts| FqPie::new(&o, &dev).unwrap_err().describe();
        assert_eq!(
            e(FqPieOpts {
                flows: Some(0),
                ..Default::default()
            }),
            "Error: sch_fq_pie: Number of flows must range in [1..65536]."
        );
        assert!(FqPie::new(
            &FqPieOpts {
                flows: Some(65536),
                ..Default::default()
            },
            &dev
        )
        .is_ok());
        assert_eq!(
            e(FqPieOpts {
                quantum: Some(0),
                ..Default::default()
            }),
            "Error: integer out of range."
        );
        // flows cannot change, and a refused change changes nothing.
        let mut n = node(FqPieOpts::default());
        let o = QdiscOpts::FqPie(FqPieOpts {
            limit: Some(5),
            flows: Some(8),
            ..Default::default()
        });
        assert_eq!(
            n.qdisc.change(&o, &dev).unwrap_err().describe(),
            "Error: sch_fq_pie: Number of flows cannot be changed."
        );
        let QdiscOpts::FqPie(d) = n.qdisc.dump() else {
            unreachable!()
        };
        assert_eq!(d.limit, Some(10240));
    }

    #[test]
    fn flows_take_turns_and_new_flows_go_first() {
        let mut n = node(FqPieOpts {
            quantum: Some(1000),
            ..Default::default()
        });
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            n.enqueue(pkt(0, i, 1000, 0), &mut cx).unwrap();
        }
        let first = |n: &mut QdiscNode, cx: &mut Cx| match n.dequeue(cx) {
            Dequeue::Packet(p) => p.id,
            d => panic!("{d:?}"),
        };
        assert_eq!(first(&mut n, &mut cx), 0);
        // Flow 1 arrives: a new flow, served before flow 0's next packet.
        n.enqueue(pkt(1, 0, 1000, 0), &mut cx).unwrap();
        assert_eq!(first(&mut n, &mut cx), 1_000_000);
        assert_eq!(first(&mut n, &mut cx), 1);
        assert_eq!(first(&mut n, &mut cx), 2);
        let x = xstats(&n);
        assert_eq!((x.new_flow_count, x.packets_in), (2, 4));
    }

    /// fq_pie's point: a sparse flow (one small packet every 10 ms) sees
    /// almost no queue while a heavy unresponsive flow at 2x the link rate
    /// is held by its own PIE near target.
    #[test]
    fn a_sparse_flow_is_isolated_from_a_heavy_one() {
        let mut n = node(FqPieOpts::default());
        let heavy = Arrival::periodic(0, 1000, Duration::from_micros(400), 75_000);
        let sparse = (0..3000u32).map(|i| Arrival {
            at: Time(i as u64 * 10_000_000 + 123_000),
            pkt: pkt(1, i, 100, 0),
        });
        let all = Arrival::merge(heavy.chain(sparse).collect());
        let r = run_link(&mut n, 10_000_000, all);
        let t = Time(10_000_000_000);
        let s = r.flow_sojourns_after(1, t);
        let h = r.flow_sojourns_after(0, t);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        eprintln!(
            "fq_pie: sparse median {:.3} ms max {:.3} ms, heavy median {:.1} ms",
            ms(median(&s)),
            ms(*s.iter().max().unwrap()),
            ms(median(&h))
        );
        assert!(s.len() > 1900, "the sparse flow got through: {}", s.len());
        assert!(*s.iter().max().unwrap() < Duration::from_millis(1));
        assert!(median(&h) > Duration::from_millis(5) && median(&h) < Duration::from_millis(40));
    }

    #[test]
    fn priority_naming_our_flow_picks_it() {
        let mut q = FqPie::new(&FqPieOpts::default(), &DevInfo::default()).unwrap();
        q.set_handle(H);
        let mut p = Packet::from(Skb {
            priority: 0x0001_0007,
            ..pkt(0, 0, 100, 0).into_skb()
        });
        assert_eq!(q.flow_of(&mut p), 6);
        let mut other = Packet::from(Skb {
            priority: 0x0002_0007,
            ..pkt(0, 0, 100, 0).into_skb()
        });
        assert_eq!(q.flow_of(&mut other), q.flow_of(&mut pkt(0, 0, 100, 0)));
    }

    #[test]
    fn a_lower_limit_drops_in_service_order() {
        let mut n = node(FqPieOpts::default());
        let mut cx = Cx::new(Time(0));
        for i in 0..6 {
            n.enqueue(pkt(i % 2, i, 500, 0), &mut cx).unwrap();
        }
        let o = QdiscOpts::FqPie(FqPieOpts {
            limit: Some(2),
            ..Default::default()
        });
        n.qdisc.change(&o, &DevInfo::default()).unwrap();
        let mut out = vec![];
        while let Dequeue::Packet(p) = n.dequeue(&mut cx) {
            out.push(p.id);
        }
        assert_eq!(out.len(), 2);
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops, s.packets), (0, 0, 4, 2));
    }

    proptest! {
        #[test]
        fn packets_are_conserved(
            ops in proptest::collection::vec((0..3u8, 0..6u32, 40..1600u32, 0..5000u64), 1..300),
            limit in 1..40u32,
            quantum in 1..3000u32,
        ) {
            let mut n = node(FqPieOpts { limit: Some(limit), quantum: Some(quantum), flows: Some(4), ..Default::default() });
            let (mut t, mut offered) = (0u64, 0u64);
            for (i, &(op, f, len, dt)) in ops.iter().enumerate() {
                t += dt * 1000;
                let mut cx = Cx::new(Time(t));
                if op < 2 {
                    offered += 1;
                    let _ = n.enqueue(pkt(f, i as u32, len, 0), &mut cx);
                } else {
                    n.dequeue(&mut cx);
                }
                let s = n.stats();
                prop_assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
                prop_assert!(s.qlen <= limit);
            }
        }
    }
}
