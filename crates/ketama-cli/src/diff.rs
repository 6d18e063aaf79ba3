//! `ketama diff`: the exact share of keys whose server changes between two
//! rings.

use clap::Args;
use ketama::analysis;
use serde_json::json;

use crate::args::TwoRings;

/// Options of `ketama diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    #[command(flatten)]
    rings: TwoRings,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(args: DiffArgs) -> anyhow::Result<()> {
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
