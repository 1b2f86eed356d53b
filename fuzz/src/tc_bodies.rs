//! Fuzz bodies that need only sluice-tc and sluice-core.
//!
//! This file is compiled twice: as a module of the `sluice-fuzz` crate (the
//! cargo-fuzz targets call it), and by `crates/sluice-tc/tests/roundtrip.rs`
//! through `#[path]`, whose stable smoke test feeds it a fixed pseudo-random
//! corpus so that CI checks the no-panic property without a nightly compiler.
//! So it names only `sluice_tc` and `sluice_core`, never `crate::`.

use sluice_core::handle::Handle;
use sluice_core::packet::{
    ConnMark, EthAddrs, Packet, VlanTag, ETH_P_8021AD, ETH_P_8021Q, ETH_P_IP, ETH_P_IPV6,
    ETH_P_MPLS_UC,
};
use sluice_core::qdisc::{Cx, Dequeue};
use sluice_core::time::Time;
use sluice_tc::net::Net;
use sluice_tc::{ip, tc};

/// Commands read from one input: at most this many lines are run.
pub const MAX_COMMANDS: usize = 4;

/// The golden captures' starting point, veth `DEV`/`PEER`, both up; `DEV` with
/// four transmit queues, so that mq can be built on it.
pub fn veth() -> Net {
    let mut net = Net::new();
    for c in [
        "link add dev DEV numtxqueues 4 type veth peer name PEER",
        "link set dev DEV up",
        "link set dev PEER up",
    ] {
        let o = ip::run(&mut net, &words(c));
        assert_eq!(o.code, 0, "{c}: {}", o.stderr);
    }
    net
}

/// Split a line into words as the shell would for a plain command.
pub fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// The input as lines of words: lossy UTF-8, one command per line.
pub fn commands(data: &[u8]) -> Vec<Vec<String>> {
    String::from_utf8_lossy(data)
        .lines()
        .take(MAX_COMMANDS)
        .map(words)
        .collect()
}

/// Run one `tc` command line (global options included) as `sluice tc` does
/// for a single invocation.
pub fn run_tc(net: &mut Net, argv: &[String]) -> sluice_tc::Outcome {
    match tc::parse_global(argv) {
        Ok((opts, rest)) => tc::run(net, &opts, &rest),
        Err(o) => o,
    }
}

/// Every listing of `DEV`'s state, text and JSON, with and without details.
const SHOWS: [&str; 8] = [
    "-s -d qdisc show dev DEV",
    "-s -d class show dev DEV",
    "-s -d filter show dev DEV",
    "-s -d filter show dev DEV ingress",
    "-j -s -d qdisc show",
    "-j -p filter show dev DEV",
    "chain show dev DEV",
    "-s actions ls action police",
];

/// `tc_parser`: each line of the input is a tc command (global options
/// first) run against one namespace with a veth pair up; then the state is
/// listed every way, and a few packets go through `DEV`'s qdiscs and its
/// ingress hook. Must never panic, whatever the input.
pub fn tc_parser(data: &[u8]) {
    let mut net = veth();
    for argv in commands(data) {
        run_tc(&mut net, &argv);
    }
    for s in SHOWS {
        run_tc(&mut net, &words(s));
    }
    push_packets(&mut net, "DEV");
}

/// `ip_parser`: each line is an `ip` command run against a fresh namespace;
/// then `ip link show`, the addresses and routes in every form, and a tc
/// listing of every device. Must never panic.
pub fn ip_parser(data: &[u8]) {
    let mut net = Net::new();
    for argv in commands(data) {
        ip::run(&mut net, &argv);
    }
    for show in [
        "link show",
        "-j addr",
        "-br -o addr",
        "route show table all",
        "-6 -j route show table all",
    ] {
        ip::run(&mut net, &words(show));
    }
    run_tc(&mut net, &words("-s -d qdisc show"));
    let names: Vec<String> = net.devices.iter().map(|d| d.info.name.clone()).collect();
    for n in names {
        push_packets(&mut net, &n);
    }
}

/// The uplink classes of "The Ultimate Traffic Conditioner" (LARTC 15.8.3,
/// examples/ultimate-traffic-conditioner-htb.sh) and every filter of the
/// script, with its ingress policer.
pub const CONDITIONER: [&str; 12] = [
    "qdisc add dev DEV root handle 1: htb default 20",
    "class add dev DEV parent 1: classid 1:1 htb rate 220kbit burst 6k",
    "class add dev DEV parent 1:1 classid 1:10 htb rate 220kbit burst 6k prio 1",
    "class add dev DEV parent 1:1 classid 1:20 htb rate 198kbit burst 6k prio 2",
    "qdisc add dev DEV parent 1:10 handle 10: sfq perturb 10",
    "qdisc add dev DEV parent 1:20 handle 20: sfq perturb 10",
    "filter add dev DEV parent 1:0 protocol ip prio 10 u32 match ip tos 0x10 0xff flowid 1:10",
    "filter add dev DEV parent 1:0 protocol ip prio 10 u32 match ip protocol 1 0xff flowid 1:10",
    "filter add dev DEV parent 1: protocol ip prio 10 u32 match ip protocol 6 0xff \
     match u8 0x05 0x0f at 0 match u16 0x0000 0xffc0 at 2 match u8 0x10 0xff at 33 flowid 1:10",
    "qdisc add dev DEV handle ffff: ingress",
    "filter add dev DEV parent ffff: protocol ip prio 50 u32 match ip src 0.0.0.0/0 \
     police rate 800kbit burst 10k drop flowid :1",
    // Not in the script: an address and a port (a `nexthdr+` offset).
    "filter add dev DEV parent 1: protocol ip prio 20 u32 match ip dst 10.0.0.0/8 \
     match ip dport 22 0xffff flowid 1:20",
];

