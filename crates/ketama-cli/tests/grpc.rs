//! gRPC's ring hash end to end: `ketama route --compat envoy-ring-hash:...`
//! against a live gRPC C core (Python's grpcio, through
//! `testdata/grpc/regen.py --quick`: random lists of 3 to 50 servers on
//! random ports, shuffled, some listed twice, ring sizes from 10 to the
//! cap), and against the committed traces, in every layout.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::run;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/grpc")
}

/// Runs `ketama route` on every list in `dir`; returns how many lists and
/// keys it checked.
fn route_traces(dir: &Path) -> (usize, usize) {
    let (mut lists, mut keys) = (0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let Some(list) = name.strip_suffix(".trace") else {
            continue;
        };
        let read = |ext: &str| std::fs::read_to_string(dir.join(format!("{list}.{ext}"))).unwrap();
        let compat = read("compat");
        let servers = dir.join(format!("{list}.servers"));
        let want = read("trace");
        let input = read("keys");
        for layout in ["wide", "packed", "compact"] {
            let args = [
                "route",
                "--servers",
                servers.to_str().unwrap(),
                "--compat",
                compat.trim(),
                "--layout",
                layout,
            ];
            let (code, out, err) = run(&args, input.as_bytes());
            assert_eq!(code, 0, "{list}: {err}");
            let differ = out
                .lines()
                .zip(want.lines())
                .filter(|(a, b)| a != b)
                .count();
            assert_eq!(out.lines().count(), want.lines().count(), "{list}");
            assert_eq!(
                differ, 0,
                "{list} ({layout}): {differ} keys differ from gRPC's picks"
            );
        }
        lists += 1;
        keys += want.lines().count();
    }
    (lists, keys)
}

#[test]
fn routes_like_grpc_on_the_golden_traces() {
    let (lists, keys) = route_traces(&testdata());
    assert!(lists >= 7 && keys >= 14_000, "{lists} lists, {keys} keys");
}

/// The regeneration script, run now against the grpcio installed: three
/// random lists, and ketama must pick what gRPC picked for every key.
#[test]
fn routes_like_the_grpc_running_now() {
    let dir = tempfile::tempdir().unwrap();
    let seed = std::process::id().to_string();
    let out = Command::new("python3")
        .arg(testdata().join("regen.py"))
        .args(["--quick", "--keys", "1000", "--seed", &seed, "--out"])
        .arg(dir.path())
        .output()
        .expect("python3 must be installed (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "regen.py --quick failed (scripts/setup.sh installs grpcio): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(route_traces(dir.path()), (3, 3000), "seed {seed}");
}
