//! drr: Deficit Round Robin among classes the user creates.
//!
//! Modelled on net/sched/sch_drr.c. The qdisc itself has no options; its
//! classes are made with `tc class add ... drr [quantum BYTES]` (default:
//! the device's `psched_mtu`, its MTU plus link-layer header) and each holds
//! a child qdisc, a default pfifo until another is grafted. Scheduling is the
//! shared [`DrrList`](super::drr_core): a class joins the active list with
//! a full quantum when its child gets its first packet, and the head class
//! sends while its next packet fits its deficit.
//!
//! Classification (`drr_classify`, shared with qfq as
//! [`classify_flat`](super::classify_flat)): a `skb->priority` whose major
//! is the qdisc's names the class directly if that class exists; otherwise
//! the qdisc's filters run (`drop` drops and counts, `stolen`/`queued`/`trap`
//! consume silently) and the class they name is used. A packet that no
//! filter classifies, or whose class does not exist, is dropped and counted
//! — drr has no default class.
//!
//! Classes are listed in the kernel's class-hash order
//! ([`ClassHash`](super::class_hash)), with parent `root` (`drr_dump_class`
//! sets `TC_H_ROOT`). A class bound by a filter cannot be deleted ("DRR
//! class is in use"). Deleting a class or grafting over its child purges the
//! packets it held, which the tree above counts as drops
//! ([`Classful::take_purged`]). `tc -s class show` gives each class its
//! child's counters and, as xstats, the deficit (0 while the class is idle).
//!
//! Deviation: the class's own byte counters are its child's (the kernel
//! keeps a copy that only differs when a child refuses after accepting).

use super::class_hash::ClassHash;
use super::drr_core::{psched_mtu, DrrClasses, DrrFlow, DrrList, Head, Pick};
use super::fifo::{Fifo, FifoKind, FifoOpts};
use super::{
    classify_flat, wrong_kind, ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc,
    QdiscNode, QdiscOpts, XStats,
};
use crate::cls::Block;
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::DropReason;
use serde::{Deserialize, Serialize};

/// The qdisc's options: drr has none (tc sends no `TCA_OPTIONS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrrOpts {}

/// A class's options (`TCA_DRR_QUANTUM`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrrClassOpts {
    /// Bytes per round; `None` keeps the current one (or the default for a new class).
    pub quantum: Option<u32>,
}

/// `struct tc_drr_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrrClassXstats {
    /// The class's deficit in bytes (0 while it has nothing queued).
    pub deficit: u32,
}

#[derive(Debug)]
struct DrrClass {
    flow: DrrFlow,
    leaf: QdiscNode,
}

impl DrrClasses<u32> for ClassHash<DrrClass> {
    fn flow(&mut self, class: u32) -> &mut DrrFlow {
        &mut self.get_mut(class).expect("active classes exist").flow
    }
    fn head(&mut self, class: u32, cx: &mut Cx) -> Head {
        let Some(leaf) = self.get_mut(class).map(|c| &mut c.leaf) else {
            return Head::Empty;
        };
        let head = leaf.peek_or_wait(cx).map(|p| p.len);
        match head {
            Ok(len) => Head::Len(len),
            Err(Some(t)) => Head::Wait(t),
            // Still counted as queued after the peek: held, not gone.
            Err(None) if leaf.stats.qlen > 0 => Head::Held,
            Err(None) => Head::Empty,
        }
    }
}

/// A drr qdisc.
#[derive(Debug)]
pub struct Drr {
    handle: Handle,
    classes: ClassHash<DrrClass>,
    active: DrrList<u32>,
    block: Block,
    purged: (u64, u64),
}

impl Drr {
    /// `drr_init_qdisc`.
    pub fn new(_opts: &DrrOpts, _dev: &DevInfo) -> TcResult<Self> {
        Ok(Drr {
            handle: Handle::UNSPEC,
            classes: ClassHash::new(),
            active: DrrList::new(),
            block: Block::default(),
            purged: (0, 0),
        })
    }

