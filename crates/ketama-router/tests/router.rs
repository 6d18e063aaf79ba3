//! The router binary with real sockets: real origin servers started by the
//! test, the real `ketama-router` process, requests over loopback.

mod common;

use std::io::Write;
use std::net::TcpStream;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use ketama::{Node, RingBuilder};
use ketama_router::origin::Origin;

#[test]
fn routes_like_the_library_for_1000_urls() {
    let weights = [1, 2, 3, 1, 2];
    let (origins, r, _dir) = setup(&weights, "");
    let refs: Vec<&Origin> = origins.iter().collect();
    let ring = library_ring(&refs, &weights);
    for u in urls(1000) {
        let resp = get(&r, &u);
        assert_eq!(resp.status, 200, "{u}: {}", resp.body);
        let want = ring.node(u.as_bytes()).unwrap().server();
        assert_eq!(resp.headers["x-ketama-backend"], want, "{u}");
        assert_eq!(resp.headers["x-ketama-ring"], "only");
        let i = origins
            .iter()
            .position(|o| o.addr().to_string() == want)
            .unwrap();
        assert_eq!(resp.body, format!("origin {i}: {u}\n"));
    }
}

/// The memcached schemes route through the same decision, with their own
/// key hash: the router answers as the library's ring of that scheme.
#[test]
fn routes_like_the_library_with_the_memcached_schemes() {
    let weights = [1, 2, 3, 1];
    let origins: Vec<Origin> = (0..weights.len())
        .map(|i| Origin::start(i).unwrap())
        .collect();
    let refs: Vec<&Origin> = origins.iter().collect();
    for compat in ["libmemcached", "twemproxy:murmur"] {
        let (proxy, admin) = (any_port(), any_port());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("router.toml");
        let text = config(&refs, &weights, proxy, admin, "").replace(
            "[ring]\nlayout = \"compact\"\n",
            &format!("[ring]\nlayout = \"compact\"\ncompat = \"{compat}\"\n"),
        );
        assert!(text.contains(compat));
        std::fs::write(&path, text).unwrap();
        let r = start_router(&path);
        let nodes: Vec<Node> = refs
            .iter()
            .zip(&weights)
            .map(|(o, w)| Node::new(o.addr().to_string(), *w))
            .collect();
        let ring = RingBuilder::new()
            .compat(compat.parse().unwrap())
            .build(nodes)
            .unwrap();
        let crc = library_ring(&refs, &weights);
        let mut differs_from_crc = 0;
        for u in urls(300) {
            let resp = get(&r, &u);
            assert_eq!(resp.status, 200, "{compat} {u}: {}", resp.body);
            let want = ring.node(u.as_bytes()).unwrap().server();
            assert_eq!(resp.headers["x-ketama-backend"], want, "{compat} {u}");
            differs_from_crc += (crc.node(u.as_bytes()).unwrap().server() != want) as usize;
        }
        assert!(differs_from_crc > 100, "{compat}: routed as CRC-32 would");
    }
}

#[test]
fn a_killed_backend_fails_over_and_no_other_key_moves() {
    let weights = [1, 1, 1, 1, 1];
    let (origins, r, _dir) = setup(&weights, "");
    let refs: Vec<&Origin> = origins.iter().collect();
    let ring = library_ring(&refs, &weights);
    let us = urls(300);
    let before: Vec<String> = us
        .iter()
        .map(|u| get(&r, u).headers["x-ketama-backend"].clone())
        .collect();
    let dead = origins[2].addr().to_string();
    assert!(before.contains(&dead), "the killed backend owned some keys");
    origins[2].kill();
    // Right away (connect failures fail over) and after the health checks
    // have marked it down (it is skipped): the same answers.
    for round in 0..2 {
        if round == 1 {
            wait_for(Duration::from_secs(10), || {
                status_json(&r)["backends"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|b| b["server"] == dead.as_str() && b["healthy"] == false)
            });
        }
        for (u, b) in us.iter().zip(&before) {
            let resp = get(&r, u);
            assert_eq!(resp.status, 200, "round {round} {u}: {}", resp.body);
            let got = &resp.headers["x-ketama-backend"];
            if *b == dead {
                let next = ring
                    .failover(u.as_bytes())
                    .map(|n| n.server())
                    .find(|s| *s != dead)
                    .unwrap();
                assert_eq!(got, next, "{u} fails over to the next in ring order");
            } else {
                assert_eq!(got, b, "{u} must not move");
            }
        }
    }
}

