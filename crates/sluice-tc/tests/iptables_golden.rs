//! `sluice iptables` against the real iptables: every command of
//! `tests/golden/iptables/*.cmds` was run through iptables-legacy 1.8.9 in a
//! fresh network namespace (`capture.sh`); here the same commands run, in
//! order, against one fresh namespace, and stdout, stderr and the exit code
//! must be byte-identical. Service and protocol names come from this
//! machine's /etc/services and /etc/protocols, as they did for iptables.

use sluice_tc::iptables;
use sluice_tc::net::Net;

fn check(name: &str) {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/iptables/");
    let text = std::fs::read_to_string(format!("{dir}{name}.golden")).unwrap();
    let mut net = Net::new();
    let mut failures = vec![];
    let mut count = 0;
    for block in text.split("### iptables ").skip(1) {
        let (cmd, expected) = block.split_once('\n').unwrap();
        let words: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        let o = iptables::run(&mut net, &words);
        let got = format!("{}{}rc={}\n", o.stdout, o.stderr, o.code);
        count += 1;
        if got != expected {
            failures.push(format!(
                "iptables {cmd}\n--- expected\n{expected}--- got\n{got}"
            ));
        }
    }
    assert!(count > 50, "{name}: only {count} commands");
    assert!(
        failures.is_empty(),
        "{name}: {} of {count} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn listings_match_iptables_legacy_1_8_9() {
    check("listing");
}

#[test]
fn refusals_match_iptables_legacy_1_8_9() {
    check("errors");
}
