//! sfb syntax (iproute2 6.1 tc/q_sfb.c): `rehash`, `db`, `limit`, `max`,
//! `target`, `increment`, `decrement`, `penalty_rate`, `penalty_burst`;
//! the statistics printer.
//!
//! tc always sends the whole `tc_sfb_qopt`, with its own defaults for what
//! was not given: rehash every 600 s with 60 s of double buffering,
//! penalty 10 packets per second with a burst of 20, increment 0.0005 and
//! decrement 0.00005 (in Q0.16: 33 and 3); `max` is 25, or 5/4 of a given
//! `target`, and `target` 4/5 of `max`. `limit` 0 lets the kernel use the
//! device's txqueuelen. `rehash` and `db` are in milliseconds, printed as
//! times; probabilities are fractions between 0 and 1.

use super::codel::print_time;
use super::get_u32;
use super::tc_red::c_double_to_u32;
use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To, J};
use sluice_core::qdisc::sfb::{SfbOpts, SfbXstats, SFB_MAX_PROB};
use sluice_core::qdisc::QdiscOpts;
use sluice_core::units::{fmt_g, strtod};

const USAGE: &str = "Usage: ... sfb [ rehash SECS ] [ db SECS ]
\t    [ limit PACKETS ] [ max PACKETS ] [ target PACKETS ]
\t    [ increment FLOAT ] [ decrement FLOAT ]
\t    [ penalty_rate PPS ] [ penalty_burst PACKETS ]";

fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\""))
}

/// `get_prob`: a fraction in [0, 1] (trailing text ignored), in Q0.16
/// rounded to nearest.
fn get_prob(arg: &str) -> Option<u32> {
    let (d, _) = strtod(arg)?;
    if !(0.0..=1.0).contains(&d) {
        return None;
    }
    Some(c_double_to_u32(d * SFB_MAX_PROB as f64 + 0.5))
}

/// `sfb_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<Option<QdiscOpts>> {
    let mut o = SfbOpts {
        rehash_interval: 600 * 1000,
        warmup_time: 60 * 1000,
        penalty_rate: 10,
        penalty_burst: 20,
        increment: (SFB_MAX_PROB + 1000) / 2000,
        decrement: (SFB_MAX_PROB + 10000) / 20000,
        ..SfbOpts::default()
    };
    while let Some(w) = a.next() {
        let field = match w {
            "rehash" => &mut o.rehash_interval,
            "db" => &mut o.warmup_time,
            "limit" => &mut o.limit,
            "max" => &mut o.max,
            "target" => &mut o.bin_size,
            "penalty_rate" => &mut o.penalty_rate,
            "penalty_burst" => &mut o.penalty_burst,
            "increment" => {
                o.increment = get_prob(a.value()?).ok_or_else(|| illegal(w))?;
                continue;
            }
            "decrement" => {
                o.decrement = get_prob(a.value()?).ok_or_else(|| illegal(w))?;
                continue;
            }
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))),
        };
        *field = get_u32(a.value()?, 0).ok_or_else(|| illegal(w))?;
    }
    if o.max == 0 {
        o.max = if o.bin_size >= 1 {
            o.bin_size.wrapping_mul(5).wrapping_add(1) / 4
        } else {
            25
        };
    }
    if o.bin_size == 0 {
        o.bin_size = o.max.wrapping_mul(4).wrapping_add(3) / 5;
    }
    Ok(Some(QdiscOpts::Sfb(o)))
}

/// A Q0.16 probability as `print_float` shows it (`%lg`).
fn print_prob(out: &mut Out, key: &str, text: &str, p: u32) {
    let v = fmt_g(p as f64 / SFB_MAX_PROB as f64);
    out.item(To::Any, key, &format!("{text}{v}"), J::Num(v.clone()));
}

