//! The simulated network: nodes (hosts and routers) with interfaces, each
//! interface a sluice-core [`Device`] (its tc policy) feeding a [`Port`]
//! (transmit buffer, wire rate, propagation delay) that delivers to the
//! interface at the other end of the link.
//!
//! A packet a host sends goes through its interface's qdiscs and port, lands
//! on the peer interface (whose ingress qdisc may police it), and is either
//! for that node or forwarded by a router along a static shortest-path route.
//! Hosts answer pings and hand TCP/UDP to their applications
//! ([`crate::host`]).
//!
//! Each node's iptables tables ([`sluice_core::netfilter`]) run where Linux
//! runs them: OUTPUT and POSTROUTING for what a node sends (after routing
//! has chosen the interface, before its qdiscs), PREROUTING and INPUT for
//! what it receives, PREROUTING, FORWARD and POSTROUTING for what a router
//! forwards. So marks and CLASSIFY set there reach the egress qdiscs, and
//! a DROP is a loss counted as `netfilter`. A packet arriving on a node starts
//! as a new skb: mark 0, priority from its TOS. Everything is driven by one [`EventQueue`].

use crate::engine::{EventQueue, Lane};
use crate::events::{Action, Timed};
use crate::host::BIN;
use crate::host::{Host, HostEvent, Output};
use crate::ip::ipv4_info;
use sluice_core::device::DevKind;
use sluice_core::netfilter::{Hook, Ifaces, Verdict};
use sluice_core::packet::{is_mpls_type, EthAddrs, Packet};
use sluice_core::port::{Port, PortConfig, WireChange};
use sluice_core::qdisc::pfifo_fast::tos_to_priority;
use sluice_core::stats::DropReason;
use sluice_core::time::{Duration, Time};
use sluice_tc::l3::mac_of;
use sluice_tc::net::Net;
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

/// One interface: its device in the node's namespace, its transmitter,
/// and where the wire goes.
pub struct Iface {
    /// Index of the device in the node's [`Net`].
    pub dev: usize,
    /// Transmit buffer and wire.
    pub port: Port,
    /// The (node, interface) at the other end; an ifb device's interface
    /// is its own peer (what it sends comes back to this node).
    pub peer: (usize, usize),
    /// The time of the port wake-up already scheduled, if any.
    scheduled: Option<Time>,
    /// Where the packets on the wire wait to arrive: a wire is first in,
    /// first out ([`Lane`]).
    wire: Lane,
    /// The device's MAC address (`mac_of`), the source of what leaves
    /// here and the destination of what the peer sends; refreshed as
    /// [`Node`]'s flags are.
    mac: [u8; 6],
    /// The queueing delay of what leaves, when the interface is watched.
    pub monitor: Option<Box<QueueMonitor>>,
}

/// The queueing delay of the packets leaving a port, per [`BIN`] of their
/// departure: each packet's time from entering the interface (its qdisc,
/// or the ring of a `noqueue` device) to its last bit leaving the wire,
/// serialization included.
#[derive(Clone, Debug, Default)]
pub struct QueueMonitor {
    /// Per bin: (sum of delays ns, packets, largest delay ns).
    pub bins: Vec<(u64, u64, u64)>,
}

impl QueueMonitor {
    fn record(&mut self, departed: Time, sojourn: Duration) {
        let b = (departed.0 / BIN.0) as usize;
        if self.bins.len() <= b {
            self.bins.resize(b + 1, (0, 0, 0));
        }
        let e = &mut self.bins[b];
        e.0 += sojourn.0;
        e.1 += 1;
        e.2 = e.2.max(sojourn.0);
    }
}

/// A host or a router.
pub struct Node {
    /// Name in the scenario.
    pub name: String,
    /// The node's address (hosts have one; routers one too, for pings).
    pub addr: Ipv4Addr,
    /// The node's devices and their tc state, as `sluice tc` sees them.
    pub net: Net,
    /// Interfaces.
    pub ifaces: Vec<Iface>,
    /// Destination address -> interface index.
    pub routes: BTreeMap<Ipv4Addr, usize>,
    /// The host stack (routers have one too, answering pings).
    pub host: Host,
    /// Does it forward packets not addressed to it?
    pub router: bool,
    /// Has iptables rules (else its hooks are skipped); refreshed whenever
    /// [`World::run_until`] starts, since `net` may change between runs.
    nf_active: bool,
    /// Has mirred actions (else nothing is looked for in their outbox);
    /// refreshed as `nf_active` is.
    mirred_active: bool,
    /// Are there connmark or ctinfo actions, which read the connection of
    /// a received packet before netfilter has seen it? Refreshed as
    /// `nf_active` is.
    conn_actions: bool,
}

