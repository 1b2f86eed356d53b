//! The RED law: the arithmetic of Random Early Detection, shared by red,
//! choke and sfq's per-flow RED.
//!
//! Modelled on include/net/red.h (Linux 6.18), which writes Floyd and
//! Jacobson's 1993 algorithm without divisions on the fast path.
//!
//! # The average
//!
//! The average queue length is kept in fixed point with `Wlog` fraction
//! bits (`qavg = avg * 2^Wlog`) and updated at every arrival as
//! `avg <- avg + W * (backlog - avg)` with `W = 2^-Wlog`, which in that
//! representation is one shift, one subtraction and one addition. The
//! thresholds are stored shifted the same way. While the queue is empty
//! no arrivals drive the filter, so the kernel decays the average from the
//! length of the idle period instead: the table `Stab`, computed by tc for
//! the configured bandwidth and average packet size, gives for each idle
//! time cell (`2^Scell_log` microseconds) the shift equivalent to
//! `(1-W)^m`, where m is the number of average packets the link could have
//! sent meanwhile; a zero entry means "less than one halving", where the
//! kernel approximates the decay linearly, by at most a half. (tc computes
//! the table in psched ticks, the kernel indexes it in microseconds; that
//! mismatch is the kernel's and is kept.)
//!
//! # The decision
//!
//! Below `qth_min` nothing happens and the packet counter `qcount` is
//! reset to -1; at or above `qth_max` every packet is marked ("hard
//! mark"). In between, the marking probability grows linearly from 0 at
//! `qth_min` to `max_P` at `qth_max`, and the kernel spreads marks evenly
//! as the paper's Fig. 17 does: a uniform random number `qR` in
//! `[0, 2^32 / (max_P / (qth_max - qth_min)))` is drawn after each mark,
//! and the packet is marked once `(avg - qth_min) * qcount >= qR`, that is
//! once the count since the last mark exceeds `qR / (p_b * range)`. The
//! division by `max_P / range` is exact here, as the kernel's
//! `reciprocal_divide` is.
//!
//! # Adaptive RED
//!
//! With `adaptive` (Floyd, Gummadi and Shenker, 2001) a timer every 500 ms
//! nudges `max_P` (a Q0.32 fraction) to keep the average between 40 % and
//! 60 % of the way from `qth_min` to `qth_max`: up by
//! `min(1 %, max_P / 4)` while above and `max_P <= 50 %`, down by a factor
//! 0.9 while below and `max_P >= 1 %`. The timer is the caller's; this file
//! gives the step ([`RedParams::adapt`]).
//!
//! Deviations: none in the arithmetic. The random numbers come from the
//! caller's seeded generator instead of the kernel's `get_random_u32`. The
//! average is a `u64`, as the kernel's `unsigned long` on 64-bit machines.

use crate::time::Time;
use rand::RngCore;

/// Entries of the idle-time table (`RED_STAB_SIZE`).
pub const RED_STAB_SIZE: usize = 256;
/// One percent as a Q0.32 fraction, rounded (`RED_ONE_PERCENT`).
pub const RED_ONE_PERCENT: u32 = 42_949_673;
/// Adaptive RED's floor for `max_P` (`MAX_P_MIN`).
pub const MAX_P_MIN: u32 = RED_ONE_PERCENT;
/// Adaptive RED's ceiling for `max_P` (`MAX_P_MAX`).
pub const MAX_P_MAX: u32 = 50 * RED_ONE_PERCENT;

/// `TC_RED_ECN`: mark ECN-capable packets instead of dropping them.
pub const TC_RED_ECN: u8 = 1;
/// `TC_RED_HARDDROP`: drop above `max` even with `ecn`.
pub const TC_RED_HARDDROP: u8 = 2;
/// `TC_RED_ADAPTATIVE`: adaptive RED (the kernel's spelling).
pub const TC_RED_ADAPTATIVE: u8 = 4;
/// `TC_RED_NODROP`: with `ecn`, queue non-ECT packets instead of dropping them.
pub const TC_RED_NODROP: u8 = 8;
/// The flags that travel in `tc_red_qopt.flags` (`TC_RED_HISTORIC_FLAGS`).
pub const TC_RED_HISTORIC_FLAGS: u8 = TC_RED_ECN | TC_RED_HARDDROP | TC_RED_ADAPTATIVE;

