//! pfifo_fast: three strict-priority FIFO bands, the classic Linux default qdisc.
//!
//! Modelled on the `pfifo_fast` part of net/sched/sch_generic.c. A packet's
//! band comes from a fixed table indexed by the low four bits of
//! `skb->priority` (`TC_PRIO_*`): `1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1`. Dequeue
//! always serves the lowest-numbered non-empty band, so band 0 (interactive
//! and control traffic) starves the others while it has packets.
//!
//! Where does `priority` come from? For locally generated IPv4 the IP stack
//! sets it from the socket's TOS (`IP_TOS` stores `rt_tos2priority(tos)` in
//! `sk_priority`), and the forwarding path does the same from the header's
//! TOS byte. [`tos_to_priority`] is that table (`ip_tos2prio` in
//! net/ipv4/route.c); front ends that model an IP stack should set
//! `Packet::priority` with it. The qdisc itself never reads the TOS byte.
//!
//! Limits: since Linux 4.16 each band is a ring of `txqueuelen` entries, so
//! the limit is `txqueuelen` packets *per band* (up to three times that in
//! total). Older kernels had one limit of `txqueuelen` for all bands; we
//! follow the current kernel. A device whose `txqueuelen` is 0 gets 1000 per
//! band (`DevInfo::default_qlen`): kernel 6.18 accepted `pfifo_fast` there
//! (tests/golden/devices.golden, "txqueuelen 0 effects") and its default
//! limits read 1000 on such a device. (The kernel's ring frees consumed slots in
//! small batches, so its real capacity can be a few entries short of
//! `txqueuelen`; we model exactly `txqueuelen`.)
//!
//! pfifo_fast has no options: tc sends none, the kernel has no `change`
//! operation, and the dump is the fixed `bands 3 priomap ...` pair.

use super::{wrong_kind, Cx, Dequeue, DevInfo, Qdisc, QdiscOpts};
use crate::error::{TcError, TcResult};
use crate::packet::Packet;
use crate::stats::DropReason;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// `TC_PRIO_MAX`: priorities are taken modulo 16.
pub const TC_PRIO_MAX: u32 = 15;

/// Number of bands (`PFIFO_FAST_BANDS`).
pub const PFIFO_FAST_BANDS: usize = 3;

/// The fixed priority-to-band map (`prio2band` in sch_generic.c); also
/// the default priomap of `prio`.
pub const PRIO2BAND: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];

/// `ip_tos2prio` (net/ipv4/route.c): TC_PRIO class for each value of the
/// four TOS bits. BESTEFFORT = 0, BULK = 2, INTERACTIVE_BULK = 4,
/// INTERACTIVE = 6.
const IP_TOS2PRIO: [u8; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];

/// `rt_tos2priority`: the `skb->priority` Linux gives an IPv4 packet sent with
/// TOS byte `tos` (only the four RFC 1349 TOS bits 0x1e count).
///
/// `0x10` (minimize delay) gives 6 (interactive, band 0 of pfifo_fast),
/// `0x08` (maximize throughput) gives 2 (bulk, band 2), 0 gives 0 (band 1).
pub fn tos_to_priority(tos: u8) -> u32 {
    IP_TOS2PRIO[((tos & 0x1e) >> 1) as usize] as u32
}

/// What the kernel dumps for pfifo_fast (`struct tc_prio_qopt`). tc sends no
/// options for pfifo_fast; these fields are fixed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfifoFastOpts {
    /// Always 3.
    pub bands: i32,
    /// Always [`PRIO2BAND`].
    pub priomap: [u8; 16],
}

impl Default for PfifoFastOpts {
    fn default() -> Self {
        PfifoFastOpts {
            bands: PFIFO_FAST_BANDS as i32,
            priomap: PRIO2BAND,
        }
    }
}

/// A pfifo_fast qdisc.
#[derive(Debug)]
pub struct PfifoFast {
    /// Packets per band (the device's `txqueuelen` at creation).
    band_limit: u32,
    bands: [VecDeque<Packet>; PFIFO_FAST_BANDS],
}

