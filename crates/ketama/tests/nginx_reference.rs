//! The `Nginx` scheme against an independent computation (a BTreeMap of
//! naively computed points, ties to the first node in configuration order):
//! forged keys on every collided point, and rings far beyond pingora's
//! 65,536-node limit.

mod common;

use common::*;
use ketama::{Error, Layout, Node, RingBuilder, Scheme};

fn check_against_reference(nodes: &[Node], multiple: u32, layout: Layout, keys: usize, seed: u64) {
    let ring = RingBuilder::new()
        .compat(Scheme::Nginx)
        .layout(layout)
        .point_multiple(multiple)
        .build(nodes.to_vec())
        .unwrap();
    ketama::testing::check_invariants(&ring).unwrap();
    let reference = Reference::new(nodes, multiple, Prefix::Nginx, |i| i as u64);
    assert_eq!(ring.point_count(), reference.map.len());
    let mut r = rng(seed);
    for _ in 0..keys {
        let key = random_key(&mut r);
        let h = ketama::Scheme::Nginx.hash_key(&key);
        assert_eq!(
            ring.node_index_for_hash(h),
            reference.node_for_hash(h),
            "key {key:?}"
        );
    }
    // Every point hash itself and its neighbours: the boundaries of every arc.
    for (&h, _) in reference.map.iter().step_by(reference.map.len() / 5000 + 1) {
        for x in [h.wrapping_sub(1), h, h.wrapping_add(1)] {
            assert_eq!(
                ring.node_index_for_hash(x),
                reference.node_for_hash(x),
                "hash {x:#x}"
            );
        }
    }
}

#[test]
fn collided_points_go_to_first_in_configuration_order() {
    // Colliding pairs found by search, placed both ways round among random
    // IPv4 and IPv6 servers, host names and unix paths.
    let mut r = rng(41);
    let mut nodes = Vec::new();
    for (i, (a, b)) in colliding_pairs().iter().enumerate() {
        if i % 2 == 0 {
            nodes.push(Node::new(a.clone(), 1));
            nodes.push(Node::new(b.clone(), 1));
        } else {
            nodes.push(Node::new(b.clone(), 1));
            nodes.push(Node::new(a.clone(), 1));
        }
    }
    for (i, (a, _)) in random_addr_nodes(&mut r, 300).into_iter().enumerate() {
        let s = match i % 4 {
            0 | 1 => a.to_string(),
            2 => format!("cache-{i}.example:{}", a.port()),
            _ => format!("unix:/run/cache-{i}.sock"),
        };
        nodes.push(Node::new(s, 1 + (i as u32 % 10)));
    }
    let collided = Reference::collided(&nodes, 160, Prefix::Nginx);
    assert!(collided.len() >= colliding_pairs().len());
    let reference = Reference::new(&nodes, 160, Prefix::Nginx, |i| i as u64);
    for layout in Layout::ALL {
        let ring = RingBuilder::new()
            .layout(layout)
            .build(nodes.clone())
            .unwrap();
        for (i, &h) in collided.iter().enumerate() {
            let key = forge_key(&i.to_string(), h);
            assert_eq!(
                ring.node_index_for_hash(ketama::Scheme::Nginx.hash_key(&key)),
                reference.node_for_hash(h)
            );
        }
        // The searched pairs: the first of each pair in configuration order wins.
        for pair in nodes[..2 * colliding_pairs().len()].chunks(2) {
            let first: std::collections::HashSet<u32> =
                naive_points(&prefix_of(pair[0].server(), &Prefix::Nginx), 160)
                    .into_iter()
                    .collect();
            let shared: Vec<u32> = naive_points(&prefix_of(pair[1].server(), &Prefix::Nginx), 160)
                .into_iter()
                .filter(|h| first.contains(h))
                .collect();
            assert!(!shared.is_empty());
            for h in shared {
                let key = forge_key("pair", h);
                assert_eq!(ring.node(&key).unwrap().server(), pair[0].server());
            }
        }
    }
}

#[test]
fn random_mixed_configs_match_reference() {
    let mut r = rng(51);
    let nodes: Vec<Node> = random_addr_nodes(&mut r, 500)
        .into_iter()
        .enumerate()
        .map(|(i, (a, w))| {
            Node::new(a.to_string(), if i % 50 == 0 { 0 } else { w }).with_down(i % 97 == 3)
        })
        .collect();
    for layout in Layout::ALL {
        check_against_reference(&nodes, 160, layout, 20_000, 52);
    }
}

#[test]
fn a_million_nodes_route_correctly_in_wide() {
    // 1,000,000 nodes (15x pingora's u16 limit) at one point each, so the
    // reference stays quick in a debug-sized test.
    let nodes: Vec<Node> = (0..1_000_000u32)
        .map(|i| {
            Node::new(
                format!(
                    "10.{}.{}.{}:{}",
                    i >> 16,
                    (i >> 8) & 255,
                    i & 255,
                    8000 + i % 7
                ),
                1,
            )
        })
        .collect();
    check_against_reference(&nodes, 1, Layout::Wide, 20_000, 61);
    check_against_reference(&nodes, 1, Layout::Compact, 20_000, 61);

    let err = RingBuilder::new()
        .layout(Layout::Packed)
        .point_multiple(1)
        .build(nodes)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::TooManyNodesForLayout {
                nodes: 1_000_000,
                max: 65_536,
                layout: Layout::Packed
            }
        ),
        "{err}"
    );
}

#[test]
fn more_than_65536_nodes_with_weights() {
    let mut r = rng(71);
    let nodes: Vec<Node> = (0..70_000u32)
        .map(|i| {
            Node::new(
                format!("cache-{i}.example:443"),
                rand::Rng::random_range(&mut r, 1..=3),
            )
        })
        .collect();
    check_against_reference(&nodes, 4, Layout::Wide, 20_000, 72);
}
