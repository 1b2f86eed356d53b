//! gate: let packets through only while a time schedule holds the gate
//! open (IEEE 802.1Qci per-stream gating).
//!
//! Modelled on net/sched/act_gate.c as of the 2026 "snapshot parameters
//! with RCU on replace" fix (notes: docs/research/gate.md). A gate has a
//! list of entries, each open or closed for an interval (ns), optionally
//! with a byte budget (`max-octets`) for the interval. The schedule starts
//! at `base-time` if that is still ahead, else at the next multiple of
//! `cycle-time` after it (the cycle defaults to the sum of the intervals);
//! from then on the entries follow each other by their own intervals and
//! repeat. Until the start the gate passes everything. A packet meeting a
//! closed gate is dropped (a drop); one that takes an open interval past
//! its budget is dropped as an overlimit and a drop, and its bytes stay
//! counted, so the rest of the interval stays closed to bigger and smaller
//! packets alike. Otherwise the configured verdict.
//!
//! Creating a gate needs at least one entry and every interval non-zero.
//! A replace keeps what it does not give: base-time, cycle-time-ext,
//! priority, flags, clock, and — when it brings no entries — the entries
//! and (unless given) the cycle time. Priority, flags, cycle-time-ext and
//! the entries' internal priority values are kept and dumped only: the
//! kernel hands them to offloading hardware.
//!
//! Deviations: sluice has one clock, so every `clockid` reads the caller's
//! time (a simulation's starts at 0, so `base-time` is an offset into it).
//! A replace restarts the schedule from its new start; the kernel, when
//! neither base-time nor clock changed, lets the old timer run out first.

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::{TcError, TcResult};
use crate::packet::Packet;
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// `CLOCK_TAI`, the default clock.
pub const CLOCK_TAI: i32 = 11;

/// One schedule entry (`TCA_GATE_ONE_ENTRY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateEntry {
    /// `TCA_GATE_ENTRY_GATE`: the gate is open.
    pub open: bool,
    /// `TCA_GATE_ENTRY_INTERVAL`, ns.
    pub interval: u32,
    /// `TCA_GATE_ENTRY_IPV`: internal priority value, -1 for none.
    pub ipv: i32,
    /// `TCA_GATE_ENTRY_MAX_OCTETS`: byte budget, -1 for none.
    pub max_octets: i32,
}

/// The gate's attributes (`TCA_GATE_*`): as tc sends them (`None`: not
/// sent), and as the kernel dumps them (all present).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateOpts {
    /// The control action when the gate lets a packet through.
    pub action: Verdict,
    /// `TCA_GATE_PRIORITY`.
    pub priority: Option<i32>,
    /// `TCA_GATE_BASE_TIME`, ns on the gate's clock.
    pub base_time: Option<u64>,
    /// `TCA_GATE_CYCLE_TIME`, ns.
    pub cycle_time: Option<u64>,
    /// `TCA_GATE_CYCLE_TIME_EXT`, ns.
    pub cycle_time_ext: Option<u64>,
    /// `TCA_GATE_CLOCKID`.
    pub clockid: Option<i32>,
    /// `TCA_GATE_FLAGS`.
    pub flags: Option<u32>,
    /// `TCA_GATE_ENTRY_LIST` (tc always sends one, maybe empty).
    pub entries: Option<Vec<GateEntry>>,
}

/// Validated parameters: the request, checked.
#[derive(Clone, Debug)]
pub struct GateParams(GateOpts);

impl GateParams {
    pub(crate) fn validate(o: &GateOpts, in_filter: bool, creating: bool) -> TcResult<Self> {
        check_ctrlact(o.action, in_filter)?;
        let entries = o.entries.as_deref().unwrap_or_default();
        if entries.iter().any(|e| e.interval == 0) {
            return Err(TcError::inval("Invalid interval for schedule entry"));
        }
        if creating && entries.is_empty() {
            return Err(TcError::inval("The entry list is empty"));
        }
        if !matches!(o.clockid, None | Some(0 | 1 | 7 | CLOCK_TAI)) {
            return Err(TcError::inval("Invalid 'clockid'"));
        }
        Ok(GateParams(o.clone()))
    }
}

/// The stored configuration, every field set.
#[derive(Clone, Debug)]
struct Config {
    action: Verdict,
    priority: i32,
    base_time: u64,
    cycle_time: u64,
    cycle_time_ext: u64,
    clockid: i32,
    flags: u32,
    entries: Vec<GateEntry>,
}

