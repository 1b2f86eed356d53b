//! Statistics, kept in one place.
//!
//! Every qdisc is wrapped in a [`crate::qdisc::QdiscNode`] whose enqueue and
//! dequeue update these counters, so no qdisc can forget one. The identities
//! (as in ns-3): packets offered = sent + dropped + backlog (+ stolen), at
//! every node; dropped counts the offered packets refused plus queued packets
//! shed later (by head-drop, AQM or a child's dequeue-time drop).

use crate::time::{Duration, Time};
use serde::{Deserialize, Serialize};

/// The kernel's basic and queue statistics for one qdisc or class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Bytes sent (dequeued).
    pub bytes: u64,
    /// Packets sent (dequeued).
    pub packets: u64,
    /// Packets dropped.
    pub drops: u64,
    /// Times the qdisc held a packet back for lack of tokens or credit.
    pub overlimits: u64,
    /// Packets handed back by the driver (always 0: sluice has no driver).
    pub requeues: u64,
    /// Packets queued now.
    pub qlen: u32,
    /// Bytes queued now.
    pub backlog: u64,
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The queue was full (`limit`).
    QueueFull,
    /// A classifier action dropped it (`police ... drop`, `action drop`).
    Action,
    /// No class matched and there is nowhere to put it.
    Unclassified,
    /// An active queue manager (CoDel, RED, PIE) chose it.
    Aqm,
    /// Taken by an action without counting as a drop (kernel `__NET_XMIT_STOLEN`).
    Stolen,
    /// The qdisc cannot queue (noop).
    Noop,
}

impl DropReason {
    /// Does the kernel count this in `drops`? (Stolen packets are not counted.)
    pub fn counts(self) -> bool {
        self != DropReason::Stolen
    }
}

/// The kernel's rate estimator (`gen_estimator.c`): an EWMA of bytes and
/// packets per second, sampled every `2^(interval + 2) / 4` seconds (250 ms
/// for interval -2 up to 8 s for 3).
///
/// The kernel samples on a timer; sluice has none, so the samples are
/// taken late but exactly: whenever the counters are about to change (a
/// packet leaves the qdisc, a policer sees one) and when the estimate is
/// read, [`RateEstimator::advance`] first takes every sample whose time has
/// come, with the counters as they stood then (the first gets what was
/// counted since the last one, the rest nothing). The arithmetic is the
/// timer's: byte and packet rates scaled by 256, each sample moving the
/// average by `(sample >> ewma_log) - (average >> ewma_log)` in wrapping
/// 64-bit integers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateEstimator {
    /// `interval` exponent, -2..=3 (0.25 s .. 8 s).
    pub interval_log: i8,
    /// EWMA weight exponent.
    pub ewma_log: u8,
    /// When the next sample is due (`next_jiffies`); `None` until started.
    #[serde(skip)]
    next: Option<Time>,
    #[serde(skip)]
    last_bytes: u64,
    #[serde(skip)]
    last_packets: u64,
    /// Bytes per second << 8.
    #[serde(skip)]
    avbps: u64,
    /// Packets per second << 8.
    #[serde(skip)]
    avpps: u64,
}

/// Idle samples taken at most in one go (a year of 250 ms periods is
/// 126 M): by then an average of ewma_log up to 16 has decayed by e^-64
/// to its floor; the decay of larger ones is cut short there.
const MAX_IDLE_SAMPLES: u64 = 1 << 22;

impl RateEstimator {
    /// An estimator sampling every `2^(interval_log + 2) / 4` s with weight
    /// `2^-ewma_log`, not started.
    pub fn new(interval_log: i8, ewma_log: u8) -> Self {
        RateEstimator {
            interval_log,
            ewma_log,
            ..Default::default()
        }
    }

    /// `intvl_log`: the period is 250 ms << this.
    fn intvl_log(&self) -> u32 {
        (self.interval_log.clamp(-2, 3) + 2) as u32
    }

    /// The sampling period.
    pub fn period(&self) -> Duration {
        Duration(250_000_000u64 << self.intvl_log())
    }

    /// Start at `now` from counters `stats` (`gen_new_estimator`): the
    /// first sample is a period later.
    pub fn start(&mut self, now: Time, stats: &Stats) {
        self.next = Some(now + self.period());
        self.last_bytes = stats.bytes;
        self.last_packets = stats.packets;
    }

    /// This estimator taking the place of `old` at `now`, on counters
    /// `stats` (`gen_replace_estimator`: the average carries over).
    pub fn replacing(mut self, old: Option<&RateEstimator>, now: Time, stats: &Stats) -> Self {
        self.start(now, stats);
        if let Some(o) = old {
            self.avbps = o.avbps;
            self.avpps = o.avpps;
        }
        self
    }

