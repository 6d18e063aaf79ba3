//! `ketama migrate-plan`: for each rollout step, the expected share of keys
//! whose server changes against the old ring.

use anyhow::bail;
use clap::Args;
use ketama::analysis;
use serde_json::json;

use crate::args::TwoRings;

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
    #[command(flatten)]
    sim: crate::migrate_sim::SimArgs,
    /// With --simulate: the router's key (as `ketama route`'s options;
    /// --to-key-config the new side's): the trace's lines are request
    /// targets, cached as sent and routed by each side's key.
    #[command(flatten)]
    key: crate::key_args::KeyArgs,
}

pub fn run(args: MigratePlanArgs) -> anyhow::Result<()> {
    let mut steps = Vec::with_capacity(args.steps.len());
    for &bp in &args.steps {
        if bp > 10_000 {
            bail!("--steps: {bp} is over 10000 basis points (100%): give values from 0 to 10000");
        }
        steps.push(bp as u16);
    }
    let (from, to) = args.rings.load()?;
    if args.key.given() && !args.sim.simulate {
        bail!("the key options price a key over requests: give --simulate with --trace (or use ketama diff --keys)");
    }
    if args.sim.simulate {
        let steps: Vec<u32> = steps.iter().map(|&b| b as u32).collect();
        return crate::migrate_sim::run(&args.sim, &from, &to, &steps, args.json, &args.key);
    }
    // Across key hashes the moved share is estimated from sampled keys, as
    // `ketama diff` does (and says so).
    let (plan, sampled) = match analysis::migration_plan(&from, &to, &steps) {
        Ok(plan) => (plan, None),
        Err(ketama::Error::DiffNeedsSampling { .. }) => {
            let keys = (0..crate::diff::SAMPLES).map(crate::bench::key);
            let d = analysis::diff_sampled(&from, &to, keys);
            (ketama::migration::plan_for(d.moved, &steps), Some(d))
        }
        Err(e) => return Err(e.into()),
    };
    if args.json {
        let rows: Vec<_> = plan
            .iter()
            .map(|(bp, f)| json!({"bp": bp, "moved": f}))
            .collect();
        let mut v = json!({ "steps": rows });
        if let Some(d) = &sampled {
            v["estimated"] = json!(true);
            v["samples"] = json!(d.samples);
            v["ci95"] = json!([d.ci95.0, d.ci95.1]);
        }
        println!("{v}");
        return Ok(());
    }
    if let Some(d) = &sampled {
        eprintln!(
            "ketama: the rings hash keys differently, so the moved share {:.6} (95% CI {:.6} to {:.6}) is estimated from {} sampled keys",
            d.moved, d.ci95.0, d.ci95.1, d.samples
        );
    }
    for (bp, f) in plan {
        println!("{bp}\t{f:.6}");
    }
    Ok(())
}
