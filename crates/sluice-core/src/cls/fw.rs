//! fw: classify by firewall mark (`skb->mark`, set by iptables `-j MARK`).
//!
//! Modelled on net/sched/cls_fw.c. Each element is keyed by its handle: a
//! packet matches the element whose handle equals `mark & mask`. The mask
//! (`handle M/MASK`, default 0xffffffff) belongs to the instance: the first
//! element sets it and every later one must repeat it (EINVAL otherwise; a
//! failed first add still leaves the mask set, as in the kernel). Elements
//! live in 256 buckets by a fold of the handle; a new element goes to the
//! front of its bucket, and `tc filter show` walks buckets 0..255.
//!
//! A matching element gives its class id and runs its actions; an answer of
//! `continue` tries the next element with the same handle. An element with
//! neither class id nor actions is dumped without options.
//!
//! The "old method": an instance created without options and without a
//! handle has no elements at all; it classifies every packet whose mark is a
//! class id of the owning qdisc (`major == 0` or the qdisc's major) into that
//! class.
//!
//! Deviation: `indev` is validated and dumped but always matches (packets
//! carry no input interface).

use super::act::police::PoliceSpec;
use super::act::{ActionDump, ActionSpec, Exts, InitCtx};
use super::{
    check_indev, ChangeReq, Classifier, ClassifyResult, ClsEnv, FilterElemOpts, FilterElement,
    FilterOpts, Verdict,
};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::time::Time;
use serde::{Deserialize, Serialize};

const HTSIZE: usize = 256;
const DEFAULT_MASK: u32 = 0xFFFF_FFFF;

/// The fw options tc sends (`TCA_FW_*`); the mark itself is the filter handle.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FwOpts {
    /// `TCA_FW_CLASSID`.
    #[serde(default)]
    pub classid: Option<Handle>,
    /// `TCA_FW_INDEV`.
    #[serde(default)]
    pub indev: Option<String>,
    /// `TCA_FW_MASK` (`handle MARK/MASK`).
    #[serde(default)]
    pub mask: Option<u32>,
    /// `TCA_FW_ACT`.
    #[serde(default)]
    pub actions: Vec<ActionSpec>,
    /// `TCA_FW_POLICE`.
    #[serde(default)]
    pub police: Option<PoliceSpec>,
}

/// An fw element as the kernel dumps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FwDump {
    /// `TCA_FW_CLASSID`, if set.
    pub classid: Option<Handle>,
    /// `TCA_FW_INDEV`.
    pub indev: Option<String>,
    /// `TCA_FW_MASK`, when not 0xffffffff.
    pub mask: Option<u32>,
    /// `TCA_FW_ACT`.
    pub actions: Vec<ActionDump>,
    /// `TCA_FW_POLICE`.
    pub police: Option<ActionDump>,
}

#[derive(Debug)]
struct FwFilter {
    id: u32,
    classid: Handle,
    indev: Option<String>,
    exts: Exts,
}

#[derive(Debug)]
struct FwHead {
    mask: u32,
    buckets: Vec<Vec<FwFilter>>,
}

/// An fw instance.
#[derive(Debug)]
pub struct Fw {
    head: Option<FwHead>,
    /// The owning qdisc, for the old method.
    qdisc: Handle,
}

fn fw_hash(mut h: u32) -> usize {
    h ^= h >> 16;
    h ^= h >> 8;
    (h % HTSIZE as u32) as usize
}

impl Fw {
    pub(crate) fn new(qdisc: Handle) -> Self {
        Fw { head: None, qdisc }
    }

    fn find(&self, id: u32) -> Option<(usize, usize)> {
        let h = self.head.as_ref()?;
        let b = fw_hash(id);
        h.buckets[b].iter().position(|f| f.id == id).map(|p| (b, p))
    }

