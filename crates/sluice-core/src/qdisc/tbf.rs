//! tbf: the token bucket filter, a shaper with one inner queue.
//!
//! Modelled on net/sched/sch_tbf.c (Linux 6.x), with the option handling of
//! iproute2's tc/q_tbf.c.
//!
//! # Algorithm
//!
//! A flow conforms to a token bucket of rate R and depth B when, for any
//! packets i..k it sends at times t_i..t_k,
//!
//! ```text
//!     s_i + ... + s_k  <=  B + R * (t_k - t_i)
//! ```
//!
//! The kernel keeps the bucket in *time*: `tokens` are nanoseconds of
//! transmission at rate R, the bucket holds at most `buffer` = B/R of them,
//! and they grow by one per nanosecond. The head packet of the inner queue
//! leaves when the tokens, after refilling up to `buffer` and paying its
//! transmission time `l2t(len)`, are not negative; otherwise the qdisc says
//! when they will be (`Dequeue::Wait`, the kernel's watchdog) and counts an
//! overlimit. A second bucket with the peak rate P and the depth `mtu` = M/P
//! bounds bursts at short time scales; both must conform. Packets are never
//! reordered: a short packet behind a long one waits.
//!
//! When the queue is the bottleneck ("reshaping"), a byte queue of `limit`
//! bytes delays packets by at most
//!
//! ```text
//!     lat = max((limit - B) / R, (limit - M) / P)
//! ```
//!
//! which is why tc accepts `latency` instead of `limit` and converts it
//! ([`limit_from_latency`]).
//!
//! # Structure
//!
//! TBF is classful with a single class `major:1` holding the inner qdisc: by
//! default a bfifo of `limit` bytes with handle 0 (hidden from `tc qdisc show`
//! unless `invisible`), replaceable by any qdisc with
//! `tc qdisc add ... parent major:1`. Deleting that qdisc leaves `noop`, which
//! drops everything until a `change` with a limit creates a new bfifo. A
//! `change` while the inner qdisc is a fifo (`pfifo`, `bfifo`,
//! `pfifo_head_drop`) sets that fifo's limit to `limit`, even when it counts
//! packets (the kernel's `fifo_set_limit`; observed: `pfifo 10: limit 5000p`).
//! `change` refills both buckets but keeps the queue and the time checkpoint.
//! Class add/change/delete are refused (`EEXIST`/`EOPNOTSUPP` as the kernel).
//!
//! Enqueue drops a packet longer than `max_size`, the longest packet either
//! bucket can ever pay for (derived from `burst` and `pburst`, or from the
//! time depths with `psched_ns_t2l` when tc did not send them), unless it is
//! a GSO packet whose segments fit: those are segmented in software and
//! queued one by one (`tbf_segment`, [`crate::gso::segment`]).
//!
//! # Deviations
//!
//! - A rate spec with link layer "unaware" is not re-detected from the rate
//!   table (sluice carries no table; current tc always sets the link layer).
//! - Time that goes backwards counts as no time (the kernel's clock cannot).
//! - Packets whose accounted length with overhead and ATM framing would not
//!   fit in 32 bits (over 3.8 GB) are dropped at enqueue, where the kernel
//!   would wrap the length; this keeps [`TokenBucket`]'s arithmetic exact.
//! - The inner qdisc is peeked through [`QdiscNode::peek`], which does not
//!   report *when* a throttled inner qdisc (netem, another tbf) will have a
//!   packet. To return that time instead of stalling, tbf asks the inner
//!   qdisc a second time, so an inner shaper counts two overlimits for such a
//!   dequeue instead of one.
//! - A pfifo or bfifo child is peeked in place ([`QdiscNode::peek_len`],
//!   the kernel's `qdisc_peek_head`), so its limit covers the head packet
//!   as in the kernel. Other children are peeked by dequeueing: their head
//!   packet sits in the child's node while tbf is throttled, outside the
//!   qdisc's own count, and pfifo_head_drop under tbf drops the packet
//!   behind the head. (Should a pfifo or bfifo node hold a peeked packet,
//!   tbf applies the fifo's limit to the node's backlog itself and counts
//!   the drop at the fifo.)
//! - The qdisc does not know its own handle until a class operation names
//!   it; [`Classful::list`] then reports `0:1`/`0:` and the caller fills in
//!   the major, as the kernel's `tc_fill_tclass` does around `tbf_dump_class`.

use super::fifo::{Fifo, FifoKind, FifoOpts};
use super::noqueue::{child_leaves, child_leaves_ref, noop_child};
use super::token_bucket::TokenBucket;
use super::{
    wrong_kind, ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts,
    XStats,
};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::rate::{LinkLayer, RateCfg, RateSpec};
use crate::stats::{DropReason, Stats};
use crate::time::{ns_to_ticks, ticks_to_ns, Duration, Time};
use serde::{Deserialize, Serialize};

/// What tc sends for a tbf (`TCA_OPTIONS`), and what the kernel dumps.
///
/// `rate`, `peakrate`, `limit`, `buffer_ticks` and `mtu_ticks` are
/// `struct tc_tbf_qopt` (`TCA_TBF_PARMS`); the optional fields are the
/// attributes added since. iproute2 always sends `burst`, and `pburst` with
/// a peak rate; the kernel dumps neither, nor the rate tables.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TbfOpts {
    /// The rate; its `rate` is the 32-bit field (at most `u32::MAX` bytes/s,
    /// the real value then in `rate64`).
    pub rate: RateSpec,
    /// The peak rate; `rate == 0` means no peak bucket.
    #[serde(default)]
    pub peakrate: RateSpec,
    /// Byte limit of the default bfifo.
    pub limit: u32,
    /// Bucket depth in psched ticks (64 ns) at `rate`: the time to send `burst`.
    pub buffer_ticks: u32,
    /// Peak bucket depth in psched ticks at `peakrate`: the time to send `mtu`.
    #[serde(default)]
    pub mtu_ticks: u32,
    /// `TCA_TBF_RATE64`: the rate in bytes/s when it does not fit in 32 bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate64: Option<u64>,
    /// `TCA_TBF_PRATE64`: the peak rate in bytes/s when it does not fit in 32 bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prate64: Option<u64>,
    /// `TCA_TBF_BURST`: bucket depth in bytes; overrides `buffer_ticks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
    /// `TCA_TBF_PBURST`: peak bucket depth in bytes; overrides `mtu_ticks`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pburst: Option<u32>,
    /// tc sent `TCA_TBF_RTAB` (only used by the kernel to guess an unset link layer).
    #[serde(default)]
    pub rtab: bool,
    /// tc sent `TCA_TBF_PTAB`.
    #[serde(default)]
    pub ptab: bool,
}

