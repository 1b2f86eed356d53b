//! sfq syntax (iproute2 tc/q_sfq.c with tc_red.c): `limit`, `perturb`,
//! `quantum`, `divisor`, `flows`, `depth`, `headdrop`, and per-flow RED with
//! `redflowlimit`, `min`, `max`, `avpkt`, `burst`, `probability`, `ecn`,
//! `harddrop`; the class statistics printer (`allot`).
//!
//! tc sends `struct tc_sfq_qopt_v1` only when some option was given, zeros
//! meaning "kernel default"; sluice sends the all-zero struct instead, which
//! the kernel treats the same. With any RED word, `redflowlimit` is required
//! and tc fills in what is missing after Sally Floyd's rules: `max` =
//! redflowlimit / 4, `min` = max / 3, `burst` = (2 min + max) / (3 avpkt),
//! then the EWMA weight and probability logarithms (`tc_red_eval_ewma`,
//! `tc_red_eval_P`).
//!
//! tc's warning "SFQ: WARNING. Burst N seems to be too large." (a
//! successful command with text on stderr) goes to the command's stderr.
//!
//! Deviations: the RED counters that `-s` adds to the options are not
//! printed, because the option printer is not told about `-s`. An `avpkt` of 0 crashes tc with SIGFPE; that is exit 136 here.

use super::get_u32;
use super::tc_red::{eval_ewma, eval_p, max_p, print_flags, scan_double, sigfpe};
use crate::args::{get_integer, Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::sfq::{SfqClassXstats, SfqOpts, TC_RED_ECN, TC_RED_HARDDROP};
use sluice_core::qdisc::{DevInfo, QdiscOpts};
use sluice_core::units::{fmt_g, fmt_size, parse_size};

const USAGE: &str = "Usage: ... sfq\t[ limit NUMBER ] [ perturb SECS ] [ quantum BYTES ]
\t\t[ divisor NUMBER ] [ flows NUMBER] [ depth NUMBER ]
\t\t[ headdrop ]
\t\t[ redflowlimit BYTES ] [ min BYTES ] [ max BYTES ]
\t\t[ avpkt BYTES ] [ burst PACKETS ] [ probability P ]
\t\t[ ecn ] [ harddrop ]";

fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\""))
}

/// `sfq_parse_opt`.
pub(super) fn parse(a: &mut Args, _dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    let mut o = SfqOpts::default();
    let mut red = false;
    let mut burst = 0u32;
    let mut avpkt = 1000u32;
    let mut probability = 0.02f64;
    while let Some(w) = a.next() {
        match w {
            // iproute2 names "limit" here (and "flows" for depth).
            "quantum" => o.quantum = parse_size(a.value()?).map_err(|_| illegal("limit"))?,
            "perturb" => {
                o.perturb_period = get_integer(a.value()?).ok_or_else(|| illegal("perturb"))?
            }
            "limit" => {
                o.limit = get_u32(a.value()?, 0).ok_or_else(|| illegal("limit"))?;
                if o.limit < 2 {
                    return Err(Fail::new(1, "Illegal \"limit\", must be > 1"));
                }
            }
            "divisor" => o.divisor = get_u32(a.value()?, 0).ok_or_else(|| illegal("divisor"))?,
            "flows" => o.flows = get_u32(a.value()?, 0).ok_or_else(|| illegal("flows"))?,
            "depth" => o.depth = get_u32(a.value()?, 0).ok_or_else(|| illegal("flows"))?,
            "headdrop" => o.headdrop = true,
            "redflowlimit" | "min" | "max" | "burst" => {
                let v = get_u32(a.value()?, 0).ok_or_else(|| illegal(w))?;
                match w {
                    "redflowlimit" => o.red_limit = v,
                    "min" => o.qth_min = v,
                    "max" => o.qth_max = v,
                    _ => burst = v,
                }
                red = true;
            }
            "avpkt" => {
                avpkt = parse_size(a.value()?).map_err(|_| illegal("avpkt"))?;
                red = true;
            }
            "probability" => {
                probability = scan_double(a.value()?).ok_or_else(|| illegal("probability"))?;
                red = true;
            }
            "ecn" | "harddrop" => {
                o.flags |= if w == "ecn" {
                    TC_RED_ECN
                } else {
                    TC_RED_HARDDROP
                };
                red = true;
            }
            "help" => return Err(Fail::new(1, USAGE)),
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))),
        }
    }
    if red {
        red_defaults(&mut o, burst, avpkt, probability, &mut a.notes)?;
    }
    Ok(Some(QdiscOpts::Sfq(o)))
}

