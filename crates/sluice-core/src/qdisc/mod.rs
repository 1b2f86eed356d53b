//! Queueing disciplines: the trait every qdisc implements, the node that
//! wraps each one with its statistics, and the registry of kinds.
//!
//! The trait is modelled on the kernel's `Qdisc_ops`: `enqueue`, `dequeue`,
//! `reset`, `change` (which `init` calls), `dump`. Two differences make it
//! sans-IO: time arrives in a [`Cx`], and instead of arming a watchdog timer a
//! qdisc that holds packets it may not yet send answers [`Dequeue::Wait`] with
//! the time to come back.
//!
//! Statistics live in [`QdiscNode`], which wraps every qdisc — the root and
//! every child a classful qdisc owns — so the counters are updated in one
//! place. A qdisc that drops packets it had already queued (head drop, AQM, a
//! child's drop seen from its parent) reports them with [`Cx::shed`]; each
//! node on the way up subtracts them from its backlog and counts them as
//! drops, which is what the kernel's `qdisc_tree_reduce_backlog` does.

pub mod cake;
pub mod cbq;
pub mod cbs;
pub mod choke;
pub mod class_hash;
pub mod codel;
pub mod codel_law;
pub mod drr;
pub mod drr_core;
pub mod etf;
pub mod ets;
pub mod fifo;
pub mod flow_hash;
pub mod fq;
pub mod fq_codel;
pub mod fq_pie;
pub mod gred;
pub mod hfsc;
pub mod hhf;
pub mod htb;
pub mod ingress;
pub mod mq;
pub mod mqprio;
pub mod multiq;
pub mod netem;
pub mod noqueue;
pub mod pfifo_fast;
pub mod pie;
pub mod pie_law;
pub mod plug;
pub mod prio;
pub mod qfq;
pub mod red;
pub mod red_law;
pub mod sfb;
pub mod sfq;
pub mod skbprio;
pub mod taprio;
pub mod tbf;
pub mod token_bucket;

use crate::error::{TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::{DropReason, RateEstimator, Stats};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// What a dequeue yields.
#[derive(Debug, PartialEq, Eq)]
pub enum Dequeue {
    /// The next packet to transmit.
    Packet(Packet),
    /// Packets are queued but none may leave before this time (the watchdog).
    Wait(Time),
    /// Nothing is queued.
    Empty,
}

impl Dequeue {
    /// The earlier of two wake-up answers, for a parent that asks several children.
    pub fn earliest(a: Option<Time>, b: Option<Time>) -> Option<Time> {
        match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, None) => x,
            (None, y) => y,
        }
    }
}

/// Per-call context: the time, and a tally of queued packets shed during the call.
#[derive(Debug, Default)]
pub struct Cx {
    /// The current time.
    pub now: Time,
    shed_packets: u64,
    shed_bytes: u64,
    /// Packets and bytes that segmentation added below (a GSO packet
    /// counted once became its segments), for every node on the way up.
    split_packets: u64,
    split_bytes: i64,
    /// Drops the qdisc being called counts itself, its ancestors not.
    own_drops: u64,
    /// The four running totals above as they stood before each shed,
    /// split or own drop, in order. A node notes the journal's length
    /// before a call; if it grew, the entry at that length holds the totals
    /// the call started from. On the common path nothing happens, and a
    /// node pays one comparison.
    journal: Vec<Tally>,
    /// Every queued packet shed during calls with this context, with its
    /// reason and length (for tracing; the front end clears it). Refused
    /// packets are not listed: the outermost enqueue returns their reason.
    pub drops: Vec<(DropReason, u32)>,
    /// Packets a qdisc wants enqueued at the root of its tree (netem's
    /// duplicates: the kernel calls the root's enqueue for them). Whoever
    /// enqueues at the root drains this with [`QdiscNode::enqueue_root`].
    pub to_root: Vec<Packet>,
    /// True while such packets are being enqueued: they are not duplicated again.
    pub reinjecting: bool,
}

impl Cx {
    /// A context at `now`.
    pub fn new(now: Time) -> Self {
        Cx {
            now,
            ..Default::default()
        }
    }

    /// Make this context what [`Cx::new`] makes at `now`, keeping its
    /// buffers: a caller that calls into qdiscs per packet (a port) keeps
    /// one context rather than make and drop one, three `Vec`s, each time.
    pub fn reset(&mut self, now: Time) {
        self.now = now;
        self.shed_packets = 0;
        self.shed_bytes = 0;
        self.split_packets = 0;
        self.split_bytes = 0;
        self.own_drops = 0;
        self.journal.clear();
        self.drops.clear();
        self.to_root.clear();
        self.reinjecting = false;
    }
    /// Report that a packet of `len` bytes that was queued below has been dropped.
    pub fn shed(&mut self, len: u32, reason: DropReason) {
        self.note();
        self.shed_packets += 1;
        self.shed_bytes += len as u64;
        self.drops.push((reason, len));
    }

    /// Report that a packet queued below as one (counted at `len` bytes)
    /// now stands in the queue as `1 + extra` packets of `len + byte_delta`
    /// bytes: a GSO packet segmented (`tbf_segment`, `netem_segment`). Each
    /// node on the way up grows its queue length and backlog accordingly,
    /// as the kernel's `qdisc_tree_reduce_backlog` with a negative count.
    pub fn split(&mut self, extra: u32, byte_delta: i64) {
        self.note();
        self.split_packets += extra as u64;
        self.split_bytes += byte_delta;
    }