#[test]
fn every_backend_down_is_a_502_with_a_clear_body() {
    let (origins, r, _dir) = setup(&[1, 1], "");
    assert_eq!(get(&r, "/x").status, 200);
    for o in &origins {
        o.kill();
    }
    let resp = get(&r, "/x");
    assert_eq!(resp.status, 502);
    assert!(
        resp.body.contains("no backend could serve this request"),
        "{}",
        resp.body
    );
}

#[test]
fn reload_under_concurrent_load_fails_no_request() {
    let (origins, r, dir) = setup(&[1, 1, 1, 1], "");
    let refs: Vec<&Origin> = origins.iter().collect();
    let (proxy, admin) = (r.proxy, r.admin);
    let path = dir.path().join("router.toml");
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let clients: Vec<_> = (0..3)
        .map(|t| {
            let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    match request(proxy, "GET", &format!("/load/{t}/{i}"), &[], "") {
                        Ok(resp) if resp.status == 200 => ok.fetch_add(1, Ordering::SeqCst),
                        _ => failed.fetch_add(1, Ordering::SeqCst),
                    };
                    i += 1;
                }
            })
        })
        .collect();
    let auth = [("authorization", "Bearer sekret")];
    for k in 0..10u32 {
        // Alternate point multiples and weights, through the admin API and SIGHUP.
        let extra = format!(
            "\n[ring]\nlayout = \"{}\"\npoint_multiple = {}\n",
            ["wide", "compact"][k as usize % 2],
            40 + k * 10
        );
        let text = config(&refs, &[1, 1 + k % 3, 1, 2], proxy, admin, "")
            .replace("\n[ring]\nlayout = \"compact\"\n", &extra);
        std::fs::write(&path, text).unwrap();
        if k % 2 == 0 {
            let resp = request(admin, "POST", "/reload", &auth, "").unwrap();
            assert_eq!(resp.status, 200, "{}", resp.body);
        } else {
            Command::new("kill")
                .args(["-HUP", &r.child.id().to_string()])
                .status()
                .unwrap();
        }
        // The reload took effect: /status shows the new weight and multiple.
        let (weight, multiple) = (1 + k % 3, 40 + k * 10);
        wait_for(Duration::from_secs(10), || {
            let st = status_json(&r);
            st["backends"][1]["weight"] == weight
                && st["rings"]["only"]["point_multiple"] == multiple
                && st["reloads"]["ok"] == k + 1
        });
    }
    // And routing follows it: the last config's ring (k = 9), as the library
    // builds it.
    let last = 9u32;
    let ring = RingBuilder::new()
        .point_multiple(40 + last * 10)
        .build(
            refs.iter()
                .zip([1, 1 + last % 3, 1, 2])
                .map(|(o, w)| Node::new(o.addr().to_string(), w))
                .collect(),
        )
        .unwrap();
    for u in urls(200) {
        let resp = get(&r, &u);
        assert_eq!(
            resp.headers["x-ketama-backend"],
            ring.node(u.as_bytes()).unwrap().server(),
            "{u}"
        );
    }
    // A broken config is rejected and the running one keeps serving.
    std::fs::write(&path, "[server]\nlisten = 5\n").unwrap();
    let resp = request(admin, "POST", "/reload", &auth, "").unwrap();
    assert_eq!(resp.status, 400);
    assert!(resp.body.contains("router.toml"), "{}", resp.body);
    // Clients keep being served after the rejected reload.
    let served = ok.load(Ordering::SeqCst);
    wait_for(Duration::from_secs(10), || {
        ok.load(Ordering::SeqCst) >= served + 30
    });
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    assert_eq!(
        failed.load(Ordering::SeqCst),
        0,
        "{} ok",
        ok.load(Ordering::SeqCst)
    );
    assert!(ok.load(Ordering::SeqCst) > 100);
    let status = request(admin, "GET", "/status", &auth, "").unwrap();
    assert!(status.body.contains("\"rejected\":1"), "{}", status.body);
}

