//! The request rules of nginx 1.22, case by case, each checked against a
//! live nginx in front of its own recording origin (as the random
//! differential, `tests/nginx_diff_random.rs`, does by the thousand): a
//! `Connection` field never smuggles a request, empty lines before a
//! request cost nothing, `Host` is validated, fields nginx ignores are
//! neither routed on nor forwarded, and the statuses are nginx's. Then
//! what the router does beyond nginx on purpose: a backend's early answer
//! to an upload is relayed and not blamed, and a `101` nobody asked for
//! opens no tunnel.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::differential::{pair_with, run, show_forwarded, Outcome, Pair};
use common::*;

/// `case` through both, which must agree; the router's outcome.
fn both(p: &Pair, case: &[u8]) -> Outcome {
    let (n, r) = (
        run(&p.nginx_side, case, 4000),
        run(&p.router_side, case, 4000),
    );
    assert_eq!(
        (&n.statuses, &n.forwarded),
        (&r.statuses, &r.forwarded),
        "{}\n{}",
        case.escape_ascii(),
        show_forwarded(&n, &r)
    );
    r
}

#[test]
fn a_connection_field_naming_the_framing_smuggles_nothing() {
    let p = pair_with("", "");
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n";
    let by_length = format!(
        "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: Content-Length\r\n\r\n{smuggled}",
        smuggled.len()
    );
    let chunked = format!(
        "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: Transfer-Encoding\r\n\r\n{:x}\r\n{smuggled}\r\n0\r\n\r\n",
        smuggled.len()
    );
    for case in [by_length, chunked] {
        let r = both(&p, case.as_bytes());
        assert_eq!(r.statuses, [200, 200, 200], "{case:?}");
        assert_eq!(r.forwarded[0].line, "POST /a HTTP/1.1");
        assert_eq!(r.forwarded[0].body, smuggled.escape_default().to_string());
        assert!(
            r.forwarded.iter().all(|s| !s.line.contains("smuggled")),
            "{:?}",
            r.forwarded
        );
    }
}

/// This process's resident memory, KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// 20 MiB of empty lines, then a request, on one connection: the router
/// drops them as they come (as nginx does) and answers the request 200
/// (its line's length counted from its own first byte), its memory flat.
#[test]
fn empty_lines_before_a_request_are_dropped_as_they_come() {
    let p = pair_with("", "");
    let pid = p.router.child.id();
    let before = rss_kib(pid);
    for addr in [p.nginx_side.addr, p.router_side.addr] {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let blank = b"\r\n".repeat(1 << 15);
        for _ in 0..(20 << 20) / blank.len() {
            c.write_all(&blank).unwrap();
        }
        c.write_all(b"GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        assert!(
            out.starts_with(b"HTTP/1.1 200"),
            "{addr}: {}",
            out.escape_ascii()
        );
    }
    let grew = rss_kib(pid).saturating_sub(before);
    assert!(grew < 4096, "the router grew by {grew} KiB");
    let seen = p.router_side.origin.take();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].line, b"GET /after HTTP/1.1");
}

#[test]
fn the_statuses_and_fields_are_nginxs() {
    let p = pair_with("", "");
    let get = |extra: &str| format!("GET /s HTTP/1.1\r\nHost: x\r\n{extra}\r\n");
    let cases: Vec<(String, u16)> = vec![
        ("GET /s HTTP/1.1\r\nHost: a/b\r\n\r\n".into(), 400),
        ("GET /s HTTP/1.1\r\nHost:\r\n\r\n".into(), 400),
        ("GET /s HTTP/1.1\r\nHost: a b\r\n\r\n".into(), 400),
        ("GET /s HTTP/1.1\r\nHost: a..b\r\n\r\n".into(), 400),
        (get("X_Forwarded_For: 6.6.6.6\r\n"), 200),
        ("TRACE /s HTTP/1.1\r\nHost: x\r\n\r\n".into(), 405),
        ("POST /s HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".into(), 400),
        (
            "POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                .into(),
            400,
        ),
        (get("Connection: X-Forwarded-For\r\n"), 200),
        (get("Connection: Host\r\n"), 200),
        (get("X@Y: 1\r\n"), 200),
        (get("X: a\x7fb\r\n"), 200),
        (get("NoColon\r\n"), 200),
        (get(&(0..300).map(|i| format!("X-{i}: v\r\n")).collect::<String>()), 200),
        (get("Connection: a, b, c, d, e, f, g, h, i, j, keep-alive\r\n"), 200),
        (
            "POST /s HTTP/1.1\r\nHost: x\r\nContent-Length: 00000000000000000005\r\n\r\nhello".into(),
            200,
        ),
        (
            "POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3 foo\r\nabc\r\n0\r\n\r\n".into(),
            200,
        ),
        (get("If-Match: a\r\nIf-Match: b\r\n"), 400),
    ];
    for (case, first) in &cases {
        let r = both(&p, case.as_bytes());
        assert_eq!(r.statuses.first(), Some(first), "{case:?}");
    }
    // What was forwarded: the `_` field left out, the rest as sent.
    let r = both(
        &p,
        get("X_Forwarded_For: 6.6.6.6\r\nX-Kept: 1\r\n").as_bytes(),
    );
    let fields = &r.forwarded[0].fields;
    assert!(
        fields.iter().all(|(n, _)| n != "X_Forwarded_For"),
        "{fields:?}"
    );
    assert_eq!(r.forwarded[0].set["x-forwarded-for"], ["127.0.0.1"]);
    // With underscores_in_headers (nginx's own key), it is forwarded.
    let p = pair_with(
        "underscores_in_headers = true",
        "underscores_in_headers on;",
    );
    let r = both(&p, get("X_Forwarded_For: 6.6.6.6\r\n").as_bytes());
    assert!(r.forwarded[0]
        .fields
        .iter()
        .any(|(n, v)| n == "X_Forwarded_For" && v == "6.6.6.6"));
}

