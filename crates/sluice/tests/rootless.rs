//! Rootless links (sluice-net's rootless.rs): `sluice link` run by an
//! unprivileged user, inside a user namespace.
//!
//! The tests run as root (as CI does) and run sluice as uid/gid 65534
//! (`setpriv --reuid=65534 --regid=65534 --clear-groups`) with HOME and the
//! state directory in a temporary directory that user owns, and a copy of
//! the binary it can execute. Where `/dev/net/tun` is not open to everyone
//! (mode 0600 on some machines), the first test checks the clear error; the
//! second gives that user a TUN device without changing the machine: a
//! private mount namespace (`unshare -m`) with a mode-0666 node for the same
//! device bind-mounted over `/dev/net/tun`, in which every command of the
//! test runs (`nsenter -m`). Where the machine cannot (not root, no user
//! namespaces, a tool missing) they say so and skip.

mod common;

use common::{have, is_root, rtts, EXE};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The unprivileged user the tests run sluice as (`nobody` on most systems).
const NOBODY: &str = "65534";

/// Why these tests cannot run here, if they cannot.
fn lacking() -> Option<String> {
    if !is_root() {
        return Some(
            "not root (the test runs sluice as another user and sets up a TUN node)".into(),
        );
    }
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces").unwrap_or_default();
    if max.trim().parse::<u64>().unwrap_or(0) == 0 {
        return Some("no user namespaces (/proc/sys/user/max_user_namespaces is 0)".into());
    }
    if !Path::new("/dev/net/tun").exists() {
        return Some("no /dev/net/tun".into());
    }
    for tool in ["setpriv", "unshare", "nsenter", "ip", "ping", "mknod"] {
        if !have(tool) {
            return Some(format!("no {tool}"));
        }
    }
    // Some kernels (or AppArmor) refuse unprivileged user namespaces anyway.
    let probe = Command::new("setpriv")
        .args(user_args())
        .args(["unshare", "-Ur", "true"])
        .output();
    if !probe.map(|o| o.status.success()).unwrap_or(false) {
        return Some("unprivileged user namespaces are refused here".into());
    }
    None
}

