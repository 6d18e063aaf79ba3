//! gRPC through the router, with live grpcio servers and clients (the
//! gRPC C core, `tests/grpc/peer.py`): `h2c = true` backends and TLS ones
//! (`[upstream_tls] h2`), clients in h2c and over TLS, `[health] grpc`
//! checks on. Unary calls with trailing metadata, server streaming of
//! 10,000 messages, client streaming, bidirectional streaming in lock
//! step, 16 MiB each way; an application error passed through with the
//! backend kept in rotation; deadlines (the router's cap answered with
//! DEADLINE_EXCEEDED, the backend's call cancelled; the deadline
//! forwarded reduced); a client's cancel reaching the backend; every
//! backend stopped (UNAVAILABLE, the router's own `grpc-status`); and
//! each call on the backend gRPC's own `ring_hash` picks, for 1,000 keys
//! over 5 backends.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::grpc::{call, Servers, Via};
use common::tls::{tls_section, Ca, Issued};
use common::*;
use serde_json::Value;

/// A router in front of `servers` (TLS ones with `backend_ca`), its
/// clients in h2c and, with `front`, over TLS too.
fn router(
    dir: &Path,
    servers: &Servers,
    backend_ca: Option<&Ca>,
    front: Option<&Issued>,
    extra: &str,
) -> RouterProc {
    let key = "[key]\nsource = \"header\"\nheader = \"x-key\"";
    router_keyed(dir, servers, backend_ca, front, extra, key)
}

/// [`router`] with this `[key]`.
fn router_keyed(
    dir: &Path,
    servers: &Servers,
    backend_ca: Option<&Ca>,
    front: Option<&Issued>,
    extra: &str,
    key: &str,
) -> RouterProc {
    let (proxy, admin) = (any_port(), any_port());
    let mut s = format!(
        "[server]\nlisten = [\"{proxy}\"]\nh2c = true\ngrace_period_seconds = 0\n{extra}\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[ring]\nscheme = \"envoy-ring-hash:grpc\"\n\n{key}\n\n[health]\ngrpc = true\ninterval_ms = 100\ntimeout_ms = 500\n\n[access_log]\npath = \"{}\"\nformat = \"json\"\n",
        dir.join("access.log").display()
    );
    if let Some(ca) = backend_ca {
        s += &format!(
            "\n[upstream_tls]\nca_file = \"{}\"\nh2 = true\n",
            ca.cert.display()
        );
    }
    if let Some(cert) = front {
        s += "\n";
        s += &tls_section(any_port(), &[cert], "");
    }
    for p in &servers.ports {
        s += &format!("\n[[backends]]\naddress = \"127.0.0.1:{p}\"\n");
        s += if backend_ca.is_some() {
            "tls = true\nsni = \"backend.test\"\n"
        } else {
            "h2c = true\n"
        };
    }
    let path = dir.join("router.toml");
    std::fs::write(&path, s).unwrap();
    let r = start_router_with(&path, &[], None);
    // Every backend's last gRPC health check passed.
    wait_for(Duration::from_secs(10), || {
        checks_passed(&r) == servers.ports.len()
    });
    r
}

/// Backends whose last active check passed (the admin page's columns).
fn checks_passed(r: &RouterProc) -> usize {
    let resp = admin_call(r, "GET", "/ui/data", "");
    let v: Value = serde_json::from_str(&resp.body).unwrap();
    v["backends"]["check"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c[0] == true)
        .count()
}

fn code(v: &Value) -> i64 {
    v["code"].as_i64().unwrap_or(-1)
}

/// Every kind of call through `target`, as `via` reaches it.
fn calls_pass(r: &RouterProc, target: SocketAddr, via: Via<'_>) {
    let u = call(target, via, "k1", "unary", &["100"]);
    assert_eq!(code(&u), 0, "{u}");
    assert_eq!(u["same"], true, "{u}");
    let port = u["port"].as_str().unwrap().to_string();
    assert_eq!(u["trailer"], format!("t-{port}"), "trailing metadata: {u}");
    let s = call(target, via, "k2", "stream", &["10000"]);
    assert_eq!(
        (code(&s), &s["count"], &s["in_order"]),
        (0, &Value::from(10000), &Value::from(true)),
        "{s}"
    );
    let c = call(target, via, "k3", "client_stream", &["1000", "1000"]);
    assert_eq!(
        (code(&c), &c["count"], &c["bytes"]),
        (0, &Value::from(1000), &Value::from(1_000_000)),
        "{c}"
    );
    let b = call(target, via, "k4", "bidi", &["200"]);
    assert_eq!(
        (code(&b), &b["count"], &b["in_order"]),
        (0, &Value::from(200), &Value::from(true)),
        "{b}"
    );
    // 16 MiB to the backend and the same back.
    let big = call(target, via, "k5", "unary", &["16777216"]);
    assert_eq!(
        (code(&big), &big["len"], &big["same"]),
        (0, &Value::from(16_777_216), &Value::from(true)),
        "{}",
        big["details"]
    );
    // An application error is an answer: passed through, nobody blamed.
    let f = call(target, via, "k6", "fail", &[]);
    assert_eq!(
        (code(&f), f["details"].as_str()),
        (3, Some("bad argument")),
        "{f}"
    );
    let st = status_json(r);
    assert!(
        st["backends"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["healthy"] == true),
        "a backend's grpc-status 3 took it out: {st}"
    );
}

