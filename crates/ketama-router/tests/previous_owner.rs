//! `[migration] previous_owner_header` against real caches: two nginx
//! `proxy_cache` instances that fill a miss from the cache the header
//! names (else from the origin), behind a router switched from the old
//! ring to the new one. A moved key's first request is answered from its
//! previous owner's cache (`peer`, counted as no origin fetch) and the
//! origin sees nothing new; a client's own header never reaches a cache.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::caches::origin;
use common::tls::{curl, Nginx};
use common::*;
use ketama::{Layout, Node, RingBuilder};

const HINT: &str = "x-ketama-previous-owner";

/// A cache that fills from the cache `x-ketama-previous-owner` names, or
/// from the origin; it never passes the header on (the peer fills from
/// the origin).
fn filling_cache(dir: &Path, i: usize, origin: SocketAddr) -> Nginx {
    let store = dir.join(format!("cache{i}"));
    Nginx::start(move |addr| {
        format!(
            "proxy_cache_path {} keys_zone=c{i}:1m;
  map $upstream_cache_status $cs{i} {{ HIT \"cache{i}; hit\"; MISS \"cache{i}; fwd=miss\"; default \"cache{i}; fwd=miss\"; }}
  map $http_x_ketama_previous_owner $fill{i} {{ \"\" {origin}; default $http_x_ketama_previous_owner; }}
  server {{
    listen {addr};
    location = /health {{ return 200 \"ok\\n\"; }}
    location / {{
      proxy_pass http://$fill{i};
      proxy_set_header X-Ketama-Previous-Owner \"\";
      proxy_cache c{i};
      proxy_cache_valid 200 10m;
      add_header Cache-Status $cs{i} always;
    }}
  }}",
            store.display()
        )
    })
}

fn origin_requests(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("origin.log"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

#[test]
fn moved_keys_fill_from_their_previous_owner() {
    let dir = tempfile::tempdir().unwrap();
    let o = origin(dir.path());
    let caches: Vec<Nginx> = (0..2)
        .map(|i| filling_cache(dir.path(), i, o.addr))
        .collect();
    let addrs: Vec<SocketAddr> = caches.iter().map(|c| c.addr).collect();
    let (r, rdir, _) = router_from(|proxy, admin, d| {
        config_with(
            &addrs,
            proxy,
            admin,
            "retries = 0\nh2c = true",
            &format!(
                "[migration]\nring = {{ compat = \"nginx\", layout = \"compact\", point_multiple = 40 }}\nglobal_bp = 0\nprevious_owner_header = \"{HINT}\"\n\n[access_log]\npath = \"{}\"\nflush_ms = 10\n",
                d.join("access.log").display()
            ),
        )
    });
    let ring = |points| {
        RingBuilder::new()
            .layout(Layout::Compact)
            .point_multiple(points)
            .build(addrs.iter().map(|a| Node::new(a.to_string(), 1)).collect())
            .unwrap()
    };
    let (old, new) = (ring(160), ring(40));
    let keys: Vec<String> = (0..200).map(|i| format!("/obj/{i}")).collect();
    let owner = |r: &ketama::Ring, k: &str| r.node(k.as_bytes()).unwrap().server().to_string();
    let moved: Vec<&String> = keys
        .iter()
        .filter(|k| owner(&old, k) != owner(&new, k))
        .collect();
    assert!(moved.len() > 20, "{} keys moved", moved.len());

    // Warm every key at its old owner (a client's own header is dropped:
    // a cache that got "evil" would try to fill from it and fail).
    for k in &keys {
        let resp = request(r.proxy, "GET", k, &[(HINT, "evil:1")], "").unwrap();
        assert_eq!(resp.status, 200, "{k}: {}", resp.body);
    }
    let fetched = origin_requests(dir.path());
    assert_eq!(fetched, keys.len());

    // Every key to the new ring.
    let resp = admin_call(&r, "PUT", "/rollout", "{\"global_bp\": 10000}");
    assert_eq!(resp.status, 200, "{}", resp.body);
    for (i, k) in keys.iter().enumerate() {
        if i % 10 == 0 {
            // HTTP/2 (Pingora's path) the same way.
            let url = format!("http://{}{k}", r.proxy);
            let out = curl(&[
                "--http2-prior-knowledge",
                "-H",
                &format!("{HINT}: evil:1"),
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                &url,
            ]);
            assert_eq!(out, "200", "{k}");
        } else {
            let resp = request(r.proxy, "GET", k, &[(HINT, "evil:1")], "").unwrap();
            assert_eq!(resp.status, 200, "{k}: {}", resp.body);
        }
    }
    // The moved keys cost the origin nothing: their new owners filled
    // from their previous owners.
    assert_eq!(
        origin_requests(dir.path()),
        fetched,
        "the origin was asked again"
    );
    let log = rdir.path().join("access.log");
    let lines = || json_lines(&log);
    wait_for(Duration::from_secs(10), || lines().len() >= 2 * keys.len());
    let after: Vec<serde_json::Value> = lines().split_off(keys.len());
    for l in &after {
        let uri = l["uri"].as_str().unwrap().to_string();
        let want = if moved.contains(&&uri) { "peer" } else { "hit" };
        assert_eq!(l["cache"], want, "{uri}: {l}");
        assert_eq!(l["ring"], "new", "{l}");
    }
    let m = metrics_text(&r);
    assert_eq!(
        sample(&m, "ketama_previous_owner_hints_total"),
        moved.len() as f64,
        "one hint per moved key's request"
    );
    assert_eq!(
        sample(
            &m,
            "ketama_cache_responses_total{ring=\"new\",moved=\"true\",result=\"peer\"}"
        ),
        moved.len() as f64
    );
}
