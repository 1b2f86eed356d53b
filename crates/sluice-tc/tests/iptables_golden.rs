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

#[path = "../../../fuzz/src/iptables_body.rs"]
mod iptables_body;

/// The `iptables_parser` fuzz body over its committed seeds and a fixed set
/// of recombinations of them (a stable-compiler smoke run; the real fuzzing
/// is `cargo fuzz run iptables_parser`, fuzz/README.md).
#[test]
fn fuzz_body_survives_its_seeds_and_recombinations() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fuzz/seeds/iptables_parser"
    );
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    seeds.sort();
    assert!(seeds.len() > 20);
    let words: Vec<String> = seeds
        .iter()
        .flat_map(|s| {
            String::from_utf8_lossy(s)
                .split_whitespace()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    let mut x: u64 = 0x1937_0004;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for s in &seeds {
        iptables_body::iptables_parser(s);
    }
    for _ in 0..300 {
        let lines: Vec<String> = (0..1 + next() % 4)
            .map(|_| {
                (0..1 + next() % 12)
                    .map(|_| words[(next() % words.len() as u64) as usize].clone())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        let mut input = lines.join("\n").into_bytes();
        input.extend((0..next() % 200).map(|_| next() as u8));
        let run = std::panic::catch_unwind(|| iptables_body::iptables_parser(&input));
        assert!(
            run.is_ok(),
            "panicked on:\n{}",
            String::from_utf8_lossy(&input)
        );
    }
}
