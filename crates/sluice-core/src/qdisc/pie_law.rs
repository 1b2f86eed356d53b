//! The PIE law: Proportional Integral controller Enhanced (RFC 8033), the
//! arithmetic shared by pie and fq_pie.
//!
//! Modelled on include/net/pie.h and the exported functions of
//! net/sched/sch_pie.c (Linux 6.18).
//!
//! # The controller
//!
//! Every `tupdate` (15 ms) the drop probability `p` moves by
//! `alpha * (qdelay - target) + beta * (qdelay - qdelay_old)`: the first
//! term pulls the queueing delay towards `target` (15 ms), the second
//! damps its trend. `p` is a fixed-point fraction of `MAX_PROB = 2^56 - 1`;
//! alpha and beta are given in sixteenths (2 and 20 by default: 0.125 and
//! 1.25 per second of delay error) and are scaled down while `p` is small
//! (by 2 below 10 %, then by a further 4 per decade below 1 %, 0.1 %, ...),
//! so that the controller is gentle at light load and responsive under
//! heavy load (RFC 8033 section 4.2). An increase is capped at 2 % per
//! update once `p >= 10 %`; a delay above 250 ms adds 2 % at once; two
//! updates with no delay decay `p` by 1/64. When delay and `p` have been
//! low for two updates the measurement state is restarted.
//!
//! # Queueing delay
//!
//! By default each packet is stamped at enqueue and `qdelay` is the
//! sojourn time of the last dequeued packet (0 once the queue is empty).
//! With `dq_rate_estimator` PIE instead estimates the departure rate by
//! timing the dequeue of 16 KiB whenever at least that much is queued,
//! averages it (weight 1/8), and computes `qdelay = backlog / rate` at each
//! update (Little's law).
//!
//! # The drop decision
//!
//! At enqueue, nothing is dropped while the 150 ms burst allowance lasts
//! (it shrinks with time between dequeues), while `qdelay < target / 2`
//! and `p < 20 %`, or while fewer than two MTUs are queued. Otherwise the
//! packet is dropped with probability `p` (scaled by size / MTU in
//! `bytemode`), de-randomized as RFC 8033 section 5.1 suggests: the
//! probabilities are accumulated and nothing is dropped before they sum to
//! 0.85, everything after 8.5.
//!
//! Deviations: times are the kernel's psched ticks of 64 ns taken from the
//! caller's clock; `tupdate` is kept in jiffies of a 1000 Hz kernel; the
//! random numbers come from the caller's seeded generator; the update timer
//! is run lazily by [`PieTimer`], each step at its own due time before the
//! call that finds it due, which is exact because nothing the update reads
//! changes between calls.

use crate::time::{Time, PSCHED_SHIFT};
use rand::RngCore;

/// Probability 1 (`MAX_PROB`).
pub const MAX_PROB: u64 = u64::MAX >> 8;
/// No dequeue time yet (`DTIME_INVALID`).
pub const DTIME_INVALID: u64 = u64::MAX;
/// Bytes per rate measurement (`QUEUE_THRESHOLD`).
pub const QUEUE_THRESHOLD: u64 = 16384;
/// No measurement running (`DQCOUNT_INVALID`, -1 in a u64).
pub const DQCOUNT_INVALID: u64 = u64::MAX;
/// Fixed-point shift of the dequeue rate (`PIE_SCALE`).
pub const PIE_SCALE: u32 = 8;
/// psched ticks per second (64 ns each).
pub const PSCHED_TICKS_PER_SEC: u64 = 1_000_000_000 >> PSCHED_SHIFT;
/// Jiffies per second assumed for `tupdate`.
pub const HZ: u64 = 1000;

/// psched ticks of a time.
pub fn ticks(t: Time) -> u64 {
    t.as_nanos() >> PSCHED_SHIFT
}

/// `PSCHED_NS2TICKS(us * NSEC_PER_USEC)`.
pub fn us_to_ticks(us: u32) -> u64 {
    (us as u64 * 1000) >> PSCHED_SHIFT
}

