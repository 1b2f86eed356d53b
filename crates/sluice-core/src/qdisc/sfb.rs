//! sfb: Stochastic Fair Blue in front of one inner queue.
//!
//! Modelled on net/sched/sch_sfb.c (Linux 6.18), after Feng, Kandlur, Saha
//! and Shin, "Blue: A New Class of Active Queue Management Algorithms"
//! (U. Michigan CSE-TR-387-99), whose section 4 is SFB.
//!
//! # Blue, and why "fair"
//!
//! Blue marks with a probability `p` that is not derived from a queue
//! average, as RED's is, but learnt: `p` rises by `increment` whenever the
//! queue overflows its target and falls by `decrement` whenever it runs
//! empty. SFB keeps that state per flow without per-flow memory: a grid of
//! 8 levels x 16 bins, each bin a virtual queue with a length (the packets
//! of the flows hashed into it, counted at enqueue and discounted at
//! dequeue) and its own Blue probability. A packet's 32-bit flow hash picks
//! one bin per level, four bits per level. At each arrival every bin of the
//! packet's flow is updated — an empty bin lowers its probability, one
//! holding `target` packets or more raises it — and the flow is judged by
//! the *smallest* length and the *smallest* probability among its bins: a
//! well-behaved flow shares each bin with others by chance, but it is very
//! unlikely to share all eight with a flood, so its minimum stays low.
//!
//! The decision, in order:
//! - `limit` packets already queued: drop (`queuedrop`, an overlimit);
//! - the flow's shortest bin holds `max` packets: drop (`bucketdrop`, an
//!   overlimit);
//! - its smallest probability is 1 (an inelastic, non-responsive flow):
//!   it goes to the penalty box, a bucket of `penalty_burst` packets
//!   filled at `penalty_rate` per second (`penaltydrop`, an overlimit,
//!   when empty); rate 0 or burst 0 drops them all. As in the kernel the
//!   bucket is refilled only when found empty, with the tokens earned since
//!   the last refill (at most 10 s worth), so inelastic packets that keep
//!   coming more often than once per `1/penalty_rate` get nothing beyond
//!   the burst;
//! - otherwise a 16-bit random number below the probability marks the
//!   packet: ECN-capable packets get CE (`marked`), others are dropped
//!   (`earlydrop`); and above one half, the excess is dropped even if
//!   ECN-capable, linearly up to always at probability 1.
//!
//! Packets let through go to the inner qdisc, by default a pfifo of `limit`
//! packets (the device's txqueuelen when `limit` is 0), whose refusals count
//! as `childdrop`. Probabilities are Q0.16 fractions (65535 is "1"),
//! lengths saturate at 65535.
//!
//! # Moving hash functions
//!
//! A flow that collides with a flood in all eight levels would be punished
//! for good, so every `rehash` the hash key is replaced (paper section 4.4).
//! To start the new key warm, there are two grids: during the last `db`
//! (double buffering) before the change, inelastic flows are hashed into
//! the standby grid as well, so its bins learn the flood before it becomes
//! the active one. The swap gives the retired grid a fresh key and empties
//! nothing; a packet remembers its hash in each grid it was counted in (the
//! kernel's `skb->cb`, sluice's [`Packet::cb`]), 0 for none, so dequeue
//! discounts exactly what enqueue counted.
//!
//! # Filters
//!
//! With filters attached (`tc filter add ... parent MAJOR:`), the flow is
//! the class minor a filter returns instead of the packet's flow hash (it
//! salts the key); no match or a `drop` verdict drops the packet.
//!
//! sfb is classful: `MAJOR:1` (any minor, as `sfb_find` answers every
//! class id) holds the inner qdisc, which can be replaced; the default
//! pfifo has handle 0 and is hidden from `tc qdisc show`. `tc class show`
//! lists nothing: the kernel's class dump answers ENOSYS, and so do class
//! `change` and `delete`. Every `change` puts a fresh pfifo in place of
//! the inner qdisc (discarding its packets), zeroes both grids and draws
//! two new keys. `tc -s` shows `earlydrop`, `penaltydrop`, `bucketdrop`,
//! `queuedrop`, `childdrop`, `marked`, and over the active grid the longest
//! bin `maxqlen`, the largest probability `maxprob` and the mean `avgprob`.
//!
//! Deviations: keys are drawn from a generator seeded from
//! [`DevInfo::seed`], and the flow hash is the project's lookup3 flow hash
//! ([`super::flow_hash`]) where the kernel uses SipHash; a filter's class
//! minor is mixed with `jhash_3words`. The clock is the call's time in
//! jiffies at HZ = 1000. `change` has no time: the rehash period and the
//! penalty bucket are dated from the first enqueue after it. Packets
//! `change` discards are reported as shed at the next enqueue or dequeue,
//! as red does. A parent's peek takes the packet out of the grids at once
//! (the node's peek is a held dequeue), where the kernel waits for the
//! dequeue.

