//! The proxies as the API holds them, and their sockets: each enabled
//! proxy runs event loops on threads of their own, as many whatever the
//! number of its connections — a few for TCP ([`crate::reactor`]), one for
//! UDP ([`crate::udp`]).
//!
//! A TCP connection drives one [`Pipe`] per direction on the monotonic
//! clock, reading its source only while the pipe has room, so that a slow
//! toxic slows the sender through TCP's flow control. A toxic added,
//! changed or removed reaches every open connection and session at once
//! (the event loop is woken and each pipe rebuilds its stages, see
//! [`Pipe::set_toxics`]); whether a toxic acts on a connection is drawn
//! once per connection against its toxicity. Stopping a proxy (disabled,
//! deleted, moved) closes its listener and every connection, and returns
//! once they are closed.

use crate::event_loop::Handle;
#[cfg(doc)]
use crate::pipe::Pipe;
use crate::reactor;
use crate::toxic::{Stream, Toxic};
use crate::udp;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sluice_core::time::Time;
use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Now on the monotonic clock, as sluice-core time.
pub(crate) fn now() -> Time {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    Time(EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64)
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
    /// The proxy's event loop (TCP or UDP), while it listens.
    reactor: Option<Handle>,
}

/// A proxy's toxics as its connections see them: a copy published at every
/// change, with a generation number, so that nothing carrying bytes needs
/// the proxy's lock to follow the changes (stopping a proxy waits for its
/// event loop or its UDP pumps while holding that lock).
#[derive(Default)]
pub(crate) struct Published {
    generation: AtomicU64,
    toxics: Mutex<Vec<Toxic>>,
    /// Bytes received and sent, upstream then downstream (`/metrics`).
    bytes: [[AtomicU64; 2]; 2],
}

impl Published {
    /// Count `n` bytes of `stream` received (`what` 0) or sent (1).
    pub(crate) fn count(&self, stream: Stream, what: usize, n: usize) {
        self.bytes[stream as usize][what].fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The toxics as last published.
    pub(crate) fn toxics(&self) -> Vec<Toxic> {
        self.toxics.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// The toxics, if they were published again since generation `seen`
    /// (which becomes the present one).
    pub(crate) fn newer(&self, seen: &mut u64) -> Option<Vec<Toxic>> {
        let g = self.generation.load(Ordering::SeqCst);
        if g == *seen {
            return None;
        }
        *seen = g;
        Some(self.toxics())
    }

    /// The present generation and its toxics.
    pub(crate) fn current(&self) -> (u64, Vec<Toxic>) {
        (self.generation.load(Ordering::SeqCst), self.toxics())
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
    }
}

/// Start listening for `proxy` (if enabled and not yet listening); its
/// `listen` becomes the bound address.
pub fn start(shared: &Shared) -> Result<(), String> {
    let mut p = shared.lock().map_err(|_| "state poisoned")?;
    if !p.enabled || p.reactor.is_some() {
        return Ok(());
    }
    let (addr, handle) = open(&p).map_err(|e| e.to_string())?;
    p.reactor = Some(handle);
    p.listen = addr.to_string();
    Ok(())
}

/// Bind `p`'s listening socket and start its event loops: the bound
/// address, and their handle.
fn open(p: &Proxy) -> io::Result<(SocketAddr, Handle)> {
    let (upstream, published) = (p.upstream.clone(), p.published.clone());
    if p.udp {
        let socket = UdpSocket::bind(&p.listen)?;
        socket.set_nonblocking(true)?;
        let addr = socket.local_addr()?;
        return Ok((addr, udp::spawn(socket, upstream, published)?));
    }
    let no_address = || io::Error::other(format!("{}: no address", p.listen));
    let want = p.listen.to_socket_addrs()?.next().ok_or_else(no_address)?;
    let listener = reactor::listen(want)?;
    let addr = listener.local_addr()?;
    Ok((addr, reactor::spawn(listener, upstream, published)?))
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

/// Which toxics act on one direction of a connection (or a UDP session):
/// each is drawn once against its toxicity, and again when it changes,
/// from the direction's own generator.
pub(crate) struct Draws {
    stream: Stream,
    drawn: HashMap<String, (Toxic, bool)>,
    rng: Xoshiro256PlusPlus,
}

impl Draws {
    /// The draws of direction `stream` of a connection seeded with `seed`,
    /// the seed of its pipe (the connection's, told apart by direction),
    /// and those of `toxics` that act on it.
    pub(crate) fn new(stream: Stream, seed: u64, toxics: &[Toxic]) -> (Draws, u64, Vec<Toxic>) {
        let seed = seed ^ stream as u64;
        let mut draws = Draws {
            stream,
            drawn: HashMap::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        };
        let on = draws.active(toxics);
        (draws, seed, on)
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