/// What can happen.
#[allow(missing_docs)] // the fields are the node and interface indices they say
pub enum Event {
    /// A port may have work: a packet finished on the wire or a qdisc is ready.
    PortWake { node: usize, iface: usize },
    /// A packet arrives on an interface.
    Arrive {
        node: usize,
        iface: usize,
        pkt: Packet,
    },
    /// A host's timer (application or transport) fires.
    Host { node: usize, ev: HostEvent },
    /// A scenario's event ([`World::timed`]) is due.
    Timed(usize),
}

/// Packet accounting over the whole network, for conservation checks:
/// every packet handed to an interface, and every piece a GSO packet was
/// cut into for the wire beyond its first, is dropped there (qdisc or
/// ring), still queued, or transmitted; every transmitted one is lost on
/// the wire, still in flight, or has arrived; every arrival passed ingress
/// or was dropped by it. A GSO packet counts as one until it is cut.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// Packets handed to interfaces (sent by hosts or forwarded).
    pub entered: u64,
    /// Pieces GSO packets were cut into for the wire, beyond the first.
    pub cut: u64,
    /// Dropped by root qdiscs (refused or shed).
    pub qdisc_dropped: u64,
    /// Dropped because a noqueue device's ring was full.
    pub ring_dropped: u64,
    /// Still in qdiscs, rings or being serialized.
    pub queued: u64,
    /// Finished serialization.
    pub transmitted: u64,
    /// Lost on the wire.
    pub wire_lost: u64,
    /// Propagating on a wire.
    pub in_flight: u64,
    /// Arrived at the far end.
    pub arrived: u64,
    /// Dropped by ingress policers.
    pub ingress_dropped: u64,
    /// Taken by an egress action (a mirred redirect) instead of queued.
    pub stolen: u64,
}

/// Counters of packets that did not make it, by place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LossCounters {
    /// Dropped by an egress qdisc (refused at enqueue, or accepted and
    /// dropped later, as CoDel does at dequeue) or a full ring.
    pub egress: u64,
    /// Dropped by an ingress policer.
    pub ingress: u64,
    /// Lost on the wire.
    pub wire: u64,
    /// No route.
    pub unroutable: u64,
    /// Dropped by an iptables rule or chain policy.
    #[serde(skip_serializing_if = "is_zero")]
    pub netfilter: u64,
    /// Sent by mirred round a loop more than `MIRRED_NEST_LIMIT` times, or
    /// to a device that is gone, down or cannot carry it.
    #[serde(skip_serializing_if = "is_zero")]
    pub mirred: u64,
    /// Arrived with a VLAN tag (one a `vlan` action pushed) at a node that
    /// has no VLAN device: not for this host (`PACKET_OTHERHOST`), as the
    /// kernel's `vlan_do_receive` decides after ingress (a tag with VLAN id
    /// 0, priority only, is no obstacle).
    #[serde(skip_serializing_if = "is_zero")]
    pub vlan: u64,
    /// Arrived as MPLS (an `mpls` action pushed a label) at a node, which
    /// has no MPLS routes: dropped as the kernel drops a protocol it has no
    /// handler for.
    #[serde(skip_serializing_if = "is_zero")]
    pub mpls: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The whole simulated network.
#[derive(Default)]
pub struct World {
    /// Nodes by index.
    pub nodes: Vec<Node>,
    /// Pending events.
    pub queue: EventQueue<Event>,
    /// Where packets were lost.
    pub losses: LossCounters,
    entered: u64,
    stolen: u64,
    in_flight: u64,
    arrived: u64,
    /// Packets a port finished, reused from wake to wake.
    delivered: Vec<(Time, Packet)>,
    /// A host call's output buffers, reused from call to call.
    host_out: Output,
    /// The scenario's timed events, by index ([`Event::Timed`]).
    pub timed: Vec<Timed>,
    /// What went wrong running them (a command that failed), with its time.
    pub errors: Vec<String>,
}

