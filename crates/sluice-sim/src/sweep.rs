//! Parameter sweeps: one scenario run at every point of a grid of its
//! variables, for every seed, and the tidy table of what each run measured.
//!
//! A sweep is a small TOML file kept beside its scenario:
//!
//! ```toml
//! scenario = "dumbbell"          # a bundled name, or a path from this file
//! seeds = "1..=20"               # or [1, 2, 3]; default: the scenario's seed
//! variants = ["pfifo_fast", "fq_codel"]   # default: every variant
//! metrics = ["ping.median_ms", "goodput_mbps"]
//! combine = "product"            # or "zip": the lists taken side by side
//!
//! [grid]                         # scenario variables and their values
//! flows = [1, 2, 4, 8]
//! buf = ["64KiB", "128KiB"]
//! ```
//!
//! Every (point, seed) pair is a *job*, numbered in a fixed order (points in
//! grid order, the last variable fastest; seeds within a point), so a shard
//! `K/N` (jobs whose number is K−1 modulo N) and a resumed run pick the same
//! jobs whatever the machine, and the table comes out in job order whatever
//! the number of threads. A job that fails (a value the scenario refuses)
//! becomes rows with its error and does not stop the others.
//!
//! The summary gives, per point, variant and metric, the mean over the
//! seeds, the sample standard deviation and a 95 % confidence interval from
//! Student's t distribution (the interval of a single seed is empty).
//!
//! Asked to ([`Sweep::run_with_rtts`]), a sweep also hands back every ping
//! reply's round-trip time, pooled by variant, for the RTT CDF that
//! [`crate::sweep_plot`] draws; the tables never hold them.

use crate::report::{metric, RunResult};
use crate::run::{run_all, ScriptRunner};
use crate::scenario::Scenario;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The most jobs one sweep may have.
pub const MAX_JOBS: usize = 1_000_000;

/// A sweep file, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    /// The scenario: a bundled name or a path (from the sweep file's directory).
    pub scenario: String,
    /// Seeds: a list, or a range `A..=B` / `A..B`.
    #[serde(default)]
    pub seeds: Option<toml::Value>,
    /// Variants to run (default all).
    #[serde(default)]
    pub variants: Vec<String>,
    /// Metrics to keep (names as `[[expect]]` takes them).
    pub metrics: Vec<String>,
    /// `product` (default) or `zip`.
    #[serde(default)]
    pub combine: Option<String>,
    /// Variable -> values.
    #[serde(default)]
    pub grid: BTreeMap<String, Vec<toml::Value>>,
}

/// A sweep ready to run.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// The scenario.
    pub scenario: Scenario,
    /// The grid's points: variable -> value, in job order.
    pub points: Vec<BTreeMap<String, String>>,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// Variants (empty: every one).
    pub variants: Vec<String>,
    /// Metrics.
    pub metrics: Vec<String>,
}

/// One row of the tidy table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The point's number.
    pub point: usize,
    /// The point's values.
    pub vars: BTreeMap<String, String>,
    /// The seed.
    pub seed: u64,
    /// The variant.
    pub variant: String,
    /// The metric.
    pub metric: String,
    /// Its value (none: the run did not produce it).
    pub value: Option<f64>,
    /// Why the job failed, if it did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

/// Mean, spread and confidence of one metric at one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// The point's number.
    pub point: usize,
    /// The point's values.
    pub vars: BTreeMap<String, String>,
    /// The variant.
    pub variant: String,
    /// The metric.
    pub metric: String,
    /// Seeds with a value.
    pub n: usize,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (0 for one seed).
    pub sd: f64,
    /// Half-width of the 95 % confidence interval (0 for one seed).
    pub ci95: f64,
}

impl Summary {
    /// The low end of the 95 % confidence interval.
    pub fn ci95_low(&self) -> f64 {
        self.mean - self.ci95
    }

    /// The high end of the 95 % confidence interval.
    pub fn ci95_high(&self) -> f64 {
        self.mean + self.ci95
    }
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn parse_seeds(v: Option<&toml::Value>, default: u64) -> Result<Vec<u64>, String> {
    let bad = || "seeds: a list of whole numbers, or a range A..=B or A..B".to_string();
    let seeds = match v {
        None => vec![default],
        Some(toml::Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_integer()
                    .and_then(|i| u64::try_from(i).ok())
                    .ok_or_else(bad)
            })
            .collect::<Result<_, _>>()?,
        Some(toml::Value::String(s)) => {
            let (a, b, incl) = match (s.split_once("..="), s.split_once("..")) {
                (Some((a, b)), _) => (a, b, true),
                (None, Some((a, b))) => (a, b, false),
                _ => return Err(bad()),
            };
            let a: u64 = a.trim().parse().map_err(|_| bad())?;
            let b: u64 = b.trim().parse().map_err(|_| bad())?;
            let end = if incl {
                b.checked_add(1).ok_or_else(bad)?
            } else {
                b
            };
            if end <= a || end - a > MAX_JOBS as u64 {
                return Err(format!("seeds: {s} is empty or has more than {MAX_JOBS}"));
            }
            (a..end).collect()
        }
        Some(_) => return Err(bad()),
    };
    if seeds.is_empty() {
        return Err("seeds: none".into());
    }
    Ok(seeds)
}

