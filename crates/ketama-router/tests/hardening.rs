//! The router under hostile clients and failing backends, with real
//! sockets: ambiguous framing, slow and idle connections, connection
//! floods, hanging backends, client faults kept apart from backend faults.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use ketama_router::origin::Origin;

/// A lenient origin: it answers every request head it reads with `200 saw
/// REQUEST-LINE`, ignoring `Content-Length` (as a backend reading `35, 35`
/// as "no body" would), so any body left on its connection is read as the
/// next request. Records every request line it saw.
fn lenient_origin() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(c.try_clone().unwrap());
                let mut w = c;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if line.trim().is_empty() {
                        continue;
                    }
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                            break;
                        }
                    }
                    s.lock().unwrap().push(line.trim().to_string());
                    let body = format!("saw {}", line.trim());
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if w.write_all(resp.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

#[test]
fn ambiguous_framing_is_refused_and_nothing_is_smuggled() {
    let (origin, seen) = lenient_origin();
    let (r, _dir) = router_over(&[origin], "", "enabled = false");
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
    let body_len = smuggled.len();
    let cases: Vec<(String, u16)> = vec![
        (format!("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: {body_len}, {body_len}\r\n\r\n{smuggled}"), 400),
        (format!("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: {body_len}\r\nContent-Length: {body_len}\r\n\r\n{smuggled}"), 400),
        (format!("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: {body_len}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{smuggled}"), 400),
        ("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n".to_string(), 501),
        ("GET /a HTTP/1.1\r\nConnection: close\r\n\r\n".to_string(), 400),
        ("GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\nConnection: close\r\n\r\n".to_string(), 400),
    ];
    // Each refusal is counted as the client's fault, except where Pingora's
    // own parser refuses first (it answers with an empty body; the router
    // never sees that request).
    let mut ours = 0;
    for (bytes, want) in &cases {
        let (status, text) = raw(r.proxy, bytes.as_bytes());
        assert_eq!(status, Some(*want), "{bytes:?} -> {text}");
        ours += text.contains("ketama-router:") as usize;
    }
    assert!(ours >= 4, "{ours}");
    assert!(
        seen.lock().unwrap().is_empty(),
        "nothing reaches the origin: {:?}",
        seen.lock().unwrap()
    );
    // A client right after finds a clean upstream connection: it gets its
    // own answer, with nothing of anyone else's prepended.
    let resp = request(
        r.proxy,
        "GET",
        "/b",
        &[("authorization", "Bearer b-secret")],
        "",
    )
    .unwrap();
    assert_eq!(resp.body, "saw GET /b HTTP/1.1");
    assert_eq!(*seen.lock().unwrap(), ["GET /b HTTP/1.1"]);
    // HTTP/1.0 needs no Host.
    let (status, _) = raw(r.proxy, b"GET /c HTTP/1.0\r\n\r\n");
    assert_eq!(status, Some(200));
    let m = metrics_text(&r);
    assert_eq!(
        sample(&m, "ketama_client_errors_total{reason=\"bad_framing\"}"),
        ours as f64,
        "{m}"
    );
}

#[test]
fn invalid_chunked_bodies_are_the_clients_fault() {
    let origin = Origin::start(0).unwrap();
    let (r, _dir) = router_over(&[origin.addr()], "", "");
    let (status, text) = raw(
        r.proxy,
        b"POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnot a chunk\r\n\r\n",
    );
    assert_eq!(status, Some(400), "{text}");
    assert!(!text.contains("no backend could serve"), "{text}");
    let m = metrics_text(&r);
    assert_eq!(
        sample(&m, "ketama_client_errors_total{reason=\"bad_framing\"}"),
        1.0,
        "{m}"
    );
    let b = origin.addr();
    for class in ["5xx", "error"] {
        assert_eq!(
            sample(
                &m,
                &format!("ketama_requests_total{{backend=\"{b}\",status=\"{class}\"}}")
            ),
            0.0,
            "{m}"
        );
    }
}

#[test]
fn a_client_that_leaves_is_not_a_backend_error() {
    let origin = Origin::start(0).unwrap();
    origin.set_delay(Duration::from_millis(500));
    let (r, _dir) = router_over(&[origin.addr()], "", "enabled = false");
    let mut c = TcpStream::connect(r.proxy).unwrap();
    c.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // Leave before the answer.
    wait_for(Duration::from_secs(5), || origin.max_in_flight() == 1);
    drop(c);
    let b = origin.addr();
    wait_for(Duration::from_secs(10), || {
        sample(
            &metrics_text(&r),
            "ketama_client_errors_total{reason=\"client_disconnect\"}",
        ) == 1.0
    });
    let m = metrics_text(&r);
    for class in ["5xx", "error"] {
        let name = format!("ketama_requests_total{{backend=\"{b}\",status=\"{class}\"}}");
        assert_eq!(sample(&m, &name), 0.0, "{m}");
    }
}

#[test]
fn heads_over_the_limit_get_431_at_any_size() {
    let origin = Origin::start(0).unwrap();
    let (r, _dir) = router_over(&[origin.addr()], "", "");
    for size in [40_000, 200_000, 2_000_000] {
        let head = format!(
            "GET / HTTP/1.1\r\nHost: x\r\nx-big: {}\r\n\r\n",
            "a".repeat(size)
        );
        let (status, text) = raw(r.proxy, head.as_bytes());
        assert_eq!(
            status,
            Some(431),
            "{size}: {}",
            &text[..text.len().min(200)]
        );
    }
    assert_eq!(get(&r, "/still/serving").status, 200);
}

#[test]
fn idle_and_trickling_connections_are_closed() {
    let origin = Origin::start(0).unwrap();
    let (r, _dir) = router_over(
        &[origin.addr()],
        "client_header_timeout_ms = 1000\nkeepalive_timeout_ms = 700\nclient_body_timeout_ms = 600",
        "",
    );
    // Kept alive, then idle: closed after about 700 ms.
    let mut c = TcpStream::connect(r.proxy).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = [0u8; 4096];
    let n = c.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let t = Instant::now();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    let idle = t.elapsed();
    assert!(
        idle >= Duration::from_millis(600) && idle < Duration::from_secs(5),
        "{idle:?}"
    );

    // A head trickled a byte every 100 ms: 408 and closed after about 1 s.
    let mut c = TcpStream::connect(r.proxy).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let t = Instant::now();
    let head = b"GET /slowloris HTTP/1.1\r\nHost: x\r\nx-a: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let mut closed = false;
    for &b in head.iter() {
        if c.write_all(&[b]).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        if t.elapsed() > Duration::from_secs(4) {
            break;
        }
    }
    let mut answer = Vec::new();
    let _ = c.read_to_end(&mut answer);
    let took = t.elapsed();
    let answer = String::from_utf8_lossy(&answer);
    assert!(closed || answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(took < Duration::from_secs(5), "{took:?}");

    // A body that stops half way: 408 after the body timeout, the
    // client's fault.
    let mut c = TcpStream::connect(r.proxy).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf")
        .unwrap();
    let mut answer = Vec::new();
    let _ = c.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");

    let m = metrics_text(&r);
    assert_eq!(
        sample(&m, "ketama_client_errors_total{reason=\"header_timeout\"}"),
        1.0,
        "{m}"
    );
    assert_eq!(
        sample(&m, "ketama_client_errors_total{reason=\"body_timeout\"}"),
        1.0,
        "{m}"
    );
    let b = origin.addr();
    assert_eq!(
        sample(
            &m,
            &format!("ketama_requests_total{{backend=\"{b}\",status=\"error\"}}")
        ),
        0.0
    );
}

#[test]
fn a_connection_flood_stops_at_the_limit_and_the_rest_keeps_working() {
    let origins: Vec<Origin> = (0..2).map(|i| Origin::start(i).unwrap()).collect();
    let addrs: Vec<SocketAddr> = origins.iter().map(|o| o.addr()).collect();
    let (r, _dir) = router_over(&addrs, "max_connections = 200", "");
    // 200 connections that send nothing: all held.
    let held: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(r.proxy).unwrap())
        .collect();
    // Past the limit: closed at once, not left hanging.
    for _ in 0..5 {
        let mut c = TcpStream::connect(r.proxy).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let t = Instant::now();
        let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut buf = Vec::new();
        let got = c.read_to_end(&mut buf);
        assert!(
            got.is_ok() || t.elapsed() < Duration::from_secs(4),
            "left hanging"
        );
        assert!(
            buf.is_empty(),
            "served past the limit: {}",
            String::from_utf8_lossy(&buf)
        );
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
    // Health checks and the admin API still work at the limit.
    let before = status_json(&r);
    wait_for(Duration::from_secs(5), || {
        let st = status_json(&r);
        st["backends"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["healthy"] == true)
    });
    assert!(before["backends"].is_array());
    let m = metrics_text(&r);
    assert!(
        sample(
            &m,
            "ketama_client_errors_total{reason=\"connection_limit\"}"
        ) >= 5.0,
        "{m}"
    );
    // Freed slots take new clients.
    drop(held);
    wait_for(Duration::from_secs(10), || {
        request(r.proxy, "GET", "/after", &[], "").is_ok_and(|resp| resp.status == 200)
    });
}

/// A listener that never accepts, its backlog full: further connects hang
/// (the kernel drops their SYNs).
fn blackhole() -> (socket2::Socket, Vec<TcpStream>, SocketAddr) {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    s.listen(0).unwrap();
    let addr = s.local_addr().unwrap().as_socket().unwrap();
    let mut fill = Vec::new();
    for _ in 0..8 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(c) => fill.push(c),
            Err(_) => break,
        }
    }
    (s, fill, addr)
}

