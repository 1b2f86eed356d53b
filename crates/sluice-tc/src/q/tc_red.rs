//! RED parameter arithmetic as iproute2's tc/tc_red.c does it, shared by
//! the red, choke and sfq parsers, and the RED flag printer.
//!
//! tc turns the user's words into the kernel's fixed-point parameters:
//! the EWMA weight `W = 2^-Wlog` is the largest that still lets a burst of
//! `burst` packets of `avpkt` bytes through an empty queue without the
//! average reaching `min` (`burst + 1 - min/avpkt <= (1 - (1-W)^burst) / W`,
//! Floyd and Jacobson's bound); `Plog` is the smallest power of two above
//! `(max - min) / probability`; and the idle-damping table gives, for each
//! idle-time cell of `2^Scell_log` ticks, how many halvings the average
//! loses while the link could have sent that many `avpkt` packets at
//! `bandwidth` (`-log(1-W) * t / xmit_time`, capped at 31). Everything is
//! computed in C doubles and truncated where C truncates, so the results
//! match tc bit for bit.

use crate::args::{CmdResult, Fail};
use crate::out::{Out, To};
use crate::tc_core::xmittime;
use sluice_core::qdisc::red_law::{
    RED_STAB_SIZE, TC_RED_ADAPTATIVE, TC_RED_ECN, TC_RED_HARDDROP, TC_RED_NODROP,
};
use sluice_core::units::strtod;

/// tc dividing by a zero `avpkt`: killed by SIGFPE, as the shell reports it.
pub(super) fn sigfpe() -> Fail {
    Fail::new(136, "")
}

/// `sscanf(arg, "%lg", &p) == 1`: a leading number, trailing text ignored.
pub(super) fn scan_double(arg: &str) -> Option<f64> {
    strtod(arg).map(|(v, _)| v)
}

/// C's `(__u32)double` as x86-64 compilers emit it: a 64-bit conversion
/// (the "integer indefinite" value when out of range), then truncation.
pub(super) fn c_double_to_u32(v: f64) -> u32 {
    if v.is_finite() && v.abs() < 9.2e18 {
        (v as i64) as u32
    } else {
        0
    }
}

/// `max_P = probability * pow(2, 32)` stored in a `__u32`.
pub(super) fn max_p(probability: f64) -> u32 {
    c_double_to_u32(probability * 4294967296.0)
}

/// C's `(__u8)double`: through a 32-bit conversion (0x80000000 when out of
/// range), then truncation.
fn c_double_to_u8(v: f64) -> u8 {
    if v.is_finite() && v > -2147483649.0 && v < 2147483648.0 {
        (v as i32) as u8
    } else {
        0
    }
}

/// `tc_red_eval_P`: `Plog` such that `prob / (qmax - qmin) * 2^Plog > 1`.
pub(super) fn eval_p(qmin: u32, qmax: u32, prob: f64) -> Option<u8> {
    let i = qmax.wrapping_sub(qmin) as i32;
    if i <= 0 {
        return None;
    }
    let mut p = prob / i as f64;
    for plog in 0..32u8 {
        if p > 1.0 {
            return Some(plog);
        }
        p *= 2.0;
    }
    None
}

/// `tc_red_eval_ewma`: the smallest `Wlog` with
/// `burst + 1 - qmin/avpkt <= (1 - (1-W)^burst) / W`, `W = 2^-Wlog`.
/// `failed` is the caller's message when there is none (e.g. "RED: failed
/// to calculate EWMA constant."); tc's own complaint about a too small
/// burst comes first.
pub(super) fn eval_ewma(qmin: u32, burst: u32, avpkt: u32, failed: &str) -> CmdResult<u8> {
    let a = burst as f64 + 1.0 - qmin as f64 / avpkt as f64;
    if a < 1.0 {
        if avpkt == 0 {
            return Err(sigfpe());
        }
        return Err(Fail::new(
            1,
            format!(
                "tc_red_eval_ewma() burst {burst} is too small ? Try burst {}\n{failed}",
                1 + qmin / avpkt
            ),
        ));
    }
    let mut w = 0.5f64;
    for wlog in 1..32u8 {
        if a <= (1.0 - (1.0 - w).powf(burst as f64)) / w {
            return Ok(wlog);
        }
        w /= 2.0;
    }
    Err(Fail::new(1, failed))
}

