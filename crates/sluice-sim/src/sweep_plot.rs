//! `sluice sweep --plot DIR`: a sweep's results as charts, SVG and PNG.
//!
//! A sweep asks how a metric moves as a parameter moves, and whether one
//! variant beats another by more than the seeds' scatter. Two kinds of
//! chart answer that, as flent draws them:
//!
//! - **The metric against each swept variable** (`METRIC-vs-VAR`): for
//!   every kept metric and every grid variable, x is the variable's values
//!   and y the summary's mean over the seeds, with a bar from `ci95_low` to
//!   `ci95_high` (the same numbers as `summary.csv`), one line per variant.
//!   When the grid has other variables, each of their combinations gets its
//!   own line (`fifo, buf=64KiB`), so a line only ever joins points that
//!   differ in the plotted variable; a variable that changes in lockstep
//!   with the plotted one (a `zip` grid) decides nothing new and splits no
//!   line. The x axis is numeric when every value reads as a number, a rate
//!   (Mbit/s), a size (bytes, KiB or MiB) or a time (ms), read as scenarios
//!   read them ([`crate::limits`]); otherwise the values are categories,
//!   placed evenly in grid order and labelled as written.
//! - **Distributions** (`cdf-METRIC`, `cdf-ping-rtt`): the empirical CDF
//!   of a metric over every run (every point and seed) per variant; and,
//!   when the runs hand back their ping replies, the CDF of every reply's
//!   round-trip time per variant, pooled over all runs. The second is the
//!   one that shows a tail: a median that two qdiscs share can hide a 99th
//!   percentile ten times apart. Pooling spans the whole grid, so it
//!   compares variants across the conditions swept, not at one point.
//!
//! Each mean is a dot on its line with a capped bar over its interval (a
//! single seed's interval is empty: the bar shrinks to the dot). The y axis
//! starts at zero, so a difference of a few percent looks like one, and
//! the legend sits in the upper corner over the half whose bars reach less
//! high.
//!
//! A CDF is drawn as steps: at each distinct value x, the fraction of
//! samples at most x. A series of more than [`CDF_STEPS`] distinct values
//! keeps that many steps, evenly spaced in rank, so a long run's chart
//! stays a few hundred kilobytes while its shape is kept.
//!
//! A metric no run produced (every value missing) gets no chart, and a
//! note says so. Drawing and file writing are those of [`crate::plot`]
//! (palette, compiled-in font, SVG text and PNG bytes), so the same rows
//! give the same SVG bytes.

use crate::limits;
use crate::plot::{
    chart_on, color, file_stem, legend, legend_line, mesh, tick_format, write_figure, Figure,
    PlotError,
};
use crate::sweep::{summarize, Row, RttSamples, Summary};
use plotters::coord::Shift;
use plotters::prelude::*;
use sluice_core::time::Duration;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The most steps drawn of one CDF series.
pub const CDF_STEPS: usize = 2000;

/// One point of a mean chart, with its 95 % interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// Position on the x axis.
    pub x: f64,
    /// Mean over the seeds.
    pub mean: f64,
    /// Low end of the 95 % interval.
    pub low: f64,
    /// High end of the 95 % interval.
    pub high: f64,
}

/// How a swept variable's values sit on the x axis.
#[derive(Clone, Debug, PartialEq)]
pub enum Axis {
    /// Numbers (converted to the unit the label names).
    Numeric,
    /// Labels, placed at 0, 1, 2, … in grid order.
    Categories(Vec<String>),
}

/// A metric's means against one swept variable.
#[derive(Clone, Debug, PartialEq)]
pub struct MeanChart {
    /// File name stem: `METRIC-vs-VAR`.
    pub stem: String,
    /// Title above the plot.
    pub title: String,
    /// X axis label: the variable, and its unit.
    pub x_label: String,
    /// Y axis label: the metric.
    pub y_label: String,
    /// Numeric or categorical x.
    pub axis: Axis,
    /// `(name, bars in x order)`, one per variant (and combination of the
    /// other variables).
    pub lines: Vec<(String, Vec<Bar>)>,
}

/// Empirical CDFs of samples, one series per variant.
#[derive(Clone, Debug, PartialEq)]
pub struct CdfChart {
    /// File name stem: `cdf-METRIC` or `cdf-ping-rtt`.
    pub stem: String,
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// `(name, CDF steps)`, as [`cdf`] gives them.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
}

