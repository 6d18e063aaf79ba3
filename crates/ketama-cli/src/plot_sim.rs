//! `migrate-plan --simulate --chart`: origin fetches per window of
//! requests after the warm-up, for the schedule against a one-shot switch
//! (and each with and without filling from the previous owner), with the
//! steady state and each step's start marked. SVG or PNG by the file's
//! extension.

use std::path::Path;

use anyhow::{bail, Context as _};
use ketama::analysis::cache_sim::SimReport;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::plot::{err, font, FONT};

/// One line of the chart.
pub struct Series<'a> {
    /// Its legend.
    pub label: String,
    /// The simulation it draws.
    pub report: &'a SimReport,
    /// Dashed lines are the one-shot switch.
    pub dashed: bool,
    /// Its color.
    pub color: RGBColor,
}

const SIZE: (u32, u32) = (960, 540);

/// The chart's format, from its file name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `.svg`
    Svg,
    /// `.png`
    Png,
}

/// Checks `--chart`'s file name before anything is simulated.
pub fn format_of(path: &Path) -> anyhow::Result<Format> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => Ok(Format::Svg),
        Some("png") => Ok(Format::Png),
        _ => bail!(
            "--chart {}: name the file .svg or .png (the extension picks the format)",
            path.display()
        ),
    }
}

/// Writes the chart to `path` (`.svg` or `.png`).
pub fn write_chart(path: &Path, title: &str, window: u64, series: &[Series]) -> anyhow::Result<()> {
    font()?;
    let write = |e: anyhow::Error| e.context(format!("--chart {}: cannot write", path.display()));
    match format_of(path)? {
        Format::Svg => {
            let mut svg = String::new();
            draw(
                SVGBackend::with_string(&mut svg, SIZE).into_drawing_area(),
                title,
                window,
                series,
            )?;
            std::fs::write(path, svg)
                .with_context(|| format!("--chart {}: cannot write", path.display()))
        }
        Format::Png => {
            let root = BitMapBackend::new(path, SIZE).into_drawing_area();
            draw(root, title, window, series).map_err(write)
        }
    }
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    window: u64,
    series: &[Series],
) -> anyhow::Result<()> {
    let Some(first) = series.first() else {
        bail!("nothing to chart");
    };
    if first.report.windows.is_empty() {
        bail!("nothing to chart: no request after the warm-up (give a longer trace or a shorter --warmup)");
    }
    let x_of = |i: usize| (i as u64 * window) as f64;
    let x1 = series
        .iter()
        .map(|s| x_of(s.report.windows.len()))
        .fold(1.0, f64::max);
    let steady = first.report.steady_window.unwrap_or(0) as f64;
    let y1 = series
        .iter()
        .flat_map(|s| s.report.windows.iter().map(|w| w.origin_fetches as f64))
        .fold(steady, f64::max)
        .max(1.0)
        * 1.12;
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, (FONT, 17))
        .margin(15)
        .margin_right(30)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x1, 0.0..y1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("requests after the warm-up")
        .y_desc(format!("origin fetches per {window} requests"))
        .x_label_formatter(&|v| short(*v))
        .y_label_formatter(&|v| format!("{:.0}", v))
        .label_style((FONT, 13))
        .draw()
        .map_err(err)?;
    // Where each step of the schedule began, with its share.
    let mut last = None;
    for (i, w) in first.report.windows.iter().enumerate() {
        if last == Some(w.step) || first.report.steps.len() < 2 {
            continue;
        }
        last = Some(w.step);
        let x = x_of(i);
        chart
            .draw_series(std::iter::once(PathElement::new(
                [(x, 0.0), (x, y1)],
                BLACK.mix(0.2).stroke_width(1),
            )))
            .map_err(err)?;
        let bp = first.report.steps[w.step].bp;
        chart
            .draw_series(std::iter::once(Text::new(
                format!(" {}%", bp as f64 / 100.0),
                (x, y1 * 0.04),
                (FONT, 11),
            )))
            .map_err(err)?;
    }
    for s in series {
        // One point per window, drawn at the window's end.
        let points: Vec<(f64, f64)> = s
            .report
            .windows
            .iter()
            .enumerate()
            .map(|(i, w)| (x_of(i + 1), w.origin_fetches as f64))
            .collect();
        let style = s.color.stroke_width(2);
        let anno = if s.dashed {
            chart.draw_series(DashedLineSeries::new(points, 6, 4, style))
        } else {
            chart.draw_series(LineSeries::new(points, style))
        }
        .map_err(err)?;
        let dashed = s.dashed;
        anno.label(s.label.clone()).legend(move |(x, y)| {
            if dashed {
                PathElement::new([(x, y), (x + 10, y)], style)
            } else {
                PathElement::new([(x, y), (x + 24, y)], style)
            }
        });
    }
    // Drawn last, over the fill lines that run along it.
    if steady > 0.0 {
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, steady), (x1, steady)],
                8,
                4,
                BLACK.stroke_width(2),
            ))
            .map_err(err)?
            .label("steady state (the warm-up's last window)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 24, y)], BLACK.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// An axis number short enough not to be clipped: 6M, 250k, 900.
fn short(v: f64) -> String {
    if v.abs() >= 1e6 {
        format!("{}M", (v / 1e5).round() / 10.0)
    } else if v.abs() >= 1e3 {
        format!("{}k", (v / 1e2).round() / 10.0)
    } else {
        format!("{v:.0}")
    }
}
