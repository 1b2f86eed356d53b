//! A simulated host's stack above IP: it answers pings, runs the workload
//! applications (ping, constant-bit-rate UDP, bulk TCP, web page loads), and
//! counts what it receives. TCP connections are [`crate::tcp`] endpoints; the
//! host demultiplexes segments by (remote address, remote port, local port),
//! turns a SYN to a listening port into a new connection, and after every
//! input drains `poll_transmit` and re-arms the connection's timer, as the
//! TCP model asks. Connections that belong to a web client or server
//! ([`crate::web`]) hand their progress to it after every input, and it may
//! write on them or open new ones.

use crate::ip::{icmp_echo, parse_icmp_echo, parse_udp, udp, Ipv4Info, ETH_HLEN};
use crate::tcp::{Flags, Ipv4Meta, Segment, TcpConfig, TcpConnection};
use crate::web::{ConnKey, Directory, ServerConn, Sockets, WebApp};
use sluice_core::packet::ETH_P_IP;
use sluice_core::packet::{Gso, GsoKind, Packet, Skb};
use sluice_core::time::{Duration, Time};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;

/// Width of the bins throughput is recorded in.
pub const BIN: Duration = Duration::from_millis(100);

/// A timer a host asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostEvent {
    /// Application `app` has something to do.
    App(usize),
    /// TCP connection `conn`'s timer, armed for the given time.
    Tcp(usize, Time),
}

/// What a host wants done: packets to send now, timers to set.
#[derive(Debug, Default)]
pub struct Output {
    /// Packets to transmit.
    pub packets: Vec<Packet>,
    /// `(when, what)` timers.
    pub timers: Vec<(Time, HostEvent)>,
    /// Packets received and done with, kept so that the next segments sent
    /// reuse their boxes and buffers instead of allocating (at most
    /// [`SPARE_PACKETS`]).
    spare: Vec<Packet>,
}

/// How many received packets [`Output`] keeps for reuse.
const SPARE_PACKETS: usize = 64;

impl Output {
    /// Keep a packet done with for [`Output::blank_packet`].
    fn recycle(&mut self, pkt: Packet) {
        if self.spare.len() < SPARE_PACKETS {
            self.spare.push(pkt);
        }
    }

    /// A packet as `Packet::default()` makes it, with no bytes, from the
    /// spares if there is one (its buffer's capacity kept).
    fn blank_packet(&mut self) -> Packet {
        let Some(mut pkt) = self.spare.pop() else {
            return Packet::default();
        };
        let mut data = std::mem::take(&mut pkt.data);
        data.clear();
        *pkt = Skb {
            data,
            ..Skb::default()
        };
        pkt
    }
}

/// `ping -i INTERVAL DST`.
#[derive(Clone, Debug)]
pub struct PingApp {
    /// Destination.
    pub dst: Ipv4Addr,
    /// Time between requests.
    pub interval: Duration,
    /// First request.
    pub start: Time,
    /// No requests from here on.
    pub stop: Time,
    /// ICMP payload bytes (ping's default 56).
    pub size: u16,
    /// TOS byte of the requests.
    pub tos: u16,
    /// Identifier.
    pub id: u16,
    next_seq: u16,
    outstanding: BTreeMap<u16, Time>,
    /// `(sent at, round-trip time)` of every answered request.
    pub rtts: Vec<(Time, Duration)>,
    /// Requests sent.
    pub sent: u64,
}

impl PingApp {
    /// A ping from `start` to `stop` every `interval`.
    pub fn new(dst: Ipv4Addr, interval: Duration, start: Time, stop: Time, id: u16) -> Self {
        PingApp {
            dst,
            interval,
            start,
            stop,
            size: 56,
            tos: 0,
            id,
            next_seq: 1,
            outstanding: BTreeMap::new(),
            rtts: vec![],
            sent: 0,
        }
    }
}

