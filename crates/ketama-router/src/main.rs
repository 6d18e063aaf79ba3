//! `ketama-router`: with no arguments, a demo on loopback; with `--config
//! FILE`, a real configuration.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// A backend router on Pingora with ketama consistent hashing.
#[derive(Parser, Debug)]
#[command(name = "ketama-router", version, about)]
struct Args {
    /// The TOML config; without it, a demo starts origins on loopback.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Check the config and exit.
    #[arg(long, requires = "config")]
    check: bool,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ketama-router: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let (validated, path, text) = match &args.config {
        Some(p) => (ketama_config::load(p)?, Some(p.clone()), None),
        None => {
            let origins = ketama_router::demo::start_origins(4)?;
            let text = ketama_router::demo::config(&origins, "127.0.0.1:8080", "127.0.0.1:9901");
            let v = ketama_config::parse(&text, "(built-in demo config)")?;
            println!("ketama-router demo: 4 origins on {origins:?}");
            println!("  curl -i http://127.0.0.1:8080/some/path            # x-ketama-backend says where it went");
            println!(
                "  curl -i -H 'x-region: eu' http://127.0.0.1:8080/a   # only backends labelled eu"
            );
            println!("  curl http://127.0.0.1:9901/status                   # admin API (auth off in the demo)");
            println!("  curl http://127.0.0.1:9901/metrics");
            println!("  curl -X PUT -d '{{\"global_bp\": 10000}}' http://127.0.0.1:9901/rollout");
            println!("  Ctrl-C to stop.");
            (v, None, Some(text))
        }
    };
    if args.check {
        println!("config OK");
        return Ok(());
    }
    let (server, _app) = ketama_router::server::build(validated, path, text)?;
    server.run_forever();
}
