//! `ketama diff`: the share of keys whose server changes between two rings:
//! exact when both hash keys with the same function, estimated from sampled
//! keys (with its confidence interval) when their hash spaces are unrelated.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context};
use clap::Args;
use ketama::analysis::{self, ServerDiff};
use serde_json::json;

use crate::args::TwoRings;
use crate::bench::key as bench_key;
use crate::key_args::KeyArgs;

/// Keys sampled by default where the moved share must be estimated.
pub const SAMPLES: u64 = 1_000_000;

/// Options of `ketama diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    #[command(flatten)]
    rings: TwoRings,
    /// Keys sampled when the two rings hash keys differently (CDN-like
    /// 30-byte paths; see --keys).
    #[arg(long, default_value_t = SAMPLES, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    samples: u64,
    /// Sample these keys (one per line) instead, when the rings hash keys
    /// differently: the estimate is then for your own keys.
    #[arg(long)]
    keys: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// The key (as `ketama route`'s key options, --to-key-config the new
    /// side's); with a key, the lines of --keys are requests, each routed
    /// by what each side's key takes of it.
    #[command(flatten)]
    key: KeyArgs,
}

pub fn run(args: DiffArgs) -> anyhow::Result<()> {
    let (from, to) = args.rings.load()?;
    if args.key.given() {
        return keyed(&args, from, to);
    }
    let d = match analysis::diff(&from, &to) {
        Ok(d) => d,
        // Different key hashes: only an estimate means anything.
        Err(ketama::Error::DiffNeedsSampling { .. }) => return sampled(&args, &from, &to),
        Err(e) => return Err(e.into()),
    };
    if args.json {
        println!(
            "{}",
            json!({"moved": d.moved, "moved_keys": d.moved_keys, "servers": servers_json(&d.servers)})
        );
        return Ok(());
    }
    print_servers(&d.servers);
    println!(
        "moved: {:.6} of the keyspace ({} of 2^32 keys): the share of cached objects that miss after the change",
        d.moved, d.moved_keys
    );
    Ok(())
}

fn sampled(args: &DiffArgs, from: &ketama::Ring, to: &ketama::Ring) -> anyhow::Result<()> {
    let (fh, th) = (from.compat().key_hash(), to.compat().key_hash());
    let by = |c: ketama::Scheme| match c.key_hash() == ketama::Scheme::Nginx.key_hash() {
        true => "CRC-32".to_string(),
        false => c.key_hash().to_string(),
    };
    let why = if fh != th {
        format!(
            "the rings hash keys differently ({} by {}, {} by {}), so their hash spaces are unrelated",
            from.compat(),
            by(from.compat()),
            to.compat(),
            by(to.compat())
        )
    } else {
        format!("{fh} does not spread keys over all 2^32 hashes, so arc lengths are not key shares")
    };
    let d = match &args.keys {
        Some(path) => {
            let text = std::fs::read(path)
                .with_context(|| format!("cannot read keys file {}", path.display()))?;
            let keys: Vec<&[u8]> = text
                .split(|&b| b == b'\n')
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                .filter(|l| !l.is_empty())
                .collect();
            if keys.is_empty() {
                bail!(
                    "keys file {} holds no key: write one key per line",
                    path.display()
                );
            }
            analysis::diff_sampled(from, to, keys)
        }
        None => analysis::diff_sampled(from, to, (0..args.samples).map(bench_key)),
    };
    let source = match &args.keys {
        Some(p) => format!("the keys of {}", p.display()),
        None => "synthetic 30-byte keys".to_string(),
    };
    if args.json {
        println!("{}", estimated_json(&d, ("why", json!(why))));
        return Ok(());
    }
    print_servers(&d.servers);
    println!(
        "moved: {:.6} (95% confidence interval {:.6} to {:.6}), estimated from {} sampled keys ({source}, {} moved): {why}",
        d.moved, d.ci95.0, d.ci95.1, d.samples, d.moved_samples
    );
    Ok(())
}

/// A change of key (and ring) priced over the requests of --keys.
fn keyed(args: &DiffArgs, from: ketama::Ring, to: ketama::Ring) -> anyhow::Result<()> {
    let Some(path) = &args.keys else {
        bail!("a key is priced over requests: give --keys FILE with one request a line (a target such as /a?b=1, or with --request-format access-log the router's JSON access log)");
    };
    let (from, to) = (Arc::new(from), Arc::new(to));
    let (from_key, to_key) = args
        .key
        .both(
            (from.compat(), "--from-compat"),
            (to.compat(), "--to-compat"),
        )?
        .context("a key option is given")?;
    let requests = crate::requests::read_file(path, args.key.request_format)?;
    let r = analysis::diff_requests((&from, &from_key), (&to, &to_key), requests)?;
    let d = &r.diff;
    if args.json {
        println!("{}", estimated_json(d, ("unkeyed", json!(r.unkeyed))));
        return Ok(());
    }
    print_servers(&d.servers);
    println!(
        "moved: {:.6} (95% confidence interval {:.6} to {:.6}) of {} requests of {} ({} moved), each routed by each side's key; {} requests no key placed (sent round robin) left out",
        d.moved,
        d.ci95.0,
        d.ci95.1,
        d.samples,
        path.display(),
        d.moved_samples,
        r.unkeyed
    );
    Ok(())
}

/// A moved share estimated from samples, as JSON: what either estimate
/// says, and its own `extra` field (why it was estimated, or how many
/// requests no key placed).
fn estimated_json(
    d: &analysis::SampledDiff,
    extra: (&str, serde_json::Value),
) -> serde_json::Value {
    let mut v = json!({
        "moved": d.moved,
        "estimated": true,
        "samples": d.samples,
        "moved_samples": d.moved_samples,
        "ci95": [d.ci95.0, d.ci95.1],
        "servers": servers_json(&d.servers),
    });
    v[extra.0] = extra.1;
    v
}

fn servers_json(servers: &[ServerDiff]) -> Vec<serde_json::Value> {
    servers
        .iter()
        .map(|s| json!({"server": s.server, "gained": s.gained, "lost": s.lost}))
        .collect()
}

fn print_servers(servers: &[ServerDiff]) {
    let width = servers
        .iter()
        .map(|s| s.server.len())
        .max()
        .unwrap_or(6)
        .max(6);
    println!("{:width$}  {:>10}  {:>10}", "server", "gained", "lost");
    for ServerDiff {
        server,
        gained,
        lost,
    } in servers
    {
        println!("{server:width$}  {gained:>10.6}  {lost:>10.6}");
    }
    println!();
}