/// `(u32)PSCHED_TICKS2NS(ticks) / NSEC_PER_USEC`, as the kernel dumps times.
pub fn ticks_to_us(ticks: u64) -> u32 {
    ((ticks << PSCHED_SHIFT) as u32) / 1000
}

/// `usecs_to_jiffies` at 1000 Hz.
pub fn us_to_jiffies(us: u32) -> u32 {
    us.div_ceil(1000)
}

/// `jiffies_to_usecs` at 1000 Hz.
pub fn jiffies_to_us(j: u32) -> u32 {
    j.wrapping_mul(1000)
}

/// `struct pie_params`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieParams {
    /// Target queueing delay, ticks.
    pub target: u64,
    /// Update interval, jiffies.
    pub tupdate: u32,
    /// Packets queued at most.
    pub limit: u32,
    /// Integral gain, sixteenths.
    pub alpha: u32,
    /// Proportional gain, sixteenths.
    pub beta: u32,
    /// Mark ECN-capable packets instead of dropping while `p` is low.
    pub ecn: bool,
    /// Scale the probability by packet size.
    pub bytemode: bool,
    /// Delay from the dequeue rate instead of timestamps.
    pub dq_rate_estimator: bool,
}

impl Default for PieParams {
    /// `pie_params_init`.
    fn default() -> Self {
        PieParams {
            target: us_to_ticks(15_000),
            tupdate: us_to_jiffies(15_000),
            limit: 1000,
            alpha: 2,
            beta: 20,
            ecn: false,
            bytemode: false,
            dq_rate_estimator: false,
        }
    }
}

/// `struct pie_vars`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieVars {
    /// Current queueing delay, ticks.
    pub qdelay: u64,
    /// Queueing delay at the previous update, ticks.
    pub qdelay_old: u64,
    /// Burst allowance left, ticks.
    pub burst_time: u64,
    /// Time of the last dequeue (or of the measurement start), ticks.
    pub dq_tstamp: u64,
    /// Drop probability, a fraction of `MAX_PROB`.
    pub prob: u64,
    /// Probability accumulated since the last drop.
    pub accu_prob: u64,
    /// Bytes dequeued in the running measurement.
    pub dq_count: u64,
    /// Average dequeue rate, bytes per tick scaled by `2^PIE_SCALE`.
    pub avg_dq_rate: u32,
    /// Backlog at the previous update.
    pub backlog_old: u32,
}

impl Default for PieVars {
    /// Zeroed memory then `pie_vars_init`.
    fn default() -> Self {
        let mut v = PieVars {
            qdelay: 0,
            qdelay_old: 0,
            burst_time: 0,
            dq_tstamp: 0,
            prob: 0,
            accu_prob: 0,
            dq_count: 0,
            avg_dq_rate: 0,
            backlog_old: 0,
        };
        v.init();
        v
    }
}

impl PieVars {
    /// `pie_vars_init`: restart the measurements (the probability and the
    /// delays are kept).
    pub fn init(&mut self) {
        self.burst_time = us_to_ticks(150_000);
        self.dq_tstamp = DTIME_INVALID;
        self.accu_prob = 0;
        self.dq_count = DQCOUNT_INVALID;
        self.avg_dq_rate = 0;
    }
}

/// `struct pie_stats`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PieStats {
    /// Packets queued.
    pub packets_in: u32,
    /// Packets dropped (by PIE or at the limit).
    pub dropped: u32,
    /// Packets dropped at the limit.
    pub overlimit: u32,
    /// Packets CE-marked.
    pub ecn_mark: u32,
    /// Longest queue seen at enqueue.
    pub maxq: u32,
}

