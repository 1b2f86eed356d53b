//! The kernel's tc-testing ("tdc") cases, run against sluice as tdc.py runs them.
//!
//! Every `*.json` under `../shared/conformance/tc-testing/{qdiscs,filters,actions}`
//! (relative to the workspace root) is loaded; each case runs in a fresh state
//! directory, with `tc` and `ip` links to the sluice binary first on PATH:
//! `$NAME` substitution as Python's `string.Template.safe_substitute` with
//! tdc_config.py's names, the nsPlugin's devices created before the case,
//! setup / cmdUnderTest / verifyCmd / teardown through `bash -c` with tdc's
//! rules for exit codes, and the verify output counted with Python `re.findall`
//! semantics (DOTALL | MULTILINE) with the `regex` crate, or compared with
//! `matchJSON` as tdc does.
//!
//! The test fails only when a case listed in `tests/conformance/passing.txt`
//! does not pass; cases that pass but are not listed are printed as "newly
//! passing" so the list can grow. `tests/conformance/unsupported.txt` names
//! cases that need something sluice deliberately does not do; they are not run.
//! See `tests/conformance/README.md`.
//!
//! Environment knobs: `CONFORMANCE_ONLY=word,word` runs only the cases whose
//! "file id" contains one of the words; `CONFORMANCE_VERBOSE=1` prints each
//! failing case's commands and outputs; `CONFORMANCE_THREADS=N` (default 2).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use regex::{Regex, RegexBuilder};
use serde_json::Value;

/// Seconds a command may run before it is killed and counted as exit 255 (tdc's TIMEOUT).
const TIMEOUT_SECS: u64 = 10;
/// Bytes of output after which a command is stopped as if it had timed out.
const MAX_OUTPUT: u64 = 32 << 20;
/// The subdirectories of tc-testing whose files are run.
const SUBDIRS: [&str; 3] = ["qdiscs", "filters", "actions"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tdc_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SLUICE_TDC_DIR") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/tc-testing")
}

// ---------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------

#[test]
fn tdc_conformance() {
    let dir = tdc_dir();
    // Without its cases the test would pass having checked nothing.
    assert!(
        dir.is_dir(),
        "conformance: the kernel's tc-testing cases are not at {} (the \
         shared/conformance/tc-testing folder beside the repository); set \
         SLUICE_TDC_DIR to the folder holding their qdiscs/, filters/ and actions/",
        dir.display()
    );
    let started = Instant::now();
    let conf_dir = repo_root().join("tests/conformance");
    let passing = read_list(&conf_dir.join("passing.txt"));
    let unsupported: HashMap<(String, String), String> =
        read_list(&conf_dir.join("unsupported.txt"))
            .into_iter()
            .map(|e| ((e.file, e.id), e.rest))
            .collect();

    let (files, load_problems) = load_cases(&dir);
    for p in &load_problems {
        println!("conformance: {p}");
    }
    let only: Vec<String> = std::env::var("CONFORMANCE_ONLY")
        .map(|s| {
            s.split(',')
                .map(|w| w.trim().to_string())
                .filter(|w| !w.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let selected = |c: &Case| {
        only.is_empty() || {
            let key = format!("{} {}", c.file, c.id);
            only.iter().any(|w| key.contains(w.as_str()))
        }
    };
    let cases: Vec<&Case> = files
        .iter()
        .flat_map(|(_, cs)| cs.iter())
        .filter(|c| selected(c))
        .collect();
    assert!(
        !cases.is_empty(),
        "conformance: no tc-testing case found under {}",
        dir.display()
    );

    let runner = Runner::new();
    let threads: usize = std::env::var("CONFORMANCE_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2)
        .clamp(1, 2);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; cases.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(case) = cases.get(i) else { break };
                let key = (case.file.clone(), case.id.clone());
                let why = unsupported.get(&key).map(String::as_str);
                let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    runner.run_case(case, why)
                }))
                .unwrap_or_else(|p| Outcome {
                    kind: Kind::Fail,
                    reason: format!(
                        "the runner panicked: {}",
                        p.downcast_ref::<String>()
                            .map(String::as_str)
                            .or_else(|| p.downcast_ref::<&str>().copied())
                            .unwrap_or("?")
                    ),
                    log: vec![],
                });
                results.lock().unwrap()[i] = Some(out);
            });
        }
    });
    drop(runner);
    let results: Vec<Outcome> = results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|o| o.expect("every case ran"))
        .collect();

    // Report, file by file in the order the files were loaded.
    let verbose = std::env::var_os("CONFORMANCE_VERBOSE").is_some();
    let by_key: HashMap<(&str, &str), &Outcome> = cases
        .iter()
        .zip(results.iter())
        .map(|(c, o)| ((c.file.as_str(), c.id.as_str()), o))
        .collect();
    let (mut tp, mut tf, mut ts, mut tu) = (0, 0, 0, 0);
    let mut skip_reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut newly = vec![];
    let listed: BTreeSet<(String, String)> = passing
        .iter()
        .map(|e| (e.file.clone(), e.id.clone()))
        .collect();
    for (file, cs) in &files {
        let cs: Vec<(&Case, &Outcome)> = cs
            .iter()
            .filter_map(|c| {
                by_key
                    .get(&(c.file.as_str(), c.id.as_str()))
                    .map(|o| (c, *o))
            })
            .collect();
        if cs.is_empty() {
            continue;
        }
        let p = cs.iter().filter(|(_, o)| o.kind == Kind::Pass).count();
        let f = cs.iter().filter(|(_, o)| o.kind == Kind::Fail).count();
        let s = cs.len() - p - f;
        println!("{file}: {p} passed, {f} failed, {s} skipped");
        for (c, o) in &cs {
            match o.kind {
                Kind::Pass => {
                    tp += 1;
                    if !listed.contains(&(c.file.clone(), c.id.clone())) {
                        newly.push(format!("{} {}  # {}", c.file, c.id, c.name));
                    }
                }
                Kind::Fail => {
                    tf += 1;
                    println!("  FAIL {} {}: {}", c.id, c.name, o.reason);
                    if verbose {
                        for l in &o.log {
                            println!("      {l}");
                        }
                    }
                }
                Kind::Skip => {
                    ts += 1;
                    *skip_reasons.entry(o.reason.clone()).or_default() += 1;
                }
                Kind::Unsupported => {
                    tu += 1;
                    println!("  unsupported {} {}: {}", c.id, c.name, o.reason);
                }
            }
        }
    }
    if !skip_reasons.is_empty() {
        let parts: Vec<String> = skip_reasons
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        println!("skipped: {}; unsupported: {tu}", parts.join(", "));
    }
    if !newly.is_empty() {
        println!("newly passing (add to tests/conformance/passing.txt):");
        for l in &newly {
            println!("{l}");
        }
    }
    // Listed cases that did not pass.
    let mut regressions = vec![];
    let mut seen_listed = BTreeSet::new();
    for e in &passing {
        if !seen_listed.insert((e.file.clone(), e.id.clone())) {
            continue;
        }
        let key = (e.file.as_str(), e.id.as_str());
        match by_key.get(&key) {
            Some(o) if o.kind == Kind::Pass => {}
            Some(o) => regressions.push(format!("{} {}: {}", e.file, e.id, o.reason)),
            None if only.is_empty() => regressions.push(format!(
                "{} {}: listed in passing.txt but no such case",
                e.file, e.id
            )),
            None => {}
        }
    }
    println!(
        "conformance: took {:.1}s with {threads} thread(s)",
        started.elapsed().as_secs_f64()
    );
    println!("conformance: {tp} passed, {tf} failed, {} skipped", ts + tu);
    assert!(
        regressions.is_empty(),
        "cases listed in tests/conformance/passing.txt no longer pass:\n{}",
        regressions.join("\n")
    );
}

