//! Actions: what a matching filter does to a packet, and the per-namespace
//! table that owns them.
//!
//! Modelled on net/sched/act_api.c and include/net/act_api.h. An action is
//! an instance of a kind (`police`, `gact`, `mirred`, `skbedit`,
//! `connmark`, `ctinfo`, `simple`, `csum`, `pedit`, `nat`, `vlan`, `mpls`, `skbmod`,
//! `gate`) with an index that is
//! unique per kind in a network namespace. Actions are created either standalone
//! (`tc actions add`) or inline by a filter (`... u32 match ... action drop`);
//! a filter may also bind an existing action by naming its index, so one
//! policer can be shared by several filters.
//!
//! Reference counting follows the kernel: `refcnt` counts every holder,
//! `bindcnt` counts the filters among them. A standalone action is created
//! with one reference and no binding; an inline one with one reference that is
//! also a binding. `tc actions del` refuses a bound action (EPERM); when the
//! last filter holding an inline action goes away, the action disappears from
//! the table (the kernel frees it when its reference count reaches zero).
//!
//! # How filters hold actions (the hot-path choice)
//!
//! Filters hold their actions as [`SharedAction`] = `Arc<Mutex<TcAction>>`;
//! the table holds one more clone of each. Classification therefore needs no
//! table: it locks each action in turn (an uncontended mutex, tens of
//! nanoseconds), exactly as the kernel takes each action's spinlock. The
//! binding count is derived from the `Arc`'s strong count (every clone other
//! than the table's is a filter's binding), so a qdisc that is destroyed
//! together with its filters releases its bindings simply by being dropped;
//! the table forgets unreferenced inline actions lazily, at its next
//! operation — the same asynchronous release the kernel shows.
//!
//! `tcf_action_exec` is [`Exts::exec`]: actions run in order; `pipe` goes on
//! to the next one, `jump N` restarts the list skipping N actions (bounded by
//! a time-to-live of 32), `repeat` reruns the same action (at most 32 times),
//! anything else ends the list and is the verdict. A filter without actions
//! answers `ok` with its class.
//!
//! Offload flags are kept as far as the kernel checks and dumps them
//! without offloading hardware: `skip_hw`/`skip_sw` given with an action are
//! kept from its creation (both at once are refused; a standalone `skip_sw`
//! action fails to offload, so it is refused); an action a filter creates
//! may not ask for a flag the filter lacks, and inherits the filter's; a
//! filter binds a standalone action only if their flags are equal, one
//! another filter created only if it adds flags. `no_percpu` is kept too.
//! Deviations: `hw_stats`, flags given to `tc actions` itself and terse
//! dumps are not modelled. Changes validate
//! every action of a list before committing any (the kernel can leave earlier
//! replaced actions changed when a later one fails).

pub mod connmark;
pub mod csum;
pub mod ctinfo;
pub mod gact;
pub mod gate;
pub mod mirred;
pub mod mpls;
pub mod nat;
pub mod pedit;
pub mod police;
pub mod simple;
pub mod skbedit;
pub mod skbmod;
pub mod vlan;

use crate::cls::{Verdict, TCA_CLS_FLAGS_SKIP_HW, TCA_CLS_FLAGS_SKIP_SW};
use crate::error::{Errno, TcError, TcResult};
use crate::packet::Packet;
use crate::stats::RateEstimator;
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// At most this many actions in one list (`TCA_ACT_MAX_PRIO`).
pub const TCA_ACT_MAX_PRIO: usize = 32;
/// The value part of `jump`/`goto chain` control codes (`TC_ACT_EXT_VAL_MASK`).
pub const TC_ACT_EXT_VAL_MASK: u32 = (1 << 28) - 1;
/// Longest user cookie (`TC_COOKIE_MAX_SIZE`).
pub const TC_COOKIE_MAX_SIZE: usize = 16;
/// Clock ticks per second of the times the kernel dumps (`USER_HZ`).
pub const USER_HZ: u64 = 100;

/// Options of every kind of action, as tc sends them and the kernel dumps them.
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ActionOpts {
    Police(police::PoliceOpts),
    Gact(gact::GactOpts),
    Mirred(mirred::MirredOpts),
    Skbedit(skbedit::SkbeditOpts),
    Connmark(connmark::ConnmarkOpts),
    Ctinfo(ctinfo::CtinfoOpts),
    Simple(simple::SimpleOpts),
    Csum(csum::CsumOpts),
    Pedit(pedit::PeditOpts),
    Nat(nat::NatOpts),
    Vlan(vlan::VlanOpts),
    Mpls(mpls::MplsOpts),
    Skbmod(skbmod::SkbmodOpts),
    Gate(gate::GateOpts),
}

impl ActionOpts {
    /// The kind name (`police`, `gact`).
    pub fn kind(&self) -> &'static str {
        match self {
            ActionOpts::Police(_) => "police",
            ActionOpts::Gact(_) => "gact",
            ActionOpts::Mirred(_) => "mirred",
            ActionOpts::Skbedit(_) => "skbedit",
            ActionOpts::Connmark(_) => "connmark",
            ActionOpts::Ctinfo(_) => "ctinfo",
            ActionOpts::Simple(_) => "simple",
            ActionOpts::Csum(_) => "csum",
            ActionOpts::Pedit(_) => "pedit",
            ActionOpts::Nat(_) => "nat",
            ActionOpts::Vlan(_) => "vlan",
            ActionOpts::Mpls(_) => "mpls",
            ActionOpts::Skbmod(_) => "skbmod",
            ActionOpts::Gate(_) => "gate",
        }
    }
}

/// One entry of an action list (`action KIND PARAMS [index N] [cookie HEX]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionSpec {
    /// The action's index (`tc_police.index`, `tc_gact.index`); 0 lets the
    /// kernel choose the lowest free one.
    #[serde(default)]
    pub index: u32,
    /// Kind and parameters.
    pub opts: ActionOpts,
    /// `TCA_ACT_COOKIE`: opaque user data, at most 16 bytes.
    #[serde(default)]
    pub cookie: Option<Vec<u8>>,
    /// `TCA_ACT_FLAGS_NO_PERCPU_STATS` (`no_percpu`): kept from creation
    /// and dumped; sluice's counters are not per CPU either way.
    #[serde(default)]
    pub no_percpu: bool,
    /// `TCA_ACT_FLAGS_SKIP_HW`/`_SKIP_SW` (`skip_hw`, `skip_sw`), as
    /// `TCA_CLS_FLAGS_SKIP_HW`/`_SKIP_SW` bits.
    #[serde(default)]
    pub offload: u32,
}

