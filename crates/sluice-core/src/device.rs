//! A network device's traffic-control state and the kernel's rules for
//! changing it.
//!
//! Modelled on net/sched/sch_api.c (`tc_modify_qdisc`, `tc_get_qdisc`,
//! `qdisc_graft`, `tc_ctl_tclass`) and sch_generic.c (default qdiscs). A device
//! has one egress root qdisc and optionally an ingress or clsact qdisc. When the
//! user has attached no root, the device has a default one with handle 0:
//! `noop` while the device has never been up, then `noqueue` for devices that
//! need no queue (loopback, veth, dummy), `mq` for the rest when they have
//! several transmit queues, else `noqueue` at `txqueuelen 0` and
//! `pfifo_fast` otherwise. Requests carry netlink flags as tc sets them: `add` is
//! CREATE|EXCL, `replace` CREATE|REPLACE, `change` none, `link` REPLACE; the
//! decisions below follow the kernel's case analysis on those flags, with its
//! error codes and extack messages.

use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::qdisc::{DevInfo, QdiscNode, QdiscOpts};
use crate::stab::SizeTable;
use crate::stats::{DropReason, RateEstimator};
use serde::{Deserialize, Serialize};

/// What kind of interface this is (decides the default qdisc).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum DevKind {
    /// `lo`.
    Loopback,
    /// One end of a veth pair.
    Veth {
        /// The other end's name.
        peer: String,
    },
    /// A dummy device.
    Dummy,
    /// An Ethernet-like NIC with a transmit queue (the simulator's links).
    Ether,
    /// An intermediate functional block (`ifb`): what mirred redirects to
    /// it goes through its egress qdiscs and then back where it came from
    /// (up the stack of the device it arrived on, or out of the device
    /// that sent it), so ingress traffic can be shaped by a full qdisc tree.
    Ifb,
    /// A TUN device: layer 3, point-to-point, no link-layer header, with a
    /// transmit queue (`sluice link`'s `a0` and `b0`).
    Tun,
}

impl DevKind {
    /// Does the device declare `IFF_NO_QUEUE` (default qdisc noqueue)?
    pub fn no_queue(&self) -> bool {
        !matches!(self, DevKind::Ether | DevKind::Ifb | DevKind::Tun)
    }
}

/// Netlink request flags, as tc sets them per command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NlFlags {
    /// `NLM_F_CREATE`.
    pub create: bool,
    /// `NLM_F_EXCL`.
    pub excl: bool,
    /// `NLM_F_REPLACE`.
    pub replace: bool,
}

impl NlFlags {
    /// `tc ... add`.
    pub const ADD: NlFlags = NlFlags {
        create: true,
        excl: true,
        replace: false,
    };
    /// `tc ... replace`.
    pub const REPLACE: NlFlags = NlFlags {
        create: true,
        excl: false,
        replace: true,
    };
    /// `tc ... change`.
    pub const CHANGE: NlFlags = NlFlags {
        create: false,
        excl: false,
        replace: false,
    };
    /// `tc ... link`.
    pub const LINK: NlFlags = NlFlags {
        create: false,
        excl: false,
        replace: true,
    };
}

/// A `tc qdisc add|change|replace|link` request, as tc puts it in netlink.
#[derive(Clone, Debug, Default)]
pub struct QdiscRequest {
    /// `tcm_parent`: `root`, `ingress`, a class, or unspecified.
    pub parent: Handle,
    /// `tcm_handle`: unspecified lets the kernel choose.
    pub handle: Handle,
    /// `TCA_KIND`, if given (it may name a kind sluice does not have).
    pub kind: Option<String>,
    /// `TCA_OPTIONS`, parsed; `None` when tc sent no options.
    pub opts: Option<QdiscOpts>,
    /// `TCA_RATE`: a rate estimator.
    pub estimator: Option<RateEstimator>,
    /// `TCA_STAB`: a size table; a change without one removes the old one.
    pub stab: Option<crate::stab::SizeSpec>,
    /// `TCA_INGRESS_BLOCK`: the shared block a new qdisc's ingress hook
    /// binds to (a change ignores it, as the kernel does).
    pub ingress_block: Option<crate::cls::shared::SharedBlockRef>,
    /// `TCA_EGRESS_BLOCK`: the same for the egress hook (clsact).
    pub egress_block: Option<crate::cls::shared::SharedBlockRef>,
    /// When the request is made (an estimator starts sampling then).
    pub now: crate::time::Time,
}