impl Config {
    /// What a request makes of the configuration `old` (none: a new gate).
    fn from(o: &GateOpts, old: Option<&Config>) -> Config {
        let keep = |new: Option<u64>, old: Option<u64>| new.or(old).unwrap_or(0);
        let new_entries = o.entries.clone().filter(|e| !e.is_empty());
        let entries = new_entries
            .clone()
            .or_else(|| old.map(|c| c.entries.clone()))
            .unwrap_or_default();
        // The old cycle stays with the old entries unless a new one is given.
        let old_cycle = old.filter(|_| new_entries.is_none()).map(|c| c.cycle_time);
        let mut cycle_time = keep(o.cycle_time, old_cycle);
        if cycle_time == 0 {
            cycle_time = entries.iter().map(|e| e.interval as u64).sum();
        }
        Config {
            action: o.action,
            priority: o.priority.or(old.map(|c| c.priority)).unwrap_or(-1),
            base_time: keep(o.base_time, old.map(|c| c.base_time)),
            cycle_time,
            cycle_time_ext: keep(o.cycle_time_ext, old.map(|c| c.cycle_time_ext)),
            clockid: o.clockid.or(old.map(|c| c.clockid)).unwrap_or(CLOCK_TAI),
            flags: o.flags.or(old.map(|c| c.flags)).unwrap_or(0),
            entries,
        }
    }

    /// When the schedule starts, for a configuration made at `now`
    /// (`gate_get_start_time`): base-time if still ahead, else the first
    /// cycle boundary after `now`.
    fn start(&self, now: u64) -> u64 {
        let (base, cycle) = (self.base_time, self.cycle_time.max(1));
        if base > now {
            return base;
        }
        let n = (now - base) / cycle + 1;
        base.saturating_add(n.saturating_mul(cycle))
    }
}

/// A gate action.
#[derive(Debug)]
pub struct Gate {
    c: Config,
    /// When entry 0 first takes effect; the gate is pending before.
    start: u64,
    /// The entry in effect when the last packet came: (round, entry).
    current: Option<(u64, usize)>,
    /// Bytes counted in that entry.
    octets: u32,
    drops: u64,
    overlimits: u64,
}

impl Gate {
    pub(crate) fn new(p: GateParams, now: Time) -> Self {
        let c = Config::from(&p.0, None);
        Gate {
            start: c.start(now.0),
            c,
            current: None,
            octets: 0,
            drops: 0,
            overlimits: 0,
        }
    }

    pub(crate) fn change(&mut self, p: GateParams, now: Time) {
        self.c = Config::from(&p.0, Some(&self.c));
        self.start = self.c.start(now.0);
        self.current = None;
        self.octets = 0;
    }

    /// The entry in effect at `t` (at or after the start): entries follow
    /// each other by their intervals, round after round.
    fn entry_at(&self, t: u64) -> (u64, usize) {
        let round: u64 = self.c.entries.iter().map(|e| e.interval as u64).sum();
        let since = t - self.start;
        let mut at = since % round.max(1);
        for (i, e) in self.c.entries.iter().enumerate() {
            if at < e.interval as u64 {
                return (since / round.max(1), i);
            }
            at -= e.interval as u64;
        }
        (since / round.max(1), 0)
    }
}

