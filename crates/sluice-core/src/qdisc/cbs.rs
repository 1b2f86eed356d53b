//! cbs: the credit-based shaper of IEEE 802.1Q (802.1Qav, clause 8.6.8.2),
//! which reserves a share of a port for one traffic class.
//!
//! Modelled on net/sched/sch_cbs.c (software mode), with the options of
//! iproute2's tc/q_cbs.c. The qdisc keeps a credit in bytes. While packets
//! wait and the credit is negative it grows at `idleslope` (kbit/s, kept
//! as bytes/s), up to `hicredit`; a packet may leave only when the credit
//! is zero or more, and its transmission spends credit at `sendslope`
//! (negative: idleslope less the port rate) for the time it takes at the
//! port's rate — `len * sendslope / port_rate` — down to at least
//! `locredit`. So over time the class sends at `idleslope`, in bursts
//! bounded by the credits. An empty queue with positive credit forgets it
//! when the next packet arrives. With every parameter 0 (`tc qdisc add ...
//! cbs`), nothing is ever spent and cbs is its fifo.
//!
//! The kernel does its arithmetic only at dequeue and enqueue, in integer
//! bytes with truncating division; the credit is recomputed from the time
//! since the last dequeue only while it is negative. A dequeue that finds
//! the credit still negative says when it will reach zero (the watchdog):
//! `-credit * 10^9 / idleslope` ns later. Because a frame's credit is spent
//! when it is dequeued and idleslope is earned from that moment on, through
//! the frame's own transmission, a class with the port to itself gets more
//! than idleslope (25 Mbit/s for 20 reserved on a 100 Mbit/s port); sluice
//! does the kernel's arithmetic, not the standard's curve.
//!
//! The port rate is the device's link speed as ethtool reports it (Mbit/s
//! × 125 000 bytes/s), read when the options are set and whenever the link
//! changes (`cbs_dev_notifier`); a device without
//! one (dummy, ifb, loopback, a TUN device, which reports 10) counts as 10
//! Mbit/s, a veth pair as 10 Gbit/s, a simulated interface as its link's
//! rate ([`DevInfo::speed`]).
//!
//! Structure: one class `major:1`, whose qdisc is at first a pfifo of the
//! device's queue length with handle 0 that `tc qdisc show` lists (`qdisc
//! pfifo 0: parent major:`); `tc qdisc add ... parent major:1` replaces it,
//! deleting that one leaves a fresh pfifo no dump shows. `change` replaces
//! every parameter and keeps the credit and the queue. `offload 1` asks the
//! device to do it, which sluice's devices cannot (EOPNOTSUPP, "Specified
//! device does not support cbs offload").
//!
//! Deviations: with `idleslope 0` and a negative credit the kernel arms its
//! watchdog at an overflowed time (it fires at once, again and again);
//! sluice waits for nothing instead (the class never sends again, as in the
//! kernel). The credit arithmetic wraps as the kernel's 64-bit products do.

use super::fifo::{Fifo, FifoKind, FifoOpts};
use super::noqueue::{child_leaves, child_leaves_ref};
use super::{
    wrong_kind, ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, DropReason, Qdisc, QdiscNode,
    QdiscOpts, XStats,
};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::Stats;
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// `BYTES_PER_KBIT`: the slopes are given in kbit/s.
const BYTES_PER_KBIT: i64 = 1000 / 8;

/// The port rate of a device that reports no link speed (`SPEED_10`).
const SPEED_10: u32 = 10;

/// `struct tc_cbs_qopt` (`TCA_CBS_PARMS`), as tc sends it and the kernel
/// dumps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CbsOpts {
    /// `offload`: hand the shaping to the device.
    pub offload: u8,
    /// The most credit that accumulates, in bytes.
    pub hicredit: i32,
    /// The least credit, in bytes.
    pub locredit: i32,
    /// Credit per second while waiting, in kbit/s.
    pub idleslope: i32,
    /// Credit per second while sending, in kbit/s (negative).
    pub sendslope: i32,
}

/// The credit-based shaper.
#[derive(Debug)]
pub struct Cbs {
    opts: CbsOpts,
    /// Bytes per second of the port.
    port_rate: i64,
    /// The credit, in bytes.
    credits: i64,
    /// When the credit was last brought up to date (ns).
    last: i64,
    /// The qdisc of class `major:1`.
    child: QdiscNode,
    /// Our handle's major, once known.
    major: u16,
}

