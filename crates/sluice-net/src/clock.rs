//! The daemon's clock and timer.
//!
//! Time is `CLOCK_MONOTONIC` in nanoseconds, passed into the plane as a
//! sluice-core [`Time`]. The timer is a timerfd armed at an absolute
//! deadline and waited for with epoll; because a wake-up from a timerfd can
//! come tens to hundreds of microseconds late on a loaded machine, the timer
//! is armed [`SPIN`] early and the rest is a busy-wait (polling the other
//! files meanwhile), so packets leave within microseconds of their time.
//!
//! That holds only if the daemon gets a CPU when its timer fires. On a busy
//! machine an ordinary process waits for its turn, milliseconds at times:
//! `netem delay 50ms` measured 50.1/53.5/55.1 ms at p50/p90/p99 on this
//! project's 2-core VM with a load average of 9, and shapers lost the
//! tokens they could not spend. The kernel's own qdiscs run from timers
//! and softirqs, ahead of every process; [`prefer_cpu`] gives the daemon the
//! nearest userspace equivalent, the lowest real-time priority (`SCHED_FIFO`
//! 1, not inherited by children): the same run gave 50.1/50.1/50.3 ms. The
//! kernel's real-time throttling (`sched_rt_runtime_us`, 95 % of each second
//! by default) keeps a saturated daemon from starving the machine; where
//! throttling is off, or the call is not permitted, the daemon settles for
//! `nice -10`.

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use nix::time::{clock_gettime, ClockId as Clk};
use sluice_core::time::{Duration, Time};
use std::os::fd::{AsFd, BorrowedFd};

/// How long before a deadline the timer fires and the loop starts to spin.
pub const SPIN: Duration = Duration(50_000);

/// Real-time priority of the daemon (the lowest).
pub const RT_PRIORITY: i32 = 1;

/// Ask to be scheduled ahead of ordinary processes (see the module's
/// text); returns what the daemon got, for its log.
pub fn prefer_cpu() -> &'static str {
    prefer_cpu_at(RT_PRIORITY)
}

/// [`prefer_cpu`] at real-time priority `priority` (1-99; a thread of
/// higher priority preempts one of lower).
pub fn prefer_cpu_at(priority: i32) -> &'static str {
    use nix::libc;
    let throttled = std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .is_some_and(|us| us >= 0);
    if throttled {
        let param = libc::sched_param {
            sched_priority: priority,
        };
        // SAFETY: sched_setscheduler on the calling process with a valid parameter.
        let r = unsafe {
            libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param)
        };
        if r == 0 {
            return "SCHED_FIFO";
        }
    }
    // SAFETY: setpriority on the calling process.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -10) } == 0 {
        "nice -10"
    } else {
        "the default scheduling"
    }
}

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
