//! Fuzz bodies that need sluice-sim: the simulator's packet parsers and its
//! scenario files.

use crate::tc_bodies::{classify_packet, rewrite_packet};
use sluice_core::packet::{Packet, ETH_P_IP};
use sluice_core::time::Time;
use sluice_sim::ip::{ipv4_info, parse_icmp_echo, parse_udp};
use sluice_sim::limits::integer;
use sluice_sim::run::{build, Measure};
use sluice_sim::scenario::{substitute, value_text, Scenario};
use sluice_sim::tcp::segment::Segment;
use std::collections::BTreeMap;

/// `packet_parser`: `data` as an IPv4 packet through the simulator's header
/// readers (`ipv4_info`, ICMP echo, UDP, `Segment::parse_ipv4`) and through
/// the Ultimate Traffic Conditioner's u32 filters, policer and HTB tree.
/// Must never panic.
pub fn packet_parser(data: &[u8]) {
    let pkt = Packet::new(data.to_vec(), data.len() as u32 + 14, ETH_P_IP);
    if let Some(info) = ipv4_info(&pkt) {
        let _ = parse_icmp_echo(&pkt, &info);
        let _ = parse_udp(&pkt, &info);
    }
    let _ = Segment::parse_ipv4(data);
    classify_packet(data);
    rewrite_packet(data);
}

/// Virtual time a fuzzed scenario runs for, whatever its `duration` says.
pub const SCENARIO_CAP: Time = Time(1_000_000); // 1 ms

/// Scenarios bigger than this are skipped: they are slow, not wrong, and a
/// fuzzer that finds them learns nothing about panics.
const MAX_NODES: usize = 8;
const MAX_LINKS: usize = 16;
const MAX_WORKLOADS: usize = 8;
const MAX_FLOWS: u64 = 64;

/// Values a fuzzed scenario's first variable is also overridden with, as
/// `sluice sim --set` would: the edges of every range a field has.
const EXTREME_VALUES: &[&str] = &[
    "-1",
    "0",
    "1bit",
    "7bit",
    "1e9",
    "18446744073709551616",
    "0x10000",
    "65536",
    "28233",
    "nan",
    "inf",
    "-0",
    "1e999s",
    "1ns",
    "",
];

/// `scenario_parser`: `data` as a scenario file; when it parses, every
/// variant (at most 3) is built with `run::build` and run for
/// [`SCENARIO_CAP`] of virtual time; the defaults are also built with the
/// first variable overridden by one of [`EXTREME_VALUES`] (picked by the
/// input's length). Must never panic, and what builds gives every TCP flow
/// its own 4-tuple.
pub fn scenario_parser(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(sc) = Scenario::parse(text) else {
        return;
    };
    if sc.nodes.len() > MAX_NODES
        || sc.links.len() > MAX_LINKS
        || sc.workloads.len() > MAX_WORKLOADS
    {
        return;
    }
    let none = BTreeMap::new();
    let mut runs: Vec<BTreeMap<String, String>> = std::iter::once(None)
        .chain(sc.variants.iter().map(Some))
        .take(3)
        .map(|v| sc.vars_for(v, &none))
        .collect();
    if let Some(first) = sc.vars.keys().next() {
        let extreme = EXTREME_VALUES[data.len() % EXTREME_VALUES.len()];
        let set = BTreeMap::from([(first.clone(), extreme.to_string())]);
        if sc.check_overrides(&set).is_ok() {
            runs.push(sc.vars_for(None, &set));
        }
    }
    for vars in runs {
        if too_many_flows(&sc, &vars) {
            continue;
        }
        if let Ok(mut b) = build(&sc, &vars) {
            assert_unique_flows(&b.labels);
            let until = Time(b.duration.0.min(SCENARIO_CAP.0));
            b.world.run_until(until);
        }
    }
}

/// No two TCP flows of a built scenario share (source, source port,
/// destination port): their bytes would be counted twice.
fn assert_unique_flows(labels: &[(String, Measure)]) {
    fn keys(m: &Measure, out: &mut Vec<(std::net::Ipv4Addr, u16, u16)>) {
        match m {
            Measure::Tcp { key, .. } => out.push(*key),
            Measure::Group(ms) => ms.iter().for_each(|m| keys(m, out)),
            _ => {}
        }
    }
    let mut all = vec![];
    labels.iter().for_each(|(_, m)| keys(m, &mut all));
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "two TCP flows share a 4-tuple");
}

/// Does a tcp workload ask for more than [`MAX_FLOWS`] flows (or for a
/// count that does not read as a number, which `build` refuses anyway)?
fn too_many_flows(sc: &Scenario, vars: &BTreeMap<String, String>) -> bool {
    sc.workloads.iter().any(|w| {
        let Some(c) = &w.count else { return false };
        let Ok(t) = substitute(&value_text(c), vars) else {
            return false;
        };
        integer(&t, "count", 0, u64::MAX).is_ok_and(|n| n > MAX_FLOWS)
    })
}
