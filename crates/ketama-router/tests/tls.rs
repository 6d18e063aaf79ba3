//! TLS and HTTP/2 with real clients: curl over HTTP/1.1 and HTTP/2 with
//! TLS (ALPN, SNI by `--resolve`) and h2c, rustls and raw sockets for
//! handshakes, certificates made by `openssl`.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::tls::{client, curl, tls_section, Ca, Client, Issued, Key};
use common::*;
use ketama_router::origin::Origin;
use rustls_pki_types::pem::PemObject;

/// A client handshake with rustls: the served certificate's DNS names and
/// the protocol ALPN chose.
fn handshake(
    addr: SocketAddr,
    sni: &str,
    ca: &Path,
    alpn: &[&str],
) -> Result<(Vec<String>, Option<String>), String> {
    let (stream, conn) = client(addr, sni, ca, alpn, None)?;
    drop(stream);
    let leaf = conn.peer_certificates().ok_or("no certificate")?[0].clone();
    let (_, cert) =
        x509_parser::parse_x509_certificate(leaf.as_ref()).map_err(|e| e.to_string())?;
    let names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|san| {
            san.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    x509_parser::extensions::GeneralName::DNSName(d) => Some(d.to_string()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let alpn = conn
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    Ok((names, alpn))
}

/// One HTTP/1.1 request on an open TLS connection (kept alive); the
/// response's status and body.
fn tls_get(c: &mut Client, path: &str) -> (u16, String) {
    let (tcp, conn) = c;
    let mut s = rustls::Stream::new(conn, tcp);
    write!(s, "GET {path} HTTP/1.1\r\nHost: a.test\r\n\r\n").unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "connection closed");
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if body.len() >= len {
                let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
                return (status, body[..len].to_string());
            }
        }
    }
}

struct Fixture {
    _origins: Vec<Origin>,
    router: RouterProc,
    tls: SocketAddr,
    ca: Ca,
    a: Issued,
    b: Issued,
    dir: tempfile::TempDir,
    config: std::path::PathBuf,
}

/// Four origins; a router with a plain listener (h2c on), a TLS listener
/// serving `a.test` (the default) and `*.b.test`.
fn fixture(server: &str, tls_extra: &str) -> Fixture {
    let origins: Vec<Origin> = (0..4).map(|i| Origin::start(i).unwrap()).collect();
    let addrs: Vec<SocketAddr> = origins.iter().map(|o| o.addr()).collect();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "test-ca");
    let a = ca.issue("a", &["a.test"], 30);
    let b = ca.issue("b", &["b.test", "*.b.test"], 30);
    let text = format!(
        "{}\n{}",
        config_with(&addrs, any_port(), any_port(), server, ""),
        tls_section(any_port(), &[&a, &b], tls_extra)
    );
    let config = dir.path().join("router.toml");
    std::fs::write(&config, text).unwrap();
    let router = start_router_with(&config, &[], Some(&dir.path().join("router.log")));
    let tls = router.listener("tls.listen[0]");
    Fixture {
        _origins: origins,
        router,
        tls,
        ca,
        a,
        b,
        dir,
        config,
    }
}