/// The limit tc computes when given `latency` instead of `limit` (q_tbf.c):
/// `rate * latency + burst`, or with a peak rate the smaller of that and
/// `peakrate * latency + mtu`. Rates in bytes/s, sizes in bytes, latency in
/// microseconds as `get_time` returns it. The arithmetic is tc's: doubles,
/// then C's conversion to `unsigned int` (which wraps above 4 GiB).
pub fn limit_from_latency(
    rate_bytes_per_sec: u64,
    burst_bytes: u32,
    peak: Option<(u64, u32)>,
    latency_us: u32,
) -> u32 {
    const TIME_UNITS_PER_SEC: f64 = 1_000_000.0;
    let mut lim =
        rate_bytes_per_sec as f64 * latency_us as f64 / TIME_UNITS_PER_SEC + burst_bytes as f64;
    if let Some((prate, mtu)) = peak.filter(|&(prate, _)| prate != 0) {
        let lim2 = prate as f64 * latency_us as f64 / TIME_UNITS_PER_SEC + mtu as f64;
        if lim2 < lim {
            lim = lim2;
        }
    }
    c_double_to_uint(lim)
}

/// `(unsigned int)v` as x86-64 compilers emit it: a 64-bit signed conversion
/// (out of range: the "integer indefinite" 2^63), then truncation.
fn c_double_to_uint(v: f64) -> u32 {
    let two_pow_63 = (1u64 << 63) as f64;
    if v.is_nan() || !(-two_pow_63..two_pow_63).contains(&v) {
        return 0;
    }
    (v as i64) as u32
}

/// Validated parameters (`tbf_sched_data`'s parameter half).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TbfParams {
    /// Bytes: the limit of the default bfifo.
    limit: u32,
    /// Longest packet accepted, in bytes.
    max_size: u32,
    /// The rate.
    rate: RateCfg,
    /// Bucket depth in nanoseconds at `rate`.
    buffer_ns: i64,
    /// The peak rate, if any.
    peak: Option<RateCfg>,
    /// Peak bucket depth in nanoseconds (kept and dumped even without a peak rate).
    mtu_ns: i64,
    /// The longest packet both buckets can time exactly (whose wire length
    /// fits 32 bits at each rate), or `None` when no length can be timed.
    /// Computed once here: the wire length only grows with the length.
    max_timeable: Option<u32>,
}

impl TbfParams {
    /// The checks and conversions of `tbf_change`, before it commits anything.
    fn from_opts(o: &TbfOpts) -> TcResult<Self> {
        let rate = RateCfg::new(RateSpec {
            rate: o.rate.rate.max(o.rate64.unwrap_or(0)),
            ..o.rate
        });
        // The depths as times, capped at 2^32 - 1 ns where they size max_size.
        let buffer_capped = ticks_to_ns(o.buffer_ticks as u64).min(u32::MAX as u64);
        let mtu_capped = ticks_to_ns(o.mtu_ticks as u64).min(u32::MAX as u64);

        let (mut max_size, buffer_ns) = match o.burst {
            Some(burst) => (burst as u64, kernel_l2t_ns(&rate, burst)),
            None => (
                ns_to_len(&rate, buffer_capped).min(u32::MAX as u64),
                ticks_to_ns(o.buffer_ticks as u64) as i64,
            ),
        };
        let mut mtu_ns = match o.pburst {
            Some(_) => mtu_capped as i64,
            None => ticks_to_ns(o.mtu_ticks as u64) as i64,
        };
        let mut peak = None;
        if o.peakrate.rate != 0 {
            let p = RateCfg::new(RateSpec {
                rate: o.peakrate.rate.max(o.prate64.unwrap_or(0)),
                ..o.peakrate
            });
            if p.rate() <= rate.rate() {
                // The kernel only logs "peakrate ... is lower than or equals to rate".
                return Err(TcError::errno(Errno::EINVAL));
            }
            match o.pburst {
                Some(pburst) => {
                    max_size = max_size.min(pburst as u64);
                    mtu_ns = kernel_l2t_ns(&p, pburst);
                }
                None => max_size = max_size.min(ns_to_len(&p, mtu_capped)),
            }
            peak = Some(p);
        }
        // (A max_size below the device MTU is only logged by the kernel.)
        if max_size == 0 {
            return Err(TcError::errno(Errno::EINVAL));
        }
        Ok(TbfParams {
            limit: o.limit,
            max_size: max_size as u32,
            rate,
            buffer_ns,
            peak,
            mtu_ns,
            max_timeable: max_timeable(&rate, peak.as_ref()),
        })
    }

    /// Full buckets for these parameters.
    fn full_buckets(&self) -> TbfState {
        TbfState {
            bucket: TokenBucket::new(self.rate, self.buffer_ns),
            peak: self.peak.map(|p| TokenBucket::new(p, self.mtu_ns)),
            t_c: Time::ZERO,
        }
    }
}

/// Running state (`tbf_sched_data`'s variable half).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TbfState {
    /// The rate bucket: `tokens` in ns, at most `buffer_ns`.
    bucket: TokenBucket,
    /// The peak bucket: `tokens` in ns, at most `mtu_ns`.
    peak: Option<TokenBucket>,
    /// When the buckets were last charged (`t_c`).
    t_c: Time,
}

/// `psched_l2t_ns` with the kernel's 32-bit length arithmetic, for lengths
/// that come from configuration (`burst`, `pburst`) and may be huge: the
/// length with overhead, mpu and ATM framing wraps at 2^32 as in the kernel,
/// then is timed at the bare rate (so the multiplication cannot overflow).
fn kernel_l2t_ns(rate: &RateCfg, len: u32) -> i64 {
    let spec = rate.spec();
    let mut wire = (len as i64 + spec.overhead as i64).max(0) as u32;
    if wire < spec.mpu as u32 {
        wire = spec.mpu as u32;
    }
    if spec.linklayer == LinkLayer::Atm {
        wire = (wire.wrapping_add(47) / 48).wrapping_mul(53);
    }
    let bare = RateCfg::new(RateSpec {
        rate: spec.rate,
        ..Default::default()
    });
    // wire < 2^32 and mult < 2^32; shift >= 1 for any rate > 0, so this fits in i64.
    i64::try_from(bare.l2t_ns(wire)).unwrap_or(i64::MAX)
}

/// The accounted length of a packet at `spec` (overhead, mpu, ATM cells), unwrapped.
fn wire_len(spec: &RateSpec, len: u32) -> u64 {
    let mut wire = (len as i64 + spec.overhead as i64).max(0) as u64;
    wire = wire.max(spec.mpu as u64);
    if spec.linklayer == LinkLayer::Atm {
        wire = wire.div_ceil(48) * 53;
    }
    wire
}

/// Whether both buckets can time a packet of `len` bytes exactly: its wire
/// length fits 32 bits at `rate` and at `peak`.
fn timeable_at(rate: &RateCfg, peak: Option<&RateCfg>, len: u32) -> bool {
    let fits = |r: &RateCfg| wire_len(&r.spec(), len) <= u32::MAX as u64;
    fits(rate) && peak.is_none_or(fits)
}

