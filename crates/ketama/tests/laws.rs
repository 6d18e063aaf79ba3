//! Property tests of consistent hashing's laws, for the `Nginx` and
//! `PingoraV2` schemes (whose tie rules are orders; `PingoraV1`'s ties are
//! arbitrary and break these laws at collided points, see `Scheme`), and
//! the weaker laws the memcached schemes keep.
//!
//! Routing is constant between consecutive point hashes, so checking every
//! point hash of both rings, and the hash just past each, checks every key.

mod common;

use std::collections::HashSet;

use common::colliding_pairs;
use ketama::{Layout, Node, Ring, RingBuilder, Scheme};
use proptest::prelude::*;

/// Hashes at which routing can change on either ring: every point hash, the
/// one after it, and the ends of the hash space.
fn boundaries(rings: &[&Ring]) -> Vec<u32> {
    let mut out = vec![0, u32::MAX];
    for r in rings {
        let mut i = 0;
        while let Some((h, _)) = r.point(i) {
            out.push(h);
            out.push(h.wrapping_add(1));
            i += 1;
        }
    }
    out
}

fn server(pool: u8, i: usize, compat: Scheme) -> String {
    match (compat, pool % 4) {
        (Scheme::Nginx, 1) => format!("cache-{i}.example:8080"),
        (Scheme::Nginx, 2) => format!("unix:/run/c{i}.sock"),
        (_, 3) => format!("[2001:db8::{i:x}]:443"),
        _ => format!("10.1.{}.{}:443", i / 256, i % 256),
    }
}

prop_compose! {
    /// 1 to 24 nodes (weights 0 to 4, some down) that may include a pair of
    /// servers whose points are known to collide, at a multiple of 16 to 40.
    fn config(compat: Scheme)(
        specs in prop::collection::vec((any::<u8>(), 0u32..5, prop::bool::weighted(0.1)), 1..24),
        pair in prop::option::of(0usize..3),
        multiple in 16u32..40,
    ) -> (Vec<Node>, u32) {
        let mut nodes: Vec<Node> = specs
            .iter()
            .enumerate()
            .map(|(i, &(pool, w, down))| Node::new(server(pool, i, compat), w).with_down(down))
            .collect();
        if let Some(p) = pair {
            let (a, b) = &colliding_pairs()[p];
            nodes.insert(0, Node::new(a.clone(), 1));
            let at = nodes.len() / 2;
            nodes.insert(at, Node::new(b.clone(), 1));
        }
        (nodes, multiple)
    }
}

fn build(nodes: Vec<Node>, compat: Scheme, layout: Layout, multiple: u32) -> Ring {
    let ring = RingBuilder::new()
        .compat(compat)
        .layout(layout)
        .point_multiple(multiple)
        .build(nodes)
        .unwrap();
    ketama::testing::check_invariants(&ring).unwrap();
    ring
}

fn server_at(ring: &Ring, h: u32) -> Option<&str> {
    ring.node_for_hash(h).map(|n| n.server())
}

