//! Keeping the CPUs out of their idle halt while a link carries traffic.
//!
//! A packet's time in the daemon is set by how fast the daemon wakes: for a
//! timer (netem's delay, a shaper's next token) or for a packet written into
//! a TUN device. On bare metal that is the scheduler's wake-up plus the exit
//! from a shallow C-state, tens of microseconds. In a virtual machine an
//! idle vCPU executes `HLT`, the hypervisor takes the vCPU's thread off its
//! host CPU, and the interrupt that should wake the daemon waits until the
//! host runs that thread again. On this project's Firecracker VM (no guest
//! cpuidle driver), timerfd wake-ups 2 ms apart came p50 37 µs, p99 1.65 ms,
//! p99.9 5.2 ms late; the same timer on a CPU that never idled came
//! 9 / 25 / 319 µs late. One echo in a hundred meeting such a halt is what
//! `netem delay 50ms` showed at p99 (+2 ms), while the other 99 were within
//! a few microseconds.
//!
//! Linux's own cure is the guest "haltpoll" cpuidle driver, which polls a
//! while before halting; kernels built without it (this one) and hosts that
//! do not offer it leave the halt. So the daemon polls for itself: it pins
//! itself to the CPU it runs on and starts one thread on that CPU at
//! `SCHED_IDLE` — the policy that runs only when nothing else on that CPU
//! wants to, so it takes no time from any program, the daemon included (a
//! waking daemon preempts it at once, with no halt to leave). One CPU, not
//! all: measured here with 2 ms timers, a poller beside the timer's thread
//! on its CPU gave p99 26 µs, p99.9 49 µs, max 154 µs; pollers on both
//! vCPUs only p99 41 µs, p99.9 1 ms (two always-busy vCPUs compete for the
//! host); none, p99 142 µs, p99.9 1.5 ms. The poller spins while the link
//! has carried anything within [`LINGER_NS`] or has a deadline pending (at
//! most [`HORIZON_NS`] ahead), and sleeps otherwise, so an idle link costs
//! nothing. The price is power and the host's CPU time while traffic flows,
//! which is why it is on by default only in a virtual machine (`auto`: the
//! CPU's `hypervisor` flag) and can be turned on or off (`--keep-awake`).

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// How long the CPUs are kept awake after the link last carried a packet.
pub const LINGER_NS: u64 = 500_000_000;

/// The farthest pending deadline that keeps the CPUs awake until it.
pub const HORIZON_NS: u64 = 5_000_000_000;

/// Whether to keep the CPUs awake (`--keep-awake`).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// In a virtual machine only.
    #[default]
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "auto" => Ok(Mode::Auto),
            "on" => Ok(Mode::On),
            "off" => Ok(Mode::Off),
            _ => Err(format!("{s:?}: expected auto, on or off")),
        }
    }
}

impl Mode {
    /// Whether this mode polls on the machine it runs on.
    pub fn wanted(self) -> bool {
        match self {
            Mode::On => true,
            Mode::Off => false,
            Mode::Auto => in_virtual_machine(),
        }
    }
}

/// Whether the CPU says it runs under a hypervisor (the `hypervisor` flag).
pub fn in_virtual_machine() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| {
        s.lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|w| w == "hypervisor"))
    })
}

