//! fq_codel syntax (iproute2 6.1 tc/q_fq_codel.c): `limit`, `flows`,
//! `quantum`, `target`, `interval`, `ecn`/`noecn`, `ce_threshold`,
//! `ce_threshold_selector VALUE/MASK`, `memory_limit`, `drop_batch`; the
//! qdisc and class statistics printers.
//!
//! tc sends only what was given: zero `limit`, `flows`, `quantum`, `target`,
//! `interval` or `drop_batch` count as not given, and so do a
//! `memory_limit` of 4294967295 and a selector value of 0xff (tc's "unset"
//! markers), as in iproute2.

use super::codel::{print_drop_next, print_time, time};
use super::get_u32;
use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::fq_codel::{FqCodelClassXstats, FqCodelOpts, FqCodelXstats};
use sluice_core::qdisc::{DevInfo, QdiscOpts};
use sluice_core::units::{fmt_size, fmt_time_us, parse_size};

const USAGE: &str = "Usage: ... fq_codel\t[ limit PACKETS ] [ flows NUMBER ]
[ memory_limit BYTES ]
[ target TIME ] [ interval TIME ]
[ quantum BYTES ] [ [no]ecn ]
[ ce_threshold TIME ]
[ ce_threshold_selector VALUE/MASK ]
[ drop_batch SIZE ]";

fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\""))
}

/// `get_u8`.
fn get_u8(arg: &str) -> Option<u8> {
    get_u32(arg, 0).and_then(|v| u8::try_from(v).ok())
}

/// `VALUE/MASK` of `ce_threshold_selector` (the mask is checked first).
fn selector(arg: &str) -> CmdResult<(u8, u8)> {
    let Some((value, mask)) = arg.split_once('/') else {
        return Err(Fail::new(1, "Missing mask for \"ce_threshold_selector\""));
    };
    let mask =
        get_u8(mask).ok_or_else(|| Fail::new(1, "Illegal mask for \"ce_threshold_selector\""))?;
    let value = get_u8(value).ok_or_else(|| illegal("ce_threshold_selector"))?;
    Ok((value, mask))
}

/// `fq_codel_parse_opt`.
pub(super) fn parse(a: &mut Args, _dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    let (mut limit, mut flows, mut quantum, mut drop_batch) = (0u32, 0u32, 0u32, 0u32);
    let (mut target, mut interval) = (0u32, 0u32);
    let (mut ce_threshold, mut memory) = (u32::MAX, u32::MAX);
    let (mut sel_value, mut sel_mask) = (0xffu8, 0u8);
    let mut ecn = None;
    while let Some(w) = a.next() {
        let mut unsigned =
            |what: &str| -> CmdResult<u32> { get_u32(a.value()?, 0).ok_or_else(|| illegal(what)) };
        match w {
            "limit" => limit = unsigned(w)?,
            "flows" => flows = unsigned(w)?,
            "quantum" => quantum = unsigned(w)?,
            "drop_batch" => drop_batch = unsigned(w)?,
            "target" => target = time(a, w)?,
            "ce_threshold" => ce_threshold = time(a, w)?,
            "ce_threshold_selector" => (sel_value, sel_mask) = selector(a.value()?)?,
            "memory_limit" => memory = parse_size(a.value()?).map_err(|_| illegal(w))?,
            "interval" => interval = time(a, w)?,
            "ecn" => ecn = Some(true),
            "noecn" => ecn = Some(false),
            "help" => return Err(Fail::new(1, USAGE)),
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))),
        }
    }
    let nonzero = |v: u32| (v != 0).then_some(v);
    let selected = sel_value != 0xff;
    Ok(Some(QdiscOpts::FqCodel(FqCodelOpts {
        limit: nonzero(limit),
        flows: nonzero(flows),
        quantum: nonzero(quantum),
        target: nonzero(target),
        interval: nonzero(interval),
        ecn,
        ce_threshold: (ce_threshold != u32::MAX).then_some(ce_threshold),
        ce_threshold_selector: selected.then_some(sel_value),
        ce_threshold_mask: selected.then_some(sel_mask),
        drop_batch_size: nonzero(drop_batch),
        memory_limit: (memory != u32::MAX).then_some(memory),
    })))
}

