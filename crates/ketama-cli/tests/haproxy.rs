//! The HAProxy scheme end to end through the `ketama` binary: `ketama
//! import haproxy` on a real configuration, `ketama route --compat
//! haproxy[:HASH]` on the live HAProxy's golden traces, `ketama diff`
//! pricing a move from HAProxy, and every refusal naming what to fix.

mod common;

use std::path::{Path, PathBuf};

use common::{refused, run, servers_file};
use ketama::haproxy::UriKey;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/haproxy")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn routes_like_haproxy_on_the_golden_traces() {
    let dir = testdata();
    let mut checked = 0;
    for list in ["hp-2", "hp-4"] {
        for hash in ["sdbm+avalanche", "djb2", "crc32+avalanche"] {
            let keys = read(&dir.join(format!("{list}.{hash}.keys")));
            // `balance uri`: each target up to its `?`.
            let input: Vec<u8> = keys
                .lines()
                .flat_map(|k| [UriKey::default().key(k.as_bytes()), b"\n"].concat())
                .collect();
            let want = read(&dir.join(format!("{list}.{hash}.trace")));
            let servers = dir.join(format!("{list}.servers"));
            let compat = format!("haproxy:{hash}");
            for layout in ["wide", "packed", "compact"] {
                let (code, out, err) = run(
                    &[
                        "route",
                        "--servers",
                        servers.to_str().unwrap(),
                        "--compat",
                        &compat,
                        "--layout",
                        layout,
                    ],
                    &input,
                );
                assert_eq!(code, 0, "{list} {hash}: {err}");
                assert!(
                    out == want,
                    "{list} {hash} ({layout}): ketama route differs from HAProxy"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 18);
}

#[test]
fn import_writes_a_servers_file_that_routes_as_the_backend() {
    let cfg = servers_file(
        "global\n  maxconn 100\ndefaults\n  mode http\n  timeout connect 1s\n\
         backend static\n  server x 10.9.0.1:80\n\
         backend cache\n  balance uri whole\n  hash-type consistent djb2 avalanche\n  default-server check inter 2s\n  server a 10.0.0.1:80 weight 3\n  server b 10.0.0.2:80 id 9 maxconn 50\n  server c [2001:db8::3]:80 disabled\n  server d 10.0.0.4:80 weight 0\n",
    );
    let p = cfg.path().to_str().unwrap();
    let (code, out, err) = run(&["import", "haproxy", p, "--backend", "cache"], b"");
    assert_eq!(code, 0, "{err}");
    let body: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        body,
        [
            "10.0.0.1:80 3",
            "10.0.0.2:80 1 id=9",
            "[2001:db8::3]:80 1 down",
            "10.0.0.4:80 0"
        ]
    );
    assert!(
        out.contains("route with --compat haproxy:djb2+avalanche"),
        "{out}"
    );
    assert!(out.contains("[key] balance = \"uri whole\""), "{out}");
    // A balance the router cannot take is named as such.
    let odd = servers_file(
        "backend b\n  balance hash src\n  hash-type consistent\n  server a 10.0.0.1:80\n",
    );
    let (code, said, err) = run(&["import", "haproxy", odd.path().to_str().unwrap()], b"");
    assert_eq!(code, 0, "{err}");
    assert!(said.contains("# balance hash src: ketama-router cannot route by it (\"src\": write a fetch with its argument"), "{said}");
    // The file routes: the ids are HAProxy's (a: 1, b: 9, c: 3, d: 4).
    let servers = servers_file(&out);
    let (code, routed, err) = run(
        &[
            "route",
            "--servers",
            servers.path().to_str().unwrap(),
            "--compat",
            "haproxy:djb2+avalanche",
            "--replicas",
            "2",
        ],
        b"/a\n/b\n/c\n",
    );
    assert_eq!(code, 0, "{err}");
    for l in routed.lines() {
        let servers: Vec<&str> = l.split(' ').collect();
        assert_eq!(servers.len(), 2, "{l}");
        assert!(
            servers
                .iter()
                .all(|s| ["10.0.0.1:80", "10.0.0.2:80"].contains(s)),
            "{l}"
        );
    }
    // Two backends with servers: one must be named.
    let (code, _, err) = run(&["import", "haproxy", p], b"");
    assert_ne!(code, 0);
    assert!(
        err.contains("2 sections have servers (static, cache): name one with --backend"),
        "{err}"
    );
}

#[test]
fn refusals_name_the_input_and_what_to_do() {
    let bad = servers_file(
        "backend b\n  server a 10.0.0.1:80\n  server b 10.0.0.2:80 weight 2 track other/b\n  server c 10.0.0.3:80 frob\n",
    );
    let bad = bad.path().to_str().unwrap();
    refused(
        &["import", "haproxy", bad],
        b"",
        ":4: unknown server parameter \"frob\"",
    );
    refused(
        &["import", "haproxy", "/nonexistent/haproxy.cfg"],
        b"",
        "cannot read HAProxy configuration /nonexistent/haproxy.cfg",
    );
    let f = servers_file("10.0.0.1:80 id=3\n10.0.0.2:80 2\n");
    let heavy = servers_file("10.0.0.1:80 300\n");
    let (p, h) = (f.path().to_str().unwrap(), heavy.path().to_str().unwrap());
    let cases: &[(&[&str], &str)] = &[
        (
            &["--servers", p, "--compat", "nginx"],
            "id= is a HAProxy server id and nginx does not use one",
        ),
        (
            &["--servers", p, "--compat", "haproxy", "--key-hash", "md5"],
            "--key-hash md5 does not apply to haproxy",
        ),
        (
            &[
                "--servers",
                p,
                "--compat",
                "haproxy",
                "--point-multiple",
                "40",
            ],
            "gives 16 points per weight unit",
        ),
        (
            &["--servers", p, "--compat", "haproxy:md5"],
            "haproxy:FUNCTION[+avalanche]",
        ),
        (
            &["--servers", h, "--compat", "haproxy"],
            "weight 300 is over HAProxy's largest, 256",
        ),
    ];
    for (extra, want) in cases {
        refused(&[&["route"], *extra].concat(), b"k\n", want);
    }
    let out = std::env::temp_dir().join(format!("ketama-sweep-{}.csv", std::process::id()));
    let sweep = [
        "sweep", "--nodes", "5", "--from", "10", "--to", "100", "--compat", "haproxy", "--out",
    ];
    refused(
        &[&sweep[..], &[out.to_str().unwrap()]].concat(),
        b"",
        "fixes at 16 per weight unit",
    );
}

/// (server, gained, lost) of a `ketama diff --json`.
fn moves(out: &str) -> Vec<(String, f64, f64)> {
    let v: serde_json::Value = serde_json::from_str(out).unwrap();
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["server"].as_str().unwrap().to_string(),
                s["gained"].as_f64().unwrap(),
                s["lost"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// `ketama diff --from FROM --from-compat haproxy --to TO EXTRA...`:
/// its stdout, the command having succeeded.
fn diff_from_haproxy(from: &str, to: &str, extra: &[&str]) -> String {
    let args = [
        &[
            "diff",
            "--from",
            from,
            "--from-compat",
            "haproxy",
            "--to",
            to,
        ][..],
        extra,
    ]
    .concat();
    let (code, out, err) = run(&args, b"");
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

#[test]
fn diff_prices_a_move_from_haproxy() {
    // hp-1: five servers, no explicit id.
    let servers = testdata().join("hp-1.servers");
    let s = servers.to_str().unwrap();
    // Same hash space (HAProxy's crc32 is nginx's CRC-32): exact.
    let (code, out, err) = run(
        &[
            "diff",
            "--from",
            s,
            "--from-compat",
            "haproxy:crc32",
            "--to",
            s,
            "--to-compat",
            "nginx",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("of the keyspace"), "{out}");
    // Different hash spaces: sampled, and said so.
    let out = diff_from_haproxy(
        s,
        s,
        &[
            "--to-compat",
            "pingora-v2",
            "--to-layout",
            "compact",
            "--samples",
            "20000",
        ],
    );
    assert!(
        out.contains("estimated from 20000 sampled keys")
            && out.contains("haproxy by haproxy:sdbm+avalanche"),
        "{out}"
    );
    let text = read(&servers);
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let diff_without = |drop: usize| {
        let rest: Vec<&str> = lines
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != drop)
            .map(|(_, l)| *l)
            .collect();
        let f = servers_file(&rest.join("\n"));
        moves(&diff_from_haproxy(
            s,
            f.path().to_str().unwrap(),
            &["--to-compat", "haproxy", "--json"],
        ))
    };
    // Removing the last server moves only its keys.
    let last = lines[lines.len() - 1].split(' ').next().unwrap();
    for (server, gained, lost) in diff_without(lines.len() - 1) {
        if server == last {
            assert!(lost > 0.0 && gained == 0.0, "{server}");
        } else {
            assert_eq!(lost, 0.0, "{server}: keys moved off a server that stayed");
        }
    }
    // Removing the first renumbers the servers after it (HAProxy's
    // counter rule): their points move too, as in HAProxy.
    let first = lines[0].split(' ').next().unwrap();
    let others_lost: f64 = diff_without(0)
        .iter()
        .filter(|m| m.0 != first)
        .map(|m| m.2)
        .sum();
    assert!(
        others_lost > 0.1,
        "renumbered servers kept their keys: {others_lost}"
    );
}
