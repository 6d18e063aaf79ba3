//! `[key] template` against nginx 1.22's `hash <template> consistent`,
//! live: random templates (8 a run) over every variable, each sent random
//! requests (escapes, `.` and `..`, `//`, repeated and case-varied
//! arguments, `Host` with case, a port and a trailing dot or none at all,
//! absolute-form targets, several `Cookie` lines, repeated fields), to
//! nginx and to a router over the same four origins. Every request nginx
//! forwards must reach the same origin through the router; requests nginx
//! refuses are left out, and those whose key is empty (nginx and the
//! router both fall back to round robin) are counted apart. nginx tells
//! which keys were empty in a field (`map <template> $empty`).
//!
//! `KETAMA_KEY_SEED` replays a run (each run prints its seed).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::echo::echo_origin;
use common::tls::Nginx;
use common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const NAMES: &[&str] = &["a", "ID", "sid", "x_k", "lang", "v"];

/// A random template over every variable nginx and the router share.
fn template(rng: &mut StdRng) -> String {
    let mut t = String::new();
    for _ in 0..rng.random_range(1..=3) {
        if rng.random_bool(0.3) {
            t.push_str(["/", ":", "|", "-", ".", "~", "@", ","][rng.random_range(0..8)]);
        }
        let name = NAMES[rng.random_range(0..NAMES.len())];
        let var = match rng.random_range(0..13) {
            0 => "request_uri".to_string(),
            1 => "uri".into(),
            2 => "args".into(),
            3 | 4 => format!("arg_{name}"),
            5 | 6 => format!("cookie_{name}"),
            7 => format!("http_{name}"),
            8 => "host".into(),
            9 => "http_host".into(),
            10 => ["http_cookie", "http_x_forwarded_for"][rng.random_range(0..2)].into(),
            11 => "remote_addr".into(),
            _ => "scheme".into(),
        };
        let var = if rng.random_bool(0.3) {
            var.to_uppercase()
        } else {
            var
        };
        // A name character after a bare name would extend it: bracket it.
        if rng.random_bool(0.3) {
            t.push_str(&format!("${{{var}}}"));
            if rng.random_bool(0.5) {
                t.push('k');
            }
        } else {
            t.push_str(&format!("${var}"));
        }
    }
    t
}

fn pick<'a>(rng: &mut StdRng, from: &[&'a str]) -> &'a str {
    from[rng.random_range(0..from.len())]
}

