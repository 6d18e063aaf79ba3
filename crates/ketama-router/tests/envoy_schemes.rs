//! The router under Envoy's and gRPC's schemes: with `[ring] scheme =
//! "envoy_ring_hash..."` or `"maglev..."` and the key from a header (as
//! Envoy's `hash_policy: header` and gRPC's `requestHashHeader`), every
//! request reaches the origin the library's ring names, which
//! `crates/ketama-cli/tests/grpc.rs` holds identical to a live gRPC client
//! and `crates/ketama/tests/envoy.rs` to Envoy's vectors. A `down` backend's
//! keys follow the scheme's failover (Maglev: Envoy's retry slots).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::echo::echo_origin;
use common::*;
use ketama::{Node, RingBuilder, Scheme};

const WEIGHTS: [u32; 6] = [1, 2, 1, 3, 1, 1];
const DOWN: usize = 2;

fn origin_port(addr: SocketAddr, key: &str) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!("GET /x HTTP/1.1\r\nHost: h\r\nx-key: {key}\r\nConnection: close\r\n\r\n");
    c.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 200"), "{key}: {text}");
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    body.split(' ').nth(1).unwrap_or("?").to_string()
}

fn check(scheme_key: &str) {
    let origins: Vec<SocketAddr> = WEIGHTS.iter().map(|_| echo_origin()).collect();
    let (r, _dir, _) = router_from(|proxy, admin, _| {
        let mut s = format!(
            "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[ring]\nscheme = \"{scheme_key}\"\nlayout = \"compact\"\n\n[key]\nsource = \"header\"\nheader = \"x-key\"\n\n[health]\nenabled = false\n"
        );
        for (i, (o, w)) in origins.iter().zip(WEIGHTS).enumerate() {
            s += &format!(
                "\n[[backends]]\naddress = \"{o}\"\nweight = {w}\ndown = {}\n",
                i == DOWN
            );
        }
        s
    });
    let scheme: Scheme = scheme_key.parse().unwrap();
    let nodes = origins
        .iter()
        .zip(WEIGHTS)
        .enumerate()
        .map(|(i, (o, w))| Node::new(o.to_string(), w).with_down(i == DOWN))
        .collect();
    let ring = RingBuilder::new().compat(scheme).build(nodes).unwrap();
    let mut differ = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for i in 0..300 {
        let key = format!("/videos/{i}/seg-{}.ts", i % 13);
        let got = origin_port(r.proxy, &key);
        let want = ring
            .node(key.as_bytes())
            .unwrap()
            .server()
            .rsplit(':')
            .next()
            .unwrap()
            .to_string();
        seen.insert(got.clone());
        if got != want {
            differ.push(format!("{key}: router {got}, ring {want}"));
        }
    }
    assert!(differ.is_empty(), "{scheme_key}: {differ:?}");
    assert_eq!(
        seen.len(),
        WEIGHTS.len() - 1,
        "{scheme_key}: every serving origin gets keys"
    );
}

#[test]
fn envoy_ring_hash_routes_as_the_ring() {
    check("envoy_ring_hash");
    check("envoy-ring-hash:grpc");
}

#[test]
fn maglev_routes_as_the_table() {
    check("maglev");
    check("maglev:251");
}
