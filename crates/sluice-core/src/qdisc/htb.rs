//! HTB, the hierarchical token bucket.
//!
//! Modelled on net/sched/sch_htb.c (Linux 6.18) and iproute2's tc/q_htb.c.
//!
//! # The algorithm
//! Classes form a tree of at most 8 levels. Every class has two token buckets
//! kept as time, as in TBF: `tokens` fill at `rate` up to `buffer`, `ctokens`
//! at `ceil` up to `cbuffer`. From them a class has a *mode*:
//! `CanSend` (tokens ≥ 0 and ctokens ≥ 0: it may send on its own rate),
//! `MayBorrow` (tokens < 0 but ctokens ≥ 0: it may send only if an ancestor
//! lends), `CantSend` (ctokens < 0). Leaves carry a queue (a child qdisc,
//! pfifo by default); inner classes carry none. Levels count from the leaves:
//! every leaf is at level 0, a root inner class at level 7, an inner class one
//! below its parent.
//!
//! Active leaves (those with packets) are linked into a "feed" structure: a
//! class in `CanSend` sits in the *row* of its level for each priority it is
//! active in; a class in `MayBorrow` sits in its parent's *feed* tree for that
//! priority, and the parent becomes active in that priority in turn. Rows and
//! feeds are ordered by class id (the kernel's rb-trees). As every class of
//! one HTB has the qdisc's major, that is the order of the minors, and a row
//! or feed here is a bitmap indexed by minor, [`MinorSet`]: a class enters
//! or leaves with a bit flip (they do many times a millisecond), the next
//! class in order is a find-first-set away, and no memory is allocated once
//! the bitmap has grown; [`Htb::by_minor`] maps a minor back to its class.
//! Dequeue scans levels from 0 upwards and, within a level, priorities from 0
//! (highest) upwards; the first non-empty row yields a class, and following
//! feed pointers down from it gives the leaf to serve. A leaf found through a
//! row at level L sends on the tokens of the level-L class it hangs from: so
//! traffic within the guaranteed rate (level 0) always goes first, and excess
//! bandwidth goes to the lowest priority number first, then is shared in
//! deficit round robin by `quantum` between classes of one priority.
//! Each row and feed keeps a round-robin pointer (`ptr`), and a class id
//! (`last_ptr_id`) to find its place again when the class it pointed to left.
//!
//! After sending, `charge` walks from the leaf to the root: every class pays
//! `ceil` tokens; classes at or above the lending level pay `rate` tokens,
//! those below it (which borrowed) only have their clock moved. Token debt is
//! capped at `mbuffer` (60 s). Classes whose mode drops below `CanSend` go on
//! their level's wait queue keyed by the time their mode will change; dequeue
//! first applies the due events (at most a bounded number per level per call),
//! and when nothing may be sent answers [`Dequeue::Wait`] at the nearest event
//! (the kernel's watchdog, `near_ev_cache`), or at most 5 s ahead.
//!
//! Packets go to a class by, in order: `skb->priority` naming a leaf (or the
//! qdisc itself, `X:0`, for the *direct* queue; or an inner class, whose
//! filters then run); the qdisc's filters, then those of the inner classes
//! they point to; otherwise the `default` class. If that names no leaf, the
//! packet goes to the direct queue, which is served before all classes and
//! holds `direct_qlen` packets.
//!
//! # Invariants
//! - a leaf is linked (in one priority) iff its queue is non-empty, except
//!   after its qdisc lost packets by itself: it is then unlinked when dequeue
//!   next finds it empty (as in the kernel);
//! - a class is on its level's wait queue iff its mode is not `CanSend`;
//! - `qlen` = direct queue + every leaf's queue, equal to the wrapping node's.
//!
//! # Deviations
//! - Time comes from the caller; a class created between dequeues takes the
//!   time of the last call as its checkpoint (the kernel reads the clock). As
//!   a new class starts with full buckets, this changes nothing observable.
//! - The kernel stops applying events after 2 jiffies of CPU time; sluice
//!   stops after [`EVENTS_PER_DEQUEUE`] events per level (the bound older
//!   kernels used), then asks to be called again at once.
//! - A leaf qdisc that answers `Wait(t)` (e.g. a tbf below a class) arms its
//!   own watchdog in the kernel; here HTB's answer is the earlier of its own
//!   next event and the children's.
//! - HTB learns its handle from its node ([`Qdisc::set_handle`]); an `Htb`
//!   used without a node learns the major from its first class instead
//!   (before that no class exists and every packet goes direct, as in the kernel).
//! - `htb_hysteresis` is a module parameter (default 0): [`Htb::set_hysteresis`].
//! - `new` also accepts the dumped version (3.17) so a dump can be re-created.
//! - Offload needs hardware; it is refused as on a device without it.
//! - Per-class rate estimators are not kept (HTB's default `htb_rate_est` is 0).
//! - Packets purged from a leaf by graft, delete or a leaf turning inner leave
//!   HTB's own count at once; the kernel also takes them off every ancestor's
//!   backlog and counts them as drops there. Classful operations get no
//!   [`Cx`], so HTB reports them through `Classful::take_purged`.
//!
//! # Checked against the kernel
//! On Linux 6.18 with iproute2 6.1 (veth pairs in namespaces): the class
//! listing order, the tree-depth, parent and class-id rules, the quantum
//! warnings, tokens after a packet, and — for bursts through one- and
//! two-level trees — the exact order packets left in and every class's
//! lended, borrowed and overlimits counters (see the tests).

#[allow(dead_code)]
use super::class_hash::ClassHash;
use super::fifo::Fifo;
use super::{
    ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts, XStats,
};
use crate::cls::{Block, Verdict};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::rate::{RateCfg, RateSpec};
use crate::stats::{DropReason, Stats};
use crate::time::{Time, PSCHED_SHIFT};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Priorities a leaf may have (`TC_HTB_NUMPRIO`).
pub const TC_HTB_NUMPRIO: usize = 8;
/// Levels of the class tree (`TC_HTB_MAXDEPTH`).
pub const TC_HTB_MAXDEPTH: usize = 8;
/// The version the kernel dumps (`HTB_VER`, printed "ver 3.17").
pub const HTB_VER: u32 = 0x30011;
/// The protocol version tc sends and the kernel requires (`HTB_VER >> 16`).
pub const TC_HTB_PROTOVER: u32 = 3;
/// An entry of [`Htb::by_minor`] naming no class.
const NO_SLOT: Ix = usize::MAX;
/// `Class::pq_seq` of a class not in its level's wait queue.
const NOT_WAITING: u64 = u64::MAX;
/// Longest token debt or credit a class accumulates, 60 s (`mbuffer`).
const MBUFFER_NS: i64 = 60_000_000_000;
/// Events applied per level per dequeue before asking to be called again.
pub const EVENTS_PER_DEQUEUE: usize = 500;
/// Default quantum bounds when derived from rate / r2q.
const QUANTUM_MIN: u64 = 1000;
const QUANTUM_MAX: u64 = 200_000;
const NSEC_PER_SEC: i64 = 1_000_000_000;

/// `TCA_HTB_INIT` (`struct tc_htb_glob`) and `TCA_HTB_DIRECT_QLEN`: the qdisc's options.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HtbOpts {
    /// `r2q`: a leaf's default quantum is its rate in bytes/s divided by this (values < 1 become 1).
    pub rate2quantum: u32,
    /// `default`: minor of the class unclassified packets go to (0: the direct queue).
    pub defcls: u32,
    /// `debug`: accepted and ignored; the kernel dumps 0.
    pub debug: u32,
    /// Protocol version: tc sends 3, the kernel dumps [`HTB_VER`].
    pub version: u32,
    /// Packets that went through the direct queue (dump only: `direct_packets_stat`).
    pub direct_pkts: u32,
    /// `direct_qlen`: limit of the direct queue in packets; `None` = the device's txqueuelen.
    pub direct_qlen: Option<u32>,
    /// `offload` (`TCA_HTB_OFFLOAD`): hardware offload, refused.
    pub offload: bool,
}

impl Default for HtbOpts {
    /// What `tc qdisc add ... htb` sends with no options.
    fn default() -> Self {
        HtbOpts {
            rate2quantum: 10,
            defcls: 0,
            debug: 0,
            version: TC_HTB_PROTOVER,
            direct_pkts: 0,
            direct_qlen: None,
            offload: false,
        }
    }
}

/// `TCA_HTB_PARMS` (`struct tc_htb_opt`) with `TCA_HTB_RATE64`/`CEIL64` folded
/// into the 64-bit rates: a class's options as tc sends them and the kernel dumps them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HtbClassOpts {
    /// Guaranteed rate, with overhead, mpu and link layer.
    pub rate: RateSpec,
    /// Ceiling rate (tc sends the rate when `ceil` is not given).
    pub ceil: RateSpec,
    /// Depth of the rate bucket in psched ticks (tc: the time `burst` takes at `rate`).
    pub buffer: u32,
    /// Depth of the ceil bucket in psched ticks (tc: the time `cburst` takes at `ceil`).
    pub cbuffer: u32,
    /// DRR quantum in bytes; 0 = rate / r2q, clamped to 1000..=200000.
    pub quantum: u32,
    /// Priority 0 (served first) .. 7; larger values become 7.
    pub prio: u32,
    /// The class's level (dump only; ignored on input).
    pub level: u32,
}

/// `struct tc_htb_xstats`: per-class statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbClassXstats {
    /// Packets this class lent (sent on its own rate at the level it serves).
    pub lended: u32,
    /// Packets this class sent on an ancestor's tokens.
    pub borrowed: u32,
    /// Packets too big for the rate table (always 0 since rate tables went away).
    pub giants: u32,
    /// Rate tokens in psched ticks, as of the last charge.
    pub tokens: i32,
    /// Ceil tokens in psched ticks, as of the last charge.
    pub ctokens: i32,
}

/// A class's mode (`enum htb_cmode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    CantSend,
    MayBorrow,
    CanSend,
}

/// A class's place in [`Htb::slots`]. Rows, feeds, the wait queues and
/// parent links name classes by slot, so the scheduler indexes a vector;
/// class ids are looked up in the class hash only where a packet or a tc
/// command names a class.
type Ix = usize;

/// The minor of a class id. All classes of one HTB share the major, so
/// ordering classes by minor is ordering them by class id.
fn minor(classid: u32) -> u32 {
    classid & 0xFFFF
}

/// A set of classes of one HTB, by the minor of their class id, in
/// ascending order: a bitmap. Rows and feeds gain and lose a member twice a
/// packet under load (`sluice bench qdisc htb`), so both are a bit flip, and
/// finding the next member (the round-robin step) is a find-first-set.
/// Minors below 64 (1:1 to 1:3f, where most trees number their classes)
/// have their word in place, so the common step reaches no further memory;
/// the others live in words grown to the largest minor that was ever a
/// member (and kept), found through a summary word per 4096 minors.
#[derive(Clone, Debug, Default)]
struct MinorSet {
    /// Bit `m`: minor `m` (< 64) is a member.
    low: u64,
    /// Bit `m % 64` of word `m / 64 - 1`: minor `m` (≥ 64) is a member.
    high: Vec<u64>,
    /// Bit `w % 64` of word `w / 64`: `high[w]` is not zero.
    summary: Vec<u64>,
    len: u32,
}

impl MinorSet {
    fn is_empty(&self) -> bool {
        self.len == 0
    }
    #[inline(always)]
    fn insert(&mut self, m: u32) {
        if m < 64 {
            let bit = 1 << m;
            if self.low & bit == 0 {
                self.low |= bit;
                self.len += 1;
            }
            return;
        }
        self.insert_high(m);
    }
    // The paths for minors of 64 and more are kept out of line, so that the
    // compiler does not prepare their masks on the common path.
    #[cold]
    #[inline(never)]
    fn insert_high(&mut self, m: u32) {
        let w = (m >> 6) as usize - 1;
        if w >= self.high.len() {
            self.high.resize(w + 1, 0);
            self.summary.resize((w >> 6) + 1, 0);
        }
        let bit = 1 << (m & 63);
        if self.high[w] & bit == 0 {
            self.high[w] |= bit;
            self.summary[w >> 6] |= 1 << (w & 63);
            self.len += 1;
        }
    }
    #[inline(always)]
    fn remove(&mut self, m: u32) {
        if m < 64 {
            let bit = 1 << m;
            if self.low & bit != 0 {
                self.low &= !bit;
                self.len -= 1;
            }
            return;
        }
        self.remove_high(m);
    }
    #[cold]
    #[inline(never)]
    fn remove_high(&mut self, m: u32) {
        let w = (m >> 6) as usize - 1;
        let bit = 1 << (m & 63);
        if let Some(word) = self.high.get_mut(w).filter(|word| **word & bit != 0) {
            *word &= !bit;
            if *word == 0 {
                self.summary[w >> 6] &= !(1 << (w & 63));
            }
            self.len -= 1;
        }
    }
    fn first(&self) -> Option<u32> {
        self.at_or_after(0)
    }
    /// The smallest member `>= m`.
    #[inline(always)]
    fn at_or_after(&self, m: u32) -> Option<u32> {
        if m < 64 {
            let here = self.low & (!0 << m);
            if here != 0 {
                return Some(here.trailing_zeros());
            }
            return self.high_from(0);
        }
        self.at_or_after_high(m)
    }
    #[cold]
    #[inline(never)]
    fn at_or_after_high(&self, m: u32) -> Option<u32> {
        let w = (m >> 6) as usize - 1;
        let here = self.high.get(w)? & (!0 << (m & 63));
        if here != 0 {
            return Some((((w + 1) as u32) << 6) | here.trailing_zeros());
        }
        self.high_from(w + 1)
    }
    /// The smallest member in `high[w]` or after, found through the summary.
    fn high_from(&self, w: usize) -> Option<u32> {
        let mut s = w >> 6;
        let mut bits = self.summary.get(s)? & (!0 << (w & 63));
        while bits == 0 {
            s += 1;
            bits = *self.summary.get(s)?;
        }
        let w = (s << 6) | bits.trailing_zeros() as usize;
        Some((((w + 1) as u32) << 6) | self.high[w].trailing_zeros())
    }
    /// The smallest member `> m`.
    #[inline]
    fn after(&self, m: u32) -> Option<u32> {
        self.at_or_after(m + 1)
    }
}

/// A row or feed for one priority (`struct htb_prio`): active classes by
/// minor, the round-robin pointer (a minor), and the class id to resume
/// from when the pointer was lost.
#[derive(Clone, Debug, Default)]
struct PrioFeed {
    set: MinorSet,
    ptr: Option<u32>,
    last_ptr_id: u32,
}

impl PrioFeed {
    /// `htb_next_rb_node`: move the pointer to the next class, or off the end.
    #[inline(always)]
    fn advance(&mut self) {
        if let Some(cur) = self.ptr {
            self.ptr = self.set.after(cur);
        }
    }
}

