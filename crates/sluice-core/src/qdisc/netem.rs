//! netem: the network emulator — delay, jitter, loss, duplication,
//! corruption, reordering, rate and slotting.
//!
//! Modelled on net/sched/sch_netem.c (Linux 6.x, with the 2025
//! `check_netem_in_tree` restriction on duplicating netems that the
//! tc-testing cases exercise), with the option handling of iproute2 6.1's
//! tc/q_netem.c.
//!
//! # Algorithm
//!
//! On enqueue, netem decides in this order, drawing from its generator:
//!
//! 1. **duplicate** with probability `duplicate` (correlated by `dup_corr`);
//! 2. **loss**: `loss random` (correlated by `loss_corr`), or the 4-state
//!    Markov chain of `loss state` (GI model: states 1 good, 2 good within a
//!    burst, 3 isolated loss, 4 burst loss; p13, p31, p32, p23, p14), or the
//!    Gilbert-Elliot chain of `loss gemodel` (p, r, 1-h, 1-k). A lost packet
//!    is dropped, unless `ecn` is set and the packet is ECN-capable: then it
//!    is marked CE and *counted as a drop* but kept, as the kernel does. A
//!    lost packet that was to be duplicated is sent once;
//! 3. **corrupt** with probability `corrupt`: one random bit of the packet's
//!    bytes is flipped;
//! 4. the **limit**: a packet arriving when `limit` packets are queued is
//!    dropped;
//! 5. **reorder**: unless `gap` is 0, after `gap - 1` packets have been
//!    delayed, each packet is sent at once (put at the head of the queue,
//!    counted as a requeue) with probability `reorder`; otherwise
//! 6. **delay**: the packet is due at `now + tabledist(latency, jitter)`:
//!    uniform on `[latency - jitter, latency + jitter)` without a
//!    distribution table, else `latency + jitter * table[r] / 8192` for a
//!    random entry of the table (normal, pareto, paretonormal or a custom
//!    `.dist` file). With `rate`, the delay counts from the departure time
//!    of the last packet queued (less the time since then, never below
//!    zero) plus the packet's serialization time
//!    `(len + packetoverhead, in cells of cellsize + celloverhead) / rate`.
//!
//! Delayed packets wait in the tfifo (module `tfifo`), ordered by departure
//! time (so jitter reorders packets, as in the kernel). Dequeue hands out
//! the requeued (reordered) packets first, then the tfifo's head when it is
//! due and, with `slot`, when the current delivery slot is open: a slot
//! opens `min..max` (or a distribution's delay) after the previous one and
//! carries at most `packets` packets and `bytes` bytes. Otherwise netem
//! answers [`Dequeue::Wait`] with the later of the two times, the kernel's
//! watchdog. netem is classful with one class, `major:1`: a qdisc grafted
//! there receives the packets as they come due and is dequeued when netem
//! has nothing due (the kernel's `q->qdisc`).
//!
//! # Randomness
//!
//! Every decision the kernel draws from netem's seeded generator
//! (`prandom_u32_state`, seeded by `seed N` through `prandom_seed_state`)
//! is drawn here from the same generator, seeded the same way, so a given
//! `seed` makes the same decisions as Linux would (exactly so where Linux
//! is deterministic: without correlation, corruption or uniform slots). The
//! kernel takes a few numbers from its unseeded generator instead: the
//! initial state of each correlated stream, the corrupted bit, and uniform
//! slot lengths. sluice takes those from a second generator seeded from the
//! same seed, so the same seed always gives the same packets out. Without
//! `seed` the seed comes from the device (`DevInfo.seed`) mixed with the
//! qdisc's handle, so two netems on one device draw independent streams;
//! `dump` reports the seed in use, as the kernel does.
//!
//! Correlation is the kernel's `get_crandom`, an AR(1) mix of the new number
//! with the last answer. The delay stream then goes through `rnd % (2 *
//! jitter)` (uniform) or `rnd % table_size`, which keeps only the low-order
//! part of the number: the lag-1 correlation of the delays survives only
//! when `2 * jitter` approaches 2^32 ns (a jitter of seconds) or the
//! correlation is very close to 100 %. That is Linux's behaviour, kept.
//!
//! # Statistics
//!
//! netem keeps the kernel's counters itself ([`Qdisc::own_stats`]): packets
//! lost and ECN-marked count as drops, a reordered packet as a requeue, and
//! the queue length covers the tfifo, the requeued packets and the child.
//!
//! # GSO packets
//!
//! As in the kernel, a GSO packet chosen for corruption is segmented first
//! (`netem_segment`), its checksum completed, and only the first segment
//! corrupted; the other segments go through netem's enqueue again one by
//! one (loss, duplication, corruption, limit), and one refused counts a
//! second drop, as the kernel's loop does. netem does not otherwise
//! segment: `rate` times a GSO packet by its whole length, every segment's
//! headers included.
//!
//! # Deviations
//!
//! - **Duplicates.** The kernel enqueues the copy at the *root* qdisc of
//!   the device (`rootq->enqueue`, after the original's loss, corruption
//!   and limit checks, with duplication off for the copy). netem hands the
//!   copy to [`Cx::to_root`]; whoever enqueues at the root
//!   ([`QdiscNode::enqueue_root`], used by the device's port) enqueues it
//!   there with [`Cx::reinjecting`] set, so it is not duplicated again.
//! - `check_netem_in_tree` looks at every qdisc of the device. netem sees
//!   only its own subtree: it refuses a duplicating netem under itself, a
//!   netem under itself when either duplicates, and duplication on itself
//!   while a netem is below it; [`check_netem_in_tree`] does the full check
//!   for a caller that has the whole tree (the device).
//! - The corrupted bit is chosen among the bytes sluice carries (from the
//!   network header on); the kernel chooses among the linear bytes of the
//!   skb, which on egress start at the link-layer header.
//! - A `slot` configured by `change` opens at the latest time netem has
//!   seen, where the kernel uses the time of the change.
//! - A packet its parent holds peeked ([`QdiscNode::peek`]) is out of
//!   netem's queue length (the kernel counts it until it is dequeued), so
//!   `limit` admits one packet more while a parent holds one.

mod prandom;
mod tfifo;

pub mod dist;

use self::prandom::{Crnd, Prandom};
use self::tfifo::{Tfifo, Timed};
use super::{
    wrong_kind, ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts,
    XStats,
};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::{DropReason, Stats};
use crate::time::{ns_to_ticks, ticks_to_ns, Time};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;

/// A delay distribution table (`TCA_NETEM_DELAY_DIST`, `TCA_NETEM_SLOT_DIST`):
/// signed entries scaled so that 8192 is one jitter. Shared, so options
/// that carry one are cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<i16>", into = "Vec<i16>")]
pub struct DistTable(Arc<[i16]>);

impl DistTable {
    /// The entries.
    pub fn entries(&self) -> &[i16] {
        &self.0
    }
}

impl From<Vec<i16>> for DistTable {
    fn from(v: Vec<i16>) -> Self {
        DistTable(v.into())
    }
}

impl From<DistTable> for Vec<i16> {
    fn from(t: DistTable) -> Self {
        t.0.to_vec()
    }
}

/// `struct tc_netem_corr`: correlations, `u32::MAX` = 100 %.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemCorr {
    /// Of the delay.
    pub delay_corr: u32,
    /// Of `loss random`.
    pub loss_corr: u32,
    /// Of duplication.
    pub dup_corr: u32,
}

/// `struct tc_netem_reorder` and `struct tc_netem_corrupt`: a probability
/// and its correlation, `u32::MAX` = 100 %.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemProb {
    /// The probability.
    pub probability: u32,
    /// The correlation.
    pub correlation: u32,
}

/// `struct tc_netem_rate`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemRate {
    /// Bytes per second (`u32::MAX` when the real rate is in `rate64`).
    pub rate: u32,
    /// Bytes added to every packet (may be negative).
    pub packet_overhead: i32,
    /// Cell size in bytes (0: no cells).
    pub cell_size: u32,
    /// Bytes added to every cell (may be negative).
    pub cell_overhead: i32,
}

/// `struct tc_netem_slot`: times in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemSlot {
    /// Shortest time between slots.
    pub min_delay: i64,
    /// Longest time between slots.
    pub max_delay: i64,
    /// Packets per slot (0: unlimited).
    pub max_packets: i32,
    /// Bytes per slot (0: unlimited).
    pub max_bytes: i32,
    /// Mean time between slots with a distribution.
    pub dist_delay: i64,
    /// Its jitter (0: `min_delay..max_delay` instead).
    pub dist_jitter: i64,
}

/// `TCA_NETEM_LOSS`: a correlated loss model, probabilities with
/// `u32::MAX` = 100 %.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossModel {
    /// `NETEM_LOSS_GI`, `struct tc_netem_gimodel` (`loss state`).
    State {
        p13: u32,
        p31: u32,
        p32: u32,
        p14: u32,
        p23: u32,
    },
    /// `NETEM_LOSS_GE`, `struct tc_netem_gemodel` (`loss gemodel`); `h` is
    /// the probability of *no* loss in the bad state, `k1` of loss in the good.
    Gemodel { p: u32, r: u32, h: u32, k1: u32 },
}

/// What tc sends for a netem (`TCA_OPTIONS`), and what the kernel dumps.
///
/// The first six fields are `struct tc_netem_qopt` (times in psched ticks,
/// probabilities with `u32::MAX` = 100 %); the optional ones are the
/// `TCA_NETEM_*` attributes, present or not. A `change` leaves what an
/// absent attribute sets as it was (correlations, reorder, corrupt, rate,
/// ecn, slot, tables, seed), as the kernel does.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemOpts {
    /// Delay in psched ticks (64 ns).
    pub latency_ticks: u32,
    /// Packets queued at most.
    pub limit: u32,
    /// `loss random` probability.
    pub loss: u32,
    /// Reordering gap (0: no reordering).
    pub gap: u32,
    /// Duplication probability.
    pub duplicate: u32,
    /// Jitter in psched ticks.
    pub jitter_ticks: u32,
    /// `TCA_NETEM_CORR`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corr: Option<NetemCorr>,
    /// `TCA_NETEM_DELAY_DIST` (tc sends it; the kernel does not dump it,
    /// sluice does, so a dump recreates the same qdisc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_dist: Option<DistTable>,
    /// `TCA_NETEM_REORDER`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder: Option<NetemProb>,
    /// `TCA_NETEM_CORRUPT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<NetemProb>,
    /// `TCA_NETEM_LOSS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_model: Option<LossModel>,
    /// `TCA_NETEM_RATE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<NetemRate>,
    /// `TCA_NETEM_ECN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<u32>,
    /// `TCA_NETEM_RATE64`: the rate in bytes/s when it does not fit 32 bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate64: Option<u64>,
    /// `TCA_NETEM_LATENCY64`: the delay in ns (overrides `latency_ticks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency64: Option<i64>,
    /// `TCA_NETEM_JITTER64`: the jitter in ns (overrides `jitter_ticks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter64: Option<i64>,
    /// `TCA_NETEM_SLOT`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<NetemSlot>,
    /// `TCA_NETEM_SLOT_DIST` (not dumped by the kernel; see `delay_dist`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_dist: Option<DistTable>,
    /// `TCA_NETEM_PRNG_SEED`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// The loss generator (`loss_model` with its `clgstate` parameters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LossGen {
    /// `CLG_RANDOM`: `loss` with `loss_corr`.
    Random,
    /// `CLG_4_STATES`: a1..a5 = p13, p31, p32, p14, p23.
    FourState(LossModel),
    /// `CLG_GILB_ELL`: a1..a4 = p, r, h, k1.
    GilbertElliot(LossModel),
}

