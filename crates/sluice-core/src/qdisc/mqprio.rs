//! mqprio: mq with traffic classes — a packet's priority picks the range of
//! transmit queues it may use.
//!
//! net/sched/sch_mqprio.c and sch_mqprio_lib.c. Like mq it is the root of a
//! multi-queue device (`EOPNOTSUPP` elsewhere) with a listed default
//! pfifo_fast per queue; what it adds is the device's traffic-class layout:
//! `num_tc` classes, each a run of `count` queues from `offset`, and a map
//! from the sixteen priorities to a class. `netdev_pick_tx` then sends a
//! packet of priority P (`skb->priority`, low four bits) to class
//! `map[P & 15]` and spreads it by flow hash over that class's queues (a
//! class without queues falls back to all of them). mqprio itself never
//! holds a packet.
//!
//! It is created once and never changed (no `change` operation: "Change
//! operation not supported by specified qdisc"). Creation checks, in the
//! kernel's order: at most 16 classes; every map entry names one of them;
//! in software mode (`hw 0`) every class has queues, inside the device's and
//! not overlapping another's (`mqprio_validate_qopt`); `hw` other than 0 asks
//! the driver, and no sluice device has one ("Device does not support
//! hardware offload"); the mode, shaper and rate attributes belong to
//! hardware mode only. So a working mqprio here is always `hw 0`, dcb mode,
//! dcb shaper — which tc 6.1 prints as `mode:dcb`/`shaper:dcb` lines because
//! today's kernels add per-class frame-preemption entries after the options.
//!
//! Its classes: one per traffic class, `major:ffe0 + tc` with parent
//! `root` and the summed counters of its queues, then mq's queue classes
//! `major:1..N`, each under the traffic class whose range holds its queue
//! (`parent none` for a queue in none). A qdisc may be grafted onto a queue
//! class only: a traffic class has no device queue ("No device queue
//! given"). Deleting mqprio gives the device its default root back.
//!
//! Simplified: the kernel keeps the layout in the device, where a later
//! mqprio's failure or replacement can reset it; here it lives with the
//! qdisc. A traffic class's `qlen` is its queues' sum (the kernel adds them
//! to a running total kept in the root).

use super::mq::Mq;
use super::{ClassInfo, ClassOpts, Classful, Cx, Dequeue, DevInfo, Qdisc, QdiscNode, QdiscOpts};
use crate::error::{Errno, TcError, TcResult};
use crate::handle::Handle;
use crate::packet::Packet;
use crate::stats::{DropReason, Stats};
use serde::{Deserialize, Serialize};

/// `TC_QOPT_MAX_QUEUE`: traffic classes and map entries.
pub const MAX_TC: usize = 16;
/// `TC_H_MIN_PRIORITY`: the first traffic class's minor.
const TC_MINOR: u16 = 0xffe0;

/// `struct tc_mqprio_qopt` and the attributes after it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MqprioOpts {
    /// Traffic classes.
    pub num_tc: u8,
    /// Priority (0..15) → traffic class.
    pub prio_tc_map: [u8; MAX_TC],
    /// 0: software; anything else asks the driver to offload.
    pub hw: u8,
    /// Queues of each traffic class.
    pub count: [u16; MAX_TC],
    /// First queue of each traffic class.
    pub offset: [u16; MAX_TC],
    /// `TCA_MQPRIO_MODE` (0 dcb, 1 channel), when sent.
    pub mode: Option<u16>,
    /// `TCA_MQPRIO_SHAPER` (0 dcb, 1 bw_rlimit), when sent.
    pub shaper: Option<u16>,
    /// `TCA_MQPRIO_MIN_RATE64`, bytes/s, when sent.
    pub min_rate: Option<Vec<u64>>,
    /// `TCA_MQPRIO_MAX_RATE64`, bytes/s, when sent.
    pub max_rate: Option<Vec<u64>>,
}

