//! The daemon's clock and timer.
//!
//! Time is `CLOCK_MONOTONIC` in nanoseconds, passed into the plane as a
//! sluice-core [`Time`]. The timer is a timerfd armed at an absolute
//! deadline and waited for with epoll; because a wake-up from a timerfd can
//! come tens to hundreds of microseconds late on a loaded machine, the timer
//! is armed [`SPIN`] early and the rest is a busy-wait (polling the other
//! files meanwhile), so packets leave within microseconds of their time.

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::{clock_gettime, ClockId as Clk};
use sluice_core::time::{Duration, Time};
use std::os::fd::{AsFd, BorrowedFd};

/// How long before a deadline the timer fires and the loop starts to spin.
pub const SPIN: Duration = Duration(50_000);

/// The monotonic clock now.
pub fn now() -> Time {
    let ts = clock_gettime(Clk::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always available");
    Time(ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64)
}

/// A one-shot timer on the monotonic clock.
pub struct Timer {
    fd: TimerFd,
    armed: Option<Time>,
}

impl Timer {
    /// A disarmed timer.
    pub fn new() -> std::io::Result<Timer> {
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        Ok(Timer { fd, armed: None })
    }

    /// Fire at `at` (absolute), replacing any earlier setting.
    pub fn arm(&mut self, at: Time) -> std::io::Result<()> {
        if self.armed == Some(at) {
            return Ok(());
        }
        let ts = TimeSpec::new((at.0 / 1_000_000_000) as _, (at.0 % 1_000_000_000) as _);
        self.fd.set(
            Expiration::OneShot(ts),
            TimerSetTimeFlags::TFD_TIMER_ABSTIME,
        )?;
        self.armed = Some(at);
        Ok(())
    }

    /// Consume an expiry (after epoll said the timer is readable).
    pub fn ack(&mut self) {
        let mut buf = [0u8; 8];
        let _ = nix::unistd::read(&self.fd, &mut buf);
        self.armed = None;
    }
}

impl AsFd for Timer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