/// A rate estimator requested with a filter (`estimator INTERVAL EWMA`,
/// `TCA_RATE`); it is attached to the filter's actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EstimatorSpec {
    /// Sampling interval exponent: 2^interval/4 seconds, -2..=3.
    pub interval_log: i8,
    /// EWMA weight exponent.
    pub ewma_log: u8,
}

impl EstimatorSpec {
    fn build(self) -> TcResult<RateEstimator> {
        // gen_new_estimator refuses intervals outside 0.25 s .. 8 s.
        if !(-2..=3).contains(&self.interval_log) {
            return Err(TcError::errno(Errno::EINVAL));
        }
        Ok(RateEstimator::new(self.interval_log, self.ewma_log))
    }
}

/// Per-action counters (`TCA_ACT_STATS`): basic and queue statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionStats {
    /// Bytes seen by the action.
    pub bytes: u64,
    /// Packets seen by the action.
    pub packets: u64,
    /// Packets the action dropped.
    pub drops: u64,
    /// Packets over the limit (police).
    pub overlimits: u64,
}

/// When an action was installed and used (`struct tcf_t`), on the caller's clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionTm {
    /// Creation time.
    pub install: Time,
    /// Last use (the creation time until first used).
    pub lastuse: Time,
    /// First use, if any.
    pub firstuse: Option<Time>,
}

/// `struct tcf_t` as the kernel dumps it: ages in `USER_HZ` ticks before `now`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcfT {
    /// Ticks since installation.
    pub install: u64,
    /// Ticks since last use.
    pub lastuse: u64,
    /// Always 0.
    pub expires: u64,
    /// Ticks since first use, 0 if never used.
    pub firstuse: u64,
}

impl ActionTm {
    fn new(now: Time) -> Self {
        ActionTm {
            install: now,
            lastuse: now,
            firstuse: None,
        }
    }

    fn touch(&mut self, now: Time) {
        self.lastuse = now;
        if self.firstuse.is_none() {
            self.firstuse = Some(now);
        }
    }

    /// The ages the kernel reports at `now` (`tcf_tm_dump`).
    pub fn at(&self, now: Time) -> TcfT {
        let ticks = |t: Time| now.saturating_since(t).as_nanos() / (1_000_000_000 / USER_HZ);
        TcfT {
            install: ticks(self.install),
            lastuse: ticks(self.lastuse),
            expires: 0,
            firstuse: self.firstuse.map_or(0, ticks),
        }
    }
}

/// One action's dump: the kernel's `tcf_action_dump_1`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionDump {
    /// Position in the filter's list (1-based; 0 in `tc actions ls` is the
    /// printer's business).
    pub order: u32,
    /// Kind name.
    pub kind: String,
    /// Index.
    pub index: u32,
    /// All holders: the user's reference (if created standalone) plus bindings.
    pub refcnt: u32,
    /// Filters bound to the action.
    pub bindcnt: u32,
    /// Parameters as the kernel reports them (police: effective mtu etc.).
    pub opts: ActionOpts,
    /// Counters.
    pub stats: ActionStats,
    /// Installation and use times.
    pub tm: ActionTm,
    /// The user cookie.
    pub cookie: Option<Vec<u8>>,
    /// The estimator, when one is attached, with the counters it samples
    /// (the printer reads the estimate at the command's time, [`ActionDump::rate_est`]).
    pub estimator: Option<(RateEstimator, u64, u64)>,
    /// Has `TCA_ACT_USED_HW_STATS` been filled in (see [`TcAction`])?
    #[serde(default)]
    pub used_hw_stats: bool,
    /// Created with `no_percpu` (dumped in `TCA_ACT_FLAGS`).
    #[serde(default)]
    pub no_percpu: bool,
    /// `skip_hw`/`skip_sw` (`TCA_CLS_FLAGS_*` bits, dumped in `TCA_ACT_FLAGS`).
    #[serde(default)]
    pub offload: u32,
}

impl ActionDump {
    /// The rate estimate at `now` (bits/s, packets/s): the samples due by
    /// then taken, as the kernel's timer would have.
    pub fn rate_est(&self, now: Time) -> Option<(u64, u64)> {
        self.estimator.map(|(e, bytes, packets)| {
            let s = crate::stats::Stats {
                bytes,
                packets,
                ..Default::default()
            };
            e.read_at(now, &s)
        })
    }
}

/// What every action kind implements: the `act` callback and its dump.
pub trait Action: Send + std::fmt::Debug {
    /// The kind name.
    fn kind(&self) -> &'static str;
    /// Act on a packet at `now`; the answer is a `TC_ACT_*` verdict.
    fn act(&mut self, pkt: &mut Packet, now: Time) -> Verdict;
    /// Packets this action counted as dropped.
    fn drops(&self) -> u64;
    /// Packets this action counted as over the limit.
    fn overlimits(&self) -> u64 {
        0
    }
    /// Current parameters, as dumped.
    fn dump(&self) -> ActionOpts;
    /// The action's rate estimator, if any, with the bytes and packets it samples.
    fn estimator(&self) -> Option<(RateEstimator, u64, u64)> {
        None
    }
    /// The configured verdict that may be `goto chain N` (police: the
    /// exceed action), whose chain a filter's chain then references.
    fn control(&self) -> Verdict;
}

/// Validated parameters of one kind, ready to create or change an action.
#[derive(Debug)]
enum Params {
    Police(Box<police::PoliceParams>),
    Gact(gact::GactParams),
    Mirred(mirred::MirredParams),
    Skbedit(skbedit::SkbeditParams),
    Connmark(connmark::ConnmarkParams),
    Ctinfo(ctinfo::CtinfoParams),
    Simple(simple::SimpleParams),
    Csum(csum::CsumParams),
    Pedit(pedit::PeditParams),
    Nat(nat::NatParams),
    Vlan(vlan::VlanParams),
    Mpls(mpls::MplsParams),
    Skbmod(skbmod::SkbmodParams),
    Gate(gate::GateParams),
}

