//! fq_codel: Fair Queueing with CoDel — hashed flows, each a CoDel queue,
//! served by deficit round robin with priority for new flows (RFC 8290).
//!
//! Modelled on net/sched/sch_fq_codel.c (Linux 6.18). Its principles, as its
//! header states them: packets are classified into flows (by the flow hash,
//! or by a filter attached to the qdisc, or by a `skb->priority` naming one
//! of our classes); several flows may share a bucket (a stochastic model);
//! each flow is a fifo managed by its own CoDel state (head drops only, no
//! reordering within a flow), the control law being shared with codel
//! ([`super::codel_law`]); flows are linked on two round-robin lists, so
//! that new flows have priority over old ones; ECN is on by default.
//!
//! Scheduling: a flow that becomes active joins the tail of `new_flows`
//! with a deficit of one `quantum` (MTU + link header by default). Dequeue
//! serves the head of `new_flows`, or else of `old_flows`: a flow whose
//! deficit is used up gets another quantum and moves to the tail of
//! `old_flows`; otherwise CoDel takes (and maybe drops) its head packets and
//! the packet sent is charged to the deficit. A flow found empty leaves the
//! lists, except that an empty *new* flow goes to the tail of `old_flows`
//! when that list is not empty, so that a flow cannot stay "new" (and ahead
//! of everyone) by sending one packet at a time. The effect is the
//! sparse-flow optimisation: a flow that never builds a queue (a ping, a DNS
//! query, a VoIP stream) is always new when its packet arrives and waits
//! only for the packet in flight, while bulk flows share the rest fairly
//! by bytes. As flows only ever join a list at its tail and leave it from
//! its head, each list is a chain of flow indices linked through the flows
//! themselves (head, tail, one `next` per flow), as the kernel's
//! `list_head`s are.
//!
//! Limits: when the qdisc holds more than `limit` packets (10240) or its
//! packets' memory (`skb->truesize`) exceeds `memory_limit` (32 MB), the
//! fattest flow (most bytes queued) loses packets from its head until half
//! of its bytes are gone, at most `drop_batch` (64) at a time, and its CoDel
//! drop count rises by as many (`fq_codel_drop`). These drops count in
//! `drop_overlimit` (and `drop_overmemory` when memory was the reason).
//!
//! `change` can alter everything but the number of flows (EINVAL), and
//! trims the queue to a lower limit by dequeueing. `tc class show` lists one
//! class per flow on a list (`major:bucket+1`) with its queue length,
//! backlog and CoDel state; filters attach to the qdisc only.
//!
//! Invariants: every flow on a list is on exactly one; `qlen`, `backlog` and
//! `memory_usage` are the sums over the flows' packets; after an enqueue
//! returns, `qlen <= limit` (memory may stay above its limit when half of
//! the fattest flow was not enough, as in the kernel).
//!
//! Deviations: `skb->truesize` is modelled from the packet length as
//! `__alloc_skb` sizes a linear buffer ([`truesize`]: 2304 bytes for a
//! 1514-byte frame); the flow hash is [`flow_hash`]'s lookup3 with a key
//! drawn from `DevInfo::seed`, not the kernel's boot-time SipHash key. When
//! the fattest flow is the arriving packet's own, the kernel returns
//! `NET_XMIT_CN` and its parents count one of the head drops as the refused
//! packet; here the enqueue succeeds and all head drops are reported as shed
//! (same counters everywhere). Packets `change` trims are counted as
//! drops here; the kernel trims through its own dequeue and counts them as
//! sent by fq_codel itself (and dropped by its parents); they are reported
//! at the next enqueue or dequeue (there is no [`Cx`] in `change`), or
//! through [`Classful::take_purged`]. `drop_next` is relative to the last
//! enqueue or dequeue, not to the time of the dump.

use super::codel_law::{
    self, codel_dequeue, codel_time, codel_time_to_us, us_to_codel, CodelParams, CodelQueue,
    CodelStats, CodelVars, CODEL_DISABLED_THRESHOLD,
};
use super::flow_hash;
use super::{
    wrong_kind, ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts,
    XStats,
};
use crate::cls::{Block, Verdict};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::{DropReason, Stats};
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// The largest quantum (`FQ_CODEL_QUANTUM_MAX`).
pub const FQ_CODEL_QUANTUM_MAX: u32 = 1 << 20;
/// Packets queued at most by default.
pub const FQ_CODEL_DEFAULT_LIMIT: u32 = 10 * 1024;
/// Flows by default.
pub const FQ_CODEL_DEFAULT_FLOWS: u32 = 1024;
/// Most flows.
pub const FQ_CODEL_MAX_FLOWS: u32 = 65536;
/// Bytes of packet memory by default (x86-64).
pub const FQ_CODEL_DEFAULT_MEMORY_LIMIT: u32 = 32 << 20;
/// Packets dropped at most per overflow by default.
pub const FQ_CODEL_DEFAULT_DROP_BATCH: u32 = 64;

/// The `TCA_FQ_CODEL_*` attributes: what tc sends and the kernel dumps.
/// Absent attributes leave the current value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqCodelOpts {
    /// Packets (`TCA_FQ_CODEL_LIMIT`).
    pub limit: Option<u32>,
    /// Flow buckets, 1..=65536, only at creation (`TCA_FQ_CODEL_FLOWS`).
    pub flows: Option<u32>,
    /// Bytes per round (`TCA_FQ_CODEL_QUANTUM`; at least 256).
    pub quantum: Option<u32>,
    /// Target sojourn time, µs (`TCA_FQ_CODEL_TARGET`).
    pub target: Option<u32>,
    /// Interval, µs (`TCA_FQ_CODEL_INTERVAL`).
    pub interval: Option<u32>,
    /// Mark instead of dropping (`TCA_FQ_CODEL_ECN`).
    pub ecn: Option<bool>,
    /// CE-marking threshold, µs (`TCA_FQ_CODEL_CE_THRESHOLD`; dumped only when set).
    pub ce_threshold: Option<u32>,
    /// DS-field value `ce_threshold` applies to (`TCA_FQ_CODEL_CE_THRESHOLD_SELECTOR`).
    pub ce_threshold_selector: Option<u8>,
    /// Mask for the selector (`TCA_FQ_CODEL_CE_THRESHOLD_MASK`).
    pub ce_threshold_mask: Option<u8>,
    /// Packets dropped at most per overflow (`TCA_FQ_CODEL_DROP_BATCH_SIZE`).
    pub drop_batch_size: Option<u32>,
    /// Bytes of packet memory (`TCA_FQ_CODEL_MEMORY_LIMIT`, at most 2^31).
    pub memory_limit: Option<u32>,
}

/// `struct tc_fq_codel_qd_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqCodelXstats {
    /// Largest packet seen at dequeue, bytes.
    pub maxpacket: u32,
    /// Packets dropped because the qdisc was over its limit or memory.
    pub drop_overlimit: u32,
    /// Packets ECN-marked instead of dropped.
    pub ecn_mark: u32,
    /// Times a flow became active (joined `new_flows`).
    pub new_flow_count: u32,
    /// Flows on `new_flows`.
    pub new_flows_len: u32,
    /// Flows on `old_flows`.
    pub old_flows_len: u32,
    /// Packets CE-marked above `ce_threshold`.
    pub ce_mark: u32,
    /// Bytes of packet memory in use.
    pub memory_usage: u32,
    /// Of `drop_overlimit`, the drops because memory was over its limit.
    pub drop_overmemory: u32,
}

