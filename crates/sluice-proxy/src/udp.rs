//! The event loop of a UDP proxy: one thread carries all of its sessions.
//!
//! A UDP proxy keeps a session per client address (at most
//! [`MAX_UDP_SESSIONS`], each ended after [`UDP_IDLE`] without a datagram
//! either way, as the kernel's conntrack forgets an answered UDP flow): a
//! socket of its own towards the upstream, connected to it, and a
//! [`DatagramPipe`] per direction. The thread waits on one epoll set for
//! the listening socket, every session's socket, a waker (the toxics
//! changed, or the proxy stops) and a timer for the earliest wake-up any
//! pipe or idle session asked for. A datagram read goes into its pipe at
//! once; what leaves a pipe is sent at once, and lost if the socket's
//! buffer is full, as on a network. Datagrams from further clients, past
//! the session limit, are dropped until some session ends.
//!
//! As for TCP (see [`crate::reactor`]) the proxy's lock is never taken
//! here: the toxics come from the copy published at each change, and each
//! session draws whether a toxic acts on it once, against its toxicity.

use crate::conn::{fresh_seed, now, Published};
use crate::datagram::DatagramPipe;
use crate::reactor::{raise_nofile, Draws, Handle, Timer};
use crate::toxic::{Stream, Toxic};
use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token, Waker};
use sluice_core::time::{Duration, Time};
use std::collections::{BTreeSet, HashMap};
use std::io::{self, ErrorKind};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

/// How long a UDP session lives without a datagram either way (the
/// kernel's conntrack keeps an answered UDP flow 120 s).
pub const UDP_IDLE: Duration = Duration(120_000_000_000);

/// The most UDP sessions a proxy keeps; datagrams from further clients are
/// dropped until some go idle.
pub const MAX_UDP_SESSIONS: usize = 1024;

/// Datagrams read from one socket in a row before the others' turn.
const READS_PER_TURN: usize = 256;

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const TIMER: Token = Token(2);
/// Session `i`'s socket is token `FIRST + i`.
const FIRST: usize = 3;

/// One direction of a session.
struct Dir {
    stream: Stream,
    pipe: DatagramPipe,
    draws: Draws,
}

impl Dir {
    fn new(
        stream: Stream,
        from: SocketAddr,
        to: SocketAddr,
        seed: u64,
        toxics: &[Toxic],
        now: Time,
    ) -> Option<Dir> {
        let mut draws = Draws::new(stream, seed);
        let on = draws.active(toxics);
        Some(Dir {
            stream,
            pipe: DatagramPipe::new(&on, from, to, draws.seed, now).ok()?,
            draws,
        })
    }
}

/// A client's session.
struct Session {
    client: SocketAddr,
    /// Connected to the upstream.
    up: UdpSocket,
    /// Client to upstream, then upstream to client.
    dirs: [Dir; 2],
    /// The last datagram either way.
    last: Time,
    /// When it is to be looked at again, as in the timer set.
    timer: Option<Time>,
}

/// Start the event loop of a UDP proxy on `socket` (non-blocking),
/// relaying to `upstream`, with its toxics in `published`.
pub(crate) fn spawn(
    socket: std::net::UdpSocket,
    upstream: String,
    published: Arc<Published>,
) -> io::Result<Handle> {
    raise_nofile();
    let poll = Poll::new()?;
    let mut socket = UdpSocket::from_std(socket);
    poll.registry()
        .register(&mut socket, LISTENER, Interest::READABLE)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let timer = Timer::new(poll.registry(), TIMER)?;
    let stop = Arc::new(AtomicBool::new(false));
    let generation = published.generation.load(Ordering::SeqCst);
    let udp = Udp {
        poll,
        socket,
        upstream,
        published,
        generation,
        toxics: Vec::new(),
        stop: stop.clone(),
        by_client: HashMap::new(),
        sessions: Vec::new(),
        free: Vec::new(),
        timers: BTreeSet::new(),
        timer,
        buf: vec![0; 65536],
        out: Vec::new(),
    };
    let thread = thread::Builder::new()
        .name("sluice-proxy-udp".into())
        .spawn(move || udp.run())?;
    Ok(Handle::new(vec![waker], stop, vec![thread]))
}