impl Default for MqprioOpts {
    /// What tc sends when given no words.
    fn default() -> Self {
        MqprioOpts {
            num_tc: 8,
            prio_tc_map: [0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 1, 1, 3, 3, 3, 3],
            hw: 1,
            count: [0; MAX_TC],
            offset: [0; MAX_TC],
            mode: None,
            shaper: None,
            min_rate: None,
            max_rate: None,
        }
    }
}

fn einval(msg: impl Into<String>) -> TcError {
    TcError::msg(Errno::EINVAL, msg)
}

/// `mqprio_validate_qopt` (sch_mqprio_lib.c), shared with taprio: at most
/// 16 classes and a map within them, then — when `queues` is given — every
/// class with queues inside the device's `queues`, overlapping no other
/// unless `overlap` allows it.
pub(super) fn validate_layout(o: &MqprioOpts, queues: Option<u32>, overlap: bool) -> TcResult<()> {
    let num_tc = o.num_tc as usize;
    if num_tc > MAX_TC {
        return Err(einval("Number of traffic classes is outside valid range"));
    }
    if o.prio_tc_map.iter().any(|&tc| tc as usize >= num_tc) {
        return Err(einval(
            "Invalid traffic class in priority to traffic class mapping",
        ));
    }
    let Some(queues) = queues else {
        return Ok(());
    };
    for i in 0..num_tc {
        let (count, offset) = (o.count[i] as u32, o.offset[i] as u32);
        if count == 0 {
            return Err(einval(format!("sch_mqprio_lib: No queues for TC {i}")));
        }
        if offset >= queues || offset + count > queues {
            return Err(einval(format!(
                "sch_mqprio_lib: Queues {count}:{offset} for TC {i} exceed the {queues} TX queues available"
            )));
        }
        for j in (i + 1..num_tc).filter(|_| !overlap) {
            let (cj, oj) = (o.count[j] as u32, o.offset[j] as u32);
            if offset.max(oj) < (offset + count).min(oj + cj) {
                return Err(einval(format!(
                    "sch_mqprio_lib: TC {i} queues {count}@{offset} overlap with TC {j} queues {cj}@{oj}"
                )));
            }
        }
    }
    Ok(())
}

/// `mqprio_parse_opt` and `mqprio_parse_nlattr`, on a device
/// [`super::mq::check_attach`] accepted.
fn validate(o: &MqprioOpts, dev: &DevInfo) -> TcResult<()> {
    let hw = o.hw.min(1);
    validate_layout(o, (hw == 0).then_some(dev.num_tx_queues), false)?;
    if hw != 0 {
        // No sluice device has `ndo_setup_tc`.
        return Err(einval("Device does not support hardware offload"));
    }
    let attributes =
        o.mode.is_some() || o.shaper.is_some() || o.min_rate.is_some() || o.max_rate.is_some();
    if attributes {
        return Err(einval(
            "mqprio TCA_OPTIONS can only contain netlink attributes in hardware mode",
        ));
    }
    Ok(())
}

/// The `(offset, count)` of each of `o`'s traffic classes.
pub(super) fn ranges(o: &MqprioOpts) -> Vec<(usize, usize)> {
    (0..o.num_tc as usize)
        .map(|i| (o.offset[i] as usize, o.count[i] as usize))
        .collect()
}

/// The options a dump rebuilds from a device's layout (`mqprio_qopt_reconstruct`).
pub(super) fn layout_opts(map: [u8; MAX_TC], ranges: &[(usize, usize)]) -> MqprioOpts {
    let mut o = MqprioOpts {
        num_tc: ranges.len() as u8,
        prio_tc_map: map,
        hw: 0,
        ..MqprioOpts::default()
    };
    for (i, &(offset, count)) in ranges.iter().enumerate() {
        o.offset[i] = offset as u16;
        o.count[i] = count as u16;
    }
    o
}

