//! `ketama migrate-plan --simulate`: the schedule's cost to the origin,
//! from a cache simulation of every server (`ketama::analysis::cache_sim`),
//! on a trace or a synthetic Zipf workload; and with `--max-origin-factor`
//! the fewest steps whose peak stays under a multiple of the steady state.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use ketama::analysis::cache_sim::{self, CacheSize, SimReport, SimSettings};
use ketama::Ring;
use serde_json::json;

use crate::trace::Workload;

/// A simulated request: (object, old key, new key).
type Req<'k> = (&'k [u8], &'k [u8], &'k [u8]);

/// The simulation's options (with `--simulate`).
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Simulate every server's cache through the schedule.
    #[arg(long)]
    pub simulate: bool,
    /// The requests, in order (see --trace-format; .gz and .zst files are
    /// read as they are).
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// The trace's format: txt (one key per line, what follows a tab
    /// ignored; the default), csv (see --csv-key-col) or oracleGeneral
    /// (libCacheSim's binary records).
    #[arg(long, value_enum, requires = "trace")]
    trace_format: Option<crate::trace::Format>,
    #[command(flatten)]
    csv: crate::trace::CsvArgs,
    /// With the key options: what the caches key objects by, `new-key`
    /// (the new side's routing key: the cache's key changes with it) or
    /// `target` (the request target as sent).
    #[arg(long, value_enum, default_value = "new-key")]
    cache_key: crate::sim_keys::CacheKey,
    /// Synthetic workload: distinct objects.
    #[arg(long, default_value_t = 100_000, conflicts_with = "trace")]
    objects: u32,
    /// Synthetic workload: Zipf exponent.
    #[arg(long, default_value_t = 0.9, conflicts_with = "trace")]
    zipf: f64,
    /// Synthetic workload: requests.
    #[arg(long, default_value_t = 1_000_000, conflicts_with = "trace")]
    requests: u64,
    /// Synthetic workload: seed.
    #[arg(long, default_value_t = 1, conflicts_with = "trace")]
    seed: u64,
    /// Every object's size in bytes (then --cache-bytes sizes caches).
    #[arg(long)]
    object_size: Option<u64>,
    /// Objects each server's cache holds.
    #[arg(long, conflicts_with = "cache_bytes")]
    cache_objects: Option<u64>,
    /// Bytes each server's cache holds (with --object-size).
    #[arg(long, requires = "object_size")]
    cache_bytes: Option<u64>,
    /// Caches in proportion to the servers' weights (the mean weight gets
    /// the size given).
    #[arg(long)]
    cache_by_weight: bool,
    /// Requests served by the old ring first, not counted.
    #[arg(long, default_value_t = 0)]
    warmup: u64,
    /// Requests each step serves (the last step: the rest).
    #[arg(long)]
    requests_per_step: Option<u64>,
    /// Requests per window of the origin series.
    #[arg(long, default_value_t = 10_000)]
    window: u64,
    /// A moved key's miss looks in its previous owner's cache first.
    #[arg(long)]
    fill_from_previous: bool,
    /// Find the fewest steps from the ladder 1, 2, 5, 10, 25, 50, 100%
    /// whose peak window stays under X times the steady state.
    #[arg(long, value_name = "X")]
    max_origin_factor: Option<f64>,
    /// Draw origin fetches per window, the schedule against a one-shot
    /// switch (each with and without fill, with --fill-from-previous), to
    /// this file (.svg or .png).
    #[arg(long, value_name = "FILE")]
    chart: Option<PathBuf>,
}

/// The keys of the workload, in order.
fn workload(a: &SimArgs) -> anyhow::Result<Workload> {
    if let Some(path) = &a.trace {
        return crate::trace::read(path, a.trace_format, &a.csv);
    }
    if a.objects == 0 || !(a.zipf.is_finite() && a.zipf >= 0.0) {
        bail!("--objects must be at least 1 and --zipf a number of 0 or more (0.9 is typical of web objects)");
    }
    Ok(Workload {
        names: (0..a.objects)
            .map(|i| format!("/obj/{i}").into_bytes())
            .collect(),
        order: cache_sim::zipf_ranks(a.objects, a.zipf, a.requests, a.seed),
        sized: false,
    })
}

fn settings(a: &SimArgs, steps: &[u32], total: u64, fill: bool) -> anyhow::Result<SimSettings> {
    let size = match (a.cache_objects, a.cache_bytes) {
        (Some(n), None) => n,
        (None, Some(b)) => b,
        _ => bail!("--simulate needs --cache-objects N (or --cache-bytes B with --object-size)"),
    };
    if a.window == 0 {
        bail!("--window must be at least 1 request");
    }
    let counted = total.saturating_sub(a.warmup);
    let per_step = a
        .requests_per_step
        .unwrap_or(counted / steps.len().max(1) as u64)
        .max(1);
    Ok(SimSettings {
        warmup: a.warmup,
        steps_bp: steps.to_vec(),
        requests_per_step: per_step,
        window: a.window,
        cache: if a.cache_by_weight {
            CacheSize::ByWeight(size)
        } else {
            CacheSize::Each(size)
        },
        object_size: a.object_size,
        fill_from_previous: fill,
    })
}

