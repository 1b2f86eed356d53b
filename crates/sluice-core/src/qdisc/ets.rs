//! ets: Enhanced Transmission Selection (IEEE 802.1Qaz), prio and DRR in one.
//!
//! Modelled on net/sched/sch_ets.c. The qdisc has `bands` classes (1..=16),
//! `major:1` .. `major:bands`, each holding a child qdisc (a default pfifo
//! until another is grafted). The first `strict` bands are served like prio
//! bands: band 0 whenever it has a packet, then band 1, and so on. Only when
//! every strict band is empty do the remaining bands share the link by
//! Deficit Round Robin ([`DrrList`](super::drr_core)) with their `quanta`
//! (default: the device's `psched_mtu`). Classes cannot be added or removed
//! one by one; `tc class change ... ets quantum Q` changes a DRR band's
//! quantum, and strict bands have none.
//!
//! Classification (`ets_classify`): a `skb->priority` whose major is the
//! qdisc's names the band by its minor; otherwise the filters run (`drop`
//! drops and counts, `stolen`/`queued`/`trap` consume silently) and a match
//! names the band by its class id's minor; with no filter or no match,
//! `priomap[priority & 15]` gives the band (a priority carrying a major
//! counts as 0). A minor of 0 or beyond `bands` goes to band `priomap[0]`.
//! Unless the priomap says otherwise every priority maps to the last band.
//!
//! `change` validates everything (the kernel's messages, in its order:
//! bands, strict, priomap, quanta) before touching anything. Shrinking
//! `bands` destroys the surplus bands and their packets (counted as drops
//! up the tree); a band that stops being strict joins the DRR list if it
//! holds packets, and one that becomes strict leaves it.
//!
//! Deviation: packets destroyed by a shrinking `change` are reported to the
//! tree at the next enqueue or dequeue, because `change` gets no context
//! (as in [`super::prio`]).

use super::drr_core::{psched_mtu, DrrClasses, DrrFlow, DrrList, Head, Pick};
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

/// Most bands (`TCQ_ETS_MAX_BANDS`).
pub const TCQ_ETS_MAX_BANDS: usize = 16;
/// Priorities in the priomap (`TC_PRIO_MAX + 1`).
const PRIOS: usize = 16;

/// The `TCA_ETS_*` attributes tc sends and the kernel dumps. Absent
/// attributes are `None`; lists keep every value sent, even too many.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtsOpts {
    /// `TCA_ETS_NBANDS` (required).
    pub nbands: Option<u8>,
    /// `TCA_ETS_NSTRICT`.
    pub nstrict: Option<u8>,
    /// `TCA_ETS_QUANTA`: quanta of the bands after the strict ones.
    pub quanta: Option<Vec<u32>>,
    /// `TCA_ETS_PRIOMAP`: bands of priorities 0, 1, ...
    pub priomap: Option<Vec<u8>>,
}

/// A band's options (`TCA_ETS_QUANTA_BAND`; absent for strict bands).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtsClassOpts {
    /// The band's quantum in bytes.
    pub quantum: Option<u32>,
}

/// Validated parameters (`ets_qdisc_change` before its commit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct EtsParams {
    nbands: usize,
    nstrict: usize,
    /// Quantum of each band; 0 for strict bands.
    quanta: [u32; TCQ_ETS_MAX_BANDS],
    priomap: [u8; PRIOS],
}

fn mod_err(msg: &str) -> TcError {
    TcError::inval(format!("sch_ets: {msg}"))
}

