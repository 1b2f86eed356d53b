//! Time as the core sees it: nanoseconds on a clock the caller owns.
//!
//! The core never reads a clock. The simulator passes virtual time and the live
//! data plane a monotonic clock; both arrive as a [`Time`]. The kernel's own
//! scheduler clock ticks in "psched ticks" of 64 ns (`PSCHED_SHIFT` = 6); token
//! counts and buffers that iproute2 prints are in those ticks, so the
//! conversions live here too.

use serde::{Deserialize, Serialize};
use std::ops::{Add, AddAssign, Sub};

/// A point in time: nanoseconds since an arbitrary epoch chosen by the caller.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Time(pub u64);

/// A span of time in nanoseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Duration(pub u64);

/// log2 of the length of one psched tick in nanoseconds (kernel `PSCHED_SHIFT`).
pub const PSCHED_SHIFT: u32 = 6;

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(0);
    /// A time later than any the simulation reaches.
    pub const NEVER: Time = Time(u64::MAX);

    /// Nanoseconds since the epoch.
    pub fn as_nanos(self) -> u64 {
        self.0
    }
    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration(0);
    /// From nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        Duration(ns)
    }
    /// From microseconds.
    pub const fn from_micros(us: u64) -> Self {
        Duration(us * 1_000)
    }
    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Duration(ms * 1_000_000)
    }
    /// From seconds.
    pub const fn from_secs(s: u64) -> Self {
        Duration(s * 1_000_000_000)
    }
    /// Nanoseconds.
    pub fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds as a float (for reports, never for scheduling decisions).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

/// Nanoseconds to psched ticks (kernel `PSCHED_NS2TICKS`).
pub fn ns_to_ticks(ns: u64) -> u64 {
    ns >> PSCHED_SHIFT
}

/// Psched ticks to nanoseconds (kernel `PSCHED_TICKS2NS`).
pub fn ticks_to_ns(ticks: u64) -> u64 {
    ticks << PSCHED_SHIFT
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.0))
    }
}
impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Sub<Time> for Time {
    type Output = Duration;
    fn sub(self, earlier: Time) -> Duration {
        self.saturating_since(earlier)
    }
}
impl Add for Duration {
    type Output = Duration;
    fn add(self, d: Duration) -> Duration {
        Duration(self.0.saturating_add(d.0))
    }
}