/// `pie_drop_early`: should the arriving packet of `packet_size` bytes be
/// dropped (or marked), with `backlog` bytes queued and an MTU (with link
/// header) of `mtu`?
pub fn drop_early(
    params: &PieParams,
    vars: &mut PieVars,
    backlog: u32,
    packet_size: u32,
    mtu: u32,
    rng: &mut impl RngCore,
) -> bool {
    if vars.burst_time > 0 {
        return false;
    }
    if vars.qdelay < params.target / 2 && vars.prob < MAX_PROB / 5 {
        return false;
    }
    if (backlog as u64) < 2 * mtu as u64 {
        return false;
    }
    let local_prob = if params.bytemode && packet_size <= mtu {
        (packet_size as u64).wrapping_mul(vars.prob / mtu.max(1) as u64)
    } else {
        vars.prob
    };
    if local_prob == 0 {
        vars.accu_prob = 0;
    } else {
        vars.accu_prob = vars.accu_prob.wrapping_add(local_prob);
    }
    if vars.accu_prob < (MAX_PROB / 100) * 85 {
        return false;
    }
    if vars.accu_prob >= (MAX_PROB / 2) * 17 {
        return true;
    }
    if rng.next_u64() >> 8 < local_prob {
        vars.accu_prob = 0;
        return true;
    }
    false
}

/// `pie_process_dequeue`: update the delay or rate measurement after a
/// packet of `len` bytes, stamped `enqueued`, left with `backlog` bytes
/// behind it, at `now`.
pub fn process_dequeue(
    params: &PieParams,
    vars: &mut PieVars,
    len: u32,
    enqueued: Time,
    backlog: u32,
    now: Time,
) {
    let now = ticks(now);
    let mut dtime = 0u64;
    if !params.dq_rate_estimator {
        vars.qdelay = now.wrapping_sub(ticks(enqueued));
        if vars.dq_tstamp != DTIME_INVALID {
            dtime = now.wrapping_sub(vars.dq_tstamp);
        }
        vars.dq_tstamp = now;
        if backlog == 0 {
            vars.qdelay = 0;
        }
        if dtime == 0 {
            return;
        }
    } else {
        if backlog as u64 >= QUEUE_THRESHOLD && vars.dq_count == DQCOUNT_INVALID {
            vars.dq_tstamp = now;
            vars.dq_count = 0;
        }
        if vars.dq_count == DQCOUNT_INVALID {
            return;
        }
        vars.dq_count = vars.dq_count.wrapping_add(len as u64);
        if vars.dq_count < QUEUE_THRESHOLD {
            return;
        }
        // A u32 in the kernel.
        let count = (vars.dq_count << PIE_SCALE) as u32;
        dtime = now.wrapping_sub(vars.dq_tstamp);
        if dtime == 0 {
            return;
        }
        let count = (count as u64 / dtime) as u32;
        vars.avg_dq_rate = if vars.avg_dq_rate == 0 {
            count
        } else {
            (vars.avg_dq_rate - (vars.avg_dq_rate >> 3)).wrapping_add(count >> 3)
        };
        if (backlog as u64) < QUEUE_THRESHOLD {
            vars.dq_count = DQCOUNT_INVALID;
        } else {
            vars.dq_count = 0;
            vars.dq_tstamp = now;
        }
    }
    // The burst allowance shrinks by the time between measurements.
    if vars.burst_time > 0 {
        vars.burst_time = vars.burst_time.saturating_sub(dtime);
    }
}

