//! Classifiers ("filters") and the blocks of filter chains qdiscs hold.
//!
//! Modelled on net/sched/cls_api.c. A classful qdisc (and each of its classes
//! that can hold filters, and the ingress/clsact qdiscs) owns a [`Block`]:
//! numbered chains, each an ordered list of filter instances ("tcf_proto"),
//! one per priority, each with a protocol and a classifier kind that holds
//! the filter elements (u32 keeps hash tables of key nodes, fw one element per
//! mark, matchall one).
//!
//! # Classification (`tcf_classify`)
//!
//! Chain 0's instances run in priority order, skipping those whose protocol
//! is neither the packet's nor `all`. The first element that matches and
//! whose actions do not answer `continue` gives the result: a class id and
//! the verdict. `reclassify` restarts at chain 0 and `goto chain N` continues
//! in chain N; together they may restart at most 16 times, the 17th restart
//! drops the packet (`max_reclassify_loop`).
//!
//! # Management (`tc filter add/change/replace/del/get/show`, `tc chain`)
//!
//! [`Block::change_filter`], [`Block::delete_filter`], [`Block::get_filter`],
//! [`Block::dump`] and the chain functions follow `tc_new_tfilter`,
//! `tc_del_tfilter`, `tc_get_tfilter`, `tc_dump_tfilter` and `tc_ctl_chain`
//! step by step, with the same errnos and extended-ack messages:
//!
//! - a missing priority is allocated: 0xC000 for the first instance, then one
//!   below the lowest priority at or above 0x8000 (`tcf_auto_prio`);
//! - an instance with the same priority must have the same protocol
//!   ("Protocol mismatch for filter with specified priority") and kind;
//! - chains exist while they hold instances, were created with `tc chain add`,
//!   or are the target of a `goto chain` action (those are hidden from
//!   `tc chain show`); they are listed in creation order;
//! - deleting an instance's last element deletes the instance.
//!
//! Classifiers need things that live outside a block: the namespace's action
//! table, the per-device state u32 shares between all blocks of one qdisc,
//! the owning qdisc's handle and the device names (`indev`). A [`ClsEnv`]
//! carries them into the calls that change filters.
//!
//! The dump ([`FilterDump`]) carries everything the kernel puts in its netlink
//! answer, so a printer can reproduce iproute2's output.

/// The action layer, also reachable as `cls::act`.
pub use crate::act;
pub mod basic;
pub mod ematch;
pub mod flow;
pub mod flower;
pub mod fw;
pub mod matchall;
pub mod shared;
pub mod u32;

use self::act::{ActionStats, ActionTable, EstimatorSpec, TC_ACT_EXT_VAL_MASK};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::{Packet, ETH_P_ALL};
use crate::time::Time;
use serde::{Deserialize, Serialize};

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

const TC_ACT_JUMP: u32 = 1 << 28;
const TC_ACT_GOTO_CHAIN: u32 = 2 << 28;

impl Verdict {
    /// The kernel's integer encoding.
    pub fn to_raw(self) -> i32 {
        match self {
            Verdict::Continue => -1,
            Verdict::Ok => 0,
            Verdict::Reclassify => 1,
            Verdict::Shot => 2,
            Verdict::Pipe => 3,
            Verdict::Stolen => 4,
            Verdict::Queued => 5,
            Verdict::Repeat => 6,
            Verdict::Redirect => 7,
            Verdict::Trap => 8,
            Verdict::Jump(n) => (TC_ACT_JUMP | (n & TC_ACT_EXT_VAL_MASK)) as i32,
            Verdict::GotoChain(n) => (TC_ACT_GOTO_CHAIN | (n & TC_ACT_EXT_VAL_MASK)) as i32,
        }
    }

    /// Decode the kernel's integer (`tcf_action_check_ctrlact` accepts exactly these).
    pub fn from_raw(v: i32) -> Option<Verdict> {
        let u = v as u32;
        Some(match (u & !TC_ACT_EXT_VAL_MASK, v) {
            (_, -1) => Verdict::Continue,
            (0, 0) => Verdict::Ok,
            (0, 1) => Verdict::Reclassify,
            (0, 2) => Verdict::Shot,
            (0, 3) => Verdict::Pipe,
            (0, 4) => Verdict::Stolen,
            (0, 5) => Verdict::Queued,
            (0, 6) => Verdict::Repeat,
            (0, 7) => Verdict::Redirect,
            (0, 8) => Verdict::Trap,
            (TC_ACT_JUMP, _) => Verdict::Jump(u & TC_ACT_EXT_VAL_MASK),
            (TC_ACT_GOTO_CHAIN, _) => Verdict::GotoChain(u & TC_ACT_EXT_VAL_MASK),
            _ => return None,
        })
    }
}

/// What a matching filter says (`struct tcf_result` plus the verdict).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassifyResult {
    /// The class the packet goes to (`res.classid`).
    pub classid: Handle,
    /// The action verdict (`Ok` when the filter has no actions).
    pub verdict: Verdict,
}

/// `TCA_CLS_FLAGS_SKIP_HW`.
pub const TCA_CLS_FLAGS_SKIP_HW: u32 = 1;
/// `TCA_CLS_FLAGS_SKIP_SW`: the filter is for hardware only and never matches in software.
pub const TCA_CLS_FLAGS_SKIP_SW: u32 = 2;
/// `TCA_CLS_FLAGS_IN_HW`.
pub const TCA_CLS_FLAGS_IN_HW: u32 = 4;
/// `TCA_CLS_FLAGS_NOT_IN_HW`: set on every filter here (printed `not_in_hw`).
pub const TCA_CLS_FLAGS_NOT_IN_HW: u32 = 8;
/// `TCA_CLS_FLAGS_VERBOSE`.
pub const TCA_CLS_FLAGS_VERBOSE: u32 = 16;

/// `tc_flags_valid`: known bits only, and not both skip flags.
pub(crate) fn tc_flags_valid(flags: u32) -> bool {
    if flags & !(TCA_CLS_FLAGS_SKIP_HW | TCA_CLS_FLAGS_SKIP_SW | TCA_CLS_FLAGS_VERBOSE) != 0 {
        return false;
    }
    flags & (TCA_CLS_FLAGS_SKIP_HW | TCA_CLS_FLAGS_SKIP_SW)
        != (TCA_CLS_FLAGS_SKIP_HW | TCA_CLS_FLAGS_SKIP_SW)
}

