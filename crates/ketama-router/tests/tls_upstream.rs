//! TLS to backends against a real nginx TLS origin (verification on and
//! off, the pool across a CA change, client certificates both ways, TLS
//! health checks), and `--check` on TLS files.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::tls::{curl, Ca, Issued, Nginx};
use common::*;

/// A router over one TLS backend; `upstream` is the `[upstream_tls]`
/// body, `health` extra `[health]` lines.
fn router_to(origin: SocketAddr, upstream: &str, health: &str, dir: &Path) -> RouterProc {
    let (proxy, admin) = (any_port(), any_port());
    let path = dir.join("router.toml");
    std::fs::write(&path, config_text(origin, proxy, admin, upstream, health)).unwrap();
    start_router_with(&path, &[], Some(&dir.join("router.log")))
}

fn config_text(
    origin: SocketAddr,
    proxy: SocketAddr,
    admin: SocketAddr,
    upstream: &str,
    health: &str,
) -> String {
    format!(
        "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\nretries = 0\nmax_fails = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[health]\ninterval_ms = 100\ntimeout_ms = 500\n{health}\n\n[upstream_tls]\n{upstream}\n\n[[backends]]\naddress = \"{origin}\"\ntls = true\nsni = \"origin.test\"\n"
    )
}

/// Rewrites the router's config with another `[upstream_tls]` and reloads.
fn reconfigure(r: &RouterProc, origin: SocketAddr, upstream: &str, health: &str, dir: &Path) {
    std::fs::write(
        dir.join("router.toml"),
        config_text(origin, any_port(), any_port(), upstream, health),
    )
    .unwrap();
    let resp = admin_call(r, "POST", "/reload", "");
    assert_eq!(resp.status, 200, "{}", resp.body);
}

fn errors(r: &RouterProc, origin: SocketAddr) -> f64 {
    sample(
        &metrics_text(r),
        &format!("ketama_requests_total{{backend=\"{origin}\",status=\"error\"}}"),
    )
}

#[test]
fn backends_are_verified_and_no_connection_outlives_a_ca_change() {
    let dir = tempfile::tempdir().unwrap();
    let (ca1, ca2) = (Ca::new(dir.path(), "ca1"), Ca::new(dir.path(), "ca2"));
    let nginx = Nginx::start_tls(&ca1.issue("origin", &["origin.test"], 30), None);
    let o = nginx.addr;
    let trust1 = format!("ca_file = \"{}\"", ca1.cert.display());
    let trust2 = format!("ca_file = \"{}\"", ca2.cert.display());
    let r = router_to(o, &trust1, "enabled = false", dir.path());
    for _ in 0..3 {
        // Kept alive: the later ones ride the pooled connection.
        let resp = get(&r, "/a?b=1");
        assert_eq!(resp.status, 200, "{}", resp.body);
        assert_eq!(resp.body, "tls-origin /a?b=1 origin.test\n", "SNI sent");
    }
    // A CA that did not sign the origin's certificate: the pooled
    // connection (verified under the old CA) must not be reused.
    reconfigure(&r, o, &trust2, "enabled = false", dir.path());
    let before = errors(&r, o);
    let resp = get(&r, "/after-ca-change");
    assert_eq!(resp.status, 502, "{}", resp.body);
    assert_eq!(errors(&r, o), before + 1.0, "a connect failure, counted");
    let log = std::fs::read_to_string(dir.path().join("router.log")).unwrap();
    assert!(log.contains("backend failed"), "{log}");
    // Verification off: served (and a warning says what that means).
    reconfigure(
        &r,
        o,
        &format!("{trust2}\nverify = false"),
        "enabled = false",
        dir.path(),
    );
    assert_eq!(get(&r, "/unverified").status, 200);
    // The system's roots do not know the test CA either.
    reconfigure(&r, o, "", "enabled = false", dir.path());
    assert_eq!(get(&r, "/system-roots").status, 502);
    // Back to the right CA.
    reconfigure(&r, o, &trust1, "enabled = false", dir.path());
    assert_eq!(get(&r, "/again").status, 200);
}

#[test]
fn health_checks_use_the_backends_tls_settings() {
    let dir = tempfile::tempdir().unwrap();
    let (ca1, ca2) = (Ca::new(dir.path(), "ca1"), Ca::new(dir.path(), "ca2"));
    let nginx = Nginx::start_tls(&ca1.issue("origin", &["origin.test"], 30), None);
    let o = nginx.addr;
    let healthy = |r: &RouterProc| status_json(r)["backends"][0]["healthy"].as_bool().unwrap();
    let r = router_to(
        o,
        &format!("ca_file = \"{}\"", ca2.cert.display()),
        "",
        dir.path(),
    );
    wait_for(Duration::from_secs(10), || !healthy(&r));
    assert_eq!(status_json(&r)["backends"][0]["tls"]["sni"], "origin.test");
    reconfigure(
        &r,
        o,
        &format!("ca_file = \"{}\"", ca1.cert.display()),
        "",
        dir.path(),
    );
    wait_for(Duration::from_secs(10), || healthy(&r));
    assert_eq!(get(&r, "/h").status, 200);
}

