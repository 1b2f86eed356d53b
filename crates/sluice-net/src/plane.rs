//! The forwarding engine of a link, without I/O: packets in from either
//! side, through that direction's egress device and wire, through the far
//! side's ingress, and out when they are due.
//!
//! A link has two directions, a→b and b→a. Each is: the sending side's
//! egress qdisc tree (`dev a0` for a→b, `dev b0` for b→a, in one [`Net`] so
//! `sluice tc -n LINK` sees both), a [`Port`] (transmit buffer, wire rate,
//! propagation delay, loss), a delay line holding packets in flight on the
//! wire, and the receiving side's ingress (`Device::receive`). Like the core,
//! the plane never reads a clock: the daemon passes a monotonic `now`, tests
//! pass virtual time, and [`Plane::next_wake`] says when to come back.
//!
//! # Netfilter: which hooks a live packet crosses
//!
//! The link's namespace (`sluice iptables -n LINK`) holds one netfilter, as
//! it holds one set of devices. A packet read from side a's TUN was written
//! by a program in `NAME-a` (or routed out through it) and is now leaving
//! through `a0`: in the kernel that is `ip_local_out` → NF_INET_LOCAL_OUT →
//! (re-routing) → `ip_output` → NF_INET_POST_ROUTING → `dev_queue_xmit`, the
//! egress qdisc. So the plane runs it through **OUTPUT** then
//! **POSTROUTING**, each in table priority order (mangle −150, then filter
//! 0; filter has no POSTROUTING), with `-o a0` (`-o b0` for b→a) and no
//! input interface, right before `dev a0`'s qdiscs: a MARK set in either
//! chain reaches the fw classifier, CLASSIFY sets the priority HTB and
//! PRIO read, DSCP rewrites the header the u32 and dsfield filters see, and
//! a DROP (rule or policy) ends the packet before any qdisc counts it
//! (counted as `netfilter_drops`). Forwarded traffic (`sluice shell`'s NAT
//! side) is treated the same, since the plane models no routing: a rule
//! meant for it goes in POSTROUTING, which both kinds cross.
//!
//! PREROUTING, INPUT and FORWARD see no live packet. On the receiving side
//! the kernel order is ingress qdisc → NF_INET_PRE_ROUTING → INPUT; the
//! plane hands the packet to the far TUN right after the ingress qdisc, and
//! the receiving namespace's own kernel hooks (real iptables in `NAME-b`)
//! run there. Repeating them in sluice would mark packets no qdisc reads
//! and, with one connection table for both ends, track each packet twice.
//! That one table sees both directions of a connection at their egress
//! (as a router's conntrack does), so `CONNMARK --save-mark` on a→b and
//! `--restore-mark` on b→a work, and replies are ESTABLISHED.
//!
//! With no rule anywhere and every policy ACCEPT (the default), the hooks
//! are skipped by one flag test per packet ([`Plane::kick`] refreshes it
//! after every policy change), so the fast path costs nothing extra.
//!
//! Every queue is bounded: the qdiscs by their limits, the port by its
//! buffer, and the delay line by [`DELAY_LINE_MAX_BYTES`] (the wire itself
//! holds at most rate × delay; the cap only matters for an unlimited rate
//! with a long delay, and drops counted as `delay_line_drops`).

use crate::mmlog::{logged_sizes, LogEvent};
use sluice_core::device::{DevKind, Device};
use sluice_core::netfilter::{Hook, Ifaces, Verdict};
use sluice_core::packet::{is_mpls_type, Packet, ETH_P_IP, ETH_P_IPV6};
use sluice_core::port::{Port, PortConfig, WireChange};
use sluice_core::qdisc::DevInfo;
use sluice_core::stats::DropReason;
use sluice_core::time::Time;
use sluice_core::trace::TracePlayer;
use sluice_tc::net::Net;
use std::collections::VecDeque;

/// Bytes a direction's delay line may hold (packets on the emulated wire).
pub const DELAY_LINE_MAX_BYTES: u64 = 128 << 20;

/// One of the two directions of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// From side a to side b (`dev a0`'s egress).
    AB = 0,
    /// From side b to side a (`dev b0`'s egress).
    BA = 1,
}

impl Dir {
    /// Both directions.
    pub const BOTH: [Dir; 2] = [Dir::AB, Dir::BA];
}

/// Why a packet read from a side was not IP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// Shorter than the IP header it claims.
    #[error("truncated IP header")]
    Truncated,
    /// The version nibble is neither 4 nor 6.
    #[error("not IPv4 or IPv6")]
    NotIp,
    /// The header's length fields disagree with the bytes read.
    #[error("bad IP length fields")]
    BadLength,
    /// The offload metadata (virtio-net header) does not fit the packet.
    #[error("bad offload metadata")]
    BadOffload,
}

/// Read an IP packet as the TUN device handed it over (no packet-info
/// header): check the header enough that classifiers can index it, and
/// account its length as the kernel does on a TUN device (no link-layer
/// header, so `qdisc_pkt_len` is the IP length).
pub fn parse_ip(bytes: &[u8]) -> Result<Packet, Malformed> {
    parse_ip_vec(bytes.to_vec())
}

/// [`parse_ip`] of bytes the packet takes over.
pub fn parse_ip_vec(data: Vec<u8>) -> Result<Packet, Malformed> {
    let protocol = ip_protocol(&data)?;
    let len = data.len() as u32;
    Ok(Packet::new(data, len, protocol))
}

/// The EtherType of an IP packet, if its header is consistent with its bytes.
fn ip_protocol(bytes: &[u8]) -> Result<u16, Malformed> {
    let Some(&first) = bytes.first() else {
        return Err(Malformed::Truncated);
    };
    match first >> 4 {
        4 => {
            if bytes.len() < 20 {
                return Err(Malformed::Truncated);
            }
            let ihl = (first & 0xf) as usize * 4;
            let total = u16::from_be_bytes([bytes[2], bytes[3]]) as usize;
            if ihl < 20 || total < ihl || total > bytes.len() {
                return Err(Malformed::BadLength);
            }
            Ok(ETH_P_IP)
        }
        6 => {
            if bytes.len() < 40 {
                return Err(Malformed::Truncated);
            }
            let payload = u16::from_be_bytes([bytes[4], bytes[5]]) as usize;
            if 40 + payload > bytes.len() {
                return Err(Malformed::BadLength);
            }
            Ok(ETH_P_IPV6)
        }
        _ => Err(Malformed::NotIp),
    }
}

/// Counters of one direction beyond the qdiscs' and the port's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DirStats {
    /// Packets read from the sending side.
    pub rx_packets: u64,
    /// Packets that were not well-formed IP (dropped, never forwarded).
    pub malformed: u64,
    /// Packets read that were GSO packets (each stands for several wire packets).
    pub rx_gso: u64,
    /// Packets an iptables rule or policy dropped (OUTPUT, POSTROUTING).
    pub netfilter_drops: u64,
    /// Packets the egress qdisc tree refused.
    pub qdisc_drops: u64,
    /// Packets dropped because the delay line was full.
    pub delay_line_drops: u64,
    /// Packets the receiving side's ingress dropped.
    pub ingress_drops: u64,
    /// Packets handed to the receiving side.
    pub delivered: u64,
    /// How late packets were handed over: counts per power-of-two bucket
    /// of nanoseconds after their due time (bucket i: below 2^i ns).
    #[serde(skip)]
    pub lateness: [u64; 40],
}

