//! gred: Generic RED — up to 16 virtual queues, each with its own RED, in
//! one FIFO.
//!
//! Modelled on net/sched/sch_gred.c (Linux 6.18); each virtual queue's RED
//! is the shared RED law ([`super::red_law`]).
//!
//! # Virtual queues
//!
//! gred is set up in two steps, as tc does it: `setup vqs N default D`
//! makes a table of N virtual queues (VQs, the kernel's "DPs", drop
//! precedences) with D the default, none of them configured yet; then each
//! `change ... vq K limit .. min .. max ..` gives VQ K its RED parameters
//! and byte limit (at most the qdisc's `limit`). A packet's VQ is the low
//! four bits of its `tc_index` (set by ingress filters: the class minor of
//! the filter that passed it); a packet naming no configured VQ goes to the
//! default VQ, and its `tc_index` is rewritten to say so, so dequeue finds
//! it. If the default VQ is not configured either, the packet bypasses RED
//! and is only held to the qdisc's `limit`.
//!
//! All packets wait in one FIFO; the VQs are accounting. Each VQ keeps a
//! byte backlog and, at each arrival, RED decides on its average: below
//! `min` queue, between the thresholds mark or drop with rising
//! probability, above `max` always (the marks are CE with `ecn`, unless
//! `harddrop` above `max`), and then the VQ's byte `limit` tail-drops
//! (`pdrop`). A VQ whose backlog empties starts an idle period that decays
//! its average, as red's queue does.
//!
//! # grio: priorities (RIO) and shared averages (WRED)
//!
//! With `grio` each VQ has a priority (`prio`, 1 the highest; a VQ given
//! none takes the default VQ's, or 8). RED then acts on the VQ's own
//! average *plus* the averages of every busy VQ of higher priority (lower
//! number): lower priorities feel the load of higher ones and back off
//! first ("RIO", RED with In and Out). If two VQs share a priority, the
//! kernel switches to WRED instead: one average, of the whole queue's
//! backlog, shared by all VQs, each judging it with its own thresholds;
//! the VQs' backlogs then all read as the whole queue's. Without `grio`
//! every VQ has priority 8 and its own average.
//!
//! # Flags
//!
//! `ecn` and `harddrop` given at setup apply to every VQ and cannot then be
//! changed per VQ; given per VQ (`change ... vq K ecn`), they apply to that
//! VQ, and setup can no longer set them.
//!
//! Statistics are per VQ and travel in the options (`tc -s` prints them
//! there): bytes and packets seen, backlog, the average, early and forced
//! drops and marks, and `pdrop`. gred is classless.
//!
//! Deviations: RED's random numbers come from a generator seeded from
//! [`DevInfo::seed`]. The average a dump shows is decayed to the time of
//! the last enqueue or dequeue, not to the time of the dump (`dump` has no
//! clock); the kernel's dump in WRED mode also copies the shared average
//! into each VQ, which sluice does on a copy.

use super::red_law::{
    self, red_check_params, RedAction, RedParams, RedVars, RED_STAB_SIZE, TC_RED_ECN,
    TC_RED_HARDDROP,
};
use super::{wrong_kind, Cx, Dequeue, DevInfo, Qdisc, QdiscOpts};
use crate::error::{Errno, TcError, TcResult};
use crate::packet::Packet;
use crate::stats::DropReason;
use crate::time::Time;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Virtual queues at most (`MAX_DPs`).
pub const MAX_DPS: u32 = 16;
/// The priority of a VQ outside grio, or given none (`GRED_DEF_PRIO`).
pub const GRED_DEF_PRIO: u8 = (MAX_DPS / 2) as u8;
/// The bits of `tc_index` that name the VQ (`GRED_VQ_MASK`).
const VQ_MASK: u16 = (MAX_DPS - 1) as u16;
/// The RED flags a VQ may have (`GRED_VQ_RED_FLAGS`).
pub const GRED_VQ_RED_FLAGS: u32 = (TC_RED_ECN | TC_RED_HARDDROP) as u32;

/// `struct tc_gred_sopt`: the table (`TCA_GRED_DPS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GredSopt {
    /// Virtual queues (`DPs`).
    pub dps: u32,
    /// The default VQ (`def_DP`).
    pub def_dp: u32,
    /// RIO/WRED priorities on.
    pub grio: u8,
    /// RED flags for every VQ (`TC_RED_ECN`, `TC_RED_HARDDROP`).
    pub flags: u8,
}

/// `struct tc_gred_qopt`: one VQ's parameters in a request, its
/// parameters and statistics in a dump.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GredQopt {
    /// Bytes the VQ may hold.
    pub limit: u32,
    /// Minimum threshold, bytes.
    pub qth_min: u32,
    /// Maximum threshold, bytes.
    pub qth_max: u32,
    /// The VQ; in a dump, `MAX_DPS + i` for an unconfigured slot `i`.
    pub dp: u32,
    /// Bytes queued (dump).
    pub backlog: u32,
    /// The average, bytes (dump).
    pub qave: u32,
    /// Forced drops (dump).
    pub forced: u32,
    /// Early drops (dump).
    pub early: u32,
    /// Other drops (dump; always 0).
    pub other: u32,
    /// Drops at the VQ's limit (dump).
    pub pdrop: u32,
    /// log2(1/W).
    pub wlog: u8,
    /// log2 of the probability denominator.
    pub plog: u8,
    /// log2 of the idle-time cell, µs.
    pub scell_log: u8,
    /// Priority (grio); 0 in a request: the default.
    pub prio: u8,
    /// Packets seen (dump).
    pub packets: u32,
    /// Bytes seen (dump; 32 bits).
    pub bytesin: u32,
}

