//! hhf syntax (iproute2 6.1 tc/q_hhf.c): `limit`, `quantum`, `hh_limit`,
//! `reset_timeout`, `admit_bytes`, `evict_timeout`, `non_hh_weight`; the
//! statistics printer.
//!
//! tc sends only what was given, and a zero counts as not given, so the
//! kernel keeps its defaults (limit 1000 packets, quantum one MTU, 2048
//! heavy hitters, reset every 40 ms, 128 KB to be heavy, evicted after 1 s
//! idle, weight 2) or the current values. Times are `get_time` words (µs,
//! with `s`/`ms`/`us`), printed by `sprint_time`.

use super::codel::{print_time, time};
use super::get_u32;
use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::hhf::{HhfOpts, HhfXstats};
use sluice_core::qdisc::QdiscOpts;
use sluice_core::units::fmt_size;

const USAGE: &str = "Usage: ... hhf\t[ limit PACKETS ] [ quantum BYTES]
\t\t[ hh_limit NUMBER ]
\t\t[ reset_timeout TIME ]
\t\t[ admit_bytes BYTES ]
\t\t[ evict_timeout TIME ]
\t\t[ non_hh_weight NUMBER ]";

fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\""))
}

/// `hhf_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<Option<QdiscOpts>> {
    let mut o = HhfOpts::default();
    while let Some(w) = a.next() {
        let field = match w {
            "limit" => &mut o.limit,
            "quantum" => &mut o.quantum,
            "hh_limit" => &mut o.hh_limit,
            "admit_bytes" => &mut o.admit_bytes,
            "non_hh_weight" => &mut o.non_hh_weight,
            "reset_timeout" => {
                o.reset_timeout = Some(time(a, w)?);
                continue;
            }
            "evict_timeout" => {
                o.evict_timeout = Some(time(a, w)?);
                continue;
            }
            "help" => return Err(Fail::new(1, USAGE)),
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))),
        };
        *field = Some(get_u32(a.value()?, 0).ok_or_else(|| illegal(w))?);
    }
    // Zero is "not given": tc leaves the attribute out.
    for f in [
        &mut o.limit,
        &mut o.quantum,
        &mut o.hh_limit,
        &mut o.reset_timeout,
        &mut o.admit_bytes,
        &mut o.evict_timeout,
        &mut o.non_hh_weight,
    ] {
        *f = f.filter(|&v| v != 0);
    }
    Ok(Some(QdiscOpts::Hhf(o)))
}

/// `hhf_print_opt`.
pub(super) fn print(o: &HhfOpts, out: &mut Out) {
    if let Some(l) = o.limit {
        out.uint(To::Any, "limit", &format!("limit {l}p "), l as u64);
    }
    if let Some(q) = o.quantum {
        let text = format!("quantum {} ", fmt_size(q));
        out.uint(To::Any, "quantum", &text, q as u64);
    }
    if let Some(h) = o.hh_limit {
        out.uint(To::Any, "hh_limit", &format!("hh_limit {h} "), h as u64);
    }
    if let Some(t) = o.reset_timeout {
        print_time(out, "reset_timeout", t);
    }
    if let Some(b) = o.admit_bytes {
        let text = format!("admit_bytes {} ", fmt_size(b));
        out.uint(To::Any, "admit_bytes", &text, b as u64);
    }
    if let Some(t) = o.evict_timeout {
        print_time(out, "evict_timeout", t);
    }
    if let Some(w) = o.non_hh_weight {
        let text = format!("non_hh_weight {w} ");
        out.uint(To::Any, "non_hh_weight", &text, w as u64);
    }
}

