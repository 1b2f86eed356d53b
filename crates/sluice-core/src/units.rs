//! Units exactly as tc(8) reads and prints them.
//!
//! iproute2 reads numbers with C's `strtod` followed by a case-insensitive unit
//! suffix (`tc_util.c`: `get_rate64`, `get_size`, `get_time`), and prints them
//! with its own rounding rules (`print_rate`, `print_size`, `print_time`). Rates
//! are carried as bytes per second, like the kernel's `tc_ratespec`; times as
//! microseconds ("time units") or nanoseconds, sizes as bytes. Reproducing the
//! printers to the byte matters because scripts and tests grep tc's output.

/// A parse failure; the caller words the message (iproute2 says things like
/// `Illegal "rate"`), so this carries nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadUnit;

/// C `strtod` on a prefix of `s`: returns the value and the unparsed rest.
/// Handles leading blanks, a sign, decimal with exponent, `0x` hex, `inf`, `nan`.
pub fn strtod(s: &str) -> Option<(f64, &str)> {
    let t = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let b = t.as_bytes();
    let mut i = 0;
    let neg = match b.first() {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let sign = if neg { -1.0 } else { 1.0 };
    let rest = &t[i..];
    let lower: String = rest
        .chars()
        .take(8)
        .collect::<String>()
        .to_ascii_lowercase();
    if lower.starts_with("infinity") {
        return Some((sign * f64::INFINITY, &rest[8..]));
    }
    if lower.starts_with("inf") {
        return Some((sign * f64::INFINITY, &rest[3..]));
    }
    if lower.starts_with("nan") {
        return Some((f64::NAN, &rest[3..]));
    }
    if (lower.starts_with("0x")) && rest.len() > 2 {
        let hb = &rest.as_bytes()[2..];
        let mut j = 0;
        let mut v = 0f64;
        let mut digits = 0;
        while j < hb.len() && hb[j].is_ascii_hexdigit() {
            v = v * 16.0 + (hb[j] as char).to_digit(16).unwrap() as f64;
            j += 1;
            digits += 1;
        }
        if j < hb.len() && hb[j] == b'.' {
            j += 1;
            let mut scale = 1.0 / 16.0;
            while j < hb.len() && hb[j].is_ascii_hexdigit() {
                v += (hb[j] as char).to_digit(16).unwrap() as f64 * scale;
                scale /= 16.0;
                j += 1;
                digits += 1;
            }
        }
        if digits > 0 {
            return Some((sign * v, &rest[2 + j..]));
        }
        // "0x" with no hex digits: strtod reads the "0".
        return Some((0.0, &rest[1..]));
    }
    let rb = rest.as_bytes();
    let mut j = 0;
    let mut mant_digits = 0;
    while j < rb.len() && rb[j].is_ascii_digit() {
        j += 1;
        mant_digits += 1;
    }
    if j < rb.len() && rb[j] == b'.' {
        j += 1;
        while j < rb.len() && rb[j].is_ascii_digit() {
            j += 1;
            mant_digits += 1;
        }
    }
    if mant_digits == 0 {
        return None;
    }
    let mut end = j;
    if j < rb.len() && (rb[j] == b'e' || rb[j] == b'E') {
        let mut k = j + 1;
        if k < rb.len() && (rb[k] == b'+' || rb[k] == b'-') {
            k += 1;
        }
        let start = k;
        while k < rb.len() && rb[k].is_ascii_digit() {
            k += 1;
        }
        if k > start {
            end = k;
        }
    }
    let v: f64 = rest[..end].parse().ok()?;
    Some((sign * v, &rest[end..]))
}

/// C `strtoul(s, &end, base)` on a prefix: value and rest; `None` if no digits.
/// Base 0 picks 8/10/16 from the prefix as C does. Overflow saturates.
pub fn strtoul(s: &str, base: u32) -> Option<(u64, &str)> {
    let t = s.trim_start_matches([' ', '\t', '\n']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (base, digits) = match base {
        0 if t.starts_with("0x") || t.starts_with("0X") => {
            if t.len() > 2 && t.as_bytes()[2].is_ascii_hexdigit() {
                (16, &t[2..])
            } else {
                (8, t)
            }
        }
        0 if t.starts_with('0') => (8, t),
        0 => (10, t),
        16 if (t.starts_with("0x") || t.starts_with("0X"))
            && t.len() > 2
            && t.as_bytes()[2].is_ascii_hexdigit() =>
        {
            (16, &t[2..])
        }
        b => (b, t),
    };
    let end = digits
        .char_indices()
        .find(|(_, c)| !c.is_digit(base))
        .map(|(i, _)| i)
        .unwrap_or(digits.len());
    if end == 0 {
        return None;
    }
    let mut v: u64 = 0;
    for c in digits[..end].chars() {
        v = v
            .saturating_mul(base as u64)
            .saturating_add(c.to_digit(base).unwrap() as u64);
    }
    if neg {
        v = v.wrapping_neg();
    }
    Some((v, &digits[end..]))
}

const RATE_SUFFIXES: &[(&str, f64)] = &[
    ("bit", 1.),
    ("Kibit", 1024.),
    ("kbit", 1000.),
    ("mibit", 1024. * 1024.),
    ("mbit", 1_000_000.),
    ("gibit", 1024. * 1024. * 1024.),
    ("gbit", 1_000_000_000.),
    ("tibit", 1024. * 1024. * 1024. * 1024.),
    ("tbit", 1_000_000_000_000.),
    ("Bps", 8.),
    ("KiBps", 8. * 1024.),
    ("KBps", 8000.),
    ("MiBps", 8. * 1024. * 1024.),
    ("MBps", 8_000_000.),
    ("GiBps", 8. * 1024. * 1024. * 1024.),
    ("GBps", 8_000_000_000.),
    ("TiBps", 8. * 1024. * 1024. * 1024. * 1024.),
    ("TBps", 8_000_000_000_000.),
];

/// `get_rate64`: a rate such as `1mbit`, `10kbps`, `512000` (bits/s) into bytes/s.
pub fn parse_rate(s: &str) -> Result<u64, BadUnit> {
    let (mut bps, rest) = strtod(s).ok_or(BadUnit)?;
    if !rest.is_empty() {
        let (_, scale) = RATE_SUFFIXES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(rest))
            .ok_or(BadUnit)?;
        bps *= scale;
    }
    if bps.is_nan() {
        return Err(BadUnit);
    }
    // C converts the double to __u64 with truncation; small negative rates
    // become 0 (and tc then says the rate is missing).
    Ok(((bps / 8.0) as i64) as u64)
}

/// The fastest wire sluice takes, in bits/s: the fastest link ethtool can
/// report (`speed` is a u32 of Mbit/s, and `u32::MAX` means unknown).
pub const MAX_LINK_RATE_BPS: u64 = (u32::MAX as u64 - 1) * 1_000_000;

/// Why a wire's rate is refused ([`parse_link_rate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkRateError {
    /// Not tc's rate syntax.
    #[error("not a rate (e.g. 10mbit, 500kbit, 1gbit)")]
    NotARate,
    /// Below zero.
    #[error("a rate cannot be negative")]
    Negative,
    /// Under 8 bit/s: tc carries rates in whole bytes per second.
    #[error("it rounds to 0 bytes/s; the least rate is 8bit (1 byte/s)")]
    RoundsToZero,
    /// Above [`MAX_LINK_RATE_BPS`].
    #[error("more than 4294967294mbit, the fastest link ethtool can report")]
    TooFast,
}

