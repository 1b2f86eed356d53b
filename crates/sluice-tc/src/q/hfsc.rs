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

#[cfg(test)]
mod tests {
    use crate::net::Net;
    use crate::{ip, tc, Outcome};
    use sluice_core::handle::Handle;
    use sluice_core::packet::Packet;
    use sluice_core::packet::Skb;
    use sluice_core::qdisc::{Cx, Dequeue};
    use sluice_core::time::Time;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn net() -> Net {
        let mut net = Net::new();
        for c in [
            "link add dev DEV type veth peer name PEER",
            "link set dev DEV up",
            "link set dev PEER up",
        ] {
            assert_eq!(ip::run(&mut net, &words(c)).code, 0, "{c}");
        }
        net
    }

    fn tc(net: &mut Net, line: &str) -> Outcome {
        let (opts, rest) = tc::parse_global(&words(line)).expect("options");
        tc::run(net, &opts, &rest)
    }

    fn ok(net: &mut Net, line: &str) -> String {
        let o = tc(net, line);
        assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{line}");
        o.stdout
    }

    fn with_qdisc() -> Net {
        let mut n = net();
        ok(&mut n, "qdisc add dev DEV root handle 1: hfsc default 11");
        n
    }

    /// The stderr and exit status of a failing command.
    fn fails(net: &mut Net, line: &str) -> (String, i32) {
        let o = tc(net, line);
        assert_ne!(o.code, 0, "{line} succeeded");
        (o.stderr, o.code)
    }

    fn class_usage() -> String {
        super::CLASS_USAGE.to_string()
    }

    #[test]
    fn qdisc_options_print_and_refusals_as_iproute2() {
        let mut n = net();
        ok(&mut n, "qdisc add dev DEV root handle 1: hfsc default 1a");
        assert_eq!(
            ok(&mut n, "qdisc show dev DEV"),
            "qdisc hfsc 1: root refcnt 2 default 1a \n"
        );
        ok(&mut n, "qdisc change dev DEV root handle 1: hfsc");
        assert_eq!(
            ok(&mut n, "qdisc show dev DEV"),
            "qdisc hfsc 1: root refcnt 2 \n"
        );
        // Observed with iproute2 6.1's tc (its parser runs before the kernel is asked).
        let usage = super::QDISC_USAGE;
        for (cmd, err, code) in [
            (
                "default 1 default 2",
                "HFSC: Double \"default\"\n".to_string(),
                1,
            ),
            ("d 1 de 2", "HFSC: Double \"default\"\n".into(), 1),
            ("default xyz", "HFSC: Illegal \"default\"\n".into(), 1),
            ("default 10000", "HFSC: Illegal \"default\"\n".into(), 1),
            ("bogus", format!("HFSC: What is \"bogus\" ?\n{usage}"), 1),
            ("help", usage.to_string(), 1),
            (
                "default",
                "Command line is not complete. Try option \"help\"\n".into(),
                255,
            ),
        ] {
            let line = format!("qdisc replace dev DEV root hfsc {cmd}");
            assert_eq!(fails(&mut n, &line), (err, code), "{cmd}");
        }
        // "default 0" twice is no double: tc only checks for a non-zero value.
        ok(
            &mut n,
            "qdisc replace dev DEV root handle 1: hfsc default 0 default 0",
        );
    }

    #[test]
    fn classes_print_as_the_tc_testing_cases_expect() {
        let mut n = with_qdisc();
        ok(
            &mut n,
            "class add dev DEV parent 1: classid 1:1 hfsc sc rate 20000 ul rate 10000",
        );
        ok(&mut n, "class add dev DEV parent 1: classid 1:2 hfsc sc umax 1540 dmax 5ms rate 10000 ul rate 10000");
        ok(
            &mut n,
            "class add dev DEV parent 1: classid 1:3 hfsc rt rate 20000 ls rate 10000",
        );
        ok(&mut n, "class add dev DEV parent 1: classid 1:4 hfsc rt umax 1540 dmax 5ms rate 10000 ls rate 10000");
        ok(
            &mut n,
            "class add dev DEV parent 1: classid 1:5 hfsc rt m1 1mbit d 10ms m2 200kbit",
        );
        let out = ok(&mut n, "class show dev DEV");
        for want in [
            "class hfsc 1: root \n",
            "class hfsc 1:1 parent 1: sc m1 0bit d 0us m2 20Kbit ul m1 0bit d 0us m2 10Kbit \n",
            "class hfsc 1:2 parent 1: sc m1 2464Kbit d 5ms m2 10Kbit ul m1 0bit d 0us m2 10Kbit \n",
            "class hfsc 1:3 parent 1: rt m1 0bit d 0us m2 20Kbit ls m1 0bit d 0us m2 10Kbit \n",
            "class hfsc 1:4 parent 1: rt m1 2464Kbit d 5ms m2 10Kbit ls m1 0bit d 0us m2 10Kbit \n",
            "class hfsc 1:5 parent 1: rt m1 1Mbit d 10ms m2 200Kbit \n",
        ] {
            assert!(out.contains(want), "missing {want:?} in\n{out}");
        }
        // The kernel's order: the class hash (1:0 in bucket 0, 1:1 in 1, ...).
        let order: Vec<&str> = out.lines().map(|l| l.split(' ').nth(2).unwrap()).collect();
        assert_eq!(order, ["1:", "1:1", "1:2", "1:3", "1:4", "1:5"]);
    }

