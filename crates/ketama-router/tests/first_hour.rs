//! What a new user meets first, through the real binary: the demo on a
//! machine where its ports are taken, `--check` catching what a start
//! would fail on, `/metrics` that strict parsers read, forwarded headers,
//! error bodies that say what happened.

mod common;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use ketama_router::origin::Origin;

fn check(config: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    std::fs::write(&path, config).unwrap();
    let out = router_command()
        .args(["--config", path.to_str().unwrap(), "--check"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn check_builds_what_a_start_builds() {
    let base = config_with(
        &["127.0.0.1:9001".parse().unwrap()],
        free_addr(),
        free_addr(),
        "",
        "",
    );
    let (code, out, err) = check(&base, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("config OK") && out.contains("nothing contacted"),
        "{out}"
    );
    // Too many points: found by building, named by key.
    let (code, _, err) = check(
        &base.replace(
            "address = \"127.0.0.1:9001\"",
            "address = \"127.0.0.1:9001\"\nweight = 2000000000",
        ),
        &[],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("backends[0].weight") && err.contains("too many points"),
        "{err}"
    );
    // A pingora-v1 migration ring cannot serve label rules.
    let labelled = base.replace("address = \"127.0.0.1:9001\"", "address = \"127.0.0.1:9001\"\nlabels = [\"eu\"]")
        + "\n[[label_rules]]\nheader = \"x-r\"\nvalue = \"eu\"\nrequire = [\"eu\"]\n\n[migration]\nring = { compat = \"pingora-v1\" }\n";
    let (code, _, err) = check(&labelled, &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("migration.ring.compat") && err.contains("label rules"),
        "{err}"
    );
    // Proxy and admin on one address.
    let p = free_addr();
    let (code, _, err) = check(
        &config_with(&["127.0.0.1:9001".parse().unwrap()], p, p, "", ""),
        &[],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("admin.listen") && err.contains("different addresses"),
        "{err}"
    );
    // A token that auth = false ignores: allowed, with a warning.
    let (code, _, err) = check(
        &base.replace("token = \"sekret\"", "token = \"sekret\"\nauth = false"),
        &[],
    );
    assert_eq!(code, 0);
    assert!(
        err.contains("warning") && err.contains("auth = false"),
        "{err}"
    );
}

#[test]
fn the_example_config_checks_as_its_header_says() {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/router.toml");
    let text = std::fs::read_to_string(&example).unwrap();
    // The header's command, as written: the token comes from the variable.
    assert!(
        text.contains("KETAMA_ADMIN_TOKEN=") && text.contains("--check"),
        "{text}"
    );
    let (code, out, err) = check(&text, &[("KETAMA_ADMIN_TOKEN", "change-me")]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("config OK"));
    let out = router_command()
        .args(["--config", example.to_str().unwrap(), "--check"])
        .env_remove("KETAMA_ADMIN_TOKEN")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("KETAMA_ADMIN_TOKEN") && err.contains("set it"),
        "{err}"
    );
}

#[test]
fn a_toml_syntax_error_names_the_line_it_is_on() {
    let (code, _, err) = check(
        "[server]\nlisten = [\"127.0.0.1:8080\"\nthreads = 1\n\n[admin]\nlisten = \"127.0.0.1:9901\"\nauth = false\n",
        &[],
    );
    assert_eq!(code, 1);
    assert!(err.contains("line 2 (server.listen)"), "{err}");
}

#[test]
fn the_demo_starts_where_its_ports_are_taken() {
    // Take 8080 and 9901 if free (if something else holds them, they are
    // taken anyway).
    let _a = TcpListener::bind("127.0.0.1:8080");
    let _b = TcpListener::bind("127.0.0.1:9901");
    let mut child = router_command()
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut urls = Vec::new();
    while urls.len() < 2 {
        let line = lines
            .next()
            .expect("the demo prints its curl commands")
            .unwrap();
        if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
            urls.push(url.to_string());
        }
    }
    let proxy: SocketAddr = urls[0]
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let admin: SocketAddr = urls[1]
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_ne!(proxy.port(), 8080);
    assert_ne!(admin.port(), 9901);
    wait_for(Duration::from_secs(20), || {
        std::net::TcpStream::connect(proxy).is_ok()
    });
    let resp = request(proxy, "GET", "/some/path", &[], "").unwrap();
    assert_eq!(resp.status, 200, "{}", resp.body);
    assert!(resp.headers.contains_key("x-ketama-backend"));
    assert_eq!(
        request(admin, "GET", "/status", &[], "").unwrap().status,
        200
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Runs Python's `prometheus_client` parsers over an exposition; returns
/// `name type` per family, one per line.
fn python_families(text: &str, openmetrics: bool) -> String {
    let parser = if openmetrics {
        "prometheus_client.openmetrics.parser"
    } else {
        "prometheus_client.parser"
    };
    let script = format!(
        "import sys\nfrom {parser} import text_string_to_metric_families as parse\nfor f in parse(sys.stdin.read()):\n    print(f.name, f.type)\n"
    );
    let mut child = Command::new("python3")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 with prometheus_client (pip install prometheus-client; .ci/run does)");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client rejected the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn metrics_parse_strictly_and_counters_survive_reloads() {
    let origins: Vec<Origin> = (0..3).map(|i| Origin::start(i).unwrap()).collect();
    let addrs: Vec<SocketAddr> = origins.iter().map(|o| o.addr()).collect();
    let (r, dir) = router_over(&addrs, "", "");
    for u in urls(30) {
        assert_eq!(get(&r, &u).status, 200);
    }
    let text = metrics_text(&r);
    // Python's text-format parser: every family typed once, none split
    // into untyped pieces (it names a counter family without `_total`).
    let families = python_families(&text, false);
    let mut names: Vec<&str> = families
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert!(
        families.lines().all(|l| !l.ends_with(" unknown")),
        "{families}"
    );
    for want in [
        "ketama_requests counter",
        "ketama_lookups counter",
        "ketama_ring_points gauge",
        "ketama_ring_bytes gauge",
        "ketama_request_duration_seconds histogram",
        "ketama_reloads counter",
    ] {
        assert!(families.lines().any(|l| l == want), "{want} in {families}");
    }
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "a family appears twice: {families}");
    // And contiguous samples after each TYPE, checked directly.
    let mut seen_types = std::collections::HashSet::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            current = rest.split(' ').next().unwrap().to_string();
            assert!(seen_types.insert(current.clone()), "{current} typed twice");
        } else if !line.starts_with('#') {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(
                name == current
                    || name.starts_with(&format!("{current}_"))
                    || current.starts_with(name),
                "{name} outside its family (under {current})"
            );
        }
    }
    // OpenMetrics, when asked for.
    let om = request(
        r.admin,
        "GET",
        "/metrics",
        &[
            ("authorization", "Bearer sekret"),
            ("accept", "application/openmetrics-text; version=1.0.0"),
        ],
        "",
    )
    .unwrap();
    assert!(om.headers["content-type"].starts_with("application/openmetrics-text"));
    python_families(&om.body, true);
    // Per-backend histograms counted every request.
    let count: f64 = addrs
        .iter()
        .map(|a| {
            sample(
                &text,
                &format!("ketama_request_duration_seconds_count{{backend=\"{a}\"}}"),
            )
        })
        .sum();
    assert_eq!(count, 30.0);
    // A reload never takes a counter down.
    let lookups = sample(&text, "ketama_lookups_total{ring=\"only\"}");
    assert_eq!(lookups, 30.0);
    let resp = request(
        r.admin,
        "POST",
        "/reload",
        &[("authorization", "Bearer sekret")],
        "",
    )
    .unwrap();
    assert_eq!(resp.status, 200, "{}", resp.body);
    let after = metrics_text(&r);
    assert_eq!(
        sample(&after, "ketama_lookups_total{ring=\"only\"}"),
        30.0,
        "{after}"
    );
    drop(dir);
}

