//! Replays traces recorded from a real nginx (`hash $request_uri consistent`)
//! against ketama's `Nginx` scheme, in every layout. See
//! `testdata/nginx/README.md` (at the workspace root) for how they were recorded.

mod common;

use std::path::Path;

use common::{Prefix, Reference};
use ketama::{parse_servers, Layout, RingBuilder, Scheme};

fn data(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/nginx")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn replays_nginx_traces_with_zero_mismatches() {
    let mut on_collisions = 0;
    for n in 1..=3 {
        let nodes =
            parse_servers(&data(&format!("golden-{n}.servers")), "golden".as_ref()).unwrap();
        let trace = data(&format!("golden-{n}.csv"));
        let pairs: Vec<(&str, &str)> = trace
            .lines()
            .map(|l| l.rsplit_once(',').expect("URI,SERVER"))
            .collect();
        assert!(pairs.len() >= 1000, "list {n}: only {} URIs", pairs.len());

        // How many URIs fall on an arc that ends at a collided point: those
        // check the tie rule against nginx.
        let collided = Reference::collided(&nodes, 160, Prefix::Nginx);
        for layout in Layout::ALL {
            let ring = RingBuilder::new()
                .compat(Scheme::Nginx)
                .layout(layout)
                .build(nodes.clone())
                .unwrap();
            let mut mismatches = Vec::new();
            for &(uri, want) in &pairs {
                let got = ring.node(uri.as_bytes()).map(|n| n.server()).unwrap_or("-");
                if got != want {
                    mismatches.push(format!("{uri}: nginx {want}, ketama {got}"));
                }
            }
            assert!(
                mismatches.is_empty(),
                "list {n}, {layout}: {} mismatches, first: {:?}",
                mismatches.len(),
                &mismatches[..mismatches.len().min(5)]
            );
            if layout == Layout::Wide {
                for &(uri, _) in &pairs {
                    let h = Scheme::Nginx.hash_key(uri.as_bytes());
                    let mut i = 0;
                    while let Some((ph, _)) = ring.point(i) {
                        if ph >= h {
                            break;
                        }
                        i += 1;
                    }
                    let ph = ring.point(i).or(ring.point(0)).unwrap().0;
                    if collided.binary_search(&ph).is_ok() {
                        on_collisions += 1;
                    }
                }
            }
        }
    }
    assert!(
        on_collisions >= 10,
        "only {on_collisions} URIs exercise ties"
    );
}
