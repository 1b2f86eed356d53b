//! choke syntax (iproute2 6.1 tc/q_choke.c with tc_red.c): `limit`,
//! `bandwidth`, `ecn`, `min`, `max`, `burst`, `avpkt`, `probability`; the
//! statistics printer.
//!
//! `limit` and `bandwidth` are required. Thresholds are in packets: `max`
//! defaults to `limit` / 4, `min` to `max` / 3, `burst` to
//! `(2 min + max) / 3`; tc then computes Wlog and Plog on the thresholds
//! multiplied by `avpkt` (1000 bytes by default) and the idle-damping table
//! ([`super::tc_red`]).
//!
//! A bandwidth may be a percentage of the device's link speed, as tc reads
//! it (`bandwidth 10%`).

use super::get_u32;
use super::red::{bandwidth, print_details};
use super::tc_red::{eval_ewma, eval_idle_damping, eval_p, max_p, print_flags, scan_double};
use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::choke::{ChokeOpts, ChokeXstats};
use sluice_core::qdisc::red_law::TC_RED_ECN;
use sluice_core::qdisc::{DevInfo, QdiscOpts};
use sluice_core::units::parse_size;

const USAGE: &str = "Usage: ... choke limit PACKETS bandwidth KBPS [ecn]
\t\t [ min PACKETS ] [ max PACKETS ] [ burst PACKETS ]";

fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\""))
}

/// `choke_parse_opt`.
pub(super) fn parse(a: &mut Args, dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    let mut o = ChokeOpts::default();
    let (mut burst, mut avpkt, mut rate) = (0u32, 1000u32, 0u32);
    let mut probability = 0.02f64;
    let mut ecn = false;
    while let Some(w) = a.next() {
        match w {
            "limit" => o.limit = get_u32(a.value()?, 0).ok_or_else(|| illegal("limit"))?,
            "bandwidth" => rate = bandwidth(a.value()?, dev)?,
            "ecn" => ecn = true,
            "min" => o.qth_min = get_u32(a.value()?, 0).ok_or_else(|| illegal("min"))?,
            "max" => o.qth_max = get_u32(a.value()?, 0).ok_or_else(|| illegal("max"))?,
            "burst" => burst = get_u32(a.value()?, 0).ok_or_else(|| illegal("burst"))?,
            "avpkt" => avpkt = parse_size(a.value()?).map_err(|_| illegal("avpkt"))?,
            "probability" => {
                probability = scan_double(a.value()?).ok_or_else(|| illegal("probability"))?
            }
            "help" => return Err(Fail::new(1, USAGE)),
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))),
        }
    }
    if rate == 0 || o.limit == 0 {
        return Err(Fail::new(
            1,
            "Required parameter (bandwidth, limit) is missing",
        ));
    }
    if o.qth_max == 0 {
        o.qth_max = o.limit / 4;
    }
    if o.qth_min == 0 {
        o.qth_min = o.qth_max / 3;
    }
    if burst == 0 {
        burst = o.qth_min.wrapping_mul(2).wrapping_add(o.qth_max) / 3;
    }
    if o.qth_max > o.limit {
        return Err(Fail::new(1, "\"max\" is larger than \"limit\""));
    }
    if o.qth_min >= o.qth_max {
        return Err(Fail::new(1, "\"min\" is not smaller than \"max\""));
    }
    o.wlog = eval_ewma(
        o.qth_min.wrapping_mul(avpkt),
        burst,
        avpkt,
        "CHOKE: failed to calculate EWMA constant.",
    )?;
    if o.wlog >= 10 {
        a.notes.push_str(&format!(
            "CHOKE: WARNING. Burst {} seems to be too large.\n",
            burst as i32
        ));
    }
    o.plog = eval_p(
        o.qth_min.wrapping_mul(avpkt),
        o.qth_max.wrapping_mul(avpkt),
        probability,
    )
    .ok_or_else(|| Fail::new(1, "CHOKE: failed to calculate probability."))?;
    let (scell_log, stab) = eval_idle_damping(o.wlog, avpkt, rate as u64)
        .ok_or_else(|| Fail::new(1, "CHOKE: failed to calculate idle damping table."))?;
    o.scell_log = scell_log;
    o.stab = Some(stab.to_vec());
    if ecn {
        o.flags |= TC_RED_ECN;
    }
    o.max_p = Some(max_p(probability));
    Ok(Some(QdiscOpts::Choke(o)))
}

/// `choke_print_opt`.
pub(super) fn print(o: &ChokeOpts, out: &mut Out, details: bool) {
    for (key, v) in [("limit", o.limit), ("min", o.qth_min), ("max", o.qth_max)] {
        out.uint(To::Any, key, &format!("{key} {v}p "), v as u64);
    }
    print_flags(o.flags, out);
    if details {
        print_details(o.wlog, o.max_p.unwrap_or(0), o.plog, o.scell_log, out);
    }
}

