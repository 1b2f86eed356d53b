//! fq syntax (iproute2 6.1 tc/q_fq.c): `limit`, `flow_limit`, `quantum`,
//! `initial_quantum`, `maxrate`, `buckets`, `pacing`/`nopacing`,
//! `refill_delay`, `low_rate_threshold`, `orphan_mask`, `timer_slack`,
//! `ce_threshold`, `horizon`, `horizon_cap`/`horizon_drop`, and the
//! undocumented `defrate`; the statistics printer.
//!
//! tc sends only what was given; `buckets` is sent as its log2 rounded up,
//! and 0 buckets as nothing. iproute2 6.1 knows nothing of the bands,
//! priomap, weights and offload horizon that newer kernels dump, so none of
//! them is printed, nor the fast-path and per-band counters of `-s`.

use super::{codel::print_time, get_u32};
use crate::args::{after, percent_rate, Args, CmdResult, Fail};
use crate::out::{Out, To, J};
use sluice_core::qdisc::fq::{FqOpts, FqXstats};
use sluice_core::qdisc::{DevInfo, QdiscOpts};
use sluice_core::units::{fmt_size, fmt_time_ns, parse_rate32, parse_time_ns, parse_time_us};

const USAGE: &str = "Usage: ... fq\t[ limit PACKETS ] [ flow_limit PACKETS ]
\t\t[ quantum BYTES ] [ initial_quantum BYTES ]
\t\t[ maxrate RATE  ] [ buckets NUMBER ]
\t\t[ [no]pacing ] [ refill_delay TIME ]
\t\t[ low_rate_threshold RATE ]
\t\t[ orphan_mask MASK]
\t\t[ timer_slack TIME]
\t\t[ ce_threshold TIME ]
\t\t[ horizon TIME ]
\t\t[ horizon_{cap|drop} ]";

fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\""))
}

/// iproute2's `ilog2` of `buckets`: the log2 rounded up.
fn ilog2(v: u32) -> u32 {
    let mut v = v.wrapping_sub(1);
    let mut r = 0;
    while v != 0 {
        r += 1;
        v >>= 1;
    }
    r
}

/// `maxrate`/`defrate`: `get_rate`, or a percentage of the device's speed.
fn rate_or_percent(v: &str, what: &str, dev: Option<&DevInfo>) -> CmdResult<u32> {
    let text = match v.contains('%') {
        true => percent_rate(v, dev).map_err(|pre| after(pre, illegal(what)))?,
        false => v.to_string(),
    };
    parse_rate32(&text).map_err(|_| illegal(what))
}

/// `fq_parse_opt`.
pub(super) fn parse(a: &mut Args, dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    let mut o = FqOpts::default();
    let mut buckets = 0u32;
    while let Some(w) = a.next() {
        let mut unsigned =
            |what: &str| -> CmdResult<u32> { get_u32(a.value()?, 0).ok_or_else(|| illegal(what)) };
        match w {
            "limit" => o.limit = Some(unsigned(w)?),
            "flow_limit" => o.flow_limit = Some(unsigned(w)?),
            "buckets" => buckets = unsigned(w)?,
            "quantum" => o.quantum = Some(unsigned(w)?),
            "initial_quantum" => o.initial_quantum = Some(unsigned(w)?),
            // iproute2 names the wrong option here.
            "orphan_mask" => o.orphan_mask = Some(unsigned("initial_quantum")?),
            "maxrate" => o.maxrate = Some(rate_or_percent(a.value()?, w, dev)?),
            "defrate" => o.defrate = Some(rate_or_percent(a.value()?, w, dev)?),
            "low_rate_threshold" => {
                o.low_rate_threshold = Some(parse_rate32(a.value()?).map_err(|_| illegal(w))?)
            }
            "ce_threshold" | "refill_delay" | "horizon" => {
                let t = parse_time_us(a.value()?).map_err(|_| illegal(w))?;
                match w {
                    "ce_threshold" => o.ce_threshold = Some(t),
                    "refill_delay" => o.refill_delay = Some(t),
                    _ => o.horizon = Some(t),
                }
            }
            "timer_slack" => {
                let t = parse_time_ns(a.value()?).map_err(|_| illegal(w))?;
                if t as u32 as i64 != t {
                    return Err(Fail::new(1, "Illegal (out of range) \"timer_slack\""));
                }
                o.timer_slack = Some(t as u32);
            }
            "horizon_drop" => o.horizon_drop = Some(true),
            "horizon_cap" => o.horizon_drop = Some(false),
            "pacing" => o.pacing = Some(1),
            "nopacing" => o.pacing = Some(0),
            "help" => return Err(Fail::new(1, USAGE)),
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))),
        }
    }
    if buckets != 0 {
        o.buckets_log = Some(ilog2(buckets));
    }
    Ok(Some(QdiscOpts::Fq(o)))
}