#[derive(Debug)]
enum Kind {
    Police(Box<police::Police>),
    Gact(gact::Gact),
    Mirred(mirred::Mirred),
    Skbedit(skbedit::Skbedit),
    Connmark(connmark::Connmark),
    Ctinfo(ctinfo::Ctinfo),
    Simple(simple::Simple),
    Csum(csum::Csum),
    Pedit(pedit::Pedit),
    Nat(nat::Nat),
    Vlan(vlan::Vlan),
    Mpls(mpls::Mpls),
    Skbmod(skbmod::Skbmod),
    Gate(gate::Gate),
}

impl Kind {
    fn inner(&self) -> &dyn Action {
        match self {
            Kind::Police(p) => &**p,
            Kind::Gact(g) => g,
            Kind::Mirred(m) => m,
            Kind::Skbedit(k) => k,
            Kind::Connmark(k) => k,
            Kind::Ctinfo(k) => k,
            Kind::Simple(k) => k,
            Kind::Csum(k) => k,
            Kind::Pedit(k) => k,
            Kind::Nat(k) => k,
            Kind::Vlan(k) => k,
            Kind::Mpls(k) => k,
            Kind::Skbmod(k) => k,
            Kind::Gate(k) => k,
        }
    }
    fn inner_mut(&mut self) -> &mut dyn Action {
        match self {
            Kind::Police(p) => &mut **p,
            Kind::Gact(g) => g,
            Kind::Mirred(m) => m,
            Kind::Skbedit(k) => k,
            Kind::Connmark(k) => k,
            Kind::Ctinfo(k) => k,
            Kind::Simple(k) => k,
            Kind::Csum(k) => k,
            Kind::Pedit(k) => k,
            Kind::Nat(k) => k,
            Kind::Vlan(k) => k,
            Kind::Mpls(k) => k,
            Kind::Skbmod(k) => k,
            Kind::Gate(k) => k,
        }
    }
}

/// An action instance: common state (index, counters, times, cookie) around a kind.
#[derive(Debug)]
pub struct TcAction {
    index: u32,
    /// Created by `tc actions add/replace`: the user holds a reference.
    user_ref: bool,
    /// `skip_hw`/`skip_sw` (as `TCA_CLS_FLAGS_*` bits): given at creation,
    /// and for an action a filter created, inherited from the filters that
    /// created or bound it.
    offload: u32,
    bytes: u64,
    packets: u64,
    tm: ActionTm,
    cookie: Option<Vec<u8>>,
    /// `TCA_ACT_FLAGS_NO_PERCPU_STATS`, from creation.
    no_percpu: bool,
    /// `used_hw_stats_valid`: the hardware-statistics query that `tc
    /// actions ls` makes of every action it lists (`tcf_action_update_hw_stats`,
    /// which with no offloading driver reports none used) fills it in, and
    /// it stays; from then on every dump of the action says `used_hw_stats
    /// disabled`. Neither creating, binding, `get` nor a filter dump does.
    used_hw_stats: bool,
    kind: Kind,
}

/// How filters and the table hold an action.
pub type SharedAction = Arc<Mutex<TcAction>>;

fn lock(a: &SharedAction) -> MutexGuard<'_, TcAction> {
    // A panic elsewhere must not make classification panic too.
    a.lock().unwrap_or_else(|e| e.into_inner())
}

impl TcAction {
    /// The index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The kind name.
    pub fn kind(&self) -> &'static str {
        self.kind.inner().kind()
    }

    /// Run the action: count the packet, then let the kind decide.
    pub fn act(&mut self, pkt: &mut Packet, now: Time) -> Verdict {
        self.bytes += pkt.len as u64;
        self.packets += pkt.segs() as u64;
        self.tm.touch(now);
        self.kind.inner_mut().act(pkt, now)
    }

    /// The counters.
    pub fn stats(&self) -> ActionStats {
        let k = self.kind.inner();
        ActionStats {
            bytes: self.bytes,
            packets: self.packets,
            drops: k.drops(),
            overlimits: k.overlimits(),
        }
    }

    fn dump(&self, order: u32, refcnt: u32, bindcnt: u32) -> ActionDump {
        let k = self.kind.inner();
        ActionDump {
            order,
            kind: k.kind().to_string(),
            index: self.index,
            refcnt,
            bindcnt,
            opts: k.dump(),
            stats: self.stats(),
            tm: self.tm,
            cookie: self.cookie.clone(),
            estimator: k.estimator(),
            used_hw_stats: self.used_hw_stats,
            no_percpu: self.no_percpu,
            offload: self.offload,
        }
    }
}

/// Reference and binding counts of a shared action, less `extra` clones
/// held by the caller for the moment.
fn counts(a: &SharedAction, extra: u32) -> (u32, u32) {
    // One strong reference is the table's; every other is a filter's binding.
    let bind = (Arc::strong_count(a) as u32).saturating_sub(1 + extra);
    (bind + lock(a).user_ref as u32, bind)
}

fn dump_shared(a: &SharedAction, order: u32, extra: u32) -> ActionDump {
    let (r, b) = counts(a, extra);
    lock(a).dump(order, r, b)
}

#[derive(Debug)]
struct Entry {
    act: SharedAction,
}

/// Where an action list is being created: standalone, or bound to a filter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct InitCtx {
    /// Called by a classifier (`TCA_ACT_FLAGS_BIND`): existing actions are bound as they are.
    pub bind: bool,
    /// `NLM_F_REPLACE`: an existing action may be changed.
    pub replace: bool,
    /// The filter's estimator (`TCA_RATE`), standalone actions get none.
    pub estimator: Option<EstimatorSpec>,
    /// The filter's `skip_hw`/`skip_sw` bits (`TCA_CLS_FLAGS_*`); 0 for
    /// classifiers without flags and for standalone actions.
    pub offload: u32,
}

/// One validated action, not yet committed.
#[derive(Debug)]
enum Prepared {
    /// Bind an existing action (parameters ignored, as the kernel does).
    Bind(SharedAction, u32),
    /// Create a new action (`index` 0: the lowest free one at commit time).
    Create {
        index: u32,
        params: Params,
        cookie: Option<Vec<u8>>,
        no_percpu: bool,
        offload: u32,
    },
    /// Change an existing action in place.
    Replace {
        act: SharedAction,
        params: Params,
        cookie: Option<Vec<u8>>,
    },
}

