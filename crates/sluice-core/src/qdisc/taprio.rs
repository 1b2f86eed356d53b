//! taprio: the IEEE 802.1Qbv time-aware shaper — a cycle of gate states
//! over a multi-queue device's traffic classes.
//!
//! net/sched/sch_taprio.c (Linux 6.18), software mode. Like mqprio it is the
//! root of a multi-queue device with a traffic-class layout (`num_tc`, `map`,
//! `queues`), but its per-queue default children are pfifo, and a schedule
//! decides when each class may send: a list of entries, each a gate mask
//! (bit n: class n open) held for an interval, repeated every `cycle-time`
//! (default: the intervals' sum) from `base-time` on the chosen clock.
//!
//! A new schedule is the *admin* schedule until it starts: at `base-time`
//! if that is ahead, else at the next cycle boundary counted from it. Until
//! then all gates are open (802.1Qbv's AdminGateStates), and `tc qdisc show`
//! prints an empty running schedule before the pending one. The timer
//! (`advance_sched`) then walks the *oper* schedule entry by entry: an entry
//! ends at its predecessor's end plus its interval, cut short at the cycle's
//! end, where the first entry starts again (a cycle longer than the entries
//! leaves no idle gap: they simply repeat). A later change becomes admin and
//! takes over at the first entry end on or after its base-time (or within
//! the old schedule's `cycle-time-extension` of it); until the next timer
//! expiry all gates are open again.
//!
//! At dequeue the classes are tried from the highest down, each class's
//! queues in turn from where it last left off; a head packet goes only if
//! the current entry opens its class (by its own priority), its
//! transmission (`len × picos-per-byte`) ends strictly before the class's
//! gate closes (the guard band), and the class's byte budget for the entry
//! (`gate open time / picos-per-byte`) still covers it — every packet sent
//! spends from all classes' budgets. Picos per byte come from the device's
//! link speed, 10 Mbit/s when it reports none. At enqueue a packet longer
//! than its class's largest open window can carry is dropped (a GSO packet
//! split first, as `taprio_enqueue_segmented` does).
//!
//! `flags 0x1` (txtime-assist) has no gates at dequeue: each packet is
//! stamped at enqueue with a launch time — the first slot from now plus
//! `txtime-delay` in which its class is open and it fits, after what the
//! slot already holds — for an etf child to hold it until (`get_packet_txtime`);
//! a packet no slot can carry is dropped. `flags 0x2` (full offload) needs a
//! device with a PTP clock and offload hooks, which no sluice device has.
//!
//! The kernel's checks in its order, its messages, and what `change` may
//! alter (neither flags, clock nor — while a schedule exists — the layout;
//! every change must bring a whole schedule and the clock) are kept, and a
//! GSO packet over its class's frame limit is queued as its segments. Not:
//! a failed change leaves nothing half-applied (the kernel keeps a new
//! layout and flags), and the root's backlog is not left counting a packet
//! its child refused.

use super::mq::Mq;
use super::mqprio::{self, MqprioOpts, MAX_TC};
use super::{Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscOpts};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::qdisc::fifo::FifoOpts;
use crate::stats::DropReason;
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// `TCA_TAPRIO_ATTR_FLAG_TXTIME_ASSIST`.
pub const TXTIME_ASSIST: u32 = 0x1;
/// `TCA_TAPRIO_ATTR_FLAG_FULL_OFFLOAD`.
pub const FULL_OFFLOAD: u32 = 0x2;
/// `TAPRIO_ALL_GATES_OPEN`.
const ALL_OPEN: u32 = u32::MAX;
/// `ETH_ZLEN`: the shortest frame an entry must be able to carry.
const ETH_ZLEN: i64 = 60;
/// The clocks taprio accepts: REALTIME, MONOTONIC, BOOTTIME, TAI.
pub const CLOCKIDS: [i32; 4] = [0, 1, 7, 11];

/// One entry of a schedule as tc sends and the kernel dumps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaprioEntry {
    /// 0: set gates (`S`); 1, 2: the hold/release commands (offload only).
    pub cmd: u8,
    /// Bit n: traffic class n may send.
    pub gate_mask: u32,
    /// Nanoseconds.
    pub interval: u32,
}

/// A schedule as the kernel dumps it (the running one, or the pending one).
#[allow(missing_docs)]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaprioSchedule {
    pub base_time: i64,
    /// The cycle in force: given, or the intervals' sum.
    pub cycle_time: i64,
    pub cycle_time_extension: i64,
    pub entries: Vec<TaprioEntry>,
}

/// taprio's options: what tc sends, and (in a dump) the schedules.
#[allow(missing_docs)]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaprioOpts {
    /// `TCA_TAPRIO_ATTR_PRIOMAP`, absent when tc had no `num_tc`.
    pub priomap: Option<MqprioOpts>,
    pub clockid: Option<i32>,
    pub flags: Option<u32>,
    pub txtime_delay: Option<u32>,
    pub base_time: Option<i64>,
    pub cycle_time: Option<i64>,
    pub cycle_time_extension: Option<i64>,
    /// The entry list of a request.
    pub entries: Vec<TaprioEntry>,
    /// In a dump: the schedule running, if one has started.
    pub oper: Option<TaprioSchedule>,
    /// In a dump: the schedule waiting for its start.
    pub admin: Option<TaprioSchedule>,
}

fn fail(errno: Errno, msg: &str) -> TcError {
    TcError::msg(errno, msg)
}

/// One entry while it runs.
#[derive(Clone, Debug)]
struct Entry {
    cmd: u8,
    mask: u32,
    interval: i64,
    /// When it last ended (or will end, while current).
    end: i64,
    /// Per class: how long the gate stays open from this entry's start.
    gate_duration: [i64; MAX_TC],
    /// Per class: when the gate closes while this entry is current.
    close: [i64; MAX_TC],
    /// Per class: bytes left to send while this entry is current.
    budget: [i64; MAX_TC],
    /// txtime-assist: the earliest launch time this entry's next packet
    /// may get.
    next_txtime: i64,
}