/// One line of passing.txt or unsupported.txt: `FILE ID  rest`.
struct ListEntry {
    file: String,
    id: String,
    rest: String,
}

fn read_list(path: &Path) -> Vec<ListEntry> {
    let text = fs::read_to_string(path).unwrap_or_default();
    let mut out = vec![];
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let mut it = t.splitn(3, char::is_whitespace);
        let file = it.next().unwrap_or("").to_string();
        let id = it.next().unwrap_or("").trim().to_string();
        let rest = it.next().unwrap_or("").trim();
        let rest = rest.strip_prefix('#').unwrap_or(rest).trim().to_string();
        assert!(
            !id.is_empty(),
            "{}: malformed line {line:?} (want: FILE ID ...)",
            path.display()
        );
        out.push(ListEntry { file, id, rest });
    }
    out
}

// ---------------------------------------------------------------------------
// Test cases
// ---------------------------------------------------------------------------

/// A setup or teardown command and the exit codes it may end with.
#[derive(Debug, Clone)]
struct Step {
    cmd: String,
    codes: Vec<i64>,
}

#[derive(Debug, Clone)]
enum Matcher {
    Pattern(String),
    Json(Value),
    None,
}

#[derive(Debug, Clone)]
struct Case {
    file: String,
    id: String,
    name: String,
    category: Vec<String>,
    plugins: Vec<String>,
    skip: bool,
    depends_on: Option<String>,
    setup: Vec<Step>,
    cmd_under_test: String,
    exp_exit: String,
    verify_cmd: String,
    matcher: Matcher,
    /// The interfaces the scapy plugin sends its packets on (`"scapy"`:
    /// one entry or a list of them).
    scapy_ifaces: Vec<String>,
    match_count: String,
    teardown: Vec<Step>,
    /// Why tdc itself could not run this case (a malformed entry).
    malformed: Option<String>,
}

/// Loads every `SUBDIR/*.json`, files sorted by name within each subdirectory.
fn load_cases(dir: &Path) -> (Vec<(String, Vec<Case>)>, Vec<String>) {
    let mut files = vec![];
    let mut problems = vec![];
    for sub in SUBDIRS {
        let Ok(rd) = fs::read_dir(dir.join(sub)) else {
            continue;
        };
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        names.sort();
        for n in names {
            let rel = format!("{sub}/{n}");
            let text = match fs::read_to_string(dir.join(sub).join(&n)) {
                Ok(t) => t,
                Err(e) => {
                    problems.push(format!("IGNORING {rel}: {e}"));
                    continue;
                }
            };
            let json: Value = match serde_json::from_str(&text) {
                Ok(j) => j,
                Err(e) => {
                    problems.push(format!("IGNORING {rel}: not valid JSON: {e}"));
                    continue;
                }
            };
            let Value::Array(items) = json else {
                problems.push(format!("IGNORING {rel}: not a JSON array"));
                continue;
            };
            let cases: Vec<Case> = items.iter().map(|j| case_from_json(&rel, j)).collect();
            files.push((rel, cases));
        }
    }
    let mut ids: HashMap<&str, &str> = HashMap::new();
    for (file, cs) in &files {
        for c in cs {
            if let Some(prev) = ids.insert(c.id.as_str(), file.as_str()) {
                problems.push(format!(
                    "duplicate id {} in {prev} and {file} (tdc would refuse to run)",
                    c.id
                ));
            }
        }
    }
    (files, problems)
}

