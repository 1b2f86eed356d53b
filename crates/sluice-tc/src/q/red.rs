//! red syntax (iproute2 6.1 tc/q_red.c with tc_red.c): `limit`, `min`,
//! `max`, `avpkt`, `burst`, `probability`, `bandwidth`, `ecn`, `harddrop`,
//! `nodrop`, `adaptive` (or `adaptative`); the statistics printer.
//!
//! `limit` and `avpkt` are required. Missing thresholds follow Sally
//! Floyd's rules (`max` = 3 `min`, or `limit` / 4; `min` = `max` / 3), a
//! missing burst is `(2 min + max) / (3 avpkt)`, a missing bandwidth is
//! 10 Mbit/s (tc says so on stderr); then tc computes `Wlog`, `Plog`, the
//! idle-damping table ([`super::tc_red`]) and `max_P`, and sends the flags
//! as a bitfield (`TCA_RED_FLAGS`), not in `tc_red_qopt.flags`.
//!
//! Deviations: `qevent early_drop|mark block IDX` is refused (sluice has no
//! shared blocks bound to qdisc events). A bandwidth may be a percentage of
//! the device's link speed, as tc reads it (`bandwidth 10%`).

use super::get_u32;
use super::tc_red::{
    eval_ewma, eval_idle_damping, eval_p, max_p, print_flags, scan_double, sigfpe,
};
use crate::args::{after, percent_rate, Args, CmdResult, Fail};
use crate::out::{Out, To, J};
use sluice_core::qdisc::red::{RedFlagsBf, RedOpts, RedXstats, TC_RED_SUPPORTED_FLAGS};
use sluice_core::qdisc::red_law::{TC_RED_ADAPTATIVE, TC_RED_ECN, TC_RED_HARDDROP, TC_RED_NODROP};
use sluice_core::qdisc::{DevInfo, QdiscOpts};
use sluice_core::units::{fmt_g, fmt_size, parse_rate32, parse_size};

const USAGE: &str =
    "Usage: ... red\tlimit BYTES [min BYTES] [max BYTES] avpkt BYTES [burst PACKETS]
\t\t[adaptive] [probability PROBABILITY] [bandwidth KBPS]
\t\t[ecn] [harddrop] [nodrop]
\t\t[qevent early_drop block IDX] [qevent mark block IDX]";

fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\""))
}

/// `bandwidth RATE`: `get_rate`, or a percentage of the device's speed.
pub(super) fn bandwidth(v: &str, dev: Option<&DevInfo>) -> CmdResult<u32> {
    let text = match v.contains('%') {
        true => percent_rate(v, dev).map_err(|pre| after(pre, illegal("bandwidth")))?,
        false => v.to_string(),
    };
    parse_rate32(&text).map_err(|_| illegal("bandwidth"))
}

