//! A backend's response trailers (an nginx TLS origin speaking HTTP/2,
//! `add_trailer`), as gRPC servers send them: to an HTTP/2 client as
//! trailing HEADERS, to an HTTP/1.1 client in the chunked trailer section
//! when the response goes chunked (dropped when it goes with a length);
//! and the router, idle afterwards, is idle (no worker spins on them).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::h2raw::{self, Reader};
use common::tls::{Ca, Nginx};
use common::*;

const WAIT: Duration = Duration::from_secs(10);

fn setup(dir: &std::path::Path) -> (Nginx, RouterProc) {
    let ca = Ca::new(dir, "ca");
    let cert = ca.issue("origin", &["origin.test"], 30);
    let (c, k) = (
        cert.cert.display().to_string(),
        cert.key.display().to_string(),
    );
    // `/len` answers with a length; `/chunk`'s sub_filter drops it, so
    // the body's end is the stream's.
    let origin = Nginx::start(move |addr| {
        format!(
            "server {{
    listen {addr} ssl http2;
    ssl_certificate {c}; ssl_certificate_key {k};
    add_trailer grpc-status 0 always;
    add_trailer grpc-message done always;
    location /len {{ return 200 \"abc\"; }}
    location /chunk {{ sub_filter_types *; sub_filter_once off; sub_filter x y; return 200 \"abc\"; }}
  }}"
        )
    });
    let (proxy, admin) = (any_port(), any_port());
    let path = dir.join("router.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = [\"{proxy}\"]\nh2c = true\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[health]\nenabled = false\n\n[upstream_tls]\nca_file = \"{}\"\nh2 = true\n\n[[backends]]\naddress = \"{}\"\ntls = true\nsni = \"origin.test\"\n",
            ca.cert.display(),
            origin.addr
        ),
    )
    .unwrap();
    let r = start_router_with(&path, &[], Some(&dir.join("router.log")));
    (origin, r)
}

/// An HTTP/1.1 GET's whole response bytes (the connection closed after).
fn http1(r: &RouterProc, path: &str) -> String {
    let mut c = TcpStream::connect(r.proxy).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    c.set_read_timeout(Some(WAIT)).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_backends_trailers_reach_http2_and_chunked_http1_clients() {
    let dir = tempfile::tempdir().unwrap();
    let (_origin, r) = setup(dir.path());
    let want = [
        ("grpc-status".to_string(), "0".to_string()),
        ("grpc-message".to_string(), "done".to_string()),
    ];
    for path in ["/len", "/chunk"] {
        let mut c = h2raw::connect(r.proxy);
        c.write_all(&h2raw::headers(1, &h2raw::request("GET", path, &[]), true))
            .unwrap();
        let mut rd = Reader::default();
        assert!(
            rd.until(&mut c, WAIT, |x| x.stream(1).done()),
            "{path}: {:?}",
            rd.read
        );
        let s = rd.read.stream(1);
        assert_eq!(
            (s.status, s.body.as_slice()),
            (Some(200), &b"abc"[..]),
            "{path}"
        );
        assert_eq!(s.trailers, want, "{path}");
        assert!(s.ended && s.reset.is_none(), "{path}: {s:?}");
    }
    // HTTP/1.1: chunked, the trailers in its trailer section.
    let chunked = http1(&r, "/chunk");
    assert!(
        chunked
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{chunked}"
    );
    assert!(
        chunked.ends_with("\r\n3\r\nabc\r\n0\r\ngrpc-status: 0\r\ngrpc-message: done\r\n\r\n"),
        "{chunked:?}"
    );
    // With a length, the trailers cannot go, and the body ends there.
    let length = http1(&r, "/len");
    assert!(length.ends_with("\r\n\r\nabc"), "{length:?}");
    assert!(!length.contains("grpc-status"), "{length:?}");
    // Nothing spins afterwards.
    let before = cpu_seconds(r.child.id());
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let spent = cpu_seconds(r.child.id()) - before;
    assert!(spent < 0.2, "{spent} CPU seconds in an idle second");
}
