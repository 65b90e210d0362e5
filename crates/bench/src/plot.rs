//! The plots: for each workload measured along an axis (Figure 5's read ratio, Table 2's
//! workers, Table 3's clients, Table 1's recipes), its rate and its p99 latency, one line per
//! server.
//!
//! plotters draws text with ab_glyph from a TrueType file read at run time (no fontconfig, no
//! font compiled in): `ZOOLOG_BENCH_FONT`, else DejaVu Sans or Liberation Sans where Debian puts
//! them. Without any of those the plot is written as SVG, whose text the viewer draws.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::report::format_number;
use crate::stats::{Measurement, Workload};

const FONT_FAMILY: &str = "sans-serif";
const FONT_CANDIDATES: [&str; 3] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
];
const IMAGE_SIZE: (u32, u32) = (1200, 500);
const SERIES_COLOURS: [RGBColor; 4] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
];

/// One line of a panel: a server's (x, value) points, in x order.
struct Series {
    server: String,
    points: Vec<(f64, f64)>,
}

/// How a workload's image reads: the rate panel's title, the x axis, and how a point's `x`
/// becomes a position on it.
struct Axes {
    title: &'static str,
    x_label: &'static str,
    /// Multiplies `x` (read ratios are drawn in %).
    x_scale: f64,
    /// Names the ticks by the points' names (recipes: `x` is only an index).
    categorical: bool,
}

/// The workloads plotted, with their axes. Leader-kill is one number per server: no plot.
fn axes(workload: Workload) -> Option<Axes> {
    let (title, x_label, x_scale, categorical) = match workload {
        Workload::Throughput => (
            "Throughput of a saturated server",
            "read requests (%)",
            100.0,
            false,
        ),
        Workload::Creates => ("Synchronous creates", "synchronous workers", 1.0, false),
        Workload::Barrier => ("Double barriers", "clients per barrier", 1.0, false),
        Workload::Recipes => ("Recipe operations", "recipe", 1.0, true),
        Workload::LeaderKill => return None,
    };
    Some(Axes {
        title,
        x_label,
        x_scale,
        categorical,
    })
}

/// Writes `<workload>.png` (or `.svg` without a font) into `out_dir` for every plotted
/// workload that has measured points: its rate and its p99 latency, one line per server.
/// Returns the paths written.
pub fn write_plots(out_dir: &Path, results: &[Measurement]) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    for workload in Workload::EVERY {
        let Some(axes) = axes(workload) else {
            continue;
        };
        let rows: Vec<&Measurement> = results
            .iter()
            .filter(|row| row.workload == workload && row.operations > 0)
            .collect();
        if !rows.is_empty() {
            written.push(write_plot(out_dir, workload, &axes, &rows)?);
        }
    }
    Ok(written)
}

fn write_plot(
    out_dir: &Path,
    workload: Workload,
    axes: &Axes,
    rows: &[&Measurement],
) -> Result<PathBuf, String> {
    let figure = Figure {
        axes,
        rate: series_of(rows, axes.x_scale, |row| Some(row.rate_per_s())),
        p99: series_of(rows, axes.x_scale, |row| row.latency.p99_ms),
        tick_names: match axes.categorical {
            true => rows
                .iter()
                .map(|row| (row.x * axes.x_scale, row.point.clone()))
                .collect(),
            false => Vec::new(),
        },
        rate_label: format!("{}/s", workload.unit()),
    };
    let has_font = font_registered();
    let extension = if has_font { "png" } else { "svg" };
    let path = out_dir.join(format!("{}.{extension}", workload.name()));
    if has_font {
        figure.draw(&BitMapBackend::new(&path, IMAGE_SIZE).into_drawing_area())?;
    } else {
        figure.draw(&SVGBackend::new(&path, IMAGE_SIZE).into_drawing_area())?;
    }
    Ok(path)
}

/// What one image shows: the rate panel and the p99 panel of one workload.
struct Figure<'a> {
    axes: &'a Axes,
    rate: Vec<Series>,
    p99: Vec<Series>,
    /// For a categorical axis: each position and its name.
    tick_names: Vec<(f64, String)>,
    rate_label: String,
}