/// `red_parse_opt`.
pub(super) fn parse(a: &mut Args, dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    let mut o = RedOpts::default();
    let mut flags = 0u8;
    let (mut burst, mut avpkt, mut rate) = (0u32, 0u32, 0u32);
    let mut probability = 0.02f64;
    while let Some(w) = a.next() {
        match w {
            "limit" => o.limit = parse_size(a.value()?).map_err(|_| illegal("limit"))?,
            "min" => o.qth_min = parse_size(a.value()?).map_err(|_| illegal("min"))?,
            "max" => o.qth_max = parse_size(a.value()?).map_err(|_| illegal("max"))?,
            "burst" => burst = get_u32(a.value()?, 0).ok_or_else(|| illegal("burst"))?,
            "avpkt" => avpkt = parse_size(a.value()?).map_err(|_| illegal("avpkt"))?,
            "probability" => {
                probability = scan_double(a.value()?).ok_or_else(|| illegal("probability"))?
            }
            "bandwidth" => rate = bandwidth(a.value()?, dev)?,
            "ecn" => flags |= TC_RED_ECN,
            "harddrop" => flags |= TC_RED_HARDDROP,
            "nodrop" => flags |= TC_RED_NODROP,
            "adaptative" | "adaptive" => flags |= TC_RED_ADAPTATIVE,
            w if crate::args::matches(w, "qevent") => {
                let what = a.value()?;
                return Err(Fail::new(
                    1,
                    format!(
                        "qevent \"{what}\": RED qevents (shared blocks run on early drops and marks) are not supported by sluice"
                    ),
                ));
            }
            "help" => return Err(Fail::new(1, USAGE)),
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))),
        }
    }
    if o.limit == 0 || avpkt == 0 {
        return Err(Fail::new(
            1,
            "RED: Required parameter (limit, avpkt) is missing",
        ));
    }
    if o.qth_max == 0 {
        o.qth_max = if o.qth_min != 0 {
            o.qth_min.wrapping_mul(3)
        } else {
            o.limit / 4
        };
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
    if rate == 0 {
        rate = 1_250_000;
        a.notes.push_str("RED: set bandwidth to 10Mbit\n");
    }
    o.wlog = eval_ewma(
        o.qth_min,
        burst,
        avpkt,
        "RED: failed to calculate EWMA constant.",
    )?;
    if o.wlog >= 10 {
        a.notes.push_str(&format!(
            "RED: WARNING. Burst {burst} seems to be too large.\n"
        ));
    }
    o.plog = eval_p(o.qth_min, o.qth_max, probability)
        .ok_or_else(|| Fail::new(1, "RED: failed to calculate probability."))?;
    let (scell_log, stab) = eval_idle_damping(o.wlog, avpkt, rate as u64)
        .ok_or_else(|| Fail::new(1, "RED: failed to calculate idle damping table."))?;
    o.scell_log = scell_log;
    o.stab = Some(stab.to_vec());
    o.max_p = Some(max_p(probability));
    o.flags_bf = Some(RedFlagsBf {
        value: flags as u32,
        selector: TC_RED_SUPPORTED_FLAGS as u32,
    });
    Ok(Some(QdiscOpts::Red(o)))
}

/// `red_print_opt`.
pub(super) fn print(o: &RedOpts, out: &mut Out, details: bool) {
    let flags = o.flags_bf.map_or(o.flags, |bf| bf.value as u8);
    out.uint(To::Json, "limit", "", o.limit as u64);
    out.text(&format!("limit {} ", fmt_size(o.limit)));
    out.uint(To::Json, "min", "", o.qth_min as u64);
    out.text(&format!("min {} ", fmt_size(o.qth_min)));
    out.uint(To::Json, "max", "", o.qth_max as u64);
    out.text(&format!("max {} ", fmt_size(o.qth_max)));
    print_flags(flags, out);
    if details {
        print_details(o.wlog, o.max_p.unwrap_or(0), o.plog, o.scell_log, out);
    }
}

/// The `-d` tail red and choke share: `ewma`, `probability` (or `Plog`
/// when the kernel sent no `max_P`), `Scell_log`.
pub(super) fn print_details(wlog: u8, max_p: u32, plog: u8, scell_log: u8, out: &mut Out) {
    out.uint(To::Any, "ewma", &format!("ewma {wlog} "), wlog as u64);
    if max_p != 0 {
        let p = fmt_g(max_p as f64 / 4294967296.0);
        out.item(
            To::Any,
            "probability",
            &format!("probability {p} "),
            J::Num(p.clone()),
        );
    } else {
        out.uint(To::Any, "Plog", &format!("Plog {plog} "), plog as u64);
    }
    out.uint(
        To::Any,
        "Scell_log",
        &format!("Scell_log {scell_log}"),
        scell_log as u64,
    );
}

