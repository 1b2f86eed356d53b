//! `sluice sim NAME --check` for every bundled scenario: each states what it
//! should show (from the article it reproduces and from physics) and the command
//! exits 1 if a stated expectation fails. Scenarios whose nodes run shell
//! scripts (the ultimate traffic conditioner's) are only checkable here, through the binary.

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
fn former_names_still_run_but_are_not_listed() {
    let list = String::from_utf8_lossy(&sluice(&["sim", "--list"]).stdout).into_owned();
    assert!(
        list.contains("cable-upload-tbf") && !list.lines().any(|l| l.starts_with("seed")),
        "{list}"
    );
    let by_old = sluice(&["sim", "seed002", "--variant", "idle", "--csv"]);
    let by_new = sluice(&["sim", "cable-upload-tbf", "--variant", "idle", "--csv"]);
    assert!(by_old.status.success() && by_new.status.success());
    assert_eq!(by_old.stdout, by_new.stdout);
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

/// A two-host scenario with one workload table from `a` to `b`.
fn two_hosts(link_rate: &str, workload: &str) -> String {
    format!(
        "name = \"x\"\nduration = \"1s\"\n[vars]\nflows = 1\n\
         [[node]]\nname = \"a\"\naddr = \"10.0.0.1\"\n[[node]]\nname = \"b\"\naddr = \"10.0.0.2\"\n\
         [[link]]\na = \"a:eth0\"\nb = \"b:eth0\"\nrate = \"{link_rate}\"\n\
         [[workload]]\nname = \"bulk\"\nfrom = \"a\"\nto = \"b\"\n{workload}\n"
    )
}

#[test]
fn out_of_range_values_and_flags_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    let file = file.to_str().unwrap();
    // (scenario, extra arguments, exit status, words of the message)
    let cases: &[(String, &[&str], i32, &[&str])] = &[
        // Read like C's strtoul, -1 was 2^64 - 1 flows (the process grew to
        // gigabytes and aborted); 1e9 is a float, not a count.
        (
            two_hosts("10mbit", "type = \"tcp\"\ncount = -1"),
            &[],
            1,
            &["workload bulk: count", "not a whole number"],
        ),
        (
            two_hosts("10mbit", "type = \"tcp\"\ncount = 1e9"),
            &[],
            1,
            &["workload bulk: count"],
        ),
        (
            two_hosts("10mbit", "type = \"tcp\"\ncount = \"${flows}\""),
            &["--set", "flows=65537"],
            1,
            &["workload bulk: count", "at most 28232"],
        ),
        // 1 bit/s is 0 bytes/s, which the wire took for "unlimited".
        (
            two_hosts("1bit", "type = \"ping\""),
            &[],
            1,
            &["link a:eth0-b:eth0: rate", "rounds to 0"],
        ),
        (
            two_hosts("10mbit", "type = \"udp\"\nrate = \"1tbit\"\nsize = 1"),
            &[],
            1,
            &["workload bulk", "packets"],
        ),
        (
            two_hosts("10mbit", "type = \"ping\""),
            &["--set", "flws=2"],
            2,
            &["--set flws", "flows"],
        ),
        (
            two_hosts("10mbit", "type = \"ping\""),
            &["--variant", "fast"],
            2,
            &["--variant fast"],
        ),
        (
            two_hosts("10mbit", "type = \"ping\""),
            &["--json", "--csv"],
            2,
            &["cannot be used with"],
        ),
    ];
    for (text, args, code, words) in cases {
        std::fs::write(file, text).unwrap();
        let mut argv = vec!["sim", file];
        argv.extend_from_slice(args);
        let out = sluice(&argv);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{args:?}\n{text}\n{stderr}");
        for w in *words {
            assert!(stderr.contains(w), "{w:?} not in {stderr:?}\n{text}");
        }
        assert!(out.stdout.is_empty(), "nothing ran: {text}");
    }
}
