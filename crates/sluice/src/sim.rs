//! `sluice sim`: run a scenario (a bundled one by name, or a TOML file) and
//! print the result table, JSON or CSV.

use clap::Parser;
use sluice_sim::report::{check, table, RunResult};
use sluice_sim::run::{run_all, ScriptRunner};
use sluice_tc::net::Net;
use sluice_tc::state::{replay, write_log, Session};
use sluice_sim::scenario::Scenario;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The scenarios shipped in `examples/`, by name.
pub const BUNDLED: &[(&str, &str)] = &[
    ("dumbbell", include_str!("../../../examples/dumbbell.toml")),
    ("seed002", include_str!("../../../examples/seed002-cable-upload.toml")),
    ("seed003", include_str!("../../../examples/seed003-conditioner.toml")),
    ("seed004", include_str!("../../../examples/seed004-lan-bufferbloat.toml")),
];

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
    /// Print JSON instead of the table.
    #[arg(long)]
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
    /// Write plots here (not yet available).
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// Files bundled scenarios refer to (their scripts), by name.
pub const BUNDLED_FILES: &[(&str, &str)] = &[("seed003-htb.sh", include_str!("../../../examples/seed003-htb.sh"))];

/// Runs node scripts with bash, this binary's `tc`/`ip` links first on PATH,
/// against a state directory holding the node's namespace.
struct BashRunner {
    exe: PathBuf,
    base_dir: Option<PathBuf>,
}

impl BashRunner {
    fn script_text(&self, script: &str) -> Result<String, String> {
        if script.contains('\n') {
            return Ok(script.to_string());
        }
        if let Some((_, text)) = BUNDLED_FILES.iter().find(|(n, _)| *n == script) {
            return Ok(text.to_string());
        }
        let path = match &self.base_dir {
            Some(d) if !std::path::Path::new(script).is_absolute() => d.join(script),
            _ => PathBuf::from(script),
        };
        std::fs::read_to_string(&path).map_err(|e| format!("script {}: {e}", path.display()))
    }
}

impl ScriptRunner for BashRunner {
    fn run_script(&self, node: &str, setup: &[Vec<String>], script: &str, seed: u64) -> Result<Net, String> {
        let text = self.script_text(script)?;
        let tmp = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
        let (links, state) = (tmp.path().join("bin"), tmp.path().join("state"));
        let io = |e: std::io::Error| format!("node {node}: {e}");
        std::fs::create_dir_all(&links).map_err(io)?;
        for tool in ["tc", "ip"] {
            std::os::unix::fs::symlink(&self.exe, links.join(tool)).map_err(io)?;
        }
        write_log(&state, node, setup).map_err(io)?;
        let script_path = tmp.path().join("script.sh");
        std::fs::write(&script_path, text).map_err(io)?;
        let path = format!("{}:{}", links.display(), std::env::var("PATH").unwrap_or_default());
        let out = std::process::Command::new("bash")
            .arg(&script_path)
            .env("PATH", path)
            .env("SLUICE_STATE_DIR", &state)
            .env("SLUICE_NETNS", node)
            .env("SLUICE_SEED", seed.to_string())
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
        std::env::set_var("SLUICE_SEED", seed.to_string());
        let session = Session::open(&state, Some(node), replay).map_err(io)?;
        std::env::remove_var("SLUICE_SEED");
        Ok(session.into_net())
    }
}

fn load(name: &str) -> Result<(String, String), String> {
    if let Some((n, text)) = BUNDLED.iter().find(|(n, _)| *n == name) {
        return Ok((n.to_string(), text.to_string()));
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
            out.push_str(&format!("{},{},{},goodput_mbps,{:.6}\n", r.variant, f.kind, f.name, f.goodput_mbps));
            out.push_str(&format!("{},{},{},share,{:.6}\n", r.variant, f.kind, f.name, f.share));
        }
    }
    out
}

/// Run `sluice sim`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    let a = match SimArgs::try_parse_from(std::iter::once("sluice sim".to_string()).chain(args.iter().cloned())) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    if a.list {
        for (n, text) in BUNDLED {
            let desc = Scenario::parse(text).map(|s| s.description).unwrap_or_default();
            println!("{n:<12} {}", desc.lines().next().unwrap_or(""));
        }
        return 0;
    }
    let Some(name) = &a.scenario else {
        eprintln!("sluice sim: name a scenario (bundled: see --list) or a file");
        return 2;
    };
    if a.plot.is_some() {
        eprintln!("sluice sim: --plot is not available yet");
        return 2;
    }
    let (label, text) = match load(name) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("sluice sim: {e}");
            return 1;
        }
    };
    let sc = match Scenario::parse(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("sluice sim: {label}: {e}");
            return 1;
        }
    };
    let mut overrides = BTreeMap::new();
    for s in &a.set {
        let Some((k, v)) = s.split_once('=') else {
            eprintln!("sluice sim: --set {s}: expected key=value");
            return 2;
        };
        overrides.insert(k.to_string(), v.to_string());
    }
    let runner = BashRunner {
        exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("sluice")),
        base_dir: std::path::Path::new(name).parent().map(|p| p.to_path_buf()),
    };
    let runs = match run_all(&sc, &overrides, a.variant.as_deref(), a.tc_stats, Some(&runner)) {
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
        print!("{}", table(&format!("{} — {}", sc.name, sc.description.lines().next().unwrap_or("")), &runs));
        for r in &runs {
            if let Some(t) = &r.tc_stats {
                print!("\n[{}] tc statistics\n{t}", r.variant);
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