/// A schedule (`struct sched_gate_list`).
#[derive(Clone, Debug)]
struct Sched {
    base: i64,
    cycle: i64,
    ext: i64,
    entries: Vec<Entry>,
    /// The longest a class's gate stays open, per class.
    max_open: [i64; MAX_TC],
    /// The longest frame a class may queue (`u32::MAX`: any).
    max_frm_len: [u32; MAX_TC],
    cycle_end: i64,
}

impl Sched {
    /// `taprio_update_queue_max_sdu` with no user max-sdu (tc 6.1 has
    /// none): a class whose gate ever closes may queue what its longest
    /// window carries at `ppb`, up to the largest MTU. The size table's
    /// overhead is left to the lengths, which already carry it.
    fn set_frame_limits(&mut self, ppb: i64, num_tc: usize) {
        for tc in 0..num_tc {
            self.max_frm_len[tc] = u32::MAX;
            if self.max_open[tc] == self.cycle {
                continue;
            }
            let sdu = ((self.max_open[tc] * 1000 / ppb) as u32).wrapping_sub(14);
            if sdu <= 65535 {
                self.max_frm_len[tc] = sdu + 14;
            }
        }
    }

    fn dump(&self) -> TaprioSchedule {
        TaprioSchedule {
            base_time: self.base,
            cycle_time: self.cycle,
            cycle_time_extension: self.ext,
            entries: self
                .entries
                .iter()
                .map(|e| TaprioEntry {
                    cmd: e.cmd,
                    gate_mask: e.mask,
                    interval: e.interval as u32,
                })
                .collect(),
        }
    }
}

/// The taprio qdisc.
#[derive(Debug)]
pub struct Taprio {
    mq: Mq,
    map: [u8; MAX_TC],
    /// `(offset, count)` per traffic class.
    ranges: Vec<(usize, usize)>,
    /// The queue each class tries first next time.
    cursor: Vec<usize>,
    flags: u32,
    clockid: i32,
    txtime_delay: u32,
    /// Picoseconds a byte takes on the wire.
    ppb: i64,
    oper: Option<Sched>,
    admin: Option<Sched>,
    /// The oper schedule's current entry (none: all gates open).
    current: Option<usize>,
    /// The timer's next expiry.
    timer: Option<i64>,
    /// A schedule accepted by `new`/`change`, started by `installed`.
    staged: Option<Sched>,
    /// The last expiry began a new cycle in the ordinary way, so whole
    /// cycles from here repeat exactly (fast-forward is safe).
    steady: bool,
}

/// `taprio_set_picos_per_byte`: from the link speed in Mbit/s, 10 when none.
fn picos_per_byte(dev: &DevInfo) -> i64 {
    let speed = if dev.speed == 0 { 10 } else { dev.speed as i64 };
    (8_000_000 / speed).max(17)
}

/// `get_cycle_time_elapsed`: how far into its cycle (counted from its
/// base-time) `time` is. Times are the kernel's signed nanoseconds; their
/// sums saturate where the kernel's would wrap, far past any run.
fn elapsed(s: &Sched, time: i64) -> i64 {
    ((time as i128 - s.base as i128) % s.cycle as i128) as i64
}

/// The first start of a schedule (`taprio_get_start_time`).
fn start_time(base: i64, cycle: i64, now: i64) -> i64 {
    if base > now {
        return base;
    }
    let n = (now as i128 - base as i128).div_euclid(cycle as i128);
    (base as i128 + (n + 1) * cycle as i128) as i64
}

impl Taprio {
    /// `taprio_init` + `taprio_change` on a new qdisc.
    pub fn new(o: &TaprioOpts, dev: &DevInfo) -> TcResult<Self> {
        if dev.num_tx_queues <= 1 {
            return Err(fail(
                Errno::EOPNOTSUPP,
                "sch_taprio: Multi-queue device is required",
            ));
        }
        let mut q = Taprio {
            mq: Mq::with_children(dev, &QdiscOpts::Pfifo(FifoOpts { limit: None }))?,
            map: [0; MAX_TC],
            ranges: vec![],
            cursor: vec![],
            flags: u32::MAX,
            clockid: -1,
            txtime_delay: 0,
            ppb: picos_per_byte(dev),
            oper: None,
            admin: None,
            current: None,
            timer: None,
            staged: None,
            steady: false,
        };
        q.apply(o, dev)?;
        Ok(q)
    }

    fn has_flag(&self, f: u32) -> bool {
        self.flags != u32::MAX && self.flags & f != 0
    }

    /// `length_to_duration`: nanoseconds `len` bytes take on the wire.
    fn duration(&self, len: i64) -> i64 {
        len * self.ppb / 1000
    }