/// A time in ns: the number in JSON, `sprint_time64` in text.
fn print_time64(out: &mut Out, key: &str, text: &str, ns: u64) {
    out.uint(To::Json, key, "", ns);
    out.text(&format!("{text}{}", fmt_time_ns(ns as i64)));
}

/// `fq_print_opt`.
pub(super) fn print(o: &FqOpts, out: &mut Out, _details: bool) {
    if let Some(l) = o.limit {
        out.uint(To::Any, "limit", &format!("limit {l}p "), l as u64);
    }
    if let Some(l) = o.flow_limit {
        out.uint(
            To::Any,
            "flow_limit",
            &format!("flow_limit {l}p "),
            l as u64,
        );
    }
    if let Some(b) = o.buckets_log {
        let n = 1u32.wrapping_shl(b);
        out.uint(To::Any, "buckets", &format!("buckets {n} "), n as u64);
    }
    if let Some(m) = o.orphan_mask {
        out.uint(
            To::Any,
            "orphan_mask",
            &format!("orphan_mask {m} "),
            m as u64,
        );
    }
    if o.pacing == Some(0) {
        out.bool(To::Any, "pacing", "nopacing ", false);
    }
    let size = |out: &mut Out, key: &str, v: u32| {
        let text = format!("{key} {} ", fmt_size(v));
        out.uint(To::Any, key, &text, v as u64);
    };
    if let Some(q) = o.quantum {
        size(out, "quantum", q);
    }
    if let Some(q) = o.initial_quantum {
        size(out, "initial_quantum", q);
    }
    let rate = |out: &mut Out, key: &str, r: u32| {
        let text = format!("{key} {} ", out.rate(r as u64));
        out.uint(To::Any, key, &text, r as u64);
    };
    if let Some(r) = o.maxrate.filter(|&r| r != u32::MAX) {
        rate(out, "maxrate", r);
    }
    if let Some(r) = o.defrate.filter(|&r| r != 0) {
        rate(out, "defrate", r);
    }
    if let Some(r) = o.low_rate_threshold.filter(|&r| r != 0) {
        rate(out, "low_rate_threshold", r);
    }
    if let Some(d) = o.refill_delay {
        print_time(out, "refill_delay", d);
    }
    if let Some(c) = o.ce_threshold.filter(|&c| c != u32::MAX) {
        print_time(out, "ce_threshold", c);
    }
    if let Some(s) = o.timer_slack {
        print_time64(out, "timer_slack", "timer_slack ", s as u64);
        out.text(" ");
    }
    if let Some(h) = o.horizon {
        print_time(out, "horizon", h);
    }
    match o.horizon_drop {
        Some(false) => out.item(To::Any, "horizon_cap", "horizon_cap ", J::Null),
        Some(true) => out.item(To::Any, "horizon_drop", "horizon_drop ", J::Null),
        None => {}
    }
}

/// `fq_print_xstats` of iproute2 6.1, and the newline `print_qdisc` adds.
pub(super) fn print_xstats(x: &FqXstats, out: &mut Out) {
    let u = |out: &mut Out, key: &str, text: &str, v: u64| {
        out.uint(To::Any, key, &format!("{text}{v}"), v);
    };
    u(out, "flows", "  flows ", x.flows as u64);
    u(out, "inactive", " (inactive ", x.inactive_flows as u64);
    u(out, "throttled", " throttled ", x.throttled_flows as u64);
    out.text(")");
    if x.time_next_delayed_flow > 0 {
        let t = x.time_next_delayed_flow as u64;
        print_time64(out, "next_packet_delay", " next_packet_delay ", t);
    }
    out.nl();
    u(out, "gc", "  gc ", x.gc_flows);
    u(out, "highprio", " highprio ", x.highprio_packets);
    if x.tcp_retrans != 0 {
        u(out, "retrans", " retrans ", x.tcp_retrans);
    }
    u(out, "throttled", " throttled ", x.throttled);
    if x.unthrottle_latency_ns != 0 {
        print_time64(out, "latency", " latency ", x.unthrottle_latency_ns as u64);
    }
    if x.ce_mark != 0 {
        u(out, "ce_mark", " ce_mark ", x.ce_mark);
    }
    if x.flows_plimit != 0 {
        u(out, "flows_plimit", " flows_plimit ", x.flows_plimit);
    }
    if x.pkts_too_long != 0
        || x.allocation_errors != 0
        || x.horizon_drops != 0
        || x.horizon_caps != 0
    {
        out.nl();
        if x.pkts_too_long != 0 {
            u(out, "pkts_too_long", " pkts_too_long ", x.pkts_too_long);
        }
        if x.allocation_errors != 0 {
            u(out, "alloc_errors", " alloc_errors ", x.allocation_errors);
        }
        if x.horizon_drops != 0 {
            u(out, "horizon_drops", " horizon_drops ", x.horizon_drops);
        }
        if x.horizon_caps != 0 {
            u(out, "horizon_caps", "  horizon_caps ", x.horizon_caps);
        }
    }
    out.nl();
}

