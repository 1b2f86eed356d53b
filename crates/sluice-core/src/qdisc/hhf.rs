//! hhf: the Heavy-Hitter Filter — heavy flows in a bucket of their own,
//! served with less weight.
//!
//! Modelled on net/sched/sch_hhf.c (Linux 6.18), by Terry Lam and Nandita
//! Dukkipati, whose detector is the multi-stage filter of Estan and
//! Varghese, "New Directions in Traffic Measurement and Accounting"
//! (SIGCOMM 2002).
//!
//! # Two buckets
//!
//! Every packet goes to one of two FIFO buckets: heavy hitters (HH) or
//! everything else. A weighted deficit round robin serves them, the non-HH
//! bucket with `non_hh_weight` quanta per round and the HH bucket with one,
//! so under contention heavy hitters get `1 / (non_hh_weight + 1)` of the
//! bytes. As in fq_codel, a bucket that becomes active joins the "new"
//! list (served first) unless it is the HH bucket, which always joins the
//! "old" list; an exhausted deficit moves a bucket to the tail of the old
//! list. When more than `limit` packets are queued, the head of the HH
//! bucket is dropped (of the other bucket if the HH bucket is empty) and
//! `drop_overlimit` counts it.
//!
//! # Finding heavy hitters
//!
//! A flow already in the table of heavy hitters (1024 chains keyed by the
//! low ten bits of the flow hash) goes to the HH bucket, and its entry is
//! refreshed. Any other packet passes the multi-stage filter: four arrays
//! of 1024 byte counters, indexed by the hash's three low 10-bit pieces and
//! their XOR with the rest. If every counter plus the packet's length
//! exceeds `admit_bytes`, the flow is a new heavy hitter: it gets a table
//! entry (`tot_hh`, `cur_hh`; at `hh_limit` entries it cannot, and
//! `hh_overlimit` counts that) and its bytes are not added to the counters
//! ("shielding"). Otherwise each counter is raised to at most the smallest
//! counter plus the length ("conservative update"), so a small flow
//! colliding with big ones in some arrays is not pushed over. The counters
//! are forgotten every `reset_timeout` (by valid bits, as the kernel does);
//! a table entry unused for `evict_timeout` expires: it is freed when a
//! lookup walks past it (the last entry of a chain is kept for reuse) or
//! reused for the next heavy hitter of its chain. With the defaults, 128 KB
//! in 40 ms — 25 Mbit/s — makes a heavy hitter.
//!
//! hhf is classless. `change` may shrink `limit`; packets beyond it are
//! dequeued and dropped. Parameters in time are held in jiffies (HZ = 1000),
//! so they come back rounded up to milliseconds.
//!
//! Deviations: the flow hash is the project's lookup3 flow hash
//! ([`super::flow_hash`]) with a key from a generator seeded from
//! [`DevInfo::seed`], where the kernel uses SipHash with a random key. The
//! counters' first reset period starts at time 0 instead of at creation (the
//! counters are empty then, so only the phase of the resets differs).
//! Packets `change` trims are counted as drops of this qdisc (the kernel
//! counts them as sent here and dropped above) and reported as shed at the
//! next enqueue or dequeue; an over-limit drop is reported as shed from an
//! enqueue that succeeds, where the kernel answers congestion when the
//! victim came from the arriving packet's own bucket (the counters come
//! out the same).

use super::flow_hash::flow_hash;
use super::{wrong_kind, Cx, Dequeue, DevInfo, Qdisc, QdiscOpts, XStats};
use crate::error::{TcError, TcResult};
use crate::packet::Packet;
use crate::stats::DropReason;
use crate::time::Time;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Chains of the heavy-hitter table (`HH_FLOWS_CNT`).
const HH_FLOWS_CNT: usize = 1024;
/// Counter arrays of the filter (`HHF_ARRAYS_CNT`).
const ARRAYS: usize = 4;
/// Counters per array (`HHF_ARRAYS_LEN`).
const ARRAY_LEN: usize = 1024;
/// Bits of the hash per array index (`HHF_BIT_MASK_LEN`).
const INDEX_BITS: u32 = 10;
/// `HHF_BIT_MASK`.
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;
/// The heavy-hitter bucket (`WDRR_BUCKET_FOR_HH`).
const HH: usize = 0;
/// The other bucket (`WDRR_BUCKET_FOR_NON_HH`).
const NON_HH: usize = 1;
/// Jiffies per second assumed for the timers.
const HZ: u64 = 1000;
/// `MAX_JIFFY_OFFSET`.
const MAX_JIFFY_OFFSET: u64 = ((i64::MAX >> 1) - 1) as u64;

