//! Consistent hashing with bounded loads: the plain ring's answers while
//! nothing is full, the bound at every placement (one thread and two), and
//! the balance it buys on a Zipf workload.

mod common;

use std::sync::Arc;

use ketama::analysis::simulate::{simulate, Workload};
use ketama::load::{BalanceFactor, LoadTracker};
use ketama::{Layout, Migration, Node, Rollout, RouteTable, Scheme, Version};
use proptest::prelude::*;

fn nodes(n: usize, weighted: bool) -> Vec<Node> {
    (0..n)
        .map(|i| {
            Node::new(
                format!("10.7.{}.{}:443", i / 256, i % 256),
                if weighted { 1 + i as u32 % 4 } else { 1 },
            )
            .with_labels(if i % 3 == 0 { vec!["eu"] } else { vec!["us"] })
        })
        .collect()
}

fn f(p: u32) -> BalanceFactor {
    BalanceFactor::new(p).unwrap()
}

#[test]
fn factor_range_and_bound_arithmetic() {
    assert!(BalanceFactor::new(99).is_err());
    assert!(BalanceFactor::new(1001).is_err());
    assert_eq!(f(125).to_string(), "1.25");
    // ceil(1.25 x 1001 x 1 / 50) = ceil(25.025) = 26.
    assert_eq!(f(125).bound(1000, 1, 50), 26);
    // Equal weights, perfect balance: ceil((T + 1) / n).
    assert_eq!(f(100).bound(9, 1, 10), 1);
    assert_eq!(f(100).bound(10, 1, 10), 2);
    // Weighted: a node of weight 3 of 10.
    assert_eq!(f(150).bound(99, 3, 10), 45);
}

