//! A rollout plan's run as a chart: each check's hit ratio per ring
//! version in the scopes it judged (left axis) and the fleet's origin
//! requests per second (right axis), against seconds since the plan
//! began, with each step's share written where it was applied, what the
//! checks compared with (the baseline, or unmoved against moved keys) and
//! the guards' limits as dashed lines; a check without a figure breaks its
//! line.

use anyhow::bail;
use ketama_fleet::plan::{CompareWith, PlanSpec, PlanState};
use plotters::prelude::*;

use crate::plot::{err, font, FONT};

/// The chart of `state`'s checks (`ketama fleet plan status --chart`).
pub fn plan_svg(spec: &PlanSpec, state: &PlanState) -> anyhow::Result<String> {
    font()?;
    if state.checks().is_empty() {
        bail!("nothing to chart: the plan has no check yet");
    }
    let t = |ms: u64| ms.saturating_sub(state.started_ms()) as f64 / 1000.0;
    let x1 = state
        .checks()
        .iter()
        .map(|c| t(c.at_ms))
        .fold(1.0, f64::max)
        * 1.02;
    let rps_max = state
        .checks()
        .iter()
        .map(|c| c.figures.origin_rps)
        .fold(spec.guards.max_origin_rps.unwrap_or(1.0), f64::max)
        * 1.15;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!(
                    "Rollout plan, {}: hit ratio by ring and origin requests/s",
                    state.status().name()
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
            // A check without this ring's figure breaks its line: no line
            // is drawn across checks that measured nothing.
            let runs = runs(state.checks().iter().map(|c| {
                c.figures
                    .ring_hit_ratio
                    .get(ring)
                    .map(|r| (t(c.at_ms), r * 100.0))
            }));
            for (i, run) in runs.iter().enumerate() {
                let line = chart
                    .draw_series(LineSeries::new(run.clone(), color.stroke_width(2)))
                    .map_err(err)?;
                if i == 0 {
                    line.label(format!("{ring} ring hit ratio"))
                        .legend(move |(x, y)| {
                            PathElement::new([(x, y), (x + 24, y)], color.stroke_width(2))
                        });
                }
                chart
                    .draw_series(run.iter().map(|&p| Circle::new(p, 3, color.filled())))
                    .map_err(err)?;
            }
        }
        // What the checks compared with (the baseline, or with `compare =
        // "concurrent"` unmoved keys in the same interval, moved keys
        // beside them), and the lowest hit ratio max_hit_ratio_drop lets
        // pass.
        let concurrent = spec.guards.compare == CompareWith::Concurrent;
        let against = |f: &ketama_fleet::plan::guards::Figures| {
            if concurrent {
                f.unmoved_hit_ratio
            } else {
                f.baseline_hit_ratio
            }
        };
        let gray = RGBColor(90, 90, 90);
        let mut lines = vec![(
            if concurrent {
                "unmoved keys' hit ratio (new ring)"
            } else {
                "baseline hit ratio"
            },
            runs(
                state
                    .checks()
                    .iter()
                    .map(|c| against(&c.figures).map(|b| (t(c.at_ms), b * 100.0))),
            ),
            gray,
        )];
        if concurrent {
            lines.push((
                "moved keys' hit ratio (new ring)",
                runs(
                    state
                        .checks()
                        .iter()
                        .map(|c| c.figures.moved_hit_ratio.map(|m| (t(c.at_ms), m * 100.0))),
                ),
                RGBColor(150, 60, 170),
            ));
        }
        for (label, runs, color) in lines {
            for (i, run) in runs.iter().enumerate() {
                let line = chart
                    .draw_series(DashedLineSeries::new(
                        run.clone(),
                        6,
                        4,
                        color.stroke_width(1),
                    ))
                    .map_err(err)?;
                if i == 0 {
                    line.label(label).legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 24, y)], color.stroke_width(1))
                    });
                }
            }
        }
        if let Some(drop) = spec.guards.max_hit_ratio_drop {
            let floor =
                runs(state.checks().iter().map(|c| {
                    against(&c.figures).map(|b| (t(c.at_ms), ((b - drop) * 100.0).max(0.0)))
                }));
            for (i, run) in floor.iter().enumerate() {
                let line = chart
                    .draw_series(DashedLineSeries::new(
                        run.clone(),
                        2,
                        3,
                        RED.stroke_width(1),
                    ))
                    .map_err(err)?;
                if i == 0 {
                    line.label(format!(
                        "lowest passing hit ratio ({} - {drop})",
                        if concurrent { "unmoved" } else { "baseline" }
                    ))
                    .legend(|(x, y)| PathElement::new([(x, y), (x + 24, y)], RED.stroke_width(1)));
                }
            }
        }
        if let Some(max) = spec.guards.max_origin_rps {
            chart
                .draw_secondary_series(DashedLineSeries::new(
                    [(0.0, max), (x1, max)],
                    2,
                    3,
                    RED.mix(0.7).stroke_width(1),
                ))
                .map_err(err)?
                .label(format!("max_origin_rps {max} (right axis)"))
                .legend(|(x, y)| {
                    PathElement::new([(x, y), (x + 24, y)], RED.mix(0.7).stroke_width(1))
                });
        }
        let rps: Vec<(f64, f64)> = state
            .checks()
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
        for c in state.checks() {
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

/// The runs of consecutive points that exist.
fn runs(points: impl Iterator<Item = Option<(f64, f64)>>) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut open = false;
    for p in points {
        match p {
            Some(p) if open => out.last_mut().expect("an open run").push(p),
            Some(p) => {
                out.push(vec![p]);
                open = true;
            }
            None => open = false,
        }
    }
    out
}
