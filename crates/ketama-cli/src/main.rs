//! The `ketama` command line: parsing and printing only; every computation is
//! a call into the `ketama` library. One file per command.

use std::io;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod analyze;
mod args;
mod bench;
mod diff;
mod fleet;
mod fleet_etcd;
mod fleet_plan;
mod fleet_plan_status;
mod generate;
mod import;
mod key_args;
mod migrate_plan;
mod migrate_sim;
mod plot;
mod plot_plan;
mod plot_sim;
mod recommend;
mod requests;
mod route;
mod sim_keys;
mod simulate;
mod sweep;
mod trace;

/// Counts heap bytes only while `ketama bench` measures (see `bench::alloc`).
#[global_allocator]
static GLOBAL: bench::alloc::Counting = bench::alloc::Counting;

/// Consistent hashing identical to nginx and pingora-ketama.
#[derive(Parser, Debug)]
#[command(name = "ketama", version, about, long_about = None)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Route keys read from stdin (one per line) to servers; with a key
    /// (--key-config, --key-template, ...), requests, each routed by what
    /// the key takes of it as the router takes it (`*`: the key took
    /// nothing, and the router sends it round robin).
    Route(route::RouteArgs),
    /// Build and query the same ring with each ketama layout and with
    /// pingora-ketama v1 and v2; print a markdown table of medians.
    Bench(bench::BenchArgs),
    /// Per-server and overall balance of a ring: exact shares, collisions,
    /// predicted and measured CV, memory per layout.
    Analyze(analyze::AnalyzeArgs),
    /// Predicted and measured CV over a range of points per server (CSV,
    /// optional SVG chart).
    Sweep(sweep::SweepArgs),
    /// The smallest point multiple that meets a balance target.
    Recommend(recommend::RecommendArgs),
    /// The exact share of keys whose server changes between two rings; with
    /// a key (and --to-key-config), the share of the requests of --keys
    /// whose server changes when the ring and the key change.
    Diff(diff::DiffArgs),
    /// For each rollout step (basis points), the expected share of keys
    /// whose server changes against the old ring.
    MigratePlan(migrate_plan::MigratePlanArgs),
    /// Replay a workload with bounded loads at several balance factors:
    /// max load / average, own-node share, spills, moved keys.
    Simulate(simulate::SimulateArgs),
    /// Steer a fleet of ketama-routers through etcd: push the routing
    /// config, set the rollout, see what every router applied.
    Fleet(fleet::FleetArgs),
    /// Write a ketama servers file from another proxy's configuration
    /// (HAProxy's `server` lines).
    Import(import::ImportArgs),
    /// Write the man pages or shell completions (for packagers).
    #[command(hide = true)]
    Generate(generate::GenerateArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Route(a) => route::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Analyze(a) => analyze::run(a),
        Command::Sweep(a) => sweep::run(a),
        Command::Recommend(a) => recommend::run(a),
        Command::Diff(a) => diff::run(a),
        Command::MigratePlan(a) => migrate_plan::run(a),
        Command::Simulate(a) => simulate::run(a),
        Command::Fleet(a) => fleet::run(a),
        Command::Import(a) => import::run(a),
        Command::Generate(a) => generate::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed stdout (`ketama route ... | head`) ends the command quietly.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        // A plan that rolled back (2) or was aborted (3).
        Err(e) if e.downcast_ref::<fleet_plan::PlanExit>().is_some() => {
            let code = e
                .downcast_ref::<fleet_plan::PlanExit>()
                .map_or(1, |x| x.code);
            eprintln!("ketama: {e:#}");
            ExitCode::from(code)
        }
        Err(e) => {
            eprintln!("ketama: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}