/// Every chart of a sweep, and notes on the ones left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SweepCharts {
    /// Means against swept variables.
    pub means: Vec<MeanChart>,
    /// Distributions.
    pub cdfs: Vec<CdfChart>,
    /// Why a chart was not drawn, one line each.
    pub notes: Vec<String>,
}

/// What [`write`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Written {
    /// The files written.
    pub files: Vec<PathBuf>,
    /// Why a chart was not drawn, one line each.
    pub notes: Vec<String>,
}

/// The empirical CDF of `values`: for each distinct finite value x, in
/// order, `(x, fraction of the finite values <= x)`.
pub fn cdf(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut out: Vec<(f64, f64)> = vec![];
    for (i, x) in v.iter().enumerate() {
        let f = (i + 1) as f64 / n;
        match out.last_mut() {
            Some(last) if last.0 == *x => last.1 = f,
            _ => out.push((*x, f)),
        }
    }
    out
}

/// At most `max` of `steps`, evenly spaced in rank, the first and last kept.
fn thin(steps: Vec<(f64, f64)>, max: usize) -> Vec<(f64, f64)> {
    if steps.len() <= max || max < 2 {
        return steps;
    }
    let last = steps.len() - 1;
    (0..max).map(|j| steps[j * last / (max - 1)]).collect()
}

/// The charts of a sweep's rows (and, if the runs were asked for them,
/// their ping RTTs); `scenario` names the charts.
pub fn charts(scenario: Option<&str>, rows: &[Row], rtts: Option<&RttSamples>) -> SweepCharts {
    let prefix = scenario.map_or(String::new(), |s| format!("{s}: "));
    let sums = summarize(rows);
    let grid = Grid::new(rows);
    let mut out = SweepCharts::default();
    for metric in metrics(rows) {
        let finite = |s: &&Summary| s.metric == metric && s.n > 0 && s.mean.is_finite();
        let sums: Vec<&Summary> = sums.iter().filter(finite).collect();
        if sums.is_empty() {
            out.notes
                .push(format!("{metric}: no run produced a value; not plotted"));
            continue;
        }
        for var in grid.values.keys() {
            out.means
                .push(grid.mean_chart(&prefix, &metric, var, &sums));
        }
        out.cdfs.push(metric_cdf(&prefix, &metric, rows));
    }
    if let Some(rtts) = rtts {
        let series: Vec<(String, Vec<(f64, f64)>)> = rtts
            .iter()
            .map(|(k, v)| (k.clone(), thin(cdf(v), CDF_STEPS)))
            .filter(|(_, s)| !s.is_empty())
            .collect();
        if series.is_empty() {
            out.notes
                .push("cdf-ping-rtt: no ping replies in these runs; not plotted".into());
        } else {
            out.cdfs.push(CdfChart {
                stem: "cdf-ping-rtt".into(),
                title: format!("{prefix}ping round-trip time, every reply of every run"),
                x_label: "RTT (ms)".into(),
                y_label: "fraction of replies".into(),
                series,
            });
        }
    }
    out
}

/// Write every chart into `dir` (created if missing) as SVG and PNG.
pub fn write(
    dir: &Path,
    scenario: Option<&str>,
    rows: &[Row],
    rtts: Option<&RttSamples>,
) -> Result<Written, PlotError> {
    let c = charts(scenario, rows, rtts);
    std::fs::create_dir_all(dir).map_err(|source| PlotError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files = vec![];
    for m in &c.means {
        files.extend(write_figure(dir, m)?);
    }
    for d in &c.cdfs {
        files.extend(write_figure(dir, d)?);
    }
    Ok(Written {
        files,
        notes: c.notes,
    })
}

/// The metrics of `rows`, in the order they first appear.
fn metrics(rows: &[Row]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    rows.iter()
        .filter(|r| r.error.is_none() && seen.insert(r.metric.as_str()))
        .map(|r| r.metric.clone())
        .collect()
}

fn metric_cdf(prefix: &str, metric: &str, rows: &[Row]) -> CdfChart {
    let mut by_variant: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| r.error.is_none() && r.metric == metric)
    {
        if let Some(v) = r.value {
            by_variant.entry(&r.variant).or_default().push(v);
        }
    }
    CdfChart {
        stem: format!("cdf-{}", file_stem(metric)),
        title: format!("{prefix}{metric} over every run (every point and seed)"),
        x_label: metric.into(),
        y_label: "fraction of runs".into(),
        series: by_variant
            .into_iter()
            .map(|(k, v)| (k.to_string(), thin(cdf(&v), CDF_STEPS)))
            .filter(|(_, s)| !s.is_empty())
            .collect(),
    }
}