struct Shared {
    /// Spin until this monotonic time (ns).
    until: AtomicU64,
    stop: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

/// The polling thread; stopped when dropped.
pub struct KeepAwake {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl KeepAwake {
    /// Pin the calling thread to the CPU it is on and start a sleeping
    /// poller there. Call before raising the caller's own priority: the
    /// poller sets its own policy, but a thread inherits its creator's.
    pub fn start() -> std::io::Result<KeepAwake> {
        use nix::sched::{sched_setaffinity, CpuSet};
        use nix::unistd::Pid;
        // SAFETY: sched_getcpu has no arguments and no side effects.
        let cpu = unsafe { nix::libc::sched_getcpu() };
        let cpu = usize::try_from(cpu).map_err(|_| std::io::Error::last_os_error())?;
        let mut one = CpuSet::new();
        one.set(cpu).map_err(std::io::Error::from)?;
        sched_setaffinity(Pid::from_raw(0), &one).map_err(std::io::Error::from)?;
        let shared = Arc::new(Shared {
            until: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        let sh = shared.clone();
        // It inherits the affinity just set.
        let t = std::thread::Builder::new()
            .name(format!("keep-awake-{cpu}"))
            .spawn(move || {
                let param = nix::libc::sched_param { sched_priority: 0 };
                // SAFETY: sched_setscheduler on the calling thread with a valid parameter.
                if unsafe { nix::libc::sched_setscheduler(0, nix::libc::SCHED_IDLE, &param) } == 0 {
                    poll(&sh);
                }
            })?;
        Ok(KeepAwake {
            shared,
            thread: Some(t),
        })
    }

    /// The link did something at `now` and has its next deadline at `next`:
    /// keep the CPUs awake for [`LINGER_NS`], or until `next` if that is
    /// later and within [`HORIZON_NS`].
    #[inline]
    pub fn touch(&self, now: u64, next: Option<u64>) {
        let mut until = now + LINGER_NS;
        if let Some(t) = next.filter(|&t| t < now + HORIZON_NS) {
            until = until.max(t + 1_000_000);
        }
        let before = self.shared.until.fetch_max(until, Ordering::Relaxed);
        if before <= now {
            // The poller may be asleep.
            let _g = self.shared.lock.lock();
            self.shared.wake.notify_all();
        }
    }
}

impl Drop for KeepAwake {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        {
            let _g = self.shared.lock.lock();
            self.shared.wake.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A poller's life: spin while wanted, sleep on the condition variable otherwise.
fn poll(sh: &Shared) {
    while !sh.stop.load(Ordering::Relaxed) {
        let now = crate::clock::now().0;
        if now < sh.until.load(Ordering::Relaxed) {
            for _ in 0..256 {
                std::hint::spin_loop();
            }
            continue;
        }
        let g = sh.lock.lock().unwrap_or_else(|e| e.into_inner());
        // Re-check under the lock: a touch between the load and here has notified already.
        if sh.until.load(Ordering::Relaxed) <= crate::clock::now().0
            && !sh.stop.load(Ordering::Relaxed)
        {
            let _ = sh
                .wake
                .wait_timeout(g, std::time::Duration::from_secs(1))
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPU time (utime + stime, clock ticks) of this process's poller threads, and how many there are.
    fn pollers() -> (u64, usize) {
        let mut ticks = 0;
        let mut n = 0;
        for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if !comm.starts_with("keep-awake-") {
                continue;
            }
            n += 1;
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            // Fields after the parenthesized name: state is field 3, utime 14, stime 15.
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let f: Vec<&str> = rest.split_whitespace().collect();
            ticks += f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
        }
        (ticks, n)
    }

    #[test]
    fn modes_parse_and_auto_follows_the_hypervisor_flag() {
        assert_eq!("on".parse::<Mode>(), Ok(Mode::On));
        assert_eq!("off".parse::<Mode>(), Ok(Mode::Off));
        assert!("yes".parse::<Mode>().is_err());
        assert!(Mode::On.wanted() && !Mode::Off.wanted());
        assert_eq!(Mode::Auto.wanted(), in_virtual_machine());
    }

    #[test]
    fn one_poller_beside_the_pinned_caller_that_sleeps_once_the_link_is_quiet_and_stops_on_drop() {
        // In a thread of its own: start() pins its caller.
        std::thread::spawn(|| {
            let k = KeepAwake::start().unwrap();
            let mask = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
            let pinned = (0..nix::sched::CpuSet::count())
                .filter(|&c| mask.is_set(c).unwrap_or(false))
                .count();
            assert_eq!(pinned, 1, "the caller is pinned to one CPU");
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert_eq!(pollers().1, 1);
            // Activity, then quiet: after LINGER the pollers must cost nothing.
            k.touch(crate::clock::now().0, None);
            std::thread::sleep(std::time::Duration::from_nanos(LINGER_NS + 100_000_000));
            let before = pollers().0;
            std::thread::sleep(std::time::Duration::from_millis(500));
            let spent = pollers().0 - before;
            assert!(spent <= 1, "a sleeping poller used {spent} ticks in 0.5 s");
            drop(k);
            assert_eq!(pollers().1, 0);
        })
        .join()
        .unwrap();
    }
}
