//! The event loops of a TCP proxy: a few threads (one per core, at most
//! four: [`loops_per_proxy`]) carry all of its connections, whatever their
//! number. The first loop accepts the clients and hands them to the loops
//! in turn; a connection then stays on its loop.
//!
//! Each loop waits on one epoll set (through `mio`) for its connections'
//! two sockets each (and the first, the listening socket), a waker (a
//! client handed over, the toxics changed, or the proxy stops) and a
//! timerfd armed for the earliest wake-up any of its connections' pipes
//! asked for. Sockets are non-blocking and their events
//! edge-triggered, so each connection remembers which of its sockets are
//! readable and writable until a call says `WouldBlock`.
//!
//! A connection is driven (`Reactor::drive`) whenever one of its
//! sockets has an event, its timer is due or the toxics changed. Each
//! direction then, in a loop while something moves: reads its source into
//! its [`Pipe`] while the pipe has room and the bytes it could not yet
//! write are under [`WINDOW`]; polls the pipe at the monotonic clock; and
//! writes what the pipe let out. A direction that stops reading leaves the
//! bytes in the kernel's socket buffers, which fill, and the sender is
//! slowed by TCP's flow control exactly as by a slow network. A pipe's
//! signal (end, close, reset) takes effect once what came before it was
//! written. A connection that used its share of reads while its source is
//! still readable is driven again after the others' events, so one bulk
//! stream cannot starve the rest.
//!
//! The upstream side is connected without blocking: each address the
//! upstream resolves to in turn, each given [`CONNECT_TIMEOUT`]; the
//! client's bytes wait in its socket meanwhile, and if none answers the
//! client's connection is closed. The proxy's lock is never taken here
//! (stopping a proxy waits for this thread while holding it): the toxics
//! come from the copy published at each change.
//!
//! The listening socket is made with the system's backlog
//! (`/proc/sys/net/core/somaxconn`) rather than std's 128, so that a burst
//! of connections waits in the kernel's queue; a SYN that finds even that
//! queue full is dropped by the kernel and sent again by the client a
//! second later (no reset). The process's soft limit of open files is
//! raised to its hard limit when the first proxy starts, as Go's runtime
//! does for Toxiproxy; should accepting still fail for want of
//! descriptors, the clients wait in the queue and accepting is tried
//! again after 100 ms.

use crate::conn::{fresh_seed, now, Published};
use crate::pipe::{Pipe, Signal, WINDOW};
use crate::toxic::{Stream, Toxic};
use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sluice_core::time::{Duration, Time};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

/// How long an upstream address may take to accept a connection.
pub const CONNECT_TIMEOUT: Duration = Duration(5_000_000_000);
/// How long a resolved upstream name is used before it is resolved again.
const RESOLVED_FOR: Duration = Duration(1_000_000_000);
/// Reads of one direction per drive before the other connections' turn.
const READS_PER_TURN: usize = 16;
/// Bytes read in one call.
const READ_CHUNK: usize = 64 * 1024;
/// Clients accepted in a row before the open connections' turn.
const ACCEPTS_PER_TURN: usize = 1024;
/// After the process ran out of descriptors, when to try accepting again.
const ACCEPT_RETRY: Duration = Duration(100_000_000);

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const TIMER: Token = Token(2);
/// Connection `i`'s client socket is token `FIRST + 2i`, its server's the next.
const FIRST: usize = 3;

/// The backlog of a listening socket: the system's `somaxconn` (the
/// kernel caps any larger value to it), 4096 (its default) if unreadable.
pub fn somaxconn() -> i32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(4096)
}