/// `struct tc_fq_codel_cl_stats`: one flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FqCodelClassXstats {
    /// Bytes the flow may still send this round.
    pub deficit: i32,
    /// Sojourn time of the flow's last dequeued packet, µs.
    pub ldelay: u32,
    /// CoDel drop count.
    pub count: u32,
    /// CoDel drop count at the start of the last dropping state.
    pub lastcount: u32,
    /// In the dropping state.
    pub dropping: bool,
    /// Time to the next drop, µs (0 when not dropping).
    pub drop_next: i32,
}

/// `skb->truesize` of a packet of `len` bytes, as `__alloc_skb` sizes a
/// linear buffer: the data plus `NET_SKB_PAD + NET_IP_ALIGN` of headroom,
/// cache-aligned, plus `skb_shared_info` (320 bytes), rounded up to the
/// kmalloc size class, plus the aligned `struct sk_buff` (256 bytes).
/// Every packet costs this twice (enqueue and dequeue), so the size classes
/// of ordinary frames are answered by comparison alone.
#[inline]
pub fn truesize(len: u32) -> u32 {
    match len {
        0..=126 => 512 + 256,
        127..=638 => 1024 + 256,
        639..=1662 => 2048 + 256,
        _ => truesize_by_formula(len),
    }
}

fn truesize_by_formula(len: u32) -> u32 {
    let data = (len.saturating_add(66).saturating_add(63) & !63).saturating_add(320);
    data.max(512)
        .checked_next_power_of_two()
        .unwrap_or(u32::MAX)
        .saturating_add(256)
}

/// Validated parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FqCodelParams {
    limit: u32,
    flows_cnt: u32,
    quantum: u32,
    drop_batch_size: u32,
    memory_limit: u32,
    cparams: CodelParams,
}

impl FqCodelParams {
    /// `fq_codel_init`'s defaults.
    fn defaults(dev: &DevInfo) -> Self {
        let mtu = dev
            .mtu
            .saturating_add(dev.hard_header_len)
            .clamp(256, FQ_CODEL_QUANTUM_MAX);
        let mut cparams = CodelParams::new(mtu);
        cparams.ecn = true;
        FqCodelParams {
            limit: FQ_CODEL_DEFAULT_LIMIT,
            flows_cnt: FQ_CODEL_DEFAULT_FLOWS,
            quantum: mtu,
            drop_batch_size: FQ_CODEL_DEFAULT_DROP_BATCH,
            memory_limit: FQ_CODEL_DEFAULT_MEMORY_LIMIT,
            cparams,
        }
    }

    /// `fq_codel_change`: validate `o`, then apply it on a copy. `created`:
    /// the flow table exists, so the number of flows is fixed.
    fn with(&self, o: &FqCodelOpts, created: bool) -> TcResult<Self> {
        let mut p = *self;
        if let Some(flows) = o.flows {
            if created || flows == 0 || flows > FQ_CODEL_MAX_FLOWS {
                return Err(TcError::errno(Errno::EINVAL));
            }
            p.flows_cnt = flows;
        }
        let quantum = o.quantum.map(|q| q.max(256));
        if quantum.is_some_and(|q| q > FQ_CODEL_QUANTUM_MAX) {
            return Err(TcError::inval("Invalid quantum"));
        }
        let c = &mut p.cparams;
        if let Some(t) = o.target {
            c.target = us_to_codel(t);
        }
        if let Some(t) = o.ce_threshold {
            c.ce_threshold = us_to_codel(t);
        }
        if let Some(s) = o.ce_threshold_selector {
            c.ce_threshold_selector = s;
        }
        if let Some(m) = o.ce_threshold_mask {
            c.ce_threshold_mask = m;
        }
        if let Some(i) = o.interval {
            c.interval = us_to_codel(i);
        }
        if let Some(e) = o.ecn {
            c.ecn = e;
        }
        if let Some(l) = o.limit {
            p.limit = l;
        }
        if let Some(q) = quantum {
            p.quantum = q;
        }
        if let Some(b) = o.drop_batch_size {
            p.drop_batch_size = b.max(1);
        }
        if let Some(m) = o.memory_limit {
            p.memory_limit = m.min(1 << 31);
        }
        Ok(p)
    }
}

/// One flow (`struct fq_codel_flow`) and its byte count (`backlogs[i]`).
#[derive(Debug, Default)]
struct Flow {
    queue: VecDeque<Packet>,
    /// Bytes queued.
    backlog: u32,
    /// Bytes the flow may still send this round.
    deficit: i32,
    cvars: CodelVars,
    /// On `new_flows` or `old_flows` (the kernel's non-empty `flowchain`).
    listed: bool,
    /// The flow after this one on its list, or [`NIL`] (meaningful while
    /// `listed`).
    next: u32,
}

/// The end of a flow list.
const NIL: u32 = u32::MAX;

/// `new_flows` or `old_flows`: flows linked by index through
/// [`Flow::next`]. Flows join at the tail and leave only from the head, so
/// one link per flow is enough.
#[derive(Clone, Copy, Debug)]
struct FlowList {
    head: u32,
    tail: u32,
}

impl FlowList {
    const EMPTY: FlowList = FlowList {
        head: NIL,
        tail: NIL,
    };

    fn is_empty(&self) -> bool {
        self.head == NIL
    }

    /// `list_add_tail`.
    #[inline]
    fn push_back(&mut self, flows: &mut [Flow], i: u32) {
        flows[i as usize].next = NIL;
        match self.tail {
            NIL => self.head = i,
            t => flows[t as usize].next = i,
        }
        self.tail = i;
    }

    /// Take the head flow off the list (which must not be empty).
    #[inline]
    fn pop_front(&mut self, flows: &[Flow]) -> u32 {
        let i = self.head;
        self.head = flows[i as usize].next;
        if self.head == NIL {
            self.tail = NIL;
        }
        i
    }

    /// Flows on the list (walked, as `fq_codel_dump_stats` does).
    fn len(&self, flows: &[Flow]) -> u32 {
        let (mut n, mut i) = (0, self.head);
        while i != NIL {
            n += 1;
            i = flows[i as usize].next;
        }
        n
    }
}

/// Which list a flow was taken from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum List {
    New,
    Old,
}

/// An fq_codel qdisc.
#[derive(Debug)]
pub struct FqCodel {
    p: FqCodelParams,
    handle: Option<Handle>,
    block: Block,
    /// The key of the flow hash (`skb_get_hash`'s boot-time secret).
    hashrnd: u32,
    flows: Vec<Flow>,
    new_flows: FlowList,
    old_flows: FlowList,
    cstats: CodelStats,
    /// Packets queued (`sch->q.qlen`).
    qlen: u32,
    /// Bytes queued (`sch->qstats.backlog`).
    backlog: u32,
    memory_usage: u32,
    drop_overmemory: u32,
    drop_overlimit: u32,
    new_flow_count: u32,
    /// The time of the last enqueue or dequeue (for `drop_next`).
    now: Time,
    /// Packets `change` dropped, not yet reported as shed.
    purged: Vec<(DropReason, u32)>,
}

/// One flow as CoDel sees it (`dequeue_func`, `drop_func`).
struct FlowQueue<'a> {
    queue: &'a mut VecDeque<Packet>,
    flow_backlog: &'a mut u32,
    qlen: &'a mut u32,
    backlog: &'a mut u32,
    memory_usage: &'a mut u32,
    cx: &'a mut Cx,
}

