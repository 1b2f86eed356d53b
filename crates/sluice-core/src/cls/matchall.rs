//! matchall: one element that matches every packet.
//!
//! Modelled on net/sched/cls_matchall.c. An instance holds at most one
//! element (handle 1 unless given): adding a second, or changing the first,
//! is refused with EEXIST — to change it, replace the instance. A packet gets
//! the element's class id and its actions' verdict; `continue` passes the
//! packet on to the next instance. The element counts the packets it
//! classified (`TCA_MATCHALL_PCNT`). Deleting the element deletes the
//! instance.
//!
//! `skip_sw` asks for a hardware-only filter. sluice's devices have no
//! offload, so the kernel's answer for such a device is given: EOPNOTSUPP
//! (`tc_setup_cb_add` with a block bound to a device that cannot offload).
//! The classify path still honours the flag, as the kernel does.

use super::act::{ActionDump, ActionSpec, Exts, InitCtx};
use super::{
    tc_flags_valid, ChangeReq, Classifier, ClassifyResult, ClsEnv, FilterElemOpts, FilterElement,
    FilterOpts, Verdict, TCA_CLS_FLAGS_NOT_IN_HW, TCA_CLS_FLAGS_SKIP_HW, TCA_CLS_FLAGS_SKIP_SW,
};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// The matchall options tc sends (`TCA_MATCHALL_*`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchallOpts {
    /// `TCA_MATCHALL_CLASSID`.
    #[serde(default)]
    pub classid: Option<Handle>,
    /// `TCA_MATCHALL_FLAGS` (`skip_hw`, `skip_sw`).
    #[serde(default)]
    pub flags: Option<u32>,
    /// `TCA_MATCHALL_ACT`.
    #[serde(default)]
    pub actions: Vec<ActionSpec>,
}

/// The element as the kernel dumps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchallDump {
    /// `TCA_MATCHALL_CLASSID`, if set.
    pub classid: Option<Handle>,
    /// `TCA_MATCHALL_FLAGS`: user flags plus `not_in_hw`.
    pub flags: u32,
    /// `TCA_MATCHALL_PCNT`: packets classified.
    pub rhit: u64,
    /// `TCA_MATCHALL_ACT`.
    pub actions: Vec<ActionDump>,
}

#[derive(Debug)]
struct Head {
    handle: u32,
    classid: Handle,
    flags: u32,
    exts: Exts,
    rhit: u64,
}

/// A matchall instance.
#[derive(Debug, Default)]
pub struct Matchall {
    head: Option<Head>,
}

impl Classifier for Matchall {
    fn kind(&self) -> &'static str {
        "matchall"
    }

    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Option<ClassifyResult> {
        let h = self.head.as_mut()?;
        if h.flags & TCA_CLS_FLAGS_SKIP_SW != 0 {
            return None;
        }
        h.rhit += 1;
        match h.exts.exec(pkt, now) {
            Verdict::Continue => None,
            v => Some(ClassifyResult {
                classid: h.classid,
                verdict: v,
            }),
        }
    }

    fn get(&self, handle: u32) -> bool {
        self.head.as_ref().is_some_and(|h| h.handle == handle)
    }

    fn change(&mut self, req: &ChangeReq<'_>, env: &mut ClsEnv<'_>) -> TcResult<()> {
        let o = match req.opts {
            Some(FilterOpts::Matchall(o)) => o,
            _ => return Err(TcError::errno(Errno::EINVAL)),
        };
        if self.head.is_some() {
            return Err(TcError::errno(Errno::EEXIST));
        }
        let flags = o.flags.unwrap_or(0);
        if !tc_flags_valid(flags) {
            return Err(TcError::errno(Errno::EINVAL));
        }
        let ctx = InitCtx {
            bind: true,
            replace: !req.create,
            estimator: req.estimator,
            offload: flags & (TCA_CLS_FLAGS_SKIP_HW | TCA_CLS_FLAGS_SKIP_SW),
        };
        let acts = env.actions.prepare(&o.actions, None, ctx, true)?;
        if flags & TCA_CLS_FLAGS_SKIP_HW == 0 && flags & TCA_CLS_FLAGS_SKIP_SW != 0 {
            return Err(TcError::errno(Errno::EOPNOTSUPP));
        }
        let exts = env.actions.commit(acts, false, env.now)?;
        self.head = Some(Head {
            handle: if req.handle == 0 { 1 } else { req.handle },
            classid: o.classid.unwrap_or(Handle::UNSPEC),
            flags: flags | TCA_CLS_FLAGS_NOT_IN_HW,
            exts,
            rhit: 0,
        });
        Ok(())
    }

    fn delete(&mut self, _handle: u32) -> TcResult<bool> {
        // The element stays until the instance goes (it is marked deleting).
        Ok(true)
    }

    fn walk(&self) -> Vec<FilterElement> {
        self.head
            .as_ref()
            .map(|h| self.element(h))
            .into_iter()
            .collect()
    }

    fn dump_one(&self, handle: u32) -> Option<FilterElement> {
        self.head
            .as_ref()
            .filter(|h| h.handle == handle)
            .map(|h| self.element(h))
    }

    fn goto_chains(&self) -> Vec<u32> {
        self.head
            .as_ref()
            .map(|h| h.exts.goto_chains())
            .unwrap_or_default()
    }

    fn count_bound(&self, classid: Handle) -> usize {
        self.head.as_ref().is_some_and(|h| h.classid == classid) as usize
    }
}

