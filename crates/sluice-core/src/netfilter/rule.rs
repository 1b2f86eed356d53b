//! One iptables rule: the fixed IPv4 part (`struct ipt_ip`: protocol,
//! addresses, interfaces, each invertible), the matches in the order they
//! were given, and the target. Matching reads the packet's bytes through
//! [`Headers`], a view of the IPv4 and transport headers.
//!
//! The match semantics follow the kernel's modules: xt_tcpudp.c (port ranges,
//! `(flags & mask) == cmp` for `--tcp-flags`), xt_multiport.c (revision 1:
//! ports and ranges, source, destination or either), xt_length.c (the IP
//! total length within `min..=max`), xt_mark.c (`(mark & mask) == value`,
//! also for the connection's mark), xt_dscp.c (the top six bits of the TOS
//! byte), xt_conntrack.c / xt_state.c (a bit per connection state). Each
//! invertible test is exclusive-or'ed with its `!`.

use crate::packet::{Packet, ETH_P_IP};
use serde::{Deserialize, Serialize};

/// `IPPROTO_TCP`.
pub const PROTO_TCP: u8 = 6;
/// `IPPROTO_UDP`.
pub const PROTO_UDP: u8 = 17;
/// `IPPROTO_ICMP`.
pub const PROTO_ICMP: u8 = 1;

/// TCP flag bits as `--tcp-flags` names them.
pub mod tcp_flag {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
    /// URG.
    pub const URG: u8 = 0x20;
}

/// Connection-state bits (`XT_CONNTRACK_STATE_*`, as `--state`/`--ctstate` name them).
pub mod ct_state {
    /// INVALID: no connection could be tracked for the packet.
    pub const INVALID: u8 = 0x01;
    /// NEW: the connection has not yet seen traffic both ways.
    pub const NEW: u8 = 0x02;
    /// ESTABLISHED: the connection has seen packets in both directions.
    pub const ESTABLISHED: u8 = 0x04;
    /// RELATED: a connection expected by another (ICMP errors, FTP data).
    pub const RELATED: u8 = 0x08;
    /// UNTRACKED: the raw table's NOTRACK.
    pub const UNTRACKED: u8 = 0x10;
}

/// A value with its `!`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inv<T> {
    /// `!` given.
    pub inv: bool,
    /// The value tested.
    pub v: T,
}

impl<T> Inv<T> {
    /// An un-inverted test.
    pub fn new(v: T) -> Self {
        Inv { inv: false, v }
    }
}

/// An IPv4 address and mask (the address already masked, as iptables stores it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Net4 {
    /// Address bits, host order.
    pub addr: u32,
    /// Mask bits, host order.
    pub mask: u32,
}

/// An inclusive port range.
pub type PortRange = (u16, u16);

/// Which ports a multiport match reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PortSide {
    /// `--sports`.
    Source,
    /// `--dports`.
    Destination,
    /// `--ports`: either.
    Either,
}

/// A match module and its options.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Match {
    /// `-m tcp`: ports and flags.
    Tcp {
        /// `--sport`.
        sport: Option<Inv<PortRange>>,
        /// `--dport`.
        dport: Option<Inv<PortRange>>,
        /// `--tcp-flags MASK COMP` / `--syn`: (mask, comp).
        flags: Option<Inv<(u8, u8)>>,
    },
    /// `-m udp`: ports.
    Udp {
        /// `--sport`.
        sport: Option<Inv<PortRange>>,
        /// `--dport`.
        dport: Option<Inv<PortRange>>,
    },
    /// `-m multiport` (revision 1).
    Multiport {
        /// Which ports.
        side: PortSide,
        /// `!`.
        inv: bool,
        /// Ports and ranges (at most 15 slots, a range taking two).
        ports: Vec<PortRange>,
    },
    /// `-m length --length MIN[:MAX]` (the IP total length).
    Length(Inv<(u16, u16)>),
    /// `-m mark --mark VALUE[/MASK]`.
    Mark(Inv<(u32, u32)>),
    /// `-m connmark --mark VALUE[/MASK]`.
    Connmark(Inv<(u32, u32)>),
    /// `-m dscp --dscp VALUE`.
    Dscp(Inv<u8>),
    /// `-m state --state LIST` (state bits).
    State(Inv<u8>),
    /// `-m conntrack --ctstate LIST` (state bits).
    Conntrack(Inv<u8>),
}

impl Match {
    /// The module name (`-m NAME`).
    pub fn name(&self) -> &'static str {
        match self {
            Match::Tcp { .. } => "tcp",
            Match::Udp { .. } => "udp",
            Match::Multiport { .. } => "multiport",
            Match::Length(_) => "length",
            Match::Mark(_) => "mark",
            Match::Connmark(_) => "connmark",
            Match::Dscp(_) => "dscp",
            Match::State(_) => "state",
            Match::Conntrack(_) => "conntrack",
        }
    }
}