    /// `taprio_change`: check everything, then commit; the new schedule
    /// waits in `staged` for [`Qdisc::installed`] to give it a start.
    fn apply(&mut self, o: &TaprioOpts, dev: &DevInfo) -> TcResult<()> {
        // The attribute policy.
        if o.cycle_time
            .is_some_and(|c| !(0..=i32::MAX as i64).contains(&c))
        {
            return Err(fail(Errno::ERANGE, "integer out of range"));
        }
        if o.flags
            .is_some_and(|f| f & !(TXTIME_ASSIST | FULL_OFFLOAD) != 0)
        {
            return Err(fail(Errno::EINVAL, "reserved bit set"));
        }
        let flags = o.flags.unwrap_or(0);
        if flags == TXTIME_ASSIST | FULL_OFFLOAD {
            return Err(fail(
                Errno::EINVAL,
                "TXTIME_ASSIST and FULL_OFFLOAD are mutually exclusive",
            ));
        }
        if self.flags != u32::MAX && self.flags != flags {
            return Err(fail(
                Errno::EOPNOTSUPP,
                "sch_taprio: Changing 'flags' of a running schedule is not supported",
            ));
        }
        let ppb = picos_per_byte(dev);
        // taprio_parse_mqprio_opt.
        let mut layout = None;
        match &o.priomap {
            None if self.ranges.is_empty() => {
                return Err(fail(Errno::EINVAL, "'mqprio' configuration is necessary"));
            }
            None => {}
            Some(p) => {
                if p.num_tc as u32 > dev.num_tx_queues {
                    return Err(fail(
                        Errno::EINVAL,
                        "Number of traffic classes is greater than number of HW queues",
                    ));
                }
                mqprio::validate_layout(p, Some(dev.num_tx_queues), flags & TXTIME_ASSIST != 0)?;
                let ranges = mqprio::ranges(p);
                if p.prio_tc_map != self.map || ranges != self.ranges {
                    if self.oper.is_some() || self.admin.is_some() {
                        return Err(fail(
                            Errno::ENOTSUPP,
                            "Changing the traffic mapping of a running schedule is not supported",
                        ));
                    }
                    layout = Some((p.prio_tc_map, ranges));
                }
            }
        }
        let num_tc = layout.as_ref().map_or(self.ranges.len(), |l| l.1.len());
        let sched = self.parse_schedule(o, ppb, num_tc)?;
        if sched.entries.is_empty() {
            return Err(fail(
                Errno::EINVAL,
                "There should be at least one entry in the schedule",
            ));
        }
        // taprio_parse_clockid.
        if flags & FULL_OFFLOAD != 0 {
            return Err(if o.clockid.is_some() {
                fail(
                    Errno::EINVAL,
                    "The 'clockid' cannot be specified for full offload",
                )
            } else {
                fail(Errno::ENOTSUPP, "Device does not have a PTP clock")
            });
        }
        let Some(clockid) = o.clockid else {
            return Err(fail(Errno::EINVAL, "Specifying a 'clockid' is mandatory"));
        };
        if clockid < 0 || (self.clockid != -1 && self.clockid != clockid) {
            return Err(fail(
                Errno::ENOTSUPP,
                "Changing the 'clockid' of a running schedule is not supported",
            ));
        }
        if !CLOCKIDS.contains(&clockid) {
            return Err(fail(Errno::EINVAL, "Invalid 'clockid'"));
        }
        if o.txtime_delay.is_some_and(|d| d != 0) && flags & TXTIME_ASSIST == 0 {
            return Err(fail(
                Errno::EINVAL,
                "sch_taprio: txtime-delay can only be set when txtime-assist mode is enabled",
            ));
        }
        // Commit.
        if let Some((map, ranges)) = layout {
            self.cursor = ranges.iter().map(|r| r.0).collect();
            self.map = map;
            self.ranges = ranges;
        }
        self.flags = flags;
        self.ppb = ppb;
        self.clockid = clockid;
        if let Some(d) = o.txtime_delay {
            self.txtime_delay = d;
        }
        self.staged = Some(sched);
        Ok(())
    }

    /// `parse_taprio_schedule` and `taprio_calculate_gate_durations`.
    fn parse_schedule(&self, o: &TaprioOpts, ppb: i64, num_tc: usize) -> TcResult<Sched> {
        let min = ETH_ZLEN * ppb / 1000;
        let mut entries = vec![];
        for e in &o.entries {
            if (e.interval as i64) < min {
                return Err(fail(Errno::EINVAL, "Invalid interval for schedule entry"));
            }
            entries.push(Entry {
                cmd: e.cmd,
                mask: e.gate_mask,
                interval: e.interval as i64,
                end: 0,
                gate_duration: [0; MAX_TC],
                close: [0; MAX_TC],
                budget: [0; MAX_TC],
                next_txtime: 0,
            });
        }
        let mut cycle = o.cycle_time.unwrap_or(0);
        if cycle == 0 {
            cycle = entries.iter().map(|e| e.interval).sum();
            if cycle > i32::MAX as i64 {
                return Err(fail(Errno::EINVAL, "'cycle_time' is too big"));
            }
        }
        if cycle < entries.len() as i64 * min {
            return Err(fail(Errno::EINVAL, "'cycle_time' is too small"));
        }
        let mut max_open = [0i64; MAX_TC];
        let n = entries.len();
        for i in 0..n {
            let mut open = entries[i].mask;
            let mut duration = [0i64; MAX_TC];
            for k in 0..n {
                let cur = &entries[(i + k) % n];
                if open == 0 {
                    break;
                }
                for (tc, d) in duration.iter_mut().enumerate().take(num_tc) {
                    if open & (1 << tc) == 0 {
                        continue;
                    }
                    if cur.mask & (1 << tc) != 0 {
                        *d += cur.interval;
                    } else {
                        open &= !(1 << tc);
                    }
                }
            }
            for tc in 0..num_tc {
                if duration[tc] != 0 && max_open[tc] < duration[tc] {
                    max_open[tc] = duration[tc];
                }
            }
            entries[i].gate_duration = duration;
        }
        let mut sched = Sched {
            base: o.base_time.unwrap_or(0),
            cycle,
            ext: o.cycle_time_extension.unwrap_or(0),
            entries,
            max_open,
            max_frm_len: [u32::MAX; MAX_TC],
            cycle_end: 0,
        };
        sched.set_frame_limits(ppb, num_tc);
        Ok(sched)
    }