impl Matchall {
    fn element(&self, h: &Head) -> FilterElement {
        let d = MatchallDump {
            classid: (!h.classid.is_unspec()).then_some(h.classid),
            flags: h.flags,
            rhit: h.rhit,
            actions: h.exts.dump(),
        };
        FilterElement {
            handle: h.handle,
            opts: Some(FilterElemOpts::Matchall(d)),
            stats: None,
        }
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

    fn mall(prio: u16, handle: u32, o: MatchallOpts) -> FilterMsg {
        FilterMsg {
            prio,
            protocol: ETH_P_ALL,
            handle,
            kind: Some("matchall".into()),
            opts: Some(FilterOpts::Matchall(o)),
            ..Default::default()
        }
    }

    #[test]
    fn matches_everything_once_per_instance() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let o = MatchallOpts {
            classid: Some(h(1, 1)),
            ..Default::default()
        };
        b.change_filter(&mall(1, 0, o.clone()), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        for mut p in [
            udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2),
            icmp_echo([1, 1, 1, 1], [2, 2, 2, 2]),
        ] {
            let r = b.classify(&mut p, Time(0)).unwrap();
            assert_eq!((r.classid, r.verdict), (h(1, 1), Verdict::Ok));
        }
        let d = b.dump(None, 0, 0);
        assert_eq!(d[1].handle, 1);
        let Some(FilterElemOpts::Matchall(m)) = &d[1].opts else {
            panic!()
        };
        assert_eq!((m.rhit, m.flags), (2, TCA_CLS_FLAGS_NOT_IN_HW));
        // A second element is refused however it is asked for.
        let e = b.change_filter(&mall(1, 2, o.clone()), FilterCmd::Add, &mut net.env(q));
        assert_eq!(e, Err(TcError::errno(Errno::EEXIST)));
        let e = b.change_filter(&mall(1, 1, o.clone()), FilterCmd::Replace, &mut net.env(q));
        assert_eq!(e, Err(TcError::errno(Errno::EEXIST)));
        // Deleting the element deletes the instance.
        b.delete_filter(&FilterMsg {
            prio: 1,
            handle: 1,
            ..Default::default()
        })
        .unwrap();
        assert!(b.is_empty());
    }

    #[test]
    fn skip_sw_needs_hardware_and_actions_decide() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(0xffff, 0);
        let o = MatchallOpts {
            flags: Some(TCA_CLS_FLAGS_SKIP_SW),
            ..Default::default()
        };
        let e = b.change_filter(&mall(1, 0, o), FilterCmd::Add, &mut net.env(q));
        assert_eq!(e, Err(TcError::errno(Errno::EOPNOTSUPP)));
        assert!(b.dump(None, 0, 0).is_empty());
        let o = MatchallOpts {
            flags: Some(TCA_CLS_FLAGS_SKIP_SW | TCA_CLS_FLAGS_SKIP_HW),
            ..Default::default()
        };
        let e = b.change_filter(&mall(1, 0, o), FilterCmd::Add, &mut net.env(q));
        assert_eq!(e, Err(TcError::errno(Errno::EINVAL)));
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
        let o = MatchallOpts {
            flags: Some(TCA_CLS_FLAGS_SKIP_HW),
            actions: vec![drop_it],
            ..Default::default()
        };
        b.change_filter(&mall(1, 0xffff_ffff, o), FilterCmd::Add, &mut net.env(q))
            .unwrap();
        let r = b
            .classify(&mut udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2), Time(0))
            .unwrap();
        assert_eq!(r.verdict, Verdict::Shot);
        let d = b.dump(None, 0, 0);
        assert_eq!(d[1].handle, 0xffff_ffff);
        let Some(FilterElemOpts::Matchall(m)) = &d[1].opts else {
            panic!()
        };
        assert_eq!(
            (
                m.actions[0].stats.drops,
                m.actions[0].refcnt,
                m.actions[0].bindcnt
            ),
            (1, 1, 1)
        );
    }
}