/// An entry of a wait queue: the time of the class's mode change, a
/// sequence number (insertion order, which breaks ties as the kernel's
/// rb-tree does: an equal key goes after) and the class's slot, packed into
/// one integer in that order of significance, so that the heap compares
/// entries in one step and moves 16 bytes. Times lie in 0..=`i64::MAX`;
/// slots need [`SLOT_BITS`] (a qdisc has at most 65 535 classes), which
/// leaves the sequence number 47 bits ([`Htb::renumber_waits`] starts it
/// over before it runs out).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct WaitEntry(u128);

/// Bits of a [`WaitEntry`] holding the slot.
const SLOT_BITS: u32 = 17;
/// The first sequence number a [`WaitEntry`] cannot hold.
const SEQ_LIMIT: u64 = 1 << (64 - SLOT_BITS);

impl WaitEntry {
    fn new(key: i64, seq: u64, ix: Ix) -> WaitEntry {
        debug_assert!(key >= 0 && seq < SEQ_LIMIT && ix < 1 << SLOT_BITS);
        WaitEntry(((key as u128) << 64) | ((seq as u128) << SLOT_BITS) | ix as u128)
    }
    fn key(self) -> i64 {
        (self.0 >> 64) as i64
    }
    fn seq(self) -> u64 {
        (self.0 as u64) >> SLOT_BITS
    }
    fn ix(self) -> Ix {
        (self.0 as usize) & ((1 << SLOT_BITS) - 1)
    }
}

/// One level of the scheduler (`struct htb_level`): its wait queue and rows.
#[derive(Debug, Default)]
struct Level {
    /// Classes waiting for a mode change, earliest (time, insertion order)
    /// first. Removal is lazy: an entry counts only while its class still
    /// carries the entry's sequence number in `pq_seq` (see `wait_head`);
    /// sequence numbers are not reused while an entry may hold them, so a
    /// slot reused by a new class cannot revive an old entry.
    wait_pq: BinaryHeap<Reverse<WaitEntry>>,
    rows: [PrioFeed; TC_HTB_NUMPRIO],
}

/// One class (`struct htb_class`). Lengths of time are nanoseconds.
#[derive(Debug)]
struct Class {
    classid: u32,
    /// The parent's slot.
    parent: Option<Ix>,
    children: u32,
    level: usize,
    // Parameters.
    rate: RateCfg,
    ceil: RateCfg,
    buffer_ns: i64,
    cbuffer_ns: i64,
    mbuffer_ns: i64,
    prio: u32,
    quantum: i32,
    // Token state.
    tokens: i64,
    ctokens: i64,
    t_c: i64,
    cmode: Mode,
    // Scheduling state.
    prio_activity: u8,
    pq_seq: u64,
    deficit: [i32; TC_HTB_MAXDEPTH],
    /// An inner class's feeds, one per priority; a leaf has none (the
    /// kernel keeps a class's leaf and inner state in one union), which
    /// keeps a tree of thousands of leaves small.
    inner: Option<Box<[PrioFeed; TC_HTB_NUMPRIO]>>,
    leaf: Option<QdiscNode>,
    block: Block,
    // Counters.
    bytes: u64,
    packets: u64,
    drops: u32,
    overlimits: u32,
    lends: u32,
    borrows: u32,
    giants: u32,
}

impl Class {
    /// The feed of priority `prio` into this inner class.
    #[inline(always)]
    fn feed(&mut self, prio: usize) -> &mut PrioFeed {
        &mut self.inner.get_or_insert_with(Default::default)[prio]
    }
}

/// Where a packet goes (`htb_classify`'s answer).
enum Target {
    Direct,
    Class(Ix),
    Drop(DropReason),
}

/// What the walks up the tree need of the class they start from: where it
/// links in, its mode and its active priorities (`prio_activity`).
#[derive(Clone, Copy)]
struct Link {
    id: u32,
    level: usize,
    mode: Mode,
    parent: Option<Ix>,
    mask: u8,
}

impl Link {
    fn of(c: &Class) -> Link {
        Link {
            id: c.classid,
            level: c.level,
            mode: c.cmode,
            parent: c.parent,
            mask: c.prio_activity,
        }
    }
}

/// The validated qdisc parameters.
#[derive(Clone, Copy, Debug)]
struct HtbParams {
    rate2quantum: u32,
    defcls: u32,
    direct_qlen: u32,
}

/// The HTB qdisc.
#[derive(Debug)]
pub struct Htb {
    params: HtbParams,
    major: Option<u16>,
    /// Class id -> slot, in the kernel's walk order (the control plane's index).
    classes: ClassHash<Ix>,
    /// The classes, by slot; a deleted class leaves `None`, reused by the next.
    slots: Vec<Option<Class>>,
    /// Empty slots.
    free: Vec<Ix>,
    /// Minor -> slot of every class ([`NO_SLOT`] for none): how the
    /// scheduler finds the members of a [`MinorSet`], and [`Htb::find`] a class.
    by_minor: Vec<Ix>,
    block: Block,
    direct: VecDeque<Packet>,
    direct_pkts: u32,
    overlimits: u32,
    /// Packets queued: direct queue plus every leaf.
    qlen: u64,
    /// Time of the current (or last) call, in ns.
    now: i64,
    near_ev_cache: [i64; TC_HTB_MAXDEPTH],
    row_mask: [u8; TC_HTB_MAXDEPTH],
    levels: [Level; TC_HTB_MAXDEPTH],
    pq_seq: u64,
    hysteresis: bool,
    warned_too_many_events: bool,
    warning: Option<String>,
    purged: (u64, u64),
    child_wait: Option<Time>,
    /// The device's txqueuelen as last seen (limit of default leaves).
    txqueuelen: u32,
}

fn einval() -> TcError {
    TcError::errno(Errno::EINVAL)
}

/// The priorities set in `mask`, lowest first.
fn bits(mask: u8) -> Bits {
    Bits(mask)
}

/// Iterator over the set bits of a priority mask (one step per set bit).
struct Bits(u8);

impl Iterator for Bits {
    type Item = usize;
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let p = self.0.trailing_zeros() as usize;
        self.0 &= self.0 - 1;
        Some(p)
    }
}

fn time_ns(t: Time) -> i64 {
    t.0.min(i64::MAX as u64) as i64
}

impl Htb {
    /// `htb_init`: validate the options and build an empty qdisc.
    pub fn new(opts: &HtbOpts, dev: &DevInfo) -> TcResult<Self> {
        let params = Self::validate(opts, dev)?;
        Ok(Htb {
            params,
            major: None,
            classes: ClassHash::new(),
            slots: Vec::new(),
            free: Vec::new(),
            by_minor: Vec::new(),
            block: Block::default(),
            direct: VecDeque::new(),
            direct_pkts: 0,
            overlimits: 0,
            qlen: 0,
            now: 0,
            near_ev_cache: [0; TC_HTB_MAXDEPTH],
            row_mask: [0; TC_HTB_MAXDEPTH],
            levels: Default::default(),
            pq_seq: 0,
            hysteresis: false,
            warned_too_many_events: false,
            warning: None,
            purged: (0, 0),
            child_wait: None,
            txqueuelen: dev.default_qlen(),
        })
    }

    fn validate(opts: &HtbOpts, dev: &DevInfo) -> TcResult<HtbParams> {
        // The kernel requires version 3; the dumped 3.17 is accepted so a dump re-creates.
        if opts.version != TC_HTB_PROTOVER && opts.version != HTB_VER {
            return Err(einval());
        }
        if opts.offload {
            // On a root qdisc; below a class the kernel first says
            // "HTB must be the root qdisc to use offload" (see [`Htb::offload_error`]).
            return Err(Self::offload_error(true));
        }
        Ok(HtbParams {
            rate2quantum: opts.rate2quantum.max(1),
            defcls: opts.defcls,
            direct_qlen: opts.direct_qlen.unwrap_or(dev.default_qlen()),
        })
    }

    /// The kernel's refusal of `offload`, which depends on where the qdisc goes.
    pub fn offload_error(is_root: bool) -> TcError {
        if is_root {
            TcError::msg(
                Errno::EOPNOTSUPP,
                "hw-tc-offload ethtool feature flag must be on",
            )
        } else {
            TcError::msg(
                Errno::EOPNOTSUPP,
                "HTB must be the root qdisc to use offload",
            )
        }
    }

    /// The refusal of `tc class del` on a class that has children or that
    /// filters point to (`htb_delete`).
    pub fn class_in_use_error() -> TcError {
        TcError::msg(Errno::EBUSY, "HTB class in use")
    }

    /// Turn mode hysteresis on or off (the `htb_hysteresis` module parameter, default off).
    pub fn set_hysteresis(&mut self, on: bool) {
        self.hysteresis = on;
    }

    fn full_id(&self, minor: u16) -> Option<u32> {
        self.major.map(|m| Handle::new(m, minor).0)
    }

    /// The qdisc's own handle `X:0`, once known.
    fn handle(&self) -> Option<u32> {
        self.full_id(0)
    }

    /// The slot of class `id` (`htb_find`), through [`Htb::by_minor`].
    fn find(&self, id: u32) -> Option<Ix> {
        if self.major != Some(Handle(id).major()) {
            return None;
        }
        let ix = *self.by_minor.get(minor(id) as usize)?;
        (ix != NO_SLOT).then_some(ix)
    }

    /// The class with id `id`.
    fn by_id(&self, id: u32) -> Option<&Class> {
        self.find(id).and_then(|ix| self.cl(ix))
    }

    fn cl(&self, ix: Ix) -> Option<&Class> {
        self.slots.get(ix).and_then(Option::as_ref)
    }

    fn cl_mut(&mut self, ix: Ix) -> Option<&mut Class> {
        self.slots.get_mut(ix).and_then(Option::as_mut)
    }

    /// Classes in the kernel's walk order (class hash order).
    fn walk(&self) -> impl Iterator<Item = &Class> {
        self.classes.iter().filter_map(|(_, &ix)| self.cl(ix))
    }

    // ----- classification -------------------------------------------------

    /// `htb_classify`.
    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Target {
        let handle = self.handle();
        if handle == Some(pkt.priority) {
            return Target::Direct;
        }
        // `None` = the qdisc's own filters.
        let mut owner: Option<Ix> = None;
        if let Some(ix) = self.find(pkt.priority) {
            if self.cl(ix).is_some_and(|c| c.level == 0) {
                return Target::Class(ix);
            }
            owner = Some(ix);
        }
        let mut hops = 0;
        loop {
            let block = match owner {
                None => &mut self.block,
                Some(ix) => match self.cl_mut(ix) {
                    Some(c) => &mut c.block,
                    None => break,
                },
            };
            let Some(res) = block.classify(pkt, now) else {
                break;
            };
            match res.verdict {
                Verdict::Queued | Verdict::Stolen | Verdict::Trap => {
                    return Target::Drop(DropReason::Stolen)
                }
                Verdict::Shot => return Target::Drop(DropReason::Action),
                Verdict::Continue => break,
                _ => {}
            }
            if handle == Some(res.classid.0) {
                return Target::Direct;
            }
            let Some(ix) = self.find(res.classid.0) else {
                break;
            };
            if self.cl(ix).is_some_and(|c| c.level == 0) {
                return Target::Class(ix);
            }
            hops += 1;
            if hops > TC_HTB_MAXDEPTH {
                // "htb: classify loop detected, dropping packet"
                return Target::Drop(DropReason::Unclassified);
            }
            owner = Some(ix);
        }
        let default = self
            .major
            .map(|m| Handle::new(m, self.params.defcls as u16).0);
        match default.and_then(|d| self.find(d)) {
            Some(ix) if self.cl(ix).is_some_and(|c| c.level == 0) => Target::Class(ix),
            _ => Target::Direct,
        }
    }

    // ----- rows, feeds and the wait queue ----------------------------------

    /// `htb_add_to_wait_tree`: the class changes mode `delay` ns from now.
    #[inline(always)]
    fn add_to_wait_tree(&mut self, ix: Ix, delay: i64) {
        let now = self.now;
        let mut key = now.saturating_add(delay).max(0);
        if key == now {
            key = key.saturating_add(1);
        }
        if self.pq_seq >= SEQ_LIMIT {
            self.renumber_waits();
        }
        let seq = self.pq_seq;
        self.pq_seq += 1;
        let Some(c) = self.cl_mut(ix) else { return };
        c.pq_seq = seq;
        let level = c.level;
        if self.near_ev_cache[level] > key {
            self.near_ev_cache[level] = key;
        }
        let pq = &mut self.levels[level].wait_pq;
        pq.push(Reverse(WaitEntry::new(key, seq, ix)));
        if pq.len() > 2 * self.classes.len() + 64 {
            // Shed the entries of classes that left the queue meanwhile.
            let slots = &self.slots;
            pq.retain(|Reverse(e)| Self::live(slots, *e));
        }
    }

    /// Does wait-queue entry `e` still stand for its class?
    fn live(slots: &[Option<Class>], e: WaitEntry) -> bool {
        slots[e.ix()].as_ref().is_some_and(|c| c.pq_seq == e.seq())
    }

    /// Give the waiting classes new sequence numbers from 0, in queue order,
    /// and drop stale entries: once in 2^47 insertions.
    #[cold]
    fn renumber_waits(&mut self) {
        let mut seq = 0;
        for level in 0..TC_HTB_MAXDEPTH {
            let mut live: Vec<WaitEntry> = std::mem::take(&mut self.levels[level].wait_pq)
                .into_iter()
                .map(|Reverse(e)| e)
                .filter(|e| Self::live(&self.slots, *e))
                .collect();
            live.sort_unstable();
            for e in &mut live {
                *e = WaitEntry::new(e.key(), seq, e.ix());
                if let Some(c) = self.slots[e.ix()].as_mut() {
                    c.pq_seq = seq;
                }
                seq += 1;
            }
            self.levels[level].wait_pq = live.into_iter().map(Reverse).collect();
        }
        self.pq_seq = seq;
    }

    fn remove_from_wait_tree(&mut self, ix: Ix) {
        if let Some(c) = self.cl_mut(ix) {
            c.pq_seq = NOT_WAITING;
        }
    }

    /// The first live entry of `level`'s wait queue, dropping stale ones.
    fn wait_head(&mut self, level: usize) -> Option<WaitEntry> {
        while let Some(&Reverse(e)) = self.levels[level].wait_pq.peek() {
            if Self::live(&self.slots, e) {
                return Some(e);
            }
            self.levels[level].wait_pq.pop();
        }
        None
    }

    /// Class `m` (a minor) at `level` enters the row of `prio`
    /// (`htb_add_class_to_row`, one priority).
    #[inline(always)]
    fn enter_row(&mut self, m: u32, level: usize, prio: usize) {
        self.row_mask[level] |= 1 << prio;
        self.levels[level].rows[prio].set.insert(m);
    }