/// `tc_red_eval_idle_damping`: `Scell_log` and the table, or `None` when
/// no cell size makes the table cover 31 halvings.
pub(super) fn eval_idle_damping(
    wlog: u8,
    avpkt: u32,
    bps: u64,
) -> Option<(u8, [u8; RED_STAB_SIZE])> {
    let xmit_time = xmittime(bps, avpkt) as f64;
    let one_shl = |n: u32| 1i32.wrapping_shl(n) as f64;
    let lw = -(1.0 - 1.0 / one_shl(wlog as u32)).ln() / xmit_time;
    let maxtime = 31.0 / lw;
    let clog = (0..32u32).find(|&c| maxtime / one_shl(c) < 512.0)?;
    let mut sbuf = [0u8; RED_STAB_SIZE];
    for (i, slot) in sbuf.iter_mut().enumerate().take(255).skip(1) {
        let v = c_double_to_u8((i as i32).wrapping_shl(clog) as f64 * lw);
        *slot = v.min(31);
    }
    sbuf[255] = 31;
    Some((clog as u8, sbuf))
}

/// `tc_red_print_flags`: each set flag as `name `, every flag in JSON.
pub(super) fn print_flags(flags: u8, out: &mut Out) {
    for (bit, name) in [
        (TC_RED_ECN, "ecn"),
        (TC_RED_HARDDROP, "harddrop"),
        (TC_RED_ADAPTATIVE, "adaptive"),
        (TC_RED_NODROP, "nodrop"),
    ] {
        let on = flags & bit != 0;
        let text = if on {
            format!("{name} ")
        } else {
            String::new()
        };
        out.bool(To::Any, name, &text, on);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_p_as_tc_red() {
        // sfq.json 6472: min 8000 max 60000 probability 0.2 gives Plog 18.
        assert_eq!(eval_p(8000, 60000, 0.2), Some(18));
        // red.json: min 100K max 300K probability 0.02 (2^23 > 204800/0.02).
        assert_eq!(eval_p(102_400, 307_200, 0.02), Some(24));
        assert_eq!(eval_p(10, 10, 0.02), None);
        assert_eq!(eval_p(0, 100, 0.0), None);
    }

    #[test]
    fn eval_ewma_as_tc_red() {
        assert_eq!(eval_ewma(8000, 29, 1000, "x").unwrap(), 6);
        let f = eval_ewma(8000, 1, 1000, "SFQ: failed.").unwrap_err();
        assert_eq!(
            f.stderr,
            "tc_red_eval_ewma() burst 1 is too small ? Try burst 9\nSFQ: failed.\n"
        );
        assert_eq!(eval_ewma(8000, 1, 0, "x").unwrap_err().code, 136);
        // 0/0 is NaN: no Wlog satisfies the bound.
        assert_eq!(eval_ewma(0, 5, 0, "no").unwrap_err().stderr, "no\n");
    }

    /// The table's entries are -log(1-W) * t / xmit_time halvings, where t
    /// is the cell's start in ticks: checked against the formula itself at
    /// 10 Mbit/s with 1000-byte packets (800 µs = 12500 ticks each).
    #[test]
    fn idle_damping_follows_the_decay_law() {
        let bps = 1_250_000;
        let (clog, t) = eval_idle_damping(9, 1000, bps).unwrap();
        let lw = -(1.0f64 - 1.0 / 512.0).ln() / 12_500.0;
        // The smallest cell with 31 / lW / 2^clog < 512 ticks.
        let maxtime = 31.0 / lw;
        assert!(maxtime / (1u64 << clog) as f64 <= 512.0);
        assert!(maxtime / (1u64 << (clog - 1)) as f64 >= 512.0);
        assert_eq!(t[0], 0);
        for (i, &v) in t.iter().enumerate().take(255).skip(1) {
            let want = (((i as u64) << clog) as f64 * lw).min(31.0) as u8;
            assert_eq!(v, want, "entry {i}");
        }
        assert_eq!(t[255], 31);
        // Halvings never decrease with idle time.
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
    }
}
