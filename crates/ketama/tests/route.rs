//! The one routing decision (`RouteTable`) against the parts it is made
//! of: the migration's version, that ring's requirement, its failover walk.

mod common;

use ketama::{Error, Layout, Migration, Node, Requirement, Rollout, RouteTable, Scheme, Version};

const LABELS: [&str; 3] = ["eu", "ssd", "pci"];

fn nodes(rng: &mut impl rand::Rng, n: usize) -> Vec<Node> {
    (0..n)
        .map(|i| {
            let bits: u8 = rng.random();
            Node::new(
                format!("10.9.{}.{}:443", i / 256, i % 256),
                rng.random_range(0..4),
            )
            .with_down(rng.random_ratio(1, 10))
            .with_labels(
                LABELS
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| bits & (1 << j) != 0)
                    .map(|(_, l)| *l),
            )
        })
        .collect()
}

use common::arc_ring as ring;

/// Every serving node of the decision, in order.
fn walk(
    table: &RouteTable,
    key: &[u8],
    need: Option<ketama::Need>,
    scope: Option<&str>,
) -> (Version, Vec<usize>) {
    let mut r = table.route(key, need, scope).unwrap();
    let mut out = Vec::new();
    while let Some(n) = table.next(&mut r).unwrap() {
        out.push(n);
    }
    (r.version(), out)
}

#[test]
fn the_decision_is_version_then_requirement_then_failover() {
    let mut rng = common::rng(11);
    for round in 0..6 {
        let nodes = nodes(&mut rng, 40);
        let old = ring(nodes.clone(), Scheme::Nginx, Layout::Compact, 40);
        let new = ring(nodes, Scheme::PingoraV2, Layout::Wide, 16);
        let rollout = Rollout::new(3000).unwrap().with_scope("ams", 9000).unwrap();
        let label_sets: Vec<Vec<&str>> = vec![
            vec![],
            vec!["eu"],
            vec!["eu", "ssd"],
            vec!["pci", "ssd", "eu"],
        ];
        for migrating in [false, true] {
            let mut table = if migrating {
                RouteTable::migrating(Migration::new(old.clone(), new.clone(), rollout.clone()))
            } else {
                RouteTable::new(old.clone())
            };
            let needs: Vec<_> = label_sets.iter().map(|l| table.need(l).unwrap()).collect();
            for k in 0..300 {
                let key = common::random_key(&mut rng);
                let scope = [None, Some("ams"), Some("lhr")][k % 3];
                for (labels, &need) in label_sets.iter().zip(&needs) {
                    let (v, got) = walk(&table, &key, Some(need), scope);
                    let want_v = if migrating {
                        Migration::new(old.clone(), new.clone(), rollout.clone())
                            .version(&key, scope)
                    } else {
                        Version::Only
                    };
                    assert_eq!(v, want_v, "round {round}");
                    let r = table.ring(v);
                    let req = Requirement::new(r, labels).unwrap();
                    let want: Vec<usize> = req.failover(r.hash_key(&key)).collect();
                    assert_eq!(got, want, "round {round}, {labels:?}, {v}");
                }
                // No need: the ring's own failover order.
                let (v, got) = walk(&table, &key, None, scope);
                let r = table.ring(v);
                let want: Vec<usize> = {
                    let mut f = r.failover(&key);
                    std::iter::from_fn(|| f.next_index()).collect()
                };
                assert_eq!(got, want);
            }
        }
    }
}

#[test]
fn batches_answer_as_single_decisions() {
    let mut rng = common::rng(12);
    let nodes = nodes(&mut rng, 300);
    let old = ring(nodes.clone(), Scheme::Nginx, Layout::Compact, 160);
    let new = ring(nodes, Scheme::Nginx, Layout::Packed, 40);
    let keys: Vec<Vec<u8>> = (0..5000).map(|_| common::random_key(&mut rng)).collect();
    for mut table in [
        RouteTable::new(old.clone()),
        RouteTable::migrating(Migration::new(
            old.clone(),
            new.clone(),
            Rollout::new(5000).unwrap(),
        )),
    ] {
        let eu = table.need(&["eu"]).unwrap();
        let none = table.need::<&str>(&[]).unwrap();
        let mut out = Vec::new();
        for need in [None, Some(none), Some(eu)] {
            table.first_nodes(&keys, need, Some("x"), &mut out).unwrap();
            assert_eq!(out.len(), keys.len());
            for (k, &(v, n)) in keys.iter().zip(&out) {
                let mut r = table.route(k, need, Some("x")).unwrap();
                assert_eq!((v, n), (r.version(), table.next(&mut r).unwrap()));
            }
        }
    }
}

#[test]
fn needs_and_routes_belong_to_their_table() {
    let eu = vec![Node::new("a:1", 1).with_labels(["eu"]), Node::new("b:1", 1)];
    let mut a = RouteTable::new(ring(eu.clone(), Scheme::Nginx, Layout::Wide, 160));
    let mut b = RouteTable::new(ring(eu, Scheme::Nginx, Layout::Wide, 160));
    let need_a = a.need(&["eu"]).unwrap();
    let _need_b = b.need(&["eu"]).unwrap();
    // The same labels on another table are another need: rejected there.
    assert_eq!(
        b.route(b"/k", Some(need_a), None).unwrap_err(),
        Error::ForeignNeed
    );
    assert!(b.requirement(need_a, Version::Only).is_none());
    let mut out = Vec::new();
    assert_eq!(
        b.first_nodes(&[b"/k"], Some(need_a), None, &mut out)
            .unwrap_err(),
        Error::ForeignNeed
    );
    // A route advanced on a table that did not make it is refused, an
    // answer distinct from "no node left".
    let mut r = a.route(b"/k", Some(need_a), None).unwrap();
    assert_eq!(b.next(&mut r), Err(Error::ForeignRoute));
    assert_eq!(b.next_where(&mut r, |_| true), Err(Error::ForeignRoute));
    assert_eq!(a.next(&mut r), Ok(Some(0)));
    assert_eq!(a.next(&mut r), Ok(None), "only a:1 carries eu");
    // Unknown labels name the ring they are missing on.
    let e = a.need(&["us"]).unwrap_err();
    assert!(matches!(e, Error::UnknownLabel { .. }), "{e}");
}