    /// `taprio_set_budgets` for entry `i` of `s`.
    fn set_budgets(ppb: i64, num_tc: usize, s: &mut Sched, i: usize) {
        let cycle = s.cycle;
        let e = &mut s.entries[i];
        for tc in 0..num_tc {
            e.budget[tc] = if e.gate_duration[tc] == cycle {
                i32::MAX as i64
            } else {
                e.gate_duration[tc] * 1000 / ppb
            };
        }
    }

    /// Gate close times of entry `i` of `s` starting at `from`.
    fn set_close(num_tc: usize, s: &mut Sched, i: usize, from: i64) {
        let cycle = s.cycle;
        let e = &mut s.entries[i];
        for tc in 0..num_tc {
            e.close[tc] = if e.gate_duration[tc] == cycle {
                i64::MAX
            } else {
                from.saturating_add(e.gate_duration[tc])
            };
        }
    }

    /// `advance_sched`, the timer firing.
    fn expire(&mut self) {
        let (ppb, num_tc) = (self.ppb, self.ranges.len());
        if self.oper.is_none() {
            self.oper = self.admin.take();
        }
        let Some(oper) = self.oper.as_mut() else {
            self.timer = None;
            return;
        };
        let first_run = match self.current {
            None => true,
            Some(i) => oper.entries[i].end == oper.base,
        };
        if first_run {
            self.current = Some(0);
            self.timer = Some(oper.entries[0].end);
            self.steady = false;
            return;
        }
        let i = self.current.unwrap_or(0);
        let e_end = oper.entries[i].end;
        let restart = i + 1 == oper.entries.len() || e_end == oper.cycle_end;
        let mut next = if restart {
            oper.cycle_end = oper.cycle_end.saturating_add(oper.cycle);
            0
        } else {
            i + 1
        };
        let mut end = e_end
            .saturating_add(oper.entries[next].interval)
            .min(oper.cycle_end);
        Self::set_close(num_tc, oper, next, e_end);
        let switch = self
            .admin
            .as_ref()
            .is_some_and(|a| a.base <= end || a.base <= end.saturating_add(oper.ext));
        self.steady = restart && !switch;
        if switch {
            self.oper = self.admin.take();
            next = 0;
        }
        let oper = self.oper.as_mut().expect("a schedule runs");
        if switch {
            end = oper.entries[0].end;
        }
        oper.entries[next].end = end;
        Self::set_budgets(ppb, num_tc, oper, next);
        self.current = Some(next);
        self.timer = Some(end);
    }

    /// Fire every expiry due by `now`, skipping whole periods of a schedule
    /// that repeats unchanged (its entries run back to back, a period being
    /// the cycle or, when the entries are shorter, their sum).
    fn advance(&mut self, now: i64) {
        if self.has_flag(TXTIME_ASSIST) {
            return;
        }
        while let Some(t) = self.timer.filter(|&t| t <= now) {
            if self.steady && self.current == Some(0) && self.admin.is_none() {
                let oper = self.oper.as_mut().expect("a steady schedule runs");
                let sum: i64 = oper.entries.iter().map(|e| e.interval).sum();
                let period = sum.min(oper.cycle);
                let k = (now - t) / period - 1;
                if k > 0 {
                    for e in &mut oper.entries {
                        e.end += k * period;
                    }
                    oper.cycle_end += k * oper.cycle;
                    self.timer = Some(t + k * period);
                }
            }
            self.expire();
        }
    }

    /// The schedule `admin` names (false: oper).
    fn sched(&self, admin: bool) -> Option<&Sched> {
        if admin {
            self.admin.as_ref()
        } else {
            self.oper.as_ref()
        }
    }

    /// `get_interval_end_time`: where an interval of `e` starting at
    /// `start` ends — its own end, or the cycle's (or, within the
    /// extension, the pending schedule's base-time).
    fn interval_end(&self, s: &Sched, other: Option<&Sched>, e: &Entry, start: i64) -> i64 {
        let elapsed = elapsed(s, start);
        let cycle_end = start.saturating_add(s.cycle - elapsed);
        let end = start.saturating_add(e.interval);
        if end < cycle_end {
            end
        } else if let Some(a) =
            other.filter(|a| a.base > cycle_end && a.base < cycle_end.saturating_add(s.ext))
        {
            a.base
        } else {
            cycle_end
        }
    }

    /// `find_entry_to_transmit` (not validating): the first interval of
    /// schedule `which` from `time` on in which class `tc` is open and `d`
    /// nanoseconds fit — its entry and bounds.
    fn find_entry(&self, which: bool, tc: usize, d: i64, time: i64) -> Option<(usize, i64, i64)> {
        let s = self.sched(which)?;
        let other = if which { None } else { self.admin.as_ref() };
        let mut end = time.saturating_sub(elapsed(s, time));
        let cycle_end = end.saturating_add(s.cycle);
        let (mut found, mut earliest, mut available) = (None, i64::MAX, false);
        for (i, e) in s.entries.iter().enumerate() {
            let start = end;
            end = self.interval_end(s, other, e, start);
            if start > cycle_end {
                break;
            }
            if e.mask & (1 << tc) == 0 || d > e.interval {
                continue;
            }
            if e.next_txtime < time {
                if start < time && time.saturating_add(d) < end || start > time {
                    return Some((i, start, end));
                }
                if !available {
                    available = true;
                    found = Some((
                        i,
                        start.saturating_add(s.cycle),
                        end.saturating_add(s.cycle),
                    ));
                }
            } else if e.next_txtime < earliest && !available {
                earliest = e.next_txtime;
                let shift = (e.next_txtime.saturating_sub(start) / s.cycle).saturating_mul(s.cycle);
                found = Some((i, start.saturating_add(shift), end.saturating_add(shift)));
            }
        }
        found
    }

