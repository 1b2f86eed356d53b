//! A simulated host's stack above IP: it answers pings, runs the workload
//! applications (ping, constant-bit-rate UDP), and counts what it receives.
//! TCP connections are driven by [`crate::tcp`] endpoints.

use crate::ip::{icmp_echo, parse_icmp_echo, parse_udp, udp, Ipv4Info};
use sluice_core::packet::Packet;
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
}

/// What a host wants done: packets to send now, timers to set.
#[derive(Debug, Default)]
pub struct Output {
    /// Packets to transmit.
    pub packets: Vec<Packet>,
    /// `(when, what)` timers.
    pub timers: Vec<(Time, HostEvent)>,
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

/// A workload application on a host.
#[derive(Clone, Debug)]
pub enum App {
    /// ICMP echo requests.
    Ping(PingApp),
    /// A UDP stream.
    Udp(UdpApp),
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
        *self.bins.entry(now.0 / BIN.0).or_default() += bytes;
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
}

impl Host {
    /// A host with no applications.
    pub fn new(addr: Ipv4Addr) -> Self {
        Host { addr, apps: vec![], udp_rx: BTreeMap::new() }
    }

    /// Schedule every application's first event.
    pub fn start(&mut self, _now: Time) -> Output {
        let mut out = Output::default();
        for (i, app) in self.apps.iter().enumerate() {
            let start = match app {
                App::Ping(p) => p.start,
                App::Udp(u) => u.start,
            };
            out.timers.push((start, HostEvent::App(i)));
        }
        out
    }

    /// A timer fired.
    pub fn on_event(&mut self, ev: HostEvent, now: Time) -> Output {
        let mut out = Output::default();
        let HostEvent::App(i) = ev;
        let src = self.addr;
        match self.apps.get_mut(i) {
            Some(App::Ping(p)) if now < p.stop => {
                let seq = p.next_seq;
                p.next_seq = p.next_seq.wrapping_add(1);
                p.outstanding.insert(seq, now);
                p.sent += 1;
                out.packets.push(icmp_echo(src, p.dst, p.tos as u8, p.id, seq, p.size, false));
                out.timers.push((now + p.interval, ev));
            }
            Some(App::Udp(u)) if now < u.stop && u.rate_bps > 0 => {
                let pkt = udp(src, u.ports.0, u.dst, u.ports.1, u.tos, u.size);
                let bits = (u.size as u64 + 28) * 8;
                u.sent += 1;
                out.packets.push(pkt);
                let gap = Duration((bits as u128 * 1_000_000_000 / u.rate_bps as u128).max(1) as u64);
                out.timers.push((now + gap, ev));
            }
            _ => {}
        }
        out
    }

    /// A packet addressed to this host arrived.
    pub fn receive(&mut self, pkt: Packet, info: &Ipv4Info, now: Time) -> Output {
        let mut out = Output::default();
        match info.protocol {
            1 => {
                if let Some((reply, id, seq)) = parse_icmp_echo(&pkt, info) {
                    if !reply {
                        let payload = info.total_len.saturating_sub(info.header_len as u16 + 8);
                        out.packets.push(icmp_echo(self.addr, info.src, info.tos, id, seq, payload, true));
                    } else {
                        self.ping_reply(id, seq, now);
                    }
                }
            }
            17 => {
                if let Some((sport, dport, _)) = parse_udp(&pkt, info) {
                    self.udp_rx.entry((info.src, sport, dport)).or_default().record(now, info.total_len as u64);
                }
            }
            _ => {}
        }
        out
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