/// Constant-bit-rate UDP (`iperf -u`, VoIP-like, or a flood).
#[derive(Clone, Debug)]
pub struct UdpApp {
    /// Destination.
    pub dst: Ipv4Addr,
    /// Source and destination ports.
    pub ports: (u16, u16),
    /// Rate in bits per second of IP packets (`iperf -b` counts payload; we count the IP length).
    pub rate_bps: u64,
    /// Payload bytes per datagram.
    pub size: u16,
    /// TOS byte.
    pub tos: u8,
    /// First datagram.
    pub start: Time,
    /// No datagrams from here on.
    pub stop: Time,
    /// Datagrams sent.
    pub sent: u64,
}

/// A bulk TCP sender (scp, an upload): opens a connection at `start` and
/// keeps its send buffer full until `bytes` are written (or forever).
#[derive(Clone, Debug)]
pub struct TcpApp {
    /// Destination.
    pub dst: Ipv4Addr,
    /// Local and remote ports.
    pub ports: (u16, u16),
    /// TOS byte.
    pub tos: u8,
    /// When to connect.
    pub start: Time,
    /// Bytes to send; `None`: unlimited.
    pub bytes: Option<u64>,
    /// Endpoint configuration (buffers, congestion control).
    pub cfg: TcpConfig,
    /// The connection, once opened.
    pub conn: Option<usize>,
}

/// A workload application on a host.
#[derive(Clone, Debug)]
pub enum App {
    /// ICMP echo requests.
    Ping(PingApp),
    /// A UDP stream.
    Udp(UdpApp),
    /// A bulk TCP sender.
    Tcp(TcpApp),
    /// A browser loading a page.
    Web(WebApp),
}

/// Whose a TCP connection is, beyond the byte counts it moves.
#[derive(Clone, Debug)]
pub enum Role {
    /// A bulk sender or receiver: nothing to do on progress.
    Bulk,
    /// One of web app `app`'s connections.
    WebClient(usize),
    /// Accepted by a web server.
    WebServer(ServerConn),
}

/// A TCP connection of this host.
#[derive(Debug)]
pub struct Conn {
    /// The endpoint.
    pub tcp: TcpConnection,
    /// The peer's address.
    pub remote: Ipv4Addr,
    /// TOS byte of our segments.
    pub tos: u8,
    /// Bytes the application still wants to write (`None`: unlimited).
    pub to_write: Option<u64>,
    /// The time its timer event is scheduled for.
    timer_at: Option<Time>,
    /// Bytes read so far (to bin deliveries).
    read_seen: u64,
    /// Who uses it.
    pub role: Role,
}

impl Conn {
    fn new(
        tcp: TcpConnection,
        remote: Ipv4Addr,
        tos: u8,
        to_write: Option<u64>,
        role: Role,
    ) -> Self {
        Conn {
            tcp,
            remote,
            tos,
            to_write,
            timer_at: None,
            read_seen: 0,
            role,
        }
    }
}

pub use crate::limits::EPHEMERAL;

/// A host's ephemeral ports of one protocol (TCP and UDP have a table each,
/// as in Linux). Ports are handed out in order from the low end of
/// [`EPHEMERAL`] and never reused within a run, so no two flows of a host
/// share one; Linux starts from a hashed offset and reuses a port once its
/// connection is gone (after TIME_WAIT), which changes which port a flow
/// gets, not whether it gets its own.
#[derive(Clone, Debug)]
pub struct EphemeralPorts {
    /// The next port to hand out (past the range: none left).
    next: u32,
}

impl Default for EphemeralPorts {
    fn default() -> Self {
        EphemeralPorts {
            next: u32::from(EPHEMERAL.0),
        }
    }
}

impl EphemeralPorts {
    /// Ports not yet handed out.
    pub fn left(&self) -> u64 {
        u64::from((u32::from(EPHEMERAL.1) + 1).saturating_sub(self.next))
    }

