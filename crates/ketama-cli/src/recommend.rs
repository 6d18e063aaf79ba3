//! `ketama recommend`: the smallest point multiple that meets a balance
//! target.

use anyhow::{bail, Context};
use clap::Args;
use ketama::analysis::{self, Target};
use ketama::{RingSettings, Scheme, DEFAULT_POINT_MULTIPLE};
use serde_json::json;

use crate::args::{read_nodes, ServersPath};

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
    /// Hashing scheme: nginx, pingora-v1 or pingora-v2 (libmemcached and
    /// twemproxy fix their points per server and haproxy its 16 per weight
    /// unit, and envoy-ring-hash and maglev size their rings from their own
    /// settings, so there is nothing to vary).
    #[arg(long, default_value = "nginx")]
    compat: Scheme,
    /// The current points per weight unit (at least 1).
    #[arg(long, default_value_t = DEFAULT_POINT_MULTIPLE, value_parser = clap::value_parser!(u32).range(1..))]
    point_multiple: u32,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(args: RecommendArgs) -> anyhow::Result<()> {
    crate::args::refuse_fixed_points(args.compat, "recommend")?;
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
    let settings = RingSettings {
        compat: args.compat,
        point_multiple: args.point_multiple,
        ..RingSettings::default()
    };
    let r = analysis::recommend(&nodes, settings, target).with_context(|| {
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
                "current_meets_target": r.current_meets_target,
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
    if r.current_meets_target {
        println!("the ring at the current multiple already meets the target: more points would only cost memory");
    }
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