/// `__tcf_block_find`: the filters at `parent` of `node` may not be named
/// through the device when they are in a shared block.
fn refuse_shared(node: &QdiscNode, parent: Handle) -> TcResult<()> {
    match node.qdisc.shared_block(parent) {
        Some(_) => Err(err(
            Errno::EOPNOTSUPP,
            "This filter block is shared. Please use the block index to manipulate the filters",
        )),
        None => Ok(()),
    }
}

/// One interface's traffic-control state.
#[derive(Debug)]
pub struct Device {
    /// Interface index.
    pub ifindex: u32,
    /// Name, MTU, txqueuelen, ...
    pub info: DevInfo,
    /// Interface kind.
    pub kind: DevKind,
    /// Administratively up?
    pub up: bool,
    /// Has the device ever been up (before that its default qdisc is noop)?
    pub activated: bool,
    /// The egress root qdisc (handle 0 when it is the default one).
    pub root: QdiscNode,
    /// The ingress or clsact qdisc.
    pub ingress: Option<QdiscNode>,
    /// Has the device an ingress queue (`dev_ingress_queue`)? The kernel
    /// allocates it with the first ingress or clsact qdisc and keeps it, with
    /// the handle-0 noop qdisc in it, once that qdisc is deleted; deleting
    /// again then meets that noop qdisc rather than nothing.
    pub ingress_queue: bool,
    /// Classifier state shared by the device's filter blocks (u32's tables).
    pub cls: crate::cls::ClsShared,
    /// Qdiscs created on this device so far (orders `tc qdisc show`).
    created: u64,
    /// The link-layer address `ip link add/set ... address` gave it (`ip
    /// link show` derives one from the index otherwise).
    pub address: Option<[u8; 6]>,
    /// Receive queues (`numrxqueues`), shown by `ip -d link show`.
    pub num_rx_queues: u32,
}

fn err(errno: Errno, msg: &str) -> TcError {
    TcError::msg(errno, msg)
}

impl Device {
    /// A device that is down, with the default (noop) root.
    pub fn new(ifindex: u32, info: DevInfo, kind: DevKind) -> Self {
        let root = default_root(&info, &kind, false);
        Device {
            ifindex,
            info,
            kind,
            up: false,
            activated: false,
            root,
            ingress: None,
            ingress_queue: false,
            cls: Default::default(),
            created: 0,
            address: None,
            num_rx_queues: 1,
        }
    }

    /// Bring the device up or down (`ip link set up/down`). Up attaches the
    /// default qdisc if the user attached none (`dev_activate`).
    pub fn set_up(&mut self, up: bool) {
        self.up = up;
        if up {
            self.activated = true;
            if self.root.handle.is_unspec() {
                self.root = default_root(&self.info, &self.kind, true);
            }
        }
    }

    /// The link's speed (Mbit/s) changed, as a NIC reports once its link
    /// is up: the qdiscs that read it hear of it (`NETDEV_CHANGE`).
    pub fn set_speed(&mut self, speed: u32) {
        self.info.speed = speed;
        self.root.device_changed(&self.info);
    }

    /// Bring the qdiscs' timers up to `now` (before a command reads or
    /// changes them).
    pub fn settle(&mut self, now: crate::time::Time) {
        self.root.qdisc.settle(now);
    }

    /// Change the transmit queue length; a default root follows it.
    pub fn set_txqueuelen(&mut self, len: u32) {
        self.info.txqueuelen = len;
        if self.root.handle.is_unspec() {
            self.root = default_root(&self.info, &self.kind, self.activated);
        }
    }

    /// Find a qdisc by handle in the egress tree or ingress (`qdisc_lookup`).
    /// Handle 0 names only a default root: the kernel's hash holds no
    /// handle-0 qdiscs (default leaves are invisible to lookups).
    pub fn find(&self, handle: Handle) -> Option<&QdiscNode> {
        if handle.is_unspec() {
            return self.root.handle.is_unspec().then_some(&self.root);
        }
        if let Some(q) = self.root.find(handle) {
            return Some(q);
        }
        self.ingress.as_ref().filter(|q| q.handle == handle)
    }

