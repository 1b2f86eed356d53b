//! `sluice mm-link`, `sluice mm-delay`, `sluice mm-loss`: Mahimahi's
//! command lines on sluice's live plane, so scripts written for Mahimahi
//! run unchanged (invoked through a link named `mm-link`, `mm-delay` or
//! `mm-loss`, the binary is that tool).
//!
//! Each is a `sluice shell` ([`sluice_net::shell`]): the command runs in a
//! fresh namespace whose uplink (from the command outward) is side a's
//! egress, `dev a0`, and whose downlink is `dev b0`'s. mm-link puts a trace
//! on each wire (no transmit ring: an opportunity takes packets straight
//! from the qdisc, as Mahimahi's link takes them from its queue) and its
//! queue as the root qdisc of that device; mm-delay gives both wires a
//! fixed delay, mm-loss one wire a loss rate. As Mahimahi, they run the
//! user's shell when given no command, set `MAHIMAHI_BASE` (the outside's
//! address as seen from inside) unless an outer one set it, and add a
//! prefix to a bash prompt through `MAHIMAHI_SHELL_PREFIX` and
//! `PROMPT_COMMAND`. They nest: an inner one runs inside the outer's
//! namespace and routes out through it. docs/mahimahi.md has the mapping of
//! queues to qdiscs and the differences.

use sluice_net::link::Wire;
use sluice_net::mmlog::LogSpec;
use sluice_net::shell::{self, ShellOpts};
use sluice_net::wire::{read_bounded, Buffer, WireSettings};

/// Run `tool` (`mm-link`, `mm-delay` or `mm-loss`) with `args`; the exit status.
pub fn main(tool: &str, args: &[String]) -> i32 {
    let parsed = match tool {
        "mm-link" => link_opts(args),
        "mm-delay" => delay_opts(args),
        "mm-loss" => loss_opts(args),
        _ => Err(format!("unknown tool {tool}")),
    };
    match parsed {
        Ok(opts) => shell::run(&exe(), &opts),
        Err(e) => {
            eprintln!("{tool}: {e}");
            2
        }
    }
}

fn exe() -> std::path::PathBuf {
    std::env::current_exe().unwrap_or_else(|_| "sluice".into())
}

/// The command to run: the one given, else the user's shell.
fn command_or_shell(cmd: &[String]) -> Vec<String> {
    if cmd.is_empty() {
        vec![std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into())]
    } else {
        cmd.to_vec()
    }
}

/// A shell behind a link of two wires, with Mahimahi's environment and
/// prompt prefix `prefix`.
fn opts(up: Wire, down: Wire, prefix: &str, command: &[String]) -> ShellOpts {
    let old = std::env::var("MAHIMAHI_SHELL_PREFIX").unwrap_or_default();
    let mut env = vec![
        (
            "MAHIMAHI_SHELL_PREFIX".to_string(),
            format!("{old}{prefix}"),
        ),
        (
            "PROMPT_COMMAND".to_string(),
            "PS1=\"$MAHIMAHI_SHELL_PREFIX$PS1\" PROMPT_COMMAND=".to_string(),
        ),
    ];
    // The outermost container's address stays (Mahimahi's setenv without override).
    if std::env::var_os("MAHIMAHI_BASE").is_none() {
        env.push(("MAHIMAHI_BASE".into(), "{BASE}".into()));
    }
    ShellOpts {
        up,
        down,
        command: command_or_shell(command),
        env,
        quiet: true,
        ..Default::default()
    }
}

/// Mahimahi's `myatoi`: a whole number, nothing else.
fn whole(s: &str, what: &str) -> Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what}: {s:?} is not a whole number"));
    }
    s.parse().map_err(|_| format!("{what}: {s} is too large"))
}

/// `mm-delay MS [COMMAND...]`.
fn delay_opts(args: &[String]) -> Result<ShellOpts, String> {
    let Some(ms) = args.first() else {
        return Err("Usage: mm-delay delay-milliseconds [command...]".into());
    };
    let ms = whole(ms, "delay-milliseconds")?;
    let wire = Wire {
        delay_ns: ms
            .checked_mul(1_000_000)
            .ok_or("delay-milliseconds: too large")?,
        ..Wire::default()
    };
    Ok(opts(
        wire,
        wire,
        &format!("[delay {ms} ms] "),
        strip_dashes(&args[1..]),
    ))
}