/// The rate of a wire (a simulated link, a live link, replay's wire), in
/// bits per second: tc's `get_rate64` syntax, carried as tc carries it, in
/// whole bytes per second. For a wire 0 means "no limit", so a rate that
/// rounds to 0 bytes/s is an error rather than an unlimited wire; so are
/// negative, NaN and enormous ones. Every front end reads wire rates here.
pub fn parse_link_rate(text: &str) -> Result<u64, LinkRateError> {
    let t = text.trim();
    let (v, _) = strtod(t).ok_or(LinkRateError::NotARate)?;
    let bytes = parse_rate(t).map_err(|_| LinkRateError::NotARate)?;
    if v < 0.0 {
        return Err(LinkRateError::Negative);
    }
    if bytes == 0 {
        return Err(LinkRateError::RoundsToZero);
    }
    match bytes.checked_mul(8) {
        Some(bps) if v.is_finite() && bps <= MAX_LINK_RATE_BPS => Ok(bps),
        _ => Err(LinkRateError::TooFast),
    }
}

/// `get_rate` (32-bit): like [`parse_rate`] but refuses rates that overflow u32 bytes/s.
pub fn parse_rate32(s: &str) -> Result<u32, BadUnit> {
    let (mut bps, rest) = strtod(s).ok_or(BadUnit)?;
    if !rest.is_empty() {
        let (_, scale) = RATE_SUFFIXES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(rest))
            .ok_or(BadUnit)?;
        bps *= scale;
    }
    let bytes = bps / 8.0;
    if !(0.0..=u32::MAX as f64).contains(&bytes) || bytes.is_nan() {
        return Err(BadUnit);
    }
    let r = bytes as u32;
    if r as f64 != bytes.floor() {
        return Err(BadUnit);
    }
    Ok(r)
}

