//! red: Random Early Detection in front of one inner queue.
//!
//! Modelled on net/sched/sch_red.c (Linux 6.18); the arithmetic is the
//! shared RED law ([`super::red_law`]). At each arrival the average of the
//! inner queue's backlog in bytes is updated (or decayed over the idle
//! period that ends now) and RED decides: below `min` the packet is queued;
//! between `min` and `max` it is marked with a probability rising to
//! `probability` at `max`; at or above `max` it is always marked. "Marked"
//! means dropped, or with `ecn` CE-marked when the packet is ECN-capable
//! (`harddrop` drops above `max` even then, `nodrop` queues non-ECN-capable
//! packets instead of dropping them). Each mark or drop by RED counts an
//! overlimit. Packets RED lets through go to the inner qdisc, by default a
//! bfifo of `limit` bytes, which tail-drops when full (`pdrop`). An empty
//! dequeue starts an idle period.
//!
//! red is classful with one class `major:1` whose qdisc can be replaced
//! (`tc qdisc add ... parent major:1`); the default bfifo has handle 0 and
//! is hidden from `tc qdisc show`. Every `change` with a non-zero limit puts
//! a fresh bfifo of that limit in place of whatever qdisc the class held,
//! discarding its packets, and restarts the average.
//!
//! `tc -s` shows `marked` (early and forced ECN marks), `early` (early and
//! forced drops), `pdrop` (drops by the inner qdisc) and `other` (always 0
//! in today's kernels).
//!
//! Adaptive RED: the kernel starts its 500 ms adaptation timer only when
//! the adaptive bit is in `tc_red_qopt.flags`; iproute2 since 5.7 sends the
//! flags in `TCA_RED_FLAGS` instead, so with today's tc `adaptive` is
//! accepted and shown but `max_P` does not move. sluice does the same (a
//! request that carries the bit in the old field does adapt).
//!
//! Deviations: the adaptation timer is lazy — its 500 ms steps are run at
//! the next enqueue or dequeue, each at its own due time, and it starts at
//! the first call after `change`; `change` has no time, so an idle period
//! it starts is dated from the last call seen (with the average reset to 0
//! that date cannot matter to the average). Packets discarded with the old
//! inner qdisc by `change` are reported as shed at the next enqueue or
//! dequeue, as codel does. qevents (`TCA_RED_*_BLOCK`) are not supported.

use super::fifo::{Fifo, FifoKind, FifoOpts};
use super::noqueue::{child_leaves, child_leaves_ref, noop_child, swap_child};
use super::red_law::{
    self, red_check_params, RedAction, RedParams, RedVars, RED_STAB_SIZE, TC_RED_ADAPTATIVE,
    TC_RED_ECN, TC_RED_HARDDROP, TC_RED_HISTORIC_FLAGS, TC_RED_NODROP,
};
use super::{
    wrong_kind, ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts,
    XStats,
};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::{DropReason, Stats};
use crate::time::{Duration, Time};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// The flags the kernel accepts (`TC_RED_SUPPORTED_FLAGS`).
pub const TC_RED_SUPPORTED_FLAGS: u8 = TC_RED_HISTORIC_FLAGS | TC_RED_NODROP;
/// Adaptive RED's period.
const ADAPT_PERIOD: Duration = Duration::from_millis(500);

/// `TCA_RED_FLAGS`: an `nla_bitfield32`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedFlagsBf {
    /// The flag values.
    pub value: u32,
    /// Which flags the value sets.
    pub selector: u32,
}

/// What tc sends (`TCA_RED_PARMS`, `TCA_RED_STAB`, `TCA_RED_MAX_P`,
/// `TCA_RED_FLAGS`) and the kernel dumps (without the table).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedOpts {
    /// Bytes of the inner bfifo (0: keep the inner qdisc).
    pub limit: u32,
    /// Minimum threshold, bytes.
    pub qth_min: u32,
    /// Maximum threshold, bytes.
    pub qth_max: u32,
    /// log2(1/W) of the average.
    pub wlog: u8,
    /// log2 of the probability denominator.
    pub plog: u8,
    /// log2 of the idle-time cell, µs.
    pub scell_log: u8,
    /// `tc_red_qopt.flags` (historic flags, plus bits the kernel keeps as
    /// "userbits"); in a dump, the historic flags in effect.
    pub flags: u8,
    /// The idle-damping table (256 entries; absent in dumps).
    pub stab: Option<Vec<u8>>,
    /// Marking probability at `max`, Q0.32 (0: derived from `plog`).
    pub max_p: Option<u32>,
    /// The flags as a bitfield (how tc sends them; the dump has them all).
    pub flags_bf: Option<RedFlagsBf>,
}

