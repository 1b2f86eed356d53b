//! Rule semantics against what the kernel's modules define.

use super::rule::*;
use super::*;
use crate::packet::{Packet, ETH_P_IP};
use crate::time::Duration;

/// An IPv4 TCP/UDP packet with real header bytes (20-byte IP header, 20-byte
/// TCP or 8-byte UDP header), total length `len`.
fn pkt(
    proto: u8,
    src: [u8; 4],
    sport: u16,
    dst: [u8; 4],
    dport: u16,
    flags: u8,
    len: u16,
) -> Packet {
    let mut d = vec![0u8; 40];
    d[0] = 0x45;
    d[2..4].copy_from_slice(&len.to_be_bytes());
    d[8] = 64;
    d[9] = proto;
    d[12..16].copy_from_slice(&src);
    d[16..20].copy_from_slice(&dst);
    d[20..22].copy_from_slice(&sport.to_be_bytes());
    d[22..24].copy_from_slice(&dport.to_be_bytes());
    d[33] = flags;
    Packet::new(d, u32::from(len) + 14, ETH_P_IP)
}

const A: [u8; 4] = [192, 168, 1, 10];
const B: [u8; 4] = [10, 0, 0, 1];
const OUT: Ifaces = Ifaces {
    iif: None,
    oif: Some("eth0"),
};

fn rule(f: impl FnOnce(&mut RuleSpec)) -> RuleSpec {
    let mut r = RuleSpec::default();
    f(&mut r);
    r
}

fn tcp_ports(sport: Option<u16>, dport: Option<u16>) -> Match {
    Match::Tcp {
        sport: sport.map(|p| Inv::new((p, p))),
        dport: dport.map(|p| Inv::new((p, p))),
        flags: None,
    }
}

#[test]
fn mark_80_on_sport_80_reaches_the_packet_and_counts_ip_bytes() {
    // iptables -t mangle -A OUTPUT -o eth0 -p tcp --sport 80 -j MARK --set-mark 80
    let mut nf = Netfilter::default();
    let r = rule(|r| {
        r.oif = Inv::new("eth0".into());
        r.proto = Inv::new(PROTO_TCP);
        r.matches.push(tcp_ports(Some(80), None));
        r.target = Target::Mark {
            value: 80,
            mask: u32::MAX,
        };
    });
    nf.mangle.append("OUTPUT", r).unwrap();
    let hooks = [Hook::Output, Hook::Postrouting];
    let mut web = pkt(PROTO_TCP, A, 80, B, 40000, tcp_flag::ACK, 1500);
    let mut other = pkt(PROTO_TCP, A, 22, B, 40000, tcp_flag::ACK, 1000);
    let mut wrong_if = pkt(PROTO_TCP, A, 80, B, 40000, tcp_flag::ACK, 1500);
    assert_eq!(nf.traverse(&hooks, &mut web, OUT, Time(0)), Verdict::Accept);
    nf.traverse(&hooks, &mut other, OUT, Time(0));
    let eth1 = Ifaces {
        iif: None,
        oif: Some("eth1"),
    };
    nf.traverse(&hooks, &mut wrong_if, eth1, Time(0));
    assert_eq!((web.mark, other.mark, wrong_if.mark), (80, 0, 0));
    let c = &nf.mangle.chain("OUTPUT").unwrap();
    // Bytes are the IP total length, not the accounted wire length.
    assert_eq!(
        c.rules[0].counters,
        Counters {
            packets: 1,
            bytes: 1500
        }
    );
    assert_eq!(
        c.policy_counters,
        Counters {
            packets: 3,
            bytes: 4000
        }
    );
}