impl Sweep {
    /// Check a sweep file against its (already loaded) scenario.
    pub fn new(f: &SweepFile, scenario: Scenario) -> Result<Sweep, String> {
        let seeds = parse_seeds(f.seeds.as_ref(), scenario.seed)?;
        if f.metrics.is_empty() {
            return Err("metrics: name at least one (e.g. ping.median_ms, goodput_mbps)".into());
        }
        for v in &f.variants {
            if !scenario.variants.iter().any(|x| &x.name == v) {
                let known: Vec<&str> = scenario.variants.iter().map(|x| x.name.as_str()).collect();
                return Err(format!(
                    "variants: {v:?} is not a variant of the scenario ({})",
                    known.join(", ")
                ));
            }
        }
        let grid: Vec<(String, Vec<String>)> = f
            .grid
            .iter()
            .map(|(k, vs)| (k.clone(), vs.iter().map(value_text).collect()))
            .collect();
        for (k, vs) in &grid {
            if vs.is_empty() {
                return Err(format!("grid: {k} has no values"));
            }
        }
        let zip = match f.combine.as_deref() {
            None | Some("product") => false,
            Some("zip") => true,
            Some(o) => return Err(format!("combine: {o:?} is neither product nor zip")),
        };
        let points = if zip { zipped(&grid)? } else { product(&grid)? };
        for p in &points {
            scenario.check_overrides(p)?;
        }
        if points.len().saturating_mul(seeds.len()) > MAX_JOBS {
            return Err(format!("the sweep has more than {MAX_JOBS} runs"));
        }
        Ok(Sweep {
            scenario,
            points,
            seeds,
            variants: f.variants.clone(),
            metrics: f.metrics.clone(),
        })
    }

    /// The jobs: (point, seed), in their fixed order.
    pub fn jobs(&self) -> Vec<(usize, u64)> {
        (0..self.points.len())
            .flat_map(|p| self.seeds.iter().map(move |&s| (p, s)))
            .collect()
    }

    /// Run one job: its rows, one per variant and metric.
    pub fn run_job(&self, point: usize, seed: u64, runner: Option<&dyn ScriptRunner>) -> Vec<Row> {
        self.job(point, seed, runner, false).0
    }

    /// Run one job: its rows, and, if `keep_rtts`, its ping replies' RTTs.
    fn job(
        &self,
        point: usize,
        seed: u64,
        runner: Option<&dyn ScriptRunner>,
        keep_rtts: bool,
    ) -> (Vec<Row>, RttSamples) {
        let vars = &self.points[point];
        let mut sc = self.scenario.clone();
        sc.seed = seed;
        let only: Vec<Option<&str>> = if self.variants.is_empty() {
            vec![None]
        } else {
            self.variants.iter().map(|v| Some(v.as_str())).collect()
        };
        let mut runs: Vec<RunResult> = vec![];
        for o in only {
            match run_all(&sc, vars, o, false, runner) {
                Ok(r) => runs.extend(r),
                Err(e) => return (vec![self.failed(point, seed, e)], RttSamples::new()),
            }
        }
        let mut rtts = RttSamples::new();
        if keep_rtts {
            add_rtts(&mut rtts, &runs);
        }
        let mut rows = vec![];
        for r in &runs {
            for m in &self.metrics {
                rows.push(Row {
                    point,
                    vars: vars.clone(),
                    seed,
                    variant: r.variant.clone(),
                    metric: m.clone(),
                    value: metric(r, m),
                    error: None,
                });
            }
        }
        (rows, rtts)
    }

    fn failed(&self, point: usize, seed: u64, error: String) -> Row {
        Row {
            point,
            vars: self.points[point].clone(),
            seed,
            variant: String::new(),
            metric: String::new(),
            value: None,
            error: Some(error),
        }
    }