fn case_from_json(file: &str, j: &Value) -> Case {
    let mut malformed = None;
    let mut bad = |what: &str| {
        if malformed.is_none() {
            malformed = Some(what.to_string());
        }
    };
    let s = |k: &str| j.get(k).and_then(Value::as_str).map(str::to_string);
    let id = s("id").unwrap_or_default();
    let name = s("name").unwrap_or_default();
    let category = match j.get("category") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect(),
        _ => vec![],
    };
    let plugins = match j.get("plugins").and_then(|p| p.get("requires")) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect(),
        _ => vec![],
    };
    let mut steps = |k: &str| -> Vec<Step> {
        let mut out = vec![];
        match j.get(k) {
            Some(Value::Array(a)) => {
                for x in a {
                    match x {
                        Value::String(c) => out.push(Step {
                            cmd: c.clone(),
                            codes: vec![0],
                        }),
                        Value::Array(l) if !l.is_empty() => out.push(Step {
                            cmd: l[0].as_str().unwrap_or("").to_string(),
                            codes: l[1..].iter().filter_map(Value::as_i64).collect(),
                        }),
                        _ => bad(&format!("malformed {k} entry")),
                    }
                }
            }
            None => bad(&format!("no \"{k}\"")),
            _ => bad(&format!("\"{k}\" is not a list")),
        }
        out
    };
    let setup = steps("setup");
    let teardown = steps("teardown");
    let mut req = |k: &str| -> String {
        match j.get(k) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                bad(&format!("no \"{k}\""));
                String::new()
            }
        }
    };
    let cmd_under_test = req("cmdUnderTest");
    let exp_exit = req("expExitCode");
    let verify_cmd = req("verifyCmd");
    let matcher = if let Some(m) = j.get("matchJSON") {
        Matcher::Json(m.clone())
    } else if let Some(p) = j.get("matchPattern") {
        Matcher::Pattern(
            p.as_str()
                .map(String::from)
                .unwrap_or_else(|| p.to_string()),
        )
    } else {
        Matcher::None
    };
    let match_count = match j.get("matchCount") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    Case {
        file: file.to_string(),
        id,
        name,
        category,
        plugins,
        skip: s("skip").as_deref() == Some("yes"),
        depends_on: s("dependsOn"),
        setup,
        cmd_under_test,
        exp_exit,
        verify_cmd,
        matcher,
        scapy_ifaces: match j.get("scapy") {
            Some(Value::Array(a)) => a.iter().collect::<Vec<_>>(),
            Some(x) => vec![x],
            None => vec![],
        }
        .into_iter()
        .map(|e| {
            e.get("iface")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect(),
        match_count,
        teardown,
        malformed,
    }
}

/// Python's `int(str)` for the simple forms tdc files use.
fn py_int(s: &str) -> Option<i64> {
    let t = s.trim().replace('_', "");
    t.parse::<i64>().ok()
}

// ---------------------------------------------------------------------------
// Running a case
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pass,
    Fail,
    Skip,
    Unsupported,
}

#[derive(Debug, Clone)]
struct Outcome {
    kind: Kind,
    reason: String,
    /// Commands and outputs, for CONFORMANCE_VERBOSE.
    log: Vec<String>,
}

struct Runner {
    root: PathBuf,
    /// A private copy of the sluice binary, so a concurrent rebuild cannot change it mid-run.
    bin: PathBuf,
    path_env: String,
    serial: AtomicUsize,
}

