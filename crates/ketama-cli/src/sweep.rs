//! `ketama sweep`: predicted and measured CV over a range of points per
//! server, as CSV and an optional SVG chart.

use std::fmt::Write as _;
use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::Args;
use ketama::{analysis, RingSettings, Scheme};

/// Options of `ketama sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// Servers per ring (synthetic 10.A.B.C:PORT names, drawn from --seed).
    #[arg(long)]
    nodes: usize,
    /// Smallest points per node.
    #[arg(long)]
    from: u32,
    /// Largest points per node.
    #[arg(long)]
    to: u32,
    /// Points-per-node values, spaced on a log scale.
    #[arg(long, default_value_t = 10)]
    steps: usize,
    /// Random node sets per value.
    #[arg(long, default_value_t = 5)]
    trials: u32,
    /// Seed of the first node set (trial t uses seed + t).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Hashing scheme: nginx, pingora-v1 or pingora-v2 (libmemcached and
    /// twemproxy fix their points per server and haproxy its 16 per weight
    /// unit, and envoy-ring-hash and maglev size their rings from their own
    /// settings, so there is nothing to vary).
    #[arg(long, default_value = "nginx")]
    compat: Scheme,
    /// CSV output.
    #[arg(long)]
    out: PathBuf,
    /// SVG chart output.
    #[arg(long)]
    plot: Option<PathBuf>,
}

pub fn run(args: SweepArgs) -> anyhow::Result<()> {
    crate::args::refuse_fixed_points(args.compat, "sweep")?;
    if args.nodes < 2 {
        bail!(
            "--nodes {} is too few: a sweep needs at least 2 servers",
            args.nodes
        );
    }
    if args.from == 0 || args.to < args.from {
        bail!(
            "--from {} --to {}: give 1 <= FROM <= TO points per node",
            args.from,
            args.to
        );
    }
    if args.trials == 0 || args.steps == 0 {
        bail!("--trials and --steps must be at least 1");
    }
    let top = args.nodes as u64 * args.to as u64;
    if top > ketama::MAX_POINTS {
        bail!(
            "--nodes {} x --to {} = {top} points, over the ring limit of {}: lower --to",
            args.nodes,
            args.to,
            ketama::MAX_POINTS
        );
    }
    let steps = log_steps(args.from, args.to, args.steps);
    let settings = RingSettings {
        compat: args.compat,
        ..RingSettings::default()
    };
    let total = steps.len() * args.trials as usize;
    // On a terminal, a bar on stderr; elsewhere (a pipe, a log) nothing.
    let bar = indicatif::ProgressBar::new(total as u64).with_style(
        indicatif::ProgressStyle::with_template(
            "sweep [{bar:30}] {pos}/{len} rings, {msg}, {elapsed} (about {eta} left)",
        )
        .expect("a valid template")
        .progress_chars("#>."),
    );
    let mut rows = Vec::new();
    for &k in &steps {
        bar.set_message(format!("k = {k}"));
        let row = analysis::sweep_step(args.nodes, k, args.trials, args.seed, settings, || {
            bar.inc(1);
        })?;
        rows.push(row);
    }
    bar.finish_and_clear();
    let mut csv = String::from(
        "points_per_node,predicted_cv,measured_cv_mean,measured_cv_sd,measured_cv_min,measured_cv_max,collisions_mean\n",
    );
    for r in &rows {
        writeln!(
            csv,
            "{},{:.8},{:.8},{:.8},{:.8},{:.8},{:.2}",
            r.points_per_node,
            r.predicted_cv,
            r.measured_cv_mean,
            r.measured_cv_sd,
            r.measured_cv_min,
            r.measured_cv_max,
            r.collisions_mean
        )?;
    }
    std::fs::write(&args.out, &csv)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    if let Some(p) = &args.plot {
        let svg = crate::plot::sweep_svg(&rows, args.nodes, args.trials, args.compat)?;
        std::fs::write(p, svg).with_context(|| format!("cannot write {}", p.display()))?;
    }
    print!("{csv}");
    Ok(())
}

/// Points-per-node values from `from` to `to` spaced evenly on a log scale,
/// `steps` of them (both ends included, duplicates after rounding dropped).
pub fn log_steps(from: u32, to: u32, steps: usize) -> Vec<u32> {
    let (from, to) = (from.max(1), to.max(from.max(1)));
    if steps <= 1 || from == to {
        return vec![from];
    }
    let (a, b) = ((from as f64).ln(), (to as f64).ln());
    let mut out: Vec<u32> = (0..steps)
        .map(|i| (a + (b - a) * i as f64 / (steps - 1) as f64).exp().round() as u32)
        .collect();
    out.dedup();
    out
}