/// `struct tc_red_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedXstats {
    /// Early and forced drops by RED.
    pub early: u32,
    /// Drops by the inner qdisc (queue limit).
    pub pdrop: u32,
    /// Other drops (unused by today's kernels).
    pub other: u32,
    /// Early and forced ECN marks.
    pub marked: u32,
}

/// `struct red_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RedCounters {
    prob_drop: u32,
    prob_mark: u32,
    forced_drop: u32,
    forced_mark: u32,
    pdrop: u32,
}

/// A red qdisc.
#[derive(Debug)]
pub struct Red {
    /// Bytes of the inner bfifo as last configured.
    limit: u32,
    /// `TC_RED_*` flags in effect.
    flags: u8,
    /// Non-flag bits of `tc_red_qopt.flags`, dumped back as given.
    userbits: u8,
    params: RedParams,
    vars: RedVars,
    stats: RedCounters,
    /// Adaptive RED runs (the bit was in `tc_red_qopt.flags`).
    adaptive: bool,
    /// When the next adaptation step is due (`None`: not started).
    next_adapt: Option<Time>,
    rng: Xoshiro256PlusPlus,
    /// The qdisc of class `major:1`.
    child: QdiscNode,
    major: u16,
    overlimits: u64,
    /// The time of the last call.
    now: Time,
    /// Packets (count, bytes) discarded by `change`, not yet reported.
    purged: (u64, u64),
}

/// `red_get_flags` + `red_validate_flags`: the flags after applying the
/// request to `current`, and the userbits.
fn request_flags(o: &RedOpts, current: u8) -> TcResult<(u8, u8)> {
    if o.flags != 0 && o.flags_bf.is_some() {
        return Err(TcError::inval(
            "sch_red: flags should be passed either through qopt, or through a dedicated attribute",
        ));
    }
    let (value, selector) = match o.flags_bf {
        Some(bf) => {
            let supported = TC_RED_SUPPORTED_FLAGS as u32;
            if bf.value & !supported != 0 || bf.selector & !supported != 0 {
                return Err(TcError::inval("Unsupported bitfield flags"));
            }
            (bf.value as u8, bf.selector as u8)
        }
        None => (o.flags & TC_RED_HISTORIC_FLAGS, TC_RED_HISTORIC_FLAGS),
    };
    let userbits = o.flags & !TC_RED_HISTORIC_FLAGS;
    let flags = (current & !selector) | (value & selector);
    if flags & TC_RED_NODROP != 0 && flags & TC_RED_ECN == 0 {
        return Err(TcError::inval(
            "sch_red: nodrop mode is only meaningful with ECN",
        ));
    }
    Ok((flags, userbits))
}

/// The table, if present and long enough (`nla_policy .len`).
fn stab_of(o: &RedOpts) -> TcResult<[u8; RED_STAB_SIZE]> {
    let s = o.stab.as_ref().ok_or(TcError::errno(Errno::EINVAL))?;
    if s.len() < RED_STAB_SIZE {
        return Err(TcError::errno(Errno::EINVAL));
    }
    let mut t = [0u8; RED_STAB_SIZE];
    t.copy_from_slice(&s[..RED_STAB_SIZE]);
    Ok(t)
}

impl Red {
    /// `red_init`: noop inside, then the options as `change` applies them.
    pub fn new(o: &RedOpts, dev: &DevInfo) -> TcResult<Self> {
        let mut q = Red {
            limit: 0,
            flags: 0,
            userbits: 0,
            params: RedParams::new(0, 0, 0, 0, 0, None, 0),
            vars: RedVars::default(),
            stats: RedCounters::default(),
            adaptive: false,
            next_adapt: None,
            rng: Xoshiro256PlusPlus::seed_from_u64(dev.seed ^ 0x7265_6400_0000_0000),
            child: noop_child(Handle::new(0, 1)),
            major: 0,
            overlimits: 0,
            now: Time::ZERO,
            purged: (0, 0),
        };
        q.apply(o, dev)?;
        Ok(q)
    }