impl PfifoFast {
    /// `pfifo_fast_init`: options are ignored; the rings get `txqueuelen` slots.
    pub fn new(_opts: &PfifoFastOpts, dev: &DevInfo) -> TcResult<Self> {
        Ok(PfifoFast {
            band_limit: dev.default_qlen(),
            bands: Default::default(),
        })
    }

    /// The band a packet of this `skb->priority` goes to.
    pub fn band_of(priority: u32) -> usize {
        PRIO2BAND[(priority & TC_PRIO_MAX) as usize] as usize
    }

    /// Packets queued in band `b` (0..3).
    pub fn band_len(&self, b: usize) -> usize {
        self.bands.get(b).map_or(0, VecDeque::len)
    }
}

impl Qdisc for PfifoFast {
    fn enqueue(&mut self, pkt: Packet, _cx: &mut Cx) -> Result<(), (Packet, DropReason)> {
        let band = &mut self.bands[Self::band_of(pkt.priority)];
        if band.len() as u64 >= self.band_limit as u64 {
            return Err((pkt, DropReason::QueueFull));
        }
        band.push_back(pkt);
        Ok(())
    }

    fn dequeue(&mut self, _cx: &mut Cx) -> Dequeue {
        match self.bands.iter_mut().find_map(VecDeque::pop_front) {
            Some(p) => Dequeue::Packet(p),
            None => Dequeue::Empty,
        }
    }

    fn reset(&mut self) {
        self.bands.iter_mut().for_each(VecDeque::clear);
    }

    /// The kernel has no `change` for pfifo_fast: a request carrying options
    /// fails in `qdisc_change`; tc never sends any, so only the fixed options
    /// (what `dump` gives) are accepted, as a no-op.
    fn change(&mut self, opts: &QdiscOpts, _dev: &DevInfo) -> TcResult<()> {
        match opts {
            QdiscOpts::PfifoFast(o) if *o == PfifoFastOpts::default() => Ok(()),
            QdiscOpts::PfifoFast(_) => Err(TcError::inval(
                "Change operation not supported by specified qdisc",
            )),
            _ => Err(wrong_kind("pfifo_fast", opts)),
        }
    }

