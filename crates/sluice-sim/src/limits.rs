//! What every value in a scenario may be: its type, its range, and an
//! error that names the field and what it belongs to.
//!
//! A scenario is read by people and by programs that generate it, so a
//! value out of range must be an error that says which field of which node,
//! link or workload is wrong and what it may be — never a silent
//! wrap-around (a count of `-1` read as 2^64 − 1, a port of 70000 cut to
//! 4464), a silent clamp (a `1bit` link rate rounded to 0 bytes/s, which the
//! wire takes for "no limit") or an allocation without bound. Three kinds
//! of rule, in that order:
//!
//! - **Meaningless values are refused**: a loss probability outside 0..1, a
//!   port outside 1..65535, a rate that rounds to 0 bytes/s (tc carries rates
//!   in bytes per second, so the least rate is `8bit`), a stop before a start,
//!   a count of 0.
//! - **Limits of the real tools are kept** where the simulator models them:
//!   iputils ping's least interval for a user (`MIN_USER_INTERVAL_MS`, 2 ms)
//!   and largest payload (65507 bytes), iperf3's largest UDP datagram
//!   (`MAX_UDP_BLOCKSIZE`, 65507), socket buffer (`MAX_TCP_BUFFER`, 512 MiB)
//!   and test length (`MAX_TIME`, 86400 s), Linux's ephemeral port range
//!   (32768–60999, `ip_local_port_range`) and transmit-queue count (4096,
//!   `rtnl_create_link`), the largest link speed ethtool can report (u32
//!   Mbit/s), cake's largest framing overhead (256 bytes).
//! - **Enormous but meaningful runs are estimated**: [`crate::run`] counts the
//!   packets the workloads will send (see [`PACKETS_WARN`] and
//!   [`PACKETS_MAX`]) and warns, or refuses, before running. A path's rate
//!   there is its slowest wire's: a trace counts at its mean rate, a
//!   schedule at the rate it starts with.
//!
//! Numbers are read strictly: a whole number is decimal digits (or `0x` and
//! hex digits), nothing else — no sign, no fraction, no exponent — so a
//! TOML float such as `1e9` is refused where a count is expected.

use sluice_core::time::Duration;
use sluice_core::units::{parse_link_rate, parse_size, parse_time_ns, strtod};

/// Longest virtual time any time field may hold: iperf3's `MAX_TIME`
/// (a day). Sums of such times stay far from the 584 years a nanosecond
/// clock holds.
pub const MAX_TIME: Duration = Duration::from_secs(86_400);
/// iputils ping's least interval for a user (`MIN_USER_INTERVAL_MS`).
pub const MIN_PING_INTERVAL: Duration = Duration::from_millis(2);
/// Largest ICMP/UDP payload in one IPv4 datagram: 65535 − 20 − 8 (ping's
/// "packet size too large" bound and iperf3's `MAX_UDP_BLOCKSIZE`).
pub const MAX_IP_PAYLOAD: u64 = 65_507;
/// Least socket buffer: 2048 bytes, the payload floor of Linux's
/// `SOCK_MIN_RCVBUF` (the kernel raises smaller requests to its minimum).
pub const MIN_SOCKET_BUFFER: u64 = 2048;
/// Largest socket buffer: iperf3's `MAX_TCP_BUFFER` (512 MiB; TCP's window
/// with scale 14 reaches 1 GiB, so it is always advertisable).
pub const MAX_SOCKET_BUFFER: u64 = 512 << 20;
/// Largest byte count of a transfer, page, object, request or of a page's
/// objects together: 1 TiB.
pub const MAX_TRANSFER: u64 = 1 << 40;
/// Transmit queues of a device: `rtnl_create_link` refuses more than 4096.
pub const MAX_TXQUEUES: u64 = 4096;
/// Largest framing overhead per packet: cake's `overhead` range ends at 256.
pub const MAX_OVERHEAD: u64 = 256;
/// Linux's default ephemeral port range (`net.ipv4.ip_local_port_range`).
pub const EPHEMERAL: (u16, u16) = (32768, 60999);
/// Ports in [`EPHEMERAL`]: the most flows one host can open.
pub const EPHEMERAL_PORTS: u64 = (EPHEMERAL.1 - EPHEMERAL.0 + 1) as u64;
/// Most objects of one page.
pub const MAX_OBJECTS: u64 = 100_000;
/// Most measured page loads of one web workload.
pub const MAX_REPEAT: u64 = 1_000_000;
/// Most nodes (routes take nodes² entries).
pub const MAX_NODES: usize = 1024;
/// Most links.
pub const MAX_LINKS: usize = 4096;
/// Most workloads (ping identifiers are `0x100` + the workload's index, so
/// they stay unique on every host).
pub const MAX_WORKLOADS: usize = 4096;
/// Most timed events of a scenario.
pub const MAX_EVENTS: usize = 100_000;
/// Largest trace, delay trace or schedule file read (64 MiB: a Mahimahi
/// trace of a day at 50 Mbit/s is about that).
pub const MAX_TRACE_FILE: u64 = 64 << 20;
/// Packets the workloads may be estimated to send in one run before
/// `sluice sim` warns on stderr: some tens of seconds of wall time at the
/// 1.5 to 3 million packets a second the simulator moves over one hop
/// (UDP floods of 128-byte datagrams, `sluice sim` on a 2-core Intel Xeon
/// VM, 2026-12-07: 500 Mbit/s, 9.8 M packets in 3.1 s; 1 Gbit/s into a
/// queue that drops 10%, 58.6 M packets in 40 s with a fuzzer on the other
/// core); TCP costs more per packet.
pub const PACKETS_WARN: u64 = 50_000_000;
/// Packets beyond which a run is refused: about ten minutes or more.
pub const PACKETS_MAX: u64 = 2_000_000_000;