/// What `CONNMARK` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConnmarkOp {
    /// `ctmark = (ctmark & !ctmask) ^ ctmark_value`.
    Set {
        /// Bits to xor in.
        value: u32,
        /// Bits to clear first.
        ctmask: u32,
    },
    /// `ctmark = (ctmark & !ctmask) ^ (nfmark & nfmask)`.
    Save {
        /// Which packet-mark bits are copied.
        nfmask: u32,
        /// Which connection-mark bits are replaced.
        ctmask: u32,
    },
    /// `nfmark = (nfmark & !nfmask) ^ (ctmark & ctmask)`.
    Restore {
        /// Which packet-mark bits are replaced.
        nfmask: u32,
        /// Which connection-mark bits are copied.
        ctmask: u32,
    },
}

/// Where a packet goes after a matching rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    /// No `-j`: only the counters move; the next rule is tried.
    None,
    /// `ACCEPT`: leave this table's hook.
    Accept,
    /// `DROP`.
    Drop,
    /// `RETURN`: back to the calling chain (the policy in a built-in chain).
    Return,
    /// `-j CHAIN`: a user chain.
    Jump(String),
    /// `MARK`: `mark = (mark & !mask) ^ value` (every option is this form).
    Mark {
        /// Bits to xor in.
        value: u32,
        /// Bits to clear first.
        mask: u32,
    },
    /// `CONNMARK`.
    Connmark(ConnmarkOp),
    /// `CLASSIFY --set-class`: sets `skb->priority`.
    Classify(u32),
    /// `DSCP --set-dscp`: rewrites the top six bits of the TOS byte.
    Dscp(u8),
}

impl Target {
    /// The name iptables lists it under (empty for none).
    pub fn name(&self) -> &str {
        match self {
            Target::None => "",
            Target::Accept => "ACCEPT",
            Target::Drop => "DROP",
            Target::Return => "RETURN",
            Target::Jump(c) => c,
            Target::Mark { .. } => "MARK",
            Target::Connmark(_) => "CONNMARK",
            Target::Classify(_) => "CLASSIFY",
            Target::Dscp(_) => "DSCP",
        }
    }
}

/// A rule as it was given (two rules are "the same" for `-D` when these are equal).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleSpec {
    /// `-p` (0 is `all`).
    pub proto: Inv<u8>,
    /// `-s`.
    pub src: Inv<Net4>,
    /// `-d`.
    pub dst: Inv<Net4>,
    /// `-i` (empty: any; a trailing `+` matches a prefix).
    pub iif: Inv<String>,
    /// `-o`.
    pub oif: Inv<String>,
    /// Matches, in command-line order.
    pub matches: Vec<Match>,
    /// `-j`.
    pub target: Target,
}

impl Default for RuleSpec {
    fn default() -> Self {
        let any = Inv::new(Net4 { addr: 0, mask: 0 });
        RuleSpec {
            proto: Inv::new(0),
            src: any.clone(),
            dst: any,
            iif: Inv::new(String::new()),
            oif: Inv::new(String::new()),
            matches: vec![],
            target: Target::None,
        }
    }
}

/// Packet and byte counters (`struct xt_counters`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Packets.
    pub packets: u64,
    /// Bytes of IP packet (the header on), as netfilter counts `skb->len`.
    pub bytes: u64,
}

impl Counters {
    /// Count one packet of `len` bytes.
    pub fn add(&mut self, len: u64) {
        self.packets += 1;
        self.bytes += len;
    }
}

/// A rule and its counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// What it matches and does.
    pub spec: RuleSpec,
    /// What it has matched.
    pub counters: Counters,
}

/// The header fields the matches read, from the packet's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Headers {
    /// Source address.
    pub src: u32,
    /// Destination address.
    pub dst: u32,
    /// Protocol.
    pub proto: u8,
    /// TOS byte.
    pub tos: u8,
    /// IP total length.
    pub len: u16,
    /// A fragment other than the first (no transport header).
    pub later_fragment: bool,
    /// Source and destination port (TCP, UDP), if the header is present.
    pub ports: Option<(u16, u16)>,
    /// TCP flags (the low six bits of byte 13), if present.
    pub tcp_flags: Option<u8>,
    /// ICMP type and echo identifier, if present.
    pub icmp: Option<(u8, u16)>,
}

