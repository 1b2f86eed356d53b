//! Web page loads: one HTML page, then N objects, over HTTP/1.1 with up to
//! six parallel connections, or over one multiplexed (HTTP/2-like)
//! connection, with or without a TLS handshake first.
//!
//! # What a load is
//!
//! A load starts when the browser asks for the page and ends when the last
//! byte of the last object has been read. The page's objects are discovered
//! only once the whole page has arrived (the browser parses it), so a load is
//! at least: connection set-up, one round trip for the page, then the
//! objects.
//!
//! - **HTTP/1.1** (`multiplexed = false`): no pipelining, so a connection
//!   carries one request/response at a time. The page goes over one
//!   connection; when it has arrived, every object is queued, each idle
//!   connection takes the next one, and more connections are opened (up to
//!   `connections`, browsers' 6 per host) while objects are waiting. With
//!   small objects every object costs a round trip, so N objects take about
//!   N / connections round trips.
//! - **Multiplexed** (`multiplexed = true`): one connection; after the page,
//!   every object request is sent at once and the server answers them back
//!   to back, as HTTP/2 does. Requests after a connection's first are
//!   [`HPACK_REQUEST_BYTES`] long instead of `request` bytes: HTTP/2's header
//!   compression sends headers the connection has already carried as table
//!   indices, leaving little more than the path. The objects then arrive as
//!   fast as the server's congestion window opens (slow start: a few round
//!   trips for a few hundred kilobytes).
//! - **Handshake** (`handshake = true`): a TLS 1.2 handshake costs two round
//!   trips on every new connection after TCP's own, modelled as two small
//!   exchanges ([`TLS_FLIGHTS`]): ClientHello (~300 bytes) answered by the
//!   server's certificate flight (~3000 bytes), then the client's key
//!   exchange and Finished (~100) answered by the server's Finished (~100).
//! - **Warm or cold** (`warm`): a cold load opens new connections (TCP, then
//!   TLS) and closes them at its end; warm loads reuse the connections of
//!   the loads before, as a browser does when the page is loaded again while
//!   its connections to the site are still open. With `warm = true` the first
//!   load only opens the connections (a warm-up, not counted) and every load
//!   after it is measured.
//!
//! Loads repeat (`repeat` measured loads) at most every `interval`, never
//! overlapping: the next one starts at the later of the previous start plus
//! `interval` and the previous end.
//!
//! # How the server knows what to answer
//!
//! Payload bytes are never materialized in the simulator, so a request
//! cannot carry its URL. Instead the client posts every exchange (request
//! size, response size) in a [`Directory`] shared with the server, keyed by
//! the connection's (client address, client port, server port), *before* it
//! writes the request. The server reads its byte stream, and each time the
//! bytes read since the last answered request cover the next posted request,
//! it writes that exchange's response. That is exactly what a real server
//! does with a URL (look up the object, send it), minus the parsing; what the
//! shortcut cannot model is a client whose requests do not reach the server
//! in order, which TCP rules out anyway. The directory is process memory
//! shared by two simulated hosts (an `Arc<Mutex<..>>`, so a world stays
//! `Send`); it carries sizes only, never timing.
//!
//! Not modelled: DNS, request prioritization, server think time, response
//! headers beyond the object sizes given (sizes are bytes on the stream),
//! HTTP/2 flow control and framing, TLS record overhead, TLS 1.3 (one round
//! trip) and session resumption, 0-RTT, connection coalescing.

use crate::tcp::TcpConfig;
use sluice_core::time::{Duration, Time};
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

/// Bytes of an HTTP/1.1 request (or a connection's first HTTP/2 request):
/// request line, Host, User-Agent, Accept*, a cookie or two.
pub const REQUEST_BYTES: u64 = 400;
/// Bytes of an HTTP/2 request after a connection's first: HPACK indexes the
/// repeated headers, leaving the path, and a 9-byte frame header.
pub const HPACK_REQUEST_BYTES: u64 = 50;
/// The TLS 1.2 handshake as two exchanges `(client bytes, server bytes)`:
/// ClientHello / ServerHello + certificate chain + ServerHelloDone, then
/// ClientKeyExchange + ChangeCipherSpec + Finished / ChangeCipherSpec + Finished.
pub const TLS_FLIGHTS: [Exchange; 2] = [
    Exchange {
        request: 300,
        response: 3000,
    },
    Exchange {
        request: 100,
        response: 100,
    },
];