impl EtsParams {
    fn validate(o: &EtsOpts, dev: &DevInfo) -> TcResult<Self> {
        let Some(nbands) = o.nbands else {
            return Err(mod_err("Number of bands is a required argument"));
        };
        let nbands = nbands as usize;
        if !(1..=TCQ_ETS_MAX_BANDS).contains(&nbands) {
            return Err(mod_err("Invalid number of bands"));
        }
        let mut priomap = [(nbands - 1) as u8; PRIOS];
        let nstrict = o.nstrict.unwrap_or(0) as usize;
        if nstrict > nbands {
            return Err(mod_err("Invalid number of strict bands"));
        }
        if let Some(map) = &o.priomap {
            for (prio, &band) in map.iter().enumerate() {
                if prio >= PRIOS {
                    return Err(mod_err("Too many priorities in ETS priomap"));
                }
                if band as usize >= nbands {
                    return Err(mod_err("Invalid band number in ETS priomap"));
                }
                priomap[prio] = band;
            }
        }
        let mut quanta = [0u32; TCQ_ETS_MAX_BANDS];
        if let Some(qs) = &o.quanta {
            for (i, &q) in qs.iter().enumerate() {
                let band = nstrict + i;
                if band >= nbands {
                    return Err(mod_err("ETS quanta has more values than bands"));
                }
                if q == 0 {
                    return Err(TcError::inval("ETS quantum cannot be zero"));
                }
                quanta[band] = q;
            }
        }
        for q in &mut quanta[nstrict..nbands] {
            if *q == 0 {
                *q = psched_mtu(dev);
            }
        }
        Ok(EtsParams {
            nbands,
            nstrict,
            quanta,
            priomap,
        })
    }
}

#[derive(Debug)]
struct EtsBand {
    flow: DrrFlow,
    leaf: QdiscNode,
}