/// `get_size`: `2048`, `10k`, `10kb`, `1mbit` (=131072 bytes), `1m`, `1g`.
pub fn parse_size(s: &str) -> Result<u32, BadUnit> {
    let (mut sz, rest) = strtod(s).ok_or(BadUnit)?;
    if !rest.is_empty() {
        let r = rest.to_ascii_lowercase();
        sz *= match r.as_str() {
            "kb" | "k" => 1024.,
            "gb" | "g" => 1024. * 1024. * 1024.,
            "gbit" => 1024. * 1024. * 1024. / 8.,
            "mb" | "m" => 1024. * 1024.,
            "mbit" => 1024. * 1024. / 8.,
            "kbit" => 1024. / 8.,
            "b" => 1.,
            _ => return Err(BadUnit),
        };
    }
    // get_size's overflow check: what the conversion kept must be the
    // value's floor, so negative and too large sizes are refused.
    let size = c_double_to_u32(sz);
    if size as f64 != sz.floor() {
        return Err(BadUnit);
    }
    Ok(size)
}

/// C's conversion of a double to `unsigned int` as x86-64 compilers emit it
/// (via a 64-bit signed conversion, then truncation): a value outside the
/// signed 64-bit range (or NaN) converts to `i64::MIN`, whose low half is 0
/// (tc 6.1 then reads `latency 1e30s` as no latency at all).
fn c_double_to_u32(v: f64) -> u32 {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    if !(-TWO_POW_63..TWO_POW_63).contains(&v) {
        return 0;
    }
    (v as i64) as u32
}

/// `get_time`: `50ms`, `1s`, `200us`, bare numbers are microseconds. Result in µs.
pub fn parse_time_us(s: &str) -> Result<u32, BadUnit> {
    let (mut t, rest) = strtod(s).ok_or(BadUnit)?;
    if !rest.is_empty() {
        let r = rest.to_ascii_lowercase();
        t *= match r.as_str() {
            "s" | "sec" | "secs" => 1e6,
            "ms" | "msec" | "msecs" => 1e3,
            "us" | "usec" | "usecs" => 1.,
            _ => return Err(BadUnit),
        };
    }
    Ok(c_double_to_u32(t))
}

/// `get_time64`: a time in nanoseconds; a bare number is nanoseconds.
/// Out-of-range values become `i64::MIN`, as C's conversion does on x86-64.
pub fn parse_time_ns(s: &str) -> Result<i64, BadUnit> {
    let (mut t, rest) = strtod(s).ok_or(BadUnit)?;
    if !rest.is_empty() {
        t *= match rest.to_ascii_lowercase().as_str() {
            "s" | "sec" | "secs" => 1e9,
            "ms" | "msec" | "msecs" => 1e6,
            "us" | "usec" | "usecs" => 1e3,
            "ns" | "nsec" | "nsecs" => 1.0,
            _ => return Err(BadUnit),
        };
    }
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    Ok(if (-TWO_POW_63..TWO_POW_63).contains(&t) {
        t as i64
    } else {
        i64::MIN
    })
}