#[test]
fn client_certificates_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    // To backends: nginx requires a certificate the CA signed.
    let nginx = Nginx::start_tls(&ca.issue("origin", &["origin.test"], 30), Some(&ca.cert));
    let o = nginx.addr;
    let trust = format!("ca_file = \"{}\"", ca.cert.display());
    let r = router_to(o, &trust, "enabled = false", dir.path());
    let resp = get(&r, "/no-cert");
    assert_eq!(
        resp.status, 400,
        "nginx refuses a client without a certificate: {}",
        resp.body
    );
    let me = ca.issue("router", &["router.test"], 30);
    let with_cert = format!(
        "{trust}\ncert_file = \"{}\"\nkey_file = \"{}\"",
        me.cert.display(),
        me.key.display()
    );
    reconfigure(&r, o, &with_cert, "enabled = false", dir.path());
    let resp = get(&r, "/with-cert");
    assert_eq!(resp.status, 200, "{}", resp.body);
    drop(r);
    // From clients: the router requires a certificate the CA signed.
    let site = ca.issue("site", &["site.test"], 30);
    let client = ca.issue("client", &["client.test"], 30);
    let (proxy, admin, tls) = (any_port(), any_port(), any_port());
    let text = format!(
        "{}\n[tls]\nlisten = [\"{tls}\"]\nclient_ca_file = \"{}\"\n[[tls.certificates]]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
        config_text(o, proxy, admin, &with_cert, "enabled = false"),
        ca.cert.display(),
        site.cert.display(),
        site.key.display()
    );
    let path = dir.path().join("mtls.toml");
    std::fs::write(&path, text).unwrap();
    let r = start_router_with(&path, &[], None);
    let tls = r.listener("tls.listen[0]");
    let url = format!("https://site.test:{}/m", tls.port());
    let resolve = format!("site.test:{}:127.0.0.1", tls.port());
    let cacert = ca.cert.display().to_string();
    let base = [
        "--cacert",
        &cacert,
        "--resolve",
        &resolve,
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
    ];
    let refused = curl(&[&base[..], &[url.as_str()]].concat());
    assert_eq!(refused, "000", "no client certificate: no handshake");
    // A certificate another CA signed: a real handshake that the router
    // refuses (rustls' InvalidCertificate), counted by that reason.
    let other_ca = Ca::new(dir.path(), "other-ca");
    let stranger = other_ca.issue("stranger", &["client.test"], 30);
    let (cert, key) = (
        stranger.cert.display().to_string(),
        stranger.key.display().to_string(),
    );
    let refused = curl(&[&base[..], &["--cert", &cert, "--key", &key, url.as_str()]].concat());
    assert_eq!(refused, "000", "a certificate of another CA: no handshake");
    let bad = |r: &RouterProc| {
        sample(
            &metrics_text(r),
            "ketama_tls_handshake_failures_total{reason=\"bad_client_certificate\"}",
        )
    };
    wait_for(Duration::from_secs(5), || bad(&r) == 2.0);
    let (cert, key) = (
        client.cert.display().to_string(),
        client.key.display().to_string(),
    );
    let served = curl(&[&base[..], &["--cert", &cert, "--key", &key, url.as_str()]].concat());
    assert_eq!(served, "200");
    assert_eq!(bad(&r), 2.0);
    assert_eq!(
        sample(
            &metrics_text(&r),
            "ketama_tls_handshake_failures_total{reason=\"other\"}"
        ),
        0.0
    );
}