// The 4-state chain's states (`TX_IN_GAP_PERIOD`, ...) and the GE chain's.
const TX_IN_GAP: u8 = 1;
const TX_IN_BURST: u8 = 2;
const LOST_IN_GAP: u8 = 3;
const LOST_IN_BURST: u8 = 4;
const GOOD: u8 = 1;
const BAD: u8 = 2;

/// The configuration half of `netem_sched_data`.
#[derive(Clone, Debug, PartialEq)]
struct NetemParams {
    /// ns.
    latency: i64,
    /// ns, at most `i32::MAX` (what `tabledist` takes).
    jitter: i64,
    /// Packets.
    limit: u32,
    loss: u32,
    gap: u32,
    duplicate: u32,
    reorder: u32,
    corrupt: u32,
    ecn: u32,
    /// Bytes per second (0: no rate).
    rate: u64,
    packet_overhead: i32,
    cell_size: u32,
    cell_overhead: i32,
    loss_gen: LossGen,
    delay_dist: Option<DistTable>,
    /// With 0 packet or byte limits stored as `i32::MAX`, as `get_slot` does.
    slot: NetemSlot,
    slot_dist: Option<DistTable>,
}

impl Default for NetemParams {
    fn default() -> Self {
        NetemParams {
            latency: 0,
            jitter: 0,
            limit: 0,
            loss: 0,
            gap: 0,
            duplicate: 0,
            reorder: 0,
            corrupt: 0,
            ecn: 0,
            rate: 0,
            packet_overhead: 0,
            cell_size: 0,
            cell_overhead: 0,
            loss_gen: LossGen::Random,
            delay_dist: None,
            slot: NetemSlot::default(),
            slot_dist: None,
        }
    }
}

/// `struct slotstate`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SlotState {
    /// When the current slot opens (ns); `None` without slotting (the
    /// kernel's `slot_next == 0`).
    next: Option<i64>,
    packets_left: i32,
    bytes_left: i32,
}

/// The correlated streams (`delay_cor`, `loss_cor`, ...).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Streams {
    delay: Crnd,
    loss: Crnd,
    dup: Crnd,
    reorder: Crnd,
    corrupt: Crnd,
}

/// The kernel's counters for this qdisc, kept here (see the essay).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counters {
    bytes: u64,
    packets: u64,
    drops: u64,
    requeues: u64,
}

/// The network emulator.
#[derive(Debug)]
pub struct Netem {
    p: NetemParams,
    /// The seed in use (`prng.seed`).
    seed: u64,
    /// Did the user give it (`seed N`)? Otherwise it derives from `dev_seed`.
    seed_explicit: bool,
    dev_seed: u64,
    /// The kernel's seeded generator.
    prng: Prandom,
    /// Stands for the kernel's unseeded `get_random_u32` (see the essay).
    entropy: Xoshiro256PlusPlus,
    cor: Streams,
    /// State of the 4-state or GE chain.
    clg_state: u8,
    /// Packets delayed since the last reordered one.
    counter: u32,
    slot: SlotState,
    /// Delayed packets.
    tfifo: Tfifo,
    /// Reordered packets, sent before anything else (`sch->q`).
    requeued: VecDeque<Timed>,
    requeued_bytes: u64,
    /// The qdisc of class `major:1`, if one was grafted.
    child: Option<QdiscNode>,
    major: u16,
    /// The latest time seen (for a `slot` set by `change`).
    clock: Time,
    /// Has a packet been seen yet (the implicit seed may still change)?
    started: bool,
    counts: Counters,
    /// Packets and bytes purged from the grafted-out child, for the device.
    purged: (u64, u64),
}

/// The error `check_netem_in_tree` gives.
fn mixed_duplicates() -> TcError {
    TcError::inval("netem: cannot mix duplicating netems with other netems in tree")
}

/// The duplication probability of a netem node, `None` for other kinds.
fn netem_duplicate(n: &QdiscNode) -> Option<u32> {
    match n.qdisc.dump() {
        QdiscOpts::Netem(o) => Some(o.duplicate),
        _ => None,
    }
}

/// `check_netem_in_tree` (net/sched/sch_netem.c, 2025): a netem that
/// duplicates (`duplicate != 0`) may not share a device's tree with another
/// netem, and no netem may join a tree where one duplicates, since the
/// duplicates re-enter at the root. `tree` is the device's root qdisc,
/// `this` the netem being changed (`None` for one being created). A caller
/// holding the whole tree (the device) calls this before creating or
/// changing a netem; netem itself can only check its own subtree.
pub fn check_netem_in_tree(tree: &QdiscNode, this: Option<Handle>, duplicate: u32) -> TcResult<()> {
    for n in tree.walk() {
        if this == Some(n.handle) {
            continue;
        }
        if let Some(d) = netem_duplicate(n) {
            if duplicate != 0 || d != 0 {
                return Err(mixed_duplicates());
            }
        }
    }
    Ok(())
}