/// One VQ's statistics in `TCA_GRED_VQ_LIST` (dump only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GredVqStats {
    /// Bytes seen.
    pub bytes: u64,
    /// Packets seen.
    pub packets: u32,
    /// Bytes queued.
    pub backlog: u32,
    /// Early drops.
    pub prob_drop: u32,
    /// Early marks.
    pub prob_mark: u32,
    /// Forced drops.
    pub forced_drop: u32,
    /// Forced marks.
    pub forced_mark: u32,
    /// Drops at the VQ's limit.
    pub pdrop: u32,
}

/// `TCA_GRED_VQ_ENTRY`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GredVqEntry {
    /// `TCA_GRED_VQ_DP`.
    pub dp: Option<u32>,
    /// `TCA_GRED_VQ_FLAGS`: the VQ's RED flags.
    pub flags: Option<u32>,
    /// The statistics attributes (dump only).
    pub stats: Option<GredVqStats>,
}

/// gred's options (`TCA_GRED_*`): what tc sends — either the table
/// (`dps`, maybe `limit`) or one VQ (`parms`, `stab`, `max_p`,
/// `vq_list`) — and what the kernel dumps: the table, the limit, all 16
/// slots in `parms` and `max_p`, and each VQ's flags and statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GredOpts {
    /// `TCA_GRED_DPS`.
    pub dps: Option<GredSopt>,
    /// `TCA_GRED_LIMIT`: the qdisc's byte limit.
    pub limit: Option<u32>,
    /// `TCA_GRED_PARMS`: one VQ in a request, the 16 slots in a dump (empty: absent).
    pub parms: Vec<GredQopt>,
    /// `TCA_GRED_STAB`: the idle-damping table (requests only).
    pub stab: Option<Vec<u8>>,
    /// `TCA_GRED_MAX_P`: one in a request, 16 in a dump (empty: absent).
    pub max_p: Vec<u32>,
    /// `TCA_GRED_VQ_LIST`.
    pub vq_list: Option<Vec<GredVqEntry>>,
}

/// `struct red_stats` as gred keeps it.
#[derive(Clone, Copy, Debug, Default)]
struct VqCounters {
    prob_drop: u32,
    prob_mark: u32,
    forced_drop: u32,
    forced_mark: u32,
    pdrop: u32,
}

/// `struct gred_sched_data`: one virtual queue.
#[derive(Clone, Debug)]
struct Vq {
    /// Bytes at most.
    limit: u32,
    dp: u32,
    red_flags: u32,
    bytesin: u64,
    packetsin: u32,
    /// Bytes queued in this VQ.
    backlog: u32,
    prio: u8,
    params: RedParams,
    vars: RedVars,
    stats: VqCounters,
}

impl Vq {
    fn new(red_flags: u32) -> Self {
        Vq {
            limit: 0,
            dp: 0,
            red_flags,
            bytesin: 0,
            packetsin: 0,
            backlog: 0,
            prio: 0,
            params: RedParams::new(0, 0, 0, 0, 0, None, 0),
            vars: RedVars::default(),
            stats: VqCounters::default(),
        }
    }
}

/// A gred qdisc.
#[derive(Debug)]
pub struct Gred {
    tab: Vec<Option<Vq>>,
    dps: u32,
    def: u32,
    rio: bool,
    wred: bool,
    red_flags: u32,
    /// The shared average of WRED mode.
    wred_set: RedVars,
    /// Bytes queued at most (`sch->limit`).
    limit: u32,
    queue: VecDeque<Packet>,
    /// Bytes queued (`sch->qstats.backlog`).
    backlog: u32,
    rng: Xoshiro256PlusPlus,
    overlimits: u64,
    /// The time of the last call.
    now: Time,
}

fn inval(msg: &str) -> TcError {
    TcError::inval(format!("sch_gred: {msg}"))
}

impl Gred {
    /// `gred_init`: the qdisc's limit and table; VQs only come with `change`.
    pub fn new(o: &GredOpts, dev: &DevInfo) -> TcResult<Self> {
        if !o.parms.is_empty() || o.stab.is_some() {
            return Err(inval(
                "virtual queue configuration can't be specified at initialization time",
            ));
        }
        let mtu = dev.mtu.saturating_add(dev.hard_header_len);
        let mut q = Gred {
            tab: vec![None; MAX_DPS as usize],
            dps: 0,
            def: 0,
            rio: false,
            wred: false,
            red_flags: 0,
            wred_set: RedVars::default(),
            limit: o
                .limit
                .unwrap_or_else(|| dev.default_qlen().wrapping_mul(mtu)),
            queue: VecDeque::new(),
            backlog: 0,
            rng: Xoshiro256PlusPlus::seed_from_u64(dev.seed ^ 0x6772_6564_0000_0000),
            overlimits: 0,
            now: Time::ZERO,
        };
        q.change_table_def(o.dps.as_ref())?;
        Ok(q)
    }

    /// Is any VQ of the table's priority shared (`gred_wred_mode_check`)?
    fn prio_shared(&self) -> bool {
        let vqs: Vec<&Vq> = self.tab[..self.dps as usize].iter().flatten().collect();
        vqs.iter()
            .enumerate()
            .any(|(i, a)| vqs[i + 1..].iter().any(|b| b.prio == a.prio))
    }

