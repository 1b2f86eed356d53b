//! mq: the root of a multi-queue device, one child qdisc per transmit queue.
//!
//! net/sched/sch_mq.c. A NIC with several transmit queues runs a qdisc on
//! each; mq is the root that shows them as one tree. It may only be the root
//! (`mq_init` refuses any other parent, and any device with a single queue,
//! with `EOPNOTSUPP`), takes no options, and at creation gives every queue a
//! default child (the `default_qdisc` sysctl's kind, pfifo_fast) with handle
//! 0, parent `major:N` for queue N−1, hashed so that `tc qdisc show` lists
//! it. The queues are its classes `major:1` … `major:N`, printed with parent
//! `root`, and a class's statistics are its child's. Classes cannot be added
//! or deleted (`EOPNOTSUPP`); a qdisc added at a class replaces that queue's
//! child, and deleting it leaves the queue with noop, which no dump lists.
//! The root's own counters are the children's summed at dump time
//! (`mq_dump`), so a grafted-out child's packets leave the sum.
//!
//! A device with more than one queue that needs a queue gets an mq root of
//! handle 0 when it comes up (`attach_default_qdiscs`); its children then
//! show parent `:1`, `:2`, ….
//!
//! In the kernel the queue is picked before any qdisc runs
//! (`netdev_core_pick_tx`): the queue an `skbedit queue_mapping` action on
//! clsact egress chose, if the device has it, else `skb_tx_hash` — the
//! packet's flow hash scaled onto the queues. sluice picks the same way when
//! the packet reaches mq. Each queue's qdisc then feeds the driver on its
//! own (by the CPU that sent, through the queue's lock); sluice models a
//! device with one wire behind its queues, which takes a packet from each
//! non-empty queue in turn.

