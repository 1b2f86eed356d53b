//! pie syntax (iproute2 6.1 tc/q_pie.c): `limit`, `target`, `tupdate`,
//! `alpha`, `beta`, `ecn`/`noecn`, `bytemode`/`nobytemode`,
//! `dq_rate_estimator`/`no_dq_rate_estimator`; the statistics printer.
//!
//! tc sends only what was given (zero counts as not given) and checks
//! only that alpha and beta are at most 32; times are `get_time` µs.

use super::codel::print_time;
use super::get_u32;
use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To, J};
use sluice_core::qdisc::pie::{PieOpts, PieXstats};
use sluice_core::qdisc::{DevInfo, QdiscOpts};
use sluice_core::units::{fmt_g, fmt_time_us, parse_time_us};

const USAGE: &str = "Usage: ... pie [ limit PACKETS ] [ target TIME ]
               [ tupdate TIME ] [ alpha ALPHA ] [ beta BETA ]
               [ bytemode | nobytemode ] [ ecn | noecn ]
               [ dq_rate_estimator | no_dq_rate_estimator ]";

/// Largest alpha and beta tc accepts (`ALPHA_MAX`, `BETA_MAX`).
pub(super) const GAIN_MAX: u32 = 32;

fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\""))
}

/// A gain: `get_unsigned` at most 32.
pub(super) fn gain(v: &str, what: &str) -> CmdResult<u32> {
    get_u32(v, 0)
        .filter(|&g| g <= GAIN_MAX)
        .ok_or_else(|| illegal(what))
}

/// `pie_parse_opt`.
pub(super) fn parse(a: &mut Args, _dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    let (mut limit, mut target, mut tupdate, mut alpha, mut beta) = (0, 0, 0, 0, 0);
    let mut o = PieOpts::default();
    while let Some(w) = a.next() {
        match w {
            "limit" => limit = get_u32(a.value()?, 0).ok_or_else(|| illegal("limit"))?,
            "target" => target = parse_time_us(a.value()?).map_err(|_| illegal("target"))?,
            "tupdate" => tupdate = parse_time_us(a.value()?).map_err(|_| illegal("tupdate"))?,
            "alpha" => alpha = gain(a.value()?, "alpha")?,
            "beta" => beta = gain(a.value()?, "beta")?,
            "ecn" => o.ecn = Some(true),
            "noecn" => o.ecn = Some(false),
            "bytemode" => o.bytemode = Some(true),
            "nobytemode" => o.bytemode = Some(false),
            "dq_rate_estimator" => o.dq_rate_estimator = Some(true),
            "no_dq_rate_estimator" => o.dq_rate_estimator = Some(false),
            "help" => return Err(Fail::new(1, USAGE)),
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))),
        }
    }
    let nz = |v: u32| (v != 0).then_some(v);
    o.limit = nz(limit);
    o.target = nz(target);
    o.tupdate = nz(tupdate);
    o.alpha = nz(alpha);
    o.beta = nz(beta);
    Ok(Some(QdiscOpts::Pie(o)))
}

/// `pie_print_opt`.
pub(super) fn print(o: &PieOpts, out: &mut Out, _details: bool) {
    if let Some(l) = o.limit {
        out.uint(To::Any, "limit", &format!("limit {l}p "), l as u64);
    }
    if let Some(t) = o.target {
        print_time(out, "target", t);
    }
    if let Some(t) = o.tupdate {
        print_time(out, "tupdate", t);
    }
    if let Some(v) = o.alpha {
        out.uint(To::Any, "alpha", &format!("alpha {v} "), v as u64);
    }
    if let Some(v) = o.beta {
        out.uint(To::Any, "beta", &format!("beta {v} "), v as u64);
    }
    print_switches(o.ecn, o.bytemode, o.dq_rate_estimator, out);
}

/// `ecn `, `bytemode `, `dq_rate_estimator ` when on (pie and fq_pie).
pub(super) fn print_switches(
    ecn: Option<bool>,
    bytemode: Option<bool>,
    dq: Option<bool>,
    out: &mut Out,
) {
    for (on, name) in [
        (ecn, "ecn"),
        (bytemode, "bytemode"),
        (dq, "dq_rate_estimator"),
    ] {
        if on == Some(true) {
            out.bool(To::Any, name, &format!("{name} "), true);
        }
    }
}