/// `qdisc_create_dflt(pfifo)`: a pfifo of the device's queue length, with
/// handle 0 under the cbs qdisc itself.
fn default_child(major: u16, dev: &DevInfo) -> TcResult<QdiscNode> {
    let fifo = Fifo::new(FifoKind::Packets, &FifoOpts { limit: None }, dev)?;
    Ok(QdiscNode::new(
        Handle::UNSPEC,
        Handle::new(major, 0),
        Box::new(fifo),
    ))
}

/// `cbs_set_port_rate`: the link speed in bytes/s (10 Mbit/s when the
/// device reports none).
fn port_rate(dev: &DevInfo) -> i64 {
    let speed = if dev.speed == 0 { SPEED_10 } else { dev.speed };
    speed as i64 * 1000 * BYTES_PER_KBIT
}

/// `timediff_to_credits` and friends: a 64-bit product, truncating division.
fn scaled(a: i64, b: i64, div: i64) -> i64 {
    if div == 0 {
        return i64::MAX;
    }
    a.wrapping_mul(b) / div
}

impl Cbs {
    /// `cbs_init`: the default child (listed by `tc qdisc show`), then the
    /// options as `cbs_change` takes them.
    pub fn new(opts: &CbsOpts, dev: &DevInfo) -> TcResult<Self> {
        let mut cbs = Cbs {
            opts: CbsOpts::default(),
            port_rate: 0,
            credits: 0,
            last: 0,
            child: default_child(0, dev)?.hashed_visible(),
            major: 0,
        };
        cbs.apply(opts, dev)?;
        Ok(cbs)
    }

    /// `cbs_change`: refuse offloading, read the port rate, take every
    /// parameter (the credit stays).
    fn apply(&mut self, o: &CbsOpts, dev: &DevInfo) -> TcResult<()> {
        if o.offload != 0 {
            return Err(TcError::msg(
                Errno::EOPNOTSUPP,
                "Specified device does not support cbs offload",
            ));
        }
        self.port_rate = port_rate(dev);
        self.opts = *o;
        Ok(())
    }

    fn idleslope(&self) -> i64 {
        self.opts.idleslope as i64 * BYTES_PER_KBIT
    }

    fn sendslope(&self) -> i64 {
        self.opts.sendslope as i64 * BYTES_PER_KBIT
    }

    fn class_id(&self) -> Handle {
        Handle::new(self.major, 1)
    }

    /// The credit (bytes), for tests.
    pub fn credits(&self) -> i64 {
        self.credits
    }
}

fn ns(t: Time) -> i64 {
    t.0 as i64
}

impl Qdisc for Cbs {
    fn set_handle(&mut self, handle: Handle) {
        self.major = handle.major();
        if self.child.handle.is_unspec() {
            self.child.parent = Handle::new(self.major, 0);
        }
    }

