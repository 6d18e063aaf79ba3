//! `ketama analyze`, `sweep`, `recommend` and `diff` end to end.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn ketama(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ketama"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn json(args: &[&str]) -> Value {
    let (code, out, err) = ketama(args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn golden(n: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../testdata/nginx/golden-{n}.servers"))
}

fn servers(lines: &[String]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(lines.join("\n").as_bytes()).unwrap();
    f
}

fn equal_servers(n: u32) -> Vec<String> {
    (0..n)
        .map(|i| format!("10.1.{}.{}:80", i / 256, i % 256))
        .collect()
}

#[test]
fn analyze_reports_exact_shares() {
    let g = golden(1);
    let v = json(&["analyze", "--servers", g.to_str().unwrap(), "--json"]);
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 14);
    let total: f64 = nodes.iter().map(|n| n["share"].as_f64().unwrap()).sum();
    assert!((total - 1.0).abs() < 1e-12);
    for n in nodes {
        for k in [
            "server",
            "weight",
            "points",
            "collided",
            "expected_share",
            "share",
        ] {
            assert!(!n[k].is_null(), "{k} missing in {n}");
        }
        assert_eq!(
            n["points"].as_u64().unwrap(),
            n["weight"].as_u64().unwrap() * 160
        );
        if n["down"].as_bool().unwrap() {
            assert!(n["relative_error"].is_null());
            assert_eq!(n["share"].as_f64(), Some(0.0));
        }
    }
    // The list has two servers found to collide with others.
    let collided: u64 = nodes.iter().map(|n| n["collided"].as_u64().unwrap()).sum();
    assert!(collided >= 2, "{collided}");
    for k in ["predicted_cv", "measured_cv", "max_overload"] {
        assert!(v[k].as_f64().unwrap() > 0.0, "{k}");
    }
    assert!(
        v["memory_bytes"]["compact"].as_u64().unwrap()
            < v["memory_bytes"]["packed"].as_u64().unwrap()
    );

    let (code, out, _) = ketama(&["analyze", "--servers", g.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        out.contains("predicted CV") && out.contains("127.0.4.5:9004") && out.contains("down"),
        "{out}"
    );
}

#[test]
fn analyze_predicted_cv_is_the_formula() {
    let f = servers(&equal_servers(100));
    let v = json(&["analyze", "--servers", f.path().to_str().unwrap(), "--json"]);
    let want = (99.0f64 / 16001.0).sqrt();
    assert!((v["predicted_cv"].as_f64().unwrap() - want).abs() < 1e-9);
}

#[test]
fn sweep_writes_csv_and_chart() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("s.csv");
    let svg = dir.path().join("s.svg");
    let (code, _, err) = ketama(&[
        "sweep",
        "--nodes",
        "50",
        "--from",
        "1",
        "--to",
        "100",
        "--steps",
        "3",
        "--trials",
        "2",
        "--out",
        csv.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("points_per_node,predicted_cv,measured_cv_mean"));
    let ks: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(ks, ["1", "10", "100"]);
    let row: Vec<f64> = lines[1].split(',').map(|x| x.parse().unwrap()).collect();
    assert!((row[1] - (49.0f64 / 51.0).sqrt()).abs() < 1e-6);
    assert!(row[4] <= row[2] && row[2] <= row[5], "min <= mean <= max");
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg"));
    assert_eq!(chart.matches("<circle").count(), 3 + 1); // points + legend

    let (code, _, err) = ketama(&[
        "sweep",
        "--nodes",
        "2048",
        "--from",
        "1",
        "--to",
        "1000000",
        "--out",
        "/dev/null",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("lower --to"), "{err}");
}

#[test]
fn recommend_finds_the_smallest_multiple() {
    let f = servers(&equal_servers(100));
    let p = f.path().to_str().unwrap();
    let v = json(&["recommend", "--servers", p, "--max-cv", "0.1", "--json"]);
    let m = v["point_multiple"].as_u64().unwrap();
    let cv = |k: u64| (99.0f64 / (100.0 * k as f64 + 1.0)).sqrt();
    assert!(v["measured_cv"].as_f64().unwrap() <= 0.1);
    assert!(cv(m) <= 0.1);
    // The prediction alone would stop at the first multiple under 0.1.
    let first = (1..).find(|&k| cv(k) <= 0.1).unwrap();
    assert!(m >= first);
    assert_eq!(v["memory"].as_array().unwrap().len(), 3);

    let v = json(&[
        "recommend",
        "--servers",
        p,
        "--max-extra-error",
        "0.01",
        "--json",
    ]);
    let m = v["point_multiple"].as_u64().unwrap();
    assert!(m < 160, "{m}");
    assert!(
        v["measured_cv"].as_f64().unwrap() <= v["current_measured_cv"].as_f64().unwrap() + 0.01
    );

    let (code, _, err) = ketama(&["recommend", "--servers", p, "--max-cv", "0"]);
    assert_eq!(code, 1);
    assert!(err.contains("--max-cv 0"), "{err}");
    let (code, _, _) = ketama(&[
        "recommend",
        "--servers",
        p,
        "--max-cv",
        "0.1",
        "--max-extra-error",
        "0.1",
    ]);
    assert_eq!(code, 2);
    let idle = servers(&["10.0.0.1:80 0".to_string(), "10.0.0.2:80 down".to_string()]);
    let (code, _, err) = ketama(&[
        "recommend",
        "--servers",
        idle.path().to_str().unwrap(),
        "--max-cv",
        "0.1",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("no server is up"), "{err}");
}

#[test]
fn diff_measures_what_moves() {
    let base = equal_servers(50);
    let a = servers(&base);
    let mut more = base.clone();
    more.push("10.9.9.9:80".into());
    let b = servers(&more);
    let (pa, pb) = (a.path().to_str().unwrap(), b.path().to_str().unwrap());
    let same = json(&[
        "diff",
        "--from",
        pa,
        "--to",
        pa,
        "--to-layout",
        "compact",
        "--json",
    ]);
    assert_eq!(same["moved"].as_f64(), Some(0.0));
    let d = json(&["diff", "--from", pa, "--to", pb, "--json"]);
    let after = json(&["analyze", "--servers", pb, "--json"]);
    let new_share = after["nodes"][50]["share"].as_f64().unwrap();
    assert_eq!(d["moved"].as_f64().unwrap(), new_share);
    assert!((new_share - 1.0 / 51.0).abs() < 0.3 / 51.0);
    let (code, out, _) = ketama(&["diff", "--from", pa, "--to", pb]);
    assert_eq!(code, 0);
    assert!(out.contains("moved: "), "{out}");
}

#[test]
fn recommend_never_costs_more_memory_for_a_target_already_met() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/servers.txt");
    let v = json(&[
        "recommend",
        "--servers",
        example.to_str().unwrap(),
        "--max-cv",
        "0.05",
        "--json",
    ]);
    let current = v["current_measured_cv"].as_f64().unwrap();
    assert!(current <= 0.05, "the example meets 0.05 at 160 points: {v}");
    assert_eq!(v["current_meets_target"], true);
    assert!(v["point_multiple"].as_u64().unwrap() <= 160, "{v}");
    for m in v["memory"].as_array().unwrap() {
        assert!(
            m["recommended_bytes"].as_u64() <= m["current_bytes"].as_u64(),
            "{v}"
        );
    }
    // A target the current ring misses still gets more points.
    let v = json(&[
        "recommend",
        "--servers",
        example.to_str().unwrap(),
        "--max-cv",
        "0.01",
        "--json",
    ]);
    assert_eq!(v["current_meets_target"], false);
    assert!(v["point_multiple"].as_u64().unwrap() > 160, "{v}");
    assert!(v["measured_cv"].as_f64().unwrap() <= 0.01, "{v}");
}