/// `fls`: the 1-based index of the highest set bit, 0 for 0.
fn fls(x: u32) -> u32 {
    32 - x.leading_zeros()
}

/// `red_check_params`: the thresholds fit in 32 bits once shifted by
/// `Wlog`, `Scell_log` and every table entry are shifts below 32, and
/// `qth_max >= qth_min`.
pub fn red_check_params(
    qth_min: u32,
    qth_max: u32,
    wlog: u8,
    scell_log: u8,
    stab: Option<&[u8; RED_STAB_SIZE]>,
) -> bool {
    fls(qth_min) + (wlog as u32) < 32
        && fls(qth_max) + (wlog as u32) < 32
        && scell_log < 32
        && qth_max >= qth_min
        && stab.is_none_or(|s| s.iter().all(|&v| v < 32))
}

/// `struct red_parms`: the validated parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedParams {
    /// Minimum threshold, scaled by `2^wlog`.
    pub qth_min: u64,
    /// Maximum threshold, scaled by `2^wlog`.
    pub qth_max: u64,
    /// Longest idle time the table covers, µs (`255 << Scell_log`).
    pub scell_max: u32,
    /// Marking probability at `qth_max`, a Q0.32 fraction.
    pub max_p: u32,
    /// `max_P / (qth_max - qth_min)`, at least 1: the divisor of [`red_random`].
    pub max_p_delta: u32,
    /// `qth_max - qth_min` in queue units, at least 1.
    pub qth_delta: u32,
    /// Adaptive RED's target band, queue units.
    pub target_min: u32,
    /// Upper end of the target band.
    pub target_max: u32,
    /// log2 of the idle-time table's cell, µs.
    pub scell_log: u8,
    /// log2(1/W).
    pub wlog: u8,
    /// log2 of the probability denominator (used when `max_P` is not given).
    pub plog: u8,
    /// The idle-time table: shifts by cell of idle time.
    pub stab: [u8; RED_STAB_SIZE],
}

/// `red_maxp`: the largest Q0.32 probability representable with `Plog` bits.
fn red_maxp(plog: u8) -> u32 {
    if plog < 32 {
        u32::MAX >> plog
    } else {
        u32::MAX
    }
}

impl RedParams {
    /// `red_set_parms`. `max_p` 0 derives it from `plog`; `stab` `None`
    /// leaves an all-zero table (callers that never idle).
    pub fn new(
        qth_min: u32,
        qth_max: u32,
        wlog: u8,
        plog: u8,
        scell_log: u8,
        stab: Option<&[u8; RED_STAB_SIZE]>,
        max_p: u32,
    ) -> Self {
        let mut delta = qth_max.wrapping_sub(qth_min) as i32;
        if delta <= 0 {
            delta = 1;
        }
        let max_p = if max_p == 0 {
            red_maxp(plog).wrapping_mul(delta as u32)
        } else {
            max_p
        };
        let fifth = (delta / 5) as u32;
        RedParams {
            qth_min: (qth_min as u64) << wlog,
            qth_max: (qth_max as u64) << wlog,
            scell_max: 255u32.wrapping_shl(scell_log as u32),
            max_p,
            max_p_delta: (max_p / delta as u32).max(1),
            qth_delta: delta as u32,
            target_min: qth_min.wrapping_add(2 * fifth),
            target_max: qth_min.wrapping_add(3 * fifth),
            scell_log,
            wlog,
            plog,
            stab: stab.copied().unwrap_or([0; RED_STAB_SIZE]),
        }
    }

    /// The minimum threshold as configured (unscaled), as the kernel dumps it.
    pub fn min_threshold(&self) -> u32 {
        (self.qth_min >> self.wlog) as u32
    }

    /// The maximum threshold as configured (unscaled).
    pub fn max_threshold(&self) -> u32 {
        (self.qth_max >> self.wlog) as u32
    }