    fn element(f: &FwFilter, mask: u32) -> FilterElement {
        let opts = (!f.classid.is_unspec() || !f.exts.is_empty()).then(|| {
            let old = f.exts.is_old_police();
            let acts = f.exts.dump();
            let (actions, police) = if old {
                (Vec::new(), acts.into_iter().next())
            } else {
                (acts, None)
            };
            FilterElemOpts::Fw(FwDump {
                classid: (!f.classid.is_unspec()).then_some(f.classid),
                indev: f.indev.clone(),
                mask: (mask != DEFAULT_MASK).then_some(mask),
                actions,
                police,
            })
        });
        FilterElement {
            handle: f.id,
            opts,
            stats: f.exts.compat_stats(),
        }
    }

    /// `fw_set_parms` validation against the instance's mask.
    fn prepare(
        &self,
        o: &FwOpts,
        req: &ChangeReq<'_>,
        env: &mut ClsEnv<'_>,
        head_mask: u32,
    ) -> TcResult<super::act::PreparedList> {
        let ctx = InitCtx {
            bind: true,
            replace: !req.create,
            estimator: req.estimator,
            offload: 0,
        };
        let acts = env
            .actions
            .prepare(&o.actions, o.police.as_ref(), ctx, true)?;
        if let Some(dev) = &o.indev {
            check_indev(dev, env)?;
        }
        match o.mask {
            Some(m) if m != head_mask => return Err(TcError::errno(Errno::EINVAL)),
            None if head_mask != DEFAULT_MASK => return Err(TcError::errno(Errno::EINVAL)),
            _ => {}
        }
        Ok(acts)
    }
}