use super::noqueue::noop_child;
use super::pfifo_fast::PfifoFastOpts;
use super::{ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::flow_hash;
use crate::stats::{DropReason, Stats};

/// The most transmit queues a device may have (`rtnl_create_link`'s
/// check against 4096).
pub const MAX_TX_QUEUES: u32 = 4096;

/// `mq_init`'s refusals, which come before anything is created: mq only as
/// the root (`parent`) of a device with more than one transmit queue.
pub fn check_attach(parent: Handle, dev: &DevInfo) -> TcResult<()> {
    if !parent.is_root() || dev.num_tx_queues <= 1 {
        return Err(TcError::errno(Errno::EOPNOTSUPP));
    }
    Ok(())
}

/// The mq qdisc.
#[derive(Debug)]
pub struct Mq {
    major: u16,
    /// One child per transmit queue (noop where one was deleted).
    queues: Vec<QdiscNode>,
    /// The queue the next dequeue looks at first.
    next: usize,
    /// The key of the flow hash that picks a queue (`skb_get_hash`'s secret).
    hashrnd: u32,
    /// Packets and bytes of children grafted out while holding some.
    purged: (u64, u64),
}

/// Queue `i`'s default child (pfifo_fast for mq): handle 0, listed by
/// `tc qdisc show`.
fn default_child(major: u16, i: usize, kind: &QdiscOpts, dev: &DevInfo) -> TcResult<QdiscNode> {
    let mut node =
        QdiscNode::create(Handle::UNSPEC, class_of(major, i), kind, dev)?.hashed_visible();
    // Hashed one after another, each at the head of its bucket's list.
    node.seq = i as u64 + 1;
    Ok(node)
}

fn class_of(major: u16, i: usize) -> Handle {
    Handle::new(major, i as u16 + 1)
}

impl Mq {
    /// `mq_init` on a device [`check_attach`] accepted.
    pub fn new(dev: &DevInfo) -> TcResult<Self> {
        Self::with_children(dev, &QdiscOpts::PfifoFast(PfifoFastOpts::default()))
    }

    /// A queue set whose default children are of kind `child` (taprio's
    /// are pfifo).
    pub(super) fn with_children(dev: &DevInfo, child: &QdiscOpts) -> TcResult<Self> {
        let n = dev.num_tx_queues.max(1) as usize;
        let s = dev.seed ^ 0x6d71_6d71_6d71_6d71;
        Ok(Mq {
            major: 0,
            queues: (0..n)
                .map(|i| default_child(0, i, child, dev))
                .collect::<TcResult<_>>()?,
            next: 0,
            hashrnd: (s ^ (s >> 32)) as u32,
            purged: (0, 0),
        })
    }

    /// `netdev_pick_tx` on a device without traffic classes: every queue.
    fn pick(&self, pkt: &mut Packet) -> usize {
        self.pick_in(pkt, |n| (0, n))
    }

    /// `netdev_pick_tx`: the queue `skbedit queue_mapping` chose, if the
    /// device has it, else `skb_tx_hash` — the flow hash scaled onto the
    /// range `(first, count)` that `range(queues)` gives for the packet
    /// (mqprio's traffic class), as `reciprocal_scale` does. A queue past
    /// the device's is queue 0, as `netdev_cap_txqueue` makes it.
    pub(super) fn pick_in(
        &self,
        pkt: &mut Packet,
        range: impl Fn(usize) -> (usize, usize),
    ) -> usize {
        let n = self.queues.len();
        if let Some(q) = pkt.queue_mapping.filter(|&q| (q as usize) < n) {
            return q as usize;
        }
        if pkt.hash == 0 {
            pkt.hash = flow_hash::flow_hash(pkt, self.hashrnd);
        }
        let (first, count) = range(n);
        let q = first + ((pkt.hash as u64 * count as u64) >> 32) as usize;
        if q < n {
            q
        } else {
            0
        }
    }

    /// Queue `i`'s qdisc.
    pub(super) fn queue_mut(&mut self, i: usize) -> &mut QdiscNode {
        &mut self.queues[i]
    }

    /// How many transmit queues.
    pub(super) fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// Hand `pkt` to queue `i`'s qdisc.
    pub(super) fn enqueue_at(
        &mut self,
        i: usize,
        pkt: Packet,
        cx: &mut Cx,
    ) -> Result<(), (Packet, DropReason)> {
        self.queues[i].offer(pkt, cx)
    }

    /// The counters of queues `range`'s qdiscs summed, as `mq_dump` and
    /// mqprio's traffic classes add them up.
    pub(super) fn sum_stats(&self, range: std::ops::Range<usize>) -> Stats {
        let mut sum = Stats::default();
        for q in self.queues.get(range).unwrap_or_default() {
            let s = q.stats();
            sum.bytes += s.bytes;
            sum.packets += s.packets;
            sum.drops += s.drops;
            sum.overlimits += s.overlimits;
            sum.requeues += s.requeues;
            sum.qlen += s.qlen;
            sum.backlog += s.backlog;
        }
        sum
    }

    /// The queue of class `classid` (`mq_queue_get`): minors 1..=queues.
    fn queue_of(&self, classid: Handle) -> Option<usize> {
        let i = (classid.minor() as usize).checked_sub(1)?;
        (i < self.queues.len()).then_some(i)
    }
}

impl Qdisc for Mq {
    fn set_handle(&mut self, handle: Handle) {
        self.major = handle.major();
        for (i, q) in self.queues.iter_mut().enumerate() {
            q.parent = class_of(self.major, i);
        }
    }

    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        let i = self.pick(&mut pkt);
        self.enqueue_at(i, pkt, cx)
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        let n = self.queues.len();
        let mut wake = None;
        for k in 0..n {
            let i = (self.next + k) % n;
            match self.queues[i].dequeue(cx) {
                Dequeue::Packet(p) => {
                    self.next = (i + 1) % n;
                    return Dequeue::Packet(p);
                }
                Dequeue::Wait(t) => wake = Dequeue::earliest(wake, Some(t)),
                Dequeue::Empty => {}
            }
        }
        wake.map_or(Dequeue::Empty, Dequeue::Wait)
    }

    fn reset(&mut self) {
        self.queues.iter_mut().for_each(QdiscNode::reset);
    }

    /// mq has no `change`; tc sends it no options, so a change is a no-op.
    fn change(&mut self, _opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        Ok(())
    }

    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Mq
    }

    /// `mq_dump`: the children's counters, summed now.
    fn own_stats(&self) -> Option<Stats> {
        Some(self.sum_stats(0..self.queues.len()))
    }

    fn device_changed(&mut self, dev: &DevInfo) {
        self.queues.iter_mut().for_each(|q| q.device_changed(dev));
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for Mq {
    /// mq has no class `change`: `EOPNOTSUPP`.
    fn change_class(
        &mut self,
        _classid: Handle,
        _parent: Handle,
        _opts: Option<&ClassOpts>,
        _dev: &DevInfo,
    ) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// mq has no class `delete`: `EOPNOTSUPP`.
    fn delete_class(&mut self, _classid: Handle) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// `mq_dump_class` and `mq_dump_class_stats`: parent root, the child's
    /// handle as the leaf, the child's counters.
    fn list(&self) -> Vec<ClassInfo> {
        self.queues
            .iter()
            .enumerate()
            .map(|(i, q)| ClassInfo {
                classid: class_of(self.major, i),
                parent: Handle::ROOT,
                leaf: (!q.handle.is_unspec()).then_some(q.handle),
                opts: ClassOpts::Plain,
                stats: q.stats(),
                xstats: super::XStats::None,
            })
            .collect()
    }

    fn contains(&self, classid: Handle) -> bool {
        self.queue_of(classid).is_some()
    }

    fn leaf(&self, classid: Handle) -> Option<&QdiscNode> {
        self.queue_of(classid).map(|i| &self.queues[i])
    }

    fn take_purged(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.purged)
    }

    /// `mq_graft`: `new` (`None`: noop) becomes the queue's qdisc.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        _dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        let Some(i) = self.queue_of(classid) else {
            return Err(TcError::msg(Errno::ENOENT, "Specified class not found"));
        };
        let class = class_of(self.major, i);
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
pub(super) mod tests {
    use super::*;
    use crate::packet::ETH_P_IP;
    use crate::time::Time;

