//! Fuzz bodies that need sluice-sim: the simulator's packet parsers and its
//! scenario files.

use crate::tc_bodies::{classify_packet, rewrite_packet};
use sluice_core::packet::{Packet, ETH_P_IP};
use sluice_core::time::Time;
use sluice_sim::ip::{ipv4_info, parse_icmp_echo, parse_udp};
use sluice_sim::run::build;
use sluice_sim::scenario::{substitute, value_text, Scenario};
use sluice_sim::tcp::segment::Segment;
use std::collections::BTreeMap;

/// `packet_parser`: `data` as an IPv4 packet through the simulator's header
/// readers (`ipv4_info`, ICMP echo, UDP, `Segment::parse_ipv4`) and through
/// the seed 003 u32 filters, policer and HTB tree. Must never panic.
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

/// `scenario_parser`: `data` as a scenario file; when it parses, every
/// variant (at most 3) is built with `run::build` and run for
/// [`SCENARIO_CAP`] of virtual time. Must never panic.
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
    let variants: Vec<_> = std::iter::once(None)
        .chain(sc.variants.iter().map(Some))
        .take(3)
        .collect();
    for v in variants {
        let vars = sc.vars_for(v, &none);
        if too_many_flows(&sc, &vars) {
            continue;
        }
        if let Ok(mut b) = build(&sc, &vars) {
            let until = Time(b.duration.0.min(SCENARIO_CAP.0));
            b.world.run_until(until);
        }
    }
}

/// Does a tcp workload ask for more than [`MAX_FLOWS`] flows (or for a
/// count that does not read as a number, which `build` refuses anyway)?
fn too_many_flows(sc: &Scenario, vars: &BTreeMap<String, String>) -> bool {
    sc.workloads.iter().any(|w| {
        let Some(c) = &w.count else { return false };
        let Ok(t) = substitute(&value_text(c), vars) else {
            return false;
        };
        match sluice_core::units::strtoul(&t, 0) {
            Some((n, "")) => n > MAX_FLOWS,
            _ => false,
        }
    })
}