/// One request and the size of its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// Bytes the client writes.
    pub request: u64,
    /// Bytes the server writes back once it has read the whole request.
    pub response: u64,
}

/// A connection as the directory knows it: (client address, client port,
/// server port).
pub type ConnKey = (Ipv4Addr, u16, u16);

/// The exchanges clients have posted for their connections, in order (see
/// the module documentation).
#[derive(Clone, Debug, Default)]
pub struct Directory(Arc<Mutex<BTreeMap<ConnKey, VecDeque<Exchange>>>>);

impl Directory {
    fn with<R>(&self, f: impl FnOnce(&mut BTreeMap<ConnKey, VecDeque<Exchange>>) -> R) -> R {
        // A poisoned lock only means another thread panicked mid-update; the
        // map itself is always consistent (single push/pop operations).
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut map)
    }

    /// The client is about to write `ex.request` bytes on connection `key`.
    pub fn post(&self, key: ConnKey, ex: Exchange) {
        self.with(|m| m.entry(key).or_default().push_back(ex));
    }

    /// The next exchange of `key` if its request fits in `unread` bytes.
    pub fn take(&self, key: ConnKey, unread: u64) -> Option<Exchange> {
        self.with(|m| {
            let q = m.get_mut(&key)?;
            if q.front()?.request > unread {
                return None;
            }
            let ex = q.pop_front();
            if q.is_empty() {
                m.remove(&key);
            }
            ex
        })
    }

    /// Exchanges posted and not yet answered, over all connections.
    pub fn pending(&self) -> usize {
        self.with(|m| m.values().map(VecDeque::len).sum())
    }
}

/// The server's side of one accepted connection.
#[derive(Clone, Debug)]
pub struct ServerConn {
    dir: Directory,
    key: ConnKey,
    /// Request bytes already answered.
    consumed: u64,
}

impl ServerConn {
    /// A connection from `client`:`client_port` to our `port`.
    pub fn new(dir: Directory, client: Ipv4Addr, client_port: u16, port: u16) -> Self {
        ServerConn {
            dir,
            key: (client, client_port, port),
            consumed: 0,
        }
    }

    /// The application has read `bytes_read` bytes in all; returns the
    /// response bytes to write for the requests completed since the last call.
    pub fn on_read(&mut self, bytes_read: u64) -> u64 {
        let mut out = 0;
        while let Some(ex) = self
            .dir
            .take(self.key, bytes_read.saturating_sub(self.consumed))
        {
            self.consumed += ex.request;
            out += ex.response;
        }
        out
    }
}

/// What a web client needs from its host: TCP connections to the server.
pub trait Sockets {
    /// Open a connection to the server now (SYN); returns its handle, or
    /// `None` when the client has no port left for it.
    fn connect(&mut self, now: Time) -> Option<usize>;
    /// Has the TCP handshake of `conn` completed?
    fn is_established(&self, conn: usize) -> bool;
    /// Bytes the application has read from `conn` in all.
    fn bytes_read(&self, conn: usize) -> u64;
    /// Write `bytes` on `conn`.
    fn write(&mut self, conn: usize, bytes: u64);
    /// Close `conn` (FIN after what was written).
    fn close(&mut self, conn: usize);
    /// The directory key of `conn`.
    fn key(&self, conn: usize) -> ConnKey;
}

/// A web workload's parameters.
#[derive(Clone, Debug)]
pub struct WebParams {
    /// The server.
    pub dst: Ipv4Addr,
    /// The server's port.
    pub port: u16,
    /// TOS byte of the client's packets.
    pub tos: u8,
    /// Bytes of the HTML page.
    pub page: u64,
    /// Bytes of every object the page refers to.
    pub objects: Vec<u64>,
    /// Most parallel connections (HTTP/1.1); a multiplexed load uses one.
    pub connections: usize,
    /// One multiplexed connection (HTTP/2) instead of HTTP/1.1.
    pub multiplexed: bool,
    /// A TLS handshake (2 round trips) on every new connection.
    pub handshake: bool,
    /// Keep connections between loads; the first load is an uncounted warm-up.
    pub warm: bool,
    /// Loads to measure.
    pub repeat: u32,
    /// Least time between the starts of two loads.
    pub interval: Duration,
    /// Bytes of a request.
    pub request: u64,
    /// First load.
    pub start: Time,
    /// No load starts from here on.
    pub stop: Time,
    /// Client endpoint configuration.
    pub cfg: TcpConfig,
    /// The client's ports, first and last, reserved for the connections
    /// its loads may open.
    pub client_ports: (u16, u16),
}

