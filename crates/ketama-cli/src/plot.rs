//! Charts as standalone SVG files, drawn with `plotters`.
//!
//! plotters lays text out with real font metrics, so a chart needs a
//! TrueType font: the first of a few common system fonts found is used
//! (Debian: `fonts-dejavu-core`); without one, `--plot` is an error that
//! says what to install.

use std::sync::OnceLock;

use anyhow::{anyhow, bail};
use ketama::analysis::SweepRow;
use ketama::Compat;
use plotters::prelude::*;

const FONT: &str = "sans-serif";

/// System fonts tried, in order.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/freefont/FreeSans.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
];

/// Registers a system font with plotters once.
fn font() -> anyhow::Result<()> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let candidates = std::env::var("KETAMA_PLOT_FONT")
                .into_iter()
                .chain(FONT_PATHS.iter().map(|s| s.to_string()));
            for path in candidates {
                if let Ok(bytes) = std::fs::read(&path) {
                    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                    if plotters::style::register_font(FONT, FontStyle::Normal, bytes).is_ok() {
                        return Ok(());
                    }
                }
            }
            Err(format!(
                "drawing a chart needs a TrueType font and none was found ({}); install one (Debian: apt-get install fonts-dejavu-core) or set KETAMA_PLOT_FONT to a .ttf file",
                FONT_PATHS.join(", ")
            ))
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("cannot draw the chart: {e:?}")
}

/// Smallest and largest of finite positive values (for log axes), padded
/// to whole powers of ten.
fn log_bounds(values: impl Iterator<Item = f64>) -> anyhow::Result<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for v in values.filter(|v| v.is_finite() && *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        bail!("nothing to plot: no positive value");
    }
    let lo = 10f64.powf(lo.log10().floor());
    let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
    Ok((lo, hi))
}

/// The sweep chart: predicted CV as a curve, measured CV as points with
/// their spread (min to max over the trials) as bars, both axes log.
pub fn sweep_svg(
    rows: &[SweepRow],
    nodes: usize,
    trials: u32,
    compat: Compat,
) -> anyhow::Result<String> {
    font()?;
    let (x0, x1) = log_bounds(rows.iter().map(|r| r.points_per_node as f64))?;
    let (y0, y1) = log_bounds(
        rows.iter()
            .flat_map(|r| [r.predicted_cv, r.measured_cv_min, r.measured_cv_max]),
    )?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (820, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("Coefficient of variation of a server's share, N = {nodes} ({compat}, {trials} trials)"),
                (FONT, 17),
            )
            .margin(15)
            .margin_right(40)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("points per server (k), log scale")
            .y_desc("CV, log scale")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y}"))
            .label_style((FONT, 13))
            .draw()
            .map_err(err)?;
        let n = nodes as f64;
        let curve = (0..=200).map(|i| {
            let k = 10f64.powf(x0.log10() + (x1.log10() - x0.log10()) * i as f64 / 200.0);
            (k, ((n - 1.0) / (n * k + 1.0)).sqrt())
        });
        chart
            .draw_series(LineSeries::new(curve, BLUE.stroke_width(2)))
            .map_err(err)?
            .label("predicted sqrt((N-1)/(N k+1))")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 24, y)], BLUE.stroke_width(2)));
        let measured: Vec<&SweepRow> = rows
            .iter()
            .filter(|r| r.measured_cv_mean.is_finite() && r.measured_cv_mean > 0.0)
            .collect();
        chart
            .draw_series(measured.iter().filter_map(|r| {
                let (lo, hi) = (r.measured_cv_min, r.measured_cv_max);
                (lo.is_finite() && hi.is_finite() && lo > 0.0).then(|| {
                    let x = r.points_per_node as f64;
                    PathElement::new([(x, lo), (x, hi)], RED.stroke_width(2))
                })
            }))
            .map_err(err)?;
        chart
            .draw_series(measured.iter().map(|r| {
                Circle::new(
                    (r.points_per_node as f64, r.measured_cv_mean),
                    4,
                    RED.filled(),
                )
            }))
            .map_err(err)?
            .label("measured (mean, min to max)")
            .legend(|(x, y)| Circle::new((x + 12, y), 4, RED.filled()));
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font((FONT, 13))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
