//! The sockets and threads of the proxies: a listener per enabled proxy,
//! and per connection one reader and one pump thread for each direction.
//!
//! A reader blocks on its socket and hands what it read to its pump over a
//! channel of two chunks; the pump drives the direction's [`Pipe`] on the
//! monotonic clock (sleeping until the pipe's next wake-up or the next
//! chunk) and writes what the pipe lets out. While the pipe is full the
//! pump stops taking chunks, the reader blocks on the channel, and the
//! kernel's socket buffers fill: the sender is slowed by TCP's flow control
//! exactly as by a slow network. A toxic added, changed or removed reaches
//! every open connection at once (its pumps are woken and rebuild their
//! stages, see [`Pipe::set_toxics`]); whether a toxic acts on a connection
//! is drawn once per connection against its toxicity.
//!
//! A UDP proxy has one thread reading the listening socket, which keeps a
//! session per client address (at most 1024, each ended after 120 s
//! without a datagram): a socket of its own towards the
//! upstream, a thread reading it, and a [`DatagramPipe`] pump per direction.
//! Datagrams that find a pump's queue full are lost, as on a full socket
//! buffer. The loop never takes the proxy's lock (stopping the proxy waits
//! for it while holding that lock), so its pumps pick toxic changes up from
//! the published copy within 50 ms rather than being woken.

use crate::datagram::DatagramPipe;
use crate::pipe::{Pipe, Signal};
use crate::toxic::{Stream, Toxic};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sluice_core::time::Time;
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration as StdDuration, Instant};

/// Now on the monotonic clock, as sluice-core time.
fn now() -> Time {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    Time(EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64)
}

/// The longest a pump sleeps without looking at its connection's state.
const IDLE: StdDuration = StdDuration::from_millis(50);

/// How long a pump may sleep before its pipe's next wake-up `next`.
fn wait_for(next: Option<Time>) -> StdDuration {
    let t = now();
    next.map_or(IDLE, |w| {
        StdDuration::from_nanos(w.0.saturating_sub(t.0)).min(IDLE)
    })
}

/// What a reader tells its pump.
enum Msg {
    Data(Vec<u8>),
    Eof,
    /// The toxics changed, or the connection is closing: look.
    Wake,
}

/// A proxy's configuration and its live parts.
pub struct Proxy {
    pub name: String,
    /// The address asked for, until bound; then the bound one.
    pub listen: String,
    pub upstream: String,
    pub enabled: bool,
    /// UDP rather than TCP (sluice's own field: Toxiproxy proxies TCP only).
    pub udp: bool,
    pub toxics: Vec<Toxic>,
    /// `toxics` as the connections see them.
    published: Arc<Published>,
    listener: Option<ListenerHandle>,
    conns: Vec<Arc<Conn>>,
}

struct ListenerHandle {
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    thread: thread::JoinHandle<()>,
}

/// One proxied connection, as the proxy and its threads share it.
struct Conn {
    /// A TCP connection's client and server sockets (a UDP session has none:
    /// its threads see `closed` and end).
    sockets: Option<(TcpStream, TcpStream)>,
    closed: AtomicBool,
    /// Directions whose source ended and whose bytes were all written.
    finished: AtomicU64,
    /// Each direction's pump's wake-up line.
    wake: Mutex<Vec<SyncSender<Msg>>>,
}

impl Conn {
    fn wake(&self) {
        if let Ok(w) = self.wake.lock() {
            for tx in w.iter() {
                let _ = tx.try_send(Msg::Wake);
            }
        }
    }

    /// End the connection: FIN both ways, or RST (`reset`).
    fn close(&self, reset: bool) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let Some((client, server)) = &self.sockets else {
            self.wake();
            return;
        };
        for s in [client, server] {
            if reset {
                // SO_LINGER 0: the last close of the socket sends RST;
                // shutting the reading side makes every thread let go of it.
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
                let _ = s.shutdown(Shutdown::Read);
            } else {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        self.wake();
    }
}

/// A proxy's toxics as its connections see them: a copy published at every
/// change, with a generation number, so that no pump needs the proxy's lock
/// to follow the changes (stopping a UDP proxy waits for its pumps while
/// holding that lock).
#[derive(Default)]
struct Published {
    generation: AtomicU64,
    toxics: Mutex<Vec<Toxic>>,
    /// Bytes received and sent, upstream then downstream (`/metrics`).
    bytes: [[AtomicU64; 2]; 2],
}

/// The shared state of all proxies.
pub type Shared = Arc<Mutex<Proxy>>;

impl Proxy {
    /// A proxy, not yet listening.
    pub fn new(name: String, listen: String, upstream: String, enabled: bool, udp: bool) -> Proxy {
        Proxy {
            name,
            listen,
            upstream,
            enabled,
            udp,
            toxics: Vec::new(),
            published: Arc::default(),
            listener: None,
            conns: Vec::new(),
        }
    }

