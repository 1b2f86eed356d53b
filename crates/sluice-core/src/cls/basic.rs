//! basic: classify by an ematch expression.
//!
//! Modelled on net/sched/cls_basic.c. An instance holds a list of filters,
//! newest first; each has a handle (given, or the lowest free one from 1),
//! an ematch tree (empty: matches every packet), an optional class id and
//! actions. A packet goes through the filters in list order: the first whose
//! tree matches counts a hit, gives its class id and runs its actions; an
//! answer of `continue` passes the packet on to the next filter.
//!
//! A change replaces a filter's options as a whole: what the new options do
//! not name (the class id, the ematches, the actions) is gone, as the kernel
//! builds a fresh filter for every change.
//!
//! Counters: `rcnt`/`rhit` (`TCA_BASIC_PCNT`) are kept — packets that reached
//! the filter and packets whose tree matched — though iproute2 prints neither.

use super::act::police::PoliceSpec;
use super::act::{ActionDump, ActionSpec, Exts, InitCtx};
use super::ematch::EmatchTree;
use super::{
    ChangeReq, Classifier, ClassifyResult, ClsEnv, FilterElemOpts, FilterElement, FilterOpts,
    Verdict,
};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::time::Time;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// The basic options tc sends (`TCA_BASIC_*`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BasicOpts {
    /// `TCA_BASIC_CLASSID`.
    #[serde(default)]
    pub classid: Option<Handle>,
    /// `TCA_BASIC_EMATCHES`.
    #[serde(default)]
    pub ematches: Option<EmatchTree>,
    /// `TCA_BASIC_ACT`.
    #[serde(default)]
    pub actions: Vec<ActionSpec>,
    /// `TCA_BASIC_POLICE`.
    #[serde(default)]
    pub police: Option<PoliceSpec>,
}

/// A basic filter as the kernel dumps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BasicDump {
    /// `TCA_BASIC_CLASSID`, when set.
    pub classid: Option<Handle>,
    /// `TCA_BASIC_EMATCHES` (sent even when empty).
    pub ematches: EmatchTree,
    /// `TCA_BASIC_PCNT`: packets that reached the filter.
    pub rcnt: u64,
    /// `TCA_BASIC_PCNT`: packets whose ematches matched.
    pub rhit: u64,
    /// `TCA_BASIC_ACT`.
    pub actions: Vec<ActionDump>,
    /// `TCA_BASIC_POLICE`.
    pub police: Option<ActionDump>,
}

#[derive(Debug)]
struct BasicFilter {
    handle: u32,
    classid: Handle,
    ematches: EmatchTree,
    exts: Exts,
    rcnt: u64,
    rhit: u64,
}

/// A basic instance: filters, newest first.
#[derive(Debug)]
pub struct Basic {
    filters: Vec<BasicFilter>,
    /// For `meta(random ...)`.
    rng: Xoshiro256PlusPlus,
}

impl Default for Basic {
    fn default() -> Self {
        Basic {
            filters: Vec::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(0xba51c),
        }
    }
}

/// The largest automatically allocated handle (`INT_MAX`).
const MAX_AUTO_HANDLE: u32 = i32::MAX as u32;

impl BasicFilter {
    fn element(&self) -> FilterElement {
        let old = self.exts.is_old_police();
        let acts = self.exts.dump();
        let (actions, police) = if old {
            (Vec::new(), acts.into_iter().next())
        } else {
            (acts, None)
        };
        FilterElement {
            handle: self.handle,
            opts: Some(FilterElemOpts::Basic(BasicDump {
                classid: (!self.classid.is_unspec()).then_some(self.classid),
                ematches: self.ematches.clone(),
                rcnt: self.rcnt,
                rhit: self.rhit,
                actions,
                police,
            })),
            stats: self.exts.compat_stats(),
        }
    }
}

