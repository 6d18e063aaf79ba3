use std::sync::Arc;

use super::*;
use crate::envoy::RingHash;
use crate::haproxy::{full_hash, HaproxyHash};
use crate::{Node, Ring, RingBuilder};

fn ring(compat: Scheme) -> Arc<Ring> {
    let nodes = (0..7)
        .map(|i| Node::new(format!("10.0.0.{i}:80"), 1 + i % 3))
        .collect();
    Arc::new(RingBuilder::new().compat(compat).build(nodes).unwrap())
}

#[test]
fn a_peers_hash_lands_where_its_ring_puts_that_hash() {
    for avalanche in [true, false] {
        let compat = Scheme::Haproxy(HaproxyHash {
            avalanche,
            ..HaproxyHash::default()
        });
        let r = ring(compat);
        let t = RouteTable::new(r.clone());
        for h in [0u32, 1, 0x0a00_0001, u32::MAX, 0xdead_beef] {
            let mut route = t
                .route_hashed(PeerHash::HaproxySource(h), b"k", None, None)
                .unwrap();
            let want = if avalanche { full_hash(h) } else { h };
            assert_eq!(t.next(&mut route).unwrap(), r.node_index_for_hash(want));
        }
    }
    let r = ring(Scheme::EnvoyRingHash(RingHash::default()));
    let t = RouteTable::new(r.clone());
    for w in [0u64, 7, u64::MAX, 0x1234_5678_9abc_def0] {
        let mut route = t
            .route_hashed(PeerHash::Envoy(w), b"k", None, None)
            .unwrap();
        assert_eq!(
            t.next(&mut route).unwrap(),
            r.node_index_for_hash64(w).unwrap()
        );
    }
}

#[test]
fn a_peers_hash_on_another_ring_is_an_error() {
    let t = RouteTable::new(ring(Scheme::Nginx));
    let e = t
        .route_hashed(PeerHash::HaproxySource(1), b"k", None, None)
        .unwrap_err();
    assert!(matches!(e, Error::PeerHashOnRing { .. }), "{e}");
    assert!(e.to_string().contains("haproxy for balance source"), "{e}");
    let t = RouteTable::new(ring(Scheme::Haproxy(HaproxyHash::default())));
    assert!(t
        .route_hashed(PeerHash::Envoy(1), b"k", None, None)
        .is_err());
}

#[test]
fn the_counterpart_of_a_hashed_route_is_on_the_other_ring() {
    use crate::{Migration, Rollout};
    let old = ring(Scheme::Haproxy(HaproxyHash::default()));
    let new = ring(Scheme::Haproxy(HaproxyHash {
        avalanche: false,
        ..HaproxyHash::default()
    }));
    let t = RouteTable::migrating(Migration::new(
        old,
        new.clone(),
        Rollout::new(10_000).unwrap(),
    ));
    let h = PeerHash::HaproxySource(0x0a00_0001);
    let route = t.route_hashed(h, b"10.0.0.1", None, None).unwrap();
    assert_eq!(route.version(), Version::New);
    let mut old_route = t.counterpart_hashed(h, &route).unwrap().unwrap();
    assert_eq!(old_route.version(), Version::Old);
    assert_eq!(
        t.next(&mut old_route).unwrap(),
        t.ring(Version::Old)
            .node_index_for_hash(full_hash(0x0a00_0001))
    );
    let other = PeerHash::HaproxySource(2);
    assert!(matches!(
        t.counterpart_hashed(other, &route),
        Err(Error::KeyNotRouted)
    ));
}