    /// `__red_change`: validate everything, then commit.
    fn apply(&mut self, o: &RedOpts, dev: &DevInfo) -> TcResult<()> {
        let stab = stab_of(o)?;
        if !red_check_params(o.qth_min, o.qth_max, o.wlog, o.scell_log, Some(&stab)) {
            return Err(TcError::errno(Errno::EINVAL));
        }
        let (flags, userbits) = request_flags(o, self.flags)?;
        let child = if o.limit > 0 {
            let fifo = Fifo::new(
                FifoKind::Bytes,
                &FifoOpts {
                    limit: Some(o.limit),
                },
                dev,
            )?;
            Some(QdiscNode::new(Handle::UNSPEC, self.class_id(), Box::new(fifo)).hashed_invisible())
        } else {
            None
        };
        // Commit.
        self.flags = flags;
        self.userbits = userbits;
        self.limit = o.limit;
        if let Some(c) = child {
            let old = std::mem::replace(&mut self.child, c);
            let s = old.stats();
            self.purged.0 += s.qlen as u64;
            self.purged.1 += s.backlog;
        }
        self.params = RedParams::new(
            o.qth_min,
            o.qth_max,
            o.wlog,
            o.plog,
            o.scell_log,
            Some(&stab),
            o.max_p.unwrap_or(0),
        );
        self.vars.set_vars();
        self.adaptive = o.flags & TC_RED_ADAPTATIVE != 0;
        self.next_adapt = None;
        if self.child.stats.qlen == 0 {
            self.vars.start_idle(self.now);
        }
        Ok(())
    }

    fn class_id(&self) -> Handle {
        Handle::new(self.major, 1)
    }

    /// Report what `change` discarded, and run the adaptation steps due.
    fn catch_up(&mut self, cx: &mut Cx) {
        self.now = cx.now;
        let (n, bytes) = std::mem::take(&mut self.purged);
        for i in 0..n {
            // Lengths are not known one by one: spread the bytes evenly.
            let share = bytes / n + u64::from(i < bytes % n);
            cx.shed(share as u32, DropReason::QueueFull);
        }
        if !self.adaptive {
            return;
        }
        let mut due = match self.next_adapt {
            None => {
                self.next_adapt = Some(cx.now + ADAPT_PERIOD);
                return;
            }
            Some(t) => t,
        };
        while due <= cx.now {
            let before = (self.params.max_p, self.params.max_p_delta);
            self.params.adapt(&self.vars, due);
            due += ADAPT_PERIOD;
            if (self.params.max_p, self.params.max_p_delta) == before && due <= cx.now {
                // Nothing moves until the next call: skip the idle steps.
                let missed = (cx.now.0 - due.0) / ADAPT_PERIOD.0;
                due = Time(due.0 + (missed + 1) * ADAPT_PERIOD.0);
            }
        }
        self.next_adapt = Some(due);
    }

    /// The current marking probability at `max`, Q0.32 (for tests and adaptive RED).
    pub fn max_p(&self) -> u32 {
        self.params.max_p
    }
}

