//! `ketama migrate-plan --simulate` as a user runs it: on a trace file,
//! against what the two rings alone say (computed here with the library,
//! not the simulator): with caches that hold everything, a one-shot switch
//! costs the origin exactly the distinct moved keys asked after it, and
//! with `--fill-from-previous` nothing.

mod common;

use std::collections::HashSet;

use common::run;
use ketama::{Node, Ring, RingBuilder};

#[test]
fn a_one_shot_switch_costs_the_moved_keys_and_fill_saves_them() {
    let dir = tempfile::tempdir().unwrap();
    let servers = dir.path().join("servers.txt");
    let names: Vec<String> = (1..=5).map(|i| format!("10.1.0.{i}:80")).collect();
    std::fs::write(
        &servers,
        names.iter().map(|n| format!("{n}\n")).collect::<String>(),
    )
    .unwrap();
    // 3,000 distinct keys, each asked three times: once in the warm-up,
    // twice after the switch (a tab and a label after some).
    let keys: Vec<String> = (0..3000).map(|i| format!("/k/{i}")).collect();
    let mut trace = String::new();
    for round in 0..3 {
        for k in &keys {
            trace.push_str(k);
            trace.push_str(if round == 1 { "\tssd\n" } else { "\n" });
        }
    }
    let trace_file = dir.path().join("trace.txt");
    std::fs::write(&trace_file, trace).unwrap();
    let nodes: Vec<Node> = names.iter().map(|n| Node::new(n.clone(), 1)).collect();
    let old = Ring::new(nodes.clone()).unwrap();
    let new = RingBuilder::new().point_multiple(40).build(nodes).unwrap();
    let moved: HashSet<&String> = keys
        .iter()
        .filter(|k| {
            old.node(k.as_bytes()).unwrap().server() != new.node(k.as_bytes()).unwrap().server()
        })
        .collect();
    assert!(moved.len() > 100);
    let (s, f) = (servers.to_str().unwrap(), trace_file.to_str().unwrap());
    let base = [
        "migrate-plan",
        "--from",
        s,
        "--to",
        s,
        "--to-point-multiple",
        "40",
        "--simulate",
        "--trace",
        f,
        "--warmup",
        "3000",
        "--cache-objects",
        "100000",
        "--steps",
        "10000",
        "--window",
        "1000",
        "--json",
    ];
    let (code, out, err) = run(&base, b"");
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let step = &v["steps"][0];
    assert_eq!(step["bp"], 10000);
    assert_eq!(step["requests"], 6000);
    assert_eq!(step["origin_fetches"], moved.len());
    assert_eq!(step["misses"], moved.len());
    assert_eq!(step["hits"], 6000 - moved.len());
    assert_eq!(v["servers"].as_array().unwrap().len(), 5);
    let served: u64 = v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["hits"].as_u64().unwrap() + s["misses"].as_u64().unwrap())
        .sum();
    assert_eq!(served, 6000);
    assert_eq!(v["steady_window"], 1000, "every warm-up request missed");
    // The moved keys all miss in the first window after the switch.
    assert_eq!(
        v["windows"][0]["origin_fetches"],
        moved
            .iter()
            .filter(|k| { keys.iter().position(|x| x == **k).unwrap() < 1000 })
            .count()
    );
    // Per window, by ring: every miss after the switch is a new-ring one.
    let windows = v["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 6);
    let sum = |field: &str, ring: &str| -> u64 {
        windows
            .iter()
            .map(|w| w[field][ring].as_u64().unwrap())
            .sum()
    };
    assert_eq!(sum("misses_by_ring", "new"), moved.len() as u64);
    assert_eq!(sum("misses_by_ring", "old") + sum("hits_by_ring", "old"), 0);
    assert_eq!(sum("hits_by_ring", "new"), 6000 - moved.len() as u64);
    let mut fill = base.to_vec();
    fill.push("--fill-from-previous");
    let (code, out, err) = run(&fill, b"");
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["steps"][0]["origin_fetches"], 0);
    assert_eq!(v["steps"][0]["peer_fills"], moved.len());
    // Refused, saying what to add.
    let no_cache: Vec<&str> = base
        .iter()
        .copied()
        .filter(|a| *a != "--cache-objects" && *a != "100000")
        .collect();
    let (code, _, err) = run(&no_cache, b"");
    assert_eq!(code, 1);
    assert!(err.contains("--simulate needs --cache-objects N"), "{err}");
}

