//! What the tests that run the `sluice` binary share: finding out whether a
//! live test can run here, a private state directory, running `sluice`
//! against it, a live link that goes down when dropped, and reading ping's
//! output. Each test binary includes it with `mod common;` and uses only
//! part of it, hence `dead_code` is allowed.
#![allow(dead_code)]

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};

/// The `sluice` binary under test.
pub const EXE: &str = env!("CARGO_BIN_EXE_sluice");

/// Is `cmd` on the PATH?
pub fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Does this process run as root (uid 0)?
pub fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Why a live link cannot be brought up here, or why one of `tools` cannot
/// be run beside it; `None` when everything is there. A link needs root
/// (network namespaces and TUN devices), `/dev/net/tun` and `ip`.
pub fn lacking(tools: &[&str]) -> Option<String> {
    if !is_root() {
        return Some(
            "not root (links need network namespaces and TUN devices; CI runs as root)".into(),
        );
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun".into());
    }
    ["ip"]
        .iter()
        .chain(tools)
        .find(|t| !have(t))
        .map(|t| format!("{t} is not installed (.ci/run installs it)"))
}

/// Whether a live test must skip: if it must, says why on stderr, loudly
/// (`SKIPPED: ...`), so that a pass without having run shows.
pub fn skip_live(tools: &[&str]) -> bool {
    match lacking(tools) {
        Some(why) => {
            eprintln!("SKIPPED: {why}");
            true
        }
        None => false,
    }
}

/// For the live tests that fail rather than skip where they cannot run:
/// panics with `CANNOT RUN: ...`.
pub fn require_live(tools: &[&str]) {
    if let Some(why) = lacking(tools) {
        panic!("CANNOT RUN: {why}");
    }
}

/// Standard output of a command that must have succeeded; if it did not,
/// panics naming `what` with everything the command printed.
pub fn ok(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A temporary directory no one else may enter (mode 0700; tempfile makes
/// them 0755 under umask 022), as sluice takes for its state directory.
pub fn private_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    d
}

/// Run `sluice ARGS` with `state` as its state directory.
pub fn sluice(state: &Path, args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .env("SLUICE_STATE_DIR", state)
        .output()
        .expect("run sluice")
}

/// [`sluice`], which must succeed; its standard output.
pub fn sluice_ok(state: &Path, args: &[&str]) -> String {
    ok(sluice(state, args), &format!("sluice {args:?}"))
}

/// `sluice sim --json` of a scenario given as TOML text: the parsed report.
/// The scenario file is written to `dir`, where its relative paths (trace
/// files) are looked up.
pub fn simulate(dir: &Path, scenario: &str) -> serde_json::Value {
    let toml = dir.join("scenario.toml");
    std::fs::write(&toml, scenario).expect("write the scenario");
    let out = ok(
        Command::new(EXE)
            .arg("sim")
            .arg(&toml)
            .arg("--json")
            .output()
            .expect("run sluice sim"),
        "sluice sim",
    );
    serde_json::from_str(&out).expect("sim JSON")
}

/// A process that is killed when dropped (a server in a link's namespace
/// that would otherwise outlive a failed test).
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Mahimahi traces shared beside the repository (`../shared/traces`).
pub fn shared_traces() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces")
}

/// A live link for one test, with a state directory of its own; taken down
/// when dropped, so a failed assertion leaves nothing behind.
pub struct Link {
    /// `PREFIX PID LETTER`: tests of one binary differ by the letter,
    /// binaries running at once by the prefix and the pid.
    pub name: String,
    pub state: tempfile::TempDir,
}

impl Link {
    /// A link named `{prefix}{pid}{letter}`; not up yet.
    pub fn new(prefix: &str, letter: &str) -> Link {
        Link {
            name: format!("{prefix}{}{letter}", std::process::id()),
            state: private_dir(),
        }
    }

    /// Run `sluice ARGS` with this link's state directory.
    pub fn sluice(&self, args: &[&str]) -> Output {
        sluice(self.state.path(), args)
    }

    /// [`Link::sluice`], which must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        sluice_ok(self.state.path(), args)
    }

    /// `sluice link up NAME EXTRA...`, which must succeed; its output.
    pub fn up(&self, extra: &[&str]) -> String {
        let mut args = vec!["link", "up", &self.name];
        args.extend(extra);
        self.ok(&args)
    }

    /// The namespace of side `side` ('a' or 'b').
    pub fn ns(&self, side: char) -> String {
        format!("{}-{side}", self.name)
    }

    /// The link's record in the state directory.
    pub fn record(&self) -> PathBuf {
        self.state
            .path()
            .join("links")
            .join(format!("{}.json", self.name))
    }

    /// The address of side b (10.77.X.2 unless `--addr-b` says otherwise).
    pub fn addr_b(&self) -> String {
        let text = std::fs::read_to_string(self.record()).expect("record");
        let v: serde_json::Value = serde_json::from_str(&text).expect("json");
        let a = v["spec"]["b"]["addr"].as_str().expect("addr");
        a.split('/').next().unwrap_or(a).to_string()
    }

    /// RTTs in ms of `count` pings from side a to side b, `interval` s apart.
    pub fn ping(&self, count: u32, interval: &str) -> Vec<f64> {
        self.ping_sized(count, interval, 56)
    }

    /// [`Link::ping`] with `size` bytes of payload (ping's default is 56).
    pub fn ping_sized(&self, count: u32, interval: &str, size: u32) -> Vec<f64> {
        let o = Command::new("ip")
            .args(["netns", "exec", &self.ns('a'), "ping", "-n"])
            .args(["-c", &count.to_string(), "-i", interval, "-W", "2"])
            .args(["-s", &size.to_string(), &self.addr_b()])
            .output()
            .expect("ping");
        rtts(&String::from_utf8_lossy(&o.stdout))
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = self.sluice(&["link", "down", &self.name]);
    }
}

/// The RTTs in ms that ping printed (`time=X ms`), in order.
pub fn rtts(ping_output: &str) -> Vec<f64> {
    ping_output
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect()
}

/// The median (for an even count, the upper of the middle two).
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Pearson's correlation of two series of the same length.
pub fn correlation(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}