/// The grid as the rows show it: each point's values, and each
/// variable's distinct values in grid order.
struct Grid {
    points: BTreeMap<usize, BTreeMap<String, String>>,
    values: BTreeMap<String, Vec<String>>,
}

impl Grid {
    /// The grid of the jobs that ran (a failed job's values, which the
    /// scenario refused, would make a numeric axis categorical).
    fn new(rows: &[Row]) -> Grid {
        let points: BTreeMap<usize, BTreeMap<String, String>> = rows
            .iter()
            .filter(|r| r.error.is_none())
            .map(|r| (r.point, r.vars.clone()))
            .collect();
        let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for vars in points.values() {
            for (k, v) in vars {
                let vs = values.entry(k.clone()).or_default();
                if !vs.contains(v) {
                    vs.push(v.clone());
                }
            }
        }
        Grid { points, values }
    }

    /// The variables other than `var` that its value does not decide:
    /// each of their combinations is a line of its own.
    fn independent_of(&self, var: &str) -> Vec<&str> {
        self.values
            .keys()
            .filter(|w| *w != var)
            .filter(|w| {
                let mut seen: BTreeMap<Option<&String>, Option<&String>> = BTreeMap::new();
                self.points.values().any(|p| {
                    let (x, y) = (p.get(var), p.get(*w));
                    *seen.entry(x).or_insert(y) != y
                })
            })
            .map(String::as_str)
            .collect()
    }

    fn mean_chart(&self, prefix: &str, metric: &str, var: &str, sums: &[&Summary]) -> MeanChart {
        let values = &self.values[var];
        let (x_label, axis, xs) = x_axis(var, values);
        let others = self.independent_of(var);
        let mut lines: Vec<(String, Vec<Bar>)> = vec![];
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        for s in sums {
            let Some(i) = s
                .vars
                .get(var)
                .and_then(|v| values.iter().position(|x| x == v))
            else {
                continue;
            };
            let mut name = s.variant.clone();
            for w in &others {
                let v = s.vars.get(*w).map_or("", String::as_str);
                name += &format!(", {w}={v}");
            }
            let line = *index.entry(name.clone()).or_insert_with(|| {
                lines.push((name, vec![]));
                lines.len() - 1
            });
            lines[line].1.push(Bar {
                x: xs[i],
                mean: s.mean,
                low: s.ci95_low(),
                high: s.ci95_high(),
            });
        }
        for (_, bars) in &mut lines {
            bars.sort_by(|a, b| a.x.total_cmp(&b.x));
        }
        MeanChart {
            stem: format!("{}-vs-{}", file_stem(metric), file_stem(var)),
            title: format!("{prefix}{metric} against {var} (mean and 95 % interval over seeds)"),
            x_label,
            y_label: metric.into(),
            axis,
            lines,
        }
    }
}

/// The x axis for a variable's values: its label, kind and each value's x.
fn x_axis(var: &str, values: &[String]) -> (String, Axis, Vec<f64>) {
    let all = |f: &dyn Fn(&str) -> Option<f64>| -> Option<Vec<f64>> {
        values.iter().map(|v| f(v.trim())).collect()
    };
    let numeric = |unit: &str, xs: Vec<f64>| {
        let label = if unit.is_empty() {
            var.to_string()
        } else {
            format!("{var} ({unit})")
        };
        (label, Axis::Numeric, xs)
    };
    if let Some(xs) = all(&|v| v.parse::<f64>().ok().filter(|x| x.is_finite())) {
        return numeric("", xs);
    }
    if let Some(xs) = all(&|v| limits::rate(v, var).ok().map(|bps| bps as f64 / 1e6)) {
        return numeric("Mbit/s", xs);
    }
    if let Some(xs) = all(&|v| limits::bytes(v, var, 0, u64::MAX).ok().map(|b| b as f64)) {
        let most = xs.iter().copied().fold(0.0, f64::max);
        let (unit, scale) = if most >= 1_048_576.0 {
            ("MiB", 1_048_576.0)
        } else if most >= 1024.0 {
            ("KiB", 1024.0)
        } else {
            ("bytes", 1.0)
        };
        return numeric(unit, xs.iter().map(|x| x / scale).collect());
    }
    let time = |v: &str| limits::time(v, var, Duration(0), Duration(u64::MAX)).ok();
    if let Some(xs) = all(&|v| time(v).map(|d| d.0 as f64 / 1e6)) {
        return numeric("ms", xs);
    }
    let xs = (0..values.len()).map(|i| i as f64).collect();
    (var.to_string(), Axis::Categories(values.to_vec()), xs)
}