use super::fifo::Fifo;
use super::flow_hash::{flow_hash, jhash_3words};
use super::noqueue::{child_leaves, child_leaves_ref, noop_child, swap_child};
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
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// Bits of the flow hash per level (`SFB_BUCKET_SHIFT`).
const BUCKET_SHIFT: u32 = 4;
/// Bins per level (`SFB_NUMBUCKETS`).
const BUCKETS: usize = 1 << BUCKET_SHIFT;
/// Levels (`SFB_LEVELS`): the 32-bit hash cut into four-bit pieces.
const LEVELS: usize = 32 / BUCKET_SHIFT as usize;
/// Probability "1" in Q0.16 (`SFB_MAX_PROB`).
pub const SFB_MAX_PROB: u32 = 0xffff;
/// Jiffies per second assumed for the timers.
const HZ: u64 = 1000;
/// `MAX_JIFFY_OFFSET`: what `msecs_to_jiffies` gives for a negative `int`.
const MAX_JIFFY_OFFSET: u64 = ((i64::MAX >> 1) - 1) as u64;

/// `struct tc_sfb_qopt`: what tc sends (`TCA_SFB_PARMS`) and the kernel
/// dumps. Times in milliseconds, probabilities in Q0.16.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SfbOpts {
    /// Time between hash key changes, ms (0: never).
    pub rehash_interval: u32,
    /// Double-buffering time before each change, ms.
    pub warmup_time: u32,
    /// Drop when the flow's shortest bin holds this many packets.
    pub max: u32,
    /// Bin length from which a bin's probability rises (`target`).
    pub bin_size: u32,
    /// Probability step up (d1).
    pub increment: u32,
    /// Probability step down (d2).
    pub decrement: u32,
    /// Packets queued at most; 0: the device's txqueuelen (dumped as used).
    pub limit: u32,
    /// Packets per second let through from inelastic flows.
    pub penalty_rate: u32,
    /// Burst of the penalty bucket, packets.
    pub penalty_burst: u32,
}

/// `struct tc_sfb_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SfbXstats {
    /// Dropped by Blue's probability.
    pub earlydrop: u32,
    /// Dropped by the penalty bucket.
    pub penaltydrop: u32,
    /// Dropped because the flow's shortest bin reached `max`.
    pub bucketdrop: u32,
    /// Dropped at `limit`.
    pub queuedrop: u32,
    /// Refused by the inner qdisc.
    pub childdrop: u32,
    /// CE-marked.
    pub marked: u32,
    /// The longest bin of the active grid.
    pub maxqlen: u32,
    /// The largest probability of the active grid, Q0.16.
    pub maxprob: u32,
    /// The mean probability of the active grid, Q0.16.
    pub avgprob: u32,
}

/// `struct sfb_bucket`: one bin, a virtual queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Bin {
    /// Packets of the flows hashed here, queued now.
    qlen: u16,
    /// Blue's marking probability, Q0.16.
    p_mark: u16,
}

/// `struct sfb_bins`: one grid with its key.
#[derive(Clone, Debug)]
struct Grid {
    key: u32,
    bins: [[Bin; BUCKETS]; LEVELS],
}

/// The bin of each level a hash picks.
fn bin_indices(hash: u32) -> impl Iterator<Item = (usize, usize)> {
    (0..LEVELS).map(move |l| {
        (
            l,
            ((hash >> (l as u32 * BUCKET_SHIFT)) as usize) & (BUCKETS - 1),
        )
    })
}

/// The counters of `struct sfb_sched_data.stats`.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    earlydrop: u32,
    penaltydrop: u32,
    bucketdrop: u32,
    queuedrop: u32,
    childdrop: u32,
    marked: u32,
}

/// `msecs_to_jiffies` at HZ = 1000.
fn msecs_to_jiffies(ms: u32) -> u64 {
    if (ms as i32) < 0 {
        MAX_JIFFY_OFFSET
    } else {
        ms as u64
    }
}

/// `jiffies_to_msecs` at HZ = 1000 (an `unsigned int`).
fn jiffies_to_msecs(j: u64) -> u32 {
    j as u32
}

/// `time_after(a, b)` on jiffies.
fn time_after(a: u64, b: u64) -> bool {
    (b.wrapping_sub(a) as i64) < 0
}

/// The jiffies counter at `t`.
fn jiffies(t: Time) -> u64 {
    t.as_nanos() / (1_000_000_000 / HZ)
}

