//! ketama-router against a live HAProxy 2.6 in front of the same origins
//! (weights, explicit ids, a disabled server): with `[ring] compat =
//! "haproxy..."` and `[key] balance` the router must send every request to
//! the origin HAProxy sends it to, for `balance uri` and its options and
//! for `balance hdr(NAME)`, origin-form and absolute-form targets alike.

mod common;

use std::net::SocketAddr;

use common::echo::echo_origin;
use common::haproxy::{answer, haproxy, router, SERVERS};
use rand::{Rng, SeedableRng};

const CHARS: &[u8] =
    b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=:@";

fn target(rng: &mut impl Rng) -> String {
    let mut t = String::new();
    // The router refuses what nginx refuses (`%00` in the path, dot
    // segments above the root) where HAProxy forwards it: such targets
    // are left out, the rest must route alike.
    for _ in 0..rng.random_range(1..5) {
        t.push('/');
        t.push(CHARS[rng.random_range(0..26)] as char);
        for _ in 0..rng.random_range(0..10) {
            if rng.random_bool(0.1) {
                t += &format!("%{:02X}", rng.random_range(1..=255u8));
            } else {
                t.push(CHARS[rng.random_range(0..CHARS.len())] as char);
            }
        }
    }
    if rng.random_bool(0.4) {
        t += &format!("?q={}&r=/{}", rng.random::<u16>(), rng.random::<u8>());
    }
    t
}

/// Sends 300 requests to both and returns the ones answered differently.
fn compare(hash_type: &str, balance: &str, compat: &str, header: bool) -> Vec<String> {
    let origins: Vec<SocketAddr> = SERVERS.iter().map(|_| echo_origin()).collect();
    let h = haproxy(&origins, hash_type, balance, false);
    let (r, _dir) = router(&origins, compat, balance, false);
    let mut rng = rand::rngs::StdRng::seed_from_u64(27);
    let mut diffs = Vec::new();
    let mut ports = std::collections::HashSet::new();
    for i in 0..300 {
        let t = target(&mut rng);
        let (line, host) = if !header && i % 5 == 0 {
            (
                format!("http://h{}.example{t}", i % 3),
                format!("h{}.example", i % 3),
            )
        } else {
            (t.clone(), "x.test".to_string())
        };
        let extra = if header {
            format!("X-Key: k{}\r\n", &t[1..].replace('/', " ,"))
        } else {
            String::new()
        };
        let req =
            format!("GET {line} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n");
        let (a, b) = (
            answer(h.addr, req.as_bytes()),
            answer(r.proxy, req.as_bytes()),
        );
        ports.insert(a.clone());
        if a != b {
            diffs.push(format!("{req:?}: haproxy {a}, router {b}"));
        }
    }
    // The requests reached most origins (the disabled one gets none).
    assert!(ports.len() >= 5, "{balance}: only {ports:?}");
    diffs
}

/// Fails with the first differences, if any.
fn alike(d: Vec<String>) {
    assert!(
        d.is_empty(),
        "{} differences, first: {:?}",
        d.len(),
        &d[..d.len().min(3)]
    );
}

#[test]
fn routes_300_urls_as_a_live_haproxy_with_balance_uri() {
    alike(compare("consistent", "uri", "haproxy", false));
}

#[test]
fn routes_as_haproxy_with_uri_options_and_other_hash_functions() {
    alike(compare(
        "consistent djb2 avalanche",
        "uri path-only whole depth 2",
        "haproxy:djb2+avalanche",
        false,
    ));
    alike(compare(
        "consistent crc32",
        "uri len 9",
        "haproxy:crc32",
        false,
    ));
}

/// The origin port that answered each URL, fetched over HTTP/2 with prior
/// knowledge, one curl run a URL (each body is `saw PORT LINE`).
fn h2_ports(addr: SocketAddr, urls: &[String]) -> Vec<String> {
    urls.iter()
        .map(|u| {
            // A request that got no answer at all (seen once in a full
            // local run, on a loaded machine: curl's exit, no body) says
            // nothing about routing: asked again, up to three times, and
            // "-" (a failure below) if it never answers.
            let mut port = "-".to_string();
            for _ in 0..3 {
                let out = std::process::Command::new("curl")
                    .args(["-s", "--http2-prior-knowledge", "--max-time", "10"])
                    .arg(format!("http://{addr}{u}"))
                    .output()
                    .expect("curl must be installed (scripts/setup.sh)");
                let body = String::from_utf8_lossy(&out.stdout).to_string();
                if let Some(p) = body.split(' ').nth(1) {
                    port = p.to_string();
                    break;
                }
                eprintln!("{addr}{u}: no answer (curl {}), asking again", out.status);
            }
            port
        })
        .collect()
}

/// HTTP/2: HAProxy hashes `scheme://authority/path`, the router too.
#[test]
fn routes_as_haproxy_over_http2() {
    let origins: Vec<SocketAddr> = SERVERS.iter().map(|_| echo_origin()).collect();
    let h = haproxy(&origins, "consistent", "uri", true);
    let (r, _dir) = router(&origins, "haproxy", "uri", true);
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    // curl sends the listener's address as :authority, which differs
    // between the two, so their keys differ too: each side is checked
    // against the library's answer for `http://ITS-ADDRESS/path`, HAProxy
    // proving that this is what it hashes, the router that it does so.
    let urls: Vec<String> = (0..100).map(|_| target(&mut rng)).collect();
    let want = h2_ports(h.addr, &urls);
    assert_eq!(want.len(), urls.len(), "haproxy answered {want:?}");
    let got = h2_ports(r.proxy, &urls);
    let differ = want.iter().zip(&got).filter(|(a, b)| a != b).count();
    let ring = ketama::RingBuilder::new()
        .compat("haproxy".parse().unwrap())
        .build(
            origins
                .iter()
                .zip(SERVERS)
                .map(|(o, (w, id, down))| {
                    let n = ketama::Node::new(o.to_string(), w).with_down(down);
                    id.map_or(n.clone(), |id| n.with_id(id))
                })
                .collect(),
        )
        .unwrap();
    for (addr, answers) in [(h.addr, &want), (r.proxy, &got)] {
        for (u, port) in urls.iter().zip(answers) {
            let key = format!("http://{addr}{u}");
            let key = ketama::haproxy::UriKey::default().key(key.as_bytes());
            let node = ring.node(key).unwrap().server().to_string();
            assert!(
                node.ends_with(&format!(":{port}")),
                "{key:?} ({addr}): {node}, answered by {port}"
            );
        }
    }
    eprintln!(
        "{differ} of {} answers differ between the two listeners' authorities",
        urls.len()
    );
}

#[test]
fn routes_as_haproxy_with_balance_hdr() {
    alike(compare("consistent", "hdr(X-Key)", "haproxy", true));
}
