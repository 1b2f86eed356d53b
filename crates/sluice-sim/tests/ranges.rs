//! Every value of a scenario has a type and a range: what is out of range
//! is refused with a message naming the field and its node, link or
//! workload, before anything runs (crates/sluice-sim/src/limits.rs).

use sluice_sim::report::RunResult;
use sluice_sim::run::{build, run, Measure};
use sluice_sim::scenario::Scenario;
use std::collections::{BTreeMap, BTreeSet};

/// Two hosts, a 10 Mbit/s link between them, then `extra` (keys of the
/// link first, then whole tables).
fn scenario(link_keys: &str, extra: &str) -> String {
    format!(
        r#"
name = "ranges"
duration = "2s"
[vars]
rate = "10mbit"
[[node]]
name = "a"
addr = "10.0.0.1"
[[node]]
name = "b"
addr = "10.0.0.2"
[[link]]
a = "a:eth0"
b = "b:eth0"
rate = "${{rate}}"
delay = "1ms"
{link_keys}
{extra}
"#
    )
}

/// A workload table from `a` to `b` named `w`.
fn workload(kind: &str, keys: &str) -> String {
    format!("[[workload]]\ntype = \"{kind}\"\nname = \"w\"\nfrom = \"a\"\nto = \"b\"\n{keys}\n")
}

/// The error parsing or building `text` gives (with `--set` overrides).
fn error_with(text: &str, overrides: &[(&str, &str)]) -> String {
    let overrides: BTreeMap<String, String> = overrides
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let sc = match Scenario::parse(text) {
        Ok(sc) => sc,
        Err(e) => return e,
    };
    if let Err(e) = sc.check_overrides(&overrides) {
        return e;
    }
    match build(&sc, &sc.vars_for(None, &overrides)) {
        Ok(_) => String::new(),
        Err(e) => e,
    }
}

fn error(text: &str) -> String {
    error_with(text, &[])
}

/// Each `(scenario, words)`: refused, with every word in the message.
fn assert_refused(cases: &[(String, &[&str])]) {
    for (text, words) in cases {
        let e = error(text);
        assert!(!e.is_empty(), "accepted:\n{text}");
        for w in *words {
            assert!(e.contains(w), "{w:?} not in {e:?} for\n{text}");
        }
    }
}

#[test]
fn counts_are_whole_numbers_in_range_not_c_strtoul() {
    // `count = -1` was read as 2^64 - 1 flows and `count = 1e9` ... both
    // grew the process to gigabytes before anything ran.
    let tcp = |count: &str| scenario("", &workload("tcp", &format!("count = {count}")));
    assert_refused(&[
        (tcp("-1"), &["workload w: count", "not a whole number"]),
        (tcp("\"-1\""), &["workload w: count", "not a whole number"]),
        (tcp("1e9"), &["workload w: count", "not a whole number"]),
        (tcp("1000000000"), &["workload w: count", "at most 28232"]),
        (tcp("0"), &["workload w: count", "at least 1"]),
        (tcp("\"4x\""), &["workload w: count", "not a whole number"]),
    ]);
}

#[test]
fn a_rate_that_rounds_to_zero_bytes_is_refused_not_unlimited() {
    // tc keeps rates in bytes/s; `1bit` became 0, which the wire takes as
    // "no limit": the link carried 881 Mbit/s.
    assert_refused(&[
        (
            scenario("", "").replace("${rate}", "1bit"),
            &["link a:eth0-b:eth0: rate", "rounds to 0"],
        ),
        (
            scenario("rate_ab = \"7bit\"", ""),
            &["link a:eth0-b:eth0: rate_ab", "rounds to 0"],
        ),
        (
            scenario("", &workload("udp", "rate = \"0.5bit\"")),
            &["workload w: rate", "rounds to 0"],
        ),
        (
            scenario("", "").replace("${rate}", "-1mbit"),
            &["link a:eth0-b:eth0: rate", "negative"],
        ),
    ]);
    // The same rule for a value given with --set.
    let e = error_with(&scenario("", ""), &[("rate", "1bit")]);
    assert!(
        e.contains("link a:eth0-b:eth0: rate") && e.contains("rounds to 0"),
        "{e}"
    );
    // 8 bit/s is one byte a second: the least rate there is.
    assert_eq!(error_with(&scenario("", ""), &[("rate", "8bit")]), "");
}

