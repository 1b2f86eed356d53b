//! fq_pie syntax (iproute2 6.1 tc/q_fq_pie.c): `limit`, `flows`,
//! `target`, `tupdate`, `alpha`, `beta`, `quantum`, `memory_limit`,
//! `ecn_prob`, `[no]ecn`, `[no]bytemode`, `[no_]dq_rate_estimator`; the
//! statistics printer.
//!
//! tc sends only what was given (zero counts as not given) and checks
//! that alpha and beta are at most 32 and `ecn_prob` below 100.

use super::codel::print_time;
use super::get_u32;
use super::pie::{gain, print_switches};
use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::fq_pie::{FqPieOpts, FqPieXstats};
use sluice_core::qdisc::{DevInfo, QdiscOpts};
use sluice_core::units::{fmt_size, parse_size, parse_time_us};

const USAGE: &str = "Usage: ... fq_pie [ limit PACKETS ] [ flows NUMBER ]
                  [ target TIME ] [ tupdate TIME ]
                  [ alpha NUMBER ] [ beta NUMBER ]
                  [ quantum BYTES ] [ memory_limit BYTES ]
                  [ ecn_prob PERCENTAGE ] [ [no]ecn ]
                  [ [no]bytemode ] [ [no_]dq_rate_estimator ]";

fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\""))
}