/// C's `%g` for the values tc prints with it (six significant digits).
pub fn fmt_g(v: f64) -> String {
    fmt_g_prec(v, 6)
}

/// C's `%.{prec}g`: `prec` significant digits, fixed or exponent notation by
/// the exponent after rounding, trailing zeros removed.
pub fn fmt_g_prec(v: f64, prec: usize) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_nan() {
            "nan".into()
        } else if v.is_infinite() {
            if v < 0.0 {
                "-inf".into()
            } else {
                "inf".into()
            }
        } else {
            "0".into()
        };
    }
    let p = prec.max(1);
    let e_form = format!("{:.*e}", p - 1, v);
    let (mant, exp) = e_form.split_once('e').unwrap_or((&e_form, "0"));
    let x: i32 = exp.parse().unwrap_or(0);
    if x < -4 || x >= p as i32 {
        let m = trim_frac_zeros(mant);
        format!("{}e{}{:02}", m, if x < 0 { '-' } else { '+' }, x.abs())
    } else {
        let decimals = (p as i32 - 1 - x).max(0) as usize;
        trim_frac_zeros(&format!("{:.*}", decimals, v)).to_string()
    }
}

fn trim_frac_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// `print_rate`: bytes/s printed as bits with the largest unit that keeps it exact
/// (or, at 1000 of a unit and above, truncated): `1Mbit`, `220Kbit`, `1600Kbit`.
pub fn fmt_rate(bytes_per_sec: u64) -> String {
    fmt_rate_base(bytes_per_sec, false)
}

/// `print_rate` under `tc -iec`: powers of 1024, `Kibit`, `Mibit`.
pub fn fmt_rate_iec(bytes_per_sec: u64) -> String {
    fmt_rate_base(bytes_per_sec, true)
}

fn fmt_rate_base(bytes_per_sec: u64, iec: bool) -> String {
    const UNITS: [&str; 5] = ["", "K", "M", "G", "T"];
    let kilo: u64 = if iec { 1024 } else { 1000 };
    let mut rate = bytes_per_sec.wrapping_shl(3);
    let mut i = 0;
    while i < UNITS.len() - 1 {
        if rate < kilo {
            break;
        }
        if !rate.is_multiple_of(kilo) && rate < 1000 * kilo {
            break;
        }
        rate /= kilo;
        i += 1;
    }
    format!(
        "{}{}{}bit",
        rate,
        UNITS[i],
        if iec && i > 0 { "i" } else { "" }
    )
}

/// `print_size`: `1514b`, `6Kb`, `2Mb` (within 16 bytes of a KiB, 1 KiB of a MiB).
pub fn fmt_size(sz: u32) -> String {
    let tmp = sz as f64;
    let mb = 1024.0 * 1024.0;
    if sz >= 1024 * 1024 && (mb * (tmp / mb).round_ties_even() - tmp).abs() < 1024.0 {
        format!("{}Mb", fmt_g((tmp / mb).round_ties_even()))
    } else if sz >= 1024 && (1024.0 * (tmp / 1024.0).round_ties_even() - tmp).abs() < 16.0 {
        format!("{}Kb", fmt_g((tmp / 1024.0).round_ties_even()))
    } else {
        format!("{}b", sz)
    }
}

/// `print_time` for microsecond values: `50ms`, `49.8ms`, `1s`, `4.23e+03s`, `200us`.
pub fn fmt_time_us(us: u32) -> String {
    let t = us as f64;
    if t >= 1e6 {
        format!("{}s", fmt_g_prec(t / 1e6, 3))
    } else if t >= 1e3 {
        format!("{}ms", fmt_g_prec(t / 1e3, 3))
    } else {
        format!("{}us", us)
    }
}