    /// Count `n` drops at the qdisc being called only (not its parents): the
    /// kernel's `qdisc_qstats_drop(sch)` for segments a qdisc could not queue.
    pub fn drop_here(&mut self, n: u64) {
        self.note();
        self.own_drops += n;
    }

    /// Journal the running totals before an event changes them.
    fn note(&mut self) {
        self.journal.push(Tally {
            shed_packets: self.shed_packets,
            shed_bytes: self.shed_bytes,
            split_packets: self.split_packets,
            split_bytes: self.split_bytes,
        });
    }

    /// Where the journal stands before a call ([`QdiscNode::account_shed`]).
    #[inline(always)]
    fn mark(&self) -> usize {
        self.journal.len()
    }
}

/// The running totals of a [`Cx`] before an event.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    shed_packets: u64,
    shed_bytes: u64,
    split_packets: u64,
    split_bytes: i64,
}

/// Information about the device a qdisc is attached to (`qdisc_dev(sch)`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DevInfo {
    /// Interface name.
    pub name: String,
    /// MTU in bytes.
    pub mtu: u32,
    /// Transmit queue length (the default limit of fifos).
    pub txqueuelen: u32,
    /// Length of the link-layer header added on the wire (14 for Ethernet).
    pub hard_header_len: u32,
    /// Seed for qdiscs that need randomness (sfq's perturbation, netem): each
    /// such qdisc seeds its own generator from this, so runs are repeatable.
    #[serde(default)]
    pub seed: u64,
    /// The link speed ethtool reports, in Mbit/s (0: none; cbs then counts
    /// 10): a veth pair's 10 000, a simulated interface's link rate.
    #[serde(default)]
    pub speed: u32,
    /// Transmit queues (`numtxqueues`, 1..=4096); more than one makes the
    /// device multi-queue, the home of [`mq`].
    #[serde(default = "one_queue")]
    pub num_tx_queues: u32,
}

fn one_queue() -> u32 {
    1
}

impl DevInfo {
    /// The queue length that default limits derive from (pfifo's limit, HTB's
    /// direct_qlen, ...): `txqueuelen`, except that a device whose
    /// txqueuelen is 0 gives 1000, as kernel 6.18 was observed to do
    /// (tests/golden/devices.golden, "txqueuelen 0 effects").
    pub fn default_qlen(&self) -> u32 {
        if self.txqueuelen == 0 {
            1000
        } else {
            self.txqueuelen
        }
    }
}

impl Default for DevInfo {
    fn default() -> Self {
        DevInfo {
            name: "eth0".into(),
            mtu: 1500,
            txqueuelen: 1000,
            hard_header_len: 14,
            seed: 0,
            speed: 0,
            num_tx_queues: 1,
        }
    }
}

/// Queue a GSO packet as its segments (`tbf_segment`,
/// `taprio_enqueue_segmented`): `offer` takes each segment and says whether
/// it was queued. The tree counted one packet; it now counts the segments
/// queued ([`Cx::split`]). Segments not queued are drops here; when none
/// is, the packet is refused.
pub(crate) fn offer_segments(
    pkt: Packet,
    cx: &mut Cx,
    mut offer: impl FnMut(Packet, &mut Cx) -> bool,
) -> Result<(), (Packet, DropReason)> {
    let Ok(segs) = crate::gso::segment(&pkt) else {
        return Err((pkt, DropReason::QueueFull));
    };
    let (mut queued, mut bytes, mut refused) = (0u32, 0i64, 0u64);
    for seg in segs {
        let len = seg.len;
        if offer(seg, cx) {
            queued += 1;
            bytes += len as i64;
        } else {
            refused += 1;
        }
    }
    if queued == 0 {
        // The node counts the refused packet as one of the drops.
        cx.drop_here(refused - 1);
        return Err((pkt, DropReason::QueueFull));
    }
    cx.drop_here(refused);
    cx.split(queued - 1, bytes - pkt.len as i64);
    Ok(())
}

/// Options of every kind of qdisc, as tc sends them and the kernel dumps them.
///
/// Each variant's struct lives in that qdisc's file. Optional fields are the
/// netlink attributes that may be absent; `dump` fills in what the kernel
/// reports, and creating a qdisc from its dump gives the same qdisc.
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QdiscOpts {
    Pfifo(fifo::FifoOpts),
    Bfifo(fifo::FifoOpts),
    PfifoHeadDrop(fifo::FifoOpts),
    PfifoFast(pfifo_fast::PfifoFastOpts),
    Prio(prio::PrioOpts),
    Tbf(tbf::TbfOpts),
    Sfq(sfq::SfqOpts),
    Htb(htb::HtbOpts),
    Hfsc(hfsc::HfscOpts),
    Cbq(cbq::CbqOpts),
    Ingress(ingress::IngressOpts),
    Clsact(ingress::IngressOpts),
    Netem(netem::NetemOpts),
    Codel(codel::CodelOpts),
    FqCodel(fq_codel::FqCodelOpts),
    Red(red::RedOpts),
    Choke(choke::ChokeOpts),
    Pie(pie::PieOpts),
    FqPie(fq_pie::FqPieOpts),
    Drr(drr::DrrOpts),
    Qfq(qfq::QfqOpts),
    Ets(ets::EtsOpts),
    Skbprio(skbprio::SkbprioOpts),
    Plug(plug::PlugOpts),
    Multiq(multiq::MultiqOpts),
    Fq(fq::FqOpts),
    Cake(cake::CakeOpts),
    Sfb(sfb::SfbOpts),
    Gred(gred::GredOpts),
    Hhf(hhf::HhfOpts),
    Cbs(cbs::CbsOpts),
    Mqprio(mqprio::MqprioOpts),
    Taprio(taprio::TaprioOpts),
    Etf(etf::EtfOpts),
    /// mq: no options.
    Mq,
    Noqueue,
    Noop,
}

