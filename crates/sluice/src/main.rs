//! The `sluice` binary: `sluice tc ...`, `sluice ip ...`, `sluice iptables
//! ...`; invoked through a link named `tc`, `ip` or `iptables` it behaves as that tool, so existing scripts run
//! unchanged with the links first on PATH.

use sluice_core::time::Time;
use sluice_tc::state::{netns_or_env, replay, state_dir, Access, Session};
use sluice_tc::{ip, iptables, tc, Outcome};
use std::io::Write;

mod bench;
mod bench_live;
mod bench_proxy;
mod completions;
mod live;
mod live_node;
mod mm;
mod proxy;
mod replay;
mod shims;
mod sim;
mod sim_live;
mod sweep;
mod web_live;
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

fn open(netns: Option<&str>, access: Access) -> Result<Session, Outcome> {
    Session::load(&state_dir(), netns, replay, Some(wall_clock()), access).map_err(|e| Outcome {
        stderr: format!("sluice: {e}\n"),
        code: 1,
        ..Default::default()
    })
}

/// A command that changes the namespace takes the exclusive lock; one that
/// only reads shares it.
fn access(changes: bool) -> Access {
    if changes {
        Access::Write
    } else {
        Access::Read
    }
}

/// Commit what `s` has staged; a failure to save turns `o` into an error.
fn commit(s: &mut Session, o: Outcome) -> Outcome {
    match s.commit() {
        Ok(()) => o,
        Err(e) => Outcome {
            stderr: format!("{}sluice: cannot save state: {e}\n", o.stderr),
            code: 1,
            ..o
        },
    }
}

/// Log a command that succeeded and changed the namespace, so the next
/// invocation replays it; then release the lock.
fn keep(mut s: Session, tool: &str, words: Vec<String>, changed: bool, o: Outcome) -> Outcome {
    let o = if o.code != 0 || !changed {
        o
    } else {
        s.stage(std::iter::once(tool.to_string()).chain(words).collect());
        commit(&mut s, o)
    };
    finish(s);
    o
}

/// Release the lock. The process exits next: its memory goes back whole,
/// faster than freeing a namespace of thousands of classes piece by piece.
fn finish(s: Session) {
    std::mem::forget(s.into_net());
}

fn run_tc(argv: &[String]) -> Outcome {
    if let Some(o) = live_node::route("tc", argv) {
        return o;
    }
    let (opts, words) = match tc::parse_global(argv) {
        Ok(x) => x,
        Err(o) => return o,
    };
    let netns = netns_or_env(opts.netns.clone());
    // A running `sluice link` of that name takes the command live (sluice-net's control.rs says why).
    if let Some(o) = sluice_net::control::forward_tc(netns.as_deref(), argv) {
        return o;
    }
    // Listing actions marks them used by a dump (`used_hw_stats`), which is
    // logged: action listings take the exclusive lock too.
    let lists_actions = words.first().is_some_and(|o| matches(o, "actions"));
    let writes = opts.batch.is_some() || tc::mutates(&words) || lists_actions;
    let mut s = match open(netns.as_deref(), access(writes)) {
        Ok(s) => s,
        Err(o) => return o,
    };
    if let Some(file) = &opts.batch {
        let o = run_batch(&mut s, &opts, file);
        let o = commit(&mut s, o);
        finish(s);
        return o;
    }
    let o = tc::run(&mut s.net, &opts, &words);
    let changed = tc::mutates(&words) || s.net.actions.take_listing_changed();
    keep(s, "tc", words, changed, o)
}

/// iproute2's `matches`: `word` is a non-empty prefix of `keyword`.
fn matches(word: &str, keyword: &str) -> bool {
    !word.is_empty() && keyword.starts_with(word)
}

/// The most words on a batch line (iproute2's MAX_ARGS, less the NULL).
const BATCH_MAX_ARGS: usize = 511;

/// Lines of a batch file as iproute2's `getcmdline` joins them: the line
/// cut at its first `#` (quotes or not), and while it ends in `\` and a
/// newline, the next line (cut the same way) appended in the backslash's
/// place. `lineno` counts physical lines, as "Command failed FILE:N" does.
struct BatchLines<'a> {
    rest: &'a [u8],
    lineno: usize,
}

impl<'a> BatchLines<'a> {
    /// The next physical line, newline included (`getline`).
    fn getline(&mut self) -> Option<&'a [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        let end = self
            .rest
            .iter()
            .position(|&b| b == b'\n')
            .map_or(self.rest.len(), |i| i + 1);
        let (line, rest) = self.rest.split_at(end);
        self.rest = rest;
        self.lineno += 1;
        Some(line)
    }

    /// The next command line; `Err` when a continuation has no next line
    /// (tc then stops reading, as at the end of the file).
    fn getcmdline(&mut self) -> Option<Result<Vec<u8>, ()>> {
        let uncomment =
            |l: &[u8]| l[..l.iter().position(|&b| b == b'#').unwrap_or(l.len())].to_vec();
        let mut line = uncomment(self.getline()?);
        while let Some(at) = line.windows(2).position(|w| w == b"\\\n") {
            let Some(next) = self.getline() else {
                return Some(Err(()));
            };
            line.truncate(at);
            line.extend_from_slice(&uncomment(next));
        }
        Some(Ok(line))
    }
}

