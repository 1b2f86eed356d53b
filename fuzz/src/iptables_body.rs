//! The body of the `iptables_parser` fuzz target (kept free of other fuzz
//! modules so the test suite can include it by path).

use sluice_core::netfilter::{Hook, Ifaces};
use sluice_core::packet::{Packet, ETH_P_IP};
use sluice_core::time::Time;
use sluice_tc::iptables;
use sluice_tc::net::Net;

/// `iptables_parser`: up to 6 lines, each an iptables command line, run in
/// order against one fresh namespace; then every listing of both tables,
/// then packets built from the input's bytes through every hook sequence.
/// Must never panic.
pub fn iptables_parser(data: &[u8]) {
    let mut net = Net::new();
    let text = String::from_utf8_lossy(data);
    for line in text.lines().take(6) {
        let argv: Vec<String> = line.split_whitespace().map(String::from).collect();
        iptables::run(&mut net, &argv);
    }
    for t in ["filter", "mangle"] {
        for l in ["-L -v", "-L -n -v -x --line-numbers", "-S", "-S -v", "-L"] {
            let argv: Vec<String> = format!("-t {t} {l}")
                .split_whitespace()
                .map(String::from)
                .collect();
            iptables::run(&mut net, &argv);
        }
    }
    let hooks: [&[Hook]; 3] = [
        &[Hook::Output, Hook::Postrouting],
        &[Hook::Prerouting, Hook::Input],
        &[Hook::Prerouting, Hook::Forward, Hook::Postrouting],
    ];
    for (i, chunk) in data.chunks(48).take(12).enumerate() {
        let mut d = chunk.to_vec();
        if let Some(b) = d.first_mut() {
            *b = 0x45;
        }
        let mut p = Packet::new(d, 1500, ETH_P_IP);
        let ifaces = Ifaces {
            iif: Some("eth1"),
            oif: Some("eth0"),
        };
        let now = Time(i as u64 * 1_000_000_000);
        net.netfilter.traverse(hooks[i % 3], &mut p, ifaces, now);
    }
}