/// A command after `--` is the command.
fn strip_dashes(cmd: &[String]) -> &[String] {
    match cmd.first().map(String::as_str) {
        Some("--") => &cmd[1..],
        _ => cmd,
    }
}

/// `mm-loss uplink|downlink RATE [COMMAND...]`, RATE a fraction 0 to 1.
fn loss_opts(args: &[String]) -> Result<ShellOpts, String> {
    let usage = "Usage: mm-loss uplink|downlink RATE [COMMAND...]";
    let (Some(link), Some(rate)) = (args.first(), args.get(1)) else {
        return Err(usage.into());
    };
    let loss: f64 = rate
        .parse()
        .ok()
        .filter(|l| (0.0..=1.0).contains(l))
        .ok_or_else(|| format!("loss rate must be between 0 and 1 (got {rate:?})\n{usage}"))?;
    let lossy = Wire {
        loss,
        ..Wire::default()
    };
    let (up, down, tag) = match link.as_str() {
        "uplink" => (lossy, Wire::default(), "up"),
        "downlink" => (Wire::default(), lossy, "down"),
        _ => return Err(usage.into()),
    };
    Ok(opts(
        up,
        down,
        &format!("[loss {tag}={rate}] "),
        strip_dashes(&args[2..]),
    ))
}

/// Mahimahi's queues, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Queue {
    kind: String,
    /// `packets`, `bytes`, `target`, `interval`, `qdelay_ref`, `max_burst` (0: not given).
    args: [(&'static str, u64); 6],
}

impl Queue {
    fn arg(&self, name: &str) -> u64 {
        self.args
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |a| a.1)
    }

    /// Parse as Mahimahi's `get_arg` reads them: each name found anywhere
    /// in the text, then `=`, then digits.
    fn parse(kind: &str, text: &str) -> Result<Queue, String> {
        let mut args = [
            ("packets", 0),
            ("bytes", 0),
            ("target", 0),
            ("interval", 0),
            ("qdelay_ref", 0),
            ("max_burst", 0),
        ];
        for (name, value) in &mut args {
            let Some(at) = text.find(*name) else { continue };
            let rest = &text[at + name.len()..];
            let bad = || format!("could not parse queue arguments: {text}");
            let digits = rest.strip_prefix('=').ok_or_else(bad)?;
            let n = digits.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 {
                return Err(bad());
            }
            *value = whole(&digits[..n], name)?;
        }
        let q = Queue {
            kind: kind.to_string(),
            args,
        };
        let limited = q.arg("packets") > 0 || q.arg("bytes") > 0;
        match kind {
            "infinite" => {}
            "droptail" | "drophead" | "codel" | "pie" if !limited => {
                return Err("Dropping queue must have a byte or packet limit.".into())
            }
            "droptail" | "drophead" => {}
            "codel" if q.arg("target") == 0 || q.arg("interval") == 0 => {
                return Err("CoDel queue must have target and interval arguments.".into())
            }
            "pie" if q.arg("qdelay_ref") == 0 || q.arg("max_burst") == 0 => {
                return Err("PIE queue must have qdelay_ref and max_burst arguments.".into())
            }
            "codel" | "pie" => {}
            _ => return Err(format!("Unknown queue type: {kind}")),
        }
        Ok(q)
    }

    /// How Mahimahi names the queue in a log's `# queue:` line.
    fn describe(&self) -> String {
        if self.kind == "infinite" {
            return "infinite".into();
        }
        let mut limits = vec![];
        if self.arg("bytes") > 0 {
            limits.push(format!("bytes={}", self.arg("bytes")));
        }
        if self.arg("packets") > 0 {
            limits.push(format!("packets={}", self.arg("packets")));
        }
        format!("{} [{}]", self.kind, limits.join(", "))
    }

    /// The packet limit of a kernel qdisc that counts packets: `packets`,
    /// else `bytes` in 1500-byte packets (Mahimahi's bytes include the
    /// 4-byte TUN header).
    fn packet_limit(&self) -> u64 {
        match (self.arg("packets"), self.arg("bytes")) {
            (0, b) => (b / 1504).max(1),
            (p, _) => p,
        }
    }

    /// The root qdisc (tc words after `root`) that stands for this queue.
    fn qdisc(&self) -> String {
        let (p, b) = (self.arg("packets"), self.arg("bytes"));
        match self.kind.as_str() {
            "infinite" => format!("pfifo limit {}", u32::MAX),
            "droptail" if p == 0 => format!("bfifo limit {b}"),
            "droptail" => format!("pfifo limit {p}"),
            "drophead" => format!("pfifo_head_drop limit {}", self.packet_limit()),
            "codel" => format!(
                "codel limit {} target {}ms interval {}ms noecn",
                self.packet_limit(),
                self.arg("target"),
                self.arg("interval")
            ),
            _ => format!(
                "pie limit {} target {}ms noecn",
                self.packet_limit(),
                self.arg("qdelay_ref")
            ),
        }
    }
}

