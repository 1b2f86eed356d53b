//! u32: the universal 32-bit key classifier — hash tables of key nodes.
//!
//! Modelled on net/sched/cls_u32.c (Linux 6.18). Filter elements are *key
//! nodes* ("knodes") kept in the buckets of *hash tables*. A knode holds a
//! selector (`tc_u32_sel`): 32-bit keys `(val, mask, off, offmask)` compared
//! with the packet's bytes at `off` from the network header (plus
//! `nexthdr+` offsets), a mark test, a class id, actions, and optionally a
//! `link` to another table.
//!
//! Classification starts in the instance's root table, bucket 0, and walks
//! the bucket's knodes in order of their node id. A knode whose keys all
//! match either ends the walk (if it carries the `terminal` flag, which tc
//! sets with `flowid`/`classid`, `action` or `police`) — its actions run, and
//! an answer of `continue` moves on to the next knode — or, with a link,
//! descends into the linked table: the bucket is `(key & hmask) >> fshift`
//! masked by the table's size, read at `hoff`, and `offset`/`eat` may move
//! the base offset forward by a header length read from the packet. At most
//! 8 levels deep. When a linked table yields nothing, the walk resumes after
//! the linking knode. Reading beyond the packet's bytes aborts the whole
//! classification of this instance (`skb_header_pointer` failing), it does
//! not merely fail one key.
//!
//! Handles are `table:bucket:node` (12:8:12 bits). Table ids come from a
//! cyclic allocator (`800:`, `801:`, ...) shared, like the tables themselves,
//! by every u32 instance of one qdisc — its classes' blocks included
//! (`tc_u_common`, keyed by the qdisc); the first instance's root is `800:`
//! without an allocation. Node ids are the lowest free at or above 0x800 in
//! the table. A walk (`tc filter show`) lists, newest table first, every
//! table whose priority equals the instance's, each followed by its knodes
//! bucket by bucket — so two instances of one qdisc with the same priority
//! (on different classes or chains) list each other's tables, exactly as the
//! kernel does.
//!
//! `tc filter change`/`replace` of an existing knode keeps its selector and
//! mark and replaces the class id (cleared if not given), actions and link.
//! Deleting a table needs it unlinked; the root table goes with its instance.
//!
//! Counters: every knode counts visits, terminal hits and per-key successes
//! (`CONFIG_CLS_U32_PERF`) and mark successes (`CONFIG_CLS_U32_MARK`); the
//! mark test is applied as in kernels built with `CONFIG_CLS_U32_MARK`.
//! The dump always carries them; a kernel built without these options (like
//! the one the golden outputs come from) neither tests marks nor reports them.
//!
//! # Classifying without the lock
//!
//! The tables are shared by several instances, and Rust wants shared state
//! that changes behind a lock (a `Mutex`: instances must be `Send`). Taking
//! that lock in every instance a packet tries cost about as much as walking
//! a short bucket, so classification does not take it. It reads a
//! *snapshot* instead, much as the kernel's readers walk RCU-protected
//! lists while writers replace what they change:
//!
//! - a snapshot is an immutable copy of what matching needs — every table,
//!   bucket and knode, links resolved to table indices — taken by the first
//!   classification after a change and shared, read-only, by the instances;
//! - every change (under the lock) drops the cached snapshot and moves a
//!   generation number, an atomic beside the lock; an instance compares it
//!   with the generation of its snapshot before each classification, a
//!   load and a compare, and takes a new snapshot when they differ;
//! - the counters are not copied: knode and snapshot share them, as
//!   atomics, so a dump reads what classification counted, exactly;
//! - the actions are not copied either: a snapshot reaches them through a
//!   weak reference. The knode alone owns them, since their bind counts are
//!   reference counts: a deleted filter unbinds its actions at once, not
//!   when some instance next takes a snapshot.
//!
//! The price is paid by changes: the first classification after one copies
//! the tables again (once for all instances). Filters added while no
//! packet flows cost nothing more; changing filters between every two
//! packets would cost a copy each time.
//!
//! Only one classification runs at a time (the qdisc that owns all these
//! instances is borrowed mutably for it), so the counters are bumped with a
//! plain load and store, not a locked read-modify-write. A walk that
//! follows no link needs no stack: links recurse, and the root table's walk
//! is inlined into `classify`.
//!
//! Deviations: the packet's bytes start at the network header, so keys at
//! negative offsets (the link-layer header) read nothing and abort; `indev`
//! is validated and dumped but, packets carrying no input interface, always
//! matches; hardware offload is not modelled (`skip_sw` knodes never match;
//! a `skip_sw` table is refused as the kernel does without offload).

use super::act::police::PoliceSpec;
use super::act::{ActionDump, ActionSpec, Exts, InitCtx};
use super::{
    check_indev, tc_flags_valid, ChangeReq, Classifier, ClassifyResult, ClsEnv, FilterElemOpts,
    FilterElement, FilterOpts, Verdict, TCA_CLS_FLAGS_IN_HW, TCA_CLS_FLAGS_NOT_IN_HW,
    TCA_CLS_FLAGS_SKIP_SW,
};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// Selector flag: the knode ends the walk when it matches (tc sets it with a class id or actions).
pub const TC_U32_TERMINAL: u8 = 1;
/// Selector flag: `offset plus N`.
pub const TC_U32_OFFSET: u8 = 2;
/// Selector flag: `offset at N mask M shift S` (offset read from the packet).
pub const TC_U32_VAROFFSET: u8 = 4;
/// Selector flag: `eat` (move the base offset for the linked table).
pub const TC_U32_EAT: u8 = 8;
/// Deepest chain of links (`TC_U32_MAXDEPTH`).
pub const TC_U32_MAXDEPTH: usize = 8;
/// The table id meaning "this instance's root table".
pub const TC_U32_ROOT: u32 = 0xFFF0_0000;

/// The table part of a handle (`TC_U32_HTID`).
pub fn htid(h: u32) -> u32 {
    h & 0xFFF0_0000
}
/// The table id as printed (`TC_U32_USERHTID`).
pub fn user_htid(h: u32) -> u32 {
    h >> 20
}
/// The bucket part (`TC_U32_HASH`).
pub fn bucket(h: u32) -> u32 {
    (h >> 12) & 0xFF
}
/// The node part (`TC_U32_NODE`).
pub fn node(h: u32) -> u32 {
    h & 0xFFF
}
/// Bucket and node (`TC_U32_KEY`); 0 for a table.
pub fn key(h: u32) -> u32 {
    h & 0xF_FFFF
}
fn id2handle(id: u32) -> u32 {
    (id | 0x800) << 20
}
fn handle2id(h: u32) -> u32 {
    if h & 0x8000_0000 != 0 {
        (h >> 20) & 0x7FF
    } else {
        h
    }
}

/// One 32-bit key (`struct tc_u32_key`). `val` and `mask` are the packet's
/// four bytes read big-endian (what iproute2 prints as `match VAL/MASK at OFF`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32Key {
    /// Value after masking.
    pub val: u32,
    /// Mask.
    pub mask: u32,
    /// Offset from the current base.
    pub off: i32,
    /// Mask applied to the `nexthdr` offset before adding it (-1 for `nexthdr+`, else 0).
    pub offmask: i32,
}

/// The selector (`struct tc_u32_sel`); 16-bit fields in host order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32Sel {
    /// `TC_U32_TERMINAL | OFFSET | VAROFFSET | EAT`.
    pub flags: u8,
    /// `offset ... shift S`.
    pub offshift: u8,
    /// `offset ... mask M`: mask of the 16-bit header-length field.
    pub offmask: u16,
    /// `offset plus N`.
    pub off: u16,
    /// `offset at N`: where the 16-bit header-length field is.
    pub offoff: i16,
    /// `hashkey ... at N`.
    pub hoff: i16,
    /// `hashkey mask M`.
    pub hmask: u32,
    /// The keys, all of which must match.
    pub keys: Vec<U32Key>,
}

/// `TCA_U32_MARK`: `match mark VAL MASK`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32Mark {
    /// The marked bits.
    pub val: u32,
    /// Which bits of the mark to compare.
    pub mask: u32,
}

/// The u32 options tc sends (`TCA_U32_*`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32Opts {
    /// `TCA_U32_CLASSID` (`classid`/`flowid`).
    #[serde(default)]
    pub classid: Option<Handle>,
    /// `TCA_U32_HASH` (`ht T:B:`): table and bucket to insert into.
    #[serde(default)]
    pub hash: Option<u32>,
    /// `TCA_U32_LINK` (`link T:`).
    #[serde(default)]
    pub link: Option<u32>,
    /// `TCA_U32_DIVISOR`: create a table with this many buckets.
    #[serde(default)]
    pub divisor: Option<u32>,
    /// `TCA_U32_SEL`.
    #[serde(default)]
    pub sel: Option<U32Sel>,
    /// `TCA_U32_INDEV`.
    #[serde(default)]
    pub indev: Option<String>,
    /// `TCA_U32_MARK`.
    #[serde(default)]
    pub mark: Option<U32Mark>,
    /// `TCA_U32_FLAGS` (`skip_hw`, `skip_sw`).
    #[serde(default)]
    pub flags: Option<u32>,
    /// `TCA_U32_ACT`.
    #[serde(default)]
    pub actions: Vec<ActionSpec>,
    /// `TCA_U32_POLICE` (the old `police` keyword).
    #[serde(default)]
    pub police: Option<PoliceSpec>,
}

/// Performance counters (`struct tc_u32_pcnt`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32Pcnt {
    /// Packets that reached the knode ("rule hit").
    pub rcnt: u64,
    /// Packets the knode classified ("success").
    pub rhit: u64,
    /// Successes per key.
    pub kcnts: Vec<u64>,
}

/// `struct tc_u32_mark` as dumped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32MarkDump {
    /// Value.
    pub val: u32,
    /// Mask.
    pub mask: u32,
    /// Packets that passed the mark test.
    pub success: u32,
}