#[test]
fn admin_needs_the_token_and_sets_the_rollout() {
    let migration = "\n[migration]\nring = { compat = \"nginx\", layout = \"compact\", point_multiple = 16 }\nglobal_bp = 0\nscope = \"ams\"\n";
    let (_origins, r, _dir) = setup(&[1, 1, 1], migration);
    let admin = r.admin;
    for (path, method) in [
        ("/status", "GET"),
        ("/metrics", "GET"),
        ("/reload", "POST"),
        ("/rollout", "PUT"),
    ] {
        assert_eq!(
            request(admin, method, path, &[], "").unwrap().status,
            401,
            "{method} {path}"
        );
        assert_eq!(
            request(
                admin,
                method,
                path,
                &[("authorization", "Bearer wrong")],
                ""
            )
            .unwrap()
            .status,
            401
        );
    }
    let auth = [("authorization", "Bearer sekret")];
    assert_eq!(get(&r, "/a").headers["x-ketama-ring"], "old");
    let resp = request(
        admin,
        "PUT",
        "/rollout",
        &auth,
        r#"{"global_bp": 0, "scopes": {"ams": 10000}}"#,
    )
    .unwrap();
    assert_eq!(resp.status, 200, "{}", resp.body);
    for u in urls(50) {
        assert_eq!(get(&r, &u).headers["x-ketama-ring"], "new");
    }
    let bad = request(admin, "PUT", "/rollout", &auth, r#"{"global_bp": 20000}"#).unwrap();
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("10000"), "{}", bad.body);
    let metrics = request(admin, "GET", "/metrics", &auth, "").unwrap();
    assert!(
        metrics.body.contains("ketama_rollout_bp 10000"),
        "{}",
        metrics.body
    );
    assert!(
        metrics
            .body
            .contains("ketama_lookups_total{ring=\"new\"} 50"),
        "{}",
        metrics.body
    );
    assert!(
        metrics.body.contains("ketama_requests_total{backend="),
        "{}",
        metrics.body
    );
    assert!(metrics.body.contains("process_resident_memory_bytes"));
    assert_eq!(
        request(admin, "GET", "/nope", &auth, "").unwrap().status,
        404
    );
}

#[test]
fn malformed_requests_and_oversized_headers_get_a_4xx_and_the_router_keeps_serving() {
    let (_origins, r, _dir) = setup(&[1, 1], "");
    let proxy = r.proxy;
    let raw = |bytes: &[u8]| -> Option<u16> {
        let mut c = TcpStream::connect(proxy).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = c.write_all(bytes);
        parse_response(&mut c).ok().map(|r| r.status)
    };
    for bad in [
        b"GARBAGE\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nHost x\r\n\r\n".to_vec(),
        // Over the router's limit (32 KiB by default): 431.
        format!(
            "GET / HTTP/1.1\r\nHost: x\r\nx-big: {}\r\n\r\n",
            "a".repeat(200_000)
        )
        .into_bytes(),
        // Over Pingora's own limit (1 MiB): 400.
        format!(
            "GET / HTTP/1.1\r\nHost: x\r\nx-big: {}\r\n\r\n",
            "a".repeat(2_000_000)
        )
        .into_bytes(),
        // Many headers.
        format!(
            "GET / HTTP/1.1\r\nHost: x\r\n{}\r\n",
            "x-h: 1\r\n".repeat(5000)
        )
        .into_bytes(),
    ] {
        let status = raw(&bad);
        assert!(
            matches!(status, Some(400..=499)),
            "{:?} -> {status:?}",
            String::from_utf8_lossy(&bad[..bad.len().min(40)])
        );
        assert_eq!(get(&r, "/still/serving").status, 200);
    }
    // A version nginx does not speak: 505, as nginx answers.
    assert_eq!(raw(b"GET / HTTP/9.9\r\nHost: x\r\n\r\n"), Some(505));
    assert_eq!(get(&r, "/still/serving").status, 200);
}
