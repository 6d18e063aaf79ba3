//! `ketama fleet`: write a fleet's routing config and rollout to etcd (each
//! checked exactly as a router checks it, then written with a
//! compare-and-swap on the key's mod revision), and read what every router
//! applied.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use ketama_fleet::etcd::{Client, EtcdError};

use crate::fleet_etcd::{client, EtcdArgs};
use serde_json::json;

/// `ketama fleet ...`.
#[derive(Args, Debug)]
pub struct FleetArgs {
    #[command(subcommand)]
    command: FleetCommand,
}

#[derive(Subcommand, Debug)]
enum FleetCommand {
    /// Check a routing config as every router will, then write it to
    /// PREFIX/config (compare-and-swap on its mod revision).
    Push(PushArgs),
    /// Write the rollout to PREFIX/rollout (compare-and-swap).
    Rollout(RolloutArgs),
    /// Every registered router: scope, applied revisions, lag, rollout in
    /// force for its scope.
    Status(StatusArgs),
    /// A rollout plan that steps itself under guards: run, status, pause,
    /// resume, abort.
    Plan(crate::fleet_plan::PlanArgs),
}

#[derive(Args, Debug)]
struct PushArgs {
    #[command(flatten)]
    etcd: EtcdArgs,
    /// The routing config (TOML: ring, key, backends, label_rules,
    /// migration, health, balance, discovery).
    #[arg(long)]
    config: PathBuf,
    /// Write only if PREFIX/config's mod revision is still N (0: absent);
    /// default: the revision read just before writing.
    #[arg(long)]
    expect_revision: Option<i64>,
}

#[derive(Args, Debug)]
struct RolloutArgs {
    #[command(flatten)]
    etcd: EtcdArgs,
    /// Share of keys on the new ring everywhere, in basis points (0-10000).
    #[arg(long)]
    global_bp: u32,
    /// A scope's own share: NAME=BP (repeat for several).
    #[arg(long = "scope", value_name = "NAME=BP")]
    scopes: Vec<String>,
    /// Write only if PREFIX/rollout's mod revision is still N (0: absent).
    #[arg(long)]
    expect_revision: Option<i64>,
}

#[derive(Args, Debug)]
struct StatusArgs {
    #[command(flatten)]
    etcd: EtcdArgs,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// An etcd error, said to be a lost quorum when the cluster's members
/// answer but none has a leader (reads and writes then time out).
fn explain(c: &Client, e: EtcdError) -> anyhow::Error {
    if matches!(e, EtcdError::Unreachable { .. } | EtcdError::Status { .. }) {
        if let Some(why) = c.no_quorum() {
            return anyhow::anyhow!(
                "etcd has no quorum: {why}. Routers keep serving what they applied last; bring members back until a majority runs, then retry ({e})"
            );
        }
    }
    e.into()
}

/// Writes `value` to `key` with a compare-and-swap; prints what happened.
fn write(c: &Client, key: &str, value: &[u8], expect: Option<i64>) -> anyhow::Result<()> {
    let (current, _) = c.get(key).map_err(|e| explain(c, e))?;
    let current_rev = current.as_ref().map_or(0, |kv| kv.mod_revision);
    let expected = expect.unwrap_or(current_rev);
    if expect.is_none() && current.as_ref().is_some_and(|kv| kv.value == value) {
        println!("{key} unchanged at revision {current_rev}");
        return Ok(());
    }
    let revision = c.put_if(key, value, expected).map_err(|e| explain(c, e))?;
    println!("{key} written at revision {revision} (was {expected})");
    Ok(())
}

fn push(a: PushArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&a.config)
        .with_context(|| format!("cannot read {}", a.config.display()))?;
    let name = a.config.display().to_string();
    // Exactly the router's check: its parser, its validation, its rings.
    let v = ketama_config::check_shared(&text, &name)?;
    for w in &v.warnings {
        eprintln!("ketama: warning: {w}");
    }
    if v.config.upstream_tls != Default::default() {
        ketama_config::pem::check_upstream_files(&v)?;
        eprintln!(
            "ketama: [upstream_tls] files read here; each router reads them again on its own machine when it applies the config (a router without them rejects it)"
        );
    }
    if v.has_backends() && v.discovery.is_empty() {
        ketama_config::Plan::build(&v, &[])?;
    }
    let (c, keys) = client(&a.etcd)?;
    write(&c, &keys.config(), text.as_bytes(), a.expect_revision)
}

