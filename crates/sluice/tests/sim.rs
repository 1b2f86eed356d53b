//! `sluice sim NAME --check` for every bundled scenario: each states what it
//! should show (from its seed document and from physics) and the command
//! exits 1 if a stated expectation fails. Scenarios whose nodes run shell
//! scripts (seed 003's conditioner) are only checkable here, through the binary.

use std::process::Command;

fn sluice(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

#[test]
fn every_bundled_scenario_passes_its_checks() {
    let list = sluice(&["sim", "--list"]);
    assert!(list.status.success());
    let names: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    assert!(names.len() >= 4, "bundled: {names:?}");
    for name in names {
        let out = sluice(&["sim", &name, "--check"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{name}:\n{stderr}");
        assert!(
            out.status.success(),
            "sluice sim {name} --check failed:\n{stderr}"
        );
        assert!(
            stderr.lines().any(|l| l.starts_with("ok")),
            "{name}: no expectation was checked"
        );
    }
}

#[test]
fn bad_scenarios_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    for (text, needle) in [
        ("name = 1", "invalid type"),
        ("name = \"x\"\nduration = \"1s\"\n[[link]]\na = \"nowhere\"\nb = \"x:eth0\"\nrate = \"1mbit\"", "expected node:device"),
        ("name = \"x\"\nduration = \"soon\"", "not a time"),
    ] {
        std::fs::write(&bad, text).unwrap();
        let out = sluice(&["sim", bad.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{text}: {stderr}");
        assert!(stderr.contains(needle), "{text}: {stderr}");
    }
}
