//! multiq: one band per transmit queue, served in turn.
//!
//! net/sched/sch_multiq.c, for multi-queue devices (`ip link add ...
//! numtxqueues N`). `multiq_tune` refuses a device with a single queue
//! (`EOPNOTSUPP`) before anything else; otherwise there is a band for each
//! transmit queue (`bands` = the device's `real_num_tx_queues`, `max_bands`
//! = `num_tx_queues`; sluice's devices use all they have, so the two are
//! equal), each with a default pfifo child of handle 0 that only `tc qdisc
//! show invisible` lists. tc sends no parameters: the kernel's answer is
//! the whole configuration.
//!
//! A packet first meets the qdisc's filters, whose actions may drop or take
//! it (their class ids are not used); then it goes to the band of its
//! `skb->queue_mapping` (set by `skbedit queue_mapping`), band 0 when there
//! is no such band. Dequeue moves the band pointer on by one and takes from
//! the first band, from there round, whose queue gives a packet; the kernel
//! also skips bands whose hardware queue is stopped, which sluice's queues
//! never are.
//!
//! The bands are classes `major:1` … `major:bands` (parent `major:`, the
//! child's handle as leaf, the child's counters); classes cannot be added
//! or deleted. A qdisc added at a class replaces the band's child; deleting
//! it leaves noop until a `change` of the qdisc gives the band a default
//! pfifo again.

use super::fifo::{Fifo, FifoKind, FifoOpts};
use super::noqueue::noop_child;
use super::{
    wrong_kind, ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts,
    XStats,
};
use crate::cls::{Block, Verdict};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::DropReason;
use serde::{Deserialize, Serialize};

/// `struct tc_multiq_qopt`: what the kernel dumps (tc's values are ignored).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MultiqOpts {
    /// Bands in use (`real_num_tx_queues`).
    pub bands: u16,
    /// Bands allocated (`num_tx_queues`).
    pub max_bands: u16,
}

/// The multiq qdisc.
#[derive(Debug)]
pub struct Multiq {
    major: u16,
    block: Block,
    /// One child per band (noop where one was deleted).
    queues: Vec<QdiscNode>,
    /// The band the last dequeue looked at first (`curband`).
    curband: usize,
    /// Packets and bytes of children grafted out while holding some.
    purged: (u64, u64),
}

/// `multiq_tune`'s refusal of a device with one transmit queue.
fn check_device(dev: &DevInfo) -> TcResult<()> {
    if dev.num_tx_queues <= 1 {
        return Err(TcError::errno(Errno::EOPNOTSUPP));
    }
    Ok(())
}

/// Band `i`'s default child: a pfifo of the device's queue length, hashed
/// invisibly.
fn default_child(major: u16, i: usize, dev: &DevInfo) -> TcResult<QdiscNode> {
    let fifo = Fifo::new(FifoKind::Packets, &FifoOpts::default(), dev)?;
    Ok(QdiscNode::new(
        Handle::UNSPEC,
        Handle::new(major, i as u16 + 1),
        Box::new(fifo),
    )
    .hashed_invisible())
}

impl Multiq {
    /// `multiq_init` + `multiq_tune`.
    pub fn new(_opts: &MultiqOpts, dev: &DevInfo) -> TcResult<Self> {
        check_device(dev)?;
        let bands = dev.num_tx_queues as usize;
        Ok(Multiq {
            major: 0,
            block: Block::default(),
            queues: (0..bands)
                .map(|i| default_child(0, i, dev))
                .collect::<TcResult<_>>()?,
            curband: 0,
            purged: (0, 0),
        })
    }

    /// `multiq_classify`: the band, or why the packet is not queued.
    fn classify(&mut self, pkt: &mut Packet, now: crate::time::Time) -> Result<usize, DropReason> {
        if let Some(r) = self.block.classify(pkt, now) {
            match r.verdict {
                Verdict::Shot => return Err(DropReason::Action),
                Verdict::Stolen | Verdict::Queued | Verdict::Trap => {
                    return Err(DropReason::Stolen)
                }
                _ => {}
            }
        }
        let band = pkt.queue_mapping.unwrap_or(0) as usize;
        Ok(if band < self.queues.len() { band } else { 0 })
    }