/// An sfb qdisc.
#[derive(Debug)]
pub struct Sfb {
    /// The qdisc of class `major:1`.
    child: QdiscNode,
    major: u16,
    /// Filters that choose the flow instead of the flow hash.
    block: Block,
    /// Jiffies between key changes (0: never).
    rehash_interval: u64,
    /// Jiffies of double buffering before a change.
    warmup_time: u64,
    max: u32,
    bin_size: u32,
    increment: u32,
    decrement: u32,
    /// Packets queued at most (the resolved limit).
    limit: u32,
    penalty_rate: u32,
    penalty_burst: u32,
    tokens_avail: u32,
    /// When the current key period began, jiffies (`None`: at the next enqueue).
    rehash_time: Option<u64>,
    /// When the penalty bucket was last filled, jiffies (`None`: at the next enqueue).
    token_time: Option<u64>,
    /// The active grid, 0 or 1.
    slot: usize,
    double_buffering: bool,
    grids: [Grid; 2],
    stats: Counters,
    rng: Xoshiro256PlusPlus,
    overlimits: u64,
    /// Packets (count, bytes) `change` discarded, not yet reported.
    purged: (u64, u64),
}

impl Sfb {
    /// `sfb_init`: noop inside, then the options as `change` applies them.
    pub fn new(o: &SfbOpts, dev: &DevInfo) -> TcResult<Self> {
        let empty = Grid {
            key: 0,
            bins: [[Bin::default(); BUCKETS]; LEVELS],
        };
        let mut q = Sfb {
            child: noop_child(Handle::new(0, 1)),
            major: 0,
            block: Block::default(),
            rehash_interval: 0,
            warmup_time: 0,
            max: 0,
            bin_size: 0,
            increment: 0,
            decrement: 0,
            limit: 0,
            penalty_rate: 0,
            penalty_burst: 0,
            tokens_avail: 0,
            rehash_time: None,
            token_time: None,
            slot: 0,
            double_buffering: false,
            grids: [empty.clone(), empty],
            stats: Counters::default(),
            rng: Xoshiro256PlusPlus::seed_from_u64(dev.seed ^ 0x7366_6200_0000_0000),
            overlimits: 0,
            purged: (0, 0),
        };
        q.apply(o, dev);
        Ok(q)
    }

    /// `sfb_change`: a fresh pfifo inside, every parameter, empty grids and
    /// new keys. Nothing in `tc_sfb_qopt` is refused.
    fn apply(&mut self, o: &SfbOpts, dev: &DevInfo) {
        let limit = if o.limit == 0 {
            dev.default_qlen()
        } else {
            o.limit
        };
        let fifo = QdiscNode::new(
            Handle::UNSPEC,
            self.class_id(),
            Box::new(Fifo::pfifo(limit)),
        )
        .hashed_invisible();
        let old = std::mem::replace(&mut self.child, fifo);
        let s = old.stats();
        self.purged.0 += s.qlen as u64;
        self.purged.1 += s.backlog;
        self.rehash_interval = msecs_to_jiffies(o.rehash_interval);
        self.warmup_time = msecs_to_jiffies(o.warmup_time);
        self.rehash_time = None;
        self.limit = limit;
        self.increment = o.increment;
        self.decrement = o.decrement;
        self.max = o.max;
        self.bin_size = o.bin_size;
        self.penalty_rate = o.penalty_rate;
        self.penalty_burst = o.penalty_burst;
        self.tokens_avail = o.penalty_burst;
        self.token_time = None;
        self.slot = 0;
        self.double_buffering = false;
        for g in &mut self.grids {
            g.bins = [[Bin::default(); BUCKETS]; LEVELS];
            g.key = self.rng.next_u32();
        }
    }

    fn class_id(&self) -> Handle {
        Handle::new(self.major, 1)
    }

    /// Report what `change` discarded; date a fresh configuration.
    fn catch_up(&mut self, cx: &mut Cx) {
        let (n, bytes) = std::mem::take(&mut self.purged);
        for i in 0..n {
            // Lengths are not known one by one: spread the bytes evenly.
            let share = bytes / n + u64::from(i < bytes % n);
            cx.shed(share as u32, DropReason::QueueFull);
        }
        let now = jiffies(cx.now);
        self.rehash_time.get_or_insert(now);
        self.token_time.get_or_insert(now);
    }

    /// `sfb_swap_slot`: the retired grid gets a fresh key, the other one
    /// becomes active.
    fn swap_slot(&mut self) {
        self.grids[self.slot].key = self.rng.next_u32();
        self.slot ^= 1;
        self.double_buffering = false;
    }

    /// The rehash timer, run at each enqueue.
    fn maybe_rehash(&mut self, now: u64) {
        if self.rehash_interval == 0 {
            return;
        }
        let start = self.rehash_time.unwrap_or(now);
        let end = start.wrapping_add(self.rehash_interval);
        if time_after(now, end) {
            self.swap_slot();
            self.rehash_time = Some(now);
        } else if !self.double_buffering
            && self.warmup_time > 0
            && time_after(now, end.wrapping_sub(self.warmup_time))
        {
            self.double_buffering = true;
        }
    }

