//! Clients that stop reading: they must cost neither the backends their
//! place in rotation (only a backend's own failures count against it, by
//! nginx's rule) nor the router a connection held forever
//! (`send_timeout_ms`, on HTTP/1 and HTTP/2), while a slow but steady
//! reader is served to the end. The origins are real nginx instances
//! serving a 20 MB file.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::tls::Nginx;
use common::*;
use ketama::{Layout, Node, RingBuilder};

const BIG: usize = 20 << 20;

/// nginx serving `/big/*` as one 20 MB file and `ok` for everything else,
/// giving up on a reader after `send_timeout`.
fn origin(dir: &std::path::Path, send_timeout: &str) -> Nginx {
    let file = dir.join("big.bin");
    if !file.exists() {
        std::fs::write(&file, vec![b'x'; BIG]).unwrap();
    }
    let root = dir.display().to_string();
    Nginx::start(|addr| {
        format!(
            "send_timeout {send_timeout};
  server {{ listen {addr}; error_log {root}/timeouts.log info;
    location /big/ {{ root {root}; try_files /big.bin =404; }}
    location / {{ return 200 \"ok\\n\"; }} }}"
        )
    })
}

/// Paths `/big/N` that the router's ring (nginx scheme, compact layout)
/// sends to each backend, `per` of each.
fn paths_per_backend(backends: &[SocketAddr], per: usize) -> Vec<String> {
    let ring = RingBuilder::new()
        .layout(Layout::Compact)
        .build(
            backends
                .iter()
                .map(|b| Node::new(b.to_string(), 1))
                .collect(),
        )
        .unwrap();
    let mut out = Vec::new();
    for b in backends {
        let mine = (0..)
            .map(|i| format!("/big/{i}"))
            .filter(|p| ring.node(p.as_bytes()).unwrap().server() == b.to_string())
            .take(per);
        out.extend(mine);
    }
    out
}

/// A connection with a 4 KiB receive buffer that sends `GET path` and
/// never reads.
fn non_reader(proxy: SocketAddr, path: &str) -> TcpStream {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(&proxy.into()).unwrap();
    let mut c: TcpStream = s.into();
    write!(c, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    c
}

/// Bytes read until the connection ends (EOF or reset), within `limit`
/// between two reads.
fn drain(c: &mut TcpStream, limit: Duration) -> usize {
    drain_to_end(c, limit).0
}

/// [`drain`], and whether the connection ended (the router closed it),
/// rather than the reads waiting out `limit` on a connection still open.
fn drain_to_end(c: &mut TcpStream, limit: Duration) -> (usize, bool) {
    c.set_read_timeout(Some(limit)).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0;
    loop {
        match c.read(&mut buf) {
            Ok(0) => return (n, true),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (n, false)
            }
            Err(_) => return (n, true),
            Ok(k) => n += k,
        }
    }
}

fn client_errors(r: &RouterProc, reason: &str) -> f64 {
    sample(
        &metrics_text(r),
        &format!("ketama_client_errors_total{{reason=\"{reason}\"}}"),
    )
}

#[test]
fn clients_that_stop_reading_do_not_take_backends_out_of_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let origins = [origin(dir.path(), "3s"), origin(dir.path(), "3s")];
    let addrs: Vec<SocketAddr> = origins.iter().map(|o| o.addr).collect();
    // The router's defaults: max_fails = 1, send_timeout_ms = 60000.
    let (r, rdir) = router_over(&addrs, "", "");
    let mut held: Vec<TcpStream> = paths_per_backend(&addrs, 3)
        .iter()
        .map(|p| non_reader(r.proxy, p))
        .collect();
    // Each origin gives up on the router after its send_timeout (the
    // router stopped reading it because its client did not read)...
    wait_for(Duration::from_secs(20), || timeouts_logged(dir.path()) >= 6);
    // ...and once the clients read again, the router finds each response
    // cut short: the backend's connection ended after its head.
    for c in &mut held {
        let got = drain(c, Duration::from_secs(10));
        assert!(got < BIG, "{got} bytes: the response was cut short");
    }
    // The router closed each client's connection after it saw the cut:
    // the backends are still in rotation, and serve everyone else.
    for b in status_json(&r)["backends"].as_array().unwrap() {
        assert_eq!(b["healthy"], true, "{b}");
    }
    let statuses: Vec<u16> = (0..40)
        .map(|i| get(&r, &format!("/other/{i}")).status)
        .collect();
    assert_eq!(statuses, vec![200; 40]);
    let log = std::fs::read_to_string(rdir.path().join("router.log")).unwrap();
    assert!(!log.contains("backend failed"), "{log}");
    wait_for(Duration::from_secs(10), || {
        sample(
            &metrics_text(&r),
            "ketama_upstream_errors_total{reason=\"closed_after_head\"}",
        ) >= 6.0
    });
    let m = metrics_text(&r);
    for a in &addrs {
        let errors = format!("ketama_requests_total{{backend=\"{a}\",status=\"error\"}}");
        assert_eq!(sample(&m, &errors), 0.0, "{a}");
    }
}

/// Readers the origins in `dir` gave up on (their `send_timeout`).
fn timeouts_logged(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("timeouts.log")).map_or(0, |t| t.matches("timed out").count())
}

#[test]
fn an_http1_client_that_stops_reading_is_closed_after_send_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let o = origin(dir.path(), "60s");
    let (r, _d) = router_over(&[o.addr], "send_timeout_ms = 1000", "");
    let start = Instant::now();
    let mut c = non_reader(r.proxy, "/big/1");
    wait_for(Duration::from_secs(5), || {
        client_errors(&r, "send_timeout") == 1.0
    });
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(1000) && took < Duration::from_millis(2500),
        "{took:?}"
    );
    // Closed, not merely stalled: the router's send queue drains into
    // this reader, then the connection ends (a kept connection would
    // leave the reads waiting, its response cut short mid-body).
    let (got, closed) = drain_to_end(&mut c, Duration::from_secs(5));
    assert!(closed, "the connection is still open after {got} bytes");
    assert!(got < BIG, "the connection was closed: {got} of {BIG} bytes");
    // The origin is not blamed for it.
    assert_eq!(status_json(&r)["backends"][0]["healthy"], true);
}