/// A validated action list (a filter's `tcf_exts`, or a `tc actions` batch).
#[derive(Debug, Default)]
pub(crate) struct PreparedList {
    items: Vec<Prepared>,
    old_police: bool,
    estimator: Option<EstimatorSpec>,
}

/// The actions of one network namespace, by kind and index (`tcf_idrinfo`).
#[derive(Debug, Default)]
pub struct ActionTable {
    kinds: BTreeMap<&'static str, BTreeMap<u32, Entry>>,
    /// Seed from which actions that need randomness (gact netrand) seed their generators.
    seed: u64,
    /// What mirred actions sent, until the front end takes it.
    outbox: mirred::MirredOutbox,
    /// A listing filled in some action's `used_hw_stats` (state a front
    /// end that persists the namespace must keep).
    listing_changed: bool,
}

/// Result of `tc actions flush`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlushReport {
    /// Actions deleted.
    pub deleted: u32,
    /// The kernel's warning when a bound action stopped the flush part-way.
    pub warning: Option<&'static str>,
}

/// Kinds this table knows (others answer "not found" as when the module is missing).
pub const KNOWN_KINDS: [&str; 14] = [
    "connmark", "csum", "ctinfo", "gact", "gate", "mirred", "mpls", "nat", "pedit", "police",
    "simple", "skbedit", "skbmod", "vlan",
];

fn known(kind: &str) -> Option<&'static str> {
    KNOWN_KINDS.iter().copied().find(|k| *k == kind)
}

impl ActionTable {
    /// An empty table whose random actions derive their seeds from `seed`.
    pub fn new(seed: u64) -> Self {
        ActionTable {
            kinds: BTreeMap::new(),
            seed,
            outbox: Default::default(),
            listing_changed: false,
        }
    }

    /// Did a `tc actions ls` since the last call change an action (see
    /// [`ActionDump::used_hw_stats`])?
    pub fn take_listing_changed(&mut self) -> bool {
        std::mem::take(&mut self.listing_changed)
    }

    /// Does the namespace hold any action of `kind` (standalone or inside a
    /// filter)? A front end skips work for kinds nobody uses.
    pub fn has_kind(&self, kind: &str) -> bool {
        self.kinds.get(kind).is_some_and(|m| !m.is_empty())
    }

    /// Does any action read the packet's connection (`Packet::conn`)?
    /// Front ends look received packets' connections up only then.
    pub fn reads_connections(&self) -> bool {
        self.has_kind("connmark") || self.has_kind("ctinfo")
    }