/// C's `%#x`: `0x` before non-zero values.
fn hex_alt(v: u8) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// `fq_codel_print_opt`.
pub(super) fn print(o: &FqCodelOpts, out: &mut Out, _details: bool) {
    if let Some(l) = o.limit {
        out.uint(To::Any, "limit", &format!("limit {l}p "), l as u64);
    }
    if let Some(f) = o.flows {
        out.uint(To::Any, "flows", &format!("flows {f} "), f as u64);
    }
    if let Some(q) = o.quantum {
        out.uint(To::Any, "quantum", &format!("quantum {q} "), q as u64);
    }
    if let Some(t) = o.target {
        print_time(out, "target", t);
    }
    if let Some(t) = o.ce_threshold {
        print_time(out, "ce_threshold", t);
    }
    let (sel, mask) = (
        o.ce_threshold_selector.unwrap_or(0),
        o.ce_threshold_mask.unwrap_or(0),
    );
    if sel != 0 || mask != 0 {
        let text = format!("ce_threshold_selector {}", hex_alt(sel));
        out.uint(To::Any, "ce_threshold_selector", &text, sel as u64);
        let text = format!("/{} ", hex_alt(mask));
        out.uint(To::Any, "ce_threshold_mask", &text, mask as u64);
    }
    if let Some(t) = o.interval {
        print_time(out, "interval", t);
    }
    if let Some(m) = o.memory_limit {
        let text = format!("memory_limit {} ", fmt_size(m));
        out.uint(To::Any, "memory_limit", &text, m as u64);
    }
    if o.ecn == Some(true) {
        out.bool(To::Any, "ecn", "ecn ", true);
    }
    if let Some(b) = o.drop_batch_size.filter(|&b| b != 0) {
        out.uint(To::Any, "drop_batch", &format!("drop_batch {b} "), b as u64);
    }
}

/// `fq_codel_print_xstats` for the qdisc, and the newline `print_qdisc`
/// adds after it.
pub(super) fn print_xstats(x: &FqCodelXstats, out: &mut Out) {
    let u = |out: &mut Out, key: &str, text: &str, v: u32| {
        out.uint(To::Any, key, &format!("{text}{v}"), v as u64);
    };
    u(out, "maxpacket", "  maxpacket ", x.maxpacket);
    u(out, "drop_overlimit", " drop_overlimit ", x.drop_overlimit);
    u(out, "new_flow_count", " new_flow_count ", x.new_flow_count);
    u(out, "ecn_mark", " ecn_mark ", x.ecn_mark);
    if x.ce_mark != 0 {
        u(out, "ce_mark", " ce_mark ", x.ce_mark);
    }
    if x.memory_usage != 0 {
        u(out, "memory_used", " memory_used ", x.memory_usage);
    }
    if x.drop_overmemory != 0 {
        u(
            out,
            "drop_overmemory",
            " drop_overmemory ",
            x.drop_overmemory,
        );
    }
    out.nl();
    u(out, "new_flows_len", "  new_flows_len ", x.new_flows_len);
    u(out, "old_flows_len", " old_flows_len ", x.old_flows_len);
    out.nl();
}

