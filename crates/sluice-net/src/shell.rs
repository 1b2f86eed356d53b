//! `sluice shell`: a command in a fresh namespace whose traffic to
//! everything outside goes through a link, Mahimahi-style.
//!
//! The link's side a is the new namespace (`a0`, 10.77.X.2, default route
//! via the host end); side b is a TUN device `sluiceX` (10.77.X.1) in the
//! host's namespace. `dev a0`'s egress is the uplink, `dev b0`'s the
//! downlink. The host masquerades the subnet out of its other interfaces
//! (iptables rules tagged with the comment `sluice:NAME`, so that the
//! leftovers of a killed daemon are found and removed), and
//! `net.ipv4.ip_forward` is turned on (and left on: other shells may still
//! need it). When the command exits the link goes down and everything it
//! made is removed; the daemon also stops if `sluice shell` itself is
//! killed (`PR_SET_PDEATHSIG`).

use crate::link::{self, LinkSpec, Side, Wire};
use std::path::Path;
use std::process::Command;

/// What `sluice shell` was asked for.
#[derive(Debug, Default, Clone)]
pub struct ShellOpts {
    /// tc commands (words after `tc`) for the link, `dev a0` uplink, `dev b0` downlink.
    pub tc: Vec<Vec<String>>,
    /// The uplink (namespace → host) wire.
    pub up: Wire,
    /// The downlink (host → namespace) wire.
    pub down: Wire,
    /// The command and its arguments (empty: `$SHELL`).
    pub command: Vec<String>,
    /// `--keep-awake`.
    pub keep_awake: crate::awake::Mode,
    /// What the uplink starts with beyond `up` (a trace: `--uplink-trace`).
    pub up_start: crate::wire::WireSettings,
    /// What the downlink starts with beyond `down`.
    pub down_start: crate::wire::WireSettings,
    /// Mahimahi logs of the wires (uplink: `ab`).
    pub logs: Vec<crate::mmlog::LogSpec>,
    /// Variables set for the command (`MAHIMAHI_BASE`, the prompt's);
    /// `{BASE}` in a value is the host end's address.
    pub env: Vec<(String, String)>,
    /// Say nothing of the link on stderr (the mm-* commands, as Mahimahi).
    pub quiet: bool,
}

/// Masquerade `subnet` out of every interface but `host_if`, and forward its traffic.
pub fn add_nat(name: &str, subnet: &str, host_if: &str) -> Result<(), String> {
    std::fs::write("/proc/sys/net/ipv4/ip_forward", "1")
        .map_err(|e| format!("cannot enable IPv4 forwarding: {e}"))?;
    let tag = format!("sluice:{name}");
    let rules: [&[&str]; 3] = [
        &[
            "-t",
            "nat",
            "-A",
            "POSTROUTING",
            "-s",
            subnet,
            "!",
            "-o",
            host_if,
            "-j",
            "MASQUERADE",
        ],
        &[
            "-t", "filter", "-I", "FORWARD", "-i", host_if, "-j", "ACCEPT",
        ],
        &[
            "-t", "filter", "-I", "FORWARD", "-o", host_if, "-j", "ACCEPT",
        ],
    ];
    for r in rules {
        let args = [r, &["-m", "comment", "--comment", &tag]].concat();
        link::run("iptables", &args).map_err(|e| {
            if e.contains("No such file") {
                "iptables not found: sluice shell needs it for NAT (apt-get install iptables)"
                    .into()
            } else {
                e
            }
        })?;
    }
    Ok(())
}

/// Remove every iptables rule tagged `sluice:NAME`.
pub fn remove_nat(name: &str) {
    let tag = format!("sluice:{name}");
    for table in ["nat", "filter"] {
        let Ok(out) = Command::new("iptables").args(["-t", table, "-S"]).output() else {
            return;
        };
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // `-S` quotes the comment: `--comment "sluice:NAME"`.
            let words: Vec<&str> = line
                .split_whitespace()
                .map(|w| w.trim_matches('"'))
                .collect();
            if words.first() != Some(&"-A") || !words.contains(&tag.as_str()) {
                continue;
            }
            let mut args = vec!["-t", table, "-D"];
            args.extend(&words[1..]);
            let _ = link::run("iptables", &args);
        }
    }
}

/// The link description of a shell with this name.
pub fn spec(name: &str, o: &ShellOpts) -> LinkSpec {
    let a = Side {
        netns: Some(format!("{name}-a")),
        ifname: "a0".into(),
        addr: "10.77.{X}.2/24".into(),
        default_via: Some("10.77.{X}.1".into()),
    };
    let b = Side {
        netns: None,
        ifname: "sluice{X}".into(),
        addr: "10.77.{X}.1/24".into(),
        default_via: None,
    };
    LinkSpec {
        ab: o.up,
        ba: o.down,
        tc: o.tc.clone(),
        nat_subnet: Some("10.77.{X}.0/24".into()),
        keep_awake: o.keep_awake,
        ab_start: o.up_start.clone(),
        ba_start: o.down_start.clone(),
        logs: o.logs.clone(),
        ..LinkSpec::new(name.into(), a, b)
    }
}

/// Run the shell; the command's exit status (or 1 when the link could not be made).
pub fn run(exe: &Path, o: &ShellOpts) -> i32 {
    if !crate::rootless::privileged() {
        eprintln!(
            "sluice shell: needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN): its host-side device and \
             NAT live in the host's network namespace. Without root, `sluice link up NAME` works \
             inside a user namespace, and `sluice link exec NAME a -- CMD` runs a command behind it \
             (with no route beyond the link)"
        );
        return 1;
    }
    let name = format!("shell{}", std::process::id());
    let rec = match link::up_tied(exe, spec(&name, o), true) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice shell: {e}");
            return 1;
        }
    };
    let ns = rec.spec.a.netns.clone().unwrap_or_default();
    if !o.quiet {
        eprintln!(
            "sluice shell: link {name} ({}); change it live with `sluice tc -n {name} ...` (dev a0: uplink, dev b0: downlink)",
            link::describe(&rec)
        );
    }
    let base = rec.spec.b.addr.split('/').next().unwrap_or_default();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns]);
    if o.command.is_empty() {
        cmd.arg(std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into()));
    } else {
        cmd.args(&o.command);
    }
    cmd.env("SLUICE_LINK", &name);
    for (k, v) in &o.env {
        cmd.env(k, v.replace("{BASE}", base));
    }
    // The terminal's ^C is for the command; we wait and clean up.
    // SAFETY: ignoring signals installs no handler code.
    unsafe {
        use nix::sys::signal::{signal, SigHandler, Signal};
        let _ = signal(Signal::SIGINT, SigHandler::SigIgn);
        let _ = signal(Signal::SIGQUIT, SigHandler::SigIgn);
    }
    let code = match cmd.status() {
        // Killed by a signal: 128 + its number, as a shell reports it.
        Ok(s) => s.code().unwrap_or_else(|| {
            128 + std::os::unix::process::ExitStatusExt::signal(&s).unwrap_or(2)
        }),
        Err(e) => {
            eprintln!("sluice shell: cannot run the command: {e}");
            127
        }
    };
    if let Err(e) = link::down(&name) {
        eprintln!("sluice shell: {e}");
    }
    code
}