/// A TCP listening socket on `addr` with the system's backlog (std's
/// `TcpListener::bind` asks for 128), non-blocking.
pub fn listen(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    // As std does: a restarted proxy can bind its port again at once.
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(somaxconn())?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Let the process open as many descriptors as its hard limit allows (a
/// proxy holds two per connection; many systems start programs with a soft
/// limit of 1024), once. Go's runtime does the same as it starts, so
/// Toxiproxy holds as many connections as the system lets it.
pub(crate) fn raise_nofile() {
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
pub(crate) struct Timer {
    fd: OwnedFd,
    /// What it is set to.
    armed: Option<Time>,
}

impl Timer {
    /// A timer reported to `registry` as `token`'s readable events.
    pub(crate) fn new(registry: &mio::Registry, token: Token) -> io::Result<Timer> {
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
    pub(crate) fn set(&mut self, want: Option<Time>) {
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
    pub(crate) fn clear(&mut self) {
        let mut n = [0u8; 8];
        // SAFETY: reading 8 bytes into an 8-byte buffer.
        unsafe {
            libc::read(self.fd.as_raw_fd(), n.as_mut_ptr().cast(), 8);
        }
        self.armed = None;
    }
}

impl Handle {
    /// The handle of loops on `threads`, stopped through `stop` and woken
    /// through `wakers`.
    pub(crate) fn new(
        wakers: Vec<Arc<Waker>>,
        stop: Arc<AtomicBool>,
        threads: Vec<thread::JoinHandle<()>>,
    ) -> Handle {
        Handle {
            wakers,
            stop,
            threads,
        }
    }
}

/// How many event loops carry a TCP proxy's connections: one per core, at
/// most four (one core's loop carries a stream at several Gbit/s; more
/// loops spread many connections' work over the cores).
pub fn loops_per_proxy() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4))
}

/// Start the event loop of a proxy listening on `listener` (non-blocking)
/// and connecting to `upstream`, with its toxics in `published`.
pub(crate) fn spawn(
    listener: std::net::TcpListener,
    upstream: String,
    published: Arc<Published>,
) -> io::Result<Handle> {
    raise_nofile();
    let stop = Arc::new(AtomicBool::new(false));
    let mut listener = Some(TcpListener::from_std(listener));
    let mut reactors = Vec::new();
    let mut wakers = Vec::new();
    let mut inboxes = Vec::new();
    for _ in 0..loops_per_proxy() {
        let poll = Poll::new()?;
        if let Some(l) = &mut listener {
            poll.registry().register(l, LISTENER, Interest::READABLE)?;
        }
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let timer = Timer::new(poll.registry(), TIMER)?;
        let (tx, inbox) = mpsc::channel();
        inboxes.push(tx);
        wakers.push(waker);
        reactors.push(Reactor {
            poll,
            // (The first loop accepts, and hands clients to the others in turn.)
            listener: listener.take(),
            peers: Vec::new(),
            turn: 0,
            inbox,
            upstream: upstream.clone(),
            resolved: None,
            published: published.clone(),
            generation: published.generation.load(Ordering::SeqCst),
            toxics: Vec::new(),
            stop: stop.clone(),
            conns: Vec::new(),
            free: Vec::new(),
            timers: BTreeSet::new(),
            timer,
            accept_at: None,
            ready: VecDeque::new(),
            buf: vec![0; READ_CHUNK],
            scratch: Vec::new(),
        });
    }
    reactors[0].peers = wakers.iter().cloned().zip(inboxes).collect();
    let mut threads = Vec::new();
    for reactor in reactors {
        let t = thread::Builder::new()
            .name("sluice-proxy".into())
            .spawn(move || reactor.run());
        match t {
            Ok(t) => threads.push(t),
            Err(e) => {
                // (The handle's drop stops the loops already started.)
                drop(Handle::new(wakers, stop, threads));
                return Err(e);
            }
        }
    }
    Ok(Handle::new(wakers, stop, threads))
}

/// One direction of a connection.
struct Dir {
    stream: Stream,
    pipe: Pipe,
    /// The source has not ended.
    open: bool,
    /// Bytes the pipe let out that the destination did not take yet.
    out: Vec<u8>,
    /// The pipe's signal, waiting for `out` to be written.
    signal: Option<Signal>,
    /// The signal was acted on: nothing more goes this way.
    over: bool,
    draws: Draws,
}

impl Dir {
    /// The direction `stream` of a connection seeded with `seed`, from
    /// `from` to `to`, through those of `toxics` that act on it.
    fn new(
        stream: Stream,
        from: SocketAddr,
        to: SocketAddr,
        seed: u64,
        toxics: &[Toxic],
        now: Time,
    ) -> Result<Dir, String> {
        let mut draws = Draws::new(stream, seed);
        let on = draws.active(toxics);
        Ok(Dir {
            stream,
            pipe: Pipe::new(&on, from, to, draws.seed, now)?,
            open: true,
            out: Vec::new(),
            signal: None,
            over: false,
            draws,
        })
    }

    /// The toxics of this direction that act on this connection.
    fn active(&mut self, toxics: &[Toxic]) -> Vec<Toxic> {
        self.draws.active(toxics)
    }
}

/// Which toxics act on one direction of a connection (or a UDP session):
/// each is drawn once against its toxicity, and again when it changes,
/// from the direction's own generator.
pub(crate) struct Draws {
    stream: Stream,
    /// The direction's seed: the connection's, told apart by direction.
    pub(crate) seed: u64,
    drawn: HashMap<String, (Toxic, bool)>,
    rng: Xoshiro256PlusPlus,
}

impl Draws {
    /// The draws of direction `stream` of a connection seeded with `seed`.
    pub(crate) fn new(stream: Stream, seed: u64) -> Draws {
        let seed = seed ^ stream as u64;
        Draws {
            stream,
            seed,
            drawn: HashMap::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// The toxics of this direction among `toxics` that act on it.
    pub(crate) fn active(&mut self, toxics: &[Toxic]) -> Vec<Toxic> {
        let mine: Vec<&Toxic> = toxics.iter().filter(|t| t.stream == self.stream).collect();
        self.drawn
            .retain(|name, _| mine.iter().any(|t| &t.name == name));
        let mut on = Vec::new();
        for t in mine {
            let acts = match self.drawn.get(&t.name) {
                Some((seen, acts)) if seen == t => *acts,
                _ => {
                    let acts = self.rng.gen::<f32>() < t.toxicity;
                    self.drawn.insert(t.name.clone(), (t.clone(), acts));
                    acts
                }
            };
            if acts {
                on.push(t.clone());
            }
        }
        on
    }
}

/// The upstream side of a connection while it connects.
struct Connecting {
    /// The addresses not yet tried.
    left: Vec<SocketAddr>,
    /// When the present attempt is given up.
    deadline: Time,
}

/// One proxied connection.
struct Conn {
    /// The client's socket, then the server's.
    socks: [TcpStream; 2],
    /// Which sockets are known readable / writable (until `WouldBlock`).
    readable: [bool; 2],
    writable: [bool; 2],
    connecting: Option<Connecting>,
    seed: u64,
    /// Upstream (client to server), then downstream; once connected.
    dirs: Vec<Dir>,
    /// When the connection is to be driven again, as in the timer set.
    timer: Option<Time>,
    /// In the queue of connections to drive again without an event.
    queued: bool,
}

/// What a drive decided for the connection.
enum Fate {
    Open,
    /// Close both sockets: with a FIN, or a reset (`true`).
    Close(bool),
}

struct Reactor {
    poll: Poll,
    /// The first loop's: it accepts the clients.
    listener: Option<TcpListener>,
    /// The first loop's: every loop (itself first), to hand clients to.
    peers: Vec<(Arc<Waker>, mpsc::Sender<TcpStream>)>,
    /// The peer the next client goes to.
    turn: usize,
    /// Clients the first loop handed to this one.
    inbox: mpsc::Receiver<TcpStream>,
    upstream: String,
    resolved: Option<(Time, Vec<SocketAddr>)>,
    published: Arc<Published>,
    /// The generation of `toxics`.
    generation: u64,
    toxics: Vec<Toxic>,
    stop: Arc<AtomicBool>,
    /// Connections by slot; `free` holds the empty slots.
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Wake-ups: (when, slot).
    timers: BTreeSet<(Time, usize)>,
    timer: Timer,
    /// Accepting paused (out of descriptors) until then.
    accept_at: Option<Time>,
    /// Slots to drive again without waiting for an event.
    ready: VecDeque<usize>,
    /// Bytes read, before they go into a pipe.
    buf: Vec<u8>,
    /// Bytes a pipe let out, before they are written.
    scratch: Vec<u8>,
}

impl Reactor {
    fn run(mut self) {
        self.toxics = self.published_toxics();
        let mut events = Events::with_capacity(1024);
        let mut dirty: Vec<usize> = Vec::new();
        loop {
            self.arm();
            let timeout = (!self.ready.is_empty()).then_some(std::time::Duration::ZERO);
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != ErrorKind::Interrupted {
                    break;
                }
            }
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            let t = now();
            let mut accept = false;
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => accept = true,
                    WAKER => {
                        while let Ok(client) = self.inbox.try_recv() {
                            self.adopt(client, t, &mut dirty);
                        }
                        self.toxics_changed(t, &mut dirty);
                    }
                    TIMER => self.timer.clear(),
                    Token(k) => {
                        let (slot, side) = ((k - FIRST) / 2, (k - FIRST) % 2);
                        if let Some(Some(c)) = self.conns.get_mut(slot) {
                            // An error or a hang-up shows on the next call.
                            let err = ev.is_error();
                            if ev.is_readable() || ev.is_read_closed() || err {
                                c.readable[side] = true;
                            }
                            if ev.is_writable() || ev.is_write_closed() || err {
                                c.writable[side] = true;
                            }
                            dirty.push(slot);
                        }
                    }
                }
            }
            if accept || self.accept_at.is_some_and(|a| a <= t) {
                self.accept(t, &mut dirty);
            }
            while let Some(&(w, slot)) = self.timers.first() {
                if w > t {
                    break;
                }
                self.timers.pop_first();
                if let Some(Some(c)) = self.conns.get_mut(slot) {
                    c.timer = None;
                }
                dirty.push(slot);
            }
            for _ in 0..self.ready.len() {
                if let Some(slot) = self.ready.pop_front() {
                    if let Some(Some(c)) = self.conns.get_mut(slot) {
                        c.queued = false;
                    }
                    dirty.push(slot);
                }
            }
            dirty.sort_unstable();
            dirty.dedup();
            for slot in dirty.drain(..) {
                // (The clock read for each: driving thousands takes a while,
                // and a pipe must not see its bytes arrive earlier than they did.)
                self.drive(slot, now());
            }
        }
        // Stopped: close every connection (FIN both ways) and the listener.
        for c in self.conns.iter().flatten() {
            for s in &c.socks {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    /// The toxics as last published.
    fn published_toxics(&self) -> Vec<Toxic> {
        self.published
            .toxics
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    }

    /// Set the timer to the earliest wake-up (or the accept retry).
    fn arm(&mut self) {
        let first = self.timers.first().map(|(w, _)| *w);
        let want = match (first, self.accept_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.timer.set(want);
    }

    /// A new generation of toxics: every connection's pipes take it.
    fn toxics_changed(&mut self, t: Time, dirty: &mut Vec<usize>) {
        let g = self.published.generation.load(Ordering::SeqCst);
        if g == self.generation {
            return;
        }
        self.generation = g;
        self.toxics = self.published_toxics();
        for (slot, c) in self.conns.iter_mut().enumerate() {
            let Some(c) = c else { continue };
            for d in &mut c.dirs {
                if !d.over {
                    let active = d.active(&self.toxics);
                    // (A change that cannot be built leaves the stages.)
                    let _ = d.pipe.set_toxics(&active, t);
                }
            }
            dirty.push(slot);
        }
    }

    /// The upstream's addresses (a name is resolved again after a while).
    fn upstream_addrs(&mut self, t: Time) -> Vec<SocketAddr> {
        if let Ok(a) = self.upstream.parse::<SocketAddr>() {
            return vec![a];
        }
        match &self.resolved {
            Some((at, addrs)) if t.0.saturating_sub(at.0) < RESOLVED_FOR.0 => addrs.clone(),
            _ => {
                let addrs: Vec<SocketAddr> = self
                    .upstream
                    .to_socket_addrs()
                    .map(|a| a.collect())
                    .unwrap_or_default();
                self.resolved = Some((t, addrs.clone()));
                addrs
            }
        }
    }

    /// Accept the waiting clients (up to [`ACCEPTS_PER_TURN`], the rest
    /// after the open connections' turn), each for the next loop in turn.
    fn accept(&mut self, t: Time, dirty: &mut Vec<usize>) {
        self.accept_at = None;
        for _ in 0..ACCEPTS_PER_TURN {
            let Some(listener) = &self.listener else {
                return;
            };
            let client = match listener.accept() {
                Ok((c, _)) => c,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::ConnectionAborted => continue,
                Err(_) => {
                    // Out of descriptors (EMFILE, ENFILE, ENOBUFS): the
                    // clients wait in the queue; try again shortly.
                    self.accept_at = Some(t + ACCEPT_RETRY);
                    return;
                }
            };
            let turn = self.turn % self.peers.len().max(1);
            self.turn = self.turn.wrapping_add(1);
            match self.peers.get(turn) {
                Some((waker, inbox)) if turn > 0 => {
                    if inbox.send(client).is_ok() {
                        let _ = waker.wake();
                    }
                }
                _ => self.adopt(client, t, dirty),
            }
        }
        // More may be waiting: at once, after the others' turn.
        self.accept_at = Some(t);
    }

    /// Take a client on: start connecting its upstream side.
    fn adopt(&mut self, client: TcpStream, t: Time, dirty: &mut Vec<usize>) {
        let _ = client.set_nodelay(true);
        let mut left = self.upstream_addrs(t);
        left.reverse();
        let Some(server) = connect_next(&mut left) else {
            // Upstream unreachable: the client's connection is closed.
            return;
        };
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let mut c = Conn {
            socks: [client, server],
            readable: [false; 2],
            writable: [false; 2],
            connecting: Some(Connecting {
                left,
                deadline: t + CONNECT_TIMEOUT,
            }),
            seed: fresh_seed(),
            dirs: Vec::new(),
            timer: None,
            queued: false,
        };
        let registry = self.poll.registry();
        let both = Interest::READABLE | Interest::WRITABLE;
        let ok = registry
            .register(&mut c.socks[0], Token(FIRST + 2 * slot), both)
            .and_then(|_| registry.register(&mut c.socks[1], Token(FIRST + 2 * slot + 1), both));
        if ok.is_err() {
            self.free.push(slot);
            return;
        }
        self.conns[slot] = Some(c);
        dirty.push(slot);
    }

    /// Drive connection `slot` at `t`, then set its timer or end it.
    fn drive(&mut self, slot: usize, t: Time) {
        let Some(Some(mut c)) = self.conns.get_mut(slot).map(Option::take) else {
            return;
        };
        let fate = if c.connecting.is_some() {
            self.connect_step(&mut c, slot, t)
        } else {
            self.pump(&mut c, slot, t)
        };
        match fate {
            Fate::Close(reset) => self.close(c, slot, reset),
            Fate::Open => {
                let mut next = c.connecting.as_ref().map(|k| k.deadline);
                for d in c.dirs.iter().filter(|d| !d.over && d.signal.is_none()) {
                    next = match (next, d.pipe.next_wake()) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                // (Nothing is due at `t` after a drive at `t`; were it, a
                // wake-up a little later keeps the loop from spinning.)
                let next = next.map(|n| if n <= t { t + Duration(1_000_000) } else { n });
                if next != c.timer {
                    if let Some(old) = c.timer {
                        self.timers.remove(&(old, slot));
                    }
                    if let Some(n) = next {
                        self.timers.insert((n, slot));
                    }
                    c.timer = next;
                }
                self.conns[slot] = Some(c);
            }
        }
    }

    /// The upstream side is connecting: see whether it is done.
    fn connect_step(&mut self, c: &mut Conn, slot: usize, t: Time) -> Fate {
        let Some(k) = &mut c.connecting else {
            return Fate::Open;
        };
        let s = &c.socks[1];
        let failed = match s.take_error() {
            Ok(Some(_)) | Err(_) => true,
            Ok(None) => match s.peer_addr() {
                Ok(_) => false,
                Err(e) if e.kind() == ErrorKind::NotConnected => {
                    // Still connecting.
                    if t < k.deadline {
                        return Fate::Open;
                    }
                    true
                }
                Err(_) => true,
            },
        };
        if failed {
            // The next address, on a new socket under the same token.
            let Some(mut server) = connect_next(&mut k.left) else {
                return Fate::Close(false);
            };
            k.deadline = t + CONNECT_TIMEOUT;
            let token = Token(FIRST + 2 * slot + 1);
            let both = Interest::READABLE | Interest::WRITABLE;
            if self
                .poll
                .registry()
                .register(&mut server, token, both)
                .is_err()
            {
                return Fate::Close(false);
            }
            let _ = self.poll.registry().deregister(&mut c.socks[1]);
            c.socks[1] = server;
            c.readable[1] = false;
            c.writable[1] = false;
            return Fate::Open;
        }
        c.connecting = None;
        let _ = c.socks[1].set_nodelay(true);
        // The segments' addresses: client and server, as on the path between them.
        let (Ok(client), Ok(server)) = (c.socks[0].peer_addr(), c.socks[1].peer_addr()) else {
            return Fate::Close(false);
        };
        for (stream, from, to) in [
            (Stream::Upstream, client, server),
            (Stream::Downstream, server, client),
        ] {
            match Dir::new(stream, from, to, c.seed, &self.toxics, t) {
                Ok(d) => c.dirs.push(d),
                Err(_) => return Fate::Close(false),
            }
        }
        self.pump(c, slot, t)
    }

    /// Move each direction's bytes as far as they go now.
    fn pump(&mut self, c: &mut Conn, slot: usize, t: Time) -> Fate {
        let mut more = false;
        let mut finished = 0;
        for d in 0..c.dirs.len() {
            let (src, dst) = (d, 1 - d);
            match self.pump_dir(c, d, src, dst, t, &mut more) {
                Fate::Open => {}
                close => return close,
            }
            if c.dirs[d].over {
                finished += 1;
            }
        }
        if finished == 2 {
            // Both ways ended: the connection is over.
            return Fate::Close(false);
        }
        if more && !c.queued {
            c.queued = true;
            self.ready.push_back(slot);
        }
        Fate::Open
    }

    /// One direction: read, poll the pipe, write, while anything moves.
    fn pump_dir(
        &mut self,
        c: &mut Conn,
        d: usize,
        src: usize,
        dst: usize,
        t: Time,
        more: &mut bool,
    ) -> Fate {
        let mut reads = 0;
        loop {
            let dir = &mut c.dirs[d];
            if dir.over {
                return Fate::Open;
            }
            let mut moved = false;
            if dir.open
                && dir.signal.is_none()
                && c.readable[src]
                && dir.out.len() < WINDOW as usize
            {
                let room = dir.pipe.room().min(self.buf.len());
                if room > 0 {
                    if reads == READS_PER_TURN {
                        *more = true;
                    } else {
                        reads += 1;
                        match c.socks[src].read(&mut self.buf[..room]) {
                            Ok(0) => {
                                dir.open = false;
                                dir.pipe.finish();
                            }
                            Ok(n) => {
                                self.published.count(dir.stream, 0, n);
                                dir.pipe.push(&self.buf[..n], t);
                            }
                            Err(e) if e.kind() == ErrorKind::WouldBlock => c.readable[src] = false,
                            Err(e) if e.kind() == ErrorKind::Interrupted => {}
                            // A reset or error ends the source as its end would.
                            Err(_) => {
                                dir.open = false;
                                dir.pipe.finish();
                            }
                        }
                        moved = true;
                    }
                }
            }
            if dir.signal.is_none() {
                self.scratch.clear();
                dir.signal = dir.pipe.poll(t, &mut self.scratch);
                if !self.scratch.is_empty() {
                    // Counted as sent when handed to the socket's side (a
                    // reader seeing the bytes finds them counted).
                    self.published.count(dir.stream, 1, self.scratch.len());
                    if dir.out.is_empty() {
                        std::mem::swap(&mut dir.out, &mut self.scratch);
                    } else {
                        dir.out.extend_from_slice(&self.scratch);
                    }
                }
            }
            // Write what waits.
            let mut sent = 0;
            while sent < dir.out.len() && c.writable[dst] {
                match c.socks[dst].write(&dir.out[sent..]) {
                    Ok(0) => return Fate::Close(false),
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => c.writable[dst] = false,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return Fate::Close(false),
                }
            }
            if sent > 0 {
                moved = true;
                dir.out.drain(..sent);
            }
            if dir.out.is_empty() {
                // The buffer goes back to the reactor: an idle connection
                // holds none.
                if dir.out.capacity() > self.scratch.capacity() {
                    std::mem::swap(&mut dir.out, &mut self.scratch);
                }
                dir.out = Vec::new();
                if let Some(signal) = dir.signal {
                    dir.over = true;
                    match signal {
                        Signal::Eof => {
                            let _ = c.socks[dst].shutdown(Shutdown::Write);
                        }
                        Signal::Close => return Fate::Close(false),
                        Signal::Reset => return Fate::Close(true),
                    }
                    return Fate::Open;
                }
            }
            if !moved {
                return Fate::Open;
            }
        }
    }

    /// End a connection: FIN both ways, or RST (`reset`), and free its slot.
    fn close(&mut self, c: Conn, slot: usize, reset: bool) {
        if let Some(w) = c.timer {
            self.timers.remove(&(w, slot));
        }
        for s in &c.socks {
            if reset {
                // SO_LINGER 0: closing the socket sends RST.
                let linger = libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                };
                // SAFETY: a valid socket and a correctly sized option value.
                unsafe {
                    libc::setsockopt(
                        s.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_LINGER,
                        &linger as *const libc::linger as *const libc::c_void,
                        std::mem::size_of::<libc::linger>() as libc::socklen_t,
                    );
                }
            } else {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        // (Dropping the sockets closes them, which takes them out of epoll.)
        drop(c);
        self.free.push(slot);
    }
}

/// Start connecting to the next of `left` (taken from its end) that a
/// socket can be opened for.
fn connect_next(left: &mut Vec<SocketAddr>) -> Option<TcpStream> {
    while let Some(a) = left.pop() {
        if let Ok(s) = TcpStream::connect(a) {
            return Some(s);
        }
    }
    None
}