#[test]
fn sni_picks_the_certificate_and_alpn_the_protocol() {
    let f = fixture("h2c = true", "");
    let ca = &f.ca.cert;
    let (names, alpn) = handshake(f.tls, "a.test", ca, &["h2", "http/1.1"]).unwrap();
    assert_eq!(
        (names, alpn.as_deref()),
        (vec!["a.test".to_string()], Some("h2"))
    );
    let (names, alpn) = handshake(f.tls, "x.b.test", ca, &["http/1.1"]).unwrap();
    assert_eq!(
        names,
        vec!["b.test", "*.b.test"],
        "a wildcard name one label deep"
    );
    assert_eq!(alpn.as_deref(), Some("http/1.1"));
    let (names, _) = handshake(f.tls, "b.test", ca, &[]).unwrap();
    assert_eq!(names, vec!["b.test", "*.b.test"]);
    // An unknown name gets the first certificate (which then does not
    // verify for it: the client refuses, the router counts no failure of
    // its own making).
    let err = handshake(f.tls, "other.test", ca, &[]).unwrap_err();
    assert!(
        err.contains("NotValidForName") || err.contains("not valid"),
        "{err}"
    );
    let m = metrics_text(&f.router);
    assert_eq!(
        sample(
            &m,
            "ketama_tls_handshake_failures_total{reason=\"no_shared_version_or_cipher\"}"
        ),
        0.0
    );
    let expiry = sample(
        &m,
        "ketama_tls_certificate_expiry_timestamp_seconds{names=\"a.test\"}",
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as f64;
    assert!(
        (expiry - now - 30.0 * 86400.0).abs() < 3600.0,
        "{expiry} vs {now}"
    );
    let status = status_json(&f.router);
    let certs = status["tls"]["certificates"].as_array().unwrap();
    assert_eq!(certs.len(), 2);
    assert_eq!(certs[1]["names"], serde_json::json!(["b.test", "*.b.test"]));
    assert!(certs[0]["not_after"].as_str().unwrap().ends_with('Z'));
    assert_eq!(certs[0]["cert_file"], f.a.cert.display().to_string());
}

/// The same backend for 100 URLs over HTTP/1.1, HTTP/2 over TLS, h2c and
/// HTTP/1.1 over TLS, and the same response headers.
#[test]
fn every_protocol_routes_alike() {
    let f = fixture("h2c = true", "");
    let urls = urls(100);
    let plain = format!("http://{}", f.router.proxy);
    let tls = format!("https://a.test:{}", f.tls.port());
    let resolve = format!("a.test:{}:127.0.0.1", f.tls.port());
    let ca = f.ca.cert.display().to_string();
    let run = |base: &str, extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        args.extend([
            "-w".into(),
            "%{http_version} %{http_code} %header{x-ketama-backend} %header{x-ketama-ring}\\n"
                .into(),
        ]);
        for u in &urls {
            // curl's -o applies to one URL each.
            args.extend(["-o".into(), "/dev/null".into(), format!("{base}{u}")]);
        }
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        curl(&refs).lines().map(str::to_string).collect()
    };
    let h1 = run(&plain, &["--http1.1"]);
    // curl 7.88 (Debian 12) cannot reuse a prior-knowledge connection
    // (nginx 1.22 gets the same "Error in the HTTP2 framing layer"): one
    // connection per URL for h2c.
    let h2c: Vec<String> = urls
        .iter()
        .map(|u| {
            let w = "%{http_version} %{http_code} %header{x-ketama-backend} %header{x-ketama-ring}";
            let url = format!("{plain}{u}");
            curl(&["--http2-prior-knowledge", "-o", "/dev/null", "-w", w, &url])
        })
        .collect();
    let h2 = run(&tls, &["--http2", "--cacert", &ca, "--resolve", &resolve]);
    let h1s = run(&tls, &["--http1.1", "--cacert", &ca, "--resolve", &resolve]);
    assert_eq!(h1.len(), 100, "{h1:?}");
    let strip = |v: &[String], proto: &str| -> Vec<String> {
        v.iter()
            .map(|l| {
                let (p, rest) = l.split_once(' ').unwrap();
                assert_eq!(p, proto, "{l}");
                rest.to_string()
            })
            .collect()
    };
    let expect = strip(&h1, "1.1");
    assert!(
        expect
            .iter()
            .all(|l| l.starts_with("200 127.0.0.1:") && l.ends_with(" only")),
        "{expect:?}"
    );
    let distinct: std::collections::HashSet<&String> = expect.iter().collect();
    assert!(
        distinct.len() >= 3,
        "the URLs spread over the backends: {distinct:?}"
    );
    assert_eq!(strip(&h2c, "2"), expect, "h2c");
    assert_eq!(strip(&h2, "2"), expect, "h2 over TLS");
    assert_eq!(strip(&h1s, "1.1"), expect, "HTTP/1.1 over TLS");
    // X-Forwarded-Proto says how the client came.
    let head = |args: &[&str]| {
        let out = curl(args);
        assert!(out.contains("origin "), "{out}");
    };
    head(&[
        "--http2",
        "--cacert",
        &ca,
        "--resolve",
        &resolve,
        &format!("{tls}/xfp"),
    ]);
    let origins = &f._origins;
    let last: Vec<String> = origins.iter().map(|o| o.last_head()).collect();
    assert!(
        last.iter()
            .any(|h| h.contains("/xfp")
                && h.to_ascii_lowercase().contains("x-forwarded-proto: https")),
        "{last:?}"
    );
    head(&["--http2-prior-knowledge", &format!("{plain}/xfp2")]);
    let last: Vec<String> = origins.iter().map(|o| o.last_head()).collect();
    assert!(
        last.iter()
            .any(|h| h.contains("/xfp2")
                && h.to_ascii_lowercase().contains("x-forwarded-proto: http\r")),
        "{last:?}"
    );
}

