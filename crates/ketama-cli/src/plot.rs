//! Charts as standalone SVG files, drawn with `plotters`.
//!
//! plotters lays text out with real font metrics, so a chart needs a
//! TrueType font: the first of a few common system fonts found is used
//! (Debian: `fonts-dejavu-core`); without one, `--plot` is an error that
//! says what to install.

use std::sync::OnceLock;

use anyhow::{anyhow, bail};
use ketama::analysis::SweepRow;
use ketama::Scheme;
use plotters::prelude::*;

pub(crate) const FONT: &str = "sans-serif";

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
pub(crate) fn font() -> anyhow::Result<()> {
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

pub(crate) fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
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
    compat: Scheme,
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

/// The bounded-loads trade-off: max load / average (left axis) and the
/// share of requests served by their key's own node (right axis) against
/// the balance factor; plain consistent hashing (`off`) as dashed
/// horizontal lines, the bound `c` itself as a thin diagonal.
pub fn balance_svg(
    outcomes: &[ketama::analysis::simulate::Outcome],
    serving: usize,
    w: &ketama::analysis::simulate::Workload,
) -> anyhow::Result<String> {
    font()?;
    let bounded: Vec<(f64, &ketama::analysis::simulate::Outcome)> = outcomes
        .iter()
        .filter_map(|o| o.balance.map(|f| (f.percent() as f64 / 100.0, o)))
        .collect();
    let plain = outcomes.iter().find(|o| o.balance.is_none());
    if bounded.is_empty() {
        bail!(
            "nothing to plot: --plot charts balance factors, and --balance lists none (only off)"
        );
    }
    let x0 = bounded.iter().map(|b| b.0).fold(f64::INFINITY, f64::min);
    let x1 = bounded.iter().map(|b| b.0).fold(0.0, f64::max);
    let (x0, x1) = (x0 - 0.05, (x1 + 0.05).max(x0 + 0.2));
    let y_max = bounded
        .iter()
        .map(|b| b.1.max_over_avg.max(b.0))
        .chain(plain.map(|p| p.max_over_avg))
        .fold(1.0, f64::max)
        * 1.08;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (820, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let keys = match &w.trace {
            Some(_) => "trace".to_string(),
            None => format!("Zipf s = {} over {} keys", w.zipf, w.population),
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "Bounded loads: {serving} servers, {} in flight, {keys}",
                    w.concurrency
                ),
                (FONT, 17),
            )
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .right_y_label_area_size(70)
            .build_cartesian_2d(x0..x1, 0.0..y_max)
            .map_err(err)?
            .set_secondary_coord(x0..x1, 0.0..100.0);
        chart
            .configure_mesh()
            .x_desc("balance factor c")
            .y_desc("max load / average load")
            .x_label_formatter(&|x| format!("{x:.2}"))
            .y_label_formatter(&|y| format!("{y:.1}"))
            .label_style((FONT, 13))
            .draw()
            .map_err(err)?;
        chart
            .configure_secondary_axes()
            .y_desc("requests served by their key's own server (%)")
            .label_style((FONT, 13))
            .draw()
            .map_err(err)?;
        chart
            .draw_series(LineSeries::new(
                [(x0, x0), (x1, x1)],
                BLACK.mix(0.3).stroke_width(1),
            ))
            .map_err(err)?
            .label("the bound c")
            .legend(|(x, y)| {
                PathElement::new([(x, y), (x + 24, y)], BLACK.mix(0.3).stroke_width(1))
            });
        let load: Vec<(f64, f64)> = bounded.iter().map(|(c, o)| (*c, o.max_over_avg)).collect();
        chart
            .draw_series(LineSeries::new(load.clone(), RED.stroke_width(2)))
            .map_err(err)?
            .label("max load / average")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 24, y)], RED.stroke_width(2)));
        chart
            .draw_series(load.iter().map(|&p| Circle::new(p, 4, RED.filled())))
            .map_err(err)?;
        let own: Vec<(f64, f64)> = bounded
            .iter()
            .map(|(c, o)| (*c, o.own_node_share * 100.0))
            .collect();
        chart
            .draw_secondary_series(LineSeries::new(own.clone(), BLUE.stroke_width(2)))
            .map_err(err)?
            .label("own-server share (right axis)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 24, y)], BLUE.stroke_width(2)));
        chart
            .draw_secondary_series(own.iter().map(|&p| Circle::new(p, 4, BLUE.filled())))
            .map_err(err)?;
        if let Some(p) = plain {
            let dashed = |y: f64| {
                let steps = 40;
                (0..steps).filter(|i| i % 2 == 0).map(move |i| {
                    let a = x0 + (x1 - x0) * i as f64 / steps as f64;
                    let b = x0 + (x1 - x0) * (i + 1) as f64 / steps as f64;
                    PathElement::new([(a, y), (b, y)], RED.mix(0.6).stroke_width(1))
                })
            };
            chart
                .draw_series(dashed(p.max_over_avg))
                .map_err(err)?
                .label(format!(
                    "off: max load {:.2} x average, own server 100%",
                    p.max_over_avg
                ))
                .legend(|(x, y)| {
                    PathElement::new([(x, y), (x + 10, y)], RED.mix(0.6).stroke_width(1))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font((FONT, 13))
            .position(SeriesLabelPosition::MiddleRight)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
