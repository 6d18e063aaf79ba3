//! Any bytes as a HAProxy configuration: `ketama import haproxy`'s
//! reader never panics, a backend it returns has servers whose weights and
//! ids HAProxy would take, and they build a ring (when its points are few
//! enough to keep the input fast) that passes its invariant checker in
//! every layout and routes alike in all of them.
#![no_main]

use ketama::haproxy::{parse_backend, HaproxyHash, MAX_ID, MAX_WEIGHT};
use ketama::{testing, Layout, RingBuilder, Scheme};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for name in [None, Some("b")] {
        let Ok(b) = parse_backend(text, "fuzz.cfg".as_ref(), name) else { continue };
        assert!(!b.nodes.is_empty());
        if let Some(n) = name {
            assert_eq!(b.name, n);
        }
        for n in &b.nodes {
            assert!(n.weight() <= MAX_WEIGHT);
            assert!(n.id().is_none_or(|id| (1..=MAX_ID).contains(&id)));
        }
        let builder = RingBuilder::new().compat(b.scheme.unwrap_or(Scheme::Haproxy(HaproxyHash::default())));
        if builder.count_points(&b.nodes).map_or(true, |p| p > 1 << 14) {
            continue;
        }
        let mut first: Option<Vec<Option<usize>>> = None;
        for layout in Layout::ALL {
            // Two servers given one id is the one error left to a build.
            let Ok(ring) = builder.layout(layout).build(b.nodes.clone()) else {
                break;
            };
            testing::check_invariants(&ring).expect("invariants");
            let answers: Vec<Option<usize>> = (0..64u32)
                .map(|i| ring.node_index_for_hash(i.wrapping_mul(0x9E37_79B9)))
                .collect();
            match &first {
                None => first = Some(answers),
                Some(f) => assert_eq!(f, &answers, "{layout}"),
            }
        }
    }
});
