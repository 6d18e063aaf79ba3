//! Envoy's and gRPC's schemes through the ring: Envoy's own test vectors
//! (`test/extensions/load_balancing_policies/{ring_hash,maglev}/`) looked
//! up by 64-bit hash in every layout, retries as Envoy's, key lookups that
//! agree with hash lookups, and the laws: weights' shares on large rings, a
//! removed host's keys (ring_hash: only its keys and those the smaller
//! ring's new entries take; Maglev: close to 1/N).

use ketama::envoy::{Maglev, RingHash, RingHashFunction};
use ketama::{Error, Layout, Node, Ring, RingBuilder, Scheme};
use proptest::prelude::*;

fn hosts(ports: std::ops::Range<u16>, weights: &[u32]) -> Vec<Node> {
    ports
        .zip(weights.iter().chain(std::iter::repeat(&1)))
        .map(|(p, &w)| Node::new(format!("127.0.0.1:{p}"), w))
        .collect()
}

fn ring(scheme: Scheme, layout: Layout, nodes: Vec<Node>) -> Ring {
    RingBuilder::new()
        .compat(scheme)
        .layout(layout)
        .build(nodes)
        .unwrap()
}

fn rh(min: u64, max: u64, function: RingHashFunction) -> Scheme {
    Scheme::EnvoyRingHash(RingHash {
        min_ring_size: min,
        max_ring_size: max,
        function,
    })
}

/// The distinct nodes of a walk from a 64-bit hash.
fn walk(r: &Ring, hash: u64) -> Vec<usize> {
    let mut c = r.failover_cursor64(hash).unwrap();
    let mut out = Vec::new();
    while let Some(n) = r.advance(&mut c).unwrap() {
        out.push(n);
    }
    out
}

#[test]
fn ring_hash_picks_are_envoys() {
    for layout in Layout::ALL {
        // RingHashLoadBalancerTest.Basic: minimum 12, hosts :90 to :95.
        let r = ring(
            rh(12, 8 << 20, RingHashFunction::XxHash),
            layout,
            hosts(90..96, &[]),
        );
        assert_eq!(r.point_count(), 12);
        let pick = |h: u64| r.node_index_for_hash64(h).unwrap();
        assert_eq!(pick(0), Some(4));
        assert_eq!(pick(u64::MAX), Some(4));
        assert_eq!(pick(3551244743356806947), Some(5));
        assert_eq!(pick(3551244743356806948), Some(3));
        assert_eq!(pick(16117243373044804880), Some(0));
        // BasicWithRetryHostPredicate: the next host in the ring, then the
        // next; ketama's walk goes on with each host once.
        assert_eq!(walk(&r, 0), [4, 2, 0, 5, 3, 1]);

        // BasicWithMurmur2: hosts :80 to :85.
        let r = ring(
            rh(12, 8 << 20, RingHashFunction::Murmur2),
            layout,
            hosts(80..86, &[]),
        );
        let pick = |h: u64| r.node_index_for_hash64(h).unwrap();
        assert_eq!(pick(0), Some(5));
        assert_eq!(pick(u64::MAX), Some(5));
        assert_eq!(pick(1358027074129602068), Some(5));
        assert_eq!(pick(1358027074129602069), Some(3));
        assert_eq!(pick(10150910876324007730), Some(2));

        // BasicWithHostname: hosts named 90 to 95 (ketama hashes the
        // server string, so the names are the servers).
        let named: Vec<Node> = (90..96).map(|p| Node::new(p.to_string(), 1)).collect();
        let r = ring(rh(12, 8 << 20, RingHashFunction::XxHash), layout, named);
        let pick = |h: u64| r.node_index_for_hash64(h).unwrap();
        assert_eq!(pick(0), Some(5));
        assert_eq!(pick(u64::MAX), Some(5));
        assert_eq!(pick(7225015537174310577), Some(2));
        assert_eq!(pick(6803900775736438537), Some(3));

        // UnevenHosts: two hosts, minimum 3, a ring of 4.
        let r = ring(
            rh(3, 8 << 20, RingHashFunction::XxHash),
            layout,
            hosts(80..82, &[]),
        );
        assert_eq!(r.point_count(), 4);
        assert_eq!(r.node_index_for_hash64(0).unwrap(), Some(0));

        // HostWeightedTinyRing: weights 1, 2, 3 in exactly 6 entries.
        let r = ring(
            rh(6, 6, RingHashFunction::XxHash),
            layout,
            hosts(90..93, &[1, 2, 3]),
        );
        assert_eq!(r.point_count(), 6);
        for (h, want) in [
            (928266305478181108u64, 2),
            (4443673547860492590, 2),
            (5583722120771150861, 1),
            (6311230543546372928, 1),
            (13444792449719432967, 2),
            (16117243373044804889, 0),
        ] {
            assert_eq!(r.node_index_for_hash64(h).unwrap(), Some(want), "{h}");
        }
    }
}

