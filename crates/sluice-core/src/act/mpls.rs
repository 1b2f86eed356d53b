//! mpls: push, pop or rewrite a packet's MPLS label stack entry, or
//! decrement its TTL, and answer a verdict (`pipe` by default).
//!
//! Modelled on net/sched/act_mpls.c and the skb MPLS helpers (notes:
//! docs/research/mpls.md). A label stack entry (LSE) is 32 bits: label
//! (20), traffic class (3), bottom of stack (1), TTL (8). The stack sits
//! where the network header was: after `push` the packet's bytes start with
//! the new LSE and its protocol (`skb->protocol`) is `mpls_uc` or `mpls_mc`;
//! `pop` takes the first 4 bytes away and sets the protocol to the one it
//! was configured with — which the kernel trusts, as sluice does. Per
//! packet:
//!
//! - `pop`: a packet that is not MPLS passes untouched; one shorter than an
//!   LSE is dropped;
//! - `push`: a new LSE from the configured label, TC (0 unless given), TTL
//!   (255 unless given: the kernel's default with no MPLS sysctl set) and
//!   bottom-of-stack bit — given, or set when the packet (under any VLAN
//!   tags) was not MPLS yet;
//! - `mac_push`: the same, but in front of the whole frame: the Ethernet
//!   header (with a tag carried beside the packet written in after the
//!   addresses, and the tags in the packet) becomes payload under the new
//!   LSE, whose bottom-of-stack bit is set whenever there was a header;
//! - `modify`: the fields configured replace those of the first LSE; a
//!   packet that is not MPLS, or shorter than an LSE, is dropped;
//! - `dec_ttl`: the first LSE's TTL less one; a packet that is not MPLS,
//!   too short, or whose TTL would reach 0 is dropped.
//!
//! Every packet counts in bytes/packets; a drop counts in `drops` and
//! answers `shot`; the verdict is otherwise the configured one.
//!
//! Creation checks, all made before the index is looked up (so also when a
//! filter binds to an existing action): the label below 2^20 and not 3
//! (implicit null), TC below 8, TTL above 0, bottom of stack 0 or 1 (the
//! attribute policy); then per verb: `pop` needs a protocol, an EtherType
//! (0x0600 or more), and nothing else; `dec_ttl` takes nothing; `push` and
//! `mac_push` need a label and an MPLS protocol if one is given
//! (EPROTONOSUPPORT); `modify` takes no protocol. As stored (and dumped):
//! the protocol always (`mpls_uc` unless given), a TTL for the pushes
//! (255 unless given), the rest only when given; a change replaces every
//! parameter.
//!
//! Deviation: when a packet carries VLAN tags in its bytes, the kernel's
//! `skb->protocol` is the first tag's TPID, so its pop, modify and dec_ttl
//! would see no MPLS; sluice's protocol is the type after the tags (see
//! [`Packet::vlan_inband`]).

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::{Errno, TcError, TcResult};
use crate::packet::{is_mpls_type, Packet, ETH_P_MPLS_UC};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// `TCA_MPLS_ACT_*`: what the action does.
pub mod verb {
    /// Remove the outermost LSE.
    pub const POP: i32 = 1;
    /// Add an LSE above the network header.
    pub const PUSH: i32 = 2;
    /// Change the outermost LSE.
    pub const MODIFY: i32 = 3;
    /// Decrement the outermost LSE's TTL.
    pub const DEC_TTL: i32 = 4;
    /// Add an LSE in front of the MAC header.
    pub const MAC_PUSH: i32 = 5;
}

/// The largest label (`MPLS_LABEL_MASK`).
pub const MPLS_LABEL_MASK: u32 = 0xfffff;
/// The implicit-null label, which no packet carries (`MPLS_LABEL_IMPLNULL`).
pub const MPLS_LABEL_IMPLNULL: u32 = 3;
/// The TTL a push gets when none is configured (`ACT_MPLS_TTL_DEFAULT`).
pub const DEFAULT_TTL: u8 = 255;

