//! The memcached schemes end to end: `ketama route --compat libmemcached`
//! and `--compat twemproxy --key-hash H` against the real programs, run now
//! (libmemcached's `memcached_generate_hash` and a live nutcracker in front
//! of memcached, through `testdata/memcached/regen.py --quick`), and
//! `ketama diff` across key hashes.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{run, servers_file};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/memcached")
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The keys of `dir/list.keys` as `ketama route` input: raw bytes, one
/// per line.
fn route_input(dir: &Path, list: &str) -> Vec<u8> {
    let text = std::fs::read_to_string(dir.join(format!("{list}.keys"))).unwrap();
    let mut out = Vec::new();
    for l in text.lines() {
        out.extend(unhex(l));
        out.push(b'\n');
    }
    out
}

/// Runs `ketama route` on every trace in `dir`; returns how many traces.
fn route_traces(dir: &Path) -> usize {
    let mut checked = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let Some(stem) = name.strip_suffix(".trace") else {
            continue;
        };
        let (list, scheme) = stem.split_once('.').unwrap();
        let servers = dir.join(format!("{list}.servers"));
        let mut args = vec!["route", "--servers", servers.to_str().unwrap()];
        match scheme.strip_prefix("twemproxy-") {
            Some(h) => args.extend(["--compat", "twemproxy", "--key-hash", h]),
            None => args.extend(["--compat", scheme]),
        }
        let want = std::fs::read_to_string(dir.join(&name)).unwrap();
        for layout in ["wide", "compact"] {
            let mut a = args.clone();
            a.extend(["--layout", layout]);
            let (code, out, err) = run(&a, &route_input(dir, list));
            assert_eq!(code, 0, "{name}: {err}");
            assert!(
                out == want,
                "{name} ({layout}): ketama route differs from the program"
            );
        }
        checked += 1;
    }
    checked
}

#[test]
fn routes_like_libmemcached_and_twemproxy_on_the_golden_traces() {
    assert!(route_traces(&testdata()) >= 40);
}

/// The regeneration script, run now against the installed programs (small
/// lists, three key hashes): the traces it records must equal ketama's
/// answers. This is the check that the committed traces still describe the
/// programs CI installs.
#[test]
fn routes_like_the_programs_running_now() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("python3")
        .arg(testdata().join("regen.py"))
        .args(["--quick", "--keys", "400", "--seed", "7", "--out"])
        .arg(dir.path())
        .output()
        .expect("python3 must be installed (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "regen.py --quick failed (scripts/setup.sh installs nutcracker, memcached, libmemcached-dev): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One libmemcached list, one twemproxy list with three key hashes.
    assert_eq!(route_traces(dir.path()), 4);
}

#[test]
fn scheme_options_are_checked() {
    let f = servers_file("10.0.0.1:11211\n10.0.0.2:11212 2 name=cache-b\n");
    let p = f.path().to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--compat", "nginx", "--key-hash", "md5"],
            "--key-hash md5 does not apply to nginx",
        ),
        (
            &["--compat", "libmemcached", "--key-hash", "murmur"],
            "--key-hash murmur does not apply to libmemcached",
        ),
        (
            &["--compat", "twemproxy", "--key-hash", "sha1"],
            "unknown key hash \"sha1\"",
        ),
        (
            &["--compat", "twemproxy", "--point-multiple", "40"],
            "160 points per server on average",
        ),
        (
            &["--compat", "libmemcached"],
            "name= is a twemproxy server name",
        ),
        (&["--compat", "nginx"], "name= is a twemproxy server name"),
        (
            &["--compat", "twemproxy", "--require", "eu"],
            "unknown label \"eu\"",
        ),
    ];
    for (extra, want) in cases {
        let mut a = vec!["route", "--servers", p];
        a.extend_from_slice(extra);
        let (code, _, err) = run(&a, b"k\n");
        assert_ne!(code, 0, "{extra:?}");
        assert!(err.contains(want), "{extra:?}: {err}");
    }
    let (code, _, err) = run(
        &[
            "recommend",
            "--servers",
            p,
            "--compat",
            "twemproxy",
            "--max-cv",
            "0.1",
        ],
        b"",
    );
    assert_ne!(code, 0);
    assert!(err.contains("fixes at 160 on average"), "{err}");
    let labelled = servers_file("10.0.0.1:11211 labels=eu\n10.0.0.2:11211\n");
    let (code, _, err) = run(
        &[
            "route",
            "--servers",
            labelled.path().to_str().unwrap(),
            "--compat",
            "libmemcached",
            "--require",
            "eu",
        ],
        b"k\n",
    );
    assert_ne!(code, 0);
    assert!(
        err.contains(
            "label requirements need the nginx, pingora-v2 or haproxy scheme, not libmemcached"
        ),
        "{err}"
    );
    // Named servers route under twemproxy and print as written.
    let (code, out, err) = run(
        &["route", "--servers", p, "--compat", "twemproxy"],
        b"a\nb\nc\nd\n",
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.lines()
            .all(|l| l == "10.0.0.1:11211" || l == "10.0.0.2:11212"),
        "{out}"
    );
}

