//! `sluice sweep FILE` and `sluice sweep merge`: a scenario over a grid of
//! its variables and many seeds, on every core, into one tidy table
//! (`sluice_sim::sweep` says how jobs are numbered and summarized).
//!
//! The output directory holds `runs.csv` and `runs.jsonl` (one row per
//! point, seed, variant and metric) and `summary.csv` (per point, variant
//! and metric: n, mean, sd, 95 % interval). `--resume` reads `runs.jsonl`
//! and runs only the jobs it lacks (a failed job runs again); `--shard K/N`
//! runs the jobs whose number is K−1 modulo N, for a Slurm job array or a
//! Kubernetes Indexed Job, and `sluice sweep merge OUT DIR...` joins the
//! shards' directories. The table is the same whatever `--jobs` or the
//! sharding. `--plot DIR`, on either, draws charts of the tables once they
//! are written (`sluice_sim::sweep_plot`).

use clap::Parser;
use sluice_sim::sweep::{summarize, summary_csv, to_csv, Row, RttSamples, Sweep, SweepFile};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The largest sweep file read.
const MAX_FILE: u64 = 1 << 20;

#[derive(Parser, Debug)]
#[command(
    name = "sluice sweep",
    about = "Run a scenario over a grid of its variables and many seeds, into one table"
)]
pub struct SweepArgs {
    /// The sweep file (TOML: scenario, grid, seeds, variants, metrics)
    pub file: PathBuf,
    /// Where the tables go
    #[arg(long, short, default_value = "sweep-out")]
    pub out: PathBuf,
    /// Runs at once (default: every core)
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Skip the jobs the output directory already has
    #[arg(long)]
    pub resume: bool,
    /// Run only shard K of N (1-based): the jobs numbered K-1 modulo N
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Also draw charts into DIR, as SVG and PNG
    ///
    /// Each metric's mean and 95 % interval against each grid variable, one
    /// line per variant (METRIC-vs-VAR); each metric's CDF over every run
    /// (cdf-METRIC); and the CDF of every ping reply's RTT, one line per
    /// variant (cdf-ping-rtt). `sluice sweep merge OUT DIR... --plot DIR`
    /// draws the first two from the tables.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    f.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if text.len() as u64 > MAX_FILE {
        return Err(format!("{}: larger than {MAX_FILE} bytes", path.display()));
    }
    Ok(text)
}

fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("--shard {s}: K/N with 1 <= K <= N");
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n): (usize, usize) = (k.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if k == 0 || k > n {
        return Err(bad());
    }
    Ok((k, n))
}

fn load(args: &SweepArgs) -> Result<Sweep, String> {
    let text = read_bounded(&args.file)?;
    let f: SweepFile =
        toml::from_str(&text).map_err(|e| format!("{}: {e}", args.file.display()))?;
    let base = args.file.parent().unwrap_or(Path::new("."));
    let sc = crate::sim::load_scenario(&f.scenario, Some(base))?;
    Sweep::new(&f, sc).map_err(|e| format!("{}: {e}", args.file.display()))
}