/// What a pending exchange is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum What {
    Tls,
    Page,
    Object,
}

/// One of the client's connections.
#[derive(Clone, Debug)]
struct Channel {
    conn: usize,
    /// Exchanges assigned, not yet sent.
    queue: VecDeque<(Exchange, What)>,
    /// Sent, waiting for the response: (read offset at its last byte, what).
    inflight: VecDeque<(u64, What)>,
    /// Response bytes asked for so far on this connection.
    expected: u64,
    /// HTTP requests sent so far (the first one is never compressed).
    requests: u64,
}

impl Channel {
    fn carries_http(&self) -> bool {
        self.queue.iter().any(|(_, w)| *w != What::Tls)
            || self.inflight.iter().any(|(_, w)| *w != What::Tls)
    }

    fn may_send(&self, what: What, multiplexed: bool) -> bool {
        match what {
            What::Tls => self.inflight.is_empty(),
            _ if multiplexed => self.inflight.iter().all(|(_, w)| *w != What::Tls),
            _ => self.inflight.is_empty(),
        }
    }
}

/// The load in progress.
#[derive(Clone, Debug)]
struct Load {
    started: Time,
    counted: bool,
    /// Known and not yet assigned to a connection: (size, what).
    to_request: VecDeque<(u64, What)>,
    page_done: bool,
    objects_done: usize,
}

/// One measured load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadSample {
    /// When it started.
    pub start: Time,
    /// How long it took.
    pub took: Duration,
}

/// A browser loading one page, again and again.
#[derive(Clone, Debug)]
pub struct WebApp {
    /// Parameters.
    pub params: WebParams,
    /// Shared with the server (see the module documentation).
    pub dir: Directory,
    channels: Vec<Channel>,
    load: Option<Load>,
    loads_started: u32,
    next_load_at: Time,
    /// Measured loads, in order.
    pub samples: Vec<LoadSample>,
}

impl WebApp {
    /// A client for `params`, talking to the server through `dir`.
    pub fn new(params: WebParams, dir: Directory) -> Self {
        let next_load_at = params.start;
        WebApp {
            params,
            dir,
            channels: vec![],
            load: None,
            loads_started: 0,
            next_load_at,
            samples: vec![],
        }
    }

    /// Loads to run in all (the warm-up included).
    fn total_loads(&self) -> u32 {
        self.params.repeat + u32::from(self.params.warm)
    }

    /// Is a load under way (started, not finished)?
    pub fn loading(&self) -> bool {
        self.load.is_some()
    }

    /// When the first load starts.
    pub fn first_event(&self) -> Time {
        self.params.start
    }

    /// The load timer fired: start a load if one is due. Returns the
    /// connections written to or opened.
    pub fn on_timer(&mut self, now: Time, socks: &mut dyn Sockets) -> Vec<usize> {
        let due = self.load.is_none()
            && self.loads_started < self.total_loads()
            && now >= self.next_load_at
            && now < self.params.stop;
        if !due {
            return vec![];
        }
        let counted = !(self.params.warm && self.loads_started == 0);
        self.loads_started += 1;
        let mut to_request = VecDeque::new();
        to_request.push_back((self.params.page, What::Page));
        self.load = Some(Load {
            started: now,
            counted,
            to_request,
            page_done: false,
            objects_done: 0,
        });
        self.dispatch(now, socks)
    }

