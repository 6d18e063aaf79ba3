//! `ketama bench --balance PCT`: the cost of the bounded-loads decision
//! (`RouteTable::next_bounded` with a `LoadTracker`) against the plain one
//! (`RouteTable::next`) and against a pingora-ketama v2 lookup, on one
//! thread and on two threads sharing the counters.
//!
//! Each bounded decision takes a slot and the oldest of the last
//! `IN_FLIGHT` slots is given back, so the counters hold a realistic load
//! (and the walk passes full nodes as it would in a router) rather than
//! sitting at zero.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use anyhow::bail;
use ketama::load::{BalanceFactor, LoadTracker};
use ketama::{Node, RingBuilder, RouteTable, Version};

use super::{make_keys, median, per, BenchArgs};

/// Requests kept in flight per thread.
const IN_FLIGHT: usize = 1_000;

fn plain(table: &RouteTable, keys: &[u8]) -> f64 {
    let n = keys.len() / 30;
    let t = Instant::now();
    let mut acc = 0usize;
    for i in 0..n {
        let mut r = table
            .route(&keys[i * 30..i * 30 + 30], None, None)
            .expect("no need");
        acc = acc.wrapping_add(table.next(&mut r).ok().flatten().unwrap_or(0));
    }
    black_box(acc);
    per(t.elapsed(), n)
}

/// ns per bounded decision on this thread, and spills per decision.
fn bounded(
    table: &RouteTable,
    tracker: &Arc<LoadTracker>,
    factor: BalanceFactor,
    w: u64,
    keys: &[u8],
) -> (f64, f64) {
    let n = keys.len() / 30;
    let mut held = VecDeque::with_capacity(IN_FLIGHT + 1);
    let mut spills = 0u64;
    let t = Instant::now();
    for i in 0..n {
        let mut r = table
            .route(&keys[i * 30..i * 30 + 30], None, None)
            .expect("no need");
        if let Ok(Some(p)) = table.next_bounded(&mut r, tracker, factor, w, |_| true) {
            spills += p.spills as u64;
            held.push_back(p.guard);
        }
        if held.len() > IN_FLIGHT {
            held.pop_front();
        }
    }
    let ns = per(t.elapsed(), n);
    drop(held);
    (ns, spills as f64 / n.max(1) as f64)
}

#[cfg(feature = "pingora")]
fn pingora_v2(names: &[String], weight: u32, multiple: u32, keys: &[u8]) -> f64 {
    use pingora_ketama::{Bucket, Continuum, Version};
    let buckets: Vec<Bucket> = names
        .iter()
        .map(|n| Bucket::new(n.parse().expect("bench names are socket addresses"), weight))
        .collect();
    let c = Continuum::new_with_version(
        &buckets,
        Version::V2 {
            point_multiple: multiple,
        },
    );
    let n = keys.len() / 30;
    let t = Instant::now();
    let mut acc = 0usize;
    for i in 0..n {
        acc = acc.wrapping_add(
            c.node(&keys[i * 30..i * 30 + 30])
                .map_or(0, |a| a.port() as usize),
        );
    }
    black_box(acc);
    per(t.elapsed(), n)
}