impl QdiscOpts {
    /// The kind name tc uses (`pfifo`, `htb`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            QdiscOpts::Pfifo(_) => "pfifo",
            QdiscOpts::Bfifo(_) => "bfifo",
            QdiscOpts::PfifoHeadDrop(_) => "pfifo_head_drop",
            QdiscOpts::PfifoFast(_) => "pfifo_fast",
            QdiscOpts::Prio(_) => "prio",
            QdiscOpts::Tbf(_) => "tbf",
            QdiscOpts::Sfq(_) => "sfq",
            QdiscOpts::Htb(_) => "htb",
            QdiscOpts::Hfsc(_) => "hfsc",
            QdiscOpts::Cbq(_) => "cbq",
            QdiscOpts::Ingress(_) => "ingress",
            QdiscOpts::Clsact(_) => "clsact",
            QdiscOpts::Netem(_) => "netem",
            QdiscOpts::Codel(_) => "codel",
            QdiscOpts::FqCodel(_) => "fq_codel",
            QdiscOpts::Red(_) => "red",
            QdiscOpts::Choke(_) => "choke",
            QdiscOpts::Pie(_) => "pie",
            QdiscOpts::FqPie(_) => "fq_pie",
            QdiscOpts::Drr(_) => "drr",
            QdiscOpts::Qfq(_) => "qfq",
            QdiscOpts::Ets(_) => "ets",
            QdiscOpts::Skbprio(_) => "skbprio",
            QdiscOpts::Plug(_) => "plug",
            QdiscOpts::Multiq(_) => "multiq",
            QdiscOpts::Fq(_) => "fq",
            QdiscOpts::Cake(_) => "cake",
            QdiscOpts::Sfb(_) => "sfb",
            QdiscOpts::Gred(_) => "gred",
            QdiscOpts::Hhf(_) => "hhf",
            QdiscOpts::Cbs(_) => "cbs",
            QdiscOpts::Mqprio(_) => "mqprio",
            QdiscOpts::Taprio(_) => "taprio",
            QdiscOpts::Etf(_) => "etf",
            QdiscOpts::Mq => "mq",
            QdiscOpts::Noqueue => "noqueue",
            QdiscOpts::Noop => "noop",
        }
    }
}

/// The kinds sluice implements (those `create` can build).
pub const KINDS: &[&str] = &[
    "pfifo",
    "bfifo",
    "pfifo_head_drop",
    "pfifo_fast",
    "prio",
    "tbf",
    "sfq",
    "htb",
    "hfsc",
    "cbq",
    "ingress",
    "clsact",
    "noqueue",
    "netem",
    "codel",
    "fq_codel",
    "red",
    "choke",
    "pie",
    "fq_pie",
    "drr",
    "qfq",
    "ets",
    "skbprio",
    "plug",
    "fq",
    "cake",
    "sfb",
    "gred",
    "hhf",
    "cbs",
    "mq",
    "multiq",
    "mqprio",
    "taprio",
    "etf",
];

/// `qdisc_block_indexes_set`: may a qdisc of these options be bound to
/// shared blocks? Only ingress (its ingress hook) and clsact (both) have
/// the operations; the kernel checks before the qdisc's init.
pub fn check_block_sharing(opts: &QdiscOpts, ingress: bool, egress: bool) -> TcResult<()> {
    let (may_ingress, may_egress) = match opts {
        QdiscOpts::Ingress(_) => (true, false),
        QdiscOpts::Clsact(_) => (true, true),
        _ => (false, false),
    };
    if ingress && !may_ingress {
        return Err(TcError::msg(
            crate::error::Errno::EOPNOTSUPP,
            "Ingress block sharing is not supported",
        ));
    }
    if egress && !may_egress {
        return Err(TcError::msg(
            crate::error::Errno::EOPNOTSUPP,
            "Egress block sharing is not supported",
        ));
    }
    Ok(())
}