macro_rules! require {
    () => {
        if let Some(why) = lacking() {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
}

fn user_args() -> [String; 3] {
    [
        format!("--reuid={NOBODY}"),
        format!("--regid={NOBODY}"),
        "--clear-groups".into(),
    ]
}

/// A temporary home for the unprivileged user: its state directory, a
/// copy of sluice it can run, and (optionally) the private mount namespace
/// that gives it a TUN device. Dropped, it takes its links down and removes
/// everything.
struct Nobody {
    dir: PathBuf,
    /// `unshare -m` holding the private mount namespace, if any.
    holder: Option<Child>,
}

impl Nobody {
    fn new(tag: &str) -> Nobody {
        let dir =
            std::env::temp_dir().join(format!("sluice-rootless-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("home")).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::copy(EXE, dir.join("sluice")).unwrap();
        std::fs::set_permissions(dir.join("sluice"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let ok = Command::new("chown")
            .args([
                &format!("{NOBODY}:{NOBODY}"),
                dir.join("home").to_str().unwrap(),
            ])
            .status()
            .unwrap();
        assert!(ok.success(), "chown of the test's home failed");
        Nobody { dir, holder: None }
    }

    /// Enter a private mount namespace with a mode-0666 `/dev/net/tun`
    /// (the same device, a new node on a private tmpfs bind-mounted over it).
    fn with_open_tun(mut self) -> Nobody {
        let dev = self.dir.join("dev");
        std::fs::create_dir_all(&dev).unwrap();
        let script = format!(
            "mount -t tmpfs -o mode=755 none {d} && mknod -m 666 {d}/tun c 10 200 && \
             mount --bind {d}/tun /dev/net/tun && echo ready && exec sleep 600",
            d = dev.display()
        );
        let mut child = Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", &script])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        assert_eq!(line.trim(), "ready", "the private mount namespace: {line}");
        self.holder = Some(child);
        self
    }

    fn home(&self) -> PathBuf {
        self.dir.join("home")
    }

    fn links(&self) -> PathBuf {
        self.home().join("state").join("links")
    }

    /// Run `sluice ARGS` as the unprivileged user (in the private mount namespace if any).
    fn sluice(&self, args: &[&str]) -> Output {
        let mut cmd = match &self.holder {
            Some(h) => {
                let mut c = Command::new("nsenter");
                c.args(["-t", &h.id().to_string(), "-m", "--", "setpriv"]);
                c
            }
            None => Command::new("setpriv"),
        };
        let home = self.home();
        cmd.args(user_args())
            .arg("env")
            .arg("-i")
            .arg("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
            .arg(format!("HOME={}", home.display()))
            .arg(format!("XDG_RUNTIME_DIR={}", home.display()))
            .arg(format!("SLUICE_STATE_DIR={}", home.join("state").display()))
            .arg(self.dir.join("sluice"))
            .args(args);
        cmd.stdin(Stdio::null()).output().unwrap()
    }

    /// [`Nobody::sluice`], which must succeed; its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.sluice(args);
        assert!(
            o.status.success(),
            "sluice {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Can the user open /dev/net/tun here?
    fn tun_open(&self) -> bool {
        let mut cmd = Command::new("setpriv");
        cmd.args(user_args())
            .args(["sh", "-c", "test -r /dev/net/tun -a -w /dev/net/tun"]);
        cmd.status().map(|s| s.success()).unwrap_or(false)
    }

    /// Processes running this test's copy of sluice (the link daemons).
    fn daemons(&self) -> Vec<i32> {
        let exe = self.dir.join("sluice");
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|p| p == exe)
                    && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                        .unwrap_or_default()
                        .contains(") Z")
            })
            .collect()
    }

    /// Files left in the links directory other than its lock.
    fn link_files(&self) -> Vec<String> {
        std::fs::read_dir(self.links())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "lock")
            .collect()
    }
}

impl Drop for Nobody {
    fn drop(&mut self) {
        for pid in self.daemons() {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        if let Some(h) = &mut self.holder {
            let _ = h.kill();
            let _ = h.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The daemon pid in a `link up`/`list` line: "NAME pid N (rootless): ...".
fn daemon_pid(line: &str) -> i32 {
    line.split_whitespace()
        .skip_while(|w| *w != "pid")
        .nth(1)
        .and_then(|p| p.trim_end_matches(':').parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"))
}

/// The smallest RTT (ms) of 20 pings from side a to `addr`, through `sluice link exec`.
fn min_rtt(u: &Nobody, name: &str, addr: &str) -> f64 {
    let out = u.ok(&[
        "link", "exec", name, "a", "--", "ping", "-n", "-c", "20", "-i", "0.05", "-W", "2", addr,
    ]);
    let rtts = rtts(&out);
    assert!(rtts.len() >= 18, "ping lost too much: {out}");
    rtts.into_iter().fold(f64::INFINITY, f64::min)
}

fn wait_gone(pid: i32) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.is_empty() || stat.contains(") Z") {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("process {pid} still runs");
}

/// Without access to /dev/net/tun a rootless `link up` fails with an error
/// naming the cause; `sluice shell` refuses clearly without root.
#[test]
fn rootless_refusals_are_clear() {
    require!();
    let u = Nobody::new("refuse");
    let o = u.sluice(&["shell", "--", "true"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("needs root"), "{err}");
    if u.tun_open() {
        eprintln!("SKIPPED (the /dev/net/tun part): it is open to every user here");
        return;
    }
    let o = u.sluice(&["link", "up", "rlrefuse"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("/dev/net/tun is not accessible to this user (mode 0600"),
        "{err}"
    );
    assert!(u.link_files().is_empty(), "{:?}", u.link_files());
    assert!(u.daemons().is_empty());
}

/// A rootless link: up, ping through `link exec`, a live netem delay
/// through `sluice tc -n`, down leaving nothing; then kill -9 of its daemon
/// and `link list` removing the leftovers.
#[test]
fn rootless_link_carries_and_cleans_up() {
    require!();
    let u = Nobody::new("link").with_open_tun();
    let name = format!("rl{}", std::process::id());
    let up = u.ok(&[
        "link",
        "up",
        &name,
        "--addr-a",
        "10.123.0.1/24",
        "--addr-b",
        "10.123.0.2/24",
    ]);
    assert!(up.contains("(rootless)"), "{up}");
    let pid = daemon_pid(&up);
    assert!(u.ok(&["link", "list"]).contains(&name));
    let addrs = u.ok(&[
        "link", "exec", &name, "b", "--", "ip", "-br", "addr", "show", "b0",
    ]);
    assert!(addrs.contains("10.123.0.2/24"), "{addrs}");

    let before = min_rtt(&u, &name, "10.123.0.2");
    u.ok(&[
        "tc", "-n", &name, "qdisc", "add", "dev", "a0", "root", "netem", "delay", "20ms",
    ]);
    let shown = u.ok(&["tc", "-n", &name, "qdisc", "show", "dev", "a0"]);
    assert!(
        shown.contains("netem") && shown.contains("delay 20ms"),
        "{shown}"
    );
    let after = min_rtt(&u, &name, "10.123.0.2");
    eprintln!("rootless link: min RTT {before:.3} ms, with netem delay 20ms {after:.3} ms");
    assert!(
        (19.5..30.0).contains(&(after - before)),
        "netem delay 20ms raised the RTT from {before} to {after} ms"
    );

    u.ok(&["link", "down", &name]);
    wait_gone(pid);
    assert!(u.ok(&["link", "list"]).trim().is_empty());
    assert!(u.link_files().is_empty(), "{:?}", u.link_files());
    assert!(u.daemons().is_empty(), "daemons left: {:?}", u.daemons());

    // kill -9: the namespaces go with the daemon's descriptors; `list` removes the files.
    let pid = daemon_pid(&u.ok(&["link", "up", &name]));
    let _ = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    wait_gone(pid);
    let o = u.sluice(&["link", "list"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("removed the leftovers"), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).trim().is_empty());
    assert!(u.link_files().is_empty(), "{:?}", u.link_files());
    assert!(u.daemons().is_empty(), "daemons left: {:?}", u.daemons());
}

/// `sluice link exec` on a root link is `ip netns exec NAME-x`.
#[test]
fn link_exec_on_a_root_link() {
    require!();
    let state = std::env::temp_dir().join(format!("sluice-rootexec-{}", std::process::id()));
    let name = format!("rx{}", std::process::id());
    let sluice = |args: &[&str]| {
        Command::new(EXE)
            .args(args)
            .env("SLUICE_STATE_DIR", &state)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let up = sluice(&["link", "up", &name, "--addr-b", "10.124.0.2/24"]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let up = String::from_utf8_lossy(&up.stdout);
    assert!(!up.contains("rootless"), "{up}");
    let o = sluice(&[
        "link", "exec", &name, "b", "--", "ip", "-br", "addr", "show", "b0",
    ]);
    let down = sluice(&["link", "down", &name]);
    let _ = std::fs::remove_dir_all(&state);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("10.124.0.2/24"),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(down.status.success());
}