#[test]
fn calls_of_every_kind_pass_between_h2c_peers() {
    let dir = tempfile::tempdir().unwrap();
    let servers = Servers::start(3, None);
    let r = router(dir.path(), &servers, None, None, "");
    calls_pass(&r, r.proxy, Via::H2c);
    let m = metrics_text(&r);
    assert_eq!(
        sample(&m, "ketama_grpc_calls_total{grpc_status=\"3\"}"),
        1.0,
        "{m}"
    );
    assert!(
        sample(&m, "ketama_grpc_calls_total{grpc_status=\"0\"}") >= 5.0,
        "{m}"
    );
    assert_eq!(
        sample(
            &m,
            "ketama_requests_total{backend=\"127.0.0.1:1\",status=\"error\"}"
        ),
        0.0
    );
    // The access log says each call's grpc-status.
    wait_for(Duration::from_secs(5), || {
        json_lines(&dir.path().join("access.log"))
            .iter()
            .any(|l| l["grpc_status"] == 3 && l["status"] == 200)
    });
    let st = status_json(&r);
    assert_eq!(st["grpc"]["3"], 1, "{}", st["grpc"]);
    // The admin page names the codes (headless Chromium).
    let dom = common::page::rendered(&format!("http://{}/ui#token=sekret", r.admin));
    let grpc = dom
        .split("<dd id=\"grpc\">")
        .nth(1)
        .unwrap_or("")
        .split("</dd>")
        .next()
        .unwrap();
    assert!(grpc.contains("INVALID_ARGUMENT (3) 1"), "{grpc}");
    assert!(grpc.contains("OK (0)"), "{grpc}");
}

#[test]
fn calls_of_every_kind_pass_over_tls_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let backend = ca.issue("backend", &["backend.test"], 30);
    let front = ca.issue("front", &["router.test"], 30);
    let servers = Servers::start(3, Some(&backend));
    let r = router(dir.path(), &servers, Some(&ca), Some(&front), "");
    let tls = r.listener("tls.listen[0]");
    calls_pass(&r, tls, Via::Tls(&ca.cert, "router.test"));
    // And an h2c client to the same TLS backends.
    let u = call(r.proxy, Via::H2c, "k1", "unary", &["10"]);
    assert_eq!(code(&u), 0, "{u}");
}

#[test]
fn deadlines_are_capped_forwarded_reduced_and_cancel_the_backends_call() {
    let dir = tempfile::tempdir().unwrap();
    let servers = Servers::start(1, None);
    let r = router(
        dir.path(),
        &servers,
        None,
        None,
        "grpc_timeout_max_ms = 400",
    );
    // The backend is told what is left of the capped deadline.
    let seen = call(r.proxy, Via::H2c, "k", "seen_deadline", &["30"]);
    let left = seen["remaining"].as_f64().unwrap();
    assert!(left > 0.0 && left <= 0.4, "the backend saw {left} s");
    // A call longer than the cap: DEADLINE_EXCEEDED long before the
    // client's own 30 s (the backend, told the reduced deadline, and the
    // router end it at the same moment: either may say so), and the
    // backend's call cancelled.
    let d = call(r.proxy, Via::H2c, "k", "deadline", &["3000", "30"]);
    assert_eq!(code(&d), 4, "{d}");
    let took = d["took"].as_f64().unwrap();
    assert!((0.35..2.0).contains(&took), "answered after {took} s");
    let ev = call(r.proxy, Via::H2c, "k", "events", &[]);
    assert_eq!(ev["cancelled"].as_array().unwrap().len(), 1, "{ev}");
    let m = metrics_text(&r);
    assert_eq!(
        sample(&m, "ketama_grpc_calls_total{grpc_status=\"4\"}"),
        1.0
    );
    // The client's own deadline, shorter than the cap, reaches the
    // backend as its call's deadline too.
    let d = call(r.proxy, Via::H2c, "k", "deadline", &["3000", "0.2"]);
    assert_eq!(code(&d), 4, "{d}");
    wait_for(Duration::from_secs(5), || {
        call(r.proxy, Via::H2c, "k", "events", &[])["cancelled"]
            .as_array()
            .unwrap()
            .len()
            == 2
    });
}

