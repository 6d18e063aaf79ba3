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
    let plain = {
        let base = alloc::live();
        let r = RingBuilder::new()
            .compat(args.compat)
            .layout(args.layout)
            .point_multiple(args.point_multiple)
            .label_index(false)
            .build(nodes.clone())?;
        let bytes = alloc::live() - base;
        drop(r);
        bytes
    };
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

    // Lookups under every combination that some node satisfies.
    let keys = make_keys(args.keys);
    let n = keys.len() / 30;
    let key = |i: usize| &keys[i * 30..i * 30 + 30];
    let measured: Vec<u32> = combos
        .iter()
        .copied()
        .filter(|&c| reqs[c as usize].weight_share() > 0.0)
        .collect();
    let mut ketama_ns: Vec<Vec<f64>> = vec![Vec::new(); combos.len()];
    let mut pingora_ns: Vec<Vec<f64>> = vec![Vec::new(); combos.len()];
    for _ in 0..args.rounds {
        for &c in &measured {
            let req = &reqs[c as usize];
            let t = Instant::now();
            let mut acc = 0usize;
            for i in 0..n {
                acc = acc.wrapping_add(req.node_index_for_hash(ring.hash_key(key(i))).unwrap_or(0));
            }
            black_box(acc);
            ketama_ns[c as usize].push(per(t.elapsed(), n));
            #[cfg(feature = "pingora")]
            if let Some(r) = &pingora_rings[c as usize] {
                let t = Instant::now();
                let mut acc = 0u16;
                for i in 0..n {
                    acc = acc.wrapping_add(r.node(key(i)).map_or(0, |a| a.port()));
                }
                black_box(acc);
                pingora_ns[c as usize].push(per(t.elapsed(), n));
            }
        }
    }
    let rows: Vec<Row> = measured
        .iter()
        .map(|&c| {
            let k = median(ketama_ns[c as usize].clone());
            let pg = (!pingora_ns[c as usize].is_empty())
                .then(|| median(pingora_ns[c as usize].clone()));
            Row {
                combo: c,
                share: reqs[c as usize].weight_share(),
                dedicated: reqs[c as usize].is_dedicated(),
                ketama: k,
                pingora: pg,
            }
        })
        .collect();
    let unfiltered = rows[0].ketama;

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
        "| ketama {}: one ring (label index {} bytes) | {:.2} | 1.00 |",
        args.layout,
        ring.subset_heap_bytes(),
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
    println!(
        "| ketama {}: one ring without the label index | {:.2} | {:.3} |",
        args.layout,
        mb(plain),
        plain as f64 / single as f64
    );
    #[cfg(feature = "pingora")]
    println!(
        "| pingora-ketama v2: {} rings | {:.2} | {:.2} |",
        pingora_rings.iter().filter(|r| r.is_some()).count(),
        mb(pingora_total),
        pingora_total as f64 / single as f64
    );
    println!();
    let ratio = |a: f64, b: Option<f64>| b.map_or("-".into(), |b| format!("{:.2}", a / b));
    let ns = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
    if f <= 5 {
        println!("| required labels | eligible weight | ketama ns/lookup | vs unfiltered | pingora v2 ns/lookup (own ring) | ketama vs pingora |");
        println!("|---|---:|---:|---:|---:|---:|");
        for r in &rows {
            let name = if r.combo == 0 {
                "none".to_string()
            } else {
                labels_of(r.combo, f).join(",")
            };
            println!(
                "| {name} | {:.1}%{} | {:.1} | {:.2} | {} | {} |",
                r.share * 100.0,
                if r.dedicated { " (dedicated ring)" } else { "" },
                r.ketama,
                r.ketama / unfiltered,
                ns(r.pingora),
                ratio(r.ketama, r.pingora),
            );
        }
    } else {
        println!("| labels required | combinations | eligible weight | ketama ns/lookup (median, max) | vs unfiltered (max) | pingora v2 ns/lookup (median) | ketama vs pingora (median, max) |");
        println!("|---:|---:|---:|---:|---:|---:|---:|");
        for k in 0..=f {
            let group: Vec<&Row> = rows.iter().filter(|r| r.combo.count_ones() == k).collect();
            if group.is_empty() {
                continue;
            }
            let pick = |g: &dyn Fn(&Row) -> Option<f64>| -> Vec<f64> {
                group.iter().filter_map(|r| g(r)).collect()
            };
            let kt = pick(&|r| Some(r.ketama));
            let pg = pick(&|r| r.pingora);
            let vs = pick(&|r| r.pingora.map(|p| r.ketama / p));
            let shares = pick(&|r| Some(r.share));
            let max = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::max);
            let min = |v: &[f64]| v.iter().copied().fold(f64::NAN, f64::min);
            println!(
                "| {k} | {}{} | {:.1}-{:.1}% | {:.1}, {:.1} | {:.2} | {} | {}, {} |",
                group.len(),
                match group.iter().filter(|r| r.dedicated).count() {
                    0 => String::new(),
                    d => format!(" ({d} dedicated)"),
                },
                min(&shares) * 100.0,
                max(&shares) * 100.0,
                median(kt.clone()),
                max(&kt),
                max(&kt) / unfiltered,
                if pg.is_empty() {
                    "-".into()
                } else {
                    format!("{:.1}", median(pg))
                },
                if vs.is_empty() {
                    "-".into()
                } else {
                    format!("{:.2}", median(vs.clone()))
                },
                if vs.is_empty() {
                    "-".into()
                } else {
                    format!("{:.2}", max(&vs))
                },
            );
        }
    }
    let worst = rows
        .iter()
        .max_by(|a, b| a.ketama.total_cmp(&b.ketama))
        .expect("the unfiltered row");
    println!(
        "\nworst combination vs unfiltered: {} ({:.1}% of the weight) {:.2}x",
        labels_of(worst.combo, f).join(","),
        worst.share * 100.0,
        worst.ketama / unfiltered
    );
    if let Some(w) = rows.iter().filter(|r| r.pingora.is_some()).max_by(|a, b| {
        (a.ketama / a.pingora.unwrap_or(1.0)).total_cmp(&(b.ketama / b.pingora.unwrap_or(1.0)))
    }) {
        println!(
            "worst combination vs pingora's own ring: {} ({:.1}% of the weight) {:.2}x; {} of {} combinations at or under 1.0x",
            labels_of(w.combo, f).join(","),
            w.share * 100.0,
            w.ketama / w.pingora.unwrap_or(f64::NAN),
            rows.iter().filter(|r| r.pingora.is_some_and(|p| r.ketama <= p)).count(),
            rows.iter().filter(|r| r.pingora.is_some()).count(),
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

/// One combination's measurement.
struct Row {
    combo: u32,
    share: f64,
    dedicated: bool,
    ketama: f64,
    pingora: Option<f64>,
}