/// What a command left behind.
struct Ran {
    code: i64,
    /// tdc's "procout": stdout, or stderr when the command failed and wrote to it.
    output: String,
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

impl Runner {
    fn new() -> Runner {
        let root = std::env::temp_dir().join(format!(
            "sluice-conformance-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        fs::create_dir_all(&root).expect("create the conformance temp dir");
        let bin = root.join("sluice");
        fs::copy(env!("CARGO_BIN_EXE_sluice"), &bin).expect("copy the sluice binary");
        let path_env = std::env::var("PATH").unwrap_or_else(|_| {
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()
        });
        Runner {
            root,
            bin,
            path_env,
            serial: AtomicUsize::new(0),
        }
    }

    fn run_case(&self, case: &Case, unsupported: Option<&str>) -> Outcome {
        let out = |kind, reason: String| Outcome {
            kind,
            reason,
            log: vec![],
        };
        if case.skip {
            return out(Kind::Skip, "\"skip\": \"yes\"".into());
        }
        if let Some(r) = unsupported {
            return out(Kind::Unsupported, r.to_string());
        }
        if let Some(m) = &case.malformed {
            return out(Kind::Fail, format!("malformed case: {m}"));
        }
        if let Some(why) = touches_host(case) {
            return out(Kind::Skip, why);
        }
        for p in &case.plugins {
            match p.as_str() {
                "nsPlugin" => {}
                // Packets sent on $DEV0 arrive at $DEV1's ingress (see
                // `CaseCtx::scapy`); any other interface needs injection.
                "scapyPlugin" if case.scapy_ifaces.iter().all(|i| i == "$DEV0") => {}
                "scapyPlugin" => return out(Kind::Skip, "scapy".into()),
                other => return out(Kind::Skip, format!("plugin {other}")),
            }
        }
        if case.category.iter().any(|c| c == "flower") {
            // tdc skips these unless a physical device is named with -d.
            return out(Kind::Skip, "needs DEV2 (flower)".into());
        }

        let n = self.serial.fetch_add(1, Ordering::SeqCst);
        let dir = self.root.join(format!("{n}-{}", case.id));
        let links = dir.join("bin");
        let work = dir.join("cwd");
        let state = dir.join("state");
        for d in [&links, &work, &state] {
            fs::create_dir_all(d).expect("create case dirs");
        }
        // The state directory must be private (sluice refuses one others can enter).
        fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("chmod state");
        for l in ["tc", "ip"] {
            std::os::unix::fs::symlink(&self.bin, links.join(l)).expect("symlink");
        }
        // tdc runs from the directory that holds its helper scripts
        // (`./scripts/taprio_wait_for_admin.sh`), when a copy has them.
        let scripts = tdc_dir().join("scripts");
        if scripts.is_dir() {
            std::os::unix::fs::symlink(&scripts, work.join("scripts")).expect("symlink");
        }
        let ctx = CaseCtx {
            runner: self,
            names: names_for(case),
            ns_plugin: case.plugins.iter().any(|p| p == "nsPlugin") || uses_devs_unplugged(case),
            links,
            work,
            state,
            log: Mutex::new(vec![]),
        };
        let (kind, reason) = ctx.run(case);
        let log = ctx.log.into_inner().unwrap();
        let _ = fs::remove_dir_all(&dir);
        Outcome { kind, reason, log }
    }
}

/// Commands that would act on the machine itself rather than on sluice's
/// state (netdevsim through /sys, modules): never run.
/// A case that names `$DEV0`/`$DEV1` without requiring the nsPlugin that
/// creates them. In this copy that is 41 cases of filters/fw.json, written
/// before the plugin existed; under tdc their setup fails on the missing
/// device. Upstream later added `"requires": "nsPlugin"` to exactly these
/// cases, so they run here as the fixed files run them: with its devices.
fn uses_devs_unplugged(case: &Case) -> bool {
    let all = case
        .setup
        .iter()
        .chain(&case.teardown)
        .map(|c| c.cmd.as_str())
        .chain([case.cmd_under_test.as_str(), case.verify_cmd.as_str()]);
    let mut named = false;
    for c in all {
        if c.contains("link add") {
            return false; // it makes its own devices
        }
        named |= c.contains("$DEV0") || c.contains("$DEV1");
    }
    named
}

fn touches_host(case: &Case) -> Option<String> {
    let mut cmds: Vec<&str> = vec![&case.cmd_under_test, &case.verify_cmd];
    cmds.extend(case.setup.iter().map(|s| s.cmd.as_str()));
    cmds.extend(case.teardown.iter().map(|s| s.cmd.as_str()));
    if let Some(d) = &case.depends_on {
        cmds.push(d);
    }
    for c in cmds {
        if netdevsim(c).is_some() {
            continue;
        }
        if c.contains("/sys/") || c.contains("/proc/sys") {
            return Some("writes to the host's /sys or /proc (netdevsim)".into());
        }
        if c.split_whitespace()
            .any(|w| w == "modprobe" || w == "rmmod")
        {
            return Some("loads kernel modules".into());
        }
    }
    None
}

/// A netdevsim request tdc's cases write to /sys, which the runner carries
/// out in sluice's state instead (see [`CaseCtx::exec`]).
#[derive(Debug, PartialEq)]
enum Netdevsim {
    /// `echo "ID [PORTS [QUEUES]]" > /sys/bus/netdevsim/new_device`: one
    /// port with QUEUES transmit (and receive) queues, default 1.
    New { queues: u32 },
    /// `echo "ID" > /sys/bus/netdevsim/del_device`.
    Del,
}

fn netdevsim(cmd: &str) -> Option<Netdevsim> {
    let (echo, file) = cmd.split_once('>')?;
    let words = echo.trim().strip_prefix("echo")?.trim().trim_matches('"');
    let nums: Vec<u32> = words
        .split_whitespace()
        .map(|w| w.parse().ok())
        .collect::<Option<_>>()?;
    match (file.trim(), nums.as_slice()) {
        ("/sys/bus/netdevsim/new_device", [_, rest @ ..])
            if rest.first().is_none_or(|&p| p == 1) =>
        {
            Some(Netdevsim::New {
                queues: rest.get(1).copied().unwrap_or(1),
            })
        }
        ("/sys/bus/netdevsim/del_device", [_]) => Some(Netdevsim::Del),
        _ => None,
    }
}

/// tdc_config.py's NAMES with run_one_test's per-case adjustments.
fn names_for(case: &Case) -> HashMap<&'static str, String> {
    // NS gets "-<random>" in tdc; derive it from the id so runs are reproducible.
    let mut h: u32 = 0x811c_9dc5;
    for b in case.id.bytes() {
        h = (h ^ b as u32).wrapping_mul(0x0100_0193);
    }
    let id = &case.id;
    HashMap::from([
        ("TC", "tc".to_string()),
        ("IP", "ip".to_string()),
        ("DEV0", format!("v0p0id{id}")),
        ("DEV1", format!("v0p1id{id}")),
        ("DEV2", String::new()),
        ("DUMMY", format!("dummy1id{id}")),
        ("ETH", "eth0".to_string()),
        ("BATCH_FILE", "./batch.txt".to_string()),
        ("BATCH_DIR", "tmp".to_string()),
        ("TIMEOUT", TIMEOUT_SECS.to_string()),
        ("NS", format!("tcut-{h}")),
        ("EBPFDIR", "./".to_string()),
        ("TESTID", id.clone()),
    ])
}

struct CaseCtx<'a> {
    runner: &'a Runner,
    names: HashMap<&'static str, String>,
    ns_plugin: bool,
    links: PathBuf,
    work: PathBuf,
    state: PathBuf,
    log: Mutex<Vec<String>>,
}

impl CaseCtx<'_> {
    fn run(&self, case: &Case) -> (Kind, String) {
        if let Some(d) = &case.depends_on {
            if let Some(r) = self.exec(d) {
                if r.code != 0 {
                    return (Kind::Skip, "dependsOn probe failed".into());
                }
            }
        }
        if self.ns_plugin {
            if let Err(e) = self.ns_create() {
                return (Kind::Fail, format!("nsPlugin device creation: {e}"));
            }
        }
        // A setup failure ends the case in tdc (no execute, no teardown).
        if let Err(e) = self.prepare(&case.setup) {
            return (Kind::Fail, format!("setup: {e}"));
        }
        let ran = self.exec(&case.cmd_under_test);
        if let Err(why) = self.scapy(case) {
            return (Kind::Skip, why);
        }
        let exit = ran.as_ref().map(|r| r.code);
        let result = match (exit, py_int(&case.exp_exit)) {
            (_, None) => Err(format!("expExitCode {:?} is not an integer", case.exp_exit)),
            (Some(c), Some(want)) if c == want => self.verify(case),
            (got, Some(want)) => {
                let out = ran.map(|r| r.output).unwrap_or_default();
                Err(format!(
                    "exit {}, expected {want}: {}",
                    got.map(|c| c.to_string()).unwrap_or("None".into()),
                    oneline(&out)
                ))
            }
        };
        let td = self.prepare(&case.teardown);
        match (result, td) {
            (Ok(()), Ok(())) => (Kind::Pass, String::new()),
            (Err(e), _) => (Kind::Fail, e),
            (Ok(()), Err(e)) => (Kind::Fail, format!("teardown: {e}")),
        }
    }

