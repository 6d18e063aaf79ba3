//! A ring switch against real caches, with and without filling from the
//! previous owner: three nginx `proxy_cache` instances configured as
//! docs/migrations.md says (the configuration is read from the docs), in
//! front of one counting origin, behind the router; a Zipf stream over one
//! client connection, a warm-up on the old ring, then every key to the new
//! one. The origin's requests beyond the pre-switch rate must shrink to at
//! most 20% with the header and the fill configuration, the simulator
//! (`ketama migrate-plan --simulate`, the same trace and cache sizes) must
//! predict each measured count within 20%, and the router must count the
//! filled responses as `peer`.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::plan::ketama;
use common::tls::Nginx;
use common::*;

const OBJECTS: u32 = 1000;
const WARMUP: usize = 10_000;
const AFTER: usize = 2_000;
const HINT: &str = "x-ketama-previous-owner";

/// The nginx block under "Filling from the previous owner" in the docs.
fn documented_config() -> String {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/migrations.md"),
    )
    .unwrap();
    let section = doc
        .split_once("### Filling from the previous owner")
        .expect("docs/migrations.md: no \"Filling from the previous owner\" section")
        .1;
    let block = section
        .split_once("```nginx\n")
        .expect("no nginx block in the section")
        .1;
    block.split_once("```").unwrap().0.to_string()
}

/// The router's lines of the section's TOML block under `[server]`.
fn documented_server_lines() -> String {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/migrations.md"),
    )
    .unwrap();
    let section = doc
        .split_once("### Filling from the previous owner")
        .unwrap()
        .1;
    let block = section.split_once("```toml\n").unwrap().1;
    let block = block.split_once("```").unwrap().0;
    let server = block
        .split_once("[server]\n")
        .expect("no [server] in the section's TOML")
        .1;
    server.split("\n[").next().unwrap().to_string()
}

/// The documented configuration for cache `i` of `peers`, on loopback.
fn cache(dir: &Path, i: usize, peers: &[SocketAddr], origin: SocketAddr) -> Nginx {
    let mut conf = documented_config();
    for (j, p) in peers.iter().enumerate() {
        conf = conf.replace(&format!("10.0.0.{}:80", j + 1), &p.to_string());
    }
    let store = dir.join(format!("cache{i}"));
    let stub = free_addr();
    let me = peers[i];
    let conf = conf
        .replace("10.0.0.0/24", "127.0.0.1/32")
        .replace("origin.example:80", &origin.to_string())
        .replace("/var/cache/nginx/ketama", store.to_str().unwrap())
        .replace("max_size=100g inactive=7d", "max_size=1g inactive=1h")
        .replace("keys_zone=ketama:64m", "keys_zone=ketama:8m")
        .replace("127.0.0.1:8599", &stub.to_string());
    assert!(!conf.contains("10.0.0."), "an example address left: {conf}");
    Nginx::start(move |addr| conf.replace("listen 80;", &format!("listen {addr}; listen {me};")))
}

/// The origin, logging each request's sequence number (`X-Seq`); its
/// answers live ten minutes.
fn origin(dir: &Path) -> Nginx {
    origin_for(dir, 600)
}

fn origin_for(dir: &Path, max_age: u32) -> Nginx {
    let log = dir.join("origin.log");
    Nginx::start(move |addr| {
        format!(
            "log_format o '$http_x_seq $request_uri';
  server {{
    listen {addr};
    access_log {} o;
    location / {{
      add_header Cache-Control \"max-age={max_age}\";
      return 200 \"origin $request_uri\\n\";
    }}
  }}",
            log.display()
        )
    })
}

/// The origin's requests whose sequence number is in `range`.
fn origin_requests(dir: &Path, range: std::ops::Range<usize>) -> usize {
    std::fs::read_to_string(dir.join("origin.log"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').next()?.parse::<usize>().ok())
        .filter(|n| range.contains(n))
        .count()
}

/// One keep-alive connection: `GET path` with `X-Seq`, the status.
fn get(c: &mut BufReader<TcpStream>, path: &str, seq: usize) -> u16 {
    // One write: a request in pieces would wait on Nagle and delayed ACKs.
    let req = format!("GET {path} HTTP/1.1\r\nHost: cdn.test\r\nX-Seq: {seq}\r\n\r\n");
    c.get_mut().write_all(req.as_bytes()).unwrap();
    let mut line = String::new();
    c.read_line(&mut line).unwrap();
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut length = 0usize;
    loop {
        line.clear();
        c.read_line(&mut line).unwrap();
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap();
            }
        }
    }
    let mut body = vec![0; length];
    c.read_exact(&mut body).unwrap();
    status
}

