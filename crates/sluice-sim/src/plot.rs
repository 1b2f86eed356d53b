//! `sluice sim --plot DIR`: each variant's results over time, as SVG and PNG.
//!
//! Per variant, up to three charts, each written as `VARIANT-KIND.svg` and
//! `VARIANT-KIND.png`:
//!
//! - `rtt`: every ping workload's round-trip times against the time each
//!   request was sent (a line through one dot per reply; lost requests leave
//!   gaps between dots);
//! - `throughput`: every flow's goodput per 100 ms bin ([`crate::host::BIN`]),
//!   the same bins the table's goodput is summed from;
//! - `pageload`: every web workload's load times against the time each
//!   load started;
//! - `capacity-LINK_DIR`, for each link direction whose capacity or delay
//!   changes over the run: its capacity per 100 ms (from its trace,
//!   schedule and link events, as the far end receives it) beside the
//!   goodput of every flow it is the narrowest such link for;
//! - `queue-LINK_DIR`: the queueing delay at that link per 100 ms (the
//!   mean time from entering the interface to leaving the wire of the
//!   packets that left in the bin).
//!
//! A chart is only written when the run has something to put on it.
//!
//! The charts are drawn with `plotters` (see `Cargo.toml` for why), once for
//! each backend: SVG text, and an RGB buffer encoded as PNG with `png`. Text
//! in the bitmap is rasterized by ab_glyph from DejaVu Sans, compiled in
//! from the `dejavu` crate, so no system font is needed; the SVG names the
//! `sans-serif` family and leaves rendering to the viewer.

use crate::report::RunResult;
use plotters::chart::MeshStyle;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

/// Series colours (Tableau 10: distinct, and readable on white).
pub(crate) const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// Pixels of every chart.
pub const SIZE: (u32, u32) = (1000, 500);

/// Why plots could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// Creating the directory or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// Drawing failed (a plotters error, as text).
    #[error("drawing {what}: {message}")]
    Draw {
        /// The chart.
        what: String,
        /// plotters' message.
        message: String,
    },
}

/// One chart: named series of `(x, y)` points.
#[derive(Clone, Debug)]
pub struct Chart {
    /// File name stem, e.g. `pfifo_fast-rtt`.
    pub stem: String,
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// `(name, points)`.
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    /// Mark every point with a dot (samples), or only draw lines (bins).
    pub dots: bool,
    /// Also draw each series' moving average over this many points, bold,
    /// with the points themselves faint (noisy bins).
    pub average: Option<usize>,
}

/// The charts of one run (see the module documentation).
pub fn charts(scenario: &str, r: &RunResult) -> Vec<Chart> {
    let stem = file_stem(&r.variant);
    let mut out = vec![];
    let named = |name: &str, s: &[(f64, f64)]| (name.to_string(), s.to_vec());
    if !r.pings.is_empty() {
        out.push(Chart {
            stem: format!("{stem}-rtt"),
            title: format!("{scenario} [{}]: ping round-trip time", r.variant),
            x_label: "time sent (s)".into(),
            y_label: "RTT (ms)".into(),
            series: r.pings.iter().map(|p| named(&p.name, &p.series)).collect(),
            dots: true,
            average: None,
        });
    }
    if !r.flows.is_empty() {
        out.push(Chart {
            stem: format!("{stem}-throughput"),
            title: format!(
                "{scenario} [{}]: goodput per 100 ms (bold: 1 s average)",
                r.variant
            ),
            x_label: "time (s)".into(),
            y_label: "goodput (Mbit/s)".into(),
            series: r
                .flows
                .iter()
                .map(|f| named(&format!("{} {}", f.kind, f.name), &f.series))
                .collect(),
            dots: false,
            average: Some(10),
        });
    }
    for l in &r.links {
        let link = file_stem(&l.name);
        let mut series = vec![named(&format!("capacity {}", l.name), &l.capacity_series)];
        series.extend(
            r.flows
                .iter()
                .filter(|f| f.link.as_ref() == Some(&l.name))
                .map(|f| named(&format!("{} {}", f.kind, f.name), &f.series)),
        );
        out.push(Chart {
            stem: format!("{stem}-capacity-{link}"),
            title: format!(
                "{scenario} [{}]: {} capacity and goodput per 100 ms (bold: 1 s average)",
                r.variant, l.name
            ),
            x_label: "time (s)".into(),
            y_label: "Mbit/s".into(),
            series,
            dots: false,
            average: Some(10),
        });
        if !l.queue_delay_series.is_empty() {
            out.push(Chart {
                stem: format!("{stem}-queue-{link}"),
                title: format!(
                    "{scenario} [{}]: queueing delay at {} per 100 ms (bold: 1 s average)",
                    r.variant, l.name
                ),
                x_label: "time left (s)".into(),
                y_label: "queueing delay (ms)".into(),
                series: vec![named(&l.name, &l.queue_delay_series)],
                dots: false,
                average: Some(10),
            });
        }
    }
    if !r.webs.is_empty() {
        out.push(Chart {
            stem: format!("{stem}-pageload"),
            title: format!("{scenario} [{}]: page-load time", r.variant),
            x_label: "load started (s)".into(),
            y_label: "load time (ms)".into(),
            series: r.webs.iter().map(|w| named(&w.name, &w.series)).collect(),
            dots: true,
            average: None,
        });
    }
    out
}

