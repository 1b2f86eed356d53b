//! nat: stateless address translation — rewrite one IPv4 address of a
//! packet whose address lies in a prefix, keeping its host bits, and fix
//! the checksums that cover it.
//!
//! Modelled on net/sched/act_nat.c. An action holds an old prefix (address
//! and mask), a new address and a direction: `ingress` translates the
//! destination (DNAT), `egress` the source (SNAT) — whatever side of the
//! device the action is attached to. Per packet:
//!
//! - a configured `drop` drops every packet, untouched (counted);
//! - the network header is read as IPv4 whatever the packet's protocol (the
//!   kernel checks none; filters are expected to); fewer than 20 bytes is a
//!   drop;
//! - when the address matches (`(addr ^ old) & mask == 0`) it becomes
//!   `(new & mask) | (addr & !mask)`, with the IP header checksum updated
//!   (RFC 1624); then, in a first (or only) fragment, the TCP checksum, or a
//!   UDP checksum that is not 0 ("none"; a result of 0 is sent as 0xffff),
//!   over the pseudo-header; a header too short for its checksum is a drop;
//! - an ICMP error (destination unreachable, source quench, redirect, time
//!   exceeded, parameter problem) — translated or not — has the embedded
//!   header's other address (the source for ingress, the destination for
//!   egress: the quoted packet went the other way) matched and rewritten
//!   the same way, with the ICMP checksum updated; the embedded headers'
//!   own checksums are left as they were (as the kernel leaves them);
//! - other packets that do not match pass unchanged.
//!
//! Every packet counts in bytes/packets; drops count as drops; the verdict
//! is the configured one (`pass` by default). A checksum the sender left
//! to be completed (`CHECKSUM_PARTIAL`, [`Packet::csum_partial`]) holds the
//! pseudo-header sum and is updated as such; an ICMP one is then left alone.
//!
//! Deviation: a simulated packet whose payload is not carried keeps a
//! checksum or an embedded header that lies in the missing part (the
//! kernel would update it).

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::TcResult;
use crate::gso::csum_replace;
use crate::packet::Packet;
use crate::time::Time;
use core::net::Ipv4Addr;
use serde::{Deserialize, Serialize};

/// `TCA_NAT_FLAG_EGRESS`: translate the source.
pub const FLAG_EGRESS: u32 = 1;

/// `struct tc_nat`: what tc sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NatOpts {
    /// The control action (`pass` by default).
    pub action: Verdict,
    /// The prefix's address (its host bits as given).
    pub old_addr: Ipv4Addr,
    /// The address to translate to (its bits outside the mask unused).
    pub new_addr: Ipv4Addr,
    /// The prefix's mask.
    pub mask: Ipv4Addr,
    /// [`FLAG_EGRESS`]; the kernel keeps and dumps any value.
    pub flags: u32,
}

/// Validated parameters: the kernel checks only the control action.
#[derive(Clone, Debug)]
pub struct NatParams(NatOpts);

impl NatParams {
    pub(crate) fn validate(o: &NatOpts, in_filter: bool) -> TcResult<Self> {
        check_ctrlact(o.action, in_filter)?;
        Ok(NatParams(o.clone()))
    }
}

/// A nat action.
#[derive(Debug)]
pub struct Nat {
    p: NatParams,
    drops: u64,
}

/// Why a packet is dropped (the kernel's `goto drop`).
struct Drop;

const PROTO_ICMP: u8 = 1;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// `icmp_is_err`.
fn icmp_error(kind: u8) -> bool {
    matches!(kind, 3 | 4 | 5 | 11 | 12)
}

/// The 16-bit checksum at `at`, updated for `from` becoming `to` — when
/// it is carried.
fn fix(d: &mut [u8], at: usize, from: [u8; 4], to: [u8; 4], partial: bool) {
    if let Some(f) = d.get_mut(at..at + 2) {
        let c = csum_replace(u16::from_be_bytes([f[0], f[1]]), &from, &to, partial);
        f.copy_from_slice(&c.to_be_bytes());
    }
}

impl Nat {
    pub(crate) fn new(p: NatParams) -> Self {
        Nat { p, drops: 0 }
    }

    pub(crate) fn change(&mut self, p: NatParams) {
        self.p = p;
    }

    /// The translation of `addr` if it lies in the old prefix.
    fn translate(&self, addr: [u8; 4]) -> Option<[u8; 4]> {
        let o = &self.p.0;
        let (a, old, new, mask) = (
            u32::from_be_bytes(addr),
            u32::from(o.old_addr),
            u32::from(o.new_addr),
            u32::from(o.mask),
        );
        ((a ^ old) & mask == 0).then(|| ((new & mask) | (a & !mask)).to_be_bytes())
    }