/// What tc sends (`TCA_HHF_*`, each only when given) and the kernel dumps
/// (all of them). Times in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HhfOpts {
    /// Packets queued at most (`TCA_HHF_BACKLOG_LIMIT`).
    pub limit: Option<u32>,
    /// Bytes per DRR round (`TCA_HHF_QUANTUM`).
    pub quantum: Option<u32>,
    /// Heavy hitters tracked at most (`TCA_HHF_HH_FLOWS_LIMIT`).
    pub hh_limit: Option<u32>,
    /// Period of the filter counters, µs (`TCA_HHF_RESET_TIMEOUT`).
    pub reset_timeout: Option<u32>,
    /// Bytes per period that make a heavy hitter (`TCA_HHF_ADMIT_BYTES`).
    pub admit_bytes: Option<u32>,
    /// Idle time after which a heavy hitter is forgotten, µs (`TCA_HHF_EVICT_TIMEOUT`).
    pub evict_timeout: Option<u32>,
    /// Quanta of the non-HH bucket per round (`TCA_HHF_NON_HH_WEIGHT`).
    pub non_hh_weight: Option<u32>,
}

/// `struct tc_hhf_xstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HhfXstats {
    /// Packets dropped at `limit`.
    pub drop_overlimit: u32,
    /// Heavy hitters that found the table full.
    pub hh_overlimit: u32,
    /// Heavy hitters admitted, ever.
    pub hh_tot_count: u32,
    /// Table entries in use.
    pub hh_cur_count: u32,
}

/// `struct hh_flow_state`: a heavy hitter in the table.
#[derive(Clone, Copy, Debug)]
struct HhFlow {
    hash: u32,
    /// Jiffies (32 bits) when last seen.
    hit: u32,
}

/// A WDRR bucket.
#[derive(Debug, Default)]
struct Bucket {
    queue: VecDeque<Packet>,
    deficit: i32,
    /// On the new or the old list.
    listed: bool,
}

/// `usecs_to_jiffies` at HZ = 1000 (rounds up).
fn usecs_to_jiffies(us: u32) -> u64 {
    if (us as i32) < 0 {
        MAX_JIFFY_OFFSET
    } else {
        (us as u64).div_ceil(1000)
    }
}

/// `jiffies_to_usecs` at HZ = 1000 (an `unsigned int`: wraps).
fn jiffies_to_usecs(j: u64) -> u32 {
    (j as u32).wrapping_mul(1000)
}

/// `hhf_time_before(a, b)` on 32-bit jiffies.
fn time_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// The four filter indices of a flow hash.
fn filter_indices(hash: u32) -> [usize; ARRAYS] {
    let mut pos = [0usize; ARRAYS];
    let (mut rest, mut xor) = (hash, 0u32);
    for p in pos.iter_mut().take(ARRAYS - 1) {
        *p = (rest & INDEX_MASK) as usize;
        xor ^= rest & INDEX_MASK;
        rest >>= INDEX_BITS;
    }
    pos[ARRAYS - 1] = (xor ^ rest) as usize;
    pos
}

/// An hhf qdisc.
#[derive(Debug)]
pub struct Hhf {
    limit: u32,
    quantum: u32,
    hh_limit: u32,
    /// Jiffies.
    reset_timeout: u64,
    admit_bytes: u32,
    /// Jiffies.
    evict_timeout: u64,
    non_hh_weight: u32,
    buckets: [Bucket; 2],
    new_buckets: VecDeque<usize>,
    old_buckets: VecDeque<usize>,
    /// The table of heavy hitters: chains by the hash's low ten bits.
    hh_flows: Vec<Vec<HhFlow>>,
    /// The multi-stage filter's counters and their valid bits.
    counters: [[u32; ARRAY_LEN]; ARRAYS],
    valid: [[bool; ARRAY_LEN]; ARRAYS],
    /// When the counters were last forgotten, jiffies (32 bits).
    reset_stamp: u32,
    key: u32,
    qlen: u32,
    drop_overlimit: u32,
    hh_overlimit: u32,
    hh_tot_count: u32,
    hh_cur_count: u32,
    /// Lengths of the packets `change` dropped, not yet reported.
    purged: Vec<u32>,
}