/// Across key hashes `ketama diff` samples keys and says so; its estimate
/// must agree with routing the same keys through `ketama route` on both
/// rings, within its own interval. With one key hash (twemproxy md5 and
/// libmemcached) it is exact.
#[test]
fn diff_across_key_hashes_is_an_estimate_with_its_interval() {
    let servers = testdata().join("lm-2.servers");
    let s = servers.to_str().unwrap();
    let (code, out, err) = run(
        &[
            "diff",
            "--from",
            s,
            "--to",
            s,
            "--from-compat",
            "twemproxy",
            "--from-key-hash",
            "md5",
            "--to-compat",
            "libmemcached",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("moved: 0.000000 of the keyspace (0 of 2^32 keys)"),
        "{out}"
    );

    let keys: String = (0..20_000).map(|i| format!("/obj/{i:08x}\n")).collect();
    let keys_file = servers_file(&keys);
    let (code, out, err) = run(
        &[
            "diff",
            "--from",
            s,
            "--to",
            s,
            "--from-compat",
            "twemproxy",
            "--to-compat",
            "nginx",
            "--keys",
            keys_file.path().to_str().unwrap(),
            "--json",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["estimated"], true);
    assert_eq!(v["samples"], 20_000);
    assert!(v["why"]
        .as_str()
        .unwrap()
        .contains("hash spaces are unrelated"));
    let route = |compat: &str| {
        let (code, out, err) = run(
            &["route", "--servers", s, "--compat", compat],
            keys.as_bytes(),
        );
        assert_eq!(code, 0, "{err}");
        out
    };
    let (a, b) = (route("twemproxy"), route("nginx"));
    let moved = a.lines().zip(b.lines()).filter(|(x, y)| x != y).count() as f64 / 20_000.0;
    assert_eq!(v["moved"].as_f64().unwrap(), moved);
    let (lo, hi) = (
        v["ci95"][0].as_f64().unwrap(),
        v["ci95"][1].as_f64().unwrap(),
    );
    assert!(
        lo < moved && moved < hi && hi - lo < 0.02,
        "{lo} {moved} {hi}"
    );
    // Independent mappings of 25 weighted servers: the moved share is
    // 1 - sum(share^2), well inside (0.9, 0.99).
    assert!(moved > 0.9 && moved < 0.99, "{moved}");

    // migrate-plan estimates the same way, from the same default samples.
    let two = [
        "--from",
        s,
        "--to",
        s,
        "--from-compat",
        "twemproxy",
        "--to-compat",
        "nginx",
    ];
    let (code, out, err) = run(&[&["diff"][..], &two, &["--json"]].concat(), b"");
    assert_eq!(code, 0, "{err}");
    let d: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["samples"], 1_000_000);
    let (code, out, err) = run(
        &[
            &["migrate-plan"][..],
            &two,
            &["--steps", "5000,10000", "--json"],
        ]
        .concat(),
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let p: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(p["estimated"], true);
    assert_eq!(p["steps"][1]["moved"], d["moved"]);
    let half = p["steps"][0]["moved"].as_f64().unwrap();
    assert!((half - d["moved"].as_f64().unwrap() / 2.0).abs() < 1e-12);
}