/// Build a qdisc of the kind `opts` names (`qdisc_create` + `init`).
pub fn create(opts: &QdiscOpts, dev: &DevInfo) -> TcResult<Box<dyn Qdisc>> {
    Ok(match opts {
        QdiscOpts::Pfifo(o) => Box::new(fifo::Fifo::new(fifo::FifoKind::Packets, o, dev)?),
        QdiscOpts::Bfifo(o) => Box::new(fifo::Fifo::new(fifo::FifoKind::Bytes, o, dev)?),
        QdiscOpts::PfifoHeadDrop(o) => Box::new(fifo::Fifo::new(fifo::FifoKind::HeadDrop, o, dev)?),
        QdiscOpts::PfifoFast(o) => Box::new(pfifo_fast::PfifoFast::new(o, dev)?),
        QdiscOpts::Prio(o) => Box::new(prio::Prio::new(o, dev)?),
        QdiscOpts::Tbf(o) => Box::new(tbf::Tbf::new(o, dev)?),
        QdiscOpts::Sfq(o) => Box::new(sfq::Sfq::new(o, dev)?),
        QdiscOpts::Htb(o) => Box::new(htb::Htb::new(o, dev)?),
        QdiscOpts::Hfsc(o) => Box::new(hfsc::Hfsc::new(o, dev)?),
        QdiscOpts::Cbq(o) => Box::new(cbq::Cbq::new(o, dev)?),
        QdiscOpts::Ingress(o) => Box::new(ingress::Ingress::new(
            ingress::IngressKind::Ingress,
            o,
            dev,
        )?),
        QdiscOpts::Clsact(o) => {
            Box::new(ingress::Ingress::new(ingress::IngressKind::Clsact, o, dev)?)
        }
        QdiscOpts::Netem(o) => Box::new(netem::Netem::new(o, dev)?),
        QdiscOpts::Codel(o) => Box::new(codel::Codel::new(o, dev)?),
        QdiscOpts::FqCodel(o) => Box::new(fq_codel::FqCodel::new(o, dev)?),
        QdiscOpts::Red(o) => Box::new(red::Red::new(o, dev)?),
        QdiscOpts::Choke(o) => Box::new(choke::Choke::new(o, dev)?),
        QdiscOpts::Pie(o) => Box::new(pie::Pie::new(o, dev)?),
        QdiscOpts::FqPie(o) => Box::new(fq_pie::FqPie::new(o, dev)?),
        QdiscOpts::Drr(o) => Box::new(drr::Drr::new(o, dev)?),
        QdiscOpts::Qfq(o) => Box::new(qfq::Qfq::new(o, dev)?),
        QdiscOpts::Ets(o) => Box::new(ets::Ets::new(o, dev)?),
        QdiscOpts::Skbprio(o) => Box::new(skbprio::Skbprio::new(o, dev)?),
        QdiscOpts::Plug(o) => Box::new(plug::Plug::new(o, dev)?),
        QdiscOpts::Multiq(o) => Box::new(multiq::Multiq::new(o, dev)?),
        QdiscOpts::Fq(o) => Box::new(fq::Fq::new(o, dev)?),
        QdiscOpts::Cake(o) => Box::new(cake::Cake::new(o, dev)?),
        QdiscOpts::Sfb(o) => Box::new(sfb::Sfb::new(o, dev)?),
        QdiscOpts::Gred(o) => Box::new(gred::Gred::new(o, dev)?),
        QdiscOpts::Hhf(o) => Box::new(hhf::Hhf::new(o, dev)?),
        QdiscOpts::Cbs(o) => Box::new(cbs::Cbs::new(o, dev)?),
        QdiscOpts::Mq => Box::new(mq::Mq::new(dev)?),
        QdiscOpts::Mqprio(o) => Box::new(mqprio::Mqprio::new(o, dev)?),
        QdiscOpts::Taprio(o) => Box::new(taprio::Taprio::new(o, dev)?),
        QdiscOpts::Etf(o) => Box::new(etf::Etf::new(o, dev)?),
        QdiscOpts::Noqueue => Box::new(noqueue::Noqueue::new(false)),
        QdiscOpts::Noop => Box::new(noqueue::Noqueue::new(true)),
    })
}

/// Per-kind extended statistics (`TCA_STATS_APP`), for `tc -s`.
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum XStats {
    None,
    /// The class dumps no statistics at all (tbf's class has no `dump_stats`).
    Absent,
    /// HTB class statistics (lended, borrowed, giants, tokens, ctokens).
    HtbClass(htb::HtbClassXstats),
    /// HFSC class statistics (period, work, rtwork, level).
    HfscClass(hfsc::HfscClassXstats),
    /// CBQ qdisc (the link class) and class statistics.
    Cbq(cbq::CbqXstats),
    /// SFQ class (flow) statistics.
    SfqClass(sfq::SfqClassXstats),
    /// codel qdisc statistics.
    Codel(codel::CodelXstats),
    /// fq_codel qdisc statistics.
    FqCodel(fq_codel::FqCodelXstats),
    /// fq_codel class (flow) statistics.
    FqCodelClass(fq_codel::FqCodelClassXstats),
    /// red qdisc statistics.
    Red(red::RedXstats),
    /// choke qdisc statistics.
    Choke(choke::ChokeXstats),
    /// pie qdisc statistics.
    Pie(pie::PieXstats),
    /// fq_pie qdisc statistics.
    FqPie(fq_pie::FqPieXstats),
    /// drr class statistics (deficit).
    DrrClass(drr::DrrClassXstats),
    /// qfq class statistics (weight, lmax).
    QfqClass(qfq::QfqClassXstats),
    /// The class dumps queue counters only, no bytes or packets (skbprio's priorities).
    QueueOnly,
    /// fq qdisc statistics.
    Fq(fq::FqXstats),
    /// cake qdisc statistics.
    Cake(cake::CakeXstats),
    /// cake class (queue) statistics.
    CakeClass(cake::CakeClassXstats),
    /// sfb qdisc statistics.
    Sfb(sfb::SfbXstats),
    /// hhf qdisc statistics.
    Hhf(hhf::HhfXstats),
}

