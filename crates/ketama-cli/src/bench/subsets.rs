//! `ketama bench --subsets F`: one ketama ring serving every combination of
//! F labels against one pingora-ketama v2 ring per combination.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use anyhow::bail;

use ketama::{Node, RequirementCache, RingBuilder};

use super::{alloc, make_keys, median, per, BenchArgs};

/// Share of the ring's points the requirement cache (dedicated rings of
/// sparse combinations) may add.
const CACHE_SHARE: f64 = 0.15;

/// The labels of node `i`: label `j` with probability 1/2, from a fixed
/// SplitMix64 stream, so every run gets the same assignment.
fn label_bits(i: u32, f: u32) -> u32 {
    ketama::migration::mix64(0x5EED_0000 + i as u64) as u32 & ((1 << f) - 1)
}

fn label(j: u32) -> String {
    format!("f{j}")
}

fn labels_of(bits: u32, f: u32) -> Vec<String> {
    (0..f).filter(|j| bits & (1 << j) != 0).map(label).collect()
}

pub fn run(args: &BenchArgs, f: u32) -> anyhow::Result<()> {
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
        .enumerate()
        .map(|(i, n)| {
            Node::new(n.clone(), args.weight).with_labels(labels_of(label_bits(i as u32, f), f))
        })
        .collect();
    let combos: Vec<u32> = (0..1u32 << f).collect();

    // ketama: one ring, then a requirement for every combination.
    let base = alloc::live();
    let ring = Arc::new(
        RingBuilder::new()
            .compat(args.compat)
            .layout(args.layout)
            .point_multiple(args.point_multiple)
            .build(nodes.clone())?,
    );
    let single = alloc::live() - base;
    let cache = RequirementCache::new(
        ring.clone(),
        (ring.points_heap_bytes() as f64 * CACHE_SHARE) as usize,
    );
    // Sparsest combinations first: they gain most from a dedicated ring.
    let mut order = combos.clone();
    order.sort_by_key(|c| std::cmp::Reverse(c.count_ones()));
    let mut reqs = vec![None; combos.len()];
    for &c in &order {
        reqs[c as usize] = Some(cache.get(&labels_of(c, f))?);
    }
    let reqs: Vec<_> = reqs
        .into_iter()
        .map(|r| r.expect("every combination"))
        .collect();
    let ketama_total = alloc::live() - base;

    // pingora-ketama: a ring per combination with an eligible node.
    #[cfg(feature = "pingora")]
    let (pingora_rings, pingora_total) = {
        use pingora_ketama::{Bucket, Continuum, Version};
        let base = alloc::live();
        let rings: Vec<Option<Continuum>> = combos
            .iter()
            .map(|&c| {
                let buckets: Vec<Bucket> = (0..nodes.len())
                    .filter(|&i| label_bits(i as u32, f) & c == c)
                    .map(|i| Bucket::new(names[i].parse().expect("socket address"), args.weight))
                    .collect();
                (!buckets.is_empty()).then(|| {
                    Continuum::new_with_version(
                        &buckets,
                        Version::V2 {
                            point_multiple: args.point_multiple,
                        },
                    )
                })
            })
            .collect();
        let total = alloc::live() - base;
        (rings, total)
    };

    // Lookups: no requirement, one label, three labels, all labels.
    let mut counts: Vec<u32> = vec![0, 1, 3.min(f), f];
    counts.dedup();
    let picks: Vec<(String, u32)> = counts
        .iter()
        .map(|&j| {
            let c = (1u32 << j) - 1;
            let name = if j == 0 {
                "none".to_string()
            } else {
                labels_of(c, f).join(",")
            };
            (name, c)
        })
        .collect();
    let keys = make_keys(args.keys);
    let n = keys.len() / 30;
    let key = |i: usize| &keys[i * 30..i * 30 + 30];
    let mut ketama_ns: Vec<Vec<f64>> = vec![Vec::new(); picks.len()];
    let mut pingora_ns: Vec<Vec<f64>> = vec![Vec::new(); picks.len()];
    for _ in 0..args.rounds {
        for (p, &(_, c)) in picks.iter().enumerate() {
            let req = &reqs[c as usize];
            let t = Instant::now();
            let mut acc = 0usize;
            for i in 0..n {
                acc = acc.wrapping_add(req.node_index_for_hash(ring.hash_key(key(i))).unwrap_or(0));
            }
            black_box(acc);
            ketama_ns[p].push(per(t.elapsed(), n));
            #[cfg(feature = "pingora")]
            if let Some(r) = &pingora_rings[c as usize] {
                let t = Instant::now();
                let mut acc = 0u16;
                for i in 0..n {
                    acc = acc.wrapping_add(r.node(key(i)).map_or(0, |a| a.port()));
                }
                black_box(acc);
                pingora_ns[p].push(per(t.elapsed(), n));
            }
        }
    }

    let points = ring.point_count().max(1);
    let mb = |b: usize| b as f64 / 1e6;
    println!(
        "{} nodes x weight {} x {} points, {f} labels (each node carries each with probability 1/2), {} combinations, {} lookups of 30-byte keys, median of {} rounds\n",
        args.nodes,
        args.weight,
        args.point_multiple,
        combos.len(),
        args.keys,
        args.rounds
    );
    println!("| memory | MB | vs one ketama ring |");
    println!("|---|---:|---:|");
    println!(
        "| ketama {}: one ring | {:.2} | 1.00 |",
        args.layout,
        mb(single)
    );
    println!(
        "| ketama {}: one ring + all {} requirements (dedicated rings capped at {:.0}% of the points) | {:.2} | {:.3} |",
        args.layout,
        combos.len(),
        CACHE_SHARE * 100.0,
        mb(ketama_total),
        ketama_total as f64 / single as f64
    );
    #[cfg(feature = "pingora")]
    println!(
        "| pingora-ketama v2: {} rings | {:.2} | {:.2} |",
        pingora_rings.iter().filter(|r| r.is_some()).count(),
        mb(pingora_total),
        pingora_total as f64 / single as f64
    );
    println!();
    println!("| required labels | eligible weight | ketama ns/lookup | vs unfiltered | pingora v2 ns/lookup (own ring) | ketama vs pingora |");
    println!("|---|---:|---:|---:|---:|---:|");
    let unfiltered = median(ketama_ns[0].clone());
    for (p, (name, c)) in picks.iter().enumerate() {
        let k = median(ketama_ns[p].clone());
        let pg = (!pingora_ns[p].is_empty()).then(|| median(pingora_ns[p].clone()));
        println!(
            "| {name} | {:.1}%{} | {k:.1} | {:.2} | {} | {} |",
            reqs[*c as usize].weight_share() * 100.0,
            if reqs[*c as usize].is_dedicated() {
                " (dedicated ring)"
            } else {
                ""
            },
            k / unfiltered,
            pg.map_or("-".into(), |v| format!("{v:.1}")),
            pg.map_or("-".into(), |v| format!("{:.2}", k / v)),
        );
    }
    println!(
        "\n(ketama ring: {} points, {:.2} B/point; subset tables {} bytes)",
        points,
        ring.points_heap_bytes() as f64 / points as f64,
        ring.subset_heap_bytes()
    );
    Ok(())
}
