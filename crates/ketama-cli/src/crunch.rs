//! `ketama analyze`, `sweep`, `recommend` and `diff`: the numbers behind a
//! ring. Every computation is in `ketama::analysis`; this only parses and
//! prints.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use ketama::analysis::{self, Target};
use ketama::{Compat, Layout, Ring, RingBuilder, DEFAULT_POINT_MULTIPLE};
use serde_json::json;

use crate::args::{build_ring, load_ring, read_nodes, RingArgs, ServersPath};

/// Options of `ketama analyze`.
#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// Servers file.
    #[arg(long)]
    servers: ServersPath,
    #[command(flatten)]
    ring: RingArgs,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Heap bytes of the points in every layout (`None` where a layout cannot
/// hold the ring).
fn layout_memory(
    text_nodes: &[ketama::Node],
    builder: RingBuilder,
) -> Vec<(Layout, Option<usize>)> {
    Layout::ALL
        .iter()
        .map(|&l| {
            let bytes = builder
                .layout(l)
                .build(text_nodes.to_vec())
                .ok()
                .map(|r| r.points_heap_bytes());
            (l, bytes)
        })
        .collect()
}

fn num(x: f64) -> serde_json::Value {
    if x.is_finite() {
        json!(x)
    } else {
        serde_json::Value::Null
    }
}

pub fn analyze(args: AnalyzeArgs) -> anyhow::Result<()> {
    let builder = args.ring.builder();
    let nodes = read_nodes(&args.servers)?;
    let ring = build_ring(&args.servers, nodes.clone(), builder)?;
    let a = analysis::analyze(&ring);
    let memory = layout_memory(&nodes, builder);
    let points = ring.point_count().max(1) as f64;
    let mut out = std::io::stdout().lock();
    if args.json {
        let rows: Vec<_> = a
            .nodes
            .iter()
            .map(|n| {
                let node = &ring.nodes()[n.index];
                json!({
                    "server": node.server(),
                    "weight": n.weight,
                    "down": node.is_down(),
                    "points": n.points,
                    "collided": n.collided,
                    "expected_share": n.expected_share,
                    "share": n.share,
                    "relative_error": n.relative_error.map(num),
                })
            })
            .collect();
        let mem: serde_json::Map<String, serde_json::Value> = memory
            .iter()
            .map(|(l, b)| {
                (
                    l.name().to_string(),
                    b.map_or(serde_json::Value::Null, |b| json!(b)),
                )
            })
            .collect();
        let v = json!({
            "compat": ring.compat().name(),
            "point_multiple": ring.point_multiple(),
            "generated_points": a.generated_points,
            "ring_points": a.points,
            "predicted_cv": num(a.predicted_cv),
            "measured_cv": num(a.measured_cv),
            "max_overload": num(a.max_overload),
            "memory_bytes": mem,
            "nodes": rows,
        });
        writeln!(out, "{v}")?;
        return Ok(());
    }
    let width = ring
        .nodes()
        .iter()
        .map(|n| n.server().len())
        .max()
        .unwrap_or(6)
        .max(6);
    writeln!(
        out,
        "{:width$}  {:>8}  {:>10}  {:>8}  {:>10}  {:>10}  {:>9}",
        "server", "weight", "points", "collided", "expected", "share", "error"
    )?;
    for n in &a.nodes {
        let node = &ring.nodes()[n.index];
        let err = n
            .relative_error
            .map_or("-".to_string(), |e| format!("{:+.2}%", e * 100.0));
        writeln!(
            out,
            "{:width$}  {:>8}  {:>10}  {:>8}  {:>10.6}  {:>10.6}  {:>9}{}",
            node.server(),
            n.weight,
            n.points,
            n.collided,
            n.expected_share,
            n.share,
            err,
            if node.is_down() { "  down" } else { "" }
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "scheme {}, point multiple {}: {} points generated, {} on the ring",
        ring.compat(),
        ring.point_multiple(),
        a.generated_points,
        a.points
    )?;
    writeln!(out, "predicted CV  {:.6}", a.predicted_cv)?;
    writeln!(out, "measured CV   {:.6}", a.measured_cv)?;
    writeln!(out, "max overload  {:.4}", a.max_overload)?;
    for (l, b) in &memory {
        match b {
            Some(b) => writeln!(
                out,
                "memory {:8} {:>12} bytes  {:.2} B/point",
                l.name(),
                b,
                *b as f64 / points
            )?,
            None => writeln!(out, "memory {:8} {:>12}", l.name(), "cannot hold this ring")?,
        }
    }
    Ok(())
}

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
    /// Hashing scheme.
    #[arg(long, default_value = "nginx")]
    compat: Compat,
    /// CSV output.
    #[arg(long)]
    out: PathBuf,
    /// SVG chart output.
    #[arg(long)]
    plot: Option<PathBuf>,
}

pub fn sweep(args: SweepArgs) -> anyhow::Result<()> {
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
    let steps = analysis::log_steps(args.from, args.to, args.steps);
    let builder = RingBuilder::new().compat(args.compat);
    let started = Instant::now();
    let total = steps.len() * args.trials as usize;
    let mut done = 0usize;
    let mut rows = Vec::new();
    for &k in &steps {
        let row = analysis::sweep_step(args.nodes, k, args.trials, args.seed, builder, || {
            done += 1;
            progress(started, done, total, k);
        })?;
        rows.push(row);
    }
    if started.elapsed().as_secs_f64() > 1.0 {
        eprintln!();
    }
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
        let svg = crate::plot::sweep_svg(&rows, args.nodes, args.trials, args.compat);
        std::fs::write(p, svg).with_context(|| format!("cannot write {}", p.display()))?;
    }
    print!("{csv}");
    Ok(())
}