impl CodelQueue for FlowQueue<'_> {
    fn dequeue(&mut self) -> Option<Packet> {
        let p = self.queue.pop_front()?;
        *self.flow_backlog = self.flow_backlog.wrapping_sub(p.len);
        *self.memory_usage = self.memory_usage.wrapping_sub(truesize(p.len));
        *self.qlen -= 1;
        *self.backlog = self.backlog.wrapping_sub(p.len);
        Some(p)
    }

    fn backlog(&self) -> u32 {
        *self.backlog
    }

    fn drop(&mut self, pkt: Packet) {
        self.cx.shed(pkt.len, DropReason::Aqm);
    }
}

impl FqCodel {
    /// `fq_codel_init`: defaults, then the options, then the flow table.
    pub fn new(opts: &FqCodelOpts, dev: &DevInfo) -> TcResult<Self> {
        let p = FqCodelParams::defaults(dev).with(opts, false)?;
        let s = dev.seed ^ 0xf9c0_de10_f9c0_de10;
        Ok(FqCodel {
            p,
            handle: None,
            block: Block::default(),
            hashrnd: (s ^ (s >> 32)) as u32,
            flows: (0..p.flows_cnt).map(|_| Flow::default()).collect(),
            new_flows: FlowList::EMPTY,
            old_flows: FlowList::EMPTY,
            cstats: CodelStats::default(),
            qlen: 0,
            backlog: 0,
            memory_usage: 0,
            drop_overmemory: 0,
            drop_overlimit: 0,
            new_flow_count: 0,
            now: Time::ZERO,
            purged: Vec::new(),
        })
    }

    /// The flow (0-based) the hash puts `pkt` in (`fq_codel_hash`): the
    /// packet's `skb->hash` if set, else its flow hash, scaled to the flows.
    pub fn flow_of(&self, pkt: &Packet) -> u32 {
        let hash = match pkt.hash {
            0 => flow_hash::flow_hash(pkt, self.hashrnd),
            h => h,
        };
        ((hash as u64 * self.p.flows_cnt as u64) >> 32) as u32
    }

    /// `fq_codel_classify`: the flow (0-based), or why the packet is refused.
    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Result<usize, DropReason> {
        let cnt = self.p.flows_cnt;
        if let Some(h) = self.handle {
            let minor = pkt.priority & 0xffff;
            if pkt.priority & 0xffff_0000 == h.0 && minor > 0 && minor <= cnt {
                return Ok(minor as usize - 1);
            }
        }
        if self.block.is_empty() {
            if pkt.hash == 0 {
                // skb_get_hash computes the hash once and keeps it.
                pkt.hash = flow_hash::flow_hash(pkt, self.hashrnd);
            }
            return Ok(self.flow_of(pkt) as usize);
        }
        let Some(r) = self.block.classify(pkt, now) else {
            return Err(DropReason::Unclassified);
        };
        match r.verdict {
            Verdict::Shot => Err(DropReason::Action),
            Verdict::Stolen | Verdict::Queued | Verdict::Trap => Err(DropReason::Stolen),
            Verdict::Continue => Err(DropReason::Unclassified),
            _ => match r.classid.minor() as u32 {
                m if m > 0 && m <= cnt => Ok(m as usize - 1),
                _ => Err(DropReason::Unclassified),
            },
        }
    }

    /// `fq_codel_drop`: drop up to `max_packets` from the head of the flow
    /// with the most bytes queued, until half of its bytes are gone.
    /// Returns the flow and the dropped packets, oldest first.
    fn drop_fattest(&mut self, max_packets: u32) -> (usize, Vec<Packet>) {
        let (mut maxbacklog, mut idx) = (0, 0);
        for (i, f) in self.flows.iter().enumerate() {
            if f.backlog > maxbacklog {
                maxbacklog = f.backlog;
                idx = i;
            }
        }
        // Our goal is to drop half of this fat flow's backlog.
        let threshold = maxbacklog >> 1;
        let flow = &mut self.flows[idx];
        let (mut len, mut mem, mut i) = (0u32, 0u32, 0u32);
        let mut victims = Vec::new();
        while let Some(p) = flow.queue.pop_front() {
            len = len.wrapping_add(p.len);
            mem = mem.wrapping_add(truesize(p.len));
            victims.push(p);
            i += 1;
            if i >= max_packets || len >= threshold {
                break;
            }
        }
        // Tell CoDel to increase its signal strength too.
        flow.cvars.count = flow.cvars.count.wrapping_add(i);
        flow.backlog = flow.backlog.wrapping_sub(len);
        self.memory_usage = self.memory_usage.wrapping_sub(mem);
        self.backlog = self.backlog.wrapping_sub(len);
        self.qlen -= i;
        (idx, victims)
    }

    /// Take the head flow off `list`, then put it at the tail of
    /// `old_flows` (`list_move_tail`) or, `to_old` false, on no list
    /// (`list_del_init`).
    #[inline]
    fn retire_head(&mut self, list: List, to_old: bool) {
        let from = match list {
            List::New => &mut self.new_flows,
            List::Old => &mut self.old_flows,
        };
        let i = from.pop_front(&self.flows);
        if to_old {
            self.old_flows.push_back(&mut self.flows, i);
        } else {
            self.flows[i as usize].listed = false;
        }
    }

    /// `__fq_codel_dequeue` (inlined into `dequeue`, so that the packet is
    /// moved once less).
    #[inline(always)]
    fn dequeue_one(&mut self, cx: &mut Cx) -> Option<Packet> {
        let now = codel_time(cx.now);
        loop {
            let (list, idx) = match (self.new_flows.head, self.old_flows.head) {
                (NIL, NIL) => return None,
                (NIL, i) => (List::Old, i as usize),
                (i, _) => (List::New, i as usize),
            };
            let flow = &mut self.flows[idx];
            if flow.deficit <= 0 {
                flow.deficit = flow.deficit.wrapping_add(self.p.quantum as i32);
                self.retire_head(list, true);
                continue;
            }
            let mut fq = FlowQueue {
                queue: &mut flow.queue,
                flow_backlog: &mut flow.backlog,
                qlen: &mut self.qlen,
                backlog: &mut self.backlog,
                memory_usage: &mut self.memory_usage,
                cx: &mut *cx,
            };
            let pkt = codel_dequeue(
                &mut fq,
                &self.p.cparams,
                &mut flow.cvars,
                &mut self.cstats,
                now,
            );
            if let Some(p) = &pkt {
                flow.deficit = flow.deficit.wrapping_sub(p.len as i32);
                return pkt;
            }
            // Force a pass through old_flows to prevent starvation.
            let to_old = list == List::New && !self.old_flows.is_empty();
            self.retire_head(list, to_old);
        }
    }

    /// Report the packets `change` dropped.
    #[inline]
    fn flush_purged(&mut self, cx: &mut Cx) {
        if self.purged.is_empty() {
            return;
        }
        for (reason, len) in self.purged.drain(..) {
            cx.shed(len, reason);
        }
    }
}