    /// Class `m` at `level` leaves the row of `prio`
    /// (`htb_remove_class_from_row`, one priority); a pointer at it moves on.
    #[inline(always)]
    fn leave_row(&mut self, m: u32, level: usize, prio: usize) {
        let row = &mut self.levels[level].rows[prio];
        if row.ptr == Some(m) {
            row.advance();
        }
        row.set.remove(m);
        if row.set.is_empty() {
            self.row_mask[level] &= !(1 << prio);
        }
    }

    /// Class `id` enters the feed of `prio` of its parent `pid`. Returns
    /// whether the parent became active in `prio` (the feed was empty).
    #[inline(always)]
    fn enter_feed(&mut self, pid: Ix, id: u32, prio: usize) -> bool {
        let Some(p) = self.cl_mut(pid) else {
            return false;
        };
        let feed = p.feed(prio);
        let fresh = feed.set.is_empty();
        feed.set.insert(minor(id));
        if fresh {
            p.prio_activity |= 1 << prio;
        }
        fresh
    }

    /// Class `id` leaves the feed of `prio` of its parent `pid`; a pointer at
    /// it is forgotten, but where it was is remembered. Returns whether the
    /// parent went idle in `prio` (the feed is empty).
    #[inline(always)]
    fn leave_feed(&mut self, pid: Ix, id: u32, prio: usize) -> bool {
        let Some(p) = self.cl_mut(pid) else {
            return false;
        };
        let feed = p.feed(prio);
        if feed.ptr == Some(minor(id)) {
            feed.last_ptr_id = id;
            feed.ptr = None;
        }
        feed.set.remove(minor(id));
        let emptied = feed.set.is_empty();
        if emptied {
            p.prio_activity &= !(1 << prio);
        }
        emptied
    }

    /// Inner class `pid` as linked, for the priorities of `mask`.
    fn parent_link(&self, pid: Ix, mask: u8) -> Option<Link> {
        self.cl(pid).map(|p| Link {
            mask,
            ..Link::of(p)
        })
    }

    /// `htb_activate_prios`: link `class` into its parent's feeds (while it
    /// may borrow) or its row (when it can send), for its priorities in
    /// `class.mask`, and so on up for every parent that became active.
    fn activate_prios(&mut self, class: Link) {
        self.walk_prios(class, true);
    }

    /// `htb_deactivate_prios`: the reverse, for the class as it was linked,
    /// and so on up for every parent that went idle.
    fn deactivate_prios(&mut self, class: Link) {
        self.walk_prios(class, false);
    }

    /// The two walks above: `link` says which (inlined into each, so that
    /// each is compiled for its own direction).
    #[inline(always)]
    fn walk_prios(&mut self, class: Link, link: bool) {
        let mut next = Some(class);
        while let Some(c) = next {
            next = None;
            match (c.mode, c.parent) {
                (Mode::CanSend, _) => {
                    for prio in bits(c.mask) {
                        if link {
                            self.enter_row(minor(c.id), c.level, prio);
                        } else {
                            self.leave_row(minor(c.id), c.level, prio);
                        }
                    }
                }
                (Mode::MayBorrow, Some(pid)) => {
                    // The priorities in which the parent's activity changed.
                    let mut changed = 0;
                    for prio in bits(c.mask) {
                        let parent_changed = if link {
                            self.enter_feed(pid, c.id, prio)
                        } else {
                            self.leave_feed(pid, c.id, prio)
                        };
                        if parent_changed {
                            changed |= 1 << prio;
                        }
                    }
                    if changed != 0 {
                        next = self.parent_link(pid, changed);
                    }
                }
                _ => {}
            }
        }
    }

    /// `htb_class_mode`: the mode `diff` ns after the checkpoint; for modes
    /// other than `CanSend`, `diff` becomes the time until the mode changes.
    fn class_mode(c: &Class, hysteresis: bool, diff: &mut i64) -> Mode {
        let (lowater, hiwater) = if hysteresis {
            (
                if c.cmode != Mode::CantSend {
                    -c.cbuffer_ns
                } else {
                    0
                },
                if c.cmode == Mode::CanSend {
                    -c.buffer_ns
                } else {
                    0
                },
            )
        } else {
            (0, 0)
        };
        // Token arithmetic is the kernel's plain s64 (see [`Htb::account`]).
        let toks = c.ctokens.wrapping_add(*diff);
        if toks < lowater {
            *diff = toks.wrapping_neg();
            return Mode::CantSend;
        }
        let toks = c.tokens.wrapping_add(*diff);
        if toks >= hiwater {
            return Mode::CanSend;
        }
        *diff = toks.wrapping_neg();
        Mode::MayBorrow
    }

    /// `htb_change_class_mode`, once [`Htb::class_mode`] found that class
    /// `ix` changes mode: count the overlimit and relink the class.
    #[inline(always)]
    fn change_class_mode(&mut self, ix: Ix, new_mode: Mode) {
        let Some(c) = self.cl_mut(ix) else { return };
        let old = Link::of(c);
        c.cmode = new_mode;
        if new_mode == Mode::CantSend {
            c.overlimits = c.overlimits.wrapping_add(1);
            self.overlimits = self.overlimits.wrapping_add(1);
        }
        // Only the class's ancestors are relinked, so its own mode may
        // change first.
        if old.mask == 0 {
            return;
        }
        if old.level != 0 || !old.mask.is_power_of_two() {
            if old.mode != Mode::CantSend {
                self.deactivate_prios(old);
            }
            if new_mode != Mode::CantSend {
                self.activate_prios(Link {
                    mode: new_mode,
                    ..old
                });
            }
            return;
        }
        // A leaf, active in its one priority: it changes mode twice a packet
        // under load, so the same steps are taken here in line, and only a
        // parent whose activity changes goes through the walks above.
        let prio = old.mask.trailing_zeros() as usize;
        let idle = match (old.mode, old.parent) {
            (Mode::CanSend, _) => {
                self.leave_row(minor(old.id), 0, prio);
                None
            }
            (Mode::MayBorrow, Some(pid)) => self.leave_feed(pid, old.id, prio).then_some(pid),
            _ => None,
        };
        if let Some(up) = idle.and_then(|pid| self.parent_link(pid, old.mask)) {
            self.deactivate_prios(up);
        }
        let fresh = match (new_mode, old.parent) {
            (Mode::CanSend, _) => {
                self.enter_row(minor(old.id), 0, prio);
                None
            }
            (Mode::MayBorrow, Some(pid)) => self.enter_feed(pid, old.id, prio).then_some(pid),
            _ => None,
        };
        if let Some(up) = fresh.and_then(|pid| self.parent_link(pid, old.mask)) {
            self.activate_prios(up);
        }
    }

    /// `htb_activate`: a leaf got packets.
    fn activate(&mut self, ix: Ix) {
        let Some(c) = self.cl_mut(ix) else { return };
        if c.prio_activity == 0 {
            c.prio_activity = 1 << c.prio.min(7);
            let class = Link::of(c);
            self.activate_prios(class);
        }
    }

    /// `htb_deactivate`: a leaf went empty.
    fn deactivate(&mut self, ix: Ix) {
        let Some(c) = self.cl_mut(ix).filter(|c| c.prio_activity != 0) else {
            return;
        };
        let class = Link::of(c);
        c.prio_activity = 0;
        self.deactivate_prios(class);
    }

    // ----- tokens -----------------------------------------------------------

    /// `htb_accnt_tokens` / `htb_accnt_ctokens`: refill by `diff`, cap at the
    /// bucket, pay for `bytes`, and cap the debt at `mbuffer`.
    ///
    /// Token arithmetic is the kernel's plain s64, and here as there it does
    /// not overflow: `diff` (see [`Htb::elapsed`]) lies in 0..=`mbuffer`;
    /// tokens stay at or above `1 - mbuffer` and, rising by at most the time
    /// that passed, below `depth` (< 2^38 ns, from tc's u32 ticks) plus the
    /// clock (< 2^63 ns); and a cost is at most `len * 1e9 / rate` ns
    /// (`psched_ratecfg_precompute` rounds `mult` down), < 2^62 ns for a u32
    /// length at 1 byte/s. Wrapping operations say so and compile to plain ones.
    fn account(toks: i64, depth: i64, rate: &RateCfg, bytes: u32, diff: i64, mbuffer: i64) -> i64 {
        let cost = rate.l2t_ns(bytes) as i64;
        let toks = toks.wrapping_add(diff).min(depth).wrapping_sub(cost);
        if toks <= -mbuffer {
            1 - mbuffer
        } else {
            toks
        }
    }

    /// Time since `c`'s checkpoint, capped at `mbuffer`. Both times come from
    /// the monotonic clock and lie in 0..=`i64::MAX` (see [`time_ns`]), so the
    /// difference does not overflow, and is not negative.
    fn elapsed(now: i64, c: &Class) -> i64 {
        (now - c.t_c).min(c.mbuffer_ns)
    }

    /// `htb_charge_class`: a packet of `bytes` left leaf `ix`, lent by the class
    /// at `level` on its path; charge every class up to the root.
    fn charge_class(&mut self, ix: Ix, level: usize, bytes: u32, segs: u32) {
        let (now, hysteresis) = (self.now, self.hysteresis);
        let mut cur = Some(ix);
        while let Some(cix) = cur {
            let Some(c) = self.cl_mut(cix) else { return };
            let diff = Self::elapsed(now, c);
            if c.level >= level {
                if c.level == level {
                    c.lends = c.lends.wrapping_add(1);
                }
                c.tokens = Self::account(c.tokens, c.buffer_ns, &c.rate, bytes, diff, c.mbuffer_ns);
            } else {
                c.borrows = c.borrows.wrapping_add(1);
                // The checkpoint moves; keep the tokens it implies.
                c.tokens = c.tokens.wrapping_add(diff);
            }
            c.ctokens = Self::account(c.ctokens, c.cbuffer_ns, &c.ceil, bytes, diff, c.mbuffer_ns);
            c.t_c = now;
            if c.level != 0 {
                // Leaves counted their packet when it left the queue.
                c.bytes += bytes as u64;
                c.packets += segs as u64;
            }
            let (old_mode, parent) = (c.cmode, c.parent);
            let mut diff = 0;
            let new_mode = Self::class_mode(c, hysteresis, &mut diff);
            if old_mode != new_mode {
                self.change_class_mode(cix, new_mode);
                if old_mode != Mode::CanSend {
                    self.remove_from_wait_tree(cix);
                }
                if new_mode != Mode::CanSend {
                    self.add_to_wait_tree(cix, diff);
                }
            }
            cur = parent;
        }
    }

    /// `htb_do_events`: apply the mode changes due at `level`. Returns the time
    /// of the next pending event, 0 when none is pending, or `now` when it
    /// stopped early.
    fn do_events(&mut self, level: usize) -> i64 {
        let (now, hysteresis) = (self.now, self.hysteresis);
        for _ in 0..EVENTS_PER_DEQUEUE {
            let Some(e) = self.wait_head(level) else {
                return 0;
            };
            if e.key() > now {
                return e.key();
            }
            let ix = e.ix();
            self.levels[level].wait_pq.pop();
            let Some(c) = self.cl_mut(ix) else { continue };
            c.pq_seq = NOT_WAITING;
            let mut diff = Self::elapsed(now, c);
            let new_mode = Self::class_mode(c, hysteresis, &mut diff);
            if new_mode != c.cmode {
                self.change_class_mode(ix, new_mode);
            }
            if new_mode != Mode::CanSend {
                self.add_to_wait_tree(ix, diff);
            }
        }
        // "htb: too many events!"
        self.warned_too_many_events = true;
        now
    }

    // ----- dequeue ----------------------------------------------------------

    /// The feed of inner class `ix` for `prio`, or the row of (`level`,
    /// `prio`) for [`NO_SLOT`].
    #[inline(always)]
    fn feed_mut(&mut self, level: usize, prio: usize, ix: Ix) -> Option<&mut PrioFeed> {
        if ix == NO_SLOT {
            Some(&mut self.levels[level].rows[prio])
        } else {
            self.cl_mut(ix).map(|c| c.feed(prio))
        }
    }

    /// `htb_lookup_leaf`: follow the round-robin pointers from the row of
    /// (`level`, `prio`) down to a leaf.
    fn lookup_leaf(&mut self, level: usize, prio: usize) -> Option<Ix> {
        if self.levels[level].rows[prio].set.is_empty() {
            return None;
        }
        // The feeds walked down so far (the kernel's on-stack array), by the
        // inner class that owns them; the row at the bottom.
        let mut stack = [NO_SLOT; TC_HTB_MAXDEPTH];
        let mut top = 0;
        for _ in 0..65535 {
            let sp = self.feed_mut(level, prio, stack[top])?;
            if sp.last_ptr_id != 0 {
                if sp.ptr.is_none() {
                    // The pointer was lost but the id is known: resume there or after.
                    sp.ptr = sp.set.at_or_after(minor(sp.last_ptr_id));
                }
                sp.last_ptr_id = 0;
            }
            match sp.ptr {
                None => {
                    // Past the right end: rewind, and move the level above on.
                    sp.ptr = sp.set.first();
                    sp.ptr?;
                    if top > 0 {
                        top -= 1;
                        let up = self.feed_mut(level, prio, stack[top])?;
                        up.ptr?;
                        up.advance();
                    }
                }
                Some(m) => {
                    let ix = self.by_minor[m as usize];
                    if self.cl(ix)?.level == 0 {
                        return Some(ix);
                    }
                    if top + 1 >= TC_HTB_MAXDEPTH {
                        return None;
                    }
                    top += 1;
                    stack[top] = ix;
                }
            }
        }
        None
    }

    /// Advance the DRR pointer the kernel advances after serving leaf `ix` at
    /// `level`: the leaf's parent's feed, or the row at level 0.
    fn advance_after(&mut self, ix: Ix, level: usize, prio: usize) {
        if level == 0 {
            self.levels[0].rows[prio].advance();
        } else if let Some(pid) = self.cl(ix).and_then(|c| c.parent) {
            if let Some(p) = self.cl_mut(pid) {
                p.feed(prio).advance();
            }
        }
    }

    /// Dequeue from leaf `ix`'s qdisc, keeping `qlen` and emulating the
    /// kernel's `qlen_notify` (a child that drops packets and goes empty).
    fn leaf_dequeue(&mut self, ix: Ix, cx: &mut Cx) -> Option<Packet> {
        let leaf = self.cl_mut(ix)?.leaf.as_mut()?;
        let (before, drops_before) = (leaf.stats.qlen, cx.drops.len());
        let d = leaf.dequeue(cx);
        let after = leaf.stats.qlen;
        self.qlen = (self.qlen + after as u64).saturating_sub(before as u64);
        if cx.drops.len() > drops_before && after == 0 {
            self.deactivate(ix);
        }
        match d {
            Dequeue::Packet(p) => Some(p),
            Dequeue::Wait(t) => {
                self.child_wait = Dequeue::earliest(self.child_wait, Some(t));
                None
            }
            Dequeue::Empty => None,
        }
    }

