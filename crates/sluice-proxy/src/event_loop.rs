//! What a TCP proxy's event loops ([`crate::reactor`]) and a UDP proxy's
//! ([`crate::udp`]) share: the threads they run on and the handle that
//! stops them, the wait on an epoll set, and the table of connections or
//! sessions with the time each is to be driven again.
//!
//! A loop is a thread waiting (through `mio`) on one epoll set: its
//! listening socket as token `LISTENER`, a waker as `WAKER` (the
//! toxics changed, a client was handed over, or the proxy stops), a
//! timerfd as `TIMER`, and its connections' or sessions' sockets from
//! `FIRST` on, each slot of the table (`Slots`) its own tokens. The
//! timerfd is armed for the earliest wake-up any slot asked for, to the
//! nanosecond (epoll's own timeout counts milliseconds); a loop with work
//! left over from its last turn polls without waiting. After each wait
//! the loop reads what its events say, marks the slots whose wake-up is
//! due, and drives each marked slot once, reading the clock for each.
//!
//! A slot's wake-up is where its pipes' next deadlines meet: the loop asks
//! each pipe when it next has something to do after driving it, and keeps
//! the earliest in a set ordered by time. A deadline not after the drive
//! that asked for it (nothing should be due then) is put 1 ms later, so a
//! pipe that answers "now" cannot make the loop spin.
//!
//! Stopping a proxy sets its flag and wakes every loop; each leaves its
//! wait, closes what it holds and ends, and `Handle::stop` joins them.

use crate::conn::now;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use sluice_core::time::{Duration, Time};
use std::collections::BTreeSet;
use std::io::{self, ErrorKind};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

/// The listening socket's token.
pub(crate) const LISTENER: Token = Token(0);
/// The waker's token.
pub(crate) const WAKER: Token = Token(1);
/// The timerfd's token.
pub(crate) const TIMER: Token = Token(2);
/// The first token of the slots' sockets.
pub(crate) const FIRST: usize = 3;

/// How much later than the drive that asked for it a wake-up not after
/// it is taken.
const RESPITE: Duration = Duration(1_000_000);

/// Let the process open as many descriptors as its hard limit allows (a
/// proxy holds two per connection; many systems start programs with a soft
/// limit of 1024), once. Go's runtime does the same as it starts, so
/// Toxiproxy holds as many connections as the system lets it.
fn raise_nofile() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid pointers to an rlimit.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0
                && lim.rlim_cur < lim.rlim_max
                && lim.rlim_max != libc::RLIM_INFINITY
            {
                lim.rlim_cur = lim.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
        }
    });
}

/// The running event loops of a proxy, as the proxy holds them; dropping
/// it stops them without waiting.
pub(crate) struct Handle {
    wakers: Vec<Arc<Waker>>,
    stop: Arc<AtomicBool>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Handle {
    /// Run each of `loops` (with its waker) by `run` on a thread named
    /// `name`; they stop when `stop` is set. If a thread cannot be
    /// started, those already running are stopped.
    pub(crate) fn start<L: Send + 'static>(
        name: &str,
        loops: Vec<(Arc<Waker>, L)>,
        stop: Arc<AtomicBool>,
        run: fn(L),
    ) -> io::Result<Handle> {
        raise_nofile();
        let mut handle = Handle {
            wakers: loops.iter().map(|(w, _)| w.clone()).collect(),
            stop,
            threads: Vec::new(),
        };
        for (_, l) in loops {
            let t = thread::Builder::new()
                .name(name.into())
                .spawn(move || run(l))?;
            handle.threads.push(t);
        }
        Ok(handle)
    }

    /// The toxics changed: every connection picks them up at once.
    pub fn wake(&self) {
        for w in &self.wakers {
            let _ = w.wake();
        }
    }

    /// Close every connection and the listening socket, and wait until
    /// they are closed.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
    }
}

/// A timerfd in an event loop's epoll set, set to one time at a time (to
/// the nanosecond: epoll's own timeout counts milliseconds).
struct Timer {
    fd: OwnedFd,
    /// What it is set to.
    armed: Option<Time>,
}

impl Timer {
    /// A timer reported to `registry` as `token`'s readable events.
    fn new(registry: &mio::Registry, token: Token) -> io::Result<Timer> {
        // SAFETY: timerfd_create returns a new descriptor (or -1), owned here.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a descriptor just opened and owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)?;
        Ok(Timer { fd, armed: None })
    }

    /// Fire at `want` (a time past fires at once), or never (`None`).
    fn set(&mut self, want: Option<Time>) {
        if want == self.armed {
            return;
        }
        self.armed = want;
        // Relative to now; a time already past fires at once (1 ns).
        let ns = want.map_or(0, |w| w.0.saturating_sub(now().0).max(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: a timerfd and a valid itimerspec; zero disarms.
        unsafe {
            libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut());
        }
    }

    /// It fired: take the event (the next setting may fire again).
    fn clear(&mut self) {
        let mut n = [0u8; 8];
        // SAFETY: reading 8 bytes into an 8-byte buffer.
        unsafe {
            libc::read(self.fd.as_raw_fd(), n.as_mut_ptr().cast(), 8);
        }
        self.armed = None;
    }
}

/// A loop's epoll set with its waker and timer, and its proxy's stop flag.
pub(crate) struct Poller {
    poll: Poll,
    timer: Timer,
    stop: Arc<AtomicBool>,
}

impl Poller {
    /// A loop stopped through `stop`, and the waker that wakes it.
    pub(crate) fn new(stop: &Arc<AtomicBool>) -> io::Result<(Poller, Arc<Waker>)> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let timer = Timer::new(poll.registry(), TIMER)?;
        let stop = stop.clone();
        Ok((Poller { poll, timer, stop }, waker))
    }