/// `DEV` set up with [`CONDITIONER`].
pub fn conditioner() -> Net {
    let mut net = veth();
    for c in CONDITIONER {
        let o = run_tc(&mut net, &words(c));
        assert_eq!(o.code, 0, "{c}: {}", o.stderr);
    }
    net
}

/// The classifying half of `packet_parser`: `data` as an IPv4 packet
/// (network header first, as u32 offsets index it) classified by the
/// conditioner's filters, received through the ingress policer, and
/// enqueued into the HTB tree and dequeued. Must never panic.
pub fn classify_packet(data: &[u8]) {
    let mut net = conditioner();
    let len = (data.len() as u32).saturating_add(14);
    let mut pkt = Packet::new(data.to_vec(), len, ETH_P_IP);
    let dev = net.dev_mut("DEV").expect("DEV exists");
    if let Ok(block) = dev.block_mut(Handle::new(1, 0)) {
        let _ = block.classify(&mut pkt, Time::ZERO);
    }
    let mut cx = Cx::new(Time::ZERO);
    if let Some(p) = dev.receive(pkt.clone(), Time::ZERO) {
        let _ = dev.root.enqueue(p, &mut cx);
    }
    let _ = dev.root.enqueue(pkt, &mut cx);
    drain(&mut net, "DEV", Time::ZERO);
}

/// The rewriting half of `packet_parser`: `data` as an IPv4 and as an
/// IPv6 packet through pedit (transport keys, variable offsets, `add`,
/// offsets before the header), nat both ways (any address), a csum action
/// recomputing every checksum it knows and ctinfo, which rewrites the DS
/// field, on DEV's ingress; and on PEER's ingress, carrying up to three
/// VLAN tags its first bytes describe (and once as an MPLS packet), with
/// or without an Ethernet header, through flower's VLAN, MPLS and address
/// keys, u32 at negative offsets, the vlan and mpls actions, pedit's
/// Ethernet keys, skbmod and a gate. Must never panic.
pub fn rewrite_packet(data: &[u8]) {
    let mut net = veth();
    for c in [
        "qdisc add dev PEER ingress",
        "filter add dev PEER parent ffff: protocol 802.1ad pref 1 flower vlan_id 10 vlan_ethtype 802.1Q cvlan_id 5 cvlan_ethtype ip ip_proto udp dst_port 53 action vlan pop reclassify",
        "filter add dev PEER parent ffff: protocol 802.1Q pref 2 flower vlan_prio 3 vlan_ethtype ipv6 ip_proto tcp action vlan modify id 7 pipe",
        "filter add dev PEER parent ffff: protocol all pref 3 flower num_of_vlans 2 vlan_ethtype ip cvlan_id 4 action vlan push id 4 protocol 802.1ad",
        "filter add dev PEER parent ffff: protocol mpls_uc pref 4 flower mpls lse depth 1 label 16 lse depth 7 bos 1 action mpls dec_ttl pipe action mpls modify label 5 tc 3 pipe action mpls pop protocol mpls_uc pipe action mpls pop protocol ip continue",
        "filter add dev PEER parent ffff: protocol all pref 5 matchall action mpls push label 7 pipe action mpls mac_push label 8 bos 0 pipe action mpls pop protocol ipv6 continue",
        "filter add dev PEER parent ffff: protocol all pref 6 matchall action skbmod ecn pipe action skbmod swap mac pipe action gate sched-entry open 1 -1 100 sched-entry close 1 continue",
        "filter add dev PEER parent ffff: protocol all pref 7 u32 match u16 0x0800 0xffff at -2 match u32 0 0 at -16 action pedit ex munge eth dst set 02:00:00:00:00:09 munge offset -8 u32 add 1 pipe action vlan pop_eth pipe action vlan push_eth dst_mac 02:00:00:00:00:01 src_mac 02:00:00:00:00:02 continue",
        "filter add dev PEER parent ffff: protocol all pref 8 flower dst_mac 02:00:00:00:00:01/16 src_mac 00:00:00:00:00:00/ff:00:ff:00:00:ff action skbmod set dmac 02:00:00:00:00:03 pipe action mpls mac_push label 9",
        "qdisc add dev DEV ingress",
        "filter add dev DEV parent ffff: protocol all matchall action pedit ex munge tcp dport add 1 munge udp sport set 7 munge ip ttl decrement munge offset 0 u32 at 0 f0 2 set 1 munge offset -4 u8 invert munge offset 0 u8 at 1 3 0 set 1 pipe action nat ingress 0.0.0.0/1 10.9.8.7 pipe action nat egress 128.0.0.0/1 172.16.0.1 pipe action csum iph icmp igmp tcp udp udplite sctp pipe action ctinfo dscp 0xfc000000",
    ] {
        let o = run_tc(&mut net, &words(c));
        assert_eq!(o.code, 0, "{c}: {}", o.stderr);
    }
    let dev = net.dev_mut("DEV").expect("DEV exists");
    for protocol in [ETH_P_IP, ETH_P_IPV6] {
        let len = (data.len() as u32).saturating_add(14);
        let mut pkt = Packet::new(data.to_vec(), len, protocol);
        pkt.conn = Some(ConnMark {
            mark: 0xb800_0000,
            attached: true,
        });
        let _ = dev.receive(pkt, Time::ZERO);
    }
    let peer = net.dev_mut("PEER").expect("PEER exists");
    let (head, rest) = data.split_at(data.len().min(7));
    let ntags = head.first().map_or(0, |b| (b % 4) as usize);
    let tags: Vec<VlanTag> = head[1.min(head.len())..]
        .chunks_exact(2)
        .take(ntags)
        .map(|t| VlanTag {
            proto: if t[0] & 0x80 != 0 {
                ETH_P_8021AD
            } else {
                ETH_P_8021Q
            },
            tci: u16::from_be_bytes([t[0], t[1]]),
        })
        .collect();
    // An Ethernet header (its addresses from the first byte) unless that
    // byte is odd, as a TUN device's packets have none.
    let eth = head.first().filter(|b| *b & 1 == 0).map(|b| EthAddrs {
        dst: [2, 0, 0, 0, 0, *b],
        src: [*b; 6],
    });
    for protocol in [ETH_P_IP, ETH_P_IPV6, ETH_P_MPLS_UC] {
        let len = (rest.len() as u32).saturating_add(14);
        let mut pkt = Packet::new(rest.to_vec(), len, protocol);
        pkt.eth = eth;
        pkt.vlan = tags.first().copied();
        pkt.vlan_inband = tags.iter().skip(1).copied().collect();
        let _ = peer.receive(pkt, Time::ZERO);
    }
}