impl DirStats {
    /// The lateness below which a fraction `q` of deliveries fell, in ns
    /// (an upper bound: the bucket's top).
    pub fn lateness_quantile(&self, q: f64) -> u64 {
        let total: u64 = self.lateness.iter().sum();
        let want = (total as f64 * q).ceil() as u64;
        let mut seen = 0;
        for (i, n) in self.lateness.iter().enumerate() {
            seen += n;
            if seen >= want && seen > 0 {
                return 1u64 << i;
            }
        }
        0
    }
}

impl Default for DirStats {
    fn default() -> Self {
        DirStats {
            rx_packets: 0,
            malformed: 0,
            rx_gso: 0,
            netfilter_drops: 0,
            qdisc_drops: 0,
            delay_line_drops: 0,
            ingress_drops: 0,
            delivered: 0,
            lateness: [0; 40],
        }
    }
}

struct Direction {
    port: Port,
    in_flight: VecDeque<(Time, Packet)>,
    in_flight_bytes: u64,
    scratch: Vec<(Time, Packet)>,
    stats: DirStats,
    /// Events for a Mahimahi log ([`crate::mmlog`]), when one is asked for.
    log: Option<Vec<LogEvent>>,
    /// The wire's trace played beside the port, to log its opportunities.
    opportunities: Option<TracePlayer>,
}

/// The devices (index into `Net::devices`) of the two sides.
const DEV_A: usize = 1;
const DEV_B: usize = 2;

impl Direction {
    /// Move what left the wire's far end into the delay line (bounded).
    fn take_departures(&mut self) {
        if let Some(log) = &mut self.log {
            // Mahimahi's departure is when the link let the packet go,
            // before any propagation delay.
            let delay = self.port.config().delay;
            for (at, pkt) in &self.scratch {
                let left = Time(at.0.saturating_sub(delay.0));
                for size in logged_sizes(pkt) {
                    log.push(LogEvent::Departure(left, size, pkt.tstamp));
                }
            }
        }
        for (at, pkt) in self.scratch.drain(..) {
            if self.in_flight_bytes + pkt.len as u64 > DELAY_LINE_MAX_BYTES {
                self.stats.delay_line_drops += 1;
                continue;
            }
            self.in_flight_bytes += pkt.len as u64;
            self.in_flight.push_back((at, pkt));
        }
    }
}

/// The (egress, ingress) devices of a direction.
fn sides(devices: &mut [Device], dir: Dir) -> (&mut Device, &mut Device) {
    let (lo, hi) = devices.split_at_mut(DEV_B);
    match dir {
        Dir::AB => (&mut lo[DEV_A], &mut hi[0]),
        Dir::BA => (&mut hi[0], &mut lo[DEV_A]),
    }
}

/// A link's two directions and the namespace of their devices.
pub struct Plane {
    /// The link's devices (`lo`, `a0`, `b0`), as `sluice tc -n LINK` sees them.
    pub net: Net,
    dirs: [Direction; 2],
    next_id: u64,
    /// The namespace has a rule or a DROP policy: run the hooks (see the
    /// module's essay; refreshed by [`Plane::kick`]).
    netfilter_active: bool,
    /// The namespace has a mirred action: look in its outbox after each
    /// enqueue and receive (refreshed by [`Plane::kick`]).
    mirred_active: bool,
    /// The namespace has a connmark or ctinfo action: arriving packets get
    /// their connection looked up (refreshed by [`Plane::kick`]).
    conn_actions: bool,
    /// The transmit sides of the ifb devices mirred has sent to.
    ifbs: Vec<Ifb>,
    /// Packets mirred or an ifb device delivered to a side, handed over at
    /// the end of the next [`Plane::poll`].
    to_side: Vec<(Dir, Packet)>,
    /// Packets mirred sent where the plane cannot carry them: to a device
    /// that is gone or down, round a redirect loop, or up the stack of a
    /// device that is neither side (`lo`, an ifb device: the link's own
    /// namespace has no stack of its own).
    mirred_drops: u64,
    /// Packets that reached a side with a VLAN tag (a `vlan` action pushed
    /// it): the side's TUN device cannot carry the tag, and the kernel
    /// would not take it up its stack without a VLAN device
    /// (`PACKET_OTHERHOST`; a priority-only tag, VLAN id 0, is no obstacle).
    vlan_drops: u64,
    /// Packets that reached a side as MPLS (an `mpls` action pushed a
    /// label): the namespaces route no labels.
    mpls_drops: u64,
}

/// An ifb device's transmit side: a port of unlimited rate (the device's
/// qdiscs set the pace) whose departures go back where mirred took them
/// from (`ifb_ri_tasklet`).
struct Ifb {
    ifindex: u32,
    port: Port,
    scratch: Vec<(Time, Packet)>,
}

/// The direction whose receiving side is the stack of device `dev`.
fn dir_into(dev: usize) -> Option<Dir> {
    match dev {
        DEV_A => Some(Dir::BA),
        DEV_B => Some(Dir::AB),
        _ => None,
    }
}

/// The direction that transmits out of device `dev`.
fn dir_out_of(dev: usize) -> Option<Dir> {
    match dev {
        DEV_A => Some(Dir::AB),
        DEV_B => Some(Dir::BA),
        _ => None,
    }
}

impl Plane {
    /// A link whose devices are up with the kernel's default qdisc
    /// (pfifo_fast, txqueuelen 1000) and whose wires are `ab` and `ba`.
    pub fn new(ab: PortConfig, ba: PortConfig, mtu: u32) -> Plane {
        let mut net = Net::new();
        for name in ["a0", "b0"] {
            let info = DevInfo {
                name: name.into(),
                mtu,
                txqueuelen: 1000,
                hard_header_len: 0,
                seed: 0,
                // A TUN device reports 10 Mbit/s to ethtool.
                speed: 10,
                num_tx_queues: 1,
            };
            let idx = net.add_device(info, sluice_core::device::DevKind::Tun);
            if let Some(d) = net.devices.iter_mut().find(|d| d.ifindex == idx) {
                d.set_up(true);
            }
        }
        if let Some(lo) = net.dev_mut("lo") {
            lo.set_up(true);
        }
        let dir = |cfg| Direction {
            port: Port::new(cfg),
            in_flight: VecDeque::new(),
            in_flight_bytes: 0,
            scratch: Vec::new(),
            stats: DirStats::default(),
            log: None,
            opportunities: None,
        };
        Plane {
            net,
            dirs: [dir(ab), dir(ba)],
            next_id: 0,
            netfilter_active: false,
            mirred_active: false,
            conn_actions: false,
            ifbs: Vec::new(),
            to_side: Vec::new(),
            mirred_drops: 0,
            vlan_drops: 0,
            mpls_drops: 0,
        }
    }

    /// A packet read from the sending side of `dir` at `now` (after
    /// [`Plane::poll`] at the same `now`).
    pub fn input(&mut self, dir: Dir, bytes: &[u8], now: Time) {
        self.input_packet(dir, parse_ip(bytes), now)
    }

    /// [`Plane::input`] for a packet already parsed (with its offload
    /// metadata, see [`crate::vnet`]), or found malformed.
    pub fn input_packet(&mut self, dir: Dir, pkt: Result<Packet, Malformed>, now: Time) {
        let d = dir as usize;
        self.dirs[d].stats.rx_packets += 1;
        let mut pkt = match pkt {
            Ok(p) => p,
            Err(_) => {
                self.dirs[d].stats.malformed += 1;
                return;
            }
        };
        self.dirs[d].stats.rx_gso += pkt.gso.is_some() as u64;
        if let Some(log) = &mut self.dirs[d].log {
            log.extend(logged_sizes(&pkt).map(|s| LogEvent::Arrival(now, s)));
        }
        pkt.id = self.next_id;
        self.next_id += 1;
        if self.netfilter_active && self.local_out(dir, &mut pkt, now) == Verdict::Drop {
            self.dirs[d].stats.netfilter_drops += 1;
            return;
        }
        self.transmit(if dir == Dir::AB { DEV_A } else { DEV_B }, pkt, now);
    }