/// What tc sends (`TCA_MPLS_PARMS` and the optional attributes), and what
/// the kernel dumps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MplsOpts {
    /// The control action (`pipe` by default).
    pub action: Verdict,
    /// One of [`verb`] (`tc_mpls.m_action`).
    pub m_action: i32,
    /// `TCA_MPLS_LABEL`.
    pub label: Option<u32>,
    /// `TCA_MPLS_TC`.
    pub tc: Option<u8>,
    /// `TCA_MPLS_TTL`.
    pub ttl: Option<u8>,
    /// `TCA_MPLS_BOS`.
    pub bos: Option<u8>,
    /// `TCA_MPLS_PROTO`: the EtherType.
    pub proto: Option<u16>,
}

fn act_mpls_err(errno: Errno, msg: &str) -> TcError {
    TcError::msg(errno, format!("act_mpls: {msg}"))
}

/// The attribute policy and `tcf_mpls_init`'s checks, all made before the
/// index is looked up; the parameters as the kernel stores them.
pub(crate) fn check(o: &MplsOpts) -> TcResult<MplsOpts> {
    if o.label
        .is_some_and(|l| l > MPLS_LABEL_MASK || l == MPLS_LABEL_IMPLNULL)
    {
        return Err(act_mpls_err(Errno::EINVAL, "MPLS label out of range"));
    }
    if o.tc.is_some_and(|t| t > 7) || o.bos.is_some_and(|b| b > 1) {
        return Err(TcError::inval("integer out of range"));
    }
    if o.ttl == Some(0) {
        return Err(TcError::inval("integer out of range"));
    }
    let fields = o.label.is_some() || o.tc.is_some() || o.ttl.is_some() || o.bos.is_some();
    let mut ttl = o.ttl;
    match o.m_action {
        verb::POP => {
            let Some(proto) = o.proto else {
                return Err(act_mpls_err(
                    Errno::EINVAL,
                    "Protocol must be set for MPLS pop",
                ));
            };
            // eth_proto_is_802_3: an EtherType, not an 802.3 length.
            if proto & 0xff00 < 0x0600 {
                return Err(act_mpls_err(
                    Errno::EINVAL,
                    "Invalid protocol type for MPLS pop",
                ));
            }
            if fields {
                return Err(act_mpls_err(
                    Errno::EINVAL,
                    "Label, TTL, TC or BOS cannot be used with MPLS pop",
                ));
            }
        }
        verb::DEC_TTL => {
            if fields || o.proto.is_some() {
                return Err(act_mpls_err(
                    Errno::EINVAL,
                    "Label, TTL, TC, BOS or protocol cannot be used with MPLS dec_ttl",
                ));
            }
        }
        verb::PUSH | verb::MAC_PUSH => {
            if o.label.is_none() {
                return Err(act_mpls_err(
                    Errno::EINVAL,
                    "Label is required for MPLS push",
                ));
            }
            if o.proto.is_some_and(|p| !is_mpls_type(p)) {
                return Err(act_mpls_err(
                    Errno::EPROTONOSUPPORT,
                    "Protocol must be an MPLS type for MPLS push",
                ));
            }
            ttl = Some(o.ttl.unwrap_or(DEFAULT_TTL));
        }
        verb::MODIFY => {
            if o.proto.is_some() {
                return Err(act_mpls_err(
                    Errno::EINVAL,
                    "Protocol cannot be used with MPLS modify",
                ));
            }
        }
        _ => return Err(act_mpls_err(Errno::EINVAL, "Unknown MPLS action")),
    }
    Ok(MplsOpts {
        ttl,
        proto: Some(o.proto.unwrap_or(ETH_P_MPLS_UC)),
        ..o.clone()
    })
}

/// Validated parameters.
#[derive(Clone, Debug)]
pub struct MplsParams(MplsOpts);

impl MplsParams {
    pub(crate) fn validate(o: &MplsOpts, in_filter: bool) -> TcResult<Self> {
        let kept = check(o)?;
        check_ctrlact(o.action, in_filter)?;
        Ok(MplsParams(kept))
    }
}

/// An mpls action.
#[derive(Debug)]
pub struct Mpls {
    p: MplsParams,
    drops: u64,
}

/// An edit that failed (the kernel's `goto drop`).
struct Failed;

/// The packet's first LSE, if it is an MPLS packet long enough to have one.
fn first_lse(pkt: &Packet) -> Result<u32, Failed> {
    if !is_mpls_type(pkt.protocol) {
        return Err(Failed);
    }
    pkt.bytes_at::<4>(0).map(u32::from_be_bytes).ok_or(Failed)
}

