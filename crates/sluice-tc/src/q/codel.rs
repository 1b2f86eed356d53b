//! codel syntax (iproute2 6.1 tc/q_codel.c): `limit`, `target`, `interval`,
//! `ecn`/`noecn`, `ce_threshold`; the statistics printer.
//!
//! tc sends only what was given (and a zero limit, target or interval as
//! not given), so the kernel keeps its defaults or the current values for
//! the rest. Times are parsed by `get_time` (µs, with `s`/`ms`/`us`) and
//! printed by `sprint_time`, so the kernel's 4999 µs shows as `5ms`.

use super::get_u32;
use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::codel::{CodelOpts, CodelXstats};
use sluice_core::qdisc::{DevInfo, QdiscOpts};
use sluice_core::units::{fmt_time_us, parse_time_us};

const USAGE: &str = "Usage: ... codel [ limit PACKETS ] [ target TIME ]
\t\t [ interval TIME ] [ ecn | noecn ]
\t\t [ ce_threshold TIME ]";

fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\""))
}

/// `get_time`, or `Illegal "what"`.
pub(super) fn time(a: &mut Args, what: &str) -> CmdResult<u32> {
    parse_time_us(a.value()?).map_err(|_| illegal(what))
}

/// `codel_parse_opt`.
pub(super) fn parse(a: &mut Args, _dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    let (mut limit, mut target, mut interval) = (0u32, 0u32, 0u32);
    let mut ce_threshold = u32::MAX;
    let mut ecn = None;
    while let Some(w) = a.next() {
        match w {
            "limit" => limit = get_u32(a.value()?, 0).ok_or_else(|| illegal("limit"))?,
            "target" => target = time(a, "target")?,
            "ce_threshold" => ce_threshold = time(a, "ce_threshold")?,
            "interval" => interval = time(a, "interval")?,
            "ecn" => ecn = Some(true),
            "noecn" => ecn = Some(false),
            "help" => return Err(Fail::new(1, USAGE)),
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))),
        }
    }
    let nonzero = |v: u32| (v != 0).then_some(v);
    Ok(Some(QdiscOpts::Codel(CodelOpts {
        limit: nonzero(limit),
        target: nonzero(target),
        interval: nonzero(interval),
        ecn,
        ce_threshold: (ce_threshold != u32::MAX).then_some(ce_threshold),
    })))
}

/// A time in µs: the number in JSON, `sprint_time` in text.
pub(super) fn print_time(out: &mut Out, key: &str, us: u32) {
    out.uint(To::Json, key, "", us as u64);
    out.text(&format!("{key} {} ", fmt_time_us(us)));
}

/// `codel_print_opt`.
pub(super) fn print(o: &CodelOpts, out: &mut Out, _details: bool) {
    if let Some(l) = o.limit {
        out.uint(To::Any, "limit", &format!("limit {l}p "), l as u64);
    }
    if let Some(t) = o.target {
        print_time(out, "target", t);
    }
    if let Some(t) = o.ce_threshold {
        print_time(out, "ce_threshold", t);
    }
    if let Some(t) = o.interval {
        print_time(out, "interval", t);
    }
    if o.ecn == Some(true) {
        out.bool(To::Any, "ecn", "ecn ", true);
    }
}

/// ` drop_next X` / ` drop_next -X`, and the signed number in JSON.
pub(super) fn print_drop_next(out: &mut Out, drop_next: i32) {
    out.int(To::Json, "drop_next", "", drop_next as i64);
    let sign = if drop_next < 0 { "-" } else { "" };
    let t = fmt_time_us(drop_next.unsigned_abs());
    out.text(&format!(" drop_next {sign}{t}"));
}

