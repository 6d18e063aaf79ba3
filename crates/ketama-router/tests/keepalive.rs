//! Kept-alive HTTP/1.1 connections: the router waits for each next request
//! in its own loop (so an idle connection holds little), then reads its
//! head on from what that wait read. A head split across reads, a head
//! longer than the first read, a head over the limit on a later request,
//! and a request whose body was read in any of the router's ways must each
//! be served as on a new connection.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// Reads one response (head and Content-Length body) off a kept-alive
/// connection; its status and its `x-ketama-backend`.
fn response(c: &mut TcpStream) -> (u16, String) {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        assert_eq!(c.read(&mut byte).unwrap(), 1, "closed mid-head: {raw:?}");
        raw.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&raw).to_string();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let header = |name: &str| {
        head.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
            .unwrap_or_default()
    };
    let len: usize = header("content-length").parse().unwrap_or(0);
    let mut body = vec![0u8; len];
    c.read_exact(&mut body).unwrap();
    (status, header("x-ketama-backend"))
}

#[test]
fn requests_after_an_idle_wait_are_read_whole() {
    let (_origins, r, _dir) = setup(&[1, 1], "");
    let mut c = TcpStream::connect(r.proxy).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();

    c.write_all(b"GET /first HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let (status, first) = response(&mut c);
    assert_eq!(status, 200);
    assert!(!first.is_empty(), "routed");

    // A head of 3,000 bytes, sent in two pieces with a pause between: the
    // router's first read gets the start, Pingora's session the rest.
    let pad = "a".repeat(3000);
    let head = format!("GET /second HTTP/1.1\r\nHost: t\r\nx-pad: {pad}\r\n\r\n");
    c.write_all(&head.as_bytes()[..300]).unwrap();
    std::thread::sleep(Duration::from_millis(100)); // lets the pieces arrive apart
    c.write_all(&head.as_bytes()[300..]).unwrap();
    let (status, _) = response(&mut c);
    assert_eq!(status, 200, "a head split across the idle wait is served");

    // The same routing as on a connection of its own.
    c.write_all(b"GET /first HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(response(&mut c), (200, first.clone()));
    assert_eq!(get(&r, "/first").headers["x-ketama-backend"], first);

    // A later request's head over max_header_bytes (32 KiB) is still 431.
    let big = format!(
        "GET /third HTTP/1.1\r\nHost: t\r\nx-pad: {}\r\n\r\n",
        "b".repeat(40_000)
    );
    let _ = c.write_all(big.as_bytes());
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    let text = String::from_utf8_lossy(&rest);
    assert!(text.starts_with("HTTP/1.1 431"), "{text:?}");
}

/// Requests a client pipelines go through the same limits as any other,
/// each its own: a later one's head over `max_header_bytes` is 431 and its
/// request line over it 414, after the earlier ones are answered; and a
/// request line split across reads is read whole.
#[test]
fn pipelined_requests_meet_the_limits_one_by_one() {
    let origins: Vec<_> = (0..2)
        .map(|i| ketama_router::origin::Origin::start(i).unwrap())
        .collect();
    let addrs: Vec<_> = origins.iter().map(|o| o.addr()).collect();
    let (r, _dir) = router_over(&addrs, "max_header_bytes = 2048", "");
    let answers = |bytes: &[u8]| -> Vec<u16> {
        let mut c = TcpStream::connect(r.proxy).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(bytes).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        String::from_utf8_lossy(&out)
            .match_indices("HTTP/1.1 ")
            .filter_map(|(i, _)| String::from_utf8_lossy(&out[i + 9..i + 12]).parse().ok())
            .collect()
    };
    let one = b"GET /one HTTP/1.1\r\nHost: t\r\n\r\n".to_vec();
    let big_head = format!(
        "GET /two HTTP/1.1\r\nHost: t\r\nx-pad: {}\r\n\r\n",
        "a".repeat(3000)
    );
    assert_eq!(
        answers(&[&one[..], big_head.as_bytes()].concat()),
        [200, 431]
    );
    let long_line = format!("GET /{} HTTP/1.1\r\nHost: t\r\n\r\n", "a".repeat(3000));
    assert_eq!(
        answers(&[&one[..], &one[..], long_line.as_bytes()].concat()),
        [200, 200, 414]
    );
    // The first request's line over the limit, too.
    assert_eq!(answers(long_line.as_bytes()), [414]);

    let mut c = TcpStream::connect(r.proxy).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /spl").unwrap();
    std::thread::sleep(Duration::from_millis(100)); // lets the pieces arrive apart
    c.write_all(b"it#x HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    assert_eq!(response(&mut c).0, 200);
    let m = metrics_text(&r);
    assert_eq!(
        sample(
            &m,
            "ketama_client_errors_total{reason=\"request_line_too_long\"}"
        ),
        2.0,
        "{m}"
    );
    assert_eq!(
        sample(&m, "ketama_client_errors_total{reason=\"head_too_large\"}"),
        1.0,
        "{m}"
    );
}

/// Connections idle past the engine's warm period are parked (no task of
/// their own, see `src/http1/park.rs`): each is served when its next
/// request comes, each is closed at its keep-alive deadline (not before),
/// and all of them at a graceful stop. Both paths keep these rules.
#[test]
fn idle_connections_are_served_closed_on_time_and_at_a_stop() {
    let origins: Vec<_> = (0..2)
        .map(|i| ketama_router::origin::Origin::start(i).unwrap())
        .collect();
    let addrs: Vec<_> = origins.iter().map(|o| o.addr()).collect();
    let (mut r, _dir) = router_over(&addrs, "keepalive_timeout_ms = 1500", "");
    let open = |n: usize| -> Vec<TcpStream> {
        (0..n)
            .map(|i| {
                let mut c = TcpStream::connect(r.proxy).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                write!(c, "GET /idle/{i} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                assert_eq!(response(&mut c).0, 200);
                c
            })
            .collect()
    };
    let mut conns = open(200);
    // Idle for longer than the warm period, shorter than the deadline.
    std::thread::sleep(Duration::from_millis(400));
    for (i, c) in conns.iter_mut().enumerate() {
        write!(c, "GET /again/{i} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    }
    let answered = Instant::now();
    for c in &mut conns {
        assert_eq!(response(c).0, 200, "a parked connection's request");
    }
    // Then each closes at its deadline: a clean end, after 1.5 s idle.
    for c in &mut conns {
        let mut rest = Vec::new();
        assert_eq!(c.read_to_end(&mut rest).unwrap(), 0);
    }
    let idle = answered.elapsed();
    assert!(
        idle >= Duration::from_millis(1400) && idle < Duration::from_secs(5),
        "{idle:?}"
    );
    wait_for(Duration::from_secs(5), || {
        sample(&metrics_text(&r), "ketama_client_connections") == 0.0
    });

    // Parked when the router stops: closed at once, not at the deadline.
    let mut conns = open(50);
    std::thread::sleep(Duration::from_millis(400));
    let stopping = Instant::now();
    Command::new("kill")
        .args(["-TERM", &r.child.id().to_string()])
        .status()
        .unwrap();
    for c in &mut conns {
        let mut rest = Vec::new();
        assert_eq!(c.read_to_end(&mut rest).unwrap(), 0);
    }
    assert!(
        stopping.elapsed() < Duration::from_millis(1400),
        "{:?}",
        stopping.elapsed()
    );
    let _ = r.child.wait();
}

/// Every way a request's body is read leaves the connection to the next
/// request: read whole before a backend is tried (a small length), after
/// `100 Continue`, streamed to the backend (chunked, and a length over the
/// 64 KiB read whole); and the router's own answer to a request read
/// whole keeps it too, as nginx's does. One connection serves them all.
#[test]
fn every_way_a_body_is_read_keeps_the_connection() {
    let (origins, r, dir) = setup(&[1, 1], "");
    let mut c = TcpStream::connect(r.proxy).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let d = dir.path().to_path_buf();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(8));
        eprintln!("{}", std::fs::read_to_string(d.join("router.log")).unwrap());
    });

    c.write_all(b"POST /small HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello")
        .unwrap();
    assert_eq!(response(&mut c).0, 200, "a body read whole");

    c.write_all(
        b"POST /continued HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n",
    )
    .unwrap();
    assert_eq!(response(&mut c).0, 100);
    c.write_all(b"hello").unwrap();
    assert_eq!(response(&mut c).0, 200, "a body after 100 Continue");

    c.write_all(
        b"POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    )
    .unwrap();
    assert_eq!(response(&mut c).0, 200, "a chunked body, streamed");

    let big = vec![b'x'; 200 * 1024];
    let head = format!(
        "POST /large HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        big.len()
    );
    c.write_all(head.as_bytes()).unwrap();
    c.write_all(&big).unwrap();
    assert_eq!(response(&mut c).0, 200, "a long body, streamed");

    // The router's own answers: no backend left to try.
    for o in &origins {
        o.kill();
    }
    for path in ["/own-1", "/own-2"] {
        let head = format!("POST {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello");
        c.write_all(head.as_bytes()).unwrap();
        assert_eq!(response(&mut c).0, 502, "{path}");
    }
}

/// A backend that answers chunked and keeps its connection: each
/// response reaches the client whole once its last chunk is read, well
/// before the 60 s `read_timeout_ms` (a body whose last chunk was the
/// last byte read used to wait for more until then, and the client got
/// no last chunk), and the client's connection and the backend's serve
/// the next request.
#[test]
fn a_chunked_answer_ends_at_its_last_chunk() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut byte = [0u8; 1];
                loop {
                    while !buf.ends_with(b"\r\n\r\n") {
                        if conn.read(&mut byte).unwrap_or(0) == 0 {
                            return;
                        }
                        buf.push(byte[0]);
                    }
                    buf.clear();
                    // The data and the last chunk in two writes, as a
                    // backend streaming its answer sends them.
                    let _ = conn.write_all(
                        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
                    );
                    std::thread::sleep(Duration::from_millis(20));
                    let _ = conn.write_all(b"0\r\n\r\n");
                }
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("router.toml");
    let proxy = any_port();
    std::fs::write(
        &conf,
        format!(
            "[server]\nlisten = [\"{proxy}\"]\n[admin]\nlisten = \"{}\"\nauth = false\n[health]\nenabled = false\n[[backends]]\naddress = \"{origin}\"\nweight = 1\n",
            any_port()
        ),
    )
    .unwrap();
    let r = start_router(&conf);
    let mut c = TcpStream::connect(r.proxy).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    for round in 0..3 {
        c.write_all(b"GET /chunked HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut raw = Vec::new();
        let mut byte = [0u8; 1];
        while !raw.ends_with(b"\r\n0\r\n\r\n") {
            match c.read(&mut byte) {
                Ok(1) => raw.push(byte[0]),
                other => panic!("round {round}: {other:?} after {raw:?}"),
            }
        }
        let text = String::from_utf8_lossy(&raw);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), "{text}");
    }
}