    #[test]
    fn an_rt_parent_is_upgraded_with_the_kernels_warning() {
        let mut n = with_qdisc();
        ok(
            &mut n,
            "class add dev DEV parent 1: classid 1:1 hfsc rt rate 8",
        );
        let o = tc(
            &mut n,
            "class add dev DEV parent 1:1 classid 1:2 hfsc rt rate 8",
        );
        assert_eq!(o.code, 0);
        assert_eq!(
            o.stderr,
            "Warning: Forced curve change on parent 'rt' to 'sc'\n"
        );
        let out = ok(&mut n, "class show dev DEV");
        assert!(
            out.contains("class hfsc 1:1 parent 1: sc m1 0bit d 0us m2 8bit \n"),
            "{out}"
        );
        assert!(
            out.contains("class hfsc 1:2 parent 1:1 rt m1 0bit d 0us m2 8bit \n"),
            "{out}"
        );
    }

    #[test]
    fn class_parse_errors_as_iproute2() {
        let mut n = with_qdisc();
        let usage = class_usage();
        let incomplete = "Command line is not complete. Try option \"help\"\n".to_string();
        // Each observed with iproute2 6.1's tc.
        for (args, err, code) in [
            ("", format!("HFSC: no parameters given\n{usage}"), 1),
            (
                "ul rate 1mbit",
                format!(
                    "HFSC: Upper-limit Service Curve without Link-Share Service Curve\n{usage}"
                ),
                1,
            ),
            (
                "rt m1 0 d 0 m2 0",
                "HFSC: Service Curve has two zero slopes\nHFSC: Illegal \"rt\"\n".into(),
                1,
            ),
            ("rt foo", "HFSC: Illegal \"rt\"\n".into(), 1),
            ("rt", incomplete.clone(), 255),
            ("rt m1 1mbit", incomplete.clone(), 255),
            ("rt m1 0 d 10ms", incomplete.clone(), 255),
            ("rt m1 1mbit d 10ms m2", incomplete.clone(), 255),
            ("rt umax 1000 dmax 1ms", incomplete.clone(), 255),
            (
                "rt m1 xx d 1 m2 1",
                "HFSC: Illegal \"m1\"\nHFSC: Illegal \"rt\"\n".into(),
                1,
            ),
            (
                "rt umax 1000 rate 1mbit",
                "HFSC: umax given but dmax is zero.\nHFSC: Illegal \"rt\"\n".into(),
                1,
            ),
            (
                "rt umax 100 rate 0",
                "HFSC: umax given but dmax is zero.\nHFSC: Illegal \"rt\"\n".into(),
                1,
            ),
            (
                "rt m2 0",
                "HFSC: Service Curve has two zero slopes\nHFSC: Illegal \"rt\"\n".into(),
                1,
            ),
            (
                "rt dmax 1ms rate 99999999999999",
                "HFSC: Illegal \"rate\"\nHFSC: Illegal \"rt\"\n".into(),
                1,
            ),
            ("bogus", format!("HFSC: What is \"bogus\" ?\n{usage}"), 1),
            (
                "ls m2 1mbit ul m2 1mbit rt d 1s m2 1mbit bogus",
                format!("HFSC: What is \"bogus\" ?\n{usage}"),
                1,
            ),
            ("help", usage.clone(), 1),
        ] {
            let line = format!("class add dev DEV parent 1: classid 1:1 hfsc {args}");
            assert_eq!(fails(&mut n, &line), (err, code), "{args}");
        }
        // tc dies of SIGFPE on a zero rate in the umax/dmax form (exit 136).
        assert_eq!(
            fails(
                &mut n,
                "class add dev DEV parent 1: classid 1:1 hfsc rt rate 0"
            )
            .1,
            136
        );
        // None of them changed anything.
        assert_eq!(ok(&mut n, "class show dev DEV"), "class hfsc 1: root \n");
    }