#[test]
fn hanging_backends_time_out_and_are_skipped() {
    let good = Origin::start(0).unwrap();
    let (_hole, _fill, hole) = blackhole();
    // A backend that accepts and never answers.
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let mute_addr = mute.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut keep = Vec::new();
        for c in mute.incoming().flatten() {
            keep.push(c);
        }
    });
    let (r, _dir) = router_over(
        &[good.addr(), hole, mute_addr],
        "connect_timeout_ms = 1500\nread_timeout_ms = 800\nmax_fails = 1\nfail_timeout_ms = 30000",
        "enabled = false",
    );
    let ring = ketama::RingBuilder::new()
        .layout(ketama::Layout::Compact)
        .build(
            [good.addr(), hole, mute_addr]
                .iter()
                .map(|a| ketama::Node::new(a.to_string(), 1))
                .collect(),
        )
        .unwrap();
    // A key whose failover order starts with `a` then the good backend.
    let owned_by = |a: SocketAddr| url_starting(&ring, &[a, good.addr()]);
    // Connect never completes: after the connect timeout, the next backend.
    let u = owned_by(hole);
    let t = Instant::now();
    let resp = get(&r, &u);
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert_ne!(resp.headers["x-ketama-backend"], hole.to_string());
    assert!(
        t.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        t.elapsed()
    );
    // max_fails = 1: skipped from now on, without waiting on a connect.
    let t = Instant::now();
    let resp = get(&r, &owned_by(hole));
    assert_eq!(resp.status, 200);
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
    // Accepts and never answers: 504 after the read timeout.
    let t = Instant::now();
    let resp = get(&r, &owned_by(mute_addr));
    assert_eq!(resp.status, 504, "{}", resp.body);
    assert!(t.elapsed() >= Duration::from_millis(750) && t.elapsed() < Duration::from_secs(5));
    // The router's own answer names whose failure it was.
    assert_eq!(
        resp.headers.get("x-ketama-backend").map(String::as_str),
        Some(mute_addr.to_string().as_str())
    );
    let m = metrics_text(&r);
    assert_eq!(
        sample(
            &m,
            &format!("ketama_requests_total{{backend=\"{mute_addr}\",status=\"error\"}}")
        ),
        1.0,
        "{m}"
    );
}