    /// Blue's update of the bins `hash` picks in grid `slot`: an empty bin
    /// lowers its probability, a bin at `target` or above raises it. The
    /// shortest length and the smallest probability seen, after the update.
    fn update_bins(&mut self, slot: usize, hash: u32) -> (u32, u32) {
        let (inc, dec, target) = (self.increment, self.decrement, self.bin_size);
        let (mut minqlen, mut p_min) = (u32::MAX, u32::MAX);
        for (l, i) in bin_indices(hash) {
            let b = &mut self.grids[slot].bins[l][i];
            if b.qlen == 0 {
                b.p_mark = (b.p_mark as u32).saturating_sub(dec) as u16;
            } else if b.qlen as u32 >= target {
                b.p_mark = (b.p_mark as u32).saturating_add(inc).min(SFB_MAX_PROB) as u16;
            }
            minqlen = minqlen.min(b.qlen as u32);
            p_min = p_min.min(b.p_mark as u32);
        }
        (minqlen, p_min)
    }

    /// Count a queued packet in (`up`) or out of the bins its hashes name.
    fn account(&mut self, hashes: [u32; 2], up: bool) {
        for (slot, &hash) in hashes.iter().enumerate() {
            if hash == 0 {
                continue;
            }
            for (l, i) in bin_indices(hash) {
                let b = &mut self.grids[slot].bins[l][i];
                b.qlen = if up {
                    b.qlen.saturating_add(1)
                } else {
                    b.qlen.saturating_sub(1)
                };
            }
        }
    }

    /// `sfb_rate_limit`: `true` when an inelastic packet is to be dropped.
    fn penalised(&mut self, now: u64) -> bool {
        if self.penalty_rate == 0 || self.penalty_burst == 0 {
            return true;
        }
        if self.tokens_avail < 1 {
            let since = self.token_time.unwrap_or(now);
            let age = now.wrapping_sub(since).min(10 * HZ);
            let tokens = age * self.penalty_rate as u64 / HZ;
            self.tokens_avail = tokens.min(self.penalty_burst as u64) as u32;
            self.token_time = Some(now);
            if self.tokens_avail < 1 {
                return true;
            }
        }
        self.tokens_avail -= 1;
        false
    }

    /// The flow hash in grid `slot`: the filters' class minor salted with
    /// the key when filters are attached, else the packet's flow hash.
    /// Never 0 (0 means "not counted in this grid").
    fn hash(&mut self, pkt: &mut Packet, slot: usize, now: Time) -> Result<u32, DropReason> {
        let key = self.grids[slot].key;
        let h = if self.block.is_empty() {
            flow_hash(pkt, key)
        } else {
            let res = self
                .block
                .classify(pkt, now)
                .ok_or(DropReason::Unclassified)?;
            match res.verdict {
                Verdict::Shot => return Err(DropReason::Action),
                Verdict::Stolen | Verdict::Queued | Verdict::Trap => {
                    return Err(DropReason::Stolen)
                }
                Verdict::Continue => return Err(DropReason::Unclassified),
                _ => jhash_3words(res.classid.minor() as u32, 0, 0, key),
            }
        };
        Ok(h.max(1))
    }

    /// The verdict on a packet whose flow is judged by `(minqlen, p_min)`
    /// in the active grid: `Err` drops it.
    fn judge(
        &mut self,
        pkt: &mut Packet,
        minqlen: u32,
        p_min: u32,
        now: u64,
    ) -> Result<(), DropReason> {
        if minqlen >= self.max {
            self.overlimits += 1;
            self.stats.bucketdrop += 1;
            return Err(DropReason::QueueFull);
        }
        if p_min >= SFB_MAX_PROB {
            // Inelastic: teach the standby grid too, then police.
            if self.double_buffering {
                let other = self.slot ^ 1;
                let h = flow_hash(pkt, self.grids[other].key).max(1);
                pkt.cb[other] = h;
                self.update_bins(other, h);
            }
            if self.penalised(now) {
                self.overlimits += 1;
                self.stats.penaltydrop += 1;
                return Err(DropReason::Aqm);
            }
            return Ok(());
        }
        let r = self.rng.next_u32() & SFB_MAX_PROB;
        if r < p_min {
            let half = SFB_MAX_PROB / 2;
            if p_min > half && r < (p_min - half) * 2 {
                // So many marks: unresponsive, or badly congested.
                self.stats.earlydrop += 1;
                return Err(DropReason::Aqm);
            }
            if pkt.set_ce() {
                self.stats.marked += 1;
            } else {
                self.stats.earlydrop += 1;
                return Err(DropReason::Aqm);
            }
        }
        Ok(())
    }

    /// `sfb_compute_qlen`: the longest bin, the largest and the mean
    /// probability of the active grid.
    fn grid_summary(&self) -> (u32, u32, u32) {
        let bins = self.grids[self.slot].bins.iter().flatten();
        let (mut qlen, mut prob, mut total) = (0u32, 0u32, 0u32);
        for b in bins {
            qlen = qlen.max(b.qlen as u32);
            prob = prob.max(b.p_mark as u32);
            total += b.p_mark as u32;
        }
        (qlen, prob, total / (LEVELS * BUCKETS) as u32)
    }
}

