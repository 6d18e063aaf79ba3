//! What the router's HTTP/1 engine reads and writes itself, against a
//! live nginx doing the same: heads that end in bare line feeds with
//! bodies behind them, a request line that arrives a byte at a time,
//! heads still arriving when the server is stopped, `Expect:
//! 100-continue`, a WebSocket upgrade, and a dead backend asked twice on
//! one connection.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use common::diff::{pair, pair_over, parse_answers, Pair};
use common::echo::echo_origin;
use common::*;

/// Writes `bytes` on a new connection one byte per write (`TCP_NODELAY`:
/// one segment each), `pace` apart (a slow client: each byte its own
/// read), then reads until the server closes.
fn trickle(addr: SocketAddr, bytes: &[u8], pace: Duration) -> Vec<(u16, String)> {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    for byte in bytes.chunks(1) {
        c.write_all(byte).unwrap();
        if !pace.is_zero() {
            std::thread::sleep(pace);
        }
    }
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    parse_answers(&out)
}

/// One response off a kept-alive connection (its head and its
/// `Content-Length` body): its status, 0 when the connection closed first.
fn one_response(c: &mut TcpStream) -> u16 {
    let mut raw = Vec::new();
    let mut byte = [0u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        if c.read(&mut byte).unwrap_or(0) == 0 {
            return 0;
        }
        raw.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    let mut body = vec![0u8; len];
    if c.read_exact(&mut body).is_err() {
        return 0;
    }
    head[9..12].parse().unwrap_or(0)
}

/// A process's CPU time so far, all its threads, in seconds: the
/// scheduler's nanosecond count (`/proc/PID/task/*/schedstat`), not the
/// 10 ms ticks of `/proc/PID/stat`.
fn cpu_seconds(pid: u32) -> f64 {
    let mut ns = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        if let Ok(s) = std::fs::read_to_string(task.path().join("schedstat")) {
            ns += s
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    ns as f64 / 1e9
}

#[test]
fn heads_ending_in_bare_line_feeds_carry_their_bodies() {
    let p = pair();
    let body = "b".repeat(40_000);
    for ending in ["\n\r\n", "\n\n"] {
        let bytes = format!(
            "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 40000{ending}{body}GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        );
        let nginx = common::diff::answers(p.nginx.addr, bytes.as_bytes());
        assert_eq!(
            nginx.iter().map(|a| a.0).collect::<Vec<_>>(),
            [200, 200],
            "{nginx:?}"
        );
        let router = common::diff::answers(p.router.proxy, bytes.as_bytes());
        assert_eq!(router, nginx, "head ending {ending:?}");
    }
}

/// A long request line sent one byte per write is answered as nginx
/// answers it, and the router's CPU for it grows with its length, not its
/// square: per byte, a line 8 times longer costs about the same. The
/// bytes are paced so that each is a read of its own in both (else how
/// many bytes a read finds, which varies, would be measured).
#[test]
fn a_request_line_sent_a_byte_at_a_time_is_read_in_linear_time() {
    let origins: Vec<SocketAddr> = (0..4).map(|_| echo_origin()).collect();
    let p = pair_over(
        origins,
        "max_header_bytes = 131072",
        "large_client_header_buffers 4 128k;",
        "",
    );
    let pid = p.router.child.id();
    let mut per_byte = Vec::new();
    for len in [4_000, 32_000] {
        let target = format!("/{}", "a".repeat(len));
        let req = format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        let nginx = trickle(p.nginx.addr, req.as_bytes(), Duration::ZERO);
        assert_eq!(nginx.first().map(|a| a.0), Some(200), "{len}");
        let before = cpu_seconds(pid);
        let router = trickle(p.router.proxy, req.as_bytes(), Duration::from_micros(20));
        per_byte.push((cpu_seconds(pid) - before) / req.len() as f64);
        assert_eq!(router, nginx, "a {len}-byte target");
    }
    // Linear: the same per byte, give or take a shared machine; a rescan
    // of the line per read would add the line's average length per byte.
    let ratio = per_byte[1] / per_byte[0].max(1e-9);
    eprintln!("router CPU per byte of a paced line: {per_byte:?}, x{ratio:.2}");
    assert!(ratio < 2.0, "CPU per byte {per_byte:?}: x{ratio:.2}");
}

/// A backend that writes its response head (`n` bytes of fields) one
/// byte per write, `pace` apart, then a 2-byte body.
fn trickling_origin(n: usize, pace: Duration) -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            c.set_nodelay(true).unwrap();
            let mut req = Vec::new();
            let mut byte = [0u8; 1];
            while !req.ends_with(b"\r\n\r\n") {
                if c.read(&mut byte).unwrap_or(0) == 0 {
                    break;
                }
                req.push(byte[0]);
            }
            let mut head = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n".to_vec();
            while head.len() < n {
                head.extend_from_slice(
                    format!("x-pad-{}: {}\r\n", head.len(), "p".repeat(40)).as_bytes(),
                );
            }
            head.extend_from_slice(b"\r\nok");
            for b in head.chunks(1) {
                if c.write_all(b).is_err() {
                    break;
                }
                std::thread::sleep(pace);
            }
        }
    });
    addr
}

