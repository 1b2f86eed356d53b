//! prio: N strict-priority bands, each a class holding a child qdisc.
//!
//! Modelled on net/sched/sch_prio.c. The qdisc has `bands` classes,
//! `major:1` .. `major:bands`; band `i` is class `major:i+1`. Each band's
//! child is a qdisc in its own right (by default a `pfifo` whose limit is the
//! device's `txqueuelen`, created with handle `0:` as `qdisc_create_dflt`
//! does, so it is invisible to `tc qdisc show`), and any qdisc can be grafted
//! in its place.
//!
//! Classification (`prio_classify`), in order:
//! 1. if the major of `skb->priority` equals the qdisc's handle, its minor
//!    names the band directly (`SO_PRIORITY` set to a class id);
//! 2. otherwise the qdisc's filters run: `drop` (TC_ACT_SHOT) drops and
//!    counts, `stolen`/`queued`/`trap` consume without counting, and a match
//!    gives a class id whose minor names the band;
//! 3. with no filter or no match, `priomap[priority & 15]` gives the band
//!    (a priority that carries a major number counts as priority 0).
//!
//! A class id whose minor is 0 or beyond `bands` goes to band
//! `priomap[0]` (not band 0). Dequeue tries band 0, then 1, ... and returns
//! the first packet any band yields; only if none yields a packet does it
//! report the earliest time a band asked to be woken at.
//!
//! `change` with fewer bands destroys the surplus bands and their packets
//! (counted as drops, as `qdisc_tree_flush_backlog` does); with more bands it
//! adds default pfifo children. Grafting purges the replaced child.
//!
//! Deviations: the purged packets of a graft or a shrinking `change` are
//! reported to the tree (through [`Cx::shed`]) at the next enqueue or dequeue,
//! because `change` and `graft` receive no context; the aggregate counts are
//! exact but the per-packet lengths in `Cx::drops` are an even split.

use super::fifo::{Fifo, FifoKind, FifoOpts};
use super::{
    wrong_kind, ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts,
    XStats,
};
use crate::cls::{Block, Verdict};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::DropReason;
use crate::time::Time;
use serde::{Deserialize, Serialize};

use super::pfifo_fast::{PRIO2BAND, TC_PRIO_MAX};

/// Most bands a prio may have (`TCQ_PRIO_BANDS`).
pub const TCQ_PRIO_BANDS: i32 = 16;
/// Fewest bands a prio may have (`TCQ_MIN_PRIO_BANDS`).
pub const TCQ_MIN_PRIO_BANDS: i32 = 2;

/// `struct tc_prio_qopt`: what tc sends and the kernel dumps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrioOpts {
    /// Number of bands, 2..=16.
    pub bands: i32,
    /// Band for each `TC_PRIO_*` priority; every entry must be `< bands`.
    pub priomap: [u8; 16],
}

impl Default for PrioOpts {
    /// What tc sends for a bare `prio`: 3 bands and pfifo_fast's map.
    fn default() -> Self {
        PrioOpts {
            bands: 3,
            priomap: PRIO2BAND,
        }
    }
}

/// Validated parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PrioParams {
    bands: usize,
    priomap: [u8; 16],
}

impl PrioParams {
    /// The checks of `prio_tune`; all fail with a bare EINVAL.
    fn validate(o: &PrioOpts) -> TcResult<Self> {
        if !(TCQ_MIN_PRIO_BANDS..=TCQ_PRIO_BANDS).contains(&o.bands) {
            return Err(TcError::errno(Errno::EINVAL));
        }
        if o.priomap.iter().any(|&b| b as i32 >= o.bands) {
            return Err(TcError::errno(Errno::EINVAL));
        }
        Ok(PrioParams {
            bands: o.bands as usize,
            priomap: o.priomap,
        })
    }
}

/// A prio qdisc.
#[derive(Debug)]
pub struct Prio {
    params: PrioParams,
    /// Our handle (`major:0`), once known.
    handle: Option<Handle>,
    /// One child per band; `queues.len() == params.bands`.
    queues: Vec<QdiscNode>,
    /// The filters attached to the qdisc (`tc filter add ... parent major:`).
    block: Block,
    /// Packets purged by `change`/`graft`, not yet reported: (packets, bytes).
    pending_shed: (u64, u64),
}