#[test]
fn with_nothing_full_the_answer_is_the_plain_rings_in_every_layout() {
    let mut rng = common::rng(21);
    for layout in Layout::ALL {
        let envoy: Scheme = "envoy-ring-hash:min=2048".parse().unwrap();
        let maglev: Scheme = "maglev:1009".parse().unwrap();
        for compat in [Scheme::Nginx, Scheme::PingoraV2, envoy, maglev] {
            let multiple = compat.fixed_point_multiple().unwrap_or(40);
            let old = common::arc_ring(nodes(30, true), compat, layout, multiple);
            let new = common::arc_ring(nodes(30, true), Scheme::Nginx, layout, 16);
            for mut table in [
                RouteTable::new(old.clone()),
                RouteTable::migrating(Migration::new(
                    old.clone(),
                    new,
                    Rollout::new(5000).unwrap(),
                )),
            ] {
                let eu = table.need(&["eu"]).unwrap();
                let tracker = Arc::new(LoadTracker::new(&table));
                for k in 0..300 {
                    let key = common::random_key(&mut rng);
                    for need in [None, Some(eu)] {
                        let mut plain = table.route(&key, need, Some("x")).unwrap();
                        let want = table.next(&mut plain).unwrap();
                        let mut r = table.route(&key, need, Some("x")).unwrap();
                        let w = table.serving_weight(need, r.version(), |_| true);
                        let factor = f([100, 125, 1000][k % 3]);
                        let got = table
                            .next_bounded(&mut r, &tracker, factor, w, |_| true)
                            .unwrap();
                        assert_eq!(got.as_ref().map(|p| p.node), want, "{layout} {compat}");
                        assert_eq!(got.map(|p| p.spills), want.map(|_| 0));
                        // The guard dropped here: nothing stays in flight.
                    }
                }
                assert_eq!(tracker.total(), 0);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every bounded placement leaves its node within the bound computed
    /// from the load in flight when it was placed; when nothing had room,
    /// every usable node was at its bound.
    #[test]
    fn the_bound_holds_at_every_placement(
        ops in prop::collection::vec((any::<bool>(), 0u32..40, any::<u16>()), 1..400),
        factor in 100u32..300,
        weighted in any::<bool>(),
        labelled in any::<bool>(),
        scheme in prop::sample::select(vec!["nginx", "envoy-ring-hash:grpc", "maglev:251"]),
    ) {
        let scheme: Scheme = scheme.parse().unwrap();
        let multiple = scheme.fixed_point_multiple().unwrap_or(40);
        let ring = common::arc_ring(nodes(12, weighted), scheme, Layout::Compact, multiple);
        let mut table = RouteTable::new(ring.clone());
        let eu = table.need(&["eu"]).unwrap();
        let need = labelled.then_some(eu);
        let tracker = Arc::new(LoadTracker::new(&table));
        let w = table.serving_weight(need, Version::Only, |_| true);
        let factor = f(factor);
        let mut held = Vec::new();
        for (place, key, which) in ops {
            if place || held.is_empty() {
                let t = tracker.total_for(need);
                let mut r = table.route(format!("/k/{key}").as_bytes(), need, None).unwrap();
                let p = table.next_bounded(&mut r, &tracker, factor, w, |_| true).unwrap().unwrap();
                let weight = ring.nodes()[p.node].weight();
                let bound = factor.bound(t, weight, w);
                if tracker.load(p.node) as u64 > bound {
                    // The fallback: only when every eligible node was full.
                    for (i, n) in ring.nodes().iter().enumerate() {
                        if need.is_none_or(|nd| table.requirement(nd, Version::Only).unwrap().is_eligible(i)) && i != p.node {
                            prop_assert!(tracker.load(i) as u64 >= factor.bound(t, n.weight(), w));
                        }
                    }
                }
                held.push(p);
            } else {
                let j = which as usize % held.len();
                held.swap_remove(j);
            }
        }
        drop(held);
        prop_assert_eq!(tracker.total(), 0);
        prop_assert_eq!(tracker.total_for(Some(eu)), 0);
    }
}

/// A hot key placed over and over with nothing released, at c = 1: each
/// node ends within ceil(M x w / W), which two threads racing for a last
/// slot would break.
fn hot_key_fill(threads: usize) {
    let ring = common::arc_ring(nodes(8, true), Scheme::Nginx, Layout::Compact, 160);
    let table = Arc::new(RouteTable::new(ring.clone()));
    let tracker = Arc::new(LoadTracker::new(&table));
    let w = table.serving_weight(None, Version::Only, |_| true);
    let per_thread = 4_000;
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (table, tracker) = (table.clone(), tracker.clone());
            std::thread::spawn(move || {
                let mut held = Vec::with_capacity(per_thread);
                for _ in 0..per_thread {
                    let mut r = table.route(b"/viral/object", None, None).unwrap();
                    held.push(
                        table
                            .next_bounded(&mut r, &tracker, f(100), w, |_| true)
                            .unwrap()
                            .unwrap(),
                    );
                }
                held
            })
        })
        .collect();
    let held: Vec<_> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let m = (threads * per_thread) as u64;
    assert_eq!(tracker.total(), m);
    for (i, n) in ring.nodes().iter().enumerate() {
        let cap = (m * n.weight() as u64).div_ceil(w);
        assert!(
            tracker.load(i) as u64 <= cap,
            "node {i}: {} > {cap}",
            tracker.load(i)
        );
    }
    drop(held);
    assert_eq!(tracker.total(), 0);
}

#[test]
fn a_hot_key_fills_every_node_to_its_bound_and_no_further() {
    hot_key_fill(1);
}

#[test]
fn two_threads_never_both_take_a_last_slot() {
    for _ in 0..5 {
        hot_key_fill(2);
    }
}

#[test]
fn on_a_zipf_workload_the_bound_holds_where_plain_hashing_exceeds_it() {
    let ring = common::arc_ring(nodes(50, false), Scheme::Nginx, Layout::Compact, 160);
    let table = RouteTable::new(ring);
    let w = Workload {
        requests: 60_000,
        population: 100_000,
        zipf: 1.1,
        concurrency: 1_000,
        ..Workload::default()
    };
    let out = simulate(&table, &w, &[None, Some(f(125))]).unwrap();
    let limit = (1.25f64 * 1001.0 / 50.0).ceil() / (1000.0 / 50.0);
    assert!(out[0].max_over_avg > limit, "plain: {:?}", out[0]);
    assert!(out[1].max_over_avg <= limit, "bounded: {:?}", out[1]);
    assert_eq!(out[0].own_node_share, 1.0);
    assert_eq!(out[0].spills_per_request, 0.0);
    assert!(
        out[1].own_node_share < 1.0 && out[1].own_node_share > 0.5,
        "{:?}",
        out[1]
    );
    assert!(out[1].moved_keys > 0);
}

#[test]
fn workloads_that_cannot_run_are_errors_not_panics() {
    use ketama::analysis::simulate::WorkloadError;
    let ring = common::arc_ring(nodes(5, false), Scheme::Nginx, Layout::Wide, 40);
    let table = RouteTable::new(ring);
    let base = Workload {
        requests: 100,
        ..Workload::default()
    };
    let cases = [
        (
            Workload {
                concurrency: 0,
                ..base.clone()
            },
            WorkloadError::NoConcurrency,
        ),
        (
            Workload {
                population: 0,
                ..base.clone()
            },
            WorkloadError::NoKey,
        ),
        (
            Workload {
                trace: Some(vec![]),
                ..base.clone()
            },
            WorkloadError::NoKey,
        ),
        (
            Workload {
                zipf: f64::NAN,
                ..base.clone()
            },
            WorkloadError::BadZipf(f64::NAN),
        ),
    ];
    for (w, want) in cases {
        let got = simulate(&table, &w, &[None]).unwrap_err();
        assert_eq!(
            std::mem::discriminant(&got),
            std::mem::discriminant(&want),
            "{w:?}"
        );
    }
    // A trace shorter than the requests is cycled, in order.
    let w = Workload {
        trace: Some(vec![b"/a".to_vec(), b"/b".to_vec()]),
        concurrency: 1,
        ..base
    };
    let out = simulate(&table, &w, &[None, Some(f(100))]).unwrap();
    assert_eq!(out[0].own_node_share, 1.0);
    // One request in flight is always under any bound.
    assert_eq!(out[1].spills_per_request, 0.0);
}

/// A migration to a ring with more servers: a server on both rings has one
/// count, whichever ring routed to it; servers only the new ring has get
/// their own.
#[test]
fn a_migration_to_other_servers_counts_each_server_once() {
    let old = common::arc_ring(nodes(6, false), Scheme::Nginx, Layout::Compact, 40);
    let mut grown = nodes(9, false);
    grown.swap(0, 8); // not a prefix: the index differs from the old ring's
    let new = common::arc_ring(grown, Scheme::Nginx, Layout::Compact, 40);
    let table = RouteTable::migrating(Migration::new(
        old.clone(),
        new.clone(),
        Rollout::new(5000).unwrap(),
    ));
    let tracker = Arc::new(LoadTracker::new(&table));
    let mut held = Vec::new();
    let mut seen = [false; 2];
    for k in 0..2000 {
        let key = format!("/m/{k}");
        let mut r = table.route(key.as_bytes(), None, None).unwrap();
        let v = r.version();
        seen[(v == Version::New) as usize] = true;
        let w = table.serving_weight(None, v, |_| true);
        let p = table
            .next_bounded(&mut r, &tracker, f(125), w, |_| true)
            .unwrap()
            .unwrap();
        let server = table.ring(v).nodes()[p.node].server().to_string();
        // The other ring sees the same load on that server, if it has it.
        let other = if v == Version::New {
            Version::Old
        } else {
            Version::New
        };
        if let Some(j) = table
            .ring(other)
            .nodes()
            .iter()
            .position(|n| n.server() == server)
        {
            assert_eq!(
                tracker.load_on(other, j),
                tracker.load_on(v, p.node),
                "{server}"
            );
        }
        held.push(p);
    }
    assert_eq!(seen, [true, true]);
    assert_eq!(tracker.total(), 2000);
    let sum: u64 = (0..new.nodes().len())
        .map(|i| tracker.load_on(Version::New, i) as u64)
        .sum();
    assert_eq!(sum, 2000, "every server is on the new ring");
    // At 1.25x the average over 9 servers no server holds more than its
    // bound at the last placement.
    for i in 0..new.nodes().len() {
        assert!(
            tracker.load_on(Version::New, i) as u64
                <= f(125).bound(1999, 1, 9).max(f(125).bound(1999, 1, 6))
        );
    }
    drop(held);
    assert_eq!(tracker.total(), 0);
}

/// The group a route picks from: the ring's serving nodes, or those of a
/// label requirement; a down node is not in it. One node left is the
/// group of one the router never takes out of rotation.
#[test]
fn a_group_is_the_serving_eligible_nodes() {
    let all: Vec<Node> = (0..6)
        .map(|i| {
            Node::new(format!("10.0.0.{i}:80"), 1)
                .with_labels([if i == 0 { "solo" } else { "many" }])
                .with_down(i == 5)
        })
        .collect();
    let ring = common::arc_ring(all, Scheme::Nginx, Layout::Compact, 40);
    let mut table = RouteTable::new(ring);
    let solo = table.need(&["solo"]).unwrap();
    let many = table.need(&["many"]).unwrap();
    assert_eq!(table.group_size(None, Version::Only), 5);
    assert_eq!(table.group_size(Some(many), Version::Only), 4);
    assert_eq!(table.group_size(Some(solo), Version::Only), 1);
}