    /// The toxics changed: tell every connection.
    pub fn toxics_changed(&mut self) {
        if let Ok(mut t) = self.published.toxics.lock() {
            *t = self.toxics.clone();
        }
        self.published.generation.fetch_add(1, Ordering::SeqCst);
        self.conns.retain(|c| !c.closed.load(Ordering::SeqCst));
        for c in &self.conns {
            c.wake();
        }
    }

    /// Bytes received and sent so far, upstream then downstream.
    pub fn bytes(&self) -> [[u64; 2]; 2] {
        let b = &self.published.bytes;
        [0, 1].map(|d| [0, 1].map(|w| b[d][w].load(Ordering::Relaxed)))
    }

    /// Close every connection.
    fn close_all(&mut self) {
        for c in self.conns.drain(..) {
            c.close(false);
        }
    }

    /// Stop listening and close every connection.
    pub fn stop(&mut self) {
        if let Some(l) = self.listener.take() {
            l.stop.store(true, Ordering::SeqCst);
            // Wake a blocked accept (a UDP loop wakes by itself), and wait
            // until the socket is closed.
            if !self.udp {
                let _ = TcpStream::connect_timeout(&l.addr, StdDuration::from_millis(200));
            }
            let _ = l.thread.join();
        }
        self.close_all();
    }
}

/// Start listening for `proxy` (if enabled and not yet listening); its
/// `listen` becomes the bound address.
pub fn start(shared: &Shared) -> Result<(), String> {
    let mut p = shared.lock().map_err(|_| "state poisoned")?;
    if !p.enabled || p.listener.is_some() {
        return Ok(());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (addr, thread) = if p.udp {
        let socket = UdpSocket::bind(&p.listen).map_err(|e| e.to_string())?;
        let _ = socket.set_read_timeout(Some(IDLE));
        let addr = socket.local_addr().map_err(|e| e.to_string())?;
        let cx = UdpCx {
            shared: shared.clone(),
            upstream: p.upstream.clone(),
            published: p.published.clone(),
        };
        let stop = stop.clone();
        (addr, spawn(move || udp_loop(socket, stop, cx)))
    } else {
        let listener = TcpListener::bind(&p.listen).map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let (stop, shared) = (stop.clone(), shared.clone());
        (addr, spawn(move || accept_loop(listener, stop, shared)))
    };
    let thread = thread.ok_or("cannot start a thread")?;
    p.listen = addr.to_string();
    p.listener = Some(ListenerHandle { stop, addr, thread });
    Ok(())
}

fn accept_loop(listener: TcpListener, stop: Arc<AtomicBool>, shared: Shared) {
    for client in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(client) = client else { continue };
        let shared = shared.clone();
        // (If no thread can be had, the client's connection is closed.)
        spawn(move || connect(client, shared));
    }
}

/// Open the upstream side of a new connection and start its threads.
fn connect(client: TcpStream, shared: Shared) {
    let upstream = match shared.lock() {
        Ok(p) => p.upstream.clone(),
        Err(_) => return,
    };
    let Some(server) = upstream.to_socket_addrs().ok().and_then(|addrs| {
        addrs
            .into_iter()
            .find_map(|a| TcpStream::connect_timeout(&a, StdDuration::from_secs(5)).ok())
    }) else {
        // Upstream unreachable: the client's connection is closed.
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    // The segments' addresses: client and server, as on the path between them.
    let (Ok(c_addr), Ok(s_addr)) = (client.peer_addr(), server.peer_addr()) else {
        return;
    };
    let conn = Arc::new(Conn {
        sockets: Some((client, server)),
        closed: AtomicBool::new(false),
        finished: AtomicU64::new(0),
        wake: Mutex::new(Vec::new()),
    });
    let published = {
        let Ok(mut p) = shared.lock() else { return };
        if p.listener.is_none() {
            return;
        }
        p.conns.retain(|c| !c.closed.load(Ordering::SeqCst));
        p.conns.push(conn.clone());
        p.published.clone()
    };
    let seed = fresh_seed();
    for (stream, from, to) in [
        (Stream::Upstream, c_addr, s_addr),
        (Stream::Downstream, s_addr, c_addr),
    ] {
        let (dir, tx, rx) = Direction::new(stream, from, to, seed, &shared, &published, &conn, 2);
        let Some((client, server)) = &conn.sockets else {
            return;
        };
        let (src, dst) = match stream {
            Stream::Upstream => (client, server),
            Stream::Downstream => (server, client),
        };
        let (Ok(src), Ok(dst)) = (src.try_clone(), dst.try_clone()) else {
            conn.close(false);
            return;
        };
        if spawn(move || read_loop(src, tx)).is_none() {
            conn.close(false);
            return;
        }
        if spawn(move || dir.pump(rx, dst)).is_none() {
            conn.close(false);
            return;
        }
    }
}

/// Start a thread; `None` if the system has none to give (too many
/// connections): the caller closes what it was for, rather than panic.
fn spawn(f: impl FnOnce() + Send + 'static) -> Option<thread::JoinHandle<()>> {
    thread::Builder::new().spawn(f).ok()
}

/// Each connection or session draws its own randomness (jitter, toxicity):
/// the time it opened, mixed with a count of them.
fn fresh_seed() -> u64 {
    static OPENED: AtomicU64 = AtomicU64::new(0);
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ OPENED
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// How long a UDP session lives without a datagram either way (the
/// kernel's conntrack keeps an answered UDP flow 120 s).
const UDP_IDLE: StdDuration = StdDuration::from_secs(120);

/// The most UDP sessions a proxy keeps (three threads each); datagrams from
/// further clients are dropped until some go idle.
const MAX_UDP_SESSIONS: usize = 1024;

/// Where a UDP direction's datagrams go.
type SendFn = Box<dyn Fn(&[u8]) + Send>;

/// What a UDP proxy's loop works with, taken when it starts, so that it
/// never needs the proxy's lock (stopping the proxy holds it while waiting
/// for the loop): its sessions are its own, not in the proxy's list; their
/// pumps follow toxic changes through `published`.
struct UdpCx {
    shared: Shared,
    upstream: String,
    published: Arc<Published>,
}

/// A UDP session: the client's datagrams go to its upstream pump.
struct Session {
    conn: Arc<Conn>,
    up: SyncSender<Msg>,
    /// Last datagram either way, on [`now`]'s clock.
    last: Arc<AtomicU64>,
    threads: Vec<thread::JoinHandle<()>>,
}

/// A UDP proxy: read the clients' datagrams, one session per client address
/// (an upstream socket of its own and a pump per direction).
fn udp_loop(socket: UdpSocket, stop: Arc<AtomicBool>, cx: UdpCx) {
    let socket = Arc::new(socket);
    let mut sessions: HashMap<SocketAddr, Session> = HashMap::new();
    let mut buf = vec![0u8; 65536];
    while !stop.load(Ordering::SeqCst) {
        if let Ok((n, client)) = socket.recv_from(&mut buf) {
            let sessions_len = sessions.len();
            if let std::collections::hash_map::Entry::Vacant(e) = sessions.entry(client) {
                if sessions_len < MAX_UDP_SESSIONS {
                    if let Some(s) = udp_session(&socket, client, &cx) {
                        e.insert(s);
                    }
                }
            }
            if let Some(s) = sessions.get(&client) {
                s.last.store(now().0, Ordering::Relaxed);
                // A full queue loses the datagram, as a full socket buffer does.
                let _ = s.up.try_send(Msg::Data(buf[..n].to_vec()));
            }
        }
        let t = now().0;
        sessions.retain(|_, s| {
            let idle =
                t.saturating_sub(s.last.load(Ordering::Relaxed)) > UDP_IDLE.as_nanos() as u64;
            if idle {
                s.conn.close(false);
            }
            !idle && !s.conn.closed.load(Ordering::SeqCst)
        });
    }
    for (_, s) in sessions.drain() {
        s.conn.close(false);
        for t in s.threads {
            let _ = t.join();
        }
    }
}

/// Open the upstream side of a UDP session and start its threads.
fn udp_session(listen: &Arc<UdpSocket>, client: SocketAddr, cx: &UdpCx) -> Option<Session> {
    let server = cx.upstream.to_socket_addrs().ok()?.next()?;
    let any: SocketAddr = if server.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let up = Arc::new(UdpSocket::bind(any).ok()?);
    up.connect(server).ok()?;
    let _ = up.set_read_timeout(Some(IDLE));
    let conn = Arc::new(Conn {
        sockets: None,
        closed: AtomicBool::new(false),
        finished: AtomicU64::new(0),
        wake: Mutex::new(Vec::new()),
    });
    let last = Arc::new(AtomicU64::new(now().0));
    let seed = fresh_seed();
    let mut threads = Vec::new();
    let mut up_tx = None;
    for (stream, from, to) in [
        (Stream::Upstream, client, server),
        (Stream::Downstream, server, client),
    ] {
        let (dir, tx, rx) = Direction::new(
            stream,
            from,
            to,
            seed,
            &cx.shared,
            &cx.published,
            &conn,
            1024,
        );
        let send: SendFn = match stream {
            Stream::Upstream => {
                let up = up.clone();
                Box::new(move |d| {
                    let _ = up.send(d);
                })
            }
            Stream::Downstream => {
                let listen = listen.clone();
                Box::new(move |d| {
                    let _ = listen.send_to(d, client);
                })
            }
        };
        let Some(pump) = spawn(move || dir.pump_datagrams(rx, send)) else {
            conn.close(false);
            return None;
        };
        threads.push(pump);
        match stream {
            Stream::Upstream => up_tx = Some(tx),
            Stream::Downstream => {
                // The server's answers, read on the session's own socket.
                let (up, c, last) = (up.clone(), conn.clone(), last.clone());
                let reader = spawn(move || {
                    let mut buf = vec![0u8; 65536];
                    while !c.closed.load(Ordering::SeqCst) {
                        if let Ok(n) = up.recv(&mut buf) {
                            last.store(now().0, Ordering::Relaxed);
                            let _ = tx.try_send(Msg::Data(buf[..n].to_vec()));
                        }
                    }
                });
                let Some(reader) = reader else {
                    conn.close(false);
                    return None;
                };
                threads.push(reader);
            }
        }
    }
    Some(Session {
        conn,
        up: up_tx?,
        last,
        threads,
    })
}

/// Read from a socket into the pump's channel until the end.
fn read_loop(mut src: TcpStream, tx: SyncSender<Msg>) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match src.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = tx.send(Msg::Eof);
                return;
            }
            Ok(n) => {
                if tx.send(Msg::Data(buf[..n].to_vec())).is_err() {
                    return;
                }
            }
        }
    }
}