/// `pie_print_xstats`, and the newline `print_qdisc` adds after it.
pub(super) fn print_xstats(x: &PieXstats, out: &mut Out) {
    let p = fmt_g(x.prob as f64 / u64::MAX as f64);
    out.item(To::Any, "prob", &format!("  prob {p}"), J::Num(p.clone()));
    out.uint(To::Json, "delay", "", x.delay as u64);
    out.text(&format!(" delay {}", fmt_time_us(x.delay)));
    if x.dq_rate_estimating {
        let r = x.avg_dq_rate;
        out.uint(
            To::Any,
            "avg_dq_rate",
            &format!(" avg_dq_rate {r}"),
            r as u64,
        );
    }
    out.nl();
    for (key, text, v) in [
        ("pkts_in", "  pkts_in", x.packets_in),
        ("overlimit", " overlimit", x.overlimit),
        ("dropped", " dropped", x.dropped),
        ("maxq", " maxq", x.maxq),
        ("ecn_mark", " ecn_mark", x.ecn_mark),
    ] {
        out.uint(To::Any, key, &format!("{text} {v}"), v as u64);
    }
    out.nl();
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::qdisc::pie::Pie;
    use sluice_core::qdisc::Qdisc;

    fn parse_str(s: &str) -> CmdResult<PieOpts> {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        match parse(&mut Args::new(&w), None)? {
            Some(QdiscOpts::Pie(o)) => Ok(o),
            other => panic!("{other:?}"),
        }
    }

    fn err(s: &str) -> (String, i32) {
        let f = parse_str(s).unwrap_err();
        (f.stderr, f.code)
    }

    fn shown(args: &str, json: bool) -> String {
        let q = Pie::new(&parse_str(args).unwrap(), &DevInfo::default()).unwrap();
        let QdiscOpts::Pie(d) = q.dump() else {
            unreachable!()
        };
        let mut out = Out::new(json, false);
        out.open("");
        print(&d, &mut out, false);
        out.close();
        out.finish()
    }

    #[test]
    fn prints_as_the_kernel_dumps() {
        // pie.json 6158: "qdisc pie 1: root refcnt 2 limit 1p".
        assert_eq!(
            shown("limit 1", false),
            "limit 1p target 15ms tupdate 15ms alpha 2 beta 20 "
        );
        assert_eq!(
            shown(
                "target 20ms tupdate 30ms alpha 4 beta 8 ecn bytemode dq_rate_estimator",
                false
            ),
            "limit 1000p target 20ms tupdate 30ms alpha 4 beta 8 ecn bytemode dq_rate_estimator "
        );
        assert_eq!(
            shown("ecn", true),
            "[{\"limit\":1000,\"target\":15000,\"tupdate\":15000,\"alpha\":2,\"beta\":20,\"ecn\":true}]\n"
        );
    }

    #[test]
    fn sends_only_what_was_given() {
        assert_eq!(parse_str("").unwrap(), PieOpts::default());
        let o = parse_str("limit 0 alpha 0 noecn no_dq_rate_estimator").unwrap();
        assert_eq!(
            o,
            PieOpts {
                ecn: Some(false),
                dq_rate_estimator: Some(false),
                ..Default::default()
            }
        );
    }

    #[test]
    fn parse_errors_as_iproute2() {
        // Checked against tc 6.1 run by hand; the usage is help.golden's.
        assert_eq!(err("alpha 33"), ("Illegal \"alpha\"\n".into(), 1));
        assert_eq!(err("beta -1"), ("Illegal \"beta\"\n".into(), 1));
        assert_eq!(err("target x"), ("Illegal \"target\"\n".into(), 1));
        assert_eq!(err("bogus"), (format!("What is \"bogus\"?\n{USAGE}\n"), 1));
        assert_eq!(err("limit").1, 255);
        assert_eq!(
            err("help").0,
            "Usage: ... pie [ limit PACKETS ] [ target TIME ]\n               [ tupdate TIME ] [ alpha ALPHA ] [ beta BETA ]\n               [ bytemode | nobytemode ] [ ecn | noecn ]\n               [ dq_rate_estimator | no_dq_rate_estimator ]\n"
        );
    }

    #[test]
    fn xstats_as_iproute2() {
        let x = PieXstats {
            prob: u64::MAX / 4,
            delay: 12_500,
            avg_dq_rate: 1_250_000,
            dq_rate_estimating: true,
            packets_in: 10,
            dropped: 2,
            overlimit: 1,
            maxq: 7,
            ecn_mark: 3,
        };
        let mut out = Out::new(false, false);
        print_xstats(&x, &mut out);
        assert_eq!(
            out.finish(),
            "  prob 0.25 delay 12.5ms avg_dq_rate 1250000\n  pkts_in 10 overlimit 1 dropped 2 maxq 7 ecn_mark 3\n"
        );
        let mut out = Out::new(false, false);
        print_xstats(
            &PieXstats {
                dq_rate_estimating: false,
                ..x
            },
            &mut out,
        );
        assert!(out.finish().starts_with("  prob 0.25 delay 12.5ms\n"));
    }

    /// Printed options given back to tc (`limit Np` read as `limit N`)
    /// give the same qdisc. Times are whole milliseconds, which the
    /// kernel's 64 ns ticks and 1 ms jiffies keep exactly.
    mod round_trip {
        use super::*;
        use proptest::prelude::*;

        fn dumped(o: &PieOpts) -> (PieOpts, String) {
            let q = Pie::new(o, &DevInfo::default()).unwrap();
            let QdiscOpts::Pie(d) = q.dump() else {
                unreachable!()
            };
            let mut out = Out::new(false, false);
            print(&d, &mut out, true);
            (d, out.finish())
        }

        proptest! {
            #[test]
            fn printed_options_parse_back(
                limit in proptest::option::of(1..100_000u32),
                target in proptest::option::of(1..1000u32),
                tupdate in proptest::option::of(1..1000u32),
                alpha in proptest::option::of(1..=32u32),
                beta in proptest::option::of(1..=32u32),
                ecn in proptest::option::of(any::<bool>()),
                bytemode in proptest::option::of(any::<bool>()),
                dq in proptest::option::of(any::<bool>()),
            ) {
                let o = PieOpts {
                    limit,
                    target: target.map(|t| t * 1000),
                    tupdate: tupdate.map(|t| t * 1000),
                    alpha,
                    beta,
                    ecn,
                    bytemode,
                    dq_rate_estimator: dq,
                };
                let (d0, text) = dumped(&o);
                let input: Vec<String> = text
                    .split_whitespace()
                    .map(|w| w.strip_suffix('p').filter(|n| n.parse::<u32>().is_ok()).unwrap_or(w).to_string())
                    .collect();
                let again = match parse(&mut Args::new(&input), None).unwrap() {
                    Some(QdiscOpts::Pie(o)) => o,
                    other => panic!("{other:?}"),
                };
                let (d1, text1) = dumped(&again);
                prop_assert_eq!(d0, d1);
                prop_assert_eq!(text, text1);
            }
        }
    }
}