    #[test]
    fn kernel_refusals_reach_the_user() {
        let mut n = with_qdisc();
        ok(
            &mut n,
            "class add dev DEV parent 1: classid 1:1 hfsc ls m2 1mbit",
        );
        ok(
            &mut n,
            "class add dev DEV parent 1:1 classid 1:10 hfsc sc m2 1mbit",
        );
        let (err, code) = fails(&mut n, "class del dev DEV classid 1:1");
        assert_eq!((err.as_str(), code), ("Error: HFSC class in use.\n", 2));
        let (_, code) = fails(
            &mut n,
            "class add dev DEV parent 1:7 classid 1:2 hfsc sc m2 1mbit",
        );
        assert_eq!(code, 2);
        ok(&mut n, "class del dev DEV classid 1:10");
        ok(&mut n, "class del dev DEV classid 1:1");
        assert_eq!(ok(&mut n, "class show dev DEV"), "class hfsc 1: root \n");
    }

    #[test]
    fn stats_show_period_work_rtwork_and_level() {
        let mut n = with_qdisc();
        ok(
            &mut n,
            "class add dev DEV parent 1: classid 1:1 hfsc ls m2 10mbit",
        );
        ok(
            &mut n,
            "class add dev DEV parent 1:1 classid 1:11 hfsc sc m2 1mbit",
        );
        {
            let d = n.dev_mut("DEV").unwrap();
            let mut cx = Cx::new(Time(1_000_000));
            for i in 0..3 {
                let p = Packet::from(Skb {
                    priority: Handle::new(1, 0x11).0,
                    len: 1000,
                    id: i,
                    ..Default::default()
                });
                d.root.enqueue(p, &mut cx).unwrap();
            }
            for _ in 0..3 {
                assert!(matches!(d.root.dequeue(&mut cx), Dequeue::Packet(_)));
            }
        }
        let out = ok(&mut n, "-s class show dev DEV classid 1:11");
        // One real-time packet first (eligible at once), then link-sharing.
        assert!(
            out.contains("\n period 1 work 3000 bytes rtwork 1000 bytes level 0 \n"),
            "{out}"
        );
        let out = ok(&mut n, "-s class show dev DEV classid 1:1");
        assert!(
            out.contains("\n period 1 work 3000 bytes level 1 \n"),
            "{out}"
        );
        let out = ok(&mut n, "-s class show dev DEV classid 1:");
        assert!(out.contains("\n period 0 level 2 \n"), "{out}");
    }

    #[test]
    fn a_class_that_gets_children_keeps_its_qdisc_listed() {
        // sch_hfsc.c purges the qdisc of a leaf that becomes a parent but
        // keeps it attached (HTB destroys it), so tc qdisc show lists it.
        let mut n = with_qdisc();
        ok(
            &mut n,
            "class add dev DEV parent 1: classid 1:1 hfsc sc rate 1mbit",
        );
        ok(
            &mut n,
            "qdisc add dev DEV parent 1:1 handle 10: pfifo limit 5",
        );
        ok(
            &mut n,
            "class add dev DEV parent 1:1 classid 1:11 hfsc sc rate 1mbit",
        );
        let want = "qdisc hfsc 1: root refcnt 2 default 11 \nqdisc pfifo 10: parent 1:1 limit 5p\n";
        assert_eq!(ok(&mut n, "qdisc show dev DEV"), want);
        // But the class is no leaf: no `leaf 10:`, and no grafting there.
        let out = ok(&mut n, "class show dev DEV classid 1:1");
        assert_eq!(out, "class hfsc 1:1 parent 1: sc m1 0bit d 0us m2 1Mbit \n");
        assert_eq!(
            fails(&mut n, "qdisc add dev DEV parent 1:1 handle 20: pfifo"),
            ("RTNETLINK answers: Invalid argument\n".to_string(), 2)
        );
    }