/// A random request, as bytes, `Connection: close`.
fn request(rng: &mut StdRng) -> Vec<u8> {
    let mut path = String::new();
    for _ in 0..rng.random_range(1..=4) {
        path.push_str(pick(rng, &["/", "//"]));
        path.push_str(pick(
            rng,
            &[
                "a", "B", ".", "..", "%2e", "%2E%2e", "x%2Fy", "%41b", "c%25d", "e%3Ff", "g%23h",
                "i+j", "k%20l", "..x", "obj.ts",
            ],
        ));
    }
    if rng.random_bool(0.3) {
        path.push('/');
    }
    let mut target = path;
    if rng.random_bool(0.8) {
        let mut args = Vec::new();
        for _ in 0..rng.random_range(0..=4) {
            let name = pick(
                rng,
                &[
                    "a", "A", "id", "ID", "Id", "sid", "x_k", "lang", "v", "xa", "aa",
                ],
            );
            args.push(match rng.random_range(0..5) {
                0 => name.to_string(),
                1 => format!("{name}="),
                _ => format!(
                    "{name}={}",
                    pick(rng, &["1", "two", "%2F3", "x+y", "a=b", "Z"])
                ),
            });
        }
        target.push('?');
        target.push_str(&args.join("&"));
    }
    if rng.random_bool(0.1) {
        target.push_str(pick(rng, &["#f", "#/../x", "#?a=9"]));
    }
    if rng.random_bool(0.1) {
        target = format!(
            "http://{}{target}",
            pick(rng, &["Abs.Example", "abs.example:81", "abs.example."])
        );
    }
    let http10 = rng.random_bool(0.1);
    let mut head = format!("GET {target} HTTP/1.{}\r\n", if http10 { 0 } else { 1 });
    let host = pick(
        rng,
        &[
            "cdn.example",
            "CDN.Example",
            "cdn.example:8080",
            "cdn.example.",
            "Cdn.Example.:80",
            "[::1]:80",
            "10.0.0.1",
        ],
    );
    if !(http10 && rng.random_bool(0.5)) {
        head.push_str(&format!("Host: {host}\r\n"));
    }
    for _ in 0..rng.random_range(0..=3) {
        let c = pick(
            rng,
            &[
                "a=1",
                "ID=7; sid=s1",
                "SID = \"q\"; lang=en",
                "x_k=9, v=2",
                "lang=fr;sid=s2",
                "sid",
                "sid;sid=s3",
                "v=; a=",
                "xsid=0",
            ],
        );
        head.push_str(&format!(
            "{}: {c}\r\n",
            pick(rng, &["Cookie", "cookie", "COOKIE"])
        ));
    }
    for _ in 0..rng.random_range(0..=3) {
        let (n, v) = [
            ("X-K", "k1"),
            ("x-k", "k2"),
            ("X-Forwarded-For", "1.1.1.1"),
            ("x-forwarded-for", "2.2.2.2, 3.3.3.3"),
            ("Lang", "de"),
            ("V", "vv"),
            ("ID", "hid"),
            ("A", ""),
            ("X_K", "ignored"),
        ][rng.random_range(0..9)];
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    head.into_bytes()
}

/// What a server answered: its status, whether nginx's key was empty
/// (its `X-Key-Empty` field), and for a 200 the origin's port.
fn ask(addr: SocketAddr, bytes: &[u8]) -> (u16, bool, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let empty = text
        .lines()
        .any(|l| l.eq_ignore_ascii_case("x-key-empty: 1"));
    let port = text
        .split_once("\r\n\r\nsaw ")
        .and_then(|(_, b)| b.split(' ').next())
        .unwrap_or("")
        .to_string();
    (status, empty, port)
}

/// The same key taken again from the router's access log: every line the
/// router forwarded (`Connection: close`, one a request) fed to `ketama
/// route --key-config <the router's file> --request-format access-log`, whose
/// answer must be the line's backend (`*`, no key, for a request the
/// router sent round robin). `want`: the requests the router forwarded.
/// The number of lines compared, and each difference.
fn replay(
    want: usize,
    dir: &std::path::Path,
    config: &std::path::Path,
    origins: &[SocketAddr],
) -> (usize, Vec<String>) {
    let log = dir.join("access.log");
    // Every request the router forwarded is logged, within its flush
    // interval: poll for that many lines of status 200.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let lines = loop {
        let l = json_lines(&log);
        let forwarded = l.iter().filter(|l| l["status"] == 200).count();
        if forwarded >= want {
            break l;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{forwarded} of {want} forwarded requests' access log lines written",
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let servers = dir.join("servers.txt");
    let list: String = origins.iter().map(|o| format!("{o}\n")).collect();
    std::fs::write(&servers, list).unwrap();
    let out = std::process::Command::new(common::plan::ketama())
        .args([
            "route",
            "--layout",
            "compact",
            "--request-format",
            "access-log",
        ])
        .arg("--servers")
        .arg(&servers)
        .arg("--key-config")
        .arg(config)
        .stdin(std::fs::File::open(&log).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ketama route: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(answers.len(), text.lines().count(), "one answer a line");
    let mut diffs = Vec::new();
    let mut compared = 0;
    for (line, answer) in lines.iter().zip(&answers) {
        let backend = line["backend"].as_str().unwrap_or("");
        if line["status"] != 200 || backend.is_empty() || answer == "*" {
            continue;
        }
        compared += 1;
        if answer != backend {
            diffs.push(format!("{line}: router {backend}, ketama route {answer}"));
        }
    }
    (compared, diffs)
}

#[test]
fn random_templates_route_as_nginxs_hash_template_consistent() {
    let seed: u64 = std::env::var("KETAMA_KEY_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    eprintln!("KETAMA_KEY_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let origins: Vec<SocketAddr> = (0..4).map(|_| echo_origin()).collect();
    let servers: String = origins.iter().map(|o| format!("server {o}; ")).collect();
    let templates: Vec<String> = (0..8).map(|_| template(&mut rng)).collect();
    let listens: Vec<SocketAddr> = (0..templates.len()).map(|_| free_addr()).collect();
    let nginx = Nginx::start(|addr| {
        let mut http = format!("server {{ listen {addr}; return 204; }}\n");
        for (i, (t, l)) in templates.iter().zip(&listens).enumerate() {
            http.push_str(&format!(
                "upstream o{i} {{ hash \"{t}\" consistent; {servers}}}
  map \"{t}\" $empty{i} {{ \"\" 1; default 0; }}
  server {{ listen {l}; location / {{ proxy_pass http://o{i}; proxy_http_version 1.1; proxy_set_header Connection \"\"; add_header X-Key-Empty $empty{i} always; }} }}\n"
            ));
        }
        http
    });
    let routers: Vec<_> = templates
        .iter()
        .map(|t| {
            router_from(|proxy, admin, dir| {
                let extra = format!(
                    "enabled = false\n\n[key]\ntemplate = \"{t}\"\n\n[access_log]\npath = \"{}\"\n",
                    dir.join("access.log").display()
                );
                config_with(&origins, proxy, admin, "", &extra)
            })
        })
        .collect();
    let (mut compared, mut refused, mut empty, mut replayed) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for (i, t) in templates.iter().enumerate() {
        let (mut rr_ports, mut rr) = (std::collections::BTreeSet::new(), 0);
        let mut answered = 0;
        for _ in 0..150 {
            let req = request(&mut rng);
            let n = ask(listens[i], &req);
            let r = ask(routers[i].0.proxy, &req);
            if r.0 == 200 {
                answered += 1;
            }
            if n.0 != 200 {
                refused += 1;
                continue;
            }
            if n.1 {
                // Both route it round robin: nothing to compare but that
                // the router forwarded it.
                empty += 1;
                rr += 1;
                if r.0 != 200 {
                    failures.push(format!("{t}: {} router {r:?}", req.escape_ascii()));
                }
                rr_ports.insert(r.2);
                continue;
            }
            compared += 1;
            if n != r {
                failures.push(format!(
                    "{t}: {}\n  nginx {n:?}\n  router {r:?}",
                    req.escape_ascii()
                ));
            }
        }
        if rr_ports.len() == 1 && rr >= 20 {
            failures.push(format!("{t}: all {rr} empty keys went to one origin"));
        }
        let (_, dir, config) = &routers[i];
        let (n, diffs) = replay(answered, dir.path(), config, &origins);
        replayed += n;
        failures.extend(diffs.into_iter().map(|d| format!("{t}: ketama route: {d}")));
    }
    eprintln!(
        "templates {templates:?}: {compared} compared, {empty} empty keys, {refused} refused by nginx, {replayed} access log lines routed again by ketama route, {} differences",
        failures.len()
    );
    drop(nginx);
    assert!(failures.is_empty(), "seed {seed}:\n{}", failures.join("\n"));
    assert!(
        compared > 600,
        "seed {seed}: only {compared} of 1,200 requests compared"
    );
    assert!(
        replayed > 600,
        "seed {seed}: only {replayed} access log lines routed again"
    );
}
