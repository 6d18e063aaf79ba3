//! `ketama migrate-plan`: for each rollout step, the expected share of keys
//! whose server changes against the old ring.

use anyhow::bail;
use clap::Args;
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