#[test]
fn set_refuses_a_variable_the_scenario_does_not_have() {
    let e = error_with(&scenario("", ""), &[("rtae", "1mbit")]);
    assert!(e.contains("--set rtae") && e.contains("rate"), "{e}");
}

/// The TCP flows' (source address, source port, destination port) keys.
fn tcp_keys(m: &Measure, out: &mut Vec<(std::net::Ipv4Addr, u16, u16)>) {
    match m {
        Measure::Tcp { key, .. } => out.push(*key),
        Measure::Group(ms) => ms.iter().for_each(|m| tcp_keys(m, out)),
        _ => {}
    }
}

#[test]
fn flows_get_ports_of_their_own_and_goodput_stays_under_the_link_rate() {
    // Source ports were computed as 10000 + 100 × workload + flow, so the
    // 101st flow of one workload had the first flow of the next one's
    // ports (and 65537 flows of one wrapped round to the first): two flows
    // on one 4-tuple, their bytes counted twice.
    let text = scenario(
        "buffer = \"100p\"",
        &format!(
            "{}{}",
            workload("tcp", "count = 110\nsndbuf = \"64KiB\"\nrcvbuf = \"64KiB\""),
            workload("tcp", "count = 10\nsndbuf = \"64KiB\"\nrcvbuf = \"64KiB\"")
                .replace("name = \"w\"", "name = \"v\"")
        ),
    )
    .replace("duration = \"2s\"", "duration = \"5s\"");
    let sc = Scenario::parse(&text).unwrap();
    let built = build(&sc, &sc.vars_for(None, &BTreeMap::new())).unwrap();
    let mut keys = vec![];
    for (_, m) in &built.labels {
        tcp_keys(m, &mut keys);
    }
    let unique: BTreeSet<_> = keys.iter().collect();
    assert_eq!(keys.len(), 120);
    assert_eq!(unique.len(), 120, "two flows share a 4-tuple");
    // Linux's ephemeral range, net.ipv4.ip_local_port_range.
    assert!(
        keys.iter().all(|k| (32768..=60999).contains(&k.1)),
        "{keys:?}"
    );
    let r: RunResult = run(built, "default", false);
    let link_payload = 10.0 * 1448.0 / 1514.0; // Mbit/s of payload in full frames
    let g = r.total_goodput_mbps();
    assert!(
        g > 0.0 && g <= link_payload,
        "goodput {g} Mbit/s through a 10 Mbit/s link"
    );
}

#[test]
fn a_host_that_runs_out_of_ephemeral_ports_is_an_error() {
    let tcp = |count: u64| workload("tcp", &format!("count = {count}"));
    assert_refused(&[
        (
            scenario("", &tcp(65537)),
            &["workload w: count", "at most 28232"],
        ),
        (
            scenario(
                "",
                &format!("{}{}", tcp(28000), tcp(233).replace("\"w\"", "\"v\"")),
            ),
            &[
                "workload v: count",
                "233 more ports",
                "node a",
                "232 of its 28232",
            ],
        ),
        // Cold page loads open new connections every load.
        (
            scenario(
                "",
                &workload(
                    "web",
                    "page = \"1k\"\nobjects = 6\nobject_size = \"1k\"\nrepeat = 5000",
                ),
            ),
            &["workload w (repeat × connections)", "30000 more ports"],
        ),
    ]);
    // The whole range is there to be used: 28232 flows, every one its own port.
    let sc = Scenario::parse(&scenario("", &tcp(28232))).unwrap();
    let built = build(&sc, &sc.vars_for(None, &BTreeMap::new())).unwrap();
    let mut keys = vec![];
    tcp_keys(&built.labels[0].1, &mut keys);
    let ports: BTreeSet<u16> = keys.iter().map(|k| k.1).collect();
    assert_eq!(ports.len(), 28232);
    assert_eq!(ports.first(), Some(&32768));
    assert_eq!(ports.last(), Some(&60999));
}

