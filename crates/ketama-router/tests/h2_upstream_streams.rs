//! The router's HTTP/2 connections to `h2c` backends, against a raw
//! HTTP/2 backend written frame by frame here (so that it can refuse,
//! drain and limit as no library would on cue): a stream the backend
//! refuses (`REFUSED_STREAM`) or that its `GOAWAY` says it never processed
//! goes to the next backend whatever its method, and the backend is not
//! blamed; a backend's `SETTINGS_MAX_CONCURRENT_STREAMS` makes the router
//! open more connections instead of queueing streams behind the limit.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::h2raw::{self, frame, Reader, DATA, GOAWAY, HEADERS, PREFACE, RST_STREAM, SETTINGS};
use common::tls::Nginx;
use common::*;

/// What the raw backend does with each request.
#[derive(Clone, Copy)]
enum Mode {
    /// RST_STREAM REFUSED_STREAM.
    Refuse,
    /// GOAWAY with last stream 0: nothing processed.
    GoAway,
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` 1, and a 200 after `delay`.
    OneAtATime(Duration),
    /// A 200 head and a DATA frame, then RST_STREAM INTERNAL_ERROR.
    ResetAfterHead,
}

/// What the raw backend saw: connections, the router's acknowledgements
/// of its SETTINGS (the router knows its limits from then on), and
/// requests.
#[derive(Default)]
struct Seen {
    conns: AtomicUsize,
    acks: AtomicUsize,
    requests: AtomicUsize,
}

/// A raw HTTP/2 backend.
fn raw_backend(mode: Mode) -> (SocketAddr, Arc<Seen>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let count = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(c) = c else { return };
            count.conns.fetch_add(1, SeqCst);
            let seen = count.clone();
            std::thread::spawn(move || {
                let _ = serve(c, mode, &seen);
            });
        }
    });
    (addr, seen)
}

fn serve(mut c: TcpStream, mode: Mode, seen: &Seen) -> std::io::Result<()> {
    let mut preface = [0u8; 24];
    c.read_exact(&mut preface)?;
    assert_eq!(&preface[..], PREFACE);
    let settings = match mode {
        // SETTINGS_MAX_CONCURRENT_STREAMS (0x3) = 1.
        Mode::OneAtATime(_) => vec![0, 3, 0, 0, 0, 1],
        _ => vec![],
    };
    c.write_all(&frame(SETTINGS, 0, 0, &settings))?;
    loop {
        let mut head = [0u8; 9];
        c.read_exact(&mut head)?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (kind, flags) = (head[3], head[4]);
        let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        c.read_exact(&mut payload)?;
        if kind == SETTINGS && flags & 1 == 0 {
            c.write_all(&frame(SETTINGS, 1, 0, &[]))?;
        }
        if kind == SETTINGS && flags & 1 == 1 {
            seen.acks.fetch_add(1, SeqCst);
        }
        if kind != HEADERS {
            continue;
        }
        seen.requests.fetch_add(1, SeqCst);
        match mode {
            Mode::Refuse => c.write_all(&frame(RST_STREAM, 0, stream, &7u32.to_be_bytes()))?,
            Mode::GoAway => {
                let mut p = 0u32.to_be_bytes().to_vec();
                p.extend(0u32.to_be_bytes());
                c.write_all(&frame(GOAWAY, 0, 0, &p))?;
            }
            Mode::ResetAfterHead => {
                c.write_all(&frame(HEADERS, 0x4, stream, &[0x88]))?;
                c.write_all(&frame(DATA, 0, stream, b"part"))?;
                c.write_all(&frame(RST_STREAM, 0, stream, &2u32.to_be_bytes()))?;
            }
            Mode::OneAtATime(delay) => {
                // Answered later, the connection read on meanwhile:
                // `:status 200` (static table entry 8), END_STREAM and
                // END_HEADERS.
                let mut w = c.try_clone()?;
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    let _ = w.write_all(&frame(HEADERS, 0x5, stream, &[0x88]));
                });
            }
        }
    }
}

/// An nginx speaking h2c (prior knowledge), answering `ok` to everything.
fn h2c_nginx() -> Nginx {
    Nginx::start(|addr| {
        format!("server {{ listen {addr} http2; location / {{ return 200 \"ok\\n\"; }} }}")
    })
}

fn router(backends: &[SocketAddr], dir: &std::path::Path, extra: &str) -> RouterProc {
    let (proxy, admin) = (any_port(), any_port());
    let mut s = format!(
        "[server]\nlisten = [\"{proxy}\"]\nh2c = true\ngrace_period_seconds = 0\nretries = 2\n{extra}\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[health]\nenabled = false\n\n[access_log]\npath = \"{}\"\nformat = \"json\"\n",
        dir.join("access.log").display()
    );
    for b in backends {
        s += &format!("\n[[backends]]\naddress = \"{b}\"\nh2c = true\n");
    }
    let path = dir.join("router.toml");
    std::fs::write(&path, s).unwrap();
    start_router_with(&path, &[], None)
}

fn refused_streams_go_elsewhere(mode: Mode) {
    let dir = tempfile::tempdir().unwrap();
    let (raw, seen) = raw_backend(mode);
    let nginx = h2c_nginx();
    let r = router(&[raw, nginx.addr], dir.path(), "");
    // POSTs: never sent twice after a failure, but a refused stream was
    // never acted on.
    for i in 0..40 {
        let resp = request(r.proxy, "POST", &format!("/item/{i}"), &[], "body").unwrap();
        assert_eq!(resp.status, 200, "POST /item/{i}: {}", resp.body);
        assert_eq!(resp.body, "ok\n");
    }
    assert!(
        seen.requests.load(SeqCst) > 0,
        "the raw backend was never tried"
    );
    let log = dir.path().join("access.log");
    wait_for(Duration::from_secs(5), || json_lines(&log).len() == 40);
    let lines = json_lines(&log);
    let moved = lines.iter().filter(|l| l["attempts"] == 2).count();
    assert!(moved > 0, "no request went to the refusing backend first");
    assert!(lines.iter().all(|l| l["status"] == 200));
    let st = status_json(&r);
    assert_eq!(
        st["backends"][0]["healthy"], true,
        "a refused stream blamed the backend: {st}"
    );
    let m = metrics_text(&r);
    assert_eq!(
        sample(
            &m,
            &format!("ketama_requests_total{{backend=\"{raw}\",status=\"error\"}}")
        ),
        0.0,
        "{m}"
    );
}

#[test]
fn a_refused_stream_goes_to_the_next_backend_unblamed() {
    refused_streams_go_elsewhere(Mode::Refuse);
}

#[test]
fn a_stream_past_a_goaway_goes_to_the_next_backend_unblamed() {
    refused_streams_go_elsewhere(Mode::GoAway);
}

#[test]
fn a_backends_stream_limit_opens_more_connections() {
    let dir = tempfile::tempdir().unwrap();
    let delay = Duration::from_millis(500);
    let (raw, seen) = raw_backend(Mode::OneAtATime(delay));
    // One worker thread: every stream shares its thread's connections.
    let r = router(&[raw], dir.path(), "threads = 1");
    let began = Instant::now();
    // Each request once the last one reached the backend on a connection
    // whose limit the router knows.
    let calls: Vec<_> = (0..4)
        .map(|i| {
            let proxy = r.proxy;
            let call = std::thread::spawn(move || {
                request(proxy, "GET", &format!("/{i}"), &[], "").unwrap()
            });
            wait_for(Duration::from_secs(5), || {
                seen.requests.load(SeqCst) > i && seen.acks.load(SeqCst) > i
            });
            call
        })
        .collect();
    for c in calls {
        assert_eq!(c.join().unwrap().status, 200);
    }
    // Queued behind one stream, they would take 4 × 500 ms.
    let took = began.elapsed();
    assert!(
        took < delay * 3,
        "the streams waited for each other: {took:?}"
    );
    assert_eq!(
        seen.conns.load(SeqCst),
        4,
        "one connection per stream at a limit of 1"
    );
}

#[test]
fn a_backends_reset_reaches_the_client_and_a_refusal_is_a_grpc_status() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, _) = raw_backend(Mode::ResetAfterHead);
    let r = router(&[raw], dir.path(), "");
    // After the head: the client's stream is reset.
    let mut c = h2raw::connect(r.proxy);
    c.write_all(&h2raw::headers(1, &h2raw::request("GET", "/a", &[]), true))
        .unwrap();
    let mut reader = Reader::default();
    reader.until(&mut c, Duration::from_secs(10), |r| r.stream(1).done());
    let s = reader.read.stream(1);
    assert_eq!(s.status, Some(200), "{s:?}");
    // (`h2` drops a reset stream's unread DATA: RST_STREAM aborts.)
    assert!(b"part".starts_with(&s.body), "{s:?}");
    assert!(
        s.reset.is_some(),
        "the stream must not end as if whole: {s:?}"
    );
    // Refused before any head, a gRPC call gets the router's status.
    let (refusing, _) = raw_backend(Mode::Refuse);
    let dir = tempfile::tempdir().unwrap();
    let r = router(&[refusing], dir.path(), "");
    let mut c = h2raw::connect(r.proxy);
    let call = h2raw::request(
        "POST",
        "/pkg.Svc/Get",
        &[("content-type", "application/grpc"), ("te", "trailers")],
    );
    c.write_all(&h2raw::headers(1, &call, false)).unwrap();
    c.write_all(&frame(DATA, 0x1, 1, &[0, 0, 0, 0, 0])).unwrap();
    let mut reader = Reader::default();
    reader.until(&mut c, Duration::from_secs(10), |r| r.stream(1).done());
    let s = reader.read.stream(1);
    let field = |n: &str| {
        s.fields
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(s.status, Some(200), "{s:?}");
    assert_eq!(field("grpc-status").as_deref(), Some("14"), "{s:?}");
    assert_eq!(field("content-type").as_deref(), Some("application/grpc"));
    assert!(
        s.body.is_empty() && s.trailers.is_empty(),
        "trailers-only: {s:?}"
    );
}

#[test]
fn h2c_backends_pass_http2_health_checks() {
    let dir = tempfile::tempdir().unwrap();
    let nginx = h2c_nginx();
    let (proxy, admin) = (any_port(), any_port());
    let path = dir.path().join("router.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[health]\ninterval_ms = 100\n\n[[backends]]\naddress = \"{}\"\nh2c = true\n",
            nginx.addr
        ),
    )
    .unwrap();
    let r = start_router_with(&path, &[], None);
    // A check asked in HTTP/1.1 would fail (nginx's h2c listener speaks
    // only HTTP/2) and take the backend out after two.
    wait_for(Duration::from_secs(10), || {
        let resp = admin_call(&r, "GET", "/ui/data", "");
        let v: serde_json::Value = serde_json::from_str(&resp.body).unwrap();
        v["backends"]["check"][0][0] == true
    });
    let resp = request(r.proxy, "GET", "/x", &[], "").unwrap();
    assert_eq!((resp.status, resp.body.as_str()), (200, "ok\n"));
    assert_eq!(status_json(&r)["backends"][0]["h2c"], true);
}