#[test]
fn the_routers_own_answer_past_the_deadline_is_deadline_exceeded() {
    // A backend that takes connections and never says a word: the call's
    // deadline passes while the router waits for its answer.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let (r, _dir, _) = router_from(|proxy, admin, _| {
        format!(
            "[server]\nlisten = [\"{proxy}\"]\nh2c = true\ngrace_period_seconds = 0\ngrpc_timeout_max_ms = 300\nread_timeout_ms = 20000\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[health]\nenabled = false\n\n[[backends]]\naddress = \"{}\"\nh2c = true\n",
            silent.local_addr().unwrap()
        )
    });
    let d = call(r.proxy, Via::H2c, "k", "deadline", &["10", "30"]);
    assert_eq!(code(&d), 4, "{d}");
    assert!(
        d["details"].as_str().unwrap().contains("deadline passed"),
        "not the router's answer: {d}"
    );
    let took = d["took"].as_f64().unwrap();
    assert!((0.29..2.0).contains(&took), "answered after {took} s");
    let st = status_json(&r);
    assert_eq!(
        st["backends"][0]["healthy"], true,
        "a deadline blamed the backend: {st}"
    );
    assert_eq!(st["grpc"]["4"], 1, "{st}");
}

#[test]
fn an_http1_grpc_web_call_gets_the_same_trailers_only_answer() {
    let (_hold, refusing) = refusing_addr();
    let (r, _dir, _) = router_from(|proxy, admin, _| {
        format!(
            "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[health]\nenabled = false\n\n[[backends]]\naddress = \"{refusing}\"\n"
        )
    });
    let ct = [("content-type", "application/grpc-web+proto")];
    let resp = request(r.proxy, "POST", "/pkg.Svc/Get", &ct, "\0\0\0\0\0").unwrap();
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert_eq!(
        resp.headers.get("grpc-status").map(String::as_str),
        Some("14")
    );
    let words = resp.headers.get("grpc-message").unwrap();
    assert!(words.contains("no backend could serve"), "{words}");
    assert_eq!(resp.body, "");
    // Not gRPC: the HTTP answer, as before.
    let resp = request(r.proxy, "POST", "/x", &[], "").unwrap();
    assert_eq!(resp.status, 502);
}

#[test]
fn a_clients_cancel_reaches_the_backend_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let servers = Servers::start(1, None);
    let r = router(dir.path(), &servers, None, None, "");
    for round in 1..=3 {
        let c = call(r.proxy, Via::H2c, "k", "cancel", &["0.3"]);
        let at = c["cancelled_at"].as_f64().unwrap();
        let mut seen = None;
        wait_for(Duration::from_secs(5), || {
            let ev = call(r.proxy, Via::H2c, "k", "events", &[]);
            let list = ev["cancelled"].as_array().unwrap().clone();
            seen = list.get(round - 1).map(|e| e[0].as_f64().unwrap());
            seen.is_some()
        });
        let after = seen.unwrap() - at;
        assert!(
            after < 0.1,
            "round {round}: the backend saw the cancel {after:.3} s after the client"
        );
    }
}

#[test]
fn every_backend_stopped_is_unavailable_from_the_router() {
    let dir = tempfile::tempdir().unwrap();
    let mut servers = Servers::start(2, None);
    let r = router(dir.path(), &servers, None, None, "");
    assert_eq!(code(&call(r.proxy, Via::H2c, "k", "unary", &["1"])), 0);
    servers.stop();
    let began = Instant::now();
    for key in ["a", "b", "c"] {
        let u = call(r.proxy, Via::H2c, key, "unary", &["1"]);
        assert_eq!(code(&u), 14, "{u}");
        let words = u["details"].as_str().unwrap();
        assert!(
            words.contains("no backend could serve") || words.contains("no healthy backend"),
            "{u}"
        );
    }
    // The health checks take them out; then still UNAVAILABLE, at once.
    wait_for(Duration::from_secs(10), || {
        status_json(&r)["backends"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["healthy"] == false)
    });
    let u = call(r.proxy, Via::H2c, "d", "unary", &["1"]);
    assert_eq!(code(&u), 14, "{u}");
    assert!(began.elapsed() < Duration::from_secs(15));
    let m = metrics_text(&r);
    assert_eq!(
        sample(&m, "ketama_grpc_calls_total{grpc_status=\"14\"}"),
        4.0,
        "{m}"
    );
}