impl Qdisc for FqCodel {
    /// `fq_codel_enqueue`.
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.flush_purged(cx);
        self.now = cx.now;
        let idx = match self.classify(&mut pkt, cx.now) {
            Ok(i) => i,
            Err(reason) => return Err((pkt, reason)),
        };
        codel_law::set_enqueue_time(&mut pkt, cx.now);
        let len = pkt.len;
        let flow = &mut self.flows[idx];
        flow.queue.push_back(pkt);
        flow.backlog = flow.backlog.wrapping_add(len);
        self.backlog = self.backlog.wrapping_add(len);
        if !flow.listed {
            flow.listed = true;
            flow.deficit = self.p.quantum as i32;
            self.new_flows.push_back(&mut self.flows, idx as u32);
            self.new_flow_count = self.new_flow_count.wrapping_add(1);
        }
        self.memory_usage = self.memory_usage.wrapping_add(truesize(len));
        let memory_limited = self.memory_usage > self.p.memory_limit;
        self.qlen += 1;
        if self.qlen <= self.p.limit && !memory_limited {
            return Ok(());
        }
        // Drop half of the fattest flow's bytes (at most drop_batch packets)
        // rather than one packet: the search for it is linear.
        let prev_qlen = self.qlen;
        let (fat, mut victims) = self.drop_fattest(self.p.drop_batch_size);
        let dropped = prev_qlen - self.qlen;
        self.drop_overlimit = self.drop_overlimit.wrapping_add(dropped);
        if memory_limited {
            self.drop_overmemory = self.drop_overmemory.wrapping_add(dropped);
        }
        // The arriving packet is the tail of its flow: it was dropped too
        // iff its flow was the fattest and is now empty.
        let own = (fat == idx && self.flows[idx].queue.is_empty()).then(|| victims.pop());
        for v in victims {
            cx.shed(v.len, DropReason::QueueFull);
        }
        match own.flatten() {
            Some(p) => Err((p, DropReason::QueueFull)),
            None => Ok(()),
        }
    }

    /// `fq_codel_dequeue`.
    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.flush_purged(cx);
        self.now = cx.now;
        let pkt = self.dequeue_one(cx);
        // `fq_codel_dequeue_drop`: the drops were reported as they happened.
        self.cstats.drop_count = 0;
        self.cstats.drop_len = 0;
        pkt.map_or(Dequeue::Empty, Dequeue::Packet)
    }

    /// `fq_codel_reset`.
    fn reset(&mut self) {
        self.new_flows = FlowList::EMPTY;
        self.old_flows = FlowList::EMPTY;
        for f in &mut self.flows {
            f.queue.clear();
            f.backlog = 0;
            f.listed = false;
            f.cvars = CodelVars::default();
        }
        self.qlen = 0;
        self.backlog = 0;
        self.memory_usage = 0;
        self.purged.clear();
    }

    /// `fq_codel_change`: validate, apply, then dequeue down to the limits.
    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::FqCodel(o) = opts else {
            return Err(wrong_kind("fq_codel", opts));
        };
        self.p = self.p.with(o, true)?;
        let mut cx = Cx::new(self.now);
        while self.qlen > self.p.limit || self.memory_usage > self.p.memory_limit {
            let Some(p) = self.dequeue_one(&mut cx) else {
                break;
            };
            self.purged.push((DropReason::QueueFull, p.len));
        }
        self.cstats.drop_count = 0;
        self.cstats.drop_len = 0;
        self.purged.extend(cx.drops);
        Ok(())
    }

    /// `fq_codel_dump`.
    fn dump(&self) -> QdiscOpts {
        let p = &self.p;
        let c = &p.cparams;
        let ce = c.ce_threshold != CODEL_DISABLED_THRESHOLD;
        QdiscOpts::FqCodel(FqCodelOpts {
            limit: Some(p.limit),
            flows: Some(p.flows_cnt),
            quantum: Some(p.quantum),
            target: Some(codel_time_to_us(c.target)),
            interval: Some(codel_time_to_us(c.interval)),
            ecn: Some(c.ecn),
            ce_threshold: ce.then(|| codel_time_to_us(c.ce_threshold)),
            ce_threshold_selector: ce.then_some(c.ce_threshold_selector),
            ce_threshold_mask: ce.then_some(c.ce_threshold_mask),
            drop_batch_size: Some(p.drop_batch_size),
            memory_limit: Some(p.memory_limit),
        })
    }

    /// `fq_codel_dump_stats`.
    fn xstats(&self) -> XStats {
        XStats::FqCodel(FqCodelXstats {
            maxpacket: self.cstats.maxpacket,
            drop_overlimit: self.drop_overlimit,
            ecn_mark: self.cstats.ecn_mark,
            new_flow_count: self.new_flow_count,
            new_flows_len: self.new_flows.len(&self.flows),
            old_flows_len: self.old_flows.len(&self.flows),
            ce_mark: self.cstats.ce_mark,
            memory_usage: self.memory_usage,
            drop_overmemory: self.drop_overmemory,
        })
    }

    /// `fq_codel_tcf_block`: filters attach to the qdisc only.
    fn block_mut(&mut self, classid: Handle) -> Option<&mut Block> {
        (classid.minor() == 0).then_some(&mut self.block)
    }

    fn block(&self, classid: Handle) -> Option<&Block> {
        (classid.minor() == 0).then_some(&self.block)
    }

    /// `sch->handle`: names the classes and lets `priority` pick a flow.
    fn set_handle(&mut self, handle: Handle) {
        let h = handle.qdisc();
        self.handle = Some(h);
        self.block.set_qdisc(h);
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for FqCodel {
    /// fq_codel has no class `change`.
    fn change_class(
        &mut self,
        _: Handle,
        _: Handle,
        _: Option<&ClassOpts>,
        _: &DevInfo,
    ) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// `fq_codel_find` never finds a class, so there is nothing to delete.
    fn delete_class(&mut self, _: Handle) -> TcResult<()> {
        Err(TcError::msg(Errno::ENOENT, "Specified class not found"))
    }

    /// `fq_codel_walk` + `fq_codel_dump_class_stats`: one class per flow on
    /// a list, in flow order, with queue statistics (no byte or packet
    /// counts: the kernel sends none) and the flow's CoDel state.
    fn list(&self) -> Vec<ClassInfo> {
        let major = self.handle.map_or(0, Handle::major);
        let now = codel_time(self.now);
        self.flows
            .iter()
            .enumerate()
            .filter(|(_, f)| f.listed)
            .map(|(i, f)| {
                let v = &f.cvars;
                ClassInfo {
                    classid: Handle::new(major, (i + 1) as u16),
                    parent: Handle::new(major, 0),
                    leaf: None,
                    opts: ClassOpts::Plain,
                    stats: Stats {
                        qlen: f.queue.len() as u32,
                        backlog: f.backlog as u64,
                        ..Default::default()
                    },
                    xstats: XStats::FqCodelClass(FqCodelClassXstats {
                        deficit: f.deficit,
                        ldelay: codel_time_to_us(v.ldelay),
                        count: v.count,
                        lastcount: v.lastcount,
                        dropping: v.dropping,
                        drop_next: if v.dropping {
                            codel_law::delta_us(v.drop_next, now)
                        } else {
                            0
                        },
                    }),
                }
            })
            .collect()
    }

    /// `fq_codel_find` returns no class for any id.
    fn contains(&self, _: Handle) -> bool {
        false
    }

    fn graft(
        &mut self,
        _: Handle,
        _: Option<QdiscNode>,
        _: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        Err(TcError::msg(Errno::ENOENT, "Specified class not found"))
    }

    /// The packets `change` trimmed and not yet reported.
    fn take_purged(&mut self) -> (u64, u64) {
        let pkts = self.purged.len() as u64;
        let bytes = self.purged.drain(..).map(|(_, l)| l as u64).sum();
        (pkts, bytes)
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        Vec::new()
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::gact::GactOpts;
    use crate::act::{ActionOpts, ActionSpec, ActionTable};
    use crate::cls::fw::FwOpts;
    use crate::cls::{ClsEnv, ClsShared, FilterCmd, FilterMsg, FilterOpts};
    use crate::packet::Skb;
    use crate::packet::ETH_P_ALL;
    use crate::qdisc::codel_law::testing::{drain, median, pkt, run_link, run_reno, Arrival, Reno};
    use crate::time::Duration;
    use proptest::prelude::*;

    const H: Handle = Handle::new(1, 0);

    fn fq(o: FqCodelOpts) -> FqCodel {
        let mut q = FqCodel::new(&o, &DevInfo::default()).unwrap();
        q.set_handle(H);
        q
    }

    fn node(q: FqCodel) -> QdiscNode {
        QdiscNode::new(H, Handle::ROOT, Box::new(q))
    }

    fn dump(n: &QdiscNode) -> FqCodelOpts {
        match n.qdisc.dump() {
            QdiscOpts::FqCodel(o) => o,
            other => panic!("{other:?}"),
        }
    }

    fn xstats(n: &QdiscNode) -> FqCodelXstats {
        match n.qdisc.xstats() {
            XStats::FqCodel(x) => x,
            other => panic!("{other:?}"),
        }
    }

    fn classes(n: &QdiscNode) -> Vec<ClassInfo> {
        n.qdisc.classes_ref().unwrap().list()
    }

    /// Flows 0..n, asserting that the hash puts them in distinct buckets.
    fn distinct_flows(q: &FqCodel, n: u32) {
        let mut b: Vec<u32> = (0..n).map(|f| q.flow_of(&pkt(f, 0, 100, 0))).collect();
        b.sort();
        b.dedup();
        assert_eq!(b.len(), n as usize, "flows 0..{n} share a bucket");
    }

    #[test]
    fn defaults_dump_as_the_kernel_does() {
        // tc-testing 4957: "limit 10240p flows 1024 quantum 1514 target 5ms
        // interval 100ms memory_limit 32Mb ecn drop_batch 64".
        let o = dump(&node(fq(FqCodelOpts::default())));
        assert_eq!(
            o,
            FqCodelOpts {
                limit: Some(10240),
                flows: Some(1024),
                quantum: Some(1514),
                target: Some(4999),
                interval: Some(99999),
                ecn: Some(true),
                ce_threshold: None,
                ce_threshold_selector: None,
                ce_threshold_mask: None,
                drop_batch_size: Some(64),
                memory_limit: Some(32 << 20),
            }
        );
        let o = dump(&node(fq(FqCodelOpts {
            ce_threshold: Some(1_024_000),
            ce_threshold_selector: Some(1),
            ce_threshold_mask: Some(3),
            ecn: Some(false),
            quantum: Some(100),
            drop_batch_size: Some(0),
            memory_limit: Some(u32::MAX),
            ..Default::default()
        })));
        assert_eq!(
            (o.ce_threshold, o.ce_threshold_selector, o.ce_threshold_mask),
            (Some(1_024_000), Some(1), Some(3))
        );
        assert_eq!(o.ecn, Some(false));
        assert_eq!(o.quantum, Some(256), "quantum is at least 256");
        assert_eq!(o.drop_batch_size, Some(1), "drop_batch is at least 1");
        assert_eq!(o.memory_limit, Some(1 << 31));
    }

    #[test]
    fn validation_errors_are_the_kernels() {
        let dev = DevInfo::default();
        let err = |o: FqCodelOpts| FqCodel::new(&o, &dev).unwrap_err();
        for flows in [0, 65537] {
            let e = err(FqCodelOpts {
                flows: Some(flows),
                ..Default::default()
            });
            assert_eq!((e.errno, e.extack), (Errno::EINVAL, None));
        }
        assert!(FqCodel::new(
            &FqCodelOpts {
                flows: Some(65536),
                ..Default::default()
            },
            &dev
        )
        .is_ok());
        let e = err(FqCodelOpts {
            quantum: Some(FQ_CODEL_QUANTUM_MAX + 1),
            ..Default::default()
        });
        assert_eq!(e.to_string(), "Error: Invalid quantum.");
        // The number of flows is fixed once created; a refused change
        // changes nothing (tc-testing 9283 and 3459 change other options).
        let mut n = node(fq(FqCodelOpts {
            limit: Some(1000),
            flows: Some(256),
            drop_batch_size: Some(100),
            ..Default::default()
        }));
        let change =
            |n: &mut QdiscNode, o: FqCodelOpts| n.qdisc.change(&QdiscOpts::FqCodel(o), &dev);
        let e = change(
            &mut n,
            FqCodelOpts {
                flows: Some(256),
                limit: Some(5),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!((e.errno, e.extack), (Errno::EINVAL, None));
        assert_eq!(dump(&n).limit, Some(1000));
        change(
            &mut n,
            FqCodelOpts {
                ecn: Some(false),
                ..Default::default()
            },
        )
        .unwrap();
        let o = dump(&n);
        assert_eq!(
            (o.limit, o.flows, o.ecn, o.drop_batch_size),
            (Some(1000), Some(256), Some(false), Some(100))
        );
    }

    #[test]
    fn truesize_is_what_alloc_skb_gives() {
        assert_eq!(truesize(1514), 2304);
        assert_eq!(truesize(64), 768);
        assert_eq!(truesize(9014), 16640);
        // The shortcut for the small size classes agrees with the formula.
        for len in (0..20_000).chain(u32::MAX - 20_000..=u32::MAX) {
            assert_eq!(truesize(len), truesize_by_formula(len), "{len}");
        }
    }

    /// The sparse-flow optimisation: one small packet every 10 ms next to
    /// bulk flows that keep a standing queue waits only for the packet on
    /// the wire.
    #[test]
    fn a_sparse_flow_jumps_the_standing_queue() {
        let q = fq(FqCodelOpts::default());
        distinct_flows(&q, 5);
        let mut n = node(q);
        // Four bulk flows, each offering half of a 10 Mbit/s link (2x in
        // all), and flow 4: 100 bytes every 10 ms, for 20 s.
        let mut all: Vec<Arrival> = (0..4)
            .flat_map(|f| {
                Arrival::periodic(f, 1000, Duration::from_micros(1600), 12_500).map(move |a| {
                    Arrival {
                        at: Time(a.at.0 + f as u64 * 400_000),
                        ..a
                    }
                })
            })
            .collect();
        all.extend(
            Arrival::periodic(4, 100, Duration::from_millis(10), 2000).map(|a| Arrival {
                at: Time(a.at.0 + 123_456),
                pkt: pkt(4, (a.pkt.id % 1_000_000) as u32, 100, 0),
            }),
        );
        let r = run_link(&mut n, 10_000_000, Arrival::merge(all));
        let after = Time(2_000_000_000);
        let sparse = r.flow_sojourns_after(4, after);
        let worst = *sparse.iter().max().unwrap();
        let bulk: Vec<Duration> = (0..4)
            .flat_map(|f| r.flow_sojourns_after(f, after))
            .collect();
        let bulk_median = median(&bulk);
        eprintln!(
            "fq_codel: sparse flow worst {:.3} ms, median {:.3} ms over {} packets; bulk median {:.1} ms",
            worst.as_secs_f64() * 1e3,
            median(&sparse).as_secs_f64() * 1e3,
            sparse.len(),
            bulk_median.as_secs_f64() * 1e3
        );
        assert!(sparse.len() >= 1790, "the sparse flow lost nothing");
        assert!(worst < Duration::from_millis(1), "worst {worst:?}");
        assert!(bulk_median > Duration::from_millis(5), "{bulk_median:?}");
        assert!(xstats(&n).new_flow_count >= 1800);
    }

    #[test]
    fn greedy_responsive_senders_are_held_near_target() {
        let mut n = node(fq(FqCodelOpts::default()));
        let load = Reno {
            flows: 4,
            rtt: Duration::from_millis(50),
            len: 1000,
            tos: 0,
            iw: 10,
            until: Time(60_000_000_000),
        };
        let r = run_reno(&mut n, 10_000_000, &load);
        let late: Vec<Duration> = r.sojourns_after(Time(10_000_000_000)).collect();
        let m = median(&late);
        let s = n.stats();
        eprintln!(
            "fq_codel, 4 greedy Reno flows: median sojourn {:.2} ms, {} sent, {} dropped",
            m.as_secs_f64() * 1e3,
            s.packets,
            s.drops
        );
        assert!(m <= Duration::from_millis(10), "median {m:?}");
        assert!(s.packets > 1250 * 60 * 95 / 100, "{s:?}");
    }

    #[test]
    fn an_unresponsive_two_fold_overload_is_cut_to_the_link_rate() {
        let q = fq(FqCodelOpts::default());
        distinct_flows(&q, 4);
        let mut n = node(q);
        let all: Vec<Arrival> = (0..4)
            .flat_map(|f| {
                Arrival::periodic(f, 1000, Duration::from_micros(1600), 25_000).map(move |a| {
                    Arrival {
                        at: Time(a.at.0 + f as u64 * 400_000),
                        ..a
                    }
                })
            })
            .collect();
        let r = run_link(&mut n, 10_000_000, Arrival::merge(all));
        let m = median(&r.sojourns_after(Time(20_000_000_000)).collect::<Vec<_>>());
        let s = n.stats();
        eprintln!(
            "fq_codel, unresponsive 2x overload: median sojourn {:.1} ms after 20 s; {} sent, {} dropped",
            m.as_secs_f64() * 1e3,
            s.packets,
            s.drops
        );
        assert!(s.packets > 49_000, "the link stays busy: {s:?}");
        assert_eq!(100_000, s.packets + s.drops + s.qlen as u64);
    }

    #[test]
    fn over_the_limit_the_fattest_flow_loses_half_its_bytes_from_the_head() {
        let q = fq(FqCodelOpts {
            limit: Some(20),
            ..Default::default()
        });
        distinct_flows(&q, 2);
        let mut n = node(q);
        let mut cx = Cx::new(Time(0));
        for i in 0..15 {
            n.enqueue(pkt(0, i, 1000, 0), &mut cx).unwrap();
        }
        for i in 0..5 {
            n.enqueue(pkt(1, i, 1000, 0), &mut cx).unwrap();
        }
        // The 21st packet: flow 0 (15000 bytes) drops its 8 oldest packets
        // (8000 bytes >= half), and its CoDel count rises by 8.
        n.enqueue(pkt(1, 5, 1000, 0), &mut cx).unwrap();
        let s = n.stats();
        assert_eq!((s.qlen, s.drops, s.backlog), (13, 8, 13_000));
        let x = xstats(&n);
        assert_eq!((x.drop_overlimit, x.drop_overmemory), (8, 0));
        let c = classes(&n);
        let fat = c.iter().find(|c| c.stats.qlen == 7).expect("flow 0");
        let XStats::FqCodelClass(cx0) = fat.xstats else {
            panic!()
        };
        assert_eq!(cx0.count, 8);
        let out = drain(&mut n, &mut cx);
        let flow0: Vec<u64> = out.iter().copied().filter(|id| *id < 1_000_000).collect();
        assert_eq!(flow0, (8..15).collect::<Vec<u64>>());
        // At most drop_batch packets go at once.
        let q = fq(FqCodelOpts {
            limit: Some(20),
            drop_batch_size: Some(3),
            ..Default::default()
        });
        let mut n = node(q);
        for i in 0..21 {
            let _ = n.enqueue(pkt(0, i, 1000, 0), &mut cx);
        }
        assert_eq!((n.stats().qlen, n.stats().drops), (18, 3));
    }

    #[test]
    fn the_arriving_packet_can_be_the_victim() {
        let mut cx = Cx::new(Time(0));
        // Its own flow is the fattest but holds older packets: they go, the
        // new one stays.
        let mut n = node(fq(FqCodelOpts {
            limit: Some(1),
            ..Default::default()
        }));
        n.enqueue(pkt(0, 0, 1000, 0), &mut cx).unwrap();
        n.enqueue(pkt(0, 1, 1000, 0), &mut cx).unwrap();
        assert_eq!((n.stats().qlen, n.stats().drops), (1, 1));
        assert_eq!(drain(&mut n, &mut cx), vec![1]);
        // Limit 0: the packet is its flow's only one, and is dropped.
        let mut n = node(fq(FqCodelOpts {
            limit: Some(0),
            ..Default::default()
        }));
        assert_eq!(
            n.enqueue(pkt(0, 0, 1000, 0), &mut cx),
            Err(DropReason::QueueFull)
        );
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (0, 0, 1));
        assert_eq!(xstats(&n).drop_overlimit, 1);
    }

    #[test]
    fn over_the_memory_limit_drops_count_as_overmemory() {
        let q = fq(FqCodelOpts {
            memory_limit: Some(10 * 2304),
            ..Default::default()
        });
        distinct_flows(&q, 2);
        let mut n = node(q);
        let mut cx = Cx::new(Time(0));
        for i in 0..8 {
            n.enqueue(pkt(0, i, 1514, 0), &mut cx).unwrap();
        }
        for i in 0..3 {
            n.enqueue(pkt(1, i, 1514, 0), &mut cx).unwrap();
        }
        let x = xstats(&n);
        assert_eq!((x.drop_overlimit, x.drop_overmemory), (4, 4));
        assert_eq!(x.memory_usage, 7 * 2304);
        assert_eq!(n.stats().qlen, 7);
    }

    #[test]
    fn ecn_capable_packets_are_marked_instead_of_dropped() {
        let run = |o: FqCodelOpts| {
            let mut n = node(fq(o));
            let load = Reno {
                flows: 2,
                rtt: Duration::from_millis(20),
                len: 1000,
                tos: 0x01, // ECT(1)
                iw: 10,
                until: Time(20_000_000_000),
            };
            let r = run_reno(&mut n, 10_000_000, &load);
            (n, r)
        };
        // ECN is on by default.
        let (n, r) = run(FqCodelOpts::default());
        let x = xstats(&n);
        assert!(x.ecn_mark > 10, "{x:?}");
        assert_eq!(n.stats().drops, 0, "marked, never dropped");
        assert_eq!(r.ce as u32, x.ecn_mark);
        assert!(r.checksums_ok);
        let (n, r) = run(FqCodelOpts {
            ecn: Some(false),
            ..Default::default()
        });
        assert!(n.stats().drops > 10);
        assert_eq!((xstats(&n).ecn_mark, r.ce), (0, 0));
    }

    #[test]
    fn ce_threshold_selector_picks_the_packets_it_marks() {
        let mut n = node(fq(FqCodelOpts {
            ce_threshold: Some(1000),
            ce_threshold_selector: Some(0x01),
            ce_threshold_mask: Some(0x03),
            ..Default::default()
        }));
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(0, 0, 100, 0x01), &mut cx).unwrap(); // ECT(1): selected
        n.enqueue(pkt(0, 1, 100, 0x02), &mut cx).unwrap(); // ECT(0): not
        let mut cx = Cx::new(Time(2_000_000));
        let ecn: Vec<u8> = std::iter::from_fn(|| match n.dequeue(&mut cx) {
            Dequeue::Packet(p) => Some(p.data[1] & 3),
            _ => None,
        })
        .collect();
        assert_eq!(ecn, vec![3, 2]);
        assert_eq!(xstats(&n).ce_mark, 1);
    }

    #[test]
    fn backlogged_flows_get_equal_bytes_whatever_their_packet_size() {
        let sizes = [64u32, 300, 1000, 1514];
        let q = fq(FqCodelOpts::default());
        distinct_flows(&q, 4);
        let mut n = node(q);
        let mut cx = Cx::new(Time(0));
        let mut seq = [0u32; 4];
        for (f, &len) in sizes.iter().enumerate() {
            for _ in 0..20 {
                n.enqueue(pkt(f as u32, seq[f], len, 0), &mut cx).unwrap();
                seq[f] += 1;
            }
        }
        let mut bytes = [0u64; 4];
        for _ in 0..20_000 {
            let Dequeue::Packet(p) = n.dequeue(&mut cx) else {
                panic!("ran dry")
            };
            let f = (p.id / 1_000_000) as usize;
            bytes[f] += p.len as u64;
            n.enqueue(pkt(f as u32, seq[f], sizes[f], 0), &mut cx)
                .unwrap();
            seq[f] += 1;
        }
        let total: u64 = bytes.iter().sum();
        for (f, b) in bytes.iter().enumerate() {
            let share = *b as f64 / total as f64;
            assert!((share - 0.25).abs() < 0.01, "flow {f} got {share:.4}");
        }
    }

    /// The id of the packet the node dequeues now (there must be one).
    fn first(n: &mut QdiscNode, cx: &mut Cx) -> u64 {
        match n.dequeue(cx) {
            Dequeue::Packet(p) => p.id,
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn new_flows_go_first_and_then_join_the_old() {
        // Quantum 256, packets of 1000: each visit sends one packet.
        let q = fq(FqCodelOpts {
            quantum: Some(256),
            ..Default::default()
        });
        distinct_flows(&q, 3);
        let mut n = node(q);
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            n.enqueue(pkt(0, i, 1000, 0), &mut cx).unwrap();
        }
        assert_eq!(first(&mut n, &mut cx), 0);
        assert_eq!((xstats(&n).new_flows_len, xstats(&n).old_flows_len), (1, 0));
        // Flow 1 arrives: it is new and goes before flow 0's next packet.
        n.enqueue(pkt(1, 0, 1000, 0), &mut cx).unwrap();
        n.enqueue(pkt(1, 1, 1000, 0), &mut cx).unwrap();
        assert_eq!(first(&mut n, &mut cx), 1_000_000);
        n.enqueue(pkt(2, 0, 1000, 0), &mut cx).unwrap();
        assert_eq!(first(&mut n, &mut cx), 2_000_000);
        let x = xstats(&n);
        assert_eq!(
            (x.new_flows_len, x.old_flows_len, x.new_flow_count),
            (1, 2, 3)
        );
        assert_eq!(drain(&mut n, &mut cx), vec![1, 1_000_001, 2]);
        // Empty flows leave the lists (tc-testing 0435: no class when idle).
        assert!(classes(&n).is_empty());
        let x = xstats(&n);
        assert_eq!((x.new_flows_len, x.old_flows_len), (0, 0));
    }

    #[test]
    fn an_emptied_new_flow_waits_on_the_old_list() {
        // Default quantum (1514), packets of 1000.
        let q = fq(FqCodelOpts::default());
        distinct_flows(&q, 2);
        let mut n = node(q);
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            n.enqueue(pkt(0, i, 1000, 0), &mut cx).unwrap();
        }
        // Flow 0 sends two packets and overdraws its credit.
        assert_eq!((first(&mut n, &mut cx), first(&mut n, &mut cx)), (0, 1));
        n.enqueue(pkt(1, 0, 1000, 0), &mut cx).unwrap();
        // Flow 0 is topped up and moves to the old list; flow 1 is served.
        assert_eq!(first(&mut n, &mut cx), 1_000_000);
        // Flow 1, new and now empty, goes behind flow 0 on the old list
        // instead of leaving: flow 0 sends next.
        assert_eq!(first(&mut n, &mut cx), 2);
        let x = xstats(&n);
        assert_eq!((x.new_flows_len, x.old_flows_len), (0, 2));
        // Still listed, flow 1 is not a new flow when a packet arrives.
        n.enqueue(pkt(1, 1, 1000, 0), &mut cx).unwrap();
        assert_eq!(xstats(&n).new_flow_count, 2);
        // Flow 0, found empty on the old list, leaves; flow 1 sends.
        assert_eq!(drain(&mut n, &mut cx), vec![1_000_001]);
        let x = xstats(&n);
        assert_eq!((x.new_flows_len, x.old_flows_len), (0, 0));
    }

    #[test]
    fn classes_list_active_flows_with_their_codel_state() {
        let q = fq(FqCodelOpts::default());
        let bucket = q.flow_of(&pkt(0, 0, 1000, 0));
        let mut n = node(q);
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            n.enqueue(pkt(0, i, 1000, 0), &mut cx).unwrap();
        }
        n.dequeue(&mut Cx::new(Time(3_000_000)));
        let c = classes(&n);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].classid, Handle::new(1, bucket as u16 + 1));
        assert_eq!(c[0].parent, H);
        assert_eq!((c[0].stats.qlen, c[0].stats.backlog), (2, 2000));
        assert_eq!(
            c[0].xstats,
            XStats::FqCodelClass(FqCodelClassXstats {
                deficit: 514,
                ldelay: 2999,
                ..Default::default()
            })
        );
        assert!(n.qdisc.block(H).is_some() && n.qdisc.block(c[0].classid).is_none());
        let cl = n.qdisc.classes().unwrap();
        assert!(!cl.contains(c[0].classid), "fq_codel_find finds no class");
        assert_eq!(
            cl.delete_class(c[0].classid).unwrap_err().errno,
            Errno::ENOENT
        );
        assert_eq!(
            cl.change_class(c[0].classid, H, None, &DevInfo::default())
                .unwrap_err()
                .errno,
            Errno::EOPNOTSUPP
        );
    }

    #[test]
    fn priority_naming_our_class_picks_the_flow() {
        let mut n = node(fq(FqCodelOpts::default()));
        let mut cx = Cx::new(Time(0));
        let p = Packet::from(Skb {
            priority: 0x0001_0007,
            ..pkt(0, 0, 100, 0).into_skb()
        });
        n.enqueue(p, &mut cx).unwrap();
        assert_eq!(classes(&n)[0].classid, Handle::new(1, 7));
    }

    fn add_fw(q: &mut FqCodel, mark: u32, classid: Option<Handle>, action: Option<Verdict>) {
        let mut actions = ActionTable::new(0);
        let mut shared = ClsShared::default();
        let mut env = ClsEnv {
            actions: &mut actions,
            shared: &mut shared,
            qdisc: H,
            dev_exists: &|_| true,
            now: Time(0),
        };
        let actions = action
            .map(|a| ActionSpec {
                index: 0,
                opts: ActionOpts::Gact(GactOpts {
                    action: a,
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
                classid,
                actions,
                ..Default::default()
            })),
            ..Default::default()
        };
        q.block_mut(H)
            .unwrap()
            .change_filter(&msg, FilterCmd::Add, &mut env)
            .unwrap();
    }

    #[test]
    fn filters_choose_the_flow_and_unclassified_packets_are_dropped() {
        let mut q = fq(FqCodelOpts {
            flows: Some(16),
            ..Default::default()
        });
        add_fw(&mut q, 1, Some(Handle::new(1, 5)), None);
        add_fw(&mut q, 2, Some(Handle::new(1, 17)), None); // beyond 16 flows
        add_fw(&mut q, 3, Some(Handle::new(1, 6)), Some(Verdict::Shot));
        add_fw(&mut q, 4, Some(Handle::new(1, 6)), Some(Verdict::Stolen));
        let mut n = node(q);
        let mut cx = Cx::new(Time(0));
        let m = |f, mark| {
            Packet::from(Skb {
                mark,
                ..pkt(f, 0, 100, 0).into_skb()
            })
        };
        n.enqueue(m(0, 1), &mut cx).unwrap();
        n.enqueue(m(1, 1), &mut cx).unwrap();
        assert_eq!(n.enqueue(m(2, 2), &mut cx), Err(DropReason::Unclassified));
        assert_eq!(n.enqueue(m(3, 9), &mut cx), Err(DropReason::Unclassified));
        assert_eq!(n.enqueue(m(4, 3), &mut cx), Err(DropReason::Action));
        assert_eq!(n.enqueue(m(5, 4), &mut cx), Err(DropReason::Stolen));
        let c = classes(&n);
        assert_eq!(c.len(), 1, "two flows, one class");
        assert_eq!((c[0].classid, c[0].stats.qlen), (Handle::new(1, 5), 2));
        assert_eq!(n.stats().drops, 3, "a stolen packet is no drop");
    }

    #[test]
    fn a_lower_limit_trims_the_queue() {
        // tc-testing 0436 (needs scapy there): limit 10 with 10 packets
        // queued, then limit 1.
        let mut n = node(fq(FqCodelOpts {
            limit: Some(10),
            ..Default::default()
        }));
        let mut cx = Cx::new(Time(0));
        for i in 0..10 {
            n.enqueue(pkt(0, i, 100, 0), &mut cx).unwrap();
        }
        let lower = QdiscOpts::FqCodel(FqCodelOpts {
            limit: Some(1),
            ..Default::default()
        });
        n.qdisc.change(&lower, &DevInfo::default()).unwrap();
        assert_eq!(dump(&n).limit, Some(1));
        assert_eq!(drain(&mut n, &mut cx), vec![9]);
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops, s.packets), (0, 0, 9, 1));
        // Through take_purged instead, for a caller that applies it.
        let ten = QdiscOpts::FqCodel(FqCodelOpts {
            limit: Some(10),
            ..Default::default()
        });
        n.qdisc.change(&ten, &DevInfo::default()).unwrap();
        for i in 0..3 {
            n.enqueue(pkt(0, i, 100, 0), &mut cx).unwrap();
        }
        let zero = QdiscOpts::FqCodel(FqCodelOpts {
            limit: Some(0),
            ..Default::default()
        });
        n.qdisc.change(&zero, &DevInfo::default()).unwrap();
        let cl = n.qdisc.classes().unwrap();
        assert_eq!(cl.take_purged(), (3, 300));
        assert_eq!(cl.take_purged(), (0, 0));
    }

    #[test]
    fn reset_forgets_everything_queued() {
        let mut n = node(fq(FqCodelOpts::default()));
        let mut cx = Cx::new(Time(0));
        for i in 0..10 {
            n.enqueue(pkt(i % 3, i, 100, 0), &mut cx).unwrap();
        }
        n.reset();
        assert!(classes(&n).is_empty());
        assert_eq!(xstats(&n).memory_usage, 0);
        assert_eq!(n.dequeue(&mut cx), Dequeue::Empty);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Enq { flow: u32, len: u32, tos: u8 },
        Deq,
        Wait(u64),
        Limit(u32),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            6 => (0..12u32, 40..1600u32, 0..3u8).prop_map(|(flow, len, tos)| Op::Enq { flow, len, tos }),
            4 => Just(Op::Deq),
            2 => (0..50_000_000u64).prop_map(Op::Wait),
            1 => (0..60u32).prop_map(Op::Limit),
        ];
        proptest::collection::vec(op, 1..400)
    }

    proptest! {
        /// offered = sent + dropped + queued at every step; the classes add
        /// up to the qdisc; memory follows the packets; draining empties it.
        #[test]
        fn packets_are_conserved(
            ops in ops(),
            limit in 1..40u32,
            flows in 1..16u32,
            batch in 1..8u32,
            mem in 3000..60_000u32,
        ) {
            let o = FqCodelOpts {
                limit: Some(limit),
                flows: Some(flows),
                drop_batch_size: Some(batch),
                memory_limit: Some(mem),
                quantum: Some(300),
                ..Default::default()
            };
            let mut n = node(fq(o));
            let mut t = 0u64;
            let mut offered = 0u64;
            let mut changed = false;
            for (i, op) in ops.iter().enumerate() {
                let mut cx = Cx::new(Time(t));
                match *op {
                    Op::Enq { flow, len, tos } => {
                        offered += 1;
                        let _ = n.enqueue(pkt(flow, i as u32, len, tos), &mut cx);
                        changed = false;
                    }
                    Op::Deq => { n.dequeue(&mut cx); changed = false; }
                    Op::Wait(ns) => t += ns,
                    Op::Limit(l) => {
                        let o = QdiscOpts::FqCodel(FqCodelOpts { limit: Some(l), ..Default::default() });
                        n.qdisc.change(&o, &DevInfo::default()).unwrap();
                        changed = true;
                    }
                }
                if changed {
                    continue;
                }
                let s = n.stats();
                prop_assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
                let c = classes(&n);
                prop_assert_eq!(c.iter().map(|c| c.stats.qlen).sum::<u32>(), s.qlen);
                prop_assert_eq!(c.iter().map(|c| c.stats.backlog).sum::<u64>(), s.backlog);
                let x = xstats(&n);
                prop_assert!(s.qlen <= dump(&n).limit.unwrap() || matches!(op, Op::Wait(_)));
                let bytes: u32 = c.iter().map(|c| c.stats.backlog as u32).sum();
                prop_assert!(x.memory_usage >= bytes);
            }
            drain(&mut n, &mut Cx::new(Time(t)));
            let s = n.stats();
            prop_assert_eq!((s.qlen, s.backlog), (0, 0));
            prop_assert_eq!(offered, s.packets + s.drops);
            prop_assert!(classes(&n).is_empty());
            prop_assert_eq!(xstats(&n).memory_usage, 0);
        }
    }
}