/// A backend that answers `413` (`Connection: close`) to a POST as soon
/// as it has its head, reading no body, and `200` to anything else; the
/// request lines it saw.
fn refusing_origin() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
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
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                    }
                    s.lock().unwrap().push(line.trim().to_string());
                    if line.starts_with("POST") {
                        let _ = w.write_all(
                            b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbig\n",
                        );
                        // Closed with the body unread: the kernel resets.
                        return;
                    }
                    if w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

/// An 8 MiB upload a backend refuses at once: the client gets the
/// backend's 413, the backend stays in rotation (the next request is
/// served), nothing is logged against it.
#[test]
fn a_backends_early_answer_to_an_upload_is_relayed_and_not_blamed() {
    let (origin, seen) = refusing_origin();
    let (r, dir) = router_over(&[origin], "", "enabled = false");
    for round in 0..3 {
        let mut c = TcpStream::connect(r.proxy).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let len = 8 << 20;
        write!(
            c,
            "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n"
        )
        .unwrap();
        let mut w = c.try_clone().unwrap();
        let writer = std::thread::spawn(move || {
            let piece = vec![b'u'; 1 << 16];
            for _ in 0..len / piece.len() {
                if w.write_all(&piece).is_err() {
                    return;
                }
            }
        });
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 413"), "round {round}: {text}");
        assert!(
            text.contains("Connection: close") && text.ends_with("big\n"),
            "{text}"
        );
        drop(c);
        let _ = writer.join();
        let resp = get(&r, "/after");
        assert_eq!(resp.status, 200, "round {round}: {}", resp.body);
    }
    let log = std::fs::read_to_string(dir.path().join("router.log")).unwrap();
    assert!(!log.contains("backend failed"), "{log}");
    assert_eq!(seen.lock().unwrap().len(), 6);
}

/// A backend that gives up on a slow upload (closes without an answer
/// while the router waits for the client's body) is not blamed either:
/// the client gets 502, the backend serves the next request.
#[test]
fn a_backend_giving_up_on_a_slow_upload_is_not_blamed() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut r = BufReader::new(c.try_clone().unwrap());
                let mut w = c;
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                if line.starts_with("POST") {
                    // Its own body timeout, short.
                    std::thread::sleep(Duration::from_millis(200));
                    return;
                }
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                }
                let _ = w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n");
            });
        }
    });
    let (r, dir) = router_over(&[origin], "", "enabled = false");
    let mut c = TcpStream::connect(r.proxy).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        c,
        "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\nx"
    )
    .unwrap();
    let started = Instant::now();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    assert!(out.starts_with(b"HTTP/1.1 502"), "{}", out.escape_ascii());
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(get(&r, "/after").status, 200);
    let log = std::fs::read_to_string(dir.path().join("router.log")).unwrap();
    assert!(!log.contains("backend failed"), "{log}");
    let m = metrics_text(&r);
    assert_eq!(
        sample(
            &m,
            "ketama_upstream_errors_total{reason=\"closed_during_upload\"}"
        ),
        1.0,
        "{m}"
    );
}

/// A backend answering `101` to a request that asked for no upgrade: no
/// tunnel (the next request on the connection is routed and forwarded as
/// any, with `X-Forwarded-For`), the answer a 502.
#[test]
fn a_switch_nobody_asked_for_opens_no_tunnel() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = l.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(c.try_clone().unwrap());
                let mut w = c;
                loop {
                    let mut head = String::new();
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 {
                            return;
                        }
                        head.push_str(&h);
                        if h == "\r\n" {
                            break;
                        }
                    }
                    s.lock().unwrap().push(head.clone());
                    let answer: &[u8] = if head.starts_with("GET /switch") {
                        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: raw\r\nConnection: Upgrade\r\n\r\n"
                    } else {
                        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"
                    };
                    if w.write_all(answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let (r, _dir) = router_over(&[origin], "max_fails = 0", "enabled = false");
    let mut c = TcpStream::connect(r.proxy).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /switch HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let statuses = common::differential::statuses(&out);
    assert_eq!(statuses, [502, 200], "{}", out.escape_ascii());
    let seen = seen.lock().unwrap();
    let next = seen
        .iter()
        .find(|h| h.starts_with("GET /next"))
        .expect("/next forwarded");
    assert!(next.contains("x-forwarded-for: 127.0.0.1"), "{next}");
}
