//! The packet as a qdisc sees it: bytes from the network header plus the
//! metadata the kernel keeps beside them in the `sk_buff`.
//!
//! `data` starts at the IPv4/IPv6 header, so the u32 classifier's offsets
//! ("`match u8 0x10 0xff at 33`") index it directly, as they index the
//! kernel's network header. `data` may hold only the headers (the simulator
//! carries no payload); `len` is the length every qdisc accounts with — the
//! kernel's `qdisc_pkt_len`, which on Ethernet includes the 14-byte MAC header.

use crate::time::Time;
use std::ops::{Deref, DerefMut};

/// EtherType of IPv4.
pub const ETH_P_IP: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETH_P_IPV6: u16 = 0x86dd;
/// EtherType of ARP.
pub const ETH_P_ARP: u16 = 0x0806;
/// `ETH_P_ALL`: matches every protocol in a filter.
pub const ETH_P_ALL: u16 = 0x0003;

/// One packet on its way through a device's qdiscs: its [`Skb`] on the
/// heap, so that handing it from a device to a qdisc, from a qdisc to its
/// child and into a queue moves one pointer, as the kernel passes an
/// `sk_buff *`, rather than copying a hundred bytes of metadata at every
/// step. It reads and writes as the `Skb` it holds (`pkt.len`, `pkt.mark`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Packet(Box<Skb>);

/// A packet's bytes and metadata: what the kernel keeps in its `sk_buff`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skb {
    /// Bytes from the network header on (possibly only the headers).
    pub data: Vec<u8>,
    /// Length for accounting: wire bytes including the link-layer header.
    pub len: u32,
    /// EtherType (`skb->protocol`).
    pub protocol: u16,
    /// Firewall mark (`skb->mark`), set by iptables MARK/CONNMARK.
    pub mark: u32,
    /// `skb->priority`: a TC_PRIO band, or a class id that selects a class directly.
    pub priority: u32,
    /// Flow hash (`skb->hash`), 0 until computed.
    pub hash: u32,
    /// When the packet entered the current qdisc tree (set by the device).
    pub tstamp: Time,
    /// An identifier the front end assigns, for tracing.
    pub id: u64,
    /// `skb->pkt_type` once an action set it (`skbedit ptype`); `None`: the
    /// path's own (`PACKET_OUTGOING` on egress).
    pub pkt_type: Option<u8>,
    /// The real length while a size table ([`crate::stab`]) has made `len`
    /// something else (the kernel's `skb->len` beside `qdisc_pkt_len`).
    pub skb_len: Option<u32>,
    /// Segmentation offload: this packet stands for several wire packets
    /// (a TSO/USO super-packet from a device with offloads). See [`crate::gso`].
    pub gso: Option<Gso>,
    /// Checksum offload (`CHECKSUM_PARTIAL`): the transport checksum is
    /// not computed yet; its field holds the pseudo-header sum.
    pub csum_partial: Option<CsumPartial>,
    /// `skb->tstamp` as a launch time (`SO_TXTIME`, or taprio's
    /// txtime-assist), which etf holds the packet until; `None`: no launch
    /// time (the kernel's 0). [`Skb::tstamp`] is the time the packet entered
    /// its qdisc tree instead.
    pub txtime: Option<Time>,
    /// `skb->queue_mapping` as an `skbedit queue_mapping` action set it:
    /// the transmit queue of a multi-queue device ([`crate::qdisc::mq`]);
    /// `None`: picked by the flow hash.
    pub queue_mapping: Option<u16>,
    /// `skb->tc_index`: set from the class minor by the ingress (and
    /// clsact) filters on `ok`; gred picks the virtual queue from its low
    /// four bits, and rewrites them to the default VQ when they name none.
    pub tc_index: u16,
    /// `skb->skb_iif`: the device the packet came in on or, once a mirred
    /// action has sent it on, the device it was redirected from (where an
    /// ifb device hands it back).
    pub skb_iif: u32,
    /// `skb->from_ingress`: mirred took it from an ingress path (an ifb
    /// device passes it up that device's stack; else out of its egress).
    pub from_ingress: bool,
    /// How many times mirred has sent it on: the loop guard (the kernel's
    /// old `tc_verd` TTL), so a redirect loop ends in a drop.
    pub redirects: u8,
    /// `skb->tc_skip_classify`: an ifb device sent it back out of the
    /// device mirred took it from; the first filter actions it meets there
    /// are skipped (`tcf_action_exec` clears the flag and says `ok`), so it
    /// is not redirected again.
    pub tc_skip_classify: bool,
    /// The packet's connection-tracking entry, as far as tc's `connmark`
    /// and `ctinfo` actions read it; `None` when the front end tracks no
    /// connection for it (see [`ConnMark`]).
    pub conn: Option<ConnMark>,
    /// The VLAN tag carried beside the packet (`skb->vlan_proto` and
    /// `skb->vlan_tci` when a tag is present: the "accelerated" tag, the
    /// outermost on the wire, not counted in `len`), as the vlan action
    /// pushes it. While there is one, filters see its TPID as the packet's
    /// protocol ([`Packet::tc_protocol`]).
    pub vlan: Option<VlanTag>,
    /// Tags in the packet itself between the link-layer and network
    /// headers, outermost first (a tag pushed over another moves the older
    /// one here; each counts 4 bytes in `len`). `protocol` stays the
    /// network protocol, as sluice's other readers of it expect; the
    /// kernel's `skb->protocol` would be the first one's TPID.
    pub vlan_inband: Vec<VlanTag>,
    /// The Ethernet header's addresses, when the packet has one: a
    /// simulated interface builds it on output (its own address as source,
    /// the next hop's as destination), as the kernel's neighbour layer does
    /// before the egress qdiscs; a TUN device's packets have none. With the
    /// tags and `protocol` it makes the bytes before the network header
    /// ([`Skb::mac_header`]).
    pub eth: Option<EthAddrs>,
    /// Scratch space of the qdisc holding the packet (the kernel's
    /// `qdisc_skb_cb(skb)->data`): sfb keeps the packet's two bin hashes
    /// here between enqueue and dequeue. Meaningless outside a qdisc.
    pub cb: [u32; 2],
}

