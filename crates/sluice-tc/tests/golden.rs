//! Byte-for-byte comparison with the real iproute2 + kernel.
//!
//! `tests/golden/*.golden` were captured from iproute2 6.1 against kernel 6.18
//! (see tests/golden/README.md). Each case starts from the same state as the
//! capture: `lo` down, a veth pair PEER (ifindex 2) / DEV (ifindex 3), both up.
//! As the capture did, commands run with the devices named `v0`/`v1` and
//! the output has those whole words renamed back to DEV/PEER (which
//! misaligns `ip -br`'s padded columns exactly as it did there).
//! Every `tc` command's stdout, stderr and exit status must match. The cases
//! listed in `MUST_PASS` are the ones sluice claims; the test also prints how
//! many other cases pass, so progress is visible; `GOLDEN_VERBOSE=fifo` (a
//! file-name prefix) prints the first mismatch of every failing case there.

use sluice_tc::net::Net;
use sluice_tc::{ip, tc, Outcome};
use std::path::PathBuf;

struct Cmd {
    /// The `%sleep` before the command, in nanoseconds (the capture paused
    /// so that actions' ages print; sluice's clock moves on as much).
    sleep_ns: u64,
    line: String,
    stdout: String,
    stderr: String,
    code: i32,
}

struct Case {
    name: String,
    setup: String,
    unstable: bool,
    uses_files: bool,
    cmds: Vec<Cmd>,
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden")
}

fn parse(text: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = vec![];
    let mut pending_sleep = 0;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("### case: ") {
            cases.push(Case {
                name: name.into(),
                setup: "up".into(),
                unstable: false,
                uses_files: false,
                cmds: vec![],
            });
            continue;
        }
        let Some(c) = cases.last_mut() else { continue };
        if let Some(s) = line.strip_prefix("%setup ") {
            c.setup = s.trim().into();
        } else if line.starts_with("%unstable") {
            c.unstable = true;
        } else if line.starts_with("%file") || line.starts_with("%|") {
            c.uses_files = true;
        } else if let Some(secs) = line.strip_prefix("%sleep ") {
            let ns = (secs.trim().parse::<f64>().unwrap_or(0.0) * 1e9) as u64;
            pending_sleep += ns;
        } else if let Some(cmd) = line.strip_prefix("$ ") {
            c.cmds.push(Cmd {
                sleep_ns: std::mem::take(&mut pending_sleep),
                line: cmd.into(),
                stdout: String::new(),
                stderr: String::new(),
                code: 0,
            });
        } else if let Some(cmd) = c.cmds.last_mut() {
            if let Some(o) = line.strip_prefix("> ") {
                cmd.stdout.push_str(o);
                cmd.stdout.push('\n');
            } else if line == ">" {
                cmd.stdout.push('\n');
            } else if let Some(e) = line.strip_prefix("! ") {
                cmd.stderr.push_str(e);
                cmd.stderr.push('\n');
            } else if line == "!" {
                cmd.stderr.push('\n');
            } else if line == "%noeol >" {
                cmd.stdout.pop();
            } else if line == "%noeol !" {
                cmd.stderr.pop();
            } else if let Some(code) = line.strip_prefix("? ") {
                cmd.code = code.trim().parse().unwrap_or(-1);
            }
        }
    }
    cases
}

fn setup(kind: &str) -> Net {
    let mut net = Net::new();
    // The capture disables IPv6 in the namespace but for `up6`.
    net.l3.ipv6 = kind == "up6";
    if kind != "none" {
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            ip::run(
                &mut net,
                &w("link add dev v0 address 02:00:00:00:00:01 type veth peer name v1 address 02:00:00:00:00:02")
            )
            .code,
            0
        );
        if kind == "up" || kind == "up6" {
            assert_eq!(ip::run(&mut net, &w("link set dev v0 up")).code, 0);
            assert_eq!(ip::run(&mut net, &w("link set dev v1 up")).code, 0);
        }
        if kind == "up6" {
            // The capture's 3 s for duplicate address detection.
            net.now += sluice_core::time::Duration::from_millis(3000);
        }
    }
    net
}