impl Hhf {
    /// `hhf_init`: the defaults, then the options as `change` applies them.
    pub fn new(o: &HhfOpts, dev: &DevInfo) -> TcResult<Self> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(dev.seed ^ 0x6868_6600_0000_0000);
        let mtu = dev.mtu.saturating_add(dev.hard_header_len);
        let weight = 2u32;
        let quantum = if (mtu as i32) <= 0 || mtu as u64 * weight as u64 > i32::MAX as u64 {
            256
        } else {
            mtu
        };
        let mut q = Hhf {
            limit: 1000,
            quantum,
            hh_limit: 2 * HH_FLOWS_CNT as u32,
            reset_timeout: HZ / 25,
            admit_bytes: 131_072,
            evict_timeout: HZ,
            non_hh_weight: weight,
            buckets: Default::default(),
            new_buckets: VecDeque::new(),
            old_buckets: VecDeque::new(),
            hh_flows: vec![Vec::new(); HH_FLOWS_CNT],
            counters: [[0; ARRAY_LEN]; ARRAYS],
            valid: [[false; ARRAY_LEN]; ARRAYS],
            reset_stamp: 0,
            key: rng.next_u32(),
            qlen: 0,
            drop_overlimit: 0,
            hh_overlimit: 0,
            hh_tot_count: 0,
            hh_cur_count: 0,
            purged: Vec::new(),
        };
        q.apply(o)?;
        Ok(q)
    }

    /// `hhf_change`: check the DRR quanta, then commit and trim to the limit.
    fn apply(&mut self, o: &HhfOpts) -> TcResult<()> {
        let quantum = o.quantum.unwrap_or(self.quantum);
        let weight = o.non_hh_weight.unwrap_or(self.non_hh_weight);
        let non_hh_quantum = quantum as u64 * weight as u64;
        if non_hh_quantum == 0 || non_hh_quantum > i32::MAX as u64 {
            return Err(TcError::errno(crate::error::Errno::EINVAL));
        }
        if let Some(l) = o.limit {
            self.limit = l;
        }
        self.quantum = quantum;
        self.non_hh_weight = weight;
        if let Some(h) = o.hh_limit {
            self.hh_limit = h;
        }
        if let Some(us) = o.reset_timeout {
            self.reset_timeout = usecs_to_jiffies(us);
        }
        if let Some(a) = o.admit_bytes {
            self.admit_bytes = a;
        }
        if let Some(us) = o.evict_timeout {
            self.evict_timeout = usecs_to_jiffies(us);
        }
        while self.qlen > self.limit {
            match self.next_packet() {
                Some(p) => self.purged.push(p.len),
                None => break,
            }
        }
        Ok(())
    }

    fn expired(&self, f: &HhFlow, now: u32) -> bool {
        time_before(f.hit.wrapping_add(self.evict_timeout as u32), now)
    }

    /// `seek_list`: the chain's entry for `hash`, freeing expired entries on
    /// the way (an expired last entry is kept, and ends the search).
    fn seek(&mut self, chain: usize, hash: u32, now: u32) -> Option<usize> {
        let mut i = 0;
        while i < self.hh_flows[chain].len() {
            let f = self.hh_flows[chain][i];
            if self.expired(&f, now) {
                if i + 1 == self.hh_flows[chain].len() {
                    return None;
                }
                self.hh_flows[chain].remove(i);
                self.hh_cur_count -= 1;
                continue;
            }
            if f.hash == hash {
                return Some(i);
            }
            i += 1;
        }
        None
    }

    /// `alloc_new_hh`: an expired entry of the chain, or a new one if the
    /// table has room.
    fn alloc(&mut self, chain: usize, now: u32) -> Option<usize> {
        if let Some(i) = self.hh_flows[chain]
            .iter()
            .position(|f| self.expired(f, now))
        {
            return Some(i);
        }
        if self.hh_cur_count >= self.hh_limit {
            self.hh_overlimit = self.hh_overlimit.wrapping_add(1);
            return None;
        }
        self.hh_cur_count += 1;
        self.hh_flows[chain].push(HhFlow { hash: 0, hit: now });
        Some(self.hh_flows[chain].len() - 1)
    }

    /// `hhf_classify`: the bucket for `pkt` at `now`.
    fn classify(&mut self, pkt: &Packet, now: Time) -> usize {
        let now = (now.as_nanos() / (1_000_000_000 / HZ)) as u32;
        if time_before(
            self.reset_stamp.wrapping_add(self.reset_timeout as u32),
            now,
        ) {
            self.valid = [[false; ARRAY_LEN]; ARRAYS];
            self.reset_stamp = now;
        }
        let hash = flow_hash(pkt, self.key);
        let chain = (hash & INDEX_MASK) as usize;
        if let Some(i) = self.seek(chain, hash, now) {
            self.hh_flows[chain][i].hit = now;
            return HH;
        }
        let pos = filter_indices(hash);
        let mut min = u32::MAX;
        for (a, &p) in pos.iter().enumerate() {
            if !self.valid[a][p] {
                self.counters[a][p] = 0;
                self.valid[a][p] = true;
            }
            min = min.min(self.counters[a][p].wrapping_add(pkt.len));
        }
        if min > self.admit_bytes {
            // A new heavy hitter; its bytes stay out of the counters.
            let Some(i) = self.alloc(chain, now) else {
                return NON_HH;
            };
            self.hh_flows[chain][i] = HhFlow { hash, hit: now };
            self.hh_tot_count = self.hh_tot_count.wrapping_add(1);
            return HH;
        }
        for (a, &p) in pos.iter().enumerate() {
            self.counters[a][p] = self.counters[a][p].max(min);
        }
        NON_HH
    }

    fn weight(&self, b: usize) -> i32 {
        if b == HH {
            1
        } else {
            self.non_hh_weight as i32
        }
    }

    /// `hhf_drop`: the head of the HH bucket, else of the other one.
    fn drop_head(&mut self) -> Option<Packet> {
        let b = if self.buckets[HH].queue.is_empty() {
            NON_HH
        } else {
            HH
        };
        let p = self.buckets[b].queue.pop_front()?;
        self.qlen -= 1;
        Some(p)
    }

    /// `hhf_dequeue`: weighted DRR over the new, then the old list.
    fn next_packet(&mut self) -> Option<Packet> {
        loop {
            let from_new = !self.new_buckets.is_empty();
            let b = *if from_new {
                self.new_buckets.front()
            } else {
                self.old_buckets.front()
            }?;
            if self.buckets[b].deficit <= 0 {
                self.buckets[b].deficit += self.weight(b) * self.quantum as i32;
                self.pop_list(from_new);
                self.old_buckets.push_back(b);
                continue;
            }
            let Some(p) = self.buckets[b].queue.pop_front() else {
                // Empty: a pass through the old list before it returns.
                self.pop_list(from_new);
                if from_new && !self.old_buckets.is_empty() {
                    self.old_buckets.push_back(b);
                } else {
                    self.buckets[b].listed = false;
                }
                continue;
            };
            self.qlen -= 1;
            self.buckets[b].deficit -= p.len as i32;
            return Some(p);
        }
    }

    fn pop_list(&mut self, from_new: bool) {
        if from_new {
            self.new_buckets.pop_front();
        } else {
            self.old_buckets.pop_front();
        }
    }

    /// Packets queued in the heavy-hitter bucket and in the other one.
    pub fn bucket_lens(&self) -> (usize, usize) {
        (
            self.buckets[HH].queue.len(),
            self.buckets[NON_HH].queue.len(),
        )
    }

    #[inline]
    fn flush_purged(&mut self, cx: &mut Cx) {
        if self.purged.is_empty() {
            return;
        }
        for len in self.purged.drain(..) {
            cx.shed(len, DropReason::QueueFull);
        }
    }
}