impl Mpls {
    pub(crate) fn new(p: MplsParams) -> Self {
        Mpls { p, drops: 0 }
    }

    pub(crate) fn change(&mut self, p: MplsParams) {
        self.p = p;
    }

    /// `tcf_mpls_get_lse`: the configured fields over `lse`.
    fn lse(&self, mut lse: u32, set_bos: bool) -> u32 {
        let o = &self.p.0;
        if let Some(label) = o.label {
            lse = (lse & !0xffff_f000) | label << 12;
        }
        if let Some(ttl) = o.ttl {
            lse = (lse & !0xff) | ttl as u32;
        }
        if let Some(tc) = o.tc {
            lse = (lse & !0xe00) | (tc as u32) << 9;
        }
        match o.bos {
            Some(bos) => lse = (lse & !0x100) | (bos as u32) << 8,
            None if set_bos => lse |= 0x100,
            None => {}
        }
        lse
    }

    fn push(&self, pkt: &mut Packet, lse: u32) {
        pkt.data.splice(0..0, lse.to_be_bytes());
        pkt.len = pkt.len.saturating_add(4);
        pkt.protocol = self.p.0.proto.unwrap_or(ETH_P_MPLS_UC);
    }

    fn edit(&self, pkt: &mut Packet) -> Result<(), Failed> {
        let o = &self.p.0;
        match o.m_action {
            verb::POP => {
                if !is_mpls_type(pkt.protocol) {
                    return Ok(());
                }
                if pkt.data.len() < 4 {
                    return Err(Failed);
                }
                pkt.data.drain(..4);
                pkt.len = pkt.len.saturating_sub(4);
                pkt.protocol = o.proto.unwrap_or(ETH_P_MPLS_UC);
            }
            verb::PUSH => {
                let lse = self.lse(0, !is_mpls_type(pkt.protocol));
                self.push(pkt, lse);
            }
            verb::MAC_PUSH => {
                let set_bos = pkt.eth.is_some() || !is_mpls_type(pkt.protocol);
                // The frame goes under the entry whole: its Ethernet header
                // with the accelerated tag written in after the addresses.
                if let Some(mut frame) = pkt.mac_header() {
                    if let Some(t) = pkt.vlan.take() {
                        let tag = [t.proto.to_be_bytes(), t.tci.to_be_bytes()].concat();
                        frame.splice(12..12, tag);
                        pkt.len = pkt.len.saturating_add(4);
                    }
                    pkt.eth = None;
                    pkt.vlan_inband.clear();
                    pkt.data.splice(0..0, frame);
                }
                self.push(pkt, self.lse(0, set_bos));
            }
            verb::MODIFY => {
                let lse = self.lse(first_lse(pkt)?, false);
                pkt.data[..4].copy_from_slice(&lse.to_be_bytes());
            }
            verb::DEC_TTL => {
                let lse = first_lse(pkt)?;
                let ttl = (lse & 0xff) as u8;
                if ttl == 1 {
                    return Err(Failed);
                }
                let lse = (lse & !0xff) | ttl.wrapping_sub(1) as u32;
                pkt.data[..4].copy_from_slice(&lse.to_be_bytes());
            }
            _ => {}
        }
        Ok(())
    }
}

