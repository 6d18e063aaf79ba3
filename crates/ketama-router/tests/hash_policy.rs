//! `[[key.hash_policy]]` end to end, Envoy's reading: a cookie policy
//! with a `ttl` generates Envoy's cookie (the hex of XXH64 of the client's
//! and the listener's `address:port`) and sends it in `Set-Cookie`; the
//! request goes where the combined hash (`rotl(hash, 1) ^ next` over the
//! cookie, a header's sorted values and the client's address) falls on an
//! `envoy-ring-hash` ring built by the library; the cookie sent back routes
//! the same way without a new one; a header's values route alike in any
//! order; requests no policy hashes go round robin. The expected hashes are
//! written out here from Envoy's definitions, not asked of the router's
//! code.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::echo::echo_origin;
use common::*;
use ketama::envoy::xxh64;

fn x(s: &str) -> u64 {
    xxh64(s.as_bytes(), 0)
}

/// Sends `fields` in a GET on a new connection: the origin port that
/// answered, the response's `Set-Cookie` if any, and the connection's two
/// ends (the client's, the router's).
fn get(addr: SocketAddr, fields: &str) -> (String, Option<String>, (SocketAddr, SocketAddr)) {
    let mut c = TcpStream::connect(addr).unwrap();
    let ends = (c.local_addr().unwrap(), c.peer_addr().unwrap());
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!("GET /obj HTTP/1.1\r\nHost: h.test\r\n{fields}Connection: close\r\n\r\n");
    c.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let cookie = head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case("set-cookie")
            .then(|| v.trim().to_string())
    });
    let port = body.split(' ').nth(1).unwrap().to_string();
    (port, cookie, ends)
}

fn router_with(origins: &[SocketAddr], policies: &str) -> (RouterProc, tempfile::TempDir) {
    let (r, dir, _) = router_from(|proxy, admin, _| {
        let mut s = format!(
            "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[ring]\nscheme = \"envoy-ring-hash\"\n\n{policies}\n\n[health]\nenabled = false\n"
        );
        for o in origins {
            s += &format!("\n[[backends]]\naddress = \"{o}\"\n");
        }
        s
    });
    (r, dir)
}

/// The port of the origin the library's ring puts hash `h` on.
fn owner(origins: &[SocketAddr], h: u64) -> String {
    let ring = ketama::RingBuilder::new()
        .compat("envoy-ring-hash".parse().unwrap())
        .build(
            origins
                .iter()
                .map(|o| ketama::Node::new(o.to_string(), 1))
                .collect(),
        )
        .unwrap();
    let i = ring.node_index_for_hash64(h).unwrap().unwrap();
    origins[i].port().to_string()
}

#[test]
fn a_generated_cookie_header_values_and_the_address_route_as_envoy_combines_them() {
    let origins: Vec<SocketAddr> = (0..6).map(|_| echo_origin()).collect();
    let policies = "[[key.hash_policy]]\ncookie = \"sid\"\nttl_s = 3600\npath = \"/\"\nattributes = [{ name = \"SameSite\", value = \"Lax\" }, { name = \"Secure\" }]\n\n[[key.hash_policy]]\nheader = \"x-user\"\n\n[[key.hash_policy]]\nsource_ip = true\n";
    let (r, _d) = router_with(&origins, policies);
    let mut owners = std::collections::BTreeSet::new();
    for user in [
        "alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi",
    ] {
        let (port, set, (client, local)) = get(r.proxy, &format!("X-User: {user}\r\n"));
        let value = format!("{:016x}", x(&format!("{client}{local}")));
        assert_eq!(
            set.as_deref(),
            Some(
                format!("sid=\"{value}\"; Max-Age=3600; Path=/; SameSite=Lax; Secure; HttpOnly")
                    .as_str()
            )
        );
        let h = (x(&value).rotate_left(1) ^ x(user)).rotate_left(1) ^ x(&client.ip().to_string());
        assert_eq!(
            port,
            owner(&origins, h),
            "{user}: the generated cookie's request"
        );
        // The cookie sent back (quoted, as Set-Cookie gave it): the same
        // hash, no new cookie, whatever the new connection's port.
        let (again, set, _) = get(
            r.proxy,
            &format!("Cookie: a=1; sid=\"{value}\"\r\nX-User: {user}\r\n"),
        );
        assert_eq!(
            (again.as_str(), set),
            (port.as_str(), None),
            "{user}: the cookie sent back"
        );
        owners.insert(port);
    }
    assert!(owners.len() >= 3, "the users spread: {owners:?}");
}

#[test]
fn header_values_route_alike_in_any_order_and_no_hash_goes_round_robin() {
    let origins: Vec<SocketAddr> = (0..6).map(|_| echo_origin()).collect();
    let (r, _d) = router_with(&origins, "[[key.hash_policy]]\nheader = \"x-user\"\n");
    for (a, b) in [("a", "b"), ("x", "y z"), ("1", "1")] {
        let one = get(r.proxy, &format!("X-User: {a}\r\nx-user: {b}\r\n")).0;
        let other = get(r.proxy, &format!("x-user: {b}\r\nX-User: {a}\r\n")).0;
        let (mut v1, mut v2) = (a.to_string(), b.to_string());
        if v2 < v1 {
            std::mem::swap(&mut v1, &mut v2);
        }
        let h = xxh64(v2.as_bytes(), xxh64(v1.as_bytes(), 0));
        assert_eq!(
            (one.as_str(), other.as_str()),
            (owner(&origins, h).as_str(), owner(&origins, h).as_str())
        );
    }
    let spread: std::collections::BTreeSet<String> = (0..60).map(|_| get(r.proxy, "").0).collect();
    assert!(
        spread.len() >= 3,
        "requests without the header go round robin: {spread:?}"
    );
}

#[test]
fn policies_a_ring_cannot_place_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (config, says) in [
        ("[key]\n[[key.hash_policy]]\nheader = \"x\"\n", "key.hash_policy: hash policies make Envoy's 64-bit hash"),
        ("[ring]\nscheme = \"maglev\"\n[[key.hash_policy]]\nheader = \"x\"\ncookie = \"c\"\n", "key.hash_policy[0].header: a hash policy names exactly one"),
        ("[ring]\nscheme = \"maglev\"\n[key]\nhash_policy_peer = \"grpc\"\n[[key.hash_policy]]\nsource_ip = true\n", "key.hash_policy[0].header: gRPC's ring_hash reads header policies only"),
        ("[ring]\nscheme = \"maglev\"\n[[key.hash_policy]]\nheader = \"x\"\nregex_rewrite = { pattern = \"(\", substitution = \"\" }\n", "key.hash_policy[0].regex_rewrite: regex_rewrite.pattern"),
        ("[ring]\nscheme = \"maglev\"\n[[key.hash_policy]]\nquery_parameter = \"u\"\nttl_s = 1\n", "key.hash_policy[0].ttl_s: ttl_s, path and attributes go with a cookie policy only"),
        ("[ring]\nscheme = \"maglev\"\n[key]\ntemplate = \"$uri\"\n[[key.hash_policy]]\nsource_ip = true\n", "key.hash_policy: give hash_policy"),
    ] {
        let path = dir.path().join("r.toml");
        std::fs::write(&path, format!("{config}\n[admin]\nlisten = \"127.0.0.1:9901\"\nauth = false\n[[backends]]\naddress = \"127.0.0.1:1\"\n")).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ketama-router"))
            .arg("--check")
            .arg("--config")
            .arg(&path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{config}\n{err}");
    }
}
