//! plug: hold packets until told to release them.
//!
//! Modelled on net/sched/sch_plug.c, made for output commit (Remus-style
//! checkpointing: a VM's packets of an epoch may leave only once the
//! checkpoint of that epoch is safe). A byte-limited FIFO whose dequeue is
//! gated by commands sent as `tc qdisc change ... plug ACTION`:
//!
//! - `block` (`TCQ_PLUG_BUFFER`) inserts a plug: the packets that arrived
//!   since the previous plug become the "last epoch", and newer ones start
//!   a new epoch; it also ends a `release_indefinite`;
//! - `release` (`TCQ_PLUG_RELEASE_ONE`) lets the last completed epoch go —
//!   exactly the packets queued before the most recent `block` and not yet
//!   released; packets queued after it stay;
//! - `release_indefinite` lets everything go and turns the qdisc into a
//!   plain FIFO until the next `block`;
//! - `limit BYTES` (`TCQ_PLUG_LIMIT`) changes the byte limit.
//!
//! A new plug starts plugged. Its limit is what tc sent — whatever the
//! action word, `tc qdisc add ... plug block` sends a limit of 0 bytes,
//! which drops every packet (the kernel's `plug_init` behaves so) — or,
//! with no options, `txqueuelen` (100 when 0) packets of `psched_mtu`
//! bytes. An arriving packet is dropped if it would take the backlog over
//! the limit. The kernel has no dump for plug, so nothing is printed.
//!
//! A plugged queue answers [`Dequeue::Empty`] while holding packets, as the
//! kernel's dequeue returns nothing; a release command is a configuration
//! change, after which front ends poll the device again.

use super::drr_core::psched_mtu;
use super::{wrong_kind, Cx, Dequeue, DevInfo, Qdisc, QdiscOpts};
use crate::error::{TcError, TcResult};
use crate::packet::Packet;
use crate::stats::DropReason;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `TCQ_PLUG_BUFFER`: start a new epoch (`block`).
pub const TCQ_PLUG_BUFFER: i32 = 0;
/// `TCQ_PLUG_RELEASE_ONE`: release the last completed epoch (`release`).
pub const TCQ_PLUG_RELEASE_ONE: i32 = 1;
/// `TCQ_PLUG_RELEASE_INDEFINITE`: release everything, stop plugging.
pub const TCQ_PLUG_RELEASE_INDEFINITE: i32 = 2;
/// `TCQ_PLUG_LIMIT`: set the limit.
pub const TCQ_PLUG_LIMIT: i32 = 3;

/// `struct tc_plug_qopt`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlugMsg {
    /// One of the `TCQ_PLUG_*` actions.
    pub action: i32,
    /// Limit in bytes.
    pub limit: u32,
}

/// The options tc sends: a message, or nothing at all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlugOpts {
    /// The message, if tc sent one.
    pub msg: Option<PlugMsg>,
}

/// A plug qdisc.
#[derive(Debug)]
pub struct Plug {
    /// Limit in bytes.
    limit: u32,
    q: VecDeque<Packet>,
    backlog: u64,
    /// Released everything and passing packets through.
    unplug_indefinite: bool,
    /// Packets of the epoch being buffered now.
    pkts_current_epoch: u32,
    /// Packets of the last completed epoch, released by the next `release`.
    pkts_last_epoch: u32,
    /// Packets at the head that may leave.
    pkts_to_release: u32,
}

impl Plug {
    /// `plug_init`.
    pub fn new(opts: &PlugOpts, dev: &DevInfo) -> TcResult<Self> {
        let limit = match opts.msg {
            Some(m) => m.limit,
            None => {
                let pkts = if dev.txqueuelen == 0 {
                    100
                } else {
                    dev.txqueuelen
                };
                pkts.saturating_mul(psched_mtu(dev))
            }
        };
        Ok(Plug {
            limit,
            q: VecDeque::new(),
            backlog: 0,
            unplug_indefinite: false,
            pkts_current_epoch: 0,
            pkts_last_epoch: 0,
            pkts_to_release: 0,
        })
    }
}

impl Qdisc for Plug {
    fn enqueue(&mut self, pkt: Packet, _cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        if self.backlog + pkt.len as u64 > self.limit as u64 {
            return Err((pkt, DropReason::QueueFull));
        }
        if !self.unplug_indefinite {
            self.pkts_current_epoch += 1;
        }
        self.backlog += pkt.len as u64;
        self.q.push_back(pkt);
        Ok(())
    }

    fn dequeue(&mut self, _cx: &mut Cx) -> Dequeue {
        if !self.unplug_indefinite {
            if self.pkts_to_release == 0 {
                return Dequeue::Empty;
            }
            self.pkts_to_release -= 1;
        }
        match self.q.pop_front() {
            Some(p) => {
                self.backlog -= p.len as u64;
                Dequeue::Packet(p)
            }
            None => Dequeue::Empty,
        }
    }

    /// The kernel's plug has no `reset`: the queue is purged, the epoch
    /// counters stay.
    fn reset(&mut self) {
        self.q.clear();
        self.backlog = 0;
    }