#[cfg(test)]
mod tests {
    use crate::Outcome;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn run(net: &mut crate::net::Net, line: &str) -> Outcome {
        let (opts, rest) = crate::tc::parse_global(&words(line)).unwrap();
        crate::tc::run(net, &opts, &rest)
    }

    /// A namespace with a dummy device `d0` of MTU 1500.
    fn net() -> crate::net::Net {
        let mut net = crate::net::Net::new();
        let info = sluice_core::qdisc::DevInfo {
            name: "d0".into(),
            ..Default::default()
        };
        net.add_device(info, sluice_core::device::DevKind::Dummy);
        net
    }

    /// `tc qdisc add dev d0 root handle 1: fq ARGS`, then `tc FLAGS qdisc show dev d0`.
    fn shown(args: &str, flags: &str) -> String {
        let mut net = net();
        let o = run(
            &mut net,
            &format!("qdisc add dev d0 root handle 1: fq {args}"),
        );
        assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{args}");
        run(&mut net, &format!("{flags}qdisc show dev d0")).stdout
    }

    fn err(args: &str) -> (String, i32) {
        let mut net = net();
        let o = run(
            &mut net,
            &format!("qdisc add dev d0 root handle 1: fq {args}"),
        );
        (o.stderr, o.code)
    }

    const DEFAULT: &str = "limit 10000p flow_limit 100p buckets 1024 orphan_mask 1023 \
        quantum 3028b initial_quantum 15140b low_rate_threshold 550Kbit refill_delay 40ms \
        timer_slack 10us horizon 10s horizon_drop ";

    #[test]
    fn prints_as_iproute2_6_1() {
        // The defaults as in the iproute2 patch adding horizon (Linux 5.8+,
        // MTU 1500), and the tc-testing fq.json expectations.
        let line = |tail: &str| format!("qdisc fq 1: root refcnt 2 {tail}\n");
        assert_eq!(shown("", ""), line(DEFAULT));
        assert_eq!(
            shown(
                "limit 3000 flow_limit 300 quantum 9000 initial_quantum 900000",
                ""
            ),
            line(
                "limit 3000p flow_limit 300p buckets 1024 orphan_mask 1023 quantum 9000b \
                 initial_quantum 900000b low_rate_threshold 550Kbit refill_delay 40ms \
                 timer_slack 10us horizon 10s horizon_drop "
            )
        );
        for (args, part) in [
            (
                "maxrate 100000",
                "initial_quantum 15140b maxrate 100Kbit low_rate_threshold",
            ),
            ("nopacing", "orphan_mask 1023 nopacing quantum"),
            ("refill_delay 100ms", "refill_delay 100ms timer_slack"),
            (
                "low_rate_threshold 10000",
                "low_rate_threshold 10Kbit refill_delay",
            ),
            ("orphan_mask 255", "orphan_mask 255 quantum"),
            ("timer_slack 100", "timer_slack 100ns horizon"),
            (
                "ce_threshold 100",
                "refill_delay 40ms ce_threshold 100us timer_slack",
            ),
            ("horizon 100", "horizon 100us horizon_drop "),
            ("horizon_cap", "horizon 10s horizon_cap "),
            ("buckets 1000", "buckets 1024 orphan_mask"),
            ("buckets 3", "buckets 4 orphan_mask"),
            (
                "pacing low_rate_threshold 0",
                "initial_quantum 15140b refill_delay",
            ),
        ] {
            let s = shown(args, "");
            assert!(s.contains(part), "{args}: {s}");
        }
    }