    fn find_mut(&mut self, handle: Handle) -> Option<&mut QdiscNode> {
        if handle.is_unspec() {
            return self.root.handle.is_unspec().then_some(&mut self.root);
        }
        if self.root.find(handle).is_some() {
            return self.root.find_mut(handle);
        }
        self.ingress.as_mut().filter(|q| q.handle == handle)
    }

    /// Every qdisc in the order `tc qdisc show` lists them: the root, then
    /// the others in the order of the kernel's per-device hash table (16
    /// buckets by `hash_32(handle, 4)`, newest first within a bucket), then
    /// ingress.
    pub fn qdiscs(&self) -> Vec<&QdiscNode> {
        let mut v = self.root.walk();
        let bucket = |h: Handle| (h.0.wrapping_mul(0x61C8_8647)) >> 28;
        v[1..].sort_by_key(|q| (bucket(q.handle), std::cmp::Reverse(q.seq)));
        v.extend(self.ingress.as_ref());
        v
    }

    /// The handle of the qdisc currently attached at `parent`/`classid`, and
    /// whether a qdisc exists there that the user created (handle != 0).
    fn attached(&self, clid: Handle) -> TcResult<Option<Handle>> {
        if clid.is_root() {
            return Ok(Some(self.root.handle));
        }
        if clid == Handle::INGRESS {
            return Ok(self.ingress.as_ref().map(|q| q.handle));
        }
        Ok(self
            .qdisc_leaf(clid, "Failed to find specified qdisc")?
            .map(|l| l.handle))
    }

    /// `qdisc_lookup` of the class's qdisc then `qdisc_leaf`: the qdisc
    /// attached to class `clid` (`None` if it has none); `missing` is the
    /// caller's message for a qdisc that does not exist.
    fn qdisc_leaf(&self, clid: Handle, missing: &str) -> TcResult<Option<&QdiscNode>> {
        // qdisc_lookup finds nothing for handle 0 (a default qdisc's).
        let p = Some(clid.qdisc())
            .filter(|h| !h.is_unspec())
            .and_then(|h| self.find(h))
            .ok_or_else(|| err(Errno::ENOENT, missing))?;
        let cls = p
            .qdisc
            .classes_ref()
            .ok_or_else(|| err(Errno::EOPNOTSUPP, "Parent qdisc is not classful"))?;
        if !cls.contains(clid) {
            return Err(err(Errno::ENOENT, "Specified class not found"));
        }
        Ok(cls.leaf(clid))
    }

