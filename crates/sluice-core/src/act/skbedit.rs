//! skbedit: rewrite a packet's metadata — priority, mark, packet type,
//! transmit queue — and answer a verdict (`pipe` by default).
//!
//! Modelled on net/sched/act_skbedit.c. Each field is edited only when it
//! was configured, in the kernel's order:
//!
//! - `priority P` sets `skb->priority` to the class id P (so a later
//!   `prio`, `pfifo_fast`, `drr` or `qfq` sees it);
//! - `inheritdsfield` then sets it to the packet's DSCP (the DS field
//!   shifted right by two) for IPv4 and IPv6; a packet too short to hold
//!   the IP header is dropped and counted (the kernel's failed
//!   `pskb_may_pull`);
//! - `queue_mapping Q` picks transmit queue Q when the device has more than
//!   Q queues (on a multi-queue device's egress, before its mq root);
//! - `mark M[/MASK]` replaces the bits of `skb->mark` under MASK (all 32
//!   without one) with those of M;
//! - `ptype T` sets `skb->pkt_type` (host 0, broadcast 1, multicast 2,
//!   otherhost 3; others are refused).
//!
//! At least one field must be given to create or change an action ("index N"
//! alone only binds an existing one); a change replaces every field, as the
//! kernel's does. Counters: every packet in bytes/packets, a drop for each
//! packet `inheritdsfield` could not read.
//!
//! Deviations: the kernel sets the queue only when the device has more
//! than Q queues; sluice's action does not know the device, so it always
//! records Q and [`crate::qdisc::mq`] ignores a queue the device lacks, as
//! the kernel's transmit path then picks by hash. Kernels since 6.0
//! refuse `queue_mapping` on the receive side unless the action is
//! `skip_sw`; sluice does not know on which side an action runs and accepts
//! it. The `queue_mapping` range of `skbhash` (`TCA_SKBEDIT_QUEUE_MAPPING_MAX`)
//! is not modelled (iproute2 6.1 cannot send it).

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::{Errno, TcError, TcResult};
use crate::packet::{Packet, ETH_P_IP, ETH_P_IPV6};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// `PACKET_OTHERHOST`, the largest packet type skbedit may set (`skb_pkt_type_ok`).
pub const PACKET_OTHERHOST: u16 = 3;

/// The skbedit options tc sends (`TCA_SKBEDIT_*`); `None` fields are absent.
/// The default edits nothing and answers `pipe`, tc's default verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkbeditOpts {
    /// The control action (`tc_skbedit.action`).
    pub action: Verdict,
    /// `TCA_SKBEDIT_QUEUE_MAPPING`: the transmit queue.
    pub queue_mapping: Option<u16>,
    /// `TCA_SKBEDIT_PRIORITY`: the new `skb->priority` (a class id).
    pub priority: Option<u32>,
    /// `TCA_SKBEDIT_MARK`: the new mark bits.
    pub mark: Option<u32>,
    /// `TCA_SKBEDIT_MASK`: which mark bits to replace (all when absent).
    pub mask: Option<u32>,
    /// `TCA_SKBEDIT_PTYPE`: the new `skb->pkt_type`.
    pub ptype: Option<u16>,
    /// `SKBEDIT_F_INHERITDSFIELD` in `TCA_SKBEDIT_FLAGS`.
    #[serde(default)]
    pub inheritdsfield: bool,
}

impl Default for SkbeditOpts {
    fn default() -> Self {
        SkbeditOpts {
            action: Verdict::Pipe,
            queue_mapping: None,
            priority: None,
            mark: None,
            mask: None,
            ptype: None,
            inheritdsfield: false,
        }
    }
}

impl SkbeditOpts {
    /// True when some field is to be edited (the kernel's non-zero `flags`).
    fn edits(&self) -> bool {
        self.queue_mapping.is_some()
            || self.priority.is_some()
            || self.mark.is_some()
            || self.mask.is_some()
            || self.ptype.is_some()
            || self.inheritdsfield
    }
}

/// Attribute checks made before the index is looked up.
pub(crate) fn check_policy(o: &SkbeditOpts) -> TcResult<()> {
    if o.ptype.is_some_and(|t| t > PACKET_OTHERHOST) {
        return Err(TcError::errno(Errno::EINVAL));
    }
    Ok(())
}

/// The check after an existing action was not simply bound: something must
/// be edited (before "exists" is refused, as in the kernel).
pub(crate) fn check_edits(o: &SkbeditOpts) -> TcResult<()> {
    if o.edits() {
        Ok(())
    } else {
        Err(TcError::errno(Errno::EINVAL))
    }
}

/// Validated skbedit parameters.
#[derive(Clone, Debug)]
pub struct SkbeditParams {
    o: SkbeditOpts,
}

impl SkbeditParams {
    pub(crate) fn validate(o: &SkbeditOpts, in_filter: bool) -> TcResult<Self> {
        check_policy(o)?;
        check_edits(o)?;
        check_ctrlact(o.action, in_filter)?;
        Ok(SkbeditParams { o: o.clone() })
    }
}

/// An skbedit action.
#[derive(Debug)]
pub struct Skbedit {
    p: SkbeditParams,
    drops: u64,
}

impl Skbedit {
    pub(crate) fn new(p: SkbeditParams) -> Self {
        Skbedit { p, drops: 0 }
    }

