//! The event loop of a UDP proxy: one thread carries all of its sessions.
//!
//! A UDP proxy keeps a session per client address (at most
//! [`MAX_UDP_SESSIONS`], each ended after [`UDP_IDLE`] without a datagram
//! either way, as the kernel's conntrack forgets an answered UDP flow): a
//! socket of its own towards the upstream, connected to it, and a
//! [`DatagramPipe`] per direction. The thread is one of
//! [`crate::event_loop`]'s loops: its epoll set holds the listening socket
//! and every session's socket, and its timer is armed for the earliest
//! wake-up any pipe or idle session asked for. A datagram read goes into its pipe at
//! once; what leaves a pipe is sent at once, and lost if the socket's
//! buffer is full, as on a network. Datagrams from further clients, past
//! the session limit, are dropped until some session ends.
//!
//! As for TCP (see [`crate::reactor`]) the proxy's lock is never taken
//! here: the toxics come from the copy published at each change, and each
//! session draws whether a toxic acts on it once, against its toxicity.

use crate::conn::{fresh_seed, now, Draws, Published};
use crate::datagram::DatagramPipe;
use crate::event_loop::{Handle, Poller, Slots, FIRST, LISTENER, TIMER, WAKER};
use crate::toxic::{Stream, Toxic};
use mio::net::UdpSocket;
use mio::{Events, Interest, Token};
use sluice_core::time::{Duration, Time};
use std::collections::HashMap;
use std::io::{self, ErrorKind};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// How long a UDP session lives without a datagram either way (the
/// kernel's conntrack keeps an answered UDP flow 120 s).
pub const UDP_IDLE: Duration = Duration(120_000_000_000);

/// The most UDP sessions a proxy keeps; datagrams from further clients are
/// dropped until some go idle.
pub const MAX_UDP_SESSIONS: usize = 1024;

/// Datagrams read from one socket in a row before the others' turn.
const READS_PER_TURN: usize = 256;

/// One direction of a session.
struct Dir {
    stream: Stream,
    pipe: DatagramPipe,
    draws: Draws,
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
}

/// Start the event loop of a UDP proxy on `socket` (non-blocking),
/// relaying to `upstream`, with its toxics in `published`.
pub(crate) fn spawn(
    socket: std::net::UdpSocket,
    upstream: String,
    published: Arc<Published>,
) -> io::Result<Handle> {
    let stop = Arc::new(AtomicBool::new(false));
    let (poller, waker) = Poller::new(&stop)?;
    let mut socket = UdpSocket::from_std(socket);
    poller
        .registry()
        .register(&mut socket, LISTENER, Interest::READABLE)?;
    let (generation, toxics) = published.current();
    let udp = Udp {
        poller,
        socket,
        upstream,
        published,
        generation,
        toxics,
        by_client: HashMap::new(),
        sessions: Slots::new(),
        buf: vec![0; 65536],
        out: Vec::new(),
    };
    Handle::start("sluice-proxy-udp", vec![(waker, udp)], stop, Udp::run)
}

struct Udp {
    poller: Poller,
    socket: UdpSocket,
    upstream: String,
    published: Arc<Published>,
    /// The generation of `toxics`.
    generation: u64,
    toxics: Vec<Toxic>,
    by_client: HashMap<SocketAddr, usize>,
    /// Session `i`'s socket is token `FIRST + i`.
    sessions: Slots<Session>,
    buf: Vec<u8>,
    out: Vec<Vec<u8>>,
}

impl Udp {
    fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut dirty: Vec<usize> = Vec::new();
        // Sockets left readable after their turn: read again at once.
        let mut listen_again = false;
        let mut up_again: Vec<usize> = Vec::new();
        loop {
            let busy = listen_again || !up_again.is_empty();
            let wake_at = self.sessions.next_wakeup();
            if !self.poller.wait(&mut events, wake_at, busy) {
                break;
            }
            let mut listen = std::mem::take(&mut listen_again);
            let mut readable = std::mem::take(&mut up_again);
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => listen = true,
                    WAKER => self.toxics_changed(&mut dirty),
                    TIMER => {}
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
            self.sessions.due(now(), &mut dirty);
            dirty.sort_unstable();
            dirty.dedup();
            for slot in dirty.drain(..) {
                self.drive(slot);
            }
        }
    }

    /// A new generation of toxics: every session's pipes take it.
    fn toxics_changed(&mut self, dirty: &mut Vec<usize>) {
        let Some(toxics) = self.published.newer(&mut self.generation) else {
            return;
        };
        self.toxics = toxics;
        let t = now();
        for (slot, s) in self.sessions.iter_mut() {
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
            if let Some(s) = self.sessions.get_mut(slot) {
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
        let Some(s) = self.sessions.get_mut(slot) else {
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
        // A direction: its draws of the toxics, and its pipe through those that act.
        let dir = |stream, from, to| {
            let (draws, seed, on) = Draws::new(stream, seed, &self.toxics);
            let pipe = DatagramPipe::new(&on, from, to, seed, t).ok()?;
            Some(Dir {
                stream,
                pipe,
                draws,
            })
        };
        let dirs = [
            dir(Stream::Upstream, client, server)?,
            dir(Stream::Downstream, server, client)?,
        ];
        let token = Token(FIRST + self.sessions.vacant());
        let registry = self.poller.registry();
        registry.register(&mut up, token, Interest::READABLE).ok()?;
        let slot = self.sessions.insert(Session {
            client,
            up,
            dirs,
            last: t,
        });
        self.by_client.insert(client, slot);
        Some(slot)
    }

    /// Send what the pipes of session `slot` let go now, then set its
    /// timer, or end it if it has been idle too long.
    fn drive(&mut self, slot: usize) {
        let Some(s) = self.sessions.get_mut(slot) else {
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
            if let Some(s) = self.sessions.remove(slot) {
                self.by_client.remove(&s.client);
            }
            return;
        }
        let next = s
            .dirs
            .iter()
            .filter_map(|d| d.pipe.next_wake())
            .fold(idle_at, Time::min);
        self.sessions.wake_at(slot, Some(next), t);
    }
}