    /// `gred_per_vq_red_flags_used`.
    fn per_vq_flags_used(&self) -> bool {
        self.red_flags == 0 && self.tab.iter().flatten().any(|v| v.red_flags != 0)
    }

    /// `gred_change_table_def`: validate, then commit the table; VQs beyond
    /// the new count are destroyed (their packets stay queued).
    fn change_table_def(&mut self, sopt: Option<&GredSopt>) -> TcResult<()> {
        let s = sopt.ok_or(TcError::errno(Errno::EINVAL))?;
        if s.dps > MAX_DPS {
            return Err(inval("number of virtual queues too high"));
        }
        if s.dps == 0 {
            return Err(inval("number of virtual queues can't be 0"));
        }
        if s.def_dp >= s.dps {
            return Err(inval("default virtual queue above virtual queue count"));
        }
        if s.flags != 0 && self.per_vq_flags_used() {
            return Err(inval(
                "can't set per-Qdisc RED flags when per-virtual queue flags are used",
            ));
        }
        self.dps = s.dps;
        self.def = s.def_dp;
        let flags_changed = self.red_flags != s.flags as u32;
        self.red_flags = s.flags as u32;
        self.rio = s.grio != 0;
        self.wred = self.rio && self.prio_shared();
        if flags_changed {
            let f = self.red_flags & GRED_VQ_RED_FLAGS;
            for v in self.tab[..self.dps as usize].iter_mut().flatten() {
                v.red_flags = f;
            }
        }
        for v in &mut self.tab[self.dps as usize..] {
            *v = None;
        }
        Ok(())
    }

    /// `gred_vq_validate` for each entry of a VQ list, `cdp` the VQ being set.
    fn validate_vq_list(&self, cdp: u32, list: &[GredVqEntry]) -> TcResult<()> {
        for e in list {
            let dp =
                e.dp.ok_or_else(|| inval("Virtual queue with no index specified"))?;
            if dp >= self.dps {
                return Err(inval("Virtual queue with index out of bounds"));
            }
            if dp != cdp && self.tab[dp as usize].is_none() {
                return Err(inval("Virtual queue not yet instantiated"));
            }
            if let Some(f) = e.flags {
                if self.red_flags != 0 && self.red_flags != f {
                    return Err(inval(
                        "can't change per-virtual queue RED flags when per-Qdisc flags are used",
                    ));
                }
                if f & !GRED_VQ_RED_FLAGS != 0 {
                    return Err(inval("invalid RED flags specified"));
                }
            }
        }
        Ok(())
    }

    /// `gred_change` with a VQ's parameters: validate everything, then
    /// configure the VQ (creating it), apply the list's flags, and
    /// re-check WRED mode.
    fn change_vq(&mut self, o: &GredOpts) -> TcResult<()> {
        let (Some(ctl), Some(stab), None) = (o.parms.first(), o.stab.as_ref(), o.limit) else {
            return Err(inval(
                "can't configure Qdisc and virtual queue at the same time",
            ));
        };
        if stab.len() < RED_STAB_SIZE {
            return Err(TcError::errno(Errno::EINVAL));
        }
        let mut table = [0u8; RED_STAB_SIZE];
        table.copy_from_slice(&stab[..RED_STAB_SIZE]);
        let max_p = o.max_p.first().copied().unwrap_or(0);
        if ctl.dp >= self.dps {
            return Err(inval("virtual queue index above virtual queue count"));
        }
        if let Some(list) = &o.vq_list {
            self.validate_vq_list(ctl.dp, list)?;
        }
        let prio = match (self.rio, ctl.prio) {
            (false, _) => GRED_DEF_PRIO,
            (true, 0) => self.tab[self.def as usize]
                .as_ref()
                .map_or(GRED_DEF_PRIO, |v| v.prio),
            (true, p) => p,
        };
        if !red_check_params(
            ctl.qth_min,
            ctl.qth_max,
            ctl.wlog,
            ctl.scell_log,
            Some(&table),
        ) {
            return Err(inval("invalid RED parameters"));
        }
        // Commit.
        let qdisc_flags = self.red_flags & GRED_VQ_RED_FLAGS;
        let limit = ctl.limit.min(self.limit);
        let v = self.tab[ctl.dp as usize].get_or_insert_with(|| Vq::new(qdisc_flags));
        v.dp = ctl.dp;
        v.prio = prio;
        v.limit = limit;
        if v.backlog == 0 {
            v.vars.end_idle();
        }
        v.params = RedParams::new(
            ctl.qth_min,
            ctl.qth_max,
            ctl.wlog,
            ctl.plog,
            ctl.scell_log,
            Some(&table),
            max_p,
        );
        v.vars.set_vars();
        for e in o.vq_list.iter().flatten() {
            if let (Some(dp), Some(f)) = (e.dp, e.flags) {
                if let Some(v) = self.tab[dp as usize].as_mut() {
                    v.red_flags = f;
                }
            }
        }
        if self.rio {
            self.wred = self.prio_shared();
        }
        Ok(())
    }

    /// The backlog a VQ's RED sees: its own, or in WRED mode the queue's.
    fn vq_backlog(&self, v: &Vq) -> u32 {
        if self.wred {
            self.backlog
        } else {
            v.backlog
        }
    }