    pub(crate) fn change(&mut self, p: SkbeditParams) {
        self.p = p;
    }
}

/// The DS field when the whole IP header is there (`pskb_may_pull` of an
/// IPv4 or IPv6 header); `Err` when it is not; `Ok(None)` for other protocols.
fn dsfield(pkt: &Packet) -> Result<Option<u8>, ()> {
    let d = &pkt.data;
    match pkt.protocol {
        ETH_P_IP if d.len() >= 20 => Ok(Some(d[1])),
        ETH_P_IPV6 if d.len() >= 40 => Ok(Some((d[0] << 4) | (d[1] >> 4))),
        ETH_P_IP | ETH_P_IPV6 => Err(()),
        _ => Ok(None),
    }
}

impl Action for Skbedit {
    fn kind(&self) -> &'static str {
        "skbedit"
    }

    fn act(&mut self, pkt: &mut Packet, _now: Time) -> Verdict {
        let o = &self.p.o;
        if let Some(p) = o.priority {
            pkt.priority = p;
        }
        if o.inheritdsfield {
            match dsfield(pkt) {
                Ok(Some(ds)) => pkt.priority = (ds >> 2) as u32,
                Ok(None) => {}
                Err(()) => {
                    self.drops += 1;
                    return Verdict::Shot;
                }
            }
        }
        if let Some(q) = o.queue_mapping {
            // mq uses it only when the device has that queue.
            pkt.queue_mapping = Some(q);
        }
        if let Some(m) = o.mark {
            let mask = o.mask.unwrap_or(u32::MAX);
            pkt.mark = (pkt.mark & !mask) | (m & mask);
        }
        if let Some(t) = o.ptype {
            pkt.pkt_type = Some(t as u8);
        }
        o.action
    }

    fn drops(&self) -> u64 {
        self.drops
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Skbedit(self.p.o.clone())
    }

    fn control(&self) -> Verdict {
        self.p.o.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Skb;

    fn skbedit(o: SkbeditOpts) -> Skbedit {
        Skbedit::new(SkbeditParams::validate(&o, true).unwrap())
    }

    fn ipv4(tos: u8, len: usize) -> Packet {
        let mut data = vec![0u8; len];
        data[0] = 0x45;
        if len > 1 {
            data[1] = tos;
        }
        Packet::new(data, len as u32, ETH_P_IP)
    }

    #[test]
    fn fields_are_edited_in_the_kernels_order() {
        let mut a = skbedit(SkbeditOpts {
            action: Verdict::Ok,
            priority: Some(0x10005),
            mark: Some(0x0f0),
            mask: Some(0x0ff),
            ptype: Some(1),
            ..Default::default()
        });
        let mut p = Packet::from(Skb {
            mark: 0xa0a,
            ..ipv4(0, 20).into_skb()
        });
        assert_eq!(a.act(&mut p, Time(0)), Verdict::Ok);
        assert_eq!(p.priority, 0x10005);
        // Only the bits under the mask change.
        assert_eq!(p.mark, 0xaf0);
        assert_eq!(p.pkt_type, Some(1));
        // Without a mask, the whole mark.
        let mut a = skbedit(SkbeditOpts {
            mark: Some(7),
            ..Default::default()
        });
        assert_eq!(a.act(&mut p, Time(0)), Verdict::Pipe);
        assert_eq!(p.mark, 7);
    }

    #[test]
    fn inheritdsfield_takes_the_dscp_after_priority() {
        let mut a = skbedit(SkbeditOpts {
            action: Verdict::Pipe,
            priority: Some(5),
            inheritdsfield: true,
            ..Default::default()
        });
        // TOS 0xb8 is DSCP 46 (EF).
        let mut p = ipv4(0xb8, 20);
        a.act(&mut p, Time(0));
        assert_eq!(p.priority, 46);
        // IPv6: traffic class 0x28 (DSCP 10) straddles bytes 0 and 1.
        let mut data = vec![0u8; 40];
        data[0] = 0x62;
        data[1] = 0x80;
        let mut p6 = Packet::new(data, 40, ETH_P_IPV6);
        a.act(&mut p6, Time(0));
        assert_eq!(p6.priority, 10);
        // Other protocols keep the configured priority.
        let mut arp = Packet::new(vec![0; 28], 28, crate::packet::ETH_P_ARP);
        a.act(&mut arp, Time(0));
        assert_eq!(arp.priority, 5);
        // A truncated IP header is dropped and counted.
        assert_eq!(a.act(&mut ipv4(0xb8, 12), Time(0)), Verdict::Shot);
        assert_eq!(a.drops(), 1);
    }

    #[test]
    fn refusals() {
        let v = |o: SkbeditOpts| SkbeditParams::validate(&o, false).map(|_| ());
        assert_eq!(
            v(SkbeditOpts::default()),
            Err(TcError::errno(Errno::EINVAL))
        );
        assert_eq!(
            v(SkbeditOpts {
                ptype: Some(4),
                ..Default::default()
            }),
            Err(TcError::errno(Errno::EINVAL))
        );
        assert!(v(SkbeditOpts {
            queue_mapping: Some(3),
            ..Default::default()
        })
        .is_ok());
        assert_eq!(
            v(SkbeditOpts {
                mark: Some(1),
                action: Verdict::GotoChain(1),
                ..Default::default()
            }),
            Err(TcError::inval("can't goto NULL proto/chain"))
        );
    }
}
