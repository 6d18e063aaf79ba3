//! Any bytes as a servers file, with a scheme (and twemproxy or HAProxy key hash),
//! layout and multiple taken from the first bytes: parsing and building never panic, every built
//! ring passes its invariant checker, every layout routes identically,
//! lookups (plain, batched, failover) agree, and a label requirement
//! answers exactly as a ring built from only the eligible servers.
#![no_main]

use std::sync::Arc;

use ketama::{testing, Scheme, Layout, Node, Requirement, RingBuilder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let compat = match Scheme::ALL[data[0] as usize % Scheme::ALL.len()] {
        Scheme::Twemproxy(_) => {
            Scheme::Twemproxy(ketama::KeyHash::ALL[data[1] as usize % ketama::KeyHash::ALL.len()])
        }
        Scheme::Haproxy(_) => {
            let all = ketama::haproxy::HaproxyHash::ALL;
            Scheme::Haproxy(all[data[1] as usize % all.len()])
        }
        // Envoy's rings and tables small enough for fast inputs.
        Scheme::EnvoyRingHash(_) => Scheme::EnvoyRingHash(ketama::envoy::RingHash {
            min_ring_size: 1 + u64::from(data[1]) * 8,
            max_ring_size: 4096,
            function: if data[1] & 1 == 0 {
                ketama::envoy::RingHashFunction::XxHash
            } else {
                ketama::envoy::RingHashFunction::Murmur2
            },
        }),
        Scheme::Maglev(_) => Scheme::Maglev(ketama::envoy::Maglev {
            table_size: [7, 17, 251, 1009, 4099][data[1] as usize % 5],
        }),
        c => c,
    };
    // The memcached schemes take only their own multiple.
    let multiple = compat.fixed_point_multiple().unwrap_or(1 + data[1] as u32 % 64);
    let Ok(text) = std::str::from_utf8(&data[3..]) else { return };
    let Ok(nodes) = ketama::parse_servers(text, "fuzz".as_ref()) else { return };
    let builder = RingBuilder::new().compat(compat).point_multiple(multiple);
    // Huge rings are valid but slow; keep each input fast.
    if builder.count_points(&nodes).map_or(true, |p| p > 1 << 16) {
        if let Err(e) = builder.count_points(&nodes) {
            assert!(matches!(e, ketama::Error::TooManyPoints { .. }));
        }
        return;
    }
    let mut rings = Vec::new();
    for layout in Layout::ALL {
        let Ok(ring) = builder.layout(layout).build(nodes.clone()) else {
            return;
        };
        testing::check_invariants(&ring).expect("invariants");
        rings.push(Arc::new(ring));
    }
    let hashes: Vec<u32> = (0..64u32).map(|i| i.wrapping_mul(0x9E37_79B9) ^ data[2] as u32).collect();
    let mut batch = Vec::new();
    let labels: Vec<String> = rings[0].label_names().take(2).map(String::from).collect();
    // The ring's own nodes: under haproxy they carry the ids the ring
    // resolved, which a ring of a subset must keep.
    let eligible: Vec<Node> = rings[0]
        .nodes()
        .iter()
        .filter(|n| labels.iter().all(|l| n.labels().any(|x| x == l)))
        .cloned()
        .collect();
    let dedicated = builder.layout(Layout::Wide).build(eligible).ok();
    for ring in &rings {
        ring.node_indices_for_hashes(&hashes, &mut batch);
        for (&h, &b) in hashes.iter().zip(&batch) {
            assert_eq!(ring.node_index_for_hash(h), rings[0].node_index_for_hash(h));
            assert_eq!(b, ring.node_index_for_hash(h));
            let first = ring.failover_for_hash(h).next().map(|n| n.server());
            assert_eq!(first, ring.node_for_hash(h).map(|n| n.server()));
        }
        match (Requirement::new(ring, &labels), &dedicated) {
            (Ok(req), Some(ded)) => {
                for &h in &hashes {
                    let got = req.node_index_for_hash(h).map(|i| ring.nodes()[i].server());
                    assert_eq!(got, ded.node_for_hash(h).map(|n| n.server()), "hash {h:#x}, labels {labels:?}");
                    let order: Vec<&str> = req.failover(h).map(|i| ring.nodes()[i].server()).collect();
                    let want: Vec<&str> = ded.failover_for_hash(h).map(|n| n.server()).collect();
                    assert_eq!(order, want);
                }
            }
            (Err(ketama::Error::RequirementUnsupported { compat: c, .. }), _) => {
                assert_eq!(c, compat);
                assert!(compat.requirement_obstacle().is_some() && !labels.is_empty());
            }
            (Err(e), _) => panic!("a requirement of the ring's own labels failed: {e}"),
            // The eligible servers alone cannot form a ring only if the
            // whole set could not (it did) -- never.
            (Ok(_), None) => panic!("the dedicated ring failed to build"),
        }
    }
});