    /// `n` consecutive ports, first and last; `None` (and nothing taken)
    /// if fewer than `n` are left or `n` is 0.
    pub fn reserve(&mut self, n: u64) -> Option<(u16, u16)> {
        if n == 0 || n > self.left() {
            return None;
        }
        let first = self.next as u16;
        self.next += n as u32;
        Some((first, (self.next - 1) as u16))
    }
}

/// Connections by (remote address, remote port, local port), the last one
/// found kept at hand: a host's segments come in runs of one connection's,
/// and comparing the tuple once costs less than comparing it down a tree.
#[derive(Debug, Default)]
struct Demux {
    map: BTreeMap<(Ipv4Addr, u16, u16), usize>,
    last: Option<((Ipv4Addr, u16, u16), usize)>,
}

impl Demux {
    fn get(&mut self, key: (Ipv4Addr, u16, u16)) -> Option<usize> {
        if let Some((k, c)) = self.last {
            if k == key {
                return Some(c);
            }
        }
        let c = *self.map.get(&key)?;
        self.last = Some((key, c));
        Some(c)
    }

    fn insert(&mut self, key: (Ipv4Addr, u16, u16), c: usize) {
        self.map.insert(key, c);
        self.last = None;
    }
}

/// A web app's view of its host's connections.
struct HostSockets<'a> {
    addr: Ipv4Addr,
    app: usize,
    dst: Ipv4Addr,
    port: u16,
    tos: u8,
    cfg: TcpConfig,
    conns: &'a mut Vec<Conn>,
    demux: &'a mut Demux,
    /// The app's reserved ports not yet used: (next, last).
    ports: &'a mut (u32, u16),
}

impl Sockets for HostSockets<'_> {
    fn connect(&mut self, now: Time) -> Option<usize> {
        // The next of the ports reserved for this app (see run.rs).
        let (next, last) = *self.ports;
        if next > u32::from(last) {
            return None;
        }
        let port = next as u16;
        self.ports.0 += 1;
        let mut tcp = TcpConnection::new(self.cfg.clone(), port, self.port);
        tcp.connect(now);
        let c = self.conns.len();
        self.demux.insert((self.dst, self.port, port), c);
        self.conns.push(Conn::new(
            tcp,
            self.dst,
            self.tos,
            Some(0),
            Role::WebClient(self.app),
        ));
        Some(c)
    }

    fn is_established(&self, conn: usize) -> bool {
        self.conns.get(conn).is_some_and(|c| c.tcp.is_established())
    }

    fn bytes_read(&self, conn: usize) -> u64 {
        self.conns.get(conn).map_or(0, |c| c.tcp.stats().bytes_read)
    }

    fn write(&mut self, conn: usize, bytes: u64) {
        if let Some(c) = self.conns.get_mut(conn) {
            *c.to_write.get_or_insert(0) += bytes;
        }
    }

    fn close(&mut self, conn: usize) {
        if let Some(c) = self.conns.get_mut(conn) {
            c.tcp.close();
        }
    }

    fn key(&self, conn: usize) -> ConnKey {
        self.conns.get(conn).map_or((self.addr, 0, self.port), |c| {
            (self.addr, c.tcp.local_port(), c.tcp.remote_port())
        })
    }
}

/// What arrived for one flow, binned over time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RxFlow {
    /// Packets received.
    pub packets: u64,
    /// Bytes received (IP length).
    pub bytes: u64,
    /// Bytes received per [`BIN`], by bin index.
    pub bins: BTreeMap<u64, u64>,
}

impl RxFlow {
    /// Count `bytes` received at `now`.
    pub fn record(&mut self, now: Time, bytes: u64) {
        self.packets += 1;
        self.bytes += bytes;
        let bin = now.0 / BIN.0;
        // Time moves on, so the bin is nearly always the last one: found
        // at the end of the map without comparing keys down the tree.
        if let Some(mut last) = self.bins.last_entry() {
            if *last.key() == bin {
                *last.get_mut() += bytes;
                return;
            }
        }
        *self.bins.entry(bin).or_default() += bytes;
    }
}