fn read_rows(dir: &Path) -> Result<Vec<Row>, String> {
    let path = dir.join("runs.jsonl");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| format!("{}: line {}: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Write the three tables (through temporary files renamed into place).
fn write_tables(dir: &Path, rows: &[Row]) -> Result<(), String> {
    let io = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(io)?;
    let names: BTreeSet<String> = rows.iter().flat_map(|r| r.vars.keys().cloned()).collect();
    let names: Vec<String> = names.into_iter().collect();
    let jsonl: String = rows
        .iter()
        .map(|r| serde_json::to_string(r).map(|s| s + "\n"))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    for (name, text) in [
        ("runs.csv", to_csv(rows, &names)),
        ("runs.jsonl", jsonl),
        ("summary.csv", summary_csv(&summarize(rows), &names)),
    ] {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, dir.join(name)).map_err(io)?;
    }
    Ok(())
}

fn sort_rows(rows: &mut [Row]) {
    rows.sort_by_key(|r| (r.point, r.seed));
}

/// `sluice sweep ...`.
pub fn main(argv: &[String]) -> i32 {
    if argv.first().map(String::as_str) == Some("merge") {
        return merge(&argv[1..]);
    }
    let args = match SweepArgs::try_parse_from(
        std::iter::once("sluice sweep".to_string()).chain(argv.iter().cloned()),
    ) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    match run(&args) {
        Ok(failed) => i32::from(failed > 0),
        Err(e) => {
            eprintln!("sluice sweep: {e}");
            2
        }
    }
}

fn run(args: &SweepArgs) -> Result<usize, String> {
    let sweep = load(args)?;
    let mut jobs = sweep.jobs();
    if let Some(s) = &args.shard {
        let (k, n) = parse_shard(s)?;
        jobs = jobs
            .into_iter()
            .enumerate()
            .filter(|(i, _)| i % n == k - 1)
            .map(|(_, j)| j)
            .collect();
    }
    let mut kept = vec![];
    if args.resume {
        let done: BTreeSet<(usize, u64)> = read_rows(&args.out)?
            .into_iter()
            .filter(|r| r.error.is_none())
            .map(|r| {
                let key = (r.point, r.seed);
                kept.push(r);
                key
            })
            .collect();
        jobs.retain(|j| !done.contains(j));
    }
    let threads = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // Node scripts run through bash with a per-run environment: one at a time.
    let threads = if sweep.scenario.nodes.iter().any(|n| n.script.is_some()) {
        1
    } else {
        threads
    };
    let runner = crate::sim::script_runner(args.file.parent());
    let bar = crate::sim::progress_bar(jobs.len() as u64, "runs");
    let done = |_: &[Row]| bar.inc(1);
    let (rows, rtts) = if args.plot.is_some() {
        sweep.run_with_rtts(&jobs, threads, Some(&runner), &done)
    } else {
        (
            sweep.run(&jobs, threads, Some(&runner), &done),
            RttSamples::new(),
        )
    };
    bar.finish_and_clear();
    let failed: Vec<&Row> = rows.iter().filter(|r| r.error.is_some()).collect();
    for r in &failed {
        let vars: Vec<String> = r.vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
        eprintln!(
            "sluice sweep: point {} ({}) seed {}: {}",
            r.point,
            vars.join(" "),
            r.seed,
            r.error.as_deref().unwrap_or("")
        );
    }
    let n_failed = failed.len();
    // The RTTs of runs kept from an earlier invocation were not kept: a
    // CDF of only this invocation's would pass for the whole sweep's.
    let rtts = kept.is_empty().then_some(rtts);
    let mut all = kept;
    all.extend(rows);
    sort_rows(&mut all);
    write_tables(&args.out, &all)?;
    let names: Vec<String> = sweep
        .points
        .first()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    print!("{}", summary_csv(&summarize(&all), &names));
    eprintln!(
        "sluice sweep: {} runs, {n_failed} failed; tables in {}",
        jobs.len(),
        args.out.display()
    );
    if let Some(dir) = &args.plot {
        if rtts.is_none() {
            eprintln!("sluice sweep: cdf-ping-rtt: not plotted: --resume kept runs whose RTTs were not kept");
        }
        plot(dir, Some(&sweep.scenario.name), &all, rtts.as_ref())?;
    }
    Ok(n_failed)
}

/// Draw the charts (after the tables are written), and say what was left out.
fn plot(
    dir: &Path,
    scenario: Option<&str>,
    rows: &[Row],
    rtts: Option<&RttSamples>,
) -> Result<(), String> {
    let w = sluice_sim::sweep_plot::write(dir, scenario, rows, rtts)
        .map_err(|e| format!("--plot: {e}"))?;
    for n in &w.notes {
        eprintln!("sluice sweep: {n}");
    }
    eprintln!(
        "sluice sweep: {} plot files in {}",
        w.files.len(),
        dir.display()
    );
    Ok(())
}

/// `--plot DIR` taken out of `argv`, and the rest.
fn take_plot(argv: &[String]) -> Result<(Option<PathBuf>, Vec<String>), String> {
    let mut plot = None;
    let mut rest = vec![];
    let mut it = argv.iter();
    while let Some(a) = it.next() {
        if let Some(dir) = a.strip_prefix("--plot=") {
            plot = Some(PathBuf::from(dir));
        } else if a == "--plot" {
            let dir = it.next().ok_or("--plot needs a directory")?;
            plot = Some(PathBuf::from(dir));
        } else {
            rest.push(a.clone());
        }
    }
    Ok((plot, rest))
}

/// `sluice sweep merge OUT DIR... [--plot DIR]`: the shards' rows as one table.
fn merge(argv: &[String]) -> i32 {
    const USAGE: &str = "usage: sluice sweep merge OUT DIR... [--plot DIR]";
    let (plot_dir, argv) = match take_plot(argv) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("sluice sweep merge: {e}\n{USAGE}");
            return 2;
        }
    };
    let [out, dirs @ ..] = argv.as_slice() else {
        eprintln!("{USAGE}");
        return 2;
    };
    if dirs.is_empty() {
        eprintln!("{USAGE}");
        return 2;
    }
    let mut all: Vec<Row> = vec![];
    for d in dirs {
        match read_rows(Path::new(d)) {
            Ok(rows) if rows.is_empty() => {
                eprintln!("sluice sweep merge: {d}: no runs.jsonl rows");
                return 2;
            }
            Ok(rows) => all.extend(rows),
            Err(e) => {
                eprintln!("sluice sweep merge: {e}");
                return 2;
            }
        }
    }
    sort_rows(&mut all);
    let mut seen = BTreeSet::new();
    all.retain(|r| seen.insert((r.point, r.seed, r.variant.clone(), r.metric.clone())));
    for w in all.windows(2) {
        if w[0].point == w[1].point && w[0].vars != w[1].vars {
            eprintln!("sluice sweep merge: point {} has different values in two shards: not the same sweep", w[0].point);
            return 2;
        }
    }
    let plotted = write_tables(Path::new(out), &all)
        .and_then(|()| plot_dir.map_or(Ok(()), |d| plot(&d, None, &all, None)));
    match plotted {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sluice sweep merge: {e}");
            2
        }
    }
}
