//! `ketama simulate`: a workload replayed with bounded loads at several
//! balance factors, to choose one before deploying it. The replay is the
//! library's (`ketama::analysis::simulate`); this file parses and prints.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use ketama::analysis::simulate::{simulate, Outcome, Service, Workload};
use ketama::load::BalanceFactor;
use ketama::RouteTable;

use crate::args::{load_ring, num, RingArgs, ServersPath};

/// Service times of `--service`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ServiceArg {
    /// Exponential, mean 1.
    Exp,
    /// Exactly 1.
    Fixed,
}

/// Options of `ketama simulate`.
#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// Servers file: one `SERVER [WEIGHT] [key=value ...] [down]` per line.
    #[arg(long)]
    servers: ServersPath,
    #[command(flatten)]
    ring: RingArgs,
    /// Balance factors to compare, in percent (100 to 1000), or `off`
    /// (plain consistent hashing); comma-separated.
    #[arg(long, default_value = "off,110,125,150,200")]
    balance: String,
    /// Requests placed.
    #[arg(long, default_value_t = 200_000)]
    requests: u64,
    /// Distinct keys of the Zipf distribution (`/obj/1` to `/obj/P`).
    #[arg(long, default_value_t = 100_000)]
    population: u32,
    /// Zipf exponent s (0: uniform; 1.1 is typical of web objects).
    #[arg(long, default_value_t = 1.1)]
    zipf: f64,
    /// Requests in flight at all times (10x the servers or more, or the
    /// rounding of the bound dominates).
    #[arg(long, default_value_t = 1_000)]
    concurrency: u32,
    /// Service times: exponential with mean 1, or exactly 1.
    #[arg(long, value_enum, default_value = "exp")]
    service: ServiceArg,
    /// Seed of the draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Replay the keys of this file (one per line, in order, cycled up to
    /// --requests) instead of Zipf draws.
    #[arg(long, conflicts_with_all = ["population", "zipf"])]
    trace: Option<PathBuf>,
    /// Print JSON: {"requests": N, "factors": [{"balance": 125 or null,
    /// "max_over_avg", "own_node_share", "spills_per_request",
    /// "moved_keys"}]}.
    #[arg(long)]
    json: bool,
    /// Also draw the trade-off (max load / average and own-node share
    /// against the factor) as an SVG chart.
    #[arg(long)]
    plot: Option<PathBuf>,
}

/// Parses `--balance`: factors in percent or `off`, in the order given.
fn parse_factors(list: &str) -> anyhow::Result<Vec<Option<BalanceFactor>>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim) {
        if item.eq_ignore_ascii_case("off") {
            out.push(None);
            continue;
        }
        let pct: u32 = item.parse().with_context(|| {
            format!("--balance {list:?}: {item:?} is neither a percentage (100 to 1000, e.g. 125) nor off")
        })?;
        out.push(Some(
            BalanceFactor::new(pct).with_context(|| format!("--balance {list:?}"))?,
        ));
    }
    Ok(out)
}

/// Reads a trace: one key per line (a final line without newline counts;
/// a trailing `\r` is kept, as `ketama route` keeps it).
fn read_trace(path: &PathBuf) -> anyhow::Result<Vec<Vec<u8>>> {
    let bytes = std::fs::read(path)
        .with_context(|| format!("cannot read trace file {}", path.display()))?;
    let mut keys = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if line.len() > crate::route::MAX_LINE {
            bail!(
                "{}:{}: a key of {} bytes is longer than the limit of {} bytes: one key per line",
                path.display(),
                i + 1,
                line.len(),
                crate::route::MAX_LINE
            );
        }
        keys.push(line.to_vec());
    }
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        keys.pop();
    }
    if keys.is_empty() {
        bail!(
            "trace file {} has no key: write one key per line",
            path.display()
        );
    }
    Ok(keys)
}

pub fn run(args: SimulateArgs) -> anyhow::Result<()> {
    let factors = parse_factors(&args.balance)?;
    if args.requests == 0 {
        bail!("--requests 0 places nothing: give at least 1");
    }
    let ring = Arc::new(load_ring(&args.servers, args.ring.settings()?)?);
    let serving = ring
        .nodes()
        .iter()
        .filter(|n| n.weight() > 0 && !n.is_down())
        .count();
    let table = RouteTable::new(ring);
    let trace = args.trace.as_ref().map(read_trace).transpose()?;
    let workload = Workload {
        requests: args.requests,
        population: args.population,
        zipf: args.zipf,
        concurrency: args.concurrency,
        service: match args.service {
            ServiceArg::Exp => Service::Exponential,
            ServiceArg::Fixed => Service::Fixed,
        },
        seed: args.seed,
        trace,
    };
    let outcomes = simulate(&table, &workload, &factors)
        .with_context(|| format!("cannot replay the workload on {}", args.servers.display()))?;
    if let Some(p) = &args.plot {
        let svg = crate::plot::balance_svg(&outcomes, serving, &workload)?;
        std::fs::write(p, svg).with_context(|| format!("cannot write {}", p.display()))?;
    }
    if args.json {
        let factors: Vec<_> = outcomes
            .iter()
            .map(|o| {
                serde_json::json!({
                    "balance": o.balance.map(|f| f.percent()),
                    "max_over_avg": num(o.max_over_avg),
                    "own_node_share": num(o.own_node_share),
                    "spills_per_request": num(o.spills_per_request),
                    "moved_keys": o.moved_keys,
                })
            })
            .collect();
        let doc = serde_json::json!({ "requests": args.requests, "factors": factors });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    print_table(&args, &workload, serving, &outcomes);
    Ok(())
}

fn print_table(args: &SimulateArgs, w: &Workload, serving: usize, outcomes: &[Outcome]) {
    let keys = match &args.trace {
        Some(p) => format!("keys of {}", p.display()),
        None => format!("Zipf s = {} over {} keys", w.zipf, w.population),
    };
    println!(
        "{} requests, {} serving servers, {} in flight (average {:.1} per server), {keys}, {} service times",
        w.requests,
        serving,
        w.concurrency,
        w.concurrency as f64 / serving.max(1) as f64,
        match w.service {
            Service::Exponential => "exponential",
            Service::Fixed => "fixed",
        }
    );
    if (w.concurrency as usize) < 10 * serving {
        println!(
            "note: fewer than 10 requests in flight per server: the rounding of the bound (ceil) dominates; raise --concurrency"
        );
    }
    println!("| balance | max load / average | own-node share | spills / request | moved keys |");
    println!("|---|---:|---:|---:|---:|");
    for o in outcomes {
        println!(
            "| {} | {:.3} | {:.2}% | {:.4} | {} |",
            o.balance.map_or("off".to_string(), |f| f.to_string()),
            o.max_over_avg,
            o.own_node_share * 100.0,
            o.spills_per_request,
            o.moved_keys
        );
    }
}
