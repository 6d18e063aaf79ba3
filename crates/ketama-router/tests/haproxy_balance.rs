//! `[key] balance` against a live HAProxy 2.6 for the forms beyond `uri`
//! and `hdr()`: `url_param`, `hdr(Host) use_domain_only`, `source`,
//! `rdp-cookie` (HAProxy in `mode tcp` reading an RDP connection's
//! cookie, the router an HTTP request's `Cookie` line) and `hash` with
//! `req.cook()`, `req.hdr()` and `url_param()`. Each request must reach
//! the origin HAProxy sends it to. Where HAProxy falls back to round
//! robin (the value is not there) both spread the request and nothing is
//! compared: HAProxy itself says when it found a `hash` fetch's value (a
//! response field set from the same fetch), and for `url_param` the test
//! reads the query's `&`-separated chunks.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::echo::echo_origin;
use common::haproxy::{answer, answer_on, haproxy, haproxy_with, router, SERVERS};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn origins() -> Vec<SocketAddr> {
    SERVERS.iter().map(|_| echo_origin()).collect()
}

fn pick<'a>(rng: &mut StdRng, from: &[&'a str]) -> &'a str {
    from[rng.random_range(0..from.len())]
}

fn get(target: &str, fields: &str) -> String {
    format!("GET {target} HTTP/1.1\r\nHost: x.test\r\n{fields}Connection: close\r\n\r\n")
}

/// Fails with the first differences, if any; and checks enough were
/// compared and that they reached several origins.
fn judge(
    what: &str,
    diffs: &[String],
    compared: usize,
    ports: &std::collections::BTreeSet<String>,
) {
    judge_spread(what, diffs, compared, ports, 4)
}

fn judge_spread(
    what: &str,
    diffs: &[String],
    compared: usize,
    ports: &std::collections::BTreeSet<String>,
    origins: usize,
) {
    eprintln!(
        "{what}: {compared} compared, {} differences, origins {ports:?}",
        diffs.len()
    );
    assert!(
        diffs.is_empty(),
        "{what}: {} differences, first: {:?}",
        diffs.len(),
        &diffs[..diffs.len().min(3)]
    );
    assert!(compared >= 100, "{what}: only {compared} compared");
    assert!(ports.len() >= origins, "{what}: only {ports:?}");
}

#[test]
fn url_param_routes_as_haproxy() {
    let o = origins();
    let h = haproxy(&o, "consistent", "url_param id", false);
    let (r, _d) = router(&o, "haproxy", "url_param id", false);
    let mut rng = StdRng::seed_from_u64(62);
    let (mut diffs, mut compared, mut ports) = (Vec::new(), 0, std::collections::BTreeSet::new());
    for _ in 0..300 {
        let mut chunks = Vec::new();
        for _ in 0..rng.random_range(0..4) {
            let v: u16 = rng.random();
            chunks.push(match rng.random_range(0..9) {
                0..=2 => format!("id={v}"),
                3 => format!("ID={v}"),
                4 => "id=".into(),
                5 => format!("xid={v}"),
                6 => format!("a=1;id={v}"),
                7 => "id".into(),
                _ => format!("q={v}"),
            });
        }
        let target = format!("/p/{}?{}", rng.random::<u8>(), chunks.join("&"));
        // The test's own reading: a chunk that starts with `id=`.
        let present = chunks.iter().any(|c| c.starts_with("id="));
        let req = get(&target, "");
        let (a, b) = (
            answer(h.addr, req.as_bytes()),
            answer(r.proxy, req.as_bytes()),
        );
        if !present {
            assert!(b.parse::<u16>().is_ok(), "{target}: router {b}");
            continue;
        }
        compared += 1;
        ports.insert(a.clone());
        if a != b {
            diffs.push(format!("{target}: haproxy {a}, router {b}"));
        }
    }
    judge("url_param id", &diffs, compared, &ports);
}

#[test]
fn hdr_use_domain_only_routes_as_haproxy() {
    let o = origins();
    let balance = "hdr(Host) use_domain_only";
    let h = haproxy(&o, "consistent", balance, false);
    let (r, _d) = router(&o, "haproxy", balance, false);
    let mut rng = StdRng::seed_from_u64(63);
    let (mut diffs, mut ports) = (Vec::new(), std::collections::BTreeSet::new());
    for i in 0..200 {
        let mut labels: Vec<String> = (0..rng.random_range(1..5))
            .map(|_| format!("l{}", rng.random::<u8>()))
            .collect();
        if i % 7 == 0 {
            labels.push(String::new());
        }
        // (A Host nginx refuses, such as one with a comma and a space, is
        // 400 from the router where HAProxy forwards it.)
        let host = labels.join(".") + pick(&mut rng, &["", "", ":8080"]);
        let req = format!("GET /x HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let (a, b) = (
            answer(h.addr, req.as_bytes()),
            answer(r.proxy, req.as_bytes()),
        );
        ports.insert(a.clone());
        if a != b {
            diffs.push(format!("{host}: haproxy {a}, router {b}"));
        }
    }
    judge(balance, &diffs, 200, &ports);
}

/// A connection to `to` from `from` (any 127/8 address).
fn connect_from(from: [u8; 4], to: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let local = SocketAddr::from((from, 0));
    s.bind(&local.into()).unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}