#[test]
fn a_backend_down_under_load_writes_a_few_log_lines() {
    let origins: Vec<Origin> = (0..3).map(|i| Origin::start(i).unwrap()).collect();
    let addrs: Vec<SocketAddr> = origins.iter().map(|o| o.addr()).collect();
    // Passive health off, so every request tries the dead backend first.
    let (r, dir) = router_over(&addrs, "max_fails = 0", "enabled = false");
    origins[1].kill();
    let mut failed_over = 0;
    for u in urls(600) {
        let resp = get(&r, &u);
        assert_eq!(resp.status, 200);
        failed_over += (resp.headers["x-ketama-backend"] != addrs[1].to_string()) as usize;
    }
    assert!(failed_over > 100, "the dead backend owned keys");
    let log = std::fs::read_to_string(dir.path().join("router.log")).unwrap();
    let lines = log
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .count();
    assert!((1..=3).contains(&lines), "{lines} lines:\n{log}");
}

/// A test URL whose failover order on `ring` begins with `prefix`.
fn url_starting(ring: &ketama::Ring, prefix: &[SocketAddr]) -> String {
    urls(1000)
        .into_iter()
        .find(|u| {
            ring.failover(u.as_bytes())
                .map(|n| n.server().to_string())
                .take(prefix.len())
                .eq(prefix.iter().map(|a| a.to_string()))
        })
        .unwrap()
}