fn rollout(a: RolloutArgs) -> anyhow::Result<()> {
    let mut scopes = serde_json::Map::new();
    for s in &a.scopes {
        let (name, bp) = s
            .split_once('=')
            .with_context(|| format!("--scope {s:?}: give NAME=BP, e.g. ams=5000"))?;
        let bp: u32 = bp.parse().with_context(|| {
            format!("--scope {s:?}: {bp:?} is not a whole number of basis points")
        })?;
        scopes.insert(name.to_string(), json!(bp));
    }
    let body = json!({"global_bp": a.global_bp, "scopes": scopes}).to_string();
    ketama_config::parse_rollout(body.as_bytes()).context("invalid rollout")?;
    let (c, keys) = client(&a.etcd)?;
    write(&c, &keys.rollout(), body.as_bytes(), a.expect_revision)
}

fn status(a: StatusArgs) -> anyhow::Result<()> {
    let (c, keys) = client(&a.etcd)?;
    let (config, _) = c.get(&keys.config()).map_err(|e| explain(&c, e))?;
    let (rollout, _) = c.get(&keys.rollout()).map_err(|e| explain(&c, e))?;
    let routers = ketama_fleet::registrations(&c, &keys).map_err(|e| explain(&c, e))?;
    let latest = config.as_ref().map_or(0, |kv| kv.mod_revision);
    // The rollout in force: the key's, else the latest config's own.
    let in_force = match &rollout {
        Some(kv) => ketama_config::parse_rollout(&kv.value).ok(),
        None => config.as_ref().and_then(|kv| {
            let text = String::from_utf8_lossy(&kv.value);
            let v = ketama_config::check_shared(&text, "config").ok()?;
            let m = v.config.migration.as_ref()?;
            m.scopes
                .iter()
                .try_fold(ketama::Rollout::new(m.global_bp).ok()?, |r, (n, bp)| {
                    r.with_scope(n.clone(), *bp).ok()
                })
        }),
    };
    let rows: Vec<serde_json::Value> = routers
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "scope": r.scope,
                "config_revision": r.config_revision,
                "rollout_revision": r.rollout_revision,
                "lag": latest - r.config_revision,
                "rollout_bp": in_force.as_ref().map(|ro| ro.bp_for(r.scope.as_deref())),
                "rejected": r.rejected,
                "listen": r.listen,
            })
        })
        .collect();
    if a.json {
        let out = json!({
            "prefix": keys.prefix(),
            "config_revision": latest,
            "rollout_revision": rollout.as_ref().map_or(0, |kv| kv.mod_revision),
            "rollout": rollout.as_ref().map(|kv| String::from_utf8_lossy(&kv.value).into_owned()),
            "routers": rows,
        });
        println!("{out}");
        return Ok(());
    }
    println!(
        "{}: config revision {latest}, rollout {}",
        keys.prefix(),
        match &rollout {
            Some(kv) => format!(
                "revision {} {}",
                kv.mod_revision,
                String::from_utf8_lossy(&kv.value)
            ),
            None => "from the config (no rollout key)".into(),
        }
    );
    println!();
    println!(
        "| router | scope | config applied | lag | rollout applied | rollout in force | rejected |"
    );
    println!("|---|---|---:|---|---:|---:|---|");
    for (r, row) in routers.iter().zip(&rows) {
        let lag = match latest - r.config_revision {
            0 => "up to date".to_string(),
            _ if r.config_revision == 0 => "local file".to_string(),
            1 => "1 revision behind".to_string(),
            n => format!("{n} revisions behind"),
        };
        println!(
            "| {} | {} | {} | {lag} | {} | {} | {} |",
            r.id,
            r.scope.as_deref().unwrap_or("-"),
            r.config_revision,
            r.rollout_revision,
            row["rollout_bp"]
                .as_u64()
                .map_or("-".into(), |bp| format!("{bp} bp")),
            r.rejected.as_ref().map_or("-".into(), |x| format!(
                "{}@{}: {}",
                x.key, x.revision, x.error
            )),
        );
    }
    if routers.is_empty() {
        println!("(no router registered under {})", keys.routers());
    }
    Ok(())
}

/// Runs a fleet command.
pub fn run(a: FleetArgs) -> anyhow::Result<()> {
    match a.command {
        FleetCommand::Push(p) => push(p),
        FleetCommand::Rollout(r) => rollout(r),
        FleetCommand::Status(s) => status(s),
        FleetCommand::Plan(p) => crate::fleet_plan::run(p),
    }
}