    /// `plug_change`: one command per change.
    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Plug(o) = opts else {
            return Err(wrong_kind("plug", opts));
        };
        let Some(m) = o.msg else {
            return Err(TcError::errno(crate::error::Errno::EINVAL));
        };
        match m.action {
            TCQ_PLUG_BUFFER => {
                self.pkts_last_epoch = self.pkts_current_epoch;
                self.pkts_current_epoch = 0;
                self.unplug_indefinite = false;
            }
            TCQ_PLUG_RELEASE_ONE => {
                self.pkts_to_release = self.pkts_to_release.saturating_add(self.pkts_last_epoch);
                self.pkts_last_epoch = 0;
            }
            TCQ_PLUG_RELEASE_INDEFINITE => {
                self.unplug_indefinite = true;
                self.pkts_to_release = 0;
                self.pkts_last_epoch = 0;
                self.pkts_current_epoch = 0;
            }
            TCQ_PLUG_LIMIT => self.limit = m.limit,
            _ => return Err(TcError::errno(crate::error::Errno::EINVAL)),
        }
        Ok(())
    }

    /// The kernel cannot dump a plug; this is the limit, as a message that
    /// would create the same plug.
    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Plug(PlugOpts {
            msg: Some(PlugMsg {
                action: TCQ_PLUG_LIMIT,
                limit: self.limit,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;
    use crate::packet::Skb;
    use crate::qdisc::QdiscNode;
    use crate::time::Time;

    fn cmd(n: &mut QdiscNode, action: i32) {
        let o = QdiscOpts::Plug(PlugOpts {
            msg: Some(PlugMsg { action, limit: 0 }),
        });
        n.qdisc.change(&o, &DevInfo::default()).unwrap();
    }

    fn node(limit: Option<u32>) -> QdiscNode {
        let msg = limit.map(|limit| PlugMsg {
            action: TCQ_PLUG_LIMIT,
            limit,
        });
        let p = Plug::new(&PlugOpts { msg }, &DevInfo::default()).unwrap();
        QdiscNode::new(Handle::new(1, 0), Handle::ROOT, Box::new(p))
    }

    fn pkt(id: u64) -> Packet {
        Packet::from(Skb {
            id,
            len: 100,
            ..Default::default()
        })
    }

    fn drain(n: &mut QdiscNode, cx: &mut Cx) -> Vec<u64> {
        std::iter::from_fn(|| match n.dequeue(cx) {
            Dequeue::Packet(p) => Some(p.id),
            _ => None,
        })
        .collect()
    }

    #[test]
    fn holds_until_release_and_releases_exactly_the_last_epoch() {
        let mut n = node(None);
        let mut cx = Cx::new(Time(0));
        for i in 1..=3 {
            n.enqueue(pkt(i), &mut cx).unwrap();
        }
        assert!(drain(&mut n, &mut cx).is_empty(), "a new plug is plugged");
        cmd(&mut n, TCQ_PLUG_BUFFER); // epoch {1,2,3} closed
        for i in 4..=5 {
            n.enqueue(pkt(i), &mut cx).unwrap();
        }
        assert!(drain(&mut n, &mut cx).is_empty(), "block releases nothing");
        cmd(&mut n, TCQ_PLUG_RELEASE_ONE);
        assert_eq!(drain(&mut n, &mut cx), vec![1, 2, 3]);
        assert_eq!(n.stats().qlen, 2, "the open epoch stays");
        // A second release without a new plug releases nothing more.
        cmd(&mut n, TCQ_PLUG_RELEASE_ONE);
        assert!(drain(&mut n, &mut cx).is_empty());
        cmd(&mut n, TCQ_PLUG_BUFFER);
        n.enqueue(pkt(6), &mut cx).unwrap();
        cmd(&mut n, TCQ_PLUG_RELEASE_ONE);
        assert_eq!(drain(&mut n, &mut cx), vec![4, 5]);
        // release_indefinite lets everything go and passes new packets through.
        cmd(&mut n, TCQ_PLUG_RELEASE_INDEFINITE);
        n.enqueue(pkt(7), &mut cx).unwrap();
        assert_eq!(drain(&mut n, &mut cx), vec![6, 7]);
        // Until the next block.
        cmd(&mut n, TCQ_PLUG_BUFFER);
        n.enqueue(pkt(8), &mut cx).unwrap();
        assert!(drain(&mut n, &mut cx).is_empty());
    }

    #[test]
    fn limit_is_in_bytes_and_defaults_to_txqueuelen_mtus() {
        let dev = DevInfo::default();
        assert_eq!(
            Plug::new(&PlugOpts::default(), &dev).unwrap().limit,
            1000 * 1514
        );
        let dev0 = DevInfo {
            txqueuelen: 0,
            ..DevInfo::default()
        };
        assert_eq!(
            Plug::new(&PlugOpts::default(), &dev0).unwrap().limit,
            100 * 1514
        );
        let mut n = node(Some(250));
        let mut cx = Cx::new(Time(0));
        n.enqueue(pkt(1), &mut cx).unwrap();
        n.enqueue(pkt(2), &mut cx).unwrap();
        assert_eq!(n.enqueue(pkt(3), &mut cx), Err(DropReason::QueueFull));
        assert_eq!(n.stats().drops, 1);
        // `plug block` at creation sends a zero limit: everything is dropped.
        let b = Plug::new(
            &PlugOpts {
                msg: Some(PlugMsg {
                    action: TCQ_PLUG_BUFFER,
                    limit: 0,
                }),
            },
            &dev,
        )
        .unwrap();
        assert_eq!(b.limit, 0);
        // A change needs a message.
        let mut p = Plug::new(&PlugOpts::default(), &dev).unwrap();
        assert!(p
            .change(&QdiscOpts::Plug(PlugOpts::default()), &dev)
            .is_err());
    }
}