impl DrrClasses<usize> for Vec<EtsBand> {
    fn flow(&mut self, band: usize) -> &mut DrrFlow {
        &mut self[band].flow
    }
    fn head(&mut self, band: usize, cx: &mut Cx) -> Head {
        let Some(leaf) = self.get_mut(band).map(|c| &mut c.leaf) else {
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

/// An ets qdisc.
#[derive(Debug)]
pub struct Ets {
    params: EtsParams,
    handle: Handle,
    /// One per band; `bands.len() == params.nbands`.
    bands: Vec<EtsBand>,
    /// DRR over the non-strict bands that hold packets.
    active: DrrList<usize>,
    block: Block,
    /// Packets of bands a `change` destroyed, not yet reported to the tree.
    pending_shed: (u64, u64),
    /// Packets a graft purged, for [`Classful::take_purged`].
    purged: (u64, u64),
}

impl Ets {
    /// `ets_qdisc_init`.
    pub fn new(opts: &EtsOpts, dev: &DevInfo) -> TcResult<Self> {
        let params = EtsParams::validate(opts, dev)?;
        let mut e = Ets {
            params: EtsParams {
                nbands: 0,
                nstrict: 0,
                ..params
            },
            handle: Handle::UNSPEC,
            bands: Vec::new(),
            active: DrrList::new(),
            block: Block::default(),
            pending_shed: (0, 0),
            purged: (0, 0),
        };
        e.commit(params, dev)?;
        Ok(e)
    }

    fn default_leaf(&self, band: usize, dev: &DevInfo) -> TcResult<QdiscNode> {
        let fifo = Fifo::new(FifoKind::Packets, &FifoOpts::default(), dev)?;
        Ok(QdiscNode::new(
            Handle::UNSPEC,
            Handle::new(self.handle.major(), band as u16 + 1),
            Box::new(fifo),
        ))
    }

    /// The commit half of `ets_qdisc_change`.
    fn commit(&mut self, p: EtsParams, dev: &DevInfo) -> TcResult<()> {
        let old = self.params;
        let new_leaves: Vec<QdiscNode> = (old.nbands..p.nbands)
            .map(|i| self.default_leaf(i, dev).map(QdiscNode::hashed_invisible))
            .collect::<TcResult<_>>()?;
        // Bands that stop being strict join the DRR list if they hold packets.
        for i in p.nstrict..old.nstrict.min(p.nbands) {
            if self.bands[i].leaf.stats.qlen > 0 && !self.active.is_active(i) {
                self.bands[i].flow.quantum = p.quanta[i];
                self.active.activate(i, &mut self.bands[i].flow);
            }
        }
        // Bands that become strict leave it.
        for i in old.nstrict..p.nstrict.min(old.nbands) {
            self.active.deactivate(i);
        }
        // Surplus bands go, with their packets.
        while self.bands.len() > p.nbands {
            let i = self.bands.len() - 1;
            self.active.deactivate(i);
            if let Some(mut b) = self.bands.pop() {
                let s = b.leaf.stats();
                self.pending_shed.0 += s.qlen as u64;
                self.pending_shed.1 += s.backlog;
                b.leaf.reset();
            }
        }
        for leaf in new_leaves {
            self.bands.push(EtsBand {
                flow: DrrFlow::default(),
                leaf,
            });
        }
        for (i, b) in self.bands.iter_mut().enumerate() {
            b.flow.quantum = p.quanta[i];
        }
        self.params = p;
        Ok(())
    }

    fn flush_pending(&mut self, cx: &mut Cx) {
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

    fn is_strict(&self, band: usize) -> bool {
        band < self.params.nstrict
    }

    /// `ets_classify`.
    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Result<usize, DropReason> {
        let mut band = pkt.priority;
        if pkt.priority & 0xffff_0000 != self.handle.0 {
            let r = self.block.classify(pkt, now);
            match r.map(|r| (r.verdict, r.classid)) {
                Some((Verdict::Shot, _)) => return Err(DropReason::Action),
                Some((Verdict::Stolen | Verdict::Queued | Verdict::Trap, _)) => {
                    return Err(DropReason::Stolen)
                }
                None | Some((Verdict::Continue, _)) => {
                    if band & 0xffff_0000 != 0 {
                        band = 0;
                    }
                    return Ok(self.params.priomap[(band & 15) as usize] as usize);
                }
                Some((_, classid)) => band = classid.0,
            }
        }
        let b = (band & 0xffff).wrapping_sub(1) as usize;
        Ok(if b >= self.params.nbands {
            self.params.priomap[0] as usize
        } else {
            b
        })
    }

    fn band_of_class(&self, classid: Handle) -> Option<usize> {
        let minor = classid.minor() as usize;
        (minor >= 1 && minor <= self.params.nbands).then(|| minor - 1)
    }
}

impl Qdisc for Ets {
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.flush_pending(cx);
        let band = match self.classify(&mut pkt, cx.now) {
            Ok(b) => b,
            Err(r) => return Err((pkt, r)),
        };
        let strict = self.is_strict(band);
        let b = &mut self.bands[band];
        let first = b.leaf.stats.qlen == 0;
        b.leaf.offer(pkt, cx)?;
        if first && !strict {
            self.active.deactivate(band);
            self.active.activate(band, &mut b.flow);
        }
        Ok(())
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.flush_pending(cx);
        let mut wake = None;
        for b in &mut self.bands[..self.params.nstrict] {
            match b.leaf.dequeue(cx) {
                Dequeue::Packet(p) => return Dequeue::Packet(p),
                Dequeue::Wait(t) => wake = Dequeue::earliest(wake, Some(t)),
                Dequeue::Empty => {}
            }
        }
        loop {
            match self.active.pick(&mut self.bands, cx) {
                Pick::Empty | Pick::Held => return wake.map_or(Dequeue::Empty, Dequeue::Wait),
                Pick::Wait(t) => {
                    return Dequeue::Wait(Dequeue::earliest(wake, Some(t)).unwrap_or(t))
                }
                Pick::Class(i) => {
                    let b = &mut self.bands[i];
                    let d = b.leaf.dequeue(cx);
                    if b.leaf.stats.qlen == 0 {
                        self.active.deactivate(i);
                    }
                    if let Dequeue::Packet(p) = d {
                        return Dequeue::Packet(p);
                    }
                }
            }
        }
    }

    fn reset(&mut self) {
        for b in &mut self.bands {
            b.leaf.reset();
        }
        self.active.clear();
        self.pending_shed = (0, 0);
    }

    fn change(&mut self, opts: &QdiscOpts, dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Ets(o) = opts else {
            return Err(wrong_kind("ets", opts));
        };
        let p = EtsParams::validate(o, dev)?;
        self.commit(p, dev)
    }

    /// `ets_qdisc_dump`.
    fn dump(&self) -> QdiscOpts {
        let p = &self.params;
        QdiscOpts::Ets(EtsOpts {
            nbands: Some(p.nbands as u8),
            nstrict: (p.nstrict > 0).then_some(p.nstrict as u8),
            quanta: (p.nbands > p.nstrict).then(|| p.quanta[p.nstrict..p.nbands].to_vec()),
            priomap: Some(p.priomap.to_vec()),
        })
    }

    fn set_handle(&mut self, handle: Handle) {
        self.handle = handle.qdisc();
        self.block.set_qdisc(self.handle);
        for (i, b) in self.bands.iter_mut().enumerate() {
            b.leaf.parent = Handle::new(self.handle.major(), i as u16 + 1);
        }
    }

    /// `ets_qdisc_tcf_block`: filters attach to the qdisc only.
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

impl Classful for Ets {
    /// `ets_class_change`: only a DRR band's quantum can change.
    fn change_class(
        &mut self,
        classid: Handle,
        _parent: Handle,
        opts: Option<&ClassOpts>,
        _dev: &DevInfo,
    ) -> TcResult<()> {
        let Some(band) = self.band_of_class(classid) else {
            return Err(TcError::msg(
                Errno::EOPNOTSUPP,
                "Fine-grained class addition and removal is not supported",
            ));
        };
        let o = match opts {
            Some(ClassOpts::Ets(o)) => o,
            Some(_) => return Err(TcError::errno(Errno::EINVAL)),
            None => {
                return Err(TcError::inval(
                    "ETS options are required for this operation",
                ))
            }
        };
        let Some(q) = o.quantum else {
            return Ok(());
        };
        if self.is_strict(band) {
            return Err(TcError::inval(
                "Strict bands do not have a configurable quantum",
            ));
        }
        if q == 0 {
            return Err(TcError::inval("ETS quantum cannot be zero"));
        }
        self.bands[band].flow.quantum = q;
        self.params.quanta[band] = q;
        Ok(())
    }

    /// ets has no class `delete` operation.
    fn delete_class(&mut self, classid: Handle) -> TcResult<()> {
        if self.band_of_class(classid).is_none() {
            return Err(TcError::errno(Errno::ENOENT));
        }
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// `ets_qdisc_walk` + `ets_class_dump` + `ets_class_dump_stats`.
    fn list(&self) -> Vec<ClassInfo> {
        self.bands
            .iter()
            .enumerate()
            .map(|(i, b)| ClassInfo {
                classid: Handle::new(self.handle.major(), i as u16 + 1),
                parent: Handle::ROOT,
                leaf: (!b.leaf.handle.is_unspec()).then_some(b.leaf.handle),
                opts: ClassOpts::Ets(EtsClassOpts {
                    quantum: (!self.is_strict(i)).then_some(b.flow.quantum),
                }),
                stats: b.leaf.stats(),
                xstats: XStats::None,
            })
            .collect()
    }

    fn contains(&self, classid: Handle) -> bool {
        classid.major() == self.handle.major() && self.band_of_class(classid).is_some()
    }

    /// `ets_class_graft`: `None` restores a default pfifo; the old child is purged.
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
            None => self.default_leaf(band, dev)?,
        };
        new.parent = Handle::new(self.handle.major(), band as u16 + 1);
        let mut old = std::mem::replace(&mut self.bands[band].leaf, new);
        let s = old.stats();
        self.purged.0 += s.qlen as u64;
        self.purged.1 += s.backlog;
        old.reset();
        self.active.deactivate(band);
        Ok(Some(old))
    }

    fn take_purged(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.purged)
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        self.bands.iter_mut().map(|b| &mut b.leaf).collect()
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        self.bands.iter().map(|b| &b.leaf).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Skb;

    const H: Handle = Handle::new(1, 0);

    fn opts(nbands: u8, nstrict: Option<u8>, quanta: Option<Vec<u32>>) -> EtsOpts {
        EtsOpts {
            nbands: Some(nbands),
            nstrict,
            quanta,
            priomap: None,
        }
    }

    fn ets(o: EtsOpts) -> QdiscNode {
        let mut e = Ets::new(&o, &DevInfo::default()).unwrap();
        e.set_handle(H);
        QdiscNode::new(H, Handle::ROOT, Box::new(e))
    }

    /// A packet for band `b` (priority `1:b+1`).
    fn pkt(id: u64, band: u16, len: u32) -> Packet {
        Packet::from(Skb {
            id,
            len,
            priority: Handle::new(1, band + 1).0,
            ..Default::default()
        })
    }

    fn band(p: &Packet) -> u16 {
        (p.priority & 0xffff) as u16 - 1
    }

    #[test]
    fn strict_bands_starve_the_drr_bands() {
        // 2 strict + 2 DRR bands; strict band 0 always wins, then band 1,
        // and the DRR bands see nothing while a strict band has a packet.
        let mut n = ets(opts(4, Some(2), None));
        let mut cx = Cx::new(Time(0));
        let mut id = 0;
        for _ in 0..100 {
            for b in [3, 2, 1, 0] {
                id += 1;
                n.enqueue(pkt(id, b, 1000), &mut cx).unwrap();
            }
        }
        let order: Vec<u16> = std::iter::from_fn(|| match n.dequeue(&mut cx) {
            Dequeue::Packet(p) => Some(band(&p)),
            _ => None,
        })
        .collect();
        assert_eq!(order.len(), 400);
        assert!(order[..100].iter().all(|&b| b == 0));
        assert!(order[100..200].iter().all(|&b| b == 1));
        // Then bands 2 and 3 alternate (equal quanta of 1514, 1000-byte packets).
        assert!(order[200..].iter().all(|&b| b >= 2));
        // Equal quanta: equal bytes, within one packet, at any point.
        let twos = order[200..300].iter().filter(|&&b| b == 2).count();
        assert!((49..=51).contains(&twos), "{twos}");
    }

    #[test]
    fn drr_bands_share_by_quanta() {
        // Quanta 3000:1000, 500-byte packets, both backlogged: band 2 sends
        // 6 packets per round and band 3 two, so 3:1 in bytes.
        let mut n = ets(opts(4, Some(2), Some(vec![3000, 1000])));
        let mut cx = Cx::new(Time(0));
        for i in 0..400 {
            n.enqueue(pkt(i, 2 + (i % 2) as u16, 500), &mut cx).unwrap();
        }
        let mut bytes = [0u64; 4];
        for _ in 0..160 {
            let Dequeue::Packet(p) = n.dequeue(&mut cx) else {
                panic!()
            };
            bytes[band(&p) as usize] += p.len as u64;
        }
        assert_eq!((bytes[2], bytes[3]), (60_000, 20_000));
    }

    #[test]
    fn classify_by_priomap_priority_and_default() {
        // bands 5 priomap 0 0 1 0 1 2 0 1 2 3 0 1 2 3 4 0 (tc-testing c696)
        let mut n = ets(EtsOpts {
            nbands: Some(5),
            priomap: Some(vec![0, 0, 1, 0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 3, 4, 0]),
            ..Default::default()
        });
        let mut cx = Cx::new(Time(0));
        let p = |id, priority| {
            Packet::from(Skb {
                id,
                len: 100,
                priority,
                ..Default::default()
            })
        };
        n.enqueue(p(1, 14), &mut cx).unwrap(); // priomap[14] = 4
        n.enqueue(p(2, 9), &mut cx).unwrap(); // priomap[9] = 3
        n.enqueue(p(3, 0x0001_0003), &mut cx).unwrap(); // class 1:3 = band 2
        n.enqueue(p(4, 0x0001_0009), &mut cx).unwrap(); // beyond bands: priomap[0] = 0
        n.enqueue(p(5, 0x0002_000e), &mut cx).unwrap(); // foreign major counts as 0
        let q: Vec<u32> = n
            .qdisc
            .classes_ref()
            .unwrap()
            .list()
            .iter()
            .map(|c| c.stats.qlen)
            .collect();
        assert_eq!(q, vec![2, 0, 1, 1, 1]);
        // Without a priomap everything goes to the last band.
        let e = Ets::new(&opts(4, None, None), &DevInfo::default()).unwrap();
        assert_eq!(e.params.priomap, [3; 16]);
    }

    #[test]
    fn validation_in_the_kernels_order() {
        let dev = DevInfo::default();
        let err = |o: EtsOpts| Ets::new(&o, &dev).unwrap_err().extack.unwrap();
        assert_eq!(
            err(EtsOpts::default()),
            "sch_ets: Number of bands is a required argument"
        );
        assert_eq!(
            err(opts(17, None, None)),
            "sch_ets: Invalid number of bands"
        );
        assert_eq!(err(opts(0, None, None)), "sch_ets: Invalid number of bands");
        assert_eq!(
            err(opts(2, Some(3), None)),
            "sch_ets: Invalid number of strict bands"
        );
        assert_eq!(
            err(opts(2, None, Some(vec![1, 2, 3]))),
            "sch_ets: ETS quanta has more values than bands"
        );
        assert_eq!(
            err(opts(3, None, Some(vec![1, 0]))),
            "ETS quantum cannot be zero"
        );
        let mut o = opts(2, None, None);
        o.priomap = Some(vec![0, 1, 2]);
        assert_eq!(
            err(o.clone()),
            "sch_ets: Invalid band number in ETS priomap"
        );
        o.priomap = Some(vec![0; 17]);
        assert_eq!(err(o), "sch_ets: Too many priorities in ETS priomap");
        // A failed change leaves everything as it was.
        let mut e = Ets::new(&opts(3, Some(1), Some(vec![700, 800])), &dev).unwrap();
        let before = e.dump();
        assert!(e
            .change(&QdiscOpts::Ets(opts(2, Some(3), None)), &dev)
            .is_err());
        assert_eq!(e.dump(), before);
        assert_eq!(
            before,
            QdiscOpts::Ets(EtsOpts {
                nbands: Some(3),
                nstrict: Some(1),
                quanta: Some(vec![700, 800]),
                priomap: Some(vec![2; 16]),
            })
        );
    }

    #[test]
    fn shrinking_purges_and_strictness_moves_bands_between_lists() {
        let mut n = ets(opts(4, None, Some(vec![1000, 1000, 1000, 1000])));
        let mut cx = Cx::new(Time(0));
        for b in [0u16, 1, 2, 3, 3] {
            n.enqueue(pkt(b as u64, b, 100), &mut cx).unwrap();
        }
        let dev = DevInfo::default();
        // Two bands go (3 packets), and band 0 becomes strict.
        n.qdisc
            .change(&QdiscOpts::Ets(opts(2, Some(1), None)), &dev)
            .unwrap();
        let Dequeue::Packet(p) = n.dequeue(&mut cx) else {
            panic!()
        };
        assert_eq!(band(&p), 0);
        let Dequeue::Packet(p) = n.dequeue(&mut cx) else {
            panic!()
        };
        assert_eq!(band(&p), 1);
        assert_eq!(n.dequeue(&mut cx), Dequeue::Empty);
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (0, 0, 3));
        // Band 0 stops being strict while holding packets: it joins the DRR list.
        n.qdisc
            .change(&QdiscOpts::Ets(opts(2, Some(2), None)), &dev)
            .unwrap();
        n.enqueue(pkt(10, 0, 100), &mut cx).unwrap();
        n.qdisc
            .change(&QdiscOpts::Ets(opts(2, None, None)), &dev)
            .unwrap();
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.id == 10));
    }