#[test]
fn connmark_on_syn_then_restore_marks_the_whole_connection() {
    // The home gateway's SSH policy (examples/home-gateway.sh): CONNMARK
    // --set-mark 300 on the SYN, then CONNMARK --restore-mark for every
    // packet.
    let mut nf = Netfilter::default();
    let syn = rule(|r| {
        r.oif = Inv::new("eth0".into());
        r.proto = Inv::new(PROTO_TCP);
        r.matches.push(Match::Tcp {
            sport: None,
            dport: Some(Inv::new((22, 22))),
            flags: Some(Inv::new((tcp_flag::SYN, tcp_flag::SYN))),
        });
        r.target = Target::Connmark(ConnmarkOp::Set {
            value: 300,
            ctmask: u32::MAX,
        });
    });
    let restore = rule(|r| {
        r.target = Target::Connmark(ConnmarkOp::Restore {
            nfmask: u32::MAX,
            ctmask: u32::MAX,
        })
    });
    nf.mangle.append("POSTROUTING", syn).unwrap();
    nf.mangle.append("POSTROUTING", restore).unwrap();
    let hooks = [Hook::Output, Hook::Postrouting];
    let mut s = pkt(PROTO_TCP, A, 5555, B, 22, tcp_flag::SYN, 60);
    nf.traverse(&hooks, &mut s, OUT, Time(0));
    assert_eq!(s.mark, 300, "the SYN itself is restored after the set");
    let mut data = pkt(PROTO_TCP, A, 5555, B, 22, tcp_flag::ACK, 1500);
    nf.traverse(&hooks, &mut data, OUT, Time(1_000));
    assert_eq!(data.mark, 300);
    // Another connection to port 80 is not marked.
    let mut web = pkt(PROTO_TCP, A, 5556, B, 80, tcp_flag::ACK, 1500);
    nf.traverse(&hooks, &mut web, OUT, Time(1_000));
    assert_eq!(web.mark, 0);
    // The reply direction finds the same connection.
    let mut reply = pkt(PROTO_TCP, B, 22, A, 5555, tcp_flag::ACK, 52);
    nf.traverse(
        &[Hook::Prerouting],
        &mut reply,
        Ifaces::default(),
        Time(2_000),
    );
    let key = conntrack::Tuple {
        proto: PROTO_TCP,
        src: u32::from_be_bytes(A),
        dst: u32::from_be_bytes(B),
        sport: 5555,
        dport: 22,
    };
    let c = nf.conntrack.get(&key).unwrap();
    assert_eq!((c.mark, c.seen_reply), (300, true));
}

#[test]
fn state_is_new_until_a_reply_then_established_and_expires() {
    let mut nf = Netfilter::default();
    for (state, mark) in [(ct_state::NEW, 1), (ct_state::ESTABLISHED, 2)] {
        nf.mangle
            .append(
                "PREROUTING",
                rule(|r| {
                    r.matches.push(Match::State(Inv::new(state)));
                    r.target = Target::Mark {
                        value: mark,
                        mask: u32::MAX,
                    };
                }),
            )
            .unwrap();
    }
    let none = Ifaces::default();
    let at = |s: u64| Time(Duration::from_secs(s).as_nanos());
    let mut q = pkt(PROTO_UDP, A, 5000, B, 53, 0, 60);
    nf.traverse(&[Hook::Prerouting], &mut q, none, at(0));
    let mut q2 = pkt(PROTO_UDP, A, 5000, B, 53, 0, 60);
    nf.traverse(&[Hook::Prerouting], &mut q2, none, at(1));
    let mut a = pkt(PROTO_UDP, B, 53, A, 5000, 0, 60);
    nf.traverse(&[Hook::Prerouting], &mut a, none, at(2));
    let mut q3 = pkt(PROTO_UDP, A, 5000, B, 53, 0, 60);
    nf.traverse(&[Hook::Prerouting], &mut q3, none, at(3));
    assert_eq!((q.mark, q2.mark, a.mark, q3.mark), (1, 1, 2, 2));
    // A replied UDP connection lives 120 s after its last packet (the kernel's
    // nf_conntrack_udp_timeout_stream); after that the tuple starts anew.
    let mut late = pkt(PROTO_UDP, A, 5000, B, 53, 0, 60);
    nf.traverse(&[Hook::Prerouting], &mut late, none, at(3 + 119));
    assert_eq!(late.mark, 2);
    let mut later = pkt(PROTO_UDP, A, 5000, B, 53, 0, 60);
    nf.traverse(&[Hook::Prerouting], &mut later, none, at(122 + 121));
    assert_eq!(later.mark, 1);
}

#[test]
fn tcp_flags_length_dscp_and_multiport_follow_the_modules() {
    let syn = pkt(PROTO_TCP, A, 1, B, 22, tcp_flag::SYN, 60);
    let synack = pkt(PROTO_TCP, A, 1, B, 22, tcp_flag::SYN | tcp_flag::ACK, 60);
    // --syn is --tcp-flags FIN,SYN,RST,ACK SYN.
    let syn_only = Match::Tcp {
        sport: None,
        dport: None,
        flags: Some(Inv::new((0x17, 0x02))),
    };
    assert!(m(&syn_only, &syn));
    assert!(!m(&syn_only, &synack));
    // --length 0:64 covers a 60-byte SYN; ! inverts.
    let len = Match::Length(Inv::new((0, 64)));
    assert!(m(&len, &syn));
    assert!(!m(
        &Match::Length(Inv {
            inv: true,
            v: (0, 64)
        }),
        &syn
    ));
    // multiport --dports 20:23,80 holds for 22, --sports does not.
    let mp = |side| Match::Multiport {
        side,
        inv: false,
        ports: vec![(20, 23), (80, 80)],
    };
    assert!(m(&mp(PortSide::Destination), &syn));
    assert!(!m(&mp(PortSide::Source), &syn));
    assert!(m(&mp(PortSide::Either), &syn));
    // --mark 0x5/0xf against 0x15.
    assert!(m(&Match::Mark(Inv::new((0x5, 0xf))), &syn));
    assert!(!m(&Match::Mark(Inv::new((0x5, 0xff))), &syn));
    // DSCP: EF is 46, the TOS byte 0xb8.
    let mut ef = syn.clone();
    set_dscp(&mut ef, 46);
    assert_eq!(ef.data[1], 0xb8);
    assert!(m(&Match::Dscp(Inv::new(46)), &ef));
}

