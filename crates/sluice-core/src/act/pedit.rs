//! pedit: the generic packet editor — rewrite 32-bit words of a packet's
//! headers (addresses, ports, TTL, DSCP, any raw offset) and answer a
//! verdict (`pass` by default).
//!
//! Modelled on net/sched/act_pedit.c. An action holds up to 255 *keys*,
//! applied in order to every packet. A key names a 32-bit word by an
//! offset from a header, and says what to do with it in two masks:
//!
//! - `mask`: the bits of the word that are *kept*; `val`: the bits set
//!   (`set`: new = (old & mask) ^ val) or added (`add`: the masked sum
//!   replaces the other bits). tc turns `ip ttl set 10` into the word at
//!   offset 8 with mask 0x00ffffff and val 0x0a000000.
//! - the header (`htype`): the network header (the default, and what
//!   `ip`/`ip6` keys use), the Ethernet header, or the transport header
//!   (`tcp`/`udp` keys). Keys without the extended attributes (tc without
//!   `ex`) are all `set` keys on the network header.
//! - `at`/`offmask`/`shift`: a variable offset — the byte at `at` is
//!   masked with `offmask`, shifted right by `shift` and added to the
//!   offset (how tc reaches the TCP ports after an IPv4 header of any
//!   length: `at 0 offmask 0xf shift 2`, i.e. IHL·4 bytes).
//!
//! The kernel checks at creation that every fixed offset is a multiple of 4
//! and clamps `shift` to 31 (the clamped value is what is dumped). Per
//! packet, an offset that a variable part leaves unaligned, or a word that
//! does not lie within the packet, stops the edit there (the keys before it
//! stay applied) and counts an overlimit; the verdict is the configured one
//! either way, and every packet counts in bytes/packets. Checksums are not
//! fixed: a `csum` action after the edit does that.
//!
//! `add` is done as the kernel does it on a little-endian machine: the
//! word is read in memory order as a little-endian number, so a carry runs
//! from a lower address to a higher one — from a field's most significant
//! byte towards its least, the wrong way for network order. Fields of one
//! byte (TTL, the DS field) are unaffected, which is how `ip ttl decrement`
//! works (it adds 0xff under a one-byte mask).
//!
//! Where the headers are: sluice's packets begin at the network header, so
//! network offsets are offsets into [`Packet::data`]. A `tcp` or `udp` key
//! starts after an IPv4 header of IHL·4 bytes (whatever its protocol), or
//! at the TCP or UDP header an IPv6 packet's extension headers lead to
//! (`ipv6_find_hdr`); in any other packet — or an IPv6 one without that
//! header, or a later fragment — the key fails. A packet's words lie
//! within its length from the network header (for IP, the length its
//! header gives).
//!
//! A key on the Ethernet header, or a raw offset before the network header,
//! edits the packet's Ethernet header ([`Packet::eth`]: its addresses and
//! the tags in the packet); on a device without one (a TUN device) the MAC
//! header is where the network header is, as in the kernel.
//!
//! Deviations: an edit of the EtherType field changes nothing (sluice keeps
//! it as the packet's protocol, which the kernel leaves too); a word before
//! the link-layer header (the kernel's headroom) edits nothing and is not
//! counted; a simulated packet whose payload is not carried leaves a key
//! within the payload without effect (the kernel would edit the payload).

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::{Errno, TcError, TcResult};
use crate::packet::{Packet, ETH_P_IP, ETH_P_IPV6};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// `TCA_PEDIT_KEY_EX_HDR_TYPE_*`: the header a key's offset starts from.
pub mod htype {
    /// The network header, for keys without a type (raw offsets).
    pub const NETWORK: u16 = 0;
    /// The Ethernet header.
    pub const ETH: u16 = 1;
    /// The IPv4 header (the network header).
    pub const IP4: u16 = 2;
    /// The IPv6 header (the network header).
    pub const IP6: u16 = 3;
    /// The TCP header (the transport header).
    pub const TCP: u16 = 4;
    /// The UDP header (the transport header).
    pub const UDP: u16 = 5;
    /// The largest type (`TCA_PEDIT_HDR_TYPE_MAX`).
    pub const MAX: u16 = UDP;
}

/// `TCA_PEDIT_KEY_EX_CMD_*`.
pub mod cmd {
    /// Replace the bits outside the mask.
    pub const SET: u16 = 0;
    /// Add to the word and keep the sum's bits outside the mask.
    pub const ADD: u16 = 1;
    /// The largest command (`TCA_PEDIT_CMD_MAX`).
    pub const MAX: u16 = ADD;
}