/// `hhf_print_xstats`, and the newline `print_qdisc` adds after it.
pub(super) fn print_xstats(x: &HhfXstats, out: &mut Out) {
    for (key, lead, v) in [
        ("drop_overlimit", "  ", x.drop_overlimit),
        ("hh_overlimit", " ", x.hh_overlimit),
        ("tot_hh", " ", x.hh_tot_count),
        ("cur_hh", " ", x.hh_cur_count),
    ] {
        out.uint(To::Any, key, &format!("{lead}{key} {v}"), v as u64);
    }
    out.nl();
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::qdisc::hhf::Hhf;
    use sluice_core::qdisc::{DevInfo, Qdisc};

    fn parse_str(s: &str) -> CmdResult<HhfOpts> {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        let mut a = Args::new(&w);
        match parse(&mut a)? {
            Some(QdiscOpts::Hhf(o)) => Ok(o),
            other => panic!("{other:?}"),
        }
    }

    fn err(s: &str) -> (String, i32) {
        let f = parse_str(s).unwrap_err();
        (f.stderr, f.code)
    }

    /// What `tc qdisc show` prints for an hhf created with `args`.
    fn shown(args: &str, json: bool) -> String {
        let o = parse_str(args).unwrap();
        let q = Hhf::new(&o, &DevInfo::default()).unwrap();
        let QdiscOpts::Hhf(d) = q.dump() else {
            unreachable!()
        };
        let mut out = Out::new(json, false);
        out.open("");
        print(&d, &mut out);
        out.close();
        out.finish()
    }

    #[test]
    fn prints_as_tc_testing_expects() {
        // hhf.json 4812, 8a92, 3491, ba04, 4238, 839f, a044.
        assert_eq!(
            shown("", false),
            "limit 1000p quantum 1514b hh_limit 2048 reset_timeout 40ms admit_bytes 128Kb \
             evict_timeout 1s non_hh_weight 2 "
        );
        assert!(shown("limit 1500", false).starts_with("limit 1500p "));
        assert!(shown("quantum 9000", false).contains("quantum 9000b "));
        assert!(shown("reset_timeout 100ms", false).contains("reset_timeout 100ms "));
        assert!(shown("admit_bytes 100000", false).contains("admit_bytes 100000b "));
        assert!(shown("evict_timeout 0.5s", false).contains("evict_timeout 500ms "));
        assert!(shown("non_hh_weight 10", false).ends_with("non_hh_weight 10 "));
        // Held in jiffies: microseconds come back rounded up to milliseconds.
        assert!(shown("reset_timeout 1500us", false).contains("reset_timeout 2ms "));
        assert_eq!(
            shown("", true),
            "[{\"limit\":1000,\"quantum\":1514,\"hh_limit\":2048,\"reset_timeout\":40000,\
             \"admit_bytes\":131072,\"evict_timeout\":1000000,\"non_hh_weight\":2}]\n"
        );
    }

    #[test]
    fn parse_errors_as_iproute2() {
        // Checked against tc 6.1 in a namespace.
        assert_eq!(err("limit x"), ("Illegal \"limit\"\n".into(), 1));
        assert_eq!(
            err("reset_timeout 1parsec"),
            ("Illegal \"reset_timeout\"\n".into(), 1)
        );
        assert_eq!(err("help"), (format!("{USAGE}\n"), 1));
        assert_eq!(err("bogus"), (format!("What is \"bogus\"?\n{USAGE}\n"), 1));
        assert_eq!(err("quantum").1, 255);
        assert_eq!(parse_str("limit 0 quantum 0").unwrap(), HhfOpts::default());
    }

    #[test]
    fn xstats_as_iproute2() {
        let x = HhfXstats {
            drop_overlimit: 1,
            hh_overlimit: 2,
            hh_tot_count: 3,
            hh_cur_count: 4,
        };
        let mut out = Out::new(false, false);
        print_xstats(&x, &mut out);
        assert_eq!(
            out.finish(),
            "  drop_overlimit 1 hh_overlimit 2 tot_hh 3 cur_hh 4\n"
        );
    }

    /// `tc -d` output given back to tc gives the same options: numbers as
    /// printed, sizes through `parse_size` (`128Kb` is 131072), times as
    /// printed (whole milliseconds of three digits come back exactly).
    mod round_trip {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn printed_options_parse_back(
                limit in 1..100_000u32,
                quantum in 1..70_000u32,
                hh_limit in 1..10_000u32,
                reset in 1..4000u32,
                admit in 1..10_000_000u32,
                evict in 1..4000u32,
                weight in 1..100u32,
            ) {
                let three = |v: u32| (v / 4 % 999 + 1) * 10u32.pow(v % 4) * 1000;
                let args = format!(
                    "limit {limit} quantum {quantum} hh_limit {hh_limit} \
                     reset_timeout {}us admit_bytes {admit} evict_timeout {}us \
                     non_hh_weight {weight}",
                    three(reset),
                    three(evict),
                );
                let text = shown(&args, false);
                let t: Vec<&str> = text.split_whitespace().collect();
                let mut again = Vec::new();
                for pair in t.chunks(2) {
                    let v = match pair[0] {
                        "limit" => pair[1].trim_end_matches('p').to_string(),
                        "quantum" | "admit_bytes" => {
                            sluice_core::units::parse_size(pair[1]).unwrap().to_string()
                        }
                        _ => pair[1].to_string(),
                    };
                    again.push(format!("{} {v}", pair[0]));
                }
                let again = again.join(" ");
                let text2 = shown(&again, false);
                prop_assert_eq!(&text, &text2);
                // Sizes print rounded (`sprint_size`); the rest comes back
                // exactly once held in jiffies ("4.1s" parses as 4099999 µs,
                // which is 4100 jiffies again).
                let dumped = |args: &str| {
                    let q = Hhf::new(&parse_str(args).unwrap(), &DevInfo::default()).unwrap();
                    match q.dump() {
                        QdiscOpts::Hhf(d) => {
                            (d.limit, d.hh_limit, d.reset_timeout, d.evict_timeout, d.non_hh_weight)
                        }
                        _ => unreachable!(),
                    }
                };
                prop_assert_eq!(dumped(&args), dumped(&again));
            }
        }
    }
}