    /// `tc qdisc add|replace|change|link dev D parent P [handle H] KIND OPTS`.
    ///
    /// `alloc` hands out automatic handles (`8001:`, ...) when none is given.
    pub fn modify_qdisc(
        &mut self,
        req: &QdiscRequest,
        flags: NlFlags,
        alloc: &mut dyn FnMut(&Device) -> Option<Handle>,
    ) -> TcResult<Option<String>> {
        let (parent, handle) = (req.parent, req.handle);
        let kind_differs = |q: &QdiscNode| req.kind.as_deref().is_some_and(|k| k != q.kind());
        let target: Option<Handle>; // an existing qdisc to change
        if !parent.is_unspec() {
            let existing = self.attached(parent)?.filter(|h| !h.is_unspec());
            let mut create = false;
            let mut change_target = existing;
            if existing.is_none() || handle.is_unspec() || existing != Some(handle) {
                if !handle.is_unspec() {
                    if existing.is_some() && !flags.replace {
                        return Err(err(Errno::EEXIST, "NLM_F_REPLACE needed to override"));
                    }
                    if handle.minor() != 0 {
                        return Err(err(Errno::EINVAL, "Invalid minor handle"));
                    }
                    match self.find(handle) {
                        None => create = true,
                        Some(q) => {
                            if q.parent != parent {
                                return Err(err(
                                    Errno::EINVAL,
                                    "Cannot move an existing qdisc to a different parent",
                                ));
                            }
                            if flags.excl {
                                return Err(err(
                                    Errno::EEXIST,
                                    "Exclusivity flag on, cannot override",
                                ));
                            }
                            if kind_differs(q) {
                                return Err(err(
                                    Errno::EINVAL,
                                    "Invalid qdisc name: must match existing qdisc",
                                ));
                            }
                            if matches!(q.kind(), "ingress" | "clsact") {
                                return Err(err(
                                    Errno::EINVAL,
                                    "Cannot regraft ingress or clsact Qdiscs",
                                ));
                            }
                            if parent == Handle::INGRESS {
                                return Err(err(Errno::EINVAL, "Ingress cannot graft directly"));
                            }
                            // Moving an existing qdisc to another parent.
                            return Err(err(Errno::EINVAL, "Qdisc parent/child loop detected"));
                        }
                    }
                } else {
                    match existing {
                        None => create = true,
                        Some(h) => {
                            let differs = self.find(h).is_some_and(kind_differs);
                            if flags.create && flags.replace && (flags.excl || differs) {
                                create = true;
                            }
                            change_target = Some(h);
                        }
                    }
                }
            }
            if create {
                return self.create_and_graft(req, flags, alloc);
            }
            target = change_target;
        } else {
            if handle.is_unspec() {
                return Err(err(Errno::EINVAL, "Handle cannot be zero"));
            }
            target = self.find(handle).map(|q| q.handle);
        }
        let h = target.ok_or_else(|| err(Errno::ENOENT, "Specified qdisc not found"))?;
        if flags.excl {
            return Err(err(Errno::EEXIST, "Exclusivity flag on, cannot modify"));
        }
        let dev = self.info.clone();
        let q = self
            .find(h)
            .ok_or_else(|| err(Errno::ENOENT, "Specified qdisc not found"))?;
        if kind_differs(q) {
            return Err(err(
                Errno::EINVAL,
                "Invalid qdisc name: must match existing qdisc",
            ));
        }
        if let Some(QdiscOpts::Netem(o)) = &req.opts {
            crate::qdisc::netem::check_netem_in_tree(&self.root, Some(h), o.duplicate)?;
        }
        let stab = req.stab.map(SizeTable::new).transpose()?;
        let q = self
            .find_mut(h)
            .ok_or_else(|| err(Errno::ENOENT, "Specified qdisc not found"))?;
        let mut warning = None;
        if let Some(opts) = &req.opts {
            q.qdisc.change(opts, &dev)?;
            q.qdisc.installed(req.now);
            // The qdisc sees the size table it had (qdisc_change sets the
            // new one after the change).
            warning = crate::qdisc::taprio::stab_warning(opts, q.stab.is_some());
        }
        q.stab = stab;
        if let Some(e) = req.estimator {
            let stats = q.stats();
            q.estimator = Some(e.replacing(q.estimator.as_ref(), req.now, &stats));
        }
        Ok(warning)
    }