/// Options of every kind of classifier (`TCA_OPTIONS`), as tc sends them.
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FilterOpts {
    U32(u32::U32Opts),
    Fw(fw::FwOpts),
    Matchall(matchall::MatchallOpts),
    Flower(flower::FlowerOpts),
    Flow(flow::FlowOpts),
    Basic(basic::BasicOpts),
}

impl FilterOpts {
    /// The kind name.
    pub fn kind(&self) -> &'static str {
        match self {
            FilterOpts::U32(_) => "u32",
            FilterOpts::Fw(_) => "fw",
            FilterOpts::Matchall(_) => "matchall",
            FilterOpts::Flower(_) => "flower",
            FilterOpts::Flow(_) => "flow",
            FilterOpts::Basic(_) => "basic",
        }
    }
}

/// A `tc filter` request as the kernel receives it (`struct tcmsg` and attributes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilterMsg {
    /// `TCA_CHAIN` (0 when absent).
    pub chain: u32,
    /// `pref`/`prio` (the major half of `tcm_info`); 0 = not given.
    pub prio: u16,
    /// EtherType (the minor half of `tcm_info`), host order; 0 = not given.
    pub protocol: u16,
    /// `tcm_handle`: the element's handle; 0 = not given.
    pub handle: u32,
    /// `TCA_KIND`.
    pub kind: Option<String>,
    /// `TCA_OPTIONS` (must be of `kind`).
    pub opts: Option<FilterOpts>,
    /// `TCA_RATE`: an estimator for the filter's actions.
    pub estimator: Option<EstimatorSpec>,
}

/// Which command: the netlink flags of `RTM_NEWTFILTER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterCmd {
    /// `tc filter add`: `NLM_F_CREATE | NLM_F_EXCL`.
    Add,
    /// `tc filter change`: no flags; the filter must exist.
    Change,
    /// `tc filter replace`: `NLM_F_CREATE`.
    Replace,
}

impl FilterCmd {
    fn create(self) -> bool {
        self != FilterCmd::Change
    }
    fn excl(self) -> bool {
        self == FilterCmd::Add
    }
}

/// State shared by the blocks of one device (the kernel keeps it per qdisc
/// in a global hash): u32's `tc_u_common`.
#[derive(Debug, Default)]
pub struct ClsShared {
    pub(crate) u32: u32::U32Registry,
    /// The device's seed: classifiers that draw random numbers (flow's
    /// hash key) seed their generators from it.
    pub seed: u64,
    /// Flow filters created so far (each seeds its generator differently).
    pub(crate) flow_filters_created: u64,
}

/// What changing filters needs from outside the block.
pub struct ClsEnv<'a> {
    /// The network namespace's actions.
    pub actions: &'a mut ActionTable,
    /// The device's shared classifier state.
    pub shared: &'a mut ClsShared,
    /// Handle of the qdisc owning the block (`block->q->handle`).
    pub qdisc: Handle,
    /// Does a network device of this name exist (`indev`)?
    pub dev_exists: &'a dyn Fn(&str) -> bool,
    /// The current time (actions record when they were installed).
    pub now: Time,
}

/// A change request as a classifier sees it (`tp->ops->change`).
pub struct ChangeReq<'a> {
    /// `tcm_handle`.
    pub handle: u32,
    /// Did `get(handle)` find an element?
    pub exists: bool,
    /// `TCA_OPTIONS`.
    pub opts: Option<&'a FilterOpts>,
    /// `NLM_F_CREATE` was given.
    pub create: bool,
    /// `TCA_RATE`.
    pub estimator: Option<EstimatorSpec>,
}

/// One filter element's options as the kernel dumps them.
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FilterElemOpts {
    /// A u32 hash table: `TCA_U32_DIVISOR` (the number of buckets).
    U32Table {
        divisor: u32,
    },
    U32(u32::U32KnodeDump),
    Fw(fw::FwDump),
    Matchall(matchall::MatchallDump),
    Flower(flower::FlowerDump),
    Flow(flow::FlowDump),
    Basic(basic::BasicDump),
}

/// One element of a walk: its handle, options and filter-level statistics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterElement {
    /// `tcm_handle`.
    pub handle: u32,
    /// `TCA_OPTIONS`; `None` when the kernel sends none.
    pub opts: Option<FilterElemOpts>,
    /// `TCA_STATS`/`TCA_STATS2` of an old-style policer.
    pub stats: Option<ActionStats>,
}

/// One netlink message of `tc filter show`: an instance header (`handle` 0,
/// no options) or an element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterDump {
    /// Chain index (`TCA_CHAIN`).
    pub chain: u32,
    /// Priority.
    pub prio: u16,
    /// EtherType, host order.
    pub protocol: u16,
    /// Kind name.
    pub kind: &'static str,
    /// `tcm_handle` (0 in the instance header).
    pub handle: u32,
    /// Element options.
    pub opts: Option<FilterElemOpts>,
    /// Filter-level statistics (old-style police).
    pub stats: Option<ActionStats>,
}

/// One classifier instance (a `tcf_proto`): a kind holding filter elements.
pub trait Classifier: Send + std::fmt::Debug {
    /// The kind name (`u32`, `fw`, `matchall`).
    fn kind(&self) -> &'static str;
    /// Match `pkt`; `None` means no element matched (`TC_ACT_UNSPEC`).
    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Option<ClassifyResult>;
    /// `tp->ops->get`: is there an element with this handle?
    fn get(&self, _handle: u32) -> bool {
        false
    }
    /// `tp->ops->change`: create or change an element. Validates completely
    /// before changing anything.
    fn change(&mut self, _req: &ChangeReq<'_>, _env: &mut ClsEnv<'_>) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }
    /// `tp->ops->delete` of an existing element; answers whether the instance
    /// is now empty and should go.
    fn delete(&mut self, _handle: u32) -> TcResult<bool> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }
    /// `tp->ops->walk` with `dump`: every element in the kernel's order.
    fn walk(&self) -> Vec<FilterElement> {
        Vec::new()
    }
    /// `tp->ops->dump` of the element `get(handle)` finds.
    fn dump_one(&self, _handle: u32) -> Option<FilterElement> {
        None
    }
    /// Chains the elements' actions may `goto`.
    fn goto_chains(&self) -> Vec<u32> {
        Vec::new()
    }
    /// Elements whose class id is `classid` (the kernel's class bindings).
    fn count_bound(&self, _classid: Handle) -> usize {
        0
    }
}