/// `netdev_pick_tx`'s range for a packet of `priority` on a device with
/// this layout: its traffic class's queues, or all `n` when the class has
/// none.
pub(super) fn tc_range(
    map: &[u8; MAX_TC],
    ranges: &[(usize, usize)],
    priority: u32,
    n: usize,
) -> (usize, usize) {
    let tc = map[(priority & 15) as usize] as usize;
    ranges
        .get(tc)
        .copied()
        .filter(|&(_, count)| count > 0)
        .unwrap_or((0, n))
}

/// The mqprio qdisc: mq's queues and a traffic-class layout.
#[derive(Debug)]
pub struct Mqprio {
    mq: Mq,
    major: u16,
    num_tc: usize,
    map: [u8; MAX_TC],
    /// `(offset, count)` of each traffic class.
    ranges: Vec<(usize, usize)>,
}

impl Mqprio {
    /// `mqprio_init`.
    pub fn new(o: &MqprioOpts, dev: &DevInfo) -> TcResult<Self> {
        super::mq::check_attach(Handle::ROOT, dev)?;
        validate(o, dev)?;
        Ok(Mqprio {
            mq: Mq::new(dev)?,
            major: 0,
            num_tc: o.num_tc as usize,
            map: o.prio_tc_map,
            ranges: ranges(o),
        })
    }

    /// `netdev_txq_to_tc`: the traffic class whose range holds queue `q`.
    fn tc_of_queue(&self, q: usize) -> Option<usize> {
        if self.num_tc == 0 {
            return Some(0);
        }
        self.ranges
            .iter()
            .position(|&(offset, count)| q >= offset && q - offset < count)
    }

    /// The traffic class of class `classid`, if it is one.
    fn tc_of_class(&self, classid: Handle) -> Option<usize> {
        let t = classid.minor().checked_sub(TC_MINOR)? as usize;
        (t < self.num_tc).then_some(t)
    }
}

impl Qdisc for Mqprio {
    fn set_handle(&mut self, handle: Handle) {
        self.major = handle.major();
        self.mq.set_handle(handle);
    }

    fn enqueue(&mut self, mut pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        let (map, ranges, prio) = (&self.map, &self.ranges, pkt.priority);
        let i = self
            .mq
            .pick_in(&mut pkt, |n| tc_range(map, ranges, prio, n));
        self.mq.enqueue_at(i, pkt, cx)
    }

    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        self.mq.dequeue(cx)
    }

    fn reset(&mut self) {
        self.mq.reset();
    }

    /// mqprio has no `change`, and tc always sends it options.
    fn change(&mut self, _opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        Err(einval("Change operation not supported by specified qdisc"))
    }

    /// `mqprio_dump`: the layout rebuilt from the device (classes past
    /// `num_tc` zero), `hw` as offloaded (never), no attributes.
    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Mqprio(layout_opts(self.map, &self.ranges))
    }

    fn own_stats(&self) -> Option<Stats> {
        self.mq.own_stats()
    }

    fn device_changed(&mut self, dev: &DevInfo) {
        self.mq.device_changed(dev);
    }

    fn classes(&mut self) -> Option<&mut dyn Classful> {
        Some(self)
    }

    fn classes_ref(&self) -> Option<&dyn Classful> {
        Some(self)
    }
}

impl Classful for Mqprio {
    fn change_class(
        &mut self,
        classid: Handle,
        parent: Handle,
        opts: Option<&ClassOpts>,
        dev: &DevInfo,
    ) -> TcResult<()> {
        self.mq.change_class(classid, parent, opts, dev)
    }

    fn delete_class(&mut self, classid: Handle) -> TcResult<()> {
        self.mq.delete_class(classid)
    }

    /// `mqprio_walk`: the traffic classes, then the queues.
    fn list(&self) -> Vec<ClassInfo> {
        let tcs = self
            .ranges
            .iter()
            .enumerate()
            .map(|(t, &(offset, count))| ClassInfo {
                classid: Handle::new(self.major, TC_MINOR + t as u16),
                parent: Handle::ROOT,
                leaf: None,
                opts: ClassOpts::Plain,
                stats: self.mq.sum_stats(offset..offset + count),
                xstats: super::XStats::None,
            });
        let queues = self.mq.list().into_iter().enumerate().map(|(q, mut c)| {
            c.parent = self.tc_of_queue(q).map_or(Handle::UNSPEC, |t| {
                Handle::new(self.major, TC_MINOR + t as u16)
            });
            c
        });
        tcs.chain(queues).collect()
    }