    #[test]
    fn class_change_rules() {
        let dev = DevInfo::default();
        let mut e = Ets::new(&opts(3, Some(1), Some(vec![1000, 2000])), &dev).unwrap();
        e.set_handle(H);
        let q = |q| Some(ClassOpts::Ets(EtsClassOpts { quantum: q }));
        let c = |m| Handle::new(1, m);
        assert_eq!(
            e.change_class(c(1), H, q(Some(5)).as_ref(), &dev)
                .unwrap_err()
                .extack
                .as_deref(),
            Some("Strict bands do not have a configurable quantum")
        );
        e.change_class(c(1), H, q(None).as_ref(), &dev).unwrap();
        e.change_class(c(2), H, q(Some(1500)).as_ref(), &dev)
            .unwrap();
        assert_eq!(
            e.change_class(c(4), H, q(Some(5)).as_ref(), &dev)
                .unwrap_err()
                .errno,
            Errno::EOPNOTSUPP
        );
        assert_eq!(
            e.change_class(c(3), H, q(Some(0)).as_ref(), &dev)
                .unwrap_err()
                .extack
                .as_deref(),
            Some("ETS quantum cannot be zero")
        );
        assert_eq!(e.delete_class(c(2)).unwrap_err().errno, Errno::EOPNOTSUPP);
        let l = e.list();
        assert_eq!(
            l.iter().map(|c| c.opts.clone()).collect::<Vec<_>>(),
            vec![
                ClassOpts::Ets(EtsClassOpts { quantum: None }),
                ClassOpts::Ets(EtsClassOpts {
                    quantum: Some(1500)
                }),
                ClassOpts::Ets(EtsClassOpts {
                    quantum: Some(2000)
                }),
            ]
        );
        assert!(l.iter().all(|c| c.parent == Handle::ROOT));
    }
}