    /// Something happened on one of our connections (data read, handshake
    /// done). Returns the connections written to or opened, and when the
    /// next load is due if this one just finished.
    pub fn on_progress(
        &mut self,
        now: Time,
        socks: &mut dyn Sockets,
    ) -> (Vec<usize>, Option<Time>) {
        for ch in &mut self.channels {
            let read = socks.bytes_read(ch.conn);
            while ch.inflight.front().is_some_and(|(end, _)| *end <= read) {
                let (_, what) = ch.inflight.pop_front().expect("front exists");
                let Some(load) = &mut self.load else { continue };
                match what {
                    What::Tls => {}
                    What::Page => {
                        load.page_done = true;
                        load.to_request
                            .extend(self.params.objects.iter().map(|&s| (s, What::Object)));
                    }
                    What::Object => load.objects_done += 1,
                }
            }
        }
        let done = self.load.as_ref().is_some_and(|l| {
            l.page_done && l.to_request.is_empty() && l.objects_done == self.params.objects.len()
        });
        if !done {
            return (self.dispatch(now, socks), None);
        }
        let load = self.load.take().expect("a load is under way");
        if load.counted {
            self.samples.push(LoadSample {
                start: load.started,
                took: now - load.started,
            });
        }
        if !self.params.warm {
            for ch in self.channels.drain(..) {
                socks.close(ch.conn);
            }
        }
        self.next_load_at = (load.started + self.params.interval).max(now);
        let next = (self.loads_started < self.total_loads()).then_some(self.next_load_at);
        (vec![], next)
    }