    /// Send a packet out of device `dev` (an index into the namespace's
    /// devices): a side's egress qdiscs and wire, or an ifb device's qdiscs;
    /// then deliver what their filters' mirred actions sent.
    fn transmit(&mut self, dev: usize, pkt: Packet, now: Time) {
        if let Some(dir) = dir_out_of(dev) {
            let (egress, _) = sides(&mut self.net.devices, dir);
            let st = &mut self.dirs[dir as usize];
            let sizes: Option<Vec<u32>> = st.log.as_ref().map(|_| logged_sizes(&pkt).collect());
            if st
                .port
                .send(egress, pkt, now)
                .is_err_and(|e| e != DropReason::Stolen)
            {
                st.stats.qdisc_drops += 1;
                if let (Some(log), Some(sizes)) = (&mut st.log, sizes) {
                    let bytes = sizes.iter().map(|&s| s as u64).sum();
                    log.push(LogEvent::Drop(now, sizes.len() as u32, bytes));
                }
            }
        } else if self.net.devices[dev].kind == DevKind::Ifb {
            let ifindex = self.net.devices[dev].ifindex;
            let i = match self.ifbs.iter().position(|f| f.ifindex == ifindex) {
                Some(i) => i,
                None => {
                    self.ifbs.push(Ifb {
                        ifindex,
                        port: Port::new(PortConfig {
                            rate_bps: 0,
                            ..PortConfig::default()
                        }),
                        scratch: Vec::new(),
                    });
                    self.ifbs.len() - 1
                }
            };
            // What its qdiscs drop, their counters show.
            let _ = self.ifbs[i].port.send(&mut self.net.devices[dev], pkt, now);
        } else {
            // Out of `lo`: back into this namespace's own stack, which the
            // plane does not have.
            self.mirred_drops += 1;
        }
        self.send_mirrored(dev, false, now);
    }

    /// A packet arriving at device `dev`: its ingress qdisc (policers,
    /// mirred), then up its stack.
    fn receive(&mut self, dev: usize, pkt: Packet, now: Time, dir: Dir) {
        let verdict = self.net.devices[dev].receive_verdict(pkt, now);
        self.send_mirrored(dev, true, now);
        match verdict {
            Ok(p) => self.up_the_stack(dev, p),
            Err(DropReason::Stolen) => {}
            Err(_) => self.dirs[dir as usize].stats.ingress_drops += 1,
        }
    }

    /// Hand a packet to the stack of device `dev`: a side's, else nowhere.
    fn up_the_stack(&mut self, dev: usize, pkt: Packet) {
        if pkt.vlan.is_some_and(|t| t.tci & 0x0fff != 0) || !pkt.vlan_inband.is_empty() {
            self.vlan_drops += 1;
            return;
        }
        if is_mpls_type(pkt.protocol) {
            self.mpls_drops += 1;
            return;
        }
        match dir_into(dev) {
            Some(dir) => self.to_side.push((dir, pkt)),
            None => self.mirred_drops += 1,
        }
    }

    /// Deliver what mirred actions sent while a packet passed device
    /// `from` (its ingress, or its egress): to the target's ingress, or out
    /// of it, as the simulator does (`Mirrored::launch` holds the rules).
    fn send_mirrored(&mut self, from: usize, at_ingress: bool, now: Time) {
        if !self.mirred_active {
            return;
        }
        for m in self.net.actions.take_mirrored() {
            let ingress = m.ingress;
            let Some((target, pkt)) = m.launch(&self.net.devices, from, at_ingress) else {
                self.mirred_drops += 1;
                continue;
            };
            if ingress {
                let dir = dir_into(target).unwrap_or(Dir::AB);
                self.receive(target, pkt, now, dir);
            } else {
                self.transmit(target, pkt, now);
            }
        }
    }

    /// A packet an ifb device finished with goes back where mirred took it
    /// from: up the stack of the device it arrived on (without that
    /// device's ingress filters again), or out of the device that sent it.
    fn back_from_ifb(&mut self, mut pkt: Packet, now: Time) {
        let devices = &self.net.devices;
        let Some(origin) = devices.iter().position(|d| d.ifindex == pkt.skb_iif) else {
            self.mirred_drops += 1;
            return;
        };
        if pkt.from_ingress {
            self.up_the_stack(origin, pkt);
        } else {
            pkt.tc_skip_classify = true;
            self.transmit(origin, pkt, now);
        }
    }

    /// OUTPUT then POSTROUTING, leaving through the sending side's device
    /// (the module's essay says why these two).
    fn local_out(&mut self, dir: Dir, pkt: &mut Packet, now: Time) -> Verdict {
        let Net {
            devices, netfilter, ..
        } = &mut self.net;
        let oif = &devices[if dir == Dir::AB { DEV_A } else { DEV_B }]
            .info
            .name;
        let ifaces = Ifaces {
            iif: None,
            oif: Some(oif),
        };
        netfilter.traverse(&[Hook::Output, Hook::Postrouting], pkt, ifaces, now)
    }

    /// Do everything due at `now`; `out` receives each packet to hand to
    /// the receiving side of its direction.
    pub fn poll(&mut self, now: Time, out: &mut dyn FnMut(Dir, Packet)) {
        for dir in Dir::BOTH {
            self.poll_dir(dir, now);
        }
        self.poll_ifbs(now);
        let mut ready = std::mem::take(&mut self.to_side);
        for (dir, pkt) in ready.drain(..) {
            self.dirs[dir as usize].stats.delivered += 1;
            out(dir, pkt);
        }
        self.to_side = ready;
    }

    fn poll_dir(&mut self, dir: Dir, now: Time) {
        let d = dir as usize;
        let (egress, _) = sides(&mut self.net.devices, dir);
        let st = &mut self.dirs[d];
        if let (Some(p), Some(log)) = (&mut st.opportunities, &mut st.log) {
            while let Some(t) = p.next_opportunity().filter(|&t| t <= now) {
                log.push(LogEvent::Opportunity(t));
                p.advance();
            }
        }
        // The port: wire completions and throttled qdiscs, each at the time
        // it was due (not when the loop woke), so a late wake-up does not
        // slow the wire down. Callers poll before they input packets read at
        // `now`, so the times the port sees never go backwards.
        let mut guard = 0;
        while let Some(t) = st.port.next_event() {
            if t > now || guard > 1_000_000 {
                break;
            }
            guard += 1;
            st.port.advance(egress, t, &mut st.scratch);
            st.take_departures();
        }
        // Arrivals: the wire delivers in order (constant delay), so the head is the earliest.
        let far = if dir == Dir::AB { DEV_B } else { DEV_A };
        loop {
            let st = &mut self.dirs[d];
            if st.in_flight.front().is_none_or(|(at, _)| *at > now) {
                break;
            }
            let (at, mut pkt) = st.in_flight.pop_front().expect("checked");
            st.in_flight_bytes -= pkt.len as u64;
            let late = now.0.saturating_sub(at.0);
            st.stats.lateness[(64 - late.leading_zeros() as usize).min(39)] += 1;
            // A new skb at the far side: tc's connmark and ctinfo find its
            // connection in the link's one table by its tuple.
            pkt.conn = None;
            if self.conn_actions {
                pkt.conn = self.net.netfilter.connection(&pkt, now);
            }
            self.receive(far, pkt, now, dir);
        }
    }

