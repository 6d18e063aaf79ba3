//! `[tls]`, `[upstream_tls]` and the backends' `tls`/`sni`: what the
//! config judges before any file is read (the router loads the files).

use ketama_config::parse;

const BASE: &str = "[admin]\nlisten = \"127.0.0.1:9901\"\nauth = false\n";
const CERT: &str = "[[tls.certificates]]\ncert_file = \"a.pem\"\nkey_file = \"a.key\"\n";
const BACKEND: &str = "[[backends]]\naddress = \"127.0.0.1:9001\"\n";

fn err(text: &str) -> String {
    parse(text, "r.toml").unwrap_err().to_string()
}

#[test]
fn tls_defaults_and_listeners() {
    let v = parse(
        &format!("{BASE}[tls]\nlisten = [\"127.0.0.1:8443\"]\n{CERT}{BACKEND}"),
        "r.toml",
    )
    .unwrap();
    let t = v.config.tls.as_ref().unwrap();
    assert_eq!(v.tls_listen, vec!["127.0.0.1:8443".parse().unwrap()]);
    assert_eq!(t.alpn, ["h2", "http/1.1"]);
    assert_eq!(
        (t.min_version.as_str(), t.handshake_timeout_ms),
        ("1.2", 10_000)
    );
    assert!(t.session_resumption);
    assert!(v.config.upstream_tls.verify && !v.config.upstream_tls.h2);
    assert!(!v.config.server.h2c);
    assert_eq!(v.config.server.h2_max_concurrent_streams, 128);
    let plain = parse(&format!("{BASE}{BACKEND}"), "r.toml").unwrap();
    assert!(plain.tls_listen.is_empty() && plain.config.tls.is_none());
}

#[test]
fn tls_errors_name_the_key() {
    let tls = |body: &str| format!("{BASE}[tls]\n{body}\n{BACKEND}");
    let cases: Vec<(String, &str)> = vec![
        (tls("listen = []"), "r.toml: tls.listen: give at least one address"),
        (tls("listen = [\"x\"]"), "r.toml: tls.listen[0]: \"x\" is not IP:PORT"),
        (tls("listen = [\"127.0.0.1:8443\"]"), "r.toml: tls.certificates: [tls] needs at least one certificate"),
        (
            format!("{BASE}[server]\nlisten = [\"127.0.0.1:8443\"]\n[tls]\nlisten = [\"127.0.0.1:8443\"]\n{CERT}{BACKEND}"),
            "r.toml: tls.listen[0]: 127.0.0.1:8443 is listened on already",
        ),
        (
            tls(&format!("listen = [\"127.0.0.1:8443\"]\nalpn = [\"spdy\"]\n{CERT}")),
            "r.toml: tls.alpn[0]: \"spdy\" is not a protocol",
        ),
        (
            tls(&format!("listen = [\"127.0.0.1:8443\"]\nmin_version = \"1.1\"\n{CERT}")),
            "r.toml: tls.min_version: \"1.1\": use \"1.2\" or \"1.3\"",
        ),
        (
            tls(&format!("listen = [\"127.0.0.1:8443\"]\nhandshake_timeout_ms = 0\n{CERT}")),
            "r.toml: tls.handshake_timeout_ms: must be at least 1",
        ),
        (
            tls("listen = [\"127.0.0.1:8443\"]\n[[tls.certificates]]\ncert_file = \"\"\nkey_file = \"k\""),
            "r.toml: tls.certificates[0].cert_file: give the PEM file's path",
        ),
        (
            format!("{BASE}[[backends]]\naddress = \"127.0.0.1:1\"\nsni = \"a.test\"\n"),
            "r.toml: backends[0].sni: sni applies to TLS backends only",
        ),
        (
            format!("{BASE}[[backends]]\naddress = \"127.0.0.1:1\"\ntls = true\n"),
            "r.toml: backends[0].sni: a verified TLS backend needs the name",
        ),
        (
            format!("{BASE}[[backends]]\naddress = \"127.0.0.1:1\"\ntls = true\nsni = \"a b\"\n"),
            "r.toml: backends[0].sni: \"a b\" is not a DNS name",
        ),
        (
            format!("{BASE}{BACKEND}[upstream_tls]\ncert_file = \"c.pem\"\n"),
            "r.toml: upstream_tls.key_file: cert_file is set",
        ),
        (
            format!("{BASE}{BACKEND}[[discovery]]\nname = \"c.test\"\nport = 443\nsni = \"c.test\"\n"),
            "r.toml: discovery[0].sni: sni applies to TLS backends only",
        ),
        (
            format!("{BASE}[[backends]]\naddress = \"127.0.0.1:1\"\ntls = true\nsni = \"a.test\"\nh2c = true\n"),
            "r.toml: backends[0].h2c: h2c is HTTP/2 in plaintext; for HTTP/2 over TLS keep tls = true, remove h2c and set upstream_tls.h2 = true",
        ),
        (
            format!("{BASE}{BACKEND}[[discovery]]\nname = \"c.test\"\nport = 443\ntls = true\nh2c = true\n"),
            "r.toml: discovery[0].h2c: h2c is HTTP/2 in plaintext",
        ),
        (
            format!("{BASE}[server]\nlisten = [\"127.0.0.1:1\"]\ngrpc_timeout_max_ms = 0\n{BACKEND}"),
            "r.toml: server.grpc_timeout_max_ms: must be at least 1",
        ),
    ];
    for (text, want) in cases {
        let e = err(&text);
        assert!(e.starts_with(want), "{e}\n  wanted: {want}");
    }
}

#[test]
fn unverified_tls_backends_warn_and_discovered_ones_need_no_sni() {
    let v = parse(
        &format!("{BASE}[[backends]]\naddress = \"127.0.0.1:1\"\ntls = true\n[upstream_tls]\nverify = false\n"),
        "r.toml",
    )
    .unwrap();
    assert!(
        v.warnings
            .iter()
            .any(|w| w.contains("upstream_tls.verify: false")),
        "{:?}",
        v.warnings
    );
    let v = parse(
        &format!("{BASE}[[discovery]]\nsrv = \"_c._tcp.test\"\ntls = true\n"),
        "r.toml",
    )
    .unwrap();
    assert_eq!(v.discovery[0].tls, Some(None), "the SRV target is the SNI");
    assert!(v.warnings.is_empty());
}

#[test]
fn h2c_backends_and_sources_are_planned_as_h2c() {
    let v = parse(
        &format!("{BASE}[[backends]]\naddress = \"127.0.0.1:1\"\nh2c = true\n[[backends]]\naddress = \"127.0.0.1:2\"\n[[discovery]]\nsrv = \"_c._tcp.test\"\nh2c = true\n"),
        "r.toml",
    )
    .unwrap();
    assert!(v.discovery[0].h2c);
    let plan = ketama_config::Plan::build(&v, &[]).unwrap();
    let h2c: Vec<bool> = plan.backends.iter().map(|b| b.h2c).collect();
    assert_eq!(h2c, [true, false]);
}