/// An Ethernet header's destination and source addresses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthAddrs {
    /// Destination address.
    pub dst: [u8; 6],
    /// Source address.
    pub src: [u8; 6],
}

/// An 802.1Q or 802.1ad tag: its TPID (`0x8100`, `0x88a8`) and its TCI
/// (priority in the top 3 bits, then DEI, then the 12-bit VLAN id).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VlanTag {
    /// The tag protocol identifier.
    pub proto: u16,
    /// The tag control information.
    pub tci: u16,
}

/// `ETH_P_8021Q`.
pub const ETH_P_8021Q: u16 = 0x8100;
/// `ETH_P_8021AD`.
pub const ETH_P_8021AD: u16 = 0x88a8;

/// `eth_type_vlan`: an 802.1Q or 802.1ad tag protocol.
pub fn is_vlan_type(t: u16) -> bool {
    t == ETH_P_8021Q || t == ETH_P_8021AD
}

/// `ETH_P_MPLS_UC`: MPLS unicast.
pub const ETH_P_MPLS_UC: u16 = 0x8847;
/// `ETH_P_MPLS_MC`: MPLS multicast.
pub const ETH_P_MPLS_MC: u16 = 0x8848;

/// `eth_p_mpls`: an MPLS protocol.
pub fn is_mpls_type(t: u16) -> bool {
    t == ETH_P_MPLS_UC || t == ETH_P_MPLS_MC
}

/// What tc actions see of a packet's connection: the entry netfilter
/// attached to the skb (`skb->_nfct`: egress, after the POSTROUTING hook),
/// or — for a packet no hook has seen yet, as on ingress — the entry
/// `nf_conntrack_find_get` finds by the packet's tuple. Front ends fill it
/// in from their connection table just before the packet meets tc, so the
/// mark is the connection's mark at that moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnMark {
    /// `ct->mark`.
    pub mark: u32,
    /// Attached to the skb. If not, it was found by a tuple lookup in zone
    /// 0, the only zone sluice's connection table has: an action looking in
    /// another zone finds nothing.
    pub attached: bool,
}