/// `print_time64`/`sprint_time64`: three significant digits, `1ms`, `1.5s`, `250us`, `100ns`.
pub fn fmt_time_ns(ns: i64) -> String {
    let t = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{}s", fmt_g_prec(t / 1e9, 3))
    } else if ns >= 1_000_000 {
        format!("{}ms", fmt_g_prec(t / 1e6, 3))
    } else if ns >= 1_000 {
        format!("{}us", fmt_g_prec(t / 1e3, 3))
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_as_tc_does() {
        assert_eq!(parse_rate("1mbit"), Ok(125_000));
        assert_eq!(parse_rate("220kbit"), Ok(27_500));
        assert_eq!(parse_rate("10kbps"), Ok(10_000)); // kilobytes per second
        assert_eq!(parse_rate("1Mbit"), Ok(125_000));
        assert_eq!(parse_rate("8000"), Ok(1000));
        assert_eq!(parse_rate("1.5mbit"), Ok(187_500));
        assert_eq!(parse_rate("40gbit"), Ok(5_000_000_000));
        assert!(parse_rate("abc").is_err());
        assert!(parse_rate("10furlongs").is_err());
    }

    #[test]
    fn sizes_and_times_parse_as_tc_does() {
        assert_eq!(parse_size("2048"), Ok(2048));
        assert_eq!(parse_size("10k"), Ok(10240));
        assert_eq!(parse_size("10kb"), Ok(10240));
        assert_eq!(parse_size("1mbit"), Ok(131072));
        assert!(parse_size("10q").is_err());
        // get_size's overflow check, as tc 6.1 answers `pfifo limit V`.
        assert_eq!(parse_size("1.5"), Ok(1));
        assert_eq!(parse_size("-0"), Ok(0));
        assert_eq!(parse_size("4294967295"), Ok(u32::MAX));
        for bad in ["-1", "-0.5", "4294967296", "4g", "nan", "inf"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_time_us("50ms"), Ok(50_000));
        assert_eq!(parse_time_us("1s"), Ok(1_000_000));
        assert_eq!(parse_time_us("200"), Ok(200));
        assert_eq!(parse_time_ns("5ms"), Ok(5_000_000));
        assert_eq!(parse_time_ns("100ns"), Ok(100));
        assert_eq!(parse_time_ns("100"), Ok(100)); // get_time64: bare numbers are ns
    }

    #[test]
    fn printers_match_iproute2() {
        assert_eq!(fmt_rate(27_500), "220Kbit");
        assert_eq!(fmt_rate(200_000), "1600Kbit");
        assert_eq!(fmt_rate(100_000), "800Kbit");
        assert_eq!(fmt_rate(125_000), "1Mbit");
        assert_eq!(fmt_rate(1), "8bit");
        assert_eq!(fmt_rate_iec(125_000), "1000000bit"); // tests/golden/batch.golden, -iec
        assert_eq!(fmt_rate_iec(128 * 1024), "1Mibit");
        assert_eq!(fmt_size(6144), "6Kb");
        assert_eq!(fmt_size(1514), "1514b");
        assert_eq!(fmt_size(1599), "1599b");
        assert_eq!(fmt_size(30720), "30Kb");
        assert_eq!(fmt_size(2 * 1024 * 1024), "2Mb");
        assert_eq!(fmt_time_us(50_000), "50ms");
        assert_eq!(fmt_time_us(49_800), "49.8ms");
        assert_eq!(fmt_time_us(81_920), "81.9ms");
        assert_eq!(fmt_time_us(10_000_000), "10s");
        assert_eq!(fmt_time_us(4_230_000_000), "4.23e+03s");
        assert_eq!(fmt_g_prec(999.6, 3), "1e+03");
        assert_eq!(fmt_time_us(999), "999us");
        assert_eq!(fmt_time_ns(5_000_000), "5ms");
        assert_eq!(fmt_time_ns(1_500_000_000), "1.5s");
        assert_eq!(fmt_g(1234567.0), "1.23457e+06");
        assert_eq!(fmt_g(30.0), "30");
    }
}