    /// The band of class `classid` (`multiq_find`): minors 1..=bands.
    fn band_of(&self, classid: Handle) -> Option<usize> {
        let i = (classid.minor() as usize).checked_sub(1)?;
        (i < self.queues.len()).then_some(i)
    }
}

impl Qdisc for Multiq {
    fn set_handle(&mut self, handle: Handle) {
        self.major = handle.major();
        self.block.set_qdisc(handle.qdisc());
        for (i, q) in self.queues.iter_mut().enumerate() {
            q.parent = Handle::new(self.major, i as u16 + 1);
        }
    }

    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        match self.classify(&mut pkt, cx.now) {
            Ok(band) => self.queues[band].offer(pkt, cx),
            Err(reason) => Err((pkt, reason)),
        }
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        let n = self.queues.len();
        let mut wake = None;
        for _ in 0..n {
            self.curband = (self.curband + 1) % n;
            match self.queues[self.curband].dequeue(cx) {
                Dequeue::Packet(p) => return Dequeue::Packet(p),
                Dequeue::Wait(t) => wake = Dequeue::earliest(wake, Some(t)),
                Dequeue::Empty => {}
            }
        }
        wake.map_or(Dequeue::Empty, Dequeue::Wait)
    }

    fn reset(&mut self) {
        self.queues.iter_mut().for_each(QdiscNode::reset);
        self.curband = 0;
    }

    /// `multiq_tune` again: the device is checked, and bands left with noop
    /// get a default pfifo.
    fn change(&mut self, opts: &QdiscOpts, dev: &DevInfo) -> TcResult<()> {
        if !matches!(opts, QdiscOpts::Multiq(_)) {
            return Err(wrong_kind("multiq", opts));
        }
        check_device(dev)?;
        for (i, q) in self.queues.iter_mut().enumerate() {
            if q.kind() == "noop" {
                *q = default_child(self.major, i, dev)?;
            }
        }
        Ok(())
    }

    fn dump(&self) -> QdiscOpts {
        let bands = self.queues.len() as u16;
        QdiscOpts::Multiq(MultiqOpts {
            bands,
            max_bands: bands,
        })
    }

    fn device_changed(&mut self, dev: &DevInfo) {
        self.queues.iter_mut().for_each(|q| q.device_changed(dev));
    }

    /// Filters attach to the qdisc only, not to a band.
    fn block_mut(&mut self, classid: Handle) -> Option<&mut Block> {
        (classid.minor() == 0).then_some(&mut self.block)
    }

    fn block(&self, classid: Handle) -> Option<&Block> {
        (classid.minor() == 0).then_some(&self.block)
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for Multiq {
    /// multiq has no class `change`: `EOPNOTSUPP`.
    fn change_class(
        &mut self,
        _classid: Handle,
        _parent: Handle,
        _opts: Option<&ClassOpts>,
        _dev: &DevInfo,
    ) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// multiq has no class `delete`: `EOPNOTSUPP`.
    fn delete_class(&mut self, _classid: Handle) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// `multiq_dump_class` and `multiq_dump_class_stats`.
    fn list(&self) -> Vec<ClassInfo> {
        self.queues
            .iter()
            .enumerate()
            .map(|(i, q)| ClassInfo {
                classid: Handle::new(self.major, i as u16 + 1),
                parent: Handle::new(self.major, 0),
                leaf: (!q.handle.is_unspec()).then_some(q.handle),
                opts: ClassOpts::Plain,
                stats: q.stats(),
                xstats: XStats::None,
            })
            .collect()
    }

    fn contains(&self, classid: Handle) -> bool {
        self.band_of(classid).is_some()
    }

    fn leaf(&self, classid: Handle) -> Option<&QdiscNode> {
        self.band_of(classid).map(|i| &self.queues[i])
    }

    fn take_purged(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.purged)
    }

    /// `multiq_graft`: `new` (`None`: noop) becomes the band's child.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        _dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        let Some(i) = self.band_of(classid) else {
            return Err(TcError::msg(Errno::ENOENT, "Specified class not found"));
        };
        let class = Handle::new(self.major, i as u16 + 1);
        let mut new = new.unwrap_or_else(|| noop_child(class));
        new.parent = class;
        let mut old = std::mem::replace(&mut self.queues[i], new);
        let s = old.stats();
        self.purged.0 += s.qlen as u64;
        self.purged.1 += s.backlog;
        old.reset();
        Ok(Some(old))
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        self.queues
            .iter_mut()
            .filter(|q| q.kind() != "noop")
            .collect()
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        self.queues.iter().filter(|q| q.kind() != "noop").collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::ETH_P_IP;
    use crate::time::Time;

    fn dev(queues: u32) -> DevInfo {
        DevInfo {
            num_tx_queues: queues,
            ..DevInfo::default()
        }
    }

    fn multiq(queues: u32) -> QdiscNode {
        let q = Multiq::new(&MultiqOpts::default(), &dev(queues)).unwrap();
        QdiscNode::new(Handle::new(1, 0), Handle::ROOT, Box::new(q))
    }

    fn pkt(queue: Option<u16>) -> Packet {
        let mut p = Packet::new(vec![0x45; 20], 100, ETH_P_IP);
        p.queue_mapping = queue;
        p
    }

    #[test]
    fn single_queue_devices_refuse_multiq() {
        let e = Multiq::new(&MultiqOpts::default(), &dev(1)).unwrap_err();
        assert_eq!((e.errno, e.extack.is_none()), (Errno::EOPNOTSUPP, true));
        assert_eq!(e.describe(), "RTNETLINK answers: Operation not supported");
    }

    #[test]
    fn bands_follow_the_queue_mapping_and_take_turns_after_the_last_served() {
        let mut n = multiq(3);
        assert_eq!(
            n.qdisc.dump(),
            QdiscOpts::Multiq(MultiqOpts {
                bands: 3,
                max_bands: 3
            })
        );
        let mut cx = Cx::new(Time(0));
        // No mapping and a band that does not exist both mean band 0.
        for q in [Some(0), Some(0), Some(1), Some(2), None, Some(9)] {
            n.enqueue(pkt(q), &mut cx).unwrap();
        }
        let qlen: Vec<u32> = n
            .qdisc
            .classes_ref()
            .unwrap()
            .list()
            .iter()
            .map(|c| c.stats.qlen)
            .collect();
        assert_eq!(qlen, [4, 1, 1]);
        // curband starts at 0 and moves on before each look: band 1 first.
        let mut order = vec![];
        while let Dequeue::Packet(p) = n.dequeue(&mut cx) {
            order.push(p.queue_mapping);
        }
        assert_eq!(order, [Some(1), Some(2), Some(0), Some(0), None, Some(9)]);
    }

    #[test]
    fn a_deleted_child_is_noop_until_a_change_restores_a_pfifo() {
        let mut n = multiq(2);
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(Some(1)), &mut cx).unwrap();
        let d = dev(2);
        let cls = n.qdisc.classes().unwrap();
        let old = cls.graft(Handle::new(1, 2), None, &d).unwrap().unwrap();
        assert_eq!(old.kind(), "pfifo");
        assert_eq!(cls.take_purged(), (1, 100));
        assert_eq!(cls.leaves_ref().len(), 1);
        // A packet for band 1 meets noop now.
        assert!(n.enqueue(pkt(Some(1)), &mut cx).is_err());
        n.qdisc
            .change(&QdiscOpts::Multiq(MultiqOpts::default()), &d)
            .unwrap();
        let cls = n.qdisc.classes_ref().unwrap();
        assert_eq!(cls.leaves_ref().len(), 2);
        assert_eq!(
            cls.leaf(Handle::new(1, 2)).unwrap().parent,
            Handle::new(1, 2)
        );
        assert!(n.enqueue(pkt(Some(1)), &mut cx).is_ok());
    }
}