impl Action for Gate {
    fn kind(&self) -> &'static str {
        "gate"
    }

    fn act(&mut self, pkt: &mut Packet, now: Time) -> Verdict {
        if now.0 < self.start || self.c.entries.is_empty() {
            return self.c.action;
        }
        let at = self.entry_at(now.0);
        if self.current != Some(at) {
            self.current = Some(at);
            self.octets = 0;
        }
        let e = self.c.entries[at.1];
        if !e.open {
            self.drops += 1;
            return Verdict::Shot;
        }
        if e.max_octets >= 0 {
            self.octets = self.octets.wrapping_add(pkt.len);
            if self.octets > e.max_octets as u32 {
                self.overlimits += 1;
                self.drops += 1;
                return Verdict::Shot;
            }
        }
        self.c.action
    }

    fn drops(&self) -> u64 {
        self.drops
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }

    fn dump(&self) -> ActionOpts {
        let c = &self.c;
        ActionOpts::Gate(GateOpts {
            action: c.action,
            priority: Some(c.priority),
            base_time: Some(c.base_time),
            cycle_time: Some(c.cycle_time),
            cycle_time_ext: Some(c.cycle_time_ext),
            clockid: Some(c.clockid),
            flags: Some(c.flags),
            entries: Some(c.entries.clone()),
        })
    }

    fn control(&self) -> Verdict {
        self.c.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Errno;
    use crate::packet::ETH_P_IP;

    fn entry(open: bool, interval: u32, max_octets: i32) -> GateEntry {
        GateEntry {
            open,
            interval,
            ipv: -1,
            max_octets,
        }
    }

    /// A request with these entries and nothing else (verdict pipe).
    fn opts(entries: Vec<GateEntry>) -> GateOpts {
        GateOpts {
            action: Verdict::Pipe,
            priority: None,
            base_time: None,
            cycle_time: None,
            cycle_time_ext: None,
            clockid: None,
            flags: None,
            entries: Some(entries),
        }
    }

    /// Replace `g`'s configuration with `o` at time 0; the dump after.
    fn replaced(g: &mut Gate, o: &GateOpts) -> GateOpts {
        g.change(GateParams::validate(o, false, false).unwrap(), Time(0));
        let ActionOpts::Gate(d) = g.dump() else {
            panic!("kind")
        };
        d
    }

    fn gate(o: GateOpts, now: u64) -> Gate {
        Gate::new(GateParams::validate(&o, false, true).unwrap(), Time(now))
    }

    fn pkt(len: u32) -> Packet {
        Packet::new(vec![0x45; 20], len, ETH_P_IP)
    }

    #[test]
    fn the_schedule_starts_at_a_cycle_boundary_and_repeats_its_entries() {
        // open 10 ms, closed 5 ms: a 15 ms cycle; configured at t = 1 ms
        // with base-time 0, it starts at 15 ms and passes everything before.
        let o = opts(vec![
            entry(true, 10_000_000, -1),
            entry(false, 5_000_000, -1),
        ]);
        let mut g = gate(o, 1_000_000);
        assert_eq!(g.start, 15_000_000);
        let ms = |t: u64| Time(t * 1_000_000);
        for (t, want) in [
            (2, Verdict::Pipe),
            (14, Verdict::Pipe),
            (15, Verdict::Pipe),
            (24, Verdict::Pipe),
            (25, Verdict::Shot),
            (29, Verdict::Shot),
            (30, Verdict::Pipe),
            (44, Verdict::Shot),
        ] {
            assert_eq!(g.act(&mut pkt(100), ms(t)), want, "t = {t} ms");
        }
        assert_eq!((g.drops(), g.overlimits()), (3, 0));
        // A base-time still ahead is the start itself.
        let o = GateOpts {
            base_time: Some(7),
            ..opts(vec![entry(false, 1, -1)])
        };
        assert_eq!(gate(o, 3).start, 7);
    }

    #[test]
    fn the_byte_budget_closes_the_rest_of_its_interval() {
        let o = GateOpts {
            base_time: Some(1_000),
            ..opts(vec![entry(true, 1_000, 2500), entry(true, 1_000, -1)])
        };
        let mut g = gate(o, 0);
        let mut sent = vec![];
        for (t, len) in [
            (1_000, 1000),
            (1_100, 1000),
            (1_200, 1000),
            (1_300, 100),
            (2_000, 1500),
            (3_000, 1500),
            (3_500, 1500),
        ] {
            sent.push(g.act(&mut pkt(len), Time(t)) == Verdict::Pipe);
        }
        // 1000 + 1000 fit 2500; the third goes over, and the 100 after it
        // too (the overrun stays counted); the second entry has no budget;
        // the first entry's next round starts afresh.
        assert_eq!(sent, [true, true, false, false, true, true, false]);
        assert_eq!((g.drops(), g.overlimits()), (3, 3));
    }

    #[test]
    fn creation_needs_entries_with_intervals_and_replace_keeps_what_it_omits() {
        let e = |o: &GateOpts, creating| {
            GateParams::validate(o, false, creating)
                .map(|_| ())
                .map_err(|e| e.extack)
        };
        let none = opts(vec![]);
        assert_eq!(e(&none, true), Err(Some("The entry list is empty".into())));
        assert_eq!(e(&none, false), Ok(()));
        let zero = opts(vec![entry(true, 0, -1)]);
        assert_eq!(
            e(&zero, true),
            Err(Some("Invalid interval for schedule entry".into()))
        );
        let goto = GateOpts {
            action: Verdict::GotoChain(1),
            ..none.clone()
        };
        assert_eq!(
            GateParams::validate(&goto, false, false)
                .map(|_| ())
                .map_err(|e| e.errno),
            Err(Errno::EINVAL)
        );
        // Created with priority 3, base 200 s and one 200 ms entry; a replace
        // giving only base-time 400 s keeps the rest (tdc 3719).
        let mut g = gate(
            GateOpts {
                priority: Some(3),
                base_time: Some(200_000_000_000),
                ..opts(vec![entry(true, 200_000_000, 8_000_000)])
            },
            0,
        );
        let replace = GateOpts {
            base_time: Some(400_000_000_000),
            ..opts(vec![])
        };
        let d = replaced(&mut g, &replace);
        assert_eq!(
            (
                d.priority,
                d.base_time,
                d.cycle_time,
                d.clockid,
                d.entries.map(|e| e.len())
            ),
            (
                Some(3),
                Some(400_000_000_000),
                Some(200_000_000),
                Some(CLOCK_TAI),
                Some(1)
            )
        );
        // New entries replace the old ones, and the cycle is theirs.
        let replace = opts(vec![
            entry(false, 5_000_000, -1),
            entry(true, 5_000_000, -1),
        ]);
        let d = replaced(&mut g, &replace);
        assert_eq!(
            (d.cycle_time, d.entries.map(|e| e.len())),
            (Some(10_000_000), Some(2))
        );
    }
}