pub fn run(args: &BenchArgs, pct: u32) -> anyhow::Result<()> {
    let factor = BalanceFactor::new(pct).map_err(|e| anyhow::anyhow!("--balance {pct}: {e}"))?;
    if args.nodes == 0 || args.nodes > 1 << 16 {
        bail!(
            "--nodes {} is out of range: give 1 to 65536 (pingora-ketama's limit)",
            args.nodes
        );
    }
    if args.weight == 0 || args.keys == 0 || args.rounds == 0 {
        bail!("--weight, --keys and --rounds must be at least 1");
    }
    let names = ketama::synthetic::numbered(args.nodes, 443);
    let nodes: Vec<Node> = names
        .iter()
        .map(|n| Node::new(n.clone(), args.weight))
        .collect();
    let ring = RingBuilder::new()
        .compat(args.compat)
        .layout(args.layout)
        .point_multiple(args.point_multiple)
        .build(nodes)?;
    let table = Arc::new(RouteTable::new(Arc::new(ring)));
    let w = table.serving_weight(None, Version::Only, |_| true);
    let keys = Arc::new(make_keys(args.keys));
    // The second thread's keys: the same count, another stretch.
    let keys2 = Arc::new(make_keys(args.keys * 2).split_off(args.keys * 30));

    let mut rows: Vec<(&str, Vec<f64>, Vec<f64>)> = vec![
        ("plain decision (route + next)", vec![], vec![]),
        ("bounded, 1 thread", vec![], vec![]),
        ("bounded, 2 threads sharing the counters", vec![], vec![]),
    ];
    #[cfg(feature = "pingora")]
    rows.push(("pingora-ketama v2 lookup", vec![], vec![]));
    for round in 0..args.rounds {
        for k in 0..rows.len() {
            let i = (k + round) % rows.len();
            let (ns, spills) = match i {
                0 => (plain(&table, &keys), 0.0),
                1 => bounded(
                    &table,
                    &Arc::new(LoadTracker::new(&table)),
                    factor,
                    w,
                    &keys,
                ),
                2 => {
                    let tracker = Arc::new(LoadTracker::new(&table));
                    let start = Arc::new(Barrier::new(2));
                    let other = {
                        let (table, tracker, keys2, start) =
                            (table.clone(), tracker.clone(), keys2.clone(), start.clone());
                        std::thread::spawn(move || {
                            start.wait();
                            bounded(&table, &tracker, factor, w, &keys2)
                        })
                    };
                    start.wait();
                    let a = bounded(&table, &tracker, factor, w, &keys);
                    let b = other.join().expect("the second thread");
                    ((a.0 + b.0) / 2.0, (a.1 + b.1) / 2.0)
                }
                #[cfg(feature = "pingora")]
                _ => (
                    pingora_v2(&names, args.weight, args.point_multiple, &keys),
                    0.0,
                ),
                #[cfg(not(feature = "pingora"))]
                _ => unreachable!("three rows"),
            };
            rows[i].1.push(ns);
            rows[i].2.push(spills);
        }
        eprint!("\rround {}/{}", round + 1, args.rounds);
    }
    eprintln!();
    let med: Vec<(&str, f64, f64)> = rows
        .into_iter()
        .map(|(name, ns, sp)| (name, median(ns), median(sp)))
        .collect();
    let base = med[0].1;
    let v2 = med.get(3).map(|r| r.1);
    let title = format!(
        "{} nodes x weight {} x {} points, {} layout, balance factor {factor}, {} decisions of 30-byte keys per thread with {IN_FLIGHT} in flight per thread, median of {} interleaved rounds",
        args.nodes, args.weight, args.point_multiple, args.layout, args.keys, args.rounds
    );
    if args.json {
        let rows: Vec<_> = med
            .iter()
            .map(|(name, ns, sp)| {
                serde_json::json!({
                    "decision": name,
                    "ns_per_decision": ns,
                    "spills_per_decision": sp,
                    "vs_plain": ns / base,
                    "vs_v2": v2.map(|v| ns / v),
                })
            })
            .collect();
        println!("{}", serde_json::json!({ "setup": title, "rows": rows }));
        return Ok(());
    }
    println!("{title}\n");
    println!("| decision | ns/decision | spills/decision | vs plain | vs pingora v2 lookup |");
    println!("|---|---:|---:|---:|---:|");
    for (name, ns, sp) in &med {
        println!(
            "| {name} | {ns:.1} | {sp:.4} | {:.2} | {} |",
            ns / base,
            v2.map_or("-".into(), |v| format!("{:.2}", ns / v))
        );
    }
    Ok(())
}
