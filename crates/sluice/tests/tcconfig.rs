//! The tcconfig recipe of the book (docs/tc.md): tcconfig's own `tcset`,
//! `tcshow` and `tcdel`, installed from PyPI into a venv, drive a live
//! link through sluice's shims, and the traffic shows what they set.
//!
//! Needs root (a live link), python3 with venv and the package index;
//! without root it says loudly that it skipped; a failed install fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_sluice");
const TCCONFIG: &str = "tcconfig==0.30.1";

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(1)
        == 0
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn ok(o: Output, what: &str) -> String {
    assert!(o.status.success(), "{what} failed: {}", text(&o));
    text(&o)
}

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
    if !is_root() {
        eprintln!("SKIPPED: not root (a live link needs CAP_NET_ADMIN)");
        return;
    }
    let venv = tcconfig_venv();
    let state = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let bin = tempfile::tempdir().unwrap();
    let sluice = |args: &[&str]| {
        Command::new(EXE)
            .args(args)
            .env("SLUICE_STATE_DIR", state.path())
            .output()
            .expect("sluice runs")
    };
    ok(
        sluice(&["shims", bin.path().to_str().unwrap()]),
        "sluice shims",
    );
    let link = format!("tcc{}", std::process::id());
    let up = ok(sluice(&["link", "up", &link]), "link up");
    // "NAME pid P: NAME-a:a0 10.77.X.1/24 <-> NAME-b:b0 10.77.X.2/24; ..."
    let b_addr = up
        .split("b0 ")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .expect("b's address")
        .to_string();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let tool = |name: &str, args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &format!("{link}-a"), "env"])
            .arg(format!("PATH={path}"))
            .arg(format!("SLUICE_NETNS={link}"))
            .arg(format!("SLUICE_STATE_DIR={}", state.path().display()))
            .arg(venv.join("bin").join(name))
            .args(args)
            .output()
            .expect("tcconfig runs")
    };
    let result = std::panic::catch_unwind(|| {
        let before = ping_avg_ms(&link, &b_addr);
        ok(
            tool("tcset", &["a0", "--rate", "10Mbps", "--delay", "50ms"]),
            "tcset",
        );
        let q = ok(
            sluice(&["tc", "-n", &link, "qdisc", "show", "dev", "a0"]),
            "tc qdisc show",
        );
        assert!(q.contains("qdisc htb") && q.contains("delay 50ms"), "{q}");
        let shown = ok(tool("tcshow", &["a0"]), "tcshow");
        assert!(
            shown.contains("\"delay\": \"50ms\"") && shown.contains("\"rate\": \"10Mbps\""),
            "{shown}"
        );
        // netem on a0 delays a -> b: every round trip takes at least 50 ms.
        let shaped = ping_avg_ms(&link, &b_addr);
        assert!(
            (50.0..before + 60.0).contains(&shaped),
            "{before} -> {shaped} ms"
        );
        ok(tool("tcdel", &["a0", "--all"]), "tcdel");
        let q = ok(
            sluice(&["tc", "-n", &link, "qdisc", "show", "dev", "a0"]),
            "tc qdisc show",
        );
        assert!(q.contains("pfifo_fast") && !q.contains("netem"), "{q}");
        assert!(ping_avg_ms(&link, &b_addr) < before + 10.0);
    });
    ok(sluice(&["link", "down", &link]), "link down");
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