    #[test]
    fn loopback_quanta_follow_its_mtu() {
        // psched_mtu(lo) = 65536 + 14.
        let mut net = crate::net::Net::new();
        let o = run(&mut net, "qdisc add dev lo root fq");
        assert_eq!(o.code, 0);
        let s = run(&mut net, "qdisc show dev lo").stdout;
        assert!(
            s.contains(" quantum 131100b initial_quantum 655500b "),
            "{s}"
        );
    }

    #[test]
    fn json_as_iproute2_6_1() {
        assert_eq!(
            shown("maxrate 1mbit horizon_cap nopacing", "-j "),
            "[{\"kind\":\"fq\",\"handle\":\"1:\",\"root\":true,\"refcnt\":2,\"options\":{\
             \"limit\":10000,\"flow_limit\":100,\"buckets\":1024,\"orphan_mask\":1023,\
             \"pacing\":false,\"quantum\":3028,\"initial_quantum\":15140,\"maxrate\":125000,\
             \"low_rate_threshold\":68750,\"refill_delay\":40000,\"timer_slack\":10000,\
             \"horizon\":10000000,\"horizon_cap\":null}}]\n"
        );
    }

    #[test]
    fn parse_errors_as_iproute2_6_1() {
        // Each checked against tc 6.1 run by hand.
        let usage = super::USAGE;
        assert_eq!(err("help"), (format!("{usage}\n"), 1));
        assert_eq!(err("bogus"), (format!("What is \"bogus\"?\n{usage}\n"), 1));
        assert_eq!(err("orphan_mask x").0, "Illegal \"initial_quantum\"\n");
        assert_eq!(
            err("timer_slack 10s").0,
            "Illegal (out of range) \"timer_slack\"\n"
        );
        assert_eq!(err("limit -1").0, "Illegal \"limit\"\n");
        assert_eq!(err("refill_delay 1x").0, "Illegal \"refill_delay\"\n");
        assert_eq!(err("initial_quantum 1k").0, "Illegal \"initial_quantum\"\n");
        assert_eq!(
            err("low_rate_threshold 10%").0,
            "Illegal \"low_rate_threshold\"\n"
        );
        assert_eq!(err("maxrate 50gbit").0, "Illegal \"maxrate\"\n");
        assert_eq!(
            err("buckets"),
            (
                "Command line is not complete. Try option \"help\"\n".into(),
                255
            )
        );
        // The kernel's answers (tc-testing 10f7 expects exit 2).
        assert_eq!(
            err("initial_quantum 0x80000000"),
            ("Error: integer out of range.\n".into(), 2)
        );
        assert_eq!(
            err("quantum 0"),
            ("Error: sch_fq: invalid quantum.\n".into(), 2)
        );
        assert_eq!(err("buckets 1000000").1, 2);
    }

    #[test]
    fn printed_options_parse_back_to_the_same_qdisc() {
        for args in [
            "",
            "limit 5 flow_limit 7 quantum 1000 initial_quantum 4000 maxrate 12mbit buckets 64 \
             nopacing refill_delay 2ms low_rate_threshold 1mbit orphan_mask 63 timer_slack 1ms \
             ce_threshold 3ms horizon 2s horizon_cap",
        ] {
            let a = shown(args, "");
            let opts: Vec<&str> = a
                .split("refcnt 2 ")
                .nth(1)
                .unwrap()
                .split_whitespace()
                .collect();
            let opts: Vec<&str> = opts
                .iter()
                // `100p` and `3028b` are printed; tc takes bare counts.
                .map(|w| match w.strip_suffix('p').or(w.strip_suffix('b')) {
                    Some(n) if n.parse::<u32>().is_ok() => n,
                    _ => w,
                })
                .collect();
            let opts = opts.join(" ");
            let b = shown(&opts, "");
            assert_eq!(a, b, "{args}");
        }
    }

    #[test]
    fn statistics_as_iproute2_6_1() {
        let mut net = net();
        let o = run(&mut net, "qdisc add dev d0 root handle 1: fq");
        assert_eq!(o.code, 0);
        let s = run(&mut net, "-s qdisc show dev d0").stdout;
        assert_eq!(
            s,
            format!(
                "qdisc fq 1: root refcnt 2 {DEFAULT}\n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n  flows 0 (inactive 0 throttled 0)\n  gc 0 highprio 0 throttled 0\n"
            )
        );
    }
}