/// `fq_codel_print_xstats` for a class (a flow).
pub(super) fn print_class_xstats(x: &FqCodelClassXstats, out: &mut Out) {
    let d = x.deficit;
    out.int(To::Any, "deficit", &format!("  deficit {d}"), d as i64);
    out.uint(
        To::Any,
        "count",
        &format!(" count {}", x.count),
        x.count as u64,
    );
    let lc = x.lastcount;
    out.uint(To::Any, "lastcount", &format!(" lastcount {lc}"), lc as u64);
    out.uint(To::Json, "ldelay", "", x.ldelay as u64);
    out.text(&format!(" ldelay {}", fmt_time_us(x.ldelay)));
    if x.dropping {
        out.bool(To::Any, "dropping", " dropping", true);
        print_drop_next(out, x.drop_next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_core::qdisc::fq_codel::FqCodel;
    use sluice_core::qdisc::Qdisc;

    fn parse_str(s: &str) -> CmdResult<FqCodelOpts> {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        match parse(&mut Args::new(&w), None)? {
            Some(QdiscOpts::FqCodel(o)) => Ok(o),
            other => panic!("{other:?}"),
        }
    }

    fn err(s: &str) -> (String, i32) {
        let f = parse_str(s).unwrap_err();
        (f.stderr, f.code)
    }

    fn text(o: &FqCodelOpts, json: bool) -> String {
        let mut out = Out::new(json, false);
        out.open("");
        print(o, &mut out, false);
        out.close();
        out.finish()
    }

    /// What `tc qdisc show` prints for an fq_codel created with `args`.
    fn shown(args: &str) -> String {
        let q = FqCodel::new(&parse_str(args).unwrap(), &DevInfo::default()).unwrap();
        let QdiscOpts::FqCodel(o) = q.dump() else {
            unreachable!()
        };
        text(&o, false)
    }

    #[test]
    fn prints_as_tc_testing_expects() {
        // fq_codel.json 4957, 7621, 6871, 5636, 630a, 4324, b190, 5381, c9d2, 523b.
        let tail = "memory_limit 32Mb ecn drop_batch 64 ";
        assert_eq!(
            shown(""),
            format!("limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms {tail}")
        );
        assert_eq!(
            shown("limit 1000"),
            format!("limit 1000p flows 1024 quantum 1514 target 5ms interval 100ms {tail}")
        );
        assert_eq!(
            shown("memory_limit 100000"),
            "limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 100000b ecn drop_batch 64 "
        );
        assert!(shown("target 2000").contains("target 2ms interval 100ms "));
        assert!(shown("interval 5000").contains("target 5ms interval 5ms "));
        assert!(shown("quantum 9000").contains("quantum 9000 target"));
        assert_eq!(
            shown("noecn"),
            "limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb drop_batch 64 "
        );
        assert!(
            shown("ce_threshold 1024000").contains("target 5ms ce_threshold 1.02s interval 100ms ")
        );
        assert!(shown("drop_batch 100").ends_with("ecn drop_batch 100 "));
        assert!(shown("limit 1000 flows 256 drop_batch 100")
            .starts_with("limit 1000p flows 256 quantum 1514 "));
    }

    #[test]
    fn the_selector_prints_in_hex() {
        assert!(shown("ce_threshold 1ms ce_threshold_selector 0x1/0x3")
            .contains("ce_threshold 999us ce_threshold_selector 0x1/0x3 interval"));
        assert!(shown("ce_threshold 1ms ce_threshold_selector 0/0xfc")
            .contains("ce_threshold_selector 0/0xfc interval"));
        assert!(!shown("ce_threshold 1ms ce_threshold_selector 0/0").contains("selector"));
    }

    #[test]
    fn json_as_iproute2() {
        let o = FqCodel::new(
            &parse_str("ce_threshold 2ms ce_threshold_selector 0x50/0xfc").unwrap(),
            &DevInfo::default(),
        )
        .unwrap()
        .dump();
        let QdiscOpts::FqCodel(o) = o else {
            unreachable!()
        };
        assert_eq!(
            text(&o, true),
            "[{\"limit\":10240,\"flows\":1024,\"quantum\":1514,\"target\":4999,\"ce_threshold\":1999,\
             \"ce_threshold_selector\":80,\"ce_threshold_mask\":252,\"interval\":99999,\
             \"memory_limit\":33554432,\"ecn\":true,\"drop_batch\":64}]\n"
        );
    }

    #[test]
    fn sends_only_what_was_given() {
        assert_eq!(parse_str("").unwrap(), FqCodelOpts::default());
        let o = parse_str("limit 0 flows 0 quantum 0 drop_batch 0 target 0 interval 0").unwrap();
        assert_eq!(o, FqCodelOpts::default());
        // tc's "unset" markers.
        let o = parse_str("memory_limit 4294967295 ce_threshold_selector 0xff/0xff").unwrap();
        assert_eq!(o, FqCodelOpts::default());
        let o =
            parse_str("memory_limit 1m ce_threshold_selector 1/3 noecn ce_threshold 0").unwrap();
        assert_eq!(
            (
                o.memory_limit,
                o.ce_threshold_selector,
                o.ce_threshold_mask,
                o.ecn,
                o.ce_threshold
            ),
            (Some(1 << 20), Some(1), Some(3), Some(false), Some(0))
        );
    }

    #[test]
    fn parse_errors_as_iproute2() {
        // help.golden, and tc 6.1 run by hand.
        assert_eq!(err("help"), (format!("{USAGE}\n"), 1));
        assert_eq!(err("bogus"), (format!("What is \"bogus\"?\n{USAGE}\n"), 1));
        assert_eq!(err("ECN").0, format!("What is \"ECN\"?\n{USAGE}\n"));
        for (args, msg) in [
            ("limit abc", "Illegal \"limit\""),
            ("limit -1", "Illegal \"limit\""),
            ("limit 4294967296", "Illegal \"limit\""),
            ("flows abc", "Illegal \"flows\""),
            ("quantum 1k", "Illegal \"quantum\""),
            ("drop_batch x", "Illegal \"drop_batch\""),
            ("target abc", "Illegal \"target\""),
            ("target 1ns", "Illegal \"target\""),
            ("interval abc", "Illegal \"interval\""),
            ("ce_threshold abc", "Illegal \"ce_threshold\""),
            ("memory_limit 1x", "Illegal \"memory_limit\""),
            ("memory_limit 4g", "Illegal \"memory_limit\""),
            (
                "ce_threshold_selector 1",
                "Missing mask for \"ce_threshold_selector\"",
            ),
            (
                "ce_threshold_selector x/1",
                "Illegal \"ce_threshold_selector\"",
            ),
            (
                "ce_threshold_selector 256/1",
                "Illegal \"ce_threshold_selector\"",
            ),
            (
                "ce_threshold_selector 1/x",
                "Illegal mask for \"ce_threshold_selector\"",
            ),
            (
                "ce_threshold_selector x/x",
                "Illegal mask for \"ce_threshold_selector\"",
            ),
            (
                "ce_threshold_selector 1/2/3",
                "Illegal mask for \"ce_threshold_selector\"",
            ),
            (
                "ce_threshold_selector /1",
                "Illegal \"ce_threshold_selector\"",
            ),
        ] {
            assert_eq!(err(args), (format!("{msg}\n"), 1), "{args}");
        }
        assert_eq!(err("limit").1, 255);
        assert_eq!(
            err("help").0,
            "Usage: ... fq_codel\t[ limit PACKETS ] [ flows NUMBER ]\n[ memory_limit BYTES ]\n\
             [ target TIME ] [ interval TIME ]\n[ quantum BYTES ] [ [no]ecn ]\n[ ce_threshold TIME ]\n\
             [ ce_threshold_selector VALUE/MASK ]\n[ drop_batch SIZE ]\n"
        );
    }

    #[test]
    fn xstats_as_iproute2() {
        let x = FqCodelXstats {
            maxpacket: 1514,
            drop_overlimit: 7,
            ecn_mark: 3,
            new_flow_count: 42,
            new_flows_len: 1,
            old_flows_len: 2,
            ce_mark: 0,
            memory_usage: 0,
            drop_overmemory: 0,
        };
        let mut out = Out::new(false, false);
        print_xstats(&x, &mut out);
        assert_eq!(
            out.finish(),
            "  maxpacket 1514 drop_overlimit 7 new_flow_count 42 ecn_mark 3\n  new_flows_len 1 old_flows_len 2\n"
        );
        let mut out = Out::new(false, false);
        let busy = FqCodelXstats {
            ce_mark: 1,
            memory_usage: 4608,
            drop_overmemory: 2,
            ..x
        };
        print_xstats(&busy, &mut out);
        assert_eq!(
            out.finish(),
            "  maxpacket 1514 drop_overlimit 7 new_flow_count 42 ecn_mark 3 ce_mark 1 memory_used 4608 drop_overmemory 2\n  new_flows_len 1 old_flows_len 2\n"
        );
        let mut out = Out::new(true, false);
        out.open("");
        print_xstats(&x, &mut out);
        out.close();
        assert_eq!(
            out.finish(),
            "[{\"maxpacket\":1514,\"drop_overlimit\":7,\"new_flow_count\":42,\"ecn_mark\":3,\
             \"new_flows_len\":1,\"old_flows_len\":2}]\n"
        );
    }

    #[test]
    fn class_xstats_as_iproute2() {
        let mut x = FqCodelClassXstats {
            deficit: -486,
            ldelay: 12500,
            count: 4,
            lastcount: 2,
            dropping: false,
            drop_next: 0,
        };
        let mut out = Out::new(false, false);
        print_class_xstats(&x, &mut out);
        assert_eq!(
            out.finish(),
            "  deficit -486 count 4 lastcount 2 ldelay 12.5ms"
        );
        x.dropping = true;
        x.drop_next = 48800;
        let mut out = Out::new(false, false);
        print_class_xstats(&x, &mut out);
        assert_eq!(
            out.finish(),
            "  deficit -486 count 4 lastcount 2 ldelay 12.5ms dropping drop_next 48.8ms"
        );
    }

    /// The kernel's dump of `o`, and its printout.
    fn printed(o: &FqCodelOpts) -> (FqCodelOpts, String) {
        let q = FqCodel::new(o, &DevInfo::default()).unwrap();
        let QdiscOpts::FqCodel(d) = q.dump() else {
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

    fn opts() -> impl Strategy<Value = FqCodelOpts> {
        (
            (
                proptest::option::of(1..20000u32),
                proptest::option::of(1..65536u32),
                proptest::option::of(0..100_000u32),
                // Times of 2 µs or more: a 1 µs one is 0 in the kernel's
                // 1024 ns clock, prints as 0us, and tc sends no 0 target.
                proptest::option::of(2..2_000_000u32),
                proptest::option::of(2..5_000_000u32),
            ),
            (
                proptest::option::of(any::<bool>()),
                proptest::option::of(0..3_000_000u32),
                proptest::option::of((0..255u8, any::<u8>())),
                proptest::option::of(0..200u32),
                proptest::option::of(0..u32::MAX - 1),
            ),
        )
            .prop_map(
                |((limit, flows, quantum, target, interval), (ecn, ce, sel, batch, mem))| {
                    FqCodelOpts {
                        limit,
                        flows,
                        quantum,
                        target,
                        interval,
                        ecn,
                        ce_threshold: ce,
                        ce_threshold_selector: sel.map(|s| s.0),
                        ce_threshold_mask: sel.map(|s| s.1),
                        drop_batch_size: batch,
                        memory_limit: mem,
                    }
                },
            )
    }

    proptest! {
        /// Printing a qdisc's options and giving them back to tc (with
        /// `limit Np` read as `limit N`) gives the same options, up to the
        /// printed precision of times and sizes and the kernel's clock.
        #[test]
        fn printed_options_parse_back(o in opts()) {
            let (d0, first) = printed(&o);
            let mut input: Vec<String> = first
                .split_whitespace()
                .map(|w| w.strip_suffix('p').filter(|n| n.parse::<u32>().is_ok()).unwrap_or(w).to_string())
                .collect();
            // ECN off prints nothing, and fq_codel's default is on.
            if !input.iter().any(|w| w == "ecn") {
                input.push("noecn".into());
            }
            let again = match parse(&mut Args::new(&input), None).unwrap() {
                Some(QdiscOpts::FqCodel(o)) => o,
                other => panic!("{other:?}"),
            };
            let (d1, _) = printed(&again);
            prop_assert_eq!(
                (d1.limit, d1.flows, d1.quantum, d1.ecn, d1.drop_batch_size),
                (d0.limit, d0.flows, d0.quantum, d0.ecn, d0.drop_batch_size)
            );
            let sel = |d: &FqCodelOpts| match (d.ce_threshold_selector, d.ce_threshold_mask) {
                (Some(0), Some(0)) | (None, None) => None,
                s => Some(s),
            };
            if d0.ce_threshold.is_some() && sel(&d0).is_some() {
                prop_assert_eq!(sel(&d1), sel(&d0));
            }
            prop_assert_eq!(fmt_size(d1.memory_limit.unwrap()), fmt_size(d0.memory_limit.unwrap()));
            prop_assert!(close(d0.target, d1.target), "{:?} {:?}", d0, d1);
            prop_assert!(close(d0.interval, d1.interval), "{:?} {:?}", d0, d1);
            prop_assert!(close(d0.ce_threshold, d1.ce_threshold), "{:?} {:?}", d0, d1);
        }
    }
}
