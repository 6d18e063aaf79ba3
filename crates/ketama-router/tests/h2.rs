//! HTTP/2's limits, by raw frames and curl: the head deadline per header
//! block, the idle time, the decoded header cap, and a burst of opened and
//! at once reset streams (rapid reset, CVE-2023-44487) while other clients
//! are served.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::tls::curl;
use common::*;
use ketama_router::origin::Origin;

use common::h2raw::{connect as preface, frame, PREFACE};

/// Reads until the router closes the connection; how long that took.
fn closed_after(c: &mut TcpStream, start: Instant) -> Duration {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b = [0u8; 4096];
    loop {
        match c.read(&mut b) {
            Ok(0) | Err(_) => return start.elapsed(),
            Ok(_) => {}
        }
    }
}

fn h2c_router(server: &str) -> (Vec<Origin>, RouterProc, tempfile::TempDir) {
    let origins: Vec<Origin> = (0..2).map(|i| Origin::start(i).unwrap()).collect();
    let addrs: Vec<_> = origins.iter().map(|o| o.addr()).collect();
    let (r, dir) = router_over(&addrs, &format!("h2c = true\n{server}"), "");
    (origins, r, dir)
}

#[test]
fn a_header_block_must_arrive_within_client_header_timeout() {
    let (_o, r, _d) = h2c_router("client_header_timeout_ms = 400\nkeepalive_timeout_ms = 60000");
    // The preface, SETTINGS, then a HEADERS frame without END_HEADERS and
    // no CONTINUATION: the block never completes.
    let mut c = preface(r.proxy);
    let start = Instant::now();
    // Flags 0: neither END_HEADERS nor END_STREAM.
    c.write_all(&frame(0x1, 0, 1, &[0x82])).unwrap();
    let took = closed_after(&mut c, start);
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_secs(3),
        "{took:?}"
    );
    wait_for(Duration::from_secs(5), || {
        sample(
            &metrics_text(&r),
            "ketama_client_errors_total{reason=\"header_timeout\"}",
        ) == 1.0
    });
    // Half a preface, then nothing: the same deadline.
    let mut c = TcpStream::connect(r.proxy).unwrap();
    let start = Instant::now();
    c.write_all(&PREFACE[..10]).unwrap();
    let took = closed_after(&mut c, start);
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_secs(3),
        "{took:?}"
    );
    wait_for(Duration::from_secs(5), || {
        sample(
            &metrics_text(&r),
            "ketama_client_errors_total{reason=\"header_timeout\"}",
        ) == 2.0
    });
    // A connection that finished its preface and sends nothing is idle,
    // not late: it stays open past the head deadline.
    let mut c = preface(r.proxy);
    c.set_read_timeout(Some(Duration::from_millis(1200)))
        .unwrap();
    let start = Instant::now();
    let mut b = [0u8; 4096];
    while start.elapsed() < Duration::from_millis(1000) {
        match c.read(&mut b) {
            Ok(0) => panic!("closed after {:?}", start.elapsed()),
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                break
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(start.elapsed() >= Duration::from_millis(1000));
}

#[test]
fn the_router_announces_its_stream_limit() {
    let (_o, r, _d) = h2c_router("h2_max_concurrent_streams = 7");
    let mut c = preface(r.proxy);
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // The server's preface is a SETTINGS frame: 6-byte (id, value) pairs.
    let mut head = [0u8; 9];
    c.read_exact(&mut head).unwrap();
    assert_eq!(head[3], 0x4, "SETTINGS first");
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut body = vec![0u8; len];
    c.read_exact(&mut body).unwrap();
    let settings: Vec<(u16, u32)> = body
        .chunks(6)
        .map(|p| {
            (
                u16::from_be_bytes([p[0], p[1]]),
                u32::from_be_bytes([p[2], p[3], p[4], p[5]]),
            )
        })
        .collect();
    assert!(
        settings.contains(&(0x3, 7)),
        "MAX_CONCURRENT_STREAMS: {settings:?}"
    );
    assert!(
        settings.contains(&(0x6, 32 * 1024)),
        "MAX_HEADER_LIST_SIZE = max_header_bytes: {settings:?}"
    );
    // Many streams at once, up to the limit on each of 4 connections, all
    // answered. (A client that opens more before it reads the SETTINGS
    // gets REFUSED_STREAM for the rest, which it may retry.)
    let out = std::process::Command::new("h2load")
        .args([
            "-n",
            "2000",
            "-c",
            "4",
            "-m",
            "7",
            &format!("http://{}/many", r.proxy),
        ])
        .output()
        .expect("h2load (scripts/setup.sh installs nghttp2-client)");
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.contains("2000 succeeded") && out.contains("status codes: 2000 2xx"),
        "{out}"
    );
}