    /// Take what mirred actions sent since the last call, in order.
    pub fn take_mirrored(&self) -> Vec<mirred::Mirrored> {
        std::mem::take(&mut *self.outbox.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Forget inline actions no filter holds any more.
    fn gc(&mut self) {
        for m in self.kinds.values_mut() {
            m.retain(|_, e| Arc::strong_count(&e.act) > 1 || lock(&e.act).user_ref);
        }
    }

    fn find(&self, kind: &str, index: u32) -> Option<&Entry> {
        self.kinds.get(kind)?.get(&index)
    }

    fn seed_for(&self, kind: &str, index: u32) -> u64 {
        // SplitMix64-style mixing so neighbouring indices get unrelated streams.
        let mut z = self.seed ^ ((index as u64) << 8) ^ kind.len() as u64;
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Validate an action list (`tcf_action_init` without committing).
    pub(crate) fn prepare(
        &mut self,
        specs: &[ActionSpec],
        old_police: Option<&police::PoliceSpec>,
        ctx: InitCtx,
        in_filter: bool,
    ) -> TcResult<PreparedList> {
        self.gc();
        let mut list = PreparedList {
            items: Vec::new(),
            old_police: false,
            estimator: ctx.estimator,
        };
        if let Some(p) = old_police {
            // The old `police` attribute wins over an action list (tcf_exts_validate_ex).
            let spec = ActionSpec {
                index: p.index,
                opts: ActionOpts::Police(p.opts.clone()),
                cookie: None,
                no_percpu: false,
                offload: 0,
            };
            list.items
                .push(self.prepare_one(&spec, ctx, in_filter, &list.items)?);
            list.old_police = true;
            return Ok(list);
        }
        if specs.len() > TCA_ACT_MAX_PRIO {
            return Err(TcError::inval(format!(
                "Only {TCA_ACT_MAX_PRIO} actions supported per filter"
            )));
        }
        for s in specs {
            let p = self.prepare_one(s, ctx, in_filter, &list.items)?;
            list.items.push(p);
        }
        Ok(list)
    }

    fn prepare_one(
        &self,
        spec: &ActionSpec,
        ctx: InitCtx,
        in_filter: bool,
        earlier: &[Prepared],
    ) -> TcResult<Prepared> {
        if spec
            .cookie
            .as_ref()
            .is_some_and(|c| c.len() > TC_COOKIE_MAX_SIZE)
        {
            return Err(TcError::errno(Errno::EINVAL));
        }
        // `tc_act_flags_valid`: never both.
        let both = TCA_CLS_FLAGS_SKIP_HW | TCA_CLS_FLAGS_SKIP_SW;
        if spec.offload & both == both {
            return Err(TcError::errno(Errno::EINVAL));
        }
        // Attribute-level checks come before the index is looked up.
        match &spec.opts {
            ActionOpts::Police(o) => police::check_policy(o)?,
            ActionOpts::Gact(o) => gact::check_policy(o)?,
            ActionOpts::Mirred(_) => {}
            ActionOpts::Skbedit(o) => skbedit::check_policy(o)?,
            // act_mpls checks everything before the index is looked up.
            ActionOpts::Mpls(o) => {
                mpls::check(o)?;
            }
            ActionOpts::Connmark(_)
            | ActionOpts::Ctinfo(_)
            | ActionOpts::Simple(_)
            | ActionOpts::Csum(_)
            | ActionOpts::Pedit(_)
            | ActionOpts::Nat(_)
            | ActionOpts::Vlan(_)
            | ActionOpts::Skbmod(_)
            | ActionOpts::Gate(_) => {}
        }
        let kind = spec.opts.kind();
        let pending = spec.index != 0
            && earlier.iter().any(|p| {
                matches!(p, Prepared::Create { index, params, .. }
                    if *index == spec.index && params_kind(params) == kind)
            });
        if pending {
            // Another action of this list is creating the same index; the
            // kernel answers EAGAIN (tcf_idr_check_alloc).
            return Err(TcError::errno(Errno::EAGAIN));
        }
        let existing = (spec.index != 0)
            .then(|| self.find(kind, spec.index))
            .flatten();
        if let Some(e) = existing {
            if ctx.bind {
                let a = lock(&e.act);
                // tcf_action_init: a standalone action's flags must equal the
                // filter's; one a classifier created may only gain flags.
                let clash = if a.user_ref {
                    a.offload != ctx.offload
                } else {
                    a.offload & !ctx.offload != 0
                };
                if clash {
                    return Err(offload_mismatch());
                }
                return Ok(Prepared::Bind(e.act.clone(), ctx.offload));
            }
            // skbedit refuses an empty edit, simple a missing string,
            // vlan bad parameters, before an existing index.
            match &spec.opts {
                ActionOpts::Skbedit(o) => skbedit::check_edits(o)?,
                ActionOpts::Simple(o) => simple::check_data(o)?,
                ActionOpts::Vlan(o) => {
                    vlan::check(o)?;
                }
                ActionOpts::Skbmod(o) => skbmod::check_edit(o)?,
                _ => {}
            }
            if !ctx.replace {
                return Err(TcError::errno(Errno::EEXIST));
            }
            let est_active = matches!(&lock(&e.act).kind, Kind::Police(p) if p.has_estimator());
            let params = validate(spec, ctx, in_filter, false, est_active)?;
            return Ok(Prepared::Replace {
                act: e.act.clone(),
                params,
                cookie: spec.cookie.clone(),
            });
        }
        let params = validate(spec, ctx, in_filter, true, false)?;
        let offload = if ctx.bind {
            // A new action may not ask for what its filter does not, and
            // takes the filter's flags (tcf_action_init).
            if spec.offload & !ctx.offload != 0 {
                return Err(offload_mismatch());
            }
            spec.offload | ctx.offload
        } else if spec.offload & TCA_CLS_FLAGS_SKIP_SW != 0 {
            // `tcf_action_offload_add` finds no device to put it in.
            return Err(TcError::errno(Errno::EINVAL));
        } else {
            spec.offload
        };
        Ok(Prepared::Create {
            index: spec.index,
            params,
            cookie: spec.cookie.clone(),
            no_percpu: spec.no_percpu,
            offload,
        })
    }

    /// Commit a validated list: create, change or bind each action.
    pub(crate) fn commit(&mut self, list: PreparedList, user: bool, now: Time) -> TcResult<Exts> {
        let mut acts = Vec::with_capacity(list.items.len());
        for p in list.items {
            acts.push(match p {
                Prepared::Bind(a, offload) => {
                    {
                        let mut g = lock(&a);
                        if !g.user_ref {
                            g.offload |= offload;
                        }
                    }
                    a
                }
                Prepared::Replace {
                    act,
                    params,
                    cookie,
                } => {
                    {
                        let mut g = lock(&act);
                        apply(&mut g.kind, params, now, list.estimator);
                        if cookie.is_some() {
                            g.cookie = cookie;
                        }
                    }
                    act
                }
                Prepared::Create {
                    index,
                    params,
                    cookie,
                    no_percpu,
                    offload,
                } => {
                    let kind = params_kind(&params);
                    let index = if index == 0 {
                        self.lowest_free(kind)?
                    } else {
                        index
                    };
                    let seed = self.seed_for(kind, index);
                    let k = match params {
                        Params::Police(p) => {
                            Kind::Police(Box::new(police::Police::new(*p, now, list.estimator)))
                        }
                        Params::Gact(g) => Kind::Gact(gact::Gact::new(g, seed)),
                        Params::Mirred(m) => {
                            Kind::Mirred(mirred::Mirred::new(m, self.outbox.clone()))
                        }
                        Params::Skbedit(k) => Kind::Skbedit(skbedit::Skbedit::new(k)),
                        Params::Connmark(k) => Kind::Connmark(connmark::Connmark::new(k)),
                        Params::Ctinfo(k) => Kind::Ctinfo(ctinfo::Ctinfo::new(k)),
                        Params::Simple(k) => Kind::Simple(simple::Simple::new(k)),
                        Params::Csum(k) => Kind::Csum(csum::Csum::new(k)),
                        Params::Pedit(k) => Kind::Pedit(pedit::Pedit::new(k)),
                        Params::Nat(k) => Kind::Nat(nat::Nat::new(k)),
                        Params::Vlan(k) => Kind::Vlan(vlan::Vlan::new(k)),
                        Params::Mpls(k) => Kind::Mpls(mpls::Mpls::new(k)),
                        Params::Skbmod(k) => Kind::Skbmod(skbmod::Skbmod::new(k)),
                        Params::Gate(k) => Kind::Gate(gate::Gate::new(k, now)),
                    };
                    let act = Arc::new(Mutex::new(TcAction {
                        index,
                        user_ref: user,
                        offload,
                        bytes: 0,
                        packets: 0,
                        tm: ActionTm::new(now),
                        cookie,
                        no_percpu,
                        used_hw_stats: false,
                        kind: k,
                    }));
                    self.kinds
                        .entry(kind)
                        .or_default()
                        .insert(index, Entry { act: act.clone() });
                    act
                }
            });
        }
        Ok(Exts {
            actions: acts,
            old_police: list.old_police,
        })
    }

    fn lowest_free(&self, kind: &str) -> TcResult<u32> {
        let Some(m) = self.kinds.get(kind) else {
            return Ok(1);
        };
        let mut want = 1u32;
        for &i in m.keys() {
            if i > want {
                break;
            }
            if i == want {
                want = want.checked_add(1).ok_or(TcError::errno(Errno::ENOSPC))?;
            }
        }
        Ok(want)
    }

    /// `tc actions add` (`replace` false) and `tc actions change/replace`
    /// (`replace` true): create or change standalone actions. Returns their dumps.
    pub fn add(
        &mut self,
        specs: &[ActionSpec],
        replace: bool,
        now: Time,
    ) -> TcResult<Vec<ActionDump>> {
        let ctx = InitCtx {
            bind: false,
            replace,
            estimator: None,
            offload: 0,
        };
        let list = self.prepare(specs, None, ctx, false)?;
        let exts = self.commit(list, true, now)?;
        // `exts` holds one more clone of each action for the moment.
        Ok(exts
            .actions
            .iter()
            .enumerate()
            .map(|(i, a)| dump_shared(a, i as u32 + 1, 1))
            .collect())
    }

    fn kind_or_err(kind: &str, msg: &'static str) -> TcResult<&'static str> {
        known(kind).ok_or_else(|| TcError::inval(msg))
    }

    /// `tc actions get action KIND index N`.
    pub fn get(&mut self, kind: &str, index: u32) -> TcResult<ActionDump> {
        self.gc();
        let kind = Self::kind_or_err(kind, "Specified TC action kind not found")?;
        let e = self.find(kind, index).ok_or_else(|| {
            TcError::msg(Errno::ENOENT, "TC action with specified index not found")
        })?;
        Ok(dump_shared(&e.act, 1, 0))
    }

    /// `tc actions delete action KIND index N [action ...]`: all must exist;
    /// they are then deleted in order until one is still bound (EPERM).
    pub fn delete(&mut self, targets: &[(&str, u32)]) -> TcResult<()> {
        self.gc();
        let mut found = Vec::new();
        for &(kind, index) in targets.iter().take(TCA_ACT_MAX_PRIO) {
            let kind = Self::kind_or_err(kind, "Specified TC action kind not found")?;
            if self.find(kind, index).is_none() {
                return Err(TcError::msg(
                    Errno::ENOENT,
                    "TC action with specified index not found",
                ));
            }
            found.push((kind, index));
        }
        for (kind, index) in found {
            let Some(m) = self.kinds.get_mut(kind) else {
                continue;
            };
            let Some(e) = m.get(&index) else { continue };
            if counts(&e.act, 0).1 > 0 {
                return Err(TcError::msg(Errno::EPERM, "Failed to delete TC action"));
            }
            m.remove(&index);
        }
        Ok(())
    }

    /// `tc actions flush action KIND`: delete unbound actions in index order,
    /// stopping at the first bound one.
    pub fn flush(&mut self, kind: &str) -> TcResult<FlushReport> {
        self.gc();
        let kind = Self::kind_or_err(kind, "Cannot flush unknown TC action")?;
        let Some(m) = self.kinds.get_mut(kind) else {
            return Ok(FlushReport {
                deleted: 0,
                warning: None,
            });
        };
        let mut deleted = 0;
        let indices: Vec<u32> = m.keys().copied().collect();
        for i in indices {
            let bound = m.get(&i).is_some_and(|e| counts(&e.act, 0).1 > 0);
            if bound {
                if deleted == 0 {
                    return Err(TcError::errno(Errno::EPERM));
                }
                return Ok(FlushReport {
                    deleted,
                    warning: Some("Unable to flush all TC actions"),
                });
            }
            m.remove(&i);
            deleted += 1;
        }
        Ok(FlushReport {
            deleted,
            warning: None,
        })
    }

    /// `tc actions ls action KIND`: every action of the kind by index (an
    /// unknown kind lists nothing).
    pub fn list(&mut self, kind: &str) -> Vec<ActionDump> {
        self.gc();
        let Some(m) = known(kind).and_then(|k| self.kinds.get(k)) else {
            return Vec::new();
        };
        let mut changed = false;
        let dumps = m
            .values()
            .enumerate()
            .map(|(i, e)| {
                changed |= !std::mem::replace(&mut lock(&e.act).used_hw_stats, true);
                dump_shared(&e.act, i as u32, 0)
            })
            .collect();
        self.listing_changed |= changed;
        dumps
    }
}

/// A filter binding or creating an action whose offload flags do not fit its own.
fn offload_mismatch() -> TcError {
    TcError::inval("Mismatch between action and filter offload flags")
}

fn params_kind(p: &Params) -> &'static str {
    match p {
        Params::Police(_) => "police",
        Params::Gact(_) => "gact",
        Params::Mirred(_) => "mirred",
        Params::Skbedit(_) => "skbedit",
        Params::Connmark(_) => "connmark",
        Params::Ctinfo(_) => "ctinfo",
        Params::Simple(_) => "simple",
        Params::Csum(_) => "csum",
        Params::Pedit(_) => "pedit",
        Params::Nat(_) => "nat",
        Params::Vlan(_) => "vlan",
        Params::Mpls(_) => "mpls",
        Params::Skbmod(_) => "skbmod",
        Params::Gate(_) => "gate",
    }
}

fn validate(
    spec: &ActionSpec,
    ctx: InitCtx,
    in_filter: bool,
    creating: bool,
    est_active: bool,
) -> TcResult<Params> {
    if let Some(e) = ctx.estimator {
        e.build()?;
    }
    Ok(match &spec.opts {
        ActionOpts::Police(o) => {
            let have_est = ctx.estimator.is_some();
            Params::Police(Box::new(police::PoliceParams::validate(
                o, in_filter, have_est, creating, est_active,
            )?))
        }
        ActionOpts::Gact(o) => Params::Gact(gact::GactParams::validate(o, in_filter)?),
        ActionOpts::Mirred(o) => {
            Params::Mirred(mirred::MirredParams::validate(o, in_filter, creating)?)
        }
        ActionOpts::Skbedit(o) => Params::Skbedit(skbedit::SkbeditParams::validate(o, in_filter)?),
        ActionOpts::Connmark(o) => {
            Params::Connmark(connmark::ConnmarkParams::validate(o, in_filter)?)
        }
        ActionOpts::Ctinfo(o) => Params::Ctinfo(ctinfo::CtinfoParams::validate(o, in_filter)?),
        ActionOpts::Simple(o) => Params::Simple(simple::SimpleParams::validate(o, in_filter)?),
        ActionOpts::Csum(o) => Params::Csum(csum::CsumParams::validate(o, in_filter)?),
        ActionOpts::Pedit(o) => Params::Pedit(pedit::PeditParams::validate(o, in_filter)?),
        ActionOpts::Nat(o) => Params::Nat(nat::NatParams::validate(o, in_filter)?),
        ActionOpts::Vlan(o) => Params::Vlan(vlan::VlanParams::validate(o, in_filter)?),
        ActionOpts::Mpls(o) => Params::Mpls(mpls::MplsParams::validate(o, in_filter)?),
        ActionOpts::Skbmod(o) => Params::Skbmod(skbmod::SkbmodParams::validate(o, in_filter)?),
        ActionOpts::Gate(o) => Params::Gate(gate::GateParams::validate(o, in_filter, creating)?),
    })
}

fn apply(kind: &mut Kind, params: Params, now: Time, est: Option<EstimatorSpec>) {
    match (kind, params) {
        (Kind::Police(p), Params::Police(n)) => p.change(*n, now, est),
        (Kind::Gact(g), Params::Gact(n)) => g.change(n),
        (Kind::Mirred(m), Params::Mirred(n)) => m.change(n),
        (Kind::Skbedit(k), Params::Skbedit(n)) => k.change(n),
        (Kind::Connmark(k), Params::Connmark(n)) => k.change(n),
        (Kind::Ctinfo(k), Params::Ctinfo(n)) => k.change(n),
        (Kind::Simple(k), Params::Simple(n)) => k.change(n),
        (Kind::Csum(k), Params::Csum(n)) => k.change(n),
        (Kind::Pedit(k), Params::Pedit(n)) => k.change(n),
        (Kind::Nat(k), Params::Nat(n)) => k.change(n),
        (Kind::Vlan(k), Params::Vlan(n)) => k.change(n),
        (Kind::Mpls(k), Params::Mpls(n)) => k.change(n),
        (Kind::Skbmod(k), Params::Skbmod(n)) => k.change(n),
        (Kind::Gate(k), Params::Gate(n)) => k.change(n, now),
        // Replace is looked up by kind, so the kinds always agree.
        _ => {}
    }
}

/// Check a configured control action (`tcf_action_check_ctrlact`).
pub(crate) fn check_ctrlact(v: Verdict, in_filter: bool) -> TcResult<()> {
    match v {
        Verdict::Jump(n) | Verdict::GotoChain(n) if n > TC_ACT_EXT_VAL_MASK => {
            Err(TcError::inval("invalid control action"))
        }
        Verdict::GotoChain(_) if !in_filter => Err(TcError::inval("can't goto NULL proto/chain")),
        _ => Ok(()),
    }
}

/// A filter's actions (`struct tcf_exts`).
#[derive(Debug, Default)]
pub struct Exts {
    actions: Vec<SharedAction>,
    /// Created through the old `police` attribute (`TCA_OLD_COMPAT`).
    old_police: bool,
}

/// How many times `repeat` may rerun one action, and `jump` restart a list.
const ACT_TTL: u32 = 32;

impl Exts {
    /// True when the filter has no action.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// `tcf_exts_exec`/`tcf_action_exec`: run the actions in order.
    pub fn exec(&self, pkt: &mut Packet, now: Time) -> Verdict {
        if pkt.tc_skip_classify {
            pkt.tc_skip_classify = false;
            return Verdict::Ok;
        }
        let n = self.actions.len();
        let mut jump_ttl = ACT_TTL;
        let mut skip = 0u32;
        let mut ret = Verdict::Ok;
        'restart: loop {
            for a in &self.actions {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                let mut repeat_ttl = ACT_TTL;
                ret = loop {
                    let r = lock(a).act(pkt, now);
                    if r != Verdict::Repeat {
                        break r;
                    }
                    repeat_ttl -= 1;
                    if repeat_ttl == 0 {
                        return Verdict::Ok;
                    }
                };
                if let Verdict::Jump(j) = ret {
                    let j = j & 0x1ff;
                    if j == 0 || j as usize > n {
                        return Verdict::Ok;
                    }
                    jump_ttl -= 1;
                    if jump_ttl == 0 {
                        return Verdict::Ok;
                    }
                    skip = j;
                    continue 'restart;
                }
                if ret != Verdict::Pipe {
                    break;
                }
            }
            return ret;
        }
    }

    /// The actions' dumps (orders 1, 2, ...); for the old `police` attribute
    /// the single policer.
    pub fn dump(&self) -> Vec<ActionDump> {
        self.actions
            .iter()
            .enumerate()
            .map(|(i, a)| dump_shared(a, i as u32 + 1, 0))
            .collect()
    }

    /// True when these actions came from the old `police` attribute.
    pub fn is_old_police(&self) -> bool {
        self.old_police
    }

    /// The filter-level statistics the kernel adds for an old-style policer
    /// (`tcf_exts_dump_stats` in compat mode).
    pub fn compat_stats(&self) -> Option<ActionStats> {
        if !self.old_police {
            return None;
        }
        self.actions.first().map(|a| lock(a).stats())
    }

    /// Chains any of the actions may `goto`.
    pub fn goto_chains(&self) -> Vec<u32> {
        self.actions
            .iter()
            .filter_map(|a| match lock(a).kind.inner().control() {
                Verdict::GotoChain(n) => Some(n),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::gact::GactOpts;
    use super::*;

    fn gact(v: Verdict, index: u32) -> ActionSpec {
        ActionSpec {
            index,
            opts: ActionOpts::Gact(GactOpts {
                action: v,
                random: None,
            }),
            cookie: None,
            no_percpu: false,
            offload: 0,
        }
    }

    fn pkt() -> Packet {
        Packet::new(vec![0x45; 20], 100, crate::packet::ETH_P_IP)
    }

    #[test]
    fn indices_are_the_lowest_free_and_duplicates_are_refused() {
        let mut t = ActionTable::default();
        t.add(&[gact(Verdict::Ok, 1)], false, Time(0)).unwrap();
        let d = t.add(&[gact(Verdict::Shot, 0)], false, Time(0)).unwrap();
        assert_eq!(d[0].index, 2);
        t.add(&[gact(Verdict::Shot, 7)], false, Time(0)).unwrap();
        let d = t.add(&[gact(Verdict::Shot, 0)], false, Time(0)).unwrap();
        assert_eq!(d[0].index, 3);
        // Same index without replace: "RTNETLINK answers: File exists".
        let e = t
            .add(&[gact(Verdict::Shot, 1)], false, Time(0))
            .unwrap_err();
        assert_eq!(e, TcError::errno(Errno::EEXIST));
        // Replace changes it in place.
        t.add(&[gact(Verdict::Pipe, 1)], true, Time(0)).unwrap();
        let g = t.get("gact", 1).unwrap();
        assert_eq!(
            g.opts,
            ActionOpts::Gact(GactOpts {
                action: Verdict::Pipe,
                random: None
            })
        );
        assert_eq!((g.refcnt, g.bindcnt), (1, 0));
        let idx: Vec<u32> = t.list("gact").iter().map(|d| d.index).collect();
        assert_eq!(idx, vec![1, 2, 3, 7]);
    }

    #[test]
    fn bound_actions_cannot_be_deleted_and_inline_ones_vanish_with_their_filter() {
        let mut t = ActionTable::default();
        t.add(&[gact(Verdict::Ok, 5)], false, Time(0)).unwrap();
        let bind = InitCtx {
            bind: true,
            replace: false,
            estimator: None,
            offload: 0,
        };
        // A filter binds index 5 (its parameters are ignored) and creates index 6 inline.
        let l = t
            .prepare(
                &[gact(Verdict::Shot, 5), gact(Verdict::Shot, 6)],
                None,
                bind,
                true,
            )
            .unwrap();
        let exts = t.commit(l, false, Time(0)).unwrap();
        let d5 = t.get("gact", 5).unwrap();
        assert_eq!((d5.refcnt, d5.bindcnt), (2, 1));
        assert_eq!(
            d5.opts,
            ActionOpts::Gact(GactOpts {
                action: Verdict::Ok,
                random: None
            })
        );
        let d6 = t.get("gact", 6).unwrap();
        assert_eq!((d6.refcnt, d6.bindcnt), (1, 1));
        let e = t.delete(&[("gact", 5)]).unwrap_err();
        assert_eq!(e, TcError::msg(Errno::EPERM, "Failed to delete TC action"));
        assert_eq!(t.flush("gact").unwrap_err(), TcError::errno(Errno::EPERM));
        drop(exts);
        // The inline action goes with the filter; the standalone one stays.
        assert_eq!(t.get("gact", 6).unwrap_err().errno, Errno::ENOENT);
        assert_eq!(t.get("gact", 5).unwrap().bindcnt, 0);
        t.delete(&[("gact", 5)]).unwrap();
        assert!(t.list("gact").is_empty());
        assert_eq!(
            t.get("ife", 1).unwrap_err().extack.as_deref(),
            Some("Specified TC action kind not found")
        );
        assert_eq!(
            t.flush("bogus").unwrap_err().extack.as_deref(),
            Some("Cannot flush unknown TC action")
        );
    }

    #[test]
    fn binding_checks_offload_flags_as_tcf_action_init_does() {
        let ctx = |offload| InitCtx {
            bind: true,
            replace: false,
            estimator: None,
            offload,
        };
        let mut t = ActionTable::default();
        // A standalone action has no flags: a skip_hw filter may not bind it
        // (tdc matchall 0eeb), a filter without flags may.
        t.add(&[gact(Verdict::Ok, 199)], false, Time(0)).unwrap();
        let e = t
            .prepare(
                &[gact(Verdict::Ok, 199)],
                None,
                ctx(TCA_CLS_FLAGS_SKIP_HW),
                true,
            )
            .unwrap_err();
        assert_eq!(e.errno, Errno::EINVAL);
        assert_eq!(
            e.extack.as_deref(),
            Some("Mismatch between action and filter offload flags")
        );
        let l = t.prepare(&[gact(Verdict::Ok, 199)], None, ctx(0), true);
        let _standalone = t.commit(l.unwrap(), false, Time(0)).unwrap();
        // An action a skip_hw filter created keeps skip_hw: a filter without
        // it may not bind it, one with more flags may.
        let l = t.prepare(
            &[gact(Verdict::Ok, 7)],
            None,
            ctx(TCA_CLS_FLAGS_SKIP_HW),
            true,
        );
        let _inline = t.commit(l.unwrap(), false, Time(0)).unwrap();
        let e = t
            .prepare(&[gact(Verdict::Ok, 7)], None, ctx(0), true)
            .unwrap_err();
        assert_eq!(e.errno, Errno::EINVAL);
        let both = TCA_CLS_FLAGS_SKIP_HW | TCA_CLS_FLAGS_SKIP_SW;
        assert!(t
            .prepare(&[gact(Verdict::Ok, 7)], None, ctx(both), true)
            .is_ok());
    }

    #[test]
    fn exec_follows_pipe_jump_and_stops_at_the_first_final_verdict() {
        let mut t = ActionTable::default();
        let bind = InitCtx {
            bind: true,
            replace: false,
            estimator: None,
            offload: 0,
        };
        let l = t
            .prepare(
                &[
                    gact(Verdict::Pipe, 0),
                    gact(Verdict::Jump(2), 0),
                    gact(Verdict::Shot, 0),
                    gact(Verdict::Ok, 0),
                ],
                None,
                bind,
                true,
            )
            .unwrap();
        let exts = t.commit(l, false, Time(0)).unwrap();
        // pipe, then jump 2 restarts the list skipping two actions, then shot;
        // each of the first three runs once and the last never.
        assert_eq!(exts.exec(&mut pkt(), Time(1)), Verdict::Shot);
        let d = exts.dump();
        assert_eq!(d[0].stats.packets, 1);
        assert_eq!(d[1].stats.packets, 1);
        assert_eq!(d[2].stats.packets, 1);
        assert_eq!(d[2].stats.drops, 1);
        assert_eq!(d[3].stats.packets, 0);
        // No actions at all: ok.
        assert_eq!(Exts::default().exec(&mut pkt(), Time(1)), Verdict::Ok);
        // A jump past the end stops the pipeline with ok.
        let l = t
            .prepare(&[gact(Verdict::Jump(5), 0)], None, bind, true)
            .unwrap();
        let exts = t.commit(l, false, Time(0)).unwrap();
        assert_eq!(exts.exec(&mut pkt(), Time(1)), Verdict::Ok);
    }

    #[test]
    fn goto_chain_needs_a_filter() {
        let mut t = ActionTable::default();
        let e = t
            .add(&[gact(Verdict::GotoChain(42), 0)], false, Time(0))
            .unwrap_err();
        assert_eq!(e, TcError::inval("can't goto NULL proto/chain"));
        let e = t
            .add(&[gact(Verdict::Jump(1 << 28), 0)], false, Time(0))
            .unwrap_err();
        assert_eq!(e, TcError::inval("invalid control action"));
        assert!(t.list("gact").is_empty());
    }

    #[test]
    fn times_are_reported_in_user_hz_ticks() {
        let tm = ActionTm {
            install: Time(0),
            lastuse: Time(2_000_000_000),
            firstuse: Some(Time(1_000_000_000)),
        };
        let t = tm.at(Time(3_000_000_000));
        assert_eq!((t.install, t.lastuse, t.firstuse), (300, 100, 200));
    }
}