/// `red_print_xstats`, and the newline `print_qdisc` adds after it.
pub(super) fn print_xstats(x: &RedXstats, out: &mut Out) {
    out.uint(
        To::Any,
        "marked",
        &format!("  marked {} ", x.marked),
        x.marked as u64,
    );
    out.uint(
        To::Any,
        "early",
        &format!("early {} ", x.early),
        x.early as u64,
    );
    out.uint(
        To::Any,
        "pdrop",
        &format!("pdrop {} ", x.pdrop),
        x.pdrop as u64,
    );
    out.uint(
        To::Any,
        "other",
        &format!("other {} ", x.other),
        x.other as u64,
    );
    out.nl();
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::qdisc::red::Red;
    use sluice_core::qdisc::Qdisc;

    fn parse_str(s: &str) -> CmdResult<(RedOpts, String)> {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        let mut a = Args::new(&w);
        match parse(&mut a, None)? {
            Some(QdiscOpts::Red(o)) => Ok((o, a.notes)),
            other => panic!("{other:?}"),
        }
    }

    fn err(s: &str) -> (String, i32) {
        let f = parse_str(s).unwrap_err();
        (f.stderr, f.code)
    }

    /// What `tc qdisc show` prints for a red created with `args`.
    fn shown(args: &str, details: bool, json: bool) -> String {
        let (o, _) = parse_str(args).unwrap();
        let q = Red::new(&o, &DevInfo::default()).unwrap();
        let QdiscOpts::Red(d) = q.dump() else {
            unreachable!()
        };
        let mut out = Out::new(json, false);
        out.open("");
        print(&d, &mut out, details);
        out.close();
        out.finish()
    }

    #[test]
    fn prints_as_tc_testing_expects() {
        // red.json 8b6e, 342e, 2d4b, 650f, 5f15, 53e8, af8e.
        let base = "limit 1M avpkt 1500 min 100K max 300K";
        let cases = [
            ("", ""),
            ("adaptive", "adaptive "),
            ("ecn", "ecn "),
            ("ecn adaptive", "ecn adaptive "),
            ("ecn harddrop", "ecn harddrop "),
            ("ecn nodrop", "ecn nodrop "),
            ("ecn harddrop nodrop", "ecn harddrop nodrop "),
        ];
        for (flags, want) in cases {
            assert_eq!(
                shown(&format!("{flags} {base}"), false, false),
                format!("limit 1Mb min 100Kb max 300Kb {want}")
            );
        }
    }

    #[test]
    fn parameters_as_tc_computes_them() {
        // burst = (2*102400 + 307200) / 4500 = 113; Wlog 6 (64 * (1 -
        // (63/64)^113) = 53.2 >= 114 - 102400/1500 = 45.7 > 31.1 for 1/32).
        let (o, notes) = parse_str("limit 1M avpkt 1500 min 100K max 300K").unwrap();
        assert_eq!(notes, "RED: set bandwidth to 10Mbit\n");
        assert_eq!((o.limit, o.qth_min, o.qth_max), (1 << 20, 102_400, 307_200));
        assert_eq!((o.wlog, o.plog), (6, 24));
        assert_eq!(o.max_p, Some(85_899_345));
        assert_eq!(o.flags, 0);
        assert_eq!(
            o.flags_bf,
            Some(RedFlagsBf {
                value: 0,
                selector: 15
            })
        );
        assert_eq!(o.stab.as_ref().unwrap().len(), 256);
        // Only limit: max = limit / 4, min = max / 3.
        let (o, _) = parse_str("limit 400000 avpkt 1000 bandwidth 10mbit").unwrap();
        assert_eq!((o.qth_min, o.qth_max), (33_333, 100_000));
        // Only min: max = 3 min.
        let (o, notes) = parse_str("limit 400000 avpkt 1000 min 30000 bandwidth 1mbit").unwrap();
        assert_eq!((o.qth_min, o.qth_max), (30_000, 90_000));
        assert_eq!(notes, "");
        let (_, notes) = parse_str("limit 1M avpkt 1500 burst 1000 bandwidth 1mbit").unwrap();
        assert_eq!(notes, "RED: WARNING. Burst 1000 seems to be too large.\n");
    }

    #[test]
    fn details_and_json_as_iproute2() {
        let d = shown("limit 1M avpkt 1500 min 100K max 300K ecn", true, false);
        assert!(
            d.starts_with("limit 1Mb min 100Kb max 300Kb ecn ewma 6 probability 0.02 Scell_log "),
            "{d}"
        );
        let j = shown("limit 1M avpkt 1500 min 100K max 300K ecn", false, true);
        assert_eq!(
            j,
            "[{\"limit\":1048576,\"min\":102400,\"max\":307200,\"ecn\":true,\"harddrop\":false,\
             \"adaptive\":false,\"nodrop\":false}]\n"
        );
    }

    #[test]
    fn parse_errors_as_iproute2() {
        // Each checked against tc 6.1 run by hand.
        assert_eq!(
            err("limit 1M min 100K max 300K"),
            (
                "RED: Required parameter (limit, avpkt) is missing\n".into(),
                1
            )
        );
        assert_eq!(
            err("limit 1M avpkt 1500 min 300K max 100K"),
            (
                "tc_red_eval_ewma() burst 159 is too small ? Try burst 205\nRED: failed to calculate EWMA constant.\n".into(),
                1
            )
        );
        assert_eq!(
            err("limit 1M avpkt 1500 burst 1 min 100K"),
            (
                "tc_red_eval_ewma() burst 1 is too small ? Try burst 69\nRED: failed to calculate EWMA constant.\n".into(),
                1
            )
        );
        assert_eq!(
            err("limit 1M avpkt 1500 probability 0"),
            ("RED: failed to calculate probability.\n".into(), 1)
        );
        assert_eq!(err("limit x"), ("Illegal \"limit\"\n".into(), 1));
        assert_eq!(err("bogus"), (format!("What is \"bogus\"?\n{USAGE}\n"), 1));
        assert_eq!(err("help"), (format!("{USAGE}\n"), 1));
        assert_eq!(err("limit 1M avpkt 1500 q").1, 255);
        assert_eq!(err("limit 1M avpkt 1500 qevent early_drop block 1").1, 1);
        assert_eq!(
            err("limit 1M avpkt 1500 bandwidth 10%"),
            (
                "No device specified; specify device to rate limit by percentage\nIllegal \"bandwidth\"\n".into(),
                1
            )
        );
    }

    #[test]
    fn help_text_is_the_golden_one() {
        // help.golden, "tc qdisc add dev DEV root red help".
        assert_eq!(
            err("help").0,
            "Usage: ... red\tlimit BYTES [min BYTES] [max BYTES] avpkt BYTES [burst PACKETS]\n\
             \t\t[adaptive] [probability PROBABILITY] [bandwidth KBPS]\n\
             \t\t[ecn] [harddrop] [nodrop]\n\
             \t\t[qevent early_drop block IDX] [qevent mark block IDX]\n"
        );
    }

    #[test]
    fn xstats_as_iproute2() {
        let x = RedXstats {
            early: 3,
            pdrop: 2,
            other: 0,
            marked: 7,
        };
        let mut out = Out::new(false, false);
        print_xstats(&x, &mut out);
        assert_eq!(out.finish(), "  marked 7 early 3 pdrop 2 other 0 \n");
    }

    /// Whole commands through `tc::run`, as a user types them.
    mod commands {
        fn words(s: &str) -> Vec<String> {
            s.split_whitespace().map(String::from).collect()
        }

        fn run(net: &mut crate::net::Net, line: &str) -> crate::Outcome {
            let (opts, rest) = crate::tc::parse_global(&words(line)).unwrap();
            crate::tc::run(net, &opts, &rest)
        }

        #[test]
        fn red_is_classful_with_a_hidden_bfifo() {
            let mut net = crate::net::Net::new();
            let o = run(
                &mut net,
                "qdisc add dev lo root handle 1: red limit 1M avpkt 1500 min 100K max 300K ecn",
            );
            // tc says it chose the bandwidth, and succeeds.
            assert_eq!(
                (o.code, o.stderr.as_str()),
                (0, "RED: set bandwidth to 10Mbit\n")
            );
            let o = run(&mut net, "-s qdisc show dev lo");
            assert_eq!(
                o.stdout,
                "qdisc red 1: root refcnt 2 limit 1Mb min 100Kb max 300Kb ecn \n \
                 Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n \
                 backlog 0b 0p requeues 0\n  marked 0 early 0 pdrop 0 other 0 \n"
            );
            let o = run(&mut net, "class show dev lo");
            assert_eq!(o.stdout, "class red 1:1 parent 1: \n");
            // A user's qdisc in the class, then shown with its parent.
            let o = run(
                &mut net,
                "qdisc add dev lo parent 1:1 handle 10: pfifo limit 5",
            );
            assert_eq!(o.code, 0, "{}", o.stderr);
            let o = run(&mut net, "qdisc show dev lo");
            assert_eq!(
                o.stdout,
                "qdisc red 1: root refcnt 2 limit 1Mb min 100Kb max 300Kb ecn \n\
                 qdisc pfifo 10: parent 1:1 limit 5p\n"
            );
            let o = run(&mut net, "class show dev lo");
            assert_eq!(o.stdout, "class red 1:1 parent 1: leaf 10: \n");
            // change with a limit puts a fresh bfifo back in.
            let o = run(
                &mut net,
                "qdisc change dev lo root handle 1: red limit 2M avpkt 1500 bandwidth 1mbit",
            );
            assert_eq!((o.code, o.stderr.as_str()), (0, ""));
            let o = run(&mut net, "qdisc show dev lo");
            assert_eq!(
                o.stdout,
                "qdisc red 1: root refcnt 2 limit 2Mb min 174762b max 512Kb \n"
            );
        }

        #[test]
        fn refusals_keep_the_parser_notes_first() {
            let mut net = crate::net::Net::new();
            let o = run(
                &mut net,
                "qdisc add dev lo root handle 1: red nodrop limit 1M avpkt 1500 min 100K max 300K",
            );
            assert_eq!(o.code, 2);
            assert_eq!(
                o.stderr,
                "RED: set bandwidth to 10Mbit\nError: sch_red: nodrop mode is only meaningful with ECN.\n"
            );
            assert!(!run(&mut net, "qdisc show dev lo").stdout.contains("red"));
        }
    }

    /// `tc -d` output given back to tc, with the `avpkt` and `bandwidth`
    /// it does not print and without the computed `ewma`/`Scell_log`, gives
    /// the same thresholds, flags and probability (sizes in whole KiB, which
    /// `sprint_size` prints exactly).
    mod round_trip {
        use super::*;
        use proptest::prelude::*;

        fn dumped(args: &str) -> (RedOpts, String) {
            let (o, _) = parse_str(args).unwrap();
            let q = Red::new(&o, &DevInfo::default()).unwrap();
            let QdiscOpts::Red(d) = q.dump() else {
                unreachable!()
            };
            let mut out = Out::new(false, false);
            print(&d, &mut out, true);
            (d, out.finish())
        }

        proptest! {
            #[test]
            fn printed_options_parse_back(
                min_kb in 1..200u32,
                span_kb in 1..400u32,
                extra_kb in 1..1000u32,
                prob in 1..100u32,
                flags in 0..16u8,
            ) {
                let flags = if flags & TC_RED_NODROP != 0 { flags | TC_RED_ECN } else { flags };
                let names: Vec<&str> = [(1, "ecn"), (2, "harddrop"), (4, "adaptive"), (8, "nodrop")]
                    .iter()
                    .filter(|(b, _)| flags & b != 0)
                    .map(|(_, n)| *n)
                    .collect();
                let (min, max) = (min_kb * 1024, (min_kb + span_kb) * 1024);
                let limit = max + extra_kb * 1024;
                let args = format!(
                    "limit {limit} min {min} max {max} avpkt 1000 bandwidth 10mbit probability {} {}",
                    prob as f64 / 100.0,
                    names.join(" ")
                );
                let accepted = parse_str(&args)
                    .ok()
                    .is_some_and(|(o, _)| Red::new(&o, &DevInfo::default()).is_ok());
                prop_assume!(accepted);
                let (d0, text) = dumped(&args);
                let toks: Vec<&str> = text.split_whitespace().collect();
                let mut input = vec![];
                let mut i = 0;
                while i < toks.len() {
                    match toks[i] {
                        "ewma" | "Scell_log" => i += 2,
                        w => {
                            input.push(w.to_string());
                            i += 1;
                        }
                    }
                }
                let again = format!("{} avpkt 1000 bandwidth 10mbit", input.join(" "));
                let (d1, text1) = dumped(&again);
                prop_assert_eq!(
                    (d0.limit, d0.qth_min, d0.qth_max, d0.flags_bf, d0.max_p),
                    (d1.limit, d1.qth_min, d1.qth_max, d1.flags_bf, d1.max_p)
                );
                prop_assert_eq!(text, text1);
            }
        }
    }
}