fn reload(r: &RouterProc) -> Resp {
    admin_call(r, "POST", "/reload", "")
}

#[test]
fn certificates_rotate_on_reload_and_a_broken_one_is_refused() {
    let f = fixture("", "");
    let ca = &f.ca.cert;
    let mut open = client(f.tls, "a.test", ca, &["http/1.1"], None).unwrap();
    assert_eq!(tls_get(&mut open, "/before").0, 200);
    // New certificate and key in the same files, with a new name.
    let fresh = f.ca.issue("fresh", &["a.test", "new.a.test"], 30);
    std::fs::copy(&fresh.cert, &f.a.cert).unwrap();
    std::fs::copy(&fresh.key, &f.a.key).unwrap();
    let r = reload(&f.router);
    assert_eq!(r.status, 200, "{}", r.body);
    let (names, _) = handshake(f.tls, "a.test", ca, &[]).unwrap();
    assert_eq!(
        names,
        vec!["a.test", "new.a.test"],
        "the next handshake gets the new certificate"
    );
    // The connection opened before serves on, untouched.
    assert_eq!(tls_get(&mut open, "/after").0, 200);
    // A key that is not the certificate's: the whole reload is refused,
    // naming the key, and the running certificates keep serving.
    std::fs::copy(&f.b.key, &f.a.key).unwrap();
    let r = reload(&f.router);
    assert_ne!(r.status, 200);
    assert!(
        r.body.contains("tls.certificates[0].key_file"),
        "{}",
        r.body
    );
    assert!(r.body.contains("does not belong"), "{}", r.body);
    let (names, _) = handshake(f.tls, "a.test", ca, &[]).unwrap();
    assert_eq!(names, vec!["a.test", "new.a.test"]);
    // A file that is not PEM.
    std::fs::copy(&fresh.key, &f.a.key).unwrap();
    std::fs::write(&f.b.cert, "not a certificate\n").unwrap();
    let r = reload(&f.router);
    assert!(
        r.body.contains("tls.certificates[1].cert_file"),
        "{}",
        r.body
    );
    assert_eq!(status_json(&f.router)["reloads"]["rejected"], 2);
    // [tls] removed: refused, since the TLS listeners stay until a restart.
    let text = std::fs::read_to_string(&f.config).unwrap();
    let plain = &text[..text.find("[tls]").unwrap()];
    std::fs::write(&f.config, plain).unwrap();
    let r = reload(&f.router);
    assert!(
        r.body.contains("the TLS listeners") && r.body.contains("restart"),
        "{}",
        r.body
    );
    assert_eq!(tls_get(&mut open, "/still").0, 200);
    let _ = &f.dir;
}

#[test]
fn handshakes_count_against_the_limit_and_time_out() {
    // The timeout leaves the checks below a window of 2.5 s in which all
    // three are held, wide enough on a loaded CI machine (1 s was not).
    let f = fixture("max_connections = 3", "handshake_timeout_ms = 2500");
    // Three clients that never finish a handshake (one sends half a
    // ClientHello) hold every slot.
    let mut silent: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(f.tls).unwrap()).collect();
    silent[0]
        .write_all(&[0x16, 0x03, 0x01, 0x00, 0xff, 0x01])
        .unwrap();
    // All three in the guard first (a probe counted before one of them
    // would take its slot, and that one would be refused, not time out).
    wait_for(Duration::from_secs(5), || {
        sample(&metrics_text(&f.router), "ketama_client_connections") == 3.0
    });
    wait_for(Duration::from_secs(5), || {
        sample(
            &metrics_text(&f.router),
            "ketama_client_errors_total{reason=\"connection_limit\"}",
        ) >= 1.0
            || {
                // Probe: a fourth connection is closed at once while they hold.
                let mut c = TcpStream::connect(f.router.proxy).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let _ = c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
                let mut b = [0u8; 1];
                matches!(c.read(&mut b), Ok(0) | Err(_))
            }
    });
    let start = Instant::now();
    for s in &mut silent {
        s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
        let mut b = [0u8; 64];
        // Closed by the router (end of stream or reset), never answered.
        loop {
            match s.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    }
    let took = start.elapsed();
    assert!(took < Duration::from_secs(5), "closed after {took:?}");
    wait_for(Duration::from_secs(5), || {
        sample(
            &metrics_text(&f.router),
            "ketama_tls_handshake_failures_total{reason=\"timeout\"}",
        ) == 3.0
    });
    // With the slots free, a real client is served.
    let mut c = client(f.tls, "a.test", &f.ca.cert, &["http/1.1"], None).unwrap();
    assert_eq!(tls_get(&mut c, "/ok").0, 200);
}