    /// Assign known requests to connections (opening connections as
    /// needed), then send whatever each connection may send now.
    fn dispatch(&mut self, now: Time, socks: &mut dyn Sockets) -> Vec<usize> {
        let mut touched = vec![];
        if let Some(load) = &mut self.load {
            let p = &self.params;
            let max_conns = if p.multiplexed {
                1
            } else {
                p.connections.max(1)
            };
            while !load.to_request.is_empty() {
                let idle = match self
                    .channels
                    .iter()
                    .position(|c| p.multiplexed || !c.carries_http())
                {
                    Some(i) => i,
                    None if self.channels.len() < max_conns => {
                        let Some(conn) = socks.connect(now) else {
                            break; // no port left: the requests wait
                        };
                        touched.push(conn);
                        let mut ch = Channel {
                            conn,
                            queue: VecDeque::new(),
                            inflight: VecDeque::new(),
                            expected: 0,
                            requests: 0,
                        };
                        if p.handshake {
                            ch.queue
                                .extend(TLS_FLIGHTS.iter().map(|&ex| (ex, What::Tls)));
                        }
                        self.channels.push(ch);
                        self.channels.len() - 1
                    }
                    None => break,
                };
                let ch = &mut self.channels[idle];
                let (size, what) = load.to_request.pop_front().expect("not empty");
                let http_before =
                    ch.requests + ch.queue.iter().filter(|(_, w)| *w != What::Tls).count() as u64;
                let request = if p.multiplexed && http_before > 0 {
                    HPACK_REQUEST_BYTES
                } else {
                    p.request
                };
                ch.queue.push_back((
                    Exchange {
                        request,
                        response: size,
                    },
                    what,
                ));
            }
        }
        for ch in &mut self.channels {
            if !socks.is_established(ch.conn) {
                continue;
            }
            while let Some(&(ex, what)) = ch.queue.front() {
                if !ch.may_send(what, self.params.multiplexed) {
                    break;
                }
                ch.queue.pop_front();
                self.dir.post(socks.key(ch.conn), ex);
                socks.write(ch.conn, ex.request);
                ch.expected += ex.response;
                ch.inflight.push_back((ch.expected, what));
                if what != What::Tls {
                    ch.requests += 1;
                }
                if !touched.contains(&ch.conn) {
                    touched.push(ch.conn);
                }
            }
        }
        touched
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Connections whose every byte arrives at once: a test double that
    /// answers through the directory like the server would.
    #[derive(Default)]
    struct Loopback {
        read: Vec<u64>,
        written: Vec<u64>,
        server: Vec<Option<ServerConn>>,
        closed: Vec<bool>,
        dir: Directory,
    }

    impl Sockets for Loopback {
        fn connect(&mut self, _now: Time) -> Option<usize> {
            self.read.push(0);
            self.written.push(0);
            self.closed.push(false);
            let c = self.read.len() - 1;
            self.server.push(Some(ServerConn::new(
                self.dir.clone(),
                Ipv4Addr::LOCALHOST,
                c as u16,
                80,
            )));
            Some(c)
        }
        fn is_established(&self, _conn: usize) -> bool {
            true
        }
        fn bytes_read(&self, conn: usize) -> u64 {
            self.read[conn]
        }
        fn write(&mut self, conn: usize, bytes: u64) {
            self.written[conn] += bytes;
        }
        fn close(&mut self, conn: usize) {
            self.closed[conn] = true;
        }
        fn key(&self, conn: usize) -> ConnKey {
            (Ipv4Addr::LOCALHOST, conn as u16, 80)
        }
    }

    impl Loopback {
        /// Deliver every request to the server and every answer back.
        fn round_trip(&mut self) {
            for c in 0..self.read.len() {
                let w = self.written[c];
                if let Some(s) = &mut self.server[c] {
                    self.read[c] += s.on_read(w);
                }
            }
        }
    }

    fn params(objects: usize, multiplexed: bool, handshake: bool) -> WebParams {
        WebParams {
            dst: Ipv4Addr::LOCALHOST,
            port: 80,
            tos: 0,
            page: 10_000,
            objects: vec![1000; objects],
            connections: 6,
            multiplexed,
            handshake,
            warm: false,
            repeat: 1,
            interval: Duration::ZERO,
            request: REQUEST_BYTES,
            start: Time::ZERO,
            stop: Time(u64::MAX),
            cfg: TcpConfig::default(),
            client_ports: (32768, 60999),
        }
    }

    /// Round trips until the load is done, counting each.
    fn rounds(app: &mut WebApp, net: &mut Loopback) -> u32 {
        let dir = app.dir.clone();
        net.dir = dir;
        app.on_timer(Time::ZERO, net);
        for round in 1..1000 {
            net.round_trip();
            app.on_progress(Time(round), net);
            if !app.loading() {
                return round as u32;
            }
        }
        panic!("the load never finished");
    }

    #[test]
    fn http11_takes_a_round_per_six_objects_after_the_page() {
        let mut net = Loopback::default();
        let mut app = WebApp::new(params(360, false, false), Directory::default());
        assert_eq!(rounds(&mut app, &mut net), 1 + 60);
        assert_eq!(net.read.len(), 6);
        assert_eq!(net.read.iter().sum::<u64>(), 10_000 + 360 * 1000);
        assert!(
            net.closed.iter().all(|c| *c),
            "a cold load closes its connections"
        );
        assert_eq!(app.samples.len(), 1);
    }

    #[test]
    fn multiplexing_sends_every_request_at_once_with_compressed_headers() {
        let mut net = Loopback::default();
        let mut app = WebApp::new(params(360, true, true), Directory::default());
        assert_eq!(rounds(&mut app, &mut net), 2 + 1 + 1);
        assert_eq!(net.read.len(), 1);
        let requests = 300 + 100 + REQUEST_BYTES + 360 * HPACK_REQUEST_BYTES;
        assert_eq!(net.written[0], requests);
        assert_eq!(net.read[0], 3000 + 100 + 10_000 + 360 * 1000);
        assert_eq!(app.dir.pending(), 0);
    }

    #[test]
    fn tls_costs_two_exchanges_per_new_connection() {
        let mut net = Loopback::default();
        let mut app = WebApp::new(params(12, false, true), Directory::default());
        // page: 2 + 1; then five new connections need 2 more before their
        // first object, while the first connection serves objects meanwhile.
        let r = rounds(&mut app, &mut net);
        assert_eq!(
            r,
            3 + 2 + 2,
            "12 objects over 6 connections after their handshakes"
        );
    }

    #[test]
    fn warm_loads_reuse_connections_and_skip_the_warm_up() {
        let mut net = Loopback::default();
        let mut p = params(6, false, true);
        p.warm = true;
        p.repeat = 2;
        let mut app = WebApp::new(p, Directory::default());
        net.dir = app.dir.clone();
        let mut t = 0;
        let mut next = Some(Time::ZERO);
        while let Some(at) = next.take() {
            app.on_timer(at.max(Time(t)), &mut net);
            while app.loading() {
                t += 1;
                net.round_trip();
                next = app.on_progress(Time(t), &mut net).1;
            }
        }
        assert_eq!(net.read.len(), 6, "connections opened once");
        assert_eq!(app.samples.len(), 2);
        // warm: page (1) + objects (1), no handshakes.
        assert!(
            app.samples.iter().all(|s| s.took == Duration(2)),
            "{:?}",
            app.samples
        );
    }
}
