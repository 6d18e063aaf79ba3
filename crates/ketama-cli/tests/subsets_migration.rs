//! `ketama route --require`, `--require-from-input`, `--to ... --rollout`
//! and `ketama migrate-plan`, end to end against the library.

use std::process::Command;

use ketama::Version;
use std::sync::Arc;

use ketama::{parse_servers, Migration, Requirement, RingBuilder, Rollout};

mod common;

fn run(args: &[&str], input: &str) -> (i32, String, String) {
    common::run(args, input.as_bytes())
}

use common::servers_file as file;

const OLD: &str = "10.0.0.1:80 labels=eu,ssd\n10.0.0.2:80 labels=us\n10.0.0.3:80 2 labels=eu\n10.0.0.5:80 labels=us,video\n";
const NEW: &str = "10.0.0.1:80 labels=eu,ssd\n10.0.0.2:80 labels=us\n10.0.0.3:80 2 labels=eu\n10.0.0.4:80 labels=us,ssd\n";

fn keys() -> Vec<String> {
    (0..500).map(|i| format!("/k/{i}")).collect()
}

#[test]
fn require_matches_the_library() {
    let f = file(OLD);
    let ring = Arc::new(
        RingBuilder::new()
            .build(parse_servers(OLD, "old".as_ref()).unwrap())
            .unwrap(),
    );
    for req in ["eu", "us", "eu,ssd", "us,video", "eu,us"] {
        let labels: Vec<&str> = req.split(',').collect();
        let r = Requirement::new(&ring, &labels).unwrap();
        let want: Vec<&str> = keys()
            .iter()
            .map(|k| r.node(k.as_bytes()).map_or("-", |n| n.server()))
            .collect();
        let (code, out, err) = run(
            &[
                "route",
                "--servers",
                f.path().to_str().unwrap(),
                "--require",
                req,
            ],
            &(keys().join("\n") + "\n"),
        );
        assert_eq!(code, 0, "{err}");
        assert_eq!(out.lines().collect::<Vec<_>>(), want, "--require {req}");
    }
    // Per-line requirements: split at the last tab, empty = none.
    let input = "a\teu\nb\tus\nc\nd\t\ne\tus,video\nf\twith\ttabs\teu\n";
    let (code, out, err) = run(
        &[
            "route",
            "--servers",
            f.path().to_str().unwrap(),
            "--require-from-input",
        ],
        input,
    );
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    let eu = Requirement::new(&ring, &["eu"]).unwrap();
    let none = Requirement::new::<&str>(&ring, &[]).unwrap();
    assert_eq!(lines[0], eu.node(b"a").unwrap().server());
    assert_eq!(lines[2], none.node(b"c").unwrap().server());
    assert_eq!(lines[3], none.node(b"d").unwrap().server());
    assert_eq!(lines[4], "10.0.0.5:80");
    assert_eq!(lines[5], eu.node(b"f\twith\ttabs").unwrap().server());

    let (code, _, err) = run(
        &[
            "route",
            "--servers",
            f.path().to_str().unwrap(),
            "--require-from-input",
        ],
        "a\teu\nb\tnope\n",
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("stdin line 2") && err.contains("\"nope\""),
        "{err}"
    );
    let (code, _, err) = run(
        &[
            "route",
            "--servers",
            f.path().to_str().unwrap(),
            "--require",
            "mars",
        ],
        "a\n",
    );
    assert_eq!(code, 1);
    assert!(err.contains("mars"), "{err}");
    let f1 = file("10.0.0.1:80 labels=eu\n");
    let (code, _, err) = run(
        &[
            "route",
            "--servers",
            f1.path().to_str().unwrap(),
            "--compat",
            "pingora-v1",
            "--require",
            "eu",
        ],
        "a\n",
    );
    assert_eq!(code, 1);
    assert!(err.contains("pingora-v1"), "{err}");
}

