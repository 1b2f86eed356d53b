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
/// packets per second, sampled every `2^interval / 4` seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateEstimator {
    /// `interval` exponent, -2..=3 (0.25 s .. 8 s).
    pub interval_log: i8,
    /// EWMA weight exponent.
    pub ewma_log: u8,
    #[serde(skip)]
    last: Option<(Time, u64, u64)>,
    #[serde(skip)]
    avbps: u64, // bits per second << 8
    #[serde(skip)]
    avpps: u64, // packets per second << 8
}

impl RateEstimator {
    /// An estimator sampling every `2^interval_log / 4` s with weight `2^-ewma_log`.
    pub fn new(interval_log: i8, ewma_log: u8) -> Self {
        RateEstimator {
            interval_log,
            ewma_log,
            ..Default::default()
        }
    }

    /// The sampling period.
    pub fn period(&self) -> Duration {
        let quarter = 250_000_000u64;
        Duration(if self.interval_log >= 0 {
            quarter << self.interval_log
        } else {
            quarter >> -self.interval_log
        })
    }

    /// Feed the counters at `now`; samples are taken once per period.
    pub fn update(&mut self, now: Time, stats: &Stats) {
        match self.last {
            None => self.last = Some((now, stats.bytes, stats.packets)),
            Some((t, b, p)) => {
                let period = self.period();
                if now - t < period {
                    return;
                }
                let elapsed = (now - t).0.max(1);
                let bps = ((stats.bytes - b) * 8 * 1_000_000_000 / elapsed) << 8;
                let pps = ((stats.packets - p) * 1_000_000_000 / elapsed) << 8;
                let w = self.ewma_log as u32;
                self.avbps = self.avbps - (self.avbps >> w) + (bps >> w);
                self.avpps = self.avpps - (self.avpps >> w) + (pps >> w);
                self.last = Some((now, stats.bytes, stats.packets));
            }
        }
    }

    /// Current estimate: (bits per second, packets per second).
    pub fn read(&self) -> (u64, u64) {
        (self.avbps >> 8, self.avpps >> 8)
    }
}