/// `lo..hi` covering `vals`, widened by `pad` of the span on each side (a
/// single value gets a span of its own).
fn span(vals: impl Iterator<Item = f64>, pad: f64) -> Range<f64> {
    let (lo, hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() || !hi.is_finite() {
        return 0.0..1.0;
    }
    let width = if hi > lo { hi - lo } else { lo.abs().max(1.0) };
    (lo - pad * width)..(hi + pad * width)
}

/// A category's label at a tick on an integer, nothing between.
fn category_label(cats: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < cats.len() {
        cats[i as usize].clone()
    } else {
        String::new()
    }
}

impl MeanChart {
    fn ranges(&self) -> (Range<f64>, Range<f64>) {
        let bars = || self.lines.iter().flat_map(|(_, b)| b.iter());
        let x = match &self.axis {
            Axis::Categories(c) => -0.5..(c.len() as f64 - 0.5),
            Axis::Numeric => span(bars().map(|b| b.x), 0.05),
        };
        // From zero (or below it), with headroom for the legend.
        let y = span(
            bars()
                .flat_map(|b| [b.low, b.high, 0.0])
                .filter(|v| v.is_finite()),
            0.0,
        );
        let w = y.end - y.start;
        let lo = if y.start < 0.0 {
            y.start - 0.05 * w
        } else {
            0.0
        };
        (x, lo..(y.end + 0.15 * w))
    }

    /// The upper corner over the half of `x` whose bars reach less high,
    /// where the legend hides the least.
    fn legend_corner(&self, x: &Range<f64>) -> SeriesLabelPosition {
        let mid = (x.start + x.end) / 2.0;
        let top = |left: bool| {
            self.lines
                .iter()
                .flat_map(|(_, b)| b.iter())
                .filter(|b| (b.x < mid) == left)
                .map(|b| b.high)
                .fold(f64::NEG_INFINITY, f64::max)
        };
        if top(true) <= top(false) {
            SeriesLabelPosition::UpperLeft
        } else {
            SeriesLabelPosition::UpperRight
        }
    }
}

impl Figure for MeanChart {
    fn stem(&self) -> &str {
        &self.stem
    }

    fn draw_on<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let (xr, yr) = self.ranges();
        let corner = self.legend_corner(&xr);
        let (x_fmt, y_fmt) = (
            tick_format(xr.end - xr.start),
            tick_format(yr.end - yr.start),
        );
        let cats = match &self.axis {
            Axis::Categories(c) => Some(c.as_slice()),
            Axis::Numeric => None,
        };
        let x_label = |v: &f64| cats.map_or_else(|| x_fmt(v), |c| category_label(c, *v));
        let mut ctx = chart_on(root, &self.title, xr, yr)?;
        let mut m = mesh(&mut ctx, &self.x_label, &self.y_label);
        m.x_label_formatter(&x_label).y_label_formatter(&y_fmt);
        if let Some(c) = cats {
            m.x_labels(c.len());
        }
        m.draw()?;
        for (i, (name, bars)) in self.lines.iter().enumerate() {
            let c = color(i);
            let points = bars.iter().map(|b| (b.x, b.mean));
            ctx.draw_series(LineSeries::new(points, c.stroke_width(2)))?
                .label(name.as_str())
                .legend(legend_line(c));
            let stroke = c.stroke_width(1);
            let cap = |at: (f64, f64)| {
                EmptyElement::at(at) + PathElement::new(vec![(-5, 0), (5, 0)], stroke)
            };
            for b in bars {
                ctx.draw_series([PathElement::new(vec![(b.x, b.low), (b.x, b.high)], stroke)])?;
                ctx.draw_series([cap((b.x, b.low)), cap((b.x, b.high))])?;
                ctx.draw_series([Circle::new((b.x, b.mean), 4, c.filled())])?;
            }
        }
        legend(&mut ctx, corner)
    }
}

