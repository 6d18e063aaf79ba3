//! Backends from DNS, against a real DNS server: Debian's dnsmasq, started
//! by the tests on a loopback port (it re-reads its records only on
//! restart; `--local-ttl` sets their TTL). Keys move only as much as the
//! library's diff of the two rings says.

mod common;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::dns::*;
use common::*;
use ketama::{Layout, Node, Ring, RingBuilder};
use ketama_router::origin::Origin;

/// A discovery section: 150 ms to 400 ms between resolutions unless
/// `extra` sets its own `min_interval_ms`/`max_interval_ms`.
fn discovery_config(dns: u16, extra: &str) -> String {
    let mut s = format!("\n[[discovery]]\nsrv = \"{SRV}\"\nresolvers = [\"127.0.0.1:{dns}\"]\ntimeout_ms = 300\n{extra}\n");
    for (key, default) in [("min_interval_ms", 150), ("max_interval_ms", 400)] {
        if !extra.contains(key) {
            s.push_str(&format!("{key} = {default}\n"));
        }
    }
    s
}

/// A router with only discovered backends (and `static_backends`).
fn router(
    dns: u16,
    static_backends: &[SocketAddr],
    server: &str,
    extra: &str,
) -> (RouterProc, tempfile::TempDir, std::path::PathBuf) {
    router_from(|proxy, admin, _| {
        config_with(static_backends, proxy, admin, server, "") + &discovery_config(dns, extra)
    })
}