/// The implicit seed: the device's, mixed with the handle (splitmix64).
fn implicit_seed(dev_seed: u64, handle: Handle) -> u64 {
    let mut z = dev_seed ^ ((handle.0 as u64) << 17) ^ 0x6e65_7465_6d00_0000;
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Nanoseconds of a [`Time`] as a signed number.
fn ns(t: Time) -> i64 {
    i64::try_from(t.0).unwrap_or(i64::MAX)
}

/// `tabledist(mu, sigma, state, prng, dist)`: a delay with mean `mu` and
/// spread `sigma` (ns), uniform without a table.
fn tabledist(
    mu: i64,
    sigma: i32,
    state: Option<&mut Crnd>,
    prng: &mut Prandom,
    dist: Option<&DistTable>,
) -> i64 {
    if sigma == 0 {
        return mu;
    }
    let rnd = match state {
        Some(s) => s.next(prng),
        None => prng.next_u32(),
    };
    let Some(dist) = dist else {
        // ((rnd % (2 * (u32)sigma)) + mu) - sigma
        let spread = 2u32.wrapping_mul(sigma as u32);
        return ((rnd % spread) as i64)
            .wrapping_add(mu)
            .wrapping_sub(sigma as i64);
    };
    let table = dist.entries();
    let t = table[rnd as usize % table.len()] as i64;
    let scale = dist::DIST_SCALE;
    let mut x = (sigma as i64 % scale) * t;
    if x >= 0 {
        x += scale / 2;
    } else {
        x -= scale / 2;
    }
    (x / scale)
        .wrapping_add((sigma as i64 / scale) * t)
        .wrapping_add(mu)
}

/// Validate what `netem_change` checks before it changes anything.
fn validate(o: &NetemOpts) -> TcResult<()> {
    // get_dist_table: at least one entry, at most NETEM_DIST_MAX.
    for t in [&o.delay_dist, &o.slot_dist].into_iter().flatten() {
        if t.entries().is_empty() || t.entries().len() > dist::DIST_MAX {
            return Err(TcError::errno(Errno::EINVAL));
        }
    }
    if let Some(s) = &o.slot {
        // validate_slot
        if s.min_delay < 0 || s.max_delay < 0 {
            return Err(TcError::inval("negative slot delay"));
        }
        if s.min_delay > s.max_delay {
            return Err(TcError::inval("slot min delay greater than max delay"));
        }
        if s.dist_delay < 0 || s.dist_jitter < 0 {
            return Err(TcError::inval("negative dist delay"));
        }
        if s.max_packets < 0 || s.max_bytes < 0 {
            return Err(TcError::inval("negative slot limit"));
        }
    }
    // validate_time
    if o.latency64.is_some_and(|l| l < 0) {
        return Err(TcError::inval("negative latency"));
    }
    if o.jitter64.is_some_and(|j| j < 0) {
        return Err(TcError::inval("negative jitter"));
    }
    Ok(())
}

impl Netem {
    /// `netem_init`: a fresh qdisc (random loss, seeded generator), then
    /// `opts` applied as `netem_change` does.
    pub fn new(opts: &NetemOpts, dev: &DevInfo) -> TcResult<Self> {
        validate(opts)?;
        let seed = implicit_seed(dev.seed, Handle::UNSPEC);
        let mut q = Netem {
            p: NetemParams::default(),
            seed,
            seed_explicit: false,
            dev_seed: dev.seed,
            prng: Prandom::new(seed),
            entropy: Xoshiro256PlusPlus::seed_from_u64(seed),
            cor: Streams::default(),
            clg_state: 0,
            counter: 0,
            slot: SlotState::default(),
            tfifo: Tfifo::default(),
            requeued: VecDeque::new(),
            requeued_bytes: 0,
            child: None,
            major: 0,
            clock: Time::ZERO,
            started: false,
            counts: Counters::default(),
            purged: (0, 0),
        };
        q.commit(opts);
        Ok(q)
    }

    /// Seed both generators.
    fn reseed(&mut self, seed: u64) {
        self.seed = seed;
        self.prng = Prandom::new(seed);
        self.entropy = Xoshiro256PlusPlus::seed_from_u64(seed);
    }

    /// `init_crandom`: a stream with correlation `rho`, its first `last`
    /// from the unseeded generator.
    fn crandom(&mut self, rho: u32) -> Crnd {
        Crnd::new(rho, self.entropy.next_u32())
    }

    /// The commit half of `netem_change`; `o` has been validated.
    fn commit(&mut self, o: &NetemOpts) {
        // The seed first, so that everything drawn below follows from it.
        if let Some(seed) = o.seed {
            self.seed_explicit = true;
            self.reseed(seed);
        }
        match o.loss_model {
            Some(m @ LossModel::State { .. }) => {
                self.p.loss_gen = LossGen::FourState(m);
                self.clg_state = TX_IN_GAP;
            }
            Some(m @ LossModel::Gemodel { .. }) => {
                self.p.loss_gen = LossGen::GilbertElliot(m);
                self.clg_state = GOOD;
            }
            None => self.p.loss_gen = LossGen::Random,
        }
        if let Some(t) = &o.delay_dist {
            self.p.delay_dist = Some(t.clone());
        }
        if let Some(t) = &o.slot_dist {
            self.p.slot_dist = Some(t.clone());
        }
        self.p.limit = o.limit;
        self.p.latency = ticks_to_ns(o.latency_ticks as u64) as i64;
        self.p.jitter = ticks_to_ns(o.jitter_ticks as u64) as i64;
        self.p.gap = o.gap;
        self.counter = 0;
        self.p.loss = o.loss;
        self.p.duplicate = o.duplicate;
        // For compatibility with old tc: a gap means 100 % reordering.
        if o.gap != 0 {
            self.p.reorder = u32::MAX;
        }
        if let Some(c) = o.corr {
            self.cor.delay = self.crandom(c.delay_corr);
            self.cor.loss = self.crandom(c.loss_corr);
            self.cor.dup = self.crandom(c.dup_corr);
        }
        if let Some(r) = o.reorder {
            self.p.reorder = r.probability;
            self.cor.reorder = self.crandom(r.correlation);
        }
        if let Some(c) = o.corrupt {
            self.p.corrupt = c.probability;
            self.cor.corrupt = self.crandom(c.correlation);
        }
        if let Some(r) = o.rate {
            self.p.rate = r.rate as u64;
            self.p.packet_overhead = r.packet_overhead;
            self.p.cell_size = r.cell_size;
            self.p.cell_overhead = r.cell_overhead;
        }
        if let Some(r64) = o.rate64 {
            self.p.rate = self.p.rate.max(r64);
        }
        if let Some(l) = o.latency64 {
            self.p.latency = l;
        }
        if let Some(j) = o.jitter64 {
            self.p.jitter = j;
        }
        if let Some(e) = o.ecn {
            self.p.ecn = e;
        }
        if let Some(s) = o.slot {
            self.set_slot(s);
        }
        // Capping jitter to the range acceptable by tabledist().
        self.p.jitter = self.p.jitter.saturating_abs().min(i32::MAX as i64);
    }

    /// `get_slot`.
    fn set_slot(&mut self, mut s: NetemSlot) {
        if s.max_packets == 0 {
            s.max_packets = i32::MAX;
        }
        if s.max_bytes == 0 {
            s.max_bytes = i32::MAX;
        }
        s.dist_jitter = s.dist_jitter.saturating_abs().min(i32::MAX as i64);
        self.p.slot = s;
        self.slot.packets_left = s.max_packets;
        self.slot.bytes_left = s.max_bytes;
        self.slot.next = (s.min_delay | s.max_delay | s.dist_jitter != 0).then_some(ns(self.clock));
    }

    /// `get_slot_next`: open the next slot some time after `now`.
    fn next_slot(&mut self, now: i64) {
        let s = self.p.slot;
        let delay = match &self.p.slot_dist {
            None => {
                let span = s.max_delay.wrapping_sub(s.min_delay) as u64;
                let r = self.entropy.next_u32();
                s.min_delay
                    .wrapping_add(((span as u128 * r as u128) >> 32) as u64 as i64)
            }
            Some(d) => tabledist(
                s.dist_delay,
                s.dist_jitter as i32,
                None,
                &mut self.prng,
                Some(d),
            ),
        };
        self.slot.next = Some(now.saturating_add(delay));
        self.slot.packets_left = s.max_packets;
        self.slot.bytes_left = s.max_bytes;
    }

    /// Packets queued, the child's included (`sch->q.qlen`).
    fn qlen(&self) -> u64 {
        let child = self.child.as_ref().map_or(0, |c| c.stats.qlen as u64);
        self.tfifo.len() as u64 + self.requeued.len() as u64 + child
    }

    fn observe(&mut self, now: Time) {
        self.started = true;
        self.clock = self.clock.max(now);
    }

    /// `loss_event`.
    fn loss_event(&mut self) -> bool {
        match self.p.loss_gen {
            LossGen::Random => {
                self.p.loss != 0 && self.p.loss >= self.cor.loss.next(&mut self.prng)
            }
            LossGen::FourState(m) => self.loss_4state(m),
            LossGen::GilbertElliot(m) => self.loss_gilb_ell(m),
        }
    }

    /// `loss_4state`: one step of the GI chain; true if this packet is lost.
    /// (The kernel adds the thresholds in 32 bits, wrapping.)
    fn loss_4state(&mut self, m: LossModel) -> bool {
        let LossModel::State {
            p13,
            p31,
            p32,
            p14,
            p23,
        } = m
        else {
            return false;
        };
        let rnd = self.prng.next_u32();
        match self.clg_state {
            TX_IN_GAP => {
                if rnd < p14 {
                    self.clg_state = LOST_IN_GAP;
                    return true;
                } else if rnd < p13.wrapping_add(p14) {
                    self.clg_state = LOST_IN_BURST;
                    return true;
                }
                self.clg_state = TX_IN_GAP;
            }
            TX_IN_BURST => {
                if rnd < p23 {
                    self.clg_state = LOST_IN_BURST;
                    return true;
                }
                self.clg_state = TX_IN_BURST;
            }
            LOST_IN_BURST => {
                if rnd < p32 {
                    self.clg_state = TX_IN_BURST;
                } else if rnd < p31.wrapping_add(p32) {
                    self.clg_state = TX_IN_GAP;
                } else {
                    self.clg_state = LOST_IN_BURST;
                    return true;
                }
            }
            LOST_IN_GAP => self.clg_state = TX_IN_GAP,
            _ => {}
        }
        false
    }

    /// `loss_gilb_ell`: move between the good and bad states, then lose the
    /// packet with the loss probability of the state it was in.
    fn loss_gilb_ell(&mut self, m: LossModel) -> bool {
        let LossModel::Gemodel { p, r, h, k1 } = m else {
            return false;
        };
        match self.clg_state {
            GOOD => {
                if self.prng.next_u32() < p {
                    self.clg_state = BAD;
                }
                self.prng.next_u32() < k1
            }
            BAD => {
                if self.prng.next_u32() < r {
                    self.clg_state = GOOD;
                }
                self.prng.next_u32() > h
            }
            _ => false,
        }
    }

    /// `packet_time_ns`: serialization time at `rate`, with the packet and
    /// cell overheads, in the kernel's wrapping integer arithmetic.
    fn packet_time_ns(&self, len: u32) -> u64 {
        let p = &self.p;
        let mut len = (len as u64).wrapping_add(p.packet_overhead as i64 as u64);
        if let Some(mut cells) = (len as u32).checked_div(p.cell_size) {
            if len > cells.wrapping_mul(p.cell_size) as u64 {
                cells = cells.wrapping_add(1);
            }
            len = cells.wrapping_mul(p.cell_size.wrapping_add(p.cell_overhead as u32)) as u64;
        }
        len.wrapping_mul(1_000_000_000) / p.rate
    }

    /// Flip one random bit of the packet's bytes (the kernel's
    /// `skb->data[get_random_u32_below(headlen)] ^= 1 << get_random_u32_below(8)`).
    fn corrupt(&mut self, pkt: &mut Packet) {
        if pkt.data.is_empty() {
            return;
        }
        let below =
            |e: &mut Xoshiro256PlusPlus, n: u32| ((e.next_u32() as u64 * n as u64) >> 32) as usize;
        let i = below(
            &mut self.entropy,
            pkt.data.len().min(u32::MAX as usize) as u32,
        );
        let bit = below(&mut self.entropy, 8);
        pkt.data[i] ^= 1 << bit;
    }

    /// `netem_enqueue` for one packet. `is_dup` marks a copy coming back
    /// from the root (never duplicated again); copies this packet makes go
    /// to `dups`, for the root.
    fn enqueue_packet(
        &mut self,
        mut pkt: Packet,
        cx: &mut Cx,
        is_dup: bool,
        dups: &mut Vec<Packet>,
    ) -> Result<(), (Packet, DropReason)> {
        self.observe(cx.now);
        let mut count = 1;
        if self.p.duplicate != 0 && !is_dup && self.p.duplicate >= self.cor.dup.next(&mut self.prng)
        {
            count += 1;
        }
        if self.loss_event() {
            if self.p.ecn != 0 && pkt.set_ce() {
                self.counts.drops += 1; // marked, counted as a drop, kept
            } else {
                count -= 1;
            }
        }
        if count == 0 {
            self.counts.drops += 1;
            return Err((pkt, DropReason::Aqm));
        }
        let copy = (count > 1).then(|| pkt.clone());
        let (prev_len, mut rest) = (pkt.len, Vec::new());
        if self.p.corrupt != 0 && self.p.corrupt >= self.cor.corrupt.next(&mut self.prng) {
            if pkt.gso.is_some() {
                // `netem_segment`: corrupt the first segment only; the
                // others are enqueued after it, each as a packet of its own.
                match crate::gso::segment(&pkt) {
                    Ok(segs) if !segs.is_empty() => {
                        let mut segs = segs.into_iter();
                        pkt = segs.next().expect("not empty");
                        rest = segs.collect();
                    }
                    _ => {
                        self.counts.drops += 1;
                        return Err((pkt, DropReason::QueueFull));
                    }
                }
            }
            // An offloaded checksum is computed before the bit flips.
            if crate::gso::checksum_help(&mut pkt).is_err() {
                self.counts.drops += 1;
                return Err((pkt, DropReason::QueueFull));
            }
            self.corrupt(&mut pkt);
        }
        if self.qlen() >= self.p.limit as u64 {
            // The copy goes with the original.
            self.counts.drops += 1;
            return Err((pkt, DropReason::QueueFull));
        }
        if let Some(copy) = copy {
            dups.push(copy);
        }
        let first_len = pkt.len;
        let now = ns(cx.now);
        let p = &self.p;
        if p.gap == 0
            || self.counter < p.gap - 1
            || p.reorder < self.cor.reorder.next(&mut self.prng)
        {
            let mut delay = tabledist(
                p.latency,
                p.jitter as i32,
                Some(&mut self.cor.delay),
                &mut self.prng,
                p.delay_dist.as_ref(),
            );
            let mut base = now;
            if self.p.rate != 0 {
                // The last packet queued is the reference point.
                let last = [
                    self.requeued.back().map(|t| t.time_to_send),
                    self.tfifo.last_time(),
                ]
                .into_iter()
                .flatten()
                .max();
                if let Some(last) = last {
                    delay = delay.wrapping_sub(last.wrapping_sub(now)).max(0);
                    base = last;
                }
                delay = delay.wrapping_add(self.packet_time_ns(pkt.len) as i64);
            }
            self.counter = self.counter.wrapping_add(1);
            self.tfifo.push(Timed {
                time_to_send: base.saturating_add(delay),
                pkt,
            });
        } else {
            // Reorder: this one goes out first.
            self.counter = 0;
            self.counts.requeues += 1;
            self.requeued_bytes += pkt.len as u64;
            self.requeued.push_front(Timed {
                time_to_send: now,
                pkt,
            });
        }
        if !rest.is_empty() {
            self.enqueue_segments(rest, prev_len, first_len, cx, is_dup, dups);
        }
        Ok(())
    }

    /// The segments after the first of a GSO packet segmented for
    /// corruption: each goes through netem's enqueue again (loss,
    /// duplication, corruption, limit). One refused counts one more drop,
    /// as the kernel's loop does on top of netem_enqueue's own. The tree
    /// counted one packet of `prev_len` bytes; it now holds the first
    /// segment (`first_len`) and those queued ([`Cx::split`]).
    fn enqueue_segments(
        &mut self,
        rest: Vec<Packet>,
        prev_len: u32,
        first_len: u32,
        cx: &mut Cx,
        is_dup: bool,
        dups: &mut Vec<Packet>,
    ) {
        let (mut queued, mut bytes) = (0u32, first_len as i64);
        for seg in rest {
            let len = seg.len;
            match self.enqueue_packet(seg, cx, is_dup, dups) {
                Ok(()) => {
                    queued += 1;
                    bytes += len as i64;
                }
                Err(_) => self.counts.drops += 1,
            }
        }
        cx.split(queued, bytes - prev_len as i64);
    }

    /// A packet leaves netem (`deliver:`).
    fn deliver(&mut self, pkt: Packet) -> Dequeue {
        self.counts.bytes += pkt.len as u64;
        self.counts.packets += pkt.segs() as u64;
        Dequeue::Packet(pkt)
    }

    /// Dequeue the child, counting the packets it sheds as our drops too.
    fn child_dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        let Some(child) = self.child.as_mut() else {
            return Dequeue::Empty;
        };
        let before = cx.drops.len();
        let d = child.dequeue(cx);
        self.counts.drops += (cx.drops.len() - before) as u64;
        match d {
            Dequeue::Packet(p) => self.deliver(p),
            other => other,
        }
    }

    /// Hand a due packet to the child; a refused one is dropped here and
    /// taken off every ancestor's backlog.
    fn pass_to_child(&mut self, pkt: Packet, cx: &mut Cx) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        let before = cx.drops.len();
        let r = child.offer(pkt, cx);
        self.counts.drops += (cx.drops.len() - before) as u64;
        if let Err((p, reason)) = r {
            if reason.counts() {
                self.counts.drops += 1;
            }
            cx.shed(p.len, reason);
        }
    }

    fn class_id(&self) -> Handle {
        Handle::new(self.major, 1)
    }

    /// Remember our major from a class id a caller used.
    fn learn_major(&mut self, classid: Handle) {
        if classid.major() != 0 && classid.major() != self.major {
            self.major = classid.major();
            let cl = self.class_id();
            if let Some(c) = self.child.as_mut() {
                c.parent = cl;
            }
        }
    }

    /// The part of `check_netem_in_tree` netem can do: netems below us.
    fn check_subtree(&self, duplicate: u32, below: Option<&QdiscNode>) -> TcResult<()> {
        for n in below.map(|c| c.walk()).unwrap_or_default() {
            if let Some(d) = netem_duplicate(n) {
                if duplicate != 0 || d != 0 {
                    return Err(mixed_duplicates());
                }
            }
        }
        Ok(())
    }
}