/// Create a classifier instance of `kind` (`tcf_proto_create` + `init`).
fn create_classifier(kind: &str, prio: u16, env: &mut ClsEnv<'_>) -> TcResult<Box<dyn Classifier>> {
    Ok(match kind {
        "u32" => Box::new(u32::U32::new(prio, env)?),
        "fw" => Box::new(fw::Fw::new(env.qdisc)),
        "matchall" => Box::new(matchall::Matchall::default()),
        "flower" => Box::new(flower::Flower::default()),
        "flow" => Box::new(flow::Flow::default()),
        "basic" => Box::new(basic::Basic::default()),
        _ => return Err(TcError::msg(Errno::ENOENT, "TC classifier not found")),
    })
}

/// A filter instance in a chain (`struct tcf_proto`).
#[derive(Debug)]
pub struct TcfProto {
    /// Chain index.
    pub chain: u32,
    /// Priority ("pref"), 1..=65535: lower runs first.
    pub prio: u32,
    /// EtherType the instance applies to (`ETH_P_ALL` for all), host order.
    pub protocol: u16,
    /// The classifier.
    pub cls: Box<dyn Classifier>,
}

#[derive(Debug)]
struct ChainInfo {
    index: u32,
    /// Created with `tc chain add`.
    explicit: bool,
}

/// The filters attached to one qdisc or class: chains of instances.
///
/// `protos` holds the instances of every chain, sorted by chain and priority
/// (the management functions keep that order; tests may push instances
/// directly). Chains are listed in creation order, as the kernel does.
#[derive(Debug, Default)]
pub struct Block {
    /// The instances, sorted by `(chain, prio)`.
    pub protos: Vec<TcfProto>,
    /// Chains in creation order.
    chains: Vec<ChainInfo>,
    /// Handle of the owning qdisc (fw's "old method" compares marks with it).
    qdisc: Handle,
    /// `block->classid`: the parent the last successful `tc filter
    /// add|change|replace` named (the root qdisc's handle for none), which
    /// a dump reports as every filter's parent however the block is asked
    /// for. (The kernel sets it before the request can still fail; sluice
    /// changes nothing on a failed command.)
    pub classid: Handle,
}

/// How many times `reclassify`/`goto chain` may restart classification.
const MAX_RECLASSIFY_LOOP: u32 = 16;
/// The largest chain index (`TC_ACT_EXT_VAL_MASK`).
const MAX_CHAIN: u32 = TC_ACT_EXT_VAL_MASK;
/// Kind names are at most 15 bytes (`IFNAMSIZ` with the terminator).
const MAX_KIND_LEN: usize = 15;
/// First automatically allocated priority, and the bottom of the range.
const AUTO_PRIO_FIRST: u32 = 0xC000;
const AUTO_PRIO_FLOOR: u32 = 0x8000;

/// Where an instance is, or would go, in `protos`.
enum Slot {
    Found(usize),
    InsertAt(usize),
}

impl Block {
    /// True when no filter can classify (chain 0 holds no instance).
    pub fn is_empty(&self) -> bool {
        !self.protos.iter().any(|tp| tp.chain == 0)
    }

    /// Record the owning qdisc's handle (done by every filter change too).
    pub fn set_qdisc(&mut self, qdisc: Handle) {
        self.qdisc = qdisc;
    }