    /// `tcf_nat_act` past the verdict check.
    fn rewrite(&self, pkt: &mut Packet) -> Result<(), Drop> {
        let avail = pkt.network_len();
        let partial = pkt.csum_partial.is_some();
        if pkt.data.len() < 20 {
            return Err(Drop);
        }
        let egress = self.p.0.flags & FLAG_EGRESS != 0;
        let at = if egress { 12 } else { 16 };
        let d = &mut pkt.data;
        let addr: [u8; 4] = d[at..at + 4].try_into().expect("4");
        let later_fragment = u16::from_be_bytes([d[6], d[7]]) & 0x1fff != 0;
        let proto = d[9];
        let new = self.translate(addr);
        match new {
            Some(new) => {
                d[at..at + 4].copy_from_slice(&new);
                fix(d, 10, addr, new, false);
            }
            None if later_fragment || proto != PROTO_ICMP => return Ok(()),
            None => {}
        }
        if later_fragment {
            return Ok(());
        }
        let ihl = 4 * (d[0] & 0x0f) as usize;
        let new = new.unwrap_or(addr);
        match proto {
            PROTO_TCP => {
                if avail < ihl + 20 {
                    return Err(Drop);
                }
                fix(d, ihl + 16, addr, new, partial);
            }
            PROTO_UDP => {
                if avail < ihl + 8 {
                    return Err(Drop);
                }
                let Some(c) = d.get_mut(ihl + 6..ihl + 8) else {
                    return Ok(());
                };
                let check = u16::from_be_bytes([c[0], c[1]]);
                if check != 0 || partial {
                    let check = match csum_replace(check, &addr, &new, partial) {
                        0 => 0xffff,
                        c => c,
                    };
                    c.copy_from_slice(&check.to_be_bytes());
                }
            }
            PROTO_ICMP => {
                if avail < ihl + 8 {
                    return Err(Drop);
                }
                if !d.get(ihl).copied().is_some_and(icmp_error) {
                    return Ok(());
                }
                if avail < ihl + 28 {
                    return Err(Drop);
                }
                let inner = ihl + 8 + if egress { 16 } else { 12 };
                let Some(old) = d.get(inner..inner + 4) else {
                    return Ok(());
                };
                let old: [u8; 4] = old.try_into().expect("4");
                let Some(new) = self.translate(old) else {
                    return Ok(());
                };
                d[inner..inner + 4].copy_from_slice(&new);
                if !partial {
                    fix(d, ihl + 2, old, new, false);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl Action for Nat {
    fn kind(&self) -> &'static str {
        "nat"
    }

    fn act(&mut self, pkt: &mut Packet, _now: Time) -> Verdict {
        let v = self.p.0.action;
        if v == Verdict::Shot || self.rewrite(pkt).is_err() {
            self.drops += 1;
            return Verdict::Shot;
        }
        v
    }

    fn drops(&self) -> u64 {
        self.drops
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Nat(self.p.0.clone())
    }

    fn control(&self) -> Verdict {
        self.p.0.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::ETH_P_IP;

    fn nat(egress: bool, old: [u8; 4], plen: u32, new: [u8; 4]) -> Nat {
        let o = NatOpts {
            action: Verdict::Pipe,
            old_addr: old.into(),
            new_addr: new.into(),
            mask: Ipv4Addr::from(u32::MAX.checked_shl(32 - plen).unwrap_or(0)),
            flags: egress as u32,
        };
        Nat::new(NatParams::validate(&o, true).unwrap())
    }

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    fn run(n: &mut Nat, data: Vec<u8>) -> (Verdict, Vec<u8>) {
        let len = data.len() as u32 + 14;
        let mut p = Packet::new(data, len, ETH_P_IP);
        let v = n.act(&mut p, Time(0));
        (v, p.data.clone())
    }

    /// The IPv4 header checksum verifies.
    fn ip_ok(d: &[u8]) -> bool {
        crate::gso::fold(crate::gso::sum(&d[..20], 0)) == 0xffff
    }

    #[test]
    fn ingress_translates_the_destination_and_fixes_ip_and_tcp_checksums() {
        // 10.0.0.2 -> 192.168.1.1 TCP with correct checksums; DNAT to
        // 200.200.200.1 (docs/research/nat.md §4.6, example 1).
        let input = hex("45 00 00 2d 12 34 00 00 40 06 9c ec 0a 00 00 02 c0 a8 01 01 04 d2 00 50 00 00 00 01 00 00 00 00 50 02 ff ff 9b 3d 00 00 68 65 6c 6c 6f");
        let want = hex("45 00 00 2d 12 34 00 00 40 06 cd cb 0a 00 00 02 c8 c8 c8 01 04 d2 00 50 00 00 00 01 00 00 00 00 50 02 ff ff cc 1c 00 00 68 65 6c 6c 6f");
        assert!(ip_ok(&input));
        let mut n = nat(false, [192, 168, 1, 1], 32, [200, 200, 200, 1]);
        assert_eq!(run(&mut n, input.clone()), (Verdict::Pipe, want.clone()));
        assert!(ip_ok(&want));
        // The TCP checksum of the result verifies over the new pseudo-header.
        let pseudo = crate::gso::sum(&want[12..20], 6 + 25);
        assert_eq!(
            crate::gso::fold(crate::gso::sum(&want[20..], pseudo)),
            0xffff
        );
        // Another destination passes untouched.
        let mut other = nat(false, [192, 168, 2, 0], 24, [200, 200, 200, 1]);
        assert_eq!(run(&mut other, input.clone()).1, input);
        assert_eq!(other.drops(), 0);
    }

    #[test]
    fn egress_keeps_host_bits_and_a_missing_udp_checksum() {
        // 10.1.2.77 -> 8.8.8.8 UDP; SNAT 10.1.2.0/24 -> 172.16.5.0 (§4.6, 2 and 3).
        let input = hex("45 00 00 20 12 34 00 00 40 11 4c 3c 0a 01 02 4d 08 08 08 08 14 e9 00 35 00 0c ef 89 70 69 6e 67");
        let want = hex("45 00 00 20 12 34 00 00 40 11 a7 2c ac 10 05 4d 08 08 08 08 14 e9 00 35 00 0c 4a 7a 70 69 6e 67");
        let mut n = nat(true, [10, 1, 2, 0], 24, [172, 16, 5, 0]);
        assert_eq!(run(&mut n, input.clone()).1, want);
        let mut none = input.clone();
        none[26..28].fill(0);
        let (_, out) = run(&mut n, none);
        assert_eq!(
            (&out[12..16], &out[26..28]),
            (&[172, 16, 5, 77][..], &[0, 0][..])
        );
    }

    #[test]
    fn an_icmp_error_has_its_quoted_source_translated() {
        // Port unreachable to 172.16.0.9 quoting 192.168.1.1 -> 10.0.0.2
        // UDP; nat ingress 192.168.1.0/24 -> 200.200.200.0 (§4.6, 5).
        let input = hex("45 00 00 38 12 34 00 00 40 01 b2 76 0a 00 00 02 ac 10 00 09 03 03 a7 96 00 00 00 00 45 00 00 20 12 34 00 00 40 11 9c ee c0 a8 01 01 0a 00 00 02 14 e9 00 35 00 0c 40 3c");
        let want = hex("45 00 00 38 12 34 00 00 40 01 b2 76 0a 00 00 02 ac 10 00 09 03 03 d8 75 00 00 00 00 45 00 00 20 12 34 00 00 40 11 9c ee c8 c8 c8 01 0a 00 00 02 14 e9 00 35 00 0c 40 3c");
        let mut n = nat(false, [192, 168, 1, 0], 24, [200, 200, 200, 0]);
        assert_eq!(run(&mut n, input).1, want);
        // The ICMP checksum of the result verifies.
        assert_eq!(crate::gso::fold(crate::gso::sum(&want[20..], 0)), 0xffff);
        // An echo request is no error: nothing changes.
        let mut echo = want.clone();
        echo[20] = 8;
        assert_eq!(run(&mut n, echo.clone()).1, echo);
    }

    #[test]
    fn short_packets_and_a_drop_verdict_drop() {
        let mut n = nat(false, [192, 168, 1, 1], 32, [1, 2, 3, 4]);
        assert_eq!(run(&mut n, vec![0x45; 19]).0, Verdict::Shot);
        // A TCP packet with no room for its checksum.
        let mut tcp = hex(
            "45 00 00 1c 00 00 00 00 40 06 00 00 0a 00 00 02 c0 a8 01 01 00 00 00 00 00 00 00 00",
        );
        assert_eq!(run(&mut n, tcp.clone()).0, Verdict::Shot);
        // A later fragment is translated without its transport header.
        tcp[6..8].copy_from_slice(&0x0010u16.to_be_bytes());
        let (v, out) = run(&mut n, tcp);
        assert_eq!((v, &out[16..20]), (Verdict::Pipe, &[1, 2, 3, 4][..]));
        assert_eq!(n.drops(), 2);
        let o = NatOpts {
            action: Verdict::Shot,
            ..n.p.0.clone()
        };
        let mut d = Nat::new(NatParams::validate(&o, true).unwrap());
        let ok = hex("45 00 00 14 00 00 00 00 40 11 00 00 0a 00 00 02 c0 a8 01 01");
        assert_eq!(run(&mut d, ok.clone()), (Verdict::Shot, ok));
        assert_eq!(d.drops(), 1);
    }
}
