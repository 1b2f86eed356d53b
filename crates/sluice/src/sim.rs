//! `sluice sim`: run a scenario (a bundled one by name, or a TOML file) and
//! print the result table, JSON or CSV; optionally write plots, and show a
//! progress bar on stderr while a long variant runs.

use clap::Parser;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sluice_core::time::Time;
use sluice_sim::bundled;
use sluice_sim::report::{check, table, RunResult};
use sluice_sim::run::{run_all_observed, ScriptRunner};
use sluice_sim::scenario::Scenario;
use sluice_tc::net::Net;
use sluice_tc::state::{replay, write_log, Session};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `sluice sim` options.
#[derive(Parser, Debug)]
#[command(name = "sluice sim", about = "Run a network scenario in virtual time")]
pub struct SimArgs {
    /// A bundled scenario's name (see --list) or a scenario file.
    pub scenario: Option<String>,
    /// List the bundled scenarios.
    #[arg(long)]
    pub list: bool,
    /// Override a variable: --set key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Run only this variant.
    #[arg(long)]
    pub variant: Option<String>,
    /// The seed every random choice derives from (default: the scenario's `seed`).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print JSON instead of the table.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV instead of the table.
    #[arg(long)]
    pub csv: bool,
    /// Print every device's `tc -s qdisc show` / `class show` at the end.
    #[arg(long)]
    pub tc_stats: bool,
    /// Check the scenario's expectations; exit 1 if one fails.
    #[arg(long)]
    pub check: bool,
    /// Write SVG and PNG plots of each variant's RTT, per-flow throughput,
    /// page-load times, and each time-varying link's capacity (beside the
    /// goodput of the flows it limits) and queueing delay over time into
    /// this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Run the scenario for real instead: every node a network namespace,
    /// every link a live wire, the workloads real programs (iperf3, ping)
    /// over the kernel's TCP, in real time. Needs root.
    #[arg(long, conflicts_with = "compare")]
    pub live: bool,
    /// Run the scenario simulated and live, and print each figure of both
    /// side by side with their difference; exit 1 if one is beyond its
    /// tolerance.
    #[arg(long)]
    pub compare: bool,
    /// --compare: largest relative difference of a goodput, percent.
    #[arg(long, value_name = "PCT", default_value_t = 5.0)]
    pub tolerance_goodput: f64,
    /// --compare: largest relative difference of a median RTT, percent.
    #[arg(long, value_name = "PCT", default_value_t = 10.0)]
    pub tolerance_rtt: f64,
    /// --compare: largest difference of a flow's share, percentage points.
    #[arg(long, value_name = "POINTS", default_value_t = 5.0)]
    pub tolerance_share: f64,
}

/// Runs node scripts with bash, this binary's `tc`/`ip`/`iptables` links first on PATH,
/// against a state directory holding the node's namespace (or, live, the
/// node's link daemons: [`crate::live_node`]).
pub(crate) struct BashRunner {
    exe: PathBuf,
    base_dir: Option<PathBuf>,
}

impl BashRunner {
    fn script_text(&self, script: &str) -> Result<String, String> {
        if script.contains('\n') {
            return Ok(script.to_string());
        }
        if let Some(text) = bundled::file(script) {
            return Ok(text.to_string());
        }
        let path = match &self.base_dir {
            Some(d) if !std::path::Path::new(script).is_absolute() => d.join(script),
            _ => PathBuf::from(script),
        };
        std::fs::read_to_string(&path).map_err(|e| format!("script {}: {e}", path.display()))
    }