#[test]
fn forwarded_headers_and_their_switch() {
    let origin = Origin::start(0).unwrap();
    let (r, _dir) = router_over(&[origin.addr()], "", "");
    assert_eq!(get(&r, "/a").status, 200);
    let head = origin.last_head().to_ascii_lowercase();
    assert!(head.contains("x-forwarded-for: 127.0.0.1\r\n"), "{head}");
    assert!(head.contains("x-forwarded-proto: http\r\n"), "{head}");
    let resp = request(
        r.proxy,
        "GET",
        "/b",
        &[("x-forwarded-for", "203.0.113.7")],
        "",
    )
    .unwrap();
    assert_eq!(resp.status, 200);
    let head = origin.last_head().to_ascii_lowercase();
    assert!(
        head.contains("x-forwarded-for: 203.0.113.7, 127.0.0.1\r\n"),
        "{head}"
    );

    let (r, _dir) = router_over(&[origin.addr()], "forwarded_headers = false", "");
    assert_eq!(get(&r, "/c").status, 200);
    let head = origin.last_head().to_ascii_lowercase();
    assert!(!head.contains("x-forwarded"), "{head}");
}

#[test]
fn a_502_says_what_happened_in_plain_words() {
    let origins: Vec<Origin> = (0..2).map(|i| Origin::start(i).unwrap()).collect();
    let addrs: Vec<SocketAddr> = origins.iter().map(|o| o.addr()).collect();
    let (r, _dir) = router_over(&addrs, "", "");
    for o in &origins {
        o.kill();
    }
    let resp = get(&r, "/gone");
    assert_eq!(resp.status, 502);
    assert!(
        resp.body
            .starts_with("ketama-router: no backend could serve this request (tried "),
        "{}",
        resp.body
    );
    assert!(!resp.body.contains("  "), "{:?}", resp.body);
    assert!(
        !resp.body.contains("HTTPStatus") && !resp.body.contains("context:"),
        "{:?}",
        resp.body
    );
}