/// A knode as the kernel dumps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32KnodeDump {
    /// `TCA_U32_SEL`.
    pub sel: U32Sel,
    /// `TCA_U32_HASH`: table and bucket (`handle & 0xfffff000`).
    pub hash: u32,
    /// `TCA_U32_CLASSID`, if set.
    pub classid: Option<Handle>,
    /// `TCA_U32_LINK`, if linked.
    pub link: Option<u32>,
    /// `TCA_U32_FLAGS`: user flags plus `not_in_hw`.
    pub flags: u32,
    /// `TCA_U32_MARK`, if a mark test is set.
    pub mark: Option<U32MarkDump>,
    /// `TCA_U32_ACT`.
    pub actions: Vec<ActionDump>,
    /// `TCA_U32_POLICE` (old-style policer).
    pub police: Option<ActionDump>,
    /// `TCA_U32_INDEV`.
    pub indev: Option<String>,
    /// `TCA_U32_PCNT`.
    pub pcnt: U32Pcnt,
}

#[derive(Debug)]
struct Knode {
    handle: u32,
    sel: U32Sel,
    fshift: u8,
    classid: Handle,
    /// Handle of the linked table, 0 for none.
    link: u32,
    /// The actions. Only the knode owns them (a snapshot holds a weak
    /// reference): their bind counts are reference counts.
    exts: Arc<Exts>,
    indev: Option<String>,
    mark: U32Mark,
    flags: u32,
    /// Shared with the snapshots, which count into them.
    counters: Arc<Counters>,
}

/// A knode's counters (`tc_u32_pcnt` and the mark's `success`).
#[derive(Debug, Default)]
struct Counters {
    /// Packets that reached the knode.
    rcnt: AtomicU64,
    /// Packets it classified.
    rhit: AtomicU64,
    /// Successes per key, one per key of the selector (which never changes).
    kcnts: Box<[AtomicU64]>,
    /// Packets that passed the mark test.
    mark_success: AtomicU32,
}

impl Counters {
    fn new(keys: usize) -> Self {
        Counters {
            kcnts: (0..keys).map(|_| AtomicU64::new(0)).collect(),
            ..Default::default()
        }
    }
}