/// One direction's options of mm-link.
#[derive(Default)]
struct LinkDir {
    log: Option<String>,
    queue: Option<String>,
    queue_args: Option<String>,
}

/// Mahimahi's `shell_quote`.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `mm-link UPLINK-TRACE DOWNLINK-TRACE [OPTION]... [COMMAND...]`.
fn link_opts(args: &[String]) -> Result<ShellOpts, String> {
    let usage = "Usage: mm-link UPLINK-TRACE DOWNLINK-TRACE [OPTION]... [COMMAND]\n\
        Options = --once\n          --uplink-log=FILENAME --downlink-log=FILENAME\n          \
        --uplink-queue=QUEUE_TYPE --downlink-queue=QUEUE_TYPE\n          \
        --uplink-queue-args=QUEUE_ARGS --downlink-queue-args=QUEUE_ARGS\n\n          \
        QUEUE_TYPE = infinite | droptail | drophead | codel | pie\n          \
        QUEUE_ARGS = \"NAME=NUMBER[, NAME2=NUMBER2, ...]\"\n              \
        (with NAME = bytes | packets | target | interval | qdelay_ref | max_burst)\n                  \
        target, interval, qdelay_ref, max_burst are in milli-second";
    let init_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut up = LinkDir::default();
    let mut down = LinkDir::default();
    let mut once = false;
    let mut traces: Vec<String> = vec![];
    let mut command: Vec<String> = vec![];
    let mut i = 0;
    // Options anywhere before `--` (GNU getopt permutes them), and up to a
    // command's first word, which with everything after it is the command.
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            command.extend(args[i..].iter().cloned());
            break;
        }
        if !a.starts_with('-') || a == "-" {
            if traces.len() < 2 {
                traces.push(a.clone());
                continue;
            }
            command.extend(args[i - 1..].iter().cloned());
            break;
        }
        if a == "--once" {
            once = true;
            continue;
        }
        if a.starts_with("--meter") {
            return Err(format!(
                "{a}: sluice draws no live graphs; write a log (--uplink-log=FILE) and \
                 draw it with mm-throughput-graph or mm-delay-graph"
            ));
        }
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let slot = match name {
            "--uplink-log" | "-u" => &mut up.log,
            "--downlink-log" | "-d" => &mut down.log,
            "--uplink-queue" => &mut up.queue,
            "--downlink-queue" => &mut down.queue,
            "--uplink-queue-args" => &mut up.queue_args,
            "--downlink-queue-args" => &mut down.queue_args,
            _ => return Err(format!("unrecognized option '{a}'\n{usage}")),
        };
        let value = match inline {
            Some(v) => v,
            None => {
                let v = args
                    .get(i)
                    .ok_or_else(|| format!("option '{name}' requires an argument\n{usage}"))?;
                i += 1;
                v.clone()
            }
        };
        *slot = Some(value);
    }
    let [up_trace, down_trace] = &traces[..] else {
        return Err(usage.into());
    };
    let argv: Vec<String> = std::env::args().collect();
    let command_line: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
    let mut o = opts(
        Wire::default(),
        Wire::default(),
        "[link] ",
        strip_dashes(&command),
    );
    let mut starts = vec![];
    for (d, trace, name, dev) in [
        (&up, up_trace, "Uplink", "a0"),
        (&down, down_trace, "Downlink", "b0"),
    ] {
        let queue = Queue::parse(
            d.queue.as_deref().unwrap_or("infinite"),
            d.queue_args.as_deref().unwrap_or(""),
        )?;
        o.tc.push(
            format!("qdisc replace dev {dev} root {}", queue.qdisc())
                .split_whitespace()
                .map(String::from)
                .collect(),
        );
        let settings = WireSettings {
            trace: Some(read_bounded(trace)?),
            once,
            buffer: Some(Buffer::Packets(0)),
            ..Default::default()
        };
        settings.change()?;
        starts.push(settings);
        if let Some(log) = &d.log {
            let path = std::path::absolute(log).map_err(|e| format!("{log}: {e}"))?;
            // Made (or emptied) now, so a path that cannot be written stops everything.
            std::fs::File::create(&path)
                .map_err(|e| format!("{log}: error opening for writing: {e}"))?;
            o.logs.push(LogSpec {
                ab: dev == "a0",
                path: path.to_string_lossy().into_owned(),
                header: format!(
                    "# mahimahi mm-link ({name}) [{trace}] > {log}\n# command line: {}\n# queue: {}\n",
                    command_line.join(" "),
                    queue.describe()
                ),
                init_ms,
                config: std::env::var("MAHIMAHI_SHELL_PREFIX").ok(),
            });
        }
    }
    o.down_start = starts.pop().unwrap_or_default();
    o.up_start = starts.pop().unwrap_or_default();
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn queues_map_to_qdiscs_and_describe_themselves_as_mahimahi() {
        let q = |k: &str, a: &str| Queue::parse(k, a).map(|q| (q.qdisc(), q.describe()));
        assert_eq!(
            q("infinite", ""),
            Ok(("pfifo limit 4294967295".into(), "infinite".into()))
        );
        assert_eq!(
            q("droptail", "packets=100"),
            Ok(("pfifo limit 100".into(), "droptail [packets=100]".into()))
        );
        assert_eq!(
            q("droptail", "bytes=30000"),
            Ok(("bfifo limit 30000".into(), "droptail [bytes=30000]".into()))
        );
        assert_eq!(
            q("drophead", "packets=5, bytes=9000").unwrap().1,
            "drophead [bytes=9000, packets=5]"
        );
        assert_eq!(
            q("codel", "packets=300, target=5, interval=100").unwrap().0,
            "codel limit 300 target 5ms interval 100ms noecn"
        );
        assert_eq!(
            q("pie", "bytes=150400, qdelay_ref=20, max_burst=100")
                .unwrap()
                .0,
            "pie limit 100 target 20ms noecn"
        );
        assert!(q("droptail", "").is_err());
        assert!(q("codel", "packets=10, target=5").is_err());
        assert!(q("droptail", "packets=x").is_err());
        assert!(q("fifo", "packets=1").is_err());
    }

    #[test]
    fn command_lines_read_as_mahimahis() {
        let dir = std::env::temp_dir().join(format!("sluice-mm-{}", std::process::id()));
        std::fs::write(&dir, "1\n").unwrap();
        let t = dir.to_str().unwrap();
        let o = link_opts(&words(&format!("{t} {t} --once -- ls -l"))).unwrap();
        assert_eq!(o.command, ["ls", "-l"]);
        assert!(o.up_start.once && o.down_start.once);
        assert_eq!(o.tc[0][..5], words("qdisc replace dev a0 root")[..]);
        let o = link_opts(&words(&format!(
            "--uplink-queue=droptail --uplink-queue-args=packets=10 {t} {t} echo hi"
        )))
        .unwrap();
        assert_eq!(o.command, ["echo", "hi"]);
        assert_eq!(
            o.tc[0].join(" "),
            "qdisc replace dev a0 root pfifo limit 10"
        );
        assert!(link_opts(&words(t)).is_err());
        assert!(link_opts(&words(&format!("{t} {t} --bogus"))).is_err());
        std::fs::write(&dir, "1\nx\n").unwrap();
        let e = link_opts(&words(&format!("{t} {t}"))).unwrap_err();
        assert_eq!(
            e,
            format!("{t}: line 2: \"x\" is not a whole number of milliseconds")
        );
        let _ = std::fs::remove_file(&dir);
        let o = delay_opts(&words("25 ping x")).unwrap();
        assert_eq!((o.up.delay_ns, o.down.delay_ns), (25_000_000, 25_000_000));
        assert!(delay_opts(&words("2.5")).is_err());
        let o = loss_opts(&words("downlink 0.1")).unwrap();
        assert_eq!((o.up.loss, o.down.loss), (0.0, 0.1));
        assert!(loss_opts(&words("downlink 1.5")).is_err());
        assert!(loss_opts(&words("sideways 0.1")).is_err());
    }
}