    fn create_and_graft(
        &mut self,
        req: &QdiscRequest,
        flags: NlFlags,
        alloc: &mut dyn FnMut(&Device) -> Option<Handle>,
    ) -> TcResult<Option<String>> {
        if !flags.create {
            return Err(err(
                Errno::ENOENT,
                "Qdisc not found. To create specify NLM_F_CREATE flag",
            ));
        }
        let (parent, handle) = (req.parent, req.handle);
        let Some(opts) = &req.opts else {
            // A kind we have whose init needs options (tbf) refuses a bare
            // request with EINVAL; a kind we lack is unknown.
            return Err(match req.kind.as_deref() {
                Some(k) if crate::qdisc::KINDS.contains(&k) => TcError::errno(Errno::EINVAL),
                _ => err(Errno::ENOENT, "Specified qdisc kind is unknown"),
            });
        };
        let is_ingress = matches!(opts, QdiscOpts::Ingress(_) | QdiscOpts::Clsact(_));
        if is_ingress != (parent == Handle::INGRESS) {
            // qdisc_create: only a kind with TCQ_F_INGRESS may take the
            // ingress handle (Linux 6.4 on; before, any kind was let in).
            return Err(if is_ingress {
                err(Errno::EOPNOTSUPP, "Can only be attached as root qdisc")
            } else {
                err(
                    Errno::EINVAL,
                    "Specified parent ID is reserved for ingress and clsact Qdiscs",
                )
            });
        }
        if matches!(opts, QdiscOpts::Noop)
            || (matches!(opts, QdiscOpts::Noqueue) && !parent.is_root())
        {
            return Err(if matches!(opts, QdiscOpts::Noqueue) {
                err(Errno::EINVAL, "Cannot assign noqueue to a class")
            } else {
                err(Errno::ENOENT, "Specified qdisc kind is unknown")
            });
        }
        let handle = if is_ingress {
            Handle::new(0xffff, 0)
        } else if handle.is_unspec() {
            alloc(self).ok_or_else(|| {
                err(
                    Errno::ENOSPC,
                    "Maximum number of qdisc handles was exceeded",
                )
            })?
        } else {
            handle
        };
        crate::qdisc::check_block_sharing(
            opts,
            req.ingress_block.is_some(),
            req.egress_block.is_some(),
        )?;
        if let QdiscOpts::Mq | QdiscOpts::Mqprio(_) = opts {
            crate::qdisc::mq::check_attach(parent, &self.info)?;
        }
        if let QdiscOpts::Taprio(_) = opts {
            crate::qdisc::taprio::check_attach(parent)?;
        }
        if let QdiscOpts::Netem(o) = opts {
            crate::qdisc::netem::check_netem_in_tree(&self.root, None, o.duplicate)?;
        }
        let stab = req.stab.map(SizeTable::new).transpose()?;
        let warning = crate::qdisc::taprio::stab_warning(opts, stab.is_some());
        let mut node = QdiscNode::create(handle, parent, opts, &self.info)?;
        node.qdisc.installed(req.now);
        node.qdisc
            .bind_shared_blocks(req.ingress_block.clone(), req.egress_block.clone());
        node.estimator = req
            .estimator
            .map(|e| e.replacing(None, req.now, &Default::default()));
        node.stab = stab;
        self.created += 1;
        node.seq = self.created;
        if parent == Handle::INGRESS {
            self.ingress = Some(node);
            self.ingress_queue = true;
        } else if parent.is_root() {
            self.root = node;
        } else {
            let dev = self.info.clone();
            let p = self
                .find_mut(parent.qdisc())
                .ok_or_else(|| err(Errno::ENOENT, "Failed to find specified qdisc"))?;
            let cls = p
                .qdisc
                .classes()
                .ok_or_else(|| err(Errno::EOPNOTSUPP, "Parent qdisc is not classful"))?;
            cls.graft(parent, Some(node), &dev)?;
            self.apply_purged(parent.qdisc());
        }
        Ok(warning)
    }

    /// `tc qdisc del dev D parent P [handle H] [KIND]`.
    pub fn delete_qdisc(
        &mut self,
        parent: Handle,
        handle: Handle,
        kind: Option<&str>,
    ) -> TcResult<()> {
        if parent.is_unspec() {
            let q = self
                .find(handle)
                .ok_or_else(|| err(Errno::ENOENT, "Failed to find qdisc with specified handle"))?;
            if kind.is_some_and(|k| k != q.kind()) {
                return Err(err(
                    Errno::EINVAL,
                    "Invalid qdisc name: must match existing qdisc",
                ));
            }
            return Err(err(Errno::EINVAL, "Classid cannot be zero"));
        }
        let (qh, qkind) = if parent.is_root() {
            (self.root.handle, self.root.kind())
        } else if parent.major() == 0xffff {
            match &self.ingress {
                Some(q) => (q.handle, q.kind()),
                None if self.ingress_queue => (Handle::UNSPEC, "noop"),
                None => {
                    return Err(err(
                        Errno::ENOENT,
                        "Cannot find specified qdisc on specified device",
                    ))
                }
            }
        } else {
            match self.qdisc_leaf(parent, "Failed to find qdisc with specified classid")? {
                Some(l) => (l.handle, l.kind()),
                None => {
                    return Err(err(
                        Errno::ENOENT,
                        "Cannot find specified qdisc on specified device",
                    ))
                }
            }
        };
        if !handle.is_unspec() && qh != handle {
            return Err(err(Errno::EINVAL, "Invalid handle"));
        }
        if kind.is_some_and(|k| k != qkind) {
            return Err(err(
                Errno::EINVAL,
                "Invalid qdisc name: must match existing qdisc",
            ));
        }
        if qh.is_unspec() {
            return Err(err(
                Errno::ENOENT,
                "Cannot delete qdisc with handle of zero",
            ));
        }
        if parent.is_root() {
            self.root = default_root(&self.info, &self.kind, self.activated);
        } else if parent.major() == 0xffff {
            self.ingress = None;
        } else {
            let dev = self.info.clone();
            if let Some(cls) = self
                .find_mut(parent.qdisc())
                .and_then(|p| p.qdisc.classes())
            {
                cls.graft(parent, None, &dev)?;
                self.apply_purged(parent.qdisc());
            }
        }
        Ok(())
    }

