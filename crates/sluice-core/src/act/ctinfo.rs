//! ctinfo: restore what was stored in a tracked connection's mark — a DSCP
//! into the packet's DS field, and/or the mark (masked) into `skb->mark`.
//!
//! Modelled on net/sched/act_ctinfo.c. Its use is the one OpenWrt's SQM
//! made for it: an iptables rule stores each connection's DSCP in some bits
//! of its mark as packets go out; on the way in, before mirred sends them to
//! an ifb device shaped by a DSCP-aware qdisc (cake's diffserv tins),
//! `action ctinfo dscp 0xfc000000 0x01000000` writes it back into every
//! packet of the connection, whatever the sender put there.
//!
//! The connection is found as connmark finds it ([`super::connmark`]): the
//! one attached to the packet, or the one its tuple finds in `zone`; only
//! IPv4 and IPv6 packets with a whole network header are looked at.
//!
//! - `dscp MASK [STATEMASK]`: MASK selects 6 contiguous bits of the
//!   connection mark holding a DSCP. When STATEMASK is 0, or the mark has
//!   any of its bits set (the storing rule's "this is valid" flag), the DSCP
//!   is written, keeping the ECN bits, if it differs from the packet's
//!   (IPv4's header checksum follows): counted as `DSCP set`. MASK must be
//!   6 contiguous bits and STATEMASK must not overlap it (EINVAL).
//! - `cpmark [MASK]`: the connection mark under MASK (all bits without one)
//!   becomes `skb->mark`: counted as `CPMARK set`.
//!
//! Every packet counts in bytes/packets; the verdict is the configured
//! control action, `pipe` unless told otherwise. The kernel's `error`
//! counter (a header it could not make writable) stays 0: a sluice packet
//! is always writable.

use super::connmark::connection;
use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::{TcError, TcResult};
use crate::packet::Packet;
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// The ctinfo options tc sends (`TCA_CTINFO_*`) and the counters the kernel
/// dumps with them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CtinfoOpts {
    /// The control action (`TCA_CTINFO_ACT`).
    pub action: Verdict,
    /// `TCA_CTINFO_ZONE`.
    pub zone: u16,
    /// `TCA_CTINFO_PARMS_DSCP_MASK`: where the DSCP is in the connection mark.
    pub dscp_mask: Option<u32>,
    /// `TCA_CTINFO_PARMS_DSCP_STATEMASK`: bits of which one must be set for
    /// the DSCP to be restored (0: always). Dumped whenever `dscp_mask` is.
    pub dscp_statemask: Option<u32>,
    /// `TCA_CTINFO_PARMS_CPMARK_MASK`: which bits of the connection mark
    /// become the packet's mark.
    pub cpmark_mask: Option<u32>,
    /// Dump only: `TCA_CTINFO_STATS_DSCP_SET`, `_DSCP_ERROR`, `_CPMARK_SET`.
    pub counters: CtinfoCounters,
}

impl Default for CtinfoOpts {
    fn default() -> Self {
        CtinfoOpts {
            action: Verdict::Pipe,
            zone: 0,
            dscp_mask: None,
            dscp_statemask: None,
            cpmark_mask: None,
            counters: CtinfoCounters::default(),
        }
    }
}

/// ctinfo's own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CtinfoCounters {
    /// Packets whose DSCP was rewritten.
    pub dscp_set: u64,
    /// Packets whose header could not be made writable (always 0 here).
    pub dscp_error: u64,
    /// Packets whose mark was set from the connection.
    pub cpmark_set: u64,
}

/// Validated ctinfo parameters.
#[derive(Clone, Debug)]
pub struct CtinfoParams {
    action: Verdict,
    zone: u16,
    /// (mask, shift to its lowest bit, statemask) in DSCP mode.
    dscp: Option<(u32, u32, u32)>,
    cpmark: Option<u32>,
}

impl CtinfoParams {
    pub(crate) fn validate(o: &CtinfoOpts, in_filter: bool) -> TcResult<Self> {
        let dscp = match o.dscp_mask {
            Some(mask) => {
                let shift = if mask == 0 { 0 } else { mask.trailing_zeros() };
                if mask >> shift != 0x3f {
                    return Err(TcError::inval("dscp mask must be 6 contiguous bits"));
                }
                let state = o.dscp_statemask.unwrap_or(0);
                if mask & state != 0 {
                    return Err(TcError::inval("dscp statemask must not overlap dscp mask"));
                }
                Some((mask, shift, state))
            }
            None => None,
        };
        check_ctrlact(o.action, in_filter)?;
        Ok(CtinfoParams {
            action: o.action,
            zone: o.zone,
            dscp,
            cpmark: o.cpmark_mask,
        })
    }
}

/// A ctinfo action.
#[derive(Debug)]
pub struct Ctinfo {
    p: CtinfoParams,
    counters: CtinfoCounters,
}

impl Ctinfo {
    pub(crate) fn new(p: CtinfoParams) -> Self {
        Ctinfo {
            p,
            counters: CtinfoCounters::default(),
        }
    }

    /// A replace takes the new parameters; the counters go on.
    pub(crate) fn change(&mut self, p: CtinfoParams) {
        self.p = p;
    }
}

