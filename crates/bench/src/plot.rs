//! The Figure 5 plot: throughput and p99 latency against the read ratio, one line per server.
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

/// One line of the plot: a server's (read ratio in %, value) points, in read-ratio order.
struct Series {
    server: String,
    points: Vec<(f64, f64)>,
}

/// Writes `throughput.png` (or `.svg` without a font) into `out_dir`; returns its path, or
/// `None` when there is nothing to plot.
pub fn write_throughput_plot(
    out_dir: &Path,
    results: &[Measurement],
) -> Result<Option<PathBuf>, String> {
    let rows: Vec<&Measurement> = results
        .iter()
        .filter(|row| row.workload == Workload::Throughput && row.operations > 0)
        .collect();
    if rows.is_empty() {
        return Ok(None);
    }
    let throughput = series_of(&rows, |row| Some(row.rate_per_s()));
    let p99 = series_of(&rows, |row| row.latency.p99_ms);
    let has_font = font_registered();
    let path = out_dir.join(if has_font {
        "throughput.png"
    } else {
        "throughput.svg"
    });
    if has_font {
        draw(
            &BitMapBackend::new(&path, IMAGE_SIZE).into_drawing_area(),
            &throughput,
            &p99,
        )?;
    } else {
        draw(
            &SVGBackend::new(&path, IMAGE_SIZE).into_drawing_area(),
            &throughput,
            &p99,
        )?;
    }
    Ok(Some(path))
}

fn series_of(rows: &[&Measurement], value: impl Fn(&Measurement) -> Option<f64>) -> Vec<Series> {
    let mut servers: Vec<&str> = rows.iter().map(|row| row.server.as_str()).collect();
    servers.dedup();
    servers
        .into_iter()
        .map(|server| {
            let mut points: Vec<(f64, f64)> = rows
                .iter()
                .filter(|row| row.server == server)
                .filter_map(|row| value(row).map(|value| (row.x * 100.0, value)))
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

fn draw<Backend: DrawingBackend>(
    root: &DrawingArea<Backend, Shift>,
    throughput: &[Series],
    p99: &[Series],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(|error| error.to_string())?;
    let (left, right) = root.split_horizontally(IMAGE_SIZE.0 / 2);
    draw_panel(
        &left,
        "Throughput of a saturated server",
        "operations/s",
        throughput,
    )?;
    draw_panel(&right, "p99 latency", "ms", p99)?;
    root.present().map_err(|error| error.to_string())
}

fn draw_panel<Backend: DrawingBackend>(
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
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT_FAMILY, 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(90)
        .build_cartesian_2d(0.0..100.0, 0.0..y_max.max(1.0))
        .map_err(|error| error.to_string())?;
    chart
        .configure_mesh()
        .x_desc("read requests (%)")
        .y_desc(y_label)
        .x_label_formatter(&|percent| format!("{percent:.0}"))
        .y_label_formatter(&|value| format_number(*value))
        .label_style((FONT_FAMILY, 14))
        .draw()
        .map_err(|error| error.to_string())?;
    for (index, line) in series.iter().enumerate() {
        let colour = SERIES_COLOURS[index % SERIES_COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                line.points.iter().copied(),
                colour.stroke_width(2),
            ))
            .map_err(|error| error.to_string())?
            .label(line.server.as_str())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2)));
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
