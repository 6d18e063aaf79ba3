//! The `ketama` command line: parsing and printing only; every computation is
//! a call into the `ketama` library.

use std::io;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod alloc;
mod args;
mod bench;
mod bench_subsets;
mod crunch;
mod plot;
mod route;

#[global_allocator]
static GLOBAL: alloc::Counting = alloc::Counting;

/// Consistent hashing identical to nginx and pingora-ketama.
#[derive(Parser, Debug)]
#[command(name = "ketama", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Route keys read from stdin (one per line) to servers.
    Route(route::RouteArgs),
    /// Build and query the same ring with each ketama layout and with
    /// pingora-ketama v1 and v2; print a markdown table of medians.
    Bench(bench::BenchArgs),
    /// Per-server and overall balance of a ring: exact shares, collisions,
    /// predicted and measured CV, memory per layout.
    Analyze(crunch::AnalyzeArgs),
    /// Predicted and measured CV over a range of points per server (CSV,
    /// optional SVG chart).
    Sweep(crunch::SweepArgs),
    /// The smallest point multiple that meets a balance target.
    Recommend(crunch::RecommendArgs),
    /// The exact share of keys whose server changes between two rings.
    Diff(crunch::DiffArgs),
    /// For each rollout step (basis points), the expected share of keys
    /// whose server changes against the old ring.
    MigratePlan(crunch::MigratePlanArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Route(a) => route::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Analyze(a) => crunch::analyze(a),
        Command::Sweep(a) => crunch::sweep(a),
        Command::Recommend(a) => crunch::recommend(a),
        Command::Diff(a) => crunch::diff(a),
        Command::MigratePlan(a) => crunch::migrate_plan(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A closed stdout (`ketama route ... | head`) ends the command quietly.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
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