    /// Take the samples due up to `now`, the counters having stood at
    /// `stats` since the last call (an estimator not yet started starts).
    pub fn advance(&mut self, now: Time, stats: &Stats) {
        let Some(mut next) = self.next else {
            self.start(now, stats);
            return;
        };
        let (il, w) = (self.intvl_log(), self.ewma_log as u32 & 63);
        let period = self.period();
        let mut idle = 0u64;
        while now >= next {
            let db = stats.bytes.wrapping_sub(self.last_bytes);
            let dp = stats.packets.wrapping_sub(self.last_packets);
            let brate = db.wrapping_shl(10 - il);
            let prate = dp.wrapping_shl(10 - il);
            let bstep = (brate >> w).wrapping_sub(self.avbps >> w);
            let pstep = (prate >> w).wrapping_sub(self.avpps >> w);
            self.avbps = self.avbps.wrapping_add(bstep);
            self.avpps = self.avpps.wrapping_add(pstep);
            self.last_bytes = stats.bytes;
            self.last_packets = stats.packets;
            next += period;
            let settled = db == 0 && dp == 0 && bstep == 0 && pstep == 0;
            if settled || idle >= MAX_IDLE_SAMPLES {
                // Nothing counted and the averages at rest: nothing changes
                // until the counters do, so skip to the first sample after `now`.
                if now >= next {
                    let missed = (now - next).0 / period.0 + 1;
                    next += Duration(missed.saturating_mul(period.0));
                }
                break;
            }
            idle += 1;
        }
        self.next = Some(next);
    }

    /// When the next sample is due (`None` before the start).
    pub fn next_due(&self) -> Option<Time> {
        self.next
    }

    /// The estimate as of the last sample: (bits per second, packets per
    /// second), as `gen_estimator_read` (bytes) times 8 for the bits.
    pub fn read(&self) -> (u64, u64) {
        ((self.avbps >> 8).wrapping_mul(8), self.avpps >> 8)
    }

    /// The estimate at `now` with the counters at `stats` (the samples due
    /// by then taken, on a copy).
    pub fn read_at(&self, now: Time, stats: &Stats) -> (u64, u64) {
        let mut e = *self;
        e.advance(now, stats);
        e.read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn periods_run_from_250ms_to_8s() {
        // gen_new_estimator: "-2 : 250ms, -1 : 500ms, 0 : 1 sec ... 3 : 8 sec".
        let p = |i| RateEstimator::new(i, 2).period().0;
        assert_eq!(
            [p(-2), p(-1), p(0), p(1), p(2), p(3)],
            [
                250_000_000,
                500_000_000,
                1_000_000_000,
                2_000_000_000,
                4_000_000_000,
                8_000_000_000
            ]
        );
    }

    /// The kernel's estimator as written: a timer at every period reads
    /// the counters and moves the averages (est_timer).
    fn timer_model(il: i8, w: u32, arrivals: &[(u64, u64)], until: u64) -> (u64, u64) {
        let intvl = (il + 2) as u32;
        let period = 250_000_000u64 << intvl;
        let (mut avbps, mut avpps, mut last_b, mut last_p) = (0u64, 0u64, 0u64, 0u64);
        let (mut b, mut p) = (0u64, 0u64);
        let mut next = period;
        let mut i = 0;
        while next <= until {
            // Packets counted strictly before the timer fires.
            while i < arrivals.len() && arrivals[i].0 < next {
                b += arrivals[i].1;
                p += 1;
                i += 1;
            }
            let brate = (b - last_b) << (10 - intvl);
            let prate = (p - last_p) << (10 - intvl);
            avbps = avbps.wrapping_add((brate >> w).wrapping_sub(avbps >> w));
            avpps = avpps.wrapping_add((prate >> w).wrapping_sub(avpps >> w));
            last_b = b;
            last_p = p;
            next += period;
        }
        ((avbps >> 8) * 8, avpps >> 8)
    }

    /// Counting packets one by one, sampling lazily as the qdisc node does.
    fn lazy(il: i8, w: u8, arrivals: &[(u64, u64)], until: u64) -> (u64, u64) {
        let mut e = RateEstimator::new(il, w);
        e.start(Time(0), &Stats::default());
        let mut s = Stats::default();
        for &(t, len) in arrivals {
            e.advance(Time(t), &s);
            s.bytes += len;
            s.packets += 1;
        }
        e.read_at(Time(until), &s)
    }

    #[test]
    fn a_steady_rate_converges_to_it() {
        // 1000 bytes every 250 ms for a minute: 32 000 bit/s, 4 packets/s.
        let arrivals: Vec<(u64, u64)> = (0..240).map(|i| (i * 250_000_000 + 1, 1000)).collect();
        let (bps, pps) = lazy(-2, 2, &arrivals, 60_000_000_000);
        assert!((31_900..=32_000).contains(&bps), "{bps}");
        assert_eq!(pps, 4);
        // Idle for a minute more, the average decays to nothing.
        assert_eq!(lazy(-2, 2, &arrivals, 120_000_000_000), (0, 0));
    }

    proptest! {
        /// Sampling lazily gives what the kernel's timer gives, whatever
        /// the arrival times and sizes, for every interval and weight.
        #[test]
        fn lazy_sampling_is_the_timers(
            il in -2i8..=3,
            w in 1u8..=8,
            gaps in proptest::collection::vec((0u64..3_000_000_000, 1u64..65_536), 0..200),
            tail in 0u64..20_000_000_000,
        ) {
            let mut t = 0;
            let arrivals: Vec<(u64, u64)> = gaps.iter().map(|&(g, len)| { t += g; (t, len) }).collect();
            let until = t + tail;
            prop_assert_eq!(lazy(il, w, &arrivals, until), timer_model(il, w as u32, &arrivals, until));
        }
    }
}