/// A duration as a person writes it: `86400s`, `2ms`, `500us`, `7ns`.
pub fn fmt_duration(d: Duration) -> String {
    let ns = d.0;
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns >= scale && ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// A whole number in `min..=max`: decimal digits, or `0x` and hex digits.
pub fn integer(text: &str, what: &str, min: u64, max: u64) -> Result<u64, String> {
    let t = text.trim();
    let (digits, radix) = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (t, 10),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(format!(
            "{what}: {t:?} is not a whole number (digits only: no sign, fraction or exponent)"
        ));
    }
    let n = u64::from_str_radix(digits, radix).unwrap_or(u64::MAX);
    if n < min || n > max {
        return Err(format!(
            "{what}: {t} is out of range: at least {min}, at most {max}"
        ));
    }
    Ok(n)
}

/// A time in `min..=max`: tc's `get_time64` syntax (`10ms`, `1.5s`; a bare
/// number is nanoseconds).
pub fn time(text: &str, what: &str, min: Duration, max: Duration) -> Result<Duration, String> {
    let t = text.trim();
    let not_a_time = || format!("{what}: not a time: {t:?} (e.g. \"10ms\", \"1.5s\")");
    let (v, _) = strtod(t).ok_or_else(not_a_time)?;
    let ns = parse_time_ns(t).map_err(|_| not_a_time())?;
    if v.is_nan() {
        return Err(not_a_time());
    }
    if v < 0.0 {
        return Err(format!("{what}: {t} is negative"));
    }
    let d = Duration(if ns < 0 { u64::MAX } else { ns as u64 });
    if d < min || d > max {
        return Err(format!(
            "{what}: {t} is out of range: at least {}, at most {}",
            fmt_duration(min),
            fmt_duration(max)
        ));
    }
    Ok(d)
}

/// A rate, in bits per second, read as every front end reads a wire's rate
/// ([`sluice_core::units::parse_link_rate`]: tc's syntax in whole bytes per
/// second; one that rounds to 0, for the wire "no limit", is refused).
pub fn rate(text: &str, what: &str) -> Result<u64, String> {
    let t = text.trim();
    parse_link_rate(t).map_err(|e| format!("{what}: {t:?}: {e}"))
}

/// Bytes in `min..=max`: tc's sizes (`1500`, `64k`, `1m`, `10kbit`) plus
/// `KiB`/`MiB`/`GiB`.
pub fn bytes(text: &str, what: &str, min: u64, max: u64) -> Result<u64, String> {
    let t = text.trim();
    let not_a_size = || format!("{what}: not a size: {t:?} (e.g. \"1500\", \"64k\", \"4MiB\")");
    let suffixed = [("KiB", 1u64 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30)]
        .into_iter()
        .find_map(|(s, m)| t.strip_suffix(s).map(|n| (n.trim(), m)));
    let plain = !t.is_empty() && t.chars().all(|c| c.is_ascii_digit());
    let n = match suffixed {
        // Bare digits are bytes, beyond get_size's 32 bits too.
        None if plain => t.parse::<u64>().unwrap_or(u64::MAX),
        Some((n, mult)) => {
            let n = integer(n, what, 0, u64::MAX).map_err(|_| not_a_size())?;
            n.saturating_mul(mult)
        }
        None => {
            if t.starts_with('-') {
                return Err(format!("{what}: {t} is negative"));
            }
            let v = strtod(t).map(|(v, _)| v).ok_or_else(not_a_size)?;
            match parse_size(t) {
                Ok(n) => u64::from(n),
                // get_size refuses what does not fit its 32 bits: count it
                // in the unit's bytes here (the cast saturates).
                Err(_) if v.is_finite() && v > 0.0 => {
                    let unit = parse_size(&format!("1{}", &t[number_end(t)..]))
                        .map_err(|_| not_a_size())?;
                    (v * f64::from(unit)) as u64
                }
                Err(_) => return Err(not_a_size()),
            }
        }
    };
    if n < min || n > max {
        return Err(format!(
            "{what}: {t} is out of range: at least {min}, at most {max} bytes"
        ));
    }
    Ok(n)
}

