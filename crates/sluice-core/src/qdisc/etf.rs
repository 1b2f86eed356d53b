//! etf: Earliest TxTime First — packets held until shortly before the
//! launch time they carry, sent in launch-time order.
//!
//! net/sched/sch_etf.c, software mode. A packet's launch time
//! (`skb->tstamp`, here [`crate::packet::Skb::txtime`]) comes from an
//! `SO_TXTIME` socket or from a taprio parent in txtime-assist mode; the
//! queue is kept sorted by it (equal times in arrival order). At enqueue a
//! packet is refused unless (without `skip_sock_check`) its socket asked for
//! `SO_TXTIME` on etf's clock in the same deadline mode — no sluice socket
//! does, so only `skip_sock_check` lets anything in — and unless its launch
//! time is neither past nor before the last one sent; a packet without one
//! counts as time 0, in the past. At dequeue, a head whose time has passed
//! is dropped with every other packet due by now (drops and overlimits), and
//! nothing is sent that call; otherwise the head goes once now is strictly
//! after its launch time less `delta` (so `delta 0` sends nothing), or at
//! once in `deadline_mode`, which then stamps it with the time it left. The
//! watchdog wakes the device at the head's launch time less `delta` (a
//! nanosecond after, where the test is strict).
//!
//! Only CLOCK_TAI is accepted ("Invalid clockid. CLOCK_TAI must be used";
//! tc sends −1 when no `clockid` is given: "Dynamic clockids are not
//! supported"); `delta` may not be negative; `offload` needs a device with
//! launch-time hardware, which no sluice device is. etf has no `change` and
//! no queue limit. sluice's one clock stands for TAI.

use super::{Cx, Dequeue, DevInfo, Qdisc, QdiscOpts};
use crate::error::{Errno, TcError, TcResult};
use crate::packet::Packet;
use crate::stats::DropReason;
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `TC_ETF_DEADLINE_MODE_ON`.
pub const DEADLINE_MODE: u32 = 0x1;
/// `TC_ETF_OFFLOAD_ON`.
pub const OFFLOAD: u32 = 0x2;
/// `TC_ETF_SKIP_SOCK_CHECK`.
pub const SKIP_SOCK_CHECK: u32 = 0x4;
/// `CLOCK_TAI`.
pub const CLOCK_TAI: i32 = 11;

/// `struct tc_etf_qopt`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EtfOpts {
    /// Nanoseconds before its launch time a packet may leave.
    pub delta: i32,
    /// −1: none given.
    pub clockid: i32,
    /// [`DEADLINE_MODE`], [`OFFLOAD`], [`SKIP_SOCK_CHECK`].
    pub flags: u32,
}

impl Default for EtfOpts {
    /// What tc sends for no words.
    fn default() -> Self {
        EtfOpts {
            delta: 0,
            clockid: -1,
            flags: 0,
        }
    }
}

/// The etf qdisc.
#[derive(Debug)]
pub struct Etf {
    delta: i64,
    flags: u32,
    /// Packets by (launch time, arrival).
    queue: BTreeMap<(i64, u64), Packet>,
    arrivals: u64,
    /// The launch time of the last packet sent.
    last: i64,
    overlimits: u64,
}

impl Etf {
    /// `etf_init`.
    pub fn new(o: &EtfOpts, _dev: &DevInfo) -> TcResult<Self> {
        if o.clockid < 0 {
            return Err(TcError::msg(
                Errno::ENOTSUPP,
                "Dynamic clockids are not supported",
            ));
        }
        if o.clockid != CLOCK_TAI {
            return Err(TcError::inval("Invalid clockid. CLOCK_TAI must be used"));
        }
        if o.delta < 0 {
            return Err(TcError::inval("Delta must be positive"));
        }
        if o.flags & OFFLOAD != 0 {
            return Err(TcError::msg(
                Errno::EOPNOTSUPP,
                "Specified device does not support ETF offload",
            ));
        }
        Ok(Etf {
            delta: o.delta as i64,
            flags: o.flags & (DEADLINE_MODE | SKIP_SOCK_CHECK),
            queue: BTreeMap::new(),
            arrivals: 0,
            last: 0,
            overlimits: 0,
        })
    }
}

impl Qdisc for Etf {
    /// `etf_enqueue_timesortedlist` after `is_packet_valid`.
    fn enqueue(&mut self, pkt: Packet, cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        let t = pkt.txtime.map_or(0, |t| t.0 as i64);
        // No sluice socket asks for SO_TXTIME: only skip_sock_check lets
        // packets in.
        if self.flags & SKIP_SOCK_CHECK == 0 || t < cx.now.0 as i64 || t < self.last {
            return Err((pkt, DropReason::QueueFull));
        }
        self.arrivals += 1;
        self.queue.insert((t, self.arrivals), pkt);
        Ok(())
    }

