//! The HAProxy scheme against a model of HAProxy's lookup written from
//! `chash_get_server_hash` with no ring at all: every point of the serving
//! servers, the nearest after the hash (`eb32_lookup_ge`, wrapping) and the
//! one before it, the one before winning when the distances are equal. A
//! down server is as absent; failover is the model with each earlier
//! answer removed. Every layout, random server lists, ids and weights.

use ketama::haproxy::{point_hash, HaproxyHash};
use ketama::{analysis, Layout, Node, RingBuilder, Scheme};
use proptest::prelude::*;

/// HAProxy's answer for `hash` among `points` (hash, server), or `None`.
fn model(points: &[(u32, usize)], hash: u32) -> Option<usize> {
    let next = points.iter().min_by_key(|&&(p, _)| p.wrapping_sub(hash))?;
    let prev = points
        .iter()
        .filter(|p| p.0 != next.0 || points.len() == 1)
        .min_by_key(|&&(p, _)| hash.wrapping_sub(p))?;
    let (dp, dn) = (hash.wrapping_sub(prev.0), next.0.wrapping_sub(hash));
    Some(if dp <= dn { prev.1 } else { next.1 })
}

/// The ids HAProxy gives (`cfgparse.c`: `next_id` starts at 1; a server
/// without an id takes the first free one at or above it and `next_id`
/// continues from there; every server moves it on by one).
fn model_ids(explicit: &[Option<u32>]) -> Vec<u32> {
    let taken: Vec<u32> = explicit.iter().flatten().copied().collect();
    let mut given: Vec<u32> = Vec::new();
    let mut counter = 1;
    explicit
        .iter()
        .map(|id| match *id {
            Some(id) => {
                counter += 1;
                id
            }
            None => {
                let mut c = counter;
                while taken.contains(&c) || given.contains(&c) {
                    c += 1;
                }
                given.push(c);
                counter = c + 1;
                c
            }
        })
        .collect()
}

#[derive(Clone, Debug)]
struct Server {
    weight: u32,
    id: Option<u32>,
    down: bool,
}

fn servers() -> impl Strategy<Value = Vec<Server>> {
    prop::collection::vec(
        (
            0u32..6,
            prop::option::weighted(0.3, 1u32..40),
            prop::bool::weighted(0.15),
        )
            .prop_map(|(weight, id, down)| Server { weight, id, down }),
        1..12,
    )
    .prop_filter("explicit ids are distinct", |v| {
        let ids: Vec<u32> = v.iter().filter_map(|s| s.id).collect();
        let mut d = ids.clone();
        d.sort();
        d.dedup();
        d.len() == ids.len()
    })
}

