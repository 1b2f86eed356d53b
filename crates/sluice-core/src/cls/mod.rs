//! Classifiers ("filters") and the blocks of filter chains qdiscs hold.
//!
//! Modelled on net/sched/cls_api.c. A classful qdisc (and each of its classes
//! that can hold filters, and the ingress/clsact qdiscs) owns a [`Block`]: chains
//! of filter instances ("tcf_proto"), each with a priority, a protocol and a
//! classifier kind. `tcf_classify` runs the instances of chain 0 in priority
//! order, skipping those whose protocol does not match; the first that matches
//! gives a result: a class id and an action verdict (`TC_ACT_*`). A verdict of
//! `reclassify` restarts classification (bounded, as in the kernel), and
//! `goto chain N` continues in chain N.

use crate::handle::Handle;
use crate::packet::{Packet, ETH_P_ALL};
use crate::time::Time;

/// An action's verdict: the kernel's `TC_ACT_*` control codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Verdict {
    /// `TC_ACT_UNSPEC` (-1), printed "continue": go on with the next filter/action.
    Continue,
    /// `TC_ACT_OK` (0), printed "pass": accept with the filter's class.
    Ok,
    /// `TC_ACT_RECLASSIFY` (1): classify again from the start.
    Reclassify,
    /// `TC_ACT_SHOT` (2), printed "drop".
    Shot,
    /// `TC_ACT_PIPE` (3): go on with the next action of the same filter.
    Pipe,
    /// `TC_ACT_STOLEN` (4): consumed, not counted as a drop.
    Stolen,
    /// `TC_ACT_QUEUED` (5).
    Queued,
    /// `TC_ACT_REPEAT` (6).
    Repeat,
    /// `TC_ACT_REDIRECT` (7).
    Redirect,
    /// `TC_ACT_TRAP` (8).
    Trap,
    /// `TC_ACT_GOTO_CHAIN | n`.
    GotoChain(u32),
    /// `TC_ACT_JUMP | n`: skip n actions.
    Jump(u32),
}

/// What a matching filter says (`struct tcf_result` plus the verdict).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassifyResult {
    /// The class the packet goes to (`res.classid`).
    pub classid: Handle,
    /// The action verdict (`Ok` when the filter has no actions).
    pub verdict: Verdict,
}

/// One classifier instance (a `tcf_proto`): a kind holding one or more filter
/// elements (u32 keeps many nodes; fw one per mark; matchall one).
pub trait Classifier: Send + std::fmt::Debug {
    /// The kind name (`u32`, `fw`, `matchall`).
    fn kind(&self) -> &'static str;
    /// Match `pkt`; `None` means no element matched (`TC_ACT_UNSPEC`).
    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Option<ClassifyResult>;
}

/// A filter instance in a chain.
#[derive(Debug)]
pub struct TcfProto {
    /// Chain index.
    pub chain: u32,
    /// Priority ("pref"): lower runs first.
    pub prio: u32,
    /// EtherType the instance applies to (`ETH_P_ALL` for all).
    pub protocol: u16,
    /// The classifier.
    pub cls: Box<dyn Classifier>,
}

/// The filters attached to one qdisc or class, ordered by (chain, prio).
#[derive(Debug, Default)]
pub struct Block {
    /// The instances, kept sorted by `(chain, prio)`.
    pub protos: Vec<TcfProto>,
}

/// How many times `reclassify` may restart classification (kernel `max_reclassify_loop`).
const MAX_RECLASSIFY_LOOP: u32 = 16;

impl Block {
    /// True when no filter is attached.
    pub fn is_empty(&self) -> bool {
        self.protos.is_empty()
    }

    /// `tcf_classify`: run chain 0, following `goto chain` and `reclassify`.
    pub fn classify(&mut self, pkt: &mut Packet, now: Time) -> Option<ClassifyResult> {
        let mut chain = 0u32;
        let mut loops = 0;
        'restart: loop {
            for tp in self.protos.iter_mut().filter(|tp| tp.chain == chain) {
                if tp.protocol != ETH_P_ALL && tp.protocol != pkt.protocol {
                    continue;
                }
                let Some(res) = tp.cls.classify(pkt, now) else {
                    continue;
                };
                match res.verdict {
                    Verdict::Reclassify => {
                        loops += 1;
                        if loops >= MAX_RECLASSIFY_LOOP {
                            return Some(ClassifyResult {
                                verdict: Verdict::Shot,
                                ..res
                            });
                        }
                        chain = 0;
                        continue 'restart;
                    }
                    Verdict::GotoChain(n) => {
                        chain = n;
                        continue 'restart;
                    }
                    _ => return Some(res),
                }
            }
            return None;
        }
    }
}