    fn verify(&self, case: &Case) -> Result<(), String> {
        let out = self
            .exec(&case.verify_cmd)
            .map(|r| r.output)
            .unwrap_or_default();
        let Some(count) = py_int(&case.match_count) else {
            return Err(format!(
                "matchCount {:?} is not an integer",
                case.match_count
            ));
        };
        if out.is_empty() {
            return if count != 0 {
                Err("verify: no output generated by verify command".into())
            } else {
                Ok(())
            };
        }
        match &case.matcher {
            Matcher::Json(m) => verify_json(&out, m),
            Matcher::Pattern(p) => {
                let re = compile_pattern(p).map_err(|e| format!("matchPattern {p:?}: {e}"))?;
                let n = findall_count(&re, &out);
                if n as i64 == count {
                    Ok(())
                } else {
                    Err(format!(
                        "verify: /{p}/ matched {n} time(s), expected {count}; output: {}",
                        oneline(&out)
                    ))
                }
            }
            Matcher::None => Err("must specify a match option: matchJSON or matchPattern".into()),
        }
    }

    /// The scapy plugin's step (after the command under test): its packets
    /// leave $DEV0 and arrive at $DEV1's ingress, where the kernel hands
    /// them to its ingress qdisc, if any, and then to a stack with no
    /// address for them. So with no ingress or clsact qdisc on $DEV1 they
    /// change nothing tc shows — the qdisc under test on $DEV1's egress
    /// never sees them — and nothing needs to be sent. With one, they would
    /// be counted there: the runner cannot inject them, and skips the case.
    fn scapy(&self, case: &Case) -> Result<(), String> {
        if case.scapy_ifaces.is_empty() {
            return Ok(());
        }
        let shown = self
            .exec("$TC qdisc show dev $DEV1")
            .map(|r| r.output)
            .unwrap_or_default();
        if shown.contains("qdisc ingress") || shown.contains("qdisc clsact") {
            return Err("scapy: packets would meet $DEV1's ingress qdisc".into());
        }
        self.log.lock().unwrap().push(
            "scapy: packets from $DEV0 reach $DEV1's ingress, where no qdisc is: \
             nothing tc shows changes"
                .into(),
        );
        Ok(())
    }

    /// tdc's prepare_env: each command must end with one of its codes.
    fn prepare(&self, steps: &[Step]) -> Result<(), String> {
        for s in steps {
            if s.cmd.is_empty() {
                continue;
            }
            if let Some(r) = self.exec(&s.cmd) {
                if !s.codes.contains(&r.code) {
                    return Err(format!(
                        "`{}` exited {} (expected {:?}): {}",
                        self.expand(&s.cmd),
                        r.code,
                        s.codes,
                        oneline(&r.output)
                    ));
                }
            }
        }
        Ok(())
    }