/// A progress bar on stderr, once the run has taken more than a second.
fn progress(started: Instant, done: usize, total: usize, k: u32) {
    if started.elapsed().as_secs_f64() < 1.0 {
        return;
    }
    let filled = done * 30 / total.max(1);
    eprint!(
        "\rsweep [{}{}] {done}/{total} rings, k = {k}, {:.0}s",
        "#".repeat(filled),
        ".".repeat(30 - filled),
        started.elapsed().as_secs_f64()
    );
}

/// Options of `ketama recommend`.
#[derive(Args, Debug)]
pub struct RecommendArgs {
    /// Servers file.
    #[arg(long)]
    servers: ServersPath,
    /// The largest CV of a server's share to accept.
    #[arg(
        long,
        conflicts_with = "max_extra_error",
        required_unless_present = "max_extra_error"
    )]
    max_cv: Option<f64>,
    /// The most the CV may grow over the one measured at the current point
    /// multiple (absolute, e.g. 0.01).
    #[arg(long)]
    max_extra_error: Option<f64>,
    /// Hashing scheme.
    #[arg(long, default_value = "nginx")]
    compat: Compat,
    /// The current points per weight unit.
    #[arg(long, default_value_t = DEFAULT_POINT_MULTIPLE)]
    point_multiple: u32,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn recommend(args: RecommendArgs) -> anyhow::Result<()> {
    let target = match (args.max_cv, args.max_extra_error) {
        (Some(x), _) if !(x > 0.0 && x.is_finite()) => {
            bail!("--max-cv {x}: give a positive number such as 0.05")
        }
        (_, Some(x)) if x.is_nan() || x < 0.0 || x.is_infinite() => {
            bail!("--max-extra-error {x}: give a number >= 0 such as 0.01")
        }
        (Some(x), _) => Target::MaxCv(x),
        (_, Some(x)) => Target::MaxExtraError(x),
        (None, None) => bail!("give --max-cv or --max-extra-error"),
    };
    let nodes = read_nodes(&args.servers)?;
    if !nodes.iter().any(|n| n.weight() > 0 && !n.is_down()) {
        bail!(
            "{}: no server is up with a nonzero weight, so no point multiple can balance it",
            args.servers.display()
        );
    }
    let builder = RingBuilder::new()
        .compat(args.compat)
        .point_multiple(args.point_multiple);
    let r = analysis::recommend(&nodes, builder, target).with_context(|| {
        format!(
            "cannot recommend a point multiple for {}",
            args.servers.display()
        )
    })?;
    if args.json {
        let mem: Vec<_> = r
            .memory
            .iter()
            .map(|(l, now, then)| json!({"layout": l.name(), "current_bytes": now, "recommended_bytes": then}))
            .collect();
        println!(
            "{}",
            json!({
                "point_multiple": r.point_multiple,
                "current_point_multiple": args.point_multiple,
                "target_cv": r.target_cv,
                "predicted_cv": r.predicted_cv,
                "measured_cv": r.measured_cv,
                "current_measured_cv": r.current_measured_cv,
                "stepped": r.stepped,
                "memory": mem,
            })
        );
        return Ok(());
    }
    println!(
        "recommended point multiple: {} (current {})",
        r.point_multiple, args.point_multiple
    );
    println!("target CV     {:.6}", r.target_cv);
    println!("predicted CV  {:.6}", r.predicted_cv);
    println!(
        "measured CV   {:.6} (current: {:.6})",
        r.measured_cv, r.current_measured_cv
    );
    for (m, cv) in &r.stepped {
        println!("  stepped up to {m}: measured {cv:.6}");
    }
    for (l, now, then) in &r.memory {
        let saved = *now as f64 - *then as f64;
        println!(
            "memory {:8} {:>12} -> {:>12} bytes ({:+.1}%)",
            l.name(),
            now,
            then,
            if *now > 0 {
                -100.0 * saved / *now as f64
            } else {
                0.0
            }
        );
    }
    Ok(())
}

