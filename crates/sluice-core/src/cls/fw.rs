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
use super::{check_indev, ChangeReq, Classifier, ClassifyResult, ClsEnv, FilterElemOpts, FilterElement, FilterOpts, Verdict};
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
            let (actions, police) = if old { (Vec::new(), acts.into_iter().next()) } else { (acts, None) };
            FilterElemOpts::Fw(FwDump {
                classid: (!f.classid.is_unspec()).then_some(f.classid),
                indev: f.indev.clone(),
                mask: (mask != DEFAULT_MASK).then_some(mask),
                actions,
                police,
            })
        });
        FilterElement { handle: f.id, opts, stats: f.exts.compat_stats() }
    }

    /// `fw_set_parms` validation against the instance's mask.
    fn prepare(
        &self,
        o: &FwOpts,
        req: &ChangeReq<'_>,
        env: &mut ClsEnv<'_>,
        head_mask: u32,
    ) -> TcResult<super::act::PreparedList> {
        let ctx = InitCtx { bind: true, replace: !req.create, estimator: req.estimator };
        let acts = env.actions.prepare(&o.actions, o.police.as_ref(), ctx, true)?;
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
                return Some(ClassifyResult { classid: Handle(id), verdict: Verdict::Ok });
            }
            return None;
        };
        let id = pkt.mark & h.mask;
        for f in h.buckets[fw_hash(id)].iter().filter(|f| f.id == id) {
            match f.exts.exec(pkt, now) {
                Verdict::Continue => continue,
                v => return Some(ClassifyResult { classid: f.classid, verdict: v }),
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
            let Some(h) = self.head.as_mut() else { return Ok(()) };
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
                self.head = Some(FwHead { mask, buckets: (0..HTSIZE).map(|_| Vec::new()).collect() });
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
        let Some(h) = self.head.as_mut() else { return Err(TcError::errno(Errno::EINVAL)) };
        h.buckets[b].remove(p);
        Ok(h.buckets.iter().all(Vec::is_empty))
    }

    fn walk(&self) -> Vec<FilterElement> {
        let Some(h) = &self.head else { return Vec::new() };
        h.buckets.iter().flatten().map(|f| Self::element(f, h.mask)).collect()
    }

    fn dump_one(&self, handle: u32) -> Option<FilterElement> {
        let (b, p) = self.find(handle)?;
        let h = self.head.as_ref()?;
        Some(Self::element(&h.buckets[b][p], h.mask))
    }

    fn goto_chains(&self) -> Vec<u32> {
        let Some(h) = &self.head else { return Vec::new() };
        h.buckets.iter().flatten().flat_map(|f| f.exts.goto_chains()).collect()
    }

    fn count_bound(&self, classid: Handle) -> usize {
        let Some(h) = &self.head else { return 0 };
        h.buckets.iter().flatten().filter(|f| f.classid == classid).count()
    }
}