#[test]
fn a_slow_but_steady_reader_is_served_whole() {
    let dir = tempfile::tempdir().unwrap();
    let o = origin(dir.path(), "60s");
    // 2 s, not 1: over loopback the kernel hands data over in buffers of
    // up to 64 KiB (segmentation offload) and frees one only once it is
    // read whole, so a reader at 64 KiB/s takes bytes (acknowledges, opens
    // its window) about once a second: a 1 s timeout would sit on that
    // step, for nginx's `send_timeout` as for this one. A timeout on the
    // whole write call (Pingora's) would still end this reader: each of
    // the router's writes is 256 KiB, four seconds at this rate.
    let (r, _d) = router_over(&[o.addr], "send_timeout_ms = 2000", "");
    // A client whose kernel takes bytes as its reader does. TCP reopens a
    // closed receive window only once a sixteenth of the buffer (or a
    // segment) is free: with an autotuned buffer of megabytes, or loopback's
    // 64 KiB segments, a reader at this rate would take no byte for
    // seconds. So: an internet client's segment size, a 64 KiB buffer.
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_tcp_mss(1460).unwrap();
    s.set_recv_buffer_size(64 << 10).unwrap();
    s.connect(&r.proxy.into()).unwrap();
    let mut c: TcpStream = s.into();
    write!(
        c,
        "GET /big/1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // 64 KiB/s for three send timeouts: 16 KiB every 250 ms.
    let mut buf = vec![0u8; 16 << 10];
    let mut got = 0;
    let slow_until = Instant::now() + Duration::from_secs(6);
    let mut next = Instant::now();
    while Instant::now() < slow_until {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {got} bytes");
        got += n;
        next += Duration::from_millis(250);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    got += drain(&mut c, Duration::from_secs(10));
    assert!(got > BIG, "{got} bytes: the whole object and its head");
    assert_eq!(client_errors(&r, "send_timeout"), 0.0);
}

#[test]
fn an_http2_stream_whose_client_stops_reading_is_reset_and_the_connection_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let o = origin(dir.path(), "60s");
    let (r, _d) = router_over(&[o.addr], "h2c = true\nsend_timeout_ms = 1000", "");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(r.proxy).await.unwrap();
        // The connection's window is wide open; each stream's stays at the
        // default 64 KiB unless its reader gives capacity back.
        let (client, conn) = h2::client::Builder::new()
            .initial_connection_window_size(1 << 30)
            .handshake::<_, bytes::Bytes>(tcp)
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut client = client.ready().await.unwrap();
        let req = |path: &str| {
            http::Request::get(format!("http://t{path}"))
                .body(())
                .unwrap()
        };
        let start = Instant::now();
        let (stalled, _) = client.send_request(req("/big/1"), true).unwrap();
        let stalled = stalled.await.unwrap();
        assert_eq!(stalled.status(), 200);
        let mut stalled = stalled.into_body();
        // Read what the window allows, never giving capacity back, until
        // the router resets the stream.
        let mut held = 0;
        let reset = loop {
            match stalled.data().await {
                Some(Ok(d)) => held += d.len(),
                Some(Err(e)) => break e,
                None => panic!("the stream ended after {held} bytes"),
            }
        };
        let took = start.elapsed();
        assert!(reset.is_reset(), "{reset:?}");
        assert!(
            took >= Duration::from_millis(1000) && took < Duration::from_millis(2500),
            "{took:?}"
        );
        assert!(held < BIG);
        // The connection and its other streams go on.
        let mut client = client.ready().await.unwrap();
        let (resp, _) = client.send_request(req("/small"), true).unwrap();
        let resp = resp.await.unwrap();
        assert_eq!(resp.status(), 200);
        let mut body = resp.into_body();
        let mut text = Vec::new();
        while let Some(d) = body.data().await {
            let d = d.unwrap();
            body.flow_control().release_capacity(d.len()).unwrap();
            text.extend_from_slice(&d);
        }
        assert_eq!(text, b"ok\n");
    });
    wait_for(Duration::from_secs(5), || {
        client_errors(&r, "send_timeout") == 1.0
    });
    assert_eq!(status_json(&r)["backends"][0]["healthy"], true);
}