#[test]
fn maglev_picks_and_retries_are_envoys() {
    for layout in Layout::ALL {
        let m7 = Scheme::Maglev(Maglev { table_size: 7 });
        let r = ring(m7, layout, hosts(90..96, &[]));
        let want = [2, 4, 0, 1, 5, 0, 3];
        for i in 0..21u64 {
            assert_eq!(
                r.node_index_for_hash64(i).unwrap(),
                Some(want[i as usize % 7])
            );
        }
        // BasicWithRetryHostPredicate: hash 10 picks :91; refusing it, the
        // first retry picks :90; refusing every host, the second retry
        // looks at :95.
        let w = walk(&r, 10);
        assert_eq!(&w[..2], [1, 0]);
        assert_eq!(w.len(), 6);
        let m = Maglev { table_size: 7 };
        assert_eq!(r.points().nth(m.slot(10, 2) as usize).unwrap().1, 5);

        // Weighted: 1 and 2 in 17 slots.
        let r = ring(
            Scheme::Maglev(Maglev { table_size: 17 }),
            layout,
            hosts(90..92, &[1, 2]),
        );
        let want = [1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1, 0, 1];
        for i in 0..51u64 {
            assert_eq!(
                r.node_index_for_hash64(i).unwrap(),
                Some(want[i as usize % 17])
            );
        }
    }
}

#[test]
fn sixty_four_bit_hashes_are_refused_by_32_bit_rings() {
    let r = Ring::new(hosts(90..92, &[])).unwrap();
    assert!(matches!(
        r.node_index_for_hash64(1),
        Err(Error::NarrowScheme { .. })
    ));
    assert!(r.failover_cursor64(1).is_err());
    // Sizes the peers refuse are refused by name.
    for (bad, what) in [
        (
            rh(20, 10, RingHashFunction::XxHash),
            "min=20 is over max=10",
        ),
        (Scheme::Maglev(Maglev { table_size: 8 }), "not a prime"),
    ] {
        let e = RingBuilder::new()
            .compat(bad)
            .build(hosts(90..92, &[]))
            .unwrap_err();
        assert!(e.to_string().contains(what), "{e}");
    }
    let e = RingBuilder::new()
        .compat(Scheme::Maglev(Maglev::default()))
        .point_multiple(40)
        .build(hosts(90..92, &[]))
        .unwrap_err();
    assert!(e.to_string().contains("not a point multiple"), "{e}");
}

#[test]
fn names_read_back() {
    for s in [
        "envoy-ring-hash",
        "envoy-ring-hash:min=1024,max=4096",
        "envoy-ring-hash:min=12,max=8388608,murmur2",
        "maglev",
        "maglev:7",
    ] {
        let scheme: Scheme = s.parse().unwrap();
        assert_eq!(scheme.to_string(), s);
    }
    assert_eq!(
        "envoy_ring_hash:grpc".parse::<Scheme>().unwrap(),
        rh(1024, 4096, RingHashFunction::XxHash)
    );
    for bad in [
        "maglev:8",
        "maglev:x",
        "envoy-ring-hash:min=9,max=3",
        "envoy-ring-hash:sha1",
    ] {
        assert!(bad.parse::<Scheme>().is_err(), "{bad}");
    }
}

fn list() -> impl Strategy<Value = Vec<Node>> {
    prop::collection::vec((any::<u16>(), 1u32..4, prop::bool::weighted(0.1)), 2..30).prop_map(|v| {
        let mut seen = std::collections::HashSet::new();
        v.into_iter()
            .filter(|(p, _, _)| seen.insert(*p))
            .map(|(p, w, down)| {
                Node::new(format!("10.0.{}.{}:{}", p >> 8, p & 255, 80 + p % 7), w).with_down(down)
            })
            .collect()
    })
}