/// Does `mt` match `p` (mark 0x15, a NEW connection)?
fn m(mt: &Match, p: &Packet) -> bool {
    let h = Headers::parse(p).unwrap();
    mt.matches(&MatchCtx {
        h: &h,
        mark: 0x15,
        ctmark: 0,
        ctstate: ct_state::NEW,
        iif: None,
        oif: None,
    })
}

#[test]
fn dscp_rewrite_keeps_the_ipv4_checksum_valid() {
    let mut p = pkt(PROTO_UDP, A, 1, B, 2, 0, 100);
    let sum = |d: &[u8]| {
        let mut s: u32 = d[..20]
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum();
        while s >> 16 != 0 {
            s = (s & 0xffff) + (s >> 16);
        }
        s
    };
    // Give it a valid checksum first.
    let c = !(sum(&p.data) as u16);
    p.data[10..12].copy_from_slice(&c.to_be_bytes());
    assert_eq!(sum(&p.data), 0xffff);
    set_dscp(&mut p, 10);
    assert_eq!(p.data[1] >> 2, 10);
    assert_eq!(sum(&p.data), 0xffff);
}

#[test]
fn jumps_returns_policies_and_loops() {
    let mut nf = Netfilter::default();
    let t = &mut nf.mangle;
    t.new_chain("sub").unwrap();
    t.append(
        "sub",
        rule(|r| {
            r.proto = Inv::new(PROTO_UDP);
            r.target = Target::Return;
        }),
    )
    .unwrap();
    t.append(
        "sub",
        rule(|r| {
            r.target = Target::Mark {
                value: 7,
                mask: u32::MAX,
            }
        }),
    )
    .unwrap();
    t.append("FORWARD", rule(|r| r.target = Target::Jump("sub".into())))
        .unwrap();
    // sub -> sub is a loop; the table is left as it was.
    let before = t.clone();
    assert_eq!(
        t.append("sub", rule(|r| r.target = Target::Jump("sub".into()))),
        Err(NfError::Loop)
    );
    assert_eq!(*t, before);
    // CLASSIFY is refused in a chain reachable from PREROUTING.
    t.new_chain("pre").unwrap();
    t.append(
        "PREROUTING",
        rule(|r| r.target = Target::Jump("pre".into())),
    )
    .unwrap();
    assert_eq!(
        t.append("pre", rule(|r| r.target = Target::Classify(0x10010))),
        Err(NfError::Invalid)
    );
    assert_eq!(t.delete_chain(Some("sub")), Err(NfError::InUse));
    t.set_policy("FORWARD", "DROP").unwrap();
    let fwd = Ifaces {
        iif: Some("eth1"),
        oif: Some("eth0"),
    };
    let mut u = pkt(PROTO_UDP, A, 1, B, 2, 0, 100);
    let mut tcp = pkt(PROTO_TCP, A, 1, B, 2, tcp_flag::ACK, 100);
    assert_eq!(
        nf.traverse(&[Hook::Forward], &mut u, fwd, Time(0)),
        Verdict::Drop
    );
    assert_eq!(
        nf.traverse(&[Hook::Forward], &mut tcp, fwd, Time(0)),
        Verdict::Drop
    );
    assert_eq!((u.mark, tcp.mark), (0, 7));
    // A dropped first packet leaves no connection behind.
    assert!(nf.conntrack.is_empty());
}

/// A namespace whose PREROUTING has one rule (so connections are tracked)
/// and a connection table of at most `max` entries.
fn tracking(max: usize) -> Netfilter {
    let mut nf = Netfilter::default();
    nf.mangle
        .append(
            "PREROUTING",
            rule(|r| r.matches.push(Match::State(Inv::new(ct_state::NEW)))),
        )
        .unwrap();
    nf.conntrack.max = max;
    nf
}

fn prerouting(nf: &mut Netfilter, mut p: Packet, secs: u64) -> Verdict {
    let t = Time(Duration::from_secs(secs).as_nanos());
    nf.traverse(&[Hook::Prerouting], &mut p, Ifaces::default(), t)
}

