//! ketama's three layouts against pingora-ketama v1 and v2 in the same run:
//! building a ring and looking keys up, at 16k and 1.6M points.
//!
//! `cargo bench -p ketama` (the `ketama bench` command prints the same
//! comparison as one table, with memory).

use std::hint::black_box;
use std::net::SocketAddr;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use ketama::{Layout, Node, Ring, RingBuilder};
use pingora_ketama::{Bucket, Continuum, Version};

fn names(n: u32) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.{}.{}.{}:443", i >> 16, (i >> 8) & 255, i & 255))
        .collect()
}

fn nodes(names: &[String]) -> Vec<Node> {
    names.iter().map(|n| Node::new(n.clone(), 1)).collect()
}

fn buckets(names: &[String]) -> Vec<Bucket> {
    names
        .iter()
        .map(|n| Bucket::new(n.parse::<SocketAddr>().unwrap(), 1))
        .collect()
}

/// 30-byte keys.
fn keys(n: usize) -> Vec<Vec<u8>> {
    (0..n as u64)
        .map(|i| {
            format!(
                "/cdn/obj/{:021x}",
                i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20
            )
            .into_bytes()
        })
        .collect()
}

fn build(c: &mut Criterion) {
    let mut g = c.benchmark_group("build");
    g.sample_size(10);
    for n in [100u32, 10_000] {
        let names = names(n);
        let points = n as u64 * 160;
        g.throughput(Throughput::Elements(points));
        for layout in Layout::ALL {
            g.bench_with_input(
                BenchmarkId::new(format!("ketama {layout}"), points),
                &names,
                |b, names| {
                    b.iter_batched(
                        || nodes(names),
                        |nodes| RingBuilder::new().layout(layout).build(nodes).unwrap(),
                        BatchSize::LargeInput,
                    )
                },
            );
        }
        for (name, version) in [
            ("pingora v1", Version::V1),
            (
                "pingora v2",
                Version::V2 {
                    point_multiple: 160,
                },
            ),
        ] {
            let b_ = buckets(&names);
            g.bench_with_input(BenchmarkId::new(name, points), &b_, |b, bk| {
                b.iter(|| Continuum::new_with_version(bk, version))
            });
        }
    }
    g.finish();
}

fn lookup(c: &mut Criterion) {
    let keys = keys(4096);
    let mut g = c.benchmark_group("lookup");
    g.throughput(Throughput::Elements(keys.len() as u64));
    for n in [100u32, 10_000] {
        let names = names(n);
        let points = n as u64 * 160;
        for layout in Layout::ALL {
            let ring: Ring = RingBuilder::new()
                .layout(layout)
                .build(nodes(&names))
                .unwrap();
            g.bench_function(BenchmarkId::new(format!("ketama {layout}"), points), |b| {
                b.iter(|| {
                    for k in &keys {
                        black_box(ring.node(black_box(k)));
                    }
                })
            });
            let hashes: Vec<u32> = keys.iter().map(|k| ring.hash_key(k)).collect();
            let mut out = Vec::with_capacity(hashes.len());
            g.bench_function(
                BenchmarkId::new(
                    format!("ketama {layout} batch (hashes precomputed)"),
                    points,
                ),
                |b| {
                    b.iter(|| {
                        ring.node_indices_for_hashes(black_box(&hashes), &mut out);
                        black_box(&out);
                    })
                },
            );
        }
        for (name, version) in [
            ("pingora v1", Version::V1),
            (
                "pingora v2",
                Version::V2 {
                    point_multiple: 160,
                },
            ),
        ] {
            let ring = Continuum::new_with_version(&buckets(&names), version);
            g.bench_function(BenchmarkId::new(name, points), |b| {
                b.iter(|| {
                    for k in &keys {
                        black_box(ring.node(black_box(k)));
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, build, lookup, subsets);
criterion_main!(benches);

/// One ketama ring with 5 labels (with its label index, and without it)
/// against a pingora-ketama v2 ring per combination: lookups for a dense
/// (one label), a 1-in-8 and the sparsest (all five labels) combination.
fn subsets(c: &mut Criterion) {
    const F: u32 = 5;
    let names = names(10_000);
    let bits = |i: usize| (ketama::mix::mix64(0x5EED_0000 + i as u64) as u32) & ((1 << F) - 1);
    let labels = |b: u32| {
        (0..F)
            .filter(|j| b & (1 << j) != 0)
            .map(|j| format!("f{j}"))
            .collect::<Vec<_>>()
    };
    let nodes: Vec<Node> = names
        .iter()
        .enumerate()
        .map(|(i, n)| Node::new(n.clone(), 1).with_labels(labels(bits(i))))
        .collect();
    let build = |index: bool| {
        std::sync::Arc::new(
            RingBuilder::new()
                .layout(Layout::Compact)
                .label_index(index)
                .build(nodes.clone())
                .unwrap(),
        )
    };
    let rings = [
        ("ketama compact, one ring", build(true)),
        ("ketama compact, one ring without label index", build(false)),
    ];
    let keys = keys(4096);
    let mut g = c.benchmark_group("subsets");
    g.throughput(Throughput::Elements(keys.len() as u64));
    for combo in [0u32, 0b1, 0b111, 0b11111] {
        let name = format!("{} labels", combo.count_ones());
        for (what, ring) in &rings {
            let req = ketama::Requirement::new(ring, &labels(combo)).unwrap();
            g.bench_function(BenchmarkId::new(*what, &name), |b| {
                b.iter(|| {
                    for k in &keys {
                        black_box(req.node(black_box(k)));
                    }
                })
            });
        }
        let buckets: Vec<Bucket> = names
            .iter()
            .enumerate()
            .filter(|(i, _)| bits(*i) & combo == combo)
            .map(|(_, n)| Bucket::new(n.parse::<SocketAddr>().unwrap(), 1))
            .collect();
        let own = Continuum::new_with_version(
            &buckets,
            Version::V2 {
                point_multiple: 160,
            },
        );
        g.bench_function(
            BenchmarkId::new("pingora v2, ring of the combination", &name),
            |b| {
                b.iter(|| {
                    for k in &keys {
                        black_box(own.node(black_box(k)));
                    }
                })
            },
        );
    }
    g.finish();
}
