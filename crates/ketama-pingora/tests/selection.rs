//! `KetamaSelection` against Pingora's own `KetamaHashing`, both as
//! `BackendSelection`s and inside a `LoadBalancer`, in every layout.

use std::collections::BTreeSet;
use std::sync::Arc;

use ketama::Layout;
use ketama_pingora::{KetamaSelection, KetamaSelectionConfig};
use pingora_load_balancing::selection::consistent::{KetamaConfig, KetamaHashing};
use pingora_load_balancing::selection::{BackendIter, BackendSelection};
use pingora_load_balancing::{Backend, LoadBalancer};
use rand::{Rng, SeedableRng};

fn backends(seed: u64, n: usize) -> BTreeSet<Backend> {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    let mut set = BTreeSet::new();
    while set.len() < n {
        let addr = if r.random::<bool>() {
            format!(
                "{}.{}.{}.{}:{}",
                r.random::<u8>(),
                r.random::<u8>(),
                r.random::<u8>(),
                r.random::<u8>(),
                r.random::<u16>()
            )
        } else {
            format!(
                "[2001:db8::{:x}:{:x}]:{}",
                r.random::<u16>(),
                r.random::<u16>(),
                r.random::<u16>()
            )
        };
        set.insert(Backend::new_with_weight(&addr, r.random_range(1..=10)).unwrap());
    }
    set
}

fn first<I: BackendIter>(mut it: I) -> Option<Backend> {
    it.next().cloned()
}

#[test]
fn selection_is_pingoras_ketama_hashing() {
    let set = backends(1, 500);
    for point_multiple in [None, Some(160), Some(40)] {
        let theirs = Arc::new(KetamaHashing::build_with_config(
            &set,
            &KetamaConfig { point_multiple },
        ));
        for layout in Layout::ALL {
            let ours = Arc::new(KetamaSelection::build_with_config(
                &set,
                &KetamaSelectionConfig {
                    point_multiple,
                    layout,
                    scheme: None,
                },
            ));
            let mut r = rand::rngs::StdRng::seed_from_u64(2);
            for _ in 0..5000 {
                let key: Vec<u8> = (0..r.random_range(1..40))
                    .map(|_| r.random_range(b'!'..=b'~'))
                    .collect();
                assert_eq!(
                    first(ours.iter(&key)),
                    first(theirs.iter(&key)),
                    "{point_multiple:?} {layout}"
                );
            }
            // The failover order is theirs without the repeats.
            let key = b"/some/object";
            let mut want: Vec<Backend> = Vec::new();
            let mut it = theirs.iter(key);
            for _ in 0..200_000 {
                let Some(b) = it.next() else { break };
                if !want.contains(b) {
                    want.push(b.clone());
                }
                if want.len() == 10 {
                    break;
                }
            }
            let mut got = Vec::new();
            let mut it = ours.iter(key);
            while let Some(b) = it.next() {
                got.push(b.clone());
                if got.len() == 10 {
                    break;
                }
            }
            assert_eq!(got, want);
        }
    }
}

#[test]
fn drops_into_a_load_balancer() {
    let addrs = [
        "127.0.0.1:7001",
        "127.0.0.1:7002",
        "127.0.0.1:7003",
        "[::1]:7004",
    ];
    let ours: LoadBalancer<KetamaSelection> = LoadBalancer::try_from_iter(addrs).unwrap();
    let theirs: LoadBalancer<KetamaHashing> = LoadBalancer::try_from_iter(addrs).unwrap();
    for i in 0..2000 {
        let key = format!("/k/{i}");
        assert_eq!(
            ours.select(key.as_bytes(), 256),
            theirs.select(key.as_bytes(), 256),
            "{key}"
        );
    }
}

/// Under Envoy's schemes the selection is the ring of its backends in
/// Pingora's order (by address), looked up by the key's 64-bit hash: an
/// Envoy cluster's (Maglev sorts hosts itself) or a gRPC client's whose
/// target lists the addresses in that order.
#[test]
fn selection_routes_as_envoys_schemes() {
    let set = backends(3, 40);
    for scheme in [
        "envoy-ring-hash",
        "envoy-ring-hash:grpc",
        "maglev",
        "maglev:1009",
    ] {
        let scheme: ketama::Scheme = scheme.parse().unwrap();
        let nodes = set
            .iter()
            .map(|b| ketama::Node::new(b.addr.to_string(), b.weight as u32))
            .collect();
        let ring = ketama::RingBuilder::new()
            .compat(scheme)
            .build(nodes)
            .unwrap();
        let ours = Arc::new(KetamaSelection::build_with_config(
            &set,
            &KetamaSelectionConfig {
                scheme: Some(scheme),
                ..KetamaSelectionConfig::default()
            },
        ));
        for i in 0..3000 {
            let key = format!("/k/{i}");
            let want: Vec<String> = ring
                .failover(key.as_bytes())
                .take(3)
                .map(|n| n.server().to_string())
                .collect();
            let mut it = ours.iter(key.as_bytes());
            let mut got = Vec::new();
            while let Some(b) = it.next() {
                got.push(b.addr.to_string());
                if got.len() == 3 {
                    break;
                }
            }
            assert_eq!(got, want, "{scheme} {key}");
        }
    }
}