impl Headers {
    /// Read an IPv4 packet's headers; `None` for anything else.
    pub fn parse(pkt: &Packet) -> Option<Headers> {
        let d = &pkt.data;
        if pkt.protocol != ETH_P_IP || d.len() < 20 || d[0] >> 4 != 4 {
            return None;
        }
        let ihl = usize::from(d[0] & 0x0f) * 4;
        if ihl < 20 {
            return None;
        }
        let word = |o: usize| u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]]);
        let frag = u16::from_be_bytes([d[6], d[7]]) & 0x1fff;
        let proto = d[9];
        let l4 = if frag == 0 { d.get(ihl..) } else { None };
        let ports = match (proto, l4) {
            (PROTO_TCP | PROTO_UDP, Some(t)) if t.len() >= 4 => Some((
                u16::from_be_bytes([t[0], t[1]]),
                u16::from_be_bytes([t[2], t[3]]),
            )),
            _ => None,
        };
        let tcp_flags = match (proto, l4) {
            (PROTO_TCP, Some(t)) if t.len() >= 14 => Some(t[13] & 0x3f),
            _ => None,
        };
        let icmp = match (proto, l4) {
            (PROTO_ICMP, Some(t)) if t.len() >= 8 => Some((t[0], u16::from_be_bytes([t[4], t[5]]))),
            _ => None,
        };
        Some(Headers {
            src: word(12),
            dst: word(16),
            proto,
            tos: d[1],
            len: u16::from_be_bytes([d[2], d[3]]),
            later_fragment: frag != 0,
            ports,
            tcp_flags,
            icmp,
        })
    }
}

/// What a match may look at besides the headers.
pub struct MatchCtx<'a> {
    /// The packet's headers.
    pub h: &'a Headers,
    /// The packet's mark now.
    pub mark: u32,
    /// The connection's mark (0 without a connection).
    pub ctmark: u32,
    /// The packet's connection state bit.
    pub ctstate: u8,
    /// Input interface, if any.
    pub iif: Option<&'a str>,
    /// Output interface, if any.
    pub oif: Option<&'a str>,
}

/// `-i`/`-o`: exact name, or a prefix when the pattern ends in `+`.
pub fn iface_matches(pattern: &str, name: Option<&str>) -> bool {
    let name = name.unwrap_or("");
    match pattern.strip_suffix('+') {
        Some(prefix) => name.starts_with(prefix),
        None => name == pattern,
    }
}

fn in_range(r: &Inv<PortRange>, port: u16) -> bool {
    (r.v.0 <= port && port <= r.v.1) != r.inv
}

fn ports_ok(sport: &Option<Inv<PortRange>>, dport: &Option<Inv<PortRange>>, h: &Headers) -> bool {
    // xt_tcpudp: a later fragment never matches; a truncated header is dropped
    // (hotdrop) — here it just does not match.
    let Some((s, d)) = h.ports else { return false };
    sport.as_ref().is_none_or(|r| in_range(r, s)) && dport.as_ref().is_none_or(|r| in_range(r, d))
}

impl Match {
    /// Does the packet match?
    pub fn matches(&self, c: &MatchCtx) -> bool {
        let h = c.h;
        match self {
            Match::Tcp {
                sport,
                dport,
                flags,
            } => {
                if !ports_ok(sport, dport, h) {
                    return false;
                }
                match (flags, h.tcp_flags) {
                    (None, _) => true,
                    (Some(f), Some(got)) => ((got & f.v.0) == f.v.1) != f.inv,
                    (Some(_), None) => false,
                }
            }
            Match::Udp { sport, dport } => ports_ok(sport, dport, h),
            Match::Multiport { side, inv, ports } => {
                let Some((s, d)) = h.ports else { return false };
                let hit = |p: u16| ports.iter().any(|&(lo, hi)| lo <= p && p <= hi);
                let any = match side {
                    PortSide::Source => hit(s),
                    PortSide::Destination => hit(d),
                    PortSide::Either => hit(s) || hit(d),
                };
                any != *inv
            }
            Match::Length(r) => (r.v.0 <= h.len && h.len <= r.v.1) != r.inv,
            Match::Mark(m) => ((c.mark & m.v.1) == m.v.0) != m.inv,
            Match::Connmark(m) => ((c.ctmark & m.v.1) == m.v.0) != m.inv,
            Match::Dscp(m) => ((h.tos >> 2) == m.v) != m.inv,
            Match::State(m) | Match::Conntrack(m) => ((c.ctstate & m.v) != 0) != m.inv,
        }
    }
}

impl RuleSpec {
    /// Does the packet match the fixed part and every match?
    pub fn matches(&self, c: &MatchCtx) -> bool {
        let h = c.h;
        let net = |n: &Inv<Net4>, a: u32| ((a & n.v.mask) == n.v.addr) != n.inv;
        let proto_ok = (self.proto.v == 0 || self.proto.v == h.proto) != self.proto.inv;
        let if_ok = |p: &Inv<String>, name: Option<&str>| {
            p.v.is_empty() && !p.inv || iface_matches(&p.v, name) != p.inv
        };
        proto_ok
            && net(&self.src, h.src)
            && net(&self.dst, h.dst)
            && if_ok(&self.iif, c.iif)
            && if_ok(&self.oif, c.oif)
            && self.matches.iter().all(|m| m.matches(c))
    }
}

/// Rewrite the DSCP bits of an IPv4 header, fixing its checksum (RFC 1624),
/// as `ipv4_change_dsfield` does.
pub fn set_dscp(pkt: &mut Packet, dscp: u8) {
    pkt.change_dsfield(0x03, dscp << 2);
}