/// `steps` as a staircase: up at each value, flat to the next.
fn staircase(steps: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(2 * steps.len());
    let mut below = 0.0;
    for &(x, f) in steps {
        out.push((x, below));
        out.push((x, f));
        below = f;
    }
    out
}

impl Figure for CdfChart {
    fn stem(&self) -> &str {
        &self.stem
    }

    fn draw_on<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let xr = span(
            self.series.iter().flat_map(|(_, s)| s.iter().map(|p| p.0)),
            0.03,
        );
        let x_fmt = tick_format(xr.end - xr.start);
        let y_fmt = tick_format(1.0);
        let mut ctx = chart_on(root, &self.title, xr, 0.0..1.02)?;
        mesh(&mut ctx, &self.x_label, &self.y_label)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .draw()?;
        for (i, (name, steps)) in self.series.iter().enumerate() {
            let c = color(i);
            ctx.draw_series(LineSeries::new(staircase(steps), c.stroke_width(2)))?
                .label(name.as_str())
                .legend(legend_line(c));
        }
        legend(&mut ctx, SeriesLabelPosition::LowerRight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(point: usize, vars: &[(&str, &str)], seed: u64, variant: &str, value: f64) -> Row {
        Row {
            point,
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            seed,
            variant: variant.into(),
            metric: "m".into(),
            value: Some(value),
            error: None,
        }
    }

    #[test]
    fn the_cdf_steps_at_each_distinct_value() {
        assert_eq!(
            cdf(&[3.0, 1.0, 2.0]),
            vec![(1.0, 1.0 / 3.0), (2.0, 2.0 / 3.0), (3.0, 1.0)]
        );
        // Ties make one step; what is not finite is left out.
        assert_eq!(
            cdf(&[2.0, 1.0, 2.0, f64::NAN, 5.0]),
            vec![(1.0, 0.25), (2.0, 0.75), (5.0, 1.0)]
        );
        assert!(cdf(&[]).is_empty());
        assert_eq!(
            staircase(&[(1.0, 0.5), (2.0, 1.0)]),
            vec![(1.0, 0.0), (1.0, 0.5), (2.0, 0.5), (2.0, 1.0)]
        );
        let long = cdf(&(0..10_000).map(f64::from).collect::<Vec<_>>());
        let thinned = thin(long, 100);
        assert_eq!(thinned.len(), 100);
        assert_eq!(thinned[0], (0.0, 1e-4));
        assert_eq!(thinned[99], (9999.0, 1.0));
    }

    #[test]
    fn the_bars_are_the_summarys_means_and_intervals() {
        let rows: Vec<Row> = [("2mbit", [1.0, 2.0, 4.0]), ("10mbit", [8.0, 9.0, 9.5])]
            .iter()
            .enumerate()
            .flat_map(|(p, (rate, vals))| {
                vals.iter()
                    .enumerate()
                    .map(move |(s, v)| row(p, &[("rate", rate)], s as u64, "fifo", *v))
            })
            .collect();
        let c = charts(Some("t"), &rows, None);
        assert_eq!(c.means.len(), 1);
        let m = &c.means[0];
        assert_eq!(m.stem, "m-vs-rate");
        assert_eq!(m.x_label, "rate (Mbit/s)");
        let bars = &m.lines[0].1;
        let sums = summarize(&rows);
        for (b, s) in bars.iter().zip(&sums) {
            assert_eq!(
                (b.mean, b.low, b.high),
                (s.mean, s.ci95_low(), s.ci95_high())
            );
            assert!(b.low < b.mean && b.mean < b.high);
        }
        assert_eq!((bars[0].x, bars[1].x), (2.0, 10.0));
        // One CDF over all six runs.
        assert_eq!(c.cdfs[0].series[0].1.len(), 6);
    }

    #[test]
    fn other_variables_split_lines_unless_they_move_in_lockstep() {
        let product = [
            row(0, &[("a", "1"), ("b", "x")], 1, "v", 1.0),
            row(1, &[("a", "1"), ("b", "y")], 1, "v", 2.0),
            row(2, &[("a", "2"), ("b", "x")], 1, "v", 3.0),
            row(3, &[("a", "2"), ("b", "y")], 1, "v", 4.0),
        ];
        let c = charts(None, &product, None);
        let vs_a = c.means.iter().find(|m| m.stem == "m-vs-a").unwrap();
        let names: Vec<&str> = vs_a.lines.iter().map(|l| l.0.as_str()).collect();
        assert_eq!(names, ["v, b=x", "v, b=y"]);
        let vs_b = c.means.iter().find(|m| m.stem == "m-vs-b").unwrap();
        assert_eq!(vs_b.axis, Axis::Categories(vec!["x".into(), "y".into()]));
        let zipped = [
            row(0, &[("a", "1"), ("b", "x")], 1, "v", 1.0),
            row(1, &[("a", "2"), ("b", "y")], 1, "v", 2.0),
        ];
        let c = charts(None, &zipped, None);
        assert!(c
            .means
            .iter()
            .all(|m| m.lines.len() == 1 && m.lines[0].0 == "v"));
    }

    #[test]
    fn axes_read_units_as_scenarios_do() {
        let vals = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (label, axis, xs) = x_axis("buf", &vals(&["64KiB", "128KiB"]));
        assert_eq!(
            (label.as_str(), axis, xs),
            ("buf (KiB)", Axis::Numeric, vec![64.0, 128.0])
        );
        let (label, _, xs) = x_axis("delay", &vals(&["5ms", "1s"]));
        assert_eq!((label.as_str(), xs), ("delay (ms)", vec![5.0, 1000.0]));
        let (label, _, xs) = x_axis("flows", &vals(&["1", "8"]));
        assert_eq!((label.as_str(), xs), ("flows", vec![1.0, 8.0]));
        let (_, axis, xs) = x_axis("qdisc", &vals(&["fq_codel", "pfifo limit 100"]));
        assert!(matches!(axis, Axis::Categories(_)));
        assert_eq!(xs, vec![0.0, 1.0]);
        assert_eq!(category_label(&vals(&["a", "b"]), 1.0), "b");
        assert_eq!(category_label(&vals(&["a", "b"]), 0.5), "");
    }

    #[test]
    fn a_metric_without_values_is_noted_not_drawn() {
        let mut r = row(0, &[("a", "1")], 1, "v", 0.0);
        r.value = None;
        let c = charts(None, &[r], Some(&RttSamples::new()));
        assert!(c.means.is_empty() && c.cdfs.is_empty());
        assert_eq!(c.notes.len(), 2, "{:?}", c.notes);
    }

    #[test]
    fn every_category_is_labelled() {
        for k in [2, 3, 5, 7, 12] {
            let rows: Vec<Row> = (0..k)
                .map(|i| row(i, &[("q", &format!("qd{i}x"))], 1, "v", i as f64))
                .collect();
            let c = charts(None, &rows, None);
            let svg = crate::plot::render_svg(&c.means[0]).unwrap();
            for i in 0..k {
                assert!(svg.contains(&format!("qd{i}x")), "{k} categories: qd{i}x");
            }
        }
    }

    #[test]
    fn a_failed_jobs_value_stays_off_the_axis() {
        let mut failed = row(1, &[("rate", "-1")], 1, "", f64::NAN);
        (failed.value, failed.error) = (None, Some("refused".into()));
        let rows = [row(0, &[("rate", "2mbit")], 1, "v", 1.0), failed];
        let c = charts(None, &rows, None);
        assert_eq!(c.means[0].axis, Axis::Numeric);
        assert_eq!(c.means[0].lines[0].1.len(), 1);
    }

    #[test]
    fn the_same_rows_draw_the_same_bytes() {
        let rows = [
            row(0, &[("rate", "2mbit")], 1, "fifo", 1.0),
            row(0, &[("rate", "2mbit")], 2, "fifo", 1.5),
            row(1, &[("rate", "5mbit")], 1, "fifo", 3.0),
            row(1, &[("rate", "5mbit")], 2, "fifo", 3.5),
        ];
        let c = charts(Some("t"), &rows, None);
        let a = crate::plot::render_svg(&c.means[0]).unwrap();
        let b = crate::plot::render_svg(&charts(Some("t"), &rows, None).means[0]).unwrap();
        assert_eq!(a, b);
        // Two error bars, each a circle at the mean.
        assert_eq!(a.matches("<circle").count(), 2);
        assert!(a.contains("rate (Mbit/s)") && a.contains("fifo"));
    }
}