    /// What the nsPlugin does before a case, in sluice's state: the veth pair
    /// ($DEV1 with peer $DEV0) and $DUMMY, all up. (tdc moves $DEV1 and $DUMMY
    /// into the namespace the case's commands run in; sluice has one state per
    /// case, so they simply exist there.)
    fn ns_create(&self) -> Result<(), String> {
        let n = &self.names;
        let cmds: [Vec<&str>; 5] = [
            vec![
                "link", "add", &n["DEV1"], "type", "veth", "peer", "name", &n["DEV0"],
            ],
            vec!["link", "add", &n["DUMMY"], "type", "dummy"],
            vec!["link", "set", &n["DEV1"], "up"],
            vec!["link", "set", &n["DUMMY"], "up"],
            vec!["link", "set", &n["DEV0"], "up"],
        ];
        for args in cmds {
            let mut c = Command::new(self.links.join("ip"));
            c.args(&args);
            let r = self.spawn(c, &format!("ip {}", args.join(" ")));
            if r.code != 0 {
                return Err(format!(
                    "`ip {}` exited {}: {}",
                    args.join(" "),
                    r.code,
                    oneline(&r.output)
                ));
            }
        }
        Ok(())
    }

    /// `$NAME` substitution, then the nsPlugin's adjust_command (which splits
    /// the command on whitespace and joins it with single spaces).
    fn expand(&self, cmd: &str) -> String {
        let mut c = if cmd.contains('$') {
            safe_substitute(cmd, &self.names)
        } else {
            cmd.to_string()
        };
        if self.ns_plugin {
            c = c.split_whitespace().collect::<Vec<_>>().join(" ");
        }
        c
    }

    /// tdc's exec_cmd: None for a blank command.
    fn exec(&self, cmd: &str) -> Option<Ran> {
        if cmd.trim().is_empty() {
            return None;
        }
        let c = self.expand(cmd);
        // netdevsim: a queued Ethernet device $ETH (as netdevsim's port is,
        // with its queue count), rather than the host's /sys.
        let ip = match netdevsim(&c) {
            Some(Netdevsim::New { queues }) => Some(format!(
                "ip link add dev {} numtxqueues {queues} numrxqueues {queues} type ether",
                self.names["ETH"]
            )),
            Some(Netdevsim::Del) => Some(format!("ip link del dev {}", self.names["ETH"])),
            None => None,
        };
        let c = ip.unwrap_or(c);
        let mut command = Command::new("bash");
        command.arg("-c").arg(&c);
        Some(self.spawn(command, &c))
    }

    fn spawn(&self, mut command: Command, shown: &str) -> Ran {
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        let out_path = self.work.join(".stdout");
        let err_path = self.work.join(".stderr");
        let (Ok(out_f), Ok(err_f)) = (fs::File::create(&out_path), fs::File::create(&err_path))
        else {
            return Ran {
                code: 255,
                output: "cannot create output files".into(),
            };
        };
        command
            .env_clear()
            .env(
                "PATH",
                format!("{}:{}", self.links.display(), self.runner.path_env),
            )
            .env("SLUICE_STATE_DIR", &self.state)
            .current_dir(&self.work)
            .stdin(Stdio::null())
            .stdout(out_f)
            .stderr(err_f)
            .process_group(0);
        let mut child = match command.spawn() {
            Ok(c) => c,
            Err(e) => {
                return Ran {
                    code: 255,
                    output: format!("cannot run {shown}: {e}"),
                }
            }
        };
        let mut deadline = Instant::now() + Duration::from_secs(TIMEOUT_SECS);
        let mut nap = Duration::from_micros(200);
        let status = loop {
            match child.try_wait() {
                Ok(Some(st)) => break Some(st),
                Ok(None) => {}
                Err(_) => break None,
            }
            if Instant::now() >= deadline {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                let _ = child.kill();
                let _ = child.wait();
                let r = Ran {
                    code: 255,
                    output: format!("Command \"{shown}\" timed out\n"),
                };
                self.note(shown, &r);
                return r;
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(5));
            if nap >= Duration::from_millis(5) {
                // A command flooding its output is stopped like a hung one.
                let size = |p: &Path| fs::metadata(p).map(|m| m.len()).unwrap_or(0);
                if size(&out_path) + size(&err_path) > MAX_OUTPUT {
                    deadline = Instant::now();
                }
            }
        };
        let code = match status {
            Some(st) => st
                .code()
                .map(i64::from)
                .or_else(|| st.signal().map(|s| -i64::from(s)))
                .unwrap_or(255),
            None => 255,
        };
        let read = |p: &Path| {
            let mut b = vec![];
            let _ = fs::File::open(p).and_then(|mut f| f.read_to_end(&mut b));
            // Python's decode("utf-8", errors="ignore").
            String::from_utf8_lossy(&b).replace('\u{FFFD}', "")
        };
        let stdout = read(&out_path);
        let stderr = read(&err_path);
        let output = if code != 0 && !stderr.is_empty() {
            stderr
        } else {
            stdout
        };
        let r = Ran { code, output };
        self.note(shown, &r);
        r
    }

    fn note(&self, shown: &str, r: &Ran) {
        let mut log = self.log.lock().unwrap();
        log.push(format!("$ {shown}  -> {}", r.code));
        for l in r.output.lines().take(20) {
            log.push(format!("  | {l}"));
        }
    }
}

/// A message on one line, trimmed to a readable length.
fn oneline(s: &str) -> String {
    let t = s.trim().replace('\n', "\\n");
    if t.chars().count() > 240 {
        let cut: String = t.chars().take(240).collect();
        format!("{cut}...")
    } else {
        t
    }
}