#[test]
fn concurrent_scrapes_each_see_every_family_whole() {
    // Two rings (a migration) and a discovery source that never answers:
    // every scrape must show both rings' points and bytes and the source's
    // backend count, however many scrapes render at once (the admin
    // runtime has two threads here).
    let origins: Vec<Origin> = (0..3).map(|i| Origin::start(i).unwrap()).collect();
    let addrs: Vec<SocketAddr> = origins.iter().map(|o| o.addr()).collect();
    let dead = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let extra = format!(
        "[migration]\nring = {{ compat = \"nginx\", layout = \"compact\", point_multiple = 16 }}\nglobal_bp = 0\n\n[[discovery]]\nsrv = \"_x._tcp.example.test\"\nresolvers = [\"{}\"]\ntimeout_ms = 100\n",
        dead.local_addr().unwrap()
    );
    let (r, _dir) = router_over(&addrs, "threads = 2", &extra);
    let want = [
        "ketama_ring_points{ring=\"old\"}",
        "ketama_ring_points{ring=\"new\"}",
        "ketama_ring_bytes{ring=\"old\"}",
        "ketama_ring_bytes{ring=\"new\"}",
        "ketama_discovery_backends{source=\"srv _x._tcp.example.test\"}",
    ];
    let r = &r;
    std::thread::scope(|s| {
        let scrapers: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(move || {
                    for _ in 0..60 {
                        let text = metrics_text(r);
                        for w in want {
                            assert!(
                                text.lines().any(|l| l.starts_with(w)),
                                "{w} missing from a scrape rendered beside others"
                            );
                        }
                    }
                })
            })
            .collect();
        for t in scrapers {
            t.join().unwrap();
        }
    });
}