    /// `cbs_enqueue_soft`: an idle qdisc with positive credit forgets it.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        if self.child.stats.qlen == 0 && self.credits > 0 {
            self.credits = 0;
            self.last = ns(cx.now);
        }
        self.child.offer(pkt, cx)
    }

    /// `cbs_dequeue_soft`.
    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        let now = ns(cx.now);
        if self.credits < 0 {
            let idle = self.idleslope();
            let earned = scaled(now.wrapping_sub(self.last), idle, 1_000_000_000);
            self.credits = self
                .credits
                .wrapping_add(earned)
                .min(self.opts.hicredit as i64);
            if self.credits < 0 {
                self.last = now;
                if idle == 0 {
                    return Dequeue::Empty;
                }
                let delay = scaled(-self.credits, 1_000_000_000, idle).max(0);
                return Dequeue::Wait(Time(cx.now.0.saturating_add(delay as u64)));
            }
        }
        let d = self.child.dequeue(cx);
        if let Dequeue::Packet(p) = &d {
            let spent = scaled(p.len as i64, self.sendslope(), self.port_rate);
            self.credits = self
                .credits
                .wrapping_add(spent)
                .max(self.opts.locredit as i64);
            self.last = now;
        }
        d
    }

    fn reset(&mut self) {
        self.child.reset();
    }

    /// `cbs_dev_notifier`: the link changed; read the port rate again.
    fn device_changed(&mut self, dev: &DevInfo) {
        self.port_rate = port_rate(dev);
    }

    fn change(&mut self, opts: &QdiscOpts, dev: &DevInfo) -> TcResult<()> {
        let QdiscOpts::Cbs(o) = opts else {
            return Err(wrong_kind("cbs", opts));
        };
        self.apply(o, dev)
    }

    /// `cbs_dump`: the slopes back in kbit/s.
    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Cbs(CbsOpts {
            idleslope: (self.idleslope() / BYTES_PER_KBIT) as i32,
            sendslope: (self.sendslope() / BYTES_PER_KBIT) as i32,
            ..self.opts
        })
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for Cbs {
    /// cbs has no class `change`: `EOPNOTSUPP`.
    fn change_class(
        &mut self,
        _classid: Handle,
        _parent: Handle,
        _opts: Option<&ClassOpts>,
        _dev: &DevInfo,
    ) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// cbs has no class `delete`: `EOPNOTSUPP`.
    fn delete_class(&mut self, _classid: Handle) -> TcResult<()> {
        Err(TcError::errno(Errno::EOPNOTSUPP))
    }

    /// The one class `major:1` (`cbs_dump_class`; no class statistics).
    fn list(&self) -> Vec<ClassInfo> {
        let leaf = self.child.handle;
        vec![ClassInfo {
            classid: self.class_id(),
            parent: Handle::new(self.major, 0),
            leaf: (!leaf.is_unspec()).then_some(leaf),
            opts: ClassOpts::Plain,
            stats: Stats::default(),
            xstats: XStats::Absent,
        }]
    }

    /// `cbs_find` answers every class id with the one class.
    fn contains(&self, _classid: Handle) -> bool {
        true
    }

    fn leaf(&self, _classid: Handle) -> Option<&QdiscNode> {
        Some(&self.child)
    }

    /// `cbs_graft`: `None` puts a fresh pfifo in the class (one no dump
    /// lists). The old qdisc goes back to the caller with its queue.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        if classid.major() != 0 {
            self.major = classid.major();
        }
        let new = match new {
            Some(n) => n,
            None => default_child(self.major, dev)?,
        };
        Ok(Some(std::mem::replace(&mut self.child, new)))
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        child_leaves(&mut self.child)
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        child_leaves_ref(&self.child)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::ETH_P_IP;

    /// A port of `speed` Mbit/s.
    fn dev(speed: u32) -> DevInfo {
        DevInfo {
            speed,
            ..DevInfo::default()
        }
    }

    fn pkt(len: u32) -> Packet {
        Packet::new(vec![0x45; 20], len, ETH_P_IP)
    }

    /// Serve the qdisc as a port of `rate` bytes/s would, from time 0 to
    /// `until` (ns), keeping it backlogged with `len`-byte packets; the
    /// bytes sent and each departure time.
    fn serve(q: &mut Cbs, rate: u64, len: u32, until: u64) -> (u64, Vec<u64>) {
        let mut cx = Cx::new(Time(0));
        let mut sent = 0;
        let mut times = vec![];
        for _ in 0..1000 {
            q.enqueue(pkt(len), &mut cx).unwrap();
        }
        while cx.now.0 < until {
            match q.dequeue(&mut cx) {
                Dequeue::Packet(p) => {
                    times.push(cx.now.0);
                    sent += p.len as u64;
                    cx.now = Time(cx.now.0 + p.len as u64 * 1_000_000_000 / rate);
                    q.enqueue(pkt(len), &mut cx).unwrap();
                }
                Dequeue::Wait(t) => cx.now = t,
                Dequeue::Empty => break,
            }
        }
        (sent, times)
    }

    /// A 100 Mbit/s port reserving 20 Mbit/s (sendslope = idleslope - port
    /// rate, 802.1Q 8.6.8.2). The kernel's software mode spends a frame's
    /// credit when it dequeues it, 1500 * 80/100 = 1200 bytes, and earns it
    /// back at 2.5 bytes/us from that moment: the next frame leaves 480 us
    /// later, 120 of them on the wire. So a class with the port to itself
    /// gets 25 Mbit/s, not the 20 of the standard's credit curve, which
    /// earns nothing during a transmission — the kernel's arithmetic,
    /// reproduced.
    #[test]
    fn a_backlogged_class_gets_what_the_kernels_credit_arithmetic_gives() {
        let o = CbsOpts {
            idleslope: 20_000,
            sendslope: -80_000,
            hicredit: 300,
            locredit: -1200,
            offload: 0,
        };
        let mut q = Cbs::new(&o, &dev(100)).unwrap();
        let (sent, times) = serve(&mut q, 12_500_000, 1500, 1_000_000_000);
        let mbit = sent as f64 * 8.0 / 1e6;
        assert!((24.9..=25.1).contains(&mbit), "{mbit}");
        let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.iter().all(|g| *g == 480_000), "{:?}", &gaps[..10]);
    }

    /// The port rate is the device's speed: the same slopes on a port the
    /// qdisc believes to be 10 Mbit/s (no speed reported) spend 10 times
    /// the credit per frame.
    #[test]
    fn the_port_rate_comes_from_the_devices_speed() {
        let o = CbsOpts {
            idleslope: 20_000,
            sendslope: -80_000,
            hicredit: 0,
            locredit: -100_000,
            offload: 0,
        };
        let mut q = Cbs::new(&o, &dev(0)).unwrap();
        let mut cx = Cx::new(Time(0));
        q.enqueue(pkt(1000), &mut cx).unwrap();
        q.enqueue(pkt(1000), &mut cx).unwrap();
        assert!(matches!(q.dequeue(&mut cx), Dequeue::Packet(_)));
        // 1000 * (-10 MB/s) / 1.25 MB/s = -8000 bytes.
        assert_eq!(q.credits(), -8000);
        // 8000 bytes at 2.5 MB/s: 3.2 ms.
        assert_eq!(q.dequeue(&mut cx), Dequeue::Wait(Time(3_200_000)));
        // The link comes up at 100 Mbit/s (`NETDEV_CHANGE`): a frame now
        // spends 1000 * 10/12.5 = 800 bytes.
        // (The simulator's test shows it reaching a qdisc through its
        // device: `cargo test -p sluice-sim --test scenarios cbs`.)
        let mut q = Cbs::new(&o, &dev(0)).unwrap();
        q.device_changed(&dev(100));
        q.enqueue(pkt(1000), &mut cx).unwrap();
        q.dequeue(&mut cx);
        assert_eq!(q.credits(), -800);
    }

    #[test]
    fn all_zero_is_a_plain_fifo_and_offload_is_refused() {
        let mut q = Cbs::new(&CbsOpts::default(), &dev(10_000)).unwrap();
        let (sent, _) = serve(&mut q, 1_250_000_000, 1500, 1_000_000);
        // At the port's full 10 Gbit/s for 1 ms.
        assert_eq!(sent, 1_251_000);
        let e = Cbs::new(
            &CbsOpts {
                offload: 1,
                ..CbsOpts::default()
            },
            &dev(10_000),
        )
        .unwrap_err();
        assert_eq!(e.errno, Errno::EOPNOTSUPP);
    }

    /// Credit above zero is capped at hicredit and forgotten by an empty
    /// queue; spending stops at locredit.
    #[test]
    fn credits_stay_between_locredit_and_hicredit() {
        let o = CbsOpts {
            idleslope: 1_000,
            sendslope: -9_000,
            hicredit: 100,
            locredit: -500,
            offload: 0,
        };
        let mut q = Cbs::new(&o, &dev(10)).unwrap();
        let mut cx = Cx::new(Time(0));
        q.enqueue(pkt(1500), &mut cx).unwrap();
        q.enqueue(pkt(1500), &mut cx).unwrap();
        q.dequeue(&mut cx);
        // 1500 * -9/10 = -1350, held at -500.
        assert_eq!(q.credits(), -500);
        // A long wait earns far more than 500, kept to 100.
        cx.now = Time(10_000_000_000);
        assert!(matches!(q.dequeue(&mut cx), Dequeue::Packet(_)));
        assert_eq!(q.credits(), -500);
        cx.now = Time(20_000_000_000);
        assert_eq!(q.dequeue(&mut cx), Dequeue::Empty);
        assert_eq!(q.credits(), 100);
        // The next packet finds the queue empty: the credit is forgotten.
        q.enqueue(pkt(100), &mut cx).unwrap();
        assert_eq!(q.credits(), 0);
    }
}