/// Keys an action may hold (`tc_pedit_sel.nkeys` is one byte).
pub const MAX_KEYS: usize = 255;

/// `struct tc_pedit_key`. `mask` and `val` are the word as it lies in the
/// packet, read in network order (as tc prints them: `val 0a000001`);
/// `off` and `at` are signed in the kernel's use of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeditKey {
    /// The bits of the word that are kept.
    pub mask: u32,
    /// The bits set (or added).
    pub val: u32,
    /// The word's offset from its header (a multiple of 4).
    pub off: u32,
    /// Where the byte of a variable offset is.
    pub at: u32,
    /// The bits of that byte that count (0: no variable offset).
    pub offmask: u32,
    /// How far they are shifted right.
    pub shift: u32,
}

/// `TCA_PEDIT_KEY_EX`: a key's header type and command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeditKeyEx {
    /// [`htype`].
    pub htype: u16,
    /// [`cmd`].
    pub cmd: u16,
}

/// What tc sends: `TCA_PEDIT_PARMS` (keys only) or `TCA_PEDIT_PARMS_EX`
/// with `TCA_PEDIT_KEYS_EX` (`keys_ex`, one per key).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeditOpts {
    /// The control action.
    pub action: Verdict,
    /// `tc_pedit_sel.flags`, kept and dumped.
    pub flags: u8,
    /// The keys, applied in order.
    pub keys: Vec<PeditKey>,
    /// The extended attributes, when sent.
    pub keys_ex: Option<Vec<PeditKeyEx>>,
}

/// Validated parameters (shifts clamped as the kernel stores them).
#[derive(Clone, Debug)]
pub struct PeditParams(PeditOpts);

impl PeditParams {
    /// `tcf_pedit_init` past the index lookup: keys required, one extended
    /// attribute per key, types and commands in range, the control action,
    /// fixed offsets aligned.
    pub(crate) fn validate(o: &PeditOpts, in_filter: bool) -> TcResult<Self> {
        if o.keys.is_empty() {
            return Err(TcError::inval(
                "act_pedit: Pedit requires keys to be passed",
            ));
        }
        if o.keys.len() > MAX_KEYS {
            return Err(TcError::errno(Errno::EINVAL));
        }
        if let Some(ex) = &o.keys_ex {
            for (i, k) in ex.iter().enumerate() {
                if i == o.keys.len() {
                    return Err(TcError::inval(
                        "act_pedit: Can't parse more extended keys than requested",
                    ));
                }
                // The attribute policy's range check, which sets no message.
                if k.htype > htype::MAX || k.cmd > cmd::MAX {
                    return Err(TcError::errno(Errno::ERANGE));
                }
            }
            if ex.len() < o.keys.len() {
                return Err(TcError::inval(
                    "act_pedit: Not enough extended keys to parse",
                ));
            }
        }
        check_ctrlact(o.action, in_filter)?;
        let mut o = o.clone();
        for k in &mut o.keys {
            if k.offmask == 0 && !k.off.is_multiple_of(4) {
                return Err(TcError::inval(
                    "act_pedit: Offsets must be on 32bit boundaries",
                ));
            }
            k.shift = k.shift.min(31);
        }
        Ok(PeditParams(o))
    }
}

/// A pedit action.
#[derive(Debug)]
pub struct Pedit {
    p: PeditParams,
    overlimits: u64,
}

/// Why a key stopped the edit (the kernel's `goto bad`).
struct Bad;

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// `pedit_l4_skb_offset`: where the TCP or UDP header (`proto`) of a key
/// starts, if the packet has one there.
fn l4_offset(pkt: &Packet, proto: u8) -> Option<i64> {
    let d = &pkt.data;
    match pkt.protocol {
        ETH_P_IP if d.len() >= 20 => Some(4 * (d[0] & 0x0f) as i64),
        ETH_P_IPV6 => ipv6_find_hdr(d, proto).map(|o| o as i64),
        _ => None,
    }
}