    /// Run `script` for `node` with bash, this binary's tools first on
    /// PATH and the variables `env`, in the temporary directory `tmp`.
    fn bash(
        &self,
        tmp: &std::path::Path,
        node: &str,
        script: &str,
        env: &[(&str, String)],
    ) -> Result<(), String> {
        let text = self.script_text(script)?;
        let links = tmp.join("bin");
        let io = |e: std::io::Error| format!("node {node}: {e}");
        std::fs::create_dir_all(&links).map_err(io)?;
        for tool in ["tc", "ip", "iptables"] {
            std::os::unix::fs::symlink(&self.exe, links.join(tool)).map_err(io)?;
        }
        let script_path = tmp.join("script.sh");
        std::fs::write(&script_path, text).map_err(io)?;
        let path = format!(
            "{}:{}",
            links.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = std::process::Command::new("bash")
            .arg(&script_path)
            .env("PATH", path)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("node {node}: bash: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "node {node}: script {script} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// Run `script` for `node` of a live run, whose devices are
    /// `$SLUICE_LIVE_NODE`'s `devices` ([`crate::live_node`]).
    pub(crate) fn run_live(&self, node: &str, script: &str, devices: String) -> Result<(), String> {
        let tmp = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
        self.bash(
            tmp.path(),
            node,
            script,
            &[(crate::live_node::ENV, devices)],
        )
    }
}

impl ScriptRunner for BashRunner {
    fn run_script(
        &self,
        node: &str,
        setup: &[Vec<String>],
        script: &str,
        seed: u64,
    ) -> Result<Net, String> {
        let tmp = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
        let state = tmp.path().join("state");
        let io = |e: std::io::Error| format!("node {node}: {e}");
        write_log(&state, node, setup).map_err(io)?;
        self.bash(
            tmp.path(),
            node,
            script,
            &[
                ("SLUICE_STATE_DIR", state.to_string_lossy().into_owned()),
                ("SLUICE_NETNS", node.to_string()),
                ("SLUICE_SEED", seed.to_string()),
            ],
        )?;
        std::env::set_var("SLUICE_SEED", seed.to_string());
        let session = Session::open(&state, Some(node), replay, None).map_err(io)?;
        std::env::remove_var("SLUICE_SEED");
        Ok(session.into_net())
    }
}

/// A scenario by bundled name or file (relative to `base` if given): a
/// file's traces and schedules are read next to it.
pub(crate) fn load_scenario(
    name: &str,
    base: Option<&std::path::Path>,
) -> Result<Scenario, String> {
    let bundled = bundled::scenario(name).is_some();
    let path = match base {
        Some(b) if !bundled && std::path::Path::new(name).is_relative() => {
            b.join(name).to_string_lossy().into_owned()
        }
        _ => name.to_string(),
    };
    let (label, text) = load(&path)?;
    let mut sc = Scenario::parse(&text).map_err(|e| format!("{label}: {e}"))?;
    if !bundled {
        sc.dir = std::path::Path::new(&label)
            .parent()
            .map(|p| p.to_path_buf());
    }
    Ok(sc)
}

/// The runner of node scripts for scenarios read from `base_dir`.
pub(crate) fn script_runner(base_dir: Option<&std::path::Path>) -> BashRunner {
    BashRunner {
        exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("sluice")),
        base_dir: base_dir.map(|p| p.to_path_buf()),
    }
}

/// A bar counting `len` things on stderr, hidden unless it is a terminal.
pub(crate) fn progress_bar(len: u64, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(&format!(
        "[{{bar:40}}] {{pos}}/{{len}} {what} (eta {{eta}})"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    b.set_style(style);
    b
}

fn load(name: &str) -> Result<(String, String), String> {
    if let Some(text) = bundled::scenario(name) {
        return Ok((name.to_string(), text.to_string()));
    }
    std::fs::read_to_string(name)
        .map(|t| (name.to_string(), t))
        .map_err(|e| format!("{name}: not a bundled scenario (see --list) and not readable: {e}"))
}

fn csv(runs: &[RunResult]) -> String {
    let mut out = String::from("variant,kind,name,metric,value\n");
    for r in runs {
        for p in &r.pings {
            for (m, v) in [
                ("min_ms", p.min_ms),
                ("avg_ms", p.avg_ms),
                ("median_ms", p.median_ms),
                ("max_ms", p.max_ms),
                ("loss_pct", p.loss_pct),
            ] {
                out.push_str(&format!("{},ping,{},{m},{v:.6}\n", r.variant, p.name));
            }
        }
        for f in &r.flows {
            out.push_str(&format!(
                "{},{},{},goodput_mbps,{:.6}\n",
                r.variant, f.kind, f.name, f.goodput_mbps
            ));
            out.push_str(&format!(
                "{},{},{},share,{:.6}\n",
                r.variant, f.kind, f.name, f.share
            ));
        }
        for f in &r.flows {
            for (m, v) in [
                ("capacity_pct", f.capacity_pct),
                ("over_capacity_pkts", f.over_capacity_pkts),
            ] {
                if let Some(v) = v {
                    out.push_str(&format!("{},{},{},{m},{v:.6}\n", r.variant, f.kind, f.name));
                }
            }
        }
        for l in &r.links {
            for (m, v) in [
                ("capacity_mbps", Some(l.capacity_mbps)),
                ("queue_delay_ms", l.queue_delay_ms),
                ("queue_delay_max_ms", l.queue_delay_max_ms),
            ] {
                if let Some(v) = v {
                    out.push_str(&format!("{},link,{},{m},{v:.6}\n", r.variant, l.name));
                }
            }
        }
        for w in &r.webs {
            for (m, v) in [
                ("load_ms", w.load_ms),
                ("min_ms", w.min_ms),
                ("max_ms", w.max_ms),
                ("loads", w.loads as f64),
            ] {
                out.push_str(&format!("{},web,{},{m},{v:.6}\n", r.variant, w.name));
            }
        }
    }
    out
}

/// One progress bar per variant on stderr, driven by simulated time. It
/// appears only when stderr is a terminal and the variant has been running
/// for [`BAR_AFTER`] of wall time, and is cleared when the variant ends, so
/// short runs and redirected output show nothing.
struct ProgressBars {
    enabled: bool,
    /// The variant running, when it started, and its bar once shown.
    current: Option<(String, Instant, Option<ProgressBar>)>,
}

/// Wall time before a variant's bar appears.
const BAR_AFTER: Duration = Duration::from_secs(1);

impl ProgressBars {
    fn new(enabled: bool) -> Self {
        ProgressBars {
            enabled,
            current: None,
        }
    }

    fn update(&mut self, variant: &str, now: Time, end: Time) {
        if !self.enabled {
            return;
        }
        if self.current.as_ref().is_none_or(|c| c.0 != variant) {
            self.finish();
            self.current = Some((variant.to_string(), Instant::now(), None));
        }
        let Some((_, started, bar)) = &mut self.current else {
            return;
        };
        let ms = |t: Time| t.0 / 1_000_000;
        if bar.is_none() && started.elapsed() >= BAR_AFTER && now < end {
            let b = ProgressBar::with_draw_target(Some(ms(end)), ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template("{prefix:>14} [{bar:40}] {msg} (eta {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            b.set_style(style);
            b.set_prefix(variant.to_string());
            *bar = Some(b);
        }
        if let Some(b) = bar {
            b.set_position(ms(now));
            b.set_message(format!(
                "{:.1}/{:.1} s simulated",
                now.0 as f64 / 1e9,
                end.0 as f64 / 1e9
            ));
        }
        if now >= end {
            self.finish();
        }
    }

    fn finish(&mut self) {
        if let Some((_, _, Some(bar))) = self.current.take() {
            bar.finish_and_clear();
        }
    }
}

/// Run `sluice sim`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let a = match SimArgs::try_parse_from(
        std::iter::once("sluice sim".to_string()).chain(args.iter().cloned()),
    ) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    if a.list {
        let width = bundled::names().map(str::len).max().unwrap_or(0);
        for n in bundled::names() {
            let desc = bundled::scenario(n)
                .and_then(|text| Scenario::parse(text).ok())
                .map(|s| s.description)
                .unwrap_or_default();
            println!("{n:<width$}  {}", desc.lines().next().unwrap_or(""));
        }
        return 0;
    }
    let Some(name) = &a.scenario else {
        eprintln!("sluice sim: name a scenario (bundled: see --list) or a file");
        return 2;
    };
    let label = name.as_str();
    let mut sc = match load_scenario(name, None) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice sim: {e}");
            return 1;
        }
    };
    if let Some(seed) = a.seed {
        sc.seed = seed;
    }
    let mut overrides = BTreeMap::new();
    for s in &a.set {
        let Some((k, v)) = s.split_once('=') else {
            eprintln!("sluice sim: --set {s}: expected key=value");
            return 2;
        };
        if overrides.insert(k.to_string(), v.to_string()).is_some() {
            eprintln!("sluice sim: --set {k}: given twice");
            return 2;
        }
    }
    // A misspelt variable or variant would otherwise change nothing, silently.
    if let Err(e) = sc.check_overrides(&overrides) {
        eprintln!("sluice sim: {label}: {e}");
        return 2;
    }
    if let Some(v) = &a.variant {
        if !sc.variants.iter().any(|x| x.name == *v) {
            eprintln!("sluice sim: {label}: --variant {v}: no such variant (see the scenario's [[variant]] tables)");
            return 2;
        }
    }
    let runner = script_runner(std::path::Path::new(name).parent());
    let live =
        || crate::sim_live::run_all(&sc, &overrides, a.variant.as_deref(), &runner, a.tc_stats);
    let simulated = || {
        let mut bars = ProgressBars::new(std::io::stderr().is_terminal());
        let runs = run_all_observed(
            &sc,
            &overrides,
            a.variant.as_deref(),
            a.tc_stats,
            Some(&runner),
            &mut |variant, now, end| bars.update(variant, now, end),
            &mut |variant, warning| {
                eprintln!("sluice sim: {label}: variant {variant}: warning: {warning}")
            },
        );
        bars.finish();
        runs
    };
    let runs = if a.compare {
        match simulated().and_then(|s| live().map(|l| (s, l))) {
            Ok((s, l)) => {
                let tol = crate::sim_live::Tolerances {
                    goodput_pct: a.tolerance_goodput,
                    rtt_pct: a.tolerance_rtt,
                    share_points: a.tolerance_share,
                };
                let (text, ok) = crate::sim_live::compare(&s, &l, &tol);
                print!("{text}");
                return if ok { 0 } else { 1 };
            }
            Err(e) => Err(e),
        }
    } else if a.live {
        live()
    } else {
        simulated()
    };
    let runs = match runs {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice sim: {label}: {e}");
            return 1;
        }
    };
    if a.json {
        let doc = serde_json::json!({ "scenario": sc.name, "seed": sc.seed, "runs": runs });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    } else if a.csv {
        print!("{}", csv(&runs));
    } else {
        print!(
            "{}",
            table(
                &format!(
                    "{} — {}",
                    sc.name,
                    sc.description.lines().next().unwrap_or("")
                ),
                &runs
            )
        );
        for r in &runs {
            if let Some(t) = &r.tc_stats {
                print!("\n[{}] tc statistics\n{t}", r.variant);
            }
        }
    }
    if let Some(dir) = &a.plot {
        match sluice_sim::plot::write_plots(dir, &sc.name, &runs) {
            Ok(files) => eprintln!(
                "sluice sim: {} plot files in {}",
                files.len(),
                dir.display()
            ),
            Err(e) => {
                eprintln!("sluice sim: --plot: {e}");
                return 1;
            }
        }
    }
    if a.check {
        let (lines, ok) = check(&sc.expects, &runs);
        for l in lines {
            eprintln!("{l}");
        }
        if !ok {
            return 1;
        }
    }
    0
}
