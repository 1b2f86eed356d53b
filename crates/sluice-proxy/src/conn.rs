//! The proxies' sockets: a TCP proxy's listener and connections on its
//! event loop ([`crate::reactor`]: one thread per proxy, whatever the
//! number of connections), a UDP proxy's sessions on threads of their own.
//!
//! A TCP connection drives one [`Pipe`] per direction on the monotonic
//! clock, reading its source only while the pipe has room, so that a slow
//! toxic slows the sender through TCP's flow control. A toxic added,
//! changed or removed reaches every open connection at once (the event
//! loop is woken and each pipe rebuilds its stages, see
//! [`Pipe::set_toxics`]); whether a toxic acts on a connection is drawn
//! once per connection against its toxicity.
//!
//! A UDP proxy has one thread reading the listening socket, which keeps a
//! session per client address (at most [`MAX_UDP_SESSIONS`], each ended
//! after 120 s without a datagram): a socket of its own towards the
//! upstream, a thread reading it, and a [`DatagramPipe`] pump per direction
//! — so at most 3 × 1024 + 1 threads per UDP proxy, a bound kept rather
//! than moved onto the event loop. Datagrams that find a pump's queue full
//! are lost, as on a full socket buffer. The loop never takes the proxy's
//! lock (stopping the proxy waits for it while holding that lock), so its
//! pumps pick toxic changes up from the published copy within 50 ms rather
//! than being woken.

use crate::datagram::DatagramPipe;
#[cfg(doc)]
use crate::pipe::Pipe;
use crate::reactor;
use crate::toxic::{Stream, Toxic};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use sluice_core::time::Time;
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration as StdDuration, Instant};

/// Now on the monotonic clock, as sluice-core time.
pub(crate) fn now() -> Time {
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

/// What a UDP session's reader tells its pump.
enum Msg {
    Data(Vec<u8>),
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
    /// A TCP proxy's event loop, while it listens.
    reactor: Option<reactor::Handle>,
    /// A UDP proxy's loop, while it listens.
    listener: Option<ListenerHandle>,
}

struct ListenerHandle {
    stop: Arc<AtomicBool>,
    thread: thread::JoinHandle<()>,
}

/// A UDP session, as its threads share it.
struct Conn {
    closed: AtomicBool,
}

impl Conn {
    /// End the session: its threads see it and end.
    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

/// A proxy's toxics as its connections see them: a copy published at every
/// change, with a generation number, so that nothing carrying bytes needs
/// the proxy's lock to follow the changes (stopping a proxy waits for its
/// event loop or its UDP pumps while holding that lock).
#[derive(Default)]
pub(crate) struct Published {
    pub(crate) generation: AtomicU64,
    pub(crate) toxics: Mutex<Vec<Toxic>>,
    /// Bytes received and sent, upstream then downstream (`/metrics`).
    bytes: [[AtomicU64; 2]; 2],
}

impl Published {
    /// Count `n` bytes of `stream` received (`what` 0) or sent (1).
    pub(crate) fn count(&self, stream: Stream, what: usize, n: usize) {
        self.bytes[stream as usize][what].fetch_add(n as u64, Ordering::Relaxed);
    }
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
            reactor: None,
            listener: None,
        }
    }

    /// The toxics changed: tell every connection.
    pub fn toxics_changed(&mut self) {
        if let Ok(mut t) = self.published.toxics.lock() {
            *t = self.toxics.clone();
        }
        self.published.generation.fetch_add(1, Ordering::SeqCst);
        if let Some(r) = &self.reactor {
            r.wake();
        }
    }

    /// Bytes received and sent so far, upstream then downstream.
    pub fn bytes(&self) -> [[u64; 2]; 2] {
        let b = &self.published.bytes;
        [0, 1].map(|d| [0, 1].map(|w| b[d][w].load(Ordering::Relaxed)))
    }

    /// Stop listening and close every connection; returns once the
    /// listening socket is closed.
    pub fn stop(&mut self) {
        if let Some(r) = self.reactor.take() {
            r.stop();
        }
        if let Some(l) = self.listener.take() {
            // (The UDP loop looks at `stop` every 50 ms.)
            l.stop.store(true, Ordering::SeqCst);
            let _ = l.thread.join();
        }
    }
}