    fn contains(&self, classid: Handle) -> bool {
        self.tc_of_class(classid).is_some() || self.mq.contains(classid)
    }

    fn leaf(&self, classid: Handle) -> Option<&QdiscNode> {
        self.mq.leaf(classid)
    }

    fn take_purged(&mut self) -> (u64, u64) {
        self.mq.take_purged()
    }

    /// `mqprio_graft`, after `mqprio_select_queue`: a traffic class has no
    /// device queue for the new qdisc.
    fn graft(
        &mut self,
        classid: Handle,
        new: Option<QdiscNode>,
        dev: &DevInfo,
    ) -> TcResult<Option<QdiscNode>> {
        if self.tc_of_class(classid).is_some() {
            return Err(einval("No device queue given"));
        }
        self.mq.graft(classid, new, dev)
    }

    fn leaves(&mut self) -> Vec<&mut QdiscNode> {
        self.mq.leaves()
    }

    fn leaves_ref(&self) -> Vec<&QdiscNode> {
        self.mq.leaves_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Time;

    use crate::qdisc::mq::tests::dev;

    /// `num_tc N map M... queues C@O... hw 0`.
    fn opts(num_tc: u8, map: &[u8], queues: &[(u16, u16)]) -> MqprioOpts {
        let mut o = MqprioOpts {
            num_tc,
            prio_tc_map: [0; MAX_TC],
            hw: 0,
            ..MqprioOpts::default()
        };
        o.prio_tc_map[..map.len()].copy_from_slice(map);
        for (i, &(c, off)) in queues.iter().enumerate() {
            o.count[i] = c;
            o.offset[i] = off;
        }
        o
    }

    fn err(o: &MqprioOpts, queues: u32) -> String {
        Mqprio::new(o, &dev(queues)).unwrap_err().describe()
    }

    #[test]
    fn the_kernels_checks_in_its_order() {
        // The examples of the research notes (docs/research/mqprio.md §5),
        // the messages as sch_mqprio.c and sch_mqprio_lib.c word them.
        assert_eq!(
            err(&opts(2, &[0, 1], &[(4, 0), (5, 4)]), 8),
            "Error: sch_mqprio_lib: Queues 5:4 for TC 1 exceed the 8 TX queues available."
        );
        assert_eq!(
            err(&opts(2, &[0, 1], &[(4, 0), (2, 3)]), 8),
            "Error: sch_mqprio_lib: TC 0 queues 4@0 overlap with TC 1 queues 2@3."
        );
        assert_eq!(
            err(&opts(2, &[0, 1], &[]), 8),
            "Error: sch_mqprio_lib: No queues for TC 0."
        );
        let mut o = opts(2, &[0, 1, 2], &[(4, 0), (4, 4)]);
        assert_eq!(
            err(&o, 8),
            "Error: Invalid traffic class in priority to traffic class mapping."
        );
        o.num_tc = 17;
        assert_eq!(
            err(&o, 8),
            "Error: Number of traffic classes is outside valid range."
        );
        // num_tc 0 can never pass: map entry 0 is not below 0.
        assert!(err(&opts(0, &[], &[]), 8).contains("Invalid traffic class"));
        // hw 1 (tc's default) goes to a driver no sluice device has, even
        // with queues that make no sense.
        let mut o = opts(2, &[0, 1], &[(40, 0)]);
        o.hw = 5;
        assert_eq!(
            err(&o, 8),
            "Error: Device does not support hardware offload."
        );
        let mut o = opts(2, &[0, 1], &[(4, 0), (4, 4)]);
        o.mode = Some(1);
        assert_eq!(
            err(&o, 8),
            "Error: mqprio TCA_OPTIONS can only contain netlink attributes in hardware mode."
        );
        // Descending ranges and queues outside every class are fine.
        assert!(Mqprio::new(&opts(2, &[0, 1], &[(2, 4), (2, 0)]), &dev(8)).is_ok());
        assert_eq!(
            err(&opts(1, &[], &[(2, 0)]), 1),
            "RTNETLINK answers: Operation not supported"
        );
    }

    /// An IPv4/UDP packet from port `sport` with priority `prio`.
    fn udp(sport: u16, prio: u32) -> Packet {
        let mut p = crate::qdisc::mq::tests::udp(sport);
        p.priority = prio;
        p
    }

    fn qlens(n: &QdiscNode) -> Vec<(String, String, u32)> {
        n.qdisc
            .classes_ref()
            .unwrap()
            .list()
            .iter()
            .map(|c| (c.classid.to_string(), c.parent.to_string(), c.stats.qlen))
            .collect()
    }

    #[test]
    fn priority_picks_the_traffic_class_and_the_hash_a_queue_in_it() {
        // num_tc 3 map 2 2 1 0 2...: priority 0 → TC 2 (queues 6-7),
        // 2 → TC 1 (4-5), 3 and 19 (19 & 15) → TC 0 (0-3).
        let o = opts(
            3,
            &[2, 2, 1, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2],
            &[(4, 0), (2, 4), (2, 6)],
        );
        let mut n = QdiscNode::new(
            Handle::new(1, 0),
            Handle::ROOT,
            Box::new(Mqprio::new(&o, &dev(8)).unwrap()),
        );
        let mut cx = Cx::new(Time(0));
        for sport in 0..40 {
            for prio in [0, 2, 3, 19] {
                n.enqueue(udp(1000 + sport, prio), &mut cx).unwrap();
            }
        }
        let classes = qlens(&n);
        let q = |id: &str| classes.iter().find(|c| c.0 == id).unwrap().clone();
        assert_eq!(q("1:ffe0"), ("1:ffe0".into(), "root".into(), 80));
        assert_eq!(q("1:ffe1").2, 40);
        assert_eq!(q("1:ffe2").2, 40);
        for (queue, parent) in [(1, "1:ffe0"), (4, "1:ffe0"), (5, "1:ffe1"), (8, "1:ffe2")] {
            let c = q(&format!("1:{queue}"));
            assert_eq!(c.1, parent);
            // 40 flows over 2 or 4 queues leave none empty.
            assert!(c.2 > 0, "{c:?}");
        }
        assert_eq!(classes.len(), 3 + 8);
        assert_eq!(n.stats().qlen, 160);
    }

    #[test]
    fn a_queue_outside_every_class_has_no_parent_and_a_class_no_queue() {
        let o = opts(1, &[], &[(2, 0)]);
        let mut n = QdiscNode::new(
            Handle::new(1, 0),
            Handle::ROOT,
            Box::new(Mqprio::new(&o, &dev(4)).unwrap()),
        );
        let parents: Vec<String> = qlens(&n).into_iter().map(|c| c.1).collect();
        assert_eq!(parents, ["root", "1:ffe0", "1:ffe0", "none", "none"]);
        let cls = n.qdisc.classes().unwrap();
        assert!(cls.contains(Handle::new(1, 0xffe0)));
        assert!(!cls.contains(Handle::new(1, 0xffe1)));
        assert!(!cls.contains(Handle::new(1, 5)));
        let e = cls
            .graft(Handle::new(1, 0xffe0), None, &dev(4))
            .unwrap_err();
        assert_eq!(e.describe(), "Error: No device queue given.");
        assert!(cls.graft(Handle::new(1, 3), None, &dev(4)).is_ok());
        let e = n.qdisc.change(&QdiscOpts::Mqprio(o), &dev(4)).unwrap_err();
        assert_eq!(
            e.describe(),
            "Error: Change operation not supported by specified qdisc."
        );
    }
}