/// A queueing discipline. Implementations keep their own queues and state;
/// the wrapping [`QdiscNode`] keeps the counters.
pub trait Qdisc: Send + std::fmt::Debug {
    /// Queue `pkt`, or refuse it with the reason. May shed other queued packets
    /// (reported through [`Cx::shed`]).
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)>;
    /// Take the next packet to send, or say when to come back.
    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue;
    /// The length of the packet `dequeue` would hand out now, read in place
    /// without taking it, for qdiscs whose head can be read so (the
    /// kernel's fifos' `qdisc_peek_head`): `Some(None)` when empty. `None`
    /// (the default) when the qdisc cannot tell that way; the node then
    /// peeks by dequeueing ([`QdiscNode::peek`]).
    fn peek_len(&self) -> Option<Option<u32>> {
        None
    }
    /// Drop everything queued (`qdisc_reset`); statistics are the node's business.
    fn reset(&mut self);
    /// Validate `opts` completely, then apply them (`tc qdisc change`).
    fn change(&mut self, opts: &QdiscOpts, dev: &DevInfo) -> TcResult<()>;
    /// The current options, as the kernel dumps them.
    fn dump(&self) -> QdiscOpts;
    /// How often the qdisc throttled (kept by qdiscs that shape).
    fn overlimits(&self) -> u64 {
        0
    }
    /// Counters the qdisc keeps itself instead of the node's, when the
    /// kernel counts differently from the generic enqueue/dequeue path
    /// (ingress and clsact count every packet reaching a hook with filters,
    /// at network-layer length).
    fn own_stats(&self) -> Option<Stats> {
        None
    }
    /// Per-kind statistics.
    fn xstats(&self) -> XStats {
        XStats::None
    }
    /// Told the qdisc's own handle when it is wrapped in a node (classful
    /// qdiscs name their classes `major:minor`).
    fn set_handle(&mut self, _handle: Handle) {}
    /// clsact's egress hook (`sch_handle_egress`): run a packet about to be
    /// enqueued into the device's root qdisc through the egress filters.
    /// `None` for every other qdisc (and so: carry on).
    fn egress_hook(&mut self, _pkt: &mut Packet, _now: Time) -> Option<ingress::IngressVerdict> {
        None
    }
    /// The device's link changed (`NETDEV_CHANGE`: a new speed); cbs
    /// reads its port rate again.
    fn device_changed(&mut self, _dev: &DevInfo) {}
    /// A creation or change was committed at `now`: start what depends on
    /// the time of it (taprio's new schedule).
    fn installed(&mut self, _now: Time) {}
    /// Bring what runs on timers up to `now` before the qdisc is shown or
    /// changed (taprio's schedule, which moves with no packet to send).
    fn settle(&mut self, _now: Time) {}

    /// A warning the last configuration change produced (the kernel's
    /// extended ack on success, e.g. HTB's "quantum of class ... is big"),
    /// taken so it is reported once.
    fn take_warning(&mut self) -> Option<String> {
        None
    }
    /// The filter block `tc filter ... parent X` attaches to
    /// (`cl_ops->tcf_block`): the qdisc's own for minor 0, a class's for
    /// `X:minor` (clsact: `ffff:fff2` ingress, `ffff:fff3` egress). `None`
    /// when the qdisc or that class holds no filters.
    fn block_mut(&mut self, _classid: Handle) -> Option<&mut crate::cls::Block> {
        None
    }
    /// The shared block the filters of `classid` are in (ingress and
    /// clsact bound to `ingress_block`/`egress_block`).
    fn shared_block(&self, _classid: Handle) -> Option<crate::cls::shared::SharedBlockRef> {
        None
    }
    /// Bind the hooks to shared blocks, once created; only ingress and
    /// clsact have any (see [`check_block_sharing`]).
    fn bind_shared_blocks(
        &mut self,
        _ingress: Option<crate::cls::shared::SharedBlockRef>,
        _egress: Option<crate::cls::shared::SharedBlockRef>,
    ) {
    }
    /// The filter block, read-only (for `tc filter show`).
    fn block(&self, _classid: Handle) -> Option<&crate::cls::Block> {
        None
    }
    /// The class interface, for classful qdiscs.
    fn classes(&mut self) -> Option<&mut dyn Classful> {
        None
    }
    /// The class interface, read-only.
    fn classes_ref(&self) -> Option<&dyn Classful> {
        None
    }
}

/// One class as `tc class show` lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassInfo {
    /// The class id.
    pub classid: Handle,
    /// The parent class, or the qdisc handle for top-level classes.
    pub parent: Handle,
    /// Handle of the attached leaf qdisc, if any.
    pub leaf: Option<Handle>,
    /// Per-kind class options and statistics, for printing.
    pub opts: ClassOpts,
    /// Counters.
    pub stats: Stats,
    /// Per-kind class statistics.
    pub xstats: XStats,
}

/// Options of a class, per qdisc kind.
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClassOpts {
    /// Classes with nothing to configure (prio bands, sfq flows).
    Plain,
    /// An HTB class.
    Htb(htb::HtbClassOpts),
    /// An HFSC class.
    Hfsc(hfsc::HfscClassOpts),
    /// A CBQ class.
    Cbq(cbq::CbqOpts),
    /// A drr class.
    Drr(drr::DrrClassOpts),
    /// A qfq class.
    Qfq(qfq::QfqClassOpts),
    /// An ets band.
    Ets(ets::EtsClassOpts),
}

/// The class side of a classful qdisc (`Qdisc_class_ops`).
pub trait Classful {
    /// Create class `classid` under `parent` or change it (`cl_ops->change`).
    fn change_class(
        &mut self,
        classid: Handle,
        parent: Handle,
        opts: Option<&ClassOpts>,
        dev: &DevInfo,
    ) -> TcResult<()>;
    /// Delete a class (`cl_ops->delete`).
    fn delete_class(&mut self, classid: Handle) -> TcResult<()>;
    /// Every class, parents before children.
    fn list(&self) -> Vec<ClassInfo>;
    /// Does the class exist?
    fn contains(&self, classid: Handle) -> bool {
        self.list().iter().any(|c| c.classid == classid)
    }
    /// Attach `new` as the class's leaf; `None` puts back what the kind
    /// uses when a leaf is deleted (a default pfifo for htb and prio, noop
    /// for tbf). Returns the old leaf (`cl_ops->graft`).
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>>;
    /// The qdisc attached to class `classid` (`cl_ops->leaf`).
    fn leaf(&self, classid: Handle) -> Option<&QdiscNode> {
        self.leaves_ref().into_iter().find(|l| l.parent == classid)
    }
    /// Packets and bytes the last class operation dropped from the queue
    /// (a grafted-out leaf, a deleted class, a leaf turned inner), so the
    /// caller can take them off the ancestors' backlog as
    /// `qdisc_tree_reduce_backlog` does; taken, so they are reported once.
    fn take_purged(&mut self) -> (u64, u64) {
        (0, 0)
    }
    /// The leaf qdiscs, for walking the tree.
    fn leaves(&mut self) -> Vec<&mut QdiscNode>;
    /// The leaf qdiscs, read-only.
    fn leaves_ref(&self) -> Vec<&QdiscNode>;
}

