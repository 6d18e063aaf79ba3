//! The cache result of every response, by ring, against real caches:
//! nginx instances with `proxy_cache` in front of one nginx origin, some
//! adding an RFC 9211 `Cache-Status` member (after the origin's own
//! member), some `X-Cache: $upstream_cache_status`, behind routers
//! migrating between two rings. Response by response, the router's access
//! log says what the serving cache's own log says; the counters by ring,
//! moved and result add up to the same, with "moved" computed here from
//! the library's old ring.

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::caches::{cache, origin};
use common::tls::{curl, Nginx};
use common::*;
use ketama::{Node, Ring};

/// A router over `backends`, migrating half the keys to a ring of 40
/// points per weight, its access log in `dir/access.log`.
fn router(backends: &[SocketAddr], cache_status: &str) -> (RouterProc, tempfile::TempDir) {
    let (r, dir, _) = router_from(|proxy, admin, dir| {
        config_with(
            backends,
            proxy,
            admin,
            "retries = 0\nh2c = true",
            &format!(
                "[migration]\nring = {{ compat = \"nginx\", layout = \"compact\", point_multiple = 40 }}\nglobal_bp = 5000\n\n[access_log]\npath = \"{}\"\nflush_ms = 10\n\n{cache_status}\n",
                dir.join("access.log").display()
            ),
        )
    });
    (r, dir)
}

/// The result a cache's `$upstream_cache_status` stands for, read as the
/// router's default lists (X-Cache) or as the RFC member the cache sent.
fn expected(status: &str, rfc: bool) -> &'static str {
    match (status, rfc) {
        ("HIT" | "STALE" | "UPDATING", _) => "hit",
        ("MISS", _) => "miss",
        ("EXPIRED" | "REVALIDATED", true) => "stale",
        ("EXPIRED" | "REVALIDATED", false) => "miss",
        ("BYPASS", _) => "bypass",
        _ => "other",
    }
}

/// Runs the requests through `r` and checks every response's result, then
/// the counters.
fn check(r: &RouterProc, rdir: &Path, caches: &[(SocketAddr, &Path, usize)], rfc: bool) {
    let mut sent = 0;
    for i in 0..120 {
        let path = format!("/obj/{i}.jpg");
        for _ in 0..2 {
            assert_eq!(get(r, &path).status, 200);
            sent += 1;
        }
        if i % 10 == 0 {
            let resp = request(r.proxy, "GET", &path, &[("x-bypass", "1")], "").unwrap();
            assert_eq!(resp.status, 200);
            sent += 1;
        }
        if i % 7 == 0 {
            // HTTP/2 (Pingora's path): counted the same way.
            let url = format!("http://{}{path}", r.proxy);
            let out = curl(&[
                "--http2-prior-knowledge",
                "-o",
                "/dev/null",
                "-w",
                "%{http_version} %{http_code}",
                &url,
            ]);
            assert_eq!(out, "2 200");
            sent += 1;
        }
    }
    let log = rdir.join("access.log");
    let lines = || json_lines(&log);
    wait_for(Duration::from_secs(10), || lines().len() >= sent);
    // Each cache's own log, per URI, in order.
    let mut said: HashMap<(String, String), Vec<String>> = HashMap::new();
    for (addr, dir, i) in caches {
        let text = std::fs::read_to_string(dir.join(format!("cache{i}.log"))).unwrap();
        for l in text.lines() {
            let (uri, status) = l.split_once(' ').unwrap();
            said.entry((addr.to_string(), uri.to_string()))
                .or_default()
                .push(status.to_string());
        }
    }
    let old = Ring::new(
        caches
            .iter()
            .map(|(a, _, _)| Node::new(a.to_string(), 1))
            .collect(),
    )
    .unwrap();
    let mut counts: HashMap<(String, bool, String), u64> = HashMap::new();
    let mut per_backend: HashMap<(String, String), u64> = HashMap::new();
    let mut h2 = 0;
    for l in lines() {
        h2 += (l["protocol"] == "HTTP/2.0") as u32;
        let (uri, backend) = (l["uri"].as_str().unwrap(), l["backend"].as_str().unwrap());
        let ring = l["ring"].as_str().unwrap().to_string();
        let statuses = said
            .get_mut(&(backend.to_string(), uri.to_string()))
            .unwrap();
        let status = statuses.remove(0);
        let want = expected(&status, rfc);
        assert_eq!(
            l["cache"], want,
            "{uri} at {backend}: the cache logged {status}"
        );
        let moved = ring == "new" && old.node(uri.as_bytes()).unwrap().server() != backend;
        *counts.entry((ring, moved, want.to_string())).or_default() += 1;
        *per_backend
            .entry((backend.to_string(), want.to_string()))
            .or_default() += 1;
    }
    assert!(h2 >= 17, "{h2} HTTP/2 requests logged");
    let results: Vec<&str> = counts.keys().map(|(_, _, r)| r.as_str()).collect();
    for r in ["hit", "miss", "bypass"] {
        assert!(results.contains(&r), "no {r} among {counts:?}");
    }
    assert!(
        counts.keys().any(|(_, moved, _)| *moved),
        "no moved key: {counts:?}"
    );
    let m = metrics_text(r);
    for ring in ["old", "new"] {
        for moved in [false, true] {
            for result in ["hit", "miss", "stale", "bypass", "other", "none"] {
                let want = counts
                    .get(&(ring.to_string(), moved, result.to_string()))
                    .copied()
                    .unwrap_or(0);
                let name = format!(
                    "ketama_cache_responses_total{{ring=\"{ring}\",moved=\"{moved}\",result=\"{result}\"}}"
                );
                assert_eq!(sample(&m, &name), want as f64, "{name}");
            }
        }
    }
    for ((backend, result), n) in &per_backend {
        let name = format!(
            "ketama_backend_cache_responses_total{{backend=\"{backend}\",result=\"{result}\"}}"
        );
        assert_eq!(sample(&m, &name), *n as f64, "{name}");
    }
    let status = status_json(r);
    let since = &status["cache_status"]["rings"]["new"]["since_start"];
    let hits: u64 = counts
        .iter()
        .filter(|((ring, _, res), _)| ring == "new" && res == "hit")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(since["all"]["hit"], hits, "{status}");
    assert_eq!(
        sample(
            &m,
            "ketama_ring_responses_total{ring=\"new\",class=\"2xx\"}"
        ) + sample(
            &m,
            "ketama_ring_responses_total{ring=\"old\",class=\"2xx\"}"
        ),
        sent as f64
    );
}

#[test]
fn each_response_counts_as_its_cache_said() {
    let dir = tempfile::tempdir().unwrap();
    let o = origin(dir.path());
    let rfc: Vec<Nginx> = (0..2).map(|i| cache(dir.path(), i, o.addr, true)).collect();
    let xc: Vec<Nginx> = (2..4)
        .map(|i| cache(dir.path(), i, o.addr, false))
        .collect();
    let (r1, d1) = router(&[rfc[0].addr, rfc[1].addr], "");
    check(
        &r1,
        d1.path(),
        &[(rfc[0].addr, dir.path(), 0), (rfc[1].addr, dir.path(), 1)],
        true,
    );
    let (r2, d2) = router(
        &[xc[0].addr, xc[1].addr],
        "[cache_status]\nheader = \"x-cache\"",
    );
    check(
        &r2,
        d2.path(),
        &[(xc[0].addr, dir.path(), 2), (xc[1].addr, dir.path(), 3)],
        false,
    );
}