    fn leaf_qlen(&self, ix: Ix) -> u32 {
        self.cl(ix)
            .and_then(|c| c.leaf.as_ref())
            .map_or(0, |l| l.stats.qlen)
    }

    /// `htb_dequeue_tree`: serve one packet at (`prio`, `level`).
    fn dequeue_tree(&mut self, prio: usize, level: usize, cx: &mut Cx) -> Option<Packet> {
        let mut start = self.lookup_leaf(level, prio);
        let mut cur = start;
        // Each turn unlinks a class or moves to the next one; a full round
        // ends the search. The bound only guards against a broken invariant.
        let mut turns = 2 * self.classes.len() + 16;
        let (ix, pkt) = loop {
            let ix = cur?;
            turns = turns.checked_sub(1)?;
            if self.leaf_qlen(ix) == 0 {
                // An empty leaf (its qdisc dropped, or it was grafted): unlink it.
                self.deactivate(ix);
                if self.row_mask[level] & (1 << prio) == 0 {
                    return None;
                }
                let next = self.lookup_leaf(level, prio);
                if cur == start {
                    start = next;
                }
                cur = next;
                continue;
            }
            if let Some(p) = self.leaf_dequeue(ix, cx) {
                break (ix, p);
            }
            // A leaf qdisc that holds packets back: try the next class.
            self.advance_after(ix, level, prio);
            cur = self.lookup_leaf(level, prio);
            if cur == start {
                return None;
            }
        };
        let (len, segs) = (pkt.len, pkt.segs());
        let mut next = false;
        if let Some(c) = self.cl_mut(ix) {
            c.bytes += len as u64;
            c.packets += segs as u64;
            let d = &mut c.deficit[level];
            *d = d.wrapping_sub(len as i32);
            if *d < 0 {
                *d = d.wrapping_add(c.quantum);
                next = true;
            }
        }
        if next {
            self.advance_after(ix, level, prio);
        }
        if self.leaf_qlen(ix) == 0 {
            self.deactivate(ix);
        }
        self.charge_class(ix, level, len, segs);
        Some(pkt)
    }

    // ----- class changes ----------------------------------------------------

    /// A default leaf qdisc: pfifo of txqueuelen packets, handle 0, below `classid`.
    fn default_leaf(classid: u32, dev: &DevInfo) -> QdiscNode {
        QdiscNode::new(
            Handle::UNSPEC,
            Handle(classid),
            Box::new(Fifo::pfifo(dev.default_qlen())),
        )
    }

    /// `qdisc_purge_queue` on a leaf's qdisc: drop everything it holds.
    fn purge(&mut self, leaf: &mut QdiscNode) {
        let (p, b) = (leaf.stats.qlen as u64, leaf.stats.backlog);
        leaf.reset();
        self.qlen = self.qlen.saturating_sub(p);
        self.purged.0 += p;
        self.purged.1 += b;
    }

    /// Create a new class (the `!cl` branch of `htb_change_class`).
    fn create_class(
        &mut self,
        classid: u32,
        parentid: Handle,
        o: &HtbClassOpts,
        dev: &DevInfo,
    ) -> TcResult<()> {
        let parent = if parentid.is_root() {
            None
        } else {
            self.find(parentid.0)
        };
        let major_ok = self.major.is_none_or(|m| Handle(classid).major() == m);
        if classid == 0 || !major_ok || self.classes.contains(classid) {
            return Err(einval());
        }
        if let Some(gp) = parent
            .and_then(|p| self.cl(p))
            .and_then(|p| p.parent)
            .and_then(|g| self.cl(g))
        {
            if gp.level < 2 {
                return Err(TcError::inval("sch_htb: tree is too deep"));
            }
        }
        // Validated: commit.
        self.major = Some(Handle(classid).major());
        if let Some(pid) = parent {
            self.leaf_to_inner(pid);
        }
        let buffer_ns = (o.buffer as i64) << PSCHED_SHIFT;
        let cbuffer_ns = (o.cbuffer as i64) << PSCHED_SHIFT;
        let c = Class {
            classid,
            parent,
            children: 0,
            level: 0,
            rate: RateCfg::default(),
            ceil: RateCfg::default(),
            buffer_ns,
            cbuffer_ns,
            mbuffer_ns: MBUFFER_NS,
            prio: 0,
            quantum: 0,
            tokens: buffer_ns,
            ctokens: cbuffer_ns,
            t_c: self.now,
            cmode: Mode::CanSend,
            prio_activity: 0,
            pq_seq: NOT_WAITING,
            deficit: [0; TC_HTB_MAXDEPTH],
            inner: None,
            leaf: Some(Self::default_leaf(classid, dev).hashed_invisible()),
            block: Block::default(),
            bytes: 0,
            packets: 0,
            drops: 0,
            overlimits: 0,
            lends: 0,
            borrows: 0,
            giants: 0,
        };
        let ix = match self.free.pop() {
            Some(ix) => {
                self.slots[ix] = Some(c);
                ix
            }
            None => {
                self.slots.push(Some(c));
                self.slots.len() - 1
            }
        };
        self.classes.insert(classid, ix);
        let m = minor(classid) as usize;
        if m >= self.by_minor.len() {
            self.by_minor.resize(m + 1, NO_SLOT);
        }
        self.by_minor[m] = ix;
        if let Some(p) = parent.and_then(|p| self.cl_mut(p)) {
            p.children += 1;
        }
        Ok(())
    }

    /// A leaf gets its first child: its queue is purged and it becomes an
    /// inner class one level below its parent (or at level 7).
    fn leaf_to_inner(&mut self, ix: Ix) {
        let Some(c) = self.cl(ix) else { return };
        if c.level != 0 {
            return;
        }
        let gp_level = c.parent.and_then(|g| self.cl(g)).map(|g| g.level);
        if let Some(mut leaf) = self.cl_mut(ix).and_then(|c| c.leaf.take()) {
            self.purge(&mut leaf);
        }
        self.deactivate(ix);
        if self.cl(ix).is_some_and(|c| c.cmode != Mode::CanSend) {
            self.remove_from_wait_tree(ix);
            if let Some(c) = self.cl_mut(ix) {
                c.cmode = Mode::CanSend;
            }
        }
        if let Some(c) = self.cl_mut(ix) {
            c.level = gp_level.unwrap_or(TC_HTB_MAXDEPTH).saturating_sub(1);
            // The kernel's leaf and inner state share memory, cleared here.
            c.inner = None;
            c.deficit = [0; TC_HTB_MAXDEPTH];
        }
    }

    /// `htb_parent_to_leaf`: the last child went; the parent is a leaf again.
    fn inner_to_leaf(&mut self, ix: Ix, dev: &DevInfo) {
        let Some(c) = self.cl(ix) else { return };
        if c.cmode != Mode::CanSend {
            self.remove_from_wait_tree(ix);
        }
        let now = self.now;
        if let Some(c) = self.cl_mut(ix) {
            c.level = 0;
            c.inner = None;
            c.deficit = [0; TC_HTB_MAXDEPTH];
            c.leaf = Some(Self::default_leaf(c.classid, dev));
            c.tokens = c.buffer_ns;
            c.ctokens = c.cbuffer_ns;
            c.t_c = now;
            c.cmode = Mode::CanSend;
        }
    }

    /// Apply the parameters of `o` (the tail of `htb_change_class`).
    fn apply_params(&mut self, ix: Ix, o: &HtbClassOpts) {
        let r2q = self.params.rate2quantum.max(1) as u64;
        let Some(c) = self.cl_mut(ix) else { return };
        let id = c.classid;
        c.rate = RateCfg::new(o.rate);
        c.ceil = RateCfg::new(o.ceil);
        let mut warn = None;
        if c.level == 0 {
            let mut quantum = (c.rate.rate() / r2q).min(i32::MAX as u64);
            if o.quantum == 0 && quantum < QUANTUM_MIN {
                warn = Some("small");
                quantum = QUANTUM_MIN;
            }
            if o.quantum == 0 && quantum > QUANTUM_MAX {
                warn = Some("big");
                quantum = QUANTUM_MAX;
            }
            // An explicit quantum is stored as the kernel's int.
            c.quantum = if o.quantum != 0 {
                o.quantum as i32
            } else {
                quantum as i32
            };
            c.prio = o.prio.min(TC_HTB_NUMPRIO as u32 - 1);
        }
        c.buffer_ns = (o.buffer as i64) << PSCHED_SHIFT;
        c.cbuffer_ns = (o.cbuffer as i64) << PSCHED_SHIFT;
        self.warning = warn.map(|w| {
            format!(
                "sch_htb: quantum of class {:X} is {w}. Consider r2q change.",
                id
            )
        });
    }

    fn class_opts_dump(c: &Class) -> HtbClassOpts {
        HtbClassOpts {
            rate: c.rate.spec(),
            ceil: c.ceil.spec(),
            buffer: (c.buffer_ns >> PSCHED_SHIFT) as u32,
            cbuffer: (c.cbuffer_ns >> PSCHED_SHIFT) as u32,
            quantum: c.quantum as u32,
            prio: c.prio,
            level: c.level as u32,
        }
    }

    fn class_info(&self, c: &Class) -> ClassInfo {
        let ticks = |ns: i64| (ns >> PSCHED_SHIFT).clamp(i32::MIN as i64, i32::MAX as i64) as i32;
        let (qlen, backlog) = match (&c.leaf, c.level) {
            (Some(l), 0) => (l.stats.qlen, l.stats.backlog),
            _ => (0, 0),
        };
        ClassInfo {
            classid: Handle(c.classid),
            parent: c
                .parent
                .and_then(|p| self.cl(p))
                .map_or(Handle::ROOT, |p| Handle(p.classid)),
            leaf: c
                .leaf
                .as_ref()
                .filter(|l| c.level == 0 && !l.handle.is_unspec())
                .map(|l| l.handle),
            opts: ClassOpts::Htb(Self::class_opts_dump(c)),
            stats: Stats {
                bytes: c.bytes,
                packets: c.packets,
                drops: c.drops as u64,
                overlimits: c.overlimits as u64,
                requeues: 0,
                qlen,
                backlog,
            },
            xstats: XStats::HtbClass(HtbClassXstats {
                lended: c.lends,
                borrowed: c.borrows,
                giants: c.giants,
                tokens: ticks(c.tokens),
                ctokens: ticks(c.ctokens),
            }),
        }
    }
}