/// A qdisc in a tree: its handle, parent, counters and the qdisc itself.
#[derive(Debug)]
pub struct QdiscNode {
    /// This qdisc's handle (`major:0`).
    pub handle: Handle,
    /// The parent class (or `ROOT` / `INGRESS`).
    pub parent: Handle,
    /// Counters, updated by the node around every call.
    pub stats: Stats,
    /// The rate estimator, if one was configured.
    pub estimator: Option<RateEstimator>,
    /// The size table (`stab`), if one was configured.
    pub stab: Option<crate::stab::SizeTable>,
    /// The qdisc.
    pub qdisc: Box<dyn Qdisc>,
    /// A packet taken from the qdisc by `peek` and not yet dequeued.
    peeked: Option<Packet>,
    /// Creation order on its device (the kernel's hash lists put the newest first).
    pub seq: u64,
    /// The kind name, fixed at creation (`change` cannot change it).
    kind: &'static str,
    /// `TCQ_F_INVISIBLE`: a default child its parent made with a class or
    /// with its options (`qdisc_hash_add(q, true)`), listed only by `tc
    /// qdisc show invisible`. Defaults that replace a deleted qdisc are not
    /// hashed in the kernel and stay false: no dump shows them.
    pub invisible: bool,
    /// A handle-0 qdisc its parent hashed visibly (`qdisc_hash_add(q,
    /// false)`: cbs's first default child), which `tc qdisc show` lists.
    pub listed: bool,
    /// The qdisc is a fifo: empty exactly when the node counts no packet,
    /// and its dequeue of nothing does nothing, so the node answers for it
    /// (a prio parent asks its empty bands on every dequeue).
    fifo: bool,
    /// Rate estimators of the qdisc's classes (`tc class add ... estimator`),
    /// by class id. A class's counters change only as the qdisc dequeues,
    /// so the samples due are taken at the start of a dequeue
    /// ([`QdiscNode::sample_classes`]) and when the rates are read.
    class_estimators: Vec<(Handle, RateEstimator)>,
    /// When the next of them is due (never, without any).
    next_class_sample: Time,
}

impl QdiscNode {
    /// Wrap a qdisc.
    pub fn new(handle: Handle, parent: Handle, mut qdisc: Box<dyn Qdisc>) -> Self {
        qdisc.set_handle(handle);
        let kind = qdisc.dump().kind();
        QdiscNode {
            handle,
            parent,
            stats: Stats::default(),
            estimator: None,
            stab: None,
            qdisc,
            peeked: None,
            seq: 0,
            invisible: false,
            listed: false,
            kind,
            fifo: matches!(kind, "pfifo" | "bfifo" | "pfifo_head_drop"),
            class_estimators: Vec::new(),
            next_class_sample: Time(u64::MAX),
        }
    }

    /// The counters of class `classid`, if the qdisc has it.
    fn class_stats(&self, classid: Handle) -> Option<Stats> {
        let cls = self.qdisc.classes_ref()?;
        cls.list()
            .into_iter()
            .find(|c| c.classid == classid)
            .map(|c| c.stats)
    }

    /// Give class `classid` a rate estimator from `now` (`gen_replace_estimator`
    /// in htb, hfsc, drr, qfq and cbq's class change), or forget its estimator
    /// (the class was deleted).
    pub fn set_class_estimator(&mut self, classid: Handle, e: Option<RateEstimator>, now: Time) {
        let old = self
            .class_estimators
            .iter()
            .position(|(id, _)| *id == classid)
            .map(|i| self.class_estimators.remove(i).1);
        if let Some(e) = e {
            let stats = self.class_stats(classid).unwrap_or_default();
            let e = e.replacing(old.as_ref(), now, &stats);
            self.class_estimators.push((classid, e));
        }
        self.next_class_sample = self
            .class_estimators
            .iter()
            .filter_map(|(_, e)| e.next_due())
            .min()
            .unwrap_or(Time(u64::MAX));
    }

    /// Take the class estimators' samples due by `now`.
    #[cold]
    #[inline(never)]
    fn sample_classes(&mut self, now: Time) {
        let list = self
            .qdisc
            .classes_ref()
            .map(|c| c.list())
            .unwrap_or_default();
        let mut next = Time(u64::MAX);
        for (id, e) in &mut self.class_estimators {
            if let Some(c) = list.iter().find(|c| c.classid == *id) {
                e.advance(now, &c.stats);
            }
            next = next.min(e.next_due().unwrap_or(next));
        }
        self.next_class_sample = next;
    }

    /// The rate estimate of class `classid` at `now`, whose counters are
    /// `stats` (`None`: the class has no estimator).
    pub fn class_rate(&self, classid: Handle, now: Time, stats: &Stats) -> Option<(u64, u64)> {
        self.class_estimators
            .iter()
            .find(|(id, _)| *id == classid)
            .map(|(_, e)| e.read_at(now, stats))
    }