fn status_backends(r: &RouterProc) -> Vec<(String, String, u64)> {
    status_json(r)["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["server"].as_str().unwrap().to_string(),
                b["address"].as_str().unwrap_or("").to_string(),
                b["weight"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn source_status(r: &RouterProc) -> serde_json::Value {
    status_json(r)["discovery"]["sources"][0].clone()
}

/// The ring the router should have: discovered identities, sorted.
fn ring_of(records: &Records) -> Ring {
    let mut names: Vec<String> = records
        .iter()
        .map(|(n, _, port)| format!("cache-{n}.node.dc1.consul:{port}"))
        .collect();
    names.sort();
    RingBuilder::new()
        .layout(Layout::Compact)
        .build(names.into_iter().map(|s| Node::new(s, 1)).collect())
        .unwrap()
}

/// Backend of each URL, through the router.
fn routes(r: &RouterProc, urls: &[String]) -> Vec<String> {
    urls.iter()
        .map(|u| {
            let resp = get(r, u);
            assert_eq!(resp.status, 200, "{u}: {}", resp.body);
            resp.headers["x-ketama-backend"].clone()
        })
        .collect()
}

fn origins(n: usize) -> (Vec<Origin>, Records) {
    let origins: Vec<Origin> = (0..n).map(|i| Origin::start(i).unwrap()).collect();
    let records = origins
        .iter()
        .enumerate()
        .map(|(i, o)| (i, "127.0.0.1", o.addr().port()))
        .collect();
    (origins, records)
}

#[test]
fn starts_from_dns_and_routes_like_the_library() {
    // Twelve records: more than a UDP answer of 512 bytes holds.
    let (_origins, records) = origins(12);
    let dns = Dns::start(&records, 1);
    let (r, _dir, _) = router(dns.port, &[], "", "");
    assert_eq!(status_backends(&r).len(), 12);
    let ring = ring_of(&records);
    let us = urls(1000);
    for (u, got) in us.iter().zip(routes(&r, &us)) {
        assert_eq!(got, ring.node(u.as_bytes()).unwrap().server(), "{u}");
    }
}

#[test]
fn adding_and_removing_moves_only_their_keys_as_the_library_predicts() {
    let (origins, mut records) = origins(8);
    let mut dns = Dns::start(&records[..6].to_vec(), 1);
    let (r, _dir, _) = router(dns.port, &[], "", "");
    let us = urls(1000);
    let before = routes(&r, &us);
    let ring6 = ring_of(&records[..6].to_vec());

    // Add one: keys move only onto it, as many as the diff predicts.
    records.truncate(7);
    dns.serve(&records);
    wait_for(Duration::from_secs(10), || status_backends(&r).len() == 7);
    let after = routes(&r, &us);
    let added = format!("cache-6.node.dc1.consul:{}", origins[6].addr().port());
    for ((u, b), a) in us.iter().zip(&before).zip(&after) {
        assert!(
            a == b || *a == added,
            "{u} moved from {b} to {a}, not to the new backend"
        );
    }
    let ring7 = ring_of(&records);
    let predicted = ketama::analysis::diff(&ring6, &ring7).unwrap().moved;
    let reported = source_moved(&r);
    assert!(
        (reported - predicted).abs() < 1e-12,
        "reported {reported}, library {predicted}"
    );
    let moved = after.iter().zip(&before).filter(|(a, b)| a != b).count() as f64 / us.len() as f64;
    eprintln!("added 1 to 6: moved {moved:.4} of 1000 URLs; library diff {predicted:.4}");
    assert!((moved - predicted).abs() < 0.05, "{moved} vs {predicted}");

    // Remove one: only its keys move.
    let removed = format!("cache-2.node.dc1.consul:{}", origins[2].addr().port());
    records.retain(|(n, _, _)| *n != 2);
    dns.serve(&records);
    wait_for(Duration::from_secs(10), || status_backends(&r).len() == 6);
    let last = routes(&r, &us);
    for ((u, a), l) in us.iter().zip(&after).zip(&last) {
        assert!(
            l == a || *a == removed,
            "{u} moved from {a} to {l} though {a} stayed"
        );
        assert_ne!(*l, removed);
    }
    let predicted = ketama::analysis::diff(&ring7, &ring_of(&records))
        .unwrap()
        .moved;
    let reported = source_moved(&r);
    assert!(
        (reported - predicted).abs() < 1e-12,
        "reported {reported}, library {predicted}"
    );
    eprintln!("removed 1 of 7: library diff {predicted:.4}, /status {reported:.4}");
}

fn source_moved(r: &RouterProc) -> f64 {
    let st = status_json(r);
    let m = metrics_text(r);
    let metric = sample(&m, "ketama_ring_moved_share");
    let status = st["discovery"]["moved_share"].as_f64().unwrap();
    assert!(
        (metric - status).abs() < 1e-9,
        "metric {metric}, status {status}"
    );
    status
}

#[test]
fn an_address_change_moves_no_key_and_dns_faults_keep_the_last_set() {
    let (mut origins, mut records) = origins(5);
    let mut dns = Dns::start(&records, 1);
    let (r, _dir, _) = router(dns.port, &[], "", "");
    let us = urls(500);
    let before = routes(&r, &us);

    // cache-3 moves to another address (same port): same backend string,
    // no key moves, and its requests reach the new address.
    // (The new origin starts first and the old one stops once the router
    // has switched, as an operator would move a machine.)
    let port = origins[3].addr().port();
    let moved = Origin::start_on(TcpListener::bind(("127.0.0.2", port)).unwrap(), 3).unwrap();
    records[3].1 = "127.0.0.2";
    dns.serve(&records);
    wait_for(Duration::from_secs(10), || {
        status_backends(&r)
            .iter()
            .any(|(_, addr, _)| addr == &format!("127.0.0.2:{port}"))
    });
    origins[3].kill();
    origins[3] = moved;
    assert_eq!(routes(&r, &us), before);
    let served = origins[3].served();
    assert!(served > 0, "the new address serves cache-3's keys");

    // dnsmasq stopped (queries time out): the last set keeps serving.
    dns.signal("-STOP");
    wait_for(Duration::from_secs(10), || {
        source_status(&r)["last_error"] == "timeout"
    });
    assert_eq!(routes(&r, &us), before);
    assert_eq!(status_backends(&r).len(), 5);
    dns.signal("-CONT");
    // The name gone (NXDOMAIN): still the last set.
    records.clear();
    dns.serve(&records);
    wait_for(Duration::from_secs(10), || {
        source_status(&r)["last_error"] == "nxdomain"
    });
    assert_eq!(routes(&r, &us), before);
    // No server at all (its port closed): still the last set.
    dns.kill();
    let killed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    wait_for(Duration::from_secs(10), || {
        let st = source_status(&r);
        st["last_error_at"].as_f64().unwrap_or(0.0) > killed && st["last_error"] != "nxdomain"
    });
    assert_eq!(routes(&r, &us), before);
    let m = metrics_text(&r);
    for result in ["ok", "timeout", "nxdomain"] {
        let n = sample(
            &m,
            &format!(
                "ketama_discovery_resolutions_total{{source=\"srv {SRV}\",result=\"{result}\"}}"
            ),
        );
        assert!(n >= 1.0, "{result}: {m}");
    }
    assert_eq!(
        sample(
            &m,
            &format!("ketama_discovery_backends{{source=\"srv {SRV}\"}}")
        ),
        5.0
    );
}

#[test]
fn a_mass_removal_is_held_until_confirmed() {
    let (_origins, records) = origins(10);
    let mut dns = Dns::start(&records, 1);
    let (r, _dir, _) = router(dns.port, &[], "", "confirm = 3");
    dns.serve(&records[..2].to_vec());
    // Held first (8 of 10 would go), then applied on the third sighting.
    wait_for(Duration::from_secs(10), || {
        !source_status(&r)["held"].is_null()
    });
    let held = source_status(&r)["held"].clone();
    assert_eq!(held["confirm"], 3);
    assert!(
        (held["removed_share"].as_f64().unwrap() - 0.8).abs() < 1e-9,
        "{held}"
    );
    assert_eq!(status_backends(&r).len(), 10, "held, not applied");
    wait_for(Duration::from_secs(10), || status_backends(&r).len() == 2);
}

/// Resolutions per second over the next `n` of them: polls `/status`
/// from one resolution to the `n`-th after it, so the window is whole
/// resolutions whatever the machine's load (at most 30 s).
fn resolution_rate(r: &RouterProc, n: u64) -> f64 {
    let count = |r: &RouterProc| source_status(r)["resolutions"]["ok"].as_u64().unwrap_or(0);
    let mut c0 = count(r);
    wait_for(Duration::from_secs(30), || count(r) > c0);
    c0 = count(r);
    let t0 = Instant::now();
    wait_for(Duration::from_secs(30), || count(r) >= c0 + n);
    (count(r) - c0) as f64 / t0.elapsed().as_secs_f64()
}

#[test]
fn the_ttl_sets_the_pace_within_bounds() {
    let (_origins, records) = origins(2);
    // TTL 1 s, bounds 150 ms to 400 ms: every 400 ms.
    let dns = Dns::start(&records, 1);
    let (r, _dir, _) = router(dns.port, &[], "", "");
    let per_s = resolution_rate(&r, 6);
    assert!(
        (1.5..=3.5).contains(&per_s),
        "{per_s} resolutions/s with max_interval 400 ms"
    );
    // TTL 30 s with bounds 150-800 ms: the upper bound; TTL 0: the lower.
    drop(r);
    let dns30 = Dns::start(&records, 30);
    let (r, _dir, _) = router(
        dns30.port,
        &[],
        "",
        "min_interval_ms = 150\nmax_interval_ms = 800",
    );
    let per_s = resolution_rate(&r, 3);
    assert!(
        (0.8..=1.8).contains(&per_s),
        "{per_s}/s with TTL 30 s capped at 800 ms"
    );
    drop(r);
    drop(dns);
    let dns0 = Dns::start(&records, 0);
    let (r, _dir, _) = router(
        dns0.port,
        &[],
        "",
        "min_interval_ms = 500\nmax_interval_ms = 5000",
    );
    let per_s = resolution_rate(&r, 4);
    assert!(
        (1.2..=2.6).contains(&per_s),
        "{per_s}/s with TTL 0 raised to 500 ms"
    );
}

#[test]
fn static_and_discovered_backends_unite_and_a_dead_source_does_not_stop_a_start() {
    let (origins, records) = origins(4);
    let dns = Dns::start(&records, 1);
    // origin 1 is both static (weight 5) and in DNS: one backend, static wins.
    let (r, _dir, _) = router(dns.port, &[origins[1].addr()], "", "labels = [\"dns\"]");
    let backends = status_backends(&r);
    assert_eq!(backends.len(), 4, "{backends:?}");
    let first = &backends[0];
    assert_eq!(first.0, origins[1].addr().to_string());
    let counts: HashMap<&str, usize> = backends.iter().fold(HashMap::new(), |mut m, b| {
        *m.entry(b.1.as_str()).or_default() += 1;
        m
    });
    assert!(counts.values().all(|&n| n == 1), "{backends:?}");
    drop(r);

    // A source that never answers: with static backends the router starts
    // and says so; without, it refuses with a clear message.
    // A port dnsmasq takes later (below the ephemeral range, so no
    // connection holds it meanwhile).
    let dead = common::dns::free_udp_port();
    let (r, dir, _) = router(dead, &[origins[0].addr()], "", "");
    assert_eq!(get(&r, "/x").status, 200);
    let log = std::fs::read_to_string(dir.path().join("router.log")).unwrap();
    assert!(log.contains("did not resolve at start"), "{log}");
    drop(r);
    let (proxy, admin) = (any_port(), any_port());
    let path = dir.path().join("alone.toml");
    std::fs::write(
        &path,
        config_with(&[], proxy, admin, "", "") + &discovery_config(dead, ""),
    )
    .unwrap();
    let out = router_command()
        .args(["--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no backends") && err.contains("wait_for_discovery"),
        "{err}"
    );

    // With wait_for_discovery, it waits for the DNS server to come up.
    std::fs::write(
        &path,
        config_with(&[], proxy, admin, "", "")
            + &discovery_config(dead, "wait_for_discovery = true"),
    )
    .unwrap();
    let log = dir.path().join("waiting.log");
    let mut child = router_command()
        .args(["--config", path.to_str().unwrap()])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // It says it waits, twice (a second round of resolution), and is
    // still running then.
    wait_for(Duration::from_secs(20), || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches("waiting for discovery")
            .count()
            >= 2
    });
    assert!(
        child.try_wait().unwrap().is_none(),
        "it waits instead of exiting"
    );
    let mut late = Dns::on(dead, 1);
    late.serve(&records);
    let r = RouterProc::wait(child, &log);
    assert_eq!(status_backends(&r).len(), 4);
    drop(late);
}

#[test]
fn an_operators_rollout_survives_a_dns_change() {
    let (_origins, records) = origins(5);
    let mut dns = Dns::start(&records[..4].to_vec(), 1);
    let migration =
        "[migration]\nring = { compat = \"nginx\", layout = \"compact\", point_multiple = 16 }\nglobal_bp = 0\n";
    // A router with a migration (the section goes before the discovery
    // source's).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    let text =
        config_with(&[], any_port(), any_port(), "", migration) + &discovery_config(dns.port, "");
    std::fs::write(&path, text).unwrap();
    let r = start_router(&path);
    assert_eq!(status_backends(&r).len(), 4);
    let put = admin_call(&r, "PUT", "/rollout", "{\"global_bp\": 5000}");
    assert_eq!(put.status, 200, "{}", put.body);
    dns.serve(&records);
    wait_for(Duration::from_secs(10), || status_backends(&r).len() == 5);
    let rollout = &status_json(&r)["rollout"];
    assert_eq!(rollout["global_bp"], 5000, "{rollout}");
    assert_eq!(rollout["origin"], "admin", "{rollout}");
    // A reload gives the config's back, as documented.
    let reload = admin_call(&r, "POST", "/reload", "");
    assert_eq!(reload.status, 200, "{}", reload.body);
    assert_eq!(status_json(&r)["rollout"]["global_bp"], 0);
}

#[test]
fn srv_targets_that_do_not_answer_do_not_sink_the_others() {
    // Four targets under a domain dnsmasq forwards to a socket that never
    // answers: each lookup of them times out. Resolved one after another,
    // they would take 4 x timeout_ms, over the source's 3 x timeout_ms.
    let blackhole = UdpSocket::bind("127.0.0.1:0").unwrap();
    let hole = blackhole.local_addr().unwrap().port();
    let (_origins, records) = origins(2);
    let mut extra = vec![format!("--server=/slow.test/127.0.0.1#{hole}")];
    for n in 0..4 {
        extra.push(format!("--srv-host={SRV},slow-{n}.slow.test,80,0,10"));
    }
    let dns = Dns::start_with(&records, 1, extra);
    let (r, _dir, _) = router(dns.port, &[], "", "");
    // The two that answer serve; the source resolved, not timed out.
    let backends = status_backends(&r);
    assert_eq!(backends.len(), 2, "{backends:?}");
    let src = source_status(&r);
    assert_eq!(src["resolved"], true, "{src}");
    assert!(src["resolutions"]["ok"].as_u64().unwrap_or(0) >= 1, "{src}");
    assert_eq!(get(&r, "/a").status, 200);
    drop(blackhole);
}

#[test]
fn a_source_brought_by_a_reload_resolves_at_once() {
    // With no source, discovery waits for the routing state's next store
    // (or a minute): the reload that brings a source must wake it.
    let (origins, records) = origins(4);
    let dns = Dns::start(&records[1..].to_vec(), 1);
    let (r, _dir, path) =
        router_from(|proxy, admin, _| config_with(&[origins[0].addr()], proxy, admin, "", ""));
    assert_eq!(status_backends(&r).len(), 1);
    let text = std::fs::read_to_string(&path).unwrap() + &discovery_config(dns.port, "");
    std::fs::write(&path, text).unwrap();
    let reload = admin_call(&r, "POST", "/reload", "");
    assert_eq!(reload.status, 200, "{}", reload.body);
    let asked = Instant::now();
    wait_for(Duration::from_secs(1), || status_backends(&r).len() == 4);
    eprintln!(
        "discovered backends in /status {:?} after the reload",
        asked.elapsed()
    );
    // Every discovered backend takes requests.
    let got = routes(&r, &urls(200));
    for (n, _, port) in &records[1..] {
        let name = format!("cache-{n}.node.dc1.consul:{port}");
        assert!(got.contains(&name), "{name} got no request: {got:?}");
    }
}