    /// Run `jobs` on `threads` threads; `done` is told each finished job's
    /// rows (in whatever order they finish). Returns every row, in job order.
    pub fn run(
        &self,
        jobs: &[(usize, u64)],
        threads: usize,
        runner: Option<&(dyn ScriptRunner + Sync)>,
        done: &(dyn Fn(&[Row]) + Sync),
    ) -> Vec<Row> {
        self.run_jobs(jobs, threads, runner, done, false).0
    }

    /// [`Sweep::run`], also handing back every ping reply's RTT, pooled
    /// by variant over the jobs (for `sluice sweep --plot`'s CDF; the rows
    /// are the same).
    pub fn run_with_rtts(
        &self,
        jobs: &[(usize, u64)],
        threads: usize,
        runner: Option<&(dyn ScriptRunner + Sync)>,
        done: &(dyn Fn(&[Row]) + Sync),
    ) -> (Vec<Row>, RttSamples) {
        self.run_jobs(jobs, threads, runner, done, true)
    }

    fn run_jobs(
        &self,
        jobs: &[(usize, u64)],
        threads: usize,
        runner: Option<&(dyn ScriptRunner + Sync)>,
        done: &(dyn Fn(&[Row]) + Sync),
        keep_rtts: bool,
    ) -> (Vec<Row>, RttSamples) {
        let next = AtomicUsize::new(0);
        type Done = (usize, (Vec<Row>, RttSamples));
        let results: Mutex<Vec<Done>> = Mutex::new(Vec::with_capacity(jobs.len()));
        std::thread::scope(|s| {
            for _ in 0..threads.clamp(1, jobs.len().max(1)) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(p, seed)) = jobs.get(i) else {
                        break;
                    };
                    let runner = runner.map(|r| r as &dyn ScriptRunner);
                    let out = self.job(p, seed, runner, keep_rtts);
                    done(&out.0);
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((i, out));
                });
            }
        });
        let mut all = results.into_inner().unwrap_or_else(|e| e.into_inner());
        all.sort_by_key(|(i, _)| *i);
        let mut rows = vec![];
        let mut rtts = RttSamples::new();
        for (_, (r, t)) in all {
            rows.extend(r);
            for (k, v) in t {
                rtts.entry(k).or_default().extend(v);
            }
        }
        (rows, rtts)
    }
}

/// Ping round-trip times in milliseconds, every reply's, by series: the
/// variant's name, or `VARIANT PING` when a run has more than one ping
/// workload. Pooled over jobs in job order.
pub type RttSamples = BTreeMap<String, Vec<f64>>;

fn add_rtts(rtts: &mut RttSamples, runs: &[RunResult]) {
    for r in runs {
        for p in &r.pings {
            let key = if r.pings.len() > 1 {
                format!("{} {}", r.variant, p.name)
            } else {
                r.variant.clone()
            };
            rtts.entry(key)
                .or_default()
                .extend(p.series.iter().map(|&(_, ms)| ms));
        }
    }
}

fn product(grid: &[(String, Vec<String>)]) -> Result<Vec<BTreeMap<String, String>>, String> {
    let mut points = vec![BTreeMap::new()];
    for (k, vs) in grid {
        if points.len().saturating_mul(vs.len()) > MAX_JOBS {
            return Err(format!("the grid has more than {MAX_JOBS} points"));
        }
        points = points
            .into_iter()
            .flat_map(|p| {
                vs.iter().map(move |v| {
                    let mut q = p.clone();
                    q.insert(k.clone(), v.clone());
                    q
                })
            })
            .collect();
    }
    Ok(points)
}

fn zipped(grid: &[(String, Vec<String>)]) -> Result<Vec<BTreeMap<String, String>>, String> {
    let n = grid.first().map_or(1, |(_, v)| v.len());
    if let Some((k, v)) = grid.iter().find(|(_, v)| v.len() != n) {
        return Err(format!(
            "grid: zip needs lists of one length; {k} has {} values, not {n}",
            v.len()
        ));
    }
    Ok((0..n)
        .map(|i| {
            grid.iter()
                .map(|(k, v)| (k.clone(), v[i].clone()))
                .collect()
        })
        .collect())
}

/// Student's t at 97.5 % for `df` degrees of freedom.
fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => T[df - 1],
        31..=60 => 2.042 - (df - 30) as f64 * (2.042 - 2.000) / 30.0,
        61..=120 => 2.000 - (df - 60) as f64 * (2.000 - 1.980) / 60.0,
        _ => 1.960,
    }
}

/// Rows grouped by (point, variant, metric): the point's values and the samples.
type Groups = BTreeMap<(usize, String, String), (BTreeMap<String, String>, Vec<f64>)>;

