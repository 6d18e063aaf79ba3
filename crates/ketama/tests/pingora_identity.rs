//! ketama's pingora schemes against the real pingora-ketama 0.9.1 (feature
//! `v2`): random configurations, random keys, forged keys on every collided
//! point, and failover order, in every layout.

mod common;

use std::net::SocketAddr;

use common::*;
use ketama::{Layout, Node, Ring, RingBuilder, Scheme};
use pingora_ketama::{Bucket, Continuum, Version};

struct Case {
    addrs: Vec<(SocketAddr, u32)>,
    nodes: Vec<Node>,
}

fn case(seed: u64, n: usize) -> Case {
    let mut r = rng(seed);
    let addrs = random_addr_nodes(&mut r, n);
    let nodes = addrs
        .iter()
        .map(|(a, w)| Node::new(a.to_string(), *w))
        .collect();
    Case { addrs, nodes }
}

fn pingora(c: &Case, version: Version) -> Continuum {
    let buckets: Vec<Bucket> = c.addrs.iter().map(|&(a, w)| Bucket::new(a, w)).collect();
    Continuum::new_with_version(&buckets, version)
}

fn ketama(c: &Case, compat: Scheme, layout: Layout, multiple: u32) -> Ring {
    let ring = RingBuilder::new()
        .compat(compat)
        .layout(layout)
        .point_multiple(multiple)
        .build(c.nodes.clone())
        .unwrap();
    ketama::testing::check_invariants(&ring).unwrap();
    ring
}

fn addr_of(n: Option<&Node>) -> Option<SocketAddr> {
    n.map(|n| n.server().parse().unwrap())
}

/// Compares one ketama ring with one pingora continuum on random keys and
/// on keys forged onto every collided point; returns the collided points
/// checked.
fn compare(c: &Case, ring: &Ring, theirs: &Continuum, seed: u64, keys: usize) -> usize {
    let mut r = rng(seed);
    let mut mismatches = 0;
    for _ in 0..keys {
        let key = random_key(&mut r);
        if addr_of(ring.node(&key)) != theirs.node(&key) {
            mismatches += 1;
        }
    }
    // The batch lookup agrees with pingora too.
    let mut r = rng(seed);
    let keys: Vec<Vec<u8>> = (0..keys).map(|_| random_key(&mut r)).collect();
    for (key, got) in keys.iter().zip(ring.nodes_for_keys(&keys)) {
        if addr_of(got) != theirs.node(key) {
            mismatches += 1;
        }
    }
    let collided = Reference::collided(&c.nodes, ring.point_multiple(), Prefix::Pingora);
    for (i, &h) in collided.iter().enumerate() {
        let key = forge_key(&i.to_string(), h);
        if addr_of(ring.node(&key)) != theirs.node(&key) {
            mismatches += 1;
        }
    }
    assert_eq!(
        mismatches,
        0,
        "{} {} ring disagrees with pingora-ketama",
        ring.compat(),
        ring.layout()
    );
    collided.len()
}

#[test]
fn v2_identical_on_random_configs() {
    for (seed, multiple) in [(1u64, 160u32), (2, 16), (3, 1)] {
        let c = case(seed, 2000);
        let theirs = pingora(
            &c,
            Version::V2 {
                point_multiple: multiple,
            },
        );
        let mut total_collided = 0;
        for layout in Layout::ALL {
            let ring = ketama(&c, Scheme::PingoraV2, layout, multiple);
            total_collided = compare(&c, &ring, &theirs, seed + 100, 20_000);
        }
        if multiple == 160 {
            // 2,000 nodes x ~5.5 x 160 points: hundreds of birthday collisions.
            assert!(total_collided > 50, "only {total_collided} collided points");
        }
    }
}

#[test]
fn v1_identical_on_random_configs() {
    for seed in [11u64, 12] {
        let c = case(seed, 2000);
        let theirs = pingora(&c, Version::V1);
        for layout in Layout::ALL {
            let ring = ketama(&c, Scheme::PingoraV1, layout, 160);
            let collided = compare(&c, &ring, &theirs, seed + 100, 20_000);
            assert!(collided > 50, "only {collided} collided points");
        }
    }
}

#[test]
fn v2_collision_winner_is_smallest_address() {
    let c = case(21, 2000);
    let ring = ketama(&c, Scheme::PingoraV2, Layout::Wide, 160);
    let reference = Reference::new(&c.nodes, 160, Prefix::Pingora, |i| {
        // rank by socket address: smaller address, smaller rank
        let mut sorted: Vec<SocketAddr> = c.addrs.iter().map(|a| a.0).collect();
        sorted.sort();
        sorted.binary_search(&c.addrs[i].0).unwrap() as u64
    });
    for (i, h) in Reference::collided(&c.nodes, 160, Prefix::Pingora)
        .into_iter()
        .enumerate()
    {
        let key = forge_key(&format!("w{i}"), h);
        assert_eq!(
            ring.node(&key).map(|n| n.server().to_string()),
            reference
                .node_for_hash(h)
                .map(|n| c.nodes[n].server().to_string())
        );
    }
}

#[test]
fn failover_is_pingora_node_iter_without_repeats() {
    let c = case(31, 300);
    for (compat, version) in [
        (Scheme::PingoraV1, Version::V1),
        (
            Scheme::PingoraV2,
            Version::V2 {
                point_multiple: 160,
            },
        ),
    ] {
        let theirs = pingora(&c, version);
        let ring = ketama(&c, compat, Layout::Packed, 160);
        let mut r = rng(32);
        for _ in 0..200 {
            let key = random_key(&mut r);
            let mut want: Vec<SocketAddr> = Vec::new();
            for a in theirs.node_iter(&key).take(ring.point_count()) {
                if !want.contains(a) {
                    want.push(*a);
                }
                if want.len() == 20 {
                    break;
                }
            }
            let got: Vec<SocketAddr> = ring
                .failover(&key)
                .take(20)
                .map(|n| n.server().parse().unwrap())
                .collect();
            assert_eq!(got, want);
            let replicas: Vec<SocketAddr> = ring
                .replicas(&key, 3)
                .into_iter()
                .map(|n| n.server().parse().unwrap())
                .collect();
            assert_eq!(replicas, want[..3]);
        }
    }
}
