//! The event loops of a TCP proxy: a few threads (one per core, at most
//! four: [`loops_per_proxy`]) carry all of its connections, whatever their
//! number. The first loop accepts the clients and hands them to the loops
//! in turn; a connection then stays on its loop.
//!
//! Each loop is one of [`crate::event_loop`]'s: its epoll set holds its
//! connections' two sockets each (and the first's, the listening socket),
//! its waker also tells of a client handed over, and its timer is armed
//! for the earliest wake-up any of its connections' pipes asked for.
//! Sockets are non-blocking and their events edge-triggered, so each
//! connection remembers which of its sockets are readable and writable
//! until a call says `WouldBlock`.
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

use crate::conn::{fresh_seed, now, Draws, Published};
use crate::event_loop::{Handle, Poller, Slots, FIRST, LISTENER, TIMER, WAKER};
use crate::pipe::{Pipe, Signal, WINDOW};
use crate::toxic::{Stream, Toxic};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Token, Waker};
use sluice_core::time::{Duration, Time};
use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicBool;
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

/// How many event loops carry a TCP proxy's connections: one per core, at
/// most four (one core's loop carries a stream at several Gbit/s; more
/// loops spread many connections' work over the cores).
pub fn loops_per_proxy() -> usize {
    thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4))
}

/// Start the event loops of a proxy listening on `listener`
/// (non-blocking) and connecting to `upstream`, with its toxics in
/// `published`.
pub(crate) fn spawn(
    listener: std::net::TcpListener,
    upstream: String,
    published: Arc<Published>,
) -> io::Result<Handle> {
    let stop = Arc::new(AtomicBool::new(false));
    let mut listener = Some(TcpListener::from_std(listener));
    let mut reactors = Vec::new();
    let mut peers = Vec::new();
    for _ in 0..loops_per_proxy() {
        let (poller, waker) = Poller::new(&stop)?;
        if let Some(l) = &mut listener {
            poller
                .registry()
                .register(l, LISTENER, Interest::READABLE)?;
        }
        let (tx, inbox) = mpsc::channel();
        peers.push((waker.clone(), tx));
        let (generation, toxics) = published.current();
        let reactor = Reactor {
            poller,
            // (The first loop accepts, and hands clients to the others in turn.)
            listener: listener.take(),
            peers: Vec::new(),
            turn: 0,
            inbox,
            upstream: upstream.clone(),
            resolved: None,
            published: published.clone(),
            generation,
            toxics,
            conns: Slots::new(),
            accept_at: None,
            ready: VecDeque::new(),
            buf: vec![0; READ_CHUNK],
            scratch: Vec::new(),
        };
        reactors.push((waker, reactor));
    }
    reactors[0].1.peers = peers;
    Handle::start("sluice-proxy", reactors, stop, Reactor::run)
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
        let (draws, seed, on) = Draws::new(stream, seed, toxics);
        Ok(Dir {
            stream,
            pipe: Pipe::new(&on, from, to, seed, now)?,
            open: true,
            out: Vec::new(),
            signal: None,
            over: false,
            draws,
        })
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
    poller: Poller,
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
    /// Connection `i`'s client socket is token `FIRST + 2i`, its server's
    /// the next.
    conns: Slots<Conn>,
    /// Accepting paused (out of descriptors) until then.
    accept_at: Option<Time>,
    /// Slots to drive again without waiting for an event.
    ready: VecDeque<usize>,
    /// Bytes read, before they go into a pipe.
    buf: Vec<u8>,
    /// Bytes a pipe let out, before they are written.
    scratch: Vec<u8>,
}

/// The token of side `side` (0 the client's, 1 the server's) of the
/// connection in `slot`.
fn token(slot: usize, side: usize) -> Token {
    Token(FIRST + 2 * slot + side)
}

