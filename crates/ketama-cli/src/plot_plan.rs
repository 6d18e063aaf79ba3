//! A rollout plan's run as a chart: each check's hit ratio per ring
//! version in the scopes it judged (left axis) and the fleet's origin
//! requests per second (right axis), against seconds since the plan
//! began, with each step's share written where it was applied.

use anyhow::bail;
use ketama_fleet::plan::{PlanSpec, PlanState};
use plotters::prelude::*;

use crate::plot::{err, font, FONT};

/// The chart of `state`'s checks (`ketama fleet plan status --chart`).
pub fn plan_svg(spec: &PlanSpec, state: &PlanState) -> anyhow::Result<String> {
    font()?;
    if state.checks.is_empty() {
        bail!("nothing to chart: the plan has no check yet");
    }
    let t = |ms: u64| ms.saturating_sub(state.started_ms) as f64 / 1000.0;
    let x1 = state.checks.iter().map(|c| t(c.at_ms)).fold(1.0, f64::max) * 1.02;
    let rps_max = state
        .checks
        .iter()
        .map(|c| c.figures.origin_rps)
        .fold(1.0, f64::max)
        * 1.15;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "Rollout plan, {}: hit ratio by ring and origin requests/s",
                    state.status.name()
                ),
                (FONT, 17),
            )
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .right_y_label_area_size(70)
            .build_cartesian_2d(0.0..x1, 0.0..105.0)
            .map_err(err)?
            .set_secondary_coord(0.0..x1, 0.0..rps_max);
        chart
            .configure_mesh()
            .x_desc("seconds since the plan began")
            .y_desc("hit ratio in the judged scopes (%)")
            .label_style((FONT, 13))
            .draw()
            .map_err(err)?;
        chart
            .configure_secondary_axes()
            .y_desc("origin requests/s, whole fleet")
            .label_style((FONT, 13))
            .draw()
            .map_err(err)?;
        for (ring, color) in [
            ("only", BLACK),
            ("old", BLUE),
            ("new", RGBColor(230, 120, 0)),
        ] {
            let points: Vec<(f64, f64)> = state
                .checks
                .iter()
                .filter_map(|c| {
                    c.figures
                        .ring_hit_ratio
                        .get(ring)
                        .map(|r| (t(c.at_ms), r * 100.0))
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
                .map_err(err)?
                .label(format!("{ring} ring hit ratio"))
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 24, y)], color.stroke_width(2))
                });
            chart
                .draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(err)?;
        }
        let rps: Vec<(f64, f64)> = state
            .checks
            .iter()
            .map(|c| (t(c.at_ms), c.figures.origin_rps))
            .collect();
        chart
            .draw_secondary_series(LineSeries::new(rps, RED.mix(0.7).stroke_width(1)))
            .map_err(err)?
            .label("origin requests/s (right axis)")
            .legend(|(x, y)| PathElement::new([(x, y), (x + 24, y)], RED.mix(0.7).stroke_width(1)));
        // Each step's first check, labelled with its share.
        let mut last = None;
        for c in &state.checks {
            if last == Some((c.stage, c.step)) {
                continue;
            }
            last = Some((c.stage, c.step));
            let bp = spec.stages[c.stage].steps_bp[c.step];
            let x = t(c.at_ms);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    [(x, 0.0), (x, 100.0)],
                    BLACK.mix(0.2).stroke_width(1),
                )))
                .map_err(err)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!(
                        "{} {}%",
                        spec.stages[c.stage].scopes.join(","),
                        bp as f64 / 100.0
                    ),
                    (x, 103.0),
                    (FONT, 11),
                )))
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font((FONT, 13))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}