#[test]
fn migration_routes_like_the_library() {
    let (fo, fn_) = (file(OLD), file(NEW));
    let old = RingBuilder::new()
        .build(parse_servers(OLD, "o".as_ref()).unwrap())
        .unwrap();
    let new = RingBuilder::new()
        .point_multiple(40)
        .build(parse_servers(NEW, "n".as_ref()).unwrap())
        .unwrap();
    let m = Migration::new(
        old.into(),
        new.into(),
        Rollout::new(2500).unwrap().with_scope("ams", 7500).unwrap(),
    );
    for scope in [None, Some("ams"), Some("lhr")] {
        let mut args = vec![
            "route",
            "--servers",
            fo.path().to_str().unwrap(),
            "--to",
            fn_.path().to_str().unwrap(),
            "--to-point-multiple",
            "40",
            "--rollout",
            "2500",
            "--scope-rollout",
            "ams=7500",
        ];
        if let Some(s) = scope {
            args.extend(["--scope", s]);
        }
        let (code, out, err) = run(&args, &(keys().join("\n") + "\n"));
        assert_eq!(code, 0, "{err}");
        let lines: Vec<&str> = out.lines().collect();
        let mut new_count = 0;
        for (k, line) in keys().iter().zip(&lines) {
            let (node, v) = m.node(k.as_bytes(), scope);
            let (server, ring) = line.split_once('\t').unwrap();
            assert_eq!(server, node.unwrap().server());
            assert_eq!(ring, v.name());
            new_count += (v == Version::New) as usize;
        }
        let want = if scope == Some("ams") { 0.75 } else { 0.25 };
        assert!(
            (new_count as f64 / 500.0 - want).abs() < 0.08,
            "{scope:?}: {new_count}"
        );
    }
    // --require applies to both rings; an empty eligible set prints "-".
    let migrate = |extra: &[&str], input: &str| {
        let mut args = vec![
            "route",
            "--servers",
            fo.path().to_str().unwrap(),
            "--to",
            fn_.path().to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        run(&args, input)
    };
    let (code, out, _) = migrate(&["--rollout", "10000", "--require", "ssd,us"], "x\n");
    assert_eq!((code, out.as_str()), (0, "10.0.0.4:80\tnew\n"));
    let (code, out, _) = migrate(&["--rollout", "0", "--require", "ssd,us"], "x\n");
    assert_eq!((code, out.as_str()), (0, "-\told\n"));
    // Out of range: bad command-line usage, exit 2.
    let (code, _, err) = migrate(&["--rollout", "10001"], "");
    assert_eq!(code, 2);
    assert!(err.contains("10001"), "{err}");
    let (code, _, err) = migrate(&["--rollout", "1", "--scope-rollout", "ams"], "");
    assert_eq!(code, 1);
    assert!(err.contains("NAME=BP"), "{err}");
}

#[test]
fn migrate_plan_scales_the_exact_diff() {
    let (fo, fn_) = (file(OLD), file(NEW));
    let out = Command::new(env!("CARGO_BIN_EXE_ketama"))
        .args([
            "migrate-plan",
            "--from",
            fo.path().to_str().unwrap(),
            "--to",
            fn_.path().to_str().unwrap(),
            "--steps",
            "100,5000,10000",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<(u32, f64)> = text
        .lines()
        .map(|l| {
            let (a, b) = l.split_once('\t').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    let old = RingBuilder::new()
        .build(parse_servers(OLD, "o".as_ref()).unwrap())
        .unwrap();
    let new = RingBuilder::new()
        .build(parse_servers(NEW, "n".as_ref()).unwrap())
        .unwrap();
    let moved = ketama::analysis::diff(&old, &new).unwrap().moved;
    assert_eq!(rows.len(), 3);
    assert!((rows[2].1 - moved).abs() < 1e-6);
    assert!((rows[1].1 - moved / 2.0).abs() < 1e-6);
    assert!((rows[0].1 - moved / 100.0).abs() < 1e-6);
}