/// `sfb_print_opt`.
pub(super) fn print(o: &SfbOpts, out: &mut Out) {
    // Milliseconds times 1000 in an `unsigned int`, as tc computes it.
    print_time(out, "rehash", o.rehash_interval.wrapping_mul(1000));
    print_time(out, "db", o.warmup_time.wrapping_mul(1000));
    for (key, v) in [("limit", o.limit), ("max", o.max), ("target", o.bin_size)] {
        out.uint(To::Any, key, &format!("{key} {v}p "), v as u64);
    }
    print_prob(out, "increment", "increment ", o.increment);
    out.text(" ");
    print_prob(out, "decrement", "decrement ", o.decrement);
    out.text(" ");
    let (r, b) = (o.penalty_rate, o.penalty_burst);
    out.uint(
        To::Any,
        "penalty_rate",
        &format!("penalty_rate {r}pps "),
        r as u64,
    );
    out.uint(
        To::Any,
        "penalty_burst",
        &format!("penalty_burst {b}p "),
        b as u64,
    );
}

/// `sfb_print_xstats`, and the newline `print_qdisc` adds after it.
pub(super) fn print_xstats(x: &SfbXstats, out: &mut Out) {
    for (key, lead, v) in [
        ("earlydrop", "  ", x.earlydrop),
        ("penaltydrop", " ", x.penaltydrop),
        ("bucketdrop", " ", x.bucketdrop),
        ("queuedrop", " ", x.queuedrop),
        ("childdrop", " ", x.childdrop),
        ("marked", " ", x.marked),
    ] {
        out.uint(To::Any, key, &format!("{lead}{key} {v}"), v as u64);
    }
    out.nl();
    let m = x.maxqlen;
    out.uint(To::Any, "maxqlen", &format!("  maxqlen {m}"), m as u64);
    print_prob(out, "maxprob", " maxprob ", x.maxprob);
    print_prob(out, "avgprob", " avgprob ", x.avgprob);
    out.nl();
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::qdisc::sfb::Sfb;
    use sluice_core::qdisc::{DevInfo, Qdisc};

    fn parse_str(s: &str) -> CmdResult<SfbOpts> {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        let mut a = Args::new(&w);
        match parse(&mut a)? {
            Some(QdiscOpts::Sfb(o)) => Ok(o),
            other => panic!("{other:?}"),
        }
    }

    fn err(s: &str) -> (String, i32) {
        let f = parse_str(s).unwrap_err();
        (f.stderr, f.code)
    }

    /// What `tc qdisc show` prints for an sfb created with `args`.
    fn shown(args: &str, json: bool) -> String {
        let o = parse_str(args).unwrap();
        let q = Sfb::new(&o, &DevInfo::default()).unwrap();
        let QdiscOpts::Sfb(d) = q.dump() else {
            unreachable!()
        };
        let mut out = Out::new(json, false);
        out.open("");
        print(&d, &mut out);
        out.close();
        out.finish()
    }

    #[test]
    fn defaults_as_tc_sends_them() {
        let o = parse_str("").unwrap();
        assert_eq!(
            o,
            SfbOpts {
                rehash_interval: 600_000,
                warmup_time: 60_000,
                max: 25,
                bin_size: 20,
                increment: 33,
                decrement: 3,
                limit: 0,
                penalty_rate: 10,
                penalty_burst: 20,
            }
        );
        // max from target, target from max.
        assert_eq!(parse_str("target 100").unwrap().max, 125);
        assert_eq!(parse_str("max 100").unwrap().bin_size, 80);
        assert_eq!(parse_str("increment 0.1").unwrap().increment, 6554);
        assert_eq!(parse_str("decrement 1").unwrap().decrement, 65535);
    }

    #[test]
    fn prints_as_tc_testing_expects() {
        // sfb.json 3294 and 49a0; the whole line as iproute2 6.1 prints it.
        assert_eq!(
            shown("", false),
            "rehash 600s db 60s limit 1000p max 25p target 20p increment 0.000503548 \
             decrement 4.57771e-05 penalty_rate 10pps penalty_burst 20p "
        );
        assert!(shown("rehash 60", false).starts_with("rehash 60ms db 60s "));
        assert!(shown("db 100", false).starts_with("rehash 600s db 100ms "));
        assert!(shown("limit 100", false).starts_with("rehash 600s db 60s limit 100p "));
        assert!(shown("increment 0.1", false).contains("increment 0.100008 "));
        assert_eq!(
            shown("", true),
            "[{\"rehash\":600000000,\"db\":60000000,\"limit\":1000,\"max\":25,\"target\":20,\
             \"increment\":0.000503548,\"decrement\":4.57771e-05,\"penalty_rate\":10,\
             \"penalty_burst\":20}]\n"
        );
    }

    #[test]
    fn parse_errors_as_iproute2() {
        // Checked against tc 6.1 in a namespace.
        assert_eq!(err("rehash x"), ("Illegal \"rehash\"\n".into(), 1));
        assert_eq!(err("increment 2"), ("Illegal \"increment\"\n".into(), 1));
        assert_eq!(err("decrement -0.5"), ("Illegal \"decrement\"\n".into(), 1));
        assert_eq!(err("help"), (format!("What is \"help\"?\n{USAGE}\n"), 1));
        assert_eq!(err("limit").1, 255);
        // Trailing text after a probability is ignored, as strtod leaves it.
        assert_eq!(parse_str("increment 0.5x").unwrap().increment, 32768);
    }

    #[test]
    fn xstats_as_iproute2() {
        let x = SfbXstats {
            earlydrop: 1,
            penaltydrop: 2,
            bucketdrop: 3,
            queuedrop: 4,
            childdrop: 5,
            marked: 6,
            maxqlen: 7,
            maxprob: 65535,
            avgprob: 33,
        };
        let mut out = Out::new(false, false);
        print_xstats(&x, &mut out);
        assert_eq!(
            out.finish(),
            "  earlydrop 1 penaltydrop 2 bucketdrop 3 queuedrop 4 childdrop 5 marked 6\n  \
             maxqlen 7 maxprob 1 avgprob 0.000503548\n"
        );
    }

    /// `tc -d` output given back to tc gives the same options (sfb's are
    /// kept exactly, except probabilities, which print with six digits).
    mod round_trip {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn printed_options_parse_back(
                rehash in 0..4000u32,
                db in 0..4000u32,
                limit in 1..100_000u32,
                max in 1..1000u32,
                target in 1..1000u32,
                inc in 0..=65535u32,
                dec in 0..=65535u32,
                rate in 0..100_000u32,
                burst in 0..1000u32,
            ) {
                // Times of three significant digits, as sprint_time prints.
                let three = |v: u32| {
                    let e = v % 4;
                    (v / 4 % 1000) * 10u32.pow(e)
                };
                let (rehash, db) = (three(rehash), three(db));
                let args = format!(
                    "rehash {rehash} db {db} limit {limit} max {max} target {target} \
                     increment {} decrement {} penalty_rate {rate} penalty_burst {burst}",
                    inc as f64 / 65535.0,
                    dec as f64 / 65535.0,
                );
                let text = shown(&args, false);
                let t: Vec<&str> = text.split_whitespace().collect();
                let back = |key: &str| t[t.iter().position(|w| *w == key).unwrap() + 1];
                let ms = |s: &str| {
                    sluice_core::units::parse_time_us(s).unwrap() / 1000
                };
                let num = |s: &str| s.trim_end_matches("pps").trim_end_matches('p').to_string();
                let again = format!(
                    "rehash {} db {} limit {} max {} target {} increment {} decrement {} \
                     penalty_rate {} penalty_burst {}",
                    ms(back("rehash")),
                    ms(back("db")),
                    num(back("limit")),
                    num(back("max")),
                    num(back("target")),
                    back("increment"),
                    back("decrement"),
                    num(back("penalty_rate")),
                    num(back("penalty_burst")),
                );
                // `get_time` truncates: "4.02s" is 4019999 µs, so a time can
                // come back a millisecond short, and prints the same.
                let (a, b) = (parse_str(&args).unwrap(), parse_str(&again).unwrap());
                prop_assert!(a.rehash_interval.abs_diff(b.rehash_interval) <= 1);
                prop_assert!(a.warmup_time.abs_diff(b.warmup_time) <= 1);
                let exact = |o: SfbOpts| SfbOpts { rehash_interval: 0, warmup_time: 0, ..o };
                prop_assert_eq!(exact(a), exact(b));
                prop_assert_eq!(text, shown(&again, false));
            }
        }
    }
}