impl World {
    /// Add a node whose devices are in `net`.
    pub fn add_node(&mut self, name: &str, addr: Ipv4Addr, router: bool, net: Net) -> usize {
        self.nodes.push(Node {
            name: name.to_string(),
            addr,
            net,
            ifaces: vec![],
            routes: BTreeMap::new(),
            host: Host::new(addr),
            router,
            nf_active: false,
            mirred_active: false,
            conn_actions: false,
        });
        self.nodes.len() - 1
    }

    /// The node called `name`.
    pub fn node_id(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Connect device `a.1` of node `a.0` with device `b.1` of node `b.0`;
    /// each direction has its own port. Returns the interface indices.
    pub fn connect(
        &mut self,
        a: (usize, &str, PortConfig),
        b: (usize, &str, PortConfig),
    ) -> Result<(usize, usize), String> {
        if a.0 == b.0 {
            return Err("a link joins two different nodes".into());
        }
        let ia = self.nodes[a.0].ifaces.len();
        let ib = self.nodes[b.0].ifaces.len();
        for ((n, name, cfg), peer) in [(a, (b.0, ib)), (b, (a.0, ia))] {
            let wire = self.queue.lane();
            let node = &mut self.nodes[n];
            let dev = node
                .net
                .devices
                .iter()
                .position(|d| d.info.name == name)
                .ok_or_else(|| format!("node {}: no device {name}", node.name))?;
            // The link comes up at its rate, as ethtool would report it.
            let speed = u32::try_from(cfg.rate_bps / 1_000_000).unwrap_or(u32::MAX);
            node.net.devices[dev].set_speed(speed);
            node.ifaces.push(Iface {
                dev,
                port: Port::new(cfg),
                peer,
                scheduled: None,
                wire,
                monitor: None,
                mac: mac_of(&node.net.devices[dev]).unwrap_or_default(),
            });
        }
        Ok((ia, ib))
    }

    /// The way from node `from` to node `to` along the routes: the rate of
    /// its slowest wire (bits/s; 0 if none is limited) and its one-way
    /// propagation delay. `None` if there is no route.
    pub fn path(&self, from: usize, to: usize) -> Option<(u64, Duration)> {
        let dst = self.nodes.get(to)?.addr;
        let (mut node, mut rate, mut delay) = (from, 0u64, Duration::ZERO);
        for _ in 0..self.nodes.len() {
            if node == to {
                return Some((rate, delay));
            }
            let n = self.nodes.get(node)?;
            let ifc = &n.ifaces[*n.routes.get(&dst)?];
            let cfg = ifc.port.config();
            // A trace counts at its mean rate.
            let wire = match ifc.port.trace() {
                Some(t) => t.mean_bps().round().max(1.0) as u64,
                None => cfg.rate_bps,
            };
            if wire > 0 {
                rate = if rate == 0 { wire } else { rate.min(wire) };
            }
            delay = delay + cfg.delay;
            node = ifc.peer.0;
        }
        None
    }

    /// The interfaces a packet from node `from` to node `to` leaves by, in
    /// order: `(node, interface)`; empty if there is no route.
    pub fn route_ifaces(&self, from: usize, to: usize) -> Vec<(usize, usize)> {
        let Some(dst) = self.nodes.get(to).map(|n| n.addr) else {
            return vec![];
        };
        let (mut node, mut hops) = (from, vec![]);
        for _ in 0..self.nodes.len() {
            if node == to {
                return hops;
            }
            let n = &self.nodes[node];
            let Some(&i) = n.routes.get(&dst) else {
                return vec![];
            };
            hops.push((node, i));
            node = n.ifaces[i].peer.0;
        }
        vec![]
    }

    /// Change the wire leaving interface `iface` of `node` at `now`
    /// ([`Port::change`]); a new fixed rate is the device's new link speed.
    pub fn change_wire(&mut self, node: usize, iface: usize, now: Time, change: WireChange) {
        let n = &mut self.nodes[node];
        let ifc = &mut n.ifaces[iface];
        if let Some(r) = change.rate_bps.filter(|r| *r > 0) {
            let speed = u32::try_from(r / 1_000_000).unwrap_or(u32::MAX);
            n.net.devices[ifc.dev].set_speed(speed);
        }
        ifc.port.change(&mut n.net.devices[ifc.dev], now, change);
        self.kick(node, iface, now);
    }

    /// Record the queueing delay of what leaves interface `iface` of `node`.
    pub fn watch(&mut self, node: usize, iface: usize) {
        self.nodes[node].ifaces[iface].monitor = Some(Box::default());
    }

    /// Wake a port now: its qdisc may have changed under it.
    fn kick(&mut self, node: usize, iface: usize, now: Time) {
        self.nodes[node].ifaces[iface].scheduled = Some(now);
        self.queue.schedule(now, Event::PortWake { node, iface });
    }

    /// Run event `i` of [`World::timed`] at `now`.
    fn run_timed(&mut self, i: usize, now: Time) {
        match self.timed[i].action.clone() {
            Action::Wire {
                node,
                iface,
                change,
            } => self.change_wire(node, iface, now, change),
            Action::Commands { node, lines } => {
                let n = &mut self.nodes[node];
                n.net.now = now;
                for (line, words) in &lines {
                    if let Err(e) = crate::run::node_command(&mut n.net, &n.name, line, words) {
                        self.errors.push(format!("{}: {e}", self.timed[i].what));
                        break;
                    }
                }
                self.refresh();
                for iface in 0..self.nodes[node].ifaces.len() {
                    self.kick(node, iface, now);
                }
            }
        }
    }

    /// Compute static routes: for every node, the first hop interface
    /// towards every other node's address (breadth-first, fewest hops).
    pub fn compute_routes(&mut self) {
        for src in 0..self.nodes.len() {
            let mut first: Vec<Option<usize>> = vec![None; self.nodes.len()];
            let mut seen = vec![false; self.nodes.len()];
            seen[src] = true;
            let mut q = VecDeque::new();
            for (i, ifc) in self.nodes[src].ifaces.iter().enumerate() {
                let p = ifc.peer.0;
                if !seen[p] {
                    seen[p] = true;
                    first[p] = Some(i);
                    q.push_back(p);
                }
            }
            while let Some(n) = q.pop_front() {
                // Only routers carry traffic onward.
                if !self.nodes[n].router {
                    continue;
                }
                for ifc in &self.nodes[n].ifaces {
                    let p = ifc.peer.0;
                    if !seen[p] {
                        seen[p] = true;
                        first[p] = first[n];
                        q.push_back(p);
                    }
                }
            }
            let routes: BTreeMap<Ipv4Addr, usize> = first
                .iter()
                .enumerate()
                .filter_map(|(dst, hop)| hop.map(|h| (self.nodes[dst].addr, h)))
                .collect();
            self.nodes[src].routes = routes;
        }
    }

    /// Send a packet `node` generated: routing picks the interface, then
    /// the OUTPUT and POSTROUTING hooks run (marks, CLASSIFY, drops), then
    /// the interface's qdiscs.
    pub fn transmit(&mut self, node: usize, mut pkt: Packet) {
        let Some(info) = ipv4_info(&pkt) else {
            return;
        };
        let Some(iface) = self.route(node, info.dst) else {
            return;
        };
        let now = self.queue.now();
        let n = &mut self.nodes[node];
        // Without rules there is nothing to run (and no name to copy per packet).
        if n.nf_active {
            let oif = n.net.devices[n.ifaces[iface].dev].info.name.clone();
            let hooks = [Hook::Output, Hook::Postrouting];
            let ifaces = Ifaces {
                iif: None,
                oif: Some(&oif),
            };
            if n.net.netfilter.traverse(&hooks, &mut pkt, ifaces, now) == Verdict::Drop {
                self.losses.netfilter += 1;
                return;
            }
        }
        self.output(node, iface, pkt);
    }

    /// A routed packet out of an interface: the Ethernet header the
    /// neighbour layer builds (this device's address, the next hop's), then
    /// the interface's qdiscs.
    fn output(&mut self, node: usize, iface: usize, mut pkt: Packet) {
        let ifc = &self.nodes[node].ifaces[iface];
        let (peer_node, peer_iface) = ifc.peer;
        pkt.eth = Some(EthAddrs {
            dst: self.nodes[peer_node].ifaces[peer_iface].mac,
            src: ifc.mac,
        });
        self.enqueue(node, iface, pkt);
    }

    /// The interface towards the packet's destination (counts unroutable packets).
    fn route(&mut self, node: usize, dst: Ipv4Addr) -> Option<usize> {
        let iface = self.nodes[node].routes.get(&dst).copied();
        if iface.is_none() {
            self.losses.unroutable += 1;
        }
        iface
    }

    /// Hand a packet to an interface's qdiscs and transmitter.
    fn enqueue(&mut self, node: usize, iface: usize, pkt: Packet) {
        let now = self.queue.now();
        self.entered += 1;
        let n = &mut self.nodes[node];
        let ifc = &mut n.ifaces[iface];
        let shed_before = ifc.port.stats.qdisc_shed;
        let dev = ifc.dev;
        match ifc.port.send(&mut n.net.devices[dev], pkt, now) {
            Ok(()) => {}
            Err(DropReason::Stolen) => self.stolen += 1,
            Err(_) => self.losses.egress += 1,
        }
        self.losses.egress += ifc.port.stats.qdisc_shed - shed_before;
        self.schedule_port(node, iface);
        self.send_mirrored(node, dev, false);
    }

    /// Deliver what mirred actions of `node` sent while a packet passed
    /// device `from` (at its ingress, or its egress): each goes to its
    /// target's ingress (as if it arrived there) or out of the target (its
    /// qdiscs: an ifb device's come back through [`World::deliver_from_ifb`]),
    /// remembering where it came from, as `tcf_mirred_act` does.
    #[inline]
    fn send_mirrored(&mut self, node: usize, from: usize, at_ingress: bool) {
        if self.nodes[node].mirred_active {
            self.deliver_mirrored(node, from, at_ingress);
        }
    }

    /// [`World::send_mirrored`] on a node that has mirred actions.
    fn deliver_mirrored(&mut self, node: usize, from: usize, at_ingress: bool) {
        for m in self.nodes[node].net.actions.take_mirrored() {
            let ingress = m.ingress;
            let devices = &self.nodes[node].net.devices;
            let Some((target, pkt)) = m.launch(devices, from, at_ingress) else {
                self.losses.mirred += 1;
                continue;
            };
            if ingress {
                self.receive(node, target, pkt);
            } else if let Some(iface) = self.iface_of(node, target) {
                self.enqueue(node, iface, pkt);
            } else {
                self.losses.mirred += 1;
            }
        }
    }

    /// The interface that transmits out of device `dev`: a link's, or an
    /// ifb device's own (made the first time something is sent to it: an
    /// infinitely fast port whose deliveries come back to this node).
    fn iface_of(&mut self, node: usize, dev: usize) -> Option<usize> {
        let n = &mut self.nodes[node];
        if let Some(i) = n.ifaces.iter().position(|i| i.dev == dev) {
            return Some(i);
        }
        if n.net.devices[dev].kind != DevKind::Ifb {
            return None;
        }
        let wire = self.queue.lane();
        let n = &mut self.nodes[node];
        let i = n.ifaces.len();
        let mac = mac_of(&n.net.devices[dev]).unwrap_or_default();
        n.ifaces.push(Iface {
            dev,
            mac,
            port: Port::new(PortConfig {
                rate_bps: 0,
                ..PortConfig::default()
            }),
            peer: (node, i),
            scheduled: None,
            wire,
            monitor: None,
        });
        Some(i)
    }

    /// A packet an ifb device finished with goes back where mirred took it
    /// from (`ifb_ri_tasklet`): up the stack of the device it arrived on,
    /// without that device's ingress filters again, or out of the device
    /// that sent it.
    fn deliver_from_ifb(&mut self, node: usize, pkt: Packet, now: Time) {
        let devices = &self.nodes[node].net.devices;
        let Some(origin) = devices.iter().position(|d| d.ifindex == pkt.skb_iif) else {
            self.losses.mirred += 1;
            return;
        };
        if pkt.from_ingress {
            self.up_the_stack(node, origin, pkt, now);
        } else if let Some(iface) = self.iface_of(node, origin) {
            let mut pkt = pkt;
            pkt.tc_skip_classify = true;
            self.enqueue(node, iface, pkt);
        } else {
            self.losses.mirred += 1;
        }
    }

    fn schedule_port(&mut self, node: usize, iface: usize) {
        let ifc = &mut self.nodes[node].ifaces[iface];
        if let Some(t) = ifc.port.next_event() {
            if ifc.scheduled != Some(t) {
                ifc.scheduled = Some(t);
                self.queue.schedule(t, Event::PortWake { node, iface });
            }
        }
    }

    /// What the nodes' devices and rules say, read once rather than per
    /// packet: each node's flags and each interface's MAC address. Run
    /// before events run and after each command (which may change them).
    fn refresh(&mut self) {
        for n in &mut self.nodes {
            n.nf_active = !n.net.netfilter.is_idle();
            n.mirred_active = n.net.actions.has_kind("mirred");
            n.conn_actions = n.net.actions.reads_connections();
            for ifc in &mut n.ifaces {
                ifc.mac = mac_of(&n.net.devices[ifc.dev]).unwrap_or_default();
            }
        }
    }

    /// Run every event up to `until`.
    pub fn run_until(&mut self, until: Time) {
        self.refresh();
        while let Some((now, ev)) = self.queue.pop_until(until) {
            match ev {
                Event::PortWake { node, iface } => self.port_wake(node, iface, now),
                Event::Arrive { node, iface, pkt } => self.arrive(node, iface, pkt, now),
                Event::Host { node, ev } => {
                    let mut out = std::mem::take(&mut self.host_out);
                    self.nodes[node].host.on_event(ev, now, &mut out);
                    self.host_output(node, out);
                }
                Event::Timed(i) => self.run_timed(i, now),
            }
        }
        self.queue.advance_to(until);
    }

    fn port_wake(&mut self, node: usize, iface: usize, now: Time) {
        let n = &mut self.nodes[node];
        let ifc = &mut n.ifaces[iface];
        if ifc.scheduled != Some(now) {
            return; // superseded
        }
        ifc.scheduled = None;
        let lost_before = ifc.port.stats.wire_losses;
        let shed_before = ifc.port.stats.qdisc_shed;
        let mut delivered = std::mem::take(&mut self.delivered);
        ifc.port
            .advance(&mut n.net.devices[ifc.dev], now, &mut delivered);
        self.losses.wire += ifc.port.stats.wire_losses - lost_before;
        self.losses.egress += ifc.port.stats.qdisc_shed - shed_before;
        let ((pn, pi), wire) = (ifc.peer, ifc.wire);
        if let Some(m) = &mut ifc.monitor {
            let delay = ifc.port.config().delay;
            for (at, pkt) in &delivered {
                let left = Time(at.0.saturating_sub(delay.0));
                m.record(left, left.saturating_since(pkt.tstamp));
            }
        }
        for (at, pkt) in delivered.drain(..) {
            self.in_flight += 1;
            self.queue.schedule_in(
                wire,
                at,
                Event::Arrive {
                    node: pn,
                    iface: pi,
                    pkt,
                },
            );
        }
        self.delivered = delivered;
        self.schedule_port(node, iface);
    }

    fn arrive(&mut self, node: usize, iface: usize, mut pkt: Packet, now: Time) {
        self.in_flight -= 1;
        self.arrived += 1;
        let dev = self.nodes[node].ifaces[iface].dev;
        if self.nodes[node].net.devices[dev].kind == DevKind::Ifb {
            self.deliver_from_ifb(node, pkt, now);
            return;
        }
        // A new skb on this host: what the sender's stack and qdiscs set
        // stays there.
        pkt.mark = 0;
        pkt.priority = 0;
        pkt.tc_index = 0;
        pkt.redirects = 0;
        pkt.from_ingress = false;
        pkt.tc_skip_classify = false;
        let n = &self.nodes[node];
        pkt.skb_iif = n.net.devices[dev].ifindex;
        // No hook has seen it here yet: tc's connmark and ctinfo find its
        // connection by its tuple (skipped when no such action exists).
        pkt.conn = None;
        if n.conn_actions {
            pkt.conn = n.net.netfilter.connection(&pkt, now);
        }
        self.receive(node, dev, pkt);
    }

    /// A packet received on device `dev`: its ingress qdisc (policers,
    /// mirred), then the stack.
    fn receive(&mut self, node: usize, dev: usize, pkt: Packet) {
        let now = self.queue.now();
        let verdict = self.nodes[node].net.devices[dev].receive_verdict(pkt, now);
        self.send_mirrored(node, dev, true);
        match verdict {
            Ok(pkt) => self.up_the_stack(node, dev, pkt, now),
            Err(DropReason::Stolen) => {}
            Err(_) => self.losses.ingress += 1,
        }
    }

    /// A received packet past ingress: for this node (PREROUTING, INPUT,
    /// the host), or forwarded by a router.
    fn up_the_stack(&mut self, node: usize, dev: usize, mut pkt: Packet, now: Time) {
        if pkt.vlan.is_some_and(|t| t.tci & 0x0fff != 0) || !pkt.vlan_inband.is_empty() {
            self.losses.vlan += 1;
            return;
        }
        if is_mpls_type(pkt.protocol) {
            self.losses.mpls += 1;
            return;
        }
        let Some(info) = ipv4_info(&pkt) else { return };
        // The priority the IP stack derives from the TOS (`ip_forward`).
        pkt.priority = tos_to_priority(info.tos);
        if info.dst == self.nodes[node].addr {
            let n = &mut self.nodes[node];
            let net = &mut n.net;
            if n.nf_active {
                let iif = net.devices[dev].info.name.clone();
                let hooks = [Hook::Prerouting, Hook::Input];
                let ifaces = Ifaces {
                    iif: Some(&iif),
                    oif: None,
                };
                if net.netfilter.traverse(&hooks, &mut pkt, ifaces, now) == Verdict::Drop {
                    self.losses.netfilter += 1;
                    return;
                }
            }
            let mut out = std::mem::take(&mut self.host_out);
            self.nodes[node].host.receive(pkt, &info, now, &mut out);
            self.host_output(node, out);
        } else if self.nodes[node].router {
            self.forward(node, dev, info.dst, pkt, now);
        }
    }

    /// Route a packet through: PREROUTING, FORWARD and POSTROUTING, then
    /// the outgoing interface's qdiscs.
    fn forward(&mut self, node: usize, in_dev: usize, dst: Ipv4Addr, mut pkt: Packet, now: Time) {
        let Some(out) = self.route(node, dst) else {
            return;
        };
        let n = &mut self.nodes[node];
        if n.nf_active {
            let iif = n.net.devices[in_dev].info.name.clone();
            let oif = n.net.devices[n.ifaces[out].dev].info.name.clone();
            let hooks = [Hook::Prerouting, Hook::Forward, Hook::Postrouting];
            let ifaces = Ifaces {
                iif: Some(&iif),
                oif: Some(&oif),
            };
            if n.net.netfilter.traverse(&hooks, &mut pkt, ifaces, now) == Verdict::Drop {
                self.losses.netfilter += 1;
                return;
            }
        }
        self.output(node, out, pkt);
    }

    /// Send what a host produced and set its timers; `out`'s buffers are
    /// kept for the next host call.
    fn host_output(&mut self, node: usize, mut out: Output) {
        for pkt in out.packets.drain(..) {
            self.transmit(node, pkt);
        }
        for (at, ev) in out.timers.drain(..) {
            self.queue.schedule(at, Event::Host { node, ev });
        }
        self.host_out = out;
    }

    /// Count where every packet is (see [`Census`]).
    pub fn census(&self) -> Census {
        let mut c = Census {
            entered: self.entered,
            stolen: self.stolen,
            in_flight: self.in_flight,
            arrived: self.arrived,
            ..Census::default()
        };
        c.ingress_dropped = self.losses.ingress;
        for n in &self.nodes {
            for ifc in &n.ifaces {
                let root = n.net.devices[ifc.dev].root.stats();
                c.qdisc_dropped += root.drops;
                c.queued += root.qlen as u64 + ifc.port.backlog_packets() as u64;
                c.ring_dropped += ifc.port.stats.ring_drops;
                c.transmitted += ifc.port.stats.tx_pieces;
                c.cut += ifc.port.stats.cut;
                c.wire_lost += ifc.port.stats.wire_losses;
            }
        }
        c
    }

    /// Start a host's applications (schedules their first events).
    pub fn start_apps(&mut self) {
        let now = self.queue.now();
        for node in 0..self.nodes.len() {
            let out = self.nodes[node].host.start(now);
            self.host_output(node, out);
        }
    }
}
