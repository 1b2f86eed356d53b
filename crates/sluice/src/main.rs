//! The `sluice` binary: `sluice tc ...`, `sluice ip ...`, `sluice iptables
//! ...`; invoked through a link named `tc`, `ip` or `iptables` it behaves as that tool, so existing scripts run
//! unchanged with the links first on PATH.

use sluice_core::time::Time;
use sluice_tc::state::{netns_or_env, replay, state_dir, Session};
use sluice_tc::{ip, iptables, tc, Outcome};
use std::io::Write;

mod bench;
mod bench_live;
mod bench_proxy;
mod live;
mod proxy;
mod replay;
mod sim;
use std::process::ExitCode;

fn emit(o: &Outcome) -> ExitCode {
    let _ = std::io::stdout().write_all(o.stdout.as_bytes());
    let _ = std::io::stderr().write_all(o.stderr.as_bytes());
    ExitCode::from((o.code & 0xff) as u8)
}

/// The wall clock, in nanoseconds since the Unix epoch: when a command runs
/// (actions' `installed`/`used` ages count from it, as the kernel's jiffies).
fn wall_clock() -> Time {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Time(since.as_nanos().min(u64::MAX as u128) as u64)
}

fn open(netns: Option<&str>) -> Result<Session, Outcome> {
    Session::open(&state_dir(), netns, replay, Some(wall_clock())).map_err(|e| Outcome {
        stderr: format!(
            "sluice: cannot open state in {}: {e}\n",
            state_dir().display()
        ),
        code: 1,
        ..Default::default()
    })
}

/// Log a command that succeeded and changed the namespace, so the next
/// invocation replays it.
fn keep(s: &mut Session, tool: &str, words: Vec<String>, changed: bool, o: Outcome) -> Outcome {
    if o.code != 0 || !changed {
        return o;
    }
    let logged = std::iter::once(tool.to_string()).chain(words).collect();
    match s.record(logged) {
        Ok(()) => o,
        Err(e) => Outcome {
            stderr: format!("{}sluice: cannot save state: {e}\n", o.stderr),
            code: 1,
            ..o
        },
    }
}

fn run_tc(argv: &[String]) -> Outcome {
    let (opts, words) = match tc::parse_global(argv) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let netns = netns_or_env(opts.netns.clone());
    // A running `sluice link` of that name takes the command live (sluice-net's control.rs says why).
    if let Some(o) = sluice_net::control::forward_tc(netns.as_deref(), argv) {
        return o;
    }
    let mut s = match open(netns.as_deref()) {
        Ok(s) => s,
        Err(o) => return o,
    };
    if let Some(file) = &opts.batch {
        return run_batch(&mut s, &opts, file);
    }
    let o = tc::run(&mut s.net, &opts, &words);
    // A listing of actions can change them too (their `used_hw_stats`).
    let changed = tc::mutates(&words) || s.net.actions.take_listing_changed();
    keep(&mut s, "tc", words, changed, o)
}

/// `tc -b FILE`: one command per line; stop at the first failure unless `-force`.
fn run_batch(s: &mut Session, opts: &tc::Opts, file: &str) -> Outcome {
    let text = if file == "-" {
        std::io::read_to_string(std::io::stdin()).unwrap_or_default()
    } else {
        match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(_) => {
                return Outcome {
                    stderr: format!(
                        "Cannot open file \"{file}\" for reading: No such file or directory\n"
                    ),
                    code: 1,
                    ..Default::default()
                }
            }
        }
    };
    let mut all = Outcome::default();
    for (lineno, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        if words.is_empty() {
            continue;
        }
        let o = tc::run(&mut s.net, opts, &words);
        all.stdout.push_str(&o.stdout);
        all.stderr.push_str(&o.stderr);
        if o.code == 0 && (tc::mutates(&words) || s.net.actions.take_listing_changed()) {
            let mut logged = vec!["tc".to_string()];
            logged.extend(words);
            let _ = s.record(logged);
        }
        if o.code != 0 {
            all.stderr
                .push_str(&format!("Command failed {}:{}\n", file, lineno + 1));
            all.code = 1;
            if !opts.force {
                break;
            }
        }
    }
    all
}

fn run_ip(argv: &[String]) -> Outcome {
    let mut netns = None;
    let mut words = vec![];
    let mut it = argv.iter();
    while let Some(w) = it.next() {
        if w == "-n" || w == "-netns" {
            netns = it.next().cloned();
        } else {
            words.push(w.clone());
        }
    }
    let netns = netns_or_env(netns);
    // A running link shows its devices live (sluice-net's control.rs).
    if let Some(o) = sluice_net::control::forward_ip(netns.as_deref(), &words) {
        return o;
    }
    let mut s = match open(netns.as_deref()) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let o = ip::run(&mut s.net, &words);
    let changed = ip::mutates(&words);
    keep(&mut s, "ip", words, changed, o)
}