impl Qdisc for Red {
    fn set_handle(&mut self, handle: Handle) {
        self.major = handle.major();
        self.child.parent = self.class_id();
    }

    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.catch_up(cx);
        let p = &self.params;
        self.vars.qavg = red_law::calc_qavg(p, &self.vars, self.child.stats.backlog, cx.now);
        if self.vars.is_idling() {
            self.vars.end_idle();
        }
        let ecn = self.flags & TC_RED_ECN != 0;
        let nodrop = self.flags & TC_RED_NODROP != 0;
        let qavg = self.vars.qavg;
        match red_law::red_action(p, &mut self.vars, qavg, &mut self.rng) {
            RedAction::DontMark => {}
            RedAction::ProbMark => {
                self.overlimits += 1;
                if ecn && pkt.set_ce() {
                    self.stats.prob_mark += 1;
                } else if !ecn || !nodrop {
                    self.stats.prob_drop += 1;
                    return Err((pkt, DropReason::Aqm));
                }
            }
            RedAction::HardMark => {
                self.overlimits += 1;
                let harddrop = self.flags & TC_RED_HARDDROP != 0;
                if !harddrop && ecn && pkt.set_ce() {
                    self.stats.forced_mark += 1;
                } else if harddrop || !ecn || !nodrop {
                    self.stats.forced_drop += 1;
                    return Err((pkt, DropReason::Aqm));
                }
            }
        }
        match self.child.offer(pkt, cx) {
            Ok(()) => Ok(()),
            Err((pkt, reason)) => {
                if reason.counts() {
                    self.stats.pdrop += 1;
                }
                Err((pkt, reason))
            }
        }
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.catch_up(cx);
        let d = self.child.dequeue(cx);
        if !matches!(d, Dequeue::Packet(_)) && !self.vars.is_idling() {
            self.vars.start_idle(cx.now);
        }
        d
    }

    /// `red_reset`: empty the inner qdisc and restart the average.
    fn reset(&mut self) {
        self.child.reset();
        self.vars.restart();
        self.purged = (0, 0);
    }

    fn change(&mut self, opts: &QdiscOpts, dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Red(o) = opts else {
            return Err(wrong_kind("red", opts));
        };
        self.apply(o, dev)
    }

    /// `red_dump`.
    fn dump(&self) -> QdiscOpts {
        let p = &self.params;
        QdiscOpts::Red(RedOpts {
            limit: self.limit,
            qth_min: p.min_threshold(),
            qth_max: p.max_threshold(),
            wlog: p.wlog,
            plog: p.plog,
            scell_log: p.scell_log,
            flags: (self.flags & TC_RED_HISTORIC_FLAGS) | self.userbits,
            stab: None,
            max_p: Some(p.max_p),
            flags_bf: Some(RedFlagsBf {
                value: self.flags as u32,
                selector: TC_RED_SUPPORTED_FLAGS as u32,
            }),
        })
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }

    /// `red_dump_stats`.
    fn xstats(&self) -> XStats {
        let s = &self.stats;
        XStats::Red(RedXstats {
            early: s.prob_drop.wrapping_add(s.forced_drop),
            pdrop: s.pdrop,
            other: 0,
            marked: s.prob_mark.wrapping_add(s.forced_mark),
        })
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for Red {
    /// red has no class `change`: `EOPNOTSUPP`.
    fn change_class(
        &mut self,
        _classid: Handle,
        _parent: Handle,
        _opts: Option<&ClassOpts>,
        _dev: &DevInfo,
    ) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// red has no class `delete`: `EOPNOTSUPP`.
    fn delete_class(&mut self, _classid: Handle) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// The one class `major:1` (`red_dump_class`; no class statistics).
    fn list(&self) -> Vec<ClassInfo> {
        let leaf = self.child.handle;
        vec![ClassInfo {
            classid: self.class_id(),
            parent: Handle::new(self.major, 0),
            leaf: (!leaf.is_unspec()).then_some(leaf),
            opts: ClassOpts::Plain,
            stats: Stats::default(),
            xstats: XStats::Absent,
        }]
    }

    /// `red_find` answers every class id with the one class.
    fn contains(&self, _classid: Handle) -> bool {
        true
    }

    fn leaf(&self, _classid: Handle) -> Option<&QdiscNode> {
        Some(&self.child)
    }

    /// `red_graft`: `None` leaves noop. The old qdisc goes back to the
    /// caller with its queue, to be purged from the ancestors.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        _dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        if classid.major() != 0 {
            self.major = classid.major();
        }
        let class = self.class_id();
        Ok(swap_child(&mut self.child, new, class))
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        child_leaves(&mut self.child)
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        child_leaves_ref(&self.child)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::codel_law::testing::{ipv4_checksum, pkt};
    use crate::qdisc::red_law::RED_ONE_PERCENT;
    use proptest::prelude::*;

    const H: Handle = Handle::new(1, 0);

    /// What tc sends for `limit L min MIN max MAX avpkt 1000 burst B
    /// probability P bandwidth 10mbit`, with a table of zeros and the
    /// given Wlog (tests choose it instead of deriving it from a burst).
    fn opts(limit: u32, min: u32, max: u32, wlog: u8, prob: f64, flags: u8) -> RedOpts {
        RedOpts {
            limit,
            qth_min: min,
            qth_max: max,
            wlog,
            plog: 20,
            scell_log: 10,
            flags: 0,
            stab: Some(vec![0; 256]),
            max_p: Some((prob * 4294967296.0) as u32),
            flags_bf: Some(RedFlagsBf {
                value: flags as u32,
                selector: TC_RED_SUPPORTED_FLAGS as u32,
            }),
        }
    }

    fn node(o: &RedOpts) -> QdiscNode {
        QdiscNode::new(
            H,
            Handle::ROOT,
            Box::new(Red::new(o, &DevInfo::default()).unwrap()),
        )
    }

    fn xstats(n: &QdiscNode) -> RedXstats {
        match n.qdisc.xstats() {
            XStats::Red(x) => x,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn dumps_what_the_kernel_dumps() {
        let n = node(&opts(1 << 20, 100 << 10, 300 << 10, 9, 0.02, TC_RED_ECN));
        let QdiscOpts::Red(d) = n.qdisc.dump() else {
            unreachable!()
        };
        assert_eq!((d.limit, d.qth_min, d.qth_max), (1 << 20, 102_400, 307_200));
        assert_eq!(
            (d.wlog, d.plog, d.scell_log, d.flags),
            (9, 20, 10, TC_RED_ECN)
        );
        assert_eq!(d.max_p, Some(85_899_345));
        assert_eq!(d.flags_bf.unwrap().value, TC_RED_ECN as u32);
        assert_eq!(d.stab, None);
        // The inner bfifo: hidden handle, parent 1:1, limit in bytes.
        let c = n.qdisc.classes_ref().unwrap();
        let leaf = c.leaves_ref()[0];
        assert!(leaf.handle.is_unspec());
        assert_eq!(leaf.parent, Handle::new(1, 1));
        assert_eq!(
            leaf.qdisc.dump(),
            QdiscOpts::Bfifo(FifoOpts {
                limit: Some(1 << 20)
            })
        );
    }

    #[test]
    fn the_kernel_refuses_what_it_refuses() {
        let dev = DevInfo::default();
        let inval = |o: &RedOpts| Red::new(o, &dev).unwrap_err().errno;
        // tc-testing d091: nodrop without ecn.
        let e = Red::new(&opts(1 << 20, 1000, 3000, 9, 0.02, TC_RED_NODROP), &dev).unwrap_err();
        assert_eq!(
            e.describe(),
            "Error: sch_red: nodrop mode is only meaningful with ECN."
        );
        let mut o = opts(1 << 20, 1000, 3000, 9, 0.02, 0);
        o.stab = None;
        assert_eq!(inval(&o), Errno::EINVAL);
        let mut o = opts(1 << 20, 3000, 1000, 9, 0.02, 0);
        assert_eq!(inval(&o), Errno::EINVAL);
        o = opts(1 << 20, 1000, 1 << 24, 9, 0.02, 0);
        assert_eq!(inval(&o), Errno::EINVAL, "max << Wlog overflows 32 bits");
        o = opts(1 << 20, 1000, 3000, 9, 0.02, 0);
        o.flags = TC_RED_ECN;
        assert!(inval(&o) == Errno::EINVAL, "flags in both places");
        // A refused change changes nothing.
        let mut n = node(&opts(1 << 20, 1000, 3000, 9, 0.02, TC_RED_ECN));
        let before = n.qdisc.dump();
        let bad = QdiscOpts::Red(opts(
            5000,
            1000,
            3000,
            9,
            0.02,
            TC_RED_NODROP | TC_RED_HARDDROP,
        ));
        // nodrop with ecn still set through the selector: here ecn is cleared.
        assert!(n.qdisc.change(&bad, &dev).is_err());
        assert_eq!(n.qdisc.dump(), before);
    }

    /// Wlog 0 makes the average the backlog the arrival sees, so the
    /// thresholds act on the queue itself: no RED action below min, every
    /// packet dropped at or above max (not ECN-capable), and drops in
    /// between that become more frequent.
    #[test]
    fn no_early_drops_below_min_and_all_drops_above_max() {
        let mut n = node(&opts(1 << 20, 10_000, 20_000, 0, 0.5, 0));
        let mut cx = Cx::new(Time(0));
        for i in 0..10 {
            assert!(n.enqueue(pkt(0, i, 1000, 0), &mut cx).is_ok(), "packet {i}");
        }
        // Backlog now 10000 = min: between the thresholds.
        let mut accepted = 0;
        let mut tries = 0;
        while n.stats().backlog < 20_000 {
            tries += 1;
            if n.enqueue(pkt(0, tries, 1000, 0), &mut cx).is_ok() {
                accepted += 1;
            }
        }
        assert_eq!(accepted, 10);
        assert!(tries > 10, "some early drops between min and max");
        for i in 0..100 {
            assert_eq!(
                n.enqueue(pkt(0, 1000 + i, 1000, 0), &mut cx),
                Err(DropReason::Aqm)
            );
        }
        let x = xstats(&n);
        assert_eq!(x.early as u64, n.stats().drops);
        assert_eq!((x.marked, x.pdrop), (0, 0));
        assert_eq!(n.stats().overlimits, x.early as u64);
    }

    #[test]
    fn ecn_capable_packets_are_marked_instead_of_dropped() {
        let mut n = node(&opts(1 << 20, 10_000, 20_000, 0, 0.5, TC_RED_ECN));
        let mut cx = Cx::new(Time(0));
        for i in 0..60 {
            n.enqueue(pkt(0, i, 1000, 0x02), &mut cx).unwrap();
        }
        let mut ce = 0;
        while let Dequeue::Packet(p) = n.dequeue(&mut cx) {
            assert_eq!(ipv4_checksum(&p.data[..20]), 0);
            ce += (p.data[1] & 3 == 3) as u32;
        }
        let x = xstats(&n);
        assert_eq!(n.stats().drops, 0);
        assert!(ce >= 40, "every packet at or above max is marked: {ce}");
        assert_eq!(x.marked, ce);
        // Not ECN-capable: dropped. With harddrop, ECN-capable too above max.
        let mut n = node(&opts(1 << 20, 10_000, 20_000, 0, 0.5, TC_RED_ECN));
        for i in 0..60 {
            let _ = n.enqueue(pkt(0, i, 1000, 0), &mut cx);
        }
        assert!(n.stats().drops >= 40);
        let mut n = node(&opts(
            1 << 20,
            10_000,
            20_000,
            0,
            0.5,
            TC_RED_ECN | TC_RED_HARDDROP,
        ));
        for i in 0..60 {
            let _ = n.enqueue(pkt(0, i, 1000, 0x02), &mut cx);
        }
        assert_eq!(n.stats().backlog, 20_000, "nothing queued above max");
        // nodrop: non-ECT packets are queued whatever RED says.
        let mut n = node(&opts(
            1 << 20,
            10_000,
            20_000,
            0,
            0.5,
            TC_RED_ECN | TC_RED_NODROP,
        ));
        for i in 0..60 {
            n.enqueue(pkt(0, i, 1000, 0), &mut cx).unwrap();
        }
        assert_eq!(n.stats().qlen, 60);
        assert!(n.stats().overlimits >= 40);
    }

    #[test]
    fn the_inner_bfifo_drops_at_its_limit() {
        let mut n = node(&opts(5000, 100_000, 200_000, 0, 0.02, 0));
        let mut cx = Cx::new(Time(0));
        for i in 0..8 {
            let _ = n.enqueue(pkt(0, i, 1000, 0), &mut cx);
        }
        assert_eq!((n.stats().qlen, n.stats().drops), (5, 3));
        assert_eq!(xstats(&n).pdrop, 3);
    }

    /// With Wlog 3 the average moves an eighth of the way at each arrival;
    /// after a long idle period it has decayed per the table.
    #[test]
    fn the_average_follows_the_backlog_and_decays_when_idle() {
        let mut o = opts(1 << 20, 100_000, 200_000, 3, 0.02, 0);
        let mut stab = vec![0u8; 256];
        stab[1..].fill(31);
        o.stab = Some(stab);
        o.scell_log = 0;
        let mut q = Red::new(&o, &DevInfo::default()).unwrap();
        let mut cx = Cx::new(Time(0));
        // Created empty: idle, so the first arrival finds an average of 0.
        let mut exact = 0.0f64;
        for i in 0..50 {
            let backlog = q.child.stats.backlog as f64;
            q.enqueue(pkt(0, i, 1000, 0), &mut cx).unwrap();
            if i > 0 {
                exact += (backlog - exact) / 8.0;
            }
            let avg = q.vars.qavg as f64 / 8.0;
            assert!((avg - exact).abs() < 8.0, "{i}: {avg} vs {exact}");
        }
        while let Dequeue::Packet(_) = q.dequeue(&mut cx) {}
        q.dequeue(&mut cx);
        assert!(q.vars.is_idling());
        // 5 µs later: cell 5, 31 halvings: the average is gone.
        let mut cx = Cx::new(Time(5_000));
        q.enqueue(pkt(0, 99, 1000, 0), &mut cx).unwrap();
        assert_eq!(q.vars.qavg, 0);
    }

    #[test]
    fn change_puts_a_fresh_bfifo_in_and_sheds_the_old_queue() {
        let mut n = node(&opts(1 << 20, 100_000, 200_000, 3, 0.02, 0));
        let mut cx = Cx::new(Time(0));
        for i in 0..4 {
            n.enqueue(pkt(0, i, 1000, 0), &mut cx).unwrap();
        }
        let o = QdiscOpts::Red(opts(3000, 100_000, 200_000, 3, 0.02, 0));
        n.qdisc.change(&o, &DevInfo::default()).unwrap();
        assert_eq!(n.stats().qlen, 4, "still counted until the next call");
        assert_eq!(n.dequeue(&mut cx), Dequeue::Empty);
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (0, 0, 4));
        // limit 0 keeps the inner qdisc.
        n.enqueue(pkt(0, 9, 1000, 0), &mut cx).unwrap();
        let o = QdiscOpts::Red(opts(0, 100_000, 200_000, 3, 0.02, 0));
        n.qdisc.change(&o, &DevInfo::default()).unwrap();
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
    }

    #[test]
    fn adaptive_red_raises_max_p_under_a_standing_queue() {
        // The bit in tc_red_qopt.flags (what the kernel's timer looks at).
        let mut o = opts(1 << 20, 10_000, 30_000, 1, 0.02, 0);
        o.flags_bf = None;
        o.flags = TC_RED_ADAPTATIVE;
        let mut n = node(&o);
        let mut cx = Cx::new(Time(0));
        let start = |n: &QdiscNode| match n.qdisc.dump() {
            QdiscOpts::Red(d) => d.max_p.unwrap(),
            _ => unreachable!(),
        };
        let p0 = start(&n);
        // A standing backlog of 28 kB, above the target band (18-22 kB).
        for i in 0..28 {
            n.enqueue(pkt(0, i, 1000, 0), &mut cx).unwrap();
        }
        for step in 1..=20u64 {
            let mut cx = Cx::new(Time(step * 100_000_000));
            let _ = n.enqueue(pkt(1, step as u32, 1000, 0), &mut cx);
            if let Dequeue::Packet(_) = n.dequeue(&mut cx) {}
        }
        // Steps at 0.5, 1, 1.5 and 2 s, each adding min(1 %, max_P / 4).
        let mut want = p0;
        for _ in 0..4 {
            want += RED_ONE_PERCENT.min(want / 4);
        }
        assert_eq!(start(&n), want);
        assert!(want > p0 + 2 * RED_ONE_PERCENT);
        // Without the bit in the qopt (as iproute2 sends it), nothing moves.
        let mut n = node(&opts(1 << 20, 10_000, 30_000, 1, 0.02, TC_RED_ADAPTATIVE));
        for i in 0..28 {
            n.enqueue(pkt(0, i, 1000, 0), &mut Cx::new(Time(0)))
                .unwrap();
        }
        n.dequeue(&mut Cx::new(Time(5_000_000_000)));
        assert_eq!(start(&n), p0);
    }

    proptest! {
        /// offered = sent + dropped + queued at every step.
        #[test]
        fn packets_are_conserved(
            ops in proptest::collection::vec((0..3u8, 40..1600u32, 0..2000u64, 0..4u8), 1..300),
            ecn in any::<bool>(),
        ) {
            let flags = if ecn { TC_RED_ECN } else { 0 };
            let mut n = node(&opts(20_000, 3000, 9000, 2, 0.1, flags));
            let mut t = 0;
            let mut offered = 0u64;
            for (i, &(op, len, dt, tos)) in ops.iter().enumerate() {
                t += dt * 1000;
                let mut cx = Cx::new(Time(t));
                if op < 2 {
                    offered += 1;
                    let _ = n.enqueue(pkt(0, i as u32, len, tos), &mut cx);
                } else {
                    n.dequeue(&mut cx);
                }
                let s = n.stats();
                prop_assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
                prop_assert!(s.backlog <= 20_000);
            }
        }
    }
}
