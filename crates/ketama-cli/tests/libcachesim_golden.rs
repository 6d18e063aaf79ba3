//! `ketama migrate-plan --simulate` against libCacheSim: golden counts
//! from libCacheSim's own LRU caches replaying every server's request
//! stream, cut from the same traces by the documented rule and routed by
//! `ketama route` (testdata/libcachesim/regen.py). Hits and misses per
//! server and per step (by ring), peer fills and origin fetches must be
//! equal, with and without fill, on three Zipf traces and two cache sizes.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::run;
use serde_json::Value;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/libcachesim")
}

fn by_server(v: &Value) -> BTreeMap<String, (u64, u64)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["server"].as_str().unwrap().to_string(),
                (s["hits"].as_u64().unwrap(), s["misses"].as_u64().unwrap()),
            )
        })
        .collect()
}

#[test]
fn per_server_and_per_step_counts_equal_libcachesims() {
    let dir = testdata();
    let mut goldens: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    goldens.sort();
    assert!(goldens.len() >= 6, "golden files: {goldens:?}");
    let (old, new) = (dir.join("old.servers"), dir.join("new.servers"));
    for g in &goldens {
        let golden: Value = serde_json::from_str(&std::fs::read_to_string(g).unwrap()).unwrap();
        let trace = dir.join(golden["trace"].as_str().unwrap());
        for (fill, want) in [
            (false, &golden["without_fill"]),
            (true, &golden["with_fill"]),
        ] {
            let mut args: Vec<String> = [
                "migrate-plan",
                "--from",
                old.to_str().unwrap(),
                "--to",
                new.to_str().unwrap(),
                "--simulate",
                "--trace",
                trace.to_str().unwrap(),
                "--json",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            args.extend(
                golden["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_string()),
            );
            if fill {
                args.push("--fill-from-previous".into());
            }
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let (code, out, err) = run(&argv, b"");
            assert_eq!(code, 0, "{}: {err}", g.display());
            let got: Value = serde_json::from_str(&out).unwrap();
            let name = format!("{} (fill: {fill})", g.display());
            let (gs, ws) = (
                got["steps"].as_array().unwrap(),
                want["steps"].as_array().unwrap(),
            );
            assert_eq!(gs.len(), ws.len(), "{name}: steps");
            for (i, (a, b)) in gs.iter().zip(ws).enumerate() {
                for field in [
                    "bp",
                    "requests",
                    "hits",
                    "misses",
                    "hits_by_ring",
                    "misses_by_ring",
                    "peer_fills",
                    "origin_fetches",
                ] {
                    assert_eq!(a[field], b[field], "{name}: step {} {field}", i + 1);
                }
            }
            assert_eq!(
                by_server(&got["servers"]),
                by_server(&want["servers"]),
                "{name}: per server"
            );
            if fill {
                let fills: u64 = ws.iter().map(|s| s["peer_fills"].as_u64().unwrap()).sum();
                assert!(fills > 0, "{name}: the golden data never filled");
            }
        }
    }
}