    /// Create a qdisc of the kind `opts` names and wrap it.
    pub fn create(
        handle: Handle,
        parent: Handle,
        opts: &QdiscOpts,
        dev: &DevInfo,
    ) -> TcResult<Self> {
        Ok(Self::new(handle, parent, create(opts, dev)?))
    }

    /// This node, marked [`QdiscNode::invisible`].
    pub fn hashed_invisible(mut self) -> Self {
        self.invisible = true;
        self
    }

    /// This node, marked [`QdiscNode::listed`].
    pub fn hashed_visible(mut self) -> Self {
        self.listed = true;
        self
    }

    /// The kind name.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Enqueue at the root of a tree: the packet, then any packets the tree
    /// asked to have enqueued at its root meanwhile (netem duplicates), which
    /// are not duplicated again (`Cx::reinjecting`). The result is the
    /// original packet's; refused copies are counted as drops as usual.
    pub fn enqueue_root(&mut self, pkt: Packet, cx: &mut Cx) -> Result<(), DropReason> {
        let r = self.enqueue(pkt, cx);
        if !cx.to_root.is_empty() {
            let again = std::mem::replace(&mut cx.reinjecting, true);
            for p in std::mem::take(&mut cx.to_root) {
                let _ = self.enqueue(p, cx);
            }
            cx.reinjecting = again;
        }
        r
    }

    /// Enqueue through the qdisc, keeping the counters. `Err` means the packet
    /// was not queued (and was counted as dropped unless stolen).
    #[inline]
    pub fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Result<(), DropReason> {
        self.offer(pkt, cx).map_err(|(_, r)| r)
    }

    /// [`QdiscNode::enqueue`] that hands a refused packet back, for a parent
    /// qdisc that must itself answer with the packet.
    ///
    /// `offer` and `dequeue` are inlined into every caller, even a parent's
    /// loop over its children: the wrapper is small, and inlined it saves a
    /// call and a packet copy per tree level (`sluice bench`: prio -8 %,
    /// tbf -3 % instructions per packet against a plain `#[inline]`).
    #[inline(always)]
    pub fn offer(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        if let Some(t) = &self.stab {
            t.apply(&mut pkt);
        }
        let len = pkt.len;
        let t0 = cx.mark();
        let r = self.qdisc.enqueue(pkt, cx);
        self.account_shed(cx, t0);
        match &r {
            Ok(()) => {
                self.stats.qlen += 1;
                self.stats.backlog += len as u64;
            }
            Err((_, reason)) => {
                if reason.counts() {
                    self.stats.drops += 1;
                }
            }
        }
        r
    }

