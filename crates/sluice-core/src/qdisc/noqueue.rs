//! noqueue and noop: the qdiscs a device has when it has no queue.
//!
//! `noqueue` is the default root of virtual devices (loopback, veth, dummy):
//! packets go straight to the driver, so there is nothing to queue; the front
//! end transmits them at once (see `Device`). `noop` is what a device that is
//! down has: it drops everything (net/sched/sch_generic.c `noop_qdisc`).
//! Both are refused as the kind of a user-created qdisc except `noqueue` at
//! the root, as in the kernel.

use super::{Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts};
use crate::error::TcResult;
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::DropReason;

/// The noop qdisc the kernel puts in a class that has no qdisc of its own
/// (`&noop_qdisc`), as the child of `parent`.
pub fn noop_child(parent: Handle) -> QdiscNode {
    QdiscNode::new(Handle::UNSPEC, parent, Box::new(Noqueue::new(true)))
}

/// The one child of a single-class qdisc (red, sfb, tbf) as a list of
/// leaves: none while it is noop.
pub fn child_leaves(child: &mut QdiscNode) -> Vec<&mut QdiscNode> {
    if child.kind() == "noop" {
        Vec::new()
    } else {
        vec![child]
    }
}

/// [`child_leaves`], shared.
pub fn child_leaves_ref(child: &QdiscNode) -> Vec<&QdiscNode> {
    if child.kind() == "noop" {
        Vec::new()
    } else {
        vec![child]
    }
}

/// `*_graft` of a single-class qdisc: `new` (`None`: noop, as the child of
/// `class`) replaces `child`; the old qdisc goes back to the caller with
/// its queue, to be purged from the ancestors, unless it was noop.
pub fn swap_child(
    child: &mut QdiscNode,
    new: Option<QdiscNode>,
    class: Handle,
) -> Option<QdiscNode> {
    let new = new.unwrap_or_else(|| noop_child(class));
    let old = std::mem::replace(child, new);
    (old.kind() != "noop").then_some(old)
}

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