#[test]
fn meaningless_values_are_refused_naming_the_field() {
    let w = |kind: &str, keys: &str| scenario("", &workload(kind, keys));
    let link = |keys: &str| scenario(keys, "");
    let two_a = scenario("", "").replace("addr = \"10.0.0.2\"", "addr = \"10.0.0.1\"");
    assert_refused(&[
        (link("loss = 1.5"), &["link a:eth0-b:eth0: loss", "1.5"]),
        (link("loss = nan"), &["link a:eth0-b:eth0: loss"]),
        (
            w("tcp", "port = 70000"),
            &["workload w: port", "at most 65535"],
        ),
        (
            w("udp", "rate = \"1mbit\"\nport = 0"),
            &["workload w: port", "at least 1"],
        ),
        (two_a, &["node b: addr", "node a's"]),
        (
            scenario("", "").replace("10.0.0.2", "0.0.0.0"),
            &["node b: addr", "not a host's address"],
        ),
        (
            scenario("", "").replace("10.0.0.2", "224.0.0.1"),
            &["node b: addr"],
        ),
        (
            w("ping", "start = \"1s\"\nstop = \"500ms\""),
            &["workload w: stop", "not after start"],
        ),
        (
            w("ping", "start = \"3s\""),
            &["workload w: start", "not before the end"],
        ),
        (
            w("ping", "interval = \"1ns\""),
            &["workload w: interval", "less than 2ms"],
        ),
        (
            w("ping", "size = 70000"),
            &["workload w: size", "at most 65507"],
        ),
        (
            w("udp", "rate = \"1mbit\"\nsize = 65508"),
            &["workload w: size", "at most 65507"],
        ),
        (w("ping", "tos = 256"), &["workload w: tos", "at most 255"]),
        (
            w("tcp", "stop = \"1s\""),
            &["workload w: stop", "not a key of a tcp workload"],
        ),
        (
            w("tcp", "rate = \"1mbit\""),
            &["workload w: rate", "not a key of a tcp"],
        ),
        (
            w("tcp", "sndbuf = \"1\""),
            &["workload w: sndbuf", "at least 2048"],
        ),
        (
            w("tcp", "rcvbuf = \"1GiB\""),
            &["workload w: rcvbuf", "at most 536870912"],
        ),
        (
            w("tcp", "bytes = \"-5\""),
            &["workload w: bytes", "negative"],
        ),
        (
            w("tcp", "cc = \"vegas\""),
            &["workload w: cc", "vegas", "cubic, reno or bbr"],
        ),
        (
            w("tcp", "count = 3\nstagger = \"1s\""),
            &["workload w: stagger", "last of 3 flows"],
        ),
        (
            w("web", "page = \"0\""),
            &["workload w: page", "at least 1"],
        ),
        (
            w("web", "page = \"1k\"\nrepeat = 0"),
            &["workload w: repeat", "at least 1"],
        ),
        (
            w("web", "page = \"1k\"\nrequest_size = \"0\""),
            &["workload w: request_size", "at least 1"],
        ),
        (
            w("web", "page = \"1k\"\nobject_size = \"1k\""),
            &["workload w", "object_size needs objects"],
        ),
        (
            w(
                "web",
                "page = \"1k\"\nobjects = 2\nobject_size = \"1000GiB\"",
            ),
            &["workload w", "more than 1099511627776"],
        ),
        (
            w("ping", "enabled = \"flase\""),
            &["workload w: enabled", "flase"],
        ),
        (
            scenario(
                "",
                &workload("ping", "").replace("to = \"b\"", "to = \"a\""),
            ),
            &["workload w", "same node"],
        ),
        (w("dns", ""), &["workload w", "unknown type"]),
        (
            link("txqueues = 0"),
            &["link a:eth0-b:eth0: txqueues", "at least 1"],
        ),
        (
            link("txqueues_b = 5000"),
            &["link a:eth0-b:eth0: txqueues_b", "at most 4096"],
        ),
        (
            link("txqueuelen = -1"),
            &["link a:eth0-b:eth0: txqueuelen", "whole number"],
        ),
        (
            link("buffer = \"0p\""),
            &["link a:eth0-b:eth0: buffer", "at least 1"],
        ),
        (
            link("buffer_a = \"0b\""),
            &["link a:eth0-b:eth0: buffer_a", "at least 1"],
        ),
        (
            link("overhead = 1000"),
            &["link a:eth0-b:eth0: overhead", "at most 256"],
        ),
        (
            scenario("", "").replace("delay = \"1ms\"", "delay = \"-1ms\""),
            &["link a:eth0-b:eth0: delay", "negative"],
        ),
        (
            scenario("", "").replace("delay = \"1ms\"", "delay = \"2d\""),
            &["link a:eth0-b:eth0: delay", "not a time"],
        ),
        (
            scenario("", "").replace("duration = \"2s\"", "duration = \"0s\""),
            &["duration", "at least 1ns"],
        ),
        (
            scenario("", "").replace("duration = \"2s\"", "duration = \"2s\"\nwarmup = \"2s\""),
            &["warmup", "not before the end"],
        ),
        (
            scenario("", "").replace("duration = \"2s\"", "duration = \"100000s\""),
            &["duration", "at most 86400s"],
        ),
    ]);
}