    /// `etf_dequeue_timesortedlist`.
    fn dequeue(&mut self, cx: &mut Cx) -> Dequeue {
        let now = cx.now.0 as i64;
        let Some((&(t, _), _)) = self.queue.first_key_value() else {
            return Dequeue::Empty;
        };
        if t < now {
            // `timesortedlist_drop`: everything due by now, this call sends nothing.
            while let Some(e) = self.queue.first_entry().filter(|e| e.key().0 <= now) {
                let p = e.remove();
                self.overlimits += 1;
                cx.shed(p.len, DropReason::QueueFull);
            }
            return match self.queue.first_key_value() {
                Some(_) => Dequeue::Wait(cx.now),
                None => Dequeue::Empty,
            };
        }
        if self.flags & DEADLINE_MODE == 0 && now <= t - self.delta {
            return Dequeue::Wait(Time((t - self.delta).saturating_add(1).max(0) as u64));
        }
        let (_, mut p) = self.queue.pop_first().expect("a head");
        self.last = t;
        if self.flags & DEADLINE_MODE != 0 {
            p.txtime = Some(cx.now);
        }
        Dequeue::Packet(p)
    }

    fn peek_len(&self) -> Option<Option<u32>> {
        Some(self.queue.first_key_value().map(|(_, p)| p.len))
    }

    fn reset(&mut self) {
        self.queue.clear();
        self.last = 0;
    }

    /// etf has no `change`, and tc always sends its options.
    fn change(&mut self, _opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        Err(TcError::inval(
            "Change operation not supported by specified qdisc",
        ))
    }

    fn dump(&self) -> QdiscOpts {
        QdiscOpts::Etf(EtfOpts {
            delta: self.delta as i32,
            clockid: CLOCK_TAI,
            flags: self.flags,
        })
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;
    use crate::packet::ETH_P_IP;
    use crate::qdisc::QdiscNode;

    fn etf(delta: i32, flags: u32) -> QdiscNode {
        let o = EtfOpts {
            delta,
            clockid: CLOCK_TAI,
            flags,
        };
        QdiscNode::new(
            Handle::new(1, 0),
            Handle::ROOT,
            Box::new(Etf::new(&o, &DevInfo::default()).unwrap()),
        )
    }

    fn pkt(txtime: Option<u64>) -> Packet {
        let mut p = Packet::new(vec![0x45; 20], 100, ETH_P_IP);
        p.txtime = txtime.map(Time);
        p
    }

    #[test]
    fn the_kernels_checks() {
        let err = |delta, clockid, flags| {
            Etf::new(
                &EtfOpts {
                    delta,
                    clockid,
                    flags,
                },
                &DevInfo::default(),
            )
            .unwrap_err()
            .describe()
        };
        assert_eq!(err(0, -1, 0), "Error: Dynamic clockids are not supported.");
        assert_eq!(
            err(-5, 0, 2),
            "Error: Invalid clockid. CLOCK_TAI must be used."
        );
        assert_eq!(err(-5, 11, 2), "Error: Delta must be positive.");
        assert_eq!(
            err(5, 11, 2),
            "Error: Specified device does not support ETF offload."
        );
    }

    #[test]
    fn packets_leave_in_launch_order_within_delta_of_their_time() {
        let mut n = etf(300, SKIP_SOCK_CHECK);
        let mut cx = Cx::new(Time(1000));
        for t in [5000, 2000, 2000, 9000] {
            n.enqueue(pkt(Some(t)), &mut cx).unwrap();
        }
        // No launch time, or one in the past: refused.
        assert!(n.enqueue(pkt(None), &mut cx).is_err());
        assert!(n.enqueue(pkt(Some(999)), &mut cx).is_err());
        let mut sent = vec![];
        let mut now = 1000;
        loop {
            match n.dequeue(&mut Cx::new(Time(now))) {
                Dequeue::Packet(p) => sent.push((p.txtime.unwrap().0, now)),
                Dequeue::Wait(t) => now = t.0,
                Dequeue::Empty => break,
            }
        }
        // Each goes the nanosecond after its time less delta.
        assert_eq!(
            sent,
            [(2000, 1701), (2000, 1701), (5000, 4701), (9000, 8701)]
        );
        // Before the last one sent: refused.
        assert!(n
            .enqueue(pkt(Some(8999)), &mut Cx::new(Time(8800)))
            .is_err());
        let s = n.stats();
        assert_eq!((s.packets, s.drops, s.overlimits), (4, 3, 0));
    }

    #[test]
    fn late_packets_are_dropped_with_everything_due_and_delta_0_sends_nothing() {
        let mut n = etf(0, SKIP_SOCK_CHECK);
        let mut cx = Cx::new(Time(0));
        for t in [100, 200, 300] {
            n.enqueue(pkt(Some(t)), &mut cx).unwrap();
        }
        assert!(matches!(
            n.dequeue(&mut Cx::new(Time(100))),
            Dequeue::Wait(Time(101))
        ));
        // At 200 the 100 is late: it goes, with the 200 due now, and nothing is sent.
        assert!(matches!(
            n.dequeue(&mut Cx::new(Time(200))),
            Dequeue::Wait(_)
        ));
        let s = n.stats();
        assert_eq!((s.qlen, s.drops, s.overlimits, s.packets), (1, 2, 2, 0));
        // Without skip_sock_check nothing gets in (no socket asked for SO_TXTIME).
        let mut strict = etf(100, 0);
        assert!(strict.enqueue(pkt(Some(500)), &mut cx).is_err());
        // deadline_mode sends at once and stamps the time it left.
        let mut d = etf(0, SKIP_SOCK_CHECK | DEADLINE_MODE);
        d.enqueue(pkt(Some(5000)), &mut cx).unwrap();
        match d.dequeue(&mut Cx::new(Time(10))) {
            Dequeue::Packet(p) => assert_eq!(p.txtime, Some(Time(10))),
            other => panic!("{other:?}"),
        }
    }
}