/// `pie_calculate_probability`: one update with `backlog` bytes queued.
pub fn calculate_probability(params: &PieParams, vars: &mut PieVars, backlog: u32) {
    let (qdelay, qdelay_old);
    if params.dq_rate_estimator {
        qdelay_old = vars.qdelay;
        vars.qdelay_old = vars.qdelay;
        qdelay = if vars.avg_dq_rate > 0 {
            ((backlog as u64) << PIE_SCALE) / vars.avg_dq_rate as u64
        } else {
            0
        };
    } else {
        qdelay = vars.qdelay;
        qdelay_old = vars.qdelay_old;
    }
    let mut update_prob = !(qdelay == 0 && backlog != 0);
    let mut alpha = (params.alpha as u64 * (MAX_PROB / PSCHED_TICKS_PER_SEC)) >> 4;
    let mut beta = (params.beta as u64 * (MAX_PROB / PSCHED_TICKS_PER_SEC)) >> 4;
    if vars.prob < MAX_PROB / 10 {
        alpha >>= 1;
        beta >>= 1;
        let mut power = 100u64;
        while vars.prob < MAX_PROB / power && power <= 1_000_000 {
            alpha >>= 2;
            beta >>= 2;
            power *= 10;
        }
    }
    // s64 arithmetic on u64 operands, as the kernel's.
    let mut delta: i64 = 0;
    delta = delta.wrapping_add(alpha.wrapping_mul(qdelay.wrapping_sub(params.target)) as i64);
    delta = delta.wrapping_add(beta.wrapping_mul(qdelay.wrapping_sub(qdelay_old)) as i64);
    let oldprob = vars.prob;
    if delta > (MAX_PROB / 50) as i64 && vars.prob >= MAX_PROB / 10 {
        delta = ((MAX_PROB / 100) * 2) as i64;
    }
    if qdelay > us_to_ticks(250_000) {
        delta = delta.wrapping_add((MAX_PROB / 50) as i64);
    }
    vars.prob = vars.prob.wrapping_add(delta as u64);
    if delta > 0 {
        if vars.prob < oldprob {
            vars.prob = MAX_PROB;
            update_prob = false;
        }
    } else if vars.prob > oldprob {
        vars.prob = 0;
    }
    if qdelay == 0 && qdelay_old == 0 && update_prob {
        vars.prob -= vars.prob / 64;
    }
    vars.qdelay = qdelay;
    vars.backlog_old = backlog;
    if vars.qdelay < params.target / 2
        && vars.qdelay_old < params.target / 2
        && vars.prob == 0
        && (!params.dq_rate_estimator || vars.avg_dq_rate > 0)
    {
        vars.init();
    }
    if !params.dq_rate_estimator {
        vars.qdelay_old = qdelay;
    }
}

/// The update timer, run lazily: it first fires 500 ms after creation
/// (here: after the first call), then every `tupdate` jiffies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PieTimer {
    next: Option<Time>,
    stopped: bool,
}