/// `ipv6_find_hdr` for a protocol: the offset of the header `target` that
/// the extension headers (hop-by-hop, routing, fragment, authentication,
/// destination options) lead to; none past a later fragment, another
/// protocol, or the end of the headers.
fn ipv6_find_hdr(d: &[u8], target: u8) -> Option<usize> {
    if d.len() < 40 || d[0] >> 4 != 6 {
        return None;
    }
    let (mut next, mut at) = (d[6], 40usize);
    while next != target {
        let hp = d.get(at..at + 2)?;
        let len = match next {
            0 | 43 | 60 => 8 * (hp[1] as usize + 1),
            51 => 4 * (hp[1] as usize + 2),
            44 => {
                let frag = d.get(at + 2..at + 4)?;
                if u16::from_be_bytes([frag[0], frag[1]]) & !7 != 0 {
                    return None;
                }
                8
            }
            _ => return None,
        };
        (next, at) = (hp[0], at + len);
    }
    Some(at)
}

impl Pedit {
    pub(crate) fn new(p: PeditParams) -> Self {
        Pedit { p, overlimits: 0 }
    }

    pub(crate) fn change(&mut self, p: PeditParams) {
        self.p = p;
    }

    /// Apply every key in order; stops at the first that cannot apply.
    /// A word in front of the network header is in the packet's Ethernet
    /// header (and the tags in the packet), when it has one.
    fn edit(&self, pkt: &mut Packet) -> Result<(), Bad> {
        // The link-layer header's bytes, once a key reaches them.
        let mut mac: Option<Vec<u8>> = None;
        let result = self.apply_keys(pkt, &mut mac);
        if let (Some(m), Some(e)) = (mac, pkt.eth.as_mut()) {
            e.dst.copy_from_slice(&m[..6]);
            e.src.copy_from_slice(&m[6..12]);
            for (t, b) in pkt.vlan_inband.iter_mut().zip(m[12..].chunks_exact(4)) {
                t.proto = u16::from_be_bytes([b[0], b[1]]);
                t.tci = u16::from_be_bytes([b[2], b[3]]);
            }
        }
        result
    }

    fn apply_keys(&self, pkt: &mut Packet, mac: &mut Option<Vec<u8>>) -> Result<(), Bad> {
        let o = &self.p.0;
        let extent = pkt.network_len() as i64;
        for (i, k) in o.keys.iter().enumerate() {
            let ex = o.keys_ex.as_ref().map_or(PeditKeyEx::default(), |e| e[i]);
            let base = match ex.htype {
                // The MAC header: in front of the network header, or the
                // network header itself on a device without one.
                htype::ETH => -(pkt.mac_len() as i64),
                htype::TCP => l4_offset(pkt, PROTO_TCP).ok_or(Bad)?,
                htype::UDP => l4_offset(pkt, PROTO_UDP).ok_or(Bad)?,
                _ => 0,
            };
            let mut offset = k.off as i32 as i64;
            if k.offmask != 0 {
                let at = base + k.at as i32 as i64;
                if at >= extent {
                    return Err(Bad);
                }
                let Some(byte) = byte_at(pkt, mac, at) else {
                    // Before the packet's first byte or in a payload not carried.
                    continue;
                };
                offset += ((byte as u32 & k.offmask) >> k.shift) as i64;
                if offset % 4 != 0 {
                    return Err(Bad);
                }
            }
            let at = base + offset;
            if at + 4 > extent {
                return Err(Bad);
            }
            let Some(old) = (0..4)
                .map(|j| byte_at(pkt, mac, at + j))
                .collect::<Option<Vec<u8>>>()
            else {
                continue;
            };
            let old = u32::from_be_bytes([old[0], old[1], old[2], old[3]]);
            let new = if ex.cmd == cmd::ADD {
                // In memory order, read as the little-endian host reads it.
                let (w, v, m) = (old.swap_bytes(), k.val.swap_bytes(), k.mask.swap_bytes());
                ((w & m) ^ (w.wrapping_add(v) & !m)).swap_bytes()
            } else {
                (old & k.mask) ^ k.val
            };
            for (j, b) in new.to_be_bytes().into_iter().enumerate() {
                set_byte(pkt, mac, at + j as i64, b);
            }
        }
        Ok(())
    }
}

/// The byte at `at` from the network header: in the packet, or (negative)
/// in its link-layer header, read into `mac` the first time.
fn byte_at(pkt: &Packet, mac: &mut Option<Vec<u8>>, at: i64) -> Option<u8> {
    match usize::try_from(at) {
        Ok(a) => pkt.data.get(a).copied(),
        Err(_) => {
            if mac.is_none() {
                *mac = pkt.mac_header();
            }
            let m = mac.as_ref()?;
            m.get(usize::try_from(m.len() as i64 + at).ok()?).copied()
        }
    }
}