impl Action for Mpls {
    fn kind(&self) -> &'static str {
        "mpls"
    }

    fn act(&mut self, pkt: &mut Packet, _now: Time) -> Verdict {
        if self.edit(pkt).is_err() {
            self.drops += 1;
            return Verdict::Shot;
        }
        self.p.0.action
    }

    fn drops(&self) -> u64 {
        self.drops
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Mpls(self.p.0.clone())
    }

    fn control(&self) -> Verdict {
        self.p.0.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{ETH_P_IP, ETH_P_MPLS_MC};

    fn opts(m_action: i32) -> MplsOpts {
        MplsOpts {
            action: Verdict::Pipe,
            m_action,
            label: None,
            tc: None,
            ttl: None,
            bos: None,
            proto: None,
        }
    }

    fn mpls(o: MplsOpts) -> Mpls {
        Mpls::new(MplsParams::validate(&o, true).unwrap())
    }

    fn push(label: u32) -> MplsOpts {
        MplsOpts {
            label: Some(label),
            ..opts(verb::PUSH)
        }
    }

    fn pop(proto: u16) -> Mpls {
        mpls(MplsOpts {
            proto: Some(proto),
            ..opts(verb::POP)
        })
    }

    fn ip() -> Packet {
        Packet::new(vec![0x45; 20], 100, ETH_P_IP)
    }

    fn lse(p: &Packet) -> u32 {
        u32::from_be_bytes(p.bytes_at::<4>(0).unwrap())
    }

    /// Label 1000 = 0x3e8 in the top 20 bits; TC in bits 9-11; S bit 8; TTL.
    #[test]
    fn push_builds_the_label_stack_entry_the_kernel_builds() {
        let mut p = ip();
        let now = Time(0);
        let mut a = mpls(push(1000));
        assert_eq!(a.act(&mut p, now), Verdict::Pipe);
        // Over IP: bottom of stack set, TTL 255, TC 0, protocol mpls_uc.
        assert_eq!(lse(&p), 1000 << 12 | 0x100 | 255);
        assert_eq!((p.protocol, p.len, p.data.len()), (ETH_P_MPLS_UC, 104, 24));
        // Over MPLS: no bottom-of-stack bit; TC, TTL and the protocol as given.
        let mut b = mpls(MplsOpts {
            tc: Some(5),
            ttl: Some(64),
            proto: Some(ETH_P_MPLS_MC),
            ..push(0xfffff)
        });
        b.act(&mut p, now);
        assert_eq!(lse(&p), 0xfffff << 12 | 5 << 9 | 64);
        assert_eq!((p.protocol, p.len), (ETH_P_MPLS_MC, 108));
        // A given bottom-of-stack bit wins both ways.
        let mut q = ip();
        mpls(MplsOpts {
            bos: Some(0),
            ..push(16)
        })
        .act(&mut q, now);
        assert_eq!(lse(&q) & 0x100, 0);
        // Without a MAC header (a TUN device's packet) mac_push is push.
        let mut mac_push = mpls(MplsOpts {
            label: Some(17),
            ..opts(verb::MAC_PUSH)
        });
        mac_push.act(&mut q, now);
        assert_eq!(lse(&q) & 0x100, 0);
        // Over an Ethernet frame the whole frame goes under the entry (its
        // bottom of stack set over MPLS too), with the tag beside the
        // packet written in after the addresses.
        let mut f = ip();
        mpls(push(16)).act(&mut f, now);
        f.eth = Some(crate::packet::EthAddrs {
            dst: [2, 0, 0, 0, 0, 1],
            src: [2, 0, 0, 0, 0, 2],
        });
        f.vlan = Some(crate::packet::VlanTag {
            proto: 0x8100,
            tci: 7,
        });
        mac_push.act(&mut f, now);
        assert_eq!(lse(&f), 17 << 12 | 0x100 | 255);
        assert_eq!(
            &f.data[4..22],
            &[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0, 0, 7, 0x88, 0x47]
        );
        assert_eq!(
            (f.eth, f.vlan, f.len, f.protocol),
            (None, None, 112, ETH_P_MPLS_UC)
        );
    }

    #[test]
    fn pop_gives_the_configured_protocol_back() {
        let mut p = ip();
        let now = Time(0);
        mpls(push(1000)).act(&mut p, now);
        mpls(push(2000)).act(&mut p, now);
        let mut to_mpls = pop(ETH_P_MPLS_UC);
        assert_eq!(to_mpls.act(&mut p, now), Verdict::Pipe);
        assert_eq!(
            (lse(&p) >> 12, p.protocol, p.len),
            (1000, ETH_P_MPLS_UC, 104)
        );
        let mut to_ip = pop(ETH_P_IP);
        to_ip.act(&mut p, now);
        assert_eq!((&p.data, p.protocol, p.len), (&ip().data, ETH_P_IP, 100));
        // Not MPLS: left alone, no drop.
        let mut q = ip();
        assert_eq!(to_ip.act(&mut q, now), Verdict::Pipe);
        assert_eq!((q.data.len(), to_ip.drops()), (20, 0));
        // MPLS but too short for an LSE: dropped.
        let mut short = Packet::new(vec![0; 3], 60, ETH_P_MPLS_UC);
        assert_eq!(to_ip.act(&mut short, now), Verdict::Shot);
        assert_eq!(to_ip.drops(), 1);
    }

    #[test]
    fn modify_and_dec_ttl_edit_the_first_entry_and_drop_what_is_not_mpls() {
        let now = Time(0);
        let mut p = ip();
        mpls(MplsOpts {
            tc: Some(3),
            ttl: Some(2),
            ..push(1000)
        })
        .act(&mut p, now);
        // Only the configured fields change; bottom of stack is not set.
        let mut m = mpls(MplsOpts {
            label: Some(77),
            ..opts(verb::MODIFY)
        });
        assert_eq!(m.act(&mut p, now), Verdict::Pipe);
        assert_eq!(lse(&p), 77 << 12 | 3 << 9 | 0x100 | 2);
        let mut dec = mpls(opts(verb::DEC_TTL));
        assert_eq!(dec.act(&mut p, now), Verdict::Pipe);
        assert_eq!(lse(&p) & 0xff, 1);
        // TTL 1 would become 0: dropped, the entry unchanged.
        assert_eq!(dec.act(&mut p, now), Verdict::Shot);
        assert_eq!(lse(&p) & 0xff, 1);
        // A TTL of 0 wraps to 255 (the kernel's u8 decrement).
        let mut z = Packet::new(vec![0, 0, 0x11, 0], 64, ETH_P_MPLS_UC);
        assert_eq!(dec.act(&mut z, now), Verdict::Pipe);
        assert_eq!(lse(&z) & 0xff, 255);
        // Not MPLS: modify and dec_ttl drop.
        let mut q = ip();
        assert_eq!(m.act(&mut q, now), Verdict::Shot);
        assert_eq!(dec.act(&mut q, now), Verdict::Shot);
        assert_eq!((q.data.len(), m.drops(), dec.drops()), (20, 1, 2));
    }

    #[test]
    fn creation_checks_and_what_is_stored() {
        let err = |o: MplsOpts| {
            let e = MplsParams::validate(&o, true).unwrap_err();
            (e.errno, e.extack.unwrap_or_default())
        };
        let inval = |m: &str| (Errno::EINVAL, m.to_string());
        assert_eq!(err(push(3)), inval("act_mpls: MPLS label out of range"));
        assert_eq!(
            err(push(0x100000)),
            inval("act_mpls: MPLS label out of range")
        );
        let tc8 = MplsOpts {
            tc: Some(8),
            ..push(5)
        };
        assert_eq!(err(tc8), inval("integer out of range"));
        assert_eq!(
            err(opts(verb::MAC_PUSH)),
            inval("act_mpls: Label is required for MPLS push")
        );
        let ip_push = MplsOpts {
            proto: Some(ETH_P_IP),
            ..push(5)
        };
        assert_eq!(
            err(ip_push),
            (
                Errno::EPROTONOSUPPORT,
                "act_mpls: Protocol must be an MPLS type for MPLS push".into()
            )
        );
        assert_eq!(
            err(opts(verb::POP)),
            inval("act_mpls: Protocol must be set for MPLS pop")
        );
        let length = MplsOpts {
            proto: Some(0x05ff),
            ..opts(verb::POP)
        };
        assert_eq!(
            err(length),
            inval("act_mpls: Invalid protocol type for MPLS pop")
        );
        let modify_proto = MplsOpts {
            proto: Some(ETH_P_MPLS_UC),
            ..opts(verb::MODIFY)
        };
        assert_eq!(
            err(modify_proto),
            inval("act_mpls: Protocol cannot be used with MPLS modify")
        );
        assert_eq!(err(opts(9)), inval("act_mpls: Unknown MPLS action"));
        // Stored: the protocol always, a TTL for pushes.
        let ActionOpts::Mpls(d) = mpls(push(5)).dump() else {
            panic!()
        };
        assert_eq!((d.proto, d.ttl), (Some(ETH_P_MPLS_UC), Some(255)));
        let ActionOpts::Mpls(d) = mpls(opts(verb::DEC_TTL)).dump() else {
            panic!()
        };
        assert_eq!((d.proto, d.ttl, d.label), (Some(ETH_P_MPLS_UC), None, None));
    }
}
