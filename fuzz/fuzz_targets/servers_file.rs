//! Any bytes as a servers file, with a scheme, layout and multiple taken
//! from the first bytes: parsing and building never panic, every built
//! ring passes its invariant checker, every layout routes identically, and
//! lookups (plain, batched, failover, with requirements) agree.
#![no_main]

use ketama::{Compat, Layout, RingBuilder};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let compat = Compat::ALL[data[0] as usize % 3];
    let multiple = 1 + data[1] as u32 % 64;
    let Ok(text) = std::str::from_utf8(&data[3..]) else { return };
    let Ok(nodes) = ketama::parse_servers(text, "fuzz") else { return };
    let mut rings = Vec::new();
    for layout in Layout::ALL {
        let Ok(ring) = RingBuilder::new().compat(compat).layout(layout).point_multiple(multiple).build(nodes.clone()) else {
            return;
        };
        ring.check_invariants().expect("invariants");
        rings.push(ring);
    }
    let hashes: Vec<u32> = (0..64u32).map(|i| i.wrapping_mul(0x9E37_79B9) ^ data[2] as u32).collect();
    let mut batch = Vec::new();
    for ring in &rings {
        ring.node_indices_for_hashes(&hashes, &mut batch);
        for (&h, &b) in hashes.iter().zip(&batch) {
            assert_eq!(ring.node_index_for_hash(h), rings[0].node_index_for_hash(h));
            assert_eq!(b, ring.node_index_for_hash(h));
            let first = ring.failover_for_hash(h).next().map(|n| n.server());
            assert_eq!(first, ring.node_for_hash(h).map(|n| n.server()));
        }
        let labels: Vec<&str> = ring.label_names().take(2).collect();
        if let Ok(req) = ring.requirement(&labels) {
            for &h in &hashes {
                let _ = ring.node_index_required_for_hash(h, &req);
            }
        }
    }
});
