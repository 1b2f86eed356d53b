//! The kernel's tc-testing ("tdc") cases, run against sluice as tdc.py runs them.
//!
//! Every `*.json` under `../shared/conformance/tc-testing/{qdiscs,filters,actions}`
//! (relative to the workspace root) is loaded; each case runs in a fresh state
//! directory, with `tc` and `ip` links to the sluice binary first on PATH:
//! `$NAME` substitution as Python's `string.Template.safe_substitute` with
//! tdc_config.py's names, the nsPlugin's devices created before the case,
//! setup / cmdUnderTest / verifyCmd / teardown through `bash -c` with tdc's
//! rules for exit codes, and the verify output counted with Python `re.findall`
//! semantics (DOTALL | MULTILINE) by a small backtracking engine below, or
//! compared with `matchJSON` as tdc does.
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
    Json(Json),
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
            let json = match Json::parse(&text) {
                Ok(j) => j,
                Err(e) => {
                    problems.push(format!("IGNORING {rel}: not valid JSON: {e}"));
                    continue;
                }
            };
            let Json::Arr(items) = json else {
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

fn case_from_json(file: &str, j: &Json) -> Case {
    let mut malformed = None;
    let mut bad = |what: &str| {
        if malformed.is_none() {
            malformed = Some(what.to_string());
        }
    };
    let s = |k: &str| j.get(k).and_then(Json::as_str).map(str::to_string);
    let id = s("id").unwrap_or_default();
    let name = s("name").unwrap_or_default();
    let category = match j.get("category") {
        Some(Json::Arr(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect(),
        _ => vec![],
    };
    let plugins = match j.get("plugins").and_then(|p| p.get("requires")) {
        Some(Json::Str(s)) => vec![s.clone()],
        Some(Json::Arr(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(String::from))
            .collect(),
        _ => vec![],
    };
    let mut steps = |k: &str| -> Vec<Step> {
        let mut out = vec![];
        match j.get(k) {
            Some(Json::Arr(a)) => {
                for x in a {
                    match x {
                        Json::Str(c) => out.push(Step {
                            cmd: c.clone(),
                            codes: vec![0],
                        }),
                        Json::Arr(l) if !l.is_empty() => out.push(Step {
                            cmd: l[0].as_str().unwrap_or("").to_string(),
                            codes: l[1..].iter().filter_map(Json::as_int).collect(),
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
            Some(Json::Str(s)) => s.clone(),
            Some(Json::Num(n)) => n.clone(),
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
        Some(Json::Str(s)) => s.clone(),
        Some(Json::Num(n)) => n.clone(),
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
            Some(Json::Arr(a)) => a.iter().collect::<Vec<_>>(),
            Some(x) => vec![x],
            None => vec![],
        }
        .into_iter()
        .map(|e| {
            e.get("iface")
                .and_then(Json::as_str)
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
                let re = pyre::Regex::new(p).map_err(|e| format!("matchPattern {p:?}: {e}"))?;
                let n = re.findall_count(&out);
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

fn verify_json(out: &str, m: &Json) -> Result<(), String> {
    let o = Json::parse(out)
        .map_err(|_| "verify: cannot decode verify command's output. Is it JSON?".to_string())?;
    if std::mem::discriminant(&o) != std::mem::discriminant(m) {
        return Err(format!(
            "verify: output and matchJSON are not the same type: {} != {}",
            o.type_name(),
            m.type_name()
        ));
    }
    json_subset(&o, m, "").map_err(|e| format!("verify: {e}"))
}

/// Every key of `m` exists in `o` with an equal value; lists compare element
/// by element and `m` may be shorter.
fn json_subset(o: &Json, m: &Json, at: &str) -> Result<(), String> {
    match (o, m) {
        (Json::Arr(oa), Json::Arr(ma)) => {
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
        (Json::Obj(_), Json::Obj(mo)) => {
            for (k, mv) in mo {
                let Some(ov) = o.get(k) else {
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
fn py_eq(a: &Json, b: &Json) -> bool {
    let num = |j: &Json| match j {
        Json::Num(n) => n.parse::<f64>().ok(),
        Json::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    };
    match (a, b) {
        (Json::Str(x), Json::Str(y)) => x == y,
        (Json::Null, Json::Null) => true,
        (Json::Num(x), Json::Num(y)) if x == y => true,
        (Json::Arr(x), Json::Arr(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Json::Obj(_), Json::Obj(y)) => {
            let keys: BTreeSet<&String> = y.iter().map(|(k, _)| k).collect();
            let ka: BTreeSet<&String> = match a {
                Json::Obj(x) => x.iter().map(|(k, _)| k).collect(),
                _ => BTreeSet::new(),
            };
            ka == keys
                && keys
                    .iter()
                    .all(|k| py_eq(a.get(k).unwrap(), b.get(k).unwrap()))
        }
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

// ---------------------------------------------------------------------------
// A small JSON reader (the crate has no JSON dependency of its own)
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    /// The number as written.
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    /// Members in order; a repeated key keeps its last value (as Python's json).
    Obj(Vec<(String, Json)>),
}

impl std::fmt::Display for Json {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Json::Null => write!(f, "null"),
            Json::Bool(b) => write!(f, "{b}"),
            Json::Num(n) => write!(f, "{n}"),
            Json::Str(s) => write!(f, "{s:?}"),
            Json::Arr(a) => {
                write!(f, "[")?;
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{x}")?;
                }
                write!(f, "]")
            }
            Json::Obj(o) => {
                write!(f, "{{")?;
                for (i, (k, v)) in o.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{k:?}: {v}")?;
                }
                write!(f, "}}")
            }
        }
    }
}

impl Json {
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(o) => o.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    fn as_int(&self) -> Option<i64> {
        match self {
            Json::Num(n) => n.parse().ok(),
            _ => None,
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "NoneType",
            Json::Bool(_) => "bool",
            Json::Num(n) if n.contains(['.', 'e', 'E']) => "float",
            Json::Num(_) => "int",
            Json::Str(_) => "str",
            Json::Arr(_) => "list",
            Json::Obj(_) => "dict",
        }
    }

    fn parse(text: &str) -> Result<Json, String> {
        let mut p = JsonParser {
            s: text.as_bytes(),
            i: 0,
            depth: 0,
        };
        p.ws();
        let v = p.value()?;
        p.ws();
        if p.i != p.s.len() {
            return Err(format!("extra data at byte {}", p.i));
        }
        Ok(v)
    }
}

struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

impl JsonParser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn err<T>(&self, what: &str) -> Result<T, String> {
        Err(format!("{what} at byte {}", self.i))
    }

    fn eat(&mut self, lit: &str) -> bool {
        if self.s[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Result<Json, String> {
        self.depth += 1;
        if self.depth > 500 {
            return self.err("nesting too deep");
        }
        let v = match self.s.get(self.i) {
            None => self.err("unexpected end"),
            Some(b'{') => {
                self.i += 1;
                let mut members = vec![];
                self.ws();
                if self.eat("}") {
                    self.depth -= 1;
                    return Ok(Json::Obj(members));
                }
                loop {
                    self.ws();
                    if self.s.get(self.i) != Some(&b'"') {
                        return self.err("expected a key");
                    }
                    let k = self.string()?;
                    self.ws();
                    if !self.eat(":") {
                        return self.err("expected ':'");
                    }
                    self.ws();
                    let v = self.value()?;
                    members.push((k, v));
                    self.ws();
                    if self.eat(",") {
                        continue;
                    }
                    if self.eat("}") {
                        break;
                    }
                    return self.err("expected ',' or '}'");
                }
                Ok(Json::Obj(members))
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = vec![];
                self.ws();
                if self.eat("]") {
                    self.depth -= 1;
                    return Ok(Json::Arr(items));
                }
                loop {
                    self.ws();
                    items.push(self.value()?);
                    self.ws();
                    if self.eat(",") {
                        continue;
                    }
                    if self.eat("]") {
                        break;
                    }
                    return self.err("expected ',' or ']'");
                }
                Ok(Json::Arr(items))
            }
            Some(b'"') => self.string().map(Json::Str),
            Some(b't') if self.eat("true") => Ok(Json::Bool(true)),
            Some(b'f') if self.eat("false") => Ok(Json::Bool(false)),
            Some(b'n') if self.eat("null") => Ok(Json::Null),
            Some(b'N') if self.eat("NaN") => Ok(Json::Num("NaN".into())),
            Some(b'I') if self.eat("Infinity") => Ok(Json::Num("inf".into())),
            Some(b'-') if self.eat("-Infinity") => Ok(Json::Num("-inf".into())),
            Some(c) if *c == b'-' || c.is_ascii_digit() => {
                let st = self.i;
                if self.s[self.i] == b'-' {
                    self.i += 1;
                }
                let digits = |p: &mut Self| {
                    let s0 = p.i;
                    while p.i < p.s.len() && p.s[p.i].is_ascii_digit() {
                        p.i += 1;
                    }
                    p.i > s0
                };
                if !digits(self) {
                    return self.err("bad number");
                }
                if self.eat(".") && !digits(self) {
                    return self.err("bad number");
                }
                if self.i < self.s.len() && matches!(self.s[self.i], b'e' | b'E') {
                    self.i += 1;
                    if self.i < self.s.len() && matches!(self.s[self.i], b'+' | b'-') {
                        self.i += 1;
                    }
                    if !digits(self) {
                        return self.err("bad number");
                    }
                }
                Ok(Json::Num(
                    String::from_utf8_lossy(&self.s[st..self.i]).into_owned(),
                ))
            }
            Some(_) => self.err("unexpected character"),
        };
        self.depth -= 1;
        v
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok());
        match h {
            Some(v) => {
                self.i += 4;
                Ok(v)
            }
            None => self.err("bad \\u escape"),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.i += 1; // the opening quote
        let mut buf: Vec<u8> = vec![];
        loop {
            let Some(&c) = self.s.get(self.i) else {
                return self.err("unterminated string");
            };
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else {
                        return self.err("unterminated string");
                    };
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4()?;
                            let cp = if (0xD800..0xDC00).contains(&hi) && self.eat("\\u") {
                                let lo = self.hex4()?;
                                if (0xDC00..0xE000).contains(&lo) {
                                    0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                                } else {
                                    0xFFFD
                                }
                            } else {
                                hi
                            };
                            char::from_u32(cp).unwrap_or('\u{FFFD}')
                        }
                        _ => return self.err("bad escape"),
                    };
                    let mut tmp = [0u8; 4];
                    buf.extend_from_slice(ch.encode_utf8(&mut tmp).as_bytes());
                }
                c if c < 0x20 => return self.err("control character in string"),
                c => buf.push(c),
            }
        }
        String::from_utf8(buf).or_else(|_| self.err("invalid UTF-8"))
    }
}

// ---------------------------------------------------------------------------
// Python regular expressions, as `re.compile(p, re.DOTALL | re.MULTILINE)`
// ---------------------------------------------------------------------------

/// A backtracking matcher with Python `re` semantics for the syntax tdc
/// patterns use: literals and escapes, `.` (DOTALL), classes, `^`/`$`
/// (MULTILINE), `\A \Z \b \B`, groups (capturing, `(?:`, `(?P<n>`),
/// alternation, greedy and lazy `* + ? {n} {n,} {,m} {n,m}`, and lookaround.
/// Backreferences and inline flags are refused with an error. Leftmost-first
/// priority makes match ends, and so `findall`'s count of non-overlapping
/// matches, the same as Python's; a (pc, position) visited set keeps it linear.
mod pyre {
    #[derive(Debug, Clone)]
    enum Node {
        Empty,
        Char(char),
        Any,
        Class(Class),
        Assert(Assert),
        Concat(Vec<Node>),
        Alt(Vec<Node>),
        Repeat {
            node: Box<Node>,
            min: u32,
            max: Option<u32>,
            greedy: bool,
        },
        Look {
            node: Box<Node>,
            ahead: bool,
            negate: bool,
        },
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Assert {
        LineStart,
        LineEnd,
        TextStart,
        TextEnd,
        WordB,
        NotWordB,
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Cat {
        Digit,
        Word,
        Space,
    }

    #[derive(Debug, Clone, Default)]
    struct Class {
        negate: bool,
        ranges: Vec<(char, char)>,
        cats: Vec<(Cat, bool)>, // (category, negated)
    }

    fn is_word(c: char) -> bool {
        c == '_' || c.is_alphanumeric()
    }

    fn in_cat(cat: Cat, c: char) -> bool {
        match cat {
            Cat::Digit => c.is_ascii_digit() || (!c.is_ascii() && c.is_numeric()),
            Cat::Word => is_word(c),
            Cat::Space => c.is_whitespace() || ('\x1c'..='\x1f').contains(&c),
        }
    }

    impl Class {
        fn matches(&self, c: char) -> bool {
            let hit = self.ranges.iter().any(|&(a, b)| a <= c && c <= b)
                || self.cats.iter().any(|&(cat, neg)| in_cat(cat, c) != neg);
            hit != self.negate
        }
    }

    struct Parser {
        p: Vec<char>,
        i: usize,
        groups: usize,
    }

    type PResult<T> = Result<T, String>;

    impl Parser {
        fn peek(&self) -> Option<char> {
            self.p.get(self.i).copied()
        }

        fn err<T>(&self, msg: &str) -> PResult<T> {
            Err(format!("{msg} at position {}", self.i))
        }

        fn alt(&mut self) -> PResult<Node> {
            let mut alts = vec![self.concat()?];
            while self.peek() == Some('|') {
                self.i += 1;
                alts.push(self.concat()?);
            }
            Ok(if alts.len() == 1 {
                alts.pop().unwrap()
            } else {
                Node::Alt(alts)
            })
        }

        fn concat(&mut self) -> PResult<Node> {
            let mut items: Vec<Node> = vec![];
            while let Some(c) = self.peek() {
                if c == '|' || c == ')' {
                    break;
                }
                if let Some((min, max)) = self.quantifier()? {
                    let greedy = if self.peek() == Some('?') {
                        self.i += 1;
                        false
                    } else {
                        true
                    };
                    if matches!(self.peek(), Some('*' | '+')) || self.looks_like_brace_quant() {
                        return self.err("multiple repeat");
                    }
                    let Some(last) = items.pop() else {
                        return self.err("nothing to repeat");
                    };
                    match last {
                        Node::Assert(_) | Node::Empty => return self.err("nothing to repeat"),
                        Node::Repeat { .. } => return self.err("multiple repeat"),
                        _ => {}
                    }
                    items.push(Node::Repeat {
                        node: Box::new(last),
                        min,
                        max,
                        greedy,
                    });
                    continue;
                }
                items.push(self.atom()?);
            }
            Ok(Node::Concat(items))
        }

        fn looks_like_brace_quant(&self) -> bool {
            let mut j = self.i;
            if self.p.get(j) != Some(&'{') {
                return false;
            }
            j += 1;
            let s = j;
            while self.p.get(j).is_some_and(|c| c.is_ascii_digit()) {
                j += 1;
            }
            let lo = j > s;
            if self.p.get(j) == Some(&',') {
                j += 1;
                while self.p.get(j).is_some_and(|c| c.is_ascii_digit()) {
                    j += 1;
                }
                self.p.get(j) == Some(&'}')
            } else {
                lo && self.p.get(j) == Some(&'}')
            }
        }

        /// A quantifier at the current position, consumed; `{` that is not one stays.
        fn quantifier(&mut self) -> PResult<Option<(u32, Option<u32>)>> {
            match self.peek() {
                Some('*') => {
                    self.i += 1;
                    Ok(Some((0, None)))
                }
                Some('+') => {
                    self.i += 1;
                    Ok(Some((1, None)))
                }
                Some('?') => {
                    self.i += 1;
                    Ok(Some((0, Some(1))))
                }
                Some('{') => {
                    if !self.looks_like_brace_quant() {
                        return Ok(None);
                    }
                    self.i += 1;
                    let num = |p: &mut Parser| -> PResult<Option<u32>> {
                        let s = p.i;
                        while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                            p.i += 1;
                        }
                        if p.i == s {
                            return Ok(None);
                        }
                        let t: String = p.p[s..p.i].iter().collect();
                        t.parse::<u32>()
                            .ok()
                            .filter(|&v| v <= 10_000)
                            .map(Some)
                            .ok_or_else(|| format!("repeat count {t} too large"))
                    };
                    let lo = num(self)?;
                    let (min, max) = if self.peek() == Some(',') {
                        self.i += 1;
                        (lo.unwrap_or(0), num(self)?)
                    } else {
                        (lo.unwrap_or(0), lo)
                    };
                    self.i += 1; // '}'
                    if let Some(m) = max {
                        if m < min {
                            return self.err("min repeat greater than max repeat");
                        }
                    }
                    Ok(Some((min, max)))
                }
                _ => Ok(None),
            }
        }

        fn atom(&mut self) -> PResult<Node> {
            let c = self.peek().unwrap();
            self.i += 1;
            Ok(match c {
                '.' => Node::Any,
                '^' => Node::Assert(Assert::LineStart),
                '$' => Node::Assert(Assert::LineEnd),
                '[' => Node::Class(self.class()?),
                '\\' => self.escape(false)?.into_node(),
                '(' => self.group()?,
                c => Node::Char(c),
            })
        }

        fn group(&mut self) -> PResult<Node> {
            let mut look: Option<(bool, bool)> = None;
            if self.peek() == Some('?') {
                self.i += 1;
                match self.peek() {
                    Some(':') => self.i += 1,
                    Some('P') if self.p.get(self.i + 1) == Some(&'<') => {
                        self.i += 2;
                        while self.peek().is_some_and(|c| c != '>') {
                            self.i += 1;
                        }
                        if self.peek() != Some('>') {
                            return self.err("missing >, unterminated name");
                        }
                        self.i += 1;
                        self.groups += 1;
                    }
                    Some('=') => {
                        self.i += 1;
                        look = Some((true, false));
                    }
                    Some('!') => {
                        self.i += 1;
                        look = Some((true, true));
                    }
                    Some('<') if matches!(self.p.get(self.i + 1), Some('=' | '!')) => {
                        look = Some((false, self.p[self.i + 1] == '!'));
                        self.i += 2;
                    }
                    Some('#') => {
                        while self.peek().is_some_and(|c| c != ')') {
                            self.i += 1;
                        }
                        if self.peek() != Some(')') {
                            return self.err("missing ), unterminated comment");
                        }
                        self.i += 1;
                        return Ok(Node::Empty);
                    }
                    _ => {
                        return self.err("unsupported group syntax (inline flags or backreference)")
                    }
                }
            } else {
                self.groups += 1;
            }
            let inner = self.alt()?;
            if self.peek() != Some(')') {
                return self.err("missing ), unterminated subpattern");
            }
            self.i += 1;
            Ok(match look {
                Some((ahead, negate)) => {
                    if !ahead && width(&inner).is_none() {
                        return self.err("look-behind requires fixed-width pattern");
                    }
                    Node::Look {
                        node: Box::new(inner),
                        ahead,
                        negate,
                    }
                }
                None => inner,
            })
        }

        fn class(&mut self) -> PResult<Class> {
            let mut cl = Class::default();
            if self.peek() == Some('^') {
                self.i += 1;
                cl.negate = true;
            }
            let mut first = true;
            loop {
                let Some(c) = self.peek() else {
                    return self.err("unterminated character set");
                };
                if c == ']' && !first {
                    self.i += 1;
                    break;
                }
                first = false;
                self.i += 1;
                let lo = if c == '\\' {
                    match self.escape(true)? {
                        Esc::Char(ch) => ch,
                        Esc::Cat(cat, neg) => {
                            cl.cats.push((cat, neg));
                            continue;
                        }
                        Esc::Assert(_) => return self.err("bad escape in character set"),
                    }
                } else {
                    c
                };
                if self.peek() == Some('-') && self.p.get(self.i + 1).is_some_and(|&n| n != ']') {
                    self.i += 1;
                    let h = self.peek().unwrap();
                    self.i += 1;
                    let hi = if h == '\\' {
                        match self.escape(true)? {
                            Esc::Char(ch) => ch,
                            _ => return self.err("bad character range"),
                        }
                    } else {
                        h
                    };
                    if hi < lo {
                        return self.err("bad character range");
                    }
                    cl.ranges.push((lo, hi));
                } else {
                    cl.ranges.push((lo, lo));
                }
            }
            Ok(cl)
        }

        /// After a backslash.
        fn escape(&mut self, in_class: bool) -> PResult<Esc> {
            let Some(c) = self.peek() else {
                return self.err("bad escape (end of pattern)");
            };
            self.i += 1;
            let hex = |p: &mut Parser, n: usize| -> PResult<char> {
                let s: String =
                    p.p.get(p.i..p.i + n)
                        .map(|s| s.iter().collect())
                        .unwrap_or_default();
                if s.len() != n || !s.chars().all(|c| c.is_ascii_hexdigit()) {
                    return p.err("incomplete escape");
                }
                p.i += n;
                char::from_u32(u32::from_str_radix(&s, 16).unwrap())
                    .ok_or_else(|| "bad escape".to_string())
            };
            Ok(match c {
                'd' => Esc::Cat(Cat::Digit, false),
                'D' => Esc::Cat(Cat::Digit, true),
                'w' => Esc::Cat(Cat::Word, false),
                'W' => Esc::Cat(Cat::Word, true),
                's' => Esc::Cat(Cat::Space, false),
                'S' => Esc::Cat(Cat::Space, true),
                'n' => Esc::Char('\n'),
                't' => Esc::Char('\t'),
                'r' => Esc::Char('\r'),
                'f' => Esc::Char('\x0c'),
                'v' => Esc::Char('\x0b'),
                'a' => Esc::Char('\x07'),
                'b' if in_class => Esc::Char('\x08'),
                'b' => Esc::Assert(Assert::WordB),
                'B' if !in_class => Esc::Assert(Assert::NotWordB),
                'A' if !in_class => Esc::Assert(Assert::TextStart),
                'Z' if !in_class => Esc::Assert(Assert::TextEnd),
                'x' => Esc::Char(hex(self, 2)?),
                'u' => Esc::Char(hex(self, 4)?),
                'U' => Esc::Char(hex(self, 8)?),
                '0'..='7' if c == '0' || in_class => {
                    // Octal: up to three digits in all.
                    let mut v = c.to_digit(8).unwrap();
                    let mut n = 1;
                    while n < 3 && self.peek().is_some_and(|d| ('0'..='7').contains(&d)) {
                        v = v * 8 + self.peek().unwrap().to_digit(8).unwrap();
                        self.i += 1;
                        n += 1;
                    }
                    Esc::Char(char::from_u32(v).unwrap_or('\0'))
                }
                '1'..='9' => return self.err("backreferences are not supported"),
                c if c.is_ascii_alphanumeric() => return self.err(&format!("bad escape \\{c}")),
                c => Esc::Char(c),
            })
        }
    }

    enum Esc {
        Char(char),
        Cat(Cat, bool),
        Assert(Assert),
    }

    impl Esc {
        fn into_node(self) -> Node {
            match self {
                Esc::Char(c) => Node::Char(c),
                Esc::Cat(cat, neg) => Node::Class(Class {
                    negate: false,
                    ranges: vec![],
                    cats: vec![(cat, neg)],
                }),
                Esc::Assert(a) => Node::Assert(a),
            }
        }
    }

    /// The fixed width of a node in characters, if it has one.
    fn width(n: &Node) -> Option<usize> {
        match n {
            Node::Empty | Node::Assert(_) | Node::Look { .. } => Some(0),
            Node::Char(_) | Node::Any | Node::Class(_) => Some(1),
            Node::Concat(v) => v.iter().map(width).sum(),
            Node::Alt(v) => {
                let w = width(&v[0])?;
                v.iter().all(|x| width(x) == Some(w)).then_some(w)
            }
            Node::Repeat { node, min, max, .. } => {
                if Some(*min) == *max {
                    Some(width(node)? * *min as usize)
                } else {
                    None
                }
            }
        }
    }

    #[derive(Debug, Clone)]
    enum Inst {
        Char(char),
        Any,
        Class(Class),
        Assert(Assert),
        /// Try the first target, then the second.
        Split(usize, usize),
        Jmp(usize),
        /// Lookaround: sub-program, ahead?, negated?, width (behind).
        Look(usize, bool, bool, usize),
        Match,
    }

    struct Compiler {
        progs: Vec<Vec<Inst>>,
    }

    impl Compiler {
        fn emit(&mut self, prog: usize, n: &Node) {
            match n {
                Node::Empty => {}
                Node::Char(c) => self.progs[prog].push(Inst::Char(*c)),
                Node::Any => self.progs[prog].push(Inst::Any),
                Node::Class(c) => self.progs[prog].push(Inst::Class(c.clone())),
                Node::Assert(a) => self.progs[prog].push(Inst::Assert(*a)),
                Node::Concat(v) => v.iter().for_each(|x| self.emit(prog, x)),
                Node::Alt(v) => {
                    let mut jumps = vec![];
                    for (k, x) in v.iter().enumerate() {
                        if k + 1 < v.len() {
                            let split = self.progs[prog].len();
                            self.progs[prog].push(Inst::Split(split + 1, 0));
                            self.emit(prog, x);
                            jumps.push(self.progs[prog].len());
                            self.progs[prog].push(Inst::Jmp(0));
                            let next = self.progs[prog].len();
                            self.progs[prog][split] = Inst::Split(split + 1, next);
                        } else {
                            self.emit(prog, x);
                        }
                    }
                    let end = self.progs[prog].len();
                    for j in jumps {
                        self.progs[prog][j] = Inst::Jmp(end);
                    }
                }
                Node::Repeat {
                    node,
                    min,
                    max,
                    greedy,
                } => {
                    for _ in 0..*min {
                        self.emit(prog, node);
                    }
                    match max {
                        None => {
                            // L: split(body, out); body; jmp L
                            let l = self.progs[prog].len();
                            self.progs[prog].push(Inst::Split(0, 0));
                            self.emit(prog, node);
                            self.progs[prog].push(Inst::Jmp(l));
                            let out = self.progs[prog].len();
                            self.progs[prog][l] = if *greedy {
                                Inst::Split(l + 1, out)
                            } else {
                                Inst::Split(out, l + 1)
                            };
                        }
                        Some(mx) => {
                            // Nested optionals: (x(x(x)?)?)?
                            let mut splits = vec![];
                            for _ in *min..*mx {
                                splits.push(self.progs[prog].len());
                                self.progs[prog].push(Inst::Split(0, 0));
                                self.emit(prog, node);
                            }
                            let out = self.progs[prog].len();
                            for s in splits {
                                self.progs[prog][s] = if *greedy {
                                    Inst::Split(s + 1, out)
                                } else {
                                    Inst::Split(out, s + 1)
                                };
                            }
                        }
                    }
                }
                Node::Look {
                    node,
                    ahead,
                    negate,
                } => {
                    let sub = self.progs.len();
                    self.progs.push(vec![]);
                    self.emit(sub, node);
                    self.progs[sub].push(Inst::Match);
                    let w = width(node).unwrap_or(0);
                    self.progs[prog].push(Inst::Look(sub, *ahead, *negate, w));
                }
            }
        }
    }

    /// A compiled pattern.
    pub struct Regex {
        progs: Vec<Vec<Inst>>,
    }

    impl Regex {
        pub fn new(pattern: &str) -> Result<Regex, String> {
            let mut p = Parser {
                p: pattern.chars().collect(),
                i: 0,
                groups: 0,
            };
            let node = p.alt()?;
            if p.i < p.p.len() {
                return p.err("unbalanced parenthesis");
            }
            let mut c = Compiler {
                progs: vec![vec![]],
            };
            c.emit(0, &node);
            c.progs[0].push(Inst::Match);
            if c.progs.iter().map(Vec::len).sum::<usize>() > 200_000 {
                return Err("pattern too large".into());
            }
            Ok(Regex { progs: c.progs })
        }

        /// `len(re.findall(pattern, text))`.
        pub fn findall_count(&self, text: &str) -> usize {
            let t: Vec<char> = text.chars().collect();
            let mut m = Matcher {
                re: self,
                t: &t,
                visited: Visited::new(self.progs[0].len() * (t.len() + 1)),
            };
            // A pattern starting with a literal can only match where it occurs.
            let first = self.progs[0].first();
            let mut count = 0;
            let mut pos = 0;
            let mut must_advance = false;
            while pos <= t.len() {
                m.visited.clear();
                let mut found = None;
                for s in pos..=t.len() {
                    if let Some(Inst::Char(c)) = first {
                        if t.get(s) != Some(c) {
                            continue;
                        }
                    }
                    if let Some(e) = m.run_main(s, must_advance && s == pos) {
                        found = Some((s, e));
                        break;
                    }
                }
                let Some((s, e)) = found else { break };
                count += 1;
                must_advance = e == s;
                pos = e;
            }
            count
        }

        /// `re.search(pattern, text) is not None` (used by the unit tests).
        #[allow(dead_code)]
        pub fn is_match(&self, text: &str) -> bool {
            let t: Vec<char> = text.chars().collect();
            let mut m = Matcher {
                re: self,
                t: &t,
                visited: Visited::new(self.progs[0].len() * (t.len() + 1)),
            };
            (0..=t.len()).any(|s| m.run_main(s, false).is_some())
        }
    }

    struct Matcher<'a> {
        re: &'a Regex,
        t: &'a [char],
        visited: Visited,
    }

    /// The (instruction, position) cells already explored: a bitset cleared
    /// word by word (only the words touched), or a hash set for huge inputs.
    struct Visited {
        bits: Vec<u64>,
        touched: Vec<usize>,
        sparse: Option<std::collections::HashSet<usize>>,
    }

    impl Visited {
        fn new(cells: usize) -> Visited {
            if cells > 1 << 28 {
                Visited {
                    bits: vec![],
                    touched: vec![],
                    sparse: Some(Default::default()),
                }
            } else {
                Visited {
                    bits: vec![0; cells / 64 + 1],
                    touched: vec![],
                    sparse: None,
                }
            }
        }

        /// Marks `cell`; false if it was marked already.
        fn insert(&mut self, cell: usize) -> bool {
            if let Some(s) = &mut self.sparse {
                return s.insert(cell);
            }
            let (w, b) = (cell / 64, 1u64 << (cell % 64));
            if self.bits[w] & b != 0 {
                return false;
            }
            if self.bits[w] == 0 {
                self.touched.push(w);
            }
            self.bits[w] |= b;
            true
        }

        fn clear(&mut self) {
            if let Some(s) = &mut self.sparse {
                s.clear();
            }
            for w in self.touched.drain(..) {
                self.bits[w] = 0;
            }
        }
    }

    impl Matcher<'_> {
        fn assert(&self, a: Assert, pos: usize) -> bool {
            let t = self.t;
            let word_before = pos > 0 && is_word(t[pos - 1]);
            let word_after = pos < t.len() && is_word(t[pos]);
            match a {
                Assert::LineStart => pos == 0 || t[pos - 1] == '\n',
                Assert::LineEnd => pos == t.len() || t[pos] == '\n',
                Assert::TextStart => pos == 0,
                Assert::TextEnd => pos == t.len(),
                Assert::WordB => word_before != word_after,
                Assert::NotWordB => word_before == word_after,
            }
        }

        /// The main program anchored at `start`; the end of the first match in priority order.
        fn run_main(&mut self, start: usize, must_advance: bool) -> Option<usize> {
            let width = self.t.len() + 1;
            let mut stack: Vec<(usize, usize)> = vec![(0, start)];
            while let Some((mut pc, mut pos)) = stack.pop() {
                loop {
                    if !self.visited.insert(pc * width + pos) {
                        break;
                    }
                    match &self.re.progs[0][pc] {
                        Inst::Match => {
                            if must_advance && pos == start {
                                break;
                            }
                            return Some(pos);
                        }
                        inst => match self.step(inst, pc, pos, &mut stack) {
                            Some((p, q)) => {
                                pc = p;
                                pos = q;
                            }
                            None => break,
                        },
                    }
                }
            }
            None
        }

        /// One non-Match instruction: where execution continues, if it does.
        fn step(
            &self,
            inst: &Inst,
            pc: usize,
            pos: usize,
            stack: &mut Vec<(usize, usize)>,
        ) -> Option<(usize, usize)> {
            let t = self.t;
            match inst {
                Inst::Char(c) => (pos < t.len() && t[pos] == *c).then_some((pc + 1, pos + 1)),
                Inst::Any => (pos < t.len()).then_some((pc + 1, pos + 1)),
                Inst::Class(cl) => {
                    (pos < t.len() && cl.matches(t[pos])).then_some((pc + 1, pos + 1))
                }
                Inst::Assert(a) => self.assert(*a, pos).then_some((pc + 1, pos)),
                Inst::Split(a, b) => {
                    stack.push((*b, pos));
                    Some((*a, pos))
                }
                Inst::Jmp(a) => Some((*a, pos)),
                Inst::Look(sub, ahead, negate, w) => {
                    let hit = if *ahead {
                        self.run_sub(*sub, pos, None)
                    } else {
                        pos >= *w && self.run_sub(*sub, pos - w, Some(pos))
                    };
                    (hit != *negate).then_some((pc + 1, pos))
                }
                Inst::Match => unreachable!(),
            }
        }

        /// A lookaround's sub-program at `start` (ending exactly at `end` if given).
        fn run_sub(&self, sub: usize, start: usize, end: Option<usize>) -> bool {
            let prog = &self.re.progs[sub];
            let width = self.t.len() + 1;
            let mut visited = Visited::new(prog.len() * width);
            let mut stack = vec![(0usize, start)];
            while let Some((mut pc, mut pos)) = stack.pop() {
                loop {
                    if !visited.insert(pc * width + pos) {
                        break;
                    }
                    match &prog[pc] {
                        Inst::Match => {
                            if end.is_none_or(|e| e == pos) {
                                return true;
                            }
                            break;
                        }
                        inst => match self.step(inst, pc, pos, &mut stack) {
                            Some((p, q)) => {
                                pc = p;
                                pos = q;
                            }
                            None => break,
                        },
                    }
                }
            }
            false
        }
    }
}

// ---------------------------------------------------------------------------
// Unit tests of the pieces (expected values computed with CPython 3)
// ---------------------------------------------------------------------------

#[test]
fn pyre_counts_like_python_findall() {
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
        ("a{,2}", "aaaaa", 4),
        ("a{}", "a{}", 1),
        ("\\bfoo\\b", "foo foobar barfoo foo", 2),
        ("(?=ab)a", "abacab", 2),
        ("(?<=a)b", "abcb ab", 2),
        ("(?!a)\\w", "abc", 2),
        ("[]a]+", "]a]b", 1),
        ("[a-]+", "a-b", 1),
        ("\\(x\\)", "(x) (x)", 2),
        ("[ \\t]+", "a \t b", 1),
        ("(a*)*", "b", 2),
        ("", "abc", 4),
        (
            "handle 1: .* chain (0|1)",
            "handle 1: x chain 0\nhandle 1: y chain 1",
            1,
        ),
    ];
    for (p, t, n) in cases {
        let re = pyre::Regex::new(p).unwrap_or_else(|e| panic!("{p}: {e}"));
        assert_eq!(re.findall_count(t), *n, "findall({p:?}, {t:?})");
    }
    // Python compiles (?i)a; this engine refuses inline flags (no tdc pattern uses them).
    for bad in ["*a", "a**", "(a", "a)", "\\1", "(?i)a", "[a", "\\q"] {
        assert!(pyre::Regex::new(bad).is_err(), "{bad:?} should not compile");
    }
    assert!(pyre::Regex::new("a{2,1}").is_err());
    assert!(pyre::Regex::new("x").unwrap().is_match("axb"));
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
fn json_reader_and_subset() {
    let j = Json::parse(
        r#"[{"a": 1, "b": [1, 2, {"c": "x\u00e9"}], "a": 2, "d": null, "e": true, "f": -1.5e3}]"#,
    )
    .unwrap();
    let Json::Arr(items) = &j else { panic!() };
    assert_eq!(items[0].get("a"), Some(&Json::Num("2".into())));
    assert!(verify_json(
        r#"[{"a": 2, "b": [1, 2, {"c": "xé", "z": 0}], "k": 3}]"#,
        &Json::parse(r#"[{"a": 2.0, "b": [1]}]"#).unwrap()
    )
    .is_ok());
    assert!(verify_json(r#"[{"a": 2}]"#, &Json::parse(r#"[{"a": 3}]"#).unwrap()).is_err());
    assert!(verify_json(r#"[{"a": 2}]"#, &Json::parse(r#"[{"b": 2}]"#).unwrap()).is_err());
    assert!(verify_json(r#"{"a": 2}"#, &Json::parse(r#"[{"a": 2}]"#).unwrap()).is_err());
    assert!(verify_json("not json", &Json::parse("[]").unwrap()).is_err());
    assert!(Json::parse("[1,]").is_err());
    assert!(Json::parse("{\"a\" 1}").is_err());
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