#[test]
fn next_where_skips_what_the_caller_rejects() {
    let nodes: Vec<Node> = (0..10).map(|i| Node::new(format!("n{i}"), 1)).collect();
    let table = RouteTable::new(ring(nodes, Scheme::Nginx, Layout::Compact, 160));
    let (_, all) = walk(&table, b"/obj", None, None);
    assert_eq!(all.len(), 10);
    let mut r = table.route(b"/obj", None, None).unwrap();
    // Reject the first three: the fourth in failover order comes back.
    let got = table.next_where(&mut r, |n| !all[..3].contains(&n));
    assert_eq!(got, Ok(Some(all[3])));
    assert_eq!(table.next(&mut r), Ok(Some(all[4])));
}

#[test]
fn a_cursor_belongs_to_its_ring() {
    let nodes: Vec<Node> = (0..4).map(|i| Node::new(format!("n{i}:80"), 1)).collect();
    let a = ring(nodes.clone(), Scheme::Nginx, Layout::Compact, 160);
    let b = ring(nodes, Scheme::Nginx, Layout::Compact, 160);
    let mut c = a.failover_cursor(12345);
    // Same nodes, another ring: refused, not walked from a meaningless
    // position (which could panic on a shorter ring).
    assert_eq!(b.advance(&mut c), Err(Error::ForeignCursor));
    let first = a.advance(&mut c).unwrap();
    assert_eq!(first, a.node_index_for_hash(12345));
    // A clone has the same points: its cursors are interchangeable.
    let clone = (*a).clone();
    assert!(clone.advance(&mut c).unwrap().is_some());
    // A requirement's cursors are its ring's.
    let eu: Vec<Node> = (0..4)
        .map(|i| {
            Node::new(format!("n{i}:80"), 1).with_labels(if i % 2 == 0 {
                vec!["eu"]
            } else {
                vec!["us"]
            })
        })
        .collect();
    let labelled = ring(eu, Scheme::Nginx, Layout::Compact, 160);
    let req = ketama::Requirement::new(&labelled, &["eu"]).unwrap();
    let mut rc = req.cursor(7);
    assert_eq!(
        req.advance(&mut a.failover_cursor(7)),
        Err(Error::ForeignCursor)
    );
    assert!(req.advance(&mut rc).unwrap().is_some());
}

/// A key's counterpart is its route on the other ring, under the same
/// need: what the other ring alone would answer, and back again.
#[test]
fn a_counterpart_is_the_same_key_on_the_other_ring() {
    let mut rng = common::rng(49);
    let nodes = nodes(&mut rng, 12);
    let old = ring(nodes.clone(), Scheme::Nginx, Layout::Compact, 160);
    let new = ring(nodes, Scheme::Nginx, Layout::Packed, 40);
    let mut table = RouteTable::migrating(Migration::new(
        old.clone(),
        new.clone(),
        Rollout::new(5000).unwrap(),
    ));
    let eu = table.need(&["eu"]).unwrap();
    let mut alone = [RouteTable::new(old.clone()), RouteTable::new(new.clone())];
    let alone_eu = alone.each_mut().map(|t| t.need(&["eu"]).unwrap());
    let mut seen = [0; 2];
    for _ in 0..2000 {
        let key = common::random_key(&mut rng);
        for need in [None, Some(eu)] {
            let route = table.route(&key, need, None).unwrap();
            let mut other = table.counterpart(&key, &route).unwrap().unwrap();
            let (here, there) = match route.version() {
                Version::Old => (0, 1),
                _ => (1, 0),
            };
            seen[here] += 1;
            assert_ne!(other.version(), route.version());
            let alone_need = need.map(|_| alone_eu[there]);
            let mut want = alone[there].route(&key, alone_need, None).unwrap();
            let got: Vec<usize> = std::iter::from_fn(|| table.next(&mut other).unwrap()).collect();
            let want: Vec<usize> =
                std::iter::from_fn(|| alone[there].next(&mut want).unwrap()).collect();
            assert_eq!(got, want);
            let back = table.counterpart(&key, &other).unwrap().unwrap();
            assert_eq!(
                (back.version(), back.hash()),
                (route.version(), route.hash())
            );
        }
    }
    assert!(seen[0] > 500 && seen[1] > 500, "{seen:?}");
    let route = table.route(b"/a", None, None).unwrap();
    assert_eq!(
        table.counterpart(b"/b", &route).unwrap_err(),
        Error::KeyNotRouted
    );
    assert_eq!(
        alone[0].counterpart(b"/a", &route).unwrap_err(),
        Error::ForeignRoute
    );
    let only = alone[0].route(b"/a", None, None).unwrap();
    assert!(alone[0].counterpart(b"/a", &only).unwrap().is_none());
}