struct Direction {
    stream: Stream,
    from: SocketAddr,
    to: SocketAddr,
    seed: u64,
    shared: Shared,
    published: Arc<Published>,
    conn: Arc<Conn>,
}

impl Direction {
    /// Count `n` bytes received (`what` 0) or sent (1) in this direction.
    fn count(&self, what: usize, n: usize) {
        self.published.bytes[self.stream as usize][what].fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The direction `stream` of `conn`, from `from` to `to`, and the
    /// channel of `depth` messages to its pump (its sender also on the
    /// connection's wake-up line).
    #[allow(clippy::too_many_arguments)]
    fn new(
        stream: Stream,
        from: SocketAddr,
        to: SocketAddr,
        seed: u64,
        shared: &Shared,
        published: &Arc<Published>,
        conn: &Arc<Conn>,
        depth: usize,
    ) -> (Direction, SyncSender<Msg>, Receiver<Msg>) {
        let (tx, rx) = mpsc::sync_channel(depth);
        if let Ok(mut w) = conn.wake.lock() {
            w.push(tx.clone());
        }
        let dir = Direction {
            stream,
            from,
            to,
            seed: seed ^ stream as u64,
            shared: shared.clone(),
            published: published.clone(),
            conn: conn.clone(),
        };
        (dir, tx, rx)
    }

    /// End the connection (see [`Conn::close`]) and forget it, so that the
    /// last thread to let go of its sockets closes them.
    fn end(&self, reset: bool) {
        self.conn.close(reset);
        if let Ok(mut p) = self.shared.lock() {
            p.conns.retain(|c| !Arc::ptr_eq(c, &self.conn));
        }
    }

    /// The toxics of this direction that act on this connection: each drawn
    /// once against its toxicity (again when it changes).
    fn active(
        &self,
        drawn: &mut HashMap<String, (Toxic, bool)>,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Vec<Toxic> {
        let toxics: Vec<Toxic> = match self.published.toxics.lock() {
            Ok(t) => t
                .iter()
                .filter(|t| t.stream == self.stream)
                .cloned()
                .collect(),
            Err(_) => return Vec::new(),
        };
        drawn.retain(|name, _| toxics.iter().any(|t| &t.name == name));
        toxics
            .into_iter()
            .filter(|t| match drawn.get(&t.name) {
                Some((seen, on)) if seen == t => *on,
                _ => {
                    let on = rng.gen::<f32>() < t.toxicity;
                    drawn.insert(t.name.clone(), (t.clone(), on));
                    on
                }
            })
            .collect()
    }

    /// Write all of `buf`, unless the connection is closed meanwhile (a
    /// destination that does not read must not hold the pump for ever).
    fn write_out(&self, dst: &mut TcpStream, mut buf: &[u8]) -> bool {
        while !buf.is_empty() {
            match dst.write(buf) {
                Ok(0) => return false,
                Ok(n) => buf = &buf[n..],
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) =>
                {
                    if self.conn.closed.load(Ordering::SeqCst) {
                        return false;
                    }
                }
                Err(_) => return false,
            }
        }
        true
    }

    /// A UDP session's direction: datagrams through a [`DatagramPipe`],
    /// handed to `send` as they leave, until the session closes.
    fn pump_datagrams(self, rx: Receiver<Msg>, send: SendFn) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed);
        let mut drawn = HashMap::new();
        let mut seen = self.published.generation.load(Ordering::SeqCst);
        let toxics = self.active(&mut drawn, &mut rng);
        let Ok(mut pipe) = DatagramPipe::new(&toxics, self.from, self.to, self.seed) else {
            // (Not `end`: this pump must not take the proxy's lock, see [`Published`].)
            self.conn.close(false);
            return;
        };
        let mut out = Vec::new();
        while !self.conn.closed.load(Ordering::SeqCst) {
            let wait = wait_for(pipe.next_wake());
            let msg = rx.recv_timeout(wait);
            let t = now();
            if let Ok(Msg::Data(d)) = msg {
                self.count(0, d.len());
                pipe.push(&d, t);
            }
            let g = self.published.generation.load(Ordering::SeqCst);
            if g != seen {
                seen = g;
                let toxics = self.active(&mut drawn, &mut rng);
                let _ = pipe.set_toxics(&toxics, t);
            }
            pipe.poll(t, &mut out);
            for d in out.drain(..) {
                self.count(1, d.len());
                send(&d);
            }
        }
    }

    fn pump(self, rx: Receiver<Msg>, mut dst: TcpStream) {
        let _ = dst.set_write_timeout(Some(IDLE));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed);
        let mut drawn = HashMap::new();
        let mut seen = self.published.generation.load(Ordering::SeqCst);
        let toxics = self.active(&mut drawn, &mut rng);
        let mut pipe = match Pipe::new(&toxics, self.from, self.to, self.seed, now()) {
            Ok(p) => p,
            Err(_) => {
                self.end(false);
                return;
            }
        };
        let mut out = Vec::new();
        let mut source_open = true;
        loop {
            if self.conn.closed.load(Ordering::SeqCst) {
                return;
            }
            let wait = wait_for(pipe.next_wake());
            let msg = if source_open && pipe.has_room() {
                match rx.recv_timeout(wait) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => Some(Msg::Eof),
                }
            } else {
                if !wait.is_zero() {
                    thread::sleep(wait);
                }
                None
            };
            let t = now();
            match msg {
                Some(Msg::Data(d)) => {
                    self.count(0, d.len());
                    pipe.push(&d, t);
                }
                Some(Msg::Eof) => {
                    source_open = false;
                    pipe.finish();
                }
                Some(Msg::Wake) | None => {}
            }
            let g = self.published.generation.load(Ordering::SeqCst);
            if g != seen {
                seen = g;
                let toxics = self.active(&mut drawn, &mut rng);
                let _ = pipe.set_toxics(&toxics, t);
            }
            let signal = pipe.poll(t, &mut out);
            if !out.is_empty() {
                self.count(1, out.len());
                if !self.write_out(&mut dst, &out) {
                    self.end(false);
                    return;
                }
                out.clear();
            }
            match signal {
                None => {}
                Some(Signal::Eof) => {
                    // (An end that the connection's own close caused, by
                    // shutting the reading sides, is not passed on: a reset
                    // must not turn into a FIN.)
                    if self.conn.closed.load(Ordering::SeqCst) {
                        return;
                    }
                    let _ = dst.shutdown(Shutdown::Write);
                    // Both ways ended: the connection is over.
                    if self.conn.finished.fetch_add(1, Ordering::SeqCst) == 1 {
                        self.end(false);
                    }
                    return;
                }
                Some(Signal::Close) => {
                    self.end(false);
                    return;
                }
                Some(Signal::Reset) => {
                    self.end(true);
                    return;
                }
            }
        }
    }
}