struct Run {
    /// Origin requests in the warm-up's last `AFTER` requests and in the
    /// `AFTER` after the switch.
    before: usize,
    after: usize,
    peer: f64,
}

/// The trace through fresh caches at `peers` (the same addresses in every
/// run: the rings hash the servers' names).
fn run(trace: &[String], fill: bool, peers: &[SocketAddr]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let o = origin(dir.path());
    let _caches: Vec<Nginx> = (0..3)
        .map(|i| cache(dir.path(), i, peers, o.addr))
        .collect();
    let hint = if fill {
        format!("previous_owner_header = \"{HINT}\"\n")
    } else {
        String::new()
    };
    let (r, _rdir, _) = router_from(|proxy, admin, _| {
        config_with(
            peers,
            proxy,
            admin,
            &format!("retries = 0\n{}", documented_server_lines()),
            &format!("[migration]\nring = {{ compat = \"nginx\", layout = \"compact\", point_multiple = 40 }}\nglobal_bp = 0\n{hint}"),
        )
    });
    let mut c = BufReader::new(TcpStream::connect(r.proxy).unwrap());
    c.get_mut()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    for (n, k) in trace.iter().enumerate() {
        if n == WARMUP {
            let resp = admin_call(&r, "PUT", "/rollout", "{\"global_bp\": 10000}");
            assert_eq!(resp.status, 200, "{}", resp.body);
        }
        assert_eq!(get(&mut c, k, n), 200, "request {n}: {k}");
    }
    let m = metrics_text(&r);
    Run {
        before: origin_requests(dir.path(), WARMUP - AFTER..WARMUP),
        after: origin_requests(dir.path(), WARMUP..WARMUP + AFTER),
        peer: sample(
            &m,
            "ketama_cache_responses_total{ring=\"new\",moved=\"true\",result=\"peer\"}",
        ),
    }
}

/// The simulator's (steady window, post-switch origin fetches, peer fills).
fn predicted(trace: &Path, servers: &Path, fill: bool) -> (f64, f64, f64) {
    let mut cmd = Command::new(ketama());
    cmd.args(["migrate-plan", "--from"])
        .arg(servers)
        .arg("--to")
        .arg(servers)
        .args([
            "--to-point-multiple",
            "40",
            "--steps",
            "10000",
            "--simulate",
            "--trace",
        ])
        .arg(trace)
        .args([
            "--warmup",
            &WARMUP.to_string(),
            "--window",
            &AFTER.to_string(),
        ])
        .args(["--cache-objects", "1000000", "--json"]);
    if fill {
        cmd.arg("--fill-from-previous");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["steady_window"].as_f64().unwrap(),
        v["windows"][0]["origin_fetches"].as_f64().unwrap(),
        v["steps"][0]["peer_fills"].as_f64().unwrap(),
    )
}

fn within_20_percent(predicted: f64, measured: usize, what: &str) {
    let m = measured as f64;
    assert!(
        (predicted - m).abs() <= 0.2 * m,
        "{what}: predicted {predicted}, measured {measured}"
    );
}