struct Udp {
    poll: Poll,
    socket: UdpSocket,
    upstream: String,
    published: Arc<Published>,
    generation: u64,
    toxics: Vec<Toxic>,
    stop: Arc<AtomicBool>,
    by_client: HashMap<SocketAddr, usize>,
    /// Sessions by slot; `free` holds the empty slots.
    sessions: Vec<Option<Session>>,
    free: Vec<usize>,
    /// Wake-ups: (when, slot).
    timers: BTreeSet<(Time, usize)>,
    timer: Timer,
    buf: Vec<u8>,
    out: Vec<Vec<u8>>,
}

impl Udp {
    fn run(mut self) {
        self.toxics = self.toxics_now();
        let mut events = Events::with_capacity(1024);
        let mut dirty: Vec<usize> = Vec::new();
        // Sockets left readable after their turn: read again at once.
        let mut listen_again = false;
        let mut up_again: Vec<usize> = Vec::new();
        loop {
            self.timer.set(self.timers.first().map(|(w, _)| *w));
            let busy = listen_again || !up_again.is_empty();
            let timeout = busy.then_some(std::time::Duration::ZERO);
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != ErrorKind::Interrupted {
                    break;
                }
            }
            if self.stop.load(Ordering::SeqCst) {
                break;
            }
            let mut listen = std::mem::take(&mut listen_again);
            let mut readable = std::mem::take(&mut up_again);
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => listen = true,
                    WAKER => self.toxics_changed(&mut dirty),
                    TIMER => self.timer.clear(),
                    Token(k) => readable.push(k - FIRST),
                }
            }
            readable.sort_unstable();
            readable.dedup();
            for slot in readable {
                if self.read_upstream(slot) {
                    up_again.push(slot);
                }
                dirty.push(slot);
            }
            if listen && self.read_clients(&mut dirty) {
                listen_again = true;
            }
            let t = now();
            while let Some(&(w, slot)) = self.timers.first() {
                if w > t {
                    break;
                }
                self.timers.pop_first();
                if let Some(Some(s)) = self.sessions.get_mut(slot) {
                    s.timer = None;
                }
                dirty.push(slot);
            }
            dirty.sort_unstable();
            dirty.dedup();
            for slot in dirty.drain(..) {
                self.drive(slot);
            }
        }
    }

    fn toxics_now(&self) -> Vec<Toxic> {
        self.published
            .toxics
            .lock()
            .map(|t| t.clone())
            .unwrap_or_default()
    }

    /// A new generation of toxics: every session's pipes take it.
    fn toxics_changed(&mut self, dirty: &mut Vec<usize>) {
        let g = self.published.generation.load(Ordering::SeqCst);
        if g == self.generation {
            return;
        }
        self.generation = g;
        self.toxics = self.toxics_now();
        let t = now();
        for (slot, s) in self.sessions.iter_mut().enumerate() {
            let Some(s) = s else { continue };
            for d in &mut s.dirs {
                let on = d.draws.active(&self.toxics);
                // (A change that cannot be built leaves the stages.)
                let _ = d.pipe.set_toxics(&on, t);
            }
            dirty.push(slot);
        }
    }

    /// Read the clients' datagrams into their sessions' pipes; whether
    /// more may be waiting.
    fn read_clients(&mut self, dirty: &mut Vec<usize>) -> bool {
        for _ in 0..READS_PER_TURN {
            let (n, client) = match self.socket.recv_from(&mut self.buf) {
                Ok(r) => r,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // (An ICMP error of an earlier send, and the like.)
                Err(_) => continue,
            };
            let t = now();
            let slot = match self.by_client.get(&client) {
                Some(&slot) => slot,
                None => match self.open(client, t) {
                    Some(slot) => slot,
                    // Too many sessions, or no upstream: lost.
                    None => continue,
                },
            };
            if let Some(Some(s)) = self.sessions.get_mut(slot) {
                s.last = t;
                self.published.count(Stream::Upstream, 0, n);
                s.dirs[0].pipe.push(&self.buf[..n], t);
                dirty.push(slot);
            }
        }
        true
    }

    /// Read the upstream's datagrams of session `slot`; whether more may
    /// be waiting.
    fn read_upstream(&mut self, slot: usize) -> bool {
        let Some(Some(s)) = self.sessions.get_mut(slot) else {
            return false;
        };
        for _ in 0..READS_PER_TURN {
            match s.up.recv(&mut self.buf) {
                Ok(n) => {
                    let t = now();
                    s.last = t;
                    self.published.count(Stream::Downstream, 0, n);
                    s.dirs[1].pipe.push(&self.buf[..n], t);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                // (The upstream's port refused an earlier datagram.)
                Err(_) => {}
            }
        }
        true
    }

    /// A new session for `client`: its slot.
    fn open(&mut self, client: SocketAddr, t: Time) -> Option<usize> {
        if self.by_client.len() >= MAX_UDP_SESSIONS {
            return None;
        }
        let server = self.upstream.to_socket_addrs().ok()?.next()?;
        let any: SocketAddr = if server.is_ipv4() {
            "0.0.0.0:0".parse().ok()?
        } else {
            "[::]:0".parse().ok()?
        };
        let mut up = UdpSocket::bind(any).ok()?;
        up.connect(server).ok()?;
        let seed = fresh_seed();
        let dirs = [
            Dir::new(Stream::Upstream, client, server, seed, &self.toxics, t)?,
            Dir::new(Stream::Downstream, server, client, seed, &self.toxics, t)?,
        ];
        let slot = self.free.pop().unwrap_or_else(|| {
            self.sessions.push(None);
            self.sessions.len() - 1
        });
        if self
            .poll
            .registry()
            .register(&mut up, Token(FIRST + slot), Interest::READABLE)
            .is_err()
        {
            self.free.push(slot);
            return None;
        }
        self.sessions[slot] = Some(Session {
            client,
            up,
            dirs,
            last: t,
            timer: None,
        });
        self.by_client.insert(client, slot);
        Some(slot)
    }

    /// Send what the pipes of session `slot` let go now, then set its
    /// timer, or end it if it has been idle too long.
    fn drive(&mut self, slot: usize) {
        let Some(Some(s)) = self.sessions.get_mut(slot) else {
            return;
        };
        let t = now();
        for d in 0..2 {
            s.dirs[d].pipe.poll(t, &mut self.out);
            for datagram in self.out.drain(..) {
                self.published.count(s.dirs[d].stream, 1, datagram.len());
                // A full socket buffer loses it, as on a network.
                let _ = match d {
                    0 => s.up.send(&datagram),
                    _ => self.socket.send_to(&datagram, s.client),
                };
            }
        }
        let idle_at = s.last + UDP_IDLE;
        if idle_at <= t {
            let s = self.sessions[slot].take();
            if let Some(s) = s {
                if let Some(w) = s.timer {
                    self.timers.remove(&(w, slot));
                }
                self.by_client.remove(&s.client);
            }
            self.free.push(slot);
            return;
        }
        let next = s
            .dirs
            .iter()
            .filter_map(|d| d.pipe.next_wake())
            .fold(idle_at, Time::min);
        let next = if next <= t {
            t + Duration(1_000_000)
        } else {
            next
        };
        if s.timer != Some(next) {
            if let Some(old) = s.timer {
                self.timers.remove(&(old, slot));
            }
            self.timers.insert((next, slot));
            s.timer = Some(next);
        }
    }
}