/// The words of a command line as the capture split them (Python's
/// `shlex.split`): white space separates, and single or double quotes
/// group (`dev ""` is one empty word).
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut cur, mut quote, mut started) = (vec![], String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => (quote, started) = (Some(c), true),
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut cur));
                }
                started = false;
            }
            (None, c) => (started, _) = (true, cur.push(c)),
        }
    }
    if started {
        words.push(cur);
    }
    words
}

fn run_line(net: &mut Net, line: &str) -> Option<Outcome> {
    let words = shell_words(line);
    match words.first().map(String::as_str) {
        Some("tc") => Some(match tc::parse_global(&words[1..]) {
            Ok((opts, rest)) if opts.batch.is_none() => tc::run(net, &opts, &rest),
            Ok(_) => return None,
            Err(o) => o,
        }),
        Some("ip") => Some(ip::run(net, &words[1..])),
        _ => None,
    }
}

/// Run a case; `Err` describes the first mismatch.
/// `s` with every whole word `from` (Python's `\bfrom\b`) replaced by `to`.
fn sub_word(s: &str, from: &str, to: &str) -> String {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(from) {
        // The character before, in the text so far (a word stays a word).
        let before = rest[..i].chars().last().or(out.chars().last());
        let after = rest[i + from.len()..].chars().next();
        out.push_str(&rest[..i]);
        if before.is_some_and(word) || after.is_some_and(word) {
            out.push_str(from);
        } else {
            out.push_str(to);
        }
        rest = &rest[i + from.len()..];
    }
    out.push_str(rest);
    out
}

fn check(case: &Case) -> Result<(), String> {
    let mut net = setup(&case.setup);
    for c in &case.cmds {
        net.now += sluice_core::time::Duration(c.sleep_ns);
        let line = sub_word(&sub_word(&c.line, "DEV", "v0"), "PEER", "v1");
        let Some(mut got) = run_line(&mut net, &line) else {
            continue;
        };
        for text in [&mut got.stdout, &mut got.stderr] {
            *text = sub_word(&sub_word(text, "v0", "DEV"), "v1", "PEER");
        }
        if got.stdout != c.stdout || got.stderr != c.stderr || got.code != c.code {
            return Err(format!(
                "case {:?}: `{}`\n--- want (exit {}):\n{}{}--- got (exit {}):\n{}{}",
                case.name, c.line, c.code, c.stdout, c.stderr, got.code, got.stdout, got.stderr
            ));
        }
    }
    Ok(())
}

/// Cases that must match the kernel byte for byte, one `file: case name`
/// per line in tests/golden/passing.txt (grown as sluice learns more).
fn must_pass() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(golden_dir().join("passing.txt")).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            l.split_once(": ")
                .map(|(f, c)| (f.to_string(), c.to_string()))
        })
        .collect()
}

#[test]
fn golden_cases_match_the_kernel() {
    let must = must_pass();
    let mut failures = vec![];
    let mut newly = vec![];
    let mut passed = 0;
    let mut total = 0;
    let mut entries: Vec<_> = std::fs::read_dir(golden_dir())
        .expect("golden dir")
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("golden") {
            continue;
        }
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).expect("read golden");
        for case in parse(&text) {
            if case.unstable || case.uses_files {
                continue;
            }
            total += 1;
            let r = check(&case);
            match &r {
                Ok(()) => passed += 1,
                Err(msg) if std::env::var("GOLDEN_VERBOSE").is_ok_and(|v| file.starts_with(&v)) => {
                    eprintln!("{file}: {msg}")
                }
                Err(_) => {}
            }
            let listed = must.iter().any(|(f, c)| *f == file && *c == case.name);
            match (listed, r) {
                (true, Err(msg)) => failures.push(msg),
                (false, Ok(())) => newly.push(format!("{file}: {}", case.name)),
                _ => {}
            }
        }
    }
    eprintln!("golden: {passed} of {total} kernel-captured cases match byte for byte");
    if !newly.is_empty() {
        eprintln!(
            "newly matching (add to tests/golden/passing.txt):\n{}",
            newly.join("\n")
        );
    }
    assert!(
        !must.is_empty(),
        "tests/golden/passing.txt lists the cases sluice must match"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