/// One side of a two-ring command (`diff`, `migrate-plan`).
#[derive(Args, Debug, Clone)]
pub struct TwoRings {
    /// Servers file of the current ring.
    #[arg(long)]
    from: ServersPath,
    /// Servers file of the new ring.
    #[arg(long)]
    to: ServersPath,
    /// Scheme of the current ring.
    #[arg(long, default_value = "nginx")]
    from_compat: Compat,
    /// Layout of the current ring.
    #[arg(long, default_value = "wide")]
    from_layout: Layout,
    /// Point multiple of the current ring.
    #[arg(long, default_value_t = DEFAULT_POINT_MULTIPLE)]
    from_point_multiple: u32,
    /// Scheme of the new ring.
    #[arg(long, default_value = "nginx")]
    to_compat: Compat,
    /// Layout of the new ring.
    #[arg(long, default_value = "wide")]
    to_layout: Layout,
    /// Point multiple of the new ring.
    #[arg(long, default_value_t = DEFAULT_POINT_MULTIPLE)]
    to_point_multiple: u32,
}

impl TwoRings {
    /// Builds both rings.
    pub fn load(&self) -> anyhow::Result<(Ring, Ring)> {
        let side = |c, l, m| RingArgs {
            compat: c,
            layout: l,
            point_multiple: m,
        };
        let from = load_ring(
            &self.from,
            side(self.from_compat, self.from_layout, self.from_point_multiple).builder(),
        )?;
        let to = load_ring(
            &self.to,
            side(self.to_compat, self.to_layout, self.to_point_multiple).builder(),
        )?;
        Ok((from, to))
    }
}

/// Options of `ketama diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    #[command(flatten)]
    rings: TwoRings,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn diff(args: DiffArgs) -> anyhow::Result<()> {
    let (from, to) = args.rings.load()?;
    let d = analysis::diff(&from, &to);
    if args.json {
        let servers: Vec<_> = d
            .servers
            .iter()
            .map(|(s, g, l)| json!({"server": s, "gained": g, "lost": l}))
            .collect();
        println!(
            "{}",
            json!({"moved": d.moved, "moved_keys": d.moved_keys, "servers": servers})
        );
        return Ok(());
    }
    let width = d
        .servers
        .iter()
        .map(|s| s.0.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!("{:width$}  {:>10}  {:>10}", "server", "gained", "lost");
    for (s, g, l) in &d.servers {
        println!("{s:width$}  {g:>10.6}  {l:>10.6}");
    }
    println!();
    println!(
        "moved: {:.6} of the keyspace ({} of 2^32 keys): the share of cached objects that miss after the change",
        d.moved, d.moved_keys
    );
    Ok(())
}

/// Options of `ketama migrate-plan`.
#[derive(Args, Debug)]
pub struct MigratePlanArgs {
    #[command(flatten)]
    rings: TwoRings,
    /// Rollout steps in basis points, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100,500,2500,5000,10000")]
    steps: Vec<u32>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn migrate_plan(args: MigratePlanArgs) -> anyhow::Result<()> {
    let mut steps = Vec::with_capacity(args.steps.len());
    for &bp in &args.steps {
        if bp > 10_000 {
            bail!("--steps: {bp} is over 10000 basis points (100%): give values from 0 to 10000");
        }
        steps.push(bp as u16);
    }
    let (from, to) = args.rings.load()?;
    let plan = ketama::migration::plan(&from, &to, &steps);
    if args.json {
        let rows: Vec<_> = plan
            .iter()
            .map(|(bp, f)| json!({"bp": bp, "moved": f}))
            .collect();
        println!("{}", json!({ "steps": rows }));
        return Ok(());
    }
    for (bp, f) in plan {
        println!("{bp}\t{f:.6}");
    }
    Ok(())
}