/// A host's stack.
#[derive(Debug)]
pub struct Host {
    /// Its address.
    pub addr: Ipv4Addr,
    /// Its applications.
    pub apps: Vec<App>,
    /// UDP received, by (source address, source port, destination port).
    pub udp_rx: BTreeMap<(Ipv4Addr, u16, u16), RxFlow>,
    /// TCP payload delivered to applications, by (remote address, remote port, local port).
    pub tcp_rx: BTreeMap<(Ipv4Addr, u16, u16), RxFlow>,
    /// Every TCP segment that arrived (IP length, retransmissions and
    /// segments out of order included), by the same key, when asked for:
    /// what crossed the wire, which a link's capacity bounds second by
    /// second, as in-order delivery to the application is not.
    pub tcp_arrivals: Option<BTreeMap<(Ipv4Addr, u16, u16), RxFlow>>,
    /// TCP connections.
    pub conns: Vec<Conn>,
    /// Listening ports and the configuration of connections accepted there.
    pub listeners: BTreeMap<u16, TcpConfig>,
    /// Listening ports that serve web pages, with the directory of what
    /// their clients ask for (see [`crate::web`]).
    pub web_servers: BTreeMap<u16, Directory>,
    /// Connection by (remote address, remote port, local port).
    demux: Demux,
    /// Ephemeral TCP ports (bulk flows and web connections take theirs
    /// when the scenario is built).
    pub tcp_ports: EphemeralPorts,
    /// Ephemeral UDP ports.
    pub udp_ports: EphemeralPorts,
    /// Each web app's reserved TCP ports not yet used, by app index: (next, last).
    web_ports: BTreeMap<usize, (u32, u16)>,
    /// IPv4 identification counter.
    ip_id: u16,
    /// Applications stopped: no new requests, datagrams, connections or data.
    stopped: bool,
}

impl Host {
    /// A host with no applications.
    pub fn new(addr: Ipv4Addr) -> Self {
        Host {
            addr,
            apps: vec![],
            udp_rx: BTreeMap::new(),
            tcp_rx: BTreeMap::new(),
            tcp_arrivals: None,
            conns: vec![],
            listeners: BTreeMap::new(),
            web_servers: BTreeMap::new(),
            demux: Demux::default(),
            tcp_ports: EphemeralPorts::default(),
            udp_ports: EphemeralPorts::default(),
            web_ports: BTreeMap::new(),
            ip_id: 0,
            stopped: false,
        }
    }

    /// Schedule every application's first event.
    pub fn start(&mut self, _now: Time) -> Output {
        let mut out = Output::default();
        for (i, app) in self.apps.iter().enumerate() {
            let start = match app {
                App::Ping(p) => p.start,
                App::Udp(u) => u.start,
                App::Tcp(t) => t.start,
                App::Web(w) => w.first_event(),
            };
            out.timers.push((start, HostEvent::App(i)));
        }
        out
    }

    /// Stop every application: pings, UDP, web loads and new TCP data
    /// (connections still deliver what they hold).
    pub fn stop_applications(&mut self) {
        self.stopped = true;
        for c in &mut self.conns {
            c.to_write = Some(0);
        }
    }

