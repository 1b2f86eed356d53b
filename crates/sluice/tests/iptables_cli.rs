//! The binary as `iptables`: invoked through a link of that name it is
//! `sluice iptables`; rules persist in the state directory between
//! invocations, per namespace (`$SLUICE_NETNS`), beside tc's state; a
//! refused command changes nothing.

use std::path::Path;
use std::process::Command;

fn run(link: &Path, state: &Path, netns: &str, args: &[&str]) -> (String, String, i32) {
    let o = Command::new(link)
        .args(args)
        .env("SLUICE_STATE_DIR", state)
        .env("SLUICE_NETNS", netns)
        .output()
        .expect("run");
    (
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
        o.status.code().unwrap_or(-1),
    )
}

#[test]
fn iptables_link_keeps_rules_per_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, state) = (dir.path().join("bin"), dir.path().join("state"));
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("iptables");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_sluice"), &link).unwrap();
    let add = [
        "-t",
        "mangle",
        "-A",
        "OUTPUT",
        "-o",
        "eth0",
        "-p",
        "tcp",
        "--sport",
        "80",
        "-j",
        "MARK",
        "--set-mark",
        "80",
    ];
    assert_eq!(run(&link, &state, "a", &add).2, 0);
    // A refused command (exit 2, iptables' message) leaves the table as it was.
    let (_, err, code) = run(
        &link,
        &state,
        "a",
        &["-t", "mangle", "-A", "OUTPUT", "-j", "MARK"],
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("iptables v1.8.9 (legacy): MARK: One of the"),
        "{err}"
    );
    let (out, _, code) = run(&link, &state, "a", &["-t", "mangle", "-S", "OUTPUT"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        "-P OUTPUT ACCEPT\n-A OUTPUT -o eth0 -p tcp -m tcp --sport 80 -j MARK --set-xmark 0x50/0xffffffff\n"
    );
    // Another namespace has its own, empty, tables.
    let (out, _, _) = run(&link, &state, "b", &["-t", "mangle", "-S", "OUTPUT"]);
    assert_eq!(out, "-P OUTPUT ACCEPT\n");
    // `sluice iptables` is the same tool.
    let (out, _, _) = run(
        Path::new(env!("CARGO_BIN_EXE_sluice")),
        &state,
        "a",
        &["iptables", "-t", "mangle", "-D", "OUTPUT", "1"],
    );
    assert_eq!(out, "");
    let (out, _, _) = run(&link, &state, "a", &["-t", "mangle", "-S", "OUTPUT"]);
    assert_eq!(out, "-P OUTPUT ACCEPT\n");
    // Tables sluice does not model are refused, saying so.
    let (_, err, code) = run(&link, &state, "a", &["-t", "nat", "-L"]);
    assert_eq!(code, 3);
    assert!(
        err.contains("table `nat' is not supported by sluice"),
        "{err}"
    );
}

#[test]
fn sluice_iptables_takes_a_leading_dash_n_name_and_the_iptables_link_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, state) = (dir.path().join("bin"), dir.path().join("state"));
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("iptables");
    let sluice = Path::new(env!("CARGO_BIN_EXE_sluice"));
    std::os::unix::fs::symlink(sluice, &link).unwrap();
    // `sluice iptables -n x ...` is namespace x (no link named x runs), whatever $SLUICE_NETNS says.
    let add = ["iptables", "-n", "x", "-A", "OUTPUT", "-j", "DROP"];
    assert_eq!(run(sluice, &state, "other", &add).2, 0);
    let (out, _, _) = run(&link, &state, "x", &["-S", "OUTPUT"]);
    assert_eq!(out, "-P OUTPUT ACCEPT\n-A OUTPUT -j DROP\n");
    let (out, _, _) = run(&link, &state, "other", &["-S", "OUTPUT"]);
    assert_eq!(out, "-P OUTPUT ACCEPT\n");
    // `-n` before an option is iptables' numeric output, in namespace $SLUICE_NETNS.
    let (out, err, code) = run(sluice, &state, "x", &["iptables", "-n", "-L", "OUTPUT"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("DROP       0    --  0.0.0.0/0            0.0.0.0/0"),
        "{out}"
    );
    // Invoked as iptables, `-n NAME` keeps iptables' meaning: NAME is not a namespace.
    let (_, err, code) = run(&link, &state, "x", &["-n", "y", "-L"]);
    assert_eq!(code, 2, "{err}");
}