    /// Enqueue one IPv4 packet on DEV and say which class minor holds it.
    fn classified(net: &mut Net) -> Option<u16> {
        let d = net.dev_mut("DEV").unwrap();
        let mut data = vec![0u8; 28];
        data[0] = 0x45;
        data[9] = 17;
        let p = Packet::new(data, 100, sluice_core::packet::ETH_P_IP);
        let mut cx = Cx::new(Time(0));
        if d.root.enqueue(p, &mut cx).is_err() {
            return None;
        }
        let cls = d.root.qdisc.classes().unwrap();
        let at = cls.list().into_iter().find(|c| c.stats.qlen > 0)?.classid;
        // Empty it again for the next question.
        d.root.reset();
        Some(at.minor())
    }

    #[test]
    fn filters_lead_downwards_from_the_root_to_a_leaf() {
        let mut n = net();
        for c in [
            "qdisc add dev DEV root handle 1: hfsc default 30",
            "class add dev DEV parent 1: classid 1:1 hfsc ls m2 100kbit",
            "class add dev DEV parent 1:1 classid 1:10 hfsc ls m2 50kbit",
            "class add dev DEV parent 1: classid 1:2 hfsc ls m2 100kbit",
            "class add dev DEV parent 1:2 classid 1:20 hfsc ls m2 50kbit",
            "class add dev DEV parent 1: classid 1:30 hfsc ls m2 10kbit",
        ] {
            ok(&mut n, c);
        }
        // No filter: the default class.
        assert_eq!(classified(&mut n), Some(0x30));
        // The root's filter names an inner class, whose filter names a leaf.
        ok(
            &mut n,
            "filter add dev DEV parent 1: protocol ip prio 1 u32 match u8 0 0 at 0 flowid 1:1",
        );
        assert_eq!(
            classified(&mut n),
            Some(0x30),
            "an inner class without filters"
        );
        ok(
            &mut n,
            "filter add dev DEV parent 1:1 protocol ip prio 2 u32 match u8 0 0 at 0 flowid 1:10",
        );
        assert_eq!(classified(&mut n), Some(0x10));
        // A filter of 1:1 pointing sideways (1:2 is on 1:1's level) is not
        // followed; the packet goes to the default class.
        ok(
            &mut n,
            "filter add dev DEV parent 1:1 protocol ip prio 1 u32 match u8 0 0 at 0 flowid 1:2",
        );
        assert_eq!(classified(&mut n), Some(0x30));
        // A default naming an inner class (or nothing) drops the packet.
        ok(&mut n, "qdisc change dev DEV root handle 1: hfsc default 2");
        assert_eq!(classified(&mut n), None);
    }

    #[test]
    fn json_gets_the_raw_words_as_iproute2_6_1_prints_them() {
        let mut n = with_qdisc();
        ok(
            &mut n,
            "class add dev DEV parent 1: classid 1:1 hfsc sc rate 20000",
        );
        // Classes print as text even under -j in iproute2 6.1 (see tc.rs).
        let out = ok(&mut n, "-j class show dev DEV classid 1:1");
        assert_eq!(
            out,
            "class hfsc 1:1 parent 1: sc m1 0bit d 0us m2 20Kbit \n"
        );
        let out = ok(&mut n, "-j qdisc show dev DEV");
        assert!(out.contains("\"options\":{default 11 }"), "{out}");
    }

    #[test]
    fn printed_classes_parse_back_to_the_same_class() {
        let mut n = with_qdisc();
        for c in [
            "sc rate 20000 ul rate 10000",
            "rt umax 1540 dmax 5ms rate 10000 ls rate 10000",
            "rt m1 1mbit d 10ms m2 200kbit ls m2 3mbit ul m1 5mbit d 1s m2 4mbit",
        ] {
            ok(
                &mut n,
                &format!("class replace dev DEV parent 1: classid 1:1 hfsc {c}"),
            );
            let first = ok(&mut n, "class show dev DEV classid 1:1");
            let printed = first
                .trim_end()
                .split_once("parent 1: ")
                .unwrap()
                .1
                .to_string();
            ok(&mut n, "class del dev DEV classid 1:1");
            ok(
                &mut n,
                &format!("class add dev DEV parent 1: classid 1:1 hfsc {printed}"),
            );
            assert_eq!(ok(&mut n, "class show dev DEV classid 1:1"), first, "{c}");
            ok(&mut n, "class del dev DEV classid 1:1");
        }
    }
}