/// Write every run's charts into `dir` (created if missing); returns the
/// files written.
pub fn write_plots(
    dir: &Path,
    scenario: &str,
    runs: &[RunResult],
) -> Result<Vec<PathBuf>, PlotError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PlotError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut written = vec![];
    for chart in runs.iter().flat_map(|r| charts(scenario, r)) {
        written.extend(write_figure(dir, &chart)?);
    }
    Ok(written)
}

/// Something drawn on one chart-sized area, the same way on either backend:
/// a [`Chart`] here, and the sweep's charts in [`crate::sweep_plot`].
pub(crate) trait Figure {
    /// File name stem.
    fn stem(&self) -> &str;
    /// Draw on `root` (the whole image).
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>;
}

impl Figure for Chart {
    fn stem(&self) -> &str {
        &self.stem
    }

    fn draw_on<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        draw(root, self)
    }
}

/// Write `STEM.svg` and `STEM.png` into `dir` (which must exist); returns
/// their paths.
pub(crate) fn write_figure(dir: &Path, fig: &impl Figure) -> Result<[PathBuf; 2], PlotError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PlotError::Io { path, source }
    };
    let svg_path = dir.join(format!("{}.svg", fig.stem()));
    std::fs::write(&svg_path, render_svg(fig)?).map_err(io(&svg_path))?;
    let png_path = dir.join(format!("{}.png", fig.stem()));
    std::fs::write(&png_path, render_png(fig)?).map_err(io(&png_path))?;
    Ok([svg_path, png_path])
}

/// The chart as an SVG document.
pub fn svg(chart: &Chart) -> Result<String, PlotError> {
    render_svg(chart)
}

/// The chart as a PNG file's bytes.
pub fn png(chart: &Chart) -> Result<Vec<u8>, PlotError> {
    render_png(chart)
}

/// A figure as an SVG document.
pub(crate) fn render_svg(fig: &impl Figure) -> Result<String, PlotError> {
    register_font();
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        fig.draw_on(&root).map_err(|e| draw_error(fig, e))?;
        root.present().map_err(|e| draw_error(fig, e))?;
    }
    Ok(text)
}

/// A figure as a PNG file's bytes.
pub(crate) fn render_png(fig: &impl Figure) -> Result<Vec<u8>, PlotError> {
    register_font();
    let (w, h) = SIZE;
    let mut rgb = vec![0u8; (w * h * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
        fig.draw_on(&root).map_err(|e| draw_error(fig, e))?;
        root.present().map_err(|e| draw_error(fig, e))?;
    }
    let mut out = vec![];
    let mut enc = ::png::Encoder::new(&mut out, w, h);
    enc.set_color(::png::ColorType::Rgb);
    enc.set_depth(::png::BitDepth::Eight);
    let encoded = enc
        .write_header()
        .and_then(|mut wr| wr.write_image_data(&rgb));
    encoded.map_err(|e| PlotError::Draw {
        what: fig.stem().to_string(),
        message: format!("PNG encoding: {e}"),
    })?;
    Ok(out)
}

fn draw_error(fig: &impl Figure, e: impl std::fmt::Display) -> PlotError {
    PlotError::Draw {
        what: fig.stem().to_string(),
        message: e.to_string(),
    }
}

/// Text is laid out with ab_glyph for both backends; it needs the font
/// registered once per process.
pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // DejaVu Sans is a valid font; if registration failed anyway, text
        // would be missing and drawing would report it.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// A variant's name as a file name: letters, digits, `-`, `_`, `.`.
pub(crate) fn file_stem(variant: &str) -> String {
    let s: String = variant
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("_{s}")
    } else {
        s
    }
}

/// The mean of the `n` points up to each point (a trailing moving average).
fn moving_average(points: &[(f64, f64)], n: usize) -> Vec<(f64, f64)> {
    let n = n.max(1);
    let mut sum = 0.0;
    points
        .iter()
        .enumerate()
        .map(|(i, &(x, y))| {
            sum += y;
            if i >= n {
                sum -= points[i - n].1;
            }
            (x, sum / (i + 1).min(n) as f64)
        })
        .collect()
}

/// Tick labels with as many decimals as the axis' span needs.
pub(crate) fn tick_format(span: f64) -> impl Fn(&f64) -> String {
    let decimals = if span >= 20.0 {
        0
    } else if span >= 2.0 {
        1
    } else {
        2
    };
    move |v: &f64| format!("{v:.decimals$}")
}