#[test]
fn source_routes_as_haproxy_with_and_without_avalanche() {
    // Without avalanche, loopback sources (127.x.y.z) hash close together
    // and reach few origins, in HAProxy as in the router.
    for (hash_type, compat, spread) in [
        ("consistent", "haproxy", 4),
        ("consistent sdbm", "haproxy:sdbm", 2),
    ] {
        let o = origins();
        let h = haproxy(&o, hash_type, "source", false);
        let (r, _d) = router(&o, compat, "source", false);
        let mut rng = StdRng::seed_from_u64(64);
        let (mut diffs, mut ports) = (Vec::new(), std::collections::BTreeSet::new());
        for _ in 0..150 {
            let from = [127, rng.random(), rng.random(), rng.random_range(1..255)];
            let req = get("/same/for/all", "");
            let a = answer_on(connect_from(from, h.addr), req.as_bytes()).0;
            let b = answer_on(connect_from(from, r.proxy), req.as_bytes()).0;
            ports.insert(a.clone());
            if a != b {
                diffs.push(format!("{from:?}: haproxy {a}, router {b}"));
            }
        }
        judge_spread(&format!("source, {hash_type}"), &diffs, 150, &ports, spread);
    }
}

#[test]
fn rdp_cookie_routes_as_haproxy_routes_an_rdp_connection() {
    let o = origins();
    let h = haproxy_with(
        &o,
        "tcp",
        "consistent",
        "rdp-cookie(mstshash)",
        "",
        "  tcp-request inspect-delay 5s\n  tcp-request content accept if RDP_COOKIE\n",
    );
    let (r, _d) = router(&o, "haproxy", "rdp-cookie(mstshash)", false);
    let mut rng = StdRng::seed_from_u64(65);
    let (mut diffs, mut ports) = (Vec::new(), std::collections::BTreeSet::new());
    for _ in 0..150 {
        let name = pick(&mut rng, &["mstshash", "MSTSHASH", "MstsHash"]);
        let value = format!(
            "{}{}",
            pick(&mut rng, &["user", "DOMAIN\\u", "a b", "x;y=z"]),
            rng.random::<u16>()
        );
        // An RDP connection request: TPKT and X.224 headers (11 bytes),
        // then the cookie line; the echo origin reads it as a request line.
        let mut rdp = b"\x03\x00\x00\x2b\x26\xe0\x00\x00\x00\x00\x00".to_vec();
        rdp.extend_from_slice(format!("Cookie: {name}={value}\r\n\r\n").as_bytes());
        let mut c = TcpStream::connect(h.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(&rdp).unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        let a = text
            .split_once("\r\n\r\nsaw ")
            .map_or("?".to_string(), |(_, b)| {
                b.split(' ').next().unwrap().to_string()
            });
        let b = answer(
            r.proxy,
            get("/", &format!("Cookie: {name}={value}\r\n")).as_bytes(),
        );
        ports.insert(a.clone());
        if a != b {
            diffs.push(format!("{name}={value}: haproxy {a}, router {b}"));
        }
    }
    judge("rdp-cookie(mstshash)", &diffs, 150, &ports);
}

/// `balance hash FETCH` for `req.cook`, `req.hdr` and `url_param`, with
/// random `Cookie` lines, `X-K` fields and queries.
#[test]
fn hash_fetches_route_as_haproxy() {
    for (fetch, seed) in [
        ("req.cook(sid)", 66),
        ("req.hdr(X-K)", 67),
        ("url_param(u)", 68),
    ] {
        let o = origins();
        let balance = format!("hash {fetch}");
        // HAProxy says whether it found the value: the same fetch into a
        // variable, and a response field when the variable is set.
        let frontend = format!(
            "  http-request set-var(txn.k) {fetch}\n  http-response set-header X-Found 1 if {{ var(txn.k) -m found }}\n"
        );
        let h = haproxy_with(&o, "http", "consistent", &balance, "", &frontend);
        let (r, _d) = router(&o, "haproxy", &balance, false);
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut diffs, mut compared, mut ports) =
            (Vec::new(), 0, std::collections::BTreeSet::new());
        for _ in 0..300 {
            let mut fields = String::new();
            for _ in 0..rng.random_range(0..4) {
                let c = pick(
                    &mut rng,
                    &[
                        "sid=1",
                        "sid = 2 ",
                        "SID=3",
                        "a=1; sid=4",
                        "sid=\"q;r\"",
                        "$sid=5",
                        "sid",
                        "x=1, sid=6",
                        "sid=",
                        "b=2; sid=",
                        "sid=7; sid=8",
                        "xsid=9",
                    ],
                );
                fields += &format!("Cookie: {c}{}\r\n", rng.random::<u8>() % 3);
            }
            for _ in 0..rng.random_range(0..4) {
                let v = pick(
                    &mut rng,
                    &["a", "a, b", "\"x,y\"", "", "c ,d ", "e,", " f "],
                );
                fields += &format!("{}: {v}\r\n", pick(&mut rng, &["X-K", "x-k"]));
            }
            let q = pick(
                &mut rng,
                &[
                    "u=1",
                    "u=",
                    "a=1;u=2",
                    "b=?u=3",
                    "U=4",
                    "u",
                    "x=1&u=5&u=6",
                    "",
                    "uu=7",
                ],
            );
            let target = format!("/h/{}?{q}", rng.random::<u8>());
            let req = get(&target, &fields);
            let (a, head) = answer_on(TcpStream::connect(h.addr).unwrap(), req.as_bytes());
            let b = answer(r.proxy, req.as_bytes());
            if !head.to_ascii_lowercase().contains("\r\nx-found: 1") {
                assert!(b.parse::<u16>().is_ok(), "{req:?}: router {b}");
                continue;
            }
            compared += 1;
            ports.insert(a.clone());
            if a != b {
                diffs.push(format!("{req:?}: haproxy {a}, router {b}"));
            }
        }
        judge(&balance, &diffs, compared, &ports);
    }
}