/// The RED half of `sfq_parse_opt`: defaults, checks, and the logarithms.
fn red_defaults(
    o: &mut SfqOpts,
    mut burst: u32,
    avpkt: u32,
    probability: f64,
    notes: &mut String,
) -> CmdResult {
    if o.red_limit == 0 {
        return Err(Fail::new(1, "Required parameter (redflowlimit) is missing"));
    }
    if o.qth_max == 0 {
        o.qth_max = o.red_limit / 4;
    }
    if o.qth_min == 0 {
        o.qth_min = o.qth_max / 3;
    }
    if burst == 0 {
        let den = avpkt.wrapping_mul(3);
        if den == 0 {
            return Err(sigfpe());
        }
        burst = o.qth_min.wrapping_mul(2).wrapping_add(o.qth_max) / den;
    }
    if o.qth_max > o.red_limit {
        return Err(Fail::new(1, "\"max\" is larger than \"limit\""));
    }
    if o.qth_min >= o.qth_max {
        return Err(Fail::new(1, "\"min\" is not smaller than \"max\""));
    }
    o.wlog = eval_ewma(
        o.qth_min,
        burst,
        avpkt,
        "SFQ: failed to calculate EWMA constant.",
    )?;
    if o.wlog >= 10 {
        notes.push_str(&format!(
            "SFQ: WARNING. Burst {burst} seems to be too large.\n"
        ));
    }
    o.plog = eval_p(o.qth_min, o.qth_max, probability)
        .ok_or_else(|| Fail::new(1, "SFQ: failed to calculate probability."))?;
    o.max_p = max_p(probability);
    Ok(())
}

/// `sfq_print_opt`.
pub(super) fn print(o: &SfqOpts, out: &mut Out, details: bool) {
    out.uint(
        To::Any,
        "limit",
        &format!("limit {}p ", o.limit),
        o.limit as u64,
    );
    let q = o.quantum;
    out.uint(
        To::Any,
        "quantum",
        &format!("quantum {} ", fmt_size(q)),
        q as u64,
    );
    if o.depth != 0 {
        out.uint(
            To::Any,
            "depth",
            &format!("depth {} ", o.depth),
            o.depth as u64,
        );
    }
    if o.headdrop {
        out.bool(To::Any, "headdrop", "headdrop ", true);
    }
    if details {
        out.uint(
            To::Any,
            "flows",
            &format!("flows {} ", o.flows),
            o.flows as u64,
        );
    }
    out.uint(
        To::Any,
        "divisor",
        &format!("divisor {} ", o.divisor),
        o.divisor as u64,
    );
    if o.perturb_period != 0 {
        let p = o.perturb_period;
        out.int(To::Any, "perturb", &format!("perturb {p}sec "), p as i64);
    }
    if o.qth_min != 0 {
        out.uint(To::Any, "ewma", &format!("ewma {} ", o.wlog), o.wlog as u64);
        let (min, max) = (o.qth_min, o.qth_max);
        out.uint(
            To::Any,
            "min",
            &format!("min {} ", fmt_size(min)),
            min as u64,
        );
        out.uint(
            To::Any,
            "max",
            &format!("max {} ", fmt_size(max)),
            max as u64,
        );
        let p = fmt_g(o.max_p as f64 / 4294967296.0);
        let json = crate::out::J::Num(p.clone());
        out.item(To::Any, "probability", &format!("probability {p} "), json);
        print_flags(o.flags, out);
    }
}