/// `choke_print_xstats`, and the newline `print_qdisc` adds after it.
pub(super) fn print_xstats(x: &ChokeXstats, out: &mut Out) {
    out.uint(
        To::Any,
        "marked",
        &format!("  marked {}", x.marked),
        x.marked as u64,
    );
    out.uint(
        To::Any,
        "early",
        &format!(" early {}", x.early),
        x.early as u64,
    );
    out.uint(
        To::Any,
        "pdrop",
        &format!(" pdrop {}", x.pdrop),
        x.pdrop as u64,
    );
    out.uint(
        To::Any,
        "other",
        &format!(" other {}", x.other),
        x.other as u64,
    );
    let m = x.matched;
    out.uint(To::Any, "matched", &format!(" matched {m}"), m as u64);
    out.nl();
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::qdisc::choke::Choke;
    use sluice_core::qdisc::Qdisc;

    fn parse_str(s: &str) -> CmdResult<(ChokeOpts, String)> {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        let mut a = Args::new(&w);
        match parse(&mut a, None)? {
            Some(QdiscOpts::Choke(o)) => Ok((o, a.notes)),
            other => panic!("{other:?}"),
        }
    }

    fn err(s: &str) -> (String, i32) {
        let f = parse_str(s).unwrap_err();
        (f.stderr, f.code)
    }

    fn shown(args: &str, details: bool) -> String {
        let (o, _) = parse_str(args).unwrap();
        let q = Choke::new(&o, &DevInfo::default()).unwrap();
        let QdiscOpts::Choke(d) = q.dump() else {
            unreachable!()
        };
        let mut out = Out::new(false, false);
        print(&d, &mut out, details);
        out.finish()
    }

    #[test]
    fn prints_as_tc_testing_expects() {
        // choke.json 8937, 48c0, 38c1, 234a, 4380.
        let b = "limit 1000 bandwidth 10000";
        assert_eq!(shown(b, false), "limit 1000p min 83p max 250p ");
        assert_eq!(
            shown(&format!("{b} min 100"), false),
            "limit 1000p min 100p max 250p "
        );
        assert_eq!(
            shown(&format!("{b} max 900"), false),
            "limit 1000p min 300p max 900p "
        );
        assert_eq!(
            shown(&format!("{b} ecn"), false),
            "limit 1000p min 83p max 250p ecn "
        );
        assert_eq!(
            shown(&format!("{b} burst 100"), false),
            "limit 1000p min 83p max 250p "
        );
        let d = shown(b, true);
        assert!(d.starts_with("limit 1000p min 83p max 250p ewma "), "{d}");
        assert!(d.contains(" probability 0.02 Scell_log "), "{d}");
    }

    #[test]
    fn parameters_as_tc_computes_them() {
        // burst (2*83 + 250) / 3 = 138; Wlog on 83000 bytes of 1000.
        let (o, notes) = parse_str("limit 1000 bandwidth 10000").unwrap();
        assert_eq!((o.qth_min, o.qth_max), (83, 250));
        assert_eq!(o.wlog, eval_ewma(83_000, 138, 1000, "").unwrap());
        assert_eq!(o.plog, eval_p(83_000, 250_000, 0.02).unwrap());
        assert_eq!(notes, "");
        let (_, notes) = parse_str("limit 1000 bandwidth 10000 burst 1000").unwrap();
        assert_eq!(notes, "CHOKE: WARNING. Burst 1000 seems to be too large.\n");
    }

    #[test]
    fn parse_errors_as_iproute2() {
        // Each checked against tc 6.1 run by hand.
        assert_eq!(
            err("limit 1000"),
            (
                "Required parameter (bandwidth, limit) is missing\n".into(),
                1
            )
        );
        assert_eq!(
            err("limit 1000 bandwidth 10000 min 300 max 200"),
            ("\"min\" is not smaller than \"max\"\n".into(), 1)
        );
        assert_eq!(
            err("limit 1000 bandwidth 10000 max 2000"),
            ("\"max\" is larger than \"limit\"\n".into(), 1)
        );
        assert_eq!(
            err("limit 1000 bandwidth 10000 burst 1"),
            (
                "tc_red_eval_ewma() burst 1 is too small ? Try burst 84\nCHOKE: failed to calculate EWMA constant.\n".into(),
                1
            )
        );
        assert_eq!(
            err("limit 1000 bandwidth 10000 avpkt 0"),
            ("CHOKE: failed to calculate EWMA constant.\n".into(), 1)
        );
        assert_eq!(
            err("limit 1000 bandwidth 10000 bogus"),
            (format!("What is \"bogus\"?\n{USAGE}\n"), 1)
        );
        // help.golden.
        assert_eq!(
            err("help").0,
            "Usage: ... choke limit PACKETS bandwidth KBPS [ecn]\n\t\t [ min PACKETS ] [ max PACKETS ] [ burst PACKETS ]\n"
        );
    }

    #[test]
    fn xstats_as_iproute2() {
        let x = ChokeXstats {
            early: 1,
            pdrop: 2,
            other: 0,
            marked: 3,
            matched: 4,
        };
        let mut out = Out::new(false, false);
        print_xstats(&x, &mut out);
        assert_eq!(
            out.finish(),
            "  marked 3 early 1 pdrop 2 other 0 matched 4\n"
        );
    }

    /// Printed options given back to tc (`limit Np` read as `limit N`,
    /// with the bandwidth it does not print) give the same qdisc.
    mod round_trip {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn printed_options_parse_back(
                limit in 4..20_000u32,
                max_frac in 1..=100u32,
                min_frac in 0..100u32,
                ecn in any::<bool>(),
            ) {
                let max = (limit * max_frac / 100).max(2);
                let min = (max * min_frac / 100).clamp(1, max - 1);
                let e = if ecn { "ecn" } else { "" };
                let args = format!("limit {limit} min {min} max {max} bandwidth 10mbit {e}");
                // Only what tc and the kernel accept (a large burst needs a
                // Wlog the kernel refuses with these thresholds).
                let accepted = parse_str(&args)
                    .ok()
                    .is_some_and(|(o, _)| Choke::new(&o, &DevInfo::default()).is_ok());
                prop_assume!(accepted);
                let first = shown(&args, false);
                let input: Vec<String> = first
                    .split_whitespace()
                    .map(|w| w.strip_suffix('p').filter(|n| n.parse::<u32>().is_ok()).unwrap_or(w).to_string())
                    .collect();
                let again = format!("{} bandwidth 10mbit", input.join(" "));
                prop_assert_eq!(shown(&again, true), shown(&args, true));
            }
        }
    }
}