impl ConnMark {
    /// The connection an action configured with conntrack `zone` finds.
    pub fn in_zone(conn: Option<ConnMark>, zone: u16) -> Option<ConnMark> {
        conn.filter(|c| c.attached || zone == 0)
    }
}

/// A GSO packet's `skb_shinfo` fields: it carries `segs` segments' payload
/// behind one copy of the headers; `len` already counts every segment's
/// headers (`qdisc_pkt_len_init`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gso {
    /// Payload bytes per segment (`gso_size`); the last may carry fewer.
    pub size: u16,
    /// Segments (`gso_segs`): what the qdiscs' packet counters count.
    pub segs: u16,
    /// What is segmented.
    pub kind: GsoKind,
    /// `SKB_GSO_TCP_ECN`: the TCP header has CWR set (only the first segment keeps it).
    pub ecn: bool,
}

/// The protocol a GSO packet is segmented at (`skb_shinfo(skb)->gso_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoKind {
    /// TCP over IPv4 (`SKB_GSO_TCPV4`).
    TcpV4,
    /// TCP over IPv6 (`SKB_GSO_TCPV6`).
    TcpV6,
    /// UDP datagrams of `size` bytes each (`SKB_GSO_UDP_L4`).
    UdpL4,
}

/// Where the checksum still to be computed goes (`skb->csum_start`, `skb->csum_offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsumPartial {
    /// Offset in `data` where the checksummed bytes start (the transport header).
    pub start: u16,
    /// Offset of the checksum field from `start` (16 for TCP, 6 for UDP).
    pub offset: u16,
}

impl Packet {
    /// A packet of `len` accounted bytes carrying the given network-layer bytes.
    pub fn new(data: Vec<u8>, len: u32, protocol: u16) -> Self {
        Packet::from(Skb {
            data,
            len,
            protocol,
            ..Default::default()
        })
    }

    /// The metadata and bytes, out of their box.
    pub fn into_skb(self) -> Skb {
        *self.0
    }
}

impl From<Skb> for Packet {
    fn from(skb: Skb) -> Self {
        Packet(Box::new(skb))
    }
}

impl Deref for Packet {
    type Target = Skb;
    #[inline(always)]
    fn deref(&self) -> &Skb {
        &self.0
    }
}

impl DerefMut for Packet {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut Skb {
        &mut self.0
    }
}

impl std::fmt::Debug for Packet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl Skb {
    /// Wire packets this packet stands for: `gso_segs` for a GSO packet,
    /// else 1. Packet counters count these, as the kernel's `bstats_update`.
    #[inline]
    pub fn segs(&self) -> u32 {
        self.gso.map_or(1, |g| g.segs.max(1) as u32)
    }

    /// Back to the real length as the packet leaves the qdiscs for the wire.
    pub fn restore_len(&mut self) {
        if let Some(l) = self.skb_len.take() {
            self.len = l;
        }
    }

    /// The IPv4 TOS byte, if this is IPv4 with a header present.
    pub fn ipv4_tos(&self) -> Option<u8> {
        (self.protocol == ETH_P_IP && self.data.len() >= 2 && self.data[0] >> 4 == 4)
            .then(|| self.data[1])
    }

    /// The DS field / traffic class of IPv4 or IPv6.
    pub fn dsfield(&self) -> Option<u8> {
        match self.protocol {
            ETH_P_IP => self.ipv4_tos(),
            ETH_P_IPV6 if self.data.len() >= 2 && self.data[0] >> 4 == 6 => {
                Some((self.data[0] << 4) | (self.data[1] >> 4))
            }
            _ => None,
        }
    }

    /// `INET_ECN_set_ce`: mark Congestion Experienced if the packet is
    /// ECN-capable (true also when it already was CE); false for Not-ECT and
    /// non-IP packets. CoDel, fq_codel, sfq's RED and netem's `ecn` share it.
    pub fn set_ce(&mut self) -> bool {
        match self.dsfield().map(|ds| ds & 3) {
            None | Some(0) => false,
            Some(3) => true,
            Some(_) => self.change_dsfield(0xff, 3),
        }
    }