    /// `red_adaptative_algo`: one 500 ms step of adaptive RED at `now`.
    pub fn adapt(&mut self, v: &RedVars, now: Time) {
        let qavg = if v.is_idling() {
            calc_qavg_from_idle_time(self, v, now)
        } else {
            v.qavg
        } >> self.wlog;
        if qavg > self.target_max as u64 && self.max_p <= MAX_P_MAX {
            self.max_p += MAX_P_MIN.min(self.max_p / 4);
        } else if qavg < self.target_min as u64 && self.max_p >= MAX_P_MIN {
            self.max_p = (self.max_p / 10) * 9;
        }
        // DIV_ROUND_CLOSEST for unsigned operands.
        let d = self.qth_delta as u64;
        self.max_p_delta = (((self.max_p as u64 + d / 2) / d) as u32).max(1);
    }
}

/// `struct red_vars`: the running state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedVars {
    /// Packets since the last mark; -1 when below `qth_min`.
    pub qcount: i32,
    /// The random threshold for the next mark.
    pub q_r: u32,
    /// The average queue length, scaled by `2^wlog`.
    pub qavg: u64,
    /// When the current idle period began (`None`: not idle).
    pub idle_since: Option<Time>,
}

impl Default for RedVars {
    /// `red_set_vars` on zeroed memory: not idle, average 0, count -1.
    fn default() -> Self {
        RedVars {
            qcount: -1,
            q_r: 0,
            qavg: 0,
            idle_since: None,
        }
    }
}

impl RedVars {
    /// `red_set_vars`: forget the average (the idle state is kept).
    pub fn set_vars(&mut self) {
        self.qavg = 0;
        self.qcount = -1;
    }
    /// `red_is_idling`.
    pub fn is_idling(&self) -> bool {
        self.idle_since.is_some()
    }
    /// `red_start_of_idle_period`.
    pub fn start_idle(&mut self, now: Time) {
        self.idle_since = Some(now);
    }
    /// `red_end_of_idle_period`.
    pub fn end_idle(&mut self) {
        self.idle_since = None;
    }
    /// `red_restart`: not idle, average 0, count -1.
    pub fn restart(&mut self) {
        *self = RedVars {
            q_r: self.q_r,
            ..RedVars::default()
        };
    }
}

/// `red_calc_qavg_from_idle_time`: the average decayed over the idle period.
pub fn calc_qavg_from_idle_time(p: &RedParams, v: &RedVars, now: Time) -> u64 {
    let since = v.idle_since.unwrap_or(now);
    // ktime_us_delta, then capped at Scell_max.
    let us = (now.as_nanos() as i64 - since.as_nanos() as i64) / 1000;
    let us_idle = us.min(p.scell_max as i64);
    let shift = p.stab[((us_idle >> p.scell_log) as usize) & (RED_STAB_SIZE - 1)];
    if shift != 0 {
        return v.qavg >> shift;
    }
    // (1-W)^m ~ 1 - mW: a linear decay, by at most a half.
    let dec = v.qavg.wrapping_mul(us_idle as u64) >> p.scell_log;
    if dec < v.qavg >> 1 {
        v.qavg - dec
    } else {
        v.qavg >> 1
    }
}

/// `red_calc_qavg_no_idle_time`: one step of the filter towards `backlog`.
pub fn calc_qavg_no_idle_time(p: &RedParams, v: &RedVars, backlog: u64) -> u64 {
    v.qavg.wrapping_add(backlog.wrapping_sub(v.qavg >> p.wlog))
}

/// `red_calc_qavg`: the new average for an arrival seeing `backlog`.
pub fn calc_qavg(p: &RedParams, v: &RedVars, backlog: u64, now: Time) -> u64 {
    if v.is_idling() {
        calc_qavg_from_idle_time(p, v, now)
    } else {
        calc_qavg_no_idle_time(p, v, backlog)
    }
}

/// `red_random`: a uniform number in `[0, 2^32 / max_p_delta)`.
pub fn red_random(p: &RedParams, rng: &mut impl RngCore) -> u32 {
    rng.next_u32() / p.max_p_delta
}