impl Qdisc for Netem {
    fn set_handle(&mut self, handle: Handle) {
        self.major = handle.major();
        let cl = self.class_id();
        if let Some(c) = self.child.as_mut() {
            c.parent = cl;
        }
        if !self.seed_explicit && !self.started {
            self.reseed(implicit_seed(self.dev_seed, handle));
            let rhos = self.cor;
            self.cor = Streams {
                delay: self.crandom(rhos.delay.rho),
                loss: self.crandom(rhos.loss.rho),
                dup: self.crandom(rhos.dup.rho),
                reorder: self.crandom(rhos.reorder.rho),
                corrupt: self.crandom(rhos.corrupt.rho),
            };
        }
    }

    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        let mut dups = Vec::new();
        let r = self.enqueue_packet(pkt, cx, cx.reinjecting, &mut dups);
        // The kernel enqueues the copies at the root qdisc.
        if !dups.is_empty() {
            cx.to_root.extend(dups);
        }
        r
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.observe(cx.now);
        let now = ns(cx.now);
        loop {
            if let Some(t) = self.requeued.pop_front() {
                self.requeued_bytes -= t.pkt.len as u64;
                return self.deliver(t.pkt);
            }
            let Some(tts) = self.tfifo.peek_time() else {
                return self.child_dequeue(cx);
            };
            if self.slot.next.is_some_and(|s| s < tts) {
                self.next_slot(now);
            }
            let slot_open = !matches!(self.slot.next, Some(s) if s > now);
            if tts <= now && slot_open {
                let Some(t) = self.tfifo.pop() else {
                    return Dequeue::Empty;
                };
                if self.slot.next.is_some() {
                    self.slot.packets_left = self.slot.packets_left.wrapping_sub(1);
                    self.slot.bytes_left = self.slot.bytes_left.wrapping_sub(t.pkt.len as i32);
                    if self.slot.packets_left <= 0 || self.slot.bytes_left <= 0 {
                        self.next_slot(now);
                    }
                }
                if self.child.is_some() {
                    self.pass_to_child(t.pkt, cx);
                    continue;
                }
                return self.deliver(t.pkt);
            }
            let child_wait = match self.child_dequeue(cx) {
                Dequeue::Packet(p) => return Dequeue::Packet(p),
                Dequeue::Wait(w) => Some(w),
                Dequeue::Empty => None,
            };
            let ours = Time(tts.max(self.slot.next.unwrap_or(0)).max(0) as u64);
            return Dequeue::Wait(child_wait.map_or(ours, |w| w.min(ours)));
        }
    }

    fn reset(&mut self) {
        self.tfifo.clear();
        self.requeued.clear();
        self.requeued_bytes = 0;
        if let Some(c) = self.child.as_mut() {
            c.reset();
        }
    }

    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Netem(o) = opts else {
            return Err(wrong_kind("netem", opts));
        };
        validate(o)?;
        self.check_subtree(o.duplicate, self.child.as_ref())?;
        self.commit(o);
        Ok(())
    }

    fn dump(&self) -> QdiscOpts {
        let p = &self.p;
        let ticks = |v: i64| ns_to_ticks(v.max(0) as u64).min(u32::MAX as u64) as u32;
        let mut slot = p.slot;
        let slot = (slot.min_delay | slot.max_delay | slot.dist_jitter != 0).then(|| {
            if slot.max_packets == i32::MAX {
                slot.max_packets = 0;
            }
            if slot.max_bytes == i32::MAX {
                slot.max_bytes = 0;
            }
            slot
        });
        let loss_model = match p.loss_gen {
            LossGen::Random => None,
            LossGen::FourState(m) | LossGen::GilbertElliot(m) => Some(m),
        };
        QdiscOpts::Netem(NetemOpts {
            latency_ticks: ticks(p.latency),
            limit: p.limit,
            loss: p.loss,
            gap: p.gap,
            duplicate: p.duplicate,
            jitter_ticks: ticks(p.jitter),
            corr: Some(NetemCorr {
                delay_corr: self.cor.delay.rho,
                loss_corr: self.cor.loss.rho,
                dup_corr: self.cor.dup.rho,
            }),
            delay_dist: p.delay_dist.clone(),
            reorder: Some(NetemProb {
                probability: p.reorder,
                correlation: self.cor.reorder.rho,
            }),
            corrupt: Some(NetemProb {
                probability: p.corrupt,
                correlation: self.cor.corrupt.rho,
            }),
            loss_model,
            rate: Some(NetemRate {
                rate: p.rate.min(u32::MAX as u64) as u32,
                packet_overhead: p.packet_overhead,
                cell_size: p.cell_size,
                cell_overhead: p.cell_overhead,
            }),
            ecn: (p.ecn != 0).then_some(p.ecn),
            rate64: (p.rate > u32::MAX as u64).then_some(p.rate),
            latency64: Some(p.latency),
            jitter64: Some(p.jitter),
            slot,
            slot_dist: p.slot_dist.clone(),
            seed: Some(self.seed),
        })
    }

    fn own_stats(&self) -> Option<Stats> {
        let child = self.child.as_ref().map_or(0, |c| c.stats.backlog);
        Some(Stats {
            bytes: self.counts.bytes,
            packets: self.counts.packets,
            drops: self.counts.drops,
            overlimits: 0,
            requeues: self.counts.requeues,
            qlen: self.qlen().min(u32::MAX as u64) as u32,
            backlog: self.tfifo.bytes() + self.requeued_bytes + child,
        })
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for Netem {
    /// netem has no class `change` operation.
    fn change_class(
        &mut self,
        classid: Handle,
        _parent: Handle,
        _opts: Option<&ClassOpts>,
        _dev: &DevInfo,
    ) -> TcResult<()> {
        self.learn_major(classid);
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// netem has no class `delete` operation.
    fn delete_class(&mut self, classid: Handle) -> TcResult<()> {
        self.learn_major(classid);
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// The one class, `major:1`, listed only while a qdisc is grafted there
    /// (`netem_dump_class` answers `ENOENT` otherwise). No class statistics.
    fn list(&self) -> Vec<ClassInfo> {
        let Some(c) = &self.child else {
            return Vec::new();
        };
        vec![ClassInfo {
            classid: self.class_id(),
            parent: Handle::new(self.major, 0),
            leaf: (!c.handle.is_unspec()).then_some(c.handle),
            opts: ClassOpts::Plain,
            stats: Stats::default(),
            xstats: XStats::Absent,
        }]
    }

    /// `netem_find` answers every class id with the one class.
    fn contains(&self, _classid: Handle) -> bool {
        true
    }

    fn leaf(&self, _classid: Handle) -> Option<&QdiscNode> {
        self.child.as_ref()
    }

    /// `netem_graft`: `None` leaves netem without a child. The old child's
    /// queue is purged (`qdisc_purge_queue`): counted as our drops and
    /// reported through [`Classful::take_purged`] for the ancestors.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        _dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        self.check_subtree(self.p.duplicate, new.as_ref())?;
        self.learn_major(classid);
        let mut new = new;
        if let Some(n) = new.as_mut() {
            n.parent = self.class_id();
        }
        let mut old = std::mem::replace(&mut self.child, new);
        if let Some(o) = old.as_mut() {
            let (pkts, bytes) = (o.stats.qlen as u64, o.stats.backlog);
            o.reset();
            self.counts.drops += pkts;
            self.purged.0 += pkts;
            self.purged.1 += bytes;
        }
        Ok(old)
    }

    fn take_purged(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.purged)
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        self.child.iter_mut().collect()
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        self.child.iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Skb;
    use crate::packet::ETH_P_IP;
    use crate::qdisc::fifo::Fifo;
    use crate::qdisc::tbf::{Tbf, TbfOpts};
    use crate::rate::RateSpec;

    const MS: u64 = 1_000_000;

    /// `p` percent as tc's `set_percent` scales it.
    fn pct(p: f64) -> u32 {
        (p / 100.0 * u32::MAX as f64).round() as u32
    }

    /// A time in ms as the psched ticks tc sends.
    fn ticks(ms: f64) -> u32 {
        (ms * 1e6 / 64.0) as u32
    }

    /// Options as tc sends them by default (`limit 1000`), with a fixed seed.
    fn opts(f: impl FnOnce(&mut NetemOpts)) -> NetemOpts {
        let mut o = NetemOpts {
            limit: 100_000,
            seed: Some(1),
            ..Default::default()
        };
        f(&mut o);
        o
    }

    /// An IPv4/UDP packet of `len` accounted bytes with TOS `tos` and a
    /// valid header checksum.
    fn pkt(id: u64, len: u32, tos: u8) -> Packet {
        let mut d = vec![0u8; 28];
        d[0] = 0x45;
        d[1] = tos;
        d[2..4].copy_from_slice(&(len.min(65535) as u16).to_be_bytes());
        d[8] = 64;
        d[9] = 17;
        d[12..16].copy_from_slice(&[10, 0, 0, 1]);
        d[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let mut sum: u32 = d[..20]
            .chunks(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
            .sum();
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        d[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        Packet::from(Skb {
            id,
            ..Packet::new(d, len, ETH_P_IP).into_skb()
        })
    }

    /// Netem as the device's root: its duplicates come back through
    /// `Cx::to_root` and are enqueued again with `Cx::reinjecting` set, as
    /// `QdiscNode::enqueue_root` does (here the root is netem itself).
    struct Root {
        q: Netem,
    }

    impl Root {
        fn new(o: &NetemOpts) -> Self {
            Root {
                q: Netem::new(o, &DevInfo::default()).unwrap(),
            }
        }

        fn enqueue(&mut self, p: Packet, cx: &mut Cx) -> Result<(), DropReason> {
            let r = Qdisc::enqueue(&mut self.q, p, cx);
            cx.reinjecting = true;
            for d in std::mem::take(&mut cx.to_root) {
                let _ = Qdisc::enqueue(&mut self.q, d, cx);
            }
            cx.reinjecting = false;
            assert!(
                cx.to_root.is_empty(),
                "a re-enqueued copy is not duplicated again"
            );
            r.map_err(|(_, reason)| reason)
        }
    }

    /// What a run produced.
    #[derive(Debug, Default, PartialEq)]
    struct Run {
        /// (arrival time, departure time, packet), in departure order.
        out: Vec<(u64, u64, Packet)>,
        /// Packets refused at enqueue.
        refused: u64,
    }

    impl Run {
        /// Sojourn times in arrival order of the packets that came out
        /// (first copy of each).
        fn delays_by_arrival(&self) -> Vec<f64> {
            let mut v: Vec<(u64, u64, f64)> = self
                .out
                .iter()
                .map(|(a, d, p)| (*a, p.id, (*d - *a) as f64))
                .collect();
            v.sort_by_key(|x| (x.0, x.1));
            v.dedup_by_key(|x| x.1);
            v.into_iter().map(|x| x.2).collect()
        }
    }

    /// Send `n` packets of `len` bytes, one every `gap` ns from time 0,
    /// through `root`, dequeuing whenever netem allows (waking exactly at
    /// the times it asks for).
    fn drive(root: &mut Root, n: u64, gap: u64, len: u32, tos: u8) -> Run {
        let mut run = Run::default();
        let mut arrival = vec![0u64; n as usize];
        let (mut id, mut next) = (0u64, Some(0u64));
        let mut wake: Option<u64> = None;
        loop {
            let t = match (next, wake) {
                (Some(a), Some(w)) => a.min(w),
                (Some(a), None) => a,
                (None, Some(w)) => w,
                (None, None) => break,
            };
            let mut cx = Cx::new(Time(t));
            while next.is_some_and(|a| a <= t) {
                arrival[id as usize] = t;
                if root.enqueue(pkt(id, len, tos), &mut cx).is_err() {
                    run.refused += 1;
                }
                id += 1;
                next = (id < n).then_some(t + gap);
            }
            wake = None;
            loop {
                match root.q.dequeue(&mut cx) {
                    Dequeue::Packet(p) => run.out.push((arrival[p.id as usize], t, p)),
                    Dequeue::Wait(w) => {
                        assert!(w.0 > t, "a wake-up in the past");
                        wake = Some(w.0);
                        break;
                    }
                    Dequeue::Empty => break,
                }
            }
        }
        run
    }

    fn mean_sd(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n;
        (m, var.sqrt())
    }

    fn lag1(v: &[f64]) -> f64 {
        let (m, sd) = mean_sd(v);
        let c: f64 = v.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum::<f64>();
        c / (v.len() - 1) as f64 / (sd * sd)
    }

    const N: u64 = 100_000;

    // ---- delay ----

    #[test]
    fn constant_delay_delays_every_packet_exactly() {
        let mut r = Root::new(&opts(|o| o.latency_ticks = ticks(100.0)));
        let run = drive(&mut r, 1000, MS, 1000, 0);
        assert_eq!(run.out.len(), 1000);
        assert!(run.out.iter().all(|(a, d, _)| d - a == 100 * MS));
        let s = r.q.own_stats().unwrap();
        assert_eq!(
            (s.packets, s.bytes, s.drops, s.qlen, s.backlog),
            (1000, 1_000_000, 0, 0, 0)
        );
    }

    /// Mean and standard deviation of the delay per distribution, over
    /// 100 000 packets: the configured latency and jitter, scaled by what
    /// each table's entries have (uniform: jitter / sqrt(3); normal: 1.0;
    /// pareto: 0.82; paretonormal: 0.83, see [`dist`]).
    #[test]
    fn delay_mean_and_deviation_follow_each_distribution() {
        let (mu, sigma) = (100.0 * MS as f64, 10.0 * MS as f64);
        for name in ["uniform", "normal", "pareto", "paretonormal"] {
            let table = dist::builtin(name).map(DistTable::from);
            let (want_mean, want_sd) = match &table {
                None => (mu, sigma / 3f64.sqrt()),
                Some(t) => {
                    let v: Vec<f64> = t.entries().iter().map(|&x| x as f64 / 8192.0).collect();
                    let (m, sd) = mean_sd(&v);
                    (mu + sigma * m, sigma * sd)
                }
            };
            let mut r = Root::new(&opts(|o| {
                o.latency_ticks = ticks(100.0);
                o.jitter_ticks = ticks(10.0);
                o.delay_dist = table.clone();
            }));
            let run = drive(&mut r, N, MS, 1000, 0);
            let delays = run.delays_by_arrival();
            assert_eq!(delays.len() as u64, N);
            let (m, sd) = mean_sd(&delays);
            eprintln!(
                "{name}: mean {:.4} ms (want {:.4}), sd {:.4} ms (want {:.4})",
                m / 1e6,
                want_mean / 1e6,
                sd / 1e6,
                want_sd / 1e6
            );
            assert!((m - want_mean).abs() < 0.02 * want_mean, "{name} mean {m}");
            assert!((sd - want_sd).abs() < 0.02 * want_sd, "{name} sd {sd}");
            // And against the configured values themselves, within 2 %.
            assert!((m - mu).abs() < 0.02 * mu, "{name} mean {m}");
            if name == "normal" {
                assert!((sd - sigma).abs() < 0.02 * sigma, "normal sd {sd}");
                let within = delays.iter().filter(|d| (**d - mu).abs() <= sigma).count();
                let frac = within as f64 / N as f64;
                assert!(
                    (frac - 0.6827).abs() < 0.01,
                    "normal: {frac} within one sigma"
                );
            }
        }
    }

    #[test]
    fn jitter_reorders_packets_by_their_departure_times() {
        let mut r = Root::new(&opts(|o| {
            o.latency_ticks = ticks(50.0);
            o.jitter_ticks = ticks(40.0);
        }));
        let run = drive(&mut r, 10_000, MS, 100, 0);
        let deps: Vec<u64> = run.out.iter().map(|x| x.1).collect();
        assert!(deps.windows(2).all(|w| w[0] <= w[1]));
        let ids: Vec<u64> = run.out.iter().map(|x| x.2.id).collect();
        assert!(
            ids.windows(2).any(|w| w[0] > w[1]),
            "jitter of 40 ms over 1 ms spacing reorders"
        );
    }

    /// The kernel's delay correlation survives `rnd % (2 * jitter)` only
    /// when 2 * jitter is near 2^32 ns: with a 2 s jitter a 75 % correlation
    /// shows as a lag-1 autocorrelation near 0.75; with 10 ms it vanishes,
    /// as it does in Linux.
    #[test]
    fn jitter_correlation_shows_in_the_lag1_autocorrelation() {
        let run_with = |jitter_ms: f64, corr: f64| {
            let mut r = Root::new(&opts(|o| {
                o.latency_ticks = ticks(3000.0);
                o.jitter_ticks = ticks(jitter_ms);
                o.corr = Some(NetemCorr {
                    delay_corr: pct(corr),
                    ..Default::default()
                });
            }));
            let run = drive(&mut r, N, MS, 100, 0);
            lag1(&run.delays_by_arrival())
        };
        let correlated = run_with(2000.0, 75.0);
        let independent = run_with(2000.0, 0.0);
        let small_jitter = run_with(10.0, 75.0);
        eprintln!("lag-1: 2 s jitter 75 %: {correlated:.3}; 0 %: {independent:.3}; 10 ms jitter 75 %: {small_jitter:.3}");
        assert!(correlated > 0.6, "{correlated}");
        assert!(independent.abs() < 0.02, "{independent}");
        assert!(small_jitter.abs() < 0.02, "{small_jitter}");
    }

    // ---- loss ----

    /// Fraction of `N` packets lost.
    fn loss_fraction(o: &NetemOpts) -> f64 {
        let mut r = Root::new(o);
        let run = drive(&mut r, N, MS, 100, 0);
        let s = r.q.own_stats().unwrap();
        assert_eq!(run.refused, s.drops);
        assert_eq!(run.out.len() as u64 + run.refused, N);
        run.refused as f64 / N as f64
    }

    #[test]
    fn random_loss_is_its_probability() {
        for p in [1.0, 10.0, 50.0] {
            let got = loss_fraction(&opts(|o| o.loss = pct(p)));
            assert!((got * 100.0 - p).abs() < 0.5, "loss {p}%: {got}");
        }
        assert_eq!(loss_fraction(&opts(|o| o.loss = u32::MAX)), 1.0);
    }

    /// The stationary loss of the kernel's 4-state chain: after each
    /// packet the chain is in 1 (sent, gap), 2 (sent, burst), 3 (isolated
    /// loss) or 4 (burst loss); a packet is lost when the step lands in 3
    /// or 4. Solved by power iteration.
    fn four_state_loss(p13: f64, p31: f64, p32: f64, p23: f64, p14: f64) -> f64 {
        let m = [
            [1.0 - p13 - p14, 0.0, p14, p13],
            [0.0, 1.0 - p23, 0.0, p23],
            [1.0, 0.0, 0.0, 0.0],
            [p31, p32, 0.0, 1.0 - p31 - p32],
        ];
        let mut pi = [0.25; 4];
        for _ in 0..100_000 {
            let mut next = [0.0; 4];
            for (i, row) in m.iter().enumerate() {
                for (j, p) in row.iter().enumerate() {
                    next[j] += pi[i] * p;
                }
            }
            pi = next;
        }
        pi[2] + pi[3]
    }

    #[test]
    fn state_loss_is_the_chains_stationary_loss() {
        for (p13, p31, p32, p23, p14) in [
            (1.0, 99.0, 0.0, 100.0, 0.0), // tc's defaults for `loss state 1%`: Bernoulli
            (5.0, 30.0, 10.0, 20.0, 2.0),
            (2.0, 50.0, 30.0, 5.0, 1.0),
        ] {
            let want = four_state_loss(
                p13 / 100.0,
                p31 / 100.0,
                p32 / 100.0,
                p23 / 100.0,
                p14 / 100.0,
            );
            let got = loss_fraction(&opts(|o| {
                o.loss_model = Some(LossModel::State {
                    p13: pct(p13),
                    p31: pct(p31),
                    p32: pct(p32),
                    p14: pct(p14),
                    p23: pct(p23),
                })
            }));
            eprintln!("loss state {p13} {p31} {p32} {p23} {p14}: {got:.4} (analytic {want:.4})");
            assert!((got - want).abs() < 0.005, "state: {got} vs {want}");
        }
    }

    #[test]
    fn gemodel_loss_is_the_chains_stationary_loss() {
        for (p, r, one_h, k1) in [
            (1.0, 99.0, 100.0, 0.0),
            (5.0, 40.0, 80.0, 1.0),
            (10.0, 10.0, 50.0, 5.0),
        ] {
            let (pp, rr) = (p / 100.0, r / 100.0);
            let want = rr / (pp + rr) * k1 / 100.0 + pp / (pp + rr) * one_h / 100.0;
            let got = loss_fraction(&opts(|o| {
                o.loss_model = Some(LossModel::Gemodel {
                    p: pct(p),
                    r: pct(r),
                    h: u32::MAX - pct(one_h),
                    k1: pct(k1),
                })
            }));
            eprintln!("loss gemodel {p} {r} {one_h} {k1}: {got:.4} (analytic {want:.4})");
            assert!((got - want).abs() < 0.005, "gemodel: {got} vs {want}");
        }
    }

    #[test]
    fn ecn_marks_capable_packets_instead_of_losing_them_and_counts_a_drop() {
        let mut r = Root::new(&opts(|o| {
            o.loss = u32::MAX;
            o.ecn = Some(1);
        }));
        // ECT(0): kept, marked CE with a correct checksum, counted as a drop.
        let run = drive(&mut r, 100, MS, 100, 0x02);
        assert_eq!((run.out.len(), run.refused), (100, 0));
        for (_, _, p) in &run.out {
            assert_eq!(p.data[1] & 3, 3);
            let mut sum: u32 = p.data[..20]
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
                .sum();
            while sum >> 16 != 0 {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            assert_eq!(sum, 0xffff, "header checksum");
        }
        assert_eq!(r.q.own_stats().unwrap().drops, 100);
        // Not-ECT: lost.
        let run = drive(&mut r, 100, MS, 100, 0);
        assert_eq!((run.out.len(), run.refused), (0, 100));
    }

    // ---- duplicate, corrupt, reorder ----

    #[test]
    fn duplicate_rate_is_its_probability_and_copies_are_not_copied() {
        for p in [1.0, 10.0, 50.0] {
            let mut r = Root::new(&opts(|o| o.duplicate = pct(p)));
            let run = drive(&mut r, N, MS, 100, 0);
            let extra = run.out.len() as f64 / N as f64 - 1.0;
            assert!((extra * 100.0 - p).abs() < 0.5, "duplicate {p}%: {extra}");
            let mut per_id = std::collections::HashMap::new();
            for (_, _, pk) in &run.out {
                *per_id.entry(pk.id).or_insert(0) += 1;
            }
            assert!(per_id.values().all(|&c| c <= 2));
        }
        // Through the Qdisc interface the copy has nowhere to go (see the
        // essay) but the original is queued and counted once.
        let mut n = QdiscNode::new(
            Handle::new(1, 0),
            Handle::ROOT,
            Box::new(Netem::new(&opts(|o| o.duplicate = u32::MAX), &DevInfo::default()).unwrap()),
        );
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(0, 100, 0), &mut cx).unwrap();
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        assert_eq!(n.dequeue(&mut cx), Dequeue::Empty);
    }

    #[test]
    fn corruption_flips_one_bit_of_its_share_of_packets() {
        for p in [1.0, 10.0, 50.0] {
            let mut r = Root::new(&opts(|o| {
                o.corrupt = Some(NetemProb {
                    probability: pct(p),
                    correlation: 0,
                })
            }));
            let run = drive(&mut r, N, MS, 100, 0);
            let mut corrupted = 0;
            for (_, _, pk) in &run.out {
                let orig = pkt(pk.id, 100, 0);
                let bits: u32 = orig
                    .data
                    .iter()
                    .zip(&pk.data)
                    .map(|(a, b)| (a ^ b).count_ones())
                    .sum();
                assert!(bits <= 1);
                corrupted += bits as u64;
            }
            let got = corrupted as f64 / N as f64;
            assert!((got * 100.0 - p).abs() < 0.5, "corrupt {p}%: {got}");
        }
    }

    /// With `gap G`, after G - 1 delayed packets each packet is sent at
    /// once with probability p: one reordered packet per G - 1 + 1/p.
    #[test]
    fn reorder_rate_follows_probability_and_gap() {
        for (p, gap) in [(25.0, 1u32), (25.0, 5), (50.0, 3), (10.0, 10)] {
            let mut r = Root::new(&opts(|o| {
                o.latency_ticks = ticks(10.0);
                o.gap = gap;
                o.reorder = Some(NetemProb {
                    probability: pct(p),
                    correlation: 0,
                });
            }));
            let run = drive(&mut r, N, MS, 100, 0);
            let s = r.q.own_stats().unwrap();
            let immediate = run.out.iter().filter(|(a, d, _)| a == d).count() as u64;
            assert_eq!(immediate, s.requeues);
            let want = 1.0 / ((gap - 1) as f64 + 100.0 / p);
            let got = s.requeues as f64 / N as f64;
            eprintln!("reorder {p}% gap {gap}: {got:.4} (analytic {want:.4})");
            assert!(
                (got - want).abs() < 0.005,
                "reorder {p}% gap {gap}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn reordered_packets_overtake_the_delayed_ones() {
        let mut r = Root::new(&opts(|o| {
            o.latency_ticks = ticks(10.0);
            o.gap = 3;
            o.reorder = Some(NetemProb {
                probability: u32::MAX,
                correlation: 0,
            });
        }));
        let run = drive(&mut r, 9, MS, 100, 0);
        let order: Vec<u64> = run.out.iter().map(|x| x.2.id).collect();
        // Every third packet (counter reaches gap - 1) goes at once.
        assert_eq!(order, vec![2, 5, 8, 0, 1, 3, 4, 6, 7]);
    }

    // ---- rate and slots ----

    /// `rate 1mbit 20 100 5`: a 1000-byte packet is 1020 bytes, 11 cells of
    /// 100 + 5 bytes: 1155 bytes, 9.24 ms at 125 000 bytes/s. Back to back,
    /// the k-th packet leaves at k * 9.24 ms.
    #[test]
    fn rate_with_cells_spaces_packets_by_their_serialization_time() {
        let mut r = Root::new(&opts(|o| {
            o.rate = Some(NetemRate {
                rate: 125_000,
                packet_overhead: 20,
                cell_size: 100,
                cell_overhead: 5,
            })
        }));
        assert_eq!(r.q.packet_time_ns(1000), 9_240_000);
        let run = drive(&mut r, N, 0, 1000, 0);
        assert_eq!(run.out.len() as u64, N);
        for (k, (_, d, p)) in run.out.iter().enumerate() {
            assert_eq!((p.id, *d), (k as u64, (k as u64 + 1) * 9_240_000));
        }
        // Arriving slower than the rate, each packet takes delay + its own time.
        let mut r = Root::new(&opts(|o| {
            o.latency_ticks = ticks(10.0);
            o.rate = Some(NetemRate {
                rate: 125_000,
                packet_overhead: -14,
                ..Default::default()
            })
        }));
        let run = drive(&mut r, 1000, 20 * MS, 1014, 0);
        assert!(run.out.iter().all(|(a, d, _)| d - a == 10 * MS + 8 * MS));
    }

    #[test]
    fn rate64_and_atm_style_cells_time_as_the_kernel() {
        let mut q = Netem::new(
            &opts(|o| {
                o.rate = Some(NetemRate {
                    rate: u32::MAX,
                    packet_overhead: 0,
                    cell_size: 48,
                    cell_overhead: 5,
                });
                o.rate64 = Some(12_500_000_000); // 100 Gbit/s
            }),
            &DevInfo::default(),
        )
        .unwrap();
        // 1500 bytes: 32 cells (31.25 rounded up) of 53 bytes = 1696 bytes.
        assert_eq!(
            q.packet_time_ns(1500),
            1696 * 1_000_000_000 / 12_500_000_000
        );
        let QdiscOpts::Netem(d) = q.dump() else {
            panic!()
        };
        assert_eq!(
            (d.rate.unwrap().rate, d.rate64),
            (u32::MAX, Some(12_500_000_000))
        );
        q.p.rate = 1000;
        q.p.cell_size = 0;
        q.p.packet_overhead = -20;
        // The kernel's unsigned arithmetic: a negative length wraps.
        assert_eq!(
            q.packet_time_ns(10),
            10u64.wrapping_sub(20).wrapping_mul(1_000_000_000) / 1000
        );
    }

    #[test]
    fn slots_release_bursts_of_at_most_the_slot_limits() {
        let slot = |packets: i32, bytes: i32| {
            opts(move |o| {
                o.slot = Some(NetemSlot {
                    min_delay: 10 * MS as i64,
                    max_delay: 10 * MS as i64,
                    max_packets: packets,
                    max_bytes: bytes,
                    ..Default::default()
                })
            })
        };
        let mut r = Root::new(&slot(2, 0));
        let run = drive(&mut r, 6, 0, 100, 0);
        let deps: Vec<u64> = run.out.iter().map(|x| x.1 / MS).collect();
        assert_eq!(deps, vec![0, 0, 10, 10, 20, 20]);
        // A byte limit: 250 bytes per slot, 100-byte packets: 3 (the slot
        // closes once its bytes are used up).
        let mut r = Root::new(&slot(0, 250));
        let deps: Vec<u64> = drive(&mut r, 6, 0, 100, 0)
            .out
            .iter()
            .map(|x| x.1 / MS)
            .collect();
        assert_eq!(deps, vec![0, 0, 0, 10, 10, 10]);
        // A packet that comes after the slot opened waits for the next one.
        let mut r = Root::new(&slot(2, 0));
        let deps: Vec<u64> = drive(&mut r, 3, 25 * MS, 100, 0)
            .out
            .iter()
            .map(|x| x.1 / MS)
            .collect();
        assert_eq!(deps, vec![0, 35, 60]);
    }

    #[test]
    fn slot_lengths_follow_a_distribution() {
        let mut r = Root::new(&opts(|o| {
            o.slot = Some(NetemSlot {
                dist_delay: 10 * MS as i64,
                dist_jitter: 2 * MS as i64,
                max_packets: 1,
                ..Default::default()
            });
            o.slot_dist = dist::builtin("normal").map(DistTable::from);
        }));
        let run = drive(&mut r, 20_000, 0, 100, 0);
        let gaps: Vec<f64> = run
            .out
            .windows(2)
            .map(|w| (w[1].1 - w[0].1) as f64)
            .collect();
        let (m, sd) = mean_sd(&gaps);
        assert!((m / 1e6 - 10.0).abs() < 0.2, "slot mean {m}");
        assert!((sd / 1e6 - 2.0).abs() < 0.1, "slot sd {sd}");
    }

    // ---- limit, determinism, accounting ----

    #[test]
    fn the_limit_counts_every_queued_packet() {
        let mut n = QdiscNode::new(
            Handle::new(1, 0),
            Handle::ROOT,
            Box::new(
                Netem::new(
                    &opts(|o| {
                        o.limit = 5;
                        o.latency_ticks = ticks(10.0);
                    }),
                    &DevInfo::default(),
                )
                .unwrap(),
            ),
        );
        let mut cx = Cx::new(Time(0));
        for i in 0..7 {
            let r = n.enqueue(pkt(i, 100, 0), &mut cx);
            assert_eq!(r.is_ok(), i < 5, "packet {i}");
        }
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (5, 500, 2));
        assert_eq!(n.dequeue(&mut cx), Dequeue::Wait(Time(10 * MS)));
        let mut later = Cx::new(Time(10 * MS));
        for _ in 0..5 {
            assert!(matches!(n.dequeue(&mut later), Dequeue::Packet(_)));
        }
        let s = n.stats();
        assert_eq!((s.packets, s.bytes, s.qlen, s.backlog), (5, 500, 0, 0));
    }

    /// Everything at once, twice with one seed and once with another.
    #[test]
    fn the_same_seed_gives_the_same_packets_out() {
        let all = |seed: u64| {
            let mut o = opts(|o| {
                o.latency_ticks = ticks(20.0);
                o.jitter_ticks = ticks(5.0);
                o.delay_dist = dist::builtin("paretonormal").map(DistTable::from);
                o.corr = Some(NetemCorr {
                    delay_corr: pct(20.0),
                    loss_corr: pct(10.0),
                    dup_corr: pct(5.0),
                });
                o.loss = pct(3.0);
                o.duplicate = pct(2.0);
                o.corrupt = Some(NetemProb {
                    probability: pct(2.0),
                    correlation: pct(10.0),
                });
                o.gap = 4;
                o.reorder = Some(NetemProb {
                    probability: pct(10.0),
                    correlation: 0,
                });
                o.rate = Some(NetemRate {
                    rate: 2_000_000,
                    ..Default::default()
                });
                o.slot = Some(NetemSlot {
                    min_delay: 100_000,
                    max_delay: 900_000,
                    max_packets: 3,
                    ..Default::default()
                });
            });
            o.seed = Some(seed);
            let mut r = Root::new(&o);
            drive(&mut r, N, 500_000, 1000, 0)
        };
        let (a, b, c) = (all(7), all(7), all(8));
        assert_eq!(a, b);
        assert_ne!(a.out, c.out);
        // Without `seed`, the device's seed decides, mixed with the handle.
        let o = opts(|o| {
            o.seed = None;
            o.loss = pct(50.0);
        });
        let with_dev = |seed: u64, handle: Handle| {
            let dev = DevInfo {
                seed,
                ..Default::default()
            };
            let mut q = Netem::new(&o, &dev).unwrap();
            q.set_handle(handle);
            let mut cx = Cx::new(Time(0));
            (0..64)
                .map(|i| q.enqueue(pkt(i, 100, 0), &mut cx).is_ok())
                .collect::<Vec<bool>>()
        };
        assert_eq!(
            with_dev(3, Handle::new(1, 0)),
            with_dev(3, Handle::new(1, 0))
        );
        assert_ne!(
            with_dev(3, Handle::new(1, 0)),
            with_dev(4, Handle::new(1, 0))
        );
        assert_ne!(
            with_dev(3, Handle::new(1, 0)),
            with_dev(3, Handle::new(2, 0))
        );
    }

    /// With `seed N` and no correlation, loss decisions are the kernel's
    /// `prandom_u32_state` stream compared with the probability.
    #[test]
    fn seeded_decisions_are_the_kernels_generator() {
        let mut q = Netem::new(
            &opts(|o| {
                o.seed = Some(12345);
                o.loss = pct(30.0);
            }),
            &DevInfo::default(),
        )
        .unwrap();
        let mut k = Prandom::new(12345);
        let mut cx = Cx::new(Time(0));
        for i in 0..1000 {
            let lost = pct(30.0) >= k.next_u32();
            assert_eq!(
                q.enqueue(pkt(i, 100, 0), &mut cx).is_err(),
                lost,
                "packet {i}"
            );
        }
    }

    #[test]
    fn own_statistics_keep_the_kernels_identities() {
        let mut r = Root::new(&opts(|o| {
            o.latency_ticks = ticks(5.0);
            o.jitter_ticks = ticks(5.0);
            o.loss = pct(5.0);
            o.gap = 2;
            o.reorder = Some(NetemProb {
                probability: pct(20.0),
                correlation: 0,
            });
            o.limit = 8;
        }));
        let mut offered = 0;
        let mut cx;
        for round in 0..2000u64 {
            cx = Cx::new(Time(round * MS));
            for k in 0..3 {
                let _ = r.enqueue(pkt(offered, 100 + k, 0), &mut cx);
                offered += 1;
            }
            if round % 2 == 0 {
                while let Dequeue::Packet(_) = r.q.dequeue(&mut cx) {}
            }
            let s = r.q.own_stats().unwrap();
            assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
            assert!(s.qlen <= 8);
        }
        assert!(r.q.own_stats().unwrap().requeues > 0);
    }

    #[test]
    fn reset_empties_every_queue() {
        let mut r = Root::new(&opts(|o| o.latency_ticks = ticks(10.0)));
        let mut cx = Cx::new(Time(0));
        for i in 0..5 {
            r.enqueue(pkt(i, 100, 0), &mut cx).unwrap();
        }
        r.q.reset();
        let s = r.q.own_stats().unwrap();
        assert_eq!((s.qlen, s.backlog), (0, 0));
        assert_eq!(r.q.dequeue(&mut cx), Dequeue::Empty);
    }

    // ---- configuration ----

    #[test]
    fn dump_recreates_the_same_qdisc() {
        let o = opts(|o| {
            o.latency_ticks = ticks(100.0);
            o.jitter_ticks = ticks(10.0);
            o.delay_dist = dist::builtin("normal").map(DistTable::from);
            o.loss_model = Some(LossModel::Gemodel {
                p: pct(1.0),
                r: pct(20.0),
                h: pct(30.0),
                k1: pct(0.5),
            });
            o.ecn = Some(1);
            o.rate = Some(NetemRate {
                rate: 125_000,
                packet_overhead: -4,
                cell_size: 48,
                cell_overhead: 5,
            });
            o.slot = Some(NetemSlot {
                min_delay: 1000,
                max_delay: 2000,
                max_packets: 0,
                max_bytes: 3000,
                ..Default::default()
            });
        });
        let a = Netem::new(&o, &DevInfo::default()).unwrap();
        let QdiscOpts::Netem(d) = a.dump() else {
            panic!()
        };
        assert_eq!(d.seed, Some(1));
        assert_eq!(d.latency64, Some(100_000_000));
        assert_eq!(d.slot.unwrap().max_packets, 0, "INT_MAX dumps as 0");
        let b = Netem::new(&d, &DevInfo::default()).unwrap();
        assert_eq!(b.dump(), a.dump());
        assert_eq!(b.p, a.p);
    }

    /// `change` applies only the attributes tc sent: correlations, rate,
    /// ecn, slot, tables and seed stay as they were without theirs.
    #[test]
    fn change_keeps_what_absent_attributes_configure() {
        let first = opts(|o| {
            o.latency_ticks = ticks(100.0);
            o.jitter_ticks = ticks(10.0);
            o.corr = Some(NetemCorr {
                delay_corr: pct(25.0),
                ..Default::default()
            });
            o.delay_dist = dist::builtin("normal").map(DistTable::from);
            o.loss = pct(1.0);
            o.ecn = Some(1);
            o.rate = Some(NetemRate {
                rate: 1000,
                ..Default::default()
            });
            o.loss_model = None;
        });
        let mut q = Netem::new(&first, &DevInfo::default()).unwrap();
        let second = NetemOpts {
            limit: 1000,
            latency_ticks: ticks(200.0),
            ..Default::default()
        };
        q.change(&QdiscOpts::Netem(second), &DevInfo::default())
            .unwrap();
        let QdiscOpts::Netem(d) = q.dump() else {
            panic!()
        };
        assert_eq!(
            (d.latency_ticks, d.jitter_ticks, d.loss),
            (ticks(200.0), 0, 0)
        );
        assert_eq!(d.corr.unwrap().delay_corr, pct(25.0));
        assert_eq!(
            (d.ecn, d.rate.unwrap().rate, d.seed),
            (Some(1), 1000, Some(1))
        );
        assert!(d.delay_dist.is_some());
        // A loss model is replaced by random loss when tc sends none.
        let mut q = Netem::new(
            &opts(|o| {
                o.loss_model = Some(LossModel::Gemodel {
                    p: 1,
                    r: 2,
                    h: 3,
                    k1: 4,
                })
            }),
            &DevInfo::default(),
        )
        .unwrap();
        q.change(&QdiscOpts::Netem(opts(|_| {})), &DevInfo::default())
            .unwrap();
        let QdiscOpts::Netem(d) = q.dump() else {
            panic!()
        };
        assert_eq!(d.loss_model, None);
        // A gap alone means 100 % reordering.
        let q = Netem::new(&opts(|o| o.gap = 5), &DevInfo::default()).unwrap();
        let QdiscOpts::Netem(d) = q.dump() else {
            panic!()
        };
        assert_eq!(d.reorder.unwrap().probability, u32::MAX);
    }

    #[test]
    fn invalid_options_are_refused_as_the_kernel_refuses_them() {
        let err = |f: fn(&mut NetemOpts)| Netem::new(&opts(f), &DevInfo::default()).unwrap_err();
        type Edit = fn(&mut NetemOpts);
        let cases: [(Edit, &str); 4] = [
            (
                |o| {
                    o.slot = Some(NetemSlot {
                        min_delay: -1,
                        ..Default::default()
                    })
                },
                "negative slot delay",
            ),
            (
                |o| {
                    o.slot = Some(NetemSlot {
                        min_delay: 2,
                        max_delay: 1,
                        ..Default::default()
                    })
                },
                "slot min delay greater than max delay",
            ),
            (
                |o| {
                    o.slot = Some(NetemSlot {
                        dist_jitter: -1,
                        ..Default::default()
                    })
                },
                "negative dist delay",
            ),
            (
                |o| {
                    o.slot = Some(NetemSlot {
                        max_packets: -5,
                        ..Default::default()
                    })
                },
                "negative slot limit",
            ),
        ];
        for (f, msg) in cases {
            assert_eq!(err(f), TcError::inval(msg));
        }
        assert_eq!(
            err(|o| o.latency64 = Some(-1)),
            TcError::inval("negative latency")
        );
        assert_eq!(
            err(|o| o.jitter64 = Some(-1)),
            TcError::inval("negative jitter")
        );
        assert_eq!(
            err(|o| o.delay_dist = Some(DistTable::from(vec![]))).errno,
            Errno::EINVAL
        );
        assert_eq!(
            err(|o| o.slot_dist = Some(DistTable::from(vec![0; 16385]))).errno,
            Errno::EINVAL
        );
        // A failed change changes nothing.
        let mut q = Netem::new(&opts(|o| o.loss = pct(5.0)), &DevInfo::default()).unwrap();
        let before = q.dump();
        let bad = opts(|o| {
            o.loss = pct(50.0);
            o.jitter64 = Some(-5);
        });
        assert!(q
            .change(&QdiscOpts::Netem(bad), &DevInfo::default())
            .is_err());
        assert_eq!(q.dump(), before);
        assert!(q.change(&QdiscOpts::Noqueue, &DevInfo::default()).is_err());
        // Jitter is capped at what tabledist takes (i32::MAX ns).
        let q = Netem::new(&opts(|o| o.jitter64 = Some(i64::MAX)), &DevInfo::default()).unwrap();
        assert_eq!(q.p.jitter, i32::MAX as i64);
    }

    // ---- the class and the child ----

    fn netem_node(handle: u16, o: &NetemOpts) -> QdiscNode {
        QdiscNode::new(
            Handle::new(handle, 0),
            Handle::ROOT,
            Box::new(Netem::new(o, &DevInfo::default()).unwrap()),
        )
    }

    #[test]
    fn a_child_qdisc_gets_packets_as_they_come_due() {
        let dev = DevInfo::default();
        let mut n = netem_node(1, &opts(|o| o.latency_ticks = ticks(10.0)));
        {
            let c = n.qdisc.classes().unwrap();
            assert!(c.list().is_empty(), "no class without a child");
            let child = QdiscNode::new(
                Handle::new(0x10, 0),
                Handle::new(1, 1),
                Box::new(Fifo::pfifo(2)),
            );
            assert!(c
                .graft(Handle::new(1, 1), Some(child), &dev)
                .unwrap()
                .is_none());
            let l = c.list();
            assert_eq!(
                (l.len(), l[0].classid, l[0].parent, l[0].leaf),
                (
                    1,
                    Handle::new(1, 1),
                    Handle::new(1, 0),
                    Some(Handle::new(0x10, 0))
                )
            );
        }
        let mut cx = Cx::new(Time(0));
        for i in 0..5 {
            n.enqueue(pkt(i, 100, 0), &mut cx).unwrap();
        }
        assert_eq!(n.dequeue(&mut cx), Dequeue::Wait(Time(10 * MS)));
        // All five come due: the pfifo of 2 takes two, three are dropped.
        let mut later = Cx::new(Time(10 * MS));
        let mut got = vec![];
        while let Dequeue::Packet(p) = n.dequeue(&mut later) {
            got.push(p.id);
        }
        assert_eq!(got, vec![0, 1]);
        let s = n.stats();
        assert_eq!((s.packets, s.drops, s.qlen, s.backlog), (2, 3, 0, 0));
        assert_eq!(later.drops.len(), 3);
        let child = n.qdisc.classes_ref().unwrap().leaves_ref()[0].stats();
        assert_eq!((child.packets, child.drops), (2, 3));
        // Deleting the child leaves netem on its own.
        let old = n
            .qdisc
            .classes()
            .unwrap()
            .graft(Handle::new(1, 1), None, &dev)
            .unwrap();
        assert_eq!(old.map(|o| o.handle), Some(Handle::new(0x10, 0)));
        n.enqueue(pkt(9, 100, 0), &mut later).unwrap();
        assert!(matches!(n.dequeue(&mut Cx::new(Time(20 * MS))), Dequeue::Packet(p) if p.id == 9));
    }

    #[test]
    fn grafting_out_a_child_purges_its_queue() {
        let dev = DevInfo::default();
        let mut n = netem_node(1, &opts(|_| {}));
        let child = QdiscNode::new(
            Handle::new(0x10, 0),
            Handle::new(1, 1),
            Box::new(Fifo::pfifo(100)),
        );
        n.qdisc
            .classes()
            .unwrap()
            .graft(Handle::new(1, 1), Some(child), &dev)
            .unwrap();
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            n.enqueue(pkt(i, 100, 0), &mut cx).unwrap();
        }
        // Held by a throttled parent's peek: the packets move into the child.
        assert!(n.peek(&mut cx).is_some());
        let c = n.qdisc.classes().unwrap();
        c.graft(Handle::new(1, 1), None, &dev).unwrap();
        assert_eq!(c.take_purged(), (2, 200));
        assert_eq!(c.take_purged(), (0, 0));
        assert_eq!(n.qdisc.own_stats().unwrap().drops, 2);
    }

    #[test]
    fn netem_under_tbf_delays_then_shapes() {
        let dev = DevInfo::default();
        let tbf = Tbf::new(
            &TbfOpts {
                rate: RateSpec {
                    rate: 125_000,
                    ..Default::default()
                },
                limit: 100_000,
                buffer_ticks: (1500u64 * 15_625_000 / 125_000) as u32,
                burst: Some(1500),
                ..Default::default()
            },
            &dev,
        )
        .unwrap();
        let mut root = QdiscNode::new(Handle::new(1, 0), Handle::ROOT, Box::new(tbf));
        let netem = QdiscNode::new(
            Handle::new(0x10, 0),
            Handle::new(1, 1),
            Box::new(Netem::new(&opts(|o| o.latency_ticks = ticks(50.0)), &dev).unwrap()),
        );
        root.qdisc
            .classes()
            .unwrap()
            .graft(Handle::new(1, 1), Some(netem), &dev)
            .unwrap();
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            root.enqueue(pkt(i, 1500, 0), &mut cx).unwrap();
        }
        let mut t = 0;
        let mut out = vec![];
        while out.len() < 3 {
            let mut cx = Cx::new(Time(t));
            match root.dequeue(&mut cx) {
                Dequeue::Packet(_) => out.push(t),
                Dequeue::Wait(w) => t = w.0,
                Dequeue::Empty => panic!("empty with packets queued"),
            }
        }
        // 50 ms of delay, then 12 ms per 1500 bytes at 1 Mbit/s.
        assert_eq!(out[0], 50 * MS);
        assert!(
            (out[1] - out[0]).abs_diff(12 * MS) < 1000
                && (out[2] - out[1]).abs_diff(12 * MS) < 1000
        );
        let s = root.stats();
        assert_eq!((s.qlen, s.packets), (0, 3));
    }

    #[test]
    fn duplicating_netems_do_not_mix_with_other_netems() {
        let dev = DevInfo::default();
        let dup = opts(|o| o.duplicate = pct(50.0));
        let plain = opts(|_| {});
        // A netem under a duplicating netem, or a duplicating one under a netem: refused.
        for (parent, child) in [(&dup, &plain), (&plain, &dup), (&dup, &dup)] {
            let mut n = netem_node(1, parent);
            let c = netem_node(2, child);
            let e = n
                .qdisc
                .classes()
                .unwrap()
                .graft(Handle::new(1, 1), Some(c), &dev)
                .unwrap_err();
            assert_eq!(
                e.describe(),
                "Error: netem: cannot mix duplicating netems with other netems in tree."
            );
            assert!(n.qdisc.classes_ref().unwrap().leaves_ref().is_empty());
        }
        // Two plain netems may nest; then neither may start duplicating.
        let mut n = netem_node(1, &plain);
        n.qdisc
            .classes()
            .unwrap()
            .graft(Handle::new(1, 1), Some(netem_node(2, &plain)), &dev)
            .unwrap();
        assert!(n
            .qdisc
            .change(&QdiscOpts::Netem(dup.clone()), &dev)
            .is_err());
        assert_eq!(
            check_netem_in_tree(&n, Some(Handle::new(2, 0)), dup.duplicate),
            Err(mixed_duplicates())
        );
        assert_eq!(check_netem_in_tree(&n, Some(Handle::new(2, 0)), 0), Ok(()));
        assert_eq!(check_netem_in_tree(&n, None, 0), Ok(()));
        // A netem anywhere in a tree with a duplicating one is refused.
        let lone = netem_node(1, &dup);
        assert!(check_netem_in_tree(&lone, Some(Handle::new(1, 0)), dup.duplicate).is_ok());
        assert!(check_netem_in_tree(&lone, None, 0).is_err());
        // Any other kind of child is fine under a duplicating netem.
        let mut n = netem_node(1, &dup);
        let fifo = QdiscNode::new(
            Handle::new(3, 0),
            Handle::new(1, 1),
            Box::new(Fifo::pfifo(10)),
        );
        assert!(n
            .qdisc
            .classes()
            .unwrap()
            .graft(Handle::new(1, 1), Some(fifo), &dev)
            .is_ok());
    }
}

#[cfg(test)]
mod root_tests {
    use super::*;
    use crate::packet::Skb;

    #[test]
    fn a_root_node_enqueues_the_duplicate_once() {
        let o = NetemOpts {
            duplicate: u32::MAX,
            limit: 100,
            ..NetemOpts::default()
        };
        let q = Netem::new(&o, &DevInfo::default()).unwrap();
        let mut node = QdiscNode::new(Handle::new(1, 0), Handle::ROOT, Box::new(q));
        let mut cx = Cx::new(Time(0));
        let p = Packet::from(Skb {
            len: 100,
            ..Packet::default().into_skb()
        });
        node.enqueue_root(p, &mut cx).unwrap();
        assert_eq!(
            node.stats().qlen,
            2,
            "original and one copy, the copy not copied again"
        );
    }
}