    fn default_leaf(classid: Handle, dev: &DevInfo) -> TcResult<QdiscNode> {
        let fifo = Fifo::new(FifoKind::Packets, &FifoOpts::default(), dev)?;
        Ok(QdiscNode::new(Handle::UNSPEC, classid, Box::new(fifo)))
    }

    /// Take a leaf's packets out of the tree (`qdisc_purge_queue`).
    fn purge(&mut self, leaf: &mut QdiscNode) {
        let s = leaf.stats();
        self.purged.0 += s.qlen as u64;
        self.purged.1 += s.backlog;
        leaf.reset();
    }
}

impl Qdisc for Drr {
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        let exists = |id: u32| self.classes.contains(id);
        let id = match classify_flat(self.handle, &mut self.block, exists, &mut pkt, cx.now) {
            Ok(id) => id,
            Err(r) => return Err((pkt, r)),
        };
        let Some(c) = self.classes.get_mut(id) else {
            return Err((pkt, DropReason::Unclassified));
        };
        let first = c.leaf.stats.qlen == 0;
        c.leaf.offer(pkt, cx)?;
        if first {
            self.active.deactivate(id);
            self.active.activate(id, &mut c.flow);
        }
        Ok(())
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        loop {
            match self.active.pick(&mut self.classes, cx) {
                Pick::Empty => return Dequeue::Empty,
                Pick::Wait(t) => return Dequeue::Wait(t),
                // A plugged head class: the kernel returns nothing too.
                Pick::Held => return Dequeue::Empty,
                Pick::Class(id) => {
                    let Some(c) = self.classes.get_mut(id) else {
                        self.active.deactivate(id);
                        continue;
                    };
                    let d = c.leaf.dequeue(cx);
                    if c.leaf.stats.qlen == 0 {
                        self.active.deactivate(id);
                    }
                    match d {
                        Dequeue::Packet(p) => return Dequeue::Packet(p),
                        // The peeked packet is always there; be safe anyway.
                        _ => continue,
                    }
                }
            }
        }
    }

    fn reset(&mut self) {
        for (_, c) in self.classes.iter_mut() {
            c.leaf.reset();
        }
        self.active.clear();
    }

    /// drr has no `change`; tc sends no options, so there is nothing to refuse.
    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        match opts {
            QdiscOpts::Drr(_) => Ok(()),
            _ => Err(wrong_kind("drr", opts)),
        }
    }

    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Drr(DrrOpts {})
    }

    fn set_handle(&mut self, handle: Handle) {
        self.handle = handle.qdisc();
        self.block.set_qdisc(self.handle);
    }

    /// `drr_tcf_block`: filters attach to the qdisc only.
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

impl Classful for Drr {
    /// `drr_change_class`.
    fn change_class(
        &mut self,
        classid: Handle,
        _parent: Handle,
        opts: Option<&ClassOpts>,
        dev: &DevInfo,
    ) -> TcResult<()> {
        let o = match opts {
            Some(ClassOpts::Drr(o)) => o,
            Some(_) => return Err(TcError::errno(Errno::EINVAL)),
            None => {
                return Err(TcError::inval(
                    "DRR options are required for this operation",
                ))
            }
        };
        if o.quantum == Some(0) {
            return Err(TcError::inval("Specified DRR quantum cannot be zero"));
        }
        if let Some(c) = self.classes.get_mut(classid.0) {
            if let Some(q) = o.quantum {
                c.flow.quantum = q;
            }
            return Ok(());
        }
        let quantum = o.quantum.unwrap_or_else(|| psched_mtu(dev));
        let leaf = Self::default_leaf(classid, dev)?.hashed_invisible();
        self.classes.insert(
            classid.0,
            DrrClass {
                flow: DrrFlow {
                    quantum,
                    deficit: 0,
                },
                leaf,
            },
        );
        self.classes.grow();
        Ok(())
    }