impl Classifier for Fw {
    fn kind(&self) -> &'static str {
        "fw"
    }

    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Option<ClassifyResult> {
        let Some(h) = &self.head else {
            // Old method: the mark is a class id of this qdisc.
            let id = pkt.mark;
            let q = self.qdisc.0;
            if id != 0 && ((id & 0xFFFF_0000) == 0 || ((id ^ q) & 0xFFFF_0000) == 0) {
                return Some(ClassifyResult {
                    classid: Handle(id),
                    verdict: Verdict::Ok,
                });
            }
            return None;
        };
        let id = pkt.mark & h.mask;
        for f in h.buckets[fw_hash(id)].iter().filter(|f| f.id == id) {
            match f.exts.exec(pkt, now) {
                Verdict::Continue => continue,
                v => {
                    return Some(ClassifyResult {
                        classid: f.classid,
                        verdict: v,
                    })
                }
            }
        }
        None
    }

    fn get(&self, handle: u32) -> bool {
        self.find(handle).is_some()
    }

    fn change(&mut self, req: &ChangeReq<'_>, env: &mut ClsEnv<'_>) -> TcResult<()> {
        let o = match req.opts {
            None if req.handle != 0 => return Err(TcError::errno(Errno::EINVAL)),
            // Old method: nothing to configure.
            None => return Ok(()),
            Some(FilterOpts::Fw(o)) => o,
            Some(_) => return Err(TcError::errno(Errno::EINVAL)),
        };
        if req.exists {
            let (b, p) = self.find(req.handle).ok_or(TcError::errno(Errno::EINVAL))?;
            let mask = self.head.as_ref().map_or(DEFAULT_MASK, |h| h.mask);
            let acts = self.prepare(o, req, env, mask)?;
            let exts = env.actions.commit(acts, false, env.now)?;
            let Some(h) = self.head.as_mut() else {
                return Ok(());
            };
            let f = &mut h.buckets[b][p];
            f.exts = exts;
            f.classid = o.classid.unwrap_or(Handle::UNSPEC);
            if o.indev.is_some() {
                f.indev = o.indev.clone();
            }
            return Ok(());
        }
        if req.handle == 0 {
            return Err(TcError::errno(Errno::EINVAL));
        }
        // The instance's mask is fixed by its first element, even if that
        // element turns out invalid.
        let mask = match &self.head {
            Some(h) => h.mask,
            None => {
                let mask = o.mask.unwrap_or(DEFAULT_MASK);
                self.head = Some(FwHead {
                    mask,
                    buckets: (0..HTSIZE).map(|_| Vec::new()).collect(),
                });
                mask
            }
        };
        let acts = self.prepare(o, req, env, mask)?;
        let exts = env.actions.commit(acts, false, env.now)?;
        let f = FwFilter {
            id: req.handle,
            classid: o.classid.unwrap_or(Handle::UNSPEC),
            indev: o.indev.clone(),
            exts,
        };
        if let Some(h) = self.head.as_mut() {
            h.buckets[fw_hash(req.handle)].insert(0, f);
        }
        Ok(())
    }

    fn delete(&mut self, handle: u32) -> TcResult<bool> {
        let (b, p) = self.find(handle).ok_or(TcError::errno(Errno::EINVAL))?;
        let Some(h) = self.head.as_mut() else {
            return Err(TcError::errno(Errno::EINVAL));
        };
        h.buckets[b].remove(p);
        Ok(h.buckets.iter().all(Vec::is_empty))
    }

    fn walk(&self) -> Vec<FilterElement> {
        let Some(h) = &self.head else {
            return Vec::new();
        };
        h.buckets
            .iter()
            .flatten()
            .map(|f| Self::element(f, h.mask))
            .collect()
    }

    fn dump_one(&self, handle: u32) -> Option<FilterElement> {
        let (b, p) = self.find(handle)?;
        let h = self.head.as_ref()?;
        Some(Self::element(&h.buckets[b][p], h.mask))
    }

    fn goto_chains(&self) -> Vec<u32> {
        let Some(h) = &self.head else {
            return Vec::new();
        };
        h.buckets
            .iter()
            .flatten()
            .flat_map(|f| f.exts.goto_chains())
            .collect()
    }

    fn count_bound(&self, classid: Handle) -> usize {
        let Some(h) = &self.head else { return 0 };
        h.buckets
            .iter()
            .flatten()
            .filter(|f| f.classid == classid)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{Block, FilterCmd, FilterMsg};
    use super::*;
    use crate::act::gact::GactOpts;
    use crate::act::ActionOpts;
    use crate::packet::ETH_P_ALL;

    fn fw(prio: u16, handle: u32, o: Option<FwOpts>) -> FilterMsg {
        FilterMsg {
            prio,
            protocol: ETH_P_ALL,
            handle,
            kind: Some("fw".into()),
            opts: o.map(FilterOpts::Fw),
            ..Default::default()
        }
    }

    fn to(classid: Handle) -> Option<FwOpts> {
        Some(FwOpts {
            classid: Some(classid),
            ..Default::default()
        })
    }

    fn marked(mark: u32) -> Packet {
        let mut p = udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
        p.mark = mark;
        p
    }

    fn class_of(b: &mut Block, mark: u32) -> Option<Handle> {
        b.classify(&mut marked(mark), Time(0)).map(|r| r.classid)
    }

    #[test]
    fn marks_select_classes_through_the_mask() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        // handle 0x10/0xf0 fw classid 1:10
        let o = FwOpts {
            classid: Some(h(1, 0x10)),
            mask: Some(0xf0),
            ..Default::default()
        };
        b.change_filter(&fw(1, 0x10, Some(o)), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        assert_eq!(class_of(&mut b, 0x1f), Some(h(1, 0x10)));
        assert_eq!(class_of(&mut b, 0x110), Some(h(1, 0x10)));
        assert_eq!(class_of(&mut b, 0x20), None);
        // Every element of the instance must use the same mask.
        let e = b.change_filter(
            &fw(1, 0x20, to(h(1, 0x20))),
            FilterCmd::Add,
            &mut net.env(q),
        );
        assert_eq!(e, Err(TcError::errno(Errno::EINVAL)));
        let o = FwOpts {
            classid: Some(h(1, 0x20)),
            mask: Some(0xf0),
            ..Default::default()
        };
        b.change_filter(&fw(1, 0x20, Some(o)), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        assert_eq!(class_of(&mut b, 0x2a), Some(h(1, 0x20)));
        let d = b.dump(None, 0, 0);
        let Some(FilterElemOpts::Fw(f)) = &d[1].opts else {
            panic!("{d:?}")
        };
        assert_eq!(f.mask, Some(0xf0));
        // Needs a handle, and options when there is one.
        assert_eq!(
            b.change_filter(&fw(1, 0, to(h(1, 1))), FilterCmd::Add, &mut net.env(q)),
            Err(TcError::errno(Errno::EINVAL))
        );
        assert_eq!(
            b.change_filter(&fw(2, 5, None), FilterCmd::Add, &mut net.env(q)),
            Err(TcError::errno(Errno::EINVAL))
        );
    }

    #[test]
    fn walk_order_follows_the_kernel_hash() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        // fw_hash(2) = 2, fw_hash(1) = 1, fw_hash(0x100) = 1, fw_hash(0x101) = 0;
        // a bucket lists its newest element first.
        for m in [2, 1, 0x100, 0x101] {
            b.change_filter(
                &fw(1, m, to(h(1, m as u16))),
                FilterCmd::Add,
                &mut net.env(q),
            )
            .unwrap();
        }
        let hs: Vec<u32> = b.dump(None, 0, 0).iter().map(|d| d.handle).collect();
        assert_eq!(hs, vec![0, 0x101, 0x100, 1, 2]);
        // Deleting the last element deletes the instance.
        for m in [1, 2, 0x100] {
            b.delete_filter(&FilterMsg {
                prio: 1,
                handle: m,
                ..Default::default()
            })
            .unwrap();
            assert!(!b.is_empty());
        }
        b.delete_filter(&FilterMsg {
            prio: 1,
            handle: 0x101,
            ..Default::default()
        })
        .unwrap();
        assert!(b.is_empty());
    }

    #[test]
    fn old_method_uses_the_mark_as_class_id() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        b.change_filter(&fw(3, 0, None), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        assert_eq!(class_of(&mut b, 0x0001_0020), Some(h(1, 0x20)));
        assert_eq!(class_of(&mut b, 0x20), Some(h(0, 0x20)));
        assert_eq!(class_of(&mut b, 0x0002_0020), None);
        assert_eq!(class_of(&mut b, 0), None);
        // Nothing to list but the instance.
        assert_eq!(b.dump(None, 0, 0).len(), 1);
    }

    #[test]
    fn actions_replace_and_bare_elements() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(0xffff, 0);
        let drop_it = ActionSpec {
            index: 0,
            opts: ActionOpts::Gact(GactOpts {
                action: Verdict::Shot,
                random: None,
            }),
            cookie: None,
            no_percpu: false,
            offload: 0,
        };
        let o = FwOpts {
            actions: vec![drop_it],
            ..Default::default()
        };
        b.change_filter(&fw(1, 1, Some(o)), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        let r = b.classify(&mut marked(1), Time(0)).unwrap();
        assert_eq!((r.classid, r.verdict), (Handle::UNSPEC, Verdict::Shot));
        assert_eq!(net.actions.get("gact", 1).unwrap().bindcnt, 1);
        // Replace with a class and no actions: the action goes, the class is set.
        b.change_filter(&fw(1, 1, to(h(1, 3))), FilterCmd::Replace, &mut net.env(q))
            .unwrap();
        assert!(net.actions.list("gact").is_empty());
        assert_eq!(class_of(&mut b, 1), Some(h(1, 3)));
        // An element with neither class nor actions has no options in the dump.
        b.change_filter(
            &fw(1, 7, Some(FwOpts::default())),
            FilterCmd::Add,
            &mut net.env(q),
        )
        .unwrap();
        let d = b.dump(None, 0, 0);
        assert_eq!((d[2].handle, d[2].opts.is_none()), (7, true));
        let e = b.change_filter(&fw(1, 7, to(h(1, 3))), FilterCmd::Add, &mut net.env(q));
        assert_eq!(e, Err(TcError::msg(Errno::EEXIST, "Filter already exists")));
        let bad = FwOpts {
            indev: Some("nosuchdev".into()),
            ..Default::default()
        };
        let e = b.change_filter(&fw(1, 8, Some(bad)), FilterCmd::Add, &mut net.env(q));
        assert_eq!(
            e,
            Err(TcError::msg(Errno::ENODEV, "Network device not found"))
        );
    }
}