#[test]
fn each_call_goes_where_grpcs_own_ring_hash_sends_it() {
    let dir = tempfile::tempdir().unwrap();
    let servers = Servers::start(5, None);
    let r = router(dir.path(), &servers, None, None, "");
    // `envoy-ring-hash:grpc`: gRPC's sizes, min 1024, max 4096.
    let v = call(
        r.proxy,
        Via::H2c,
        "-",
        "keys",
        &["1000", &servers.target(), "1024", "4096"],
    );
    let (routed, picked) = (
        v["routed"].as_array().unwrap(),
        v["picked"].as_array().unwrap(),
    );
    assert_eq!(routed.len(), 1000);
    let differ = routed.iter().zip(picked).filter(|(a, b)| a != b).count();
    assert_eq!(
        differ, 0,
        "{differ} of 1000 keys went elsewhere than gRPC's pick"
    );
    let used: std::collections::HashSet<_> = routed.iter().collect();
    assert_eq!(used.len(), 5, "every backend serves some keys");
}

/// gRPC's hash policy reading (`[[key.hash_policy]]` with
/// `hash_policy_peer = "grpc"`): a call whose `x-key` metadata has two or
/// three values goes where gRPC's own `ring_hash` sends it (A76: the values
/// joined with commas, in order).
#[test]
fn several_key_values_go_where_grpcs_own_ring_hash_sends_them() {
    let dir = tempfile::tempdir().unwrap();
    let servers = Servers::start(5, None);
    let key = "[key]\nhash_policy_peer = \"grpc\"\n\n[[key.hash_policy]]\nheader = \"x-key\"";
    let r = router_keyed(dir.path(), &servers, None, None, "", key);
    let v = call(
        r.proxy,
        Via::H2c,
        "-",
        "multikeys",
        &["300", &servers.target(), "1024", "4096"],
    );
    let (routed, picked) = (
        v["routed"].as_array().unwrap(),
        v["picked"].as_array().unwrap(),
    );
    assert_eq!(routed.len(), 300);
    let differ = routed.iter().zip(picked).filter(|(a, b)| a != b).count();
    assert_eq!(
        differ, 0,
        "{differ} of 300 calls went elsewhere than gRPC's pick"
    );
    let used: std::collections::HashSet<_> = routed.iter().collect();
    assert_eq!(used.len(), 5, "every backend serves some calls");
}

/// The router's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap()
}

/// A gRPC message frame: uncompressed, its length, the bytes.
fn grpc_message(m: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend((m.len() as u32).to_be_bytes());
    out.extend(m);
    out
}

#[test]
fn a_client_that_stops_reading_holds_the_backend_back_not_the_routers_memory() {
    use common::h2raw::{self, frame, Reader, DATA, END_STREAM};
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let servers = Servers::start(1, None);
    let r = router(dir.path(), &servers, None, None, "");
    let pid = r.child.id();
    let before = rss_kib(pid);
    // 256 messages of 1 MiB, to a client that grants the first 65,535
    // bytes of its window and never another.
    let mut c = h2raw::connect(r.proxy);
    let req = h2raw::request(
        "POST",
        "/test.Echo/ServerStream",
        &[("content-type", "application/grpc"), ("te", "trailers")],
    );
    c.write_all(&h2raw::headers(1, &req, false)).unwrap();
    c.write_all(&frame(DATA, END_STREAM, 1, &grpc_message(b"256 1048576")))
        .unwrap();
    let mut reader = Reader::default();
    reader.quiet = true;
    reader.until(&mut c, Duration::from_secs(10), |r| {
        r.stream(1).body.len() >= 65_535
    });
    assert_eq!(
        reader.read.stream(1).body.len(),
        65_535,
        "the window's worth"
    );
    // Over the next second and a half the router holds at most its
    // windows' worth (64 KiB a stream from the backend), not the 256 MiB
    // the backend would send.
    let mut peak = 0;
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        peak = peak.max(rss_kib(pid));
        std::thread::sleep(Duration::from_millis(50));
    }
    let grew = peak.saturating_sub(before);
    assert!(
        grew < 16 * 1024,
        "the router grew {grew} KiB for a stalled stream"
    );
    // Nothing more reached the client meanwhile.
    reader.until(&mut c, Duration::from_millis(200), |_| false);
    assert_eq!(reader.read.stream(1).body.len(), 65_535);
    eprintln!("stalled stream: the router grew {grew} KiB");
}