fn nodes(list: &[Server]) -> Vec<Node> {
    list.iter()
        .enumerate()
        .map(|(i, s)| {
            let n = Node::new(format!("s{i}"), s.weight).with_down(s.down);
            match s.id {
                Some(id) => n.with_id(id),
                None => n,
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn lookups_and_failover_are_haproxys(
        list in servers(),
        hash_ix in 0usize..HaproxyHash::ALL.len(),
        probes in prop::collection::vec(any::<u32>(), 40),
    ) {
        let scheme = Scheme::Haproxy(HaproxyHash::ALL[hash_ix]);
        let ids = model_ids(&list.iter().map(|s| s.id).collect::<Vec<_>>());
        let all: Vec<(u32, usize)> = list
            .iter()
            .enumerate()
            .flat_map(|(i, s)| (0..s.weight * 16).map(move |j| (i, j)))
            .map(|(i, j)| (point_hash(ids[i], j), i))
            .collect();
        // Probes at points, next to them and halfway between two.
        let mut hashes = probes.clone();
        let mut sorted: Vec<u32> = all.iter().map(|p| p.0).collect();
        sorted.sort();
        for w in sorted.windows(2).take(30) {
            hashes.extend([w[0], w[0].wrapping_add(1), w[1].wrapping_sub(1)]);
            hashes.push(w[0] + (w[1] - w[0]) / 2);
            hashes.push(w[0] + (w[1] - w[0]).div_ceil(2));
        }
        for layout in Layout::ALL {
            let ring = RingBuilder::new().compat(scheme).layout(layout).build(nodes(&list)).unwrap();
            ketama::testing::check_invariants(&ring).unwrap();
            let got_ids: Vec<u32> = ring.nodes().iter().map(|n| n.id().unwrap()).collect();
            prop_assert_eq!(&got_ids, &ids);
            let mut batch = Vec::new();
            ring.node_indices_for_hashes(&hashes, &mut batch);
            for (k, &h) in hashes.iter().enumerate() {
                let mut gone: Vec<usize> = (0..list.len()).filter(|&i| list[i].down).collect();
                let mut want = Vec::new();
                loop {
                    let left: Vec<(u32, usize)> = all.iter().copied().filter(|p| !gone.contains(&p.1)).collect();
                    let Some(s) = model(&left, h) else { break };
                    want.push(s);
                    gone.push(s);
                }
                let got: Vec<usize> = {
                    let mut f = ring.failover_for_hash(h);
                    std::iter::from_fn(|| f.next_index()).collect()
                };
                prop_assert_eq!(&got, &want, "{} {:?} hash {:#x}", scheme, layout, h);
                prop_assert_eq!(ring.node_index_for_hash(h), want.first().copied());
                prop_assert_eq!(batch[k], want.first().copied());
            }
        }
    }

    #[test]
    fn keyspace_shares_count_the_nearer_rule(list in servers()) {
        let ring = RingBuilder::new().compat(Scheme::Haproxy(HaproxyHash::default())).build(nodes(&list)).unwrap();
        let keys = analysis::keyspace(&ring);
        let serving = ring.node_index_for_hash(0).is_some();
        prop_assert_eq!(keys.iter().sum::<u64>(), if serving { 1u64 << 32 } else { 0 });
        // Count keys exactly on a coarse ring: the arcs between points
        // are split where the answer changes, found by bisection.
        if serving {
            let mut count = vec![0u64; list.len()];
            let mut bounds: Vec<u32> = ring.points().map(|p| p.0).collect();
            bounds.push(0);
            bounds.sort();
            bounds.dedup();
            for (i, &lo) in bounds.iter().enumerate() {
                let hi = bounds.get(i + 1).map_or(1u64 << 32, |&h| h as u64);
                // The answer on [lo, hi) changes at most once (prev -> next).
                let a = ring.node_index_for_hash(lo).unwrap();
                let b = ring.node_index_for_hash((hi - 1) as u32).unwrap();
                let (mut l, mut r) = (lo as u64, hi - 1);
                if a == b {
                    count[a] += hi - lo as u64;
                    continue;
                }
                while l + 1 < r {
                    let m = (l + r) / 2;
                    if ring.node_index_for_hash(m as u32) == Some(a) { l = m } else { r = m }
                }
                count[a] += l + 1 - lo as u64;
                count[b] += hi - (l + 1);
            }
            prop_assert_eq!(&keys, &count);
        }
    }
}

#[test]
fn the_counter_rule_model_agrees_with_the_library() {
    let explicit = [None, Some(3), None, Some(2), None, Some(9), None];
    let list: Vec<Server> = explicit
        .iter()
        .map(|&id| Server {
            weight: 1,
            id,
            down: false,
        })
        .collect();
    let ring = RingBuilder::new()
        .compat(Scheme::Haproxy(HaproxyHash::default()))
        .build(nodes(&list))
        .unwrap();
    let ids: Vec<u32> = ring.nodes().iter().map(|n| n.id().unwrap()).collect();
    assert_eq!(ids, vec![1, 3, 4, 2, 6, 9, 8]);
    assert_eq!(model_ids(&explicit), ids);
}