#[test]
fn a_full_table_evicts_an_unassured_connection_or_drops_the_new_packet() {
    let mut nf = tracking(4);
    // Four UDP queries nobody answered: none is assured.
    for port in 1..=4 {
        let q = pkt(PROTO_UDP, A, port, B, 53, 0, 60);
        assert_eq!(prerouting(&mut nf, q, 0), Verdict::Accept);
    }
    assert_eq!(nf.conntrack.len(), 4);
    // A fifth connection makes room by an early drop.
    let q = pkt(PROTO_UDP, A, 5, B, 53, 0, 60);
    assert_eq!(prerouting(&mut nf, q, 1), Verdict::Accept);
    assert_eq!((nf.conntrack.len(), nf.conntrack.early_drops), (4, 1));

    // Now every entry is answered (assured): a new connection finds
    // nothing to evict and its packet is dropped; the answered ones live on.
    let mut nf = tracking(4);
    for port in 1..=4 {
        prerouting(&mut nf, pkt(PROTO_UDP, A, port, B, 53, 0, 60), 0);
        prerouting(&mut nf, pkt(PROTO_UDP, B, 53, A, port, 0, 60), 0);
    }
    let q = pkt(PROTO_UDP, A, 5, B, 53, 0, 60);
    assert_eq!(prerouting(&mut nf, q, 1), Verdict::Drop);
    assert_eq!((nf.conntrack.drops, nf.conntrack.early_drops), (1, 0));
    assert_eq!(nf.conntrack.len(), 4);
    let old = pkt(PROTO_UDP, A, 2, B, 53, 0, 60);
    assert_eq!(prerouting(&mut nf, old, 1), Verdict::Accept);
    // Once the table's entries have expired (UDP, 120 s after the last
    // packet), there is room again without evicting anyone.
    let q = pkt(PROTO_UDP, A, 5, B, 53, 0, 60);
    assert_eq!(prerouting(&mut nf, q, 200), Verdict::Accept);
    assert_eq!(nf.conntrack.early_drops, 0);
}

#[test]
fn tcp_is_assured_only_when_its_handshake_completes() {
    let key = |sport| conntrack::Tuple {
        proto: PROTO_TCP,
        src: u32::from_be_bytes(A),
        dst: u32::from_be_bytes(B),
        sport,
        dport: 80,
    };
    let mut nf = tracking(2);
    prerouting(&mut nf, pkt(PROTO_TCP, A, 1, B, 80, tcp_flag::SYN, 60), 0);
    let synack = tcp_flag::SYN | tcp_flag::ACK;
    prerouting(&mut nf, pkt(PROTO_TCP, B, 80, A, 1, synack, 60), 0);
    assert!(!nf.conntrack.get(&key(1)).unwrap().assured);
    prerouting(&mut nf, pkt(PROTO_TCP, A, 1, B, 80, tcp_flag::ACK, 52), 0);
    assert!(nf.conntrack.get(&key(1)).unwrap().assured);
    // A half-open connection (SYN answered, no ACK yet) is evicted for a
    // new one; the established one is kept.
    prerouting(&mut nf, pkt(PROTO_TCP, A, 2, B, 80, tcp_flag::SYN, 60), 0);
    prerouting(&mut nf, pkt(PROTO_TCP, B, 80, A, 2, synack, 60), 0);
    let syn3 = pkt(PROTO_TCP, A, 3, B, 80, tcp_flag::SYN, 60);
    assert_eq!(prerouting(&mut nf, syn3, 1), Verdict::Accept);
    assert!(nf.conntrack.get(&key(1)).is_some());
    assert!(nf.conntrack.get(&key(2)).is_none());
    assert!(nf.conntrack.get(&key(3)).is_some());
}

#[test]
fn expired_connections_are_collected_as_new_ones_come() {
    let mut nf = tracking(conntrack::DEFAULT_MAX);
    // 100 unanswered UDP connections at t = 0 expire 30 s later.
    for port in 0..100 {
        prerouting(&mut nf, pkt(PROTO_UDP, A, port, B, 53, 0, 60), 0);
    }
    // 100 new ones at t = 60 s: the collector passes every entry (a few per
    // new connection) and removes the dead, which no packet looks up again.
    for port in 0..100 {
        prerouting(&mut nf, pkt(PROTO_UDP, B, port, A, 53, 0, 60), 60);
    }
    assert_eq!(nf.conntrack.len(), 100);
    assert!(nf
        .conntrack
        .iter()
        .all(|c| c.orig.src == u32::from_be_bytes(B)));
    assert_eq!(nf.conntrack.early_drops, 0);
}
