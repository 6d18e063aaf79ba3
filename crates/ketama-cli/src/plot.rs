//! The sweep chart as a standalone SVG: log-scaled axes, the predicted CV
//! as a curve, the measured CV as points with their spread (min to max
//! over the trials) as bars.

use std::fmt::Write;

use ketama::analysis::SweepRow;
use ketama::Compat;

const W: f64 = 820.0;
const H: f64 = 520.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

/// Renders sweep rows as an SVG chart.
pub fn sweep_svg(rows: &[SweepRow], nodes: usize, trials: u32, compat: Compat) -> String {
    let xs: Vec<f64> = rows.iter().map(|r| r.points_per_node as f64).collect();
    let (x0, x1) = bounds(&xs, 1.0);
    let mut ys: Vec<f64> = rows
        .iter()
        .flat_map(|r| [r.predicted_cv, r.measured_cv_min, r.measured_cv_max])
        .collect();
    ys.retain(|y| y.is_finite() && *y > 0.0);
    let (y0, y1) = bounds(&ys, 1e-6);
    let (lx0, lx1) = (
        x0.log10().floor(),
        x1.log10().ceil().max(x0.log10().floor() + 1.0),
    );
    let (ly0, ly1) = (
        y0.log10().floor(),
        y1.log10().ceil().max(y0.log10().floor() + 1.0),
    );
    let px = |x: f64| LEFT + (x.log10() - lx0) / (lx1 - lx0) * (W - LEFT - RIGHT);
    let py = |y: f64| H - BOTTOM - (y.max(1e-12).log10() - ly0) / (ly1 - ly0) * (H - TOP - BOTTOM);

    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="16">Coefficient of variation of a server's share, N = {nodes} ({compat}, {trials} trials)</text>"#,
        W / 2.0
    );
    // Grid and ticks at every power of ten.
    for d in lx0 as i32..=lx1 as i32 {
        let x = px(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{}" stroke="#ddd"/>"##,
            H - BOTTOM
        );
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"#,
            H - BOTTOM + 20.0,
            pow10(d)
        );
    }
    for d in ly0 as i32..=ly1 as i32 {
        let y = py(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/>"##,
            W - RIGHT
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            LEFT - 8.0,
            y + 4.0,
            pow10(d)
        );
    }
    let _ = writeln!(
        s,
        r#"<rect x="{LEFT}" y="{TOP}" width="{}" height="{}" fill="none" stroke="black"/>"#,
        W - LEFT - RIGHT,
        H - TOP - BOTTOM
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">points per server (k), log scale</text>"#,
        (LEFT + W - RIGHT) / 2.0,
        H - 15.0
    );
    let _ = writeln!(
        s,
        r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">CV, log scale</text>"#,
        (TOP + H - BOTTOM) / 2.0,
        (TOP + H - BOTTOM) / 2.0
    );
    // The predicted curve, sampled densely between the ends.
    let mut path = String::new();
    for i in 0..=200 {
        let k = 10f64.powf(x0.log10() + (x1.log10() - x0.log10()) * i as f64 / 200.0);
        // The formula at real-valued k, so the curve is smooth.
        let n = nodes as f64;
        let y = ((n - 1.0) / (n * k + 1.0)).sqrt();
        let _ = write!(
            path,
            "{}{:.1},{:.1} ",
            if i == 0 { "M" } else { "L" },
            px(k),
            py(y)
        );
    }
    let _ = writeln!(
        s,
        r##"<path d="{path}" fill="none" stroke="#1f77b4" stroke-width="2"/>"##
    );
    // Measured: spread bars and mean points.
    for r in rows {
        let x = px(r.points_per_node as f64);
        if r.measured_cv_min.is_finite() && r.measured_cv_max.is_finite() {
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#d62728" stroke-width="2"/>"##,
                py(r.measured_cv_min),
                py(r.measured_cv_max)
            );
        }
        if r.measured_cv_mean.is_finite() {
            let _ = writeln!(
                s,
                r##"<circle cx="{x:.1}" cy="{:.1}" r="4" fill="#d62728"/>"##,
                py(r.measured_cv_mean)
            );
        }
    }
    // Legend.
    let (lx, ly) = (W - RIGHT - 250.0, TOP + 20.0);
    let _ = writeln!(
        s,
        r##"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="#1f77b4" stroke-width="2"/>"##,
        lx + 30.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}">predicted sqrt((N-1)/(N k+1))</text>"#,
        lx + 38.0,
        ly + 4.0
    );
    let _ = writeln!(
        s,
        r##"<circle cx="{}" cy="{}" r="4" fill="#d62728"/>"##,
        lx + 15.0,
        ly + 22.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}">measured (mean, min to max)</text>"#,
        lx + 38.0,
        ly + 26.0
    );
    s.push_str("</svg>\n");
    s
}

fn bounds(v: &[f64], floor: f64) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min).max(floor);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max).max(lo);
    (lo, hi)
}

fn pow10(d: i32) -> String {
    if (0..=6).contains(&d) {
        format!("{}", 10u64.pow(d as u32))
    } else {
        format!("1e{d}")
    }
}