/// Write the byte [`byte_at`] read (the EtherType's two bytes in `mac`
/// are not carried back: the packet's protocol stays).
fn set_byte(pkt: &mut Packet, mac: &mut Option<Vec<u8>>, at: i64, b: u8) {
    match usize::try_from(at) {
        Ok(a) => pkt.data[a] = b,
        Err(_) => {
            if let Some(m) = mac.as_mut() {
                let i = (m.len() as i64 + at) as usize;
                m[i] = b;
            }
        }
    }
}

impl Action for Pedit {
    fn kind(&self) -> &'static str {
        "pedit"
    }

    fn act(&mut self, pkt: &mut Packet, _now: Time) -> Verdict {
        if self.edit(pkt).is_err() {
            self.overlimits += 1;
        }
        self.p.0.action
    }

    fn drops(&self) -> u64 {
        0
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Pedit(self.p.0.clone())
    }

    fn control(&self) -> Verdict {
        self.p.0.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(keys: Vec<PeditKey>, ex: Option<Vec<PeditKeyEx>>) -> PeditOpts {
        PeditOpts {
            action: Verdict::Ok,
            flags: 0,
            keys,
            keys_ex: ex,
        }
    }

    fn action(keys: Vec<PeditKey>, ex: Option<Vec<PeditKeyEx>>) -> Pedit {
        Pedit::new(PeditParams::validate(&opts(keys, ex), true).unwrap())
    }

    /// IPv4/TCP from 10.0.0.1:1000 to 10.0.0.2:80, TTL 64, DSCP 0, with
    /// `options` words of IP options.
    fn tcp4(options: usize) -> Packet {
        let ihl = 5 + options;
        let mut d = vec![0u8; 4 * ihl + 20];
        let total = d.len() as u16;
        d[0] = 0x40 | ihl as u8;
        d[2..4].copy_from_slice(&total.to_be_bytes());
        d[8] = 64;
        d[9] = 6;
        d[12..16].copy_from_slice(&[10, 0, 0, 1]);
        d[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let t = 4 * ihl;
        d[t..t + 2].copy_from_slice(&1000u16.to_be_bytes());
        d[t + 2..t + 4].copy_from_slice(&80u16.to_be_bytes());
        let len = d.len() as u32 + 14;
        Packet::new(d, len, ETH_P_IP)
    }

    fn ex(htype: u16, cmd: u16) -> PeditKeyEx {
        PeditKeyEx { htype, cmd }
    }

    #[test]
    fn set_replaces_the_bits_outside_the_mask() {
        // `munge ip dst set 192.168.1.1` and `ip tos set 0x28`: the tos byte
        // is the second of the first word.
        let mut a = action(
            vec![
                PeditKey {
                    off: 16,
                    val: 0xc0a8_0101,
                    ..Default::default()
                },
                PeditKey {
                    off: 0,
                    mask: 0xff00_ffff,
                    val: 0x0028_0000,
                    ..Default::default()
                },
            ],
            None,
        );
        let mut p = tcp4(0);
        assert_eq!(a.act(&mut p, Time(0)), Verdict::Ok);
        assert_eq!(&p.data[16..20], &[192, 168, 1, 1]);
        assert_eq!(p.data[1], 0x28);
        assert_eq!(p.data[0], 0x45);
        assert_eq!(a.overlimits(), 0);
    }

    #[test]
    fn ttl_decrement_adds_0xff_to_one_byte() {
        let key = PeditKey {
            off: 8,
            mask: 0x00ff_ffff,
            val: 0xff00_0000,
            ..Default::default()
        };
        let mut a = action(vec![key], Some(vec![ex(htype::IP4, cmd::ADD)]));
        let mut p = tcp4(0);
        a.act(&mut p, Time(0));
        assert_eq!(p.data[8], 63);
        assert_eq!(p.data[9], 6, "the carry does not reach the protocol");
        p.data[8] = 0;
        a.act(&mut p, Time(0));
        assert_eq!((p.data[8], p.data[9]), (255, 6));
    }

    #[test]
    fn add_carries_towards_higher_addresses_as_on_a_little_endian_kernel() {
        // `tcp dport add 1` over port 0x00ff: the kernel adds in memory
        // order, so 0x00ff + 1 carries out of the low byte into nothing
        // (the byte after it) — 0x0000 — rather than giving 0x0100.
        let key = PeditKey {
            off: 0,
            mask: 0xffff_0000,
            val: 0x0000_0001,
            ..Default::default()
        };
        let mut a = action(vec![key], Some(vec![ex(htype::TCP, cmd::ADD)]));
        let mut p = tcp4(0);
        p.data[22..24].copy_from_slice(&0x00ffu16.to_be_bytes());
        a.act(&mut p, Time(0));
        assert_eq!(&p.data[22..24], &[0x00, 0x00]);
        // A carry out of the port's first byte lands in its second.
        p.data[22..24].copy_from_slice(&0xff00u16.to_be_bytes());
        let key = PeditKey {
            val: 0x0000_0100,
            ..key
        };
        let mut a = action(vec![key], Some(vec![ex(htype::TCP, cmd::ADD)]));
        a.act(&mut p, Time(0));
        assert_eq!(&p.data[22..24], &[0x00, 0x01]);
    }

    #[test]
    fn transport_keys_follow_the_ip_header_length() {
        let key = PeditKey {
            off: 0,
            mask: 0xffff_0000,
            val: 8080,
            ..Default::default()
        };
        for options in [0, 2] {
            let mut a = action(vec![key], Some(vec![ex(htype::TCP, cmd::SET)]));
            let mut p = tcp4(options);
            a.act(&mut p, Time(0));
            let t = 20 + 4 * options;
            assert_eq!(u16::from_be_bytes([p.data[t + 2], p.data[t + 3]]), 8080);
            assert_eq!(u16::from_be_bytes([p.data[t], p.data[t + 1]]), 1000);
        }
    }

    #[test]
    fn ipv6_transport_keys_find_their_header_past_extension_headers() {
        // IPv6, a hop-by-hop header (8 bytes), then UDP from port 1000 to 53.
        let mut d = vec![0u8; 40 + 8 + 8];
        d[0] = 0x60;
        d[4..6].copy_from_slice(&16u16.to_be_bytes());
        d[6] = 0; // hop-by-hop
        d[40] = PROTO_UDP;
        d[48..50].copy_from_slice(&1000u16.to_be_bytes());
        d[50..52].copy_from_slice(&53u16.to_be_bytes());
        let udp = PeditKey {
            off: 0,
            mask: 0xffff_0000,
            val: 5353,
            ..Default::default()
        };
        let mut a = action(vec![udp], Some(vec![ex(htype::UDP, cmd::SET)]));
        let mut p = Packet::new(d.clone(), 70, ETH_P_IPV6);
        a.act(&mut p, Time(0));
        assert_eq!(u16::from_be_bytes([p.data[50], p.data[51]]), 5353);
        assert_eq!(a.overlimits(), 0);
        // A TCP key finds no TCP header; nor does any key in a later
        // fragment, or in a packet that is not IP.
        let mut t = action(vec![udp], Some(vec![ex(htype::TCP, cmd::SET)]));
        let mut p = Packet::new(d.clone(), 70, ETH_P_IPV6);
        t.act(&mut p, Time(0));
        assert_eq!((t.overlimits(), &p.data[..]), (1, &d[..]));
        let mut frag = d.clone();
        frag[6] = 44;
        frag[42..44].copy_from_slice(&0x0008u16.to_be_bytes());
        a.act(&mut Packet::new(frag, 70, ETH_P_IPV6), Time(0));
        a.act(&mut Packet::new(d, 70, 0x0806), Time(0));
        assert_eq!(a.overlimits(), 2);
    }

    #[test]
    fn a_variable_offset_reads_the_byte_at_at() {
        // The byte at `at` (0x47: IHL 7), masked and shifted, is added to
        // the offset: 0x47 & 0x0f = 7 leaves it unaligned (bad), 0x47 &
        // 0x0c = 4 moves it one word on.
        let key = |offmask, shift| PeditKey {
            off: 20,
            mask: 0,
            val: 0xdead_beef,
            at: 0,
            offmask,
            shift,
        };
        let mut p = tcp4(2); // first byte 0x47
        let mut bad = action(vec![key(0x0f, 0)], None);
        bad.act(&mut p, Time(0));
        assert_eq!(bad.overlimits(), 1);
        let mut good = action(vec![key(0x0c, 0)], None);
        good.act(&mut p, Time(0));
        assert_eq!(&p.data[24..28], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(good.overlimits(), 0);
    }

    #[test]
    fn a_word_past_the_end_stops_the_edit_and_counts_an_overlimit() {
        let first = PeditKey {
            off: 12,
            val: 0x0102_0304,
            ..Default::default()
        };
        let past = PeditKey {
            off: 40,
            val: 1,
            ..Default::default()
        };
        let last = PeditKey {
            off: 16,
            val: 0x0506_0708,
            ..Default::default()
        };
        let mut a = action(vec![first, past, last], None);
        let mut p = tcp4(0); // 40 bytes
        assert_eq!(a.act(&mut p, Time(0)), Verdict::Ok);
        assert_eq!(&p.data[12..16], &[1, 2, 3, 4]);
        assert_eq!(
            &p.data[16..20],
            &[10, 0, 0, 2],
            "keys after a bad one are not applied"
        );
        assert_eq!(a.overlimits(), 1);
        // The last word of the packet is within it.
        let mut a = action(vec![PeditKey { off: 36, ..past }], None);
        a.act(&mut p, Time(0));
        assert_eq!(a.overlimits(), 0);
        assert_eq!(&p.data[36..40], &[0, 0, 0, 1]);
    }

    /// An Ethernet key's offset counts from the MAC header: the packet's
    /// Ethernet header when it has one (a word at 4 spans the destination's
    /// last two bytes and the source's first two); on a device without one
    /// (a TUN device) the MAC header is the network header.
    #[test]
    fn ethernet_keys_edit_the_ethernet_header() {
        let key = PeditKey {
            off: 4,
            mask: 0,
            val: 0x1122_3344,
            ..Default::default()
        };
        let mut a = action(vec![key], Some(vec![ex(htype::ETH, cmd::SET)]));
        let mut p = tcp4(0);
        let before = p.data.clone();
        p.eth = Some(crate::packet::EthAddrs {
            dst: [2, 0, 0, 0, 0, 1],
            src: [2, 0, 0, 0, 0, 2],
        });
        a.act(&mut p, Time(0));
        let e = p.eth.unwrap();
        assert_eq!(
            (e.dst, e.src),
            ([2, 0, 0, 0, 0x11, 0x22], [0x33, 0x44, 0, 0, 0, 2])
        );
        assert_eq!(p.data, before);
        assert_eq!(a.overlimits(), 0);
        // A raw key at -4 (no `ex`): the source's last two bytes and the
        // EtherType, which stays the packet's protocol.
        let raw = PeditKey {
            off: -4i32 as u32,
            mask: 0,
            val: 0xaabb_0000,
            ..Default::default()
        };
        action(vec![raw], None).act(&mut p, Time(0));
        assert_eq!(p.eth.unwrap().src, [0x33, 0x44, 0, 0, 0xaa, 0xbb]);
        assert_eq!(p.protocol, ETH_P_IP);
        let mut tun = tcp4(0);
        a.act(&mut tun, Time(0));
        assert_eq!(&tun.data[4..8], &[0x11, 0x22, 0x33, 0x44]);
    }

    #[test]
    fn creation_checks_as_the_kernel_does() {
        let key = PeditKey::default();
        let e = PeditParams::validate(&opts(vec![], None), true).unwrap_err();
        assert_eq!(
            e,
            TcError::inval("act_pedit: Pedit requires keys to be passed")
        );
        let unaligned = PeditKey { off: 2, ..key };
        let e = PeditParams::validate(&opts(vec![unaligned], None), true).unwrap_err();
        assert_eq!(
            e,
            TcError::inval("act_pedit: Offsets must be on 32bit boundaries")
        );
        // A variable offset may start unaligned.
        let var = PeditKey {
            off: 2,
            offmask: 0xf,
            shift: 40,
            ..key
        };
        let ok = PeditParams::validate(&opts(vec![var], None), true).unwrap();
        assert_eq!(ok.0.keys[0].shift, 31, "shift is clamped");
        let few = opts(vec![key, key], Some(vec![ex(0, 0)]));
        assert!(PeditParams::validate(&few, true).is_err());
        let bad_type = opts(vec![key], Some(vec![ex(6, 0)]));
        assert!(PeditParams::validate(&bad_type, true).is_err());
        let bad_cmd = opts(vec![key], Some(vec![ex(0, 2)]));
        assert!(PeditParams::validate(&bad_cmd, true).is_err());
    }
}