/// Python `string.Template(cmd).safe_substitute(names)`: `$$` is `$`,
/// `$name` and `${name}` (name: `[_a-zA-Z][_a-zA-Z0-9]*`) are replaced when
/// known and left as written otherwise, and any other `$` stays.
fn safe_substitute(s: &str, names: &HashMap<&'static str, String>) -> String {
    let b: Vec<char> = s.chars().collect();
    let is_start = |c: char| c == '_' || c.is_ascii_alphabetic();
    let is_cont = |c: char| c == '_' || c.is_ascii_alphanumeric();
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != '$' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        if b.get(i + 1) == Some(&'$') {
            out.push('$');
            i += 2;
            continue;
        }
        if b.get(i + 1).is_some_and(|&c| is_start(c)) {
            let mut j = i + 1;
            while j < b.len() && is_cont(b[j]) {
                j += 1;
            }
            let name: String = b[i + 1..j].iter().collect();
            match names.get(name.as_str()) {
                Some(v) => out.push_str(v),
                None => out.extend(&b[i..j]),
            }
            i = j;
            continue;
        }
        if b.get(i + 1) == Some(&'{') && b.get(i + 2).is_some_and(|&c| is_start(c)) {
            let mut j = i + 2;
            while j < b.len() && is_cont(b[j]) {
                j += 1;
            }
            if b.get(j) == Some(&'}') {
                let name: String = b[i + 2..j].iter().collect();
                match names.get(name.as_str()) {
                    Some(v) => out.push_str(v),
                    None => out.extend(&b[i..=j]),
                }
                i = j + 1;
                continue;
            }
        }
        out.push('$');
        i += 1;
    }
    out
}

// ---------------------------------------------------------------------------
// matchJSON, as tdc.py's verify_by_json / find_in_json
// ---------------------------------------------------------------------------

fn verify_json(out: &str, m: &Value) -> Result<(), String> {
    let o: Value = serde_json::from_str(out)
        .map_err(|_| "verify: cannot decode verify command's output. Is it JSON?".to_string())?;
    if std::mem::discriminant(&o) != std::mem::discriminant(m) {
        return Err(format!(
            "verify: output and matchJSON are not the same type: {} != {}",
            py_type(&o),
            py_type(m)
        ));
    }
    json_subset(&o, m, "").map_err(|e| format!("verify: {e}"))
}

/// Every key of `m` exists in `o` with an equal value; lists compare element
/// by element and `m` may be shorter.
fn json_subset(o: &Value, m: &Value, at: &str) -> Result<(), String> {
    match (o, m) {
        (Value::Array(oa), Value::Array(ma)) => {
            if ma.len() > oa.len() {
                return Err(format!(
                    "{at}: matchJSON list has {} elements, output {}",
                    ma.len(),
                    oa.len()
                ));
            }
            for (i, (ov, mv)) in oa.iter().zip(ma).enumerate() {
                json_subset(ov, mv, &format!("{at}[{i}]"))?;
            }
            Ok(())
        }
        (Value::Object(oo), Value::Object(mo)) => {
            for (k, mv) in mo {
                let Some(ov) = oo.get(k) else {
                    return Err(format!("key not found in JSON output: {at}.{k}"));
                };
                json_subset(ov, mv, &format!("{at}.{k}"))?;
            }
            Ok(())
        }
        _ if py_eq(o, m) => Ok(()),
        _ => Err(format!("value doesn't match: {at}: {m} != {o}")),
    }
}

/// Python `==` on decoded JSON values (so `1 == 1.0 == True`).
fn py_eq(a: &Value, b: &Value) -> bool {
    let num = |v: &Value| match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    };
    match (a, b) {
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Null, Value::Null) => true,
        (Value::Number(x), Value::Number(y)) if x == y => true,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

/// The name of a decoded value's Python type, for messages.
fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

// ---------------------------------------------------------------------------
// matchPattern, as tdc.py's `re.findall` with `re.DOTALL | re.MULTILINE`
// ---------------------------------------------------------------------------

/// Compiles a matchPattern as Python's `re.compile(p, re.DOTALL | re.MULTILINE)`.
///
/// tdc patterns use ASCII literals and escapes, `.`, classes, `^ $`, groups,
/// alternation and greedy or lazy repetition, where the `regex` crate's
/// leftmost-first matching finds the same matches as Python's backtracking.
/// What only Python has (backreferences, lookaround) is refused with an
/// error, as are `\d \w \s \b`: the crate is built without its Unicode
/// tables, and no tdc pattern uses them (Python's versions also differ from
/// Unicode's at the edges, e.g. `\s` takes `\x1c`..`\x1f`). A refused pattern
/// fails its case with the error.
fn compile_pattern(p: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(p)
        .multi_line(true)
        .dot_matches_new_line(true)
        .build()
}

