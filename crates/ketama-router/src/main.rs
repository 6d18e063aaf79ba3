//! `ketama-router`: with no arguments, a demo on loopback; with `--config
//! FILE`, a real configuration. Errors become the exit code here, in one
//! place.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

// The allocator is chosen by measurement (README, "Allocator"): jemalloc
// returns a connection flood's memory to the system within seconds (its
// background thread purges), where glibc's and mimalloc's keep it.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[cfg(all(feature = "mimalloc", not(feature = "jemalloc")))]
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
use clap::Parser;
use ketama_router::signals::Early;

/// A backend router on Pingora with ketama consistent hashing.
#[derive(Parser, Debug)]
#[command(name = "ketama-router", version, about)]
struct Args {
    /// The TOML config; without it, a demo starts origins on loopback.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Check the config as a start would (rings included) and exit; works
    /// offline.
    #[arg(long, requires = "config")]
    check: bool,
    /// Take the listening sockets over from a running router (graceful
    /// upgrade): start this, then send the old process SIGQUIT.
    #[arg(long, conflicts_with = "check")]
    upgrade: bool,
    /// The demo's proxy address (default 127.0.0.1:8080 when free, else a
    /// free port).
    #[arg(long, conflicts_with = "config")]
    listen: Option<std::net::SocketAddr>,
    /// The demo's admin address (default 127.0.0.1:9901 when free, else a
    /// free port).
    #[arg(long, conflicts_with = "config")]
    admin: Option<std::net::SocketAddr>,
    /// Write ketama-router(8) and ketama-router.toml(5) into DIR and exit
    /// (for packagers).
    #[arg(long, hide = true, value_name = "DIR", conflicts_with_all = ["config", "upgrade", "listen", "admin"])]
    generate_man: Option<PathBuf>,
}

/// Writes the man pages: this command's (from its clap definition) and the
/// config file's (from `ketama_config::keys`, which the guide's table is
/// made of too).
fn generate_man(dir: &std::path::Path) -> anyhow::Result<()> {
    use clap::CommandFactory;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut page = Vec::new();
    clap_mangen::Man::new(Args::command())
        .section("8")
        .render(&mut page)?;
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))
    };
    write("ketama-router.8", &page)?;
    let toml = ketama_config::keys::man_page(env!("CARGO_PKG_VERSION"));
    write("ketama-router.toml.5", toml.as_bytes())
}

fn main() -> ExitCode {
    // Before anything slow: a signal during start-up must not kill the
    // process by its default action.
    let early = match Early::install() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("ketama-router: error: cannot install signal handlers: {e}");
            return ExitCode::FAILURE;
        }
    };
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into());
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    match run(Args::parse(), early) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ketama-router: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args, early: Early) -> anyhow::Result<()> {
    if let Some(dir) = &args.generate_man {
        return generate_man(dir);
    }
    let (validated, source) = match &args.config {
        Some(p) => {
            let v = ketama_config::load(p)?;
            if args.check {
                for w in &v.warnings {
                    eprintln!("ketama-router: warning: {w}");
                }
                match ketama_router::upgrade::resolve_here(&v) {
                    Some(p) => {
                        if ketama_router::upgrade::check(&p)?
                            == ketama_router::upgrade::Found::NoDirectory
                        {
                            eprintln!(
                                "ketama-router: warning: server.upgrade_sock {p:?}: its directory does not exist yet: an upgrade is refused until it does (mode 0700, the router's user)"
                            );
                        }
                    }
                    None => eprintln!(
                        "ketama-router: warning: no graceful upgrade socket: set [server] upgrade_sock (or run under systemd with RuntimeDirectory=); without it --upgrade is refused and SIGQUIT stops without handing the listeners over"
                    ),
                }
                let (certificates, expiring) = ketama_router::tls::check_files(&v)?;
                for w in &expiring {
                    eprintln!("ketama-router: warning: {w}");
                }
                for c in &certificates {
                    println!("{c}");
                }
                if let Some(c) = v.control.as_ref().filter(|_| !v.has_backends()) {
                    println!(
                        "config OK: routing from etcd ({} under {}), not contacted; this file has no backends of its own to fall back on",
                        c.endpoints.join(","),
                        c.prefix
                    );
                    return Ok(());
                }
                let plan = ketama_config::Plan::build(&v, &[])?;
                let rings: Vec<String> = plan
                    .table
                    .versions()
                    .iter()
                    .map(|&ver| {
                        let r = plan.table.ring(ver);
                        format!(
                            "{ver}: {} points, {} bytes",
                            r.point_count(),
                            r.points_heap_bytes()
                        )
                    })
                    .collect();
                let sources = if v.discovery.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", {} discovery sources not resolved ({})",
                        v.discovery.len(),
                        v.discovery
                            .iter()
                            .map(|d| d.id())
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                };
                println!(
                    "config OK: {} static backends{sources}, {} label rules, rings built ({}); checked offline, nothing contacted",
                    plan.backends.len(),
                    plan.rules.len(),
                    rings.join("; ")
                );
                return Ok(());
            }
            (v, ketama_router::cell::ConfigSource::File(p.clone()))
        }
        None => {
            let listen = ketama_router::demo::pick(args.listen, "127.0.0.1:8080")?;
            let admin = ketama_router::demo::pick(args.admin, "127.0.0.1:9901")?;
            let origins =
                ketama_router::demo::start_origins(4).context("cannot start the demo's origins")?;
            let text =
                ketama_router::demo::config(&origins, &listen.to_string(), &admin.to_string());
            let name = "(built-in demo config)".to_string();
            let v = ketama_config::parse(&text, &name)?;
            println!("ketama-router demo: 4 origins on {origins:?}");
            println!("  curl -i http://{listen}/some/path            # x-ketama-backend says where it went");
            println!("  curl -i -H 'x-region: eu' http://{listen}/a   # only backends labelled eu");
            println!(
                "  curl http://{admin}/status                   # admin API (auth off in the demo)"
            );
            println!("  curl http://{admin}/metrics");
            println!("  curl -X PUT -d '{{\"global_bp\": 10000}}' http://{admin}/rollout");
            println!("  Ctrl-C to stop.");
            (v, ketama_router::cell::ConfigSource::Text { name, text })
        }
    };
    let start = ketama_router::server::Start {
        upgrade: args.upgrade,
        early,
    };
    let (server, _cell) = ketama_router::server::build(validated, source, start)?;
    ketama_router::server::run(server)
}