    /// `get_packet_txtime`: the launch time txtime-assist gives a packet of
    /// class `tc` and `len` bytes at `now` — the first slot at or after
    /// `now + txtime-delay` where its class is open and it fits, after the
    /// packets already given that slot; 0 when none can carry it.
    fn packet_txtime(&mut self, tc: usize, len: i64, now: i64) -> i64 {
        let mut minimum = now + self.txtime_delay as i64;
        if self.admin.as_ref().is_some_and(|a| minimum > a.base) {
            self.oper = self.admin.take();
        }
        match &self.oper {
            Some(s) if minimum >= s.base => {}
            _ => return minimum,
        }
        let d = self.duration(len);
        let mut which = false;
        loop {
            let Some((i, start, end)) = self.find_entry(which, tc, d, minimum) else {
                return 0;
            };
            let s = self.sched(which).expect("a schedule");
            let txtime = s.entries[i].next_txtime.max(minimum).max(start);
            if !which && self.admin.as_ref().is_some_and(|a| txtime > a.base) {
                which = true;
                continue;
            }
            let cycle = s.cycle;
            let transmit_end = txtime.saturating_add(d);
            minimum = transmit_end;
            let s = if which {
                self.admin.as_mut()
            } else {
                self.oper.as_mut()
            };
            let e = &mut s.expect("a schedule").entries[i];
            if transmit_end > end {
                e.next_txtime = start.saturating_add(cycle);
                continue;
            }
            e.next_txtime = transmit_end;
            return txtime;
        }
    }

    /// The current entry's gate mask (tests).
    #[cfg(test)]
    fn dump_oper_mask(&self) -> Option<u32> {
        Some(self.oper.as_ref()?.entries[self.current?].mask)
    }

    /// `taprio_enqueue_one`: txtime-assist's stamp, then queue `q`'s child.
    fn enqueue_one(
        &mut self,
        q: usize,
        tc: usize,
        mut pkt: Packet,
        cx: &mut Cx,
    ) -> Result<(), (Packet, DropReason)> {
        if self.has_flag(TXTIME_ASSIST) {
            match self.packet_txtime(tc, pkt.len as i64, cx.now.0 as i64) {
                0 => return Err((pkt, DropReason::QueueFull)),
                t => pkt.txtime = Some(Time(t.max(0) as u64)),
            }
        }
        self.mq.enqueue_at(q, pkt, cx)
    }

    /// `taprio_enqueue_segmented`: a GSO packet over its class's frame
    /// limit goes in as its segments, those still over it dropped. The tree
    /// counted one packet; it now counts the segments queued.
    fn enqueue_segmented(
        &mut self,
        q: usize,
        tc: usize,
        limit: u32,
        pkt: Packet,
        cx: &mut Cx,
    ) -> Result<(), (Packet, DropReason)> {
        super::offer_segments(pkt, cx, |seg, cx| {
            seg.len <= limit && self.enqueue_one(q, tc, seg, cx).is_ok()
        })
    }

    /// `taprio_dequeue_from_txq`.
    fn dequeue_from(&mut self, q: usize, mask: u32, cx: &mut Cx) -> Result<Packet, Option<Time>> {
        let txtime = self.has_flag(TXTIME_ASSIST);
        let now = cx.now.0 as i64;
        let child = self.mq.queue_mut(q);
        if child.kind() == "noop" {
            return Err(None);
        }
        if !txtime {
            let head = child.peek_or_wait(cx)?;
            let tc = self.map[(head.priority & 15) as usize] as usize;
            if mask & (1 << tc) == 0 {
                return Err(None);
            }
            let len = head.len as i64;
            if mask != ALL_OPEN {
                let guard = now + self.duration(len);
                let (oper, cur) = (self.oper.as_mut(), self.current);
                let entry = &mut oper.expect("a schedule runs").entries[cur.unwrap_or(0)];
                if guard >= entry.close[tc] {
                    return Err(None);
                }
                // taprio_update_budgets: every class pays, infinite ones excepted.
                for b in entry.budget.iter_mut().take(self.ranges.len()) {
                    if *b != i32::MAX as i64 {
                        *b -= len;
                    }
                }
                if entry.budget[tc] < 0 {
                    return Err(None);
                }
            }
        }
        match self.mq.queue_mut(q).dequeue(cx) {
            Dequeue::Packet(p) => Ok(p),
            Dequeue::Wait(t) => Err(Some(t)),
            Dequeue::Empty => Err(None),
        }
    }
}