    /// `drr_delete_class`: refused while a filter points to the class.
    fn delete_class(&mut self, classid: Handle) -> TcResult<()> {
        if !self.classes.contains(classid.0) {
            return Err(TcError::errno(Errno::ENOENT));
        }
        if self.block.count_bound(classid) > 0 {
            return Err(TcError::msg(Errno::EBUSY, "DRR class is in use"));
        }
        if let Some(mut c) = self.classes.remove(classid.0) {
            self.purge(&mut c.leaf);
            self.active.deactivate(classid.0);
        }
        Ok(())
    }

    /// `drr_walk` + `drr_dump_class` + `drr_dump_class_stats`.
    fn list(&self) -> Vec<ClassInfo> {
        self.classes
            .iter()
            .map(|(id, c)| {
                let stats = c.leaf.stats();
                ClassInfo {
                    classid: Handle(id),
                    parent: Handle::ROOT,
                    leaf: (!c.leaf.handle.is_unspec()).then_some(c.leaf.handle),
                    opts: ClassOpts::Drr(DrrClassOpts {
                        quantum: Some(c.flow.quantum),
                    }),
                    stats,
                    xstats: XStats::DrrClass(DrrClassXstats {
                        deficit: if stats.qlen > 0 { c.flow.deficit } else { 0 },
                    }),
                }
            })
            .collect()
    }

    fn contains(&self, classid: Handle) -> bool {
        self.classes.contains(classid.0)
    }