/// `fq_pie_parse_opt`.
pub(super) fn parse(a: &mut Args, _dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    let mut v = [0u32; 9]; // limit flows target tupdate alpha beta quantum memory_limit ecn_prob
    let mut o = FqPieOpts::default();
    while let Some(w) = a.next() {
        match w {
            "limit" => v[0] = get_u32(a.value()?, 0).ok_or_else(|| illegal("limit"))?,
            "flows" => v[1] = get_u32(a.value()?, 0).ok_or_else(|| illegal("flows"))?,
            "target" => v[2] = parse_time_us(a.value()?).map_err(|_| illegal("target"))?,
            "tupdate" => v[3] = parse_time_us(a.value()?).map_err(|_| illegal("tupdate"))?,
            "alpha" => v[4] = gain(a.value()?, "alpha")?,
            "beta" => v[5] = gain(a.value()?, "beta")?,
            "quantum" => v[6] = parse_size(a.value()?).map_err(|_| illegal("quantum"))?,
            "memory_limit" => v[7] = parse_size(a.value()?).map_err(|_| illegal("memory_limit"))?,
            "ecn_prob" => {
                v[8] = get_u32(a.value()?, 0)
                    .filter(|&p| p < 100)
                    .ok_or_else(|| illegal("ecn_prob"))?
            }
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
    let nz = |x: u32| (x != 0).then_some(x);
    o.limit = nz(v[0]);
    o.flows = nz(v[1]);
    o.target = nz(v[2]);
    o.tupdate = nz(v[3]);
    o.alpha = nz(v[4]);
    o.beta = nz(v[5]);
    o.quantum = nz(v[6]);
    o.memory_limit = nz(v[7]);
    o.ecn_prob = nz(v[8]);
    Ok(Some(QdiscOpts::FqPie(o)))
}

/// `fq_pie_print_opt`.
pub(super) fn print(o: &FqPieOpts, out: &mut Out, _details: bool) {
    if let Some(l) = o.limit {
        out.uint(To::Any, "limit", &format!("limit {l}p "), l as u64);
    }
    if let Some(f) = o.flows {
        out.uint(To::Any, "flows", &format!("flows {f} "), f as u64);
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
    if let Some(q) = o.quantum {
        out.uint(
            To::Any,
            "quantum",
            &format!("quantum {} ", fmt_size(q)),
            q as u64,
        );
    }
    if let Some(m) = o.memory_limit {
        let t = format!("memory_limit {} ", fmt_size(m));
        out.uint(To::Any, "memory_limit", &t, m as u64);
    }
    if let Some(e) = o.ecn_prob {
        out.uint(To::Any, "ecn_prob", &format!("ecn_prob {e} "), e as u64);
    }
    print_switches(o.ecn, o.bytemode, o.dq_rate_estimator, out);
}

/// `fq_pie_print_xstats`, and the newline `print_qdisc` adds after it.
pub(super) fn print_xstats(x: &FqPieXstats, out: &mut Out) {
    let line1 = [
        ("pkts_in", "  pkts_in", x.packets_in),
        ("overlimit", " overlimit", x.overlimit),
        ("overmemory", " overmemory", x.overmemory),
        ("dropped", " dropped", x.dropped),
        ("ecn_mark", " ecn_mark", x.ecn_mark),
    ];
    for (key, text, v) in line1 {
        out.uint(To::Any, key, &format!("{text} {v}"), v as u64);
    }
    out.nl();
    let line2 = [
        ("new_flow_count", "  new_flow_count", x.new_flow_count),
        ("new_flows_len", " new_flows_len", x.new_flows_len),
        ("old_flows_len", " old_flows_len", x.old_flows_len),
        ("memory_used", " memory_used", x.memory_usage),
    ];
    for (key, text, v) in line2 {
        out.uint(To::Any, key, &format!("{text} {v}"), v as u64);
    }
    out.nl();
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::qdisc::fq_pie::FqPie;
    use sluice_core::qdisc::Qdisc;

    fn parse_str(s: &str) -> CmdResult<FqPieOpts> {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        match parse(&mut Args::new(&w), None)? {
            Some(QdiscOpts::FqPie(o)) => Ok(o),
            other => panic!("{other:?}"),
        }
    }

    fn err(s: &str) -> (String, i32) {
        let f = parse_str(s).unwrap_err();
        (f.stderr, f.code)
    }

    fn shown(args: &str) -> String {
        let q = FqPie::new(&parse_str(args).unwrap(), &DevInfo::default()).unwrap();
        let QdiscOpts::FqPie(d) = q.dump() else {
            unreachable!()
        };
        let mut out = Out::new(false, false);
        print(&d, &mut out, false);
        out.finish()
    }

    #[test]
    fn prints_as_the_kernel_dumps() {
        // The fixed tc-testing 83be (kernel commit 3a62fed2fd7b):
        // "qdisc fq_pie 1: root refcnt 2 limit 10240p flows 65536".
        assert!(shown("flows 65536").starts_with("limit 10240p flows 65536 "));
        assert_eq!(
            shown(""),
            "limit 10240p flows 1024 target 15ms tupdate 15ms alpha 2 beta 20 quantum 1514b memory_limit 32Mb ecn_prob 10 "
        );
        assert_eq!(
            shown("limit 100 quantum 3000 memory_limit 1m ecn_prob 50 ecn bytemode"),
            "limit 100p flows 1024 target 15ms tupdate 15ms alpha 2 beta 20 quantum 3000b memory_limit 1Mb ecn_prob 50 ecn bytemode "
        );
    }

    #[test]
    fn parse_errors_as_iproute2() {
        // Checked against tc 6.1 run by hand.
        assert_eq!(err("ecn_prob 100"), ("Illegal \"ecn_prob\"\n".into(), 1));
        assert_eq!(err("quantum x"), ("Illegal \"quantum\"\n".into(), 1));
        assert_eq!(err("flows x"), ("Illegal \"flows\"\n".into(), 1));
        assert_eq!(err("alpha 33"), ("Illegal \"alpha\"\n".into(), 1));
        assert_eq!(err("limit").1, 255);
        assert_eq!(err("help"), (format!("{USAGE}\n"), 1));
        assert_eq!(err("bogus"), (format!("What is \"bogus\"?\n{USAGE}\n"), 1));
        assert_eq!(
            err("help").0,
            "Usage: ... fq_pie [ limit PACKETS ] [ flows NUMBER ]\n                  [ target TIME ] [ tupdate TIME ]\n                  [ alpha NUMBER ] [ beta NUMBER ]\n                  [ quantum BYTES ] [ memory_limit BYTES ]\n                  [ ecn_prob PERCENTAGE ] [ [no]ecn ]\n                  [ [no]bytemode ] [ [no_]dq_rate_estimator ]\n"
        );
    }

    #[test]
    fn xstats_as_iproute2() {
        let x = FqPieXstats {
            packets_in: 5,
            overlimit: 1,
            overmemory: 0,
            dropped: 2,
            ecn_mark: 3,
            new_flow_count: 4,
            new_flows_len: 1,
            old_flows_len: 2,
            memory_usage: 4608,
        };
        let mut out = Out::new(false, false);
        print_xstats(&x, &mut out);
        assert_eq!(
            out.finish(),
            "  pkts_in 5 overlimit 1 overmemory 0 dropped 2 ecn_mark 3\n  new_flow_count 4 new_flows_len 1 old_flows_len 2 memory_used 4608\n"
        );
    }

    /// Printed options given back to tc give the same qdisc (sizes are
    /// chosen so that `sprint_size` prints them exactly).
    mod round_trip {
        use super::*;
        use proptest::prelude::*;

        fn dumped(o: &FqPieOpts) -> (FqPieOpts, String) {
            let q = FqPie::new(o, &DevInfo::default()).unwrap();
            let QdiscOpts::FqPie(d) = q.dump() else {
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
                flows in proptest::option::of(1..=65536u32),
                target in proptest::option::of(1..1000u32),
                alpha in proptest::option::of(1..=32u32),
                quantum in proptest::option::of(1..1000u32),
                memory_kb in proptest::option::of(1..4096u32),
                ecn_prob in proptest::option::of(1..100u32),
                ecn in proptest::option::of(any::<bool>()),
            ) {
                let o = FqPieOpts {
                    limit,
                    flows,
                    target: target.map(|t| t * 1000),
                    alpha,
                    quantum,
                    memory_limit: memory_kb.map(|k| k * 1024),
                    ecn_prob,
                    ecn,
                    ..Default::default()
                };
                let (d0, text) = dumped(&o);
                let input: Vec<String> = text
                    .split_whitespace()
                    .map(|w| w.strip_suffix('p').filter(|n| n.parse::<u32>().is_ok()).unwrap_or(w).to_string())
                    .collect();
                let again = match parse(&mut Args::new(&input), None).unwrap() {
                    Some(QdiscOpts::FqPie(o)) => o,
                    other => panic!("{other:?}"),
                };
                let (d1, text1) = dumped(&again);
                prop_assert_eq!(d0, d1);
                prop_assert_eq!(text, text1);
            }
        }
    }
}