#[test]
fn names_and_expectations_must_make_sense() {
    let dup_workloads = scenario(
        "",
        &format!("{}{}", workload("ping", ""), workload("ping", "")),
    );
    let expect = |keys: &str| {
        scenario(
            "",
            &format!("[[expect]]\nmetric = \"goodput_mbps\"\n{keys}\n"),
        )
    };
    assert_refused(&[
        (dup_workloads, &["workload w", "two workloads"]),
        (
            scenario("", "").replace("name = \"b\"", "name = \"a\""),
            &["node a", "two nodes"],
        ),
        (
            expect("variants = [\"fast\"]"),
            &["expect goodput_mbps: variants", "fast"],
        ),
        (
            expect("min = 2.0\nmax = 1.0"),
            &["expect goodput_mbps", "more than max"],
        ),
    ]);
}

#[test]
fn enormous_runs_are_estimated_then_refused_or_warned_about() {
    // A 1 Tbit/s flood of 1-byte datagrams: 4.3 billion packets a second of
    // virtual time, hours of wall time. Refused before it starts.
    let flood =
        scenario("", &workload("udp", "rate = \"1tbit\"\nsize = 1")).replace("${rate}", "1tbit");
    let e = error(&flood);
    assert!(e.contains("packets") && e.contains("workload w"), "{e}");
    // A million warm loads of a page of 100000 one-byte objects: some 300
    // billion packets, and a 1 Gbit/s link could carry 170 billion small
    // ones in a day.
    let loads = scenario(
        "",
        &workload(
            "web",
            "page = \"1k\"\nobjects = 100000\nobject_size = \"1\"\nrepeat = 1000000\nwarm = true",
        ),
    )
    .replace("duration = \"2s\"", "duration = \"86400s\"")
    .replace("${rate}", "1gbit");
    let e = error(&loads);
    assert!(e.contains("packets") && e.contains("workload w"), "{e}");
    // 100 Gbit/s of 1 KiB datagrams for 10 s: 1024 + 28 bytes each, so
    // 1e11 × 10 / (1052 × 8) = 119 million packets: allowed, with a warning.
    let big = scenario("", &workload("udp", "rate = \"100gbit\"\nsize = 1024"))
        .replace("${rate}", "100gbit")
        .replace("duration = \"2s\"", "duration = \"10s\"");
    let sc = Scenario::parse(&big).unwrap();
    let built = build(&sc, &sc.vars_for(None, &BTreeMap::new())).unwrap();
    assert_eq!(built.warnings.len(), 1, "{:?}", built.warnings);
    assert!(
        built.warnings[0].contains("119 million packets"),
        "{:?}",
        built.warnings
    );
    // An ordinary run has nothing to warn about.
    let sc = Scenario::parse(&scenario("", &workload("tcp", ""))).unwrap();
    assert!(build(&sc, &sc.vars_for(None, &BTreeMap::new()))
        .unwrap()
        .warnings
        .is_empty());
}