    /// `tcf_classify`: run chain 0, following `goto chain` and `reclassify`.
    pub fn classify(&mut self, pkt: &mut Packet, now: Time) -> Option<ClassifyResult> {
        let mut chain = 0u32;
        let mut restarts = 0u32;
        'restart: loop {
            // Read again after a restart: an action may have pushed or
            // popped a VLAN tag.
            let protocol = pkt.tc_protocol();
            for tp in self.protos.iter_mut().filter(|tp| tp.chain == chain) {
                if tp.protocol != ETH_P_ALL && tp.protocol != protocol {
                    continue;
                }
                let Some(res) = tp.cls.classify(pkt, now) else {
                    continue;
                };
                let next = match res.verdict {
                    Verdict::Reclassify => 0,
                    Verdict::GotoChain(n) => n,
                    _ => return Some(res),
                };
                if restarts >= MAX_RECLASSIFY_LOOP {
                    return Some(ClassifyResult {
                        verdict: Verdict::Shot,
                        ..res
                    });
                }
                restarts += 1;
                chain = next;
                continue 'restart;
            }
            return None;
        }
    }

    fn has_protos(&self, chain: u32) -> bool {
        self.protos.iter().any(|tp| tp.chain == chain)
    }

    /// Does the chain exist at all (possibly held only by actions)?
    fn chain_exists(&self, chain: u32) -> bool {
        self.chains.iter().any(|c| c.index == chain) || self.has_protos(chain)
    }

    /// Is the chain visible to the user (not held only by `goto chain` actions)?
    fn chain_visible(&self, chain: u32) -> bool {
        self.chains.iter().any(|c| c.index == chain && c.explicit) || self.has_protos(chain)
    }

    fn ensure_chain(&mut self, chain: u32) {
        if !self.chains.iter().any(|c| c.index == chain) {
            self.chains.push(ChainInfo {
                index: chain,
                explicit: false,
            });
        }
    }

    /// Chain indices in the kernel's list order.
    fn chain_order(&self) -> Vec<u32> {
        let mut order: Vec<u32> = self.chains.iter().map(|c| c.index).collect();
        for tp in &self.protos {
            if !order.contains(&tp.chain) {
                order.push(tp.chain);
            }
        }
        order
    }

    /// Drop chains nothing holds any more; create those `goto chain` actions need.
    fn settle_chains(&mut self) {
        let refs: Vec<u32> = self
            .protos
            .iter()
            .flat_map(|tp| tp.cls.goto_chains())
            .collect();
        let protos = &self.protos;
        self.chains.retain(|c| {
            c.explicit || refs.contains(&c.index) || protos.iter().any(|tp| tp.chain == c.index)
        });
        for r in refs {
            if r <= MAX_CHAIN {
                self.ensure_chain(r);
            }
        }
    }

    /// `tcf_chain_tp_find`: the instance of `chain` with `prio`, or where one would go.
    fn tp_find(&self, chain: u32, prio: u32, protocol: u16, allocate: bool) -> TcResult<Slot> {
        let i = self
            .protos
            .iter()
            .position(|tp| (tp.chain, tp.prio) >= (chain, prio))
            .unwrap_or(self.protos.len());
        match self.protos.get(i) {
            Some(tp) if tp.chain == chain && tp.prio == prio => {
                if allocate {
                    return Err(TcError::msg(
                        Errno::ENOSPC,
                        "Lowest ID from auto-alloc range already in use",
                    ));
                }
                if protocol != 0 && tp.protocol != protocol {
                    return Err(TcError::inval(
                        "Protocol mismatch for filter with specified priority",
                    ));
                }
                Ok(Slot::Found(i))
            }
            _ => Ok(Slot::InsertAt(i)),
        }
    }

    fn check_kind_len(kind: Option<&str>) -> TcResult<()> {
        if kind.is_some_and(|k| k.len() > MAX_KIND_LEN) {
            return Err(TcError::inval("Specified TC filter name too long"));
        }
        Ok(())
    }

    fn check_chain_index(index: u32) -> TcResult<()> {
        if index > MAX_CHAIN {
            return Err(TcError::inval("Specified chain index exceeds upper limit"));
        }
        Ok(())
    }

    fn kind_mismatch(msg_kind: Option<&str>, tp: &TcfProto) -> TcResult<()> {
        match msg_kind {
            Some(k) if k != tp.cls.kind() => Err(TcError::inval(
                "Specified filter kind does not match existing one",
            )),
            _ => Ok(()),
        }
    }

    fn msg_kind(msg: &FilterMsg) -> TcResult<Option<&str>> {
        let kind = msg.kind.as_deref().or(msg.opts.as_ref().map(|o| o.kind()));
        if let (Some(k), Some(o)) = (kind, &msg.opts) {
            if k != o.kind() {
                return Err(TcError::inval(
                    "Filter options do not match the filter kind",
                ));
            }
        }
        Ok(kind)
    }

    /// `tc filter add/change/replace` (`tc_new_tfilter`).
    pub fn change_filter(
        &mut self,
        msg: &FilterMsg,
        cmd: FilterCmd,
        env: &mut ClsEnv<'_>,
    ) -> TcResult<()> {
        self.qdisc = env.qdisc;
        let kind = Self::msg_kind(msg)?;
        let allocate = msg.prio == 0;
        if allocate && !cmd.create() {
            return Err(TcError::msg(
                Errno::ENOENT,
                "Invalid filter command with priority of zero",
            ));
        }
        let prio = if allocate {
            AUTO_PRIO_FLOOR
        } else {
            msg.prio as u32
        };
        Self::check_kind_len(kind)?;
        Self::check_chain_index(msg.chain)?;
        // tcf_chain_get(.., create): the chain exists from here on, and goes
        // again below if nothing ends up holding it.
        self.ensure_chain(msg.chain);
        let res = self.change_in_chain(msg, kind, prio, allocate, cmd, env);
        self.settle_chains();
        res
    }

    fn change_in_chain(
        &mut self,
        msg: &FilterMsg,
        kind: Option<&str>,
        prio: u32,
        allocate: bool,
        cmd: FilterCmd,
        env: &mut ClsEnv<'_>,
    ) -> TcResult<()> {
        let (ti, created) = match self.tp_find(msg.chain, prio, msg.protocol, allocate)? {
            Slot::Found(i) => (i, false),
            Slot::InsertAt(at) => {
                let Some(kind) = kind.filter(|_| msg.protocol != 0) else {
                    return Err(TcError::inval("Filter kind and protocol must be specified"));
                };
                if !cmd.create() {
                    return Err(TcError::msg(
                        Errno::ENOENT,
                        "Need both RTM_NEWTFILTER and NLM_F_CREATE to create a new filter",
                    ));
                }
                let prio = if allocate {
                    // One below the first instance at or above 0x8000, if any.
                    match self.protos.get(at) {
                        Some(tp) if tp.chain == msg.chain => tp.prio - 1,
                        _ => AUTO_PRIO_FIRST,
                    }
                } else {
                    prio
                };
                let cls = create_classifier(kind, prio as u16, env)?;
                self.protos.insert(
                    at,
                    TcfProto {
                        chain: msg.chain,
                        prio,
                        protocol: msg.protocol,
                        cls,
                    },
                );
                (at, true)
            }
        };
        let res = Self::change_in_tp(&mut self.protos[ti], msg, kind, cmd, env);
        if res.is_err() && created {
            self.protos.remove(ti);
        }
        res
    }

    fn change_in_tp(
        tp: &mut TcfProto,
        msg: &FilterMsg,
        kind: Option<&str>,
        cmd: FilterCmd,
        env: &mut ClsEnv<'_>,
    ) -> TcResult<()> {
        Self::kind_mismatch(kind, tp)?;
        let exists = tp.cls.get(msg.handle);
        if !exists && !cmd.create() {
            return Err(TcError::msg(
                Errno::ENOENT,
                "Need both RTM_NEWTFILTER and NLM_F_CREATE to create a new filter",
            ));
        }
        if exists && cmd.excl() {
            return Err(TcError::msg(Errno::EEXIST, "Filter already exists"));
        }
        let req = ChangeReq {
            handle: msg.handle,
            exists,
            opts: msg.opts.as_ref(),
            create: cmd.create(),
            estimator: msg.estimator,
        };
        tp.cls.change(&req, env)
    }

    /// `tc filter del` (`tc_del_tfilter`): a priority 0 flushes the chain, a
    /// handle 0 deletes the whole instance, otherwise one element.
    pub fn delete_filter(&mut self, msg: &FilterMsg) -> TcResult<()> {
        let kind = Self::msg_kind(msg)?;
        if msg.prio == 0 && (msg.protocol != 0 || msg.handle != 0 || kind.is_some()) {
            return Err(TcError::msg(
                Errno::ENOENT,
                "Cannot flush filters with protocol, handle or kind set",
            ));
        }
        Self::check_kind_len(kind)?;
        Self::check_chain_index(msg.chain)?;
        // Filter requests also find chains held only by actions (tcf_chain_get).
        if !self.chain_exists(msg.chain) {
            if msg.prio == 0 {
                return Ok(());
            }
            return Err(TcError::msg(
                Errno::ENOENT,
                "Cannot find specified filter chain",
            ));
        }
        let res = self.delete_in_chain(msg, kind);
        self.settle_chains();
        res
    }

    fn delete_in_chain(&mut self, msg: &FilterMsg, kind: Option<&str>) -> TcResult<()> {
        if msg.prio == 0 {
            self.protos.retain(|tp| tp.chain != msg.chain);
            return Ok(());
        }
        let ti = match self.tp_find(msg.chain, msg.prio as u32, msg.protocol, false)? {
            Slot::Found(i) => i,
            Slot::InsertAt(_) => {
                return Err(TcError::msg(
                    Errno::ENOENT,
                    "Filter with specified priority/protocol not found",
                ))
            }
        };
        Self::kind_mismatch(kind, &self.protos[ti])?;
        if msg.handle == 0 {
            self.protos.remove(ti);
            return Ok(());
        }
        if !self.protos[ti].cls.get(msg.handle) {
            return Err(TcError::msg(
                Errno::ENOENT,
                "Specified filter handle not found",
            ));
        }
        if self.protos[ti].cls.delete(msg.handle)? {
            self.protos.remove(ti);
        }
        Ok(())
    }

    /// `tc filter get` (`tc_get_tfilter`): one element's dump.
    pub fn get_filter(&self, msg: &FilterMsg) -> TcResult<FilterDump> {
        let kind = Self::msg_kind(msg)?;
        if msg.prio == 0 {
            return Err(TcError::msg(
                Errno::ENOENT,
                "Invalid filter command with priority of zero",
            ));
        }
        Self::check_kind_len(kind)?;
        Self::check_chain_index(msg.chain)?;
        if !self.chain_exists(msg.chain) {
            return Err(TcError::inval("Cannot find specified filter chain"));
        }
        let tp = match self.tp_find(msg.chain, msg.prio as u32, msg.protocol, false)? {
            Slot::Found(i) => &self.protos[i],
            Slot::InsertAt(_) => {
                return Err(TcError::msg(
                    Errno::ENOENT,
                    "Filter with specified priority/protocol not found",
                ))
            }
        };
        Self::kind_mismatch(kind, tp)?;
        let Some(el) = tp.cls.dump_one(msg.handle) else {
            return Err(TcError::msg(
                Errno::ENOENT,
                "Specified filter handle not found",
            ));
        };
        Ok(Self::element_dump(tp, el))
    }

    fn element_dump(tp: &TcfProto, el: FilterElement) -> FilterDump {
        FilterDump {
            chain: tp.chain,
            prio: tp.prio as u16,
            protocol: tp.protocol,
            kind: tp.cls.kind(),
            handle: el.handle,
            opts: el.opts,
            stats: el.stats,
        }
    }

    /// `tc filter show` (`tc_dump_tfilter`): chains in creation order (only
    /// `chain` if given), instances by priority (only those of `prio` and
    /// `protocol` when non-zero), each an instance header followed by its
    /// elements in the classifier's walk order.
    pub fn dump(&self, chain: Option<u32>, prio: u16, protocol: u16) -> Vec<FilterDump> {
        let mut out = Vec::new();
        for c in self.chain_order() {
            if chain.is_some_and(|i| i != c) {
                continue;
            }
            for tp in self.protos.iter().filter(|tp| tp.chain == c) {
                if (prio != 0 && prio as u32 != tp.prio)
                    || (protocol != 0 && protocol != tp.protocol)
                {
                    continue;
                }
                out.push(FilterDump {
                    chain: c,
                    prio: tp.prio as u16,
                    protocol: tp.protocol,
                    kind: tp.cls.kind(),
                    handle: 0,
                    opts: None,
                    stats: None,
                });
                out.extend(
                    tp.cls
                        .walk()
                        .into_iter()
                        .map(|el| Self::element_dump(tp, el)),
                );
            }
        }
        out
    }

    /// `tc chain add` (`tc_ctl_chain`, `RTM_NEWCHAIN`); `template` is a
    /// classifier kind for a chain template, which none of ours supports.
    pub fn add_chain(&mut self, index: u32, template: Option<&str>) -> TcResult<()> {
        Self::check_chain_index(index)?;
        if self.chain_visible(index) {
            return Err(TcError::msg(Errno::EEXIST, "Filter chain already exists"));
        }
        if let Some(k) = template {
            if k.len() > MAX_KIND_LEN {
                return Err(TcError::inval("Specified TC chain template name too long"));
            }
            return Err(match k {
                "u32" | "fw" | "matchall" => TcError::msg(
                    Errno::EOPNOTSUPP,
                    "Chain templates are not supported with specified classifier",
                ),
                // The kernel's flower has templates; sluice's has not yet.
                "flower" => TcError::msg(
                    Errno::EOPNOTSUPP,
                    "sluice: flower chain templates are not supported",
                ),
                _ => TcError::msg(Errno::ENOENT, "TC classifier not found"),
            });
        }
        self.ensure_chain(index);
        for c in self.chains.iter_mut().filter(|c| c.index == index) {
            c.explicit = true;
        }
        Ok(())
    }

    /// `tc chain del`: flush the chain's filters and forget it.
    pub fn delete_chain(&mut self, index: u32) -> TcResult<()> {
        self.get_chain(index)?;
        self.protos.retain(|tp| tp.chain != index);
        for c in self.chains.iter_mut().filter(|c| c.index == index) {
            c.explicit = false;
        }
        self.settle_chains();
        Ok(())
    }

    /// `tc chain get`.
    pub fn get_chain(&self, index: u32) -> TcResult<()> {
        Self::check_chain_index(index)?;
        if !self.chain_visible(index) {
            return Err(TcError::inval("Cannot find specified filter chain"));
        }
        Ok(())
    }

    /// `tc chain show`: the visible chains in creation order.
    pub fn chains(&self) -> Vec<u32> {
        self.chain_order()
            .into_iter()
            .filter(|&c| self.chain_visible(c))
            .collect()
    }

    /// Remove every filter (the qdisc is being destroyed or its block flushed).
    pub fn clear(&mut self) {
        self.protos.clear();
        self.chains.clear();
    }

    /// Filter elements in this block whose class id is `classid` (the
    /// kernel's count of filters bound to a class).
    pub fn count_bound(&self, classid: Handle) -> usize {
        self.protos
            .iter()
            .map(|tp| tp.cls.count_bound(classid))
            .sum()
    }
}