/// Why `makeargs` gave up on a line (tc exits at once, status 1).
enum MakeArgsError {
    TooMany,
    Unterminated,
}

/// iproute2's `makeargs`: words split at blanks; a word that begins with
/// `'` or `"` runs to the next such quote (no escapes; a quote elsewhere is
/// an ordinary character, and what follows a closing quote starts a new
/// word).
fn makeargs(line: &[u8]) -> Result<Vec<String>, MakeArgsError> {
    let ws = |b: u8| matches!(b, b' ' | b'\t' | b'\r' | b'\n');
    let mut words = vec![];
    let mut i = 0;
    while i < line.len() {
        while i < line.len() && ws(line[i]) {
            i += 1;
        }
        if i == line.len() {
            break;
        }
        if words.len() >= BATCH_MAX_ARGS {
            return Err(MakeArgsError::TooMany);
        }
        let (start, end);
        if line[i] == b'\'' || line[i] == b'"' {
            let q = line[i];
            start = i + 1;
            end = line[start..]
                .iter()
                .position(|&b| b == q)
                .map(|p| start + p)
                .ok_or(MakeArgsError::Unterminated)?;
        } else {
            start = i;
            end = line[i..]
                .iter()
                .position(|&b| ws(b))
                .map_or(line.len(), |p| i + p);
        }
        words.push(String::from_utf8_lossy(&line[start..end]).into_owned());
        i = end + 1;
    }
    Ok(words)
}

/// Did this command fail where tc calls `exit(-1)` rather than returning
/// an error (`incomplete_command`, `invarg`, `duparg`, `duparg2`,
/// `missarg` in iproute2's lib/utils.c)? In a batch that ends tc at once,
/// status 255, without "Command failed".
fn exits(o: &Outcome) -> bool {
    let last = o.stderr.lines().last().unwrap_or("");
    o.code == 255
        && (last == "Command line is not complete. Try option \"help\""
            || last.starts_with("Error: argument \"")
            || last.starts_with("Error: duplicate \"")
            || last.starts_with("Error: either \""))
}

/// `tc -b FILE`: one command per line (iproute2's quoting, comments and
/// continuation lines); stop at the first failure unless `-force`. The
/// lines that succeeded and changed something are staged, to be committed
/// together.
fn run_batch(s: &mut Session, opts: &tc::Opts, file: &str) -> Outcome {
    let read = if file == "-" {
        let mut b = vec![];
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut b).map(|_| b)
    } else {
        std::fs::read(file)
    };
    let text = match read {
        Ok(t) => t,
        Err(e) => {
            let msg = e.to_string();
            let msg = msg.split(" (os error").next().unwrap_or(&msg);
            return Outcome {
                stderr: format!("Cannot open file \"{file}\" for reading: {msg}\n"),
                code: 1,
                ..Default::default()
            };
        }
    };
    let mut all = Outcome::default();
    let mut lines = BatchLines {
        rest: &text,
        lineno: 0,
    };
    while let Some(line) = lines.getcmdline() {
        let Ok(line) = line else {
            all.stderr.push_str("Missing continuation line\n");
            break;
        };
        let words = match makeargs(&line) {
            Ok(w) => w,
            Err(e) => {
                all.stderr.push_str(match e {
                    MakeArgsError::TooMany => "Too many arguments to command\n",
                    MakeArgsError::Unterminated => "Unterminated quoted string\n",
                });
                all.code = 1;
                break;
            }
        };
        if words.is_empty() {
            continue;
        }
        let o = tc::run(&mut s.net, opts, &words);
        all.stdout.push_str(&o.stdout);
        all.stderr.push_str(&o.stderr);
        if o.code == 0 && (tc::mutates(&words) || s.net.actions.take_listing_changed()) {
            let mut logged = vec!["tc".to_string()];
            logged.extend(words);
            s.stage(logged);
        }
        if exits(&o) {
            all.code = o.code;
            break;
        }
        if o.code != 0 {
            all.stderr
                .push_str(&format!("Command failed {}:{}\n", file, lines.lineno));
            all.code = 1;
            if !opts.force {
                break;
            }
        }
    }
    all
}

fn run_ip(argv: &[String]) -> Outcome {
    if let Some(o) = live_node::route("ip", argv) {
        return o;
    }
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
    let changed = ip::mutates(&words);
    let mut s = match open(netns.as_deref(), access(changed)) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let o = ip::run(&mut s.net, &words);
    keep(s, "ip", words, changed, o)
}