fn schemes() -> impl Strategy<Value = Scheme> {
    prop_oneof![
        (1u64..300, 0u64..3000, any::<bool>()).prop_map(|(min, extra, murmur)| rh(
            min,
            min + extra,
            if murmur {
                RingHashFunction::Murmur2
            } else {
                RingHashFunction::XxHash
            }
        )),
        prop::sample::select(vec![7u64, 17, 251, 1009, 4099])
            .prop_map(|m| Scheme::Maglev(Maglev { table_size: m })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every key-based answer is the 64-bit one, in every layout; a walk
    /// yields each serving node once, the first being the lookup's.
    #[test]
    fn keys_route_by_their_64_bit_hash(nodes in list(), scheme in schemes(), keys in prop::collection::vec(any::<u64>(), 1..40)) {
        let rings: Vec<Ring> = Layout::ALL.iter().map(|&l| ring(scheme, l, nodes.clone())).collect();
        // Serving nodes: up, and holding an entry (a small Maglev table
        // leaves some hosts out).
        let live = {
            let mut owners: Vec<usize> = rings[0].points().map(|p| p.1).filter(|&n| !nodes[n].is_down()).collect();
            owners.sort_unstable();
            owners.dedup();
            owners.len()
        };
        for k in keys {
            let key = format!("/obj/{k}");
            let wide = scheme.hash_key64(key.as_bytes()).unwrap();
            let first = rings[0].node_index(key.as_bytes());
            let order = walk(&rings[0], wide);
            prop_assert_eq!(first, order.first().copied());
            prop_assert_eq!(rings[0].node_index_for_hash64(wide).unwrap(), first);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), order.len());
            prop_assert!(order.iter().all(|&n| !nodes[n].is_down()));
            if let Scheme::Maglev(_) = scheme {
                prop_assert_eq!(order.len(), live);
            }
            for r in &rings[1..] {
                prop_assert_eq!(r.node_index(key.as_bytes()), first);
                prop_assert_eq!(walk(r, wide), order.clone());
            }
            // The key's own hash, and the entry just past it, agree with a
            // plain search of the sorted 64-bit entries.
            if let Scheme::EnvoyRingHash(rhs) = scheme {
                let keys: Vec<&[u8]> = nodes.iter().map(|n| n.server().as_bytes()).collect();
                let weights: Vec<u32> = nodes.iter().map(|n| n.weight()).collect();
                let entries = rhs.entries(&keys, &rhs.entry_counts(&weights));
                for h in [wide, entries[0].0, entries[entries.len() / 2].0.wrapping_add(1)] {
                    let i = entries.partition_point(|e| e.0 < h) % entries.len();
                    let mut c = rings[0].failover_cursor64(h).unwrap();
                    let got = rings[0].advance(&mut c).unwrap();
                    if !nodes[entries[i].1 as usize].is_down() {
                        prop_assert_eq!(got, Some(entries[i].1 as usize));
                    }
                }
            }
        }
    }

    /// A removed host: under ring_hash a key moves only off an entry the
    /// smaller ring lost (the host's, or a survivor's when the scale
    /// shrinks) or onto one it gained (survivors' counts grow with the
    /// scale); under Maglev with equal weights its keys move and few
    /// others.
    #[test]
    fn removing_a_host(nodes in list(), scheme in schemes(), gone in any::<prop::sample::Index>()) {
        let nodes: Vec<Node> = nodes.into_iter().map(|n| n.with_down(false)).collect();
        let g = gone.index(nodes.len());
        let mut fewer = nodes.clone();
        fewer.remove(g);
        let a = ring(scheme, Layout::Wide, nodes.clone());
        let b = ring(scheme, Layout::Wide, fewer.clone());
        let entries = |list: &[Node]| -> Vec<(u64, String)> {
            let Scheme::EnvoyRingHash(r) = scheme else { return Vec::new() };
            let keys: Vec<&[u8]> = list.iter().map(|n| n.server().as_bytes()).collect();
            let weights: Vec<u32> = list.iter().map(|n| n.weight()).collect();
            r.entries(&keys, &r.entry_counts(&weights))
                .into_iter()
                .map(|(h, i)| (h, list[i as usize].server().to_string()))
                .collect()
        };
        let (old_v, new) = (entries(&nodes), entries(&fewer));
        let old: std::collections::HashSet<(u64, String)> = old_v.iter().cloned().collect();
        let new_set: std::collections::HashSet<(u64, String)> = new.iter().cloned().collect();
        let (mut moved, mut others) = (0, 0);
        for i in 0..400u32 {
            let key = format!("k{i}");
            let x = a.node(key.as_bytes()).map(|n| n.server().to_string());
            let y = b.node(key.as_bytes()).map(|n| n.server().to_string());
            if x == y {
                continue;
            }
            moved += 1;
            if x.as_deref() == Some(nodes[g].server()) {
                continue;
            }
            others += 1;
            if let Scheme::EnvoyRingHash(_) = scheme {
                // Its old entry is gone (a capped or re-carried ring gives
                // survivors fewer) or its new entry is new.
                let wide = scheme.hash_key64(key.as_bytes()).unwrap();
                let at = new.partition_point(|e| e.0 < wide) % new.len();
                let was = old_v.partition_point(|e| e.0 < wide) % old_v.len();
                prop_assert!(
                    !old.contains(&new[at]) || !new_set.contains(&old_v[was]),
                    "{key} moved {x:?} -> {y:?} between entries both rings have"
                );
            }
        }
        if let Scheme::Maglev(m) = scheme {
            // With equal weights most moves are the removed host's keys
            // (the paper's minimal disruption; small tables reshuffle
            // more). Unequal weights change every host's turn in the fill
            // when the heaviest goes, so nothing that strong holds there.
            let equal = nodes.iter().all(|n| n.weight() == nodes[0].weight());
            if equal && m.table_size >= 1009 && moved > 20 {
                prop_assert!(others * 2 <= moved, "{others} of {moved}");
            }
        }
    }
}