    /// A timer fired: what to send and set is appended to `out`.
    pub fn on_event(&mut self, ev: HostEvent, now: Time, out: &mut Output) {
        let i = match ev {
            HostEvent::App(_) if self.stopped => return,
            HostEvent::App(i) => i,
            HostEvent::Tcp(c, at) => {
                self.tcp_timer(c, at, now, out);
                return;
            }
        };
        let src = self.addr;
        match self.apps.get_mut(i) {
            Some(App::Ping(p)) if now < p.stop => {
                let seq = p.next_seq;
                p.next_seq = p.next_seq.wrapping_add(1);
                p.outstanding.insert(seq, now);
                p.sent += 1;
                out.packets
                    .push(icmp_echo(src, p.dst, p.tos as u8, p.id, seq, p.size, false));
                out.timers.push((now + p.interval, ev));
            }
            Some(App::Udp(u)) if now < u.stop && u.rate_bps > 0 => {
                let pkt = udp(src, u.ports.0, u.dst, u.ports.1, u.tos, u.size);
                let bits = (u.size as u64 + 28) * 8;
                u.sent += 1;
                out.packets.push(pkt);
                let gap =
                    Duration((bits as u128 * 1_000_000_000 / u.rate_bps as u128).max(1) as u64);
                out.timers.push((now + gap, ev));
            }
            Some(App::Tcp(t)) if t.conn.is_none() => {
                let mut tcp = TcpConnection::new(t.cfg.clone(), t.ports.0, t.ports.1);
                tcp.connect(now);
                t.conn = Some(self.conns.len());
                let (dst, tos, bytes) = (t.dst, t.tos, t.bytes);
                let c = self.add_conn(Conn::new(tcp, dst, tos, bytes, Role::Bulk));
                self.service(c, now, out);
            }
            Some(App::Web(_)) => {
                let touched = self.with_web(i, |app, socks| app.on_timer(now, socks));
                for c in touched {
                    self.pump(c, now, out);
                }
            }
            _ => {}
        }
    }

    fn tcp_timer(&mut self, c: usize, at: Time, now: Time, out: &mut Output) {
        let Some(conn) = self.conns.get_mut(c) else {
            return;
        };
        if conn.timer_at != Some(at) {
            return; // superseded by a later arming
        }
        conn.timer_at = None;
        if conn.tcp.poll_timeout().is_some_and(|t| t <= now) {
            conn.tcp.on_timeout(now);
        }
        self.service(c, now, out);
    }

    fn add_conn(&mut self, conn: Conn) -> usize {
        let c = self.conns.len();
        self.demux.insert(
            (conn.remote, conn.tcp.remote_port(), conn.tcp.local_port()),
            c,
        );
        self.conns.push(conn);
        c
    }

    /// After any input to connection `c`: move its bytes ([`Host::pump`]),
    /// then let its owner react to what was read; the owner may write on
    /// this or other connections, which are pumped again.
    fn service(&mut self, c: usize, now: Time, out: &mut Output) {
        self.pump(c, now, out);
        if self.stopped {
            return;
        }
        let Some(conn) = self.conns.get_mut(c) else {
            return;
        };
        match &mut conn.role {
            Role::Bulk => {}
            Role::WebServer(server) => {
                let respond = server.on_read(conn.tcp.stats().bytes_read);
                if respond > 0 {
                    *conn.to_write.get_or_insert(0) += respond;
                }
                let finished = conn.to_write == Some(0) && conn.tcp.all_acked();
                if conn.tcp.peer_closed() && finished {
                    conn.tcp.close(); // the browser went away: close our side too
                }
                self.pump(c, now, out);
            }
            Role::WebClient(app) => {
                let app = *app;
                let (touched, next) = self.with_web(app, |w, socks| w.on_progress(now, socks));
                for c in touched {
                    self.pump(c, now, out);
                }
                if let Some(at) = next {
                    out.timers.push((at, HostEvent::App(app)));
                }
            }
        }
    }

    /// Run `f` on web app `app` with this host's connections as its sockets.
    fn with_web<R: Default>(
        &mut self,
        app: usize,
        f: impl FnOnce(&mut WebApp, &mut dyn Sockets) -> R,
    ) -> R {
        let Host {
            apps,
            conns,
            demux,
            web_ports,
            addr,
            ..
        } = self;
        let Some(App::Web(w)) = apps.get_mut(app) else {
            return R::default();
        };
        let (first, last) = w.params.client_ports;
        let ports = web_ports.entry(app).or_insert((u32::from(first), last));
        let mut socks = HostSockets {
            addr: *addr,
            app,
            dst: w.params.dst,
            port: w.params.port,
            tos: w.params.tos,
            cfg: w.params.cfg.clone(),
            conns,
            demux,
            ports,
        };
        f(w, &mut socks)
    }