/// Where the number at the start of `t` ends (its unit follows).
fn number_end(t: &str) -> usize {
    let rest = strtod(t).map_or(t, |(_, rest)| rest);
    t.len() - rest.len()
}

/// A probability, 0 to 1.
pub fn probability(v: f64, what: &str) -> Result<f64, String> {
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("{what}: {v} is not a probability (0 to 1)"));
    }
    Ok(v)
}

/// A port, 1 to 65535.
pub fn port(text: &str, what: &str) -> Result<u16, String> {
    integer(text, what, 1, u64::from(u16::MAX)).map(|p| p as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_are_digits_in_range() {
        assert_eq!(integer("16", "tos", 0, 255), Ok(16));
        assert_eq!(integer("0x10", "tos", 0, 255), Ok(16));
        for bad in ["-1", "+1", "1e9", "1000000000.0", "", "0x", "1 2"] {
            let e = integer(bad, "workload w: count", 1, 10).unwrap_err();
            assert!(e.starts_with("workload w: count: "), "{e}");
            assert!(e.contains("not a whole number"), "{bad}: {e}");
        }
        let e = integer("99999999999999999999999", "count", 1, 10).unwrap_err();
        assert!(e.contains("out of range: at least 1, at most 10"), "{e}");
        assert!(integer("0", "count", 1, 10).is_err());
    }

    #[test]
    fn rates_that_round_to_zero_bytes_are_refused() {
        // tc keeps bytes/s: 8 bit/s is one byte a second, 7 bit/s is none.
        assert_eq!(rate("8bit", "rate"), Ok(8));
        assert_eq!(rate("10mbit", "rate"), Ok(10_000_000));
        assert_eq!(
            rate("4294967294mbit", "rate"),
            Ok(sluice_core::units::MAX_LINK_RATE_BPS)
        );
        for bad in ["1bit", "7bit", "0", "0.5bit", "-1bit", "-1mbit"] {
            let e = rate(bad, "link a:eth0-b:eth0: rate").unwrap_err();
            assert!(e.starts_with("link a:eth0-b:eth0: rate: "), "{bad}: {e}");
        }
        assert!(rate("1bit", "r").unwrap_err().contains("rounds to 0"));
        for huge in ["infbit", "1e30bit", "5000tbit"] {
            assert!(rate(huge, "r").unwrap_err().contains("more than"), "{huge}");
        }
        assert!(rate("nanbit", "r").is_err());
    }

    #[test]
    fn times_and_sizes_have_ranges() {
        let d = |s| time(s, "t", Duration::ZERO, MAX_TIME);
        assert_eq!(d("10ms"), Ok(Duration::from_millis(10)));
        assert!(d("-1s").unwrap_err().contains("negative"));
        assert!(d("86401s").unwrap_err().contains("out of range"));
        assert!(d("1e300s").unwrap_err().contains("out of range"));
        assert!(d("nans").is_err());
        assert!(d("soon").unwrap_err().contains("not a time"));
        let b = |s| bytes(s, "b", 1, MAX_TRANSFER);
        assert_eq!(b("4MiB"), Ok(4 << 20));
        assert_eq!(b("64k"), Ok(64 << 10));
        assert_eq!(b("1099511627776"), Ok(MAX_TRANSFER));
        assert_eq!(b("5g"), Ok(5 << 30));
        assert!(b("1099511627777").unwrap_err().contains("out of range"));
        assert!(b("0").unwrap_err().contains("out of range"));
        assert!(b("-5").unwrap_err().contains("negative"));
        assert!(b("99999999999GiB").unwrap_err().contains("out of range"));
        assert!(b("9999999999999").unwrap_err().contains("out of range"));
        assert!(b("lots").unwrap_err().contains("not a size"));
        assert!(probability(1.5, "loss").is_err());
        assert!(probability(f64::NAN, "loss").is_err());
        assert!(port("70000", "port").unwrap_err().contains("at most 65535"));
    }
}