#[test]
fn a_client_without_a_shared_version_is_counted() {
    let f = fixture("", "min_version = \"1.3\"");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(&f.ca.cert).unwrap();
    for c in rustls_pki_types::CertificateDer::pem_slice_iter(&pem) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_protocol_versions(&[&rustls::version::TLS12])
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("a.test").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut tcp = TcpStream::connect(f.tls).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut failed = false;
    while conn.is_handshaking() {
        if conn.complete_io(&mut tcp).is_err() {
            failed = true;
            break;
        }
    }
    assert!(failed, "TLS 1.2 against min_version 1.3");
    wait_for(Duration::from_secs(5), || {
        sample(
            &metrics_text(&f.router),
            "ketama_tls_handshake_failures_total{reason=\"no_shared_version_or_cipher\"}",
        ) == 1.0
    });
}

#[test]
fn rsa_and_sec1_keys_and_full_chains_serve() {
    let dir = tempfile::tempdir().unwrap();
    let root = Ca::new(dir.path(), "root");
    let mid = root.intermediate("mid");
    // A leaf under the intermediate, served with it: a client that trusts
    // only the root verifies the chain.
    let leaf = mid.issue_with("leaf", &["chain.test"], 30, Key::Sec1, false);
    let chain = dir.path().join("chain.pem");
    let text =
        std::fs::read_to_string(&leaf.cert).unwrap() + &std::fs::read_to_string(&mid.cert).unwrap();
    std::fs::write(&chain, text).unwrap();
    let leaf = Issued {
        cert: chain,
        key: leaf.key,
    };
    let rsa = root.issue_with("rsa", &["rsa.test"], 30, Key::RsaPkcs1, false);
    let pem = |p: &Path| std::fs::read_to_string(p).unwrap();
    assert!(pem(&leaf.key).contains("BEGIN EC PRIVATE KEY"));
    assert!(pem(&rsa.key).contains("BEGIN RSA PRIVATE KEY"));
    let origin = Origin::start(0).unwrap();
    let text = format!(
        "{}\n{}",
        config_with(&[origin.addr()], any_port(), any_port(), "", ""),
        tls_section(any_port(), &[&leaf, &rsa], "")
    );
    let path = dir.path().join("router.toml");
    std::fs::write(&path, text).unwrap();
    let r = start_router(&path);
    let tls = r.listener("tls.listen[0]");
    let (names, _) = handshake(tls, "chain.test", &root.cert, &[]).unwrap();
    assert_eq!(names, vec!["chain.test"]);
    let (names, _) = handshake(tls, "rsa.test", &root.cert, &[]).unwrap();
    assert_eq!(names, vec!["rsa.test"]);
    let mut c = client(tls, "rsa.test", &root.cert, &["http/1.1"], None).unwrap();
    assert_eq!(tls_get(&mut c, "/rsa").0, 200);
    drop(r);
}

/// A kept-alive TLS connection waits for its next request under the
/// keep-alive deadline, not the head's: idle for longer than
/// `client_header_timeout_ms` (and long enough to be parked), it is still
/// served, and nothing counts as a header timeout.
#[test]
fn an_idle_tls_connection_waits_under_the_keepalive_deadline() {
    let f = fixture(
        "client_header_timeout_ms = 300\nkeepalive_timeout_ms = 5000",
        "",
    );
    let mut c = client(f.tls, "a.test", &f.ca.cert, &["http/1.1"], None).unwrap();
    assert_eq!(tls_get(&mut c, "/one").0, 200);
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(tls_get(&mut c, "/two").0, 200);
    let m = metrics_text(&f.router);
    assert_eq!(
        sample(&m, "ketama_client_errors_total{reason=\"header_timeout\"}"),
        0.0,
        "{m}"
    );
}