fn series_of(
    rows: &[&Measurement],
    x_scale: f64,
    value: impl Fn(&Measurement) -> Option<f64>,
) -> Vec<Series> {
    let mut servers: Vec<&str> = rows.iter().map(|row| row.server.as_str()).collect();
    servers.dedup();
    servers
        .into_iter()
        .map(|server| {
            let mut points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|row| row.server == server)
                .filter_map(|row| value(row).map(|value| (row.x * x_scale, value)))
                .collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Series {
                server: server.to_string(),
                points,
            }
        })
        .collect()
}

/// Registers the first readable candidate font once per process.
fn font_registered() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        let from_environment = std::env::var("ZOOLOG_BENCH_FONT").ok();
        let mut candidates: Vec<String> = from_environment.into_iter().collect();
        candidates.extend(FONT_CANDIDATES.map(String::from));
        candidates
            .iter()
            .filter_map(|path| std::fs::read(path).ok())
            .any(|bytes| {
                // plotters keeps fonts for the life of the process; one font is leaked, once.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, bytes).is_ok()
            })
    })
}

impl Figure<'_> {
    fn draw<Backend: DrawingBackend>(
        &self,
        root: &DrawingArea<Backend, Shift>,
    ) -> Result<(), String> {
        root.fill(&WHITE).map_err(|error| error.to_string())?;
        let (left, right) = root.split_horizontally(IMAGE_SIZE.0 / 2);
        self.draw_panel(&left, self.axes.title, &self.rate_label, &self.rate)?;
        self.draw_panel(&right, "p99 latency", "ms", &self.p99)?;
        root.present().map_err(|error| error.to_string())
    }

    /// The x range: every point's x, with room around the outermost ones.
    fn x_range(&self) -> std::ops::Range<f64> {
        let xs = self
            .rate
            .iter()
            .flat_map(|line| line.points.iter().map(|point| point.0));
        let (low, high) = xs.fold((f64::MAX, f64::MIN), |(low, high), x| {
            (low.min(x), high.max(x))
        });
        assert!(low <= high, "a figure has at least one point");
        let margin = ((high - low) * 0.05).max(0.5);
        (low - margin)..(high + margin)
    }

    /// A tick's text: the point's name on a categorical axis (none between points), else
    /// the number.
    fn x_tick(&self, x: f64) -> String {
        if !self.axes.categorical {
            return format!("{x:.0}");
        }
        self.tick_names
            .iter()
            .find(|(position, _)| (position - x).abs() < 1e-9)
            .map(|(_, name)| name.clone())
            .unwrap_or_default()
    }

    fn draw_panel<Backend: DrawingBackend>(
        &self,
        area: &DrawingArea<Backend, Shift>,
        title: &str,
        y_label: &str,
        series: &[Series],
    ) -> Result<(), String> {
        let y_max = series
            .iter()
            .flat_map(|line| line.points.iter().map(|point| point.1))
            .fold(0.0, f64::max)
            * 1.1;
        let x_range = self.x_range();
        let mut chart = ChartBuilder::on(area)
            .caption(title, (FONT_FAMILY, 22))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(90)
            .build_cartesian_2d(x_range.clone(), 0.0..y_max.max(1.0))
            .map_err(|error| error.to_string())?;
        let x_tick = |x: &f64| self.x_tick(*x);
        let y_tick = |value: &f64| format_number(*value);
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(self.axes.x_label)
            .y_desc(y_label)
            .x_label_formatter(&x_tick)
            .y_label_formatter(&y_tick)
            .label_style((FONT_FAMILY, 14));
        if self.axes.categorical {
            // One tick per whole position, so that every point's name shows.
            mesh.x_labels((x_range.end - x_range.start).ceil() as usize + 1);
        }
        mesh.draw().map_err(|error| error.to_string())?;
        for (index, line) in series.iter().enumerate() {
            let colour = SERIES_COLOURS[index % SERIES_COLOURS.len()];
            chart
                .draw_series(LineSeries::new(
                    line.points.iter().copied(),
                    colour.stroke_width(2),
                ))
                .map_err(|error| error.to_string())?
                .label(line.server.as_str())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            chart
                .draw_series(
                    line.points
                        .iter()
                        .map(|&point| Circle::new(point, 4, colour.filled())),
                )
                .map_err(|error| error.to_string())?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font((FONT_FAMILY, 14))
            .draw()
            .map_err(|error| error.to_string())
    }
}
