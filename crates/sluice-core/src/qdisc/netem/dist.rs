//! Delay distribution tables: the `.dist` format, the three tables iproute2
//! ships, and the generators that make them.
//!
//! A table is the inverse of a cumulative distribution with mean 0 and
//! standard deviation `NETEM_DIST_SCALE` (8192): netem picks an entry
//! uniformly and scales it by the jitter (`tabledist`). iproute2 builds
//! `normal.dist`, `pareto.dist` and `paretonormal.dist` at compile time with
//! the small NISTnet-derived programs in its `netem/` directory and installs
//! them in its library directory (`/usr/lib/tc`, or
//! `/usr/lib/x86_64-linux-gnu/tc` on Debian); `tc` reads the named file and
//! sends its numbers to the kernel. sluice embeds the three files (they are
//! byte for byte what [`generate`] prints, which the tests check, and what
//! Debian's iproute2 6.1 installs), so they work where iproute2 is absent.
//!
//! The generators are ports of normal.c, pareto.c and paretonormal.c, with
//! fdlibm's `erf` (the algorithm glibc uses) so that the floating-point
//! steps, and hence every rounded entry, are the C programs' own. The tables
//! are not exactly normalised: `pareto` (a = 3, truncated at +4 sigma) has a
//! standard deviation of 0.82 of the scale and a mean of -0.033, and
//! `paretonormal` 0.83 and -0.025; netem uses them as they are.

/// `NETEM_DIST_SCALE`: a table entry of this value is one jitter.
pub const DIST_SCALE: i64 = 8192;
/// `NETEM_DIST_MAX`: the most entries the kernel accepts.
pub const DIST_MAX: usize = 16384;

const NORMAL: &str = include_str!("normal.dist");
const PARETO: &str = include_str!("pareto.dist");
const PARETONORMAL: &str = include_str!("paretonormal.dist");

/// Why a `.dist` text could not be used (iproute2's `get_distribution`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistError {
    /// More than [`DIST_MAX`] numbers (`"%s: too much data"`).
    TooMuchData,
    /// No numbers at all (tc then fails without a message).
    Empty,
}

/// The text of a table sluice carries (`normal`, `pareto`, `paretonormal`).
pub fn builtin_text(name: &str) -> Option<&'static str> {
    match name {
        "normal" => Some(NORMAL),
        "pareto" => Some(PARETO),
        "paretonormal" => Some(PARETONORMAL),
        _ => None,
    }
}

/// Read a `.dist` file's numbers as `get_distribution` does: lines that
/// start with `#` or are empty are skipped; each other line is read with
/// `strtol(.., 0)` until something that is not a number; every value is
/// stored as a C `short` (truncated, as the C assignment does).
pub fn parse(text: &str) -> Result<Vec<i16>, DistError> {
    let mut out = Vec::new();
    for line in text.split_inclusive('\n') {
        if line.starts_with('\n') || line.starts_with('#') {
            continue;
        }
        let mut p = line;
        while let Some((x, rest)) = strtol(p) {
            if out.len() >= DIST_MAX {
                return Err(DistError::TooMuchData);
            }
            out.push(x as i16);
            p = rest;
        }
    }
    if out.is_empty() {
        return Err(DistError::Empty);
    }
    Ok(out)
}