impl Qdisc for Htb {
    /// `htb_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        match self.classify(&mut pkt, cx.now) {
            Target::Direct => {
                if (self.direct.len() as u64) < self.params.direct_qlen as u64 {
                    self.direct.push_back(pkt);
                    self.direct_pkts = self.direct_pkts.wrapping_add(1);
                    self.qlen += 1;
                    Ok(())
                } else {
                    Err((pkt, DropReason::QueueFull))
                }
            }
            Target::Drop(reason) => Err((pkt, reason)),
            Target::Class(ix) => {
                let Some(leaf) = self.cl_mut(ix).and_then(|c| c.leaf.as_mut()) else {
                    return Err((pkt, DropReason::Noop));
                };
                let (before, drops_before) = (leaf.stats.qlen, cx.drops.len());
                let r = leaf.offer(pkt, cx);
                let after = leaf.stats.qlen;
                self.qlen = (self.qlen + after as u64).saturating_sub(before as u64);
                match r {
                    Ok(()) => {
                        self.activate(ix);
                        Ok(())
                    }
                    Err((pkt, reason)) => {
                        if reason.counts() {
                            if let Some(c) = self.cl_mut(ix) {
                                c.drops = c.drops.wrapping_add(1);
                            }
                        }
                        if cx.drops.len() > drops_before && after == 0 {
                            self.deactivate(ix);
                        }
                        Err((pkt, reason))
                    }
                }
            }
        }
    }

    /// `htb_dequeue`.
    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.child_wait = None;
        if let Some(p) = self.direct.pop_front() {
            self.qlen = self.qlen.saturating_sub(1);
            return Dequeue::Packet(p);
        }
        if self.qlen == 0 {
            return Dequeue::Empty;
        }
        self.now = time_ns(cx.now);
        let now = self.now;
        let mut next_event = now.saturating_add(5 * NSEC_PER_SEC);
        for level in 0..TC_HTB_MAXDEPTH {
            let mut event = self.near_ev_cache[level];
            if now >= event {
                event = self.do_events(level);
                if event == 0 {
                    event = now.saturating_add(NSEC_PER_SEC);
                }
                self.near_ev_cache[level] = event;
            }
            next_event = next_event.min(event);
            for prio in bits(self.row_mask[level]) {
                if let Some(p) = self.dequeue_tree(prio, level, cx) {
                    return Dequeue::Packet(p);
                }
            }
        }
        if self.qlen == 0 {
            // Leaf qdiscs dropped what they held while being asked.
            return Dequeue::Empty;
        }
        let own = Time(next_event.max(now) as u64);
        Dequeue::Wait(
            Dequeue::earliest(Some(own), self.child_wait)
                .unwrap_or(own)
                .max(cx.now),
        )
    }

    /// `htb_reset`: empty every queue and unlink every class; tokens stay.
    fn reset(&mut self) {
        for c in self.slots.iter_mut().flatten() {
            if c.level != 0 {
                c.inner = None;
            } else if let Some(l) = c.leaf.as_mut() {
                l.reset();
            }
            c.prio_activity = 0;
            c.cmode = Mode::CanSend;
        }
        self.direct.clear();
        self.levels = Default::default();
        self.row_mask = [0; TC_HTB_MAXDEPTH];
        self.qlen = 0;
    }

    /// HTB has no `change` operation: `tc qdisc change` is refused.
    fn change(&mut self, _opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        Err(TcError::inval(
            "Change operation not supported by specified qdisc",
        ))
    }

    /// `htb_dump`.
    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Htb(HtbOpts {
            rate2quantum: self.params.rate2quantum,
            defcls: self.params.defcls,
            debug: 0,
            version: HTB_VER,
            direct_pkts: self.direct_pkts,
            direct_qlen: Some(self.params.direct_qlen),
            offload: false,
        })
    }

    fn overlimits(&self) -> u64 {
        self.overlimits as u64
    }

    /// `htb_tcf_block`: the qdisc's filters for minor 0, else class
    /// `major:minor`'s (leaf or inner; only inner classes' filters classify).
    fn block_mut(&mut self, classid: Handle) -> Option<&mut Block> {
        if classid.minor() == 0 {
            return Some(&mut self.block);
        }
        let ix = self.find(classid.0)?;
        self.cl_mut(ix).map(|c| &mut c.block)
    }

    fn block(&self, classid: Handle) -> Option<&Block> {
        if classid.minor() == 0 {
            return Some(&self.block);
        }
        self.by_id(classid.0).map(|c| &c.block)
    }

    fn set_handle(&mut self, handle: Handle) {
        if !handle.is_unspec() {
            self.major = Some(handle.major());
        }
    }

    /// The extack warning of the last class change, if any, e.g.
    /// "sch_htb: quantum of class 10001 is small. Consider r2q change."
    /// (tc prints it as "Warning: ...").
    fn take_warning(&mut self) -> Option<String> {
        self.warning.take()
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for Htb {
    /// Packets and bytes purged from leaves by graft, delete or a leaf
    /// becoming inner since the last call (HTB's own count is already right).
    fn take_purged(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.purged)
    }

    /// `htb_change_class`: create class `classid` below `parent` (a class id,
    /// or the qdisc/`ROOT` for a top-level class; an unknown parent also makes
    /// a top-level class, as in the kernel), or change its parameters (the
    /// parent of an existing class cannot change and is ignored).
    fn change_class(
        &mut self,
        classid: Handle,
        parent: Handle,
        opts: Option<&ClassOpts>,
        dev: &DevInfo,
    ) -> TcResult<()> {
        let Some(ClassOpts::Htb(o)) = opts else {
            return Err(einval());
        };
        if o.rate.rate == 0 || o.ceil.rate == 0 {
            return Err(einval());
        }
        self.warning = None;
        self.txqueuelen = dev.default_qlen();
        if !self.classes.contains(classid.0) {
            self.create_class(classid.0, parent, o, dev)?;
        }
        if let Some(ix) = self.find(classid.0) {
            self.apply_params(ix, o);
        }
        self.classes.grow();
        Ok(())
    }

    /// `htb_delete`: refused while the class has children or filters of
    /// this qdisc point to it.
    fn delete_class(&mut self, classid: Handle) -> TcResult<()> {
        let Some((ix, c)) = self.find(classid.0).and_then(|ix| Some((ix, self.cl(ix)?))) else {
            return Err(TcError::errno(Errno::ENOENT));
        };
        // In use: it has children, or filters of this qdisc point to it
        // (the kernel counts those bindings in `filter_cnt`).
        let bound = self.block.count_bound(classid)
            + self
                .walk()
                .map(|c| c.block.count_bound(classid))
                .sum::<usize>();
        if c.children > 0 || bound > 0 {
            return Err(Self::class_in_use_error());
        }
        let id = c.classid;
        let parent = c.parent;
        let last_child = c.level == 0
            && parent
                .and_then(|p| self.cl(p))
                .is_some_and(|p| p.children <= 1);
        if let Some(mut leaf) = self.cl_mut(ix).and_then(|c| c.leaf.take()) {
            self.purge(&mut leaf);
            if let Some(c) = self.cl_mut(ix) {
                c.leaf = Some(leaf);
            }
        }
        self.deactivate(ix);
        if self.cl(ix).is_some_and(|c| c.cmode != Mode::CanSend) {
            self.remove_from_wait_tree(ix);
        }
        self.classes.remove(id);
        self.by_minor[minor(id) as usize] = NO_SLOT;
        self.slots[ix] = None;
        self.free.push(ix);
        if let Some(p) = parent.and_then(|p| self.cl_mut(p)) {
            p.children = p.children.saturating_sub(1);
        }
        if let (true, Some(p)) = (last_child, parent) {
            // `delete_class` is not given the device: use the txqueuelen last seen.
            let dev = DevInfo {
                txqueuelen: self.txqueuelen,
                ..DevInfo::default()
            };
            self.inner_to_leaf(p, &dev);
        }
        Ok(())
    }

    /// Every class in the kernel's walk order (`htb_walk`: class hash order).
    fn list(&self) -> Vec<ClassInfo> {
        self.walk().map(|c| self.class_info(c)).collect()
    }

    fn contains(&self, classid: Handle) -> bool {
        self.classes.contains(classid.0)
    }

    /// `htb_leaf`: the qdisc of a leaf class; inner classes have none.
    fn leaf(&self, classid: Handle) -> Option<&QdiscNode> {
        self.by_id(classid.0)
            .filter(|c| c.level == 0)
            .and_then(|c| c.leaf.as_ref())
    }

    /// `htb_graft`: only leaves take a qdisc; `None` restores a default pfifo.
    /// The old qdisc's packets are purged.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        let Some((ix, c)) = self.find(classid.0).and_then(|ix| Some((ix, self.cl(ix)?))) else {
            return Err(TcError::msg(Errno::ENOENT, "Specified class not found"));
        };
        if c.level != 0 {
            return Err(einval());
        }
        let id = c.classid;
        self.txqueuelen = dev.default_qlen();
        let mut new = new.unwrap_or_else(|| Self::default_leaf(id, dev));
        new.parent = Handle(id);
        // A new qdisc is empty; should one arrive with packets, count them.
        let new_qlen = new.stats.qlen as u64;
        let old = self.cl_mut(ix).and_then(|c| c.leaf.replace(new));
        let old = old.map(|mut o| {
            self.purge(&mut o);
            o
        });
        self.deactivate(ix);
        if new_qlen > 0 {
            self.qlen += new_qlen;
            self.activate(ix);
        }
        Ok(old)
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        // Hand out the slots in walk order.
        let mut slots: Vec<Option<&mut Class>> =
            self.slots.iter_mut().map(Option::as_mut).collect();
        self.classes
            .iter()
            .filter_map(|(_, &ix)| slots[ix].take())
            .filter(|c| c.level == 0)
            .filter_map(|c| c.leaf.as_mut())
            .collect()
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        self.walk()
            .filter(|c| c.level == 0)
            .filter_map(|c| c.leaf.as_ref())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Skb;
    use crate::packet::ETH_P_ALL;
    use crate::rate::LinkLayer;
    use std::collections::HashMap;

    const MBIT: u64 = 125_000; // bytes per second in one Mbit/s
    const SEC: u64 = 1_000_000_000;

    fn dev() -> DevInfo {
        DevInfo::default()
    }

    fn h(minor: u16) -> Handle {
        Handle::new(1, minor)
    }

    /// `tc_calc_xmittime`: psched ticks to send `bytes` at `rate` B/s
    /// (iproute2 with the kernel's /proc/net/psched: 15.625 ticks per µs).
    fn xmit_ticks(rate: u64, bytes: u64) -> u32 {
        (1e6 * (bytes as f64 / rate as f64) * 15.625) as u32
    }

    fn spec(rate: u64) -> RateSpec {
        RateSpec {
            rate,
            linklayer: LinkLayer::Ethernet,
            ..Default::default()
        }
    }

    /// What `tc class add ... htb rate R ceil C prio P [quantum Q]` sends:
    /// burst and cburst default to 1600 bytes (mtu 1600 plus rate/HZ ≈ 0).
    fn copts(rate: u64, ceil: u64, prio: u32, quantum: u32) -> ClassOpts {
        ClassOpts::Htb(HtbClassOpts {
            rate: spec(rate),
            ceil: spec(ceil),
            buffer: xmit_ticks(rate, 1600),
            cbuffer: xmit_ticks(ceil, 1600),
            quantum,
            prio,
            level: 0,
        })
    }

    fn htb_with(opts: HtbOpts) -> QdiscNode {
        QdiscNode::new(
            h(0),
            Handle::ROOT,
            Box::new(Htb::new(&opts, &dev()).unwrap()),
        )
    }

    fn htb(defcls: u32) -> QdiscNode {
        htb_with(HtbOpts {
            defcls,
            ..Default::default()
        })
    }

    fn add(n: &mut QdiscNode, parent: Handle, minor: u16, o: ClassOpts) {
        let cls = n.qdisc.classes().unwrap();
        cls.change_class(h(minor), parent, Some(&o), &dev())
            .unwrap();
    }

    fn info(n: &QdiscNode, minor: u16) -> ClassInfo {
        n.qdisc
            .classes_ref()
            .unwrap()
            .list()
            .into_iter()
            .find(|c| c.classid == h(minor))
            .unwrap()
    }

    fn xstats(n: &QdiscNode, minor: u16) -> HtbClassXstats {
        match info(n, minor).xstats {
            XStats::HtbClass(x) => x,
            other => panic!("{other:?}"),
        }
    }

    fn dumped(n: &QdiscNode, minor: u16) -> HtbClassOpts {
        match info(n, minor).opts {
            ClassOpts::Htb(o) => o,
            other => panic!("{other:?}"),
        }
    }

    fn pkt(priority: u32, len: u32) -> Packet {
        Packet::from(Skb {
            priority,
            len,
            protocol: crate::packet::ETH_P_IP,
            ..Default::default()
        })
    }

    /// Drive `n` as a link of `link_bps` bit/s would for `dur` ns, keeping the
    /// `backlogged` classes (selected through `skb->priority`) always busy.
    /// Returns bytes sent per class.
    fn run(n: &mut QdiscNode, backlogged: &[u16], dur: u64, link_bps: u64) -> HashMap<u32, u64> {
        let mut sent: HashMap<u32, u64> = HashMap::new();
        let mut outstanding: HashMap<u32, u32> = HashMap::new();
        let mut t = 0u64;
        let mut idle_rounds = 0;
        while t < dur {
            let mut cx = Cx::new(Time(t));
            for &m in backlogged {
                let o = outstanding.entry(h(m).0).or_default();
                while *o < 5 {
                    n.enqueue(pkt(h(m).0, 1500), &mut cx).unwrap();
                    *o += 1;
                }
            }
            match n.dequeue(&mut cx) {
                Dequeue::Packet(p) => {
                    *sent.entry(p.priority).or_default() += p.len as u64;
                    *outstanding.entry(p.priority).or_default() -= 1;
                    t += p.len as u64 * 8 * SEC / link_bps;
                    idle_rounds = 0;
                }
                Dequeue::Wait(w) => {
                    assert!(w.0 >= t, "Wait({}) in the past at {t}", w.0);
                    idle_rounds += 1;
                    assert!(idle_rounds < 1000, "no progress at {t}");
                    t = w.0;
                }
                Dequeue::Empty => t = dur,
            }
        }
        sent
    }

    fn mbit_per_s(bytes: u64, dur: u64) -> f64 {
        bytes as f64 * 8.0 / (dur as f64 / SEC as f64) / 1e6
    }

    fn assert_close(got: f64, want: f64, tol: f64) {
        assert!(
            (got - want).abs() <= want * tol,
            "got {got:.4} Mbit/s, want {want} ±{}%",
            tol * 100.0
        );
    }

    /// 1: (htb) -> 1:1 rate 30 ceil 30 -> 1:10 rate 10 ceil 30, 1:20 rate 20 ceil 30 (prio 0).
    /// A class estimator (`tc class add ... estimator 250ms 1sec`) follows
    /// what passes through its class: both leaves of [`two_leaves`] busy
    /// for 10 s, leaf 1:10 sends its 10 Mbit/s and the parent 1:1 their
    /// 30 Mbit/s, and the estimates settle there (the EWMA of weight 1/4
    /// over 250 ms samples forgets the start within a second or two).
    #[test]
    fn class_estimators_follow_their_classes_rates() {
        use crate::stats::RateEstimator;
        let mut n = two_leaves();
        for minor in [1, 0x10] {
            n.set_class_estimator(h(minor), Some(RateEstimator::new(-2, 2)), Time(0));
        }
        let dur = 10 * SEC;
        run(&mut n, &[0x10, 0x20], dur, 100_000_000);
        let rate = |minor| {
            let stats = info(&n, minor).stats;
            n.class_rate(h(minor), Time(dur), &stats)
                .expect("an estimator")
                .0 as f64
                / 1e6
        };
        assert_close(rate(0x10), 10.0, 0.03);
        assert_close(rate(1), 30.0, 0.03);
        assert!(n
            .class_rate(h(0x20), Time(dur), &info(&n, 0x20).stats)
            .is_none());
        // Forgotten with its class, as `tc class del` does.
        n.set_class_estimator(h(0x10), None, Time(dur));
        assert!(n
            .class_rate(h(0x10), Time(dur), &info(&n, 0x10).stats)
            .is_none());
    }

    fn two_leaves() -> QdiscNode {
        let mut n = htb(0);
        add(&mut n, Handle::ROOT, 1, copts(30 * MBIT, 30 * MBIT, 0, 0));
        add(&mut n, h(1), 0x10, copts(10 * MBIT, 30 * MBIT, 0, 0));
        add(&mut n, h(1), 0x20, copts(20 * MBIT, 30 * MBIT, 0, 0));
        n
    }

    #[test]
    fn backlogged_leaves_get_their_rates() {
        let mut n = two_leaves();
        let dur = 10 * SEC;
        let sent = run(&mut n, &[0x10, 0x20], dur, 100_000_000);
        assert_close(mbit_per_s(sent[&h(0x10).0], dur), 10.0, 0.02);
        assert_close(mbit_per_s(sent[&h(0x20).0], dur), 20.0, 0.02);
        // Inner classes count what passes through them.
        let parent = info(&n, 1).stats;
        assert_eq!(parent.bytes, sent[&h(0x10).0] + sent[&h(0x20).0]);
        assert_eq!(info(&n, 0x10).stats.bytes, sent[&h(0x10).0]);
    }

    #[test]
    fn an_idle_sibling_lets_the_other_borrow_up_to_ceil() {
        let mut n = two_leaves();
        let dur = 10 * SEC;
        let sent = run(&mut n, &[0x10], dur, 100_000_000);
        assert_close(mbit_per_s(sent[&h(0x10).0], dur), 30.0, 0.02);
        let leaf = xstats(&n, 0x10);
        let parent = xstats(&n, 1);
        // About 10 of the 30 Mbit/s are its own (lent at level 0), 20 borrowed from 1:1.
        let total = leaf.lended + leaf.borrowed;
        assert!(
            (leaf.borrowed as f64 / total as f64 - 2.0 / 3.0).abs() < 0.02,
            "{leaf:?}"
        );
        assert_eq!(parent.lended, leaf.borrowed);
        // Every packet was charged to the leaf's ceil and drew from the parent.
        assert_eq!(info(&n, 1).stats.packets, total as u64);
    }

    #[test]
    fn ceil_caps_a_class_even_when_the_parent_has_more() {
        let mut n = htb(0);
        add(&mut n, Handle::ROOT, 1, copts(50 * MBIT, 50 * MBIT, 0, 0));
        add(&mut n, h(1), 0x10, copts(5 * MBIT, 15 * MBIT, 0, 0));
        add(&mut n, h(1), 0x20, copts(5 * MBIT, 50 * MBIT, 0, 0));
        let dur = 10 * SEC;
        let sent = run(&mut n, &[0x10], dur, 100_000_000);
        assert_close(mbit_per_s(sent[&h(0x10).0], dur), 15.0, 0.02);
        assert!(info(&n, 0x10).stats.overlimits > 0);
        assert!(n.stats().overlimits > 0);
    }

    #[test]
    fn lower_prio_number_gets_the_excess_first() {
        let mut n = htb(0);
        add(&mut n, Handle::ROOT, 1, copts(10 * MBIT, 10 * MBIT, 0, 0));
        add(&mut n, h(1), 0x10, copts(MBIT, 10 * MBIT, 0, 0));
        add(&mut n, h(1), 0x20, copts(MBIT, 10 * MBIT, 1, 0));
        let dur = 10 * SEC;
        let sent = run(&mut n, &[0x10, 0x20], dur, 100_000_000);
        // prio 0 takes its rate and all 8 Mbit/s of excess; prio 1 only its rate.
        assert_close(mbit_per_s(sent[&h(0x10).0], dur), 9.0, 0.02);
        assert_close(mbit_per_s(sent[&h(0x20).0], dur), 1.0, 0.02);
    }

    #[test]
    fn excess_is_shared_by_quantum_within_a_priority() {
        let mut n = htb(0);
        add(&mut n, Handle::ROOT, 1, copts(10 * MBIT, 10 * MBIT, 0, 0));
        add(&mut n, h(1), 0x10, copts(MBIT, 10 * MBIT, 0, 1500));
        add(&mut n, h(1), 0x20, copts(MBIT, 10 * MBIT, 0, 4500));
        let dur = 10 * SEC;
        let sent = run(&mut n, &[0x10, 0x20], dur, 100_000_000);
        // 8 Mbit/s of excess split 1:3 by quantum, on top of 1 Mbit/s each.
        assert_close(mbit_per_s(sent[&h(0x10).0], dur), 3.0, 0.02);
        assert_close(mbit_per_s(sent[&h(0x20).0], dur), 7.0, 0.02);
    }

    #[test]
    fn default_quanta_follow_rate_over_r2q() {
        let mut n = htb_with(HtbOpts {
            rate2quantum: 10,
            ..Default::default()
        });
        add(&mut n, Handle::ROOT, 1, copts(10 * MBIT, 10 * MBIT, 0, 0));
        add(&mut n, h(1), 0x10, copts(MBIT, 10 * MBIT, 0, 0));
        add(&mut n, h(1), 0x20, copts(3 * MBIT, 10 * MBIT, 0, 0));
        assert_eq!(dumped(&n, 0x10).quantum, 12_500);
        assert_eq!(dumped(&n, 0x20).quantum, 37_500);
        let dur = 10 * SEC;
        let sent = run(&mut n, &[0x10, 0x20], dur, 100_000_000);
        // 6 Mbit/s of excess split 1:3 like the quanta.
        assert_close(mbit_per_s(sent[&h(0x10).0], dur), 2.5, 0.02);
        assert_close(mbit_per_s(sent[&h(0x20).0], dur), 7.5, 0.02);
    }

    #[test]
    fn unclassified_packets_use_the_direct_queue_first_and_up_to_its_limit() {
        let mut n = htb_with(HtbOpts {
            defcls: 0x20,
            direct_qlen: Some(2),
            ..Default::default()
        });
        add(&mut n, Handle::ROOT, 0x10, copts(MBIT, MBIT, 0, 0));
        let mut cx = Cx::new(Time(0));
        n.enqueue(
            Packet::from(Skb {
                id: 1,
                ..pkt(h(0x10).0, 100).into_skb()
            }),
            &mut cx,
        )
        .unwrap();
        // No filter, no class 1:20: direct.
        n.enqueue(
            Packet::from(Skb {
                id: 2,
                ..pkt(0, 100).into_skb()
            }),
            &mut cx,
        )
        .unwrap();
        // skb->priority 1:0 selects the direct queue explicitly.
        n.enqueue(
            Packet::from(Skb {
                id: 3,
                ..pkt(h(0).0, 100).into_skb()
            }),
            &mut cx,
        )
        .unwrap();
        assert_eq!(n.enqueue(pkt(0, 100), &mut cx), Err(DropReason::QueueFull));
        let s = n.stats();
        assert_eq!((s.qlen, s.drops), (3, 1));
        let order: Vec<u64> = (0..3)
            .map(|_| match n.dequeue(&mut cx) {
                Dequeue::Packet(p) => p.id,
                d => panic!("{d:?}"),
            })
            .collect();
        assert_eq!(order, vec![2, 3, 1]);
        match n.qdisc.dump() {
            QdiscOpts::Htb(o) => assert_eq!((o.direct_pkts, o.direct_qlen), (2, Some(2))),
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn unclassified_packets_go_to_the_default_leaf_but_never_an_inner_default() {
        let mut n = htb(0x20);
        add(&mut n, Handle::ROOT, 0x20, copts(MBIT, MBIT, 0, 0));
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(0, 100), &mut cx).unwrap();
        assert_eq!(info(&n, 0x20).stats.qlen, 1);
        // 1:20 gets a child and turns inner: the default no longer applies.
        add(&mut n, h(0x20), 0x21, copts(MBIT, MBIT, 0, 0));
        n.enqueue(pkt(0, 100), &mut cx).unwrap();
        match n.qdisc.dump() {
            QdiscOpts::Htb(o) => assert_eq!(o.direct_pkts, 1),
            o => panic!("{o:?}"),
        }
    }

    /// `tc filter add ... parent P handle MARK fw classid C [action gact V]`
    /// on `block`, through the classifier API the Device uses.
    fn fw(block: &mut Block, mark: u32, classid: Handle, verdict: Option<Verdict>) {
        use crate::act::{gact::GactOpts, ActionOpts, ActionSpec, ActionTable};
        use crate::cls::{fw::FwOpts, ClsEnv, ClsShared, FilterCmd, FilterMsg, FilterOpts};
        let actions = verdict
            .map(|action| ActionSpec {
                index: 0,
                opts: ActionOpts::Gact(GactOpts {
                    action,
                    random: None,
                }),
                cookie: None,
                no_percpu: false,
                offload: 0,
            })
            .into_iter()
            .collect();
        let msg = FilterMsg {
            prio: 1,
            protocol: ETH_P_ALL,
            handle: mark,
            kind: Some("fw".into()),
            opts: Some(FilterOpts::Fw(FwOpts {
                classid: Some(classid),
                actions,
                ..Default::default()
            })),
            ..Default::default()
        };
        let (mut table, mut shared) = (ActionTable::new(0), ClsShared::default());
        let mut env = ClsEnv {
            actions: &mut table,
            shared: &mut shared,
            qdisc: h(0),
            dev_exists: &|_| false,
            now: Time(0),
        };
        block.change_filter(&msg, FilterCmd::Add, &mut env).unwrap();
    }

    #[test]
    fn filters_run_from_the_qdisc_then_inner_classes() {
        let mut htb = Htb::new(
            &HtbOpts {
                defcls: 0x30,
                ..Default::default()
            },
            &dev(),
        )
        .unwrap();
        for (p, m) in [
            (Handle::ROOT, 1),
            (h(1), 0x11),
            (h(1), 0x12),
            (Handle::ROOT, 0x30),
        ] {
            htb.change_class(h(m), p, Some(&copts(MBIT, MBIT, 0, 0)), &dev())
                .unwrap();
        }
        htb.set_handle(h(0));
        let root = htb.block_mut(h(0)).unwrap();
        fw(root, 1, h(1), None);
        fw(root, 2, h(0x11), Some(Verdict::Shot));
        fw(root, 3, h(0), None);
        fw(root, 4, h(0x99), None);
        fw(root, 5, h(0x12), Some(Verdict::Stolen));
        let inner = htb.block_mut(h(1)).unwrap();
        fw(inner, 1, h(0x12), None);
        fw(inner, 6, h(0x11), None);
        let mut n = QdiscNode::new(h(0), Handle::ROOT, Box::new(htb));
        let mut cx = Cx::new(Time(0));
        let mark = |m: u32, prio: u32| {
            Packet::from(Skb {
                mark: m,
                ..pkt(prio, 100).into_skb()
            })
        };
        n.enqueue(mark(1, 0), &mut cx).unwrap(); // qdisc -> 1:1 -> its filter -> 1:12
        assert_eq!(n.enqueue(mark(2, 0), &mut cx), Err(DropReason::Action));
        n.enqueue(mark(3, 0), &mut cx).unwrap(); // 1:0: direct
        n.enqueue(mark(4, 0), &mut cx).unwrap(); // unknown class: default 1:30
        assert_eq!(n.enqueue(mark(5, 0), &mut cx), Err(DropReason::Stolen));
        n.enqueue(mark(6, h(1).0), &mut cx).unwrap(); // priority names inner 1:1: its filters
        let qlen = |m| info(&n, m).stats.qlen;
        assert_eq!((qlen(0x11), qlen(0x12), qlen(0x30)), (1, 1, 1));
        let s = n.stats();
        // Shot counts as a drop; stolen does not.
        assert_eq!((s.qlen, s.drops), (4, 1));
        // A class filters point to cannot be deleted (observed on Linux 6.18:
        // "Error: HTB class in use." while a u32 filter had flowid 1:10).
        let cls = n.qdisc.classes().unwrap();
        assert_eq!(cls.delete_class(h(0x12)), Err(Htb::class_in_use_error()));
        assert_eq!(cls.delete_class(h(0x30)), Ok(()));
    }

    #[test]
    fn qdisc_options_defaults_dump_and_refusals() {
        let d = DevInfo {
            txqueuelen: 77,
            ..dev()
        };
        let q = Htb::new(
            &HtbOpts {
                rate2quantum: 0,
                ..Default::default()
            },
            &d,
        )
        .unwrap();
        let dump = q.dump();
        assert_eq!(
            dump,
            QdiscOpts::Htb(HtbOpts {
                rate2quantum: 1,
                defcls: 0,
                debug: 0,
                version: 0x30011,
                direct_pkts: 0,
                direct_qlen: Some(77),
                offload: false
            })
        );
        // The dump re-creates the same qdisc.
        let QdiscOpts::Htb(o) = &dump else {
            unreachable!()
        };
        assert_eq!(Htb::new(o, &d).unwrap().dump(), dump);
        let e = Htb::new(
            &HtbOpts {
                version: 2,
                ..Default::default()
            },
            &d,
        )
        .unwrap_err();
        assert_eq!(e.describe(), "RTNETLINK answers: Invalid argument");
        let e = Htb::new(
            &HtbOpts {
                offload: true,
                ..Default::default()
            },
            &d,
        )
        .unwrap_err();
        assert_eq!(
            (e.errno, e.describe().as_str()),
            (
                Errno::EOPNOTSUPP,
                "Error: hw-tc-offload ethtool feature flag must be on."
            )
        );
        let mut q = q;
        let e = q.change(&dump, &d).unwrap_err();
        assert_eq!(
            e.describe(),
            "Error: Change operation not supported by specified qdisc."
        );
    }

    #[test]
    fn class_parameters_as_the_kernel_stores_and_dumps_them() {
        // Values observed on Linux 6.18 / iproute2 6.1 (see the report of `tc -d -s class show`).
        let mut q = Htb::new(&HtbOpts::default(), &dev()).unwrap();
        let d = dev();
        q.change_class(h(1), Handle::ROOT, Some(&copts(8000, 8000, 0, 0)), &d)
            .unwrap();
        assert_eq!(
            q.take_warning().as_deref(),
            Some("sch_htb: quantum of class 10001 is small. Consider r2q change.")
        );
        q.change_class(
            h(2),
            Handle::ROOT,
            Some(&copts(100 * MBIT, 100 * MBIT, 0, 0)),
            &d,
        )
        .unwrap();
        assert_eq!(
            q.take_warning().as_deref(),
            Some("sch_htb: quantum of class 10002 is big. Consider r2q change.")
        );
        q.change_class(h(0xa), Handle::ROOT, Some(&copts(MBIT, 2 * MBIT, 9, 0)), &d)
            .unwrap();
        assert_eq!(q.take_warning(), None);
        let list = q.list();
        let get = |m: u16| list.iter().find(|c| c.classid == h(m)).unwrap();
        let o = |m| match &get(m).opts {
            ClassOpts::Htb(o) => o.clone(),
            _ => unreachable!(),
        };
        assert_eq!(
            (o(1).quantum, o(2).quantum, o(0xa).quantum),
            (1000, 200_000, 12_500)
        );
        assert_eq!(o(0xa).prio, 7);
        assert_eq!(o(0xa).buffer, 200_000);
        assert_eq!(o(0xa).cbuffer, 100_000);
        match &get(0xa).xstats {
            XStats::HtbClass(x) => assert_eq!((x.tokens, x.ctokens), (200_000, 100_000)),
            x => panic!("{x:?}"),
        }
        match &get(1).xstats {
            XStats::HtbClass(x) => assert_eq!(x.tokens, 3_125_000),
            x => panic!("{x:?}"),
        }
        // An explicit quantum is kept as given, without a warning.
        q.change_class(h(0xa), Handle::ROOT, Some(&copts(MBIT, MBIT, 0, 1)), &d)
            .unwrap();
        assert_eq!(q.take_warning(), None);
        assert_eq!(
            q.list()
                .iter()
                .find(|c| c.classid == h(0xa))
                .map(|c| c.opts.clone()),
            Some(ClassOpts::Htb(HtbClassOpts {
                quantum: 1,
                ..match copts(MBIT, MBIT, 0, 1) {
                    ClassOpts::Htb(o) => o,
                    _ => unreachable!(),
                }
            }))
        );
        // Rates of 0 and missing options are refused.
        let e = q
            .change_class(h(3), Handle::ROOT, Some(&copts(0, MBIT, 0, 0)), &d)
            .unwrap_err();
        assert_eq!(e, TcError::errno(Errno::EINVAL));
        assert!(q.change_class(h(3), Handle::ROOT, None, &d).is_err());
        assert!(q
            .change_class(h(3), Handle::ROOT, Some(&ClassOpts::Plain), &d)
            .is_err());
        // Class id 0 and ids of another qdisc are refused.
        assert!(q
            .change_class(Handle(0), Handle::ROOT, Some(&copts(MBIT, MBIT, 0, 0)), &d)
            .is_err());
        assert!(q
            .change_class(
                Handle::new(2, 3),
                Handle::ROOT,
                Some(&copts(MBIT, MBIT, 0, 0)),
                &d
            )
            .is_err());
        assert_eq!(q.list().len(), 3);
    }

    #[test]
    fn tree_shape_rules_observed_on_the_kernel() {
        let d = dev();
        let o = copts(MBIT, MBIT, 0, 0);
        let mut q = Htb::new(&HtbOpts::default(), &d).unwrap();
        // A chain of 8 classes is the deepest tree; the 9th is refused.
        let mut parent = Handle::new(1, 0);
        for m in 1..=8 {
            q.change_class(h(m), parent, Some(&o), &d).unwrap();
            parent = h(m);
        }
        let e = q.change_class(h(9), h(8), Some(&o), &d).unwrap_err();
        assert_eq!(e.describe(), "Error: sch_htb: tree is too deep.");
        let levels: Vec<(u16, u32)> = (1..=8)
            .map(|m| {
                (
                    m,
                    match q
                        .list()
                        .into_iter()
                        .find(|c| c.classid == h(m))
                        .unwrap()
                        .opts
                    {
                        ClassOpts::Htb(o) => o.level,
                        _ => unreachable!(),
                    },
                )
            })
            .collect();
        assert_eq!(
            levels,
            (1..=8).map(|m| (m, 8 - m as u32)).collect::<Vec<_>>()
        );
        // An unknown parent makes a root class; class 1:0 is allowed.
        q.change_class(h(0x30), h(0x99), Some(&o), &d).unwrap();
        q.change_class(h(0), Handle::new(1, 0), Some(&o), &d)
            .unwrap();
        let l = q.list();
        assert_eq!(
            l.iter().find(|c| c.classid == h(0x30)).unwrap().parent,
            Handle::ROOT
        );
        // A change cannot move a class.
        q.change_class(h(8), h(0x30), Some(&copts(2 * MBIT, 2 * MBIT, 0, 0)), &d)
            .unwrap();
        assert_eq!(
            q.list().iter().find(|c| c.classid == h(8)).unwrap().parent,
            h(7)
        );
        // A class with children cannot go.
        let e = q.delete_class(h(7)).unwrap_err();
        assert_eq!(
            (e.errno, e.describe().as_str()),
            (Errno::EBUSY, "Error: HTB class in use.")
        );
    }

    #[test]
    fn the_node_tells_htb_its_handle() {
        // Class ids must belong to this qdisc, even for the first class.
        let mut n = htb(0);
        let cls = n.qdisc.classes().unwrap();
        let o = copts(MBIT, MBIT, 0, 0);
        let e = cls
            .change_class(Handle::new(2, 1), Handle::ROOT, Some(&o), &dev())
            .unwrap_err();
        assert_eq!(e, TcError::errno(Errno::EINVAL));
        cls.change_class(h(1), Handle::ROOT, Some(&o), &dev())
            .unwrap();
        assert!(cls.leaf(h(1)).is_some_and(|l| l.parent == h(1)));
        assert!(cls.leaf(h(2)).is_none());
        // Filters attach to the qdisc and to existing classes only.
        let mut q = Htb::new(&HtbOpts::default(), &dev()).unwrap();
        q.set_handle(h(0));
        assert!(q.block_mut(h(0)).is_some() && q.block_mut(h(1)).is_none());
    }

    #[test]
    fn classes_are_listed_in_class_hash_order() {
        // Observed on Linux 6.18 / iproute2 6.1: adding 1:1, 1:2, 1:3, then 1:10
        // below 1:1, `tc class show` lists 1:1 1:10 1:2 1:3.
        let mut q = Htb::new(&HtbOpts::default(), &dev()).unwrap();
        for (p, m) in [
            (Handle::ROOT, 1),
            (Handle::ROOT, 2),
            (Handle::ROOT, 3),
            (h(1), 0x10),
        ] {
            q.change_class(h(m), p, Some(&copts(MBIT, MBIT, 0, 0)), &dev())
                .unwrap();
        }
        let ids: Vec<Handle> = q.list().iter().map(|c| c.classid).collect();
        assert_eq!(ids, vec![h(1), h(0x10), h(2), h(3)]);
        // Only leaves have a qdisc.
        assert_eq!(
            q.leaves_ref().iter().map(|l| l.parent).collect::<Vec<_>>(),
            vec![h(0x10), h(2), h(3)]
        );
    }

    #[test]
    fn a_leaf_becoming_inner_loses_its_queue_and_gets_it_back_when_childless() {
        let d = DevInfo {
            txqueuelen: 33,
            ..dev()
        };
        let mut q = Htb::new(&HtbOpts::default(), &d).unwrap();
        q.change_class(h(1), Handle::ROOT, Some(&copts(MBIT, MBIT, 3, 3000)), &d)
            .unwrap();
        let mut cx = Cx::new(Time(0));
        for _ in 0..3 {
            q.enqueue(pkt(h(1).0, 500), &mut cx).unwrap();
        }
        q.change_class(h(0x10), h(1), Some(&copts(MBIT, MBIT, 0, 0)), &d)
            .unwrap();
        assert_eq!(q.take_purged(), (3, 1500));
        assert_eq!(q.qlen, 0);
        let c = q.list().into_iter().find(|c| c.classid == h(1)).unwrap();
        assert_eq!((c.stats.qlen, c.leaf), (0, None));
        assert!(matches!(q.dequeue(&mut cx), Dequeue::Empty));
        // The last child goes: 1:1 is a leaf again with a fresh pfifo and its old prio/quantum.
        q.enqueue(pkt(h(0x10).0, 500), &mut cx).unwrap();
        q.delete_class(h(0x10)).unwrap();
        assert_eq!(q.take_purged(), (1, 500));
        let c = q.list().into_iter().find(|c| c.classid == h(1)).unwrap();
        match c.opts {
            ClassOpts::Htb(o) => assert_eq!((o.level, o.prio, o.quantum), (0, 3, 3000)),
            _ => unreachable!(),
        }
        let leaf = q.leaves_ref()[0];
        assert_eq!((leaf.handle, leaf.parent), (Handle::UNSPEC, h(1)));
        assert_eq!(
            leaf.qdisc.dump(),
            QdiscOpts::Pfifo(crate::qdisc::fifo::FifoOpts { limit: Some(33) })
        );
        q.enqueue(pkt(h(1).0, 500), &mut cx).unwrap();
        assert!(matches!(q.dequeue(&mut cx), Dequeue::Packet(_)));
    }

    #[test]
    fn graft_replaces_a_leaf_qdisc_and_purges_the_old_one() {
        let d = dev();
        let mut q = Htb::new(&HtbOpts::default(), &d).unwrap();
        q.change_class(h(1), Handle::ROOT, Some(&copts(MBIT, MBIT, 0, 0)), &d)
            .unwrap();
        q.change_class(h(2), h(1), Some(&copts(MBIT, MBIT, 0, 0)), &d)
            .unwrap();
        let mut cx = Cx::new(Time(0));
        q.enqueue(pkt(h(2).0, 700), &mut cx).unwrap();
        let mine = QdiscNode::new(Handle::new(0x10, 0), h(2), Box::new(Fifo::pfifo(5)));
        let old = q.graft(h(2), Some(mine), &d).unwrap().unwrap();
        assert_eq!((old.handle, old.stats.qlen), (Handle::UNSPEC, 0));
        assert_eq!(q.take_purged(), (1, 700));
        assert_eq!(
            q.list()
                .into_iter()
                .find(|c| c.classid == h(2))
                .unwrap()
                .leaf,
            Some(Handle::new(0x10, 0))
        );
        // Inner classes take no qdisc.
        let e = q.graft(h(1), None, &d).unwrap_err();
        assert_eq!(e, TcError::errno(Errno::EINVAL));
        q.enqueue(pkt(h(2).0, 700), &mut cx).unwrap();
        assert!(matches!(q.dequeue(&mut cx), Dequeue::Packet(p) if p.len == 700));
        // None restores a default pfifo.
        let old = q.graft(h(2), None, &d).unwrap().unwrap();
        assert_eq!(old.handle, Handle::new(0x10, 0));
        assert_eq!(q.leaves_ref()[0].handle, Handle::UNSPEC);
    }

    #[test]
    fn a_class_that_may_not_send_makes_dequeue_wait_until_it_may() {
        let mut n = htb(0);
        // 1 Mbit/s with a 1600-byte bucket: two 1000-byte packets leave, the
        // third must wait until the bucket is back at 0, i.e. 400 bytes later.
        add(&mut n, Handle::ROOT, 1, copts(MBIT, MBIT, 0, 0));
        let mut cx = Cx::new(Time(0));
        for _ in 0..3 {
            n.enqueue(pkt(h(1).0, 1000), &mut cx).unwrap();
        }
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        let cost = RateCfg::new(spec(MBIT)).l2t_ns(1000) as i64;
        let deficit = 2 * cost - (xmit_ticks(MBIT, 1600) as i64) * 64;
        match n.dequeue(&mut cx) {
            Dequeue::Wait(t) => assert_eq!(t.0 as i64, deficit),
            d => panic!("{d:?}"),
        }
        let mut cx = Cx::new(Time(deficit as u64 - 1));
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Wait(_)));
        let mut cx = Cx::new(Time(deficit as u64));
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Empty));
        // It went into debt twice: after the 2nd and after the 3rd packet.
        assert_eq!(info(&n, 1).stats.overlimits, 2);
    }

    /// 1:1 rate 2mbit, 1:10 rate 1mbit ceil 2mbit below it, default 10.
    fn kernel_pair() -> QdiscNode {
        let mut n = htb(0x10);
        add(&mut n, Handle::ROOT, 1, copts(2 * MBIT, 2 * MBIT, 0, 0));
        add(&mut n, h(1), 0x10, copts(MBIT, 2 * MBIT, 0, 0));
        n
    }

    #[test]
    fn one_packet_charges_tokens_as_observed_on_the_kernel() {
        // Linux 6.18: after one 90-byte packet through this tree, `tc -s class
        // show` printed for 1:10 "lended: 1 borrowed: 0 ... tokens: 188750
        // ctokens: 94375" and for 1:1 "lended: 0 ... tokens: 94375 ctokens: 94375".
        let mut n = kernel_pair();
        let mut cx = Cx::new(Time(5 * SEC));
        n.enqueue(pkt(0, 90), &mut cx).unwrap();
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        let (leaf, parent) = (xstats(&n, 0x10), xstats(&n, 1));
        assert_eq!(
            (leaf.lended, leaf.borrowed, leaf.tokens, leaf.ctokens),
            (1, 0, 188_750, 94_375)
        );
        assert_eq!(
            (
                parent.lended,
                parent.borrowed,
                parent.tokens,
                parent.ctokens
            ),
            (0, 0, 94_375, 94_375)
        );
        assert_eq!(
            (info(&n, 1).stats.bytes, info(&n, 1).stats.packets),
            (90, 1)
        );
    }

    #[test]
    fn a_burst_lends_and_borrows_as_observed_on_the_kernel() {
        // Linux 6.18, three runs: 20 UDP packets of 1042 bytes sent at once
        // into this tree on a veth gave 1:10 "lended: 11 borrowed: 9" with
        // overlimits 18-19, and 1:1 "lended: 9", overlimits 10-11 (timer jitter).
        let mut n = kernel_pair();
        let mut cx = Cx::new(Time(SEC));
        for _ in 0..20 {
            n.enqueue(pkt(0, 1042), &mut cx).unwrap();
        }
        let mut t = SEC;
        loop {
            match n.dequeue(&mut Cx::new(Time(t))) {
                Dequeue::Packet(_) => {}
                Dequeue::Wait(w) => t = w.0,
                Dequeue::Empty => break,
            }
        }
        let (leaf, parent) = (xstats(&n, 0x10), xstats(&n, 1));
        assert_eq!((leaf.lended, leaf.borrowed, parent.lended), (11, 9, 9));
        let (lo, po) = (
            info(&n, 0x10).stats.overlimits,
            info(&n, 1).stats.overlimits,
        );
        assert!(
            (18..=19).contains(&lo) && (10..=11).contains(&po),
            "{lo} {po}"
        );
        assert_eq!(n.stats().overlimits, lo + po);
    }

    #[test]
    fn service_order_matches_the_kernel() {
        // Linux 6.18, iproute2 6.1, three identical runs on a veth pair:
        //   1:1 rate 2mbit; below it 1:10 rate 500kbit ceil 2mbit quantum 1500,
        //   1:20 rate 500kbit ceil 2mbit quantum 3000, 1:30 rate 200kbit ceil
        //   2mbit prio 1 quantum 1500 (default 30); 12 rounds of one 1042-byte
        //   UDP packet per class (tagged 1NN, 2NN, 3NN) sent back to back.
        // The receiver saw them in this order:
        let kernel =
            "100 200 300 101 201 301 102 202 302 103 203 104 105 204 205 106 107 206 303 207 \
                      108 208 209 109 110 210 211 304 111 305 306 307 308 309 310 311";
        let mut n = htb(0x30);
        add(&mut n, Handle::ROOT, 1, copts(2 * MBIT, 2 * MBIT, 0, 0));
        add(&mut n, h(1), 0x10, copts(MBIT / 2, 2 * MBIT, 0, 1500));
        add(&mut n, h(1), 0x20, copts(MBIT / 2, 2 * MBIT, 0, 3000));
        add(&mut n, h(1), 0x30, copts(MBIT / 5, 2 * MBIT, 1, 1500));
        let mut out = Vec::new();
        let drain = |n: &mut QdiscNode, t: u64, out: &mut Vec<u64>| loop {
            match n.dequeue(&mut Cx::new(Time(t))) {
                Dequeue::Packet(p) => out.push(p.id),
                d => return d,
            }
        };
        // Each send enqueues and runs the qdisc at once (a veth transmits instantly).
        let mut t = SEC;
        for round in 0..12 {
            for class in 1..=3u64 {
                let p = Packet::from(Skb {
                    id: class * 100 + round,
                    ..pkt(h(class as u16 * 0x10).0, 1042).into_skb()
                });
                n.enqueue(p, &mut Cx::new(Time(t))).unwrap();
                drain(&mut n, t, &mut out);
                t += 5_000;
            }
        }
        while let Dequeue::Wait(w) = drain(&mut n, t, &mut out) {
            t = w.0;
        }
        let ours: Vec<String> = out.iter().map(|id| id.to_string()).collect();
        assert_eq!(
            ours.join(" "),
            kernel.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        let x: Vec<(u32, u32)> = [1, 0x10, 0x20, 0x30]
            .iter()
            .map(|&m| (xstats(&n, m).lended, xstats(&n, m).borrowed))
            .collect();
        assert_eq!(x, vec![(14, 0), (9, 3), (8, 4), (5, 7)]);
    }

    #[test]
    fn service_order_in_a_deeper_tree_matches_the_kernel() {
        // Linux 6.18, iproute2 6.1 on a veth pair, `default 3`:
        //   1:1 rate 3mbit
        //     1:2 rate 1mbit ceil 3mbit
        //       1:21 rate 300kbit ceil 3mbit prio 0 quantum 2000   (tag 1NN)
        //       1:22 rate 300kbit ceil 2mbit prio 1 quantum 1500   (tag 2NN)
        //     1:3 rate 1mbit ceil 3mbit prio 1 quantum 1500        (tag 3NN)
        // 15 rounds of one 1042-byte packet per class sent back to back; two of
        // three runs gave this order (the third swapped 306 and 106, a timer tie).
        let kernel = "100 200 300 101 201 301 302 303 102 202 304 103 305 104 105 106 306 107 203 307 \
                      108 308 109 110 111 309 112 113 204 310 311 114 312 205 313 314 206 207 208 209 \
                      210 211 212 213 214";
        let mut n = htb(3);
        add(&mut n, Handle::ROOT, 1, copts(3 * MBIT, 3 * MBIT, 0, 0));
        add(&mut n, h(1), 2, copts(MBIT, 3 * MBIT, 0, 0));
        add(&mut n, h(2), 0x21, copts(3 * MBIT / 10, 3 * MBIT, 0, 2000));
        add(&mut n, h(2), 0x22, copts(3 * MBIT / 10, 2 * MBIT, 1, 1500));
        add(&mut n, h(1), 3, copts(MBIT, 3 * MBIT, 1, 1500));
        let classes = [h(0x21), h(0x22), h(3)];
        let mut out = Vec::new();
        let drain = |n: &mut QdiscNode, t: u64, out: &mut Vec<u64>| loop {
            match n.dequeue(&mut Cx::new(Time(t))) {
                Dequeue::Packet(p) => out.push(p.id),
                d => return d,
            }
        };
        let mut t = SEC;
        for round in 0..15 {
            for (i, c) in classes.iter().enumerate() {
                let p = Packet::from(Skb {
                    id: (i as u64 + 1) * 100 + round,
                    ..pkt(c.0, 1042).into_skb()
                });
                n.enqueue(p, &mut Cx::new(Time(t))).unwrap();
                drain(&mut n, t, &mut out);
                t += 5_000;
            }
        }
        while let Dequeue::Wait(w) = drain(&mut n, t, &mut out) {
            t = w.0;
        }
        let ours: Vec<String> = out.iter().map(|id| id.to_string()).collect();
        assert_eq!(
            ours.join(" "),
            kernel.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        // (lended, borrowed, overlimits) as `tc -s class show` printed them.
        let got: Vec<(u32, u32, u64)> = [1, 2, 0x21, 0x22, 3]
            .iter()
            .map(|&m| {
                (
                    xstats(&n, m).lended,
                    xstats(&n, m).borrowed,
                    info(&n, m).stats.overlimits,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![(15, 0, 16), (6, 13, 5), (5, 10, 2), (6, 9, 9), (13, 2, 2)]
        );
        assert_eq!(
            (info(&n, 2).stats.packets, info(&n, 1).stats.bytes),
            (30, 46_890)
        );
    }

    /// Rows and feeds are bitmaps by minor: siblings whose minors lie in
    /// different words and summary words (added out of order) are still
    /// served in class-id order, on their own rate (a level-0 row) and
    /// when borrowing (their parent's feed).
    #[test]
    fn siblings_far_apart_are_served_in_class_id_order() {
        let minors = [0xfff0u16, 0x5, 0x1100, 0x80];
        let mut n = htb(0);
        add(&mut n, Handle::ROOT, 1, copts(100 * MBIT, 100 * MBIT, 0, 0));
        for m in minors {
            add(&mut n, h(1), m, copts(MBIT / 1000, 100 * MBIT, 0, 1000));
        }
        let mut t = SEC;
        for round in 0..4u64 {
            for m in minors {
                let mut p = pkt(h(m).0, 1000);
                p.id = round;
                n.enqueue(p, &mut Cx::new(Time(t))).unwrap();
            }
        }
        let mut order = Vec::new();
        loop {
            match n.dequeue(&mut Cx::new(Time(t))) {
                Dequeue::Packet(p) => {
                    order.push(Handle(p.priority).minor());
                    t += 80_000; // 1000 bytes at 100 Mbit/s
                }
                Dequeue::Wait(w) => t = w.0,
                Dequeue::Empty => break,
            }
        }
        let round = [0x5, 0x80, 0x1100, 0xfff0];
        assert_eq!(order, round.repeat(4));
        // The first packets went on the leaves' own rate, the last ones borrowed.
        for m in round {
            let x = xstats(&n, m);
            assert!(x.lended > 0 && x.borrowed > 0, "{m:x}: {x:?}");
        }
    }

    #[test]
    fn reset_empties_everything_and_keeps_classes() {
        let mut n = two_leaves();
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(h(0x10).0, 100), &mut cx).unwrap();
        n.enqueue(pkt(0, 100), &mut cx).unwrap();
        n.reset();
        assert_eq!(n.stats().qlen, 0);
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Empty));
        n.enqueue(pkt(h(0x20).0, 100), &mut cx).unwrap();
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.priority == h(0x20).0));
    }

    /// Wait-queue sequence numbers run out after 2^47 insertions and start
    /// over; that must change neither what is sent when nor any counter.
    #[test]
    fn renumbering_the_wait_queue_changes_nothing() {
        let trace = |start_seq: u64| {
            let d = dev();
            let mut q = Htb::new(&HtbOpts::default(), &d).unwrap();
            for (minor, parent, o) in [
                (1, Handle::ROOT, copts(30 * MBIT, 30 * MBIT, 0, 0)),
                (0x10, h(1), copts(10 * MBIT, 30 * MBIT, 0, 0)),
                (0x20, h(1), copts(5 * MBIT, 20 * MBIT, 1, 0)),
            ] {
                q.change_class(h(minor), parent, Some(&o), &d).unwrap();
            }
            q.pq_seq = start_seq;
            let mut out = Vec::new();
            let mut t = 0;
            for _ in 0..4000 {
                let mut cx = Cx::new(Time(t));
                while q.qlen < 8 {
                    for m in [0x10, 0x20] {
                        q.enqueue(pkt(h(m).0, 1500), &mut cx).unwrap();
                    }
                }
                match q.dequeue(&mut cx) {
                    Dequeue::Packet(p) => {
                        out.push((t, p.priority));
                        // A 40 Mbit/s link (MBIT is in bytes/s).
                        t += 1500 * SEC / (40 * MBIT);
                    }
                    Dequeue::Wait(w) => {
                        out.push((w.0, 0));
                        t = w.0;
                    }
                    Dequeue::Empty => break,
                }
            }
            (out, format!("{:?}", q.list()), q.pq_seq)
        };
        let (plain, plain_classes, _) = trace(0);
        let (renumbered, renumbered_classes, seq) = trace(SEQ_LIMIT - 3);
        assert!(seq < 4000, "the sequence started over (now {seq})");
        assert!(
            plain.iter().any(|&(_, p)| p == 0),
            "the wait queue was used"
        );
        assert_eq!(plain, renumbered);
        assert_eq!(plain_classes, renumbered_classes);
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// [`MinorSet`] behaves as an ordered set, across word and
            /// summary-word boundaries.
            #[test]
            fn minorset_is_an_ordered_set(ops in proptest::collection::vec((any::<bool>(), prop_oneof![0u32..200, 4000u32..4200, 65400u32..65536]), 0..400)) {
                let mut set = MinorSet::default();
                let mut model = std::collections::BTreeSet::new();
                for (add, m) in ops {
                    if add {
                        set.insert(m);
                        model.insert(m);
                    } else {
                        set.remove(m);
                        model.remove(&m);
                    }
                    prop_assert_eq!(set.is_empty(), model.is_empty());
                    prop_assert_eq!(set.first(), model.first().copied());
                    for probe in [0, 63, 64, m, m + 1, 4095, 4096, 4160, 65535] {
                        prop_assert_eq!(set.at_or_after(probe), model.range(probe..).next().copied());
                        prop_assert_eq!(set.after(probe), model.range(probe + 1..).next().copied());
                    }
                }
            }
        }

        #[derive(Clone, Debug)]
        struct ClassSpec {
            parent: usize, // 0 = root, i = the i-th class (1-based, earlier only)
            rate_kbit: u64,
            ceil_extra_kbit: u64,
            prio: u32,
            quantum: u32,
        }

        #[derive(Clone, Debug)]
        enum Op {
            Enqueue { target: usize, len: u32 },
            Dequeue,
            Advance(u64),
            AddClass(ClassSpec),
            Graft(usize),
            Delete(usize),
        }

        fn class_spec() -> impl Strategy<Value = ClassSpec> {
            (
                0usize..6,
                64u64..20_000,
                prop_oneof![Just(0u64), 0u64..20_000],
                0u32..9,
                prop_oneof![Just(0u32), 100u32..5000],
            )
                .prop_map(|(parent, rate_kbit, ceil_extra_kbit, prio, quantum)| {
                    ClassSpec {
                        parent,
                        rate_kbit,
                        ceil_extra_kbit,
                        prio,
                        quantum,
                    }
                })
        }

        fn op(structural: bool) -> BoxedStrategy<Op> {
            let traffic = prop_oneof![
                4 => (0usize..10, 40u32..1600).prop_map(|(target, len)| Op::Enqueue { target, len }),
                4 => Just(Op::Dequeue),
                2 => (0u64..3_000_000).prop_map(Op::Advance),
            ];
            if !structural {
                return traffic.boxed();
            }
            prop_oneof![
                10 => traffic,
                1 => class_spec().prop_map(Op::AddClass),
                1 => (1usize..8).prop_map(Op::Graft),
                1 => (1usize..8).prop_map(Op::Delete),
            ]
            .boxed()
        }

        fn class_opts(s: &ClassSpec) -> ClassOpts {
            let rate = s.rate_kbit * 125;
            copts(rate, rate + s.ceil_extra_kbit * 125, s.prio, s.quantum)
        }

        fn build(q: &mut dyn Classful, classes: &[ClassSpec]) {
            for (i, s) in classes.iter().enumerate() {
                let parent = if s.parent == 0 || s.parent > i {
                    Handle::ROOT
                } else {
                    h(s.parent as u16)
                };
                // Some trees are too deep: the kernel refuses those classes too.
                let _ = q.change_class(h(i as u16 + 1), parent, Some(&class_opts(s)), &dev());
            }
        }

        /// Targets: 0 = unclassified, 1 = the direct queue (1:0), i = class 1:(i-1).
        fn target_priority(t: usize) -> u32 {
            match t {
                0 => 0,
                1 => h(0).0,
                i => h(i as u16 - 1).0,
            }
        }

        /// Check the Wait answer: not in the past, and no packet can leave
        /// before it (probing just before it must not yield one).
        fn check_wait(q: &mut dyn Qdisc, now: u64, t: Time) -> Result<(), TestCaseError> {
            prop_assert!(t.0 >= now, "Wait({}) before now {}", t.0, now);
            if t.0 > now + 1 {
                for probe in [now + (t.0 - now) / 2, t.0 - 1] {
                    let d = q.dequeue(&mut Cx::new(Time(probe)));
                    prop_assert!(
                        !matches!(d, Dequeue::Packet(_)),
                        "a packet left at {probe} before Wait({})",
                        t.0
                    );
                }
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

            /// At the node: offered = sent + dropped + backlog, always, and
            /// everything queued eventually leaves.
            #[test]
            fn packets_are_conserved_at_the_node(
                classes in prop::collection::vec(class_spec(), 1..8),
                defcls in 0u32..10,
                ops in prop::collection::vec(op(false), 1..400),
            ) {
                let mut n = htb_with(HtbOpts { defcls, direct_qlen: Some(20), ..Default::default() });
                build(n.qdisc.classes().unwrap(), &classes);
                let (mut now, mut offered, mut bytes_in) = (0u64, 0u64, 0u64);
                for op in &ops {
                    match *op {
                        Op::Enqueue { target, len } => {
                            offered += 1;
                            bytes_in += len as u64;
                            let _ = n.enqueue(pkt(target_priority(target), len), &mut Cx::new(Time(now)));
                        }
                        Op::Dequeue => {
                            if let Dequeue::Wait(t) = n.dequeue(&mut Cx::new(Time(now))) {
                                check_wait(n.qdisc.as_mut(), now, t)?;
                            }
                        }
                        Op::Advance(dt) => now += dt,
                        _ => {}
                    }
                    let s = n.stats();
                    prop_assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
                    let leaves: u64 = n.qdisc.classes_ref().unwrap().list().iter().map(|c| c.stats.qlen as u64).sum();
                    prop_assert!(leaves <= s.qlen as u64 && s.qlen as u64 - leaves <= 20);
                }
                // Drain: everything queued leaves, at the pace the classes allow.
                let mut rounds = 0;
                loop {
                    match n.dequeue(&mut Cx::new(Time(now))) {
                        Dequeue::Packet(_) => {}
                        Dequeue::Wait(t) => {
                            check_wait(n.qdisc.as_mut(), now, t)?;
                            now = t.0;
                        }
                        Dequeue::Empty => break,
                    }
                    rounds += 1;
                    prop_assert!(rounds < 100_000, "did not drain");
                }
                let s = n.stats();
                prop_assert_eq!((s.qlen, s.backlog), (0, 0));
                prop_assert_eq!(offered, s.packets + s.drops);
                prop_assert!(s.bytes <= bytes_in);
            }

            /// With classes added, grafted and deleted under traffic (which
            /// purges queues), HTB's own count stays equal to what its queues hold.
            #[test]
            fn structural_changes_under_traffic_keep_the_books(
                classes in prop::collection::vec(class_spec(), 1..6),
                ops in prop::collection::vec(op(true), 1..400),
            ) {
                let d = dev();
                let mut q = Htb::new(&HtbOpts { defcls: 1, ..Default::default() }, &d).unwrap();
                build(&mut q, &classes);
                let mut next_minor = classes.len() as u16 + 1;
                let (mut now, mut offered, mut sent, mut refused, mut purged) = (0u64, 0u64, 0u64, 0u64, 0u64);
                for op in &ops {
                    match op {
                        Op::Enqueue { target, len } => {
                            offered += 1;
                            if q.enqueue(pkt(target_priority(*target), *len), &mut Cx::new(Time(now))).is_err() {
                                refused += 1;
                            }
                        }
                        Op::Dequeue => match q.dequeue(&mut Cx::new(Time(now))) {
                            Dequeue::Packet(_) => sent += 1,
                            Dequeue::Wait(t) => {
                                prop_assert!(t.0 >= now);
                                now = now.max(t.0.min(now + 10_000_000));
                            }
                            Dequeue::Empty => {}
                        },
                        Op::Advance(dt) => now += dt,
                        Op::AddClass(s) => {
                            let parent = if s.parent == 0 { Handle::ROOT } else { h(s.parent as u16) };
                            let _ = q.change_class(h(next_minor), parent, Some(&class_opts(s)), &d);
                            next_minor += 1;
                        }
                        Op::Graft(m) => {
                            let _ = q.graft(h(*m as u16), None, &d);
                        }
                        Op::Delete(m) => {
                            let _ = q.delete_class(h(*m as u16));
                        }
                    }
                    purged += q.take_purged().0;
                    let leaves: u64 = q.leaves_ref().iter().map(|l| l.stats.qlen as u64).sum();
                    prop_assert_eq!(q.qlen, leaves + q.direct.len() as u64);
                    prop_assert_eq!(offered, sent + refused + purged + q.qlen);
                }
                let mut rounds = 0;
                loop {
                    match q.dequeue(&mut Cx::new(Time(now))) {
                        Dequeue::Packet(_) => sent += 1,
                        Dequeue::Wait(t) => now = t.0,
                        Dequeue::Empty => break,
                    }
                    rounds += 1;
                    prop_assert!(rounds < 100_000, "did not drain");
                }
                prop_assert_eq!(q.qlen, 0);
                prop_assert_eq!(offered, sent + refused + purged);
            }
        }
    }
}