impl Action for Ctinfo {
    fn kind(&self) -> &'static str {
        "ctinfo"
    }

    fn act(&mut self, pkt: &mut Packet, _now: Time) -> Verdict {
        let Some(conn) = connection(pkt, self.p.zone) else {
            return self.p.action;
        };
        if let Some((mask, shift, state)) = self.p.dscp {
            if state == 0 || conn.mark & state != 0 {
                let dscp = (((conn.mark & mask) >> shift) << 2) as u8 & !3;
                if pkt.dsfield().map(|ds| ds & !3) != Some(dscp) && pkt.change_dsfield(3, dscp) {
                    self.counters.dscp_set += 1;
                }
            }
        }
        if let Some(mask) = self.p.cpmark {
            self.counters.cpmark_set += 1;
            pkt.mark = conn.mark & mask;
        }
        self.p.action
    }

    fn drops(&self) -> u64 {
        0
    }

    fn dump(&self) -> ActionOpts {
        let p = &self.p;
        ActionOpts::Ctinfo(CtinfoOpts {
            action: p.action,
            zone: p.zone,
            dscp_mask: p.dscp.map(|(mask, _, _)| mask),
            dscp_statemask: p.dscp.map(|(_, _, state)| state),
            cpmark_mask: p.cpmark,
            counters: self.counters,
        })
    }

    fn control(&self) -> Verdict {
        self.p.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Errno;
    use crate::packet::{ConnMark, Skb, ETH_P_IP, ETH_P_IPV6};

    fn ctinfo(o: CtinfoOpts) -> Ctinfo {
        Ctinfo::new(CtinfoParams::validate(&o, true).unwrap())
    }

    /// An IPv4 header with a valid checksum, TOS `tos`, carrying `mark`'s connection.
    fn ipv4(tos: u8, mark: Option<u32>) -> Packet {
        let mut d = vec![
            0x45, tos, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        let c = checksum(&d);
        d[10..12].copy_from_slice(&c.to_be_bytes());
        Packet::from(Skb {
            conn: mark.map(|mark| ConnMark {
                mark,
                attached: false,
            }),
            ..Packet::new(d, 20, ETH_P_IP).into_skb()
        })
    }

    /// The IPv4 header checksum, computed from scratch (RFC 791).
    fn checksum(h: &[u8]) -> u16 {
        let mut sum: u32 = h
            .chunks(2)
            .enumerate()
            .filter(|(i, _)| *i != 5)
            .map(|(_, w)| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum >> 16 != 0 {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    /// sqm-scripts' layout: DSCP in the top 6 bits, "valid" flag bit 24.
    fn sqm() -> CtinfoOpts {
        CtinfoOpts {
            dscp_mask: Some(0xfc00_0000),
            dscp_statemask: Some(0x0100_0000),
            ..Default::default()
        }
    }

    #[test]
    fn the_stored_dscp_is_written_back_keeping_ecn_and_a_valid_checksum() {
        let mut a = ctinfo(sqm());
        // DSCP 46 (EF) stored, valid flag set; the packet came as CS0 with ECT(0).
        let mark = (46 << 26) | 0x0100_0000;
        let mut p = ipv4(0x02, Some(mark));
        assert_eq!(a.act(&mut p, Time(0)), Verdict::Pipe);
        assert_eq!(p.data[1], (46 << 2) | 0x02);
        assert_eq!(
            u16::from_be_bytes([p.data[10], p.data[11]]),
            checksum(&p.data)
        );
        // Already right: nothing to set.
        a.act(&mut p, Time(0));
        // Without the valid flag, the packet keeps its DSCP.
        let mut q = ipv4(0x20, Some(46 << 26));
        a.act(&mut q, Time(0));
        assert_eq!(q.data[1], 0x20);
        assert_eq!(a.counters.dscp_set, 1);
        // The mark is left alone in DSCP-only mode.
        assert_eq!(p.mark, 0);
    }

    #[test]
    fn ipv6_traffic_class_and_cpmark() {
        let mut a = ctinfo(CtinfoOpts {
            dscp_mask: Some(0x3f),
            cpmark_mask: Some(0xff00),
            ..Default::default()
        });
        let mut d = vec![0u8; 40];
        d[0] = 0x60;
        d[1] = 0x10; // traffic class 0x01: ECT(1)
        let mut p = Packet::from(Skb {
            conn: Some(ConnMark {
                mark: 0x1234_0a0a,
                attached: true,
            }),
            ..Packet::new(d, 40, ETH_P_IPV6).into_skb()
        });
        a.act(&mut p, Time(0));
        // DSCP 10 (0x0a & 0x3f), ECN kept.
        assert_eq!(p.dsfield(), Some((10 << 2) | 1));
        assert_eq!(p.mark, 0x0a00);
        let c = a.counters;
        assert_eq!((c.dscp_set, c.cpmark_set), (1, 1));
    }

    #[test]
    fn no_connection_no_change() {
        let mut a = ctinfo(CtinfoOpts {
            cpmark_mask: Some(u32::MAX),
            action: Verdict::Ok,
            ..sqm()
        });
        let mut p = ipv4(0x20, None);
        assert_eq!(a.act(&mut p, Time(0)), Verdict::Ok);
        assert_eq!((p.data[1], p.mark), (0x20, 0));
        assert_eq!(a.counters, CtinfoCounters::default());
    }

    #[test]
    fn masks_the_kernel_refuses() {
        let v = |mask, state| {
            CtinfoParams::validate(
                &CtinfoOpts {
                    dscp_mask: Some(mask),
                    dscp_statemask: state,
                    ..Default::default()
                },
                true,
            )
            .map(|_| ())
        };
        assert!(v(0xfc00_0000, None).is_ok());
        assert!(v(0x3f << 8, Some(1)).is_ok());
        for bad in [0, 0x1f, 0x7f, 0x5f << 2] {
            let e = v(bad, None).unwrap_err();
            assert_eq!(e.errno, Errno::EINVAL);
        }
        assert!(v(0x3f, Some(0x20)).is_err());
    }
}