    /// The ifb devices' qdiscs, each dequeued at the times it was due (as
    /// the sides' ports); a port whose device is gone is dropped with what
    /// it held.
    fn poll_ifbs(&mut self, now: Time) {
        let mut i = 0;
        while i < self.ifbs.len() {
            let ifindex = self.ifbs[i].ifindex;
            let Some(dev) = self.net.devices.iter().position(|d| d.ifindex == ifindex) else {
                self.ifbs.remove(i);
                continue;
            };
            let mut guard = 0;
            while let Some(t) = self.ifbs[i].port.next_event() {
                if t > now || guard > 1_000_000 {
                    break;
                }
                guard += 1;
                self.advance_ifb(i, dev, t);
            }
            i += 1;
        }
    }

    /// Advance ifb port `i` (of device index `dev`) to `t`, sending what
    /// leaves it back where it came from.
    fn advance_ifb(&mut self, i: usize, dev: usize, t: Time) {
        let f = &mut self.ifbs[i];
        f.port
            .advance(&mut self.net.devices[dev], t, &mut f.scratch);
        let mut done = std::mem::take(&mut f.scratch);
        for (at, pkt) in done.drain(..) {
            self.back_from_ifb(pkt, at);
        }
        self.ifbs[i].scratch = done;
    }

    /// When [`Plane::poll`] next has something to do.
    pub fn next_wake(&self) -> Option<Time> {
        if !self.to_side.is_empty() {
            return Some(Time(0));
        }
        self.dirs
            .iter()
            .flat_map(|d| [d.port.next_event(), d.in_flight.front().map(|(t, _)| *t)])
            .chain(self.ifbs.iter().map(|f| f.port.next_event()))
            .flatten()
            .min()
    }

    /// Take up a policy change: restart both ports and the ifb devices'
    /// (a new qdisc may hold packets or no longer be throttled) and note
    /// whether the netfilter hooks and mirred now have anything to do.
    pub fn kick(&mut self, now: Time) {
        self.netfilter_active = !self.net.netfilter.is_idle();
        self.mirred_active = self.net.actions.has_kind("mirred");
        self.conn_actions = self.net.actions.reads_connections();
        for dir in Dir::BOTH {
            let (egress, _) = sides(&mut self.net.devices, dir);
            let st = &mut self.dirs[dir as usize];
            st.port.advance(egress, now, &mut st.scratch);
            st.take_departures();
        }
        for i in 0..self.ifbs.len() {
            let ifindex = self.ifbs[i].ifindex;
            if let Some(dev) = self.net.devices.iter().position(|d| d.ifindex == ifindex) {
                self.advance_ifb(i, dev, now);
            }
        }
    }

    /// Change the wire of `dir` at `now` ([`Port::change`]); a new trace is
    /// also followed for the direction's log.
    pub fn change(&mut self, dir: Dir, now: Time, change: WireChange) {
        let d = dir as usize;
        let logged_trace = change.trace.clone();
        let (egress, _) = sides(&mut self.net.devices, dir);
        let st = &mut self.dirs[d];
        st.port.change(egress, now, change);
        st.take_departures();
        if let Some((trace, once)) = logged_trace {
            st.opportunities = Some(TracePlayer::new(trace, now, once));
        }
        if st.port.trace().is_none() {
            st.opportunities = None;
        }
    }

    /// Record the events of `dir` for a Mahimahi log ([`Plane::take_log`]).
    pub fn start_log(&mut self, dir: Dir) {
        let st = &mut self.dirs[dir as usize];
        st.log.get_or_insert_with(Vec::new);
    }

    /// The events of `dir` recorded since the last call, up to `now` (the
    /// trace's opportunities included).
    pub fn take_log(&mut self, dir: Dir, now: Time) -> Vec<LogEvent> {
        let st = &mut self.dirs[dir as usize];
        if let (Some(p), Some(log)) = (&mut st.opportunities, &mut st.log) {
            while let Some(t) = p.next_opportunity().filter(|&t| t <= now) {
                log.push(LogEvent::Opportunity(t));
                p.advance();
            }
        }
        st.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Do live packets cross the netfilter hooks (a rule or a DROP policy exists)?
    pub fn netfilter_active(&self) -> bool {
        self.netfilter_active
    }

    /// Counters of one direction.
    pub fn stats(&self, dir: Dir) -> DirStats {
        self.dirs[dir as usize].stats
    }

    /// Packets mirred sent where the plane could not carry them.
    pub fn mirred_drops(&self) -> u64 {
        self.mirred_drops
    }

    /// Packets that reached a side with a VLAN tag.
    pub fn vlan_drops(&self) -> u64 {
        self.vlan_drops
    }

    /// Packets that reached a side as MPLS.
    pub fn mpls_drops(&self) -> u64 {
        self.mpls_drops
    }

    /// The port (wire) of one direction.
    pub fn port(&self, dir: Dir) -> &Port {
        &self.dirs[dir as usize].port
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{deliver, read_batch, Buffers, IoStats, Loopback, BATCH};
    use sluice_core::time::Duration;

    /// An IPv4/UDP packet of `total` bytes from 10.0.0.1 to 10.0.0.2.
    fn ipv4(total: usize) -> Vec<u8> {
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p
    }

    fn wire(rate_bps: u64, delay_ms: u64) -> PortConfig {
        PortConfig {
            rate_bps,
            delay: Duration::from_millis(delay_ms),
            ..Default::default()
        }
    }

    /// Run the plane from `from` to `until` in virtual time, returning (time, dir) of each delivery.
    fn run(plane: &mut Plane, until: Time) -> Vec<(Time, Dir, usize)> {
        let mut got = vec![];
        while let Some(t) = plane.next_wake() {
            if t > until {
                break;
            }
            plane.poll(t, &mut |d, p| got.push((t, d, p.data.len())));
        }
        got
    }

    #[test]
    fn garbage_is_counted_and_dropped_never_forwarded() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        let garbage: [&[u8]; 6] = [
            &[],
            &[0xff; 100],
            &[0x45, 0, 0],
            &[0x45; 30],         // total length 0x4545 > 30 bytes
            &[0x60, 0, 0, 0, 0], // truncated IPv6
            &[0x41; 40],         // IHL 1
        ];
        for g in garbage {
            plane.input(Dir::AB, g, Time(0));
        }
        plane.input(Dir::AB, &ipv4(100), Time(0));
        let got = run(&mut plane, Time(1_000_000));
        assert_eq!(got, vec![(Time(0), Dir::AB, 100)]);
        let s = plane.stats(Dir::AB);
        assert_eq!((s.rx_packets, s.malformed, s.delivered), (7, 6, 1));
    }

    #[test]
    fn the_wire_delays_each_direction_and_never_delivers_early() {
        let mut plane = Plane::new(wire(0, 10), wire(0, 30), 1500);
        plane.input(Dir::AB, &ipv4(84), Time(0));
        plane.input(Dir::BA, &ipv4(84), Time(0));
        let got = run(&mut plane, Time(1_000_000_000));
        assert_eq!(
            got,
            vec![
                (Time(10_000_000), Dir::AB, 84),
                (Time(30_000_000), Dir::BA, 84)
            ]
        );
    }

    #[test]
    fn a_burst_leaves_at_the_wire_rate() {
        // 10 Mbit/s: a 1500-byte packet takes 1.2 ms; the default qdisc holds the burst.
        let mut plane = Plane::new(wire(10_000_000, 0), wire(0, 0), 1500);
        for _ in 0..100 {
            plane.input(Dir::AB, &ipv4(1500), Time(0));
        }
        let got = run(&mut plane, Time(1_000_000_000));
        assert_eq!(got.len(), 100);
        for (i, (t, _, _)) in got.iter().enumerate() {
            assert_eq!(t.0, (i as u64 + 1) * 1_200_000);
        }
    }

    #[test]
    fn a_live_netem_change_delays_the_next_packets() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        let words: Vec<String> = "qdisc add dev a0 root netem delay 50ms"
            .split(' ')
            .map(String::from)
            .collect();
        let o = sluice_tc::tc::run(&mut plane.net, &Default::default(), &words);
        assert_eq!(o.code, 0, "{}", o.stderr);
        plane.kick(Time(5_000_000));
        plane.input(Dir::AB, &ipv4(84), Time(5_000_000));
        plane.input(Dir::BA, &ipv4(84), Time(5_000_000));
        let got = run(&mut plane, Time(1_000_000_000));
        assert_eq!(
            got,
            vec![
                (Time(5_000_000), Dir::BA, 84),
                (Time(55_000_000), Dir::AB, 84)
            ]
        );
    }