/// Count one. Only one classification through a qdisc runs at a time (the
/// qdisc, owner of every instance that counts here, is borrowed mutably for
/// it), so a plain load and store do: a locked read-modify-write would cost
/// more and buy nothing. (Were that ever not so, counts could be lost, but
/// nothing worse.)
fn bump(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

fn bump32(c: &AtomicU32) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

#[derive(Debug)]
struct Ht {
    handle: u32,
    prio: u16,
    /// Number of buckets minus one (a mask).
    divisor: u32,
    /// One for existing plus one per linking knode.
    refcnt: u32,
    is_root: bool,
    buckets: Vec<Vec<Knode>>,
    /// Node handles in use (`ht->handle_idr`).
    node_ids: BTreeSet<u32>,
}

/// The state shared by the u32 instances of one qdisc (`tc_u_common`).
#[derive(Debug, Default)]
struct Common {
    /// Tables, newest first (`hlist`).
    hts: Vec<Ht>,
    /// Table ids in use (`handle_idr`).
    ids: BTreeSet<u32>,
    /// Cursor of the cyclic id allocator.
    next_id: u32,
    /// Instances sharing this state.
    tps: u32,
    /// Knodes in all tables.
    knodes: usize,
    /// The snapshot of the tables as they are, once some instance needed one.
    snapshot: Option<Arc<Snapshot>>,
}

/// The u32 state of one qdisc as its instances share it: the tables behind
/// a lock, and a generation number, read without the lock, that moves
/// whenever the tables change.
#[derive(Debug, Default)]
struct Shared {
    generation: AtomicU64,
    common: Mutex<Common>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Common> {
        self.common.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Lock to change the tables: the snapshot goes and the generation
    /// moves, so every instance takes a new snapshot before it classifies
    /// again. (Every change goes through here, failed ones too: a needless
    /// new snapshot costs little, a stale one would be wrong.)
    fn edit(&self) -> MutexGuard<'_, Common> {
        let mut c = self.lock();
        c.snapshot = None;
        self.generation.fetch_add(1, Ordering::Release);
        c
    }
}

/// Automatic table ids are 1..0x7FF (`idr_alloc_cyclic(.., 1, 0x7FF)`).
const ID_START: u32 = 1;
const ID_END: u32 = 0x7FF;

enum Found {
    Ht(usize),
    Knode(usize, usize, usize),
}

impl Common {
    fn find(&self, handle: u32) -> Option<usize> {
        self.hts.iter().position(|h| h.handle == handle)
    }

    /// `idr_alloc_cyclic`: the lowest free id at or after the cursor, wrapping once.
    fn alloc_cyclic(&mut self) -> Option<u32> {
        let free = |from: u32| (from..ID_END).find(|i| !self.ids.contains(i));
        let id = free(self.next_id.max(ID_START)).or_else(|| free(ID_START))?;
        self.ids.insert(id);
        self.next_id = id + 1;
        Some(id2handle(id))
    }

    fn unlink(&mut self, link: u32) {
        if let Some(i) = self.find(link) {
            self.hts[i].refcnt = self.hts[i].refcnt.saturating_sub(1);
        }
    }

    fn drop_knode(&mut self, k: Knode) {
        self.knodes = self.knodes.saturating_sub(1);
        if k.link != 0 {
            self.unlink(k.link);
        }
    }

    /// `u32_destroy_hnode`: drop the table's knodes and the table.
    fn destroy_ht(&mut self, i: usize) {
        let ht = self.hts.remove(i);
        for k in ht.buckets.into_iter().flatten() {
            self.drop_knode(k);
        }
        self.ids.remove(&handle2id(ht.handle));
    }

    fn resolve(&self, root: u32, handle: u32) -> Option<Found> {
        let t = if htid(handle) == TC_U32_ROOT {
            root
        } else {
            htid(handle)
        };
        let hi = self.find(t)?;
        if key(handle) == 0 {
            return Some(Found::Ht(hi));
        }
        let b = bucket(handle);
        let ht = &self.hts[hi];
        if b > ht.divisor {
            return None;
        }
        let p = ht.buckets[b as usize]
            .iter()
            .position(|k| k.handle == handle)?;
        Some(Found::Knode(hi, b as usize, p))
    }
}

/// Per-device registry of [`Common`]s, one per qdisc (the kernel's `tc_u_common_hash`).
#[derive(Debug, Default)]
pub struct U32Registry {
    commons: HashMap<u32, Weak<Shared>>,
}

impl U32Registry {
    fn get_or_create(&mut self, key: u32) -> (Arc<Shared>, bool) {
        self.commons.retain(|_, w| w.strong_count() > 0);
        if let Some(c) = self.commons.get(&key).and_then(Weak::upgrade) {
            return (c, false);
        }
        let c = Arc::new(Shared::default());
        self.commons.insert(key, Arc::downgrade(&c));
        (c, true)
    }
}

/// A u32 instance: its root table in the qdisc's shared state.
#[derive(Debug)]
pub struct U32 {
    shared: Arc<Shared>,
    /// Handle of the root table.
    root: u32,
    prio: u16,
    /// The snapshot this instance classifies with,
    snap: Arc<Snapshot>,
    /// the generation it was taken at (0: none yet; creating the instance
    /// was a change, so the generation is at least 1),
    seen: u64,
    /// and its root table (an empty one if it had none).
    root_table: Arc<SnapTable>,
}

/// Four bytes at `off` of the network header, big-endian, if present; a
/// negative offset reads the link-layer header in front of it.
#[inline(always)]
fn read32(pkt: &Packet, off: i64) -> Option<u32> {
    let Ok(o) = usize::try_from(off) else {
        return before_network_header(pkt, off, 4);
    };
    let b = pkt.data.get(o..o.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn read16(pkt: &Packet, off: i64) -> Option<u16> {
    let Ok(o) = usize::try_from(off) else {
        return before_network_header(pkt, off, 2).map(|v| v as u16);
    };
    let b = pkt.data.get(o..o.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// `len` bytes at negative offset `off` (big-endian), which start in the
/// link-layer header and may run on into the packet; `None` before the
/// header's start or when there is none (the kernel reads its headroom).
#[cold]
#[inline(never)]
fn before_network_header(pkt: &Packet, off: i64, len: usize) -> Option<u32> {
    let mut h = pkt.mac_header()?;
    let start = usize::try_from(h.len() as i64 + off).ok()?;
    h.extend(pkt.data.iter().take(len));
    let b = h.get(start..start + len)?;
    Some(b.iter().fold(0, |v, x| v << 8 | *x as u32))
}

fn u32_err(errno: Errno, msg: &str) -> TcError {
    TcError::msg(errno, format!("cls_u32: {msg}"))
}

/// Validated link target: `None` = leave as is, `Some(0)` = unlink.
fn check_link(c: &Common, link: Option<u32>) -> TcResult<Option<u32>> {
    let Some(l) = link else { return Ok(None) };
    if key(l) != 0 {
        return Err(u32_err(
            Errno::EINVAL,
            "u32 Link handle must be a hash table",
        ));
    }
    if l != 0 {
        let i = c
            .find(l)
            .ok_or_else(|| u32_err(Errno::EINVAL, "Link hash table not found"))?;
        if c.hts[i].is_root {
            return Err(u32_err(Errno::EINVAL, "Not linking to root node"));
        }
    }
    Ok(Some(l))
}

fn set_link(c: &mut Common, k: &mut Knode, link: Option<u32>) {
    let Some(l) = link else { return };
    if let Some(i) = c.find(l).filter(|_| l != 0) {
        c.hts[i].refcnt += 1;
    }
    let old = std::mem::replace(&mut k.link, l);
    if old != 0 {
        c.unlink(old);
    }
}

/// `u32_set_parms` validation: actions, input device, link.
fn prepare_parms(
    c: &Common,
    o: &U32Opts,
    req: &ChangeReq<'_>,
    env: &mut ClsEnv<'_>,
) -> TcResult<(super::act::PreparedList, Option<u32>)> {
    let ctx = InitCtx {
        bind: true,
        replace: !req.create,
        estimator: req.estimator,
        offload: o.flags.unwrap_or(0)
            & (super::TCA_CLS_FLAGS_SKIP_HW | super::TCA_CLS_FLAGS_SKIP_SW),
    };
    let acts = env
        .actions
        .prepare(&o.actions, o.police.as_ref(), ctx, true)?;
    if let Some(dev) = &o.indev {
        // u32 answers EINVAL whatever tcf_change_indev said.
        check_indev(dev, env).map_err(|e| TcError {
            errno: Errno::EINVAL,
            ..e
        })?;
    }
    let link = check_link(c, o.link)?;
    Ok((acts, link))
}

impl U32 {
    /// `u32_init`: join (or start) the qdisc's shared state and add a root table.
    pub(crate) fn new(prio: u16, env: &mut ClsEnv<'_>) -> TcResult<Self> {
        let (shared, fresh) = env.shared.u32.get_or_create(env.qdisc.0);
        let root = {
            let mut c = shared.edit();
            let root = if fresh {
                id2handle(0)
            } else {
                c.alloc_cyclic().ok_or(TcError::errno(Errno::ENOMEM))?
            };
            let ht = Ht {
                handle: root,
                prio,
                divisor: 0,
                refcnt: 1,
                is_root: true,
                buckets: vec![Vec::new()],
                node_ids: BTreeSet::new(),
            };
            c.hts.insert(0, ht);
            c.tps += 1;
            root
        };
        Ok(U32 {
            shared,
            root,
            prio,
            snap: Arc::default(),
            seen: 0,
            root_table: Arc::default(),
        })
    }

    /// Take the current snapshot (after a change, or at the first
    /// classification). The generation is read under the lock, which every
    /// change holds while it moves it, so it matches the tables copied.
    #[cold]
    fn refresh(&mut self) {
        let mut c = self.shared.lock();
        self.seen = self.shared.generation.load(Ordering::Acquire);
        self.snap = c.snapshot();
        let root = self.snap.tables.iter().find(|t| t.handle == self.root);
        self.root_table = root.cloned().unwrap_or_default();
    }

    fn change_knode(
        c: &mut Common,
        at: (usize, usize, usize),
        o: &U32Opts,
        req: &ChangeReq<'_>,
        env: &mut ClsEnv<'_>,
    ) -> TcResult<()> {
        let userflags = o.flags.unwrap_or(0);
        let (hi, b, p) = at;
        let kflags = c.hts[hi].buckets[b][p].flags;
        if (kflags ^ userflags) & !(TCA_CLS_FLAGS_IN_HW | TCA_CLS_FLAGS_NOT_IN_HW) != 0 {
            return Err(u32_err(
                Errno::EINVAL,
                "Key node flags do not match passed flags",
            ));
        }
        let (acts, link) = prepare_parms(c, o, req, env)?;
        let exts = env.actions.commit(acts, false, env.now)?;
        let mut k = std::mem::replace(&mut c.hts[hi].buckets[b][p], placeholder());
        set_link(c, &mut k, link);
        k.exts = Arc::new(exts);
        k.classid = o.classid.unwrap_or(Handle::UNSPEC);
        if o.indev.is_some() {
            k.indev = o.indev.clone();
        }
        c.hts[hi].buckets[b][p] = k;
        Ok(())
    }

    fn new_table(
        c: &mut Common,
        prio: u16,
        handle: u32,
        divisor: u32,
        userflags: u32,
    ) -> TcResult<()> {
        if !divisor.is_power_of_two() {
            return Err(u32_err(Errno::EINVAL, "Divisor is not a power of 2"));
        }
        if divisor > 0x100 {
            return Err(u32_err(Errno::EINVAL, "Exceeded maximum 256 hash buckets"));
        }
        if key(handle) != 0 {
            return Err(u32_err(
                Errno::EINVAL,
                "Divisor can only be used on a hash table",
            ));
        }
        let handle = if handle == 0 {
            c.alloc_cyclic().ok_or(TcError::errno(Errno::ENOMEM))?
        } else {
            if !c.ids.insert(handle2id(handle)) {
                return Err(TcError::errno(Errno::ENOSPC));
            }
            handle
        };
        if userflags & TCA_CLS_FLAGS_SKIP_SW != 0 {
            // No hardware takes the table: the kernel refuses it (the id was
            // allocated, and the cyclic cursor stays advanced).
            c.ids.remove(&handle2id(handle));
            return Err(TcError::errno(Errno::EINVAL));
        }
        let ht = Ht {
            handle,
            prio,
            divisor: divisor - 1,
            refcnt: 1,
            is_root: false,
            buckets: (0..divisor).map(|_| Vec::new()).collect(),
            node_ids: BTreeSet::new(),
        };
        c.hts.insert(0, ht);
        Ok(())
    }

    /// `gen_new_kid`: the lowest free node id at or above 0x800, else above 0.
    fn gen_new_kid(ht: &Ht, htid: u32) -> TcResult<u32> {
        let hi = htid | 0xFFF;
        let free = |lo: u32| (lo..=hi).find(|h| !ht.node_ids.contains(h));
        free(htid | 0x800)
            .or_else(|| free(htid.wrapping_add(1)))
            .ok_or_else(|| u32_err(Errno::ENOSPC, "Hash table node ID pool exhausted"))
    }

    fn new_knode(
        &self,
        c: &mut Common,
        o: &U32Opts,
        req: &ChangeReq<'_>,
        env: &mut ClsEnv<'_>,
    ) -> TcResult<()> {
        let root = c.find(self.root).ok_or(TcError::errno(Errno::EINVAL))?;
        let (hi, tid) = match o.hash {
            Some(h) if htid(h) != TC_U32_ROOT => {
                let i = c
                    .find(htid(h))
                    .ok_or_else(|| u32_err(Errno::EINVAL, "Specified hash table not found"))?;
                (i, h)
            }
            _ => (root, self.root),
        };
        if c.hts[hi].divisor < bucket(tid) {
            return Err(u32_err(
                Errno::EINVAL,
                "Specified hash table buckets exceed configured value",
            ));
        }
        let handle = if req.handle != 0 {
            if htid(req.handle) != 0 && htid(req.handle ^ tid) != 0 {
                return Err(u32_err(
                    Errno::EINVAL,
                    "Handle specified hash table address mismatch",
                ));
            }
            if node(req.handle) == 0 {
                Self::gen_new_kid(&c.hts[hi], tid)?
            } else {
                let h = tid | node(req.handle);
                if c.hts[hi].node_ids.contains(&h) {
                    return Err(TcError::errno(Errno::ENOSPC));
                }
                h
            }
        } else {
            Self::gen_new_kid(&c.hts[hi], tid)?
        };
        let Some(sel) = &o.sel else {
            return Err(u32_err(Errno::EINVAL, "Selector not specified"));
        };
        let (acts, link) = prepare_parms(c, o, req, env)?;
        // Everything is valid: commit.
        let exts = env.actions.commit(acts, false, env.now)?;
        let mut k = Knode {
            handle,
            sel: sel.clone(),
            fshift: if sel.hmask != 0 {
                sel.hmask.trailing_zeros() as u8
            } else {
                0
            },
            classid: o.classid.unwrap_or(Handle::UNSPEC),
            link: 0,
            exts: Arc::new(exts),
            indev: o.indev.clone(),
            mark: o.mark.unwrap_or_default(),
            flags: o.flags.unwrap_or(0) | TCA_CLS_FLAGS_NOT_IN_HW,
            counters: Arc::new(Counters::new(sel.keys.len())),
        };
        set_link(c, &mut k, link);
        let ht = &mut c.hts[hi];
        ht.node_ids.insert(handle);
        let list = &mut ht.buckets[bucket(handle) as usize];
        let at = list
            .iter()
            .position(|n| node(handle) < node(n.handle))
            .unwrap_or(list.len());
        list.insert(at, k);
        c.knodes += 1;
        Ok(())
    }

    fn element(ht: &Ht) -> FilterElement {
        FilterElement {
            handle: ht.handle,
            opts: Some(FilterElemOpts::U32Table {
                divisor: ht.divisor + 1,
            }),
            stats: None,
        }
    }

    fn knode_element(k: &Knode) -> FilterElement {
        let old = k.exts.is_old_police();
        let acts = k.exts.dump();
        let (actions, police) = if old {
            (Vec::new(), acts.into_iter().next())
        } else {
            (acts, None)
        };
        let d = U32KnodeDump {
            sel: k.sel.clone(),
            hash: k.handle & 0xFFFF_F000,
            classid: (!k.classid.is_unspec()).then_some(k.classid),
            link: (k.link != 0).then_some(k.link),
            flags: k.flags,
            mark: (k.mark.val != 0 || k.mark.mask != 0).then_some(U32MarkDump {
                val: k.mark.val,
                mask: k.mark.mask,
                success: k.counters.mark_success.load(Ordering::Relaxed),
            }),
            actions,
            police,
            indev: k.indev.clone(),
            pcnt: U32Pcnt {
                rcnt: k.counters.rcnt.load(Ordering::Relaxed),
                rhit: k.counters.rhit.load(Ordering::Relaxed),
                kcnts: k
                    .counters
                    .kcnts
                    .iter()
                    .map(|c| c.load(Ordering::Relaxed))
                    .collect(),
            },
        };
        FilterElement {
            handle: k.handle,
            opts: Some(FilterElemOpts::U32(d)),
            stats: k.exts.compat_stats(),
        }
    }

    /// The knodes of the tables this instance walks.
    fn my_knodes<'a>(&self, c: &'a Common) -> impl Iterator<Item = &'a Knode> + 'a {
        let prio = self.prio;
        c.hts
            .iter()
            .filter(move |h| h.prio == prio)
            .flat_map(|h| h.buckets.iter().flatten())
    }
}

fn placeholder() -> Knode {
    Knode {
        handle: 0,
        sel: U32Sel::default(),
        fshift: 0,
        classid: Handle::UNSPEC,
        link: 0,
        exts: Arc::default(),
        indev: None,
        mark: U32Mark::default(),
        flags: 0,
        counters: Arc::default(),
    }
}

/// What classification reads: a copy of the tables' matching data, taken
/// by the first classification after a change and shared by the instances
/// until the next change. The counters are the knodes' own (shared), the
/// actions are reached through a weak reference.
#[derive(Debug, Default)]
struct Snapshot {
    /// The tables, in the order of `Common::hts`.
    tables: Vec<Arc<SnapTable>>,
}

#[derive(Debug, Default)]
struct SnapTable {
    handle: u32,
    /// Number of buckets minus one (a mask).
    divisor: u32,
    buckets: Vec<Vec<SnapKnode>>,
}

/// A knode as classification needs it.
#[derive(Debug)]
struct SnapKnode {
    sel: U32Sel,
    fshift: u8,
    /// The mark test; for a `skip_sw` knode (counted as visited, never
    /// matching) one that no mark passes.
    mark: U32Mark,
    /// The linked table's index in the snapshot (`usize::MAX` if it is
    /// missing, which aborts as the kernel's failed lookup does).
    link: Option<usize>,
    classid: Handle,
    /// The actions, `None` when there are none (their verdict is `pass`).
    exts: Option<Weak<Exts>>,
    counters: Arc<Counters>,
}

impl Snapshot {
    fn new(hts: &[Ht]) -> Self {
        let find = |h: u32| hts.iter().position(|t| t.handle == h).unwrap_or(usize::MAX);
        let knode = |k: &Knode| SnapKnode {
            sel: k.sel.clone(),
            fshift: k.fshift,
            mark: if k.flags & TCA_CLS_FLAGS_SKIP_SW != 0 {
                U32Mark { val: 1, mask: 0 }
            } else {
                k.mark
            },
            link: (k.link != 0).then(|| find(k.link)),
            classid: k.classid,
            exts: (!k.exts.is_empty()).then(|| Arc::downgrade(&k.exts)),
            counters: k.counters.clone(),
        };
        let table = |ht: &Ht| SnapTable {
            handle: ht.handle,
            divisor: ht.divisor,
            buckets: (ht.buckets.iter())
                .map(|b| b.iter().map(knode).collect())
                .collect(),
        };
        Snapshot {
            tables: hts.iter().map(|ht| Arc::new(table(ht))).collect(),
        }
    }
}

impl Common {
    /// The snapshot of the tables as they are now, taken if need be.
    fn snapshot(&mut self) -> Arc<Snapshot> {
        let hts = &self.hts;
        (self.snapshot)
            .get_or_insert_with(|| Arc::new(Snapshot::new(hts)))
            .clone()
    }
}

/// Why a classification ends without an answer before its walk is done: a
/// read beyond the packet's bytes, a linked table that is gone, or links
/// nested deeper than [`TC_U32_MAXDEPTH`] (the kernel's "dead loop"). It ends
/// the classification of the whole instance, not just one knode's test.
struct Abort;

/// What a walk answers: a result, nothing (go on after the linking knode,
/// or, at the root, let the next instance try), or [`Abort`].
type WalkResult = Result<Option<ClassifyResult>, Abort>;

/// The state of one classification that is not tied to one table.
struct Walk<'a> {
    snap: &'a Snapshot,
    pkt: &'a mut Packet,
    /// The packet's mark, at hand (updated after actions, which may change it).
    mark: u32,
    now: Time,
    /// The `nexthdr+` offset a linking knode computed. Unlike the base
    /// offset it is not restored when the walk climbs back out of a linked
    /// table: the kernel keeps it in one variable, and so does this.
    off2: i64,
}

/// `u32_classify`, one table at a time: walk bucket `bucket` of `table`
/// with the base offset `off`, `depth` links below the root table.
///
/// The kernel walks iteratively and keeps the linking knodes in an on-stack
/// array; here a link is a recursive call ([`descend`]), so a walk that
/// follows no link (the common case) sets up no such array, and the linking
/// knodes are the callers' frames (at most [`TC_U32_MAXDEPTH`]). Inlined,
/// the walk of the root table is part of `classify`; `descend` is not, so
/// the recursion goes through it.
#[inline(always)]
fn walk(w: &mut Walk<'_>, table: &SnapTable, bucket: usize, off: i64, depth: usize) -> WalkResult {
    let Some(knodes) = table.buckets.get(bucket) else {
        return Ok(None); // (only an instance without a root table has none)
    };
    for n in knodes {
        bump(&n.counters.rcnt);
        if w.mark & n.mark.mask != n.mark.val {
            continue;
        }
        bump32(&n.counters.mark_success);
        if !keys_match(n, w.pkt, off, w.off2)? {
            continue;
        }
        let Some(link) = n.link else {
            match terminal(n, w) {
                None => continue,
                r => return Ok(r),
            }
        };
        if let Some(r) = descend(w, n, link, off, depth)? {
            return Ok(Some(r));
        }
        // The linked table had no answer: back at the linking knode.
        if let Some(r) = terminal(n, w) {
            return Ok(Some(r));
        }
    }
    Ok(None)
}

/// Follow `n`'s link to table `link` of the snapshot: pick the bucket,
/// move the offsets, and walk it (if the new base is inside the packet).
#[inline(never)]
fn descend(w: &mut Walk<'_>, n: &SnapKnode, link: usize, off: i64, depth: usize) -> WalkResult {
    if depth >= TC_U32_MAXDEPTH {
        return Err(Abort);
    }
    let snap = w.snap;
    let down = snap.tables.get(link).ok_or(Abort)?;
    let sel = &n.sel;
    let mut b = 0;
    if down.divisor != 0 {
        let data = read32(w.pkt, off + sel.hoff as i64).ok_or(Abort)?;
        b = (down.divisor & ((data & sel.hmask) >> n.fshift)) as usize;
    }
    let mut down_off = off;
    let moves = sel.flags & (TC_U32_VAROFFSET | TC_U32_OFFSET | TC_U32_EAT) != 0;
    if moves {
        if sel.flags & (TC_U32_OFFSET | TC_U32_VAROFFSET) != 0 {
            w.off2 = sel.off as i64 + 3;
            if sel.flags & TC_U32_VAROFFSET != 0 {
                let v = read16(w.pkt, off + sel.offoff as i64).ok_or(Abort)?;
                w.off2 += (v & sel.offmask)
                    .checked_shr(sel.offshift as u32)
                    .unwrap_or(0) as i64;
            }
            w.off2 &= !3;
        }
        if sel.flags & TC_U32_EAT != 0 {
            down_off += w.off2;
            w.off2 = 0;
        }
    }
    // A moved base must still be inside the packet.
    if !moves || down_off < w.pkt.data.len() as i64 {
        return walk(w, down, b, down_off, depth + 1);
    }
    Ok(None)
}

/// Run a terminal knode's actions.
#[inline(never)]
fn run_actions(exts: &Weak<Exts>, w: &mut Walk<'_>) -> Verdict {
    // The weak reference cannot be dead: a change that drops actions makes
    // a new snapshot before the next classification.
    let Some(exts) = exts.upgrade() else {
        return Verdict::Ok;
    };
    let v = exts.exec(w.pkt, w.now);
    w.mark = w.pkt.mark;
    v
}

/// Do all of `n`'s keys match at base `off` (and `off2` for `nexthdr+`)?
/// Counts each key that matches, in order, until one does not.
fn keys_match(n: &SnapKnode, pkt: &Packet, off: i64, off2: i64) -> Result<bool, Abort> {
    for (j, k) in n.sel.keys.iter().enumerate() {
        let toff = off + k.off as i64 + (off2 & k.offmask as i64);
        let v = read32(pkt, toff).ok_or(Abort)?;
        if (v ^ k.val) & k.mask != 0 {
            return Ok(false);
        }
        // (`kcnts` has one counter per key.)
        if let Some(cnt) = n.counters.kcnts.get(j) {
            bump(cnt);
        }
    }
    Ok(true)
}

/// `check_terminal`: a terminal knode answers unless its actions say `continue`.
#[inline]
fn terminal(n: &SnapKnode, w: &mut Walk<'_>) -> Option<ClassifyResult> {
    if n.sel.flags & TC_U32_TERMINAL == 0 {
        return None;
    }
    bump(&n.counters.rhit);
    // No actions answer `pass`, as running an empty list does.
    let verdict = match &n.exts {
        None => Verdict::Ok,
        Some(exts) => run_actions(exts, w),
    };
    match verdict {
        Verdict::Continue => None,
        v => Some(ClassifyResult {
            classid: n.classid,
            verdict: v,
        }),
    }
}

impl Classifier for U32 {
    fn kind(&self) -> &'static str {
        "u32"
    }

    fn classify(&mut self, pkt: &mut Packet, now: Time) -> Option<ClassifyResult> {
        if self.shared.generation.load(Ordering::Acquire) != self.seen {
            self.refresh();
        }
        let root = &*self.root_table;
        let mut w = Walk {
            snap: &self.snap,
            mark: pkt.mark,
            pkt,
            now,
            off2: 0,
        };
        walk(&mut w, root, 0, 0, 0).ok()?
    }

    fn get(&self, handle: u32) -> bool {
        self.shared.lock().resolve(self.root, handle).is_some()
    }

    fn change(&mut self, req: &ChangeReq<'_>, env: &mut ClsEnv<'_>) -> TcResult<()> {
        let o = match req.opts {
            None if req.handle != 0 => {
                return Err(u32_err(Errno::EINVAL, "Filter handle requires options"))
            }
            None => return Ok(()),
            Some(FilterOpts::U32(o)) => o,
            Some(_) => return Err(TcError::errno(Errno::EINVAL)),
        };
        if let Some(f) = o.flags {
            if !tc_flags_valid(f) {
                return Err(u32_err(Errno::EINVAL, "Invalid filter flags"));
            }
        }
        let shared = self.shared.clone();
        let mut c = shared.edit();
        if req.exists {
            return match c.resolve(self.root, req.handle) {
                Some(Found::Knode(hi, b, p)) => Self::change_knode(&mut c, (hi, b, p), o, req, env),
                _ => Err(u32_err(Errno::EINVAL, "Key node id cannot be zero")),
            };
        }
        if let Some(d) = o.divisor {
            return Self::new_table(&mut c, self.prio, req.handle, d, o.flags.unwrap_or(0));
        }
        self.new_knode(&mut c, o, req, env)
    }

    fn delete(&mut self, handle: u32) -> TcResult<bool> {
        let mut c = self.shared.edit();
        match c.resolve(self.root, handle) {
            Some(Found::Knode(hi, b, p)) => {
                let k = c.hts[hi].buckets[b].remove(p);
                c.hts[hi].node_ids.remove(&k.handle);
                c.drop_knode(k);
            }
            Some(Found::Ht(hi)) => {
                if c.hts[hi].is_root {
                    return Err(u32_err(Errno::EINVAL, "Not allowed to delete root node"));
                }
                if c.hts[hi].refcnt != 1 {
                    return Err(u32_err(Errno::EBUSY, "Can not delete in-use filter"));
                }
                c.destroy_ht(hi);
            }
            None => {
                return Err(TcError::msg(
                    Errno::ENOENT,
                    "Specified filter handle not found",
                ))
            }
        }
        Ok(c.tps == 1 && c.knodes == 0)
    }

    fn walk(&self) -> Vec<FilterElement> {
        let c = self.shared.lock();
        let mut out = Vec::new();
        for ht in c.hts.iter().filter(|h| h.prio == self.prio) {
            out.push(Self::element(ht));
            out.extend(ht.buckets.iter().flatten().map(Self::knode_element));
        }
        out
    }

    fn dump_one(&self, handle: u32) -> Option<FilterElement> {
        let c = self.shared.lock();
        Some(match c.resolve(self.root, handle)? {
            Found::Ht(i) => Self::element(&c.hts[i]),
            Found::Knode(hi, b, p) => Self::knode_element(&c.hts[hi].buckets[b][p]),
        })
    }

    fn goto_chains(&self) -> Vec<u32> {
        let c = self.shared.lock();
        self.my_knodes(&c)
            .flat_map(|k| k.exts.goto_chains())
            .collect()
    }

    fn count_bound(&self, classid: Handle) -> usize {
        let c = self.shared.lock();
        self.my_knodes(&c).filter(|k| k.classid == classid).count()
    }
}

impl Drop for U32 {
    /// `u32_destroy`: the root table goes; the last instance takes the rest.
    fn drop(&mut self) {
        let mut c = self.shared.edit();
        if let Some(i) = c.find(self.root) {
            c.hts[i].refcnt = c.hts[i].refcnt.saturating_sub(1);
            if c.hts[i].refcnt == 0 {
                c.destroy_ht(i);
            }
        }
        c.tps = c.tps.saturating_sub(1);
        if c.tps == 0 {
            c.hts.clear();
            c.ids.clear();
            c.knodes = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::key;
    use super::super::testutil::*;
    use super::super::{Block, FilterCmd, FilterDump, FilterMsg, TCA_CLS_FLAGS_SKIP_HW};
    use super::*;
    use crate::act::police::PoliceOpts;
    use crate::packet::{ETH_P_ALL, ETH_P_IP};
    use crate::rate::RateSpec;

    fn add(b: &mut Block, net: &mut Net, q: Handle, m: FilterMsg) {
        b.change_filter(&m, FilterCmd::Add, &mut net.env(q))
            .unwrap();
    }

    fn add_err(b: &mut Block, net: &mut Net, q: Handle, m: FilterMsg) -> TcError {
        b.change_filter(&m, FilterCmd::Add, &mut net.env(q))
            .unwrap_err()
    }

    fn class_of(b: &mut Block, mut p: Packet) -> Option<Handle> {
        b.classify(&mut p, Time(0)).map(|r| r.classid)
    }

    /// The conditioner scripts' "ACK" selector: protocol 6, IHL 5, total length < 64, flags == ACK.
    fn ack_keys() -> Vec<U32Key> {
        vec![
            key(0x0006_0000, 0x00ff_0000, 8),
            key(0x0500_0000, 0x0f00_ffc0, 0),
            key(0x0010_0000, 0x00ff_0000, 32),
        ]
    }

    const A: [u8; 4] = [192, 168, 1, 10];
    const B: [u8; 4] = [203, 0, 113, 7];

    /// The CBQ conditioner script's filters (prio 10..13) on `1:`.
    fn conditioner_cbq(net: &mut Net) -> Block {
        let mut b = Block::default();
        let q = h(1, 0);
        let c10 = Some(h(1, 0x10));
        add(
            &mut b,
            net,
            q,
            u32_msg(
                10,
                ETH_P_IP,
                0,
                Some(u32_match(vec![key(0x0010_0000, 0x00ff_0000, 0)], c10)),
            ),
        );
        add(
            &mut b,
            net,
            q,
            u32_msg(
                11,
                ETH_P_IP,
                0,
                Some(u32_match(vec![key(0x0001_0000, 0x00ff_0000, 8)], c10)),
            ),
        );
        add(
            &mut b,
            net,
            q,
            u32_msg(12, ETH_P_IP, 0, Some(u32_match(ack_keys(), c10))),
        );
        add(
            &mut b,
            net,
            q,
            u32_msg(
                13,
                ETH_P_IP,
                0,
                Some(u32_match(vec![key(0, 0, 16)], Some(h(1, 0x20)))),
            ),
        );
        b
    }

    #[test]
    fn conditioner_filters_classify_real_packets() {
        let mut net = Net::default();
        let mut b = conditioner_cbq(&mut net);
        // ssh with TOS "minimum delay".
        let ssh = tcp(A, B, 40000, 22, 0x10, true, &[0u8; 48]);
        assert_eq!(class_of(&mut b, ssh), Some(h(1, 0x10)));
        assert_eq!(class_of(&mut b, icmp_echo(A, B)), Some(h(1, 0x10)));
        // A bare ACK: IHL 5, 40 bytes, flags 0x10.
        let ack = tcp(A, B, 40000, 80, 0, false, &[]);
        assert_eq!((ack.data.len(), ack.data[33]), (40, 0x10));
        assert_eq!(class_of(&mut b, ack.clone()), Some(h(1, 0x10)));
        // Bulk data (PSH|ACK, 1000 bytes of payload): only the catch-all matches.
        let data = tcp(A, B, 40000, 80, 0, true, &[0u8; 1000]);
        assert_eq!(class_of(&mut b, data.clone()), Some(h(1, 0x20)));
        assert_eq!(class_of(&mut b, udp(A, B, 5000, 53)), Some(h(1, 0x20)));

        // The ACK filter on its own does not take the data packet.
        let mut only_ack = Block::default();
        add(
            &mut only_ack,
            &mut net,
            h(2, 0),
            u32_msg(12, ETH_P_IP, 0, Some(u32_match(ack_keys(), Some(h(2, 1))))),
        );
        assert_eq!(class_of(&mut only_ack, data), None);
        assert_eq!(class_of(&mut only_ack, ack), Some(h(2, 1)));
        // A non-IPv4 packet skips `protocol ip` instances.
        let mut v6 = tcp(A, B, 1, 2, 0x10, false, &[]);
        v6.protocol = crate::packet::ETH_P_IPV6;
        assert_eq!(class_of(&mut b, v6), None);
    }

    #[test]
    fn conditioner_htb_filters_share_one_instance_and_count_hits() {
        // Golden "conditioner script": three knodes in prio 10.
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let c10 = Some(h(1, 0x10));
        for keys in [
            vec![key(0x0010_0000, 0x00ff_0000, 0)],
            vec![key(0x0001_0000, 0x00ff_0000, 8)],
            ack_keys(),
        ] {
            add(
                &mut b,
                &mut net,
                q,
                u32_msg(10, ETH_P_IP, 0, Some(u32_match(keys, c10))),
            );
        }
        assert_eq!(
            listing(&b),
            vec![
                line(0, 10, "-"),
                line(0, 10, "800:"),
                line(0, 10, "800::800"),
                line(0, 10, "800::801"),
                line(0, 10, "800::802"),
            ]
        );
        assert_eq!(
            class_of(&mut b, tcp(A, B, 1, 2, 0, false, &[])),
            Some(h(1, 0x10))
        );
        assert_eq!(class_of(&mut b, tcp(A, B, 1, 2, 0, true, &[1; 100])), None);
        let pc: Vec<U32Pcnt> = knodes(&b).into_iter().map(|d| d.1.pcnt).collect();
        // Both packets visit every knode. Both are TCP; the data packet's total
        // length (140) fails the "< 64" key, the ACK passes all three.
        assert_eq!(
            pc[0],
            U32Pcnt {
                rcnt: 2,
                rhit: 0,
                kcnts: vec![0]
            }
        );
        assert_eq!(
            pc[1],
            U32Pcnt {
                rcnt: 2,
                rhit: 0,
                kcnts: vec![0]
            }
        );
        assert_eq!(
            pc[2],
            U32Pcnt {
                rcnt: 2,
                rhit: 1,
                kcnts: vec![2, 1, 1]
            }
        );
    }

    fn knodes(b: &Block) -> Vec<(u32, U32KnodeDump)> {
        b.dump(None, 0, 0)
            .into_iter()
            .filter_map(|d| match d.opts {
                Some(FilterElemOpts::U32(k)) => Some((d.handle, k)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn reading_past_the_packet_aborts_the_instance() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        add(
            &mut b,
            &mut net,
            q,
            u32_msg(
                10,
                ETH_P_IP,
                0,
                Some(u32_match(ack_keys(), Some(h(1, 0x10)))),
            ),
        );
        add(
            &mut b,
            &mut net,
            q,
            u32_msg(
                10,
                ETH_P_IP,
                0,
                Some(u32_match(vec![key(0, 0, 16)], Some(h(1, 0x20)))),
            ),
        );
        let mut short = tcp(A, B, 1, 2, 0, false, &[]);
        short.data.truncate(32);
        // The first knode's third key reads bytes 32..36: the walk stops there,
        // the catch-all behind it is never tried.
        assert_eq!(class_of(&mut b, short), None);
        assert_eq!(
            class_of(&mut b, tcp(A, B, 1, 2, 0, true, &[1; 30])),
            Some(h(1, 0x20))
        );
    }

    /// Keys at negative offsets read the Ethernet header (the tags in the
    /// packet included) and may run on into the network header; before
    /// the header, or without one (a TUN device's packets), the walk stops.
    #[test]
    fn negative_offsets_read_the_ethernet_header() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        // The source address's last two bytes and the EtherType (at -4),
        // and the last two of the type with the IP version byte (at -2).
        let keys = vec![
            key(0x0506_0800, 0xffff_ffff, -4),
            key(0x0800_4500, 0xffff_ff00, -2),
        ];
        add(
            &mut b,
            &mut net,
            q,
            u32_msg(10, ETH_P_IP, 0, Some(u32_match(keys, Some(h(1, 0x10))))),
        );
        let eth = crate::packet::EthAddrs {
            dst: [2, 0, 0, 0, 0, 1],
            src: [1, 2, 3, 4, 5, 6],
        };
        let mut p = tcp(A, B, 1, 2, 0, false, &[]);
        p.eth = Some(eth);
        assert_eq!(class_of(&mut b, p.clone()), Some(h(1, 0x10)));
        // A tag in the packet sits between the addresses and the type.
        p.vlan_inband = vec![crate::packet::VlanTag {
            proto: 0x8100,
            tci: 5,
        }];
        assert_eq!(class_of(&mut b, p), None);
        assert_eq!(class_of(&mut b, tcp(A, B, 1, 2, 0, false, &[])), None);
        let mut far = Block::default();
        add(
            &mut far,
            &mut net,
            q,
            u32_msg(
                10,
                ETH_P_IP,
                0,
                Some(u32_match(vec![key(0, 0, -16)], Some(h(1, 0x20)))),
            ),
        );
        let mut p = tcp(A, B, 1, 2, 0, false, &[]);
        p.eth = Some(eth);
        assert_eq!(class_of(&mut far, p), None);
    }

    /// Golden "u32 hash tables".
    fn hashed(net: &mut Net) -> Block {
        let mut b = Block::default();
        let q = h(1, 0);
        add(&mut b, net, q, u32_msg(5, ETH_P_IP, 0, None));
        let table = U32Opts {
            divisor: Some(256),
            ..Default::default()
        };
        add(
            &mut b,
            net,
            q,
            u32_msg(5, ETH_P_IP, 0x0020_0000, Some(table)),
        );
        let mut link = u32_match(vec![key(0x0a00_0000, 0xffff_ff00, 16)], None);
        link.hash = Some(0x8000_0000);
        link.link = Some(0x0020_0000);
        if let Some(s) = link.sel.as_mut() {
            s.hmask = 0xff;
            s.hoff = 16;
        }
        add(&mut b, net, q, u32_msg(5, ETH_P_IP, 0, Some(link)));
        for (bkt, host, class) in [(0x7b, 123, 0x10), (0x01, 1, 0x20)] {
            let mut o = u32_match(
                vec![key(0x0a00_0000 | host, 0xffff_ffff, 16)],
                Some(h(1, class)),
            );
            o.hash = Some(0x0020_0000 | bkt << 12);
            add(&mut b, net, q, u32_msg(5, ETH_P_IP, 0, Some(o)));
        }
        b
    }

    #[test]
    fn hash_tables_link_and_steer_by_a_header_byte() {
        let mut net = Net::default();
        let mut b = hashed(&mut net);
        assert_eq!(
            listing(&b),
            vec![
                line(0, 5, "-"),
                line(0, 5, "2:"),
                line(0, 5, "2:1:800"),
                line(0, 5, "2:7b:800"),
                line(0, 5, "800:"),
                line(0, 5, "800::800"),
            ]
        );
        let d: Vec<FilterDump> = b.dump(None, 0, 0);
        assert_eq!(d[1].opts, Some(FilterElemOpts::U32Table { divisor: 256 }));
        let k = knodes(&b);
        assert_eq!(
            (k[2].1.link, k[2].1.hash, k[2].1.classid),
            (Some(0x0020_0000), 0x8000_0000, None)
        );
        assert_eq!(k[1].1.hash, 0x0027_b000);
        // The last byte of the destination picks the bucket.
        assert_eq!(
            class_of(&mut b, udp(A, [10, 0, 0, 123], 1, 2)),
            Some(h(1, 0x10))
        );
        assert_eq!(
            class_of(&mut b, udp(A, [10, 0, 0, 1], 1, 2)),
            Some(h(1, 0x20))
        );
        assert_eq!(class_of(&mut b, udp(A, [10, 0, 0, 5], 1, 2)), None);
        assert_eq!(class_of(&mut b, udp(A, [10, 0, 1, 123], 1, 2)), None);

        let del = |handle: u32| FilterMsg {
            prio: 5,
            handle,
            kind: Some("u32".into()),
            ..Default::default()
        };
        b.delete_filter(&del(0x0027_b800)).unwrap();
        assert_eq!(class_of(&mut b, udp(A, [10, 0, 0, 123], 1, 2)), None);
        assert_eq!(
            b.delete_filter(&del(0x0020_0000)),
            Err(TcError::msg(
                Errno::EBUSY,
                "cls_u32: Can not delete in-use filter"
            ))
        );
        assert_eq!(
            b.delete_filter(&del(0x8000_0000)),
            Err(TcError::inval("cls_u32: Not allowed to delete root node"))
        );
        // Unlinked, the table can go; with it the last knode of the only u32
        // instance goes, and so does the instance (u32_delete's `last`).
        b.delete_filter(&del(0x8000_0800)).unwrap();
        assert_eq!(listing(&b).len(), 4);
        b.delete_filter(&del(0x0020_0000)).unwrap();
        assert!(listing(&b).is_empty());
    }

    #[test]
    fn hash_table_variants_and_their_errors() {
        // Golden "u32 hash table variants".
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let table = |d: u32| {
            Some(U32Opts {
                divisor: Some(d),
                ..Default::default()
            })
        };
        add(
            &mut b,
            &mut net,
            q,
            u32_msg(5, ETH_P_IP, 0x0030_0000, table(1)),
        );
        add(
            &mut b,
            &mut net,
            q,
            u32_msg(5, ETH_P_IP, 0x0040_0000, table(16)),
        );
        for (d, msg) in [
            (3, "cls_u32: Divisor is not a power of 2"),
            (512, "cls_u32: Exceeded maximum 256 hash buckets"),
        ] {
            assert_eq!(
                add_err(
                    &mut b,
                    &mut net,
                    q,
                    u32_msg(5, ETH_P_IP, 0x0050_0000, table(d))
                ),
                TcError::inval(msg)
            );
        }
        add(&mut b, &mut net, q, u32_msg(5, ETH_P_IP, 0, table(8)));
        let mut o = u32_match(vec![key(0x0a00_0005, 0xffff_ffff, 16)], Some(h(1, 0x10)));
        o.hash = Some(0x0040_5000);
        add(&mut b, &mut net, q, u32_msg(5, ETH_P_IP, 0, Some(o)));
        let mut o = u32_match(vec![key(0, 0, 0)], Some(h(1, 0x10)));
        o.hash = Some(0x0040_3000);
        add(&mut b, &mut net, q, u32_msg(5, ETH_P_IP, 0, Some(o)));
        let mut o = u32_match(vec![key(0x0006_0000, 0x00ff_0000, 8)], None);
        o.hash = Some(0x8000_0000);
        o.link = Some(0x0040_0000);
        if let Some(s) = o.sel.as_mut() {
            s.hmask = 0x0f;
            s.hoff = 20;
        }
        add(&mut b, &mut net, q, u32_msg(5, ETH_P_IP, 0, Some(o)));
        let mut o = u32_match(vec![key(0x0011_0000, 0x00ff_0000, 8)], None);
        o.hash = Some(0x8000_0000);
        o.link = Some(0x0030_0000);
        add(&mut b, &mut net, q, u32_msg(5, ETH_P_IP, 7, Some(o)));
        let mut o = u32_match(vec![key(0, 0, 0)], Some(h(1, 0x10)));
        o.hash = Some(0x0090_0000);
        assert_eq!(
            add_err(&mut b, &mut net, q, u32_msg(5, ETH_P_IP, 0, Some(o))),
            TcError::inval("cls_u32: Specified hash table not found")
        );
        let mut o = u32_match(vec![key(0, 0, 0)], None);
        o.link = Some(0x0090_0000);
        assert_eq!(
            add_err(&mut b, &mut net, q, u32_msg(5, ETH_P_IP, 0, Some(o))),
            TcError::inval("cls_u32: Link hash table not found")
        );
        assert_eq!(
            listing(&b),
            vec![
                line(0, 5, "-"),
                line(0, 5, "801:"),
                line(0, 5, "4:"),
                line(0, 5, "4:3:800"),
                line(0, 5, "4:5:800"),
                line(0, 5, "3:"),
                line(0, 5, "800:"),
                line(0, 5, "800::7"),
                line(0, 5, "800::800"),
            ]
        );
        // The low nibble of the TCP destination port picks the bucket of 4:.
        assert_eq!(
            class_of(&mut b, tcp(A, [10, 0, 0, 5], 1, 0x15, 0, true, &[])),
            Some(h(1, 0x10))
        );
        assert_eq!(
            class_of(&mut b, tcp(A, [10, 0, 0, 6], 1, 0x15, 0, true, &[])),
            None
        );
        assert_eq!(
            class_of(&mut b, tcp(A, [10, 0, 0, 6], 1, 0x13, 0, true, &[])),
            Some(h(1, 0x10))
        );
        // UDP goes to the empty table 3:.
        assert_eq!(class_of(&mut b, udp(A, [10, 0, 0, 5], 1, 0x15)), None);
    }

    /// A TCP packet with `extra` bytes of IP options (IHL 5 + extra/4).
    fn tcp_with_options(dport: u16, extra: usize) -> Packet {
        let mut p = tcp(A, B, 1234, dport, 0, true, &[0u8; 20]);
        let mut d = p.data[..20].to_vec();
        d.extend(vec![1u8; extra]); // NOP options
        d.extend_from_slice(&p.data[20..]);
        d[0] = 0x40 | (5 + extra / 4) as u8;
        let total = d.len() as u16;
        d[2..4].copy_from_slice(&total.to_be_bytes());
        p.data = d;
        p
    }

    #[test]
    fn nexthdr_offsets_follow_the_ip_header_length() {
        for eat in [false, true] {
            let (mut net, mut b) = (Net::default(), Block::default());
            let q = h(1, 0);
            let table = U32Opts {
                divisor: Some(1),
                ..Default::default()
            };
            add(
                &mut b,
                &mut net,
                q,
                u32_msg(1, ETH_P_IP, 0x0050_0000, Some(table)),
            );
            // Table 5: destination port 22, relative to the transport header.
            let mut k = key(22, 0xffff, 0);
            if !eat {
                k.offmask = -1; // nexthdr+0
            }
            let mut o = u32_match(vec![k], Some(h(1, 0x22)));
            o.hash = Some(0x0050_0000);
            add(&mut b, &mut net, q, u32_msg(1, ETH_P_IP, 0, Some(o)));
            // Root: TCP, header length from the IHL nibble: (0x0f00 & w) >> 6 = 4 * IHL.
            let mut o = u32_match(vec![key(0x0006_0000, 0x00ff_0000, 8)], None);
            o.link = Some(0x0050_0000);
            if let Some(s) = o.sel.as_mut() {
                s.flags |= TC_U32_VAROFFSET | if eat { TC_U32_EAT } else { 0 };
                s.offmask = 0x0f00;
                s.offshift = 6;
            }
            add(&mut b, &mut net, q, u32_msg(1, ETH_P_IP, 0, Some(o)));
            for extra in [0, 4, 8] {
                assert_eq!(
                    class_of(&mut b, tcp_with_options(22, extra)),
                    Some(h(1, 0x22)),
                    "eat {eat} +{extra}"
                );
                assert_eq!(
                    class_of(&mut b, tcp_with_options(23, extra)),
                    None,
                    "eat {eat} +{extra}"
                );
            }
        }
    }

    #[test]
    fn handles_and_orders_as_the_kernel_allocates_them() {
        // Golden "u32 explicit handles".
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let src = |n: u32| {
            Some(u32_match(
                vec![key(n << 24, 0xff00_0000, 12)],
                Some(h(1, 0x10)),
            ))
        };
        for (handle, n) in [
            (0x8000_0010, 10),
            (0x8000_0005, 11),
            (0x0000_0020, 12),
            (0, 13),
        ] {
            add(&mut b, &mut net, q, u32_msg(10, ETH_P_IP, handle, src(n)));
        }
        assert_eq!(
            add_err(
                &mut b,
                &mut net,
                q,
                u32_msg(10, ETH_P_IP, 0x8000_0010, src(14))
            ),
            TcError::msg(Errno::EEXIST, "Filter already exists")
        );
        let fhs: Vec<String> = listing(&b).into_iter().map(|l| l.2).collect();
        assert_eq!(
            fhs,
            vec!["-", "800:", "800::5", "800::10", "800::20", "800::800"]
        );
        let get = |handle: u32| FilterMsg {
            prio: 10,
            protocol: ETH_P_IP,
            handle,
            kind: Some("u32".into()),
            ..Default::default()
        };
        let g = b.get_filter(&get(0x8000_0010)).unwrap();
        let Some(FilterElemOpts::U32(k)) = g.opts else {
            panic!()
        };
        assert_eq!(k.sel.keys[0].val, 0x0a00_0000);
        assert_eq!(
            b.get_filter(&get(0x8000_0099)),
            Err(TcError::msg(
                Errno::ENOENT,
                "Specified filter handle not found"
            ))
        );
        b.delete_filter(&get(0x8000_0005)).unwrap();
        assert_eq!(
            b.delete_filter(&get(0x8000_0005)),
            Err(TcError::msg(
                Errno::ENOENT,
                "Specified filter handle not found"
            ))
        );
        // A handle in another table than the root.
        assert_eq!(
            add_err(
                &mut b,
                &mut net,
                q,
                u32_msg(10, ETH_P_IP, 0x8010_0005, src(1))
            ),
            TcError::inval("cls_u32: Handle specified hash table address mismatch")
        );
        assert_eq!(
            add_err(
                &mut b,
                &mut net,
                q,
                u32_msg(10, ETH_P_IP, 0x8000_0009, None)
            ),
            TcError::inval("cls_u32: Filter handle requires options")
        );
        assert_eq!(
            add_err(
                &mut b,
                &mut net,
                q,
                u32_msg(10, ETH_P_IP, 0, Some(U32Opts::default()))
            ),
            TcError::inval("cls_u32: Selector not specified")
        );
        let mut o = src(1).unwrap();
        o.hash = Some(0x8000_1000);
        assert_eq!(
            add_err(&mut b, &mut net, q, u32_msg(10, ETH_P_IP, 0, Some(o))),
            TcError::inval("cls_u32: Specified hash table buckets exceed configured value")
        );
        let mut o = src(1).unwrap();
        o.link = Some(0x8000_0000);
        assert_eq!(
            add_err(&mut b, &mut net, q, u32_msg(10, ETH_P_IP, 0, Some(o))),
            TcError::inval("cls_u32: Not linking to root node")
        );
        let mut o = src(1).unwrap();
        o.indev = Some("nosuchdev".into());
        assert_eq!(
            add_err(&mut b, &mut net, q, u32_msg(10, ETH_P_IP, 0, Some(o))),
            TcError::inval("Network device not found")
        );
        let mut o = src(1).unwrap();
        o.flags = Some(3);
        assert_eq!(
            add_err(&mut b, &mut net, q, u32_msg(10, ETH_P_IP, 0, Some(o))),
            TcError::inval("cls_u32: Invalid filter flags")
        );
    }

    #[test]
    fn replace_keeps_the_selector_and_change_needs_an_existing_filter() {
        // Golden "u32 replace and change".
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let src = |n: u32, c: u16| {
            Some(u32_match(
                vec![key(n << 24, 0xff00_0000, 12)],
                Some(h(1, c)),
            ))
        };
        add(
            &mut b,
            &mut net,
            q,
            u32_msg(10, ETH_P_IP, 0x8000_0001, src(10, 0x10)),
        );
        let run = |b: &mut Block, net: &mut Net, cmd, m| b.change_filter(&m, cmd, &mut net.env(q));
        run(
            &mut b,
            &mut net,
            FilterCmd::Replace,
            u32_msg(10, ETH_P_IP, 0x8000_0001, src(11, 0x20)),
        )
        .unwrap();
        let k = knodes(&b);
        assert_eq!(
            (k[0].1.sel.keys[0].val, k[0].1.classid),
            (0x0a00_0000, Some(h(1, 0x20)))
        );
        run(
            &mut b,
            &mut net,
            FilterCmd::Change,
            u32_msg(10, ETH_P_IP, 0x8000_0001, src(12, 0x10)),
        )
        .unwrap();
        assert_eq!(knodes(&b)[0].1.classid, Some(h(1, 0x10)));
        assert_eq!(
            run(
                &mut b,
                &mut net,
                FilterCmd::Change,
                u32_msg(10, ETH_P_IP, 0x8000_0002, src(12, 0x10))
            ),
            Err(TcError::msg(
                Errno::ENOENT,
                "Need both RTM_NEWTFILTER and NLM_F_CREATE to create a new filter"
            ))
        );
        run(
            &mut b,
            &mut net,
            FilterCmd::Replace,
            u32_msg(10, ETH_P_IP, 0, src(13, 0x10)),
        )
        .unwrap();
        run(
            &mut b,
            &mut net,
            FilterCmd::Replace,
            u32_msg(20, ETH_P_IP, 0, src(14, 0x10)),
        )
        .unwrap();
        let fhs: Vec<String> = listing(&b).into_iter().map(|l| l.2).collect();
        assert_eq!(
            fhs,
            vec!["-", "800:", "800::1", "800::800", "-", "801:", "801::800"]
        );
        // Replacing a table handle is refused; flags must stay as they were.
        let t = U32Opts {
            divisor: Some(1),
            ..Default::default()
        };
        assert_eq!(
            run(
                &mut b,
                &mut net,
                FilterCmd::Replace,
                u32_msg(10, ETH_P_IP, 0x8000_0000, Some(t))
            ),
            Err(TcError::inval("cls_u32: Key node id cannot be zero"))
        );
        let mut o = src(1, 1).unwrap();
        o.flags = Some(TCA_CLS_FLAGS_SKIP_HW);
        assert_eq!(
            run(
                &mut b,
                &mut net,
                FilterCmd::Replace,
                u32_msg(10, ETH_P_IP, 0x8000_0001, Some(o))
            ),
            Err(TcError::inval(
                "cls_u32: Key node flags do not match passed flags"
            ))
        );
    }

    #[test]
    fn instances_of_one_qdisc_share_their_tables() {
        // Golden "u32 on classes and leaf qdiscs": filters on classes 1:1 and
        // 1:10 of qdisc 1:, both prio 1, list each other's tables.
        let mut net = Net::default();
        let (mut b1, mut b10) = (Block::default(), Block::default());
        let q = h(1, 0);
        let o = || {
            Some(u32_match(
                vec![key(0x0a00_0001, 0xffff_ffff, 16)],
                Some(h(1, 0x10)),
            ))
        };
        add(&mut b1, &mut net, q, u32_msg(1, ETH_P_IP, 0, o()));
        add(&mut b10, &mut net, q, u32_msg(1, ETH_P_IP, 0, o()));
        let expect = vec![
            line(0, 1, "-"),
            line(0, 1, "801:"),
            line(0, 1, "801::800"),
            line(0, 1, "800:"),
            line(0, 1, "800::800"),
        ];
        assert_eq!(listing(&b1), expect);
        assert_eq!(listing(&b10), expect);
        // Another qdisc has its own numbering.
        let mut other = Block::default();
        add(&mut other, &mut net, h(2, 0), u32_msg(1, ETH_P_IP, 0, o()));
        assert_eq!(listing(&other)[1], line(0, 1, "800:"));
        // Ids are allocated cyclically: after 801: goes, the next is 802:.
        drop(b10);
        add(&mut b1, &mut net, q, u32_msg(2, ETH_P_IP, 0, o()));
        assert_eq!(
            listing(&b1).iter().filter(|l| l.1 == 2).nth(1),
            Some(&line(0, 2, "802:"))
        );
    }

    #[test]
    fn an_instance_outlives_its_last_knode_while_another_shares_the_tables() {
        // Checked on Linux 6.18: prio 7 keeps its empty root while prio 8 exists.
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        for pref in [7, 8] {
            add(
                &mut b,
                &mut net,
                q,
                u32_msg(
                    pref,
                    ETH_P_IP,
                    0,
                    Some(u32_match(vec![key(0, 0, 0)], Some(h(1, 0x10)))),
                ),
            );
        }
        let del = |prio: u16, handle: u32| FilterMsg {
            prio,
            handle,
            kind: Some("u32".into()),
            ..Default::default()
        };
        b.delete_filter(&del(7, 0x8000_0800)).unwrap();
        b.delete_filter(&del(8, 0x8010_0800)).unwrap();
        assert_eq!(
            listing(&b),
            vec![
                line(0, 7, "-"),
                line(0, 7, "800:"),
                line(0, 8, "-"),
                line(0, 8, "801:")
            ]
        );
        // `get` finds tables of any priority of the qdisc.
        add(
            &mut b,
            &mut net,
            q,
            u32_msg(
                9,
                ETH_P_IP,
                0x0050_0000,
                Some(U32Opts {
                    divisor: Some(4),
                    ..Default::default()
                }),
            ),
        );
        let g = b.get_filter(&del(7, 0x0050_0000)).unwrap();
        assert_eq!(
            (g.prio, g.opts),
            (7, Some(FilterElemOpts::U32Table { divisor: 4 }))
        );
    }

    /// Classification reads a snapshot of the tables (see "Classifying
    /// without the lock"): the packet after a change must see it.
    #[test]
    fn the_packet_after_a_change_sees_it() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let dport = |port, class| {
            u32_msg(
                1,
                ETH_P_IP,
                0x8000_0001,
                Some(u32_match(vec![key(port, 0xffff, 20)], Some(h(1, class)))),
            )
        };
        let dns = || udp(A, B, 5000, 53);
        add(&mut b, &mut net, q, dport(53, 0x10));
        assert_eq!(class_of(&mut b, dns()), Some(h(1, 0x10)));
        // Replace changes the class (the selector stays, as in the kernel).
        b.change_filter(&dport(54, 0x20), FilterCmd::Replace, &mut net.env(q))
            .unwrap();
        assert_eq!(class_of(&mut b, dns()), Some(h(1, 0x20)));
        // A second instance of the qdisc, behind the first.
        let other = u32_match(vec![key(53, 0xffff, 20)], Some(h(1, 0x30)));
        add(&mut b, &mut net, q, u32_msg(2, ETH_P_IP, 0, Some(other)));
        assert_eq!(class_of(&mut b, dns()), Some(h(1, 0x20)));
        // Without the first knode, the second instance answers.
        let first = FilterMsg {
            prio: 1,
            handle: 0x8000_0001,
            kind: Some("u32".into()),
            ..Default::default()
        };
        b.delete_filter(&first).unwrap();
        assert_eq!(class_of(&mut b, dns()), Some(h(1, 0x30)));
    }

    #[test]
    fn a_mark_set_by_actions_is_what_the_next_knodes_test() {
        use crate::act::skbedit::SkbeditOpts;
        use crate::act::{ActionOpts, ActionSpec};
        // 800::800 matches everything, sets mark 1 and says `continue`;
        // 800::801 wants mark 1. With `pipe` the first knode answers.
        for (then, class) in [(Verdict::Continue, 0x20), (Verdict::Pipe, 0x10)] {
            let (mut net, mut b) = (Net::default(), Block::default());
            let q = h(1, 0);
            let mut o = u32_match(vec![], Some(h(1, 0x10)));
            o.actions = vec![ActionSpec {
                index: 0,
                opts: ActionOpts::Skbedit(SkbeditOpts {
                    action: then,
                    mark: Some(1),
                    ..Default::default()
                }),
                cookie: None,
                no_percpu: false,
                offload: 0,
            }];
            add(&mut b, &mut net, q, u32_msg(1, ETH_P_ALL, 0, Some(o)));
            let mut o = u32_match(vec![], Some(h(1, 0x20)));
            o.mark = Some(U32Mark { val: 1, mask: 1 });
            add(&mut b, &mut net, q, u32_msg(1, ETH_P_ALL, 0, Some(o)));
            let mut p = udp(A, B, 1, 2);
            let r = b.classify(&mut p, Time(0)).map(|r| r.classid);
            assert_eq!((r, p.mark), (Some(h(1, class)), 1), "{then:?}");
        }
    }

    #[test]
    fn marks_and_skip_sw() {
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(1, 0);
        let mut o = u32_match(vec![], Some(h(1, 0x10)));
        o.mark = Some(U32Mark {
            val: 0x10,
            mask: 0xff,
        });
        add(&mut b, &mut net, q, u32_msg(1, ETH_P_ALL, 0, Some(o)));
        let mut o = u32_match(vec![], Some(h(1, 0x20)));
        o.flags = Some(TCA_CLS_FLAGS_SKIP_SW);
        add(&mut b, &mut net, q, u32_msg(2, ETH_P_ALL, 0, Some(o)));
        let mut p = udp(A, B, 1, 2);
        p.mark = 0x110;
        assert_eq!(class_of(&mut b, p.clone()), Some(h(1, 0x10)));
        p.mark = 0x11;
        assert_eq!(class_of(&mut b, p), None);
        let k = knodes(&b);
        assert_eq!(
            k[0].1.mark,
            Some(U32MarkDump {
                val: 0x10,
                mask: 0xff,
                success: 1
            })
        );
        assert_eq!(
            k[1].1.flags,
            TCA_CLS_FLAGS_SKIP_SW | TCA_CLS_FLAGS_NOT_IN_HW
        );
        // A table cannot be hardware-only without hardware.
        let t = U32Opts {
            divisor: Some(4),
            flags: Some(TCA_CLS_FLAGS_SKIP_SW),
            ..Default::default()
        };
        assert_eq!(
            add_err(&mut b, &mut net, q, u32_msg(1, ETH_P_ALL, 0, Some(t))),
            TcError::errno(Errno::EINVAL)
        );
    }

    #[test]
    fn the_conditioner_ingress_policer_through_u32() {
        // tc filter add dev $DEV parent ffff: protocol ip prio 50 u32 match ip
        // src 0.0.0.0/0 police rate 800kbit burst 10k drop flowid :1
        let (mut net, mut b) = (Net::default(), Block::default());
        let q = h(0xffff, 0);
        let burst_ns = 10 * 1024 * 1_000_000_000u64 / 100_000;
        let police = PoliceSpec {
            index: 0,
            opts: PoliceOpts {
                exceed: Verdict::Shot,
                rate: Some(RateSpec {
                    rate: 100_000,
                    ..Default::default()
                }),
                rate_cell_log: 3,
                burst: (burst_ns >> 6) as u32,
                ..Default::default()
            },
        };
        let mut o = u32_match(vec![key(0, 0, 12)], Some(h(0, 1)));
        o.police = Some(police);
        add(&mut b, &mut net, q, u32_msg(50, ETH_P_IP, 0, Some(o)));
        // 2 Mbit/s of 1000-byte packets for 20 s.
        let (mut ok, mut shot) = (0u64, 0u64);
        for i in 0..5000u64 {
            let mut p = udp(A, B, 1, 2);
            p.len = 1000;
            let r = b.classify(&mut p, Time(i * 4_000_000)).unwrap();
            assert_eq!(r.classid, h(0, 1));
            match r.verdict {
                Verdict::Ok => ok += 1,
                Verdict::Shot => shot += 1,
                v => panic!("{v:?}"),
            }
        }
        let expect = 100_000.0 * 20.0 + 10240.0;
        assert!(
            ((ok * 1000) as f64 - expect).abs() / expect < 0.02,
            "{ok} packets passed"
        );
        let d = b.dump(None, 0, 0);
        let el = &d[2];
        let Some(FilterElemOpts::U32(k)) = &el.opts else {
            panic!()
        };
        let pol = k.police.as_ref().unwrap();
        assert!(k.actions.is_empty());
        assert_eq!(
            (pol.kind.as_str(), pol.index, pol.refcnt, pol.bindcnt),
            ("police", 1, 1, 1)
        );
        let s = el.stats.unwrap();
        assert_eq!(
            (s.packets, s.bytes, s.drops, s.overlimits),
            (5000, 5_000_000, shot, shot)
        );
        // The kernel reports the effective mtu: 255 << cell_log.
        let crate::act::ActionOpts::Police(po) = &pol.opts else {
            panic!()
        };
        assert_eq!(po.mtu, 2040);
        // Deleting the filter releases the inline policer.
        b.delete_filter(&FilterMsg::default()).unwrap();
        assert!(net.actions.list("police").is_empty());
    }
}