impl Qdisc for Taprio {
    fn set_handle(&mut self, handle: Handle) {
        self.mq.set_handle(handle);
    }

    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        let now = cx.now.0 as i64;
        self.advance(now);
        let (map, ranges, prio) = (&self.map, &self.ranges, pkt.priority);
        let q = self
            .mq
            .pick_in(&mut pkt, |n| mqprio::tc_range(map, ranges, prio, n));
        let tc = self.map[(pkt.priority & 15) as usize] as usize;
        let limit = self.oper.as_ref().map_or(u32::MAX, |s| s.max_frm_len[tc]);
        if pkt.len > limit {
            if pkt.gso.is_some() {
                return self.enqueue_segmented(q, tc, limit, pkt, cx);
            }
            return Err((pkt, DropReason::QueueFull));
        }
        self.enqueue_one(q, tc, pkt, cx)
    }

    /// `taprio_dequeue_tc_priority`: classes from the highest, each class's
    /// queues in turn.
    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.advance(cx.now.0 as i64);
        let mask = match (self.has_flag(TXTIME_ASSIST), self.current, &self.oper) {
            (false, Some(i), Some(s)) => s.entries[i].mask,
            _ => ALL_OPEN,
        };
        let mut wake = self.timer.map(|t| Time(t.max(0) as u64));
        if mask != 0 {
            let n = self.mq.queue_count();
            for tc in (0..self.ranges.len()).rev() {
                if mask & (1 << tc) == 0 {
                    continue;
                }
                let (offset, count) = self.ranges[tc];
                let first = self.cursor[tc];
                loop {
                    let q = self.cursor[tc];
                    let r = self.dequeue_from(q, mask, cx);
                    let mut next = q + 1;
                    if next == offset + count {
                        next = offset;
                    }
                    if next >= n {
                        next = first;
                    }
                    self.cursor[tc] = next;
                    match r {
                        Ok(p) => return Dequeue::Packet(p),
                        Err(t) => wake = Dequeue::earliest(wake, t),
                    }
                    if self.cursor[tc] == first {
                        break;
                    }
                }
            }
        }
        if self.mq.sum_stats(0..self.mq.queue_count()).qlen == 0 {
            return Dequeue::Empty;
        }
        wake.map_or(Dequeue::Empty, Dequeue::Wait)
    }

    fn reset(&mut self) {
        self.mq.reset();
    }

    fn change(&mut self, opts: &QdiscOpts, dev: &DevInfo) -> TcResult<()> {
        match opts {
            QdiscOpts::Taprio(o) => self.apply(o, dev),
            _ => Err(TcError::errno(Errno::EINVAL)),
        }
    }

    /// `taprio_start_sched` and what precedes it: the staged schedule
    /// starts at its first start after `now`.
    fn installed(&mut self, now: Time) {
        let Some(mut s) = self.staged.take() else {
            return;
        };
        let now = now.0 as i64;
        let start = start_time(s.base, s.cycle, now);
        let num_tc = self.ranges.len();
        s.cycle_end = start.saturating_add(s.cycle);
        s.entries[0].end = start.saturating_add(s.entries[0].interval);
        Self::set_budgets(self.ppb, num_tc, &mut s, 0);
        Self::set_close(num_tc, &mut s, 0, start);
        if self.has_flag(TXTIME_ASSIST) {
            // setup_txtime: each entry's first slot.
            let mut at = start;
            for e in &mut s.entries {
                e.next_txtime = at;
                at = at.saturating_add(e.interval);
            }
            if self.oper.is_none() {
                self.oper = Some(s);
            } else {
                self.admin = Some(s);
            }
            return;
        }
        self.current = None;
        self.steady = false;
        self.admin = Some(s);
        self.timer = Some(self.timer.map_or(start, |t| t.min(start)));
    }

    fn settle(&mut self, now: Time) {
        self.advance(now.0 as i64);
    }

    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Taprio(TaprioOpts {
            priomap: Some(mqprio::layout_opts(self.map, &self.ranges)),
            clockid: Some(self.clockid),
            flags: (self.flags != 0).then_some(self.flags),
            txtime_delay: (self.txtime_delay != 0).then_some(self.txtime_delay),
            oper: self.oper.as_ref().map(Sched::dump),
            admin: self.admin.as_ref().map(Sched::dump),
            ..TaprioOpts::default()
        })
    }

    /// `taprio_dev_notifier`: a new link speed, and the frame limits it gives.
    fn device_changed(&mut self, dev: &DevInfo) {
        self.ppb = picos_per_byte(dev);
        let num_tc = self.ranges.len();
        for s in [&mut self.oper, &mut self.admin, &mut self.staged]
            .into_iter()
            .flatten()
        {
            s.set_frame_limits(self.ppb, num_tc);
        }
        self.mq.device_changed(dev);
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(&mut self.mq)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(&self.mq)
    }
}

/// A classful parent's check that taprio is not being put under it:
/// `taprio_init`'s first refusal.
pub fn check_attach(parent: Handle) -> TcResult<()> {
    if !parent.is_root() {
        return Err(fail(
            Errno::EOPNOTSUPP,
            "sch_taprio: Can only be attached as root qdisc",
        ));
    }
    Ok(())
}

