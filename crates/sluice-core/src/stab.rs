//! Size tables (`tc qdisc add ... stab ...`): the length a qdisc accounts a
//! packet with, when the link below frames packets differently from Ethernet.
//!
//! A qdisc counts, shapes and limits by `qdisc_pkt_len`, which is normally the
//! packet's length. A size table attached to a qdisc replaces that length, as
//! the packet is enqueued to *that* qdisc, by a function of the real length:
//! add a fixed per-packet `overhead` (PPPoE, VLAN, ATM AAL5 trailers ...),
//! then, if a table was built, look the result up in it. tc builds the table
//! (iproute2 `tc_calc_size_table`): `tsize` slots, slot `i` covering lengths up
//! to `(i + 1) << cell_log` and holding that length raised to `mpu` and, for
//! `linklayer atm`, rounded up to whole 53-byte cells of 48 payload bytes —
//! stored `>> size_log` so it fits 16 bits. The kernel then maps a length to
//! its slot (`__qdisc_calculate_pkt_len`, net/sched/sch_api.c): lengths past
//! the table are extrapolated from its last slot, and the result is at least 1.
//!
//! Only overhead and no table is the common "ethernet, overhead N" case: tc
//! sends no table then, and the kernel just adds the overhead.
//!
//! The table changes only what qdiscs see ([`crate::packet::Packet::len`]);
//! the real length is kept in `Packet::skb_len` and restored when the packet
//! leaves the tree for the wire. As in the kernel, a child's table recomputes
//! the length from the real one, so parents and children may account the same
//! packet differently (the kernel's backlogs drift the same way).

use crate::error::{TcError, TcResult};
use crate::packet::Packet;
use crate::rate::LinkLayer;
use serde::{Deserialize, Serialize};

/// `struct tc_sizespec` as tc sends it and the kernel dumps it (the fields
/// tc prints; `cell_log`, `size_log` and `cell_align` live in [`SizeTable`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeSpec {
    /// Largest length the table covers (tc's default 2047 when it builds one).
    pub mtu: u32,
    /// Slots in the table (default 512 when one is built; 0 = no table).
    pub tsize: u32,
    /// Minimum accounted length.
    pub mpu: u32,
    /// Bytes added to every packet (may be negative).
    pub overhead: i32,
    /// `linklayer`, as given.
    pub linklayer: LinkLayer,
}

impl SizeSpec {
    /// iproute2 `check_size_table_opts`: is there anything to send at all?
    pub fn says_something(&self) -> bool {
        self.linklayer != LinkLayer::Unspec || self.mpu != 0 || self.overhead != 0
    }
}

/// `STAB_SIZE_LOG_MAX`.
const SIZE_LOG_MAX: u32 = 30;

/// The largest table tc can send: its netlink request buffer holds 64 KiB of
/// attributes (`TCA_BUF_MAX`), of which the header, the kind and the size
/// spec take about 90 bytes. Approximate: the real bound also depends on the
/// qdisc's own options.
pub const MAX_TSIZE: u32 = (65_536 - 92) / 2;

/// A size table attached to a qdisc (`struct qdisc_size_table`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeTable {
    /// The spec as dumped (with the mtu and tsize tc filled in).
    pub spec: SizeSpec,
    cell_log: u32,
    size_log: u32,
    cell_align: i32,
    data: Vec<u16>,
}

/// `tc_adjust_size`: a length raised to `mpu` and framed by the link layer.
fn adjust(len: u32, mpu: u32, linklayer: LinkLayer) -> u32 {
    let len = len.max(mpu);
    match linklayer {
        LinkLayer::Atm => len.div_ceil(48).wrapping_mul(53),
        _ => len,
    }
}

impl SizeTable {
    /// Build the table tc would send for `spec` (`tc_calc_size_table`) and
    /// check it as the kernel does (`qdisc_get_stab`).
    pub fn new(spec: SizeSpec) -> TcResult<Self> {
        let mut spec = spec;
        if spec.linklayer != LinkLayer::Atm && spec.mpu == 0 {
            // Only an overhead: no table.
            spec.mtu = 0;
            spec.tsize = 0;
            return Ok(SizeTable {
                spec,
                cell_log: 0,
                size_log: 0,
                cell_align: 0,
                data: Vec::new(),
            });
        }
        if spec.mtu == 0 {
            spec.mtu = 2047;
        }
        if spec.tsize == 0 {
            spec.tsize = 512;
        }
        if spec.tsize > MAX_TSIZE {
            // tc cannot fit the table into its request and sends the spec alone.
            return Err(TcError::inval("Size table data attribute is missing"));
        }
        let mut cell_log = 0;
        while cell_log < 32 && (spec.mtu >> cell_log) > spec.tsize - 1 {
            cell_log += 1;
        }
        let slot_len = |i: u32| adjust((i + 1).wrapping_shl(cell_log), spec.mpu, spec.linklayer);
        let mut size_log = 0;
        while size_log < 32 && (0..spec.tsize).any(|i| (slot_len(i) >> size_log) > u16::MAX as u32)
        {
            size_log += 1;
        }
        if size_log > SIZE_LOG_MAX || cell_log > SIZE_LOG_MAX {
            return Err(TcError::inval("Invalid logarithmic size of size table"));
        }
        let data = (0..spec.tsize)
            .map(|i| (slot_len(i) >> size_log) as u16)
            .collect();
        Ok(SizeTable {
            spec,
            cell_log,
            size_log,
            cell_align: -1,
            data,
        })
    }