    /// Where the loop's sockets are registered.
    pub(crate) fn registry(&self) -> &mio::Registry {
        self.poll.registry()
    }

    /// Wait for `events` until `wake_at` at the latest (not at all if
    /// `busy`); false once the proxy stops (or epoll fails). The timer's
    /// own event is taken here.
    pub(crate) fn wait(&mut self, events: &mut Events, wake_at: Option<Time>, busy: bool) -> bool {
        self.timer.set(wake_at);
        let timeout = busy.then_some(std::time::Duration::ZERO);
        if let Err(e) = self.poll.poll(events, timeout) {
            if e.kind() != ErrorKind::Interrupted {
                return false;
            }
        }
        if self.stop.load(Ordering::SeqCst) {
            return false;
        }
        if events.iter().any(|ev| ev.token() == TIMER) {
            self.timer.clear();
        }
        true
    }
}

/// A loop's connections (or sessions) by slot, the slot naming their
/// sockets' tokens, with when each is to be driven again.
pub(crate) struct Slots<T> {
    items: Vec<Option<T>>,
    /// The empty slots.
    free: Vec<usize>,
    /// Wake-ups: (when, slot).
    wakeups: BTreeSet<(Time, usize)>,
    /// Each slot's wake-up, as in `wakeups`.
    wake: Vec<Option<Time>>,
}

impl<T> Slots<T> {
    pub(crate) fn new() -> Slots<T> {
        Slots {
            items: Vec::new(),
            free: Vec::new(),
            wakeups: BTreeSet::new(),
            wake: Vec::new(),
        }
    }

    /// The slot the next [`Slots::insert`] takes (its sockets are
    /// registered under its tokens first).
    pub(crate) fn vacant(&self) -> usize {
        self.free.last().copied().unwrap_or(self.items.len())
    }

    /// Take `item` into the slot [`Slots::vacant`] named.
    pub(crate) fn insert(&mut self, item: T) -> usize {
        match self.free.pop() {
            Some(slot) => {
                self.items[slot] = Some(item);
                slot
            }
            None => {
                self.items.push(Some(item));
                self.wake.push(None);
                self.items.len() - 1
            }
        }
    }

    pub(crate) fn get_mut(&mut self, slot: usize) -> Option<&mut T> {
        self.items.get_mut(slot)?.as_mut()
    }

    /// Take the item of `slot` out while it is driven; the slot stays
    /// its own until [`Slots::put`] or [`Slots::remove`].
    pub(crate) fn take(&mut self, slot: usize) -> Option<T> {
        self.items.get_mut(slot)?.take()
    }

    /// Put back what [`Slots::take`] took.
    pub(crate) fn put(&mut self, slot: usize, item: T) {
        self.items[slot] = Some(item);
    }

    /// End `slot`: its item (if not taken) and its wake-up go, the slot is
    /// free.
    pub(crate) fn remove(&mut self, slot: usize) -> Option<T> {
        if let Some(old) = self.wake.get_mut(slot).and_then(Option::take) {
            self.wakeups.remove(&(old, slot));
        }
        let item = self.items.get_mut(slot)?.take();
        self.free.push(slot);
        item
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut T)> {
        let items = self.items.iter_mut().enumerate();
        items.filter_map(|(slot, item)| Some((slot, item.as_mut()?)))
    }

    /// The earliest wake-up.
    pub(crate) fn next_wakeup(&self) -> Option<Time> {
        self.wakeups.first().map(|(w, _)| *w)
    }

    /// Drive `slot` again at `at` (`None`: only for an event), as its
    /// drive at `t` asked; a time not after `t` is taken [`RESPITE`] later.
    pub(crate) fn wake_at(&mut self, slot: usize, at: Option<Time>, t: Time) {
        let at = at.map(|a| if a <= t { t + RESPITE } else { a });
        let Some(old) = self.wake.get_mut(slot) else {
            return;
        };
        if *old == at {
            return;
        }
        if let Some(o) = std::mem::replace(old, at) {
            self.wakeups.remove(&(o, slot));
        }
        if let Some(a) = at {
            self.wakeups.insert((a, slot));
        }
    }

    /// The slots whose wake-up is due at `t` go to `dirty`.
    pub(crate) fn due(&mut self, t: Time, dirty: &mut Vec<usize>) {
        while let Some(&(w, slot)) = self.wakeups.first() {
            if w > t {
                break;
            }
            self.wakeups.pop_first();
            self.wake[slot] = None;
            dirty.push(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused_and_wakeups_follow_them() {
        let mut s: Slots<&str> = Slots::new();
        assert_eq!(s.vacant(), 0);
        assert_eq!(s.insert("a"), 0);
        assert_eq!(s.insert("b"), 1);
        s.wake_at(0, Some(Time(50)), Time(10));
        // Not after the drive: a respite later.
        s.wake_at(1, Some(Time(10)), Time(10));
        assert_eq!(s.next_wakeup(), Some(Time(50)));
        let mut dirty = Vec::new();
        s.due(Time(49), &mut dirty);
        assert!(dirty.is_empty());
        s.due(Time(50), &mut dirty);
        assert_eq!(dirty, [0]);
        assert_eq!(s.next_wakeup(), Some(Time(10 + RESPITE.0)));
        assert_eq!(s.remove(1), Some("b"));
        assert_eq!(s.next_wakeup(), None);
        assert_eq!(s.vacant(), 1);
        assert_eq!(s.insert("c"), 1);
        let all: Vec<_> = s.iter_mut().map(|(slot, x)| (slot, *x)).collect();
        assert_eq!(all, [(0, "a"), (1, "c")]);
    }
}