#[test]
fn shares_follow_weights_on_large_rings() {
    let weights = [1u32, 2, 3, 1, 1, 2, 4, 1, 1, 1];
    let total: u32 = weights.iter().sum();
    for scheme in [
        rh(200_000, 8 << 20, RingHashFunction::XxHash),
        Scheme::Maglev(Maglev {
            table_size: 655_373,
        }),
    ] {
        let r = ring(scheme, Layout::Compact, hosts(9000..9010, &weights));
        let mut got = [0u64; 10];
        let n = 400_000u64;
        for i in 0..n {
            got[r.node_index(format!("/o/{i}").as_bytes()).unwrap()] += 1;
        }
        for (i, &w) in weights.iter().enumerate() {
            let want = f64::from(w) / f64::from(total);
            let share = got[i] as f64 / n as f64;
            assert!(
                (share / want - 1.0).abs() < 0.05,
                "{scheme}: node {i} {share} against {want}"
            );
        }
    }
}

#[test]
fn maglev_moves_about_one_nth_when_a_host_goes() {
    for n in [10usize, 50] {
        let nodes = hosts(7000..7000 + n as u16, &[]);
        let scheme = Scheme::Maglev(Maglev::default());
        let a = ring(scheme, Layout::Packed, nodes.clone());
        let mut fewer = nodes.clone();
        let gone = fewer.remove(n / 2);
        let b = ring(scheme, Layout::Packed, fewer);
        let (mut moved, mut others) = (0u64, 0u64);
        let keys = 200_000u32;
        for i in 0..keys {
            let k = format!("/k/{i}");
            let x = a.node(k.as_bytes()).unwrap().server();
            let y = b.node(k.as_bytes()).unwrap().server();
            if x != y {
                moved += 1;
                others += (x != gone.server()) as u64;
            }
        }
        let frac = moved as f64 / f64::from(keys);
        // Maglev's paper: slightly more than 1/N moves.
        assert!(
            frac > 0.9 / n as f64 && frac < 1.6 / n as f64,
            "N={n}: {frac}"
        );
        assert!(
            (others as f64) < 0.5 * moved as f64,
            "N={n}: {others} of {moved}"
        );
    }
}

/// A migration from nginx's ring to Envoy's (and on to Maglev): each key
/// routes by its version's ring, with that ring's 64-bit lookup, and its
/// counterpart is the other ring's answer.
#[test]
fn migrations_between_nginx_and_envoys_rings() {
    use ketama::{Migration, Rollout, RouteTable, Version};
    use std::sync::Arc;
    let nodes = hosts(8000..8012, &[1, 2, 1, 1, 3, 1, 1, 1, 2, 1, 1, 1]);
    for (from, to) in [
        (Scheme::Nginx, rh(1024, 4096, RingHashFunction::XxHash)),
        (
            rh(1024, 4096, RingHashFunction::XxHash),
            Scheme::Maglev(Maglev::default()),
        ),
    ] {
        let old = Arc::new(ring(from, Layout::Compact, nodes.clone()));
        let new = Arc::new(ring(to, Layout::Packed, nodes.clone()));
        let table = RouteTable::migrating(Migration::new(
            old.clone(),
            new.clone(),
            Rollout::new(5000).unwrap(),
        ));
        let mut versions = [0, 0];
        for i in 0..2000 {
            let key = format!("/m/{i}");
            let mut r = table.route(key.as_bytes(), None, None).unwrap();
            let first = table.next(&mut r).unwrap().unwrap();
            let (mine, other) = match r.version() {
                Version::New => (&new, &old),
                _ => (&old, &new),
            };
            versions[(r.version() == Version::New) as usize] += 1;
            assert_eq!(Some(first), mine.node_index(key.as_bytes()), "{key}");
            let mut c = table.counterpart(key.as_bytes(), &r).unwrap().unwrap();
            assert_eq!(
                table.next(&mut c).unwrap(),
                other.node_index(key.as_bytes())
            );
        }
        assert!(versions[0] > 800 && versions[1] > 800, "{versions:?}");
    }
}

