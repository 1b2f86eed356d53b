//! The packet as a qdisc sees it: bytes from the network header plus the
//! metadata the kernel keeps beside them in the `sk_buff`.
//!
//! `data` starts at the IPv4/IPv6 header, so the u32 classifier's offsets
//! ("`match u8 0x10 0xff at 33`") index it directly, as they index the
//! kernel's network header. `data` may hold only the headers (the simulator
//! carries no payload); `len` is the length every qdisc accounts with — the
//! kernel's `qdisc_pkt_len`, which on Ethernet includes the 14-byte MAC header.

use crate::time::Time;

/// EtherType of IPv4.
pub const ETH_P_IP: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETH_P_IPV6: u16 = 0x86dd;
/// EtherType of ARP.
pub const ETH_P_ARP: u16 = 0x0806;
/// `ETH_P_ALL`: matches every protocol in a filter.
pub const ETH_P_ALL: u16 = 0x0003;

/// One packet on its way through a device's qdiscs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packet {
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
}

impl Packet {
    /// A packet of `len` accounted bytes carrying the given network-layer bytes.
    pub fn new(data: Vec<u8>, len: u32, protocol: u16) -> Self {
        Packet {
            data,
            len,
            protocol,
            ..Default::default()
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

    /// Read `N` bytes at `off` of the network header, if present (`skb_header_pointer`).
    pub fn bytes_at<const N: usize>(&self, off: usize) -> Option<[u8; N]> {
        self.data.get(off..off.checked_add(N)?)?.try_into().ok()
    }
}