impl PieTimer {
    /// The due times up to `now`, in order, for the caller to run an update
    /// at each; `step` returns whether anything changed, and once a step
    /// changes nothing the rest (which would not either) are skipped.
    pub fn run(&mut self, now: Time, tupdate: u32, mut step: impl FnMut(Time) -> bool) {
        if self.stopped {
            return;
        }
        let period = |j: u32| crate::time::Duration::from_millis(j as u64 * 1000 / HZ);
        let mut due = match self.next {
            None => {
                self.next = Some(now + period(HZ as u32 / 2));
                return;
            }
            Some(t) => t,
        };
        while due <= now {
            let changed = step(due);
            if tupdate == 0 {
                // The kernel's timer is not re-armed.
                self.stopped = true;
                return;
            }
            let p = period(tupdate);
            due += p;
            if !changed && due <= now {
                let missed = (now.0 - due.0) / p.0;
                due = Time(due.0 + (missed + 1) * p.0);
            }
        }
        self.next = Some(due);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn defaults_as_pie_h() {
        let p = PieParams::default();
        assert_eq!(p.target, 234_375, "15 ms in 64 ns ticks");
        assert_eq!(ticks_to_us(p.target), 15_000);
        assert_eq!(jiffies_to_us(p.tupdate), 15_000);
        assert_eq!((p.limit, p.alpha, p.beta), (1000, 2, 20));
        let v = PieVars::default();
        assert_eq!(v.burst_time, 2_343_750);
        assert_eq!((v.dq_tstamp, v.dq_count), (DTIME_INVALID, DQCOUNT_INVALID));
        // The kernel's dump of a target above 4.29 s wraps in 32 bits.
        assert_eq!(ticks_to_us(us_to_ticks(5_000_000)), 705_032);
    }

    /// alpha = 0.125 and beta = 1.25 per second of delay error at p >= 10 %:
    /// 20 ms above target for one update (with no trend) raises p by
    /// 0.125 * 0.02 = 0.25 %.
    #[test]
    fn the_integral_term_follows_the_delay_error() {
        let params = PieParams::default();
        let mut v = PieVars {
            prob: MAX_PROB / 5,
            qdelay: us_to_ticks(35_000),
            qdelay_old: us_to_ticks(35_000),
            ..Default::default()
        };
        calculate_probability(&params, &mut v, 100_000);
        let dp = (v.prob - MAX_PROB / 5) as f64 / MAX_PROB as f64;
        assert!((dp - 0.0025).abs() < 1e-5, "{dp}");
        // Below 10 % the gains halve; below 1 % they are divided by 4 more.
        let mut v = PieVars {
            prob: MAX_PROB / 20,
            qdelay: us_to_ticks(35_000),
            qdelay_old: us_to_ticks(35_000),
            ..Default::default()
        };
        calculate_probability(&params, &mut v, 100_000);
        let dp = (v.prob - MAX_PROB / 20) as f64 / MAX_PROB as f64;
        assert!((dp - 0.00125).abs() < 1e-5, "{dp}");
        // Delay below target lowers p; p never goes negative.
        let mut v = PieVars {
            prob: 1000,
            qdelay: us_to_ticks(1_000),
            qdelay_old: us_to_ticks(1_000),
            ..Default::default()
        };
        calculate_probability(&params, &mut v, 100_000);
        assert_eq!(v.prob, 0);
    }

    #[test]
    fn increases_are_capped_and_high_delay_adds_two_percent() {
        let params = PieParams::default();
        let mut v = PieVars {
            prob: MAX_PROB / 2,
            qdelay: us_to_ticks(200_000),
            qdelay_old: 0,
            ..Default::default()
        };
        calculate_probability(&params, &mut v, 100_000);
        assert_eq!(v.prob - MAX_PROB / 2, (MAX_PROB / 100) * 2);
        let mut v = PieVars {
            prob: MAX_PROB / 2,
            qdelay: us_to_ticks(300_000),
            qdelay_old: us_to_ticks(300_000),
            ..Default::default()
        };
        calculate_probability(&params, &mut v, 100_000);
        assert_eq!(v.prob - MAX_PROB / 2, (MAX_PROB / 100) * 2 + MAX_PROB / 50);
        // p is a u64 with 8 spare bits: it may pass MAX_PROB (the kernel
        // guards only against wrapping the u64), and then saturates there.
        let mut v = PieVars {
            prob: MAX_PROB - 10,
            qdelay: us_to_ticks(300_000),
            qdelay_old: us_to_ticks(300_000),
            ..Default::default()
        };
        calculate_probability(&params, &mut v, 100_000);
        assert_eq!(v.prob, MAX_PROB - 10 + (MAX_PROB / 100) * 2 + MAX_PROB / 50);
        let mut v = PieVars {
            prob: u64::MAX - 10,
            qdelay: us_to_ticks(300_000),
            qdelay_old: us_to_ticks(300_000),
            ..Default::default()
        };
        calculate_probability(&params, &mut v, 100_000);
        assert_eq!(v.prob, MAX_PROB);
    }

    #[test]
    fn drop_early_honours_burst_allowance_and_low_delay() {
        let params = PieParams::default();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut v = PieVars {
            prob: MAX_PROB,
            qdelay: us_to_ticks(100_000),
            ..Default::default()
        };
        assert!(!drop_early(&params, &mut v, 100_000, 1000, 1514, &mut rng));
        v.burst_time = 0;
        assert!(
            !drop_early(&params, &mut v, 3000, 1000, 1514, &mut rng),
            "under 2 MTU"
        );
        // p = 1: the accumulated probability passes 0.85 at once.
        assert!(drop_early(&params, &mut v, 100_000, 1000, 1514, &mut rng));
        // Low delay and p < 20 %: no drops.
        let mut v = PieVars {
            prob: MAX_PROB / 10,
            qdelay: us_to_ticks(5_000),
            burst_time: 0,
            ..Default::default()
        };
        for _ in 0..100 {
            assert!(!drop_early(&params, &mut v, 100_000, 1000, 1514, &mut rng));
        }
    }

    /// De-randomized drops (RFC 8033 5.1): no drop before the accumulated
    /// probability reaches 0.85, i.e. for the first k0 - 1 = ceil(0.85/p) - 1
    /// packets after a drop, then each packet with probability p: the mean
    /// gap is k0 - 1 + 1/p packets.
    #[test]
    fn drops_come_at_rate_p() {
        let params = PieParams::default();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        for p in [0.05, 0.2, 0.5] {
            let mut v = PieVars {
                prob: (MAX_PROB as f64 * p) as u64,
                qdelay: us_to_ticks(20_000),
                burst_time: 0,
                ..Default::default()
            };
            let n = 200_000;
            let mut drops = 0;
            let mut since = 0u32;
            let mut min_gap = u32::MAX;
            for _ in 0..n {
                since += 1;
                if drop_early(&params, &mut v, 100_000, 1000, 1514, &mut rng) {
                    drops += 1;
                    v.accu_prob = 0; // as the qdisc does on a drop
                    min_gap = min_gap.min(since);
                    since = 0;
                }
            }
            let rate = drops as f64 / n as f64;
            let k0 = (0.85 / p).ceil();
            let want = 1.0 / (k0 - 1.0 + 1.0 / p);
            assert!(
                (rate - want).abs() < want * 0.05,
                "p {p}: rate {rate} vs {want}"
            );
            assert!(min_gap as f64 >= (0.85 / p).ceil(), "p {p}: gap {min_gap}");
        }
    }

    #[test]
    fn the_rate_estimator_measures_the_drain_rate() {
        let params = PieParams {
            dq_rate_estimator: true,
            ..Default::default()
        };
        let mut v = PieVars::default();
        // 1000-byte packets leaving every 800 µs (10 Mbit/s) from a deep queue.
        let mut backlog = 100_000u32;
        for i in 0..60u64 {
            backlog -= 1000;
            process_dequeue(&params, &mut v, 1000, Time(0), backlog, Time(i * 800_000));
        }
        // Bytes per tick << 8: 1000 B / 12500 ticks * 256 = 20.48.
        let rate = v.avg_dq_rate as f64 / 256.0 * PSCHED_TICKS_PER_SEC as f64;
        assert!((rate - 1_250_000.0).abs() / 1_250_000.0 < 0.1, "{rate}");
        // Little's law: 40 kB queued at 1.25 MB/s is 32 ms.
        calculate_probability(&params, &mut v, 40_000);
        let ms = v.qdelay as f64 * 64e-6;
        assert!((ms - 32.0).abs() < 4.0, "{ms}");
    }

    #[test]
    fn the_lazy_timer_fires_at_each_due_time() {
        let mut t = PieTimer::default();
        let mut fired = vec![];
        t.run(Time(0), 15, |at| {
            fired.push(at);
            true
        });
        assert!(fired.is_empty(), "first at 500 ms");
        t.run(Time(560_000_000), 15, |at| {
            fired.push(at);
            true
        });
        let ms: Vec<u64> = fired.iter().map(|t| t.0 / 1_000_000).collect();
        assert_eq!(ms, vec![500, 515, 530, 545, 560]);
        // Once nothing changes, the rest of a long gap is skipped.
        let mut n = 0;
        t.run(Time(100_000_000_000), 15, |_| {
            n += 1;
            false
        });
        assert_eq!(n, 1);
        let mut again = vec![];
        t.run(Time(100_020_000_000), 15, |at| {
            again.push(at.0 / 1_000_000);
            true
        });
        // The timer keeps its phase: 575 ms + k * 15 ms.
        assert_eq!(again, vec![100_010]);
    }
}