/// What a 64-bit entry costs (docs/envoy.md): the layout's bytes a point
/// plus 4 for the low half; at 409,600 entries over 200 servers `Compact`
/// measures 7.04 B an entry, against gRPC's 16 and Envoy's 24.
#[test]
fn a_64_bit_entry_costs_the_layouts_bytes_and_4() {
    let nodes: Vec<Node> = (1..=200)
        .map(|i| Node::new(format!("10.20.{}.{}:8080", i / 250, i % 250), 1))
        .collect();
    let scheme = rh(409_600, 409_600, RingHashFunction::XxHash);
    for (layout, lo, hi) in [
        (Layout::Wide, 12.0, 12.01),
        (Layout::Packed, 10.0, 10.01),
        (Layout::Compact, 6.5, 7.2),
    ] {
        let r = ring(scheme, layout, nodes.clone());
        assert_eq!(r.point_count(), 409_600);
        let per = r.points_heap_bytes() as f64 / r.point_count() as f64;
        assert!(per >= lo && per < hi, "{layout}: {per} B an entry");
    }
}

/// A label requirement under Envoy's schemes answers as a ring of the
/// eligible servers alone, as Envoy's subset load balancer builds one.
#[test]
fn subsets_are_rings_of_their_own() {
    use ketama::Requirement;
    use std::sync::Arc;
    let nodes: Vec<Node> = hosts(8100..8120, &[])
        .into_iter()
        .enumerate()
        .map(|(i, n)| {
            if i % 3 == 0 {
                n.with_labels(["hevc"])
            } else {
                n
            }
        })
        .collect();
    for scheme in [
        rh(1024, 4096, RingHashFunction::XxHash),
        Scheme::Maglev(Maglev { table_size: 1009 }),
    ] {
        let shared = Arc::new(ring(scheme, Layout::Compact, nodes.clone()));
        let req = Requirement::new(&shared, &["hevc"]).unwrap();
        let eligible: Vec<Node> = nodes
            .iter()
            .filter(|n| n.labels().any(|l| l == "hevc"))
            .cloned()
            .collect();
        let own = ring(scheme, Layout::Wide, eligible);
        for i in 0..2000 {
            let key = format!("/s/{i}");
            let got = req.node(key.as_bytes()).map(|n| n.server());
            assert_eq!(
                got,
                own.node(key.as_bytes()).map(|n| n.server()),
                "{scheme} {key}"
            );
            let mut c = req.cursor_for_key(key.as_bytes());
            let walk: Vec<&str> = std::iter::from_fn(|| req.advance(&mut c).unwrap())
                .map(|n| shared.nodes()[n].server())
                .collect();
            let want: Vec<&str> = own.failover(key.as_bytes()).map(|n| n.server()).collect();
            assert_eq!(walk, want);
        }
    }
}

/// A bare 32-bit hash's lookup and its walk agree under both schemes,
/// down servers included.
#[test]
fn bare_hashes_walk_from_their_own_answer() {
    let nodes: Vec<Node> = hosts(8200..8230, &[])
        .into_iter()
        .enumerate()
        .map(|(i, n)| n.with_down(i % 4 == 1))
        .collect();
    for scheme in [
        rh(1024, 4096, RingHashFunction::XxHash),
        Scheme::Maglev(Maglev { table_size: 1009 }),
    ] {
        for layout in Layout::ALL {
            let r = ring(scheme, layout, nodes.clone());
            let mut h = 7u32;
            for _ in 0..3000 {
                let first = r.failover_for_hash(h).next().map(|n| n.server());
                assert_eq!(
                    first,
                    r.node_for_hash(h).map(|n| n.server()),
                    "{scheme} {layout} {h:#x}"
                );
                let mut batch = Vec::new();
                r.node_indices_for_hashes(&[h], &mut batch);
                assert_eq!(batch[0], r.node_index_for_hash(h));
                h = h.wrapping_add(0x9E37_79B9);
            }
        }
    }
}
