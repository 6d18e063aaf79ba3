//! Every build error: what triggers it and that its message names the input.

use ketama::{Error, Layout, Node, RingBuilder, Scheme, MAX_POINTS};

fn build(compat: Scheme, layout: Layout, multiple: u32, nodes: Vec<Node>) -> Error {
    RingBuilder::new()
        .compat(compat)
        .layout(layout)
        .point_multiple(multiple)
        .build(nodes)
        .unwrap_err()
}

#[test]
fn duplicate_server() {
    let e = build(
        Scheme::Nginx,
        Layout::Wide,
        160,
        vec![
            Node::new("a:1", 1),
            Node::new("b:1", 1),
            Node::new("a:1", 2),
        ],
    );
    assert_eq!(
        e,
        Error::DuplicateServer {
            server: "a:1".into(),
            first: 0,
            second: 2
        }
    );
    assert!(e.to_string().contains("\"a:1\""));
}

#[test]
fn empty_server() {
    let e = build(
        Scheme::Nginx,
        Layout::Wide,
        160,
        vec![Node::new("a:1", 1), Node::new("", 1)],
    );
    assert_eq!(e, Error::EmptyServer { index: 1 });
}

#[test]
fn pingora_needs_socket_addresses() {
    for compat in [Scheme::PingoraV1, Scheme::PingoraV2] {
        for bad in [
            "cache.example:80",
            "unix:/run/x.sock",
            "10.0.0.1",
            "[::1]",
            "10.0.0.1:99999",
        ] {
            let e = build(
                compat,
                Layout::Wide,
                160,
                vec![Node::new("10.0.0.1:1", 1), Node::new(bad, 1)],
            );
            assert_eq!(
                e,
                Error::NotSocketAddr {
                    server: bad.into(),
                    compat
                },
                "{bad}"
            );
            assert!(e.to_string().contains(bad));
        }
    }
}

#[test]
fn pingora_duplicate_address_written_twice() {
    let e = build(
        Scheme::PingoraV2,
        Layout::Wide,
        160,
        vec![
            Node::new("[2001:db8::1]:443", 1),
            Node::new("[2001:0db8:0::1]:443", 1),
        ],
    );
    assert!(matches!(e, Error::DuplicateAddress { .. }), "{e}");
    // nginx hashes the strings as written, so both are fine there.
    RingBuilder::new()
        .build(vec![
            Node::new("[2001:db8::1]:443", 1),
            Node::new("[2001:0db8:0::1]:443", 1),
        ])
        .unwrap();
}

#[test]
fn pingora_refuses_more_than_65536_nodes() {
    let nodes: Vec<Node> = (0..65_537u32)
        .map(|i| {
            Node::new(
                format!("10.{}.{}.{}:80", i >> 16, (i >> 8) & 255, i & 255),
                1,
            )
        })
        .collect();
    for compat in [Scheme::PingoraV1, Scheme::PingoraV2] {
        let e = build(compat, Layout::Wide, 1, nodes.clone());
        assert_eq!(
            e,
            Error::TooManyNodesForCompat {
                nodes: 65_537,
                max: 65_536,
                compat
            }
        );
    }
    // Exactly 65,536 is fine.
    RingBuilder::new()
        .compat(Scheme::PingoraV2)
        .layout(Layout::Packed)
        .point_multiple(1)
        .build(nodes[..65_536].to_vec())
        .unwrap();
}

#[test]
fn packed_refuses_more_than_65536_nodes() {
    let nodes: Vec<Node> = (0..65_537u32)
        .map(|i| Node::new(format!("n{i}"), 1))
        .collect();
    let e = build(Scheme::Nginx, Layout::Packed, 1, nodes);
    assert_eq!(
        e,
        Error::TooManyNodesForLayout {
            nodes: 65_537,
            max: 65_536,
            layout: Layout::Packed
        }
    );
    assert!(e.to_string().contains("wide"));
}

#[test]
fn point_cap_is_checked_before_allocating() {
    // u32::MAX x u32::MAX points would wrap a u32 and exhaust any memory.
    let e = build(
        Scheme::Nginx,
        Layout::Wide,
        u32::MAX,
        vec![Node::new("a", 1), Node::new("big", u32::MAX)],
    );
    match e {
        Error::TooManyPoints {
            server,
            index,
            weight,
            point_multiple,
            node_points,
            total,
            max,
        } => {
            assert_eq!((server.as_str(), index), ("a", 0));
            assert_eq!((weight, point_multiple), (1, u32::MAX));
            assert_eq!(node_points, u32::MAX as u64);
            assert_eq!(total, u32::MAX as u64);
            assert_eq!(max, MAX_POINTS);
        }
        other => panic!("{other}"),
    }
    // The sum crossing the cap names the node that crossed it.
    let per = (MAX_POINTS / 2) as u32;
    let e = build(
        Scheme::PingoraV1,
        Layout::Wide,
        1,
        vec![
            Node::new("10.0.0.1:1", per),
            Node::new("10.0.0.2:1", per),
            Node::new("10.0.0.3:1", 1),
        ],
    );
    assert!(
        matches!(&e, Error::TooManyPoints { server, total, .. } if server == "10.0.0.3:1" && *total == MAX_POINTS + 1),
        "{e}"
    );
    assert!(e.to_string().contains("10.0.0.3:1"));
}

#[test]
fn zero_point_multiple() {
    assert_eq!(
        build(Scheme::Nginx, Layout::Wide, 0, vec![Node::new("a", 1)]),
        Error::ZeroPointMultiple
    );
}

#[test]
fn any_weight_is_fine_up_to_the_cap() {
    // Large weights at a small multiple: no overflow, no panic.
    let ring = RingBuilder::new()
        .point_multiple(1)
        .build(vec![
            Node::new("a", 1_000_000),
            Node::new("b", 0),
            Node::new("c", 3),
        ])
        .unwrap();
    assert_eq!(ring.generated_points(), 1_000_003);
    ketama::testing::check_invariants(&ring).unwrap();
}