/// `iptables ...`. iptables has no namespace option (its `-n` means
/// numeric output), so the namespace comes from `$SLUICE_NETNS`, or, under
/// `sluice iptables` only (`sluice_n`), from a leading `-n NAME` as the
/// first two arguments, NAME not starting with `-` (`sluice iptables -n
/// -L` stays numeric). A running link of that name takes the command live.
fn run_iptables(argv: &[String], sluice_n: bool) -> Outcome {
    let (netns, argv) = match argv {
        [n, name, rest @ ..] if sluice_n && n == "-n" && !name.starts_with('-') => {
            (Some(name.clone()), rest)
        }
        _ => (None, argv),
    };
    let netns = netns_or_env(netns);
    if let Some(o) = sluice_net::control::forward_iptables(netns.as_deref(), argv) {
        return o;
    }
    let mut s = match open(netns.as_deref()) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let o = iptables::run(&mut s.net, argv);
    let changed = iptables::mutates(argv);
    keep(&mut s, "iptables", argv.to_vec(), changed, o)
}

const USAGE: &str = "usage: sluice { tc | ip | iptables | sim } ARGS...
  sluice sim NAME|FILE  run a network scenario in virtual time (--list, --help)
  sluice replay ...     run a capture through a tc script's qdiscs (--help)
  sluice bench [...]    measure qdisc and simulator speed (live: the live data plane's)
  sluice link up|down|list ...  namespaces joined through qdiscs, live (--help)
  sluice shell [...] [-- CMD]   a command behind a shaped link, NAT to the host (--help)
  sluice proxy [...]    a TCP proxy through qdiscs, Toxiproxy's REST API (--help)
  sluice tc ...   the tc command language (iproute2 6.x syntax and output)
  sluice ip ...   the ip link subset that creates and configures devices
  sluice iptables [-n NAME] ...  iptables (mangle and filter tables; -h for
                  the subset) in namespace NAME; as the first two arguments
                  only, since iptables' own -n means numeric output
While link NAME runs, `sluice tc|iptables|ip -n NAME ...` act on it live: its
packets cross OUTPUT then POSTROUTING (-o a0 or -o b0) before the egress qdisc,
and `ip -n NAME link show` lists a0 and b0.
Invoked through a link named tc, ip or iptables, sluice behaves as that tool.
State lives in $SLUICE_STATE_DIR (default: a per-user directory).
";

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let prog = argv
        .first()
        .and_then(|p| std::path::Path::new(p).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("sluice")
        .to_string();
    let daemon = prog == "sluice"
        && matches!(
            argv.get(1).map(String::as_str),
            Some("link" | "shell" | "proxy")
        );
    if !daemon {
        // Rust ignores SIGPIPE, so `sluice sim ... | head` would fail writing
        // to the closed pipe and panic; a command-line tool dies quietly
        // instead, as tc and ip do. The link daemon and the proxy keep
        // ignoring it: a client going away must not stop them.
        // SAFETY: resetting a signal's disposition to its default before any
        // thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let o = match prog.as_str() {
        "tc" => run_tc(&argv[1..]),
        "ip" => run_ip(&argv[1..]),
        "iptables" => run_iptables(&argv[1..], false),
        _ => match argv.get(1).map(String::as_str) {
            Some("tc") => run_tc(&argv[2..]),
            Some("ip") => run_ip(&argv[2..]),
            Some("iptables") => run_iptables(&argv[2..], true),
            Some("sim") => return ExitCode::from(sim::main(&argv[2..]) as u8),
            Some("bench") if argv.get(2).map(String::as_str) == Some("live") => {
                return ExitCode::from(bench_live::main(&argv[3..]) as u8)
            }
            Some("bench") if argv.get(2).map(String::as_str) == Some("proxy") => {
                return ExitCode::from(bench_proxy::main(&argv[3..]) as u8)
            }
            Some("bench") => return ExitCode::from(bench::main(&argv[2..]) as u8),
            Some("replay") => return ExitCode::from(replay::main(&argv[2..]) as u8),
            Some("link") => return ExitCode::from(live::link_main(&argv[2..]) as u8),
            Some("shell") => return ExitCode::from(live::shell_main(&argv[2..]) as u8),
            Some("proxy") => return ExitCode::from(proxy::main(&argv[2..]) as u8),
            _ => Outcome {
                stderr: USAGE.into(),
                code: if argv.len() > 1 { 255 } else { 0 },
                ..Default::default()
            },
        },
    };
    emit(&o)
}