    /// Run a received packet through the ingress (or clsact) qdisc's filters
    /// (`sch_handle_ingress`): `None` when a filter dropped or took it.
    pub fn receive(
        &mut self,
        pkt: crate::packet::Packet,
        now: crate::time::Time,
    ) -> Option<crate::packet::Packet> {
        self.receive_verdict(pkt, now).ok()
    }

    /// [`Device::receive`], saying why a packet did not pass: dropped (a
    /// policer, `gact drop`) or [`DropReason::Stolen`] (an action took it:
    /// a mirred redirect, which is not a loss).
    pub fn receive_verdict(
        &mut self,
        pkt: crate::packet::Packet,
        now: crate::time::Time,
    ) -> Result<crate::packet::Packet, DropReason> {
        let Some(ing) = self.ingress.as_mut() else {
            return Ok(pkt);
        };
        let mut cx = crate::qdisc::Cx::new(now);
        ing.enqueue(pkt, &mut cx)?;
        match ing.dequeue(&mut cx) {
            crate::qdisc::Dequeue::Packet(p) => Ok(p),
            _ => Err(DropReason::Stolen),
        }
    }

    /// Run a packet about to be enqueued into the root qdisc through the
    /// clsact qdisc's egress filters (`sch_handle_egress`): the packet to
    /// enqueue, or why not — dropped, or taken by an action (a mirred
    /// redirect, which is not a loss).
    pub fn egress_hook(
        &mut self,
        mut pkt: crate::packet::Packet,
        now: crate::time::Time,
    ) -> Result<crate::packet::Packet, DropReason> {
        use crate::qdisc::ingress::IngressVerdict;
        let Some(ing) = self.ingress.as_mut() else {
            return Ok(pkt);
        };
        match ing.qdisc.egress_hook(&mut pkt, now) {
            None | Some(IngressVerdict::Pass) => Ok(pkt),
            Some(IngressVerdict::Drop) => Err(DropReason::Action),
            Some(IngressVerdict::Consumed | IngressVerdict::Redirect) => Err(DropReason::Stolen),
        }
    }

    /// `tc filter add|change|replace` on the block at `parent`
    /// (`tc_new_tfilter`). `actions` is the namespace's action table;
    /// `dev_exists` answers whether an interface name exists (u32 `indev`).
    pub fn change_filter(
        &mut self,
        parent: Handle,
        msg: &crate::cls::FilterMsg,
        cmd: crate::cls::FilterCmd,
        actions: &mut crate::act::ActionTable,
        dev_exists: &dyn Fn(&str) -> bool,
        now: crate::time::Time,
    ) -> TcResult<()> {
        let (q, parent) = self.block_owner(parent)?;
        let Device {
            root,
            ingress,
            cls,
            info,
            ..
        } = self;
        cls.seed = info.seed;
        let node = match root.find_mut(q) {
            Some(n) => n,
            None => ingress
                .as_mut()
                .filter(|i| i.handle == q)
                .ok_or_else(|| err(Errno::EINVAL, "Parent Qdisc doesn't exists"))?,
        };
        refuse_shared(node, parent)?;
        let block = node
            .qdisc
            .block_mut(parent)
            .ok_or_else(|| TcError::errno(Errno::EINVAL))?;
        let mut env = crate::cls::ClsEnv {
            actions,
            shared: cls,
            qdisc: q,
            dev_exists,
            now,
        };
        block.change_filter(msg, cmd, &mut env)?;
        block.classid = parent;
        Ok(())
    }

