//! `sluice shims DIR` and `sluice qdisc ...`: the ways a tool that calls
//! `tc`, `ip` or `iptables` reaches sluice.

use std::path::Path;
use std::process::{Command, Output};

/// A private state directory (sluice takes only one mode 0700).
fn state() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    d
}

fn run(prog: &Path, args: &[&str], state: &Path) -> Output {
    Command::new(prog)
        .args(args)
        .env("SLUICE_STATE_DIR", state)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// tcconfig resolves the `tc` on PATH to its real path, then runs it as
/// `/path/sluice qdisc add ...`: the same command as `sluice tc qdisc add`.
#[test]
fn tc_objects_as_the_first_word_are_tc_commands() {
    let exe = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let s = state();
    let o = run(
        exe,
        &["qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb"],
        s.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = run(
        exe,
        &[
            "class", "add", "dev", "lo", "parent", "1:", "classid", "1:1", "htb", "rate", "1mbit",
        ],
        s.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let direct = run(exe, &["-s", "class", "show", "dev", "lo"], s.path());
    let via_tc = run(exe, &["tc", "-s", "class", "show", "dev", "lo"], s.path());
    assert_eq!(direct.stdout, via_tc.stdout);
    assert!(
        text(&direct).contains("class htb 1:1 root prio 0 rate 1Mbit ceil 1Mbit"),
        "{}",
        text(&direct)
    );
    // Anything else is still the usage, with tc's exit status for misuse.
    let o = run(exe, &["qdiscs"], s.path());
    assert_eq!(o.status.code(), Some(255), "{}", text(&o));
}

/// The shims are scripts, not links, so resolving their path keeps them;
/// each runs its tool; a file of that name that is not a shim is left alone.
#[test]
fn shims_run_their_tools_and_replace_only_shims() {
    use std::os::unix::fs::PermissionsExt;
    let exe = Path::new(env!("CARGO_BIN_EXE_sluice"));
    let s = state();
    let bin = tempfile::tempdir().unwrap();
    let dir = bin.path().join("shims");
    let o = run(exe, &["shims", dir.to_str().unwrap()], s.path());
    assert!(o.status.success(), "{}", text(&o));
    for tool in ["tc", "ip", "iptables"] {
        let m = std::fs::symlink_metadata(dir.join(tool)).unwrap();
        assert!(m.is_file(), "{tool} is a regular file");
        assert_eq!(m.permissions().mode() & 0o777, 0o755, "{tool}");
    }
    let o = run(
        &dir.join("ip"),
        &["link", "add", "v0", "type", "veth", "peer", "name", "v1"],
        s.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = run(
        &dir.join("tc"),
        &[
            "qdisc", "add", "dev", "v0", "root", "netem", "delay", "10ms",
        ],
        s.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = run(&dir.join("tc"), &["qdisc", "show", "dev", "v0"], s.path());
    assert!(
        text(&o).starts_with("qdisc netem 8001: root refcnt 2 limit 1000 delay 10ms"),
        "{}",
        text(&o)
    );
    let o = run(
        &dir.join("iptables"),
        &[
            "-t",
            "mangle",
            "-A",
            "OUTPUT",
            "-j",
            "MARK",
            "--set-mark",
            "1",
        ],
        s.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    // Again: the shims are replaced.
    let o = run(exe, &["shims", dir.to_str().unwrap()], s.path());
    assert!(o.status.success(), "{}", text(&o));
    // A foreign `ip` is refused, and nothing is written.
    std::fs::remove_file(dir.join("tc")).unwrap();
    std::fs::write(dir.join("ip"), "#!/bin/sh\necho mine\n").unwrap();
    let o = run(exe, &["shims", dir.to_str().unwrap()], s.path());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("is not a sluice shim"), "{}", text(&o));
    assert!(!dir.join("tc").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("ip")).unwrap(),
        "#!/bin/sh\necho mine\n"
    );
}