    /// `ipv4_change_dsfield` / `ipv6_change_dsfield`: the DS field becomes
    /// `(ds & mask) | value`. IPv4's header checksum is updated
    /// incrementally (RFC 1624). False, and nothing changed, when the
    /// packet is neither IPv4 with a whole header nor IPv6.
    pub fn change_dsfield(&mut self, mask: u8, value: u8) -> bool {
        let d = &mut self.data;
        match self.protocol {
            ETH_P_IP if d.len() >= 20 && d[0] >> 4 == 4 => {
                let old = [d[0], d[1]];
                d[1] = (d[1] & mask) | value;
                let check = u16::from_be_bytes([d[10], d[11]]);
                let check = crate::gso::csum_replace(check, &old, &d[0..2], false);
                d[10..12].copy_from_slice(&check.to_be_bytes());
                true
            }
            ETH_P_IPV6 if d.len() >= 2 && d[0] >> 4 == 6 => {
                // The traffic class straddles bytes 0 and 1.
                let ds = (((d[0] << 4) | (d[1] >> 4)) & mask) | value;
                d[0] = (d[0] & 0xf0) | (ds >> 4);
                d[1] = (d[1] & 0x0f) | (ds << 4);
                true
            }
            _ => false,
        }
    }

    /// The protocol tc's filters compare with theirs (`skb_protocol(skb,
    /// false)`): a VLAN tag's TPID while the packet carries one, else its
    /// network protocol.
    pub fn tc_protocol(&self) -> u16 {
        match (self.vlan, self.vlan_inband.first()) {
            (Some(t), _) | (None, Some(&t)) => t.proto,
            _ => self.protocol,
        }
    }

    /// The link-layer header in front of the network header, as the
    /// packet carries it (destination, source, the tags in the packet, the
    /// EtherType), if it has one: what offsets before the network header
    /// read (u32's negative offsets).
    pub fn mac_header(&self) -> Option<Vec<u8>> {
        let e = self.eth?;
        let mut h = Vec::with_capacity(self.mac_len());
        h.extend(e.dst);
        h.extend(e.src);
        for t in &self.vlan_inband {
            h.extend(t.proto.to_be_bytes());
            h.extend(t.tci.to_be_bytes());
        }
        h.extend(self.protocol.to_be_bytes());
        Some(h)
    }

    /// How many bytes [`Skb::mac_header`] has (0 without a header).
    pub fn mac_len(&self) -> usize {
        self.eth.map_or(0, |_| 14 + 4 * self.vlan_inband.len())
    }

    /// The addresses the flow dissector reads (`eth_hdr(skb)`): the
    /// Ethernet header's, or — on a device without one, whose MAC header
    /// pointer is the network header — the first 12 bytes of the packet.
    pub fn eth_addrs(&self) -> EthAddrs {
        self.eth.unwrap_or_else(|| {
            let byte = |i: usize| self.data.get(i).copied().unwrap_or(0);
            EthAddrs {
                dst: std::array::from_fn(byte),
                src: std::array::from_fn(|i| byte(i + 6)),
            }
        })
    }

    /// How many bytes the packet has from its network header on: the
    /// length its IPv4 or IPv6 header gives, or what is carried if more (a
    /// simulated packet may carry its headers only).
    pub fn network_len(&self) -> usize {
        let d = &self.data;
        let claimed = match self.protocol {
            ETH_P_IP if d.len() >= 20 => u16::from_be_bytes([d[2], d[3]]) as usize,
            ETH_P_IPV6 if d.len() >= 40 => 40 + u16::from_be_bytes([d[4], d[5]]) as usize,
            _ => 0,
        };
        claimed.max(d.len())
    }

    /// Read `N` bytes at `off` of the network header, if present (`skb_header_pointer`).
    pub fn bytes_at<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        self.data.get(off..off.checked_add(N)?)?.try_into().ok()
    }
}