/// The summary of `rows`: per point, variant and metric.
pub fn summarize(rows: &[Row]) -> Vec<Summary> {
    let mut groups: Groups = BTreeMap::new();
    for r in rows.iter().filter(|r| r.error.is_none()) {
        let e = groups
            .entry((r.point, r.variant.clone(), r.metric.clone()))
            .or_insert_with(|| (r.vars.clone(), vec![]));
        if let Some(v) = r.value.filter(|v| v.is_finite()) {
            e.1.push(v);
        }
    }
    groups
        .into_iter()
        .map(|((point, variant, metric), (vars, vs))| {
            let n = vs.len();
            let mean = if n > 0 {
                vs.iter().sum::<f64>() / n as f64
            } else {
                f64::NAN
            };
            let sd = if n > 1 {
                (vs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
            } else {
                0.0
            };
            let ci95 = if n > 1 {
                t975(n - 1) * sd / (n as f64).sqrt()
            } else {
                0.0
            };
            Summary {
                point,
                vars,
                variant,
                metric,
                n,
                mean,
                sd,
                ci95,
            }
        })
        .collect()
}

/// The tidy table as CSV: `point,VAR...,seed,variant,metric,value,error`.
pub fn to_csv(rows: &[Row], var_names: &[String]) -> String {
    let mut out = String::from("point");
    for v in var_names {
        out += &format!(",{}", csv_field(v));
    }
    out += ",seed,variant,metric,value,error\n";
    for r in rows {
        out += &r.point.to_string();
        for v in var_names {
            out += &format!(",{}", csv_field(r.vars.get(v).map_or("", String::as_str)));
        }
        let value = r.value.map_or(String::new(), |v| format!("{v}"));
        out += &format!(
            ",{},{},{},{value},{}\n",
            r.seed,
            csv_field(&r.variant),
            csv_field(&r.metric),
            csv_field(r.error.as_deref().unwrap_or(""))
        );
    }
    out
}

/// The summary as CSV.
pub fn summary_csv(sums: &[Summary], var_names: &[String]) -> String {
    let mut out = String::from("point");
    for v in var_names {
        out += &format!(",{}", csv_field(v));
    }
    out += ",variant,metric,n,mean,sd,ci95_low,ci95_high\n";
    for s in sums {
        out += &s.point.to_string();
        for v in var_names {
            out += &format!(",{}", csv_field(s.vars.get(v).map_or("", String::as_str)));
        }
        out += &format!(
            ",{},{},{},{},{},{},{}\n",
            csv_field(&s.variant),
            csv_field(&s.metric),
            s.n,
            s.mean,
            s.sd,
            s.ci95_low(),
            s.ci95_high()
        );
    }
    out
}

/// RFC 4180 quoting where needed.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_take_lists_and_ranges() {
        let v = |s: &str| toml::Value::String(s.into());
        assert_eq!(parse_seeds(Some(&v("1..=3")), 9).unwrap(), [1, 2, 3]);
        assert_eq!(parse_seeds(Some(&v("1..3")), 9).unwrap(), [1, 2]);
        assert_eq!(parse_seeds(None, 9).unwrap(), [9]);
        assert!(parse_seeds(Some(&v("3..=1")), 9).is_err());
        assert!(parse_seeds(Some(&v("a..b")), 9).is_err());
    }

    #[test]
    fn product_and_zip_make_the_points_in_order() {
        let g = vec![
            ("a".to_string(), vec!["1".to_string(), "2".to_string()]),
            ("b".to_string(), vec!["x".to_string(), "y".to_string()]),
        ];
        let p = product(&g).unwrap();
        let flat: Vec<String> = p.iter().map(|m| format!("{}{}", m["a"], m["b"])).collect();
        assert_eq!(flat, ["1x", "1y", "2x", "2y"]);
        let z = zipped(&g).unwrap();
        let flat: Vec<String> = z.iter().map(|m| format!("{}{}", m["a"], m["b"])).collect();
        assert_eq!(flat, ["1x", "2y"]);
    }

    #[test]
    fn the_confidence_interval_is_students() {
        // Values 1..=5: mean 3, sd sqrt(2.5), t(4) = 2.776.
        let rows: Vec<Row> = (1..=5)
            .map(|i| Row {
                point: 0,
                vars: BTreeMap::new(),
                seed: i,
                variant: "v".into(),
                metric: "m".into(),
                value: Some(i as f64),
                error: None,
            })
            .collect();
        let s = &summarize(&rows)[0];
        assert_eq!((s.n, s.mean), (5, 3.0));
        assert!((s.sd - 2.5f64.sqrt()).abs() < 1e-12);
        assert!((s.ci95 - 2.776 * 2.5f64.sqrt() / 5f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        assert_eq!(csv_field("cake bandwidth 9mbit"), "cake bandwidth 9mbit");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