    /// `drr_graft_class`: `None` puts a default pfifo back; the old child is purged.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        if !self.classes.contains(classid.0) {
            return Err(TcError::msg(Errno::ENOENT, "Specified class not found"));
        }
        let mut new = match new {
            Some(n) => n,
            None => Self::default_leaf(classid, dev)?,
        };
        new.parent = classid;
        let Some(c) = self.classes.get_mut(classid.0) else {
            return Err(TcError::errno(Errno::ENOENT));
        };
        let mut old = std::mem::replace(&mut c.leaf, new);
        self.purge(&mut old);
        self.active.deactivate(classid.0);
        Ok(Some(old))
    }

    fn take_purged(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.purged)
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        self.classes.iter_mut().map(|(_, c)| &mut c.leaf).collect()
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        self.classes.iter().map(|(_, c)| &c.leaf).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cls::{Classifier, ClassifyResult, TcfProto, Verdict};
    use crate::packet::Skb;
    use crate::packet::ETH_P_ALL;
    use crate::time::Time;

    const H: Handle = Handle::new(1, 0);

    fn drr(classes: &[(u16, Option<u32>)]) -> QdiscNode {
        let dev = DevInfo::default();
        let mut d = Drr::new(&DrrOpts {}, &dev).unwrap();
        d.set_handle(H);
        for &(minor, quantum) in classes {
            d.change_class(
                Handle::new(1, minor),
                H,
                Some(&ClassOpts::Drr(DrrClassOpts { quantum })),
                &dev,
            )
            .unwrap();
        }
        QdiscNode::new(H, Handle::ROOT, Box::new(d))
    }

    /// Packets go to the class named by their priority (`1:minor`).
    fn pkt(id: u64, minor: u16, len: u32) -> Packet {
        Packet::from(Skb {
            id,
            len,
            priority: Handle::new(1, minor).0,
            ..Default::default()
        })
    }

    fn class_of(p: &Packet) -> u16 {
        (p.priority & 0xffff) as u16
    }

    #[test]
    fn classes_share_bytes_in_the_ratio_of_their_quanta() {
        // Three backlogged classes, quanta 1:2:3, packet sizes varied
        // between 40 and 1500 bytes: at the end of a round each class's
        // bytes must be within one maximum packet of its quantum share
        // (each class has sent rounds x quantum minus a deficit smaller
        // than its next packet; Shreedhar & Varghese, Lemma 2).
        let mut n = drr(&[(1, Some(1000)), (2, Some(2000)), (3, Some(3000))]);
        let mut cx = Cx::new(Time(0));
        let sizes = [64u32, 1500, 576, 1200, 300, 1000, 40, 1499];
        let mut id = 0u64;
        let mut next_len = |c: u16| {
            id += 1;
            (id, sizes[(id as usize * 7 + c as usize) % sizes.len()])
        };
        for c in 1..=3u16 {
            for _ in 0..50 {
                let (i, len) = next_len(c);
                n.enqueue(pkt(i, c, len), &mut cx).unwrap();
            }
        }
        let mut sent = [0u64; 4];
        let (mut count, mut last) = (0u32, 0u16);
        loop {
            let Dequeue::Packet(p) = n.dequeue(&mut cx) else {
                panic!("backlogged")
            };
            let c = class_of(&p);
            // Stop at a round boundary (class 3's turn gives way to class
            // 1's), where each class's unspent deficit is under one packet.
            if count >= 20_000 && last == 3 && c == 1 {
                break;
            }
            sent[c as usize] += p.len as u64;
            (count, last) = (count + 1, c);
            // Keep every class backlogged: one in for each one out.
            let (i, len) = next_len(c);
            n.enqueue(pkt(i, c, len), &mut cx).unwrap();
        }
        let total: u64 = sent.iter().sum();
        for (c, q) in [(1usize, 1000u64), (2, 2000), (3, 3000)] {
            let share = total * q / 6000;
            let diff = sent[c].abs_diff(share);
            assert!(
                diff < 1500,
                "class {c}: sent {} share {share} (diff {diff})",
                sent[c]
            );
        }
        assert!(total > 10_000_000, "{total}");
    }

    #[test]
    fn unclassified_packets_are_dropped_and_counted() {
        let mut n = drr(&[(1, None)]);
        let mut cx = Cx::new(Time(0));
        // Priority naming no class, and no filters: dropped.
        assert_eq!(
            n.enqueue(pkt(1, 9, 100), &mut cx),
            Err(DropReason::Unclassified)
        );
        let p = Packet::from(Skb {
            priority: 0,
            ..pkt(2, 1, 100).into_skb()
        });
        assert_eq!(n.enqueue(p, &mut cx), Err(DropReason::Unclassified));
        n.enqueue(pkt(3, 1, 100), &mut cx).unwrap();
        let s = n.stats();
        assert_eq!((s.drops, s.qlen), (2, 1));
    }

    #[test]
    fn default_quantum_is_psched_mtu_and_zero_is_refused() {
        let n = drr(&[(1, None), (2, Some(500))]);
        let l = n.qdisc.classes_ref().unwrap().list();
        let q = |m: u16| {
            l.iter()
                .find(|c| c.classid == Handle::new(1, m))
                .map(|c| c.opts.clone())
        };
        assert_eq!(
            q(1),
            Some(ClassOpts::Drr(DrrClassOpts {
                quantum: Some(1514)
            }))
        );
        assert_eq!(
            q(2),
            Some(ClassOpts::Drr(DrrClassOpts { quantum: Some(500) }))
        );
        assert!(l.iter().all(|c| c.parent == Handle::ROOT));
        let mut d = Drr::new(&DrrOpts {}, &DevInfo::default()).unwrap();
        let dev = DevInfo::default();
        let e = d
            .change_class(
                Handle::new(1, 1),
                H,
                Some(&ClassOpts::Drr(DrrClassOpts { quantum: Some(0) })),
                &dev,
            )
            .unwrap_err();
        assert_eq!(
            e.extack.as_deref(),
            Some("Specified DRR quantum cannot be zero")
        );
        let e = d
            .change_class(Handle::new(1, 1), H, None, &dev)
            .unwrap_err();
        assert_eq!(e.errno, Errno::EINVAL);
        assert!(d.list().is_empty());
        // Changing without a quantum keeps the old one.
        d.change_class(
            Handle::new(1, 1),
            H,
            Some(&ClassOpts::Drr(DrrClassOpts { quantum: Some(700) })),
            &dev,
        )
        .unwrap();
        d.change_class(
            Handle::new(1, 1),
            H,
            Some(&ClassOpts::Drr(DrrClassOpts { quantum: None })),
            &dev,
        )
        .unwrap();
        assert_eq!(
            d.list()[0].opts,
            ClassOpts::Drr(DrrClassOpts { quantum: Some(700) })
        );
    }

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

    #[test]
    fn filters_pick_classes_and_actions_drop_or_steal() {
        let mut n = drr(&[(1, None), (2, None)]);
        let b = n.qdisc.block_mut(H).unwrap();
        for (i, f) in [
            MarkFilter(1, Handle::new(1, 2), Verdict::Ok),
            MarkFilter(2, Handle::new(1, 7), Verdict::Ok),
            MarkFilter(3, Handle::UNSPEC, Verdict::Shot),
            MarkFilter(4, Handle::UNSPEC, Verdict::Stolen),
        ]
        .into_iter()
        .enumerate()
        {
            b.protos.push(TcfProto {
                chain: 0,
                prio: i as u32 + 1,
                protocol: ETH_P_ALL,
                cls: Box::new(f),
            });
        }
        let mut cx = Cx::new(Time(0));
        let p = |id, mark| {
            Packet::from(Skb {
                id,
                len: 100,
                mark,
                ..Default::default()
            })
        };
        n.enqueue(p(1, 1), &mut cx).unwrap();
        assert_eq!(n.enqueue(p(2, 2), &mut cx), Err(DropReason::Unclassified));
        assert_eq!(n.enqueue(p(3, 3), &mut cx), Err(DropReason::Action));
        assert_eq!(n.enqueue(p(4, 4), &mut cx), Err(DropReason::Stolen));
        let l = n.qdisc.classes_ref().unwrap().list();
        let c2 = l.iter().find(|c| c.classid == Handle::new(1, 2)).unwrap();
        assert_eq!(c2.stats.qlen, 1);
        assert_eq!(n.stats().drops, 2, "stolen is not a drop");
    }

    #[test]
    fn deficit_xstats_and_delete_and_graft_purge() {
        let mut n = drr(&[(1, Some(1000)), (2, Some(1000))]);
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            n.enqueue(pkt(i, 1, 300), &mut cx).unwrap();
        }
        n.enqueue(pkt(10, 2, 400), &mut cx).unwrap();
        let Dequeue::Packet(p) = n.dequeue(&mut cx) else {
            panic!()
        };
        assert_eq!(p.id, 0);
        let x = |n: &QdiscNode, m: u16| {
            n.qdisc
                .classes_ref()
                .unwrap()
                .list()
                .into_iter()
                .find(|c| c.classid == Handle::new(1, m))
                .unwrap()
                .xstats
        };
        assert_eq!(x(&n, 1), XStats::DrrClass(DrrClassXstats { deficit: 700 }));
        let dev = DevInfo::default();
        let c = n.qdisc.classes().unwrap();
        c.delete_class(Handle::new(1, 1)).unwrap();
        assert_eq!(c.take_purged(), (2, 600));
        let old = c.graft(Handle::new(1, 2), None, &dev).unwrap().unwrap();
        assert_eq!(old.stats().qlen, 0);
        assert_eq!(c.take_purged(), (1, 400));
        assert_eq!(c.list().len(), 1);
        assert_eq!(x(&n, 2), XStats::DrrClass(DrrClassXstats { deficit: 0 }));
        // Nothing is left to send: the active list forgot both classes.
        n.stats.qlen = 0; // the device would have applied the purge
        assert_eq!(n.qdisc.dequeue(&mut cx), Dequeue::Empty);
    }
}