    /// The filter block for `tc filter ... parent P` (`__tcf_qdisc_find`,
    /// `__tcf_qdisc_cl_find`, `__tcf_block_find`): parent 0 means the root
    /// qdisc; the qdisc must be classful (or ingress/clsact) and a class
    /// named by a minor must exist.
    pub fn block_mut(&mut self, parent: Handle) -> TcResult<&mut crate::cls::Block> {
        let (q, parent) = self.block_owner(parent)?;
        let node = self
            .find_mut(q)
            .ok_or_else(|| err(Errno::EINVAL, "Parent Qdisc doesn't exists"))?;
        refuse_shared(node, parent)?;
        node.qdisc
            .block_mut(parent)
            .ok_or_else(|| TcError::errno(Errno::EINVAL))
    }

    /// The filter block, read-only (`tc filter show`).
    pub fn block(&self, parent: Handle) -> TcResult<&crate::cls::Block> {
        let (q, parent) = self.block_owner(parent)?;
        let node = self
            .find(q)
            .ok_or_else(|| err(Errno::EINVAL, "Parent Qdisc doesn't exists"))?;
        refuse_shared(node, parent)?;
        node.qdisc
            .block(parent)
            .ok_or_else(|| TcError::errno(Errno::EINVAL))
    }

    /// The shared block the filters at `parent` are in, if they are
    /// (`tc filter show dev D ingress` then dumps it as `block N`).
    pub fn shared_block(
        &self,
        parent: Handle,
    ) -> TcResult<Option<crate::cls::shared::SharedBlockRef>> {
        let (q, parent) = self.block_owner(parent)?;
        Ok(self.find(q).and_then(|n| n.qdisc.shared_block(parent)))
    }

    /// The qdisc holding the block for `parent`, and `parent` completed.
    fn block_owner(&self, parent: Handle) -> TcResult<(Handle, Handle)> {
        let (q, parent) = if parent.is_unspec() {
            (self.root.handle, self.root.handle)
        } else {
            (parent.qdisc(), parent)
        };
        let node = self
            .find(q)
            .ok_or_else(|| err(Errno::EINVAL, "Parent Qdisc doesn't exists"))?;
        let is_ingress = matches!(node.kind(), "ingress" | "clsact");
        let Some(cls) = node.qdisc.classes_ref() else {
            if is_ingress {
                return Ok((q, parent));
            }
            return Err(err(Errno::EINVAL, "Qdisc not classful"));
        };
        if parent.minor() != 0 && !cls.contains(parent) {
            return Err(err(Errno::ENOENT, "Specified class doesn't exist"));
        }
        Ok((q, parent))
    }

    /// Give class `classid` a rate estimator at `now`, or forget its
    /// estimator (`None`); nothing when its qdisc is gone.
    pub fn set_class_estimator(
        &mut self,
        classid: Handle,
        e: Option<crate::stats::RateEstimator>,
        now: crate::time::Time,
    ) {
        if let Some(node) = self.find_mut(classid.qdisc()) {
            node.set_class_estimator(classid, e, now);
        }
    }

    /// `tc class add|change|replace dev D parent P classid C KIND OPTS`
    /// (`tc_ctl_tclass`). Success may carry the kernel's warning.
    pub fn modify_class(
        &mut self,
        parent: Handle,
        classid: Handle,
        opts: Option<&crate::qdisc::ClassOpts>,
        flags: NlFlags,
    ) -> TcResult<Option<String>> {
        let (q, parent, clid) = self.resolve_class(parent, classid)?;
        let dev = self.info.clone();
        let node = self
            .find_mut(q)
            .ok_or_else(|| TcError::errno(Errno::ENOENT))?;
        let cls = node
            .qdisc
            .classes()
            .ok_or_else(|| TcError::errno(Errno::EINVAL))?;
        let exists = !clid.is_unspec() && cls.contains(clid);
        if !exists && !flags.create {
            return Err(TcError::errno(Errno::ENOENT));
        }
        if exists && flags.excl {
            return Err(TcError::errno(Errno::EEXIST));
        }
        // Kernels since 6.15 refuse a class id of TC_H_ROOT (tc-testing drr.json 4009).
        if clid == Handle::ROOT {
            return Err(TcError::inval(
                "Cannot create traffic class with classid TC_H_ROOT",
            ));
        }
        cls.change_class(clid, parent, opts, &dev)?;
        let warning = node.qdisc.take_warning();
        self.apply_purged(q);
        Ok(warning)
    }