#[test]
fn filling_from_the_previous_owner_spares_the_origin_the_switch() {
    let ranks = ketama::analysis::cache_sim::zipf_ranks(OBJECTS, 0.9, (WARMUP + AFTER) as u64, 7);
    let trace: Vec<String> = ranks.iter().map(|r| format!("/obj/{r}")).collect();
    let peers: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
    let plain = run(&trace, false, &peers);
    let filled = run(&trace, true, &peers);
    let (excess_plain, excess_filled) = (
        plain.after as f64 - plain.before as f64,
        filled.after as f64 - filled.before as f64,
    );
    eprintln!(
        "origin requests, {AFTER} before / {AFTER} after the switch: without fill {} / {}, with fill {} / {}; peer {}",
        plain.before, plain.after, filled.before, filled.after, filled.peer
    );
    assert!(excess_plain > 100.0, "the switch cost only {excess_plain}");
    assert!(
        excess_filled <= 0.2 * excess_plain,
        "with fill {excess_filled} excess origin requests, without {excess_plain}"
    );
    assert_eq!(plain.peer, 0.0);

    // The simulator on the same trace and servers, caches that never evict.
    let dir = tempfile::tempdir().unwrap();
    let trace_file = dir.path().join("trace");
    std::fs::write(&trace_file, trace.join("\n")).unwrap();
    let servers = dir.path().join("servers");
    std::fs::write(
        &servers,
        peers.iter().map(|p| format!("{p}\n")).collect::<String>(),
    )
    .unwrap();
    for (m, fill) in [(&plain, false), (&filled, true)] {
        let (before, after, peer) = predicted(&trace_file, &servers, fill);
        eprintln!("predicted (fill: {fill}): {before} / {after}; peer {peer}");
        within_20_percent(before, m.before, &format!("fill {fill}: before the switch"));
        within_20_percent(after, m.after, &format!("fill {fill}: after the switch"));
        if fill {
            within_20_percent(peer, m.peer as usize, "responses counted peer");
        }
    }
}

/// The documented configuration never hands over a stale copy: once the
/// previous owner's copy has expired, a fill request gets 599 there and
/// the new owner fetches from the origin.
#[test]
fn a_previous_owners_expired_copy_is_not_handed_over() {
    let dir = tempfile::tempdir().unwrap();
    let o = origin_for(dir.path(), 1);
    let peers: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
    let _caches: Vec<Nginx> = (0..3)
        .map(|i| cache(dir.path(), i, &peers, o.addr))
        .collect();
    let (a, b) = (peers[0], peers[1]);
    let fill_at_a = || request(a, "GET", "/obj/x", &[("X-Ketama-Fill", "1")], "").unwrap();
    // Nothing at A yet: a fill request is "not here", not an origin fetch.
    assert_eq!(fill_at_a().status, 599);
    let seq = |n: &str| [("X-Seq", n.to_string())];
    let get_at = |at: SocketAddr, n: &str, hint: Option<SocketAddr>| {
        let mut h: Vec<(&str, String)> = seq(n).to_vec();
        if let Some(p) = hint {
            h.push((HINT, p.to_string()));
        }
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        request(at, "GET", "/obj/x", &h, "").unwrap()
    };
    assert_eq!(get_at(a, "1", None).status, 200);
    // nginx logs a request after its response went out: polled for.
    wait_for(Duration::from_secs(5), || {
        origin_requests(dir.path(), 0..100) == 1
    });
    assert_eq!(fill_at_a().status, 200, "a fresh copy is handed over");
    // Once A's copy has expired (max-age=1), A answers fill requests 599.
    wait_for(Duration::from_secs(10), || fill_at_a().status == 599);
    let resp = get_at(b, "2", Some(a));
    assert_eq!(resp.status, 200);
    // B fetched from the origin, not A's stale copy.
    wait_for(Duration::from_secs(5), || {
        origin_requests(dir.path(), 2..3) == 1
    });
    assert!(
        resp.headers["cache-status"].ends_with("fwd=miss"),
        "{:?}",
        resp.headers
    );
}

/// A client's own `X-Ketama-Fill` through a router inside the caches' `geo`
/// range (127.0.0.1 here) gets the origin's answer, not a cache-only 599:
/// the documented `strip_request_headers` removes it; without it, 599.
#[test]
fn a_clients_own_fill_header_gets_no_cache_only_answer() {
    let dir = tempfile::tempdir().unwrap();
    let o = origin(dir.path());
    let peers: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
    let _caches: Vec<Nginx> = (0..3)
        .map(|i| cache(dir.path(), i, &peers, o.addr))
        .collect();
    for (server, want) in [(documented_server_lines(), 200), (String::new(), 599)] {
        let (r, _rdir, _) = router_from(|proxy, admin, _| {
            config_with(&peers, proxy, admin, &format!("retries = 0\n{server}"), "")
        });
        let path = format!("/obj/own-fill-{want}");
        let resp = request(r.proxy, "GET", &path, &[("X-Ketama-Fill", "1")], "").unwrap();
        assert_eq!(resp.status, want, "with [server] {server:?}");
    }
}