/// C `strtol(s, &end, 0)` on 64-bit Linux: `None` when no number starts
/// `s` (end == s); out-of-range values clamp to `i64::MIN`/`MAX`.
fn strtol(s: &str) -> Option<(i64, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let neg = match b.get(i) {
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
    let hex = b.get(i) == Some(&b'0')
        && matches!(b.get(i + 1), Some(b'x' | b'X'))
        && b.get(i + 2).is_some_and(|c| c.is_ascii_hexdigit());
    let (radix, start) = if hex {
        (16, i + 2)
    } else if b.get(i) == Some(&b'0') {
        (8, i)
    } else {
        (10, i)
    };
    let mut j = start;
    let mut v: i128 = 0;
    while let Some(d) = b.get(j).and_then(|&c| (c as char).to_digit(radix)) {
        v = (v * radix as i128 + d as i128).min(1 << 64);
        j += 1;
    }
    if j == start {
        return None;
    }
    let v = if neg { -v } else { v };
    Some((v.clamp(i64::MIN as i128, i64::MAX as i128) as i64, &s[j..]))
}

/// The numbers of a table sluice carries.
pub fn builtin(name: &str) -> Option<Vec<i16>> {
    builtin_text(name).and_then(|t| parse(t).ok())
}

/// Generate one of iproute2's tables, printed in its `.dist` form, as its
/// generator programs do (`normal`, `pareto`, `paretonormal`).
pub fn generate(name: &str) -> Option<String> {
    let values = match name {
        "normal" => normal(),
        "pareto" => (0..4096).map(|k| pareto_value(65536 - 16 * k)).collect(),
        "paretonormal" => paretonormal(),
        _ => return None,
    };
    let mut s = format!("# This is the distribution table for the {name} distribution.\n");
    for (k, x) in values.iter().enumerate() {
        s.push_str(&format!(" {x}"));
        if k % 8 == 7 {
            s.push('\n');
        }
    }
    Some(s)
}

const TABLESIZE: usize = 16384;

/// normal.c's inverse table: for x from -10 to 10 in steps of 0.00005, the
/// last x whose cumulative probability rounds to each of 16385 slots.
fn normal_inverse() -> Vec<f64> {
    let mut table = vec![0.0; TABLESIZE + 1];
    let mut x = -10.0f64;
    while x < 10.05 {
        let cdf = 0.5 + 0.5 * erf(x / (2.0f64.sqrt() * 1.0));
        let i = (TABLESIZE as f64 * cdf).round_ties_even() as usize;
        table[i] = x;
        x += 0.00005;
    }
    table
}

fn normal() -> Vec<i32> {
    let t = normal_inverse();
    (0..TABLESIZE)
        .step_by(4)
        .map(|i| ((t[i] * DIST_SCALE as f64).round_ties_even() as i32).clamp(-32768, 32767))
        .collect()
}

/// pareto.c's entry for `i` in 1..=65536: the Pareto (a = 3) quantile of
/// `i / 65536`, shifted by its mean and scaled.
fn pareto_value(i: i32) -> i32 {
    let mut d = i as f64 / 65536.0;
    d = 1.0 / d.powf(1.0 / 3.0);
    d -= 1.5;
    d *= (4.0 / 3.0) * DIST_SCALE as f64;
    if d > 32767.0 {
        d = 32767.0;
    }
    d.round_ties_even() as i32
}

/// paretonormal.c: a quarter normal, three quarters Pareto, entry by entry.
fn paretonormal() -> Vec<i32> {
    let t = normal_inverse();
    (0..TABLESIZE)
        .step_by(4)
        .map(|i| {
            let normal = (t[i] * DIST_SCALE as f64).round_ties_even() as i32;
            let pareto = pareto_value(65536 - 4 * i as i32);
            ((normal + 3 * pareto) / 4).clamp(-32768, 32767)
        })
        .collect()
}

/// fdlibm's `erf` (s_erf.c), which glibc's double `erf` is.
#[allow(clippy::excessive_precision)]
fn erf(x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    const ERX: f64 = 8.45062911510467529297e-01;
    const EFX: f64 = 1.28379167095512586316e-01;
    const EFX8: f64 = 1.02703333676410069053e+00;
    const PP: [f64; 5] = [
        1.28379167095512558561e-01,
        -3.25042107247001499370e-01,
        -2.84817495755985104766e-02,
        -5.77027029648944159157e-03,
        -2.37630166566501626084e-05,
    ];
    const QQ: [f64; 5] = [
        3.97917223959155352819e-01,
        6.50222499887672944485e-02,
        5.08130628187576562776e-03,
        1.32494738004321644526e-04,
        -3.96022827877536812320e-06,
    ];
    const PA: [f64; 7] = [
        -2.36211856075265944077e-03,
        4.14856118683748331666e-01,
        -3.72207876035701323847e-01,
        3.18346619901161753674e-01,
        -1.10894694282396677476e-01,
        3.54783043256182359371e-02,
        -2.16637559486879084300e-03,
    ];
    const QA: [f64; 6] = [
        1.06420880400844228286e-01,
        5.40397917702171048937e-01,
        7.18286544141962662868e-02,
        1.26171219808761642112e-01,
        1.36370839120290507362e-02,
        1.19844998467991074170e-02,
    ];
    const RA: [f64; 8] = [
        -9.86494403484714822705e-03,
        -6.93858572707181764372e-01,
        -1.05586262253232909814e+01,
        -6.23753324503260060396e+01,
        -1.62396669462573470355e+02,
        -1.84605092906711035994e+02,
        -8.12874355063065934246e+01,
        -9.81432934416914548592e+00,
    ];
    const SA: [f64; 8] = [
        1.96512716674392571292e+01,
        1.37657754143519042600e+02,
        4.34565877475229228821e+02,
        6.45387271733267880336e+02,
        4.29008140027567833386e+02,
        1.08635005541779435134e+02,
        6.57024977031928170135e+00,
        -6.04244152148580987438e-02,
    ];
    const RB: [f64; 7] = [
        -9.86494292470009928597e-03,
        -7.99283237680523006574e-01,
        -1.77579549177547519889e+01,
        -1.60636384855821916062e+02,
        -6.37566443368389627722e+02,
        -1.02509513161107724954e+03,
        -4.83519191608651397019e+02,
    ];
    const SB: [f64; 7] = [
        3.03380607434824582924e+01,
        3.25792512996573918826e+02,
        1.53672958608443695994e+03,
        3.19985821950859553908e+03,
        2.55305040643316442583e+03,
        4.74528541206955367215e+02,
        -2.24409524465858183362e+01,
    ];
    /// Horner's rule, highest coefficient last.
    fn poly(c: &[f64], z: f64) -> f64 {
        c.iter().rev().fold(0.0, |acc, &k| k + z * acc)
    }
    let hx = (x.to_bits() >> 32) as u32 as i32;
    let ix = hx & 0x7fff_ffff;
    if ix >= 0x7ff0_0000 {
        // erf(nan) = nan, erf(+-inf) = +-1.
        let i = (((hx as u32) >> 31) << 1) as i32;
        return (1 - i) as f64 + 1.0 / x;
    }
    if ix < 0x3feb_0000 {
        // |x| < 0.84375
        if ix < 0x3e30_0000 {
            if ix < 0x0080_0000 {
                return 0.125 * (8.0 * x + EFX8 * x);
            }
            return x + EFX * x;
        }
        let z = x * x;
        let r = poly(&PP, z);
        let s = 1.0 + z * poly(&QQ, z);
        return x + x * (r / s);
    }
    if ix < 0x3ff4_0000 {
        // 0.84375 <= |x| < 1.25
        let s = x.abs() - 1.0;
        let p = poly(&PA, s);
        let q = 1.0 + s * poly(&QA, s);
        return if hx >= 0 { ERX + p / q } else { -ERX - p / q };
    }
    if ix >= 0x4018_0000 {
        // |x| >= 6
        return if hx >= 0 { 1.0 - TINY } else { TINY - 1.0 };
    }
    let ax = x.abs();
    let s = 1.0 / (ax * ax);
    let (r, ss) = if ix < 0x4006_db6e {
        (poly(&RA, s), 1.0 + s * poly(&SA, s))
    } else {
        (poly(&RB, s), 1.0 + s * poly(&SB, s))
    };
    let z = f64::from_bits(ax.to_bits() & 0xffff_ffff_0000_0000);
    let r = (-z * z - 0.5625).exp() * ((z - ax) * (z + ax) + r / ss).exp();
    if hx >= 0 {
        1.0 - r / ax
    } else {
        r / ax - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generators_print_the_embedded_tables_byte_for_byte() {
        for name in ["normal", "pareto", "paretonormal"] {
            let made = generate(name).unwrap();
            assert_eq!(made, builtin_text(name).unwrap(), "{name}");
        }
    }

    #[test]
    fn tables_have_4096_entries_with_the_documented_moments() {
        for (name, mean, sd) in [
            ("normal", -0.0008, 1.0001),
            ("pareto", -0.0335, 0.8197),
            ("paretonormal", -0.0253, 0.8339),
        ] {
            let t = builtin(name).unwrap();
            assert_eq!(t.len(), 4096);
            let n = t.len() as f64;
            let m = t.iter().map(|&x| x as f64).sum::<f64>() / n;
            let v = t.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n;
            assert!((m / 8192.0 - mean).abs() < 1e-3, "{name} mean {m}");
            assert!(
                (v.sqrt() / 8192.0 - sd).abs() < 1e-3,
                "{name} sd {}",
                v.sqrt()
            );
        }
    }

    #[test]
    fn dist_files_parse_as_get_distribution_reads_them() {
        assert_eq!(
            parse("# c\n1 2 3\n\n-4 0x10 010\n"),
            Ok(vec![1, 2, 3, -4, 16, 8])
        );
        // A line stops at the first thing that is not a number.
        assert_eq!(parse("5 x 6\n7\n"), Ok(vec![5, 7]));
        // Values become C shorts.
        assert_eq!(parse("70000 -32769\n"), Ok(vec![4464, 32767]));
        assert_eq!(parse("# nothing\n\n"), Err(DistError::Empty));
        let big = "1 ".repeat(DIST_MAX + 1);
        assert_eq!(parse(&big), Err(DistError::TooMuchData));
        assert_eq!(parse(&"1 ".repeat(DIST_MAX)).map(|v| v.len()), Ok(DIST_MAX));
    }

    #[test]
    fn erf_is_fdlibms() {
        assert_eq!(erf(0.0), 0.0);
        assert_eq!(erf(f64::INFINITY), 1.0);
        assert_eq!(erf(-f64::INFINITY), -1.0);
        assert!(erf(f64::NAN).is_nan());
        for (x, want) in [
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (2.0, 0.9953222650189527),
            (-3.0, -0.9999779095030014),
        ] {
            assert!((erf(x) - want).abs() < 1e-15, "erf({x}) = {}", erf(x));
        }
    }
}