impl Prio {
    /// `prio_init`: validate, then create the bands.
    pub fn new(opts: &PrioOpts, dev: &DevInfo) -> TcResult<Self> {
        let params = PrioParams::validate(opts)?;
        let mut p = Prio {
            params,
            handle: None,
            queues: Vec::new(),
            block: Block::default(),
            pending_shed: (0, 0),
        };
        p.resize_bands(params.bands, dev)?;
        Ok(p)
    }

    /// Number of bands.
    pub fn bands(&self) -> usize {
        self.params.bands
    }

    fn major(&self) -> u16 {
        self.handle.map_or(0, Handle::major)
    }

    /// A default band child: a pfifo of `txqueuelen` with handle `0:`.
    fn default_child(&self, band: usize, dev: &DevInfo) -> TcResult<QdiscNode> {
        let fifo = Fifo::new(FifoKind::Packets, &FifoOpts::default(), dev)?;
        Ok(QdiscNode::new(
            Handle::UNSPEC,
            Handle::new(self.major(), band as u16 + 1),
            Box::new(fifo),
        ))
    }

    /// Grow or shrink to `bands` children, purging removed bands.
    fn resize_bands(&mut self, bands: usize, dev: &DevInfo) -> TcResult<()> {
        // Create the new children first, so a failure changes nothing.
        let new: Vec<QdiscNode> = (self.queues.len()..bands)
            .map(|i| self.default_child(i, dev).map(QdiscNode::hashed_invisible))
            .collect::<TcResult<_>>()?;
        while self.queues.len() > bands {
            if let Some(mut gone) = self.queues.pop() {
                self.purge(&mut gone);
            }
        }
        self.queues.extend(new);
        Ok(())
    }

    /// `qdisc_purge_queue`: empty a child that leaves the tree, and remember
    /// its packets so they are reported as drops to the tree above.
    fn purge(&mut self, child: &mut QdiscNode) {
        let s = child.stats();
        self.pending_shed.0 += s.qlen as u64;
        self.pending_shed.1 += s.backlog;
        child.reset();
    }

    #[inline(always)]
    fn flush_pending(&mut self, cx: &mut Cx) {
        if self.pending_shed != (0, 0) {
            self.flush_pending_now(cx);
        }
    }

    #[cold]
    #[inline(never)]
    fn flush_pending_now(&mut self, cx: &mut Cx) {
        let (n, bytes) = std::mem::take(&mut self.pending_shed);
        if n == 0 {
            return;
        }
        let each = bytes / n;
        for i in 0..n {
            let len = if i + 1 == n {
                bytes - each * (n - 1)
            } else {
                each
            };
            cx.shed(
                u32::try_from(len).unwrap_or(u32::MAX),
                DropReason::QueueFull,
            );
        }
    }

    /// `prio_classify`: the band for `pkt`, or why it is not queued.
    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Result<usize, DropReason> {
        let priority = pkt.priority;
        let mut classid = priority;
        let ours = self.handle.is_some_and(|h| priority & 0xffff_0000 == h.0);
        if !ours {
            let verdict = self.block.classify(pkt, now);
            match verdict {
                Some(r) => match r.verdict {
                    Verdict::Shot => return Err(DropReason::Action),
                    Verdict::Stolen | Verdict::Queued | Verdict::Trap => {
                        return Err(DropReason::Stolen)
                    }
                    Verdict::Continue => return Ok(self.by_priomap(priority)),
                    _ => classid = r.classid.0,
                },
                None => return Ok(self.by_priomap(priority)),
            }
        }
        let band = (classid & 0xffff).wrapping_sub(1) as usize;
        Ok(if band >= self.params.bands {
            self.params.priomap[0] as usize
        } else {
            band
        })
    }

    fn by_priomap(&self, priority: u32) -> usize {
        let p = if priority & 0xffff_0000 != 0 {
            0
        } else {
            priority
        };
        self.params.priomap[(p & TC_PRIO_MAX) as usize] as usize
    }

    /// Band index of class `classid`, if it is one of ours (`prio_find`).
    fn band_of_class(&self, classid: Handle) -> Option<usize> {
        let minor = classid.minor() as usize;
        (minor >= 1 && minor <= self.params.bands).then(|| minor - 1)
    }
}