impl Qdisc for Sfb {
    fn set_handle(&mut self, handle: Handle) {
        self.major = handle.major();
        self.child.parent = self.class_id();
    }

    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.catch_up(cx);
        let now = jiffies(cx.now);
        if self.child.stats.qlen >= self.limit {
            self.overlimits += 1;
            self.stats.queuedrop += 1;
            return Err((pkt, DropReason::QueueFull));
        }
        self.maybe_rehash(now);
        let slot = self.slot;
        let hash = match self.hash(&mut pkt, slot, cx.now) {
            Ok(h) => h,
            Err(r) => return Err((pkt, r)),
        };
        pkt.cb[slot] = hash;
        pkt.cb[slot ^ 1] = 0;
        let (minqlen, p_min) = self.update_bins(slot, hash);
        if let Err(r) = self.judge(&mut pkt, minqlen, p_min, now) {
            return Err((pkt, r));
        }
        let hashes = pkt.cb;
        match self.child.offer(pkt, cx) {
            Ok(()) => {
                self.account(hashes, true);
                Ok(())
            }
            Err((pkt, reason)) => {
                if reason.counts() {
                    self.stats.childdrop += 1;
                }
                Err((pkt, reason))
            }
        }
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.catch_up(cx);
        let d = self.child.dequeue(cx);
        if let Dequeue::Packet(p) = &d {
            self.account(p.cb, false);
        }
        d
    }

    /// `sfb_reset`: empty the inner qdisc and the grids, a new key for grid 0.
    fn reset(&mut self) {
        self.child.reset();
        self.slot = 0;
        self.double_buffering = false;
        for g in &mut self.grids {
            g.bins = [[Bin::default(); BUCKETS]; LEVELS];
        }
        self.grids[0].key = self.rng.next_u32();
        self.purged = (0, 0);
    }

    fn change(&mut self, opts: &QdiscOpts, dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Sfb(o) = opts else {
            return Err(wrong_kind("sfb", opts));
        };
        self.apply(o, dev);
        Ok(())
    }

    /// `sfb_dump`.
    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Sfb(SfbOpts {
            rehash_interval: jiffies_to_msecs(self.rehash_interval),
            warmup_time: jiffies_to_msecs(self.warmup_time),
            max: self.max,
            bin_size: self.bin_size,
            increment: self.increment,
            decrement: self.decrement,
            limit: self.limit,
            penalty_rate: self.penalty_rate,
            penalty_burst: self.penalty_burst,
        })
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }

    /// `sfb_dump_stats`.
    fn xstats(&self) -> XStats {
        let s = &self.stats;
        let (maxqlen, maxprob, avgprob) = self.grid_summary();
        XStats::Sfb(SfbXstats {
            earlydrop: s.earlydrop,
            penaltydrop: s.penaltydrop,
            bucketdrop: s.bucketdrop,
            queuedrop: s.queuedrop,
            childdrop: s.childdrop,
            marked: s.marked,
            maxqlen,
            maxprob,
            avgprob,
        })
    }

    /// `sfb_tcf_block`: filters attach to the qdisc only.
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

impl Classful for Sfb {
    /// `sfb_change_class`: ENOSYS.
    fn change_class(
        &mut self,
        _classid: Handle,
        _parent: Handle,
        _opts: Option<&ClassOpts>,
        _dev: &DevInfo,
    ) -> TcResult<()> {
        Err(TcError::errno(Errno::ENOSYS))
    }

    /// `sfb_delete`: ENOSYS.
    fn delete_class(&mut self, _classid: Handle) -> TcResult<()> {
        Err(TcError::errno(Errno::ENOSYS))
    }

    /// Nothing: `sfb_dump_class` answers ENOSYS, which ends the dump.
    fn list(&self) -> Vec<ClassInfo> {
        Vec::new()
    }

    /// `sfb_find` answers every class id with the one class.
    fn contains(&self, _classid: Handle) -> bool {
        true
    }

    fn leaf(&self, _classid: Handle) -> Option<&QdiscNode> {
        Some(&self.child)
    }