    /// Feed the application's data to connection `c`, count what it read,
    /// send what the endpoint wants to send, re-arm its timer.
    fn pump(&mut self, c: usize, now: Time, out: &mut Output) {
        let src = self.addr;
        let Some(conn) = self.conns.get_mut(c) else {
            return;
        };
        loop {
            let space = conn.tcp.send_buffer_space();
            let want = conn.to_write.map_or(space, |left| left.min(space));
            if want == 0 {
                break;
            }
            let n = conn.tcp.write(want);
            if n == 0 {
                break;
            }
            if let Some(left) = &mut conn.to_write {
                *left -= n;
            }
        }
        let read = conn.tcp.stats().bytes_read;
        if read > conn.read_seen {
            let key = (conn.remote, conn.tcp.remote_port(), conn.tcp.local_port());
            self.tcp_rx
                .entry(key)
                .or_default()
                .record(now, read - conn.read_seen);
            conn.read_seen = read;
        }
        // Consecutive segments go out as one GSO packet of up to
        // `tso_segs` (`tso.rs`): `head` is its first segment, carrying the
        // payload of all; `last` the last one, which the next must continue.
        let mss = conn.tcp.mss;
        let mut next = conn.tcp.poll_transmit(now);
        while let Some(mut head) = next {
            let limit = if head.payload_len > 0 {
                conn.tcp.tso_segs()
            } else {
                1
            };
            let mut segs = 1u16;
            next = conn.tcp.poll_transmit(now);
            if next.is_some() && head.payload_len == mss && limit > 1 {
                let mut last = head.clone();
                while let Some(seg) =
                    next.take_if(|seg| u32::from(segs) < limit && last.continued_by(seg, mss))
                {
                    head.payload_len += seg.payload_len;
                    head.flags
                        .insert(Flags(seg.flags.0 & (Flags::PSH.0 | Flags::FIN.0)));
                    segs += 1;
                    last = seg;
                    next = conn.tcp.poll_transmit(now);
                }
            }
            let meta = Ipv4Meta {
                src,
                dst: conn.remote,
                tos: conn.tos,
                ttl: 64,
                id: self.ip_id.wrapping_add(1),
            };
            self.ip_id = self.ip_id.wrapping_add(segs);
            let mut pkt = out.blank_packet();
            if build_tcp_packet(&head, segs, mss, &meta, &mut pkt).is_ok() {
                out.packets.push(pkt);
            }
        }
        if let Some(t) = conn.tcp.poll_timeout() {
            if conn.timer_at.is_none_or(|at| t < at) {
                conn.timer_at = Some(t);
                out.timers.push((t, HostEvent::Tcp(c, t)));
            }
        }
    }

    /// A TCP packet arrived: its segment, or each of a GSO packet's in turn
    /// (as the kernel's TCP takes a packet GRO put together), then what the
    /// connection sends in answer, once.
    fn tcp_packet(&mut self, pkt: &Packet, info: &Ipv4Info, now: Time, out: &mut Output) {
        let c = if pkt.gso.is_some() {
            let segs = sluice_core::gso::segment(pkt).unwrap_or_default();
            segs.iter()
                .filter_map(|s| self.tcp_segment(&s.data, info.src, now))
                .last()
        } else {
            self.tcp_segment(&pkt.data, info.src, now)
        };
        if let Some(c) = c {
            self.service(c, now, out);
        }
    }