/// Check an `indev` name (`tcf_change_indev`).
pub(crate) fn check_indev(name: &str, env: &ClsEnv<'_>) -> TcResult<()> {
    if name.len() >= 16 {
        return Err(TcError::inval("Interface name too long"));
    }
    if !(env.dev_exists)(name) {
        return Err(TcError::msg(Errno::ENODEV, "Network device not found"));
    }
    Ok(())
}

/// Helpers for the classifier tests: a namespace, requests and packets.
#[cfg(test)]
pub(crate) mod testutil {
    use super::u32::{U32Key, U32Opts, U32Sel, TC_U32_TERMINAL};
    use super::*;
    use crate::packet::ETH_P_IP;
    use etherparse::PacketBuilder;

    fn devs(name: &str) -> bool {
        name == "eth0" || name == "lo"
    }

    /// A network namespace with one device's shared classifier state.
    #[derive(Default)]
    pub struct Net {
        pub actions: ActionTable,
        pub shared: ClsShared,
    }

    impl Net {
        pub fn env(&mut self, qdisc: Handle) -> ClsEnv<'_> {
            ClsEnv {
                actions: &mut self.actions,
                shared: &mut self.shared,
                qdisc,
                dev_exists: &devs,
                now: Time(0),
            }
        }
    }

    /// `major:minor`.
    pub fn h(major: u16, minor: u16) -> Handle {
        Handle::new(major, minor)
    }

    /// A key as iproute2 packs it: `match u32 VAL MASK at OFF`.
    pub fn key(val: u32, mask: u32, off: i32) -> U32Key {
        U32Key {
            val: val & mask,
            mask,
            off,
            offmask: 0,
        }
    }

    /// `u32 match ... flowid CLASSID` (terminal).
    pub fn u32_match(keys: Vec<U32Key>, classid: Option<Handle>) -> U32Opts {
        let flags = if classid.is_some() {
            TC_U32_TERMINAL
        } else {
            0
        };
        U32Opts {
            classid,
            sel: Some(U32Sel {
                flags,
                keys,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// A `tc filter` request for u32.
    pub fn u32_msg(prio: u16, protocol: u16, handle: u32, opts: Option<U32Opts>) -> FilterMsg {
        FilterMsg {
            prio,
            protocol,
            handle,
            kind: Some("u32".into()),
            opts: opts.map(FilterOpts::U32),
            ..Default::default()
        }
    }

    /// An IPv4 packet from etherparse's builder, with TOS set, accounted with
    /// a 14-byte Ethernet header.
    pub fn ipv4(tos: u8, build: impl FnOnce(&mut Vec<u8>)) -> Packet {
        let mut data = Vec::new();
        build(&mut data);
        data[1] = tos;
        let len = data.len() as u32 + 14;
        Packet::new(data, len, ETH_P_IP)
    }

    pub fn tcp(
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        tos: u8,
        psh: bool,
        payload: &[u8],
    ) -> Packet {
        ipv4(tos, |d| {
            let b = PacketBuilder::ipv4(src, dst, 64)
                .tcp(sport, dport, 1000, 64240)
                .ack(2000);
            let b = if psh { b.psh() } else { b };
            b.write(d, payload).unwrap();
        })
    }

    pub fn icmp_echo(src: [u8; 4], dst: [u8; 4]) -> Packet {
        ipv4(0, |d| {
            PacketBuilder::ipv4(src, dst, 64)
                .icmpv4_echo_request(1, 1)
                .write(d, &[0u8; 56])
                .unwrap()
        })
    }

    pub fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Packet {
        ipv4(0, |d| {
            PacketBuilder::ipv4(src, dst, 64)
                .udp(sport, dport)
                .write(d, &[0u8; 100])
                .unwrap()
        })
    }

    /// `fh` as iproute2 prints a u32 handle (`sprint_u32_handle`).
    pub fn fh(handle: u32) -> String {
        let mut s = String::new();
        if super::u32::htid(handle) != 0 {
            s += &format!("{:x}:", super::u32::user_htid(handle));
        }
        if super::u32::bucket(handle) != 0 {
            s += &format!("{:x}", super::u32::bucket(handle));
        }
        if super::u32::node(handle) != 0 {
            s += &format!(":{:x}", super::u32::node(handle));
        }
        s
    }

    /// `(chain, pref, fh)` of every dumped line ("-" for instance headers).
    pub fn listing(b: &Block) -> Vec<(u32, u16, String)> {
        b.dump(None, 0, 0)
            .into_iter()
            .map(|d| {
                (
                    d.chain,
                    d.prio,
                    if d.handle == 0 {
                        "-".to_string()
                    } else {
                        fh(d.handle)
                    },
                )
            })
            .collect()
    }

    pub fn line(chain: u32, pref: u16, fh: &str) -> (u32, u16, String) {
        (chain, pref, fh.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;
    use crate::act::gact::GactOpts;
    use crate::act::{ActionOpts, ActionSpec};
    use crate::packet::{ETH_P_IP, ETH_P_IPV6};

    fn any() -> u32::U32Opts {
        u32_match(vec![key(0, 0, 0)], Some(h(1, 0x10)))
    }

    #[test]
    fn raw_verdicts_round_trip() {
        for v in [
            Verdict::Continue,
            Verdict::Ok,
            Verdict::Trap,
            Verdict::Jump(10),
            Verdict::GotoChain(5),
        ] {
            assert_eq!(Verdict::from_raw(v.to_raw()), Some(v));
        }
        assert_eq!(Verdict::GotoChain(5).to_raw(), 0x2000_0005);
        assert_eq!(Verdict::from_raw(9), None);
        assert_eq!(Verdict::from_raw(0x3000_0000), None);
    }

    #[test]
    fn automatic_priorities_count_down_from_0xc000() {
        // Golden "u32 no prio (auto pref)".
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        for (proto, ip) in [(ETH_P_IP, 10u8), (ETH_P_IP, 11), (ETH_P_IPV6, 0)] {
            let o = u32_match(
                vec![key((ip as u32) << 24, 0xff00_0000, 12)],
                Some(h(1, 0x10)),
            );
            b.change_filter(
                &u32_msg(0, proto, 0, Some(o)),
                FilterCmd::Add,
                &mut net.env(q),
            )
            .unwrap();
        }
        assert_eq!(
            listing(&b),
            vec![
                line(0, 49150, "-"),
                line(0, 49150, "802:"),
                line(0, 49150, "802::800"),
                line(0, 49151, "-"),
                line(0, 49151, "801:"),
                line(0, 49151, "801::800"),
                line(0, 49152, "-"),
                line(0, 49152, "800:"),
                line(0, 49152, "800::800"),
            ]
        );
        // `tc filter change` needs a priority.
        let e = b.change_filter(
            &u32_msg(0, ETH_P_IP, 0, Some(any())),
            FilterCmd::Change,
            &mut net.env(q),
        );
        assert_eq!(
            e,
            Err(TcError::msg(
                Errno::ENOENT,
                "Invalid filter command with priority of zero"
            ))
        );
    }

    #[test]
    fn priorities_protocols_and_the_errors_of_tc_filter_add() {
        // Golden "u32 several prios and protocols" and "filter generic errors".
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        for (pref, proto) in [(1, ETH_P_IP), (5, ETH_P_IP), (3, ETH_P_IPV6), (2, ETH_P_IP)] {
            b.change_filter(
                &u32_msg(pref, proto, 0, Some(any())),
                FilterCmd::Add,
                &mut net.env(q),
            )
            .unwrap();
        }
        let heads: Vec<_> = listing(&b)
            .into_iter()
            .filter(|l| l.2.ends_with(':'))
            .collect();
        assert_eq!(
            heads,
            vec![
                line(0, 1, "800:"),
                line(0, 2, "803:"),
                line(0, 3, "802:"),
                line(0, 5, "801:")
            ]
        );
        let e = b.change_filter(
            &u32_msg(1, ETH_P_IPV6, 0, Some(any())),
            FilterCmd::Add,
            &mut net.env(q),
        );
        assert_eq!(
            e,
            Err(TcError::inval(
                "Protocol mismatch for filter with specified priority"
            ))
        );
        let no_kind = FilterMsg {
            prio: 10,
            protocol: ETH_P_IP,
            ..Default::default()
        };
        let e = b.change_filter(&no_kind, FilterCmd::Add, &mut net.env(q));
        assert_eq!(
            e,
            Err(TcError::inval("Filter kind and protocol must be specified"))
        );
        let bogus = FilterMsg {
            kind: Some("nosuchcls".into()),
            ..no_kind.clone()
        };
        let e = b.change_filter(&bogus, FilterCmd::Add, &mut net.env(q));
        assert_eq!(
            e,
            Err(TcError::msg(Errno::ENOENT, "TC classifier not found"))
        );
        let fw = FilterMsg {
            kind: Some("fw".into()),
            prio: 1,
            ..no_kind
        };
        let e = b.change_filter(&fw, FilterCmd::Add, &mut net.env(q));
        assert_eq!(
            e,
            Err(TcError::inval(
                "Specified filter kind does not match existing one"
            ))
        );
        let e = b.change_filter(
            &u32_msg(7, ETH_P_IP, 0, Some(any())),
            FilterCmd::Change,
            &mut net.env(q),
        );
        assert_eq!(
            e,
            Err(TcError::msg(
                Errno::ENOENT,
                "Need both RTM_NEWTFILTER and NLM_F_CREATE to create a new filter"
            ))
        );
        // Failed adds leave nothing behind.
        assert_eq!(listing(&b).len(), 12);
        // A priority at 0x8000 blocks automatic allocation.
        b.change_filter(
            &u32_msg(0x8000, ETH_P_IP, 0, Some(any())),
            FilterCmd::Add,
            &mut net.env(q),
        )
        .unwrap();
        let e = b.change_filter(
            &u32_msg(0, ETH_P_IP, 0, Some(any())),
            FilterCmd::Add,
            &mut net.env(q),
        );
        assert_eq!(
            e,
            Err(TcError::msg(
                Errno::ENOSPC,
                "Lowest ID from auto-alloc range already in use"
            ))
        );
    }

    #[test]
    fn chains_and_shared_u32_tables_list_as_the_kernel_does() {
        // Golden "filter generic errors": prio 0 (auto), 65535, 10, 10 again,
        // then chain 1 prio 10.
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let zero = u32_match(vec![key(0, 0, 0)], Some(h(1, 0x10)));
        for (chain, pref) in [(0, 0), (0, 65535), (0, 10), (0, 10), (1, 10)] {
            let m = FilterMsg {
                chain,
                ..u32_msg(pref, ETH_P_IP, 0, Some(zero.clone()))
            };
            b.change_filter(&m, FilterCmd::Add, &mut net.env(q))
                .unwrap();
        }
        let chain = |c: u32| {
            vec![
                line(c, 10, "-"),
                line(c, 10, "803:"),
                line(c, 10, "803::800"),
                line(c, 10, "802:"),
                line(c, 10, "802::800"),
                line(c, 10, "802::801"),
            ]
        };
        let mut expect = chain(0);
        expect.extend([
            line(0, 49152, "-"),
            line(0, 49152, "800:"),
            line(0, 49152, "800::800"),
        ]);
        expect.extend([
            line(0, 65535, "-"),
            line(0, 65535, "801:"),
            line(0, 65535, "801::800"),
        ]);
        expect.extend(chain(1));
        assert_eq!(listing(&b), expect);
        assert_eq!(b.dump(Some(1), 0, 0).len(), 6);
        assert_eq!(b.chains(), vec![0, 1]);
        b.add_chain(3, None).unwrap();
        assert_eq!(b.chains(), vec![0, 1, 3]);
        assert_eq!(
            b.add_chain(3, None),
            Err(TcError::msg(Errno::EEXIST, "Filter chain already exists"))
        );
        assert_eq!(
            b.add_chain(4, Some("u32")),
            Err(TcError::msg(
                Errno::EOPNOTSUPP,
                "Chain templates are not supported with specified classifier"
            ))
        );
        assert!(b.dump(Some(3), 0, 0).is_empty());
        b.delete_chain(3).unwrap();
        assert_eq!(b.chains(), vec![0, 1]);
        assert_eq!(
            b.delete_chain(3),
            Err(TcError::inval("Cannot find specified filter chain"))
        );
        let e = b.change_filter(
            &FilterMsg {
                chain: 1 << 28,
                ..u32_msg(1, ETH_P_IP, 0, Some(zero))
            },
            FilterCmd::Add,
            &mut net.env(q),
        );
        assert_eq!(
            e,
            Err(TcError::inval("Specified chain index exceeds upper limit"))
        );
    }

    #[test]
    fn delete_by_priority_handle_and_flush() {
        // Golden "u32 delete variants".
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        for pref in [1, 2, 3] {
            b.change_filter(
                &u32_msg(pref, ETH_P_IP, 0, Some(any())),
                FilterCmd::Add,
                &mut net.env(q),
            )
            .unwrap();
        }
        let del = |pref: u16, proto: u16| FilterMsg {
            prio: pref,
            protocol: proto,
            ..Default::default()
        };
        b.delete_filter(&del(2, 0)).unwrap();
        let heads: Vec<_> = listing(&b)
            .into_iter()
            .filter(|l| l.2 == "-")
            .map(|l| l.1)
            .collect();
        assert_eq!(heads, vec![1, 3]);
        assert_eq!(
            b.delete_filter(&del(2, 0)),
            Err(TcError::msg(
                Errno::ENOENT,
                "Filter with specified priority/protocol not found"
            ))
        );
        assert_eq!(
            b.delete_filter(&del(3, ETH_P_IPV6)),
            Err(TcError::inval(
                "Protocol mismatch for filter with specified priority"
            ))
        );
        b.delete_filter(&FilterMsg {
            kind: Some("u32".into()),
            ..del(1, ETH_P_IP)
        })
        .unwrap();
        // Deleting the only knode of the only u32 instance deletes the instance.
        b.delete_filter(&FilterMsg {
            handle: 0x8020_0800,
            ..del(3, 0)
        })
        .unwrap();
        assert!(b.is_empty() && listing(&b).is_empty());
        b.change_filter(
            &u32_msg(4, ETH_P_IP, 0, Some(any())),
            FilterCmd::Add,
            &mut net.env(q),
        )
        .unwrap();
        b.delete_filter(&FilterMsg::default()).unwrap();
        assert!(listing(&b).is_empty());
        // Flushing a missing chain is fine, anything else needs the chain.
        b.delete_filter(&FilterMsg::default()).unwrap();
        assert_eq!(
            b.delete_filter(&del(4, 0)),
            Err(TcError::msg(
                Errno::ENOENT,
                "Cannot find specified filter chain"
            ))
        );
        assert_eq!(
            b.delete_filter(&FilterMsg {
                protocol: ETH_P_IP,
                ..Default::default()
            }),
            Err(TcError::msg(
                Errno::ENOENT,
                "Cannot flush filters with protocol, handle or kind set"
            ))
        );
        assert_eq!(
            b.get_filter(&del(4, 0)),
            Err(TcError::inval("Cannot find specified filter chain"))
        );
    }

    fn gact(v: Verdict) -> ActionSpec {
        ActionSpec {
            index: 0,
            opts: ActionOpts::Gact(GactOpts {
                action: v,
                random: None,
            }),
            cookie: None,
            no_percpu: false,
            offload: 0,
        }
    }

    fn matchall(classid: Option<Handle>, actions: Vec<ActionSpec>) -> FilterOpts {
        FilterOpts::Matchall(matchall::MatchallOpts {
            classid,
            flags: None,
            actions,
        })
    }

    #[test]
    fn goto_chain_and_reclassify() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let mut add = |b: &mut Block, chain: u32, pref: u16, o: FilterOpts| {
            let m = FilterMsg {
                chain,
                prio: pref,
                protocol: ETH_P_ALL,
                kind: None,
                opts: Some(o),
                ..Default::default()
            };
            b.change_filter(&m, FilterCmd::Add, &mut net.env(q))
                .unwrap();
        };
        add(
            &mut b,
            0,
            1,
            matchall(None, vec![gact(Verdict::GotoChain(7))]),
        );
        // The target chain exists (held by the action) but is not shown.
        assert_eq!(b.chains(), vec![0]);
        let mut p = icmp_echo([10, 0, 0, 1], [10, 0, 0, 2]);
        // An empty target chain: no match.
        assert_eq!(b.classify(&mut p, Time(0)), None);
        add(&mut b, 7, 1, matchall(Some(h(1, 0x20)), vec![]));
        assert_eq!(b.chains(), vec![0, 7]);
        let r = b.classify(&mut p, Time(0)).unwrap();
        assert_eq!((r.classid, r.verdict), (h(1, 0x20), Verdict::Ok));

        // reclassify restarts chain 0; the 17th restart drops (max_reclassify_loop).
        let mut b = Block::default();
        add(
            &mut b,
            0,
            1,
            matchall(None, vec![gact(Verdict::Reclassify)]),
        );
        let r = b.classify(&mut p, Time(0)).unwrap();
        assert_eq!(r.verdict, Verdict::Shot);
        let d = b.dump(None, 0, 0);
        let Some(FilterElemOpts::Matchall(m)) = &d[1].opts else {
            panic!("{d:?}")
        };
        assert_eq!(m.rhit, 17);
        assert_eq!(m.actions[0].stats.packets, 17);
    }

    #[test]
    fn continue_falls_through_to_the_next_instance() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        for (pref, o) in [
            (1, matchall(Some(h(1, 0x10)), vec![gact(Verdict::Continue)])),
            (2, matchall(Some(h(1, 0x20)), vec![])),
        ] {
            let m = FilterMsg {
                prio: pref,
                protocol: ETH_P_ALL,
                opts: Some(o),
                ..Default::default()
            };
            b.change_filter(&m, FilterCmd::Add, &mut net.env(q))
                .unwrap();
        }
        let r = b
            .classify(&mut icmp_echo([1, 1, 1, 1], [2, 2, 2, 2]), Time(0))
            .unwrap();
        assert_eq!(r.classid, h(1, 0x20));
        assert_eq!(b.count_bound(h(1, 0x20)), 1);
    }
}