    pub(in crate::qdisc) fn dev(queues: u32) -> DevInfo {
        DevInfo {
            num_tx_queues: queues,
            ..DevInfo::default()
        }
    }

    fn mq(queues: u32) -> QdiscNode {
        QdiscNode::new(
            Handle::new(1, 0),
            Handle::ROOT,
            Box::new(Mq::new(&dev(queues)).unwrap()),
        )
    }

    /// An IPv4/UDP packet from port `sport`.
    pub(in crate::qdisc) fn udp(sport: u16) -> Packet {
        let mut b = vec![0u8; 28];
        b[0] = 0x45;
        b[9] = 17;
        b[12..16].copy_from_slice(&[10, 0, 0, 1]);
        b[16..20].copy_from_slice(&[10, 0, 0, 2]);
        b[20..22].copy_from_slice(&sport.to_be_bytes());
        b[22..24].copy_from_slice(&9u16.to_be_bytes());
        Packet::new(b, 100, ETH_P_IP)
    }

    #[test]
    fn only_the_root_of_a_multi_queue_device() {
        assert!(check_attach(Handle::ROOT, &dev(2)).is_ok());
        for (parent, d) in [(Handle::ROOT, dev(1)), (Handle::new(1, 1), dev(4))] {
            let e = check_attach(parent, &d).unwrap_err();
            assert_eq!(e.describe(), "RTNETLINK answers: Operation not supported");
        }
    }

    #[test]
    fn a_flow_keeps_its_queue_and_flows_spread_over_all() {
        let mut n = mq(4);
        let mut cx = Cx::new(Time(0));
        for sport in 0..64u16 {
            for _ in 0..2 {
                n.enqueue(udp(1000 + sport), &mut cx).unwrap();
            }
        }
        let classes = n.qdisc.classes_ref().unwrap().list();
        let per_queue: Vec<u32> = classes.iter().map(|c| c.stats.qlen).collect();
        // Two packets of each flow: every queue holds an even number, and
        // 64 flows scaled onto 4 queues leave none empty.
        assert_eq!(per_queue.iter().sum::<u32>(), 128);
        assert!(
            per_queue.iter().all(|&q| q % 2 == 0 && q > 0),
            "{per_queue:?}"
        );
        assert_eq!(n.stats().qlen, 128);
    }

    #[test]
    fn skbedit_queue_mapping_picks_the_queue_when_the_device_has_it() {
        let mut n = mq(3);
        let mut cx = Cx::new(Time(0));
        for q in [2u16, 2, 0, 7] {
            let mut p = udp(5);
            p.queue_mapping = Some(q);
            n.enqueue(p, &mut cx).unwrap();
        }
        let qlen: Vec<u32> = n
            .qdisc
            .classes_ref()
            .unwrap()
            .list()
            .iter()
            .map(|c| c.stats.qlen)
            .collect();
        // Queue 7 does not exist: that packet goes by its hash.
        let hashed = Mq::new(&dev(3)).unwrap().pick(&mut udp(5));
        let mut want = vec![1, 0, 2];
        want[hashed] += 1;
        assert_eq!(qlen, want);
    }

    #[test]
    fn queues_take_turns_and_a_deleted_child_leaves_the_sum() {
        let mut n = mq(2);
        let mut cx = Cx::new(Time(0));
        for q in [0u16, 0, 0, 1] {
            let mut p = udp(q);
            p.queue_mapping = Some(q);
            n.enqueue(p, &mut cx).unwrap();
        }
        let mut order = vec![];
        while let Dequeue::Packet(p) = n.dequeue(&mut cx) {
            order.push(p.queue_mapping.unwrap());
            if order.len() == 2 {
                break;
            }
        }
        assert_eq!(order, [0, 1]);
        assert_eq!(n.stats().packets, 2);
        let cls = n.qdisc.classes().unwrap();
        let old = cls
            .graft(Handle::new(1, 1), None, &dev(2))
            .unwrap()
            .unwrap();
        assert_eq!(old.kind(), "pfifo_fast");
        assert_eq!(cls.take_purged(), (2, 200));
        assert_eq!(cls.list()[0].leaf, None);
        // The first queue's packet sent and its two queued are gone from the
        // root's counters with it.
        let s = n.stats();
        assert_eq!((s.packets, s.qlen), (1, 0));
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Empty));
    }
}