impl Qdisc for Prio {
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.flush_pending(cx);
        let band = match self.classify(&mut pkt, cx.now) {
            Ok(b) => b,
            Err(reason) => return Err((pkt, reason)),
        };
        self.queues[band].offer(pkt, cx)
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.flush_pending(cx);
        let mut wake = None;
        for q in &mut self.queues {
            match q.dequeue(cx) {
                Dequeue::Packet(p) => return Dequeue::Packet(p),
                Dequeue::Wait(t) => wake = Dequeue::earliest(wake, Some(t)),
                Dequeue::Empty => {}
            }
        }
        wake.map_or(Dequeue::Empty, Dequeue::Wait)
    }

    fn reset(&mut self) {
        self.queues.iter_mut().for_each(QdiscNode::reset);
        self.pending_shed = (0, 0);
    }

    fn change(&mut self, opts: &QdiscOpts, dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Prio(o) = opts else {
            return Err(wrong_kind("prio", opts));
        };
        let params = PrioParams::validate(o)?;
        self.resize_bands(params.bands, dev)?;
        self.params = params;
        Ok(())
    }

    /// `sch->handle`: recognises `priority` values naming our classes and
    /// names the classes and the bands' parents.
    fn set_handle(&mut self, handle: Handle) {
        let h = handle.qdisc();
        self.handle = Some(h);
        self.block.set_qdisc(h);
        for (i, q) in self.queues.iter_mut().enumerate() {
            q.parent = Handle::new(h.major(), i as u16 + 1);
        }
    }

    /// `prio_tcf_block`: filters attach to the qdisc only, not to a band.
    fn block_mut(&mut self, classid: Handle) -> Option<&mut Block> {
        (classid.minor() == 0).then_some(&mut self.block)
    }

    fn block(&self, classid: Handle) -> Option<&Block> {
        (classid.minor() == 0).then_some(&self.block)
    }

    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Prio(PrioOpts {
            bands: self.params.bands as i32,
            priomap: self.params.priomap,
        })
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for Prio {
    /// prio has no `change` class operation: bands come from the qdisc.
    fn change_class(
        &mut self,
        _classid: Handle,
        _parent: Handle,
        _opts: Option<&ClassOpts>,
        _dev: &DevInfo,
    ) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// prio has no `delete` class operation.
    fn delete_class(&mut self, classid: Handle) -> TcResult<()> {
        if self.band_of_class(classid).is_none() {
            return Err(TcError::msg(Errno::ENOENT, "Specified class not found"));
        }
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// `prio_walk` + `prio_dump_class` + `prio_dump_class_stats`: one class
    /// per band, with the band child's counters.
    fn list(&self) -> Vec<ClassInfo> {
        let major = self.major();
        self.queues
            .iter()
            .enumerate()
            .map(|(i, q)| ClassInfo {
                classid: Handle::new(major, i as u16 + 1),
                parent: Handle::new(major, 0),
                leaf: (!q.handle.is_unspec()).then_some(q.handle),
                opts: ClassOpts::Plain,
                stats: q.stats(),
                xstats: XStats::None,
            })
            .collect()
    }

    fn contains(&self, classid: Handle) -> bool {
        classid.major() == self.major() && self.band_of_class(classid).is_some()
    }

    /// `prio_graft`: `None` restores a default pfifo. The old child is
    /// purged and returned.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        let Some(band) = self.band_of_class(classid) else {
            return Err(TcError::msg(Errno::ENOENT, "Specified class not found"));
        };
        let mut new = match new {
            Some(n) => n,
            None => self.default_child(band, dev)?,
        };
        new.parent = Handle::new(self.major(), band as u16 + 1);
        let mut old = std::mem::replace(&mut self.queues[band], new);
        self.purge(&mut old);
        Ok(Some(old))
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        self.queues.iter_mut().collect()
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        self.queues.iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cls::{Classifier, ClassifyResult, TcfProto};
    use crate::packet::Skb;
    use crate::packet::ETH_P_ALL;

    const H: Handle = Handle::new(1, 0);

    fn prio(opts: PrioOpts) -> QdiscNode {
        let mut p = Prio::new(&opts, &DevInfo::default()).unwrap();
        p.set_handle(H);
        QdiscNode::new(H, Handle::ROOT, Box::new(p))
    }

    fn pkt(id: u64, priority: u32) -> Packet {
        Packet::from(Skb {
            id,
            len: 100,
            priority,
            ..Default::default()
        })
    }

    fn drain(n: &mut QdiscNode, cx: &mut Cx) -> Vec<u64> {
        std::iter::from_fn(|| match n.dequeue(cx) {
            Dequeue::Packet(p) => Some(p.id),
            _ => None,
        })
        .collect()
    }

    /// Per-band queue lengths, as `tc -s class show` reports them.
    fn band_qlens(n: &QdiscNode) -> Vec<u32> {
        n.qdisc
            .classes_ref()
            .unwrap()
            .list()
            .iter()
            .map(|c| c.stats.qlen)
            .collect()
    }

    /// A test filter: packets with `mark == m` get `(classid, verdict)`.
    #[derive(Debug)]
    struct MarkFilter(u32, Handle, Verdict);
    impl Classifier for MarkFilter {
        fn kind(&self) -> &'static str {
            "fw"
        }
        fn classify(&mut self, pkt: &mut Packet, _now: Time) -> Option<ClassifyResult> {
            (pkt.mark == self.0).then_some(ClassifyResult {
                classid: self.1,
                verdict: self.2,
            })
        }
    }

    fn prio_with_filters(filters: Vec<MarkFilter>) -> QdiscNode {
        let mut p = Prio::new(&PrioOpts::default(), &DevInfo::default()).unwrap();
        p.set_handle(H);
        for (i, f) in filters.into_iter().enumerate() {
            p.block_mut(H).unwrap().protos.push(TcfProto {
                chain: 0,
                prio: i as u32 + 1,
                protocol: ETH_P_ALL,
                cls: Box::new(f),
            });
        }
        QdiscNode::new(H, Handle::ROOT, Box::new(p))
    }

    #[test]
    fn band_zero_is_always_served_first() {
        let mut n = prio(PrioOpts::default());
        let mut cx = Cx::new(Time(0));
        // TC_PRIO_BULK (2) -> band 2, BESTEFFORT (0) -> band 1, INTERACTIVE (6) -> band 0.
        for (id, p) in [(1, 2), (2, 0), (3, 6), (4, 2), (5, 6), (6, 0)] {
            n.enqueue(pkt(id, p), &mut cx).unwrap();
        }
        assert_eq!(band_qlens(&n), vec![2, 2, 2]);
        assert_eq!(drain(&mut n, &mut cx), vec![3, 5, 2, 6, 1, 4]);
        let s = n.stats();
        assert_eq!((s.packets, s.bytes, s.qlen, s.backlog), (6, 600, 0, 0));
    }

    #[test]
    fn priomap_maps_priorities_to_bands() {
        let map = [3, 3, 2, 2, 1, 1, 0, 0, 3, 2, 1, 0, 0, 0, 0, 0];
        let mut n = prio(PrioOpts {
            bands: 4,
            priomap: map,
        });
        let mut cx = Cx::new(Time(0));
        for p in 0..16u32 {
            n.enqueue(pkt(p as u64, p), &mut cx).unwrap();
        }
        let want: Vec<u32> = (0..4)
            .map(|b| map.iter().filter(|&&m| m == b).count() as u32)
            .collect();
        assert_eq!(band_qlens(&n), want);
        // Priority 16 is 16 & 15 = 0 -> band 3; a priority with a foreign major counts as 0.
        n.enqueue(pkt(100, 16), &mut cx).unwrap();
        n.enqueue(pkt(101, 0x0002_0006), &mut cx).unwrap();
        assert_eq!(band_qlens(&n)[3], want[3] + 2);
    }

    #[test]
    fn priority_naming_our_class_selects_the_band() {
        let mut n = prio(PrioOpts::default());
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(1, 0x0001_0003), &mut cx).unwrap(); // 1:3 -> band 2
        n.enqueue(pkt(2, 0x0001_0001), &mut cx).unwrap(); // 1:1 -> band 0
                                                          // 1:7 is beyond 3 bands, 1:0 has minor 0: both go to priomap[0] = band 1.
        n.enqueue(pkt(3, 0x0001_0007), &mut cx).unwrap();
        n.enqueue(pkt(4, 0x0001_0000), &mut cx).unwrap();
        assert_eq!(band_qlens(&n), vec![1, 2, 1]);
    }

    #[test]
    fn filters_select_bands_and_actions_drop_or_steal() {
        let mut n = prio_with_filters(vec![
            MarkFilter(1, Handle::new(1, 3), Verdict::Ok),
            MarkFilter(2, Handle::new(0, 1), Verdict::Ok), // flowid :1
            MarkFilter(3, Handle::new(1, 9), Verdict::Ok), // beyond bands
            MarkFilter(4, Handle::UNSPEC, Verdict::Shot),
            MarkFilter(5, Handle::UNSPEC, Verdict::Stolen),
        ]);
        let mut cx = Cx::new(Time(0));
        let p = |id, mark| {
            Packet::from(Skb {
                mark,
                ..pkt(id, 6).into_skb()
            })
        }; // priority 6 alone would be band 0
        n.enqueue(p(1, 1), &mut cx).unwrap();
        n.enqueue(p(2, 2), &mut cx).unwrap();
        n.enqueue(p(3, 3), &mut cx).unwrap();
        assert_eq!(n.enqueue(p(4, 4), &mut cx), Err(DropReason::Action));
        assert_eq!(n.enqueue(p(5, 5), &mut cx), Err(DropReason::Stolen));
        n.enqueue(p(6, 0), &mut cx).unwrap(); // no match: priomap[6] = band 0
        assert_eq!(band_qlens(&n), vec![2, 1, 1]);
        // Shot counts as a drop, stolen does not.
        assert_eq!(n.stats().drops, 1);
        assert_eq!(drain(&mut n, &mut cx), vec![2, 6, 3, 1]);
    }

    #[test]
    fn graft_replaces_a_band_and_purges_the_old_child() {
        let mut n = prio(PrioOpts::default());
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            n.enqueue(pkt(i, 0), &mut cx).unwrap(); // band 1
        }
        let dev = DevInfo::default();
        let one = QdiscNode::new(Handle::new(10, 0), Handle::UNSPEC, Box::new(Fifo::pfifo(1)));
        let old = n
            .qdisc
            .classes()
            .unwrap()
            .graft(Handle::new(1, 2), Some(one), &dev)
            .unwrap()
            .unwrap();
        assert_eq!(old.stats().qlen, 0, "the old child is reset");
        // The three purged packets are dropped from the prio's counters at the next call.
        n.enqueue(pkt(10, 0), &mut cx).unwrap();
        assert!(
            n.enqueue(pkt(11, 0), &mut cx).is_err(),
            "the grafted pfifo holds one packet"
        );
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (1, 100, 4));
        let classes = n.qdisc.classes_ref().unwrap().list();
        assert_eq!(classes[1].leaf, Some(Handle::new(10, 0)));
        assert_eq!(classes[1].classid, Handle::new(1, 2));
        assert_eq!(classes[0].leaf, None, "default children have handle 0:");
        assert_eq!(
            n.find(Handle::new(10, 0)).map(|q| q.parent),
            Some(Handle::new(1, 2))
        );
        // Grafting None restores a default pfifo (limit txqueuelen).
        let c = n.qdisc.classes().unwrap();
        let old = c.graft(Handle::new(1, 2), None, &dev).unwrap().unwrap();
        assert_eq!(old.handle, Handle::new(10, 0));
        assert_eq!(
            c.leaves_ref()[1].qdisc.dump(),
            QdiscOpts::Pfifo(FifoOpts { limit: Some(1000) })
        );
        assert!(c.graft(Handle::new(1, 4), None, &dev).is_err());
    }

    #[test]
    fn classes_cannot_be_added_or_deleted() {
        let mut n = prio(PrioOpts::default());
        // Filters attach to the qdisc, not to a band (`prio_tcf_block`).
        assert!(n.qdisc.block_mut(H).is_some() && n.qdisc.block(Handle::new(1, 1)).is_none());
        let c = n.qdisc.classes().unwrap();
        let e = c
            .change_class(Handle::new(1, 2), H, None, &DevInfo::default())
            .unwrap_err();
        assert_eq!(e.errno, Errno::EOPNOTSUPP);
        assert_eq!(
            c.delete_class(Handle::new(1, 2)).unwrap_err().errno,
            Errno::EOPNOTSUPP
        );
        assert_eq!(
            c.delete_class(Handle::new(1, 4)).unwrap_err().errno,
            Errno::ENOENT
        );
        assert!(
            c.contains(Handle::new(1, 3))
                && !c.contains(Handle::new(1, 4))
                && !c.contains(Handle::new(2, 1))
        );
        let ids: Vec<Handle> = c.list().iter().map(|c| c.classid).collect();
        assert_eq!(
            ids,
            vec![Handle::new(1, 1), Handle::new(1, 2), Handle::new(1, 3)]
        );
        assert!(c.list().iter().all(|c| c.parent == H));
    }

    #[test]
    fn validation_follows_prio_tune() {
        let dev = DevInfo::default();
        for bad in [
            PrioOpts {
                bands: 1,
                priomap: [0; 16],
            },
            PrioOpts {
                bands: 17,
                priomap: [0; 16],
            },
            PrioOpts {
                bands: -3,
                priomap: [0; 16],
            },
            PrioOpts {
                bands: 4,
                priomap: [1, 1, 2, 2, 7, 5, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0],
            },
            PrioOpts {
                bands: 2,
                priomap: PRIO2BAND,
            }, // PRIO2BAND uses band 2
        ] {
            let e = Prio::new(&bad, &dev).unwrap_err();
            assert_eq!((e.errno, e.extack), (Errno::EINVAL, None), "{bad:?}");
        }
        assert!(Prio::new(
            &PrioOpts {
                bands: 16,
                priomap: [15; 16]
            },
            &dev
        )
        .is_ok());
        // A failed change leaves the qdisc as it was.
        let mut p = Prio::new(&PrioOpts::default(), &dev).unwrap();
        assert!(p
            .change(
                &QdiscOpts::Prio(PrioOpts {
                    bands: 1,
                    priomap: [0; 16]
                }),
                &dev
            )
            .is_err());
        assert_eq!(p.dump(), QdiscOpts::Prio(PrioOpts::default()));
        assert_eq!(p.queues.len(), 3);
    }

    #[test]
    fn change_adds_bands_and_purges_removed_ones() {
        let mut n = prio(PrioOpts::default());
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(1, 2), &mut cx).unwrap(); // band 2
        n.enqueue(pkt(2, 2), &mut cx).unwrap(); // band 2
        n.enqueue(pkt(3, 6), &mut cx).unwrap(); // band 0
        let dev = DevInfo::default();
        let eight = PrioOpts {
            bands: 8,
            priomap: [1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 0, 0],
        };
        n.qdisc.change(&QdiscOpts::Prio(eight), &dev).unwrap();
        assert_eq!(
            band_qlens(&n),
            vec![1, 0, 2, 0, 0, 0, 0, 0],
            "existing bands keep their packets"
        );
        let two = PrioOpts {
            bands: 2,
            priomap: [1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1],
        };
        n.qdisc.change(&QdiscOpts::Prio(two), &dev).unwrap();
        assert_eq!(band_qlens(&n), vec![1, 0]);
        assert_eq!(drain(&mut n, &mut cx), vec![3]);
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops, s.packets), (0, 0, 2, 1));
    }

    /// A child that holds everything until `open_at`.
    #[derive(Debug)]
    struct Gate {
        open_at: Time,
        q: std::collections::VecDeque<Packet>,
    }
    impl Qdisc for Gate {
        fn enqueue(&mut self, pkt: Packet, _cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
            self.q.push_back(pkt);
            Ok(())
        }
        fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
            match self.q.is_empty() {
                true => Dequeue::Empty,
                false if cx.now < self.open_at => Dequeue::Wait(self.open_at),
                false => Dequeue::Packet(self.q.pop_front().unwrap()),
            }
        }
        fn reset(&mut self) {
            self.q.clear();
        }
        fn change(&mut self, _: &QdiscOpts, _: &DevInfo) -> TcResult<()> {
            Ok(())
        }
        fn dump(&self) -> QdiscOpts {
            QdiscOpts::Noqueue
        }
    }

    #[test]
    fn a_waiting_band_does_not_block_lower_bands_and_wait_is_the_earliest() {
        let mut n = prio(PrioOpts::default());
        let dev = DevInfo::default();
        let c = n.qdisc.classes().unwrap();
        let gate = |t| {
            QdiscNode::new(
                Handle::UNSPEC,
                Handle::UNSPEC,
                Box::new(Gate {
                    open_at: Time(t),
                    q: Default::default(),
                }),
            )
        };
        c.graft(Handle::new(1, 1), Some(gate(500)), &dev).unwrap();
        c.graft(Handle::new(1, 3), Some(gate(300)), &dev).unwrap();
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(1, 6), &mut cx).unwrap(); // band 0, gated until 500
        n.enqueue(pkt(2, 0), &mut cx).unwrap(); // band 1, free
        n.enqueue(pkt(3, 2), &mut cx).unwrap(); // band 2, gated until 300
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.id == 2));
        assert_eq!(n.dequeue(&mut cx), Dequeue::Wait(Time(300)));
        let mut cx = Cx::new(Time(300));
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.id == 3));
        assert_eq!(n.dequeue(&mut cx), Dequeue::Wait(Time(500)));
        let mut cx = Cx::new(Time(500));
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.id == 1));
        assert_eq!(n.dequeue(&mut cx), Dequeue::Empty);
    }
}
