//! Label requirements equal a dedicated ring built from the eligible nodes,
//! collisions included (colliding servers found by search carry different
//! labels; keys are forged onto every collided point).

mod common;

use common::{colliding_pairs, forge_key, Prefix, Reference};

use ketama::{Error, Layout, Node, Requirement, RequirementCache, RingBuilder, Scheme};
use proptest::prelude::*;

const LABELS: [&str; 5] = ["eu", "us", "ssd", "pci", "video"];

fn with_labels(server: String, weight: u32, down: bool, bits: u8) -> Node {
    Node::new(server, weight).with_down(down).with_labels(
        LABELS
            .iter()
            .enumerate()
            .filter(|(i, _)| bits & (1 << i) != 0)
            .map(|(_, l)| *l),
    )
}

use common::arc_ring as build;

/// Checks every routing boundary of the dedicated ring and of the shared
/// one, plus forged keys on every collided point, with the shared ring's
/// label index and without it.
fn check(
    nodes: &[Node],
    compat: Scheme,
    layout: Layout,
    multiple: u32,
    req: &[&str],
) -> Result<(), TestCaseError> {
    for index in [true, false] {
        let shared = std::sync::Arc::new(
            RingBuilder::new()
                .compat(compat)
                .layout(layout)
                .point_multiple(multiple)
                .label_index(index)
                .build(nodes.to_vec())
                .unwrap(),
        );
        ketama::testing::check_invariants(&shared)
            .map_err(|v| TestCaseError::fail(v.to_string()))?;
        let labelled = nodes.iter().any(|n| n.labels().next().is_some());
        prop_assert_eq!(
            shared.has_label_index(),
            index && labelled && shared.point_count() > 0
        );
        check_on(&shared, nodes, compat, multiple, req)?;
    }
    Ok(())
}

fn check_on(
    shared: &std::sync::Arc<ketama::Ring>,
    nodes: &[Node],
    compat: Scheme,
    multiple: u32,
    req: &[&str],
) -> Result<(), TestCaseError> {
    let eligible: Vec<Node> = nodes
        .iter()
        .filter(|n| req.iter().all(|r| n.labels().any(|l| l == *r)))
        .cloned()
        .collect();
    let dedicated = build(eligible.clone(), compat, Layout::Wide, multiple);
    let mut hashes: Vec<u32> = vec![0, u32::MAX];
    for r in [shared, &dedicated] {
        for (h, _) in r.points() {
            hashes.extend([h, h.wrapping_add(1)]);
        }
    }
    let prefix = if compat == Scheme::Nginx {
        Prefix::Nginx
    } else {
        Prefix::Pingora
    };
    for (i, h) in Reference::collided(nodes, multiple, prefix)
        .into_iter()
        .enumerate()
    {
        hashes.push(shared.hash_key(&forge_key(&i.to_string(), h)));
    }
    for allow in [true, false] {
        let requirement = match Requirement::with_dedicated(shared, req, allow) {
            Ok(r) => r,
            Err(Error::UnknownLabel { .. }) => {
                prop_assert!(eligible.is_empty() || req.is_empty());
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(e.to_string())),
        };
        for &h in &hashes {
            let want = dedicated.node_for_hash(h).map(|n| n.server());
            let got = requirement
                .node_index_for_hash(h)
                .map(|i| shared.nodes()[i].server());
            prop_assert_eq!(
                got,
                want,
                "hash {:#x}, require {:?}, dedicated allowed {}",
                h,
                req,
                allow
            );
            let order: Vec<&str> = requirement
                .failover(h)
                .map(|i| shared.nodes()[i].server())
                .collect();
            let want_order: Vec<&str> =
                dedicated.failover_for_hash(h).map(|n| n.server()).collect();
            prop_assert_eq!(order, want_order);
        }
    }
    Ok(())
}