/// The warning a software schedule set without a size table earns
/// (`taprio_change`'s last words), given whether the qdisc had one.
pub fn stab_warning(opts: &QdiscOpts, had_stab: bool) -> Option<String> {
    match opts {
        QdiscOpts::Taprio(_) if !had_stab => Some(
            "sch_taprio: Size table not specified, frame length estimations may be inaccurate."
                .into(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::ETH_P_IP;
    use crate::qdisc::QdiscNode;

    fn dev() -> DevInfo {
        DevInfo {
            num_tx_queues: 4,
            txqueuelen: 1000,
            speed: 10,
            ..DevInfo::default()
        }
    }

    /// `num_tc 2 map 0 0 0 0 0 0 1 0 queues 2@0 2@2 base-time 0`, entries
    /// `(mask, interval)`, clock TAI.
    fn opts(entries: &[(u32, u32)]) -> TaprioOpts {
        let mut p = MqprioOpts {
            num_tc: 2,
            prio_tc_map: [0; MAX_TC],
            hw: 0,
            ..MqprioOpts::default()
        };
        p.prio_tc_map[6] = 1;
        (p.count[0], p.offset[0], p.count[1], p.offset[1]) = (2, 0, 2, 2);
        TaprioOpts {
            priomap: Some(p),
            clockid: Some(11),
            entries: entries
                .iter()
                .map(|&(gate_mask, interval)| TaprioEntry {
                    cmd: 0,
                    gate_mask,
                    interval,
                })
                .collect(),
            ..TaprioOpts::default()
        }
    }

    /// A taprio root of handle 100: on `d`.
    fn node(o: &TaprioOpts, d: &DevInfo) -> QdiscNode {
        QdiscNode::new(
            Handle::new(0x100, 0),
            Handle::ROOT,
            Box::new(Taprio::new(o, d).unwrap()),
        )
    }

    fn pkt(prio: u32, len: u32) -> Packet {
        let mut b = vec![0u8; 28];
        b[0] = 0x45;
        b[9] = 17;
        let mut p = Packet::new(b, len, ETH_P_IP);
        p.priority = prio;
        p
    }

    /// Send everything queued through a wire of the device's 10 Mbit/s
    /// from `t0` to `t1`: the departure times of each priority.
    fn drain(n: &mut QdiscNode, t0: i64, t1: i64) -> Vec<(u32, i64)> {
        let mut out = vec![];
        let mut t = t0;
        while t < t1 {
            let mut cx = Cx::new(Time(t as u64));
            match n.dequeue(&mut cx) {
                Dequeue::Packet(p) => {
                    out.push((p.priority, t));
                    t += p.len as i64 * 800_000 / 1000;
                }
                Dequeue::Wait(w) => t = w.0 as i64,
                Dequeue::Empty => break,
            }
        }
        out
    }

    #[test]
    fn each_window_sends_what_ends_before_it_closes() {
        let mut n = node(&opts(&[(2, 2_000_000), (1, 8_000_000)]), &dev());
        n.qdisc.installed(Time(0));
        let mut cx = Cx::new(Time(0));
        for _ in 0..50 {
            n.enqueue(pkt(6, 1042), &mut cx).unwrap();
            n.enqueue(pkt(0, 1042), &mut cx).unwrap();
        }
        // Until the start (the next 10 ms boundary) every gate is open.
        let sent = drain(&mut n, 20_000_000, 60_000_000);
        for cycle in 2..6i64 {
            let start = cycle * 10_000_000;
            let in_window = |prio: u32, from: i64, to: i64| {
                sent.iter()
                    .filter(|&&(p, t)| p == prio && t >= start + from && t < start + to)
                    .count()
            };
            // 2 ms at 10 Mbit/s is 2500 bytes: two 1042-byte frames, whose
            // 833.6 µs each end before the gate closes; a third would not.
            assert_eq!(in_window(6, 0, 2_000_000), 2, "cycle {cycle}: {sent:?}");
            assert_eq!(in_window(0, 0, 2_000_000), 0);
            // 8 ms: 9 frames (7.5 ms), the tenth would end at 8.3 ms.
            assert_eq!(in_window(0, 2_000_000, 10_000_000), 9);
            assert_eq!(in_window(6, 2_000_000, 10_000_000), 0);
        }
    }

    #[test]
    fn skipping_whole_cycles_lands_where_walking_does() {
        // Entries shorter than the cycle (they repeat back to back) and
        // longer (the cycle cuts the last one short), settled once at each
        // time or walked there expiry by expiry.
        for (entries, cycle) in [
            (&[(1, 300_000), (2, 500_000)][..], 1_000_000),
            (&[(1, 300_000), (2, 500_000), (3, 400_000)][..], 1_000_000),
        ] {
            let mut o = opts(entries);
            o.cycle_time = Some(cycle);
            o.base_time = Some(123_456);
            for until in [7_000_000i64, 3_000_123_457, 600_000_000_123] {
                let new = || {
                    let mut q = Taprio::new(&o, &dev()).unwrap();
                    q.installed(Time(1_000));
                    q
                };
                let mut jumped = new();
                jumped.settle(Time(until as u64));
                let mut walked = new();
                walked.steady = false;
                while walked.timer.is_some_and(|t| t <= until) {
                    walked.expire();
                }
                assert_eq!(jumped.timer, walked.timer, "{entries:?} {until}");
                assert_eq!(jumped.current, walked.current);
                let (j, w) = (jumped.oper.unwrap(), walked.oper.unwrap());
                assert_eq!(j.cycle_end, w.cycle_end);
                let ends = |s: &Sched| {
                    s.entries
                        .iter()
                        .map(|e| (e.end, e.close, e.budget))
                        .collect::<Vec<_>>()
                };
                assert_eq!(ends(&j), ends(&w));
                assert!(jumped.timer.unwrap() > until);
            }
        }
    }

    #[test]
    fn a_change_waits_for_its_base_time_with_the_gates_open_meanwhile() {
        let mut q = Taprio::new(&opts(&[(1, 300_000), (2, 700_000)]), &dev()).unwrap();
        q.installed(Time(0));
        q.settle(Time(5_000_000));
        assert_eq!(q.dump_oper_mask(), Some(1));
        let mut o = opts(&[(3, 1_000_000)]);
        o.base_time = Some(50_000_000);
        q.apply(&o, &dev()).unwrap();
        q.installed(Time(5_100_000));
        // Pending; until the next expiry every gate is open.
        assert!(q.admin.is_some() && q.current.is_none());
        q.settle(Time(49_000_000));
        assert!(q.admin.is_some());
        assert!(matches!(q.dump_oper_mask(), Some(1 | 2)));
        // The entry that would end after the new base-time gives way.
        q.settle(Time(50_000_000));
        assert!(q.admin.is_none());
        assert_eq!(q.dump_oper_mask(), Some(3));
    }

    #[test]
    fn txtime_assist_stamps_slots_that_an_etf_child_keeps() {
        // flags 0x1, txtime-delay 200 µs; class 0 open for the first 300 µs
        // of each 1 ms cycle, class 1 for the other 700 µs; an etf child
        // (delta 100 µs, skip_sock_check) on every queue; 1 Gbit/s, so a
        // 1042-byte frame takes 8336 ns.
        let mut o = opts(&[(1, 300_000), (2, 700_000)]);
        o.flags = Some(TXTIME_ASSIST);
        o.txtime_delay = Some(200_000);
        let d = DevInfo {
            speed: 1000,
            ..dev()
        };
        let mut n = node(&o, &d);
        let etf = crate::qdisc::etf::EtfOpts {
            delta: 100_000,
            clockid: 11,
            flags: crate::qdisc::etf::SKIP_SOCK_CHECK,
        };
        for q in 1..=4 {
            let child = QdiscNode::create(
                Handle::new(q, 0),
                Handle::UNSPEC,
                &QdiscOpts::Etf(etf.clone()),
                &d,
            )
            .unwrap();
            let cls = n.qdisc.classes().unwrap();
            cls.graft(Handle::new(0x100, q), Some(child), &d).unwrap();
        }
        n.qdisc.installed(Time(0));
        let mut cx = Cx::new(Time(2_000_000));
        for _ in 0..5 {
            n.enqueue(pkt(6, 1042), &mut cx).unwrap();
            n.enqueue(pkt(0, 1042), &mut cx).unwrap();
        }
        let mut t = 2_000_000i64;
        let mut sent = vec![];
        loop {
            match n.dequeue(&mut Cx::new(Time(t as u64))) {
                Dequeue::Packet(p) => {
                    sent.push((p.priority, p.txtime.unwrap().0 as i64, t));
                    t += 8336;
                }
                Dequeue::Wait(w) => t = w.0 as i64,
                Dequeue::Empty => break,
            }
        }
        assert_eq!(sent.len(), 10, "{sent:?}");
        for &(prio, txtime, left) in &sent {
            // Launched within etf's delta before its time, never after.
            assert!(left > txtime - 100_000 && left <= txtime, "{sent:?}");
            // Its class's slot holds the whole frame; none before now + delay.
            let at = (txtime - 1_000_000).rem_euclid(1_000_000);
            let slot = if prio == 6 {
                300_000..1_000_000
            } else {
                0..300_000
            };
            assert!(slot.contains(&at) && at + 8336 <= slot.end, "{sent:?}");
            assert!(txtime >= 2_200_000);
        }
        // Back to back within a slot.
        let class1: Vec<i64> = sent.iter().filter(|s| s.0 == 6).map(|s| s.1).collect();
        assert!(class1.windows(2).all(|w| w[1] - w[0] == 8336), "{class1:?}");
    }

    /// An IPv4 TCP GSO packet of `segs` 1448-byte segments of priority `prio`.
    fn tcp_gso(segs: usize, prio: u32) -> Packet {
        let mut b = vec![0u8; 40 + segs * 1448];
        let total = b.len() as u16;
        b[0] = 0x45;
        b[2..4].copy_from_slice(&total.to_be_bytes());
        b[8] = 64;
        b[9] = 6;
        b[32] = 0x50;
        b[33] = 0x10;
        let len = b.len() as u32 + 14;
        let mut p = Packet::new(b, len, ETH_P_IP);
        crate::gso::init(&mut p, 1448, crate::packet::GsoKind::TcpV4, false).unwrap();
        p.priority = prio;
        p
    }

    #[test]
    fn a_gso_packet_over_its_class_limit_goes_in_as_its_segments() {
        // At 1 Gbit/s class 0 is open 15 µs (1875 bytes: 1502-byte
        // segments fit), class 1 10 µs (1250 bytes: they do not).
        let d = DevInfo {
            speed: 1000,
            ..dev()
        };
        let mut n = node(&opts(&[(1, 15_000), (2, 10_000)]), &d);
        n.qdisc.installed(Time(0));
        n.qdisc.settle(Time(100_000));
        let mut cx = Cx::new(Time(100_000));
        n.enqueue(tcp_gso(4, 0), &mut cx).unwrap();
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (4, 4 * 1502, 0));
        assert!(n.enqueue(tcp_gso(4, 6), &mut cx).is_err());
        let s = n.stats();
        assert_eq!((s.qlen, s.drops), (4, 4));
        // A packet that is not GSO is dropped whole.
        assert!(n.enqueue(pkt(6, 1502), &mut cx).is_err());
    }

    #[test]
    fn a_new_link_speed_resizes_the_frame_limits() {
        // Created before the link reports a speed (10 Mbit/s assumed): a
        // 900 µs window carries 1125 bytes, so a 1514-byte frame is too
        // long; at 100 Mbit/s it carries 11250 (`taprio_dev_notifier`).
        let slow = DevInfo { speed: 0, ..dev() };
        let mut n = node(&opts(&[(2, 100_000), (1, 900_000)]), &slow);
        n.qdisc.installed(Time(0));
        n.qdisc.settle(Time(2_000_000));
        let mut cx = Cx::new(Time(2_000_000));
        assert!(n.enqueue(pkt(0, 1514), &mut cx).is_err());
        n.qdisc.device_changed(&DevInfo {
            speed: 100,
            ..dev()
        });
        assert!(n.enqueue(pkt(0, 1514), &mut cx).is_ok());
    }

    #[test]
    fn extreme_times_neither_overflow_nor_start_early() {
        for flags in [None, Some(TXTIME_ASSIST)] {
            for base in [i64::MAX - 1000, i64::MIN + 1000, 0] {
                let mut o = opts(&[(1, 300_000), (2, 700_000)]);
                o.base_time = Some(base);
                o.cycle_time_extension = Some(i64::MAX - 1000);
                o.flags = flags;
                let mut n = node(&o, &dev());
                n.qdisc.installed(Time(5));
                for t in [10u64, 3_000_000, 1 << 62] {
                    let mut cx = Cx::new(Time(t));
                    let _ = n.enqueue(pkt(6, 100), &mut cx);
                    let _ = n.dequeue(&mut cx);
                    n.qdisc.settle(Time(t));
                }
                let QdiscOpts::Taprio(d) = n.qdisc.dump() else {
                    unreachable!()
                };
                // A base-time ~292 years ahead never starts; txtime-assist
                // runs a first schedule at once (its stamps wait instead).
                let running = flags.is_some() || base <= 0;
                assert_eq!(d.oper.is_some(), running, "{flags:?} {base}");
            }
        }
    }
}
