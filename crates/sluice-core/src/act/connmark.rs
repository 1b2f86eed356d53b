//! connmark: copy the mark of the packet's tracked connection into
//! `skb->mark`, so that a filter after it (fw, a u32 `mark` match, flower)
//! classifies every packet of a connection as its first one was marked.
//!
//! Modelled on net/sched/act_connmark.c. The usual use is ingress shaping:
//! iptables' `CONNMARK --save-mark` stores a mark in the connection when the
//! upload goes out, and on the way in, where netfilter has not run yet,
//! `action connmark` restores it before `mirred` sends the packet to an ifb
//! device whose fw filters read it.
//!
//! For IPv4 and IPv6 packets with a whole network header, the connection is
//! the one netfilter attached to the packet (egress) or, failing that, the
//! one the packet's tuple finds in the action's conntrack `zone` (ingress).
//! When there is one, the mark is copied and the packet counted as an
//! *overlimit* (the kernel's way of telling how many were marked); every
//! packet counts in bytes/packets. The verdict is the configured control
//! action, `pipe` unless told otherwise.
//!
//! Front ends supply the connection with the packet ([`ConnMark`]); sluice's
//! connection table has zone 0 only, so an action set to look in another
//! zone finds nothing on ingress, as it would in a kernel where nothing
//! tracks connections in that zone.

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::TcResult;
use crate::packet::{ConnMark, Packet, ETH_P_IP, ETH_P_IPV6};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// `struct tc_connmark`: the options tc sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnmarkOpts {
    /// The control action (`pipe` by default).
    pub action: Verdict,
    /// The conntrack zone looked in when the packet carries no connection.
    pub zone: u16,
}

impl Default for ConnmarkOpts {
    fn default() -> Self {
        ConnmarkOpts {
            action: Verdict::Pipe,
            zone: 0,
        }
    }
}

/// The connection an action looking in `zone` finds for `pkt`: none unless
/// it is IPv4 or IPv6 with its whole network header (shared with ctinfo).
pub(crate) fn connection(pkt: &Packet, zone: u16) -> Option<ConnMark> {
    let header = match pkt.protocol {
        ETH_P_IP => 20,
        ETH_P_IPV6 => 40,
        _ => return None,
    };
    if pkt.data.len() < header {
        return None;
    }
    ConnMark::in_zone(pkt.conn, zone)
}

/// Validated connmark parameters.
#[derive(Clone, Debug)]
pub struct ConnmarkParams(ConnmarkOpts);

impl ConnmarkParams {
    pub(crate) fn validate(o: &ConnmarkOpts, in_filter: bool) -> TcResult<Self> {
        check_ctrlact(o.action, in_filter)?;
        Ok(ConnmarkParams(o.clone()))
    }
}

/// A connmark action.
#[derive(Debug)]
pub struct Connmark {
    p: ConnmarkParams,
    marked: u64,
}

impl Connmark {
    pub(crate) fn new(p: ConnmarkParams) -> Self {
        Connmark { p, marked: 0 }
    }

    pub(crate) fn change(&mut self, p: ConnmarkParams) {
        self.p = p;
    }
}

impl Action for Connmark {
    fn kind(&self) -> &'static str {
        "connmark"
    }

    fn act(&mut self, pkt: &mut Packet, _now: Time) -> Verdict {
        if let Some(c) = connection(pkt, self.p.0.zone) {
            pkt.mark = c.mark;
            self.marked += 1;
        }
        self.p.0.action
    }

    fn drops(&self) -> u64 {
        0
    }

    fn overlimits(&self) -> u64 {
        self.marked
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Connmark(self.p.0.clone())
    }

    fn control(&self) -> Verdict {
        self.p.0.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{Skb, ETH_P_ARP};

    fn pkt(protocol: u16, len: usize, conn: Option<ConnMark>) -> Packet {
        let mut data = vec![0u8; len];
        if len > 0 {
            data[0] = if protocol == ETH_P_IPV6 { 0x60 } else { 0x45 };
        }
        Packet::from(Skb {
            mark: 7,
            conn,
            ..Packet::new(data, len as u32, protocol).into_skb()
        })
    }

    fn connmark(zone: u16, action: Verdict) -> Connmark {
        let o = ConnmarkOpts { action, zone };
        Connmark::new(ConnmarkParams::validate(&o, true).unwrap())
    }

    const SAVED: ConnMark = ConnMark {
        mark: 0x20,
        attached: false,
    };

    #[test]
    fn the_connections_mark_replaces_the_packets_and_counts_as_overlimit() {
        let mut a = connmark(0, Verdict::Pipe);
        let mut p = pkt(ETH_P_IP, 40, Some(SAVED));
        assert_eq!(a.act(&mut p, Time(0)), Verdict::Pipe);
        assert_eq!(p.mark, 0x20);
        // IPv6 too; the whole mark, zero included.
        let zero = ConnMark { mark: 0, ..SAVED };
        let mut p6 = pkt(ETH_P_IPV6, 40, Some(zero));
        a.act(&mut p6, Time(0));
        assert_eq!(p6.mark, 0);
        assert_eq!(a.overlimits(), 2);
    }

    #[test]
    fn nothing_happens_without_a_connection_or_a_whole_ip_header() {
        let mut a = connmark(0, Verdict::Ok);
        for mut p in [
            pkt(ETH_P_IP, 40, None),
            pkt(ETH_P_IP, 19, Some(SAVED)),
            pkt(ETH_P_IPV6, 39, Some(SAVED)),
            pkt(ETH_P_ARP, 28, Some(SAVED)),
        ] {
            // The verdict is the configured one either way.
            assert_eq!(a.act(&mut p, Time(0)), Verdict::Ok);
            assert_eq!(p.mark, 7);
        }
        assert_eq!(a.overlimits(), 0);
    }

    #[test]
    fn another_zone_finds_only_an_attached_connection() {
        let mut a = connmark(5, Verdict::Pipe);
        let mut looked_up = pkt(ETH_P_IP, 20, Some(SAVED));
        a.act(&mut looked_up, Time(0));
        assert_eq!(looked_up.mark, 7);
        let attached = ConnMark {
            attached: true,
            ..SAVED
        };
        let mut p = pkt(ETH_P_IP, 20, Some(attached));
        a.act(&mut p, Time(0));
        assert_eq!(p.mark, 0x20);
    }
}