/// Start listening for `proxy` (if enabled and not yet listening); its
/// `listen` becomes the bound address.
pub fn start(shared: &Shared) -> Result<(), String> {
    let mut p = shared.lock().map_err(|_| "state poisoned")?;
    if !p.enabled || p.reactor.is_some() || p.listener.is_some() {
        return Ok(());
    }
    let addr = if p.udp {
        let socket = UdpSocket::bind(&p.listen).map_err(|e| e.to_string())?;
        let _ = socket.set_read_timeout(Some(IDLE));
        let addr = socket.local_addr().map_err(|e| e.to_string())?;
        let cx = UdpCx {
            upstream: p.upstream.clone(),
            published: p.published.clone(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let loop_stop = stop.clone();
        let thread =
            spawn(move || udp_loop(socket, loop_stop, cx)).ok_or("cannot start a thread")?;
        p.listener = Some(ListenerHandle { stop, thread });
        addr
    } else {
        let want = p
            .listen
            .to_socket_addrs()
            .map_err(|e| e.to_string())?
            .next()
            .ok_or_else(|| format!("{}: no address", p.listen))?;
        let listener = reactor::listen(want).map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let handle = reactor::spawn(listener, p.upstream.clone(), p.published.clone())
            .map_err(|e| e.to_string())?;
        p.reactor = Some(handle);
        addr
    };
    p.listen = addr.to_string();
    Ok(())
}

/// Start a thread; `None` if the system has none to give (too many
/// connections): the caller closes what it was for, rather than panic.
fn spawn(f: impl FnOnce() + Send + 'static) -> Option<thread::JoinHandle<()>> {
    thread::Builder::new().spawn(f).ok()
}

/// Each connection or session draws its own randomness (jitter, toxicity):
/// the time it opened, mixed with a count of them.
pub(crate) fn fresh_seed() -> u64 {
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
pub const MAX_UDP_SESSIONS: usize = 1024;

/// Where a UDP direction's datagrams go.
type SendFn = Box<dyn Fn(&[u8]) + Send>;

/// What a UDP proxy's loop works with, taken when it starts, so that it
/// never needs the proxy's lock (stopping the proxy holds it while waiting
/// for the loop): its sessions are its own, not in the proxy's list; their
/// pumps follow toxic changes through `published`.
struct UdpCx {
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
                s.conn.close();
            }
            !idle && !s.conn.closed.load(Ordering::SeqCst)
        });
    }
    for (_, s) in sessions.drain() {
        s.conn.close();
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
        closed: AtomicBool::new(false),
    });
    let last = Arc::new(AtomicU64::new(now().0));
    let seed = fresh_seed();
    let mut threads = Vec::new();
    let mut up_tx = None;
    for (stream, from, to) in [
        (Stream::Upstream, client, server),
        (Stream::Downstream, server, client),
    ] {
        let (dir, tx, rx) = Direction::new(stream, (from, to), seed, &cx.published, &conn, 1024);
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
            conn.close();
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
                    conn.close();
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

/// One direction of a UDP session.
struct Direction {
    stream: Stream,
    from: SocketAddr,
    to: SocketAddr,
    seed: u64,
    published: Arc<Published>,
    conn: Arc<Conn>,
}

impl Direction {
    /// The direction `stream` of `conn`, from `from` to `to`, and the
    /// channel of `depth` messages to its pump.
    fn new(
        stream: Stream,
        (from, to): (SocketAddr, SocketAddr),
        seed: u64,
        published: &Arc<Published>,
        conn: &Arc<Conn>,
        depth: usize,
    ) -> (Direction, SyncSender<Msg>, Receiver<Msg>) {
        let (tx, rx) = mpsc::sync_channel(depth);
        let dir = Direction {
            stream,
            from,
            to,
            seed: seed ^ stream as u64,
            published: published.clone(),
            conn: conn.clone(),
        };
        (dir, tx, rx)
    }

    /// The toxics of this direction that act on this session.
    fn active(
        &self,
        drawn: &mut HashMap<String, (Toxic, bool)>,
        rng: &mut Xoshiro256PlusPlus,
    ) -> Vec<Toxic> {
        match self.published.toxics.lock() {
            Ok(t) => reactor::active(self.stream, drawn, rng, &t),
            Err(_) => Vec::new(),
        }
    }

    /// Datagrams through a [`DatagramPipe`], handed to `send` as they
    /// leave, until the session closes.
    fn pump_datagrams(self, rx: Receiver<Msg>, send: SendFn) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed);
        let mut drawn = HashMap::new();
        let mut seen = self.published.generation.load(Ordering::SeqCst);
        let toxics = self.active(&mut drawn, &mut rng);
        let Ok(mut pipe) = DatagramPipe::new(&toxics, self.from, self.to, self.seed) else {
            self.conn.close();
            return;
        };
        let mut out = Vec::new();
        while !self.conn.closed.load(Ordering::SeqCst) {
            let wait = wait_for(pipe.next_wake());
            let msg = rx.recv_timeout(wait);
            let t = now();
            if let Ok(Msg::Data(d)) = msg {
                self.published.count(self.stream, 0, d.len());
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
                self.published.count(self.stream, 1, d.len());
                send(&d);
            }
        }
    }
}