/// A response head a backend sends one byte per write is read
/// incrementally, as a request head is: the router's CPU per byte of a
/// head 8 times longer is about the same, not 8 times more.
#[test]
fn a_response_head_sent_a_byte_at_a_time_is_read_in_linear_time() {
    let mut per_byte = Vec::new();
    for len in [4_000, 32_000] {
        let origin = trickling_origin(len, Duration::from_micros(20));
        let (r, _dir) = router_over(&[origin], "", "enabled = false");
        let pid = r.child.id();
        let before = cpu_seconds(pid);
        let resp = get(&r, "/slow-head");
        per_byte.push((cpu_seconds(pid) - before) / len as f64);
        assert_eq!((resp.status, resp.body.as_str()), (200, "ok"));
    }
    let ratio = per_byte[1] / per_byte[0].max(1e-9);
    eprintln!("router CPU per byte of a trickled response head: {per_byte:?}, x{ratio:.2}");
    assert!(ratio < 2.0, "CPU per byte {per_byte:?}: x{ratio:.2}");
}

/// Heads still arriving, in pieces, when nginx and the router are told
/// to stop gracefully are read whole and answered by both.
#[test]
fn heads_split_over_many_writes_during_a_graceful_stop_are_answered() {
    let origins: Vec<SocketAddr> = (0..4).map(|_| echo_origin()).collect();
    let servers: String = origins.iter().map(|o| format!("server {o}; ")).collect();
    let nginx = common::tls::Nginx::start_with_master(|addr| {
        format!(
            "upstream o {{ hash $request_uri consistent; {servers}}}
  server {{ listen {addr}; location = /status {{ stub_status; }}
    location / {{ proxy_pass http://o; proxy_http_version 1.1; proxy_set_header Connection \"\"; }} }}"
        )
    });
    let (router, _dir, _) = router_from(|proxy, admin, _| {
        config_with(&origins, proxy, admin, "", "enabled = false")
            .replace("grace_period_seconds = 0\n", "grace_period_seconds = 5\n")
    });
    let head = |i: usize| {
        format!("GET /stop/{i}?q={i} HTTP/1.1\r\nHost: x\r\nX-Pad: abcdefghij\r\nConnection: close\r\n\r\n")
    };
    let run = |addr: SocketAddr, reading: &dyn Fn() -> usize, stop: &dyn Fn()| {
        let mut conns: Vec<TcpStream> = (0..20)
            .map(|i| {
                let mut c = TcpStream::connect(addr).unwrap();
                c.set_nodelay(true).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                c.write_all(&head(i).as_bytes()[..7]).unwrap();
                c
            })
            .collect();
        wait_for(Duration::from_secs(10), || reading() >= 20);
        stop();
        // The rest in pieces of 9 bytes, every connection in turn.
        let rest: Vec<Vec<u8>> = (0..20)
            .map(|i| head(i).into_bytes()[7..].to_vec())
            .collect();
        for k in (0..rest[0].len()).step_by(9) {
            for (c, r) in conns.iter_mut().zip(&rest) {
                let _ = c.write_all(&r[k..(k + 9).min(r.len())]);
            }
        }
        conns
            .iter_mut()
            .map(|c| {
                let mut out = Vec::new();
                let _ = c.read_to_end(&mut out);
                parse_answers(&out)
            })
            .collect::<Vec<_>>()
    };
    let nginx_addr = nginx.addr;
    let nginx_reading = || {
        let s = request(nginx_addr, "GET", "/status", &[], "").unwrap().body;
        s.split("Reading: ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let nginx_pid = nginx.child_id();
    let from_nginx = run(nginx.addr, &nginx_reading, &|| {
        Command::new("kill")
            .args(["-QUIT", &nginx_pid.to_string()])
            .status()
            .unwrap();
    });
    let router_pid = router.child.id();
    let from_router = run(
        router.proxy,
        &|| sample(&metrics_text(&router), "ketama_client_connections") as usize,
        &|| {
            Command::new("kill")
                .args(["-TERM", &router_pid.to_string()])
                .status()
                .unwrap();
        },
    );
    assert!(
        from_nginx.iter().all(|a| a.len() == 1 && a[0].0 == 200),
        "{from_nginx:?}"
    );
    assert_eq!(from_router, from_nginx);
}

/// `Expect: 100-continue`: both answer `100 Continue` themselves before
/// the body is sent, and the origin gets the request without `Expect`.
#[test]
fn expect_100_continue_is_answered_by_the_proxy() {
    let p = pair();
    let exchange = |addr: SocketAddr| -> (String, Vec<(u16, String)>) {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(b"POST /upload/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut interim = Vec::new();
        let mut byte = [0u8; 1];
        while !interim.ends_with(b"\r\n\r\n") {
            assert_eq!(c.read(&mut byte).unwrap(), 1, "{interim:?}");
            interim.push(byte[0]);
        }
        c.write_all(b"hello").unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        (
            String::from_utf8_lossy(&interim).into_owned(),
            parse_answers(&out),
        )
    };
    let (n_interim, nginx) = exchange(p.nginx.addr);
    let (r_interim, router) = exchange(p.router.proxy);
    assert_eq!(n_interim, "HTTP/1.1 100 Continue\r\n\r\n");
    assert_eq!(r_interim, n_interim);
    assert!(!nginx[0].1.contains("+expect"), "{nginx:?}");
    assert_eq!(router, nginx);
}

/// A WebSocket origin: the `101` and its first frame (`hello from
/// PORT`) in one write, then an echo of every message.
fn websocket_origin() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if c.read(&mut byte).unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let text = String::from_utf8_lossy(&head).to_string();
                let key = text
                    .lines()
                    .find_map(|l| {
                        let (n, v) = l.split_once(':')?;
                        n.eq_ignore_ascii_case("sec-websocket-key")
                            .then(|| v.trim().to_string())
                    })
                    .unwrap_or_default();
                let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
                let hello = format!("hello from {}", addr.port());
                let mut out = format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n").into_bytes();
                out.extend_from_slice(&[0x81, hello.len() as u8]);
                out.extend_from_slice(hello.as_bytes());
                if c.write_all(&out).is_err() {
                    return;
                }
                let mut ws = tungstenite::WebSocket::from_raw_socket(
                    c,
                    tungstenite::protocol::Role::Server,
                    None,
                );
                while let Ok(m) = ws.read() {
                    if m.is_close() || ws.send(m).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

#[test]
fn a_websocket_upgrade_is_tunnelled() {
    let origins: Vec<SocketAddr> = (0..4).map(|_| websocket_origin()).collect();
    let p: Pair = pair_over(
        origins,
        "",
        "map $http_upgrade $upgrade_to { default upgrade; '' \"\"; }",
        "proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection $upgrade_to;",
    );
    let talk = |addr: SocketAddr, path: &str| -> Vec<String> {
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (mut ws, resp) = tungstenite::client::client(format!("ws://x{path}"), tcp).unwrap();
        assert_eq!(resp.status(), 101);
        let mut got = vec![ws.read().unwrap().into_text().unwrap().to_string()];
        for m in ["one", "two"] {
            ws.send(tungstenite::Message::text(m)).unwrap();
            got.push(ws.read().unwrap().into_text().unwrap().to_string());
        }
        let _ = ws.close(None);
        got
    };
    for path in ["/chat/1", "/chat/2", "/live?room=7"] {
        let nginx = talk(p.nginx.addr, path);
        assert_eq!(nginx[1..], ["one", "two"]);
        assert_eq!(talk(p.router.proxy, path), nginx, "{path}");
    }
}

/// A backend that refuses connections, asked twice on one connection:
/// two 502s, and the connection is kept between them.
#[test]
fn a_dead_backend_answers_502_twice_on_one_connection() {
    let (_hold, dead) = refusing_addr();
    let p = pair_over(vec![dead], "", "", "");
    let twice = |addr: SocketAddr| -> Vec<u16> {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        (0..2)
            .map(|i| {
                write!(c, "GET /dead/{i} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                one_response(&mut c)
            })
            .collect()
    };
    let nginx = twice(p.nginx.addr);
    assert_eq!(nginx, [502, 502]);
    assert_eq!(twice(p.router.proxy), nginx);
}

/// An upgraded connection where nothing moves either way is closed after
/// the backend read timeout, as nginx closes one after
/// `proxy_read_timeout`.
#[test]
fn an_idle_tunnel_is_closed_after_the_read_timeout() {
    let origins: Vec<SocketAddr> = (0..2).map(|_| websocket_origin()).collect();
    let p: Pair = pair_over(
        origins,
        "read_timeout_ms = 600",
        "map $http_upgrade $upgrade_to { default upgrade; '' \"\"; }",
        "proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection $upgrade_to; proxy_read_timeout 600ms;",
    );
    for addr in [p.nginx.addr, p.router.proxy] {
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let (mut ws, _) = tungstenite::client::client("ws://x/quiet", tcp).unwrap();
        assert!(ws.read().unwrap().is_text());
        let t = std::time::Instant::now();
        // The next read ends with the connection, not with a message.
        assert!(!matches!(ws.read(), Ok(tungstenite::Message::Text(_))));
        let idle = t.elapsed();
        assert!(
            idle >= Duration::from_millis(500) && idle < Duration::from_secs(5),
            "{addr}: {idle:?}"
        );
    }
}
