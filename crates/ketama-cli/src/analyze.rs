//! `ketama analyze`: per-server and overall balance of a ring. Every number
//! comes from `ketama::analysis`; this parses and prints.

use std::io::Write as _;

use clap::Args;
use ketama::analysis;
use serde_json::json;

use crate::args::{build_ring, num, read_nodes, RingArgs, ServersPath};

/// Options of `ketama analyze`.
#[derive(Args, Debug)]
pub struct AnalyzeArgs {
    /// Servers file.
    #[arg(long)]
    servers: ServersPath,
    #[command(flatten)]
    ring: RingArgs,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Measure each server's share of these requests too (one a line: a
    /// target, or with --request-format access-log the router's JSON
    /// access log), routed by the key (the key options; by default the
    /// router's, `$request_uri`).
    #[arg(long, value_name = "FILE")]
    keys: Option<std::path::PathBuf>,
    #[command(flatten)]
    key: crate::key_args::KeyArgs,
}

pub fn run(args: AnalyzeArgs) -> anyhow::Result<()> {
    let settings = args.ring.settings()?;
    let nodes = read_nodes(&args.servers)?;
    let ring = build_ring(&args.servers, nodes.clone(), settings)?;
    let a = analysis::analyze(&ring);
    let ring = std::sync::Arc::new(ring);
    let counts = measured(&args, &ring)?;
    let memory = analysis::layout_memory(&nodes, settings.point_multiple, settings);
    let points = ring.point_count().max(1) as f64;
    let mut out = std::io::stdout().lock();
    if args.json {
        let rows: Vec<_> = a
            .nodes
            .iter()
            .map(|n| {
                let node = &ring.nodes()[n.index];
                json!({
                    "server": node.server(),
                    "weight": n.weight,
                    "down": node.is_down(),
                    "points": n.points,
                    "collided": n.collided,
                    "expected_share": n.expected_share,
                    "share": n.share,
                    "relative_error": n.relative_error.map(num),
                })
            })
            .collect();
        let mem: serde_json::Map<String, serde_json::Value> = memory
            .iter()
            .map(|(l, b)| {
                (
                    l.name().to_string(),
                    b.map_or(serde_json::Value::Null, |b| json!(b)),
                )
            })
            .collect();
        let v = json!({
            "compat": ring.compat().to_string(),
            "uniform_key_hash": ring.compat().key_hash().is_uniform(),
            "point_multiple": ring.point_multiple(),
            "generated_points": a.generated_points,
            "ring_points": a.points,
            "predicted_cv": num(a.predicted_cv),
            "measured_cv": num(a.measured_cv),
            "max_overload": num(a.max_overload),
            "memory_bytes": mem,
            "nodes": rows,
            "requests": counts.as_ref().map(|c| json!({
                "counts": c.nodes,
                "unkeyed": c.unkeyed,
                "unserved": c.unserved,
            })),
        });
        writeln!(out, "{v}")?;
        return Ok(());
    }
    let width = ring
        .nodes()
        .iter()
        .map(|n| n.server().len())
        .max()
        .unwrap_or(6)
        .max(6);
    writeln!(
        out,
        "{:width$}  {:>8}  {:>10}  {:>8}  {:>10}  {:>10}  {:>9}",
        "server", "weight", "points", "collided", "expected", "share", "error"
    )?;
    for n in &a.nodes {
        let node = &ring.nodes()[n.index];
        let err = n
            .relative_error
            .map_or("-".to_string(), |e| format!("{:+.2}%", e * 100.0));
        writeln!(
            out,
            "{:width$}  {:>8}  {:>10}  {:>8}  {:>10.6}  {:>10.6}  {:>9}{}",
            node.server(),
            n.weight,
            n.points,
            n.collided,
            n.expected_share,
            n.share,
            err,
            if node.is_down() { "  down" } else { "" }
        )?;
    }
    writeln!(out)?;
    if ring.compat().is_envoy() {
        writeln!(
            out,
            "scheme {}: {} points generated, {} on the ring",
            ring.compat(),
            a.generated_points,
            a.points
        )?;
    } else {
        writeln!(
            out,
            "scheme {}, point multiple {}: {} points generated, {} on the ring",
            ring.compat(),
            ring.point_multiple(),
            a.generated_points,
            a.points
        )?;
    }
    if ring.compat().is_memcached() {
        writeln!(
            out,
            "points per server: {}'s floor(weight / total x 40 x N) x 4, not weight x point multiple",
            ring.compat().name()
        )?;
    }
    let hash = ring.compat().key_hash();
    if !hash.is_uniform() {
        writeln!(
            out,
            "note: {hash} does not spread keys over all 2^32 hashes, so the shares above are the keyspace's, not your keys' (with twemproxy's crc32 every key hashes below 32768; HAProxy's sdbm, djb2 and wt6 without avalanche cluster similar keys)"
        )?;
    }
    match ring.compat() {
        ketama::Scheme::EnvoyRingHash(r) => writeln!(
            out,
            "entries per server: Envoy's and gRPC's ring of {} to {} entries, scaled so that the lightest server gets a whole number; raise min to balance it",
            r.min_ring_size, r.max_ring_size
        )?,
        ketama::Scheme::Maglev(m) => writeln!(
            out,
            "slots per server: Maglev's table of {} slots, filled in turns by weight; its balance is the fill's, not a random ring's, so no CV is predicted",
            m.table_size
        )?,
        _ => {}
    }
    if let ketama::Scheme::Maglev(_) = ring.compat() {
        writeln!(out, "predicted CV  -")?;
    } else {
        writeln!(out, "predicted CV  {:.6}", a.predicted_cv)?;
    }
    writeln!(out, "measured CV   {:.6}", a.measured_cv)?;
    writeln!(out, "max overload  {:.4}", a.max_overload)?;
    if let Some(c) = &counts {
        let total: u64 = c.nodes.iter().sum();
        writeln!(out)?;
        writeln!(
            out,
            "{:width$}  {:>10}  {:>10}  {:>9}",
            "server", "requests", "share", "error"
        )?;
        for n in &a.nodes {
            let got = c.nodes[n.index];
            let share = got as f64 / total.max(1) as f64;
            let err = match n.expected_share > 0.0 {
                true => format!("{:+.2}%", (share / n.expected_share - 1.0) * 100.0),
                false => "-".to_string(),
            };
            writeln!(
                out,
                "{:width$}  {got:>10}  {share:>10.6}  {err:>9}",
                ring.nodes()[n.index].server()
            )?;
        }
        writeln!(
            out,
            "{total} requests routed by the key ({} no key placed, sent round robin; {} with no server)",
            c.unkeyed, c.unserved
        )?;
        writeln!(out)?;
    }
    for (l, b) in &memory {
        match b {
            Some(b) => writeln!(
                out,
                "memory {:8} {:>12} bytes  {:.2} B/point",
                l.name(),
                b,
                *b as f64 / points
            )?,
            None => writeln!(out, "memory {:8} {:>12}", l.name(), "cannot hold this ring")?,
        }
    }
    Ok(())
}

/// The requests of --keys counted by the server each goes to first.
fn measured(
    args: &AnalyzeArgs,
    ring: &std::sync::Arc<ketama::Ring>,
) -> anyhow::Result<Option<analysis::RequestCounts>> {
    let Some(path) = &args.keys else {
        if args.key.given() {
            anyhow::bail!(
                "the key options route requests: give --keys FILE with one request a line"
            );
        }
        return Ok(None);
    };
    if args.key.to_key_config.is_some() {
        anyhow::bail!(
            "--to-key-config prices a change: use ketama diff or migrate-plan --simulate"
        );
    }
    let key = match args.key.key(&[(ring.compat(), "--compat")])? {
        Some(k) => k,
        None => ketama_config::request_key(&Default::default(), "the router's default key", &[])?,
    };
    let requests = crate::requests::read_file(path, args.key.request_format)?;
    Ok(Some(analysis::request_counts(ring, &key, requests)?))
}