    /// `__qdisc_calculate_pkt_len`: the accounted length of a packet whose
    /// real length is `len`.
    pub fn pkt_len(&self, len: u32) -> u32 {
        let mut out = (len as i64).saturating_add(self.spec.overhead as i64);
        if !self.data.is_empty() {
            let slot = (out + self.cell_align as i64).max(0) >> self.cell_log;
            let n = self.data.len() as i64;
            let v = if slot < n {
                self.data[slot as usize] as i64
            } else {
                self.data[n as usize - 1] as i64 * (slot / n)
                    + self.data[(slot % n) as usize] as i64
            };
            out = v << self.size_log;
        }
        out.clamp(1, u32::MAX as i64) as u32
    }

    /// Give `pkt` the length this table assigns it, from its real length.
    pub fn apply(&self, pkt: &mut Packet) {
        let len = pkt.len;
        let real = *pkt.skb_len.get_or_insert(len);
        pkt.len = self.pkt_len(real);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(overhead: i32, mpu: u32, linklayer: LinkLayer) -> SizeSpec {
        SizeSpec {
            overhead,
            mpu,
            linklayer,
            ..Default::default()
        }
    }

    #[test]
    fn overhead_alone_just_adds() {
        let t = SizeTable::new(spec(24, 0, LinkLayer::Ethernet)).unwrap();
        assert_eq!((t.spec.mtu, t.spec.tsize), (0, 0), "tc sends no table");
        assert_eq!(t.pkt_len(100), 124);
        let t = SizeTable::new(spec(-4, 0, LinkLayer::Unspec)).unwrap();
        assert_eq!(t.pkt_len(60), 56);
        assert_eq!(t.pkt_len(2), 1, "never below one byte");
    }

    #[test]
    fn atm_rounds_up_to_whole_cells() {
        // ADSL with PPPoA/VC-mux-like overhead 10: a 1500-byte packet plus 10
        // needs ceil(1510 / 48) = 32 cells of 53 bytes = 1696 bytes on the line.
        let t = SizeTable::new(spec(10, 0, LinkLayer::Atm)).unwrap();
        assert_eq!((t.spec.mtu, t.spec.tsize, t.cell_log), (2047, 512, 2));
        assert_eq!(t.pkt_len(1500), 32 * 53);
        // 38 + 10 = 48 bytes: exactly one cell; one byte more takes two.
        assert_eq!(t.pkt_len(38), 53);
        assert_eq!(t.pkt_len(39), 106);
        // Past the table (2047) the kernel extrapolates from the last slot:
        // still whole cells, and about as many as the length needs.
        let big = t.pkt_len(9000);
        assert_eq!(big % 53, 0);
        let exact = 9010u32.div_ceil(48) * 53;
        assert!(big >= exact && big <= exact + 2 * 53, "{big} vs {exact}");
    }

    #[test]
    fn mpu_raises_small_packets() {
        let t = SizeTable::new(spec(0, 64, LinkLayer::Ethernet)).unwrap();
        assert_eq!(t.pkt_len(40), 64);
        // Slots are 4 bytes wide (cell_log 2, aligned down by one): a length
        // is accounted as the top of its slot.
        assert_eq!(t.pkt_len(1000), 1000);
        assert_eq!(t.pkt_len(1001), 1004);
    }

    #[test]
    fn big_lengths_are_scaled_down_to_fit_16_bits() {
        let t = SizeTable::new(SizeSpec {
            mtu: 100_000,
            tsize: 2,
            mpu: 100,
            ..Default::default()
        })
        .unwrap();
        assert!(t.size_log > 0);
        assert!(t.data.iter().all(|&v| v > 0));
        assert_eq!(t.pkt_len(50_000), 65_536);
    }

    #[test]
    fn tables_too_big_for_a_request_are_refused() {
        let mut s = spec(0, 0, LinkLayer::Atm);
        s.tsize = 40_000;
        let e = SizeTable::new(s).unwrap_err();
        assert_eq!(e.describe(), "Error: Size table data attribute is missing.");
        s.tsize = 30_000;
        assert!(SizeTable::new(s).is_ok());
    }
}
