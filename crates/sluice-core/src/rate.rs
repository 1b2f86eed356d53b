//! Rates as the kernel applies them: `struct psched_ratecfg`.
//!
//! The kernel turns a rate in bytes per second into a multiplier and shift so
//! that the transmission time of `len` bytes is `(len * mult) >> shift`
//! nanoseconds (`psched_ratecfg_precompute`, `psched_l2t_ns` in
//! net/sched/sch_generic.c and include/net/sch_generic.h). Per-packet overhead,
//! a minimum packet unit and ATM cell framing (48-byte payload in 53-byte
//! cells) adjust `len` first. TBF, HTB and the policer all time packets with
//! this, so their rounding is the kernel's.

use serde::{Deserialize, Serialize};

/// How a link frames packets, for transmission-time accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LinkLayer {
    /// Not said (`TC_LINKLAYER_UNAWARE`): treated as Ethernet.
    #[default]
    Unspec,
    /// Ethernet: bytes are bytes.
    Ethernet,
    /// ATM/ADSL: 48 bytes of payload per 53-byte cell.
    Atm,
}

/// A configured rate: the kernel's `tc_ratespec` as it keeps it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RateSpec {
    /// Bytes per second.
    pub rate: u64,
    /// Bytes added to every packet before timing it (may be negative).
    pub overhead: i32,
    /// Minimum packet unit: shorter packets are timed as this long.
    pub mpu: u16,
    /// Framing of the link.
    pub linklayer: LinkLayer,
}

/// A [`RateSpec`] precomputed for fast length-to-time conversion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateCfg {
    spec: RateSpec,
    mult: u32,
    shift: u8,
}

impl RateCfg {
    /// Precompute `mult` and `shift` as `psched_ratecfg_precompute` does.
    pub fn new(spec: RateSpec) -> Self {
        let (mut mult, mut shift) = (1u32, 0u8);
        // A zero rate keeps 1 and 0.
        let mut factor: u64 = 1_000_000_000;
        while let Some(m) = factor.checked_div(spec.rate) {
            mult = m as u32;
            if mult & (1 << 31) != 0 || factor & (1 << 63) != 0 {
                break;
            }
            factor <<= 1;
            shift += 1;
        }
        RateCfg { spec, mult, shift }
    }

    /// The configuration this was made from.
    pub fn spec(&self) -> RateSpec {
        self.spec
    }

    /// Bytes per second.
    pub fn rate(&self) -> u64 {
        self.spec.rate
    }

    /// Nanoseconds to transmit `len` bytes (`psched_l2t_ns`).
    #[inline]
    pub fn l2t_ns(&self, len: u32) -> u64 {
        // The kernel computes in `unsigned int`, so lengths wrap rather than
        // overflow; the product with `mult` (< 2^32) fits in 64 bits.
        let mut len = len.wrapping_add(self.spec.overhead as u32);
        if len < self.spec.mpu as u32 {
            len = self.spec.mpu as u32;
        }
        if self.spec.linklayer == LinkLayer::Atm {
            len = len.div_ceil(48).wrapping_mul(53);
        }
        (len as u64 * self.mult as u64) >> self.shift
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transmission_times_follow_the_rate() {
        // 1 Mbit/s = 125000 B/s: 1500 bytes take 12 ms.
        let r = RateCfg::new(RateSpec {
            rate: 125_000,
            ..Default::default()
        });
        let t = r.l2t_ns(1500);
        assert!((11_999_000..=12_000_000).contains(&t), "{t}");
        // ATM: 100 bytes need 3 cells = 159 bytes on the wire.
        let atm = RateCfg::new(RateSpec {
            rate: 125_000,
            linklayer: LinkLayer::Atm,
            ..Default::default()
        });
        assert_eq!(atm.l2t_ns(100), r.l2t_ns(159));
        // mpu raises small packets; overhead adds to all.
        let mpu = RateCfg::new(RateSpec {
            rate: 125_000,
            mpu: 64,
            ..Default::default()
        });
        assert_eq!(mpu.l2t_ns(10), r.l2t_ns(64));
        let oh = RateCfg::new(RateSpec {
            rate: 125_000,
            overhead: 24,
            ..Default::default()
        });
        assert_eq!(oh.l2t_ns(100), r.l2t_ns(124));
        // Negative overhead shortens packets; huge lengths wrap as in C, never panic.
        let neg = RateCfg::new(RateSpec {
            rate: 125_000,
            overhead: -4,
            ..Default::default()
        });
        assert_eq!(neg.l2t_ns(104), r.l2t_ns(100));
        let _ = atm.l2t_ns(u32::MAX);
        let _ = oh.l2t_ns(u32::MAX);
    }
}
