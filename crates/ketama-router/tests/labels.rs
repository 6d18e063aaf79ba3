//! Label rules through the real router: a host rule and a header rule, on
//! one ring and during a migration, each answer checked against the
//! library's own requirement on the ring the rollout picks.

mod common;

use std::sync::Arc;

use common::*;
use ketama::{Layout, Migration, Node, Requirement, RingBuilder, Rollout, Version};
use ketama_router::origin::Origin;

const LABELS: [&[&str]; 5] = [&["eu"], &["eu", "ssd"], &["us"], &["us", "ssd"], &["eu"]];

fn nodes(origins: &[Origin]) -> Vec<Node> {
    origins
        .iter()
        .zip(LABELS)
        .enumerate()
        .map(|(i, (o, l))| {
            Node::new(o.addr().to_string(), 1 + i as u32 % 2).with_labels(l.iter().copied())
        })
        .collect()
}

fn config(
    origins: &[Origin],
    proxy: std::net::SocketAddr,
    admin: std::net::SocketAddr,
    migration: bool,
) -> String {
    let mut s = format!(
        "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[ring]\nlayout = \"compact\"\n\n[health]\ninterval_ms = 200\n"
    );
    if migration {
        s.push_str("\n[migration]\nring = { compat = \"pingora-v2\", layout = \"wide\", point_multiple = 16 }\nglobal_bp = 4000\nscopes = { ams = 8000 }\nscope = \"ams\"\n");
    }
    for (n, o) in nodes(origins).iter().zip(origins) {
        let labels: Vec<String> = n.labels().map(|l| format!("\"{l}\"")).collect();
        s.push_str(&format!(
            "\n[[backends]]\naddress = \"{}\"\nweight = {}\nlabels = [{}]\n",
            o.addr(),
            n.weight(),
            labels.join(", ")
        ));
    }
    s.push_str("\n[[label_rules]]\nhost = \"eu.example.com\"\nrequire = [\"eu\"]\n");
    s.push_str("\n[[label_rules]]\nheader = \"x-tier\"\nvalue = \"ssd\"\nrequire = [\"ssd\"]\n");
    s
}

fn check(migration: bool) {
    let origins: Vec<Origin> = (0..5).map(|i| Origin::start(i).unwrap()).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    std::fs::write(&path, config(&origins, any_port(), any_port(), migration)).unwrap();
    let r = start_router(&path);
    let proxy = r.proxy;

    let old = Arc::new(
        RingBuilder::new()
            .layout(Layout::Compact)
            .build(nodes(&origins))
            .unwrap(),
    );
    let new = Arc::new(
        RingBuilder::new()
            .compat(ketama::Scheme::PingoraV2)
            .point_multiple(16)
            .build(nodes(&origins))
            .unwrap(),
    );
    let m = Migration::new(
        old.clone(),
        new.clone(),
        Rollout::new(4000).unwrap().with_scope("ams", 8000).unwrap(),
    );
    let mut seen_versions = std::collections::HashSet::new();
    for (host, header, labels) in [
        ("eu.example.com:8080", None, &["eu"][..]),
        ("EU.Example.COM", Some(("x-tier", "ssd")), &["eu"][..]), // first rule wins
        ("other.example", Some(("x-tier", "ssd")), &["ssd"][..]),
        ("other.example", Some(("x-tier", "hdd")), &[][..]),
        ("other.example", None, &[][..]),
    ] {
        for u in urls(150) {
            let mut headers = vec![("host", host)];
            headers.extend(header);
            let resp = request_with_host(proxy, &u, &headers);
            assert_eq!(resp.status, 200, "{u}: {}", resp.body);
            let version = if migration {
                m.version(u.as_bytes(), Some("ams"))
            } else {
                Version::Only
            };
            seen_versions.insert(version);
            assert_eq!(resp.headers["x-ketama-ring"], version.name(), "{u}");
            let ring = m.ring(version);
            let want = Requirement::new(ring, labels)
                .unwrap()
                .node(u.as_bytes())
                .unwrap()
                .server()
                .to_string();
            assert_eq!(
                resp.headers["x-ketama-backend"], want,
                "{u} {host} {header:?}"
            );
            let node = ring.nodes().iter().find(|n| n.server() == want).unwrap();
            assert!(
                labels.iter().all(|l| node.labels().any(|x| x == *l)),
                "{want} lacks {labels:?}"
            );
        }
    }
    if migration {
        assert!(seen_versions.contains(&Version::Old) && seen_versions.contains(&Version::New));
    }
    drop(r);
}

#[test]
fn host_and_header_rules_on_one_ring() {
    check(false);
}

#[test]
fn host_and_header_rules_during_a_migration() {
    check(true);
}