    #[test]
    fn the_default_qdisc_bounds_the_queue_at_txqueuelen() {
        // A 1 Mbit/s wire cannot drain 2000 packets at once: pfifo_fast keeps
        // 1000 (txqueuelen), one is on the wire and one in the 1-packet ring.
        let mut plane = Plane::new(wire(1_000_000, 0), wire(0, 0), 1500);
        for _ in 0..2000 {
            plane.input(Dir::AB, &ipv4(1500), Time(0));
        }
        assert_eq!(plane.stats(Dir::AB).qdisc_drops, 2000 - 1002);
    }

    #[test]
    fn loopback_sides_are_read_in_batches_and_written_in_order() {
        let mut plane = Plane::new(wire(0, 1), wire(0, 1), 1500);
        let (mut a, mut b) = (Loopback::default(), Loopback::default());
        for n in 0..(BATCH + 10) {
            a.rx.push_back(ipv4(100 + n));
        }
        let mut bufs = Buffers::default();
        let mut io = IoStats::default();
        let n = read_batch(
            &mut plane,
            Dir::AB,
            &mut a,
            &mut b,
            &mut bufs,
            Time(0),
            &mut io,
        );
        assert_eq!((n, a.rx.len()), (BATCH, 10));
        deliver(
            &mut plane,
            Time(999_999),
            &mut a,
            &mut b,
            &mut bufs,
            &mut io,
        );
        assert!(b.tx.is_empty());
        deliver(
            &mut plane,
            Time(1_000_000),
            &mut a,
            &mut b,
            &mut bufs,
            &mut io,
        );
        let lens: Vec<usize> = b.tx.iter().map(|p| p.data.len()).collect();
        assert_eq!(lens, (0..BATCH).map(|n| 100 + n).collect::<Vec<_>>());
    }

    // ---- GSO packets (TUN offloads) ----

    use crate::vnet::{VnetHdr, F_NEEDS_CSUM, GSO_TCPV4};