impl Reactor {
    fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut dirty: Vec<usize> = Vec::new();
        loop {
            let wake_at = [self.conns.next_wakeup(), self.accept_at];
            let wake_at = wake_at.into_iter().flatten().min();
            if !self
                .poller
                .wait(&mut events, wake_at, !self.ready.is_empty())
            {
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
                    TIMER => {}
                    Token(k) => {
                        let (slot, side) = ((k - FIRST) / 2, (k - FIRST) % 2);
                        if let Some(c) = self.conns.get_mut(slot) {
                            // An error or a hang-up shows on the next call.
                            let err = ev.is_error();
                            c.readable[side] |= ev.is_readable() || ev.is_read_closed() || err;
                            c.writable[side] |= ev.is_writable() || ev.is_write_closed() || err;
                            dirty.push(slot);
                        }
                    }
                }
            }
            if accept || self.accept_at.is_some_and(|a| a <= t) {
                self.accept(t, &mut dirty);
            }
            self.conns.due(t, &mut dirty);
            for slot in self.ready.drain(..) {
                if let Some(c) = self.conns.get_mut(slot) {
                    c.queued = false;
                }
                dirty.push(slot);
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
        for (_, c) in self.conns.iter_mut() {
            for s in &c.socks {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    /// A new generation of toxics: every connection's pipes take it.
    fn toxics_changed(&mut self, t: Time, dirty: &mut Vec<usize>) {
        let Some(toxics) = self.published.newer(&mut self.generation) else {
            return;
        };
        self.toxics = toxics;
        for (slot, c) in self.conns.iter_mut() {
            for d in c.dirs.iter_mut().filter(|d| !d.over) {
                let active = d.draws.active(&self.toxics);
                // (A change that cannot be built leaves the stages.)
                let _ = d.pipe.set_toxics(&active, t);
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
            queued: false,
        };
        let slot = self.conns.vacant();
        let registry = self.poller.registry();
        let both = Interest::READABLE | Interest::WRITABLE;
        let ok = registry
            .register(&mut c.socks[0], token(slot, 0), both)
            .and_then(|_| registry.register(&mut c.socks[1], token(slot, 1), both));
        if ok.is_ok() {
            dirty.push(self.conns.insert(c));
        }
    }

    /// Drive connection `slot` at `t`, then set its wake-up or end it.
    fn drive(&mut self, slot: usize, t: Time) {
        let Some(mut c) = self.conns.take(slot) else {
            return;
        };
        let fate = if c.connecting.is_some() {
            self.connect_step(&mut c, slot, t)
        } else {
            self.pump(&mut c, slot, t)
        };
        match fate {
            Fate::Close(reset) => {
                close(&c, reset);
                // (Dropping the sockets closes them, which takes them out of epoll.)
                drop(c);
                self.conns.remove(slot);
            }
            Fate::Open => {
                let deadline = c.connecting.as_ref().map(|k| k.deadline);
                let live = c.dirs.iter().filter(|d| !d.over && d.signal.is_none());
                let next = live
                    .filter_map(|d| d.pipe.next_wake())
                    .chain(deadline)
                    .min();
                self.conns.put(slot, c);
                self.conns.wake_at(slot, next, t);
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
            let registry = self.poller.registry();
            let both = Interest::READABLE | Interest::WRITABLE;
            if registry
                .register(&mut server, token(slot, 1), both)
                .is_err()
            {
                return Fate::Close(false);
            }
            let _ = registry.deregister(&mut c.socks[1]);
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
        for d in 0..c.dirs.len() {
            if let close @ Fate::Close(_) = self.pump_dir(c, d, t, &mut more) {
                return close;
            }
        }
        if c.dirs.iter().all(|d| d.over) {
            // Both ways ended: the connection is over.
            return Fate::Close(false);
        }
        if more && !c.queued {
            c.queued = true;
            self.ready.push_back(slot);
        }
        Fate::Open
    }

    /// Direction `d` (from socket `d` to the other): read, poll the pipe,
    /// write, while anything moves.
    fn pump_dir(&mut self, c: &mut Conn, d: usize, t: Time, more: &mut bool) -> Fate {
        let mut reads = 0;
        loop {
            if c.dirs[d].over {
                return Fate::Open;
            }
            let read = self.read(c, d, t, &mut reads, more);
            self.poll_pipe(&mut c.dirs[d], t);
            let wrote = match write(c, 1 - d) {
                Ok(wrote) => wrote,
                Err(()) => return Fate::Close(false),
            };
            let dir = &mut c.dirs[d];
            if dir.out.is_empty() {
                // The buffer goes back to the reactor: an idle connection
                // holds none.
                if dir.out.capacity() > self.scratch.capacity() {
                    std::mem::swap(&mut dir.out, &mut self.scratch);
                }
                dir.out = Vec::new();
                if let Some(signal) = dir.signal {
                    // Everything before the signal was written: act on it.
                    dir.over = true;
                    return match signal {
                        Signal::Eof => {
                            let _ = c.socks[1 - d].shutdown(Shutdown::Write);
                            Fate::Open
                        }
                        Signal::Close => Fate::Close(false),
                        Signal::Reset => Fate::Close(true),
                    };
                }
            }
            if !read && !wrote {
                return Fate::Open;
            }
        }
    }

    /// Read socket `d` into direction `d`'s pipe, if it has room and less
    /// than [`WINDOW`] waits to be written, and if the drive has reads of
    /// its turn left (else `more`); whether it read.
    fn read(
        &mut self,
        c: &mut Conn,
        d: usize,
        t: Time,
        reads: &mut usize,
        more: &mut bool,
    ) -> bool {
        let dir = &mut c.dirs[d];
        let room = dir.pipe.room().min(self.buf.len());
        let may = dir.open && dir.signal.is_none() && c.readable[d];
        if !may || dir.out.len() >= WINDOW as usize || room == 0 {
            return false;
        }
        if *reads == READS_PER_TURN {
            *more = true;
            return false;
        }
        *reads += 1;
        match c.socks[d].read(&mut self.buf[..room]) {
            Ok(n) if n > 0 => {
                self.published.count(dir.stream, 0, n);
                dir.pipe.push(&self.buf[..n], t);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => c.readable[d] = false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // The end, or a reset or error, which ends the source as its end would.
            _ => {
                dir.open = false;
                dir.pipe.finish();
            }
        }
        true
    }

    /// Poll a direction's pipe at `t`: what it lets out joins `out`, its
    /// signal waits there.
    fn poll_pipe(&mut self, dir: &mut Dir, t: Time) {
        if dir.signal.is_some() {
            return;
        }
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
}

/// Write what waits in the direction towards socket `dst` while the socket
/// takes it; whether anything was written (`Err`: the socket failed).
fn write(c: &mut Conn, dst: usize) -> Result<bool, ()> {
    let out = &mut c.dirs[1 - dst].out;
    let mut sent = 0;
    while sent < out.len() && c.writable[dst] {
        match c.socks[dst].write(&out[sent..]) {
            Ok(0) => return Err(()),
            Ok(n) => sent += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => c.writable[dst] = false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return Err(()),
        }
    }
    out.drain(..sent);
    Ok(sent > 0)
}

/// Close a connection's sockets: FIN both ways, or RST (`reset`).
fn close(c: &Conn, reset: bool) {
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