/// Runs the simulation (`--simulate`) and prints it.
pub fn run(
    a: &SimArgs,
    from: &Ring,
    to: &Ring,
    steps: &[u32],
    as_json: bool,
    key: &crate::key_args::KeyArgs,
) -> anyhow::Result<()> {
    if let Some(path) = &a.chart {
        crate::plot_sim::format_of(path)?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(d) = dir.filter(|d| !d.is_dir()) {
            bail!(
                "--chart {}: the directory {} does not exist",
                path.display(),
                d.display()
            );
        }
    }
    if a.max_origin_factor.is_some() && a.requests_per_step.is_none() {
        bail!("--max-origin-factor compares schedules at one --requests-per-step: give it");
    }
    let workload = workload(a)?;
    let both = key.both(
        (from.compat(), "--from-compat"),
        (to.compat(), "--to-compat"),
    )?;
    let keys =
        crate::sim_keys::Requests::new(&workload, both.as_ref(), key.request_format, a.cache_key)?;
    let unkeyed = keys.unkeyed();
    if unkeyed > 0 {
        eprintln!("note: {unkeyed} requests of which a key takes nothing (the router sends them round robin) are left out");
    }
    let total = keys.iter().count() as u64;
    if a.warmup >= total {
        bail!(
            "--warmup {} is not shorter than the {} ({total} requests): nothing would be left to simulate",
            a.warmup,
            if a.trace.is_some() { "trace" } else { "workload" }
        );
    }
    if workload.sized && a.object_size.is_none() {
        eprintln!("note: the trace's object sizes are not used: each cache holds --cache-objects objects (give --object-size and --cache-bytes for byte-sized caches of one object size)");
    }
    let s = settings(a, steps, total, a.fill_from_previous)?;
    let started = std::time::Instant::now();
    let report = cache_sim::simulate(from, to, keys.iter(), &s);
    let took = started.elapsed();
    let best = match a.max_origin_factor {
        Some(x) => Some(fewest_steps(a, from, to, &keys, total, x)?),
        None => None,
    };
    if let Some(path) = &a.chart {
        let warm = warm_up(a, from, to, &keys, total)?;
        let rest = || -> Box<dyn Iterator<Item = Req<'_>> + '_> {
            Box::new(keys.iter().skip(a.warmup as usize))
        };
        chart(a, path, steps, &warm, &rest)?;
    }
    if as_json {
        let mut v = json_of(&report);
        if let Some((schedule, peak)) = &best {
            v["schedule"] = json!({"steps": schedule, "peak_window": peak});
        }
        println!("{v}");
        return Ok(());
    }
    const COUNTS: &str =
        "requests\thits_old\thits_new\tmisses_old\tmisses_new\tpeer_fills\torigin_fetches\torigin_bytes";
    let counts = |requests: u64, h: [u64; 2], m: [u64; 2], peer: u64, fetches: u64, bytes: u64| {
        format!(
            "{requests}\t{}\t{}\t{}\t{}\t{peer}\t{fetches}\t{bytes}",
            h[0], h[1], m[0], m[1]
        )
    };
    println!("step\tbp\t{COUNTS}");
    for (i, s) in report.steps.iter().enumerate() {
        let c = counts(
            s.requests,
            s.hits,
            s.misses,
            s.peer_fills,
            s.origin_fetches,
            s.origin_bytes,
        );
        println!("{}\t{}\t{c}", i + 1, s.bp);
    }
    println!("\nwindow\tstep\t{COUNTS}");
    for (i, w) in report.windows.iter().enumerate() {
        let c = counts(
            w.requests,
            w.hits,
            w.misses,
            w.peer_fills,
            w.origin_fetches,
            w.origin_bytes,
        );
        println!("{}\t{}\t{c}", i + 1, w.step + 1);
    }
    if let Some(p) = report.peak_window() {
        println!(
            "peak window: {} origin fetches in {} requests (step {}); steady state (the warm-up's last window): {}",
            p.origin_fetches,
            p.requests,
            p.step + 1,
            report.steady_window.map_or("- (no full warm-up window)".into(), |s| s.to_string())
        );
    }
    println!("\nserver\thits\tmisses");
    for s in &report.servers {
        println!("{}\t{}\t{}", s.server, s.hits, s.misses);
    }
    if let Some((schedule, peak)) = best {
        println!(
            "fewest steps under the factor: {} (peak window {peak})",
            schedule
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    eprintln!(
        "{} requests simulated in {:.2} s ({:.1} million a second)",
        total,
        took.as_secs_f64(),
        total as f64 / took.as_secs_f64().max(1e-9) / 1e6
    );
    Ok(())
}

/// The schedule against a one-shot switch, each with and without fill
/// when fill was asked for.
fn chart<'k>(
    a: &SimArgs,
    path: &std::path::Path,
    steps: &[u32],
    warm: &cache_sim::Simulation<'_>,
    rest: &(dyn Fn() -> Box<dyn Iterator<Item = Req<'k>> + 'k> + Sync),
) -> anyhow::Result<()> {
    use plotters::style::RGBColor;
    let fills: &[bool] = if a.fill_from_previous {
        &[false, true]
    } else {
        &[false]
    };
    let schedule = steps
        .iter()
        .map(|b| format!("{}%", *b as f64 / 100.0))
        .collect::<Vec<_>>()
        .join(" ");
    let mut lines = Vec::new();
    for &fill in fills {
        let with = if fill { ", fill from previous" } else { "" };
        let (c1, c2) = if fill {
            (RGBColor(0, 150, 70), RGBColor(120, 200, 140))
        } else {
            (RGBColor(30, 80, 200), RGBColor(220, 60, 40))
        };
        lines.push((format!("schedule {schedule}{with}"), steps, fill, false, c1));
        lines.push((
            format!("one-shot switch{with}"),
            &[10_000][..],
            fill,
            true,
            c2,
        ));
    }
    // Each line goes on from a copy of the one warm-up, on a thread each.
    let reports: Vec<anyhow::Result<SimReport>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lines
            .iter()
            .map(|(_, steps, fill, _, _)| {
                scope.spawn(move || -> anyhow::Result<SimReport> {
                    let mut sim = warm
                        .clone()
                        .with_schedule(steps.to_vec())?
                        .with_fill(*fill)?;
                    for r in rest() {
                        sim.serve_request(&r);
                    }
                    Ok(sim.finish())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut runs = Vec::new();
    for ((label, _, _, dashed, color), report) in lines.into_iter().zip(reports) {
        runs.push((label, report?, dashed, color));
    }
    let series: Vec<crate::plot_sim::Series> = runs
        .iter()
        .map(|(label, report, dashed, color)| crate::plot_sim::Series {
            label: label.clone(),
            report,
            dashed: *dashed,
            color: *color,
        })
        .collect();
    crate::plot_sim::write_chart(
        path,
        "Origin fetches through the rollout: the schedule against a one-shot switch",
        a.window,
        &series,
    )
}

fn json_of(r: &SimReport) -> serde_json::Value {
    json!({
        "steps": r.steps.iter().map(|s| json!({
            "bp": s.bp, "requests": s.requests, "hits": s.hits[0] + s.hits[1], "misses": s.misses[0] + s.misses[1],
            "hits_by_ring": {"old": s.hits[0], "new": s.hits[1]}, "misses_by_ring": {"old": s.misses[0], "new": s.misses[1]},
            "peer_fills": s.peer_fills, "origin_fetches": s.origin_fetches, "origin_bytes": s.origin_bytes,
        })).collect::<Vec<_>>(),
        "servers": r.servers.iter().map(|s| json!({"server": s.server, "hits": s.hits, "misses": s.misses})).collect::<Vec<_>>(),
        "windows": r.windows.iter().map(|w| json!({
            "step": w.step + 1, "requests": w.requests,
            "hits_by_ring": {"old": w.hits[0], "new": w.hits[1]}, "misses_by_ring": {"old": w.misses[0], "new": w.misses[1]},
            "peer_fills": w.peer_fills, "origin_fetches": w.origin_fetches, "origin_bytes": w.origin_bytes,
        })).collect::<Vec<_>>(),
        "steady_window": r.steady_window,
        "peak_window": r.peak_window().map(|w| w.origin_fetches),
    })
}

/// The caches after the warm-up, ready for any schedule.
fn warm_up<'r>(
    a: &SimArgs,
    from: &'r Ring,
    to: &'r Ring,
    keys: &crate::sim_keys::Requests<'_>,
    total: u64,
) -> anyhow::Result<cache_sim::Simulation<'r>> {
    let mut warm = cache_sim::Simulation::new(
        from,
        to,
        settings(a, &[10_000], total, a.fill_from_previous)?,
    );
    for r in keys.iter().take(a.warmup as usize) {
        warm.serve_request(&r);
    }
    if warm.served() < a.warmup {
        bail!(
            "the trace ({total} requests) ends within --warmup {}: give a shorter one",
            a.warmup
        );
    }
    Ok(warm)
}

/// The fewest steps from the ladder whose peak window stays at most
/// `factor` times the steady state, found by the library from one warm-up
/// on every core.
fn fewest_steps(
    a: &SimArgs,
    from: &Ring,
    to: &Ring,
    keys: &crate::sim_keys::Requests<'_>,
    total: u64,
    factor: f64,
) -> anyhow::Result<(Vec<u32>, u64)> {
    let warm = warm_up(a, from, to, keys, total)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rest = || keys.iter().skip(a.warmup as usize);
    let best = cache_sim::fewest_steps(&warm, rest, factor, threads)
        .map_err(|e| anyhow::anyhow!("--max-origin-factor {factor}: {e}"))?;
    Ok((best.steps_bp, best.peak))
}
