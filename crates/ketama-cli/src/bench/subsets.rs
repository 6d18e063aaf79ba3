//! `ketama bench --subsets F`: one ketama ring serving every combination of
//! F labels against one pingora-ketama v2 ring per combination.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use anyhow::bail;

use ketama::{Node, Requirement, RequirementCache, RingBuilder};

use super::{alloc, make_keys, median, per, BenchArgs};

/// Share of the ring's points the requirement cache (dedicated rings of
/// sparse combinations) may add.
const CACHE_SHARE: f64 = 0.15;

/// The labels of node `i`: label `j` with probability 1/2, from a fixed
/// SplitMix64 stream, so every run gets the same assignment.
fn label_bits(i: u32, f: u32) -> u32 {
    ketama::mix::mix64(0x5EED_0000 + i as u64) as u32 & ((1 << f) - 1)
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

    // A ring of the nodes with or without its label index, and its bytes.
    let build = |index: bool| -> anyhow::Result<(Arc<ketama::Ring>, usize)> {
        let base = alloc::live();
        let ring = RingBuilder::new()
            .compat(args.compat)
            .layout(args.layout)
            .point_multiple(args.point_multiple)
            .label_index(index)
            .build(nodes.clone())?;
        Ok((Arc::new(ring), alloc::live() - base))
    };
    // ketama: one ring, then a requirement for every combination.
    let base = alloc::live();
    let (ring, single) = build(true)?;
    // The same ring without the label index: its memory, and its walk
    // (requirements under 1/16 of the weight on dedicated rings) beside.
    let (unindexed, plain) = build(false)?;
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
    let ketama_total = alloc::live() - base - plain;
    let unindexed_reqs = combos
        .iter()
        .map(|&c| Requirement::new(&unindexed, &labels_of(c, f)))
        .collect::<Result<Vec<_>, _>>()?;

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
    // Each round times every combination right after the unfiltered
    // lookup and beside pingora's ring, and the ratios are taken within the
    // round: this machine's speed drifts by more than the differences
    // measured, over the minutes a run takes.
    let mut m: Vec<Measured> = vec![Measured::default(); combos.len()];
    // Every timing first runs an eighth of its lookups untimed, so that
    // each starts with its own structures in cache, not the previous one's.
    let warm = n / 8;
    let time = |req: &Requirement| {
        let mut acc = 0usize;
        for i in 0..warm {
            acc = acc.wrapping_add(req.node_index_for_hash(ring.hash_key(key(i))).unwrap_or(0));
        }
        let t = Instant::now();
        for i in 0..n {
            acc = acc.wrapping_add(req.node_index_for_hash(ring.hash_key(key(i))).unwrap_or(0));
        }
        black_box(acc);
        per(t.elapsed(), n)
    };
    for round in 0..args.rounds {
        for &c in &measured {
            let m = &mut m[c as usize];
            // Which of the two goes first alternates between rounds.
            let (unfiltered, k) = if round % 2 == 0 {
                let u = time(&reqs[0]);
                (u, time(&reqs[c as usize]))
            } else {
                let k = time(&reqs[c as usize]);
                (time(&reqs[0]), k)
            };
            let w = time(&unindexed_reqs[c as usize]);
            m.ketama.push(k);
            m.vs_unfiltered.push(k / unfiltered);
            m.walk_vs_unfiltered.push(w / unfiltered);
            #[cfg(feature = "pingora")]
            if let Some(r) = &pingora_rings[c as usize] {
                let mut acc = 0u16;
                for i in 0..warm {
                    acc = acc.wrapping_add(r.node(key(i)).map_or(0, |a| a.port()));
                }
                let t = Instant::now();
                for i in 0..n {
                    acc = acc.wrapping_add(r.node(key(i)).map_or(0, |a| a.port()));
                }
                black_box(acc);
                let p = per(t.elapsed(), n);
                m.pingora.push(p);
                m.vs_pingora.push(k / p);
            }
        }
    }
    let some = |v: &Vec<f64>| (!v.is_empty()).then(|| median(v.clone()));
    let rows: Vec<Row> = measured
        .iter()
        .map(|&c| {
            let m = &m[c as usize];
            Row {
                combo: c,
                share: reqs[c as usize].weight_share(),
                dedicated: reqs[c as usize].is_dedicated(),
                ketama: median(m.ketama.clone()),
                vs_unfiltered: median(m.vs_unfiltered.clone()),
                walk_vs_unfiltered: median(m.walk_vs_unfiltered.clone()),
                walk_dedicated: unindexed_reqs[c as usize].is_dedicated(),
                pingora: some(&m.pingora),
                vs_pingora: some(&m.vs_pingora),
            }
        })
        .collect();

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
        "| ketama {}: one ring | {:.2} | 1.000 |",
        args.layout,
        mb(plain)
    );
    println!(
        "| ketama {}: one ring with its label index ({} bytes of subset tables) | {:.2} | {:.3} |",
        args.layout,
        ring.subset_heap_bytes(),
        mb(single),
        single as f64 / plain as f64
    );
    println!(
        "| ketama {}: one ring, its label index and all {} requirements (dedicated rings capped at {:.0}% of the points) | {:.2} | {:.3} |",
        args.layout,
        combos.len(),
        CACHE_SHARE * 100.0,
        mb(ketama_total),
        ketama_total as f64 / plain as f64
    );
    #[cfg(feature = "pingora")]
    println!(
        "| pingora-ketama v2: {} rings | {:.2} | {:.2} |",
        pingora_rings.iter().filter(|r| r.is_some()).count(),
        mb(pingora_total),
        pingora_total as f64 / plain as f64
    );
    println!();
    let ns = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
    let ratio = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    if f <= 5 {
        println!("| required labels | eligible weight | ketama ns/lookup | vs unfiltered | pingora v2 ns/lookup (own ring) | ketama vs pingora | without label index: vs unfiltered |");
        println!("|---|---:|---:|---:|---:|---:|---:|");
        for r in &rows {
            let name = if r.combo == 0 {
                "none".to_string()
            } else {
                labels_of(r.combo, f).join(",")
            };
            println!(
                "| {name} | {:.1}%{} | {:.1} | {:.2} | {} | {} | {:.2}{} |",
                r.share * 100.0,
                if r.dedicated { " (dedicated ring)" } else { "" },
                r.ketama,
                r.vs_unfiltered,
                ns(r.pingora),
                ratio(r.vs_pingora),
                r.walk_vs_unfiltered,
                if r.walk_dedicated { " (dedicated)" } else { "" },
            );
        }
    } else {
        println!("| labels required | combinations | eligible weight | ketama ns/lookup (median, max) | vs unfiltered (median, max) | pingora v2 ns/lookup (median) | ketama vs pingora (median, max) | without label index: vs unfiltered (median, max) |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
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
            let vs = pick(&|r| r.vs_pingora);
            let vu = pick(&|r| Some(r.vs_unfiltered));
            let shares = pick(&|r| Some(r.share));
            let walks = pick(&|r| Some(r.walk_vs_unfiltered));
            let opt = |v: &[f64], f: &dyn Fn(Vec<f64>) -> f64| {
                if v.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.2}", f(v.to_vec()))
                }
            };
            println!(
                "| {k} | {}{} | {:.1}-{:.1}% | {:.1}, {:.1} | {:.2}, {:.2} | {} | {}, {} | {:.2}, {:.2} |",
                group.len(),
                match group.iter().filter(|r| r.dedicated).count() {
                    0 => String::new(),
                    d => format!(" ({d} dedicated)"),
                },
                fmin(&shares) * 100.0,
                fmax(&shares) * 100.0,
                median(kt.clone()),
                fmax(&kt),
                median(vu.clone()),
                fmax(&vu),
                if pg.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.1}", median(pg.clone()))
                },
                opt(&vs, &median),
                opt(&vs, &|v| fmax(&v)),
                median(walks.clone()),
                fmax(&walks),
            );
        }
    }
    let worst = rows
        .iter()
        .max_by(|a, b| a.vs_unfiltered.total_cmp(&b.vs_unfiltered))
        .expect("the unfiltered row");
    println!(
        "\nworst combination vs unfiltered: {} ({:.1}% of the weight) {:.2}x; {} of {} combinations at or under 1.3x",
        labels_of(worst.combo, f).join(","),
        worst.share * 100.0,
        worst.vs_unfiltered,
        rows.iter().filter(|r| r.vs_unfiltered <= 1.3).count(),
        rows.len(),
    );
    let with_pingora: Vec<&Row> = rows.iter().filter(|r| r.vs_pingora.is_some()).collect();
    let vs = |r: &Row| r.vs_pingora.unwrap_or(f64::NAN);
    if let Some(w) = with_pingora.iter().max_by(|a, b| vs(a).total_cmp(&vs(b))) {
        println!(
            "worst combination vs pingora's own ring: {} ({:.1}% of the weight) {:.2}x; {} of {} combinations at or under 1.0x",
            labels_of(w.combo, f).join(","),
            w.share * 100.0,
            vs(w),
            with_pingora.iter().filter(|r| vs(r) <= 1.0).count(),
            with_pingora.len(),
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

fn fmax(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

fn fmin(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::min)
}

/// One combination's timings, a value per round.
#[derive(Clone, Debug, Default)]
struct Measured {
    ketama: Vec<f64>,
    vs_unfiltered: Vec<f64>,
    walk_vs_unfiltered: Vec<f64>,
    pingora: Vec<f64>,
    vs_pingora: Vec<f64>,
}

/// One combination's medians (ratios: medians of the rounds' ratios).
struct Row {
    combo: u32,
    share: f64,
    dedicated: bool,
    ketama: f64,
    vs_unfiltered: f64,
    /// Without the label index.
    walk_vs_unfiltered: f64,
    walk_dedicated: bool,
    pingora: Option<f64>,
    vs_pingora: Option<f64>,
}