/// Python's `len(re.findall(re, text))`: non-overlapping matches, left to
/// right, each search starting where the last match ended. An empty match
/// may directly follow a non-empty one (the `regex` crate's `find_iter`
/// skips it, so this loop counts itself); after an empty match the next one
/// must not be empty at the same place. There Python backtracks into a
/// longer match at that place if the pattern has one (`|a` or `a*?` on
/// "a"); `regex` only reports the preferred, empty one, so this moves on a
/// character instead. That differs only for a pattern that prefers an empty
/// match to a longer one; no tdc pattern matches the empty string at all.
fn findall_count(re: &Regex, text: &str) -> usize {
    let (mut n, mut pos, mut after_empty) = (0, 0, false);
    while let Some(m) = re.find_at(text, pos) {
        if after_empty && m.is_empty() && m.start() == pos {
            let Some(c) = text[pos..].chars().next() else {
                break;
            };
            pos += c.len_utf8();
            after_empty = false;
            continue;
        }
        n += 1;
        after_empty = m.is_empty();
        pos = m.end();
    }
    n
}

// ---------------------------------------------------------------------------
// Unit tests of the pieces (expected values computed with CPython 3)
// ---------------------------------------------------------------------------

#[test]
fn patterns_count_like_python_findall() {
    let cases: &[(&str, &str, usize)] = &[
        (
            "qdisc bfifo 1: root.*limit [0-9]+b",
            "qdisc bfifo 1: root refcnt 2 limit 1000b\n",
            1,
        ),
        ("x*", "ab", 3),
        ("x*", "axb", 4),
        ("^", "a\n", 2),
        ("$", "a\nb\n", 3),
        ("^qdisc", "qdisc a\nqdisc b\n xqdisc", 2),
        ("a|ab", "abab", 2),
        ("(a|ab)(c|bcd)", "abcd", 1),
        ("a.*b", "a\nb a b", 1),
        ("a.*?b", "a\nb a b", 2),
        ("[^\\n]+", "ab\ncd\n", 2),
        ("[0-9]{3}", "12345678", 2),
        ("[]a]+", "]a]b", 1),
        ("[a-]+", "a-b", 1),
        ("\\(x\\)", "(x) (x)", 2),
        ("[ \\t]+", "a \t b", 1),
        ("(a*)*", "b", 2),
        ("", "abc", 4),
        ("", "é", 2),
        (
            "handle 1: .* chain (0|1)",
            "handle 1: x chain 0\nhandle 1: y chain 1",
            1,
        ),
    ];
    for (p, t, n) in cases {
        let re = compile_pattern(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert_eq!(findall_count(&re, t), *n, "findall({p:?}, {t:?})");
    }
    // Malformed, or only Python's (backreference, lookaround).
    for bad in ["*a", "(a", "a)", "[a", "\\q", "a{2,1}", "\\1", "(?=a)"] {
        assert!(compile_pattern(bad).is_err(), "{bad:?} should not compile");
    }
}

#[test]
fn template_safe_substitute_like_python() {
    let names = HashMap::from([("TC", "tc".to_string()), ("DEV1", "v0p1id1".to_string())]);
    let cases = [
        ("$TC qdisc show dev $DEV1", "tc qdisc show dev v0p1id1"),
        ("${TC} x${DEV1}y", "tc xv0p1id1y"),
        (
            "$$TC \\$i $i ${i} $ $1 ${ ${TC",
            "$TC \\$i $i ${i} $ $1 ${ ${TC",
        ),
        ("$TCX $TC_ $TC-", "$TCX $TC_ tc-"),
    ];
    for (input, want) in cases {
        assert_eq!(safe_substitute(input, &names), want, "{input}");
    }
}

#[test]
fn match_json_like_tdc() {
    let m = |s: &str| serde_json::from_str::<Value>(s).unwrap();
    // A repeated key keeps its last value, as in Python's json.
    assert_eq!(m(r#"{"a": 1, "a": 2}"#)["a"], 2);
    assert!(verify_json(
        r#"[{"a": 2, "b": [1, 2, {"c": "xé", "z": 0}], "k": 3}]"#,
        &m(r#"[{"a": 2.0, "b": [1, 2, {"c": "x\u00e9"}]}]"#)
    )
    .is_ok());
    assert!(verify_json(r#"[{"a": true}]"#, &m(r#"[{"a": 1}]"#)).is_ok());
    assert!(verify_json(r#"[{"a": 2}]"#, &m(r#"[{"a": 3}]"#)).is_err());
    assert!(verify_json(r#"[{"a": 2}]"#, &m(r#"[{"b": 2}]"#)).is_err());
    assert!(verify_json(r#"[{"a": 2}]"#, &m(r#"[{"a": 2}, {}]"#)).is_err());
    assert!(verify_json(r#"{"a": 2}"#, &m(r#"[{"a": 2}]"#)).is_err());
    assert!(verify_json("not json", &m("[]")).is_err());
}

#[test]
fn netdevsim_requests_are_recognised_and_nothing_else() {
    assert_eq!(
        netdevsim("echo \"1 1 8\" > /sys/bus/netdevsim/new_device"),
        Some(Netdevsim::New { queues: 8 })
    );
    assert_eq!(
        netdevsim("echo \"1 1\" > /sys/bus/netdevsim/new_device"),
        Some(Netdevsim::New { queues: 1 })
    );
    assert_eq!(
        netdevsim("echo \"1\" > /sys/bus/netdevsim/del_device"),
        Some(Netdevsim::Del)
    );
    // Two ports would be two devices; other files are not netdevsim's.
    for other in [
        "echo \"1 2 4\" > /sys/bus/netdevsim/new_device",
        "echo 1 > /proc/sys/net/core/bpf_jit_enable",
        "echo \"x\" > /sys/bus/netdevsim/del_device",
        "$TC qdisc show dev $ETH",
    ] {
        assert_eq!(netdevsim(other), None, "{other}");
    }
}