/// `codel_print_xstats`, and the newline `print_qdisc` adds after it.
pub(super) fn print_xstats(x: &CodelXstats, out: &mut Out) {
    out.uint(
        To::Any,
        "count",
        &format!("  count {}", x.count),
        x.count as u64,
    );
    let lc = x.lastcount;
    out.uint(To::Any, "lastcount", &format!(" lastcount {lc}"), lc as u64);
    out.uint(To::Json, "ldelay", "", x.ldelay as u64);
    out.text(&format!(" ldelay {}", fmt_time_us(x.ldelay)));
    if x.dropping {
        out.bool(To::Any, "dropping", " dropping", true);
    }
    print_drop_next(out, x.drop_next);
    out.nl();
    let mp = x.maxpacket;
    out.uint(
        To::Any,
        "maxpacket",
        &format!("  maxpacket {mp}"),
        mp as u64,
    );
    let em = x.ecn_mark;
    out.uint(To::Any, "ecn_mark", &format!(" ecn_mark {em}"), em as u64);
    let d = x.drop_overlimit;
    out.uint(
        To::Any,
        "drop_overlimit",
        &format!(" drop_overlimit {d}"),
        d as u64,
    );
    if x.ce_mark != 0 {
        let c = x.ce_mark;
        out.uint(To::Any, "ce_mark", &format!(" ce_mark {c}"), c as u64);
    }
    out.nl();
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_core::qdisc::codel::Codel;
    use sluice_core::qdisc::Qdisc;

    fn parse_str(s: &str) -> CmdResult<CodelOpts> {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        match parse(&mut Args::new(&w), None)? {
            Some(QdiscOpts::Codel(o)) => Ok(o),
            other => panic!("{other:?}"),
        }
    }

    fn err(s: &str) -> (String, i32) {
        let f = parse_str(s).unwrap_err();
        (f.stderr, f.code)
    }

    /// What `tc qdisc show` prints for a codel created with `args`.
    fn shown(args: &str, json: bool) -> String {
        let q = Codel::new(&parse_str(args).unwrap(), &DevInfo::default()).unwrap();
        let QdiscOpts::Codel(o) = q.dump() else {
            unreachable!()
        };
        let mut out = Out::new(json, false);
        out.open("");
        print(&o, &mut out, false);
        out.close();
        out.finish()
    }

    #[test]
    fn prints_as_tc_testing_expects() {
        // codel.json 983a, 38aa, 9178, 78d1, 238a, 939c.
        assert_eq!(shown("", false), "limit 1000p target 5ms interval 100ms ");
        assert_eq!(
            shown("limit 1500", false),
            "limit 1500p target 5ms interval 100ms "
        );
        assert_eq!(
            shown("target 100ms", false),
            "limit 1000p target 100ms interval 100ms "
        );
        assert_eq!(
            shown("interval 20ms", false),
            "limit 1000p target 5ms interval 20ms "
        );
        assert_eq!(
            shown("ecn", false),
            "limit 1000p target 5ms interval 100ms ecn "
        );
        assert_eq!(
            shown("ce_threshold 20ms", false),
            "limit 1000p target 5ms ce_threshold 20ms interval 100ms "
        );
    }

    #[test]
    fn json_carries_the_microseconds() {
        assert_eq!(
            shown("ecn ce_threshold 1ms", true),
            "[{\"limit\":1000,\"target\":4999,\"ce_threshold\":999,\"interval\":99999,\"ecn\":true}]\n"
        );
    }

    #[test]
    fn sends_only_what_was_given() {
        assert_eq!(parse_str("").unwrap(), CodelOpts::default());
        assert_eq!(
            parse_str("limit 0 target 0 noecn").unwrap(),
            CodelOpts {
                ecn: Some(false),
                ..Default::default()
            }
        );
        let o = parse_str("limit 0x10 target 2ms interval 1s ce_threshold 0").unwrap();
        assert_eq!(
            (o.limit, o.target, o.interval, o.ce_threshold),
            (Some(16), Some(2000), Some(1_000_000), Some(0))
        );
    }

    #[test]
    fn parse_errors_as_iproute2() {
        // help.golden, and tc 6.1 run by hand.
        assert_eq!(err("bogus"), (format!("What is \"bogus\"?\n{USAGE}\n"), 1));
        assert_eq!(err("help"), (format!("{USAGE}\n"), 1));
        assert_eq!(err("limit -1"), ("Illegal \"limit\"\n".into(), 1));
        assert_eq!(err("target 1ns"), ("Illegal \"target\"\n".into(), 1));
        assert_eq!(err("interval x"), ("Illegal \"interval\"\n".into(), 1));
        assert_eq!(
            err("ce_threshold x"),
            ("Illegal \"ce_threshold\"\n".into(), 1)
        );
        assert_eq!(err("limit").1, 255);
        assert_eq!(
            err("help").0,
            "Usage: ... codel [ limit PACKETS ] [ target TIME ]\n\t\t [ interval TIME ] [ ecn | noecn ]\n\t\t [ ce_threshold TIME ]\n"
        );
    }

    #[test]
    fn xstats_as_iproute2() {
        let x = CodelXstats {
            maxpacket: 1514,
            count: 12,
            lastcount: 3,
            ldelay: 7250,
            drop_next: -1500,
            drop_overlimit: 2,
            ecn_mark: 5,
            dropping: true,
            ce_mark: 0,
        };
        let mut out = Out::new(false, false);
        print_xstats(&x, &mut out);
        assert_eq!(
            out.finish(),
            "  count 12 lastcount 3 ldelay 7.25ms dropping drop_next -1.5ms\n  maxpacket 1514 ecn_mark 5 drop_overlimit 2\n"
        );
        let mut out = Out::new(false, false);
        print_xstats(
            &CodelXstats {
                ce_mark: 4,
                ..Default::default()
            },
            &mut out,
        );
        assert_eq!(
            out.finish(),
            "  count 0 lastcount 0 ldelay 0us drop_next 0us\n  maxpacket 0 ecn_mark 0 drop_overlimit 0 ce_mark 4\n"
        );
        let mut out = Out::new(true, false);
        out.open("");
        print_xstats(&x, &mut out);
        out.close();
        assert_eq!(
            out.finish(),
            "[{\"count\":12,\"lastcount\":3,\"ldelay\":7250,\"dropping\":true,\"drop_next\":-1500,\
             \"maxpacket\":1514,\"ecn_mark\":5,\"drop_overlimit\":2}]\n"
        );
    }

    /// The kernel's dump of `o`, and its printout.
    fn printed(o: &CodelOpts) -> (CodelOpts, String) {
        let q = Codel::new(o, &DevInfo::default()).unwrap();
        let QdiscOpts::Codel(d) = q.dump() else {
            unreachable!()
        };
        let mut out = Out::new(false, false);
        print(&d, &mut out, true);
        (d, out.finish())
    }

    /// Two times in µs agree up to `sprint_time`'s three digits and the
    /// kernel's 1024 ns clock (which loses up to a microsecond per trip).
    fn close(a: Option<u32>, b: Option<u32>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => a.abs_diff(b) as f64 <= a as f64 * 0.005 + 2.0,
            (a, b) => a == b,
        }
    }

    fn opts() -> impl Strategy<Value = CodelOpts> {
        (
            proptest::option::of(1..5000u32),
            // Times of 2 µs or more: a 1 µs one is 0 in the kernel's 1024 ns
            // clock, prints as 0us, and tc sends no 0 target or interval.
            proptest::option::of(2..2_000_000u32),
            proptest::option::of(2..5_000_000u32),
            proptest::option::of(any::<bool>()),
            proptest::option::of(0..3_000_000u32),
        )
            .prop_map(|(limit, target, interval, ecn, ce_threshold)| CodelOpts {
                limit,
                target,
                interval,
                ecn,
                ce_threshold,
            })
    }

    proptest! {
        /// Printing a qdisc's options and giving them back to tc (with
        /// `limit Np` read as `limit N`) gives the same options, up to the
        /// printed precision of times and sizes and the kernel's clock.
        #[test]
        fn printed_options_parse_back(o in opts()) {
            let (d0, first) = printed(&o);
            let input: Vec<String> = first
                .split_whitespace()
                .map(|w| w.strip_suffix('p').filter(|n| n.parse::<u32>().is_ok()).unwrap_or(w).to_string())
                .collect();
            let again = match parse(&mut Args::new(&input), None).unwrap() {
                Some(QdiscOpts::Codel(o)) => o,
                other => panic!("{other:?}"),
            };
            let (d1, _) = printed(&again);
            prop_assert_eq!((d1.limit, d1.ecn), (d0.limit, d0.ecn));
            prop_assert!(close(d0.target, d1.target), "{:?} {:?}", d0, d1);
            prop_assert!(close(d0.interval, d1.interval), "{:?} {:?}", d0, d1);
            prop_assert!(close(d0.ce_threshold, d1.ce_threshold), "{:?} {:?}", d0, d1);
        }
    }
}