    fn dump(&self) -> QdiscOpts {
        QdiscOpts::PfifoFast(PfifoFastOpts::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::Handle;
    use crate::packet::Skb;
    use crate::packet::ETH_P_IP;
    use crate::qdisc::QdiscNode;
    use crate::time::Time;

    fn node(txqueuelen: u32) -> QdiscNode {
        let dev = DevInfo {
            txqueuelen,
            ..Default::default()
        };
        let q = PfifoFast::new(&PfifoFastOpts::default(), &dev).unwrap();
        QdiscNode::new(Handle::new(1, 0), Handle::ROOT, Box::new(q))
    }

    /// An IPv4 packet whose priority the IP stack derived from `tos`.
    fn ip_pkt(id: u64, tos: u8) -> Packet {
        let mut data = vec![0u8; 20];
        data[0] = 0x45;
        data[1] = tos;
        Packet::from(Skb {
            id,
            len: 100,
            protocol: ETH_P_IP,
            priority: tos_to_priority(tos),
            data,
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
    fn tos_table_matches_ip_tos2prio() {
        // RFC 1349 TOS values and the TC_PRIO classes route.c assigns.
        assert_eq!(tos_to_priority(0x00), 0); // normal: BESTEFFORT
        assert_eq!(tos_to_priority(0x02), 0); // min cost: BESTEFFORT
        assert_eq!(tos_to_priority(0x04), 0); // reliability: BESTEFFORT
        assert_eq!(tos_to_priority(0x08), 2); // throughput: BULK
        assert_eq!(tos_to_priority(0x10), 6); // low delay: INTERACTIVE
        assert_eq!(tos_to_priority(0x18), 4); // delay+throughput: INTERACTIVE_BULK
                                              // ECN bits and precedence are ignored.
        assert_eq!(tos_to_priority(0x13), 6);
        // DSCP EF (0xb8): only its TOS bits 0x18 count -> INTERACTIVE_BULK.
        assert_eq!(tos_to_priority(0xb8), 4);
    }

    #[test]
    fn tos_selects_band_as_man_page_describes() {
        // tc-pfifo_fast(8): Minimize Delay -> band 0, Maximize Throughput ->
        // band 2, normal service -> band 1.
        assert_eq!(PfifoFast::band_of(tos_to_priority(0x10)), 0);
        assert_eq!(PfifoFast::band_of(tos_to_priority(0x08)), 2);
        assert_eq!(PfifoFast::band_of(tos_to_priority(0x00)), 1);
        assert_eq!(PfifoFast::band_of(tos_to_priority(0x04)), 1);
        // TC_PRIO_CONTROL (7) is band 0; priority is taken modulo 16.
        assert_eq!(PfifoFast::band_of(7), 0);
        assert_eq!(PfifoFast::band_of(0x1_0007), 0);
    }

    #[test]
    fn low_delay_is_served_first_and_bulk_last() {
        let mut n = node(100);
        let mut cx = Cx::new(Time(0));
        n.enqueue(ip_pkt(1, 0x08), &mut cx).unwrap(); // bulk
        n.enqueue(ip_pkt(2, 0x00), &mut cx).unwrap(); // normal
        n.enqueue(ip_pkt(3, 0x10), &mut cx).unwrap(); // low delay
        n.enqueue(ip_pkt(4, 0x08), &mut cx).unwrap();
        n.enqueue(ip_pkt(5, 0x10), &mut cx).unwrap();
        assert_eq!(drain(&mut n, &mut cx), vec![3, 5, 2, 1, 4]);
    }

    #[test]
    fn strict_priority_starves_lower_bands_while_band0_refills() {
        let mut n = node(100);
        let mut cx = Cx::new(Time(0));
        n.enqueue(ip_pkt(100, 0x08), &mut cx).unwrap();
        // Keep one interactive packet queued before every dequeue: bulk waits.
        for i in 0..10 {
            n.enqueue(ip_pkt(i, 0x10), &mut cx).unwrap();
            assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.id == i));
        }
        assert!(matches!(n.dequeue(&mut cx), Dequeue::Packet(p) if p.id == 100));
        assert_eq!(n.dequeue(&mut cx), Dequeue::Empty);
    }

    #[test]
    fn limit_is_txqueuelen_per_band() {
        let mut n = node(2);
        let mut cx = Cx::new(Time(0));
        for i in 0..3 {
            assert_eq!(n.enqueue(ip_pkt(i, 0x10), &mut cx).is_ok(), i < 2);
        }
        // A full band 0 does not stop bands 1 and 2.
        for i in 10..13 {
            assert_eq!(n.enqueue(ip_pkt(i, 0x00), &mut cx).is_ok(), i < 12);
            assert_eq!(n.enqueue(ip_pkt(i + 10, 0x08), &mut cx).is_ok(), i < 12);
        }
        let s = n.stats();
        assert_eq!((s.qlen, s.backlog, s.drops), (6, 600, 3));
    }

    #[test]
    fn zero_txqueuelen_is_accepted_and_dump_is_fixed() {
        // Observed on kernel 6.18 (golden "txqueuelen 0 effects"): accepted.
        let dev = DevInfo {
            txqueuelen: 0,
            ..Default::default()
        };
        let q0 = PfifoFast::new(&PfifoFastOpts::default(), &dev).unwrap();
        assert_eq!(q0.band_limit, 1000);
        let q = PfifoFast::new(&PfifoFastOpts::default(), &DevInfo::default()).unwrap();
        assert_eq!(
            q.dump(),
            QdiscOpts::PfifoFast(PfifoFastOpts {
                bands: 3,
                priomap: [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]
            })
        );
    }

    #[test]
    fn change_accepts_only_the_fixed_options() {
        let mut q = PfifoFast::new(&PfifoFastOpts::default(), &DevInfo::default()).unwrap();
        let dev = DevInfo::default();
        assert!(q
            .change(&QdiscOpts::PfifoFast(PfifoFastOpts::default()), &dev)
            .is_ok());
        let other = PfifoFastOpts {
            bands: 4,
            ..Default::default()
        };
        assert!(q.change(&QdiscOpts::PfifoFast(other), &dev).is_err());
        assert!(q.change(&QdiscOpts::Noop, &dev).is_err());
    }
}