    /// One segment from `src` into its connection (a new one for a SYN to a
    /// listening port), whose index it returns.
    fn tcp_segment(&mut self, data: &[u8], src: Ipv4Addr, now: Time) -> Option<usize> {
        let (_, seg) = Segment::parse_ipv4(data).ok()?;
        if let Some(arrivals) = &mut self.tcp_arrivals {
            arrivals
                .entry((src, seg.src_port, seg.dst_port))
                .or_default()
                .record(now, seg.ip_len() as u64);
        }
        let c = match self.demux.get((src, seg.src_port, seg.dst_port)) {
            Some(c) => c,
            None => {
                let cfg = self.listeners.get(&seg.dst_port)?;
                if !seg.flags.contains(Flags::SYN) {
                    return None;
                }
                let mut tcp = TcpConnection::new(cfg.clone(), seg.dst_port, 0);
                tcp.listen();
                let role = match self.web_servers.get(&seg.dst_port) {
                    Some(dir) => Role::WebServer(ServerConn::new(
                        dir.clone(),
                        src,
                        seg.src_port,
                        seg.dst_port,
                    )),
                    None => Role::Bulk,
                };
                let c = self.conns.len();
                self.conns.push(Conn::new(tcp, src, 0, Some(0), role));
                // The listener learns the remote port from the SYN.
                self.demux.insert((src, seg.src_port, seg.dst_port), c);
                c
            }
        };
        self.conns[c].tcp.on_segment(&seg, now);
        Some(c)
    }

    /// A packet addressed to this host arrived: replies and timers are appended to `out`.
    pub fn receive(&mut self, pkt: Packet, info: &Ipv4Info, now: Time, out: &mut Output) {
        match info.protocol {
            1 => {
                if let Some((reply, id, seq)) = parse_icmp_echo(&pkt, info) {
                    if !reply {
                        let payload = info.total_len.saturating_sub(info.header_len as u16 + 8);
                        out.packets.push(icmp_echo(
                            self.addr, info.src, info.tos, id, seq, payload, true,
                        ));
                    } else {
                        self.ping_reply(id, seq, now);
                    }
                }
            }
            6 => self.tcp_packet(&pkt, info, now, out),
            17 => {
                if let Some((sport, dport, _)) = parse_udp(&pkt, info) {
                    self.udp_rx
                        .entry((info.src, sport, dport))
                        .or_default()
                        .record(now, info.total_len as u64);
                }
            }
            _ => {}
        }
        out.recycle(pkt);
    }

    fn ping_reply(&mut self, id: u16, seq: u16, now: Time) {
        for app in &mut self.apps {
            if let App::Ping(p) = app {
                if p.id == id {
                    if let Some(sent) = p.outstanding.remove(&seq) {
                        p.rtts.push((sent, now - sent));
                    }
                }
            }
        }
    }
}

/// The packet carrying `head` — `segs` segments of `mss` bytes in one GSO
/// packet when more than one, its checksum left to the device — into `pkt`.
fn build_tcp_packet(
    head: &Segment,
    segs: u16,
    mss: u32,
    meta: &Ipv4Meta,
    pkt: &mut Packet,
) -> Result<(), crate::tcp::wire::EmitError> {
    head.emit_ipv4_into(meta, &mut pkt.data)?;
    let headers = (head.ip_len() - head.payload_len as usize) as u32 + ETH_HLEN;
    pkt.len = head.ip_len() as u32 + ETH_HLEN + u32::from(segs - 1) * headers;
    pkt.protocol = ETH_P_IP;
    pkt.priority = sluice_core::qdisc::pfifo_fast::tos_to_priority(meta.tos);
    if segs > 1 {
        pkt.gso = Some(Gso {
            size: mss as u16,
            segs,
            kind: GsoKind::TcpV4,
            ecn: head.flags.contains(Flags::CWR),
        });
        // Headers the simulator wrote itself: they are well formed.
        let _ = sluice_core::gso::offload_checksum(pkt);
    }
    Ok(())
}