/// Axis ranges covering every point, from zero, with a little headroom.
fn ranges(chart: &Chart) -> (std::ops::Range<f64>, std::ops::Range<f64>) {
    let points = || chart.series.iter().flat_map(|(_, s)| s.iter());
    let x_max = points().map(|p| p.0).fold(0.0, f64::max);
    let y_max = points().map(|p| p.1).fold(0.0, f64::max);
    let x_max = if x_max > 0.0 { x_max * 1.02 } else { 1.0 };
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    (0.0..x_max, 0.0..y_max)
}

/// The coordinates of every chart: `f64` on both axes.
pub(crate) type Xy = Cartesian2d<RangedCoordf64, RangedCoordf64>;

/// A chart's plotting area on `root`, as every chart has it: a white
/// image, the font, the caption and the axis areas.
pub(crate) fn chart_on<'a, DB: DrawingBackend + 'a>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<ChartContext<'a, DB, Xy>, DrawingAreaErrorKind<DB::ErrorType>> {
    register_font();
    root.fill(&WHITE)?;
    // Even font sizes: plotters' ab_glyph rasterizer rounds half a pixel
    // the wrong way for odd ones and draws '.' and ',' too high.
    ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x, y)
}

/// The mesh of a [`chart_on`] chart with its axis descriptions, styled as
/// every chart's; the caller adds label formatters and draws it.
pub(crate) fn mesh<'a, 'b, DB: DrawingBackend>(
    ctx: &'b mut ChartContext<'a, DB, Xy>,
    x_desc: &str,
    y_desc: &str,
) -> MeshStyle<'a, 'b, RangedCoordf64, RangedCoordf64, DB> {
    let mut m = ctx.configure_mesh();
    m.x_desc(x_desc)
        .y_desc(y_desc)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .light_line_style(RGBColor(238, 238, 238));
    m
}

/// Colour `i` of the palette.
pub(crate) fn color(i: usize) -> RGBAColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b).to_rgba()
}

/// A legend entry: a short thick line in `c`.
pub(crate) fn legend_line(c: RGBAColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3))
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (xr, yr) = ranges(chart);
    let (x_span, y_span) = (xr.end, yr.end);
    let mut ctx = chart_on(root, &chart.title, xr, yr)?;
    mesh(&mut ctx, &chart.x_label, &chart.y_label)
        .x_label_formatter(&tick_format(x_span))
        .y_label_formatter(&tick_format(y_span))
        .draw()?;
    for (i, (name, points)) in chart.series.iter().enumerate() {
        let color = color(i);
        let faint = if chart.average.is_some() {
            color.mix(0.35)
        } else {
            color
        };
        let lines = ctx.draw_series(LineSeries::new(
            points.iter().copied(),
            faint.stroke_width(1),
        ))?;
        let mut labelled = lines;
        if let Some(n) = chart.average {
            let avg = moving_average(points, n);
            labelled = ctx.draw_series(LineSeries::new(avg, color.stroke_width(3)))?;
        }
        labelled.label(name.as_str()).legend(legend_line(color));
        if chart.dots {
            ctx.draw_series(points.iter().map(|&p| Circle::new(p, 2, color.filled())))?;
        }
    }
    if chart.series.iter().any(|(n, _)| !n.is_empty()) {
        legend(&mut ctx, SeriesLabelPosition::UpperRight)?;
    }
    Ok(())
}

/// The series' legend in `corner`, as every chart draws it.
pub(crate) fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    ctx: &mut ChartContext<'a, DB, CT>,
    corner: SeriesLabelPosition,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    ctx.configure_series_labels()
        .position(corner)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 14))
        .draw()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_become_safe_file_names() {
        assert_eq!(file_stem("pfifo_fast"), "pfifo_fast");
        assert_eq!(file_stem("a/b c"), "a_b_c");
        assert_eq!(file_stem(".."), "_..");
        assert_eq!(file_stem(""), "_");
    }

    #[test]
    fn the_moving_average_trails_over_n_points() {
        let pts: Vec<(f64, f64)> = [2.0, 4.0, 6.0, 8.0]
            .iter()
            .enumerate()
            .map(|(i, y)| (i as f64, *y))
            .collect();
        let avg: Vec<f64> = moving_average(&pts, 2).iter().map(|p| p.1).collect();
        assert_eq!(avg, vec![2.0, 3.0, 5.0, 7.0]);
        assert_eq!(tick_format(450.0)(&437.5), "438");
        assert_eq!(tick_format(10.0)(&2.5), "2.5");
    }

    #[test]
    fn both_backends_draw_a_chart() {
        let chart = Chart {
            stem: "t".into(),
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![("a".into(), vec![(0.0, 1.0), (1.0, 2.0), (2.0, 1.5)])],
            dots: true,
            average: None,
        };
        let s = svg(&chart).unwrap();
        assert_eq!(s.matches("<circle").count(), 3);
        let p = png(&chart).unwrap();
        assert_eq!(&p[1..4], b"PNG");
    }
}