/// `sfq_print_xstats`: a flow's remaining credit.
pub(super) fn print_xstats(x: &SfqClassXstats, out: &mut Out) {
    out.int(
        To::Any,
        "allot",
        &format!("  allot {}", x.allot),
        x.allot as i64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(s: &str) -> CmdResult<SfqOpts> {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        match parse(&mut Args::new(&w), None)? {
            Some(QdiscOpts::Sfq(o)) => Ok(o),
            other => panic!("{other:?}"),
        }
    }

    fn err(s: &str) -> (String, i32) {
        let f = parse_str(s).unwrap_err();
        (f.stderr, f.code)
    }

    fn text(o: &SfqOpts, details: bool) -> String {
        let mut out = Out::new(false, false);
        print(o, &mut out, details);
        out.finish()
    }

    /// What the kernel dumps for `o` on a 1500-byte Ethernet device, as far
    /// as these tests need it (the defaults of `sfq_init`, 128 flows).
    fn kernel_dump(mut o: SfqOpts) -> SfqOpts {
        o.quantum = if o.quantum == 0 { 1514 } else { o.quantum };
        o.divisor = if o.divisor == 0 { 1024 } else { o.divisor };
        o.depth = if o.depth == 0 { 127 } else { o.depth };
        o.flows = if o.flows == 0 { 128 } else { o.flows };
        o.limit = if o.limit == 0 { 127 } else { o.limit };
        o.red_limit = 0;
        o
    }

    #[test]
    fn bare_sfq_sends_zeros() {
        assert_eq!(parse_str("").unwrap(), SfqOpts::default());
    }

    #[test]
    fn prints_as_tc_testing_expects() {
        // tc-testing sfq.json 7482, a430, 4539, 99a0, 7389, ae23.
        let d = |s| text(&kernel_dump(parse_str(s).unwrap()), false);
        assert_eq!(d(""), "limit 127p quantum 1514b depth 127 divisor 1024 ");
        assert_eq!(
            d("quantum 9000"),
            "limit 127p quantum 9000b depth 127 divisor 1024 "
        );
        assert_eq!(
            d("divisor 512"),
            "limit 127p quantum 1514b depth 127 divisor 512 "
        );
        assert_eq!(
            d("depth 64"),
            "limit 127p quantum 1514b depth 64 divisor 1024 "
        );
        assert_eq!(
            d("headdrop"),
            "limit 127p quantum 1514b depth 127 headdrop divisor 1024 "
        );
        assert_eq!(
            d("perturb 10"),
            "limit 127p quantum 1514b depth 127 divisor 1024 perturb 10sec "
        );
    }

    #[test]
    fn red_defaults_as_iproute2() {
        // tc-testing sfq.json 6472: "... headdrop divisor 1024 ewma 6 min
        // 8000b max 60000b probability 0.2 ecn".
        let o = parse_str("redflowlimit 100000 min 8000 max 60000 probability 0.20 ecn headdrop")
            .unwrap();
        assert_eq!((o.red_limit, o.qth_min, o.qth_max), (100000, 8000, 60000));
        assert_eq!((o.wlog, o.plog, o.flags), (6, 18, TC_RED_ECN));
        assert_eq!(o.max_p, 858993459);
        assert_eq!(
            text(&kernel_dump(o), false),
            "limit 127p quantum 1514b depth 127 headdrop divisor 1024 ewma 6 min 8000b max 60000b probability 0.2 ecn "
        );
        // Only redflowlimit: max = 1/4, min = max/3.
        let o = parse_str("redflowlimit 120000 harddrop").unwrap();
        assert_eq!(
            (o.qth_min, o.qth_max, o.flags),
            (10000, 30000, TC_RED_HARDDROP)
        );
    }

    #[test]
    fn a_large_burst_is_warned_about() {
        // tc 6.1: the warning on stderr, and the command goes on.
        let w: Vec<String> = "redflowlimit 100000 burst 2000"
            .split_whitespace()
            .map(String::from)
            .collect();
        let mut a = Args::new(&w);
        assert!(parse(&mut a, None).is_ok());
        assert_eq!(a.notes, "SFQ: WARNING. Burst 2000 seems to be too large.\n");
    }

    #[test]
    fn details_add_flows() {
        let o = kernel_dump(parse_str("limit 8").unwrap());
        assert_eq!(
            text(&SfqOpts { flows: 8, ..o }, true),
            "limit 8p quantum 1514b depth 127 flows 8 divisor 1024 "
        );
    }

    #[test]
    fn parse_errors_as_iproute2() {
        // help.golden, "parse errors of qdiscs missing in kernel".
        assert_eq!(err("limit abc"), ("Illegal \"limit\"\n".into(), 1));
        assert_eq!(err("bogus"), (format!("What is \"bogus\"?\n{USAGE}\n"), 1));
        assert_eq!(err("perturb abc"), ("Illegal \"perturb\"\n".into(), 1));
        assert_eq!(err("quantum abc"), ("Illegal \"limit\"\n".into(), 1));
        assert_eq!(err("divisor abc"), ("Illegal \"divisor\"\n".into(), 1));
        assert_eq!(err("limit").1, 255);
        assert_eq!(err("help"), (format!("{USAGE}\n"), 1));
        assert_eq!(
            err("limit 1"),
            ("Illegal \"limit\", must be > 1\n".into(), 1)
        );
        assert_eq!(err("depth x"), ("Illegal \"flows\"\n".into(), 1));
        assert_eq!(
            err("ecn"),
            ("Required parameter (redflowlimit) is missing\n".into(), 1)
        );
        assert_eq!(
            err("redflowlimit 1000 max 2000"),
            ("\"max\" is larger than \"limit\"\n".into(), 1)
        );
        assert_eq!(
            err("redflowlimit 10000 min 3000 max 2000"),
            ("\"min\" is not smaller than \"max\"\n".into(), 1)
        );
        assert_eq!(
            err("redflowlimit 100000 min 8000 max 60000 burst 1"),
            (
                "tc_red_eval_ewma() burst 1 is too small ? Try burst 9\nSFQ: failed to calculate EWMA constant.\n"
                    .into(),
                1
            )
        );
        assert_eq!(
            err("redflowlimit 100000 probability 0"),
            ("SFQ: failed to calculate probability.\n".into(), 1)
        );
    }

    #[test]
    fn help_text_is_the_golden_one() {
        // help.golden, "help of qdiscs missing in kernel".
        let want = "Usage: ... sfq\t[ limit NUMBER ] [ perturb SECS ] [ quantum BYTES ]\n\
            \t\t[ divisor NUMBER ] [ flows NUMBER] [ depth NUMBER ]\n\
            \t\t[ headdrop ]\n\
            \t\t[ redflowlimit BYTES ] [ min BYTES ] [ max BYTES ]\n\
            \t\t[ avpkt BYTES ] [ burst PACKETS ] [ probability P ]\n\
            \t\t[ ecn ] [ harddrop ]\n";
        assert_eq!(err("help").0, want);
    }

    #[test]
    fn json_as_iproute2() {
        let o = parse_str("redflowlimit 100000 min 8000 max 60000 probability 0.20 ecn headdrop")
            .unwrap();
        let mut out = Out::new(true, false);
        out.open("");
        print(&kernel_dump(o), &mut out, false);
        print_xstats(&SfqClassXstats { allot: -3 }, &mut out);
        out.close();
        assert_eq!(
            out.finish(),
            "[{\"limit\":127,\"quantum\":1514,\"depth\":127,\"headdrop\":true,\"divisor\":1024,\
             \"ewma\":6,\"min\":8000,\"max\":60000,\"probability\":0.2,\"ecn\":true,\
             \"harddrop\":false,\"adaptive\":false,\"nodrop\":false,\"allot\":-3}]\n"
        );
    }
}