/// A backend that reads each request head and then ends the connection
/// without a byte of answer: with a reset (`SO_LINGER` 0) or a plain close.
fn hang_up_origin(reset: bool) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let mut r = BufReader::new(c.try_clone().unwrap());
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                line.clear();
            }
            if reset {
                let _ = socket2::SockRef::from(&c).set_linger(Some(Duration::ZERO));
            }
        }
    });
    addr
}

/// nginx's `proxy_next_upstream error`: a connection closed or reset
/// before any response byte sends an idempotent request to the next
/// backend even when the connection was fresh (a backend dying with
/// connections in its accept queue does just that), within `retries`;
/// a POST is not sent twice.
#[test]
fn a_backend_that_hangs_up_before_answering_fails_over_within_retries() {
    let good = Origin::start(0).unwrap();
    let rst = hang_up_origin(true);
    let fin = hang_up_origin(false);
    let all = [good.addr(), rst, fin];
    let (r, _dir) = router_over(
        &all,
        "retries = 1\nmax_fails = 1000\nfail_timeout_ms = 1000",
        "enabled = false",
    );
    let ring = ketama::RingBuilder::new()
        .layout(ketama::Layout::Compact)
        .build(
            all.iter()
                .map(|a| ketama::Node::new(a.to_string(), 1))
                .collect(),
        )
        .unwrap();
    let with_order = |want: [SocketAddr; 3]| url_starting(&ring, &want);
    for first in [rst, fin] {
        let other = if first == rst { fin } else { rst };
        let u = with_order([first, good.addr(), other]);
        for _ in 0..5 {
            let resp = get(&r, &u);
            assert_eq!(resp.status, 200, "{first} first: {}", resp.body);
            assert_eq!(resp.headers["x-ketama-backend"], good.addr().to_string());
        }
        let post = request(r.proxy, "POST", &u, &[], "once").unwrap();
        assert_eq!(
            post.status, 502,
            "a POST is never sent twice: {}",
            post.body
        );
        assert!(post.body.contains("tried 1"), "{}", post.body);
        // Two hang-ups in a row use up `retries` = 1.
        let resp = get(&r, &with_order([first, other, good.addr()]));
        assert_eq!(resp.status, 502, "{}", resp.body);
        assert!(resp.body.contains("tried 2"), "{}", resp.body);
    }
}
