//! `ketama import haproxy FILE [--backend NAME]`: one HAProxy backend's
//! servers as a ketama servers file on stdout (the library reads the
//! configuration; this file prints it), with the scheme and the router's
//! key for its `hash-type` and `balance` as comments.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};

/// `ketama import ...`.
#[derive(Args, Debug)]
pub struct ImportArgs {
    #[command(subcommand)]
    command: ImportCommand,
}

#[derive(Subcommand, Debug)]
enum ImportCommand {
    /// A HAProxy backend's `server` lines (address, weight, id, disabled)
    /// as a servers file for `--compat haproxy`.
    Haproxy(HaproxyArgs),
}

/// Options of `ketama import haproxy`.
#[derive(Args, Debug)]
struct HaproxyArgs {
    /// The HAProxy configuration file.
    file: PathBuf,
    /// The backend (or listen section) to read; optional when only one
    /// has servers.
    #[arg(long)]
    backend: Option<String>,
}

/// Runs `ketama import`.
pub fn run(args: ImportArgs) -> anyhow::Result<()> {
    let ImportCommand::Haproxy(a) = args.command;
    let text = std::fs::read_to_string(&a.file)
        .with_context(|| format!("cannot read HAProxy configuration {}", a.file.display()))?;
    let b = ketama::haproxy::parse_backend(&text, &a.file, a.backend.as_deref())?;
    let mut out = format!(
        "# ketama servers file: backend {} of {} ({} servers), by `ketama import haproxy`\n",
        b.name,
        a.file.display(),
        b.nodes.len()
    );
    match (b.scheme, b.hash_type.as_deref()) {
        (Some(s), Some(h)) => out += &format!("# hash-type {h}: route with --compat {s} ([ring] compat = \"{s}\")\n"),
        (None, Some(h)) => out += &format!("# hash-type {h} is not consistent hashing: no ketama scheme routes as it does; --compat haproxy is `hash-type consistent`\n"),
        (_, None) => out += "# no hash-type: HAProxy's default is map-based, not consistent hashing; --compat haproxy is `hash-type consistent`\n",
    }
    if let Some(bal) = &b.balance {
        match ketama::haproxy::Balance::parse(bal) {
            Ok(_) => {
                out += &format!("# balance {bal}: in ketama-router, [key] balance = \"{bal}\"\n")
            }
            Err(e) => out += &format!("# balance {bal}: ketama-router cannot route by it ({e})\n"),
        }
    }
    for n in &b.nodes {
        out += &format!("{} {}", n.server(), n.weight());
        if let Some(id) = n.id() {
            out += &format!(" id={id}");
        }
        if n.is_down() {
            out += " down";
        }
        out.push('\n');
    }
    print!("{out}");
    Ok(())
}
