//! HFSC syntax (iproute2 tc/q_hfsc.c): qdisc `default CLASSID`; class
//! `rt`/`ls`/`sc`/`ul` service curves given as `[m1 BPS] [d TIME] m2 BPS`
//! or `[umax BYTES] [dmax TIME] rate BPS`; printing of curves and of the
//! class statistics.
//!
//! iproute2 6.1 prints HFSC with plain `fprintf`, so under `-j` its words
//! land verbatim inside the JSON text; sluice writes them there too.

use super::get_u16;
use crate::args::{incomplete, matches, Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::hfsc::{HfscClassOpts, HfscClassXstats, HfscOpts, ServiceCurve};
use sluice_core::qdisc::{ClassOpts, QdiscOpts};
use sluice_core::units::{fmt_time_us, parse_rate32, parse_size, parse_time_us};

const QDISC_USAGE: &str = "Usage: ... hfsc [ default CLASSID ]

 default: default class for unclassified packets
";

const CLASS_USAGE: &str = "Usage: ... hfsc [ [ rt SC ] [ ls SC ] | [ sc SC ] ] [ ul SC ]

SC := [ [ m1 BPS ] d SEC ] m2 BPS

 m1 : slope of first segment
 d  : x-coordinate of intersection
 m2 : slope of second segment

Alternative format:

SC := [ [ umax BYTE ] dmax SEC ] rate BPS

 umax : maximum unit of work
 dmax : maximum delay
 rate : rate

Remarks:
 - at least one of 'rt', 'ls' or 'sc' must be specified
 - 'ul' can only be specified with 'ls' or 'sc'

";

/// Microseconds per second (`TIME_UNITS_PER_SEC`).
const TIME_UNITS_PER_SEC: u32 = 1_000_000;

fn illegal(what: &str) -> String {
    format!("HFSC: Illegal \"{what}\"\n")
}

/// `hfsc_parse_opt`.
pub(super) fn parse_qdisc(a: &mut Args) -> CmdResult<QdiscOpts> {
    let mut o = HfscOpts::default();
    while let Some(w) = a.next() {
        if matches(w, "default") {
            let v = a.value()?;
            if o.defcls != 0 {
                return Err(Fail::new(1, "HFSC: Double \"default\""));
            }
            o.defcls = get_u16(v, 16).ok_or_else(|| Fail::new(1, illegal("default")))?;
        } else if matches(w, "help") {
            return Err(Fail::new(1, QDISC_USAGE));
        } else {
            return Err(Fail::new(
                1,
                format!("HFSC: What is \"{w}\" ?\n{QDISC_USAGE}"),
            ));
        }
    }
    Ok(QdiscOpts::Hfsc(o))
}

/// How reading one curve ended: parsed, or not (with what tc printed on
/// the way), or tc exited outright.
enum Sc {
    Ok(ServiceCurve, usize),
    No(String),
}

/// `hfsc_get_sc1`: `[m1 BPS] [d TIME] m2 BPS` from word `i`; on success the
/// index of the last word used.
fn get_sc1(w: &[String], mut i: usize) -> CmdResult<Sc> {
    let word = |i: usize| w.get(i).map(String::as_str).ok_or_else(incomplete);
    let (mut m1, mut d) = (0u32, 0u32);
    if matches(word(i)?, "m1") {
        i += 1;
        match parse_rate32(word(i)?) {
            Ok(v) => m1 = v,
            Err(_) => return Ok(Sc::No(illegal("m1"))),
        }
        i += 1;
        word(i)?;
    }
    if matches(word(i)?, "d") {
        i += 1;
        match parse_time_us(word(i)?) {
            Ok(v) => d = v,
            Err(_) => return Ok(Sc::No(illegal("d"))),
        }
        i += 1;
        word(i)?;
    }
    if !matches(word(i)?, "m2") {
        return Ok(Sc::No(String::new()));
    }
    i += 1;
    let m2 = match parse_rate32(word(i)?) {
        Ok(v) => v,
        Err(_) => return Ok(Sc::No(illegal("m2"))),
    };
    Ok(Sc::Ok(ServiceCurve { m1, d, m2 }, i))
}

/// C's conversion of a non-negative double to `unsigned int` on x86-64.
fn c_uint(v: f64) -> u32 {
    (v as i64) as u32
}

/// `hfsc_get_sc2`: `[umax BYTES] [dmax TIME] rate BPS`, turned into m1 d m2
/// the way tc does it (a concave curve when `umax/dmax` exceeds the rate).
fn get_sc2(w: &[String], mut i: usize) -> CmdResult<Sc> {
    let word = |i: usize| w.get(i).map(String::as_str).ok_or_else(incomplete);
    let (mut umax, mut dmax) = (0u32, 0u32);
    if matches(word(i)?, "umax") {
        i += 1;
        match parse_size(word(i)?) {
            Ok(v) => umax = v,
            Err(_) => return Ok(Sc::No(illegal("umax"))),
        }
        i += 1;
        word(i)?;
    }
    if matches(word(i)?, "dmax") {
        i += 1;
        match parse_time_us(word(i)?) {
            Ok(v) => dmax = v,
            Err(_) => return Ok(Sc::No(illegal("dmax"))),
        }
        i += 1;
        word(i)?;
    }
    if !matches(word(i)?, "rate") {
        return Ok(Sc::No(String::new()));
    }
    i += 1;
    let rate = match parse_rate32(word(i)?) {
        Ok(v) => v,
        Err(_) => return Ok(Sc::No(illegal("rate"))),
    };
    if umax != 0 && dmax == 0 {
        return Ok(Sc::No("HFSC: umax given but dmax is zero.\n".into()));
    }
    let burst_rate = if dmax != 0 {
        (umax as f64 * TIME_UNITS_PER_SEC as f64 / dmax as f64).ceil()
    } else {
        0.0
    };
    let sc = if dmax != 0 && burst_rate > rate as f64 {
        ServiceCurve {
            m1: c_uint(burst_rate),
            d: dmax,
            m2: rate,
        }
    } else {
        if rate == 0 {
            // tc computes umax * 10^6 / rate in integers and dies of SIGFPE.
            return Err(Fail::new(
                136,
                "Floating point exception (tc divides by the zero rate)",
            ));
        }
        // Unsigned 32-bit arithmetic, as tc does it.
        let d = dmax.wrapping_sub(umax.wrapping_mul(TIME_UNITS_PER_SEC) / rate);
        ServiceCurve { m1: 0, d, m2: rate }
    };
    Ok(Sc::Ok(sc, i))
}

/// `hfsc_get_sc`: a curve starting at word `i`.
fn get_sc(w: &[String], i: usize) -> CmdResult<Result<(ServiceCurve, usize), String>> {
    let mut said = String::new();
    let (sc, end) = match get_sc1(w, i)? {
        Sc::Ok(sc, end) => (sc, end),
        Sc::No(msg) => {
            said.push_str(&msg);
            match get_sc2(w, i)? {
                Sc::Ok(sc, end) => (sc, end),
                Sc::No(msg) => {
                    said.push_str(&msg);
                    return Ok(Err(said));
                }
            }
        }
    };
    if sc.m1 == 0 && sc.m2 == 0 {
        said.push_str("HFSC: Service Curve has two zero slopes\n");
        return Ok(Err(said));
    }
    Ok(Ok((sc, end)))
}

/// `hfsc_parse_class_opt`.
pub(super) fn parse_class(a: &mut Args) -> CmdResult<ClassOpts> {
    let w: Vec<String> = std::iter::from_fn(|| a.next().map(str::to_string)).collect();
    let mut o = HfscClassOpts::default();
    let mut i = 0;
    while i < w.len() {
        let word = w[i].as_str();
        let name = ["rt", "ls", "sc", "ul"]
            .into_iter()
            .find(|k| matches(word, k));
        match name {
            Some(name) => {
                if i + 1 >= w.len() {
                    return Err(incomplete());
                }
                let (sc, end) = match get_sc(&w, i + 1)? {
                    Ok(v) => v,
                    Err(said) => return Err(Fail::new(1, format!("{said}{}", illegal(name)))),
                };
                match name {
                    "rt" => o.rsc = Some(sc),
                    "ls" => o.fsc = Some(sc),
                    "sc" => {
                        o.rsc = Some(sc);
                        o.fsc = Some(sc);
                    }
                    _ => o.usc = Some(sc),
                }
                i = end + 1;
            }
            None if matches(word, "help") => return Err(Fail::new(1, CLASS_USAGE)),
            None => {
                return Err(Fail::new(
                    1,
                    format!("HFSC: What is \"{word}\" ?\n{CLASS_USAGE}"),
                ))
            }
        }
    }
    if o.rsc.is_none() && o.fsc.is_none() && o.usc.is_none() {
        return Err(Fail::new(
            1,
            format!("HFSC: no parameters given\n{CLASS_USAGE}"),
        ));
    }
    if o.usc.is_some() && o.fsc.is_none() {
        return Err(Fail::new(
            1,
            format!(
                "HFSC: Upper-limit Service Curve without Link-Share Service Curve\n{CLASS_USAGE}"
            ),
        ));
    }
    Ok(ClassOpts::Hfsc(o))
}

/// `hfsc_print_opt`.
pub(super) fn print_qdisc(o: &HfscOpts, out: &mut Out) {
    if o.defcls != 0 {
        out.raw(&format!("default {:x} ", o.defcls));
    }
}

fn print_sc(out: &mut Out, name: &str, sc: &ServiceCurve) {
    let s = format!(
        "{name} m1 {} d {} m2 {} ",
        out.rate(sc.m1 as u64),
        fmt_time_us(sc.d),
        out.rate(sc.m2 as u64)
    );
    out.raw(&s);
}

/// `hfsc_print_class_opt`.
pub(super) fn print_class(o: &HfscClassOpts, out: &mut Out) {
    match (&o.rsc, &o.fsc) {
        (Some(r), Some(f)) if r == f => print_sc(out, "sc", r),
        (r, f) => {
            if let Some(r) = r {
                print_sc(out, "rt", r);
            }
            if let Some(f) = f {
                print_sc(out, "ls", f);
            }
        }
    }
    if let Some(u) = &o.usc {
        print_sc(out, "ul", u);
    }
}

/// `hfsc_print_xstats`.
pub(super) fn print_xstats(x: &HfscClassXstats, out: &mut Out) {
    let mut s = format!(" period {} ", x.period);
    if x.work != 0 {
        s.push_str(&format!("work {} bytes ", x.work));
    }
    if x.rtwork != 0 {
        s.push_str(&format!("rtwork {} bytes ", x.rtwork));
    }
    s.push_str(&format!("level {} \n", x.level));
    out.raw(&s);
    let _ = To::Any;
}