    /// The VQ of a packet (`tc_index`'s low bits), if configured.
    fn vq_of(&self, pkt: &Packet) -> Option<usize> {
        let dp = (pkt.tc_index & VQ_MASK) as usize;
        (dp < self.dps as usize && self.tab[dp].is_some()).then_some(dp)
    }

    /// Queue `pkt` at the tail, accounted to nothing but the qdisc.
    fn push(&mut self, pkt: Packet) {
        self.backlog = self.backlog.wrapping_add(pkt.len);
        self.queue.push_back(pkt);
    }

    /// The sum of the averages of busy VQs of higher priority than VQ `dp`
    /// (RIO mode only).
    fn higher_priority_load(&self, dp: usize) -> u64 {
        if self.wred || !self.rio {
            return 0;
        }
        let prio = self.tab[dp].as_ref().map_or(0, |v| v.prio);
        self.tab[..self.dps as usize]
            .iter()
            .flatten()
            .filter(|v| v.prio < prio && !v.vars.is_idling())
            .map(|v| v.vars.qavg)
            .sum()
    }

    /// RED's verdict for VQ `dp` on `pkt`: `Err` drops it.
    fn red(&mut self, dp: usize, pkt: &mut Packet, now: Time) -> Result<(), DropReason> {
        let extra = self.higher_priority_load(dp);
        let backlog = self.vq_backlog(self.tab[dp].as_ref().expect("configured VQ"));
        let (wred, wred_set) = (self.wred, self.wred_set);
        let v = self.tab[dp].as_mut().expect("configured VQ");
        v.packetsin = v.packetsin.wrapping_add(1);
        v.bytesin += pkt.len as u64;
        if wred {
            v.vars.qavg = wred_set.qavg;
            v.vars.idle_since = wred_set.idle_since;
        }
        v.vars.qavg = red_law::calc_qavg(&v.params, &v.vars, backlog as u64, now);
        v.vars.end_idle();
        if wred {
            self.wred_set.qavg = v.vars.qavg;
            self.wred_set.idle_since = v.vars.idle_since;
        }
        let qavg = v.vars.qavg.wrapping_add(extra);
        let ecn = v.red_flags & TC_RED_ECN as u32 != 0;
        let harddrop = v.red_flags & TC_RED_HARDDROP as u32 != 0;
        match red_law::red_action(&v.params, &mut v.vars, qavg, &mut self.rng) {
            RedAction::DontMark => Ok(()),
            RedAction::ProbMark => {
                self.overlimits += 1;
                if ecn && pkt.set_ce() {
                    v.stats.prob_mark = v.stats.prob_mark.wrapping_add(1);
                    Ok(())
                } else {
                    v.stats.prob_drop = v.stats.prob_drop.wrapping_add(1);
                    Err(DropReason::Aqm)
                }
            }
            RedAction::HardMark => {
                self.overlimits += 1;
                if !harddrop && ecn && pkt.set_ce() {
                    v.stats.forced_mark = v.stats.forced_mark.wrapping_add(1);
                    Ok(())
                } else {
                    v.stats.forced_drop = v.stats.forced_drop.wrapping_add(1);
                    Err(DropReason::Aqm)
                }
            }
        }
    }

    /// The average a dump shows for `v` (`red_calc_qavg` on its own
    /// average: decayed if idle), in bytes.
    fn shown_average(&self, v: &Vq) -> u32 {
        let mut vars = v.vars;
        if self.wred {
            vars.qavg = self.wred_set.qavg;
            vars.idle_since = self.wred_set.idle_since;
        }
        let qavg = red_law::calc_qavg(&v.params, &vars, vars.qavg >> v.params.wlog, self.now);
        (qavg >> v.params.wlog) as u32
    }
}

