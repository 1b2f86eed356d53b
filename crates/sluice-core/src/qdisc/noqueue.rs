//! noqueue and noop: the qdiscs a device has when it has no queue.
//!
//! `noqueue` is the default root of virtual devices (loopback, veth, dummy):
//! packets go straight to the driver, so there is nothing to queue; the front
//! end transmits them at once (see `Device`). `noop` is what a device that is
//! down has: it drops everything (net/sched/sch_generic.c `noop_qdisc`).
//! Both are refused as the kind of a user-created qdisc except `noqueue` at
//! the root, as in the kernel.

use super::{Cx, Dequeue, DevInfo, Qdisc, QdiscOpts};
use crate::error::TcResult;
use crate::packet::Packet;
use crate::stats::DropReason;

/// noqueue (`noop == false`) or noop (`noop == true`).
#[derive(Debug)]
pub struct Noqueue {
    noop: bool,
}

impl Noqueue {
    /// A noqueue or noop qdisc.
    pub fn new(noop: bool) -> Self {
        Noqueue { noop }
    }
}

impl Qdisc for Noqueue {
    fn enqueue(&mut self, pkt: Packet, _cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        Err((pkt, DropReason::Noop))
    }
    fn dequeue(&mut self, _cx: &mut Cx) -> Dequeue {
        Dequeue::Empty
    }
    fn reset(&mut self) {}
    fn change(&mut self, _opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        Ok(())
    }
    fn dump(&self) -> QdiscOpts {
        if self.noop {
            QdiscOpts::Noop
        } else {
            QdiscOpts::Noqueue
        }
    }
}