impl Classifier for Basic {
    fn kind(&self) -> &'static str {
        "basic"
    }

    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Option<ClassifyResult> {
        let rng = &mut self.rng;
        for f in &mut self.filters {
            f.rcnt += 1;
            if !f.ematches.matches(pkt, &mut || rng.next_u32()) {
                continue;
            }
            f.rhit += 1;
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
        self.filters.iter().any(|f| f.handle == handle)
    }

    fn change(&mut self, req: &ChangeReq<'_>, env: &mut ClsEnv<'_>) -> TcResult<()> {
        let o = match req.opts {
            Some(FilterOpts::Basic(o)) => o,
            _ => return Err(TcError::errno(Errno::EINVAL)),
        };
        let pos = self.filters.iter().position(|f| f.handle == req.handle);
        let handle = match (pos, req.handle) {
            (Some(_), h) => h,
            (None, 0) => (1..=MAX_AUTO_HANDLE)
                .find(|h| !self.get(*h))
                .ok_or(TcError::errno(Errno::ENOSPC))?,
            (None, h) => h,
        };
        let ctx = InitCtx {
            bind: true,
            replace: !req.create,
            estimator: req.estimator,
            offload: 0,
        };
        let acts = env
            .actions
            .prepare(&o.actions, o.police.as_ref(), ctx, true)?;
        let mut ematches = o.ematches.clone().unwrap_or_default();
        ematches.validate()?;
        ematches.kernel_order();
        let exts = env.actions.commit(acts, false, env.now)?;
        let f = BasicFilter {
            handle,
            classid: o.classid.unwrap_or(Handle::UNSPEC),
            ematches,
            exts,
            rcnt: 0,
            rhit: 0,
        };
        match pos {
            Some(i) => self.filters[i] = f,
            None => self.filters.insert(0, f),
        }
        Ok(())
    }

    fn delete(&mut self, handle: u32) -> TcResult<bool> {
        let i = self
            .filters
            .iter()
            .position(|f| f.handle == handle)
            .ok_or(TcError::errno(Errno::EINVAL))?;
        self.filters.remove(i);
        Ok(self.filters.is_empty())
    }

    fn walk(&self) -> Vec<FilterElement> {
        self.filters.iter().map(BasicFilter::element).collect()
    }

    fn dump_one(&self, handle: u32) -> Option<FilterElement> {
        self.filters
            .iter()
            .find(|f| f.handle == handle)
            .map(BasicFilter::element)
    }

    fn goto_chains(&self) -> Vec<u32> {
        self.filters
            .iter()
            .flat_map(|f| f.exts.goto_chains())
            .collect()
    }

    fn count_bound(&self, classid: Handle) -> usize {
        self.filters.iter().filter(|f| f.classid == classid).count()
    }
}

#[cfg(test)]
mod tests {
    use super::super::ematch::*;
    use super::super::testutil::*;
    use super::super::{Block, FilterCmd, FilterMsg};
    use super::*;
    use crate::packet::ETH_P_IP;

    fn basic(handle: u32, o: BasicOpts) -> FilterMsg {
        FilterMsg {
            prio: 1,
            protocol: ETH_P_IP,
            handle,
            kind: Some("basic".into()),
            opts: Some(FilterOpts::Basic(o)),
            ..Default::default()
        }
    }

    /// `cmp(u8 at 9 layer network eq PROTO)`.
    fn proto_is(p: u8) -> EmatchTree {
        EmatchTree {
            matches: vec![Ematch {
                flags: 0,
                kind: EmatchKind::Cmp(EmCmp {
                    val: p as u32,
                    mask: 0,
                    off: 9,
                    align: TCF_EM_ALIGN_U8,
                    flags: 0,
                    layer: TCF_LAYER_NETWORK,
                    opnd: TCF_EM_OPND_EQ,
                }),
            }],
        }
    }

    #[test]
    fn first_matching_filter_gives_the_class_newest_first() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let udp_to_20 = BasicOpts {
            classid: Some(h(1, 0x20)),
            ematches: Some(proto_is(17)),
            ..Default::default()
        };
        let all_to_30 = BasicOpts {
            classid: Some(h(1, 0x30)),
            ..Default::default()
        };
        b.change_filter(&basic(0, all_to_30), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        b.change_filter(&basic(0, udp_to_20), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        // Automatic handles 1 and 2; the newest is listed and tried first.
        let hs: Vec<u32> = b.dump(None, 0, 0).iter().map(|d| d.handle).collect();
        assert_eq!(hs, vec![0, 2, 1]);
        let mut u = udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
        assert_eq!(b.classify(&mut u, Time(0)).unwrap().classid, h(1, 0x20));
        let mut i = icmp_echo([10, 0, 0, 1], [10, 0, 0, 2]);
        assert_eq!(b.classify(&mut i, Time(0)).unwrap().classid, h(1, 0x30));
        let d = b.dump(None, 0, 0);
        let Some(FilterElemOpts::Basic(f)) = &d[1].opts else {
            panic!()
        };
        assert_eq!((f.rcnt, f.rhit), (2, 1));
        // Adding an existing handle is refused; a change replaces the whole filter.
        let e = b.change_filter(
            &basic(2, BasicOpts::default()),
            FilterCmd::Add,
            &mut net.env(q),
        );
        assert_eq!(e, Err(TcError::msg(Errno::EEXIST, "Filter already exists")));
        b.change_filter(
            &basic(2, BasicOpts::default()),
            FilterCmd::Change,
            &mut net.env(q),
        )
        .unwrap();
        let mut u = udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
        // Handle 2 now matches everything with no class.
        assert_eq!(b.classify(&mut u, Time(0)).unwrap().classid, Handle::UNSPEC);
        assert_eq!(b.count_bound(h(1, 0x20)), 0);
        // Options are required.
        let e = b.change_filter(
            &FilterMsg {
                opts: None,
                ..basic(5, BasicOpts::default())
            },
            FilterCmd::Add,
            &mut net.env(q),
        );
        assert_eq!(e, Err(TcError::errno(Errno::EINVAL)));
    }
}
