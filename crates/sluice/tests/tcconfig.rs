//! The tcconfig recipe of the book (docs/tc.md): tcconfig's own `tcset`,
//! `tcshow` and `tcdel`, installed from PyPI into a venv, drive a live
//! link through sluice's shims, and the traffic shows what they set.
//!
//! Needs root (a live link), python3 with venv and the package index;
//! without root it says loudly that it skipped; a failed install fails.

mod common;

use common::{ok, skip_live, Link};
use std::path::{Path, PathBuf};
use std::process::Command;

const TCCONFIG: &str = "tcconfig==0.30.1";

/// A venv with tcconfig, made once under the target directory.
fn tcconfig_venv() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tcconfig-venv");
    let tcset = venv.join("bin/tcset");
    if !tcset.exists() {
        let o = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output();
        ok(o.expect("python3 runs"), "python3 -m venv");
        let o = Command::new(venv.join("bin/pip"))
            .args(["install", "-q", TCCONFIG])
            .output()
            .expect("pip runs");
        ok(o, "pip install tcconfig");
    }
    venv
}

/// The ping RTTs' average from a to b, ms.
fn ping_avg_ms(link: &str, to: &str) -> f64 {
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("{link}-a"),
            "ping",
            "-c",
            "5",
            "-i",
            "0.2",
            to,
        ])
        .output()
        .expect("ping runs");
    let out = ok(o, "ping");
    let line = out
        .lines()
        .find(|l| l.contains("min/avg/max"))
        .expect("ping summary");
    let nums = line.split('=').nth(1).expect("values");
    nums.trim()
        .split('/')
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("avg")
}

#[test]
fn tcconfig_shapes_a_live_link_through_the_shims() {
    if skip_live(&[]) {
        return;
    }
    let venv = tcconfig_venv();
    let bin = tempfile::tempdir().unwrap();
    let link = Link::new("tcc", "");
    let state = link.state.path();
    link.ok(&["shims", bin.path().to_str().unwrap()]);
    link.up(&[]);
    let b_addr = link.addr_b();
    let name = &link.name;
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let tool = |tool: &str, args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &link.ns('a'), "env"])
            .arg(format!("PATH={path}"))
            .arg(format!("SLUICE_NETNS={name}"))
            .arg(format!("SLUICE_STATE_DIR={}", state.display()))
            .arg(venv.join("bin").join(tool))
            .args(args)
            .output()
            .expect("tcconfig runs")
    };
    let before = ping_avg_ms(name, &b_addr);
    ok(
        tool("tcset", &["a0", "--rate", "10Mbps", "--delay", "50ms"]),
        "tcset",
    );
    let q = link.ok(&["tc", "-n", name, "qdisc", "show", "dev", "a0"]);
    assert!(q.contains("qdisc htb") && q.contains("delay 50ms"), "{q}");
    let shown = ok(tool("tcshow", &["a0"]), "tcshow");
    assert!(
        shown.contains("\"delay\": \"50ms\"") && shown.contains("\"rate\": \"10Mbps\""),
        "{shown}"
    );
    // netem on a0 delays a -> b: every round trip takes at least 50 ms.
    let shaped = ping_avg_ms(name, &b_addr);
    assert!(
        (50.0..before + 60.0).contains(&shaped),
        "{before} -> {shaped} ms"
    );
    ok(tool("tcdel", &["a0", "--all"]), "tcdel");
    let q = link.ok(&["tc", "-n", name, "qdisc", "show", "dev", "a0"]);
    assert!(q.contains("pfifo_fast") && !q.contains("netem"), "{q}");
    assert!(ping_avg_ms(name, &b_addr) < before + 10.0);
    link.ok(&["link", "down", name]);
}