impl Qdisc for Gred {
    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        self.now = cx.now;
        let dp = match self.vq_of(&pkt) {
            Some(dp) => dp,
            None => {
                let def = self.def as usize;
                if self.tab[def].is_none() {
                    // No default VQ: untouched by RED, held to the limit.
                    if self.backlog.wrapping_add(pkt.len) <= self.limit {
                        self.push(pkt);
                        return Ok(());
                    }
                    return Err((pkt, DropReason::QueueFull));
                }
                pkt.tc_index = (pkt.tc_index & !VQ_MASK) | def as u16;
                def
            }
        };
        if let Err(r) = self.red(dp, &mut pkt, cx.now) {
            return Err((pkt, r));
        }
        let v = self.tab[dp].as_ref().expect("configured VQ");
        if self.vq_backlog(v).wrapping_add(pkt.len) <= v.limit {
            let v = self.tab[dp].as_mut().expect("configured VQ");
            v.backlog = v.backlog.wrapping_add(pkt.len);
            self.push(pkt);
            return Ok(());
        }
        let v = self.tab[dp].as_mut().expect("configured VQ");
        v.stats.pdrop = v.stats.pdrop.wrapping_add(1);
        Err((pkt, DropReason::QueueFull))
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.now = cx.now;
        let Some(pkt) = self.queue.pop_front() else {
            return Dequeue::Empty;
        };
        self.backlog = self.backlog.wrapping_sub(pkt.len);
        // A packet whose VQ was destroyed meanwhile is not discounted
        // ("Unable to relocate VQ"), as in the kernel.
        if let Some(dp) = self.vq_of(&pkt) {
            let (wred, total) = (self.wred, self.backlog);
            let v = self.tab[dp].as_mut().expect("configured VQ");
            v.backlog = v.backlog.wrapping_sub(pkt.len);
            if wred {
                if total == 0 {
                    self.wred_set.start_idle(cx.now);
                }
            } else if v.backlog == 0 {
                v.vars.start_idle(cx.now);
            }
        }
        Dequeue::Packet(pkt)
    }

    /// `gred_reset`: empty the queue, restart every VQ's average.
    fn reset(&mut self) {
        self.queue.clear();
        self.backlog = 0;
        for v in self.tab[..self.dps as usize].iter_mut().flatten() {
            v.vars.restart();
            v.backlog = 0;
        }
    }

    /// `gred_change`: the table (with `dps`; a `limit` given with it is
    /// taken even if the table is refused, as the kernel does), or one VQ.
    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Gred(o) = opts else {
            return Err(wrong_kind("gred", opts));
        };
        if o.parms.is_empty() && o.stab.is_none() {
            if let Some(l) = o.limit {
                self.limit = l;
            }
            return self.change_table_def(o.dps.as_ref());
        }
        self.change_vq(o)
    }

    /// `gred_dump`: the table, the limit, every slot old-style, and the
    /// VQs with their flags and statistics.
    fn dump(&self) -> QdiscOpts {
        let mut parms = Vec::with_capacity(MAX_DPS as usize);
        let mut max_p = Vec::with_capacity(MAX_DPS as usize);
        let mut list = Vec::new();
        for (i, slot) in self.tab.iter().enumerate() {
            let Some(v) = slot else {
                parms.push(GredQopt {
                    dp: MAX_DPS + i as u32,
                    ..GredQopt::default()
                });
                max_p.push(0);
                continue;
            };
            let p = &v.params;
            let backlog = self.vq_backlog(v);
            parms.push(GredQopt {
                limit: v.limit,
                qth_min: p.min_threshold(),
                qth_max: p.max_threshold(),
                dp: v.dp,
                backlog,
                qave: self.shown_average(v),
                forced: v.stats.forced_drop,
                early: v.stats.prob_drop,
                other: 0,
                pdrop: v.stats.pdrop,
                wlog: p.wlog,
                plog: p.plog,
                scell_log: p.scell_log,
                prio: v.prio,
                packets: v.packetsin,
                bytesin: v.bytesin as u32,
            });
            max_p.push(p.max_p);
            list.push(GredVqEntry {
                dp: Some(v.dp),
                flags: Some(v.red_flags),
                stats: Some(GredVqStats {
                    bytes: v.bytesin,
                    packets: v.packetsin,
                    backlog,
                    prob_drop: v.stats.prob_drop,
                    prob_mark: v.stats.prob_mark,
                    forced_drop: v.stats.forced_drop,
                    forced_mark: v.stats.forced_mark,
                    pdrop: v.stats.pdrop,
                }),
            });
        }
        QdiscOpts::Gred(GredOpts {
            dps: Some(GredSopt {
                dps: self.dps,
                def_dp: self.def,
                grio: self.rio as u8,
                flags: self.red_flags as u8,
            }),
            limit: Some(self.limit),
            parms,
            stab: None,
            max_p,
            vq_list: Some(list),
        })
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;
    use crate::packet::Skb;
    use crate::qdisc::codel_law::testing::pkt;
    use crate::qdisc::QdiscNode;
    use proptest::prelude::*;

    fn setup(dps: u32, def: u32, grio: bool, flags: u8) -> GredOpts {
        GredOpts {
            dps: Some(GredSopt {
                dps,
                def_dp: def,
                grio: grio as u8,
                flags,
            }),
            ..GredOpts::default()
        }
    }

    /// One VQ as tc sends it, with Wlog 0 (the average is the backlog the
    /// arrival sees) and an all-zero idle table.
    fn vq(dp: u32, prio: u8, limit: u32, min: u32, max: u32, prob: f64) -> GredOpts {
        GredOpts {
            parms: vec![GredQopt {
                limit,
                qth_min: min,
                qth_max: max,
                dp,
                prio,
                plog: 20,
                scell_log: 10,
                ..GredQopt::default()
            }],
            stab: Some(vec![0; RED_STAB_SIZE]),
            max_p: vec![(prob * 4294967296.0) as u32],
            vq_list: Some(vec![GredVqEntry {
                dp: Some(dp),
                flags: Some(0),
                stats: None,
            }]),
            ..GredOpts::default()
        }
    }

    fn node(setup: GredOpts, vqs: &[GredOpts]) -> QdiscNode {
        let dev = DevInfo::default();
        let mut g = Gred::new(&setup, &dev).unwrap();
        for v in vqs {
            g.change(&QdiscOpts::Gred(v.clone()), &dev).unwrap();
        }
        QdiscNode::new(Handle::new(1, 0), Handle::ROOT, Box::new(g))
    }

    fn tagged(dp: u16, seq: u32, len: u32) -> Packet {
        Packet::from(Skb {
            tc_index: dp,
            ..pkt(dp as u32, seq, len, 0).into_skb()
        })
    }

    fn dumped(n: &QdiscNode) -> GredOpts {
        match n.qdisc.dump() {
            QdiscOpts::Gred(o) => o,
            other => panic!("{other:?}"),
        }
    }

    /// Per-VQ statistics from the dump's VQ list.
    fn vq_stats(n: &QdiscNode, dp: u32) -> GredVqStats {
        dumped(n)
            .vq_list
            .unwrap()
            .iter()
            .find(|e| e.dp == Some(dp))
            .and_then(|e| e.stats)
            .unwrap()
    }

    #[test]
    fn packets_land_in_the_vq_their_tc_index_names() {
        let mut n = node(
            setup(4, 2, false, 0),
            &[
                vq(1, 0, 100_000, 50_000, 90_000, 0.1),
                vq(2, 0, 100_000, 50_000, 90_000, 0.1),
            ],
        );
        let mut cx = Cx::new(Time(0));
        // VQ 1, VQ 2; 3 is not configured and 5 is beyond the table: both
        // go to the default VQ 2, and so does 0x12 (only the low four bits
        // count).
        for (i, (idx, len)) in [(1, 100), (2, 200), (3, 300), (5, 400), (0x11, 500)]
            .into_iter()
            .enumerate()
        {
            n.enqueue(tagged(idx, i as u32, len), &mut cx).unwrap();
        }
        assert_eq!(vq_stats(&n, 1).backlog, 100 + 500);
        assert_eq!(vq_stats(&n, 2).backlog, 200 + 300 + 400);
        assert_eq!((vq_stats(&n, 1).packets, vq_stats(&n, 2).packets), (2, 3));
        // The default's packets were retagged, so dequeue discounts them
        // from VQ 2; one FIFO for all.
        let mut order = vec![];
        while let Dequeue::Packet(p) = n.dequeue(&mut cx) {
            order.push((p.len, p.tc_index));
        }
        assert_eq!(
            order,
            vec![(100, 1), (200, 2), (300, 2), (400, 2), (500, 0x11)]
        );
        assert_eq!((vq_stats(&n, 1).backlog, vq_stats(&n, 2).backlog), (0, 0));
        // Without a default VQ, unknown packets bypass RED, held to `limit`.
        let mut s = setup(4, 3, false, 0);
        s.limit = Some(1000);
        let mut n = node(s, &[vq(1, 0, 1000, 100, 200, 0.1)]);
        for i in 0..6 {
            let _ = n.enqueue(tagged(0, i, 300), &mut cx);
        }
        assert_eq!((n.stats().qlen, n.stats().drops), (3, 3));
    }

    /// Each VQ's RED acts on its own average: VQ 1 over its `max` drops
    /// every packet while VQ 2, empty, queues all of its own.
    #[test]
    fn each_vq_has_its_own_red() {
        let mut n = node(
            setup(4, 1, false, 0),
            &[
                vq(1, 0, 1_000_000, 10_000, 20_000, 0.5),
                vq(2, 0, 1_000_000, 10_000, 20_000, 0.5),
            ],
        );
        let mut cx = Cx::new(Time(0));
        let mut tries = 0;
        while vq_stats(&n, 1).backlog < 20_000 {
            let _ = n.enqueue(tagged(1, tries, 1000), &mut cx);
            tries += 1;
        }
        assert!(tries > 20, "some early drops between min and max");
        for i in 0..50 {
            assert_eq!(
                n.enqueue(tagged(1, 1000 + i, 1000), &mut cx),
                Err(DropReason::Aqm)
            );
        }
        for i in 0..10 {
            n.enqueue(tagged(2, i, 1000), &mut cx).unwrap();
        }
        let (s1, s2) = (vq_stats(&n, 1), vq_stats(&n, 2));
        assert!(s1.forced_drop >= 50 && s1.prob_drop > 0, "{s1:?}");
        assert_eq!((s2.forced_drop, s2.prob_drop, s2.backlog), (0, 0, 10_000));
        assert_eq!(n.stats().overlimits as u32, s1.forced_drop + s1.prob_drop);
        // The old-style slot agrees, and shows the average.
        let d = dumped(&n);
        assert_eq!(d.parms[1].forced, s1.forced_drop);
        assert_eq!(d.parms[1].qave, 20_000);
        assert_eq!(d.parms[2].qave, 9_000, "the last arrival saw 9 packets");
        // The VQ's byte limit tail-drops (pdrop).
        let mut n = node(
            setup(2, 0, false, 0),
            &[vq(0, 0, 3000, 100_000, 200_000, 0.1)],
        );
        for i in 0..5 {
            let _ = n.enqueue(tagged(0, i, 1000), &mut cx);
        }
        assert_eq!((n.stats().qlen, vq_stats(&n, 0).pdrop), (3, 2));
    }

    /// grio with distinct priorities (RIO): a VQ's RED judges its own
    /// average plus those of busy VQs of higher priority (a lower number),
    /// so load on the high-priority VQ pushes the low one over its
    /// thresholds, and not the other way round.
    #[test]
    fn rio_adds_the_averages_of_higher_priorities() {
        let vqs = [
            vq(1, 1, 1_000_000, 30_000, 40_000, 0.5),
            vq(2, 2, 1_000_000, 10_000, 20_000, 0.5),
        ];
        let mut cx = Cx::new(Time(0));
        let fill = |n: &mut QdiscNode, dp: u16, count: u32, cx: &mut Cx| -> usize {
            (0..count)
                .filter(|&i| n.enqueue(tagged(dp, i, 1000), cx).is_ok())
                .count()
        };
        // 15 packets in VQ 1 (its average: the 14 kB the last one found),
        // then packets for VQ 2: they meet 14 kB plus their own average, so
        // RED drops some early, and all by force once VQ 2 holds 6 kB.
        let mut n = node(setup(4, 1, true, 0), &vqs);
        assert_eq!(fill(&mut n, 1, 15, &mut cx), 15);
        assert!(fill(&mut n, 2, 10, &mut cx) < 10);
        assert!(fill(&mut n, 2, 100, &mut cx) < 5);
        let s2 = vq_stats(&n, 2);
        assert!(s2.prob_drop > 0 && s2.forced_drop > 0, "{s2:?}");
        assert_eq!(s2.backlog, 6000);
        // Without grio VQ 2 sees only itself: all ten stay below min.
        let mut n = node(setup(4, 1, false, 0), &vqs);
        assert_eq!(fill(&mut n, 1, 15, &mut cx), 15);
        assert_eq!(fill(&mut n, 2, 10, &mut cx), 10);
        // The other way round, a loaded low-priority VQ does not weigh on
        // the high one.
        let mut n = node(setup(4, 1, true, 0), &vqs);
        assert_eq!(fill(&mut n, 2, 9, &mut cx), 9);
        assert_eq!(fill(&mut n, 1, 29, &mut cx), 29);
        // An idle VQ's average does not count: VQ 1 drained, VQ 2 free again.
        while let Dequeue::Packet(_) = n.dequeue(&mut cx) {}
        assert_eq!(fill(&mut n, 2, 9, &mut cx), 9);
    }

    /// grio with a shared priority switches to WRED: one average of the
    /// whole queue, which every VQ judges with its own thresholds, and
    /// every VQ's backlog reads as the whole queue's.
    #[test]
    fn wred_shares_one_average_of_the_whole_queue() {
        let vqs = [
            vq(1, 3, 1_000_000, 10_000, 20_000, 0.5),
            vq(2, 3, 1_000_000, 50_000, 60_000, 0.5),
        ];
        let mut n = node(setup(4, 1, true, 0), &vqs);
        let mut cx = Cx::new(Time(0));
        for i in 0..30 {
            n.enqueue(tagged(2, i, 1000), &mut cx).unwrap();
        }
        // VQ 1 is empty, but the queue holds 30 kB: above VQ 1's max.
        assert_eq!(n.enqueue(tagged(1, 0, 1000), &mut cx), Err(DropReason::Aqm));
        let d = dumped(&n);
        assert_eq!((d.parms[1].backlog, d.parms[2].backlog), (30_000, 30_000));
        assert_eq!(d.parms[1].qave, 30_000);
        // A distinct priority again: RIO, separate averages.
        let mut n = node(
            setup(4, 1, true, 0),
            &[
                vqs[0].clone(),
                vqs[1].clone(),
                vq(2, 4, 1_000_000, 50_000, 60_000, 0.5),
            ],
        );
        for i in 0..30 {
            n.enqueue(tagged(2, i, 1000), &mut cx).unwrap();
        }
        n.enqueue(tagged(1, 0, 1000), &mut cx).unwrap();
    }

    #[test]
    fn an_idle_vq_decays_its_average() {
        let mut o = vq(1, 0, 1_000_000, 100_000, 200_000, 0.1);
        o.parms[0].wlog = 3;
        o.parms[0].scell_log = 0;
        let mut stab = vec![31u8; RED_STAB_SIZE];
        stab[0] = 0;
        o.stab = Some(stab);
        let mut n = node(setup(2, 1, false, 0), &[o]);
        let mut cx = Cx::new(Time(0));
        for i in 0..50 {
            n.enqueue(tagged(1, i, 1000), &mut cx).unwrap();
        }
        assert!(dumped(&n).parms[1].qave > 10_000);
        while let Dequeue::Packet(_) = n.dequeue(&mut cx) {}
        // 5 µs later the table says 31 halvings.
        n.dequeue(&mut Cx::new(Time(5_000)));
        assert_eq!(dumped(&n).parms[1].qave, 0);
    }

    #[test]
    fn the_kernel_refuses_what_it_refuses() {
        let dev = DevInfo::default();
        let msg = |r: TcResult<()>| r.unwrap_err().describe();
        let new = |o: &GredOpts| Gred::new(o, &dev).map(|_| ());
        assert_eq!(
            msg(new(&setup(17, 0, false, 0))),
            "Error: sch_gred: number of virtual queues too high."
        );
        assert_eq!(
            msg(new(&setup(0, 0, false, 0))),
            "Error: sch_gred: number of virtual queues can't be 0."
        );
        assert_eq!(
            msg(new(&setup(4, 4, false, 0))),
            "Error: sch_gred: default virtual queue above virtual queue count."
        );
        assert_eq!(
            msg(new(&vq(1, 0, 1000, 100, 200, 0.1))),
            "Error: sch_gred: virtual queue configuration can't be specified at initialization time."
        );
        assert_eq!(new(&GredOpts::default()).unwrap_err().errno, Errno::EINVAL);
        let mut g = Gred::new(&setup(4, 1, false, TC_RED_ECN), &dev).unwrap();
        let mut change = |o: GredOpts| g.change(&QdiscOpts::Gred(o), &dev);
        assert_eq!(
            msg(change(vq(4, 0, 1000, 100, 200, 0.1))),
            "Error: sch_gred: virtual queue index above virtual queue count."
        );
        // Setup's ecn: a VQ may not ask for other flags (checked before
        // the RED parameters).
        assert_eq!(
            msg(change(vq(1, 0, 1000, 300, 200, 0.1))),
            "Error: sch_gred: can't change per-virtual queue RED flags when per-Qdisc flags are used."
        );
        let ecn = |mut o: GredOpts| {
            o.vq_list.as_mut().unwrap()[0].flags = Some(TC_RED_ECN as u32);
            o
        };
        assert_eq!(
            msg(change(ecn(vq(1, 0, 1000, 300, 200, 0.1)))),
            "Error: sch_gred: invalid RED parameters."
        );
        let mut o = ecn(vq(1, 0, 1000, 100, 200, 0.1));
        change(o.clone()).unwrap();
        o.limit = Some(5);
        assert_eq!(
            msg(change(o.clone())),
            "Error: sch_gred: can't configure Qdisc and virtual queue at the same time."
        );
        o.limit = None;
        o.vq_list.as_mut().unwrap().push(GredVqEntry {
            dp: Some(3),
            ..Default::default()
        });
        assert_eq!(
            msg(change(o)),
            "Error: sch_gred: Virtual queue not yet instantiated."
        );
        // Per-VQ flags in use: setup may not set qdisc-wide ones.
        let mut g = Gred::new(&setup(4, 1, false, 0), &dev).unwrap();
        let mut o = vq(1, 0, 1000, 100, 200, 0.1);
        o.vq_list.as_mut().unwrap()[0].flags = Some(TC_RED_HARDDROP as u32);
        g.change(&QdiscOpts::Gred(o), &dev).unwrap();
        let e = g.change(&QdiscOpts::Gred(setup(4, 1, false, TC_RED_ECN)), &dev);
        assert_eq!(
            msg(e),
            "Error: sch_gred: can't set per-Qdisc RED flags when per-virtual queue flags are used."
        );
        let mut o = vq(2, 0, 1000, 100, 200, 0.1);
        o.vq_list.as_mut().unwrap()[0].flags = Some(4);
        assert_eq!(
            msg(g.change(&QdiscOpts::Gred(o), &dev)),
            "Error: sch_gred: invalid RED flags specified."
        );
    }

    #[test]
    fn dumps_what_the_kernel_dumps() {
        let mut s = setup(4, 1, true, 0);
        s.limit = Some(50_000);
        let mut n = node(
            s,
            &[
                vq(1, 0, 60_000, 1000, 3000, 0.25),
                vq(3, 5, 2000, 1000, 3000, 0.5),
            ],
        );
        let d = dumped(&n);
        assert_eq!(
            d.dps,
            Some(GredSopt {
                dps: 4,
                def_dp: 1,
                grio: 1,
                flags: 0
            })
        );
        assert_eq!(d.limit, Some(50_000));
        assert_eq!(d.parms.len(), 16);
        assert_eq!(d.parms[0].dp, 16, "absent slots say MAX_DPs + i");
        assert_eq!(d.parms[2].dp, 18);
        let p = d.parms[1];
        // The VQ limit is clamped to the qdisc's; prio 0 under grio takes
        // the default VQ's (none yet: 8).
        assert_eq!(
            (p.dp, p.limit, p.prio, p.qth_min, p.qth_max),
            (1, 50_000, 8, 1000, 3000)
        );
        assert_eq!(d.parms[3].prio, 5);
        assert_eq!(d.max_p[1], 1 << 30);
        assert_eq!(d.max_p[0], 0);
        assert_eq!(d.vq_list.as_ref().unwrap().len(), 2);
        // Shrinking the table destroys the VQs beyond it.
        n.qdisc
            .change(&QdiscOpts::Gred(setup(2, 0, false, 0)), &DevInfo::default())
            .unwrap();
        let d = dumped(&n);
        assert_eq!(d.parms[3].dp, 19);
        assert_eq!(d.vq_list.unwrap().len(), 1);
        assert_eq!(d.limit, Some(50_000), "setup without limit keeps it");
    }

    proptest! {
        /// offered = sent + dropped + queued at every step, and each VQ's
        /// backlog is the bytes of its packets in the queue.
        #[test]
        fn packets_are_conserved(
            ops in proptest::collection::vec((0..3u8, 0..6u16, 40..1600u32, 0..2000u64), 1..300),
            grio in any::<bool>(),
        ) {
            let mut s = setup(4, 1, grio, 0);
            s.limit = Some(20_000);
            let mut n = node(
                s,
                &[
                    vq(1, 1, 12_000, 3000, 9000, 0.1),
                    vq(2, 2, 12_000, 3000, 9000, 0.1),
                    vq(3, 2, 12_000, 3000, 9000, 0.1),
                ],
            );
            let (mut t, mut offered) = (0u64, 0u64);
            for (i, &(op, dp, len, dt)) in ops.iter().enumerate() {
                t += dt * 1000;
                let mut cx = Cx::new(Time(t));
                if op < 2 {
                    offered += 1;
                    let _ = n.enqueue(tagged(dp, i as u32, len), &mut cx);
                } else {
                    n.dequeue(&mut cx);
                }
                let st = n.stats();
                prop_assert_eq!(offered, st.packets + st.drops + st.qlen as u64);
                // Each VQ is held to its own limit (the qdisc's `limit`
                // only caps each VQ's and the packets of no VQ).
                prop_assert!(st.backlog <= 3 * 12_000);
                if !grio {
                    let sum: u64 = (1..4).map(|dp| vq_stats(&n, dp).backlog as u64).sum();
                    prop_assert_eq!(sum, st.backlog);
                }
            }
        }
    }
}