/// `iptables ...`. iptables has no namespace option (its `-n` means
/// numeric output), so the namespace comes from `$SLUICE_NETNS`, or, under
/// `sluice iptables` only (`sluice_n`), from a leading `-n NAME` as the
/// first two arguments, NAME not starting with `-` (`sluice iptables -n
/// -L` stays numeric). A running link of that name takes the command live.
fn run_iptables(argv: &[String], sluice_n: bool) -> Outcome {
    if let Some(o) = live_node::route("iptables", argv) {
        return o;
    }
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
    let changed = iptables::mutates(argv);
    let mut s = match open(netns.as_deref(), access(changed)) {
        Ok(s) => s,
        Err(o) => return o,
    };
    let o = iptables::run(&mut s.net, argv);
    keep(s, "iptables", argv.to_vec(), changed, o)
}

/// Whether `args` read as a tc command line: tc's global options, then one
/// of its objects spelled out (so `sluice -s qdisc show` is tc's too).
fn is_tc_command(args: &[String]) -> bool {
    matches!(
        tc::parse_global(args),
        Ok((_, words)) if matches!(
            words.first().map(String::as_str),
            Some("qdisc" | "class" | "filter" | "chain" | "action" | "actions" | "monitor")
        )
    )
}

const USAGE: &str = "usage: sluice { tc | ip | iptables | sim } ARGS...
  sluice sim NAME|FILE  run a network scenario in virtual time (--list, --help)
  sluice sweep FILE     a scenario over a grid of its variables and seeds (docs/sweeps.md)
  sluice replay ...     run a capture through a tc script's qdiscs (--help)
  sluice bench [...]    measure qdisc and simulator speed (live: the live data plane's)
  sluice link up|down|list ...  namespaces joined through qdiscs, live (--help)
  sluice shell [...] [-- CMD]   a command behind a shaped link, NAT to the host (--help)
  sluice mm-link UP DOWN [...] [CMD], mm-delay MS [CMD], mm-loss uplink|downlink RATE [CMD]
                        Mahimahi's shells on the live plane (docs/mahimahi.md)
  sluice proxy [...]    a TCP proxy through qdiscs, Toxiproxy's REST API (--help)
  sluice shims DIR      put tc, ip and iptables scripts running sluice in DIR
  sluice completions SHELL, sluice manpages DIR   shell completions, manual pages
  sluice tc ...   the tc command language (iproute2 6.x syntax and output)
  sluice ip ...   the ip link subset that creates and configures devices
  sluice iptables [-n NAME] ...  iptables (mangle and filter tables; -h for
                  the subset) in namespace NAME; as the first two arguments
                  only, since iptables' own -n means numeric output
While link NAME runs, `sluice tc|iptables|ip -n NAME ...` act on it live: its
packets cross OUTPUT then POSTROUTING (-o a0 or -o b0) before the egress qdisc,
and `ip -n NAME link show` lists a0 and b0.
Invoked through a link named tc, ip, iptables, mm-link, mm-delay or mm-loss,
sluice behaves as that tool;
`sluice qdisc|class|filter|action ...` is `sluice tc ...`.
State lives in $SLUICE_STATE_DIR (default: $XDG_RUNTIME_DIR/sluice, else
/tmp/sluice-UID), a directory private to the user (mode 0700).
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
    // Through a link named mm-link: Mahimahi's tool (but the link daemon
    // it starts re-executes this same path as `link __daemon`).
    if let Some(tool) = ["mm-link", "mm-delay", "mm-loss"]
        .into_iter()
        .find(|t| prog == *t)
    {
        if argv.get(1..3) == Some(&["link".to_string(), "__daemon".to_string()][..]) {
            return ExitCode::from(live::link_main(&argv[2..]) as u8);
        }
        return ExitCode::from(mm::main(tool, &argv[1..]) as u8);
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
            Some("sweep") => return ExitCode::from(sweep::main(&argv[2..]) as u8),
            Some("completions") => {
                return ExitCode::from(completions::completions_main(&argv[2..]) as u8)
            }
            Some("manpages") => return ExitCode::from(completions::manpages_main(&argv[2..]) as u8),
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
            Some(tool @ ("mm-link" | "mm-delay" | "mm-loss")) => {
                return ExitCode::from(mm::main(tool, &argv[2..]) as u8)
            }
            Some("proxy") => return ExitCode::from(proxy::main(&argv[2..]) as u8),
            Some("shims") => return ExitCode::from(shims::main(&argv[2..]) as u8),
            // Hidden: the HTTP server and browser `sim --live` runs for a
            // web workload (web_live.rs), not in the usage or completions.
            Some("web-server") => return ExitCode::from(web_live::server_main(&argv[2..]) as u8),
            Some("web-client") => return ExitCode::from(web_live::client_main(&argv[2..]) as u8),
            // `sluice qdisc ...` is `sluice tc qdisc ...`: a tool that
            // resolves a `tc` link to this binary calls it so (shims.rs).
            _ if is_tc_command(&argv[1..]) => run_tc(&argv[1..]),
            _ => Outcome {
                stderr: USAGE.into(),
                code: if argv.len() > 1 { 255 } else { 0 },
                ..Default::default()
            },
        },
    };
    emit(&o)
}