    /// A TSO packet as a TUN device with offloads hands it over: the
    /// virtio-net header, then IPv4/TCP (52 header bytes, with timestamps)
    /// carrying `segs` segments of 1448 data bytes, checksum left to the device.
    fn tso(segs: usize) -> Vec<u8> {
        let mut ip = vec![0u8; 52 + segs * 1448];
        ip[0] = 0x45;
        let tot = ip.len() as u16;
        ip[2..4].copy_from_slice(&tot.to_be_bytes());
        ip[6] = 0x40;
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        ip[24..28].copy_from_slice(&1000u32.to_be_bytes());
        ip[32] = 8 << 4;
        ip[33] = 0x18;
        for (i, b) in ip[52..].iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 20,
            csum_offset: 16,
        };
        [hdr.emit().to_vec(), ip].concat()
    }

    /// Run a tc command on the plane's devices; a leading `-s` shows statistics.
    fn tc(plane: &mut Plane, cmd: &str) -> String {
        let (stats, cmd) = match cmd.strip_prefix("-s ") {
            Some(rest) => (true, rest),
            None => (false, cmd),
        };
        let words: Vec<String> = cmd.split(' ').map(String::from).collect();
        let opts = sluice_tc::tc::Opts {
            stats,
            ..Default::default()
        };
        let o = sluice_tc::tc::run(&mut plane.net, &opts, &words);
        assert_eq!(o.code, 0, "tc {cmd}: {}", o.stderr);
        o.stdout
    }

    /// Read `packets` from side a (with virtio-net headers) at `now`;
    /// returns what was delivered to side b at once (unshaped packets).
    fn input_a(plane: &mut Plane, packets: Vec<Vec<u8>>, now: Time) -> Vec<(Time, Packet)> {
        let mut a = Loopback {
            vnet_hdr: true,
            rx: packets.into(),
            ..Default::default()
        };
        let mut b = Loopback::default();
        let (mut bufs, mut io) = (Buffers::default(), IoStats::default());
        while !a.rx.is_empty() {
            read_batch(plane, Dir::AB, &mut a, &mut b, &mut bufs, now, &mut io);
        }
        b.tx.drain(..).map(|p| (now, p)).collect()
    }

    /// Every packet delivered a→b until `until`, with its time.
    fn run_packets(plane: &mut Plane, until: Time) -> Vec<(Time, Packet)> {
        let mut got = vec![];
        while let Some(t) = plane.next_wake() {
            if t > until {
                break;
            }
            plane.poll(t, &mut |d, p| {
                if d == Dir::AB {
                    got.push((t, p))
                }
            });
        }
        got
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_gso_packet_crosses_whole_and_counts_as_its_segments() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        let got = input_a(&mut plane, vec![tso(10)], Time(0));
        assert_eq!(got.len(), 1);
        let p = &got[0].1;
        assert_eq!((p.segs(), p.len, p.data.len()), (10, 15_000, 52 + 14_480));
        assert_eq!(VnetHdr::of(p), VnetHdr::parse(&tso(10)).unwrap());
        assert_eq!(plane.stats(Dir::AB).rx_gso, 1);
        let s = tc(&mut plane, "-s qdisc show dev a0");
        assert!(s.contains("Sent 15000 bytes 10 pkt"), "{s}");
    }

    #[test]
    fn the_wire_carries_a_gso_packet_segment_by_segment() {
        // 10 Mbit/s: ten 1500-byte segments take 12 ms, and each arrives
        // when its last bit does, 1.2 ms after the one before.
        let mut plane = Plane::new(wire(10_000_000, 0), wire(0, 0), 1500);
        input_a(&mut plane, vec![tso(10)], Time(0));
        let got = run_packets(&mut plane, Time(1000 * MS));
        let times: Vec<u64> = got.iter().map(|(t, _)| t.0).collect();
        assert_eq!(times, (1..=10).map(|i| i * 1_200_000).collect::<Vec<_>>());
        assert!(got.iter().all(|(_, p)| p.gso.is_none() && p.len == 1500));
        assert_eq!(plane.port(Dir::AB).stats.tx_packets, 10);
        // At 10 Gbit/s the packet crosses whole, in 12 us.
        let mut plane = Plane::new(wire(10_000_000_000, 0), wire(0, 0), 1500);
        input_a(&mut plane, vec![tso(10)], Time(0));
        let got = run_packets(&mut plane, Time(1000 * MS));
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].0, got[0].1.segs()), (Time(12_000), 10));
    }

    #[test]
    fn the_wire_buffer_counts_segments_and_takes_a_gso_packet_whole() {
        // A 5-packet buffer: the first GSO packet is taken in whole (as a
        // NIC's ring takes a TSO packet) and goes on the wire one segment
        // at a time; its nine waiting segments fill the buffer, so the other
        // two GSO packets wait in the qdisc until fewer than 5 are left.
        let mut cfg = wire(1_000_000, 0);
        cfg.buffer = sluice_core::port::TxBuffer::Packets(5);
        let mut plane = Plane::new(cfg, wire(0, 0), 1500);
        input_a(&mut plane, vec![tso(10), tso(10), tso(10)], Time(0));
        assert_eq!(plane.port(Dir::AB).backlog_packets(), 10);
        let s = tc(&mut plane, "-s qdisc show dev a0");
        assert!(s.contains("backlog 30000b 2p"), "{s}");
        // Five segments later (12 ms each) the second is taken in.
        run_packets(&mut plane, Time(5 * 12 * MS));
        let s = tc(&mut plane, "-s qdisc show dev a0");
        assert!(s.contains("backlog 15000b 1p"), "{s}");
    }

    #[test]
    fn tbf_segments_a_gso_packet_longer_than_its_burst() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        tc(
            &mut plane,
            "qdisc add dev a0 root tbf rate 10mbit burst 5kb latency 50ms",
        );
        let mut got = input_a(&mut plane, vec![tso(10)], Time(0));
        got.extend(run_packets(&mut plane, Time(1000 * MS)));
        // Ten wire packets: three at once (the 5 kB burst), the fourth when
        // the bucket has refilled the missing 880 bytes, then 1.2 ms apart.
        assert_eq!(got.len(), 10);
        let mut seq = 1000u32;
        for (i, (t, p)) in got.iter().enumerate() {
            assert!(p.gso.is_none() && p.len == 1500 && p.data.len() == 1500);
            let th = &p.data[20..];
            assert_eq!(u32::from_be_bytes(th[4..8].try_into().unwrap()), seq);
            seq += 1448;
            // PSH only on the last segment.
            assert_eq!(th[13] & 0x08 != 0, i == 9, "segment {i}");
            let mut p = p.clone();
            sluice_core::gso::checksum_help(&mut p).unwrap();
            let th = &p.data[20..];
            let pseudo = sluice_core::gso::sum(&p.data[12..20], 6 + th.len() as u64);
            assert_eq!(
                sluice_core::gso::fold(sluice_core::gso::sum(th, pseudo)),
                0xffff
            );
            let want =
                [0, 0, 0, 704_000, 1_904_000][i.min(4)] + i.saturating_sub(4) as u64 * 1_200_000;
            assert_eq!(t.0, want, "segment {i}");
        }
        let s = tc(&mut plane, "-s qdisc show dev a0");
        assert!(s.contains("Sent 15000 bytes 10 pkt (dropped 0"), "{s}");
        assert!(s.contains("backlog 0b 0p"), "{s}");
    }

    #[test]
    fn segments_under_an_htb_class_keep_the_parents_counts_exact() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        for cmd in [
            "qdisc add dev a0 root handle 1: htb default 10",
            "class add dev a0 parent 1: classid 1:10 htb rate 20mbit",
            "qdisc add dev a0 parent 1:10 handle 10: tbf rate 5mbit burst 3000 latency 50ms",
        ] {
            tc(&mut plane, cmd);
        }
        let now = input_a(&mut plane, vec![tso(10), tso(10)], Time(0));
        // The first two segments left at once; the other 18 wait, counted
        // as 18 packets all the way up.
        assert_eq!(now.len(), 2);
        let s = tc(&mut plane, "-s qdisc show dev a0");
        assert!(s.contains("backlog 27000b 18p"), "{s}");
        let got = run_packets(&mut plane, Time(1000 * MS));
        assert_eq!(got.len(), 18);
        let s = tc(&mut plane, "-s qdisc show dev a0");
        assert_eq!(
            s.matches("Sent 30000 bytes 20 pkt (dropped 0").count(),
            2,
            "{s}"
        );
        assert_eq!(s.matches("backlog 0b 0p").count(), 2, "{s}");
        let c = tc(&mut plane, "-s class show dev a0");
        assert!(c.contains("Sent 30000 bytes 20 pkt"), "{c}");
    }

    #[test]
    fn netem_segments_a_gso_packet_it_corrupts() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        tc(
            &mut plane,
            "qdisc add dev a0 root netem delay 1ms corrupt 100%",
        );
        input_a(&mut plane, vec![tso(4)], Time(0));
        let got = run_packets(&mut plane, Time(1000 * MS));
        assert_eq!(got.len(), 4);
        assert!(got.iter().all(|(t, p)| *t == Time(MS) && p.len == 1500));
        // Checksums were computed before the bits flipped.
        assert!(got
            .iter()
            .all(|(_, p)| p.gso.is_none() && p.csum_partial.is_none()));
        let s = tc(&mut plane, "-s qdisc show dev a0");
        assert!(s.contains("Sent 6000 bytes 4 pkt"), "{s}");
    }

    #[test]
    fn bad_offload_metadata_is_counted_as_malformed() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        let mut bad = tso(3);
        bad[1] = 9; // no such GSO type
        let mut short = tso(3);
        short[4..6].copy_from_slice(&0u16.to_ne_bytes()); // gso_size 0
        let got = input_a(&mut plane, vec![bad, short, vec![0; 5], tso(3)], Time(0));
        assert_eq!(got.len(), 1);
        let s = plane.stats(Dir::AB);
        assert_eq!((s.rx_packets, s.malformed, s.rx_gso), (4, 3, 1));
    }

    // ---- Netfilter: OUTPUT then POSTROUTING before the egress qdisc ----

    /// Run an iptables command on the plane's namespace and take it up, as
    /// the control socket does.
    fn ipt(plane: &mut Plane, cmd: &str) -> String {
        let words: Vec<String> = cmd.split(' ').map(String::from).collect();
        let o = sluice_tc::iptables::run(&mut plane.net, &words);
        assert_eq!(o.code, 0, "iptables {cmd}: {}", o.stderr);
        plane.kick(Time(0));
        o.stdout
    }

    /// An IPv4/UDP packet to `dport`, 100 bytes.
    fn udp_to(dport: u16) -> Vec<u8> {
        let mut p = ipv4(100);
        p[20..22].copy_from_slice(&5000u16.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p[24..26].copy_from_slice(&80u16.to_be_bytes());
        p
    }

    #[test]
    fn the_hooks_run_only_while_a_rule_or_drop_policy_exists() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        assert!(!plane.netfilter_active());
        ipt(&mut plane, "-A OUTPUT -j ACCEPT");
        assert!(plane.netfilter_active());
        ipt(&mut plane, "-F");
        assert!(!plane.netfilter_active());
        ipt(&mut plane, "-P OUTPUT DROP");
        assert!(plane.netfilter_active());
        plane.input(Dir::AB, &ipv4(100), Time(0));
        assert_eq!(plane.stats(Dir::AB).netfilter_drops, 1);
        ipt(&mut plane, "-P OUTPUT ACCEPT");
        assert!(!plane.netfilter_active());
    }

    #[test]
    fn mangle_output_then_filter_output_then_mangle_postrouting_then_the_qdisc() {
        // Each chain sees what the one before it did: mangle OUTPUT marks 1,
        // filter OUTPUT matches mark 1 (and would drop mark 0), mangle
        // POSTROUTING turns 1 into 2, and the fw filter on a0 classifies by 2.
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        for cmd in [
            "qdisc add dev a0 root handle 1: htb default 10",
            "class add dev a0 parent 1: classid 1:10 htb rate 100mbit",
            "class add dev a0 parent 1: classid 1:20 htb rate 100mbit",
            "filter add dev a0 parent 1: protocol ip handle 2 fw flowid 1:20",
        ] {
            tc(&mut plane, cmd);
        }
        ipt(
            &mut plane,
            "-t mangle -A OUTPUT -p udp --dport 22 -j MARK --set-mark 1",
        );
        ipt(&mut plane, "-A OUTPUT -m mark --mark 1 -j ACCEPT");
        ipt(&mut plane, "-A OUTPUT -p udp --dport 22 -j DROP");
        ipt(
            &mut plane,
            "-t mangle -A POSTROUTING -m mark --mark 1 -j MARK --set-mark 2",
        );
        for _ in 0..3 {
            plane.input(Dir::AB, &udp_to(22), Time(0));
        }
        plane.input(Dir::AB, &udp_to(53), Time(0));
        let got = run_packets(&mut plane, Time(1000 * MS));
        assert_eq!(got.len(), 4);
        // (HTB takes its two classes in turn, so the order is theirs.)
        let mut marks: Vec<u32> = got.iter().map(|(_, p)| p.mark).collect();
        marks.sort();
        assert_eq!(marks, [0, 2, 2, 2]);
        let c = tc(&mut plane, "-s class show dev a0");
        let sent = |class: &str| {
            let at = c.find(&format!("class htb {class} ")).expect(class);
            c[at..]
                .split("Sent ")
                .nth(1)
                .unwrap()
                .split(" pkt")
                .next()
                .unwrap()
                .to_string()
        };
        assert_eq!(sent("1:20"), "300 bytes 3");
        assert_eq!(sent("1:10"), "100 bytes 1");
        // Counters: three packets met each rule that matched them.
        let l = ipt(&mut plane, "-t mangle -L -v -n -x");
        assert!(l.contains("       3      300 MARK       17"), "{l}");
        assert_eq!(plane.stats(Dir::AB).netfilter_drops, 0);
    }

    #[test]
    fn a_drop_ends_the_packet_before_any_qdisc_counts_it_and_o_picks_the_direction() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        ipt(&mut plane, "-A OUTPUT -o a0 -p udp --dport 22 -j DROP");
        for dir in Dir::BOTH {
            plane.input(dir, &udp_to(22), Time(0));
            plane.input(dir, &udp_to(53), Time(0));
        }
        let mut got = vec![];
        plane.poll(Time(0), &mut |d, p| got.push((d, p.data[23])));
        assert_eq!(got, [(Dir::AB, 53), (Dir::BA, 22), (Dir::BA, 53)]);
        assert_eq!(plane.stats(Dir::AB).netfilter_drops, 1);
        assert_eq!(plane.stats(Dir::BA).netfilter_drops, 0);
        let s = tc(&mut plane, "-s qdisc show dev a0");
        assert!(s.contains("Sent 100 bytes 1 pkt (dropped 0"), "{s}");
        let l = ipt(&mut plane, "-L OUTPUT -v -n -x");
        assert!(l.contains("       1      100 DROP       17"), "{l}");
    }

    #[test]
    fn input_prerouting_and_forward_see_no_live_packet() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        for chain in ["INPUT", "FORWARD"] {
            ipt(&mut plane, &format!("-A {chain} -j DROP"));
        }
        ipt(&mut plane, "-t mangle -A PREROUTING -j DROP");
        plane.input(Dir::AB, &ipv4(100), Time(0));
        plane.input(Dir::BA, &ipv4(100), Time(0));
        let mut n = 0;
        plane.poll(Time(0), &mut |_, _| n += 1);
        assert_eq!(n, 2);
    }

    #[test]
    fn connmark_saved_on_the_way_out_is_restored_on_the_reply() {
        // One connection table sees both directions at their egress.
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        ipt(
            &mut plane,
            "-t mangle -A POSTROUTING -o a0 -j MARK --set-mark 7",
        );
        ipt(
            &mut plane,
            "-t mangle -A POSTROUTING -o a0 -j CONNMARK --save-mark",
        );
        ipt(
            &mut plane,
            "-t mangle -A OUTPUT -o b0 -j CONNMARK --restore-mark",
        );
        ipt(
            &mut plane,
            "-t mangle -A OUTPUT -o b0 -m state --state ESTABLISHED -j ACCEPT",
        );
        plane.input(Dir::AB, &udp_to(22), Time(0));
        let mut reply = udp_to(5000);
        reply[12..16].copy_from_slice(&[10, 0, 0, 2]);
        reply[16..20].copy_from_slice(&[10, 0, 0, 1]);
        reply[20..22].copy_from_slice(&22u16.to_be_bytes());
        plane.input(Dir::BA, &reply, Time(0));
        let mut marks = vec![];
        plane.poll(Time(0), &mut |d, p| marks.push((d, p.mark)));
        assert_eq!(marks, [(Dir::AB, 7), (Dir::BA, 7)]);
        let l = ipt(&mut plane, "-t mangle -L OUTPUT -v -n -x");
        assert!(l.contains("       1      100 ACCEPT"), "{l}");
    }

    #[test]
    fn ingress_connmark_restores_the_connections_mark_at_the_far_side() {
        // CONNMARK marks the connection, not the packet, as it leaves a0;
        // b0's ingress connmark action gives the packet that mark.
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        ipt(
            &mut plane,
            "-t mangle -A POSTROUTING -o a0 -p udp --dport 22 -j CONNMARK --set-mark 5",
        );
        let mut marks = vec![];
        plane.input(Dir::AB, &udp_to(22), Time(0));
        plane.poll(Time(0), &mut |_, p| marks.push(p.mark));
        setup(
            &mut plane,
            &[
                "tc qdisc add dev b0 handle ffff: ingress",
                "tc filter add dev b0 parent ffff: protocol ip pref 1 matchall action connmark",
            ],
        );
        plane.input(Dir::AB, &udp_to(22), Time(1));
        plane.input(Dir::AB, &udp_to(23), Time(1));
        plane.poll(Time(1), &mut |_, p| marks.push(p.mark));
        // Before the action, and for a connection without a mark: 0.
        assert_eq!(marks, [0, 5, 0]);
        let s = tc_show(&mut plane, "-s actions ls action connmark");
        assert!(
            s.contains("Sent 200 bytes 2 pkt (dropped 0, overlimits 2 "),
            "{s}"
        );
        // The packet arrives as a new skb, without the connection a0's
        // hooks attached: an action looking in zone 1 finds nothing.
        setup(
            &mut plane,
            &[
                "tc filter del dev b0 parent ffff: pref 1",
                "tc filter add dev b0 parent ffff: protocol ip pref 1 matchall \
                 action connmark zone 1",
            ],
        );
        plane.input(Dir::AB, &udp_to(22), Time(2));
        plane.poll(Time(2), &mut |_, p| marks.push(p.mark));
        assert_eq!(marks[3..], [0]);
    }

    // ---- mirred and ifb devices ----

    /// Run tc or ip command lines on the plane's namespace and take them
    /// up, as the control socket does.
    fn setup(plane: &mut Plane, cmds: &[&str]) {
        for cmd in cmds {
            let words: Vec<String> = cmd.split(' ').skip(1).map(String::from).collect();
            let o = if cmd.starts_with("ip ") {
                sluice_tc::ip::run(&mut plane.net, &words)
            } else {
                sluice_tc::tc::run(&mut plane.net, &Default::default(), &words)
            };
            assert_eq!(o.code, 0, "{cmd}: {}", o.stderr);
        }
        plane.kick(Time(0));
    }

    /// ifb0, up.
    const IFB0_UP: [&str; 2] = ["ip link add ifb0 type ifb", "ip link set dev ifb0 up"];

    /// Every IPv4 packet arriving at b0 redirected to ifb0.
    const B0_TO_IFB0: [&str; 2] = [
        "tc qdisc add dev b0 handle ffff: ingress",
        "tc filter add dev b0 parent ffff: protocol ip u32 match u32 0 0 \
         action mirred egress redirect dev ifb0",
    ];

    fn tc_show(plane: &mut Plane, args: &str) -> String {
        let words: Vec<String> = args.split(' ').map(String::from).collect();
        let opts = sluice_tc::tc::parse_global(&words).unwrap().0;
        let words: Vec<String> = words.into_iter().filter(|w| w != "-s").collect();
        sluice_tc::tc::run(&mut plane.net, &opts, &words).stdout
    }

    /// A shaper at 8 Mbit/s (10^6 bytes/s) with a 1500-byte bucket lets
    /// 50 packets of 1000 bytes go as tokens come: by time t at most
    /// 1500 + 10^6·t bytes, the last at (50 000 − 1 500) / 10^6 s = 48.5 ms.
    fn assert_shaped_at_8mbit(got: &[(Time, Dir, usize)], dir: Dir) {
        assert_eq!(got.len(), 50, "{got:?}");
        let mut bytes = 0u64;
        for (t, d, len) in got {
            assert_eq!((*d, *len), (dir, 1000));
            bytes += 1000;
            assert!(bytes <= 1500 + t.0 / 1000, "{bytes} bytes by {t:?}");
        }
        let last = got[49].0 .0;
        assert!(
            (48_500_000..48_510_000).contains(&last),
            "last at {last} ns"
        );
    }

    #[test]
    fn ingress_shaping_through_an_ifb_device_paces_what_side_b_receives() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        setup(&mut plane, &IFB0_UP);
        setup(&mut plane, &B0_TO_IFB0);
        setup(
            &mut plane,
            &["tc qdisc add dev ifb0 root tbf rate 8mbit burst 1500 limit 100000"],
        );
        for _ in 0..50 {
            plane.input(Dir::AB, &ipv4(1000), Time(0));
        }
        let got = run(&mut plane, Time(1_000_000_000));
        assert_shaped_at_8mbit(&got, Dir::AB);
        let s = plane.stats(Dir::AB);
        assert_eq!((s.delivered, s.ingress_drops), (50, 0));
        assert_eq!(plane.mirred_drops(), 0);
        let ifb = tc_show(&mut plane, "-s qdisc show dev ifb0");
        assert!(ifb.contains("Sent 50000 bytes 50 pkt "), "{ifb}");
        // The other direction is not shaped.
        plane.input(Dir::BA, &ipv4(1000), Time(2_000_000_000));
        let got = run(&mut plane, Time(3_000_000_000));
        assert_eq!(got, vec![(Time(2_000_000_000), Dir::BA, 1000)]);
    }

    #[test]
    fn a_live_change_of_an_ifb_shaper_takes_effect_at_once() {
        // 8 kbit/s: 1000 bytes a second, so four of five packets wait.
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        setup(&mut plane, &IFB0_UP);
        setup(&mut plane, &B0_TO_IFB0);
        setup(
            &mut plane,
            &["tc qdisc add dev ifb0 root tbf rate 8kbit burst 1500 limit 100000"],
        );
        for _ in 0..5 {
            plane.input(Dir::AB, &ipv4(1000), Time(0));
        }
        let mut got = run(&mut plane, Time(10_000_000));
        assert_eq!(got.len(), 1);
        // At 10 ms the shaper goes to 80 Mbit/s: the rest leave within
        // 4000 bytes' time at the new rate (0.4 ms), not at the old pace.
        let words: Vec<String> =
            "qdisc change dev ifb0 root tbf rate 80mbit burst 1500 limit 100000"
                .split(' ')
                .map(String::from)
                .collect();
        let o = sluice_tc::tc::run(&mut plane.net, &Default::default(), &words);
        assert_eq!(o.code, 0, "{}", o.stderr);
        plane.kick(Time(10_000_000));
        got.extend(run(&mut plane, Time(1_000_000_000)));
        assert_eq!(got.len(), 5, "{got:?}");
        assert!(got[4].0 .0 <= 10_500_000, "{got:?}");
    }

    #[test]
    fn egress_through_an_ifb_device_comes_back_out_of_a0_once() {
        // The packet returns to a0's egress with its first actions skipped
        // (`tc_skip_classify`), so the filter does not send it round again.
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        setup(&mut plane, &IFB0_UP);
        setup(
            &mut plane,
            &[
                "tc qdisc add dev a0 root handle 1: prio",
                "tc filter add dev a0 parent 1: protocol ip u32 match u32 0 0 \
                 action mirred egress redirect dev ifb0",
                "tc qdisc add dev ifb0 root tbf rate 8mbit burst 1500 limit 100000",
            ],
        );
        for _ in 0..50 {
            plane.input(Dir::AB, &ipv4(1000), Time(0));
        }
        let got = run(&mut plane, Time(1_000_000_000));
        assert_shaped_at_8mbit(&got, Dir::AB);
        assert_eq!(plane.mirred_drops(), 0);
        let filter = tc_show(&mut plane, "-s filter show dev a0");
        assert!(filter.contains("Sent 50000 bytes 50 pkt "), "{filter}");
    }

    #[test]
    fn mirred_to_a_down_device_or_round_a_loop_drops() {
        let mut plane = Plane::new(wire(0, 0), wire(0, 0), 1500);
        setup(&mut plane, &IFB0_UP[..1]);
        setup(&mut plane, &B0_TO_IFB0);
        plane.input(Dir::AB, &ipv4(100), Time(0));
        assert!(run(&mut plane, Time(1_000_000)).is_empty());
        assert_eq!(plane.mirred_drops(), 1, "ifb0 is down");
        // b0's ingress sends every packet back into b0's ingress: the fifth
        // time round is one too many.
        setup(
            &mut plane,
            &[
                "tc filter del dev b0 parent ffff:",
                "tc filter add dev b0 parent ffff: protocol ip u32 match u32 0 0 \
                 action mirred ingress redirect dev b0",
            ],
        );
        plane.input(Dir::AB, &ipv4(100), Time(2_000_000));
        assert!(run(&mut plane, Time(3_000_000)).is_empty());
        assert_eq!(plane.mirred_drops(), 2);
        let filter = tc_show(&mut plane, "-s filter show dev b0 ingress");
        assert!(filter.contains("Sent 500 bytes 5 pkt "), "{filter}");
        // A mirror to b0's own ingress once, then on up the stack: two copies.
        setup(
            &mut plane,
            &[
                "tc filter del dev b0 parent ffff:",
                "tc filter add dev b0 parent ffff: protocol ip u32 match ip dst 10.0.0.2/32 \
                 action mirred ingress mirror dev lo",
            ],
        );
        plane.input(Dir::AB, &ipv4(100), Time(4_000_000));
        let got = run(&mut plane, Time(5_000_000));
        assert_eq!(got, vec![(Time(4_000_000), Dir::AB, 100)]);
        assert_eq!(plane.mirred_drops(), 3, "lo's stack is not a side");
    }
}