#[test]
fn an_idle_connection_closes_after_keepalive_timeout() {
    let (_o, r, _d) = h2c_router("keepalive_timeout_ms = 500");
    let mut c = preface(r.proxy);
    let took = closed_after(&mut c, Instant::now());
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

#[test]
fn the_decoded_header_list_is_capped_by_max_header_bytes() {
    let (_o, r, _d) = h2c_router("max_header_bytes = 4096");
    let url = format!("http://{}/big", r.proxy);
    let fits = format!("x-fits: {}", "a".repeat(2000));
    let code = curl(&[
        "--http2-prior-knowledge",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        &fits,
        &url,
    ]);
    assert_eq!(code, "200");
    let big = format!("x-big: {}", "a".repeat(8000));
    let code = curl(&[
        "--http2-prior-knowledge",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        &big,
        &url,
    ]);
    assert_ne!(code, "200", "an 8 KB header over a 4 KB cap");
    // The router serves on.
    let code = curl(&[
        "--http2-prior-knowledge",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &url,
    ]);
    assert_eq!(code, "200");
}

/// How each stream of a burst ends.
#[derive(Clone, Copy, Debug)]
enum Burst {
    /// The client resets it (rapid reset, CVE-2023-44487).
    Reset,
    /// The client makes the server reset it (MadeYouReset, CVE-2025-8671).
    Provoke,
}

/// Opens streams and resets each at once (HEADERS then RST_STREAM, in
/// batches of 100, raw frames so nothing is elided on the client's side),
/// on connection after connection, for `for_how_long`; returns (streams
/// sent, connections the router ended).
fn rapid_reset(addr: std::net::SocketAddr, for_how_long: Duration, burst: Burst) -> (u64, u64) {
    // GET / with :authority "x", as HPACK: three indexed fields and one
    // literal with an indexed name.
    let block = [0x82, 0x86, 0x84, 0x41, 0x01, b'x'];
    let end = Instant::now() + for_how_long;
    let (mut streams, mut ended) = (0u64, 0u64);
    while Instant::now() < end {
        let mut c = preface(addr);
        let mut reader = c.try_clone().unwrap();
        let closed = std::thread::spawn(move || {
            let mut b = [0u8; 16384];
            while matches!(reader.read(&mut b), Ok(n) if n > 0) {}
        });
        let mut id = 1u32;
        let ok = loop {
            if Instant::now() >= end || id > 2_000_000 {
                break false;
            }
            let mut batch = Vec::with_capacity(100 * 32);
            for _ in 0..100 {
                batch.extend(frame(0x1, 0x5, id, &block));
                batch.extend(match burst {
                    // RST_STREAM(CANCEL): the client resets.
                    Burst::Reset => frame(0x3, 0, id, &8u32.to_be_bytes()),
                    // WINDOW_UPDATE of 0 on the stream: a stream error the
                    // server must answer with its own reset (MadeYouReset).
                    Burst::Provoke => frame(0x8, 0, id, &0u32.to_be_bytes()),
                });
                id += 2;
            }
            if c.write_all(&batch).is_err() {
                break true;
            }
            streams += 100;
            if closed.is_finished() {
                break true;
            }
        };
        if ok {
            ended += 1;
        }
        let _ = c.shutdown(std::net::Shutdown::Both);
        let _ = closed.join();
    }
    (streams, ended)
}

#[test]
fn a_reset_burst_does_not_starve_other_clients() {
    reset_burst(Burst::Reset);
}

#[test]
fn a_burst_of_provoked_resets_does_not_starve_other_clients() {
    reset_burst(Burst::Provoke);
}

fn reset_burst(burst: Burst) {
    let (_o, r, _d) = h2c_router("");
    let pid = r.child.id();
    let cpu_before = cpu_seconds(pid);
    let proxy = r.proxy;
    let attack = std::thread::spawn(move || rapid_reset(proxy, Duration::from_secs(3), burst));
    // Meanwhile another client is served, each request promptly.
    let mut slowest = Duration::ZERO;
    for i in 0..30 {
        let t = Instant::now();
        let resp = get(&r, &format!("/other/{i}"));
        assert_eq!(resp.status, 200);
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    }
    let (streams, ended) = attack.join().unwrap();
    let cpu = cpu_seconds(pid) - cpu_before;
    eprintln!("{burst:?} burst: {streams} streams reset, {ended} connections ended by the router, router CPU {cpu:.2} s, slowest other request {slowest:?}");
    assert!(
        streams > 0 && ended > 0,
        "the router ends connections that only reset: {streams} / {ended}"
    );
    assert!(
        streams / ended.max(1) < 10_000,
        "a connection may reset a bounded number of streams: {streams} over {ended}"
    );
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
    assert!(cpu < 8.0, "router CPU {cpu:.2} s over a 3 s burst");
    // And it serves HTTP/2 afterwards.
    let code = curl(&[
        "--http2-prior-knowledge",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("http://{}/after", r.proxy),
    ]);
    assert_eq!(code, "200");
}

/// Reads frames for up to `limit` until `done` says so; each frame as
/// (type, flags, stream, payload) with when it arrived.
fn frames_until(
    c: &mut TcpStream,
    limit: Duration,
    mut done: impl FnMut(&[(u8, u8, u32, Vec<u8>, Instant)]) -> bool,
) -> Vec<(u8, u8, u32, Vec<u8>, Instant)> {
    let end = Instant::now() + limit;
    let (mut buf, mut out) = (Vec::new(), Vec::new());
    c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    while Instant::now() < end && !done(&out) {
        let mut b = [0u8; 16384];
        match c.read(&mut b) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&b[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("{e}"),
        }
        while buf.len() >= 9 {
            let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
            if buf.len() < 9 + len {
                break;
            }
            let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            out.push((
                buf[3],
                buf[4],
                stream,
                buf[9..9 + len].to_vec(),
                Instant::now(),
            ));
            buf.drain(..9 + len);
        }
    }
    out
}

#[test]
fn a_stalled_request_body_ends_its_stream_after_client_body_timeout() {
    let (_o, r, _d) = h2c_router("client_body_timeout_ms = 500\nkeepalive_timeout_ms = 60000");
    // curl uploads from a pipe that sends 3 bytes and then nothing for 3 s:
    // a 408 on that stream after the body timeout, as HTTP/1's answers.
    // (curl 7.88 ends only once its input ends, so the pipe closes after
    // the stall; the raw frames below time the answer.)
    let mut upload = std::process::Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "10",
            "--http2-prior-knowledge",
            "-T",
            "-",
        ])
        .args(["-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://{}/upload", r.proxy))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("curl");
    let mut stdin = upload.stdin.take().unwrap();
    let stall = std::thread::spawn(move || {
        stdin.write_all(b"abc").unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(Duration::from_secs(3));
    });
    let out = upload.wait_with_output().unwrap();
    stall.join().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "408",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_for(Duration::from_secs(5), || {
        sample(
            &metrics_text(&r),
            "ketama_client_errors_total{reason=\"body_timeout\"}",
        ) == 1.0
    });

    // By raw frames: the stalled stream ends, its connection and a later
    // stream on it do not.
    let mut c = preface(r.proxy);
    c.write_all(&frame(0x4, 0x1, 0, &[])).unwrap(); // ack the server's SETTINGS
                                                    // POST / :authority x, END_HEADERS but not END_STREAM, then 3 bytes.
    let post = [0x83, 0x86, 0x84, 0x41, 0x01, b'x'];
    c.write_all(&frame(0x1, 0x4, 1, &post)).unwrap();
    c.write_all(&frame(0x0, 0x0, 1, b"abc")).unwrap();
    let sent = Instant::now();
    let ended = |f: &[(u8, u8, u32, Vec<u8>, Instant)]| {
        f.iter()
            .any(|(t, flags, s, _, _)| *s == 1 && (*t == 0x3 || flags & 0x1 != 0))
    };
    let got = frames_until(&mut c, Duration::from_secs(5), |f| ended(f));
    let end = got
        .iter()
        .find(|(t, flags, s, _, _)| *s == 1 && (*t == 0x3 || flags & 0x1 != 0))
        .unwrap_or_else(|| panic!("stream 1 never ended: {:?}", got));
    let after = end.4 - sent;
    assert!(
        after >= Duration::from_millis(450) && after < Duration::from_secs(4),
        "{after:?}"
    );
    assert!(
        got.iter().any(|(t, _, s, _, _)| *s == 1 && *t == 0x1),
        "a response head on stream 1 before it ended: {got:?}"
    );
    assert!(
        !got.iter().any(|(t, _, _, _, _)| *t == 0x7),
        "no GOAWAY: {got:?}"
    );
    // GET / on stream 3 of the same connection is served.
    let get = [0x82, 0x86, 0x84, 0x41, 0x01, b'x'];
    c.write_all(&frame(0x1, 0x5, 3, &get)).unwrap();
    let got = frames_until(&mut c, Duration::from_secs(5), |f| {
        f.iter()
            .any(|(_, flags, s, _, _)| *s == 3 && flags & 0x1 != 0)
    });
    assert!(
        got.iter().any(|(t, _, s, _, _)| *s == 3 && *t == 0x1),
        "stream 3 answered: {got:?}"
    );
    wait_for(Duration::from_secs(5), || {
        sample(
            &metrics_text(&r),
            "ketama_client_errors_total{reason=\"body_timeout\"}",
        ) == 2.0
    });
}
