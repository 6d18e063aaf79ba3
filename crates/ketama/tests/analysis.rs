//! The analysis against the article's figures, brute force and the laws.

use ketama::analysis::{self, KEYSPACE};
use ketama::synthetic;
use ketama::{Layout, Node, Ring, RingBuilder};

fn ring(servers: &[String], multiple: u32, layout: Layout) -> Ring {
    RingBuilder::new()
        .layout(layout)
        .point_multiple(multiple)
        .build(servers.iter().map(|s| Node::new(s.clone(), 1)).collect())
        .unwrap()
}

#[test]
fn predicted_cv_matches_the_article() {
    let close = |x: f64, want: f64| (x - want).abs() / want < 0.005;
    assert!(close(analysis::predicted_cv_equal(100, 1), 0.990));
    assert!(close(analysis::predicted_cv_equal(100, 160), 0.0787));
    assert!(close(analysis::predicted_cv_equal(100, 10_000), 0.00995));
    assert!(close(analysis::predicted_cv_equal(100, 100_000), 0.00315));
    // The weighted form reduces to it for equal weights...
    let w = vec![3u32; 100];
    assert!(
        (analysis::predicted_cv(&w, 160) - analysis::predicted_cv_equal(100, 480)).abs() < 1e-12
    );
    // ...and a node with more points varies less.
    let a = analysis::predicted_cv_of(160, 16_000).unwrap();
    let b = analysis::predicted_cv_of(1600, 16_000).unwrap();
    assert!(b < a);
}

#[test]
fn measured_cv_within_15_percent_where_collisions_are_negligible() {
    for k in [1u32, 3, 10, 30, 100, 300, 1000] {
        let trials = 40;
        let mut cvs = Vec::new();
        for t in 0..trials {
            let servers = synthetic::seeded(100, 1000 * k as u64 + t);
            cvs.push(analysis::analyze(&ring(&servers, k, Layout::Wide)).measured_cv);
        }
        let mean = cvs.iter().sum::<f64>() / cvs.len() as f64;
        let predicted = analysis::predicted_cv_equal(100, k as u64);
        assert!(
            (mean - predicted).abs() / predicted < 0.15,
            "k = {k}: measured {mean}, predicted {predicted}"
        );
    }
}

#[test]
fn shares_are_exact_and_agree_with_a_full_sample() {
    let mut nodes: Vec<Node> = synthetic::seeded(40, 7)
        .into_iter()
        .enumerate()
        .map(|(i, s)| Node::new(s, 1 + i as u32 % 4).with_down(i % 13 == 5))
        .collect();
    nodes.push(Node::new("drained:1", 0));
    for layout in Layout::ALL {
        let ring = RingBuilder::new()
            .layout(layout)
            .point_multiple(20)
            .build(nodes.clone())
            .unwrap();
        let keys = analysis::keyspace(&ring);
        assert_eq!(keys.iter().sum::<u64>(), KEYSPACE);
        let a = analysis::analyze(&ring);
        let total: f64 = a.nodes.iter().map(|n| n.share).sum();
        assert!((total - 1.0).abs() < 1e-12);
        // 2^20 evenly spaced hashes: every 4,096th key of the keyspace.
        let mut sample = vec![0u64; nodes.len()];
        for i in 0..1u64 << 20 {
            sample[ring.node_index_for_hash((i << 12) as u32).unwrap()] += 1;
        }
        for (n, s) in a.nodes.iter().zip(&sample) {
            let got = *s as f64 / (1u64 << 20) as f64;
            // Each of the node's arcs is off by under one sample step.
            let slack = (ring.point_count() as f64 + 1.0) / (1u64 << 20) as f64;
            assert!(
                (got - n.share).abs() <= slack,
                "{layout} node {}: {got} vs {}",
                n.index,
                n.share
            );
        }
        for (i, n) in nodes.iter().enumerate() {
            if n.is_down() || n.weight() == 0 {
                assert_eq!(a.nodes[i].keys, 0);
                assert_eq!(a.nodes[i].relative_error, None);
            }
        }
        assert!(a.max_overload >= 1.0);
    }
}

#[test]
fn collisions_are_counted() {
    // 2,048 nodes at 2,000 points: ~4M points, ~2,000 birthday collisions.
    let servers = synthetic::seeded(2048, 3);
    let a = analysis::analyze(&ring(&servers, 2000, Layout::Wide));
    let collided: u64 = a.nodes.iter().map(|n| n.collided).sum();
    assert_eq!(collided, a.generated_points - a.points);
    let expected = (a.generated_points as f64).powi(2) / 2f64.powi(33);
    assert!(
        (collided as f64 - expected).abs() < 5.0 * expected.sqrt() + 5.0,
        "{collided} vs {expected}"
    );
}

#[test]
fn diff_of_a_ring_with_itself_is_zero_and_adding_a_node_moves_its_share() {
    let servers = synthetic::seeded(50, 11);
    let before = ring(&servers, 160, Layout::Wide);
    for layout in Layout::ALL {
        let d = analysis::diff(&before, &ring(&servers, 160, layout)).unwrap();
        assert_eq!(d.moved_keys, 0);
    }
    let mut more = servers.clone();
    more.push("10.99.99.99:443".into());
    let after = ring(&more, 160, Layout::Compact);
    let d = analysis::diff(&before, &after).unwrap();
    let new_keys = analysis::keyspace(&after)[50];
    assert_eq!(d.moved_keys, new_keys, "only keys onto the new node move");
    assert!((d.moved - 1.0 / 51.0).abs() < 0.3 / 51.0, "{}", d.moved);
    let s = &d.servers[50];
    assert_eq!(
        (s.server.as_str(), s.gained, s.lost),
        ("10.99.99.99:443", d.moved, 0.0)
    );

    // Against a sample: a different multiple moves most keys.
    let other = ring(&servers, 40, Layout::Packed);
    let d = analysis::diff(&before, &other).unwrap();
    let mut moved = 0u64;
    for i in 0..1u64 << 20 {
        let h = (i << 12) as u32;
        if before.node_for_hash(h).unwrap().server() != other.node_for_hash(h).unwrap().server() {
            moved += 1;
        }
    }
    let sampled = moved as f64 / (1u64 << 20) as f64;
    assert!(
        (sampled - d.moved).abs() < 0.002,
        "{sampled} vs {}",
        d.moved
    );
    // Empty rings: everything or nothing moves.
    let empty = RingBuilder::new().build(vec![]).unwrap();
    assert_eq!(analysis::diff(&empty, &empty).unwrap().moved_keys, 0);
    assert_eq!(
        analysis::diff(&empty, &before).unwrap().moved_keys,
        KEYSPACE
    );
}