    /// `tc class del dev D [parent P] classid C`.
    pub fn delete_class(&mut self, parent: Handle, classid: Handle) -> TcResult<()> {
        let (q, _parent, clid) = self.resolve_class(parent, classid)?;
        let node = self
            .find_mut(q)
            .ok_or_else(|| TcError::errno(Errno::ENOENT))?;
        let cls = node
            .qdisc
            .classes()
            .ok_or_else(|| TcError::errno(Errno::EINVAL))?;
        if clid.is_unspec() || !cls.contains(clid) {
            return Err(TcError::errno(Errno::ENOENT));
        }
        cls.delete_class(clid)?;
        self.apply_purged(q);
        Ok(())
    }

    /// Take the packets a class operation on qdisc `q` purged off the
    /// backlog of `q` and of every ancestor, counting them as drops there
    /// (`qdisc_tree_reduce_backlog`).
    fn apply_purged(&mut self, q: Handle) {
        let Some(node) = self.find_mut(q) else { return };
        let (pkts, bytes) = node
            .qdisc
            .classes()
            .map(|c| c.take_purged())
            .unwrap_or((0, 0));
        if pkts == 0 && bytes == 0 {
            return;
        }
        fn walk(n: &mut QdiscNode, q: Handle, pkts: u64, bytes: u64) -> bool {
            let found = n.handle == q
                || n.qdisc
                    .classes()
                    .is_some_and(|c| c.leaves().into_iter().any(|l| walk(l, q, pkts, bytes)));
            if found {
                n.stats.qlen = n.stats.qlen.saturating_sub(pkts as u32);
                n.stats.backlog = n.stats.backlog.saturating_sub(bytes);
                n.stats.drops += pkts;
            }
            found
        }
        walk(&mut self.root, q, pkts, bytes);
    }

    /// Step 1 of `tc_ctl_tclass`: the qdisc, the full parent id and the full class id.
    fn resolve_class(&self, parent: Handle, classid: Handle) -> TcResult<(Handle, Handle, Handle)> {
        let mut qid = classid.qdisc();
        let mut portid = parent;
        if !parent.is_root() {
            let qid1 = parent.qdisc();
            if !qid.is_unspec() && !qid1.is_unspec() {
                if qid != qid1 {
                    return Err(TcError::errno(Errno::EINVAL));
                }
            } else if !qid1.is_unspec() {
                qid = qid1;
            } else if qid.is_unspec() {
                qid = self.root.handle;
            }
            if !portid.is_unspec() {
                portid = Handle(qid.0 | parent.minor() as u32);
            }
        } else if qid.is_unspec() {
            qid = self.root.handle;
        }
        if self.find(qid).is_none() {
            return Err(TcError::errno(Errno::ENOENT));
        }
        let clid = if classid.is_unspec() {
            if portid.is_root() {
                qid
            } else {
                Handle::UNSPEC
            }
        } else {
            Handle(qid.0 | classid.minor() as u32)
        };
        Ok((qid, portid, clid))
    }
}

/// The qdisc the kernel attaches when the user has attached none.
pub fn default_root(info: &DevInfo, kind: &DevKind, activated: bool) -> QdiscNode {
    let opts = if !activated {
        QdiscOpts::Noop
    } else if kind.no_queue() {
        QdiscOpts::Noqueue
    } else if info.num_tx_queues > 1 {
        // attach_default_qdiscs: mq whatever the queue length.
        QdiscOpts::Mq
    } else if info.txqueuelen == 0 {
        QdiscOpts::Noqueue
    } else {
        QdiscOpts::PfifoFast(Default::default())
    };
    QdiscNode::create(Handle::UNSPEC, Handle::ROOT, &opts, info).unwrap_or_else(|_| {
        QdiscNode::new(
            Handle::UNSPEC,
            Handle::ROOT,
            Box::new(crate::qdisc::noqueue::Noqueue::new(true)),
        )
    })
}