impl Qdisc for Hhf {
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.flush_purged(cx);
        let b = self.classify(&pkt, cx.now);
        self.buckets[b].queue.push_back(pkt);
        if !self.buckets[b].listed {
            // Heavy hitters never get the new list's priority.
            self.buckets[b].listed = true;
            if b == HH {
                self.old_buckets.push_back(b);
            } else {
                self.new_buckets.push_back(b);
            }
            self.buckets[b].deficit = self.weight(b) * self.quantum as i32;
        }
        self.qlen += 1;
        if self.qlen > self.limit {
            self.drop_overlimit = self.drop_overlimit.wrapping_add(1);
            if let Some(victim) = self.drop_head() {
                cx.shed(victim.len, DropReason::QueueFull);
            }
        }
        Ok(())
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.flush_purged(cx);
        match self.next_packet() {
            Some(p) => Dequeue::Packet(p),
            None => Dequeue::Empty,
        }
    }

    /// `hhf_reset`: empty the buckets and forget the heavy hitters.
    fn reset(&mut self) {
        for b in &mut self.buckets {
            b.queue.clear();
            b.listed = false;
        }
        self.new_buckets.clear();
        self.old_buckets.clear();
        self.qlen = 0;
        self.purged.clear();
        for chain in &mut self.hh_flows {
            chain.clear();
        }
        self.hh_cur_count = 0;
        self.valid = [[false; ARRAY_LEN]; ARRAYS];
    }

    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Hhf(o) = opts else {
            return Err(wrong_kind("hhf", opts));
        };
        self.apply(o)
    }

    /// `hhf_dump`.
    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Hhf(HhfOpts {
            limit: Some(self.limit),
            quantum: Some(self.quantum),
            hh_limit: Some(self.hh_limit),
            reset_timeout: Some(jiffies_to_usecs(self.reset_timeout)),
            admit_bytes: Some(self.admit_bytes),
            evict_timeout: Some(jiffies_to_usecs(self.evict_timeout)),
            non_hh_weight: Some(self.non_hh_weight),
        })
    }

    /// `hhf_dump_stats`.
    fn xstats(&self) -> XStats {
        XStats::Hhf(HhfXstats {
            drop_overlimit: self.drop_overlimit,
            hh_overlimit: self.hh_overlimit,
            hh_tot_count: self.hh_tot_count,
            hh_cur_count: self.hh_cur_count,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;
    use crate::qdisc::codel_law::testing::pkt;
    use crate::qdisc::QdiscNode;
    use proptest::prelude::*;

    fn node(o: HhfOpts) -> QdiscNode {
        QdiscNode::new(
            Handle::new(1, 0),
            Handle::ROOT,
            Box::new(Hhf::new(&o, &DevInfo::default()).unwrap()),
        )
    }

    fn bare(o: HhfOpts) -> Hhf {
        Hhf::new(&o, &DevInfo::default()).unwrap()
    }

    fn xstats(n: &QdiscNode) -> HhfXstats {
        match n.qdisc.xstats() {
            XStats::Hhf(x) => x,
            other => panic!("{other:?}"),
        }
    }

    fn at(ms: u64) -> Cx {
        Cx::new(Time(ms * 1_000_000))
    }

    /// Enqueue `n` packets of flow `f`, 1000 bytes each, at `ms`.
    fn send(q: &mut Hhf, f: u32, n: u32, ms: u64) {
        let mut cx = at(ms);
        for i in 0..n {
            q.enqueue(pkt(f, i, 1000, 0), &mut cx).unwrap();
        }
    }

    /// [`send`] through a node.
    fn send_n(q: &mut QdiscNode, f: u32, n: u32, ms: u64) {
        let mut cx = at(ms);
        for i in 0..n {
            q.enqueue(pkt(f, i, 1000, 0), &mut cx).unwrap();
        }
    }

    #[test]
    fn dumps_the_kernel_defaults() {
        let n = node(HhfOpts::default());
        assert_eq!(
            n.qdisc.dump(),
            QdiscOpts::Hhf(HhfOpts {
                limit: Some(1000),
                quantum: Some(1514),
                hh_limit: Some(2048),
                reset_timeout: Some(40_000),
                admit_bytes: Some(131_072),
                evict_timeout: Some(1_000_000),
                non_hh_weight: Some(2),
            })
        );
        // Times are held in jiffies, rounded up; a negative int is
        // MAX_JIFFY_OFFSET, which comes back truncated to 32 bits.
        let q = bare(HhfOpts {
            reset_timeout: Some(1),
            evict_timeout: Some(0x8000_0000),
            ..Default::default()
        });
        let QdiscOpts::Hhf(d) = q.dump() else {
            unreachable!()
        };
        assert_eq!(d.reset_timeout, Some(1000));
        assert_eq!(d.evict_timeout, Some(4_294_965_296));
    }

    #[test]
    fn the_kernel_refuses_drr_quanta_it_cannot_hold() {
        let dev = DevInfo::default();
        let e = |o: HhfOpts| Hhf::new(&o, &dev).unwrap_err().errno;
        let big = HhfOpts {
            quantum: Some(1 << 30),
            ..Default::default()
        };
        assert_eq!(
            e(big),
            crate::error::Errno::EINVAL,
            "2^30 * weight 2 > INT_MAX"
        );
        let zero = HhfOpts {
            non_hh_weight: Some(0),
            ..Default::default()
        };
        assert_eq!(e(zero), crate::error::Errno::EINVAL);
        // A refused change changes nothing.
        let mut n = node(HhfOpts::default());
        let before = n.qdisc.dump();
        let bad = HhfOpts {
            limit: Some(5),
            non_hh_weight: Some(1 << 31),
            ..Default::default()
        };
        assert!(n.qdisc.change(&QdiscOpts::Hhf(bad), &dev).is_err());
        assert_eq!(n.qdisc.dump(), before);
    }

    /// A flow that sends more than `admit_bytes` within a reset period is
    /// a heavy hitter: its later packets go to the HH bucket, which gets
    /// one quantum per round against the other bucket's `non_hh_weight`,
    /// so under contention it gets 1/(weight + 1) of the bytes.
    #[test]
    fn a_heavy_hitter_gets_one_share_in_weight_plus_one() {
        for weight in [1u32, 2, 4] {
            let mut n = node(HhfOpts {
                non_hh_weight: Some(weight),
                ..Default::default()
            });
            // Flow 1 sends 200 kB at once: heavy after 128 KiB.
            send_n(&mut n, 1, 200, 0);
            assert_eq!(xstats(&n).hh_tot_count, 1);
            while let Dequeue::Packet(_) = n.dequeue(&mut at(0)) {}
            // A new counter period: flow 1 is remembered as heavy, flow 2
            // sends 120 kB, under the threshold.
            send_n(&mut n, 1, 300, 50);
            send_n(&mut n, 2, 120, 50);
            // Dequeue while both are backlogged.
            let rounds = 20 * (weight + 1);
            let mut heavy = 0;
            for _ in 0..rounds {
                if let Dequeue::Packet(p) = n.dequeue(&mut at(50)) {
                    heavy += (p.id / 1_000_000 == 1) as u32;
                }
            }
            let share = heavy as f64 / rounds as f64;
            let want = 1.0 / (weight + 1) as f64;
            assert!(
                (share - want).abs() < 0.05,
                "weight {weight}: heavy share {share}, want {want}"
            );
            let x = xstats(&n);
            assert_eq!((x.hh_tot_count, x.hh_cur_count, x.hh_overlimit), (1, 1, 0));
        }
    }

    #[test]
    fn light_flows_share_one_fifo() {
        let mut q = bare(HhfOpts::default());
        let mut cx = at(0);
        for i in 0..40 {
            q.enqueue(pkt(i % 4, i, 1000, 0), &mut cx).unwrap();
        }
        assert_eq!(q.bucket_lens(), (0, 40));
        let order: Vec<u64> = std::iter::from_fn(|| match q.dequeue(&mut cx) {
            Dequeue::Packet(p) => Some(p.id % 1_000_000),
            _ => None,
        })
        .collect();
        assert_eq!(order, (0..40).collect::<Vec<_>>());
    }

    /// The counters are forgotten every `reset_timeout`: 100 kB per 40 ms
    /// (20 Mbit/s) never makes a heavy hitter, 150 kB does at once.
    #[test]
    fn the_filter_counts_per_reset_period() {
        let mut q = bare(HhfOpts::default());
        for period in 0..10u64 {
            send(&mut q, 1, 100, 41 * period + 1);
            while let Dequeue::Packet(_) = q.dequeue(&mut at(41 * period + 1)) {}
        }
        assert_eq!(q.hh_tot_count, 0);
        send(&mut q, 1, 150, 1000);
        assert_eq!(q.hh_tot_count, 1);
        assert_eq!(q.bucket_lens().0, 150 - 131, "heavy from byte 131073 on");
    }

    /// A heavy hitter idle for `evict_timeout` is forgotten: it is light
    /// again, and its table entry is reused by the next heavy hitter of its
    /// chain (the last entry of a chain is kept for that). At `hh_limit`
    /// entries a heavy hitter cannot be admitted (`hh_overlimit`).
    #[test]
    fn heavy_hitters_expire_and_are_capped() {
        let mut q = bare(HhfOpts {
            hh_limit: Some(1),
            ..Default::default()
        });
        send(&mut q, 1, 200, 0);
        send(&mut q, 2, 200, 0);
        // Flow 2 is heavy from its 132nd packet on, but the table is full.
        assert_eq!((q.hh_tot_count, q.hh_cur_count, q.hh_overlimit), (1, 1, 69));
        while let Dequeue::Packet(_) = q.dequeue(&mut at(0)) {}
        // Still heavy 900 ms later: straight to the HH bucket.
        send(&mut q, 1, 1, 900);
        assert_eq!(q.bucket_lens(), (1, 0));
        // Idle for more than a second: a light flow again.
        send(&mut q, 1, 1, 2000);
        assert_eq!(q.bucket_lens(), (1, 1));
        // The expired entry sits in flow 1's chain: flow 2 still finds no
        // room, flow 1 gets it back when it is heavy again.
        send(&mut q, 2, 200, 2100);
        assert_eq!((q.hh_tot_count, q.hh_overlimit), (1, 138));
        send(&mut q, 1, 200, 2200);
        assert_eq!((q.hh_tot_count, q.hh_cur_count), (2, 1));
    }

    /// Over the limit, the head of the HH bucket goes first.
    #[test]
    fn the_limit_drops_heavy_hitters_first() {
        let mut n = node(HhfOpts {
            limit: Some(150),
            ..Default::default()
        });
        send_n(&mut n, 1, 140, 0);
        let mut cx = at(0);
        for i in 0..10 {
            n.enqueue(pkt(2, i, 1000, 0), &mut cx).unwrap();
        }
        // 150 queued: flow 1 is heavy from its 132nd packet (9 in HH).
        assert_eq!(n.stats().qlen, 150);
        for i in 10..20 {
            n.enqueue(pkt(2, i, 1000, 0), &mut cx).unwrap();
        }
        let x = xstats(&n);
        assert_eq!(
            (x.drop_overlimit, n.stats().drops, n.stats().qlen),
            (10, 10, 150)
        );
        // The nine heavy packets went, then the oldest light one (flow 1's
        // first packet, at the head of the other bucket).
        let ids: Vec<u64> = std::iter::from_fn(|| match n.dequeue(&mut cx) {
            Dequeue::Packet(p) => Some(p.id),
            _ => None,
        })
        .collect();
        assert!(!ids.contains(&1_000_000));
        assert!(!ids
            .iter()
            .any(|&id| id / 1_000_000 == 1 && id % 1_000_000 >= 131));
        assert_eq!(ids.len(), 150);
    }

    #[test]
    fn change_trims_to_a_smaller_limit() {
        let mut n = node(HhfOpts::default());
        let mut cx = at(0);
        for i in 0..20 {
            n.enqueue(pkt(i % 2, i, 500, 0), &mut cx).unwrap();
        }
        let o = HhfOpts {
            limit: Some(5),
            ..Default::default()
        };
        n.qdisc
            .change(&QdiscOpts::Hhf(o), &DevInfo::default())
            .unwrap();
        let ids: Vec<u64> = std::iter::from_fn(|| match n.dequeue(&mut cx) {
            Dequeue::Packet(p) => Some(p.id % 1_000_000),
            _ => None,
        })
        .collect();
        // The first 15 in dequeue order went; the last 5 stay.
        assert_eq!(ids, vec![15, 16, 17, 18, 19]);
        let s = n.stats();
        assert_eq!((s.drops, s.packets, s.qlen, s.backlog), (15, 5, 0, 0));
    }

    proptest! {
        /// offered = sent + dropped + queued at every step, the queue never
        /// exceeds the limit, and the buckets hold what the node counts.
        #[test]
        fn packets_are_conserved(
            ops in proptest::collection::vec((0..3u8, 0..4u32, 40..1600u32, 0..30u64), 1..400),
            limit in 1..60u32,
        ) {
            let mut n = node(HhfOpts {
                limit: Some(limit),
                admit_bytes: Some(5000),
                reset_timeout: Some(10_000),
                evict_timeout: Some(50_000),
                quantum: Some(300),
                ..Default::default()
            });
            let (mut t, mut offered) = (0u64, 0u64);
            for (i, &(op, flow, len, dt)) in ops.iter().enumerate() {
                t += dt;
                let mut cx = at(t);
                if op < 2 {
                    offered += 1;
                    let _ = n.enqueue(pkt(flow, i as u32, len, 0), &mut cx);
                } else {
                    n.dequeue(&mut cx);
                }
                let s = n.stats();
                prop_assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
                prop_assert!(s.qlen <= limit);
            }
        }
    }
}