fn laws(
    compat: Scheme,
    nodes: Vec<Node>,
    multiple: u32,
    extra_weight: u32,
    at: usize,
) -> Result<(), TestCaseError> {
    let base = build(nodes.clone(), compat, Layout::Wide, multiple);

    // Adding a node moves keys only onto it.
    let added_name = server(0, 9999, compat);
    let mut more = nodes.clone();
    let at = at % (more.len() + 1);
    more.insert(at, Node::new(added_name.clone(), extra_weight));
    let grown = build(more, compat, Layout::Wide, multiple);
    for h in boundaries(&[&base, &grown]) {
        let (before, after) = (server_at(&base, h), server_at(&grown, h));
        if before != after {
            prop_assert_eq!(
                after,
                Some(added_name.as_str()),
                "hash {:#x} moved from {:?}",
                h,
                before
            );
        }
    }

    // Removing a node moves only its keys.
    let gone = at % nodes.len();
    let mut fewer = nodes.clone();
    let removed = fewer.remove(gone);
    let shrunk = build(fewer, compat, Layout::Wide, multiple);
    for h in boundaries(&[&base, &shrunk]) {
        let (before, after) = (server_at(&base, h), server_at(&shrunk, h));
        if before != after {
            prop_assert_eq!(
                before,
                Some(removed.server()),
                "hash {:#x} moved to {:?}",
                h,
                after
            );
        }
    }

    // Every layout routes identically.
    for layout in Layout::ALL {
        let other = build(nodes.clone(), compat, layout, multiple);
        for h in boundaries(&[&base]) {
            prop_assert_eq!(
                server_at(&base, h),
                server_at(&other, h),
                "{} at {:#x}",
                layout,
                h
            );
        }
    }

    // The failover iterator yields each node at most once, and every node
    // that owns points and is not down; it starts with the lookup's answer.
    let serving: HashSet<&str> = (0..base.point_count())
        .map(|i| base.nodes()[base.point(i).unwrap().1].server())
        .filter(|s| !nodes.iter().any(|n| n.server() == *s && n.is_down()))
        .collect();
    for h in boundaries(&[&base]).into_iter().step_by(7) {
        let order: Vec<&str> = base.failover_for_hash(h).map(|n| n.server()).collect();
        let set: HashSet<&str> = order.iter().copied().collect();
        prop_assert_eq!(set.len(), order.len(), "repeats in {:?}", order);
        prop_assert_eq!(&set, &serving);
        prop_assert_eq!(order.first().copied(), server_at(&base, h));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn nginx_laws((nodes, multiple) in config(Scheme::Nginx), w in 1u32..4, at in any::<usize>()) {
        laws(Scheme::Nginx, nodes, multiple, w, at)?;
    }

    #[test]
    fn pingora_v2_laws((nodes, multiple) in config(Scheme::PingoraV2), w in 1u32..4, at in any::<usize>()) {
        laws(Scheme::PingoraV2, nodes, multiple, w, at)?;
    }
}

/// The laws the memcached schemes keep (adding or removing a server
/// changes every server's point count, so the add/remove laws above do not
/// hold there): every layout routes alike; marking a server down moves only
/// its keys, each to the next serving server in ring order; weight 0 is the
/// same ring as the server removed (what the programs do when a server is
/// ejected); a server keeps exactly the points the scheme gives it, less
/// collisions.
fn memcached_laws(compat: Scheme, specs: &[(u32, bool)], at: usize) -> Result<(), TestCaseError> {
    let nodes: Vec<Node> = specs
        .iter()
        .enumerate()
        .map(|(i, &(w, named))| {
            let n = Node::new(format!("10.2.{}.{}:{}", i / 200, i % 200, 11210 + i % 3), w);
            match (compat, named) {
                (Scheme::Twemproxy(_), true) => n.with_name(format!("mc-{i}")),
                _ => n,
            }
        })
        .collect();
    let b = |layout| RingBuilder::new().compat(compat).layout(layout);
    let wide = b(Layout::Wide).build(nodes.clone()).unwrap();
    ketama::testing::check_invariants(&wide).map_err(|v| TestCaseError::fail(v.to_string()))?;
    let generated = wide.node_points();
    prop_assert_eq!(generated.iter().sum::<u64>(), wide.generated_points());
    let mut kept = vec![0u64; nodes.len()];
    for (_, n) in wide.points() {
        kept[n] += 1;
    }
    for (i, (k, g)) in kept.iter().zip(&generated).enumerate() {
        prop_assert!(k <= g && g % 4 == 0 && (g == &0) == (nodes[i].weight() == 0));
    }
    let hashes = boundaries(&[&wide]);
    for layout in [Layout::Packed, Layout::Compact] {
        let other = b(layout).build(nodes.clone()).unwrap();
        for &h in &hashes {
            prop_assert_eq!(
                server_at(&wide, h),
                server_at(&other, h),
                "{} at {:#x}",
                layout,
                h
            );
        }
    }
    let i = at % nodes.len();
    let mut down = nodes.clone();
    down[i] = down[i].clone().with_down(true);
    let down = b(Layout::Wide).build(down).unwrap();
    let victim = nodes[i].server();
    for &h in &hashes {
        let (before, after) = (server_at(&wide, h), server_at(&down, h));
        if before == Some(victim) {
            let next = wide
                .failover_for_hash(h)
                .map(|n| n.server())
                .find(|&s| s != victim);
            prop_assert_eq!(after, next);
        } else {
            prop_assert_eq!(before, after, "only the down server's keys move");
        }
    }
    let mut drained = nodes.clone();
    drained[i] = Node::new(victim, 0);
    let mut removed = nodes.clone();
    removed.remove(i);
    let (drained, removed) = (
        b(Layout::Wide).build(drained).unwrap(),
        b(Layout::Wide).build(removed).unwrap(),
    );
    for &h in &boundaries(&[&drained, &removed]) {
        prop_assert_eq!(server_at(&drained, h), server_at(&removed, h));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn libmemcached_laws(specs in prop::collection::vec((0u32..6, any::<bool>()), 1..16), at in any::<usize>()) {
        memcached_laws(Scheme::Libmemcached, &specs, at)?;
    }

    #[test]
    fn twemproxy_laws(specs in prop::collection::vec((0u32..6, any::<bool>()), 1..16), at in any::<usize>()) {
        memcached_laws(Scheme::Twemproxy(ketama::KeyHash::Murmur), &specs, at)?;
    }
}

#[test]
fn empty_rings_answer_none() {
    for compat in Scheme::ALL {
        for layout in Layout::ALL {
            for nodes in [
                vec![],
                vec![Node::new("10.0.0.1:1", 0)],
                vec![Node::new("10.0.0.1:1", 1).with_down(true)],
            ] {
                let ring = build(nodes, compat, layout, 160);
                assert!(ring.node(b"x").is_none());
                assert!(ring.node_for_hash(u32::MAX).is_none());
                assert_eq!(ring.failover(b"x").count(), 0);
                assert!(ring.replicas(b"x", 3).is_empty());
            }
        }
    }
}