    /// `sfb_graft`: `None` leaves noop. The old qdisc goes back to the
    /// caller with its queue, to be purged from the ancestors.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        _dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        if classid.major() != 0 {
            self.major = classid.major();
        }
        let class = self.class_id();
        Ok(swap_child(&mut self.child, new, class))
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        child_leaves(&mut self.child)
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        child_leaves_ref(&self.child)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::codel_law::testing::{pkt, run_link, Arrival};
    use crate::time::Duration;
    use proptest::prelude::*;

    const H: Handle = Handle::new(1, 0);

    /// What tc sends for `sfb` with no options, then `edit` applied.
    fn opts(edit: impl FnOnce(&mut SfbOpts)) -> SfbOpts {
        let mut o = SfbOpts {
            rehash_interval: 600_000,
            warmup_time: 60_000,
            max: 25,
            bin_size: 20,
            increment: 33,
            decrement: 3,
            limit: 0,
            penalty_rate: 10,
            penalty_burst: 20,
        };
        edit(&mut o);
        o
    }

    fn node(o: &SfbOpts) -> QdiscNode {
        QdiscNode::new(
            H,
            Handle::ROOT,
            Box::new(Sfb::new(o, &DevInfo::default()).unwrap()),
        )
    }

    fn xstats(n: &QdiscNode) -> SfbXstats {
        match n.qdisc.xstats() {
            XStats::Sfb(x) => x,
            other => panic!("{other:?}"),
        }
    }

    /// An sfb outside a node, for tests that look inside.
    fn bare(o: &SfbOpts) -> Sfb {
        let mut q = Sfb::new(o, &DevInfo::default()).unwrap();
        q.set_handle(H);
        q
    }

    /// Packets of each flow (the flow is `id / 1_000_000`) among `ids`.
    fn per_flow(ids: impl Iterator<Item = u64>, f: u64) -> usize {
        ids.filter(|id| id / 1_000_000 == f).count()
    }

    #[test]
    fn dumps_what_the_kernel_dumps() {
        let n = node(&opts(|_| {}));
        // limit 0: the device's txqueuelen, dumped as used.
        assert_eq!(n.qdisc.dump(), QdiscOpts::Sfb(opts(|o| o.limit = 1000)));
        // The inner pfifo: hidden handle, parent 1:1, the same limit.
        let c = n.qdisc.classes_ref().unwrap();
        let leaf = c.leaves_ref()[0];
        assert!(leaf.handle.is_unspec());
        assert_eq!(leaf.parent, Handle::new(1, 1));
        assert_eq!(leaf.qdisc.dump().kind(), "pfifo");
        assert!(c.list().is_empty(), "the class dump answers ENOSYS");
        // A negative int of milliseconds is MAX_JIFFY_OFFSET, dumped as 32 bits.
        let n = node(&opts(|o| o.rehash_interval = 0x8000_0000));
        let QdiscOpts::Sfb(d) = n.qdisc.dump() else {
            unreachable!()
        };
        assert_eq!(d.rehash_interval, 4_294_967_294);
    }

    /// The point of SFB: a non-responsive flood five times the link's rate
    /// fills its bins, its probability climbs to 1 and it loses most of its
    /// packets, while a light flow, whose bins it shares at most by chance
    /// in some levels, keeps getting through, and the queue stays short.
    /// (A plain FIFO of the same limit would fill and drop the light flow's
    /// packets as often as the flood's.)
    #[test]
    fn a_flood_is_penalised_while_a_light_flow_gets_through() {
        let mut n = node(&opts(|_| {}));
        let ms = Duration::from_millis(1);
        let secs = 20u32;
        // 1000-byte packets on an 8 Mbit/s link: one per millisecond.
        let flood = Arrival::periodic(1, 1000, Duration(ms.0 / 5), 5000 * secs);
        let light = Arrival::periodic(2, 1000, Duration(ms.0 * 10), 100 * secs);
        let all = Arrival::merge(flood.chain(light).collect());
        let run = run_link(&mut n, 8_000_000, all);
        let late = Time(5_000_000_000);
        let after = || run.sent.iter().filter(|s| s.at >= late).map(|s| s.id);
        // How long the light flow's packets waited (packet `seq` arrived
        // at `seq` * 10 ms).
        let light_wait = run
            .sent
            .iter()
            .filter(|s| s.at >= late && s.id / 1_000_000 == 2)
            .map(|s| s.at - Time((s.id % 1_000_000) * 10_000_000))
            .max()
            .unwrap();
        let light_sent = per_flow(after(), 2);
        let flood_sent = per_flow(after(), 1);
        // 15 s of the light flow: 1500 packets offered.
        assert!(
            light_sent >= 1490,
            "light flow delivered {light_sent} of ~1500"
        );
        assert!(
            (flood_sent as f64) < 0.25 * 5000.0 * 15.0,
            "flood delivered {flood_sent}"
        );
        // Blue holds the flood near probability 1 (it drains the queue
        // before reaching it) and its bins near `max`: early and bin drops,
        // never the queue limit, and a standing queue of a few bins' worth.
        let x = xstats(&n);
        assert!(x.earlydrop > 50_000 && x.bucketdrop > 0, "{x:?}");
        assert!(x.maxprob > 60_000, "{x:?}");
        assert_eq!(x.queuedrop, 0, "the queue never reached its limit");
        assert!(
            light_wait < Duration::from_millis(60),
            "the light flow waited up to {light_wait:?}"
        );
    }

    /// A flow whose every bin is at probability 1 is inelastic and goes to
    /// the penalty box: `penalty_burst` packets, then the bucket refills
    /// only when empty, with `penalty_rate` per second of the time since it
    /// was last refilled (or found empty), at most 10 s and `penalty_burst`
    /// worth. So a flow that keeps knocking more often than once per
    /// `1/penalty_rate` gets nothing more, one that waits gets its tokens.
    #[test]
    fn an_inelastic_flow_goes_to_the_penalty_box() {
        let mut q = bare(&opts(|o| {
            o.increment = SFB_MAX_PROB; // one arrival at target: probability 1
            o.decrement = 0;
            o.bin_size = 2;
            o.max = 1000;
            o.limit = 1000;
            o.penalty_rate = 10;
            o.penalty_burst = 3;
        }));
        let at = |ms: u64| Cx::new(Time(ms * 1_000_000));
        let send = |q: &mut Sfb, ms: u64, n: u32| -> u32 {
            let mut cx = at(ms);
            (0..n)
                .filter(|&i| q.enqueue(pkt(1, i, 100, 0), &mut cx).is_ok())
                .count() as u32
        };
        // Two packets fill the bins to target; the third finds them there
        // and makes the flow inelastic; the burst of 3 then goes through.
        assert_eq!(send(&mut q, 0, 10), 2 + 3);
        assert_eq!(q.stats.penaltydrop, 5);
        // Knocking every millisecond: each refill finds less than a token
        // and restarts the clock.
        let through: u32 = (1..=500).map(|ms| send(&mut q, ms, 1)).sum();
        assert_eq!(through, 0);
        // Waiting 250 ms: 2.5 tokens, 2 go through.
        assert_eq!(send(&mut q, 750, 5), 2);
        // Waiting a long time: at most the burst.
        assert_eq!(send(&mut q, 60_000, 5), 3);
        assert_eq!(q.grid_summary().1, SFB_MAX_PROB);
        // penalty_rate 0 (or penalty_burst 0): nothing inelastic at all.
        let mut q = bare(&opts(|o| {
            o.increment = SFB_MAX_PROB;
            o.bin_size = 2;
            o.penalty_rate = 0;
        }));
        assert_eq!(send(&mut q, 0, 10), 2);
        assert_eq!(send(&mut q, 60_000, 10), 0);
    }

    #[test]
    fn queue_bin_and_child_limits() {
        let mut cx = Cx::new(Time(0));
        // limit 5: the sixth packet is a queue drop, an overlimit.
        let mut n = node(&opts(|o| {
            o.limit = 5;
            o.max = 100;
        }));
        for i in 0..6 {
            let _ = n.enqueue(pkt(i, 0, 100, 0), &mut cx);
        }
        let x = xstats(&n);
        assert_eq!(
            (n.stats().qlen, x.queuedrop, n.stats().overlimits),
            (5, 1, 1)
        );
        // max 3: one flow's fourth packet finds all its bins at 3.
        let mut n = node(&opts(|o| {
            o.max = 3;
            o.bin_size = 2;
        }));
        for i in 0..4 {
            let _ = n.enqueue(pkt(7, i, 100, 0), &mut cx);
        }
        let x = xstats(&n);
        assert_eq!((n.stats().qlen, x.bucketdrop, x.maxqlen), (3, 1, 3));
        // Bins at target raise their probability by `increment` per arrival.
        assert_eq!(
            x.maxprob,
            2 * 33,
            "arrivals 3 and 4 found bins at 2 or more"
        );
        assert_eq!(x.avgprob, 8 * 66 / 128);
        // Another flow is not held back by the first one's bins.
        assert!(n.enqueue(pkt(8, 0, 100, 0), &mut cx).is_ok());
        // A child that refuses: childdrop, counted once here.
        let mut n = node(&opts(|o| o.limit = 100));
        let small = QdiscNode::new(
            Handle::new(10, 0),
            Handle::new(1, 1),
            Box::new(Fifo::pfifo(2)),
        );
        n.qdisc
            .classes()
            .unwrap()
            .graft(Handle::new(1, 1), Some(small), &DevInfo::default())
            .unwrap();
        for i in 0..3 {
            let _ = n.enqueue(pkt(i, 0, 100, 0), &mut cx);
        }
        assert_eq!((xstats(&n).childdrop, n.stats().drops), (1, 1));
    }

    #[test]
    fn ecn_capable_packets_are_marked_below_half() {
        let mut q = bare(&opts(|o| o.limit = 100));
        // Every bin at probability 1/4 (and no queue to lower it): about a
        // quarter marked, none dropped.
        for g in &mut q.grids {
            for l in g.bins.iter_mut() {
                for b in l.iter_mut() {
                    b.p_mark = 16384;
                }
            }
        }
        let mut cx = Cx::new(Time(0));
        let mut ce = 0;
        for i in 0..400 {
            q.enqueue(pkt(1, i, 100, 0x02), &mut cx).unwrap();
            if let Dequeue::Packet(p) = q.dequeue(&mut cx) {
                ce += (p.data[1] & 3 == 3) as u32;
            }
        }
        assert!((60..140).contains(&ce), "{ce} of 400 marked");
        assert_eq!(q.stats.marked, ce);
        assert_eq!(q.stats.earlydrop, 0);
    }

    /// Every `rehash` the grids swap; `db` before that, inelastic flows are
    /// counted in the standby grid too. Dequeue discounts a packet from the
    /// grids it was counted in, whichever is active by then.
    #[test]
    fn grids_swap_every_rehash_with_double_buffering_before() {
        let mut q = bare(&opts(|o| {
            o.rehash_interval = 1000;
            o.warmup_time = 200;
            o.limit = 1000;
            o.max = 1000;
        }));
        let at = |ms: u64| Cx::new(Time(ms * 1_000_000));
        // Flow 2 inelastic in both grids (planted), sent during db below.
        let h2 = [
            flow_hash(&pkt(2, 0, 100, 0), q.grids[0].key),
            flow_hash(&pkt(2, 0, 100, 0), q.grids[1].key),
        ];
        for (g, h) in q.grids.iter_mut().zip(h2) {
            for (l, i) in bin_indices(h) {
                g.bins[l][i].p_mark = SFB_MAX_PROB as u16;
                g.bins[l][i].qlen = 1;
            }
        }
        q.enqueue(pkt(1, 0, 100, 0), &mut at(0)).unwrap();
        q.enqueue(pkt(1, 1, 100, 0), &mut at(500)).unwrap();
        assert!(!q.double_buffering);
        q.enqueue(pkt(2, 0, 100, 0), &mut at(900)).unwrap();
        assert!(q.double_buffering);
        assert_eq!(q.slot, 0);
        let standby: Vec<u16> = bin_indices(h2[1])
            .map(|(l, i)| q.grids[1].bins[l][i].qlen)
            .collect();
        assert_eq!(standby, vec![2; 8], "counted in the standby grid");
        // After the period: swapped, double buffering over.
        q.enqueue(pkt(3, 0, 100, 0), &mut at(1001)).unwrap();
        assert_eq!((q.slot, q.double_buffering), (1, false));
        // Drain: every bin of grid 0 back to its planted count (flow 2's
        // bins had 1), grid 1 likewise.
        while let Dequeue::Packet(_) = q.dequeue(&mut at(1002)) {}
        let total: u32 = q.grids[0]
            .bins
            .iter()
            .flatten()
            .map(|b| b.qlen as u32)
            .sum();
        assert_eq!(total, 8, "only the planted counts remain in grid 0");
        let total: u32 = q.grids[1]
            .bins
            .iter()
            .flatten()
            .map(|b| b.qlen as u32)
            .sum();
        assert_eq!(total, 8, "and in grid 1");
    }

    #[test]
    fn change_puts_a_fresh_pfifo_in_and_sheds_the_old_queue() {
        let mut n = node(&opts(|o| o.limit = 100));
        let mut cx = Cx::new(Time(0));
        for i in 0..4 {
            n.enqueue(pkt(i, 0, 1000, 0), &mut cx).unwrap();
        }
        let o = QdiscOpts::Sfb(opts(|o| o.limit = 3));
        n.qdisc.change(&o, &DevInfo::default()).unwrap();
        assert_eq!(xstats(&n).maxqlen, 0, "the grids start empty");
        assert_eq!(n.dequeue(&mut cx), Dequeue::Empty);
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (0, 0, 4));
        assert_eq!(n.qdisc.dump(), o);
        assert!(n
            .qdisc
            .change(&QdiscOpts::Noqueue, &DevInfo::default())
            .is_err());
    }

    proptest! {
        /// offered = sent + dropped + queued at every step, and once
        /// drained every bin of both grids is empty again.
        #[test]
        fn packets_are_conserved_and_bins_drain(
            ops in proptest::collection::vec((0..3u8, 0..6u32, 40..1600u32, 0..50u64), 1..400),
            ecn in any::<bool>(),
        ) {
            let o = opts(|o| {
                o.limit = 30;
                o.max = 6;
                o.bin_size = 3;
                o.increment = 5000;
                o.rehash_interval = 40;
                o.warmup_time = 20;
            });
            let mut n = node(&o);
            let (mut t, mut offered) = (0u64, 0u64);
            for (i, &(op, flow, len, dt)) in ops.iter().enumerate() {
                t += dt * 1_000_000;
                let mut cx = Cx::new(Time(t));
                if op < 2 {
                    offered += 1;
                    let tos = if ecn { 2 } else { 0 };
                    let _ = n.enqueue(pkt(flow, i as u32, len, tos), &mut cx);
                } else {
                    n.dequeue(&mut cx);
                }
                let s = n.stats();
                prop_assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
                prop_assert!(s.qlen <= 30);
            }
            while let Dequeue::Packet(_) = n.dequeue(&mut Cx::new(Time(t))) {}
            prop_assert_eq!(xstats(&n).maxqlen, 0);
        }
    }
}