/// The longest length [`timeable_at`] accepts, found by bisection (the wire
/// length never decreases as the length grows), or `None` if none is.
fn max_timeable(rate: &RateCfg, peak: Option<&RateCfg>) -> Option<u32> {
    if !timeable_at(rate, peak, 0) {
        return None;
    }
    // Invariant: `lo` is timeable; every length above `hi` is not.
    let (mut lo, mut hi) = (0u32, u32::MAX);
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if timeable_at(rate, peak, mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// `psched_ns_t2l`: how many bytes `ns` nanoseconds carry at `rate` (the
/// inverse of `l2t`, less the per-packet overhead, whole ATM cells only).
fn ns_to_len(rate: &RateCfg, ns: u64) -> u64 {
    let spec = rate.spec();
    // The kernel multiplies in 64 bits and lets it wrap.
    let mut len = ns.wrapping_mul(spec.rate) / 1_000_000_000;
    if spec.linklayer == LinkLayer::Atm {
        len = len / 53 * 48;
    }
    let overhead = spec.overhead as i64;
    if overhead < 0 {
        len.saturating_add(overhead.unsigned_abs())
    } else {
        len.saturating_sub(overhead as u64)
    }
}

/// The token bucket filter.
#[derive(Debug)]
pub struct Tbf {
    params: TbfParams,
    state: TbfState,
    /// The qdisc of class `major:1` (a bfifo, a user's qdisc, or noop).
    child: QdiscNode,
    /// A packet taken from a child that had first said it had none (see the essay).
    held: Option<Packet>,
    /// The child's node holds the head packet peeked (taken out of the child).
    child_peeked: bool,
    /// Our handle's major, once a class operation has named it (0 before).
    major: u16,
    /// Dequeues refused for lack of tokens.
    overlimits: u64,
}

impl Tbf {
    /// `tbf_init`: start with noop as the inner qdisc, then apply `opts` as `change` does.
    pub fn new(opts: &TbfOpts, dev: &DevInfo) -> TcResult<Self> {
        let params = TbfParams::from_opts(opts)?;
        let mut tbf = Tbf {
            params,
            state: params.full_buckets(),
            child: noop_child(Handle::new(0, 1)),
            held: None,
            child_peeked: false,
            major: 0,
            overlimits: 0,
        };
        tbf.commit(params, dev)?;
        Ok(tbf)
    }

    /// The rest of `tbf_change` once `params` are valid: size the inner
    /// queue (set a fifo's limit, or replace noop by a bfifo), then take the
    /// new parameters with full buckets.
    fn commit(&mut self, params: TbfParams, dev: &DevInfo) -> TcResult<()> {
        if self.child_is_noop() {
            if params.limit > 0 {
                let fifo = Fifo::new(
                    FifoKind::Bytes,
                    &FifoOpts {
                        limit: Some(params.limit),
                    },
                    dev,
                )?;
                // The old child is noop: nothing to flush.
                self.child = QdiscNode::new(Handle::UNSPEC, self.class_id(), Box::new(fifo))
                    .hashed_invisible();
            }
        } else {
            let limit = FifoOpts {
                limit: Some(params.limit),
            };
            let fifo_opts = match self.child.kind() {
                "pfifo" => Some(QdiscOpts::Pfifo(limit)),
                "bfifo" => Some(QdiscOpts::Bfifo(limit)),
                "pfifo_head_drop" => Some(QdiscOpts::PfifoHeadDrop(limit)),
                // pfifo_fast has no change operation; other kinds are not fifos.
                _ => None,
            };
            if let Some(o) = fifo_opts {
                self.child.qdisc.change(&o, dev)?;
            }
        }
        let t_c = self.state.t_c;
        self.params = params;
        self.state = TbfState {
            t_c,
            ..params.full_buckets()
        };
        Ok(())
    }

    fn child_is_noop(&self) -> bool {
        self.child.kind() == "noop"
    }

    /// Our one class, `major:1`.
    fn class_id(&self) -> Handle {
        Handle::new(self.major, 1)
    }

    /// Remember our major from a class id a caller used.
    fn learn_major(&mut self, classid: Handle) {
        if classid.major() == 0 || classid.major() == self.major {
            return;
        }
        self.major = classid.major();
        if self.child.handle.is_unspec() {
            self.child.parent = self.class_id();
        }
    }

    /// Whether both buckets can time a packet of `len` bytes exactly.
    fn timeable(&self, len: u32) -> bool {
        self.params.max_timeable.is_some_and(|m| len <= m)
    }

    /// `tbf_segment`: a GSO packet longer than `max_size` whose segments
    /// fit goes into the inner queue as its segments. The tree counted one
    /// packet; it now counts the segments queued ([`Cx::split`]). Segments
    /// the inner queue refuses are drops here; when it refuses them all,
    /// the packet is refused.
    fn segment(&mut self, pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        super::offer_segments(pkt, cx, |seg, cx| {
            if self.fifo_overflows(seg.len) {
                self.child.stats.drops += 1;
                false
            } else {
                self.child.offer(seg, cx).is_ok()
            }
        })
    }

    /// Would a tail-drop fifo child refuse `len` more bytes, counting the head
    /// packet its node holds peeked? The kernel's fifos peek in place
    /// (`qdisc_peek_head`), so their limit covers the head packet, but
    /// [`QdiscNode::peek`] takes it out of the fifo, which would then admit
    /// one packet more than its limit while tbf is throttled. (tbf peeks
    /// pfifo and bfifo in place, [`QdiscNode::peek_len`], so this only
    /// matters if their node holds a packet peeked otherwise.)
    fn fifo_overflows(&self, len: u32) -> bool {
        if !self.child_peeked {
            return false;
        }
        let s = &self.child.stats;
        match self.child.qdisc.dump() {
            QdiscOpts::Bfifo(FifoOpts { limit: Some(l) }) => s.backlog + len as u64 > l as u64,
            QdiscOpts::Pfifo(FifoOpts { limit: Some(l) }) => s.qlen >= l,
            _ => false,
        }
    }

    /// The length of the packet at the head of the inner queue, or what to
    /// answer when there is none to send now.
    fn head_len(&mut self, cx: &mut Cx) -> Result<u32, Dequeue> {
        if let Some(p) = &self.held {
            return Ok(p.len);
        }
        if let Some(len) = self.child.peek_len(cx) {
            // A pfifo or bfifo child keeps its head in place and applies
            // its limit itself; other children hand it to their node.
            self.child_peeked = self.child.holds_peeked();
            return Ok(len);
        }
        if self.child.stats.qlen == 0 {
            return Err(Dequeue::Empty);
        }
        // Packets are queued below but none is ready: learn when one will be.
        match self.child.dequeue(cx) {
            Dequeue::Packet(p) => {
                let len = p.len;
                self.held = Some(p);
                Ok(len)
            }
            other => Err(other),
        }
    }
}

impl Qdisc for Tbf {
    fn set_handle(&mut self, handle: Handle) {
        self.major = handle.major();
        self.child.parent = self.class_id();
    }

    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        if pkt.len > self.params.max_size || !self.timeable(pkt.len) {
            let seg = crate::gso::seg_len(&pkt);
            if pkt.gso.is_some() && seg <= self.params.max_size && self.timeable(seg) {
                return self.segment(pkt, cx);
            }
            return Err((pkt, DropReason::QueueFull));
        }
        if self.fifo_overflows(pkt.len) {
            // The fifo's own tail drop, which it counts too.
            self.child.stats.drops += 1;
            return Err((pkt, DropReason::QueueFull));
        }
        self.child.offer(pkt, cx)
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        let len = match self.head_len(cx) {
            Ok(len) => len,
            Err(answer) => return answer,
        };
        let now = cx.now;
        let elapsed = i64::try_from(now.saturating_since(self.state.t_c).as_nanos())
            .unwrap_or(i64::MAX)
            .min(self.params.buffer_ns);
        let toks = self.state.bucket.after(elapsed, len);
        // The peak bucket refills by the same (buffer-capped) elapsed time;
        // its committed tokens are never negative, so capping at its own
        // depth inside `after` changes nothing.
        let ptoks = self
            .state
            .peak
            .as_ref()
            .map_or(0, |p| p.after(elapsed, len));
        if toks >= 0 && ptoks >= 0 {
            let pkt = match self.held.take() {
                Some(p) => p,
                None => {
                    self.child_peeked = false;
                    let Dequeue::Packet(p) = self.child.dequeue(cx) else {
                        return Dequeue::Empty;
                    };
                    p
                }
            };
            self.state.t_c = now;
            self.state.bucket.tokens = toks;
            if let Some(p) = &mut self.state.peak {
                p.tokens = ptoks;
            }
            return Dequeue::Packet(pkt);
        }
        self.overlimits += 1;
        let wait_ns = toks.saturating_neg().max(ptoks.saturating_neg()).max(0) as u64;
        Dequeue::Wait(now + Duration(wait_ns))
    }

    fn reset(&mut self) {
        self.child.reset();
        self.held = None;
        self.child_peeked = false;
        // The kernel also moves t_c to now; with full buckets that changes nothing.
        let t_c = self.state.t_c;
        self.state = TbfState {
            t_c,
            ..self.params.full_buckets()
        };
    }

    fn change(&mut self, opts: &QdiscOpts, dev: &DevInfo) -> TcResult<()> {
        let o = match opts {
            QdiscOpts::Tbf(o) => o,
            _ => return Err(wrong_kind("tbf", opts)),
        };
        let params = TbfParams::from_opts(o)?;
        self.commit(params, dev)
    }

    fn dump(&self) -> QdiscOpts {
        let p = &self.params;
        // psched_ratecfg_getrate: the 32-bit field saturates, the rest is kept.
        let getrate = |r: &RateCfg| {
            let s = r.spec();
            RateSpec {
                rate: s.rate.min(u32::MAX as u64),
                ..s
            }
        };
        let wide = |r: &RateCfg| (r.rate() > u32::MAX as u64).then_some(r.rate());
        QdiscOpts::Tbf(TbfOpts {
            rate: getrate(&p.rate),
            peakrate: p.peak.as_ref().map(getrate).unwrap_or_default(),
            limit: p.limit,
            // PSCHED_NS2TICKS into the u32 fields of tc_tbf_qopt.
            buffer_ticks: ns_to_ticks(p.buffer_ns.max(0) as u64) as u32,
            mtu_ticks: ns_to_ticks(p.mtu_ns.max(0) as u64) as u32,
            rate64: wide(&p.rate),
            prate64: p.peak.as_ref().and_then(wide),
            burst: None,
            pburst: None,
            rtab: false,
            ptab: false,
        })
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for Tbf {
    /// tbf has no class `change` operation: `EOPNOTSUPP`. (Adding a class
    /// fails earlier with `EEXIST`, since every class id finds the one class.)
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

    /// tbf has no class `delete` operation: `EOPNOTSUPP`.
    fn delete_class(&mut self, classid: Handle) -> TcResult<()> {
        self.learn_major(classid);
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// The one class, `major:1` under `major:`.
    /// The kernel dumps no statistics for it (no `dump_stats`).
    fn list(&self) -> Vec<ClassInfo> {
        let leaf = self.child.handle;
        vec![ClassInfo {
            classid: self.class_id(),
            parent: Handle::new(self.major, 0),
            leaf: (!leaf.is_unspec()).then_some(leaf),
            opts: ClassOpts::Plain,
            stats: Stats::default(),
            xstats: XStats::Absent,
        }]
    }

    /// `tbf_find` answers every class id with the one class.
    fn contains(&self, _classid: Handle) -> bool {
        true
    }

    /// `tbf_leaf`: the one child, whatever the class id.
    fn leaf(&self, _classid: Handle) -> Option<&QdiscNode> {
        Some(&self.child)
    }

    /// `tbf_graft`: `None` leaves noop in the class. The old qdisc is handed
    /// back with its queue; purging it from the ancestors' counters
    /// (`qdisc_purge_queue`) is the caller's job.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        _dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        self.learn_major(classid);
        let new = new.unwrap_or_else(|| noop_child(classid));
        let mut old = std::mem::replace(&mut self.child, new);
        self.child_peeked = false;
        if let Some(p) = self.held.take() {
            // It belonged to the old qdisc's queue: give it back to be purged with it.
            let _ = old.enqueue(p, &mut Cx::default());
        }
        let old_is_noop = old.kind() == "noop";
        Ok((!old_is_noop).then_some(old))
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
    use crate::packet::Skb;
    use proptest::prelude::*;

    const MBIT: u64 = 125_000; // 1 Mbit/s in bytes/s

    fn eth(rate: u64) -> RateSpec {
        RateSpec {
            rate: rate.min(u32::MAX as u64),
            linklayer: LinkLayer::Ethernet,
            ..Default::default()
        }
    }

    #[test]
    fn the_longest_timeable_length_is_the_boundary_of_timeable_lengths() {
        let spec = |overhead, linklayer| {
            RateCfg::new(RateSpec {
                rate: 1_000 * MBIT,
                overhead,
                mpu: 64,
                linklayer,
            })
        };
        let eth0 = spec(0, LinkLayer::Ethernet);
        let eth_big = spec(i32::MAX, LinkLayer::Ethernet);
        let atm = spec(40, LinkLayer::Atm);
        for (rate, peak) in [
            (eth0, None),
            (eth_big, None),
            (atm, None),
            (eth0, Some(atm)),
            (eth_big, Some(eth0)),
        ] {
            let m = max_timeable(&rate, peak.as_ref()).unwrap();
            assert!(timeable_at(&rate, peak.as_ref(), m));
            assert!(m == u32::MAX || !timeable_at(&rate, peak.as_ref(), m + 1));
            for len in [0, 1, 1500, m / 2, m.saturating_sub(1)] {
                assert!(timeable_at(&rate, peak.as_ref(), len), "{len}");
            }
        }
        // ATM cells: 2^32 - 1 bytes need more than 2^32 - 1 wire bytes.
        assert!(max_timeable(&atm, None).unwrap() < u32::MAX);
        assert_eq!(max_timeable(&eth0, None), Some(u32::MAX));
    }

    /// Options as iproute2 sends them for `rate R burst B limit L`.
    fn opts(rate: u64, burst: u32, limit: u32) -> TbfOpts {
        TbfOpts {
            rate: eth(rate),
            limit,
            buffer_ticks: (burst as u64 * 15_625_000 / rate.max(1)) as u32,
            rate64: (rate > u32::MAX as u64).then_some(rate),
            burst: Some(burst),
            rtab: true,
            ..Default::default()
        }
    }

    /// ... plus `peakrate P mtu M`.
    fn with_peak(mut o: TbfOpts, prate: u64, mtu: u32) -> TbfOpts {
        o.peakrate = eth(prate);
        o.prate64 = (prate > u32::MAX as u64).then_some(prate);
        o.pburst = Some(mtu);
        o.mtu_ticks = (mtu as u64 * 15_625_000 / prate) as u32;
        o.ptab = true;
        o
    }

    fn tbf_node(o: &TbfOpts) -> QdiscNode {
        let q = Tbf::new(o, &DevInfo::default()).expect("valid options");
        QdiscNode::new(Handle::new(1, 0), Handle::ROOT, Box::new(q))
    }

    fn pkt(id: u64, len: u32) -> Packet {
        Packet::from(Skb {
            id,
            len,
            data: vec![0x45; 20],
            ..Default::default()
        })
    }

    fn dumped(n: &QdiscNode) -> TbfOpts {
        match n.qdisc.dump() {
            QdiscOpts::Tbf(o) => o,
            other => panic!("dumped {other:?}"),
        }
    }

    fn tbf_of(n: &mut QdiscNode) -> &mut dyn Classful {
        n.qdisc.classes().expect("tbf is classful")
    }

    // ---- configuration, checked against the kernel ----

    /// Buffer and mtu ticks and limits Linux 6.18 dumped
    /// (`tc -raw qdisc show`) for the tc commands in the comments.
    #[test]
    fn dump_matches_the_kernel() {
        let dev = DevInfo::default();
        let check = |o: TbfOpts, buffer: u32, mtu: u32| {
            let t = Tbf::new(&o, &dev).expect("kernel accepted these");
            let QdiscOpts::Tbf(d) = t.dump() else {
                panic!()
            };
            assert_eq!(
                (d.buffer_ticks, d.mtu_ticks, d.limit),
                (buffer, mtu, o.limit),
                "{o:?}"
            );
            d
        };
        // rate 1mbit burst 10k latency 50ms
        check(opts(MBIT, 10240, 16490), 0x138800, 0);
        // rate 1mbit burst 10k latency 50ms peakrate 2mbit mtu 1600
        check(
            with_peak(opts(MBIT, 10240, 14100), 2 * MBIT, 1600),
            0x138800,
            0x186a0,
        );
        // ... peakrate 2mbit minburst 3000
        check(
            with_peak(opts(MBIT, 10240, 15500), 2 * MBIT, 3000),
            0x138800,
            0x2dc6c,
        );
        // ... peakrate 1.5mbit mtu 2000
        check(
            with_peak(opts(MBIT, 10240, 11375), 187_500, 2000),
            0x138800,
            0x28b0a,
        );
        // rate 123456bit burst 3333 latency 7777us
        check(opts(15432, 3333, 3453), 0x337e5c, 0);
        // rate 10gbit burst 10k latency 10s
        check(opts(1_250_000_000, 10240, 3_910_075_648), 0x7f, 0);
        // rate 100mbit burst 1m latency 4000s
        check(opts(12_500_000, 1 << 20, 2_756_408_320), 0x140000, 0);
        // rate 40gbit burst 1m latency 10ms peakrate 50gbit mtu 9000: 64-bit rates
        let d = check(
            with_peak(
                opts(5_000_000_000, 1 << 20, 51_048_576),
                6_250_000_000,
                9000,
            ),
            0xccc,
            0x16,
        );
        assert_eq!(
            (d.rate.rate, d.rate64),
            (u32::MAX as u64, Some(5_000_000_000))
        );
        assert_eq!(
            (d.peakrate.rate, d.prate64),
            (u32::MAX as u64, Some(6_250_000_000))
        );
        assert_eq!(
            (d.burst, d.pburst),
            (None, None),
            "the kernel does not dump them"
        );
        // limit 1000 burst 1500 rate 20000 overhead 300
        let mut o = opts(2500, 1500, 1000);
        o.rate.overhead = 300;
        let d = check(o, 0xaba950, 0);
        assert_eq!(d.rate.overhead, 300);
        // limit 1000 burst 1500 rate 20000 linklayer atm
        let mut o = opts(2500, 1500, 1000);
        o.rate.linklayer = LinkLayer::Atm;
        assert_eq!(check(o, 0xa1be40, 0).rate.linklayer, LinkLayer::Atm);
        // limit 1000 burst 1500 rate 20000 mtu 1510 peakrate 30000
        check(
            with_peak(opts(2500, 1500, 1000), 3750, 1510),
            0x8f0d18,
            0x6000d2,
        );
        // rate 1mbit burst 100 latency 1ms mpu 64 overhead 20 linklayer atm
        let mut o = opts(MBIT, 100, 225);
        o.rate = RateSpec {
            mpu: 64,
            overhead: 20,
            linklayer: LinkLayer::Atm,
            ..o.rate
        };
        assert_eq!(check(o, 0x4da3, 0).rate.mpu, 64);
        // rate 1mbit burst 10k latency 50ms peakrate 2mbit mtu 1600 mpu 100 overhead 14 linklayer atm
        let spec = |rate| RateSpec {
            rate,
            mpu: 100,
            overhead: 14,
            linklayer: LinkLayer::Atm,
        };
        let mut o = with_peak(opts(MBIT, 10240, 14100), 2 * MBIT, 1600);
        (o.rate, o.peakrate) = (spec(MBIT), spec(2 * MBIT));
        check(o, 0x15a216, 0x1b7f1);
    }

    /// `limit` that tc 6.1 computed from `latency` (`tc -raw qdisc show`).
    #[test]
    fn limit_from_latency_matches_tc() {
        assert_eq!(limit_from_latency(MBIT, 10240, None, 50_000), 16490);
        assert_eq!(
            limit_from_latency(MBIT, 10240, Some((2 * MBIT, 1600)), 50_000),
            14100
        );
        assert_eq!(
            limit_from_latency(MBIT, 10240, Some((2 * MBIT, 3000)), 50_000),
            15500
        );
        assert_eq!(
            limit_from_latency(MBIT, 10240, Some((187_500, 2000)), 50_000),
            11375
        );
        assert_eq!(limit_from_latency(MBIT, 100, None, 1000), 225);
        assert_eq!(limit_from_latency(15432, 3333, None, 7777), 3453);
        let fast = Some((6_250_000_000, 9000));
        assert_eq!(
            limit_from_latency(5_000_000_000, 1 << 20, fast, 10_000),
            51_048_576
        );
        // Above 4 GiB the conversion to unsigned int wraps.
        assert_eq!(
            limit_from_latency(1_250_000_000, 10240, None, 10_000_000),
            3_910_075_648
        );
        assert_eq!(
            limit_from_latency(12_500_000, 1 << 20, None, 4_000_000_000),
            2_756_408_320
        );
        // The peak limit is compared before the wrap.
        let peak = Some((25_000_000, 3000));
        assert_eq!(
            limit_from_latency(12_500_000, 1 << 20, peak, 4_000_000_000),
            2_756_408_320
        );
    }

    #[test]
    fn peakrate_not_above_rate_is_refused_and_changes_nothing() {
        // Kernel: "RTNETLINK answers: Invalid argument" (no extack).
        let bad = with_peak(opts(MBIT, 10240, 5000), MBIT, 1500);
        let e = Tbf::new(&bad, &DevInfo::default()).unwrap_err();
        assert_eq!((e.errno, e.extack), (Errno::EINVAL, None));

        let mut n = tbf_node(&opts(MBIT, 10240, 16490));
        let before = dumped(&n);
        assert!(n
            .qdisc
            .change(&QdiscOpts::Tbf(bad), &DevInfo::default())
            .is_err());
        assert_eq!(dumped(&n), before);
        let e = n
            .qdisc
            .change(&QdiscOpts::Bfifo(FifoOpts::default()), &DevInfo::default());
        assert!(e.is_err());
        assert_eq!(dumped(&n), before);
    }

    #[test]
    fn zero_max_size_is_refused() {
        let dev = DevInfo::default();
        let e = Tbf::new(&opts(MBIT, 0, 1000), &dev).unwrap_err();
        assert_eq!((e.errno, e.extack), (Errno::EINVAL, None));
        // Without TCA_TBF_BURST the size comes from the buffer time.
        let o = TbfOpts {
            burst: None,
            buffer_ticks: 0,
            ..opts(MBIT, 1, 1000)
        };
        assert_eq!(Tbf::new(&o, &dev).unwrap_err().errno, Errno::EINVAL);
    }

    #[test]
    fn max_size_from_buffer_time_without_burst() {
        // 0x138800 ticks = 81.92 ms, which carries 10240 bytes at 1 Mbit/s.
        let o = TbfOpts {
            burst: None,
            buffer_ticks: 0x138800,
            ..opts(MBIT, 0, 100_000)
        };
        let mut n = tbf_node(&o);
        let mut cx = Cx::new(Time(0));
        assert!(n.enqueue(pkt(0, 10240), &mut cx).is_ok());
        assert_eq!(
            n.enqueue(pkt(1, 10241), &mut cx),
            Err(DropReason::QueueFull)
        );
        // With a peak bucket the smaller of the two sizes wins.
        let o = with_peak(opts(MBIT, 10240, 100_000), 2 * MBIT, 1600);
        let mut n = tbf_node(&o);
        assert!(n.enqueue(pkt(0, 1600), &mut cx).is_ok());
        assert!(n.enqueue(pkt(1, 1601), &mut cx).is_err());
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (1, 1600, 1));
    }

    // ---- the shaper ----

    #[test]
    fn waits_exactly_until_the_tokens_suffice() {
        // 1500-byte bucket at 1 Mbit/s: one packet at once, then one per 12 ms.
        let mut n = tbf_node(&opts(MBIT, 1500, 100_000));
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            n.enqueue(pkt(i, 1500), &mut cx).unwrap();
        }
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.id == 0));
        let cost = RateCfg::new(eth(MBIT)).l2t_ns(1500);
        assert!((11_999_000..=12_000_000).contains(&cost));
        assert_eq!(n.dequeue(&mut cx), Dequeue::Wait(Time(cost)));
        let mut early = Cx::new(Time(cost - 1));
        assert_eq!(n.dequeue(&mut early), Dequeue::Wait(Time(cost)));
        let mut on_time = Cx::new(Time(cost));
        assert!(matches!(n.dequeue(&mut on_time), Dequeue::Packet(p) if p.id == 1));
        assert_eq!(n.stats().overlimits, 2, "one per refused dequeue");
        let s = n.stats();
        assert_eq!((s.packets, s.bytes, s.qlen, s.backlog), (2, 3000, 1, 1500));
    }

    #[test]
    fn a_full_bucket_sends_a_burst_then_the_rate() {
        let mut n = tbf_node(&opts(MBIT, 10_000, 100_000));
        let mut cx = Cx::new(Time(0));
        for i in 0..20 {
            n.enqueue(pkt(i, 1000), &mut cx).unwrap();
        }
        let mut burst = 0;
        while let Dequeue::Packet(_) = n.dequeue(&mut cx) {
            burst += 1;
        }
        // Exactly ten 1000-byte packets fit a 10000-byte bucket.
        assert_eq!(burst, 10);
        assert_eq!(n.stats().qlen, 10);
    }

    #[test]
    fn packets_are_not_reordered_for_a_shorter_one() {
        let mut n = tbf_node(&opts(MBIT, 1500, 100_000));
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(0, 1000), &mut cx).unwrap();
        n.enqueue(pkt(1, 1500), &mut cx).unwrap();
        n.enqueue(pkt(2, 100), &mut cx).unwrap();
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.id == 0));
        // 500 bytes of tokens left: enough for packet 2, but packet 1 is first.
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Wait(_)));
    }

    #[test]
    fn change_refills_the_buckets() {
        let o = opts(MBIT, 3000, 100_000);
        let mut n = tbf_node(&o);
        let mut cx = Cx::new(Time(1_000_000));
        for i in 0..4 {
            n.enqueue(pkt(i, 1500), &mut cx).unwrap();
        }
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Wait(_)));
        n.qdisc
            .change(&QdiscOpts::Tbf(o), &DevInfo::default())
            .unwrap();
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        assert_eq!(n.stats().qlen, 0, "change keeps the queue");
    }

    #[test]
    fn reset_empties_the_queue_and_refills() {
        let mut n = tbf_node(&opts(MBIT, 1500, 100_000));
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            n.enqueue(pkt(i, 1500), &mut cx).unwrap();
        }
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        n.reset();
        assert_eq!(n.dequeue(&mut cx), Dequeue::Empty);
        n.enqueue(pkt(9, 1500), &mut cx).unwrap();
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.id == 9));
    }

    /// Saturate a tbf for `secs` of virtual time; bytes sent after the first second.
    fn saturated_rate(o: &TbfOpts, len: u32, secs: u64) -> f64 {
        let mut n = tbf_node(o);
        let (mut t, mut id, mut bytes) = (Time(0), 0, 0u64);
        let start = Time(1_000_000_000);
        let end = Time(secs * 1_000_000_000);
        while t < end {
            let mut cx = Cx::new(t);
            while n.stats().qlen < 8 {
                n.enqueue(pkt(id, len), &mut cx).unwrap();
                id += 1;
            }
            match n.dequeue(&mut cx) {
                Dequeue::Packet(p) if t >= start => bytes += p.len as u64,
                Dequeue::Packet(_) => {}
                Dequeue::Wait(w) => t = w,
                Dequeue::Empty => panic!("saturated queue reported empty"),
            }
        }
        bytes as f64 / (end - start).as_secs_f64()
    }

    #[test]
    fn long_run_throughput_is_the_rate() {
        for (rate, burst, len) in [
            (MBIT, 10240, 1000),
            (12_500_000, 30_000, 1514),
            (3000, 1500, 64),
        ] {
            let got = saturated_rate(&opts(rate, burst, 1 << 20), len, 11);
            let err = (got - rate as f64).abs() / rate as f64;
            assert!(err < 0.01, "rate {rate}: measured {got} B/s");
        }
        // With a peak rate the long-run rate is still the rate.
        let o = with_peak(opts(MBIT, 20_000, 1 << 20), 4 * MBIT, 1514);
        let got = saturated_rate(&o, 1500, 11);
        assert!(
            (got - MBIT as f64).abs() / (MBIT as f64) < 0.01,
            "measured {got}"
        );
    }

    /// Run arrivals (gap ns, size) through `n`, dequeuing whenever allowed;
    /// returns the (time, size) of every packet sent.
    fn run(n: &mut QdiscNode, arrivals: &[(u64, u32)]) -> Vec<(u64, u32)> {
        let mut sent = Vec::new();
        let (mut t, mut i, mut next_arrival) = (0u64, 0usize, arrivals.first().map(|a| a.0));
        let mut wake: Option<u64> = None;
        for _ in 0..100_000 {
            t = match (next_arrival, wake) {
                (Some(a), Some(w)) => a.min(w),
                (Some(a), None) => a,
                (None, Some(w)) => w,
                (None, None) => break,
            };
            let mut cx = Cx::new(Time(t));
            while next_arrival.is_some_and(|a| a <= t) {
                let _ = n.enqueue(pkt(i as u64, arrivals[i].1), &mut cx);
                i += 1;
                next_arrival = arrivals.get(i).map(|a| t + a.0);
            }
            wake = None;
            loop {
                match n.dequeue(&mut cx) {
                    Dequeue::Packet(p) => sent.push((t, p.len)),
                    Dequeue::Wait(w) => {
                        assert!(w.0 > t, "a wake-up in the past");
                        wake = Some(w.0);
                        break;
                    }
                    Dequeue::Empty => break,
                }
            }
        }
        assert!(
            next_arrival.is_none() && wake.is_none(),
            "simulation did not finish at {t}"
        );
        sent
    }

    /// Largest excess of bytes sent in any window over `depth + rate * t`,
    /// allowing the kernel's rounding (l2t rounds each packet's cost down by
    /// less than a nanosecond plus a 2^-30 relative error).
    fn worst_excess(sent: &[(u64, u32)], rate: u64, depth_bytes: u32) -> f64 {
        let mut worst = f64::MIN;
        for i in 0..sent.len() {
            let mut bytes = 0f64;
            for (k, &(tk, len)) in sent.iter().enumerate().skip(i) {
                bytes += len as f64;
                let window = (tk - sent[i].0) as f64 / 1e9;
                let n = (k - i + 1) as f64;
                let slack = rate as f64 * n * 1e-9 + bytes * 1e-9;
                let bound = depth_bytes as f64 + rate as f64 * window + slack;
                worst = worst.max(bytes - bound);
            }
        }
        worst
    }

    fn arrivals() -> impl Strategy<Value = Vec<(u64, u32)>> {
        prop::collection::vec((0u64..3_000_000, 64u32..=1514), 1..120)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// The conformance inequality: over any window the output is at most
        /// `burst + rate * t`.
        #[test]
        fn output_never_exceeds_burst_plus_rate_times_t(
            rate in 5_000u64..20_000_000,
            burst in 1514u32..40_000,
            limit in 3_000u32..200_000,
            arrivals in arrivals(),
        ) {
            let mut n = tbf_node(&opts(rate, burst, limit));
            let sent = run(&mut n, &arrivals);
            prop_assert!(worst_excess(&sent, rate, burst) <= 0.0);
            let s = n.stats();
            prop_assert_eq!(arrivals.len() as u64, s.packets + s.drops + s.qlen as u64);
        }

        /// With a peak rate, over any window the output is also at most
        /// `mtu + peakrate * t`.
        #[test]
        fn output_never_exceeds_mtu_plus_peakrate_times_t(
            rate in 5_000u64..2_000_000,
            peak_factor in 2u64..20,
            burst in 3_000u32..40_000,
            mtu in 1514u32..3_000,
            arrivals in arrivals(),
        ) {
            let prate = rate * peak_factor;
            let mut n = tbf_node(&with_peak(opts(rate, burst, 100_000), prate, mtu));
            let sent = run(&mut n, &arrivals);
            prop_assert!(worst_excess(&sent, prate, mtu) <= 0.0);
            prop_assert!(worst_excess(&sent, rate, burst) <= 0.0);
        }
    }

    #[test]
    fn peak_rate_spaces_a_burst() {
        // A 20 kB bucket would let 13 packets out at once; a 1500-byte peak
        // bucket at 10 Mbit/s lets one out per 1.2 ms.
        let mut n = tbf_node(&with_peak(opts(MBIT, 20_000, 100_000), 10 * MBIT, 1500));
        let arrivals: Vec<(u64, u32)> = (0..5).map(|_| (0, 1500)).collect();
        let sent = run(&mut n, &arrivals);
        let times: Vec<u64> = sent.iter().map(|s| s.0).collect();
        let gap = RateCfg::new(eth(10 * MBIT)).l2t_ns(1500);
        assert_eq!(times, vec![0, gap, 2 * gap, 3 * gap, 4 * gap]);
    }

    // ---- accounting ----

    #[test]
    fn drops_are_counted_and_packets_conserved() {
        let mut n = tbf_node(&opts(MBIT, 3000, 4000));
        let mut offered = 0u64;
        let mut t = 0u64;
        for round in 0..50u64 {
            let mut cx = Cx::new(Time(t));
            for k in 0..4 {
                let len = [100, 1500, 3001, 800][(round as usize + k) % 4];
                let _ = n.enqueue(pkt(offered, len), &mut cx);
                offered += 1;
            }
            if round == 20 {
                // A smaller limit applies to the default bfifo from now on.
                n.qdisc
                    .change(&QdiscOpts::Tbf(opts(MBIT, 3000, 2000)), &DevInfo::default())
                    .unwrap();
            }
            while let Dequeue::Packet(_) = n.dequeue(&mut cx) {}
            t += 3_000_000;
            let s = n.stats();
            assert_eq!(offered, s.packets + s.drops + s.qlen as u64);
            let child = tbf_of(&mut n).leaves_ref()[0].stats();
            assert_eq!((s.qlen, s.backlog), (child.qlen, child.backlog));
            assert!(child.backlog <= 4000);
        }
        let s = n.stats();
        assert!(s.drops > 0 && s.packets > 0 && s.overlimits > 0);
    }

    #[test]
    fn the_bfifo_limit_counts_the_packet_waiting_for_tokens() {
        let mut n = tbf_node(&opts(MBIT, 1500, 3000));
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(0, 1500), &mut cx).unwrap();
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(_)));
        n.enqueue(pkt(1, 1500), &mut cx).unwrap();
        n.enqueue(pkt(2, 1500), &mut cx).unwrap();
        // Packet 1 waits for tokens at the head; the bfifo holds 3000 bytes.
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Wait(_)));
        assert_eq!(n.enqueue(pkt(3, 1500), &mut cx), Err(DropReason::QueueFull));
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (2, 3000, 1));
        let fifo = tbf_of(&mut n).leaves_ref()[0].stats();
        assert_eq!((fifo.qlen, fifo.backlog, fifo.drops), (2, 3000, 1));
    }

    #[test]
    fn oversized_packets_are_dropped_not_queued() {
        let mut n = tbf_node(&opts(MBIT, 1500, 100_000));
        let mut cx = Cx::new(Time(0));
        assert_eq!(n.enqueue(pkt(0, 1501), &mut cx), Err(DropReason::QueueFull));
        assert!(n.enqueue(pkt(1, 1500), &mut cx).is_ok());
        let s = n.stats();
        assert_eq!((s.drops, s.qlen, s.backlog), (1, 1, 1500));
        // A packet whose ATM-framed length overflows 32 bits is dropped, not mistimed.
        let mut o = opts(MBIT, u32::MAX, 100_000);
        o.rate.linklayer = LinkLayer::Atm;
        let mut n = tbf_node(&o);
        assert!(n.enqueue(pkt(2, 4_000_000_000), &mut cx).is_err());
    }

    // ---- the class and the inner qdisc ----

    #[test]
    fn one_class_with_the_default_bfifo() {
        let mut n = tbf_node(&opts(MBIT, 10240, 16490));
        let c = tbf_of(&mut n);
        let list = c.list();
        assert_eq!(list.len(), 1);
        assert_eq!(
            (list[0].classid.minor(), list[0].leaf),
            (1, None),
            "bfifo 0: is no leaf"
        );
        assert_eq!(list[0].opts, ClassOpts::Plain);
        let leaves = c.leaves_ref();
        assert_eq!(leaves.len(), 1);
        assert!(leaves[0].handle.is_unspec());
        assert_eq!(
            leaves[0].qdisc.dump(),
            QdiscOpts::Bfifo(FifoOpts { limit: Some(16490) })
        );
        // Every class id finds the class (tbf_find); nothing can be added, changed or deleted.
        assert!(c.contains(Handle::new(1, 5)));
        let dev = DevInfo::default();
        let e = c
            .change_class(Handle::new(1, 1), Handle::new(1, 0), None, &dev)
            .unwrap_err();
        assert_eq!((e.errno, e.extack), (Errno::EOPNOTSUPP, None));
        assert_eq!(
            c.delete_class(Handle::new(1, 1)).unwrap_err().errno,
            Errno::EOPNOTSUPP
        );
        let list = c.list();
        assert_eq!(
            (list[0].classid, list[0].parent),
            (Handle::new(1, 1), Handle::new(1, 0))
        );
        assert_eq!(c.leaves_ref()[0].parent, Handle::new(1, 1));
    }

    #[test]
    fn graft_change_and_delete_the_inner_qdisc_as_the_kernel_does() {
        let dev = DevInfo::default();
        let mut n = tbf_node(&opts(MBIT, 10240, 16490));
        // tc qdisc add dev D parent 1:1 handle 10: pfifo
        let pfifo = QdiscNode::new(
            Handle::new(0x10, 0),
            Handle::new(1, 1),
            Box::new(Fifo::pfifo(1000)),
        );
        let old = tbf_of(&mut n)
            .graft(Handle::new(1, 1), Some(pfifo), &dev)
            .unwrap();
        assert_eq!(old.map(|o| o.kind()), Some("bfifo"));
        assert_eq!(tbf_of(&mut n).list()[0].leaf, Some(Handle::new(0x10, 0)));

        // tc qdisc change ... tbf ... limit 5000: observed "pfifo 10: ... limit 5000p".
        n.qdisc
            .change(&QdiscOpts::Tbf(opts(MBIT, 10240, 5000)), &dev)
            .unwrap();
        let leaf = &tbf_of(&mut n).leaves_ref()[0].qdisc;
        assert_eq!(
            leaf.dump(),
            QdiscOpts::Pfifo(FifoOpts { limit: Some(5000) })
        );

        // tc qdisc del dev D parent 1:1: noop is left, which drops everything.
        let old = tbf_of(&mut n).graft(Handle::new(1, 1), None, &dev).unwrap();
        assert_eq!(old.map(|o| o.handle), Some(Handle::new(0x10, 0)));
        assert!(tbf_of(&mut n).leaves_ref().is_empty());
        assert_eq!(tbf_of(&mut n).list()[0].leaf, None);
        let mut cx = Cx::new(Time(0));
        assert_eq!(n.enqueue(pkt(0, 100), &mut cx), Err(DropReason::Noop));
        assert_eq!(n.stats().drops, 1);

        // tc qdisc change ... limit 7000: observed "bfifo 0: parent 1:1 limit 7000b".
        n.qdisc
            .change(&QdiscOpts::Tbf(opts(MBIT, 10240, 7000)), &dev)
            .unwrap();
        let leaves = tbf_of(&mut n).leaves_ref();
        assert_eq!(
            leaves[0].qdisc.dump(),
            QdiscOpts::Bfifo(FifoOpts { limit: Some(7000) })
        );
        assert_eq!(
            (leaves[0].handle, leaves[0].parent),
            (Handle::UNSPEC, Handle::new(1, 1))
        );
        assert!(n.enqueue(pkt(1, 100), &mut cx).is_ok());
    }

    #[test]
    fn a_throttled_inner_qdisc_is_waited_for() {
        let dev = DevInfo::default();
        // A fast outer tbf over a slow inner one: the inner one sets the pace.
        let mut n = tbf_node(&opts(10 * MBIT, 1500, 100_000));
        let inner = Tbf::new(&opts(MBIT, 1500, 100_000), &dev).unwrap();
        let inner = QdiscNode::new(Handle::new(0x10, 0), Handle::new(1, 1), Box::new(inner));
        tbf_of(&mut n)
            .graft(Handle::new(1, 1), Some(inner), &dev)
            .unwrap();
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(0, 1500), &mut cx).unwrap();
        n.enqueue(pkt(1, 1500), &mut cx).unwrap();
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.id == 0));
        let inner_wait = RateCfg::new(eth(MBIT)).l2t_ns(1500);
        assert_eq!(n.dequeue(&mut cx), Dequeue::Wait(Time(inner_wait)));
        assert_eq!(
            n.qdisc.overlimits(),
            0,
            "the outer bucket was not the reason"
        );
        let mut later = Cx::new(Time(inner_wait));
        assert!(matches!(n.dequeue(&mut later), Dequeue::Packet(p) if p.id == 1));
        let s = n.stats();
        assert_eq!((s.packets, s.qlen), (2, 0));
    }

    #[test]
    fn dump_recreates_the_same_qdisc() {
        let o = with_peak(opts(MBIT, 10240, 14100), 2 * MBIT, 1600);
        let a = Tbf::new(&o, &DevInfo::default()).unwrap();
        let QdiscOpts::Tbf(d) = a.dump() else {
            panic!()
        };
        let b = Tbf::new(&d, &DevInfo::default()).unwrap();
        assert_eq!(b.dump(), a.dump());
        assert_eq!(b.params.max_size, a.params.max_size);
    }
}