prop_compose! {
    fn config(compat: Scheme)(
        specs in prop::collection::vec((0u32..4, prop::bool::weighted(0.1), any::<u8>()), 1..20),
        pairs in prop::collection::vec((0usize..3, any::<u8>(), any::<u8>()), 0..3),
        multiple in 16u32..40,
    ) -> (Vec<Node>, u32) {
        let mut nodes: Vec<Node> = specs
            .iter()
            .enumerate()
            .map(|(i, &(w, down, bits))| {
                let s = if compat == Scheme::Nginx && i % 3 == 1 {
                    format!("cache-{i}.example:8080")
                } else {
                    format!("10.2.{}.{}:443", i / 256, i % 256)
                };
                with_labels(s, w, down, bits)
            })
            .collect();
        // Colliding servers with (usually) different labels, at both ends.
        for &(p, a_bits, b_bits) in &pairs {
            let (a, b) = &colliding_pairs()[p];
            if nodes.iter().any(|n| n.server() == a) {
                continue;
            }
            nodes.insert(0, with_labels(a.clone(), 1, false, a_bits));
            nodes.push(with_labels(b.clone(), 1, false, b_bits));
        }
        (nodes, multiple)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn nginx_required_lookup_is_the_dedicated_ring(
        (nodes, multiple) in config(Scheme::Nginx),
        bits in any::<u8>(),
        layout in prop::sample::select(Layout::ALL.to_vec()),
    ) {
        let req: Vec<&str> = LABELS.iter().enumerate().filter(|(i, _)| bits & (1 << i) != 0).map(|(_, l)| *l).collect();
        check(&nodes, Scheme::Nginx, layout, multiple, &req)?;
    }

    #[test]
    fn pingora_v2_required_lookup_is_the_dedicated_ring(
        (nodes, multiple) in config(Scheme::PingoraV2),
        bits in any::<u8>(),
        layout in prop::sample::select(Layout::ALL.to_vec()),
    ) {
        let req: Vec<&str> = LABELS.iter().enumerate().filter(|(i, _)| bits & (1 << i) != 0).map(|(_, l)| *l).collect();
        check(&nodes, Scheme::PingoraV2, layout, multiple, &req)?;
    }
}

#[test]
fn collided_points_with_different_labels() {
    // Both orders of every searched pair, labels split between them: the
    // requirement picks the eligible one where the shared ring kept the other.
    for (a, b) in colliding_pairs() {
        let nodes = vec![
            with_labels(a.clone(), 1, false, 0b01),
            with_labels(b.clone(), 1, false, 0b10),
            with_labels("10.3.0.1:443".into(), 2, false, 0b11),
        ];
        for compat in [Scheme::Nginx, Scheme::PingoraV2] {
            for layout in Layout::ALL {
                for req in [vec!["eu"], vec!["us"], vec!["eu", "us"], vec![]] {
                    check(&nodes, compat, layout, 16, &req).unwrap();
                }
            }
        }
    }
}

#[test]
fn errors_and_limits() {
    let ring = build(
        vec![with_labels("10.0.0.1:1".into(), 1, false, 1)],
        Scheme::Nginx,
        Layout::Wide,
        160,
    );
    let e = Requirement::new(&ring, &["nope"]).unwrap_err();
    assert_eq!(
        e,
        Error::UnknownLabel {
            label: "nope".into(),
            known: "eu".into()
        }
    );
    let v1 = build(
        vec![with_labels("10.0.0.1:1".into(), 1, false, 1)],
        Scheme::PingoraV1,
        Layout::Wide,
        160,
    );
    assert!(matches!(
        Requirement::new(&v1, &["eu"]).unwrap_err(),
        Error::RequirementUnsupported {
            compat: Scheme::PingoraV1,
            ..
        }
    ));
    assert!(Requirement::new::<&str>(&v1, &[]).is_ok());
    // The memcached schemes: a subset's own continuum gives every server
    // other point counts, so no walk of the shared ring can equal it.
    for compat in [
        Scheme::Libmemcached,
        Scheme::Twemproxy(ketama::KeyHash::Md5),
    ] {
        let ring = build(
            vec![
                with_labels("10.0.0.1:11211".into(), 1, true, 1),
                with_labels("10.0.0.2:11211".into(), 1, false, 1),
            ],
            compat,
            Layout::Wide,
            160,
        );
        let e = Requirement::new(&ring, &["eu"]).unwrap_err();
        assert!(e.to_string().contains("point count"), "{e}");
        assert!(Requirement::new::<&str>(&ring, &[]).is_ok());
    }
    // 65 distinct labels.
    let nodes: Vec<Node> = (0..65)
        .map(|i| Node::new(format!("n{i}"), 1).with_labels([format!("l{i}")]))
        .collect();
    let e = RingBuilder::new().build(nodes).unwrap_err();
    assert!(
        matches!(&e, Error::TooManyLabels { label, .. } if label == "l64"),
        "{e}"
    );
    // Empty eligible set: None.
    let ring = build(
        vec![
            with_labels("10.0.0.1:1".into(), 1, false, 1),
            with_labels("10.0.0.2:1".into(), 1, false, 2),
        ],
        Scheme::Nginx,
        Layout::Compact,
        160,
    );
    let r = Requirement::new(&ring, &["eu", "us"]).unwrap();
    assert_eq!(r.node(b"k"), None);
    assert_eq!(r.failover(ring.hash_key(b"k")).next(), None);
}

#[test]
fn sparse_requirements_get_a_dedicated_ring_under_a_cap() {
    let nodes: Vec<Node> = (0..400u32)
        .map(|i| {
            with_labels(
                format!("10.4.{}.{}:443", i / 256, i % 256),
                1,
                false,
                if i % 100 == 0 { 0b111 } else { 0b001 },
            )
        })
        .collect();
    let ring = build(nodes, Scheme::Nginx, Layout::Compact, 160);
    let sparse = Requirement::new(&ring, &["us"]).unwrap();
    assert!(sparse.is_dedicated());
    assert!((sparse.weight_share() - 4.0 / 400.0).abs() < 1e-12);
    let dense = Requirement::new(&ring, &["eu"]).unwrap();
    assert!(!dense.is_dedicated());
    let cache = RequirementCache::new(ring.clone(), 1 << 20);
    let a = cache.get(&["us", "ssd"]).unwrap();
    let b = cache.get(&["ssd", "us"]).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    assert!(cache.heap_bytes() <= 1 << 20);
    // A cap too small for the dedicated ring: the requirement walks instead.
    let tiny = RequirementCache::new(ring.clone(), 64);
    assert!(!tiny.get(&["us"]).unwrap().is_dedicated());
}