/// `--chart`: the schedule against a one-shot switch, with and without
/// fill, as SVG or PNG by the file's name; any other name is refused
/// before anything is simulated.
#[test]
fn the_chart_draws_the_schedule_against_a_one_shot_switch() {
    let dir = tempfile::tempdir().unwrap();
    let servers = common::servers_file("10.1.0.1:80\n10.1.0.2:80\n10.1.0.3:80\n");
    let s = servers.path().to_str().unwrap();
    let chart = |name: &str, fill: bool| {
        let path = dir.path().join(name);
        let p = path.to_str().unwrap().to_string();
        let mut args = vec![
            "migrate-plan",
            "--from",
            s,
            "--to",
            s,
            "--to-point-multiple",
            "40",
            "--steps",
            "2500,10000",
            "--simulate",
            "--objects",
            "2000",
            "--requests",
            "60000",
            "--cache-objects",
            "300",
            "--warmup",
            "20000",
            "--requests-per-step",
            "20000",
            "--window",
            "2000",
            "--chart",
        ];
        args.push(&p);
        if fill {
            args.push("--fill-from-previous");
        }
        let (code, _, err) = run(&args, b"");
        (code, err, path)
    };
    let (code, err, svg) = chart("sim.svg", true);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(svg).unwrap();
    for label in [
        "schedule 25% 100%",
        "one-shot switch",
        "schedule 25% 100%, fill from previous",
        "one-shot switch, fill from previous",
        "steady state",
    ] {
        assert!(text.contains(label), "no {label:?} in the SVG");
    }
    let (code, err, svg) = chart("plain.svg", false);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(svg).unwrap();
    assert!(!text.contains("fill from previous"), "fill drawn unasked");
    let (code, err, png) = chart("sim.png", true);
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000);
    let (code, err, txt) = chart("sim.txt", false);
    assert_eq!(code, 1);
    assert!(err.contains("name the file .svg or .png"), "{err}");
    assert!(!txt.exists());
}

/// `--max-origin-factor`: the schedule printed is one of the ladder's,
/// ends at 100%, and its peak is under the cap; without
/// `--requests-per-step` it is refused, saying what to give.
#[test]
fn the_fewest_steps_under_a_cap() {
    let servers = common::servers_file("10.1.0.1:80\n10.1.0.2:80\n10.1.0.3:80\n10.1.0.4:80\n");
    let s = servers.path().to_str().unwrap();
    let mut args = vec![
        "migrate-plan",
        "--from",
        s,
        "--to",
        s,
        "--to-point-multiple",
        "10",
        "--simulate",
        "--objects",
        "5000",
        "--requests",
        "200000",
        "--cache-objects",
        "400",
        "--warmup",
        "50000",
        "--window",
        "5000",
        "--max-origin-factor",
        "1.3",
        "--json",
    ];
    let (code, _, err) = run(&args, b"");
    assert_eq!(code, 1);
    assert!(err.contains("give it"), "{err}");
    args.extend(["--requests-per-step", "15000"]);
    let (code, out, err) = run(&args, b"");
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let steps: Vec<u64> = v["schedule"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap())
        .collect();
    assert_eq!(steps.last(), Some(&10_000));
    assert!(steps[..steps.len() - 1]
        .iter()
        .all(|b| [100, 200, 500, 1000, 2500, 5000].contains(b)));
    let (peak, steady) = (
        v["schedule"]["peak_window"].as_f64().unwrap(),
        v["steady_window"].as_f64().unwrap(),
    );
    assert!(peak <= 1.3 * steady, "peak {peak}, steady {steady}");
}