/// `ketama-router --check` on a config file: (exit success, stdout, stderr).
fn check(text: &str, dir: &Path) -> (bool, String, String) {
    let path = dir.join("check.toml");
    std::fs::write(&path, text).unwrap();
    let out = router_command()
        .args(["--check", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tls_config(certs: &[(&Path, &Path)], backend: &str) -> String {
    let mut s = String::from(
        "[admin]\nlisten = \"127.0.0.1:1\"\nauth = false\n[tls]\nlisten = [\"127.0.0.1:2\"]\n",
    );
    for (c, k) in certs {
        s.push_str(&format!(
            "[[tls.certificates]]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
            c.display(),
            k.display()
        ));
    }
    s.push_str(&format!(
        "[[backends]]\naddress = \"127.0.0.1:3\"\n{backend}\n"
    ));
    s
}

#[test]
fn check_loads_every_tls_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new(d, "ca");
    let a: Issued = ca.issue("a", &["a.test", "*.a.test"], 30);
    let soon = ca.issue("soon", &["soon.test"], 3);
    let (ok, out, err) = check(
        &tls_config(&[(&a.cert, &a.key), (&soon.cert, &soon.key)], ""),
        d,
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("tls.certificates[0]: ") && out.contains("(a.test, *.a.test), not after 20"),
        "{out}"
    );
    assert!(
        err.contains("tls.certificates[1].cert_file") && err.contains("expires on"),
        "{err}"
    );
    let refused = |text: String, key: &str, words: &str| {
        let (ok, _, err) = check(&text, d);
        assert!(!ok, "accepted: {text}");
        assert!(
            err.contains(key) && err.contains(words),
            "{key} / {words}: {err}"
        );
    };
    refused(
        tls_config(&[(&a.cert, &soon.key)], ""),
        "tls.certificates[0].key_file",
        "does not belong",
    );
    std::fs::write(d.join("junk.pem"), "hello\n").unwrap();
    refused(
        tls_config(&[(&d.join("junk.pem"), &a.key)], ""),
        "tls.certificates[0].cert_file",
        "no certificate",
    );
    refused(
        tls_config(&[(&a.cert, &d.join("junk.pem"))], ""),
        "tls.certificates[0].key_file",
        "no private key",
    );
    refused(
        tls_config(&[(&a.cert, &d.join("missing.key"))], ""),
        "tls.certificates[0].key_file",
        "cannot read",
    );
    refused(
        tls_config(&[], ""),
        "tls.certificates",
        "at least one certificate",
    );
    refused(
        tls_config(&[(&a.cert, &a.key)], "sni = \"x.test\""),
        "backends[0].sni",
        "set tls = true",
    );
    refused(
        tls_config(&[(&a.cert, &a.key)], "tls = true"),
        "backends[0].sni",
        "needs the name",
    );
    let unverified = format!(
        "{}\n[upstream_tls]\nverify = false\n",
        tls_config(&[(&a.cert, &a.key)], "tls = true")
    );
    let (ok, _, err) = check(&unverified, d);
    assert!(ok && err.contains("upstream_tls.verify: false"), "{err}");
    let bad_ca = format!(
        "{}\n[upstream_tls]\nca_file = \"{}\"\n",
        tls_config(&[(&a.cert, &a.key)], "tls = true\nsni = \"o.test\""),
        d.join("junk.pem").display()
    );
    refused(bad_ca, "upstream_tls.ca_file", "no certificate");
}

/// `[upstream_tls] h2 = true`: HTTP/1 clients' requests go through
/// Pingora's proxy and its HTTP/2 client. An origin that speaks HTTP/2
/// gets them over HTTP/2, one that offers only HTTP/1.1 by ALPN over
/// HTTP/1.1; a reload that turns `h2` off sends the next connections
/// through the router's engine over HTTP/1.1 again.
#[test]
fn http1_clients_reach_tls_backends_over_http2_with_h2() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let origin = |http2: &str| {
        let cert = ca.issue("origin", &["origin.test"], 30);
        let (cert, key) = (
            cert.cert.display().to_string(),
            cert.key.display().to_string(),
        );
        let http2 = http2.to_string();
        Nginx::start(move |addr| {
            format!(
                "server {{
    listen {addr} ssl {http2};
    ssl_certificate {cert}; ssl_certificate_key {key};
    location / {{ return 200 \"$server_protocol $request_uri\\n\"; }}
  }}"
            )
        })
    };
    let trust = format!("ca_file = \"{}\"", ca.cert.display());
    for (http2, proto) in [("http2", "HTTP/2.0"), ("", "HTTP/1.1")] {
        let nginx = origin(http2);
        let r = router_to(
            nginx.addr,
            &format!("{trust}\nh2 = true"),
            "enabled = false",
            dir.path(),
        );
        let resp = get(&r, "/a?b=1");
        assert_eq!(resp.status, 200, "{}", resp.body);
        assert_eq!(resp.body, format!("{proto} /a?b=1\n"));
        // A request line the router refuses, refused on this path too.
        let (status, text) = raw(r.proxy, b"GET /a HTTP/1.1 extra\r\nHost: x\r\n\r\n");
        assert_eq!(status, Some(400), "{text}");
        if http2.is_empty() {
            continue;
        }
        reconfigure(&r, nginx.addr, &trust, "enabled = false", dir.path());
        let resp = get(&r, "/after");
        assert_eq!(resp.status, 200, "{}", resp.body);
        assert_eq!(resp.body, "HTTP/1.1 /after\n", "h2 off: HTTP/1.1 again");
    }
}