    /// Dequeue through the qdisc, keeping the counters.
    #[inline(always)]
    pub fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        if self.fifo && self.stats.qlen == 0 {
            // A peeked packet would be counted in qlen.
            return Dequeue::Empty;
        }
        // A packet `peek` took goes first (the rare case, kept out of line).
        if self.peeked.is_some() {
            return self.dequeue_peeked(cx.now);
        }
        if cx.now >= self.next_class_sample {
            self.sample_classes(cx.now);
        }
        let t0 = cx.mark();
        let d = self.qdisc.dequeue(cx);
        self.account_shed(cx, t0);
        if let Dequeue::Packet(p) = &d {
            self.count_out(p.len, p.segs(), cx.now);
        }
        d
    }

    /// Hand out the packet a `peek` took from the qdisc.
    #[inline(never)]
    fn dequeue_peeked(&mut self, now: Time) -> Dequeue {
        match self.peeked.take() {
            Some(p) => {
                self.count_out(p.len, p.segs(), now);
                Dequeue::Packet(p)
            }
            None => Dequeue::Empty,
        }
    }

    /// Count a packet of `len` bytes (`segs` wire packets) leaving the qdisc.
    #[inline]
    fn count_out(&mut self, len: u32, segs: u32, now: Time) {
        self.stats.qlen -= 1;
        // A child's size table may have changed the length since this
        // qdisc counted it in (the kernel's backlog drifts the same way).
        self.stats.backlog = self.stats.backlog.saturating_sub(len as u64);
        // The estimator's samples due by now saw the counters without this packet.
        if let Some(e) = &mut self.estimator {
            e.advance(now, &self.stats);
        }
        self.stats.bytes += len as u64;
        self.stats.packets += segs as u64;
    }

    /// Look at the next packet without taking it (`qdisc_peek_dequeued`): the
    /// packet is dequeued from the qdisc and held here until `dequeue`.
    #[inline]
    pub fn peek(&mut self, cx: &mut Cx) -> Option<&Packet> {
        if self.peeked.is_none() {
            let t0 = cx.mark();
            let d = self.qdisc.dequeue(cx);
            self.account_shed(cx, t0);
            match d {
                Dequeue::Packet(p) => self.peeked = Some(p),
                _ => return None,
            }
        }
        self.peeked.as_ref()
    }

    /// The length of the next packet, as [`QdiscNode::peek`] finds it, but
    /// read in place when the qdisc can ([`Qdisc::peek_len`]): a fifo then
    /// keeps its head, as the kernel's do.
    #[inline]
    pub fn peek_len(&mut self, cx: &mut Cx) -> Option<u32> {
        if let Some(p) = &self.peeked {
            return Some(p.len);
        }
        if let Some(head) = self.qdisc.peek_len() {
            return head;
        }
        self.peek(cx).map(|p| p.len)
    }

    /// Does the node hold a packet `peek` took from its qdisc?
    pub fn holds_peeked(&self) -> bool {
        self.peeked.is_some()
    }

    /// [`QdiscNode::peek`] that also tells why there is no packet: `Err(Some(t))`
    /// when the qdisc holds packets it may not send before `t`, `Err(None)`
    /// when it is empty (for round-robin parents such as drr and ets).
    pub fn peek_or_wait(&mut self, cx: &mut Cx) -> Result<&Packet, Option<Time>> {
        if self.peeked.is_none() {
            let t0 = cx.mark();
            let d = self.qdisc.dequeue(cx);
            self.account_shed(cx, t0);
            match d {
                Dequeue::Packet(p) => self.peeked = Some(p),
                Dequeue::Wait(t) => return Err(Some(t)),
                Dequeue::Empty => return Err(None),
            }
        }
        self.peeked.as_ref().ok_or(None)
    }

    /// Drop everything queued in this subtree (`qdisc_reset`).
    pub fn reset(&mut self) {
        self.qdisc.reset();
        self.peeked = None;
        self.stats.qlen = 0;
        self.stats.backlog = 0;
    }

    /// Counters as `tc -s` shows them (overlimits come from the qdisc).
    pub fn stats(&self) -> Stats {
        if let Some(s) = self.qdisc.own_stats() {
            return s;
        }
        Stats {
            overlimits: self.stats.overlimits + self.qdisc.overlimits(),
            ..self.stats
        }
    }

    /// Apply what happened below during one call: packets shed (dropped
    /// from the queue), packets split into segments, drops counted here.
    /// Nothing happened on the common path, which costs one comparison.
    #[inline(always)]
    fn account_shed(&mut self, cx: &mut Cx, mark: usize) {
        if cx.journal.len() != mark {
            self.account_events(cx, cx.journal[mark]);
        }
    }

    #[cold]
    #[inline(never)]
    fn account_events(&mut self, cx: &mut Cx, t0: Tally) {
        let (sp, sb) = (
            cx.split_packets - t0.split_packets,
            cx.split_bytes - t0.split_bytes,
        );
        if sp > 0 || sb != 0 {
            self.stats.qlen += sp as u32;
            self.stats.backlog = self.stats.backlog.saturating_add_signed(sb);
        }
        let (p, b) = (
            cx.shed_packets - t0.shed_packets,
            cx.shed_bytes - t0.shed_bytes,
        );
        if p > 0 {
            self.stats.qlen -= p as u32;
            self.stats.backlog -= b;
            self.stats.drops += p;
        }
        self.stats.drops += std::mem::take(&mut cx.own_drops);
    }

    /// Find the qdisc with handle `major:` in this subtree.
    pub fn find(&self, handle: Handle) -> Option<&QdiscNode> {
        if self.handle == handle {
            return Some(self);
        }
        self.qdisc
            .classes_ref()?
            .leaves_ref()
            .into_iter()
            .find_map(|l| l.find(handle))
    }

    /// Find the qdisc with handle `major:` in this subtree, mutably.
    pub fn find_mut(&mut self, handle: Handle) -> Option<&mut QdiscNode> {
        if self.handle == handle {
            return Some(self);
        }
        self.qdisc
            .classes()?
            .leaves()
            .into_iter()
            .find_map(|l| l.find_mut(handle))
    }

    /// Every qdisc in this subtree, this one first, depth first.
    pub fn walk(&self) -> Vec<&QdiscNode> {
        let mut out = vec![self];
        if let Some(c) = self.qdisc.classes_ref() {
            for l in c.leaves_ref() {
                out.extend(l.walk());
            }
        }
        out
    }

    /// Tell this qdisc and every one below it that the device changed.
    pub fn device_changed(&mut self, dev: &DevInfo) {
        self.qdisc.device_changed(dev);
        if let Some(c) = self.qdisc.classes() {
            for l in c.leaves() {
                l.device_changed(dev);
            }
        }
    }
}

/// Checks shared by qdiscs' `change`: refuse options of another kind.
pub fn wrong_kind(expected: &str, got: &QdiscOpts) -> TcError {
    TcError::inval(format!(
        "qdisc kind mismatch: expected {expected}, got {}",
        got.kind()
    ))
}

/// The classification of qdiscs whose classes are a flat set with no default
/// (`drr_classify`, `qfq_classify`, the same code in both): a
/// `skb->priority` whose major is the qdisc's names the class directly if
/// `exists` says it does; otherwise the qdisc's filters run (`drop` drops and
/// counts, `stolen`/`queued`/`trap` consume silently, no match or a class
/// that does not exist drops and counts).
pub fn classify_flat(
    handle: Handle,
    block: &mut crate::cls::Block,
    exists: impl Fn(u32) -> bool,
    pkt: &mut Packet,
    now: Time,
) -> Result<u32, DropReason> {
    use crate::cls::Verdict;
    if (pkt.priority ^ handle.0) & 0xffff_0000 == 0 && exists(pkt.priority) {
        return Ok(pkt.priority);
    }
    let Some(r) = block.classify(pkt, now) else {
        return Err(DropReason::Unclassified);
    };
    match r.verdict {
        Verdict::Shot => Err(DropReason::Action),
        Verdict::Stolen | Verdict::Queued | Verdict::Trap => Err(DropReason::Stolen),
        Verdict::Continue => Err(DropReason::Unclassified),
        _ if exists(r.classid.0) => Ok(r.classid.0),
        _ => Err(DropReason::Unclassified),
    }
}
