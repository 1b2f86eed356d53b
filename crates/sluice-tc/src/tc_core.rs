//! iproute2's `tc_core.c` conversions between bytes, time units and ticks.
//!
//! tc reads the kernel's clock parameters from `/proc/net/psched`. Every
//! Linux since 2.6.x with high-resolution timers reports the same values
//! (`000003e8 00000040 000f4240 3b9aca00`, also captured in
//! tests/golden/README.md): 64 ns per psched tick, so one microsecond ("time
//! unit") is 15.625 ticks, and `get_hz()` answers 1e9. sluice uses those
//! constants instead of reading a file, so results do not depend on the host.
//! The conversions truncate to `unsigned` at the same steps as the C code,
//! because printed bursts ("1599b" rather than "1600b") depend on it.

/// Microseconds per second (`TIME_UNITS_PER_SEC`).
pub const TIME_UNITS_PER_SEC: f64 = 1_000_000.0;
/// psched ticks per microsecond.
pub const TICK_IN_USEC: f64 = 1000.0 / 64.0;
/// `get_hz()`: the psched clock resolution tc reads.
pub const HZ: u64 = 1_000_000_000;

/// `tc_core_time2tick`.
pub fn time2tick(time_us: u32) -> u32 {
    c_unsigned(time_us as f64 * TICK_IN_USEC)
}

/// `tc_core_tick2time`.
pub fn tick2time(ticks: u32) -> u32 {
    c_unsigned(ticks as f64 / TICK_IN_USEC)
}

/// `tc_calc_xmittime`: ticks to send `size` bytes at `rate` bytes/s.
pub fn xmittime(rate: u64, size: u32) -> u32 {
    let us = TIME_UNITS_PER_SEC * (size as f64 / rate as f64);
    time2tick(c_unsigned(us))
}

/// `tc_calc_xmitsize`: bytes sent in `ticks` at `rate` bytes/s.
pub fn xmitsize(rate: u64, ticks: u32) -> u32 {
    c_unsigned(rate as f64 * tick2time(ticks) as f64 / TIME_UNITS_PER_SEC)
}

/// C's double -> unsigned conversion as x86-64 code does it (through i64).
pub fn c_unsigned(v: f64) -> u32 {
    if v.is_nan() {
        0
    } else {
        (v as i64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditioner_burst_arithmetic_matches_the_kernel_dump() {
        // `htb rate 220kbit burst 6k` dumps tokens 3490906 (tests/golden/conditioner.golden).
        assert_eq!(xmittime(27_500, 6144), 3_490_906);
        // the default cburst, rate/HZ + mtu = 1600 bytes, dumps ctokens 909078 and prints 1599b.
        assert_eq!(xmittime(27_500, 1600), 909_078);
        assert_eq!(xmitsize(27_500, 909_078), 1599);
        assert_eq!(xmitsize(27_500, 3_490_906), 6143);
        // `htb rate 8bit`: 1600 bytes take 1.6e9 us, 2.5e10 ticks, which C
        // truncates to 32 bits (not saturates): tc prints "burst 225b".
        assert_eq!(xmittime(1, 1600), 3_525_163_520);
        assert_eq!(xmitsize(1, 3_525_163_520), 225);
    }
}