/// A slow TLS reader of a 5 MB response gets every byte, 20 times of 20
/// on kept-alive connections, and then at a close: rustls takes bytes the
/// socket cannot yet, so the router flushes after a response's last write
/// (without it, here, the second response of every connection lost about
/// 64 KiB at its end, left in rustls' buffer), and ends a connection with
/// `close_notify`.
#[test]
fn a_slow_tls_reader_gets_every_byte() {
    use common::tls::{tls_section, Ca};
    const SIZE: usize = 5 << 20;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("five.bin"), vec![b'x'; SIZE]).unwrap();
    let root = dir.path().display().to_string();
    let o = Nginx::start(|addr| {
        format!(
            "server {{ listen {addr}; location / {{ root {root}; try_files /five.bin =404; }} }}"
        )
    });
    let ca = Ca::new(dir.path(), "ca");
    let cert = ca.issue("a", &["a.test"], 30);
    let (r, _rdir, _) = router_from(|proxy, admin, _| {
        format!(
            "{}\n{}",
            config_with(&[o.addr], proxy, admin, "", "enabled = false"),
            tls_section(any_port(), &[&cert], "")
        )
    });
    let tls = r.listener("tls.listen[0]");
    // A small receive buffer: the router's writes find the socket full.
    let mut c = slow_tls_client(tls, &ca.cert);
    let mut whole = 0;
    for i in 0..20 {
        let (got, _) = slow_get(&mut c, &format!("/f/{i}"), false);
        if got == SIZE {
            whole += 1;
        } else {
            // A cut response leaves the connection unusable: a new one.
            eprintln!("trial {i}: {got} bytes of {SIZE}");
            c = slow_tls_client(tls, &ca.cert);
        }
    }
    assert_eq!(whole, 20, "responses received whole, of 20");
    let (got, clean) = slow_get(&mut c, "/f/last", true);
    assert_eq!((got, clean), (SIZE, true), "a close ends with close_notify");
}

fn slow_tls_client(addr: SocketAddr, ca: &std::path::Path) -> common::tls::Client {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_recv_buffer_size(16 << 10).unwrap();
    s.connect(&addr.into()).unwrap();
    common::tls::client_over(s.into(), "a.test", ca, &["http/1.1"]).unwrap()
}

/// `GET path` on the TLS connection, its body read slowly (32 KiB, then
/// 1 ms): the body bytes received (a stall of 3 s ends it), and, with
/// `close`, whether the connection then ended with `close_notify`.
fn slow_get(c: &mut common::tls::Client, path: &str, close: bool) -> (usize, bool) {
    let (tcp, conn) = c;
    tcp.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut s = rustls::Stream::new(conn, tcp);
    let connection = if close { "close" } else { "keep-alive" };
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: a.test\r\nConnection: {connection}\r\n\r\n"
    )
    .unwrap();
    let mut buf = vec![0u8; 16 << 10];
    let mut head = Vec::new();
    let (mut body, mut len) = (0usize, None);
    loop {
        let n = match s.read(&mut buf) {
            Ok(0) => return (body, close && len == Some(body)),
            Ok(n) => n,
            Err(_) => return (body, false),
        };
        let mut data = &buf[..n];
        if len.is_none() {
            head.extend_from_slice(data);
            let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let text = String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
            len = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok());
            let from = end + 4 - (head.len() - n);
            data = &buf[from..n];
        }
        body += data.len();
        if !close && Some(body) == len {
            return (body, false);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