/// `red_mark_probability`: is it time for the next early mark?
pub fn mark_probability(p: &RedParams, v: &RedVars, qavg: u64) -> bool {
    let excess = qavg.wrapping_sub(p.qth_min) >> p.wlog;
    excess.wrapping_mul(v.qcount as i64 as u64) >= v.q_r as u64
}

/// What RED says about an arriving packet (`red_action`'s answers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedAction {
    /// Below the thresholds or not yet time: queue it.
    DontMark,
    /// An early, probabilistic mark or drop.
    ProbMark,
    /// Above `qth_max`: mark or drop.
    HardMark,
}

/// `red_action`: the decision for an arrival with average `qavg`.
pub fn red_action(p: &RedParams, v: &mut RedVars, qavg: u64, rng: &mut impl RngCore) -> RedAction {
    if qavg < p.qth_min {
        v.qcount = -1;
        return RedAction::DontMark;
    }
    if qavg >= p.qth_max {
        v.qcount = -1;
        return RedAction::HardMark;
    }
    v.qcount = v.qcount.wrapping_add(1);
    if v.qcount != 0 {
        if mark_probability(p, v, qavg) {
            v.qcount = 0;
            v.q_r = red_random(p, rng);
            return RedAction::ProbMark;
        }
    } else {
        v.q_r = red_random(p, rng);
    }
    RedAction::DontMark
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn set_parms_as_red_h() {
        // min 100 KiB, max 300 KiB, Wlog 9, Plog 23, probability 0.02.
        let p = RedParams::new(102_400, 307_200, 9, 23, 20, None, 85_899_345);
        assert_eq!(p.qth_min, 102_400 << 9);
        assert_eq!((p.min_threshold(), p.max_threshold()), (102_400, 307_200));
        assert_eq!(p.qth_delta, 204_800);
        assert_eq!(p.max_p_delta, 85_899_345 / 204_800);
        // 0.4 and 0.6 of the way: 102400 + 2 * 40960, + 3 * 40960.
        assert_eq!((p.target_min, p.target_max), (184_320, 225_280));
        assert_eq!(p.scell_max, 255 << 20);
        // max_P 0: derived from Plog, (2^32 - 1) / 2^Plog * delta.
        let q = RedParams::new(10, 30, 1, 4, 0, None, 0);
        assert_eq!(q.max_p, (u32::MAX >> 4).wrapping_mul(20));
        // max below min: delta 1.
        assert_eq!(RedParams::new(30, 10, 1, 4, 0, None, 7).qth_delta, 1);
    }

    #[test]
    fn check_params_as_red_h() {
        assert!(red_check_params(1000, 3000, 9, 10, None));
        assert!(!red_check_params(3000, 1000, 9, 10, None));
        // fls(2^21) = 22, + Wlog 10 = 32: too large.
        assert!(!red_check_params(0, 1 << 21, 10, 0, None));
        assert!(red_check_params(0, (1 << 21) - 1, 10, 0, None));
        assert!(!red_check_params(0, 10, 1, 32, None));
        let mut stab = [0u8; RED_STAB_SIZE];
        stab[7] = 32;
        assert!(!red_check_params(0, 10, 1, 1, Some(&stab)));
    }

    /// The filter is an EWMA with weight 2^-Wlog: after n arrivals seeing a
    /// constant backlog B from an empty average, avg = B (1 - (1-W)^n).
    #[test]
    fn the_average_tracks_the_queue_with_weight_two_to_minus_wlog() {
        for wlog in [1u8, 3, 6, 9] {
            let p = RedParams::new(1000, 3000, wlog, 10, 0, None, 0);
            let mut v = RedVars::default();
            let b = 50_000u64;
            let w = 1.0 / (1u64 << wlog) as f64;
            for n in 1..=2000u32 {
                v.qavg = calc_qavg_no_idle_time(&p, &v, b);
                let avg = v.qavg as f64 / (1u64 << wlog) as f64;
                let exact = b as f64 * (1.0 - (1.0 - w).powi(n as i32));
                // Truncation loses under one unit per step, compounding to
                // at most 2^Wlog units.
                assert!(
                    (avg - exact).abs() <= (1u64 << wlog) as f64 + 1.0,
                    "Wlog {wlog} n {n}: {avg} vs {exact}"
                );
            }
        }
    }

    #[test]
    fn idle_time_decays_the_average() {
        let mut stab = [0u8; RED_STAB_SIZE];
        stab[2] = 3;
        let p = RedParams::new(1000, 3000, 2, 10, 4, Some(&stab), 0);
        let v = RedVars {
            qavg: 8000,
            idle_since: Some(Time(1_000_000)),
            ..Default::default()
        };
        // 40 µs idle: cell 40 >> 4 = 2, shift 3.
        assert_eq!(calc_qavg_from_idle_time(&p, &v, Time(1_040_000)), 1000);
        // 5 µs: cell 0, linear: 8000 - 8000 * 5 / 16.
        assert_eq!(calc_qavg_from_idle_time(&p, &v, Time(1_005_000)), 5500);
        // 12 µs: the linear decay is capped at a half.
        assert_eq!(calc_qavg_from_idle_time(&p, &v, Time(1_012_000)), 4000);
        assert_eq!(calc_qavg(&p, &v, 123, Time(1_040_000)), 1000);
    }

    #[test]
    fn no_early_marks_below_min_and_all_above_max() {
        let p = RedParams::new(1000, 3000, 0, 10, 0, None, u32::MAX / 2);
        let mut v = RedVars::default();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for _ in 0..1000 {
            assert_eq!(red_action(&p, &mut v, 999, &mut rng), RedAction::DontMark);
            assert_eq!(v.qcount, -1);
        }
        for _ in 0..1000 {
            assert_eq!(red_action(&p, &mut v, 3000, &mut rng), RedAction::HardMark);
        }
    }

    /// Between the thresholds marks are spread evenly (Floyd & Jacobson's
    /// p_a = p_b / (1 - count p_b)): at a fixed average the gap between
    /// marks is uniform on 1..1/p_b packets, mean (1/p_b + 1) / 2.
    #[test]
    fn marks_between_the_thresholds_come_at_the_configured_rate() {
        let max_p = (0.1 * 4294967296.0) as u32; // 10 %
        let p = RedParams::new(1000, 3000, 0, 10, 0, None, max_p);
        let mut v = RedVars::default();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let qavg = 2000; // halfway: p_b = 5 %
        let n = 400_000;
        let marks = (0..n)
            .filter(|_| red_action(&p, &mut v, qavg, &mut rng) == RedAction::ProbMark)
            .count();
        let gap = n as f64 / marks as f64;
        assert!((gap - 10.5).abs() < 0.2, "mean gap {gap}");
    }

    #[test]
    fn adaptive_red_moves_max_p_towards_the_target_band() {
        let mut p = RedParams::new(1000, 3000, 0, 10, 0, None, 10 * RED_ONE_PERCENT);
        let busy = RedVars {
            qavg: 2900,
            ..Default::default()
        };
        p.adapt(&busy, Time(0));
        assert_eq!(p.max_p, 10 * RED_ONE_PERCENT + RED_ONE_PERCENT);
        for _ in 0..100 {
            p.adapt(&busy, Time(0));
        }
        assert!(p.max_p > MAX_P_MAX && p.max_p <= MAX_P_MAX + RED_ONE_PERCENT);
        let quiet = RedVars {
            qavg: 1100,
            ..Default::default()
        };
        for _ in 0..200 {
            p.adapt(&quiet, Time(0));
        }
        assert!(p.max_p < MAX_P_MIN && p.max_p > MAX_P_MIN * 9 / 10);
        // Inside the band nothing moves.
        let before = p.max_p;
        p.adapt(
            &RedVars {
                qavg: 2000,
                ..Default::default()
            },
            Time(0),
        );
        assert_eq!(p.max_p, before);
        assert_eq!(p.max_p_delta, ((before as u64 + 1000) / 2000) as u32);
    }
}