/// A minimal IPv4 header (no checksum) with `proto`'s first 20 bytes
/// after it, for pushing traffic through a configuration.
fn ipv4(proto: u8, tos: u8, total_len: u16, dport: u16) -> Vec<u8> {
    let mut b = vec![0u8; 40];
    b[0] = 0x45;
    b[1] = tos;
    b[2..4].copy_from_slice(&total_len.to_be_bytes());
    b[8] = 64;
    b[9] = proto;
    b[12..16].copy_from_slice(&[10, 0, 0, 1]);
    b[16..20].copy_from_slice(&[10, 0, 0, 2]);
    b[20..22].copy_from_slice(&40000u16.to_be_bytes());
    b[22..24].copy_from_slice(&dport.to_be_bytes());
    b[32] = 0x50; // TCP data offset 5
    b[33] = 0x10; // ACK
    b
}

/// Send a mix of packets through `dev`'s ingress hook and egress qdiscs,
/// then dequeue until empty (bounded), following the qdiscs' wake-ups.
pub fn push_packets(net: &mut Net, dev: &str) {
    let Some(d) = net.dev_mut(dev) else { return };
    let mut cx = Cx::new(Time::ZERO);
    for i in 0..12u32 {
        let (proto, tos, size) = match i % 4 {
            0 => (6, 0x10, 40),
            1 => (1, 0, 84),
            2 => (17, 0x08, 1500),
            _ => (6, 0, 9000),
        };
        let mut p = Packet::new(
            ipv4(proto, tos, size, 22 + i as u16),
            size as u32 + 14,
            ETH_P_IP,
        );
        p.mark = i;
        p.priority = if i == 7 { 0x0001_0010 } else { i % 16 };
        p.id = i as u64;
        if let Some(p) = d.receive(p, Time::ZERO) {
            let _ = d.root.enqueue(p, &mut cx);
        }
    }
    drain(net, dev, Time::ZERO);
}

/// Dequeue from `dev`'s root until it is empty, at most 64 times, moving
/// the clock to each wake-up a qdisc asks for (never backwards).
fn drain(net: &mut Net, dev: &str, mut now: Time) {
    let Some(d) = net.dev_mut(dev) else { return };
    for _ in 0..64 {
        let mut cx = Cx::new(now);
        match d.root.dequeue(&mut cx) {
            Dequeue::Packet(_) => {}
            Dequeue::Wait(t) if t != Time::NEVER => now = Time(now.0.max(t.0)),
            Dequeue::Wait(_) | Dequeue::Empty => break,
        }
    }
}
