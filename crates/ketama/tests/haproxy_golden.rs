//! Replays traces recorded from a live HAProxy 2.6 (`hash-type consistent`
//! with every hash function, with and without `avalanche`, and every
//! `balance uri` form and `balance hdr`) against ketama's `Haproxy` scheme
//! in every layout; and reruns the recording against the HAProxy installed
//! now. See `testdata/haproxy/README.md` for how they were recorded.

use std::path::{Path, PathBuf};
use std::process::Command;

use ketama::haproxy::{HaproxyHash, UriKey};

use ketama::{parse_servers, Layout, Ring, RingBuilder, Scheme};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/haproxy")
}

fn read(dir: &Path, name: &str) -> String {
    let p = dir.join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// What a trace's keys are: request targets cut by a `balance uri` form,
/// or header values hashed whole (`balance hdr`).
#[derive(Clone, Copy, Debug)]
enum Form {
    Uri(UriKey),
    Header,
}

impl Form {
    fn key(self, k: &[u8]) -> &[u8] {
        match self {
            Form::Uri(u) => u.key(k),
            Form::Header => ketama::haproxy::header_key(k).expect("a key HAProxy hashes"),
        }
    }
}

/// The scheme and key form of `LIST.WHAT.trace`.
fn parse_what(what: &str) -> (Scheme, Form) {
    let Some(form) = what.strip_prefix("form-") else {
        let h: HaproxyHash = what.parse().unwrap();
        return (Scheme::Haproxy(h), Form::Uri(UriKey::default()));
    };
    let mut u = UriKey::default();
    if form == "hdr-x-key" {
        return (Scheme::Haproxy(HaproxyHash::default()), Form::Header);
    }
    let mut parts = form.split('-').peekable();
    while let Some(p) = parts.next() {
        match p {
            "path" => {
                assert_eq!(parts.next(), Some("only"));
                u.path_only = true;
            }
            "whole" => u.whole = true,
            "depth" => u.depth = Some(parts.next().unwrap().parse().unwrap()),
            "len" => u.len = Some(parts.next().unwrap().parse().unwrap()),
            other => panic!("unknown form part {other:?} in {what}"),
        }
    }
    (Scheme::Haproxy(HaproxyHash::default()), Form::Uri(u))
}

/// Whether `hash` is exactly halfway between two neighbouring points of
/// different serving nodes (HAProxy's tie: the point before wins).
fn is_tie(ring: &Ring, hash: u32) -> bool {
    let pts: Vec<(u32, usize)> = ring.points().filter(|p| !ring.node_is_down(p.1)).collect();
    let i = pts.partition_point(|p| p.0 < hash);
    if i == 0 || i == pts.len() {
        return false;
    }
    let (a, b) = (pts[i - 1], pts[i]);
    a.1 != b.1 && hash - a.0 == b.0 - hash
}

/// Replays every trace in `dir`; returns (traces, lookups, ties).
fn replay(dir: &Path) -> (usize, usize, usize) {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter_map(|n| n.strip_suffix(".trace").map(str::to_string))
        .collect();
    names.sort();
    let (mut lookups, mut ties) = (0, 0);
    for stem in &names {
        let (list, what) = stem.split_once('.').unwrap();
        let (scheme, form) = parse_what(what);
        let nodes = parse_servers(&read(dir, &format!("{list}.servers")), list.as_ref()).unwrap();
        let keys: Vec<String> = read(dir, &format!("{stem}.keys"))
            .lines()
            .map(str::to_string)
            .collect();
        let want: Vec<String> = read(dir, &format!("{stem}.trace"))
            .lines()
            .map(str::to_string)
            .collect();
        assert_eq!(keys.len(), want.len(), "{stem}");
        for layout in Layout::ALL {
            let ring = RingBuilder::new()
                .compat(scheme)
                .layout(layout)
                .build(nodes.clone())
                .unwrap();
            ketama::testing::check_invariants(&ring).unwrap();
            let mut mismatches = Vec::new();
            for (k, w) in keys.iter().zip(&want) {
                let key = form.key(k.as_bytes());
                let got = ring.node(key).map_or("-", |n| n.server());
                if got != w {
                    mismatches.push(format!("{k:?}: HAProxy {w}, ketama {got}"));
                }
                if layout == Layout::Wide && is_tie(&ring, ring.hash_key(key)) {
                    ties += 1;
                }
            }
            assert!(
                mismatches.is_empty(),
                "{stem} ({scheme}, {layout}): {} of {} mismatch, first: {:?}",
                mismatches.len(),
                keys.len(),
                &mismatches[..mismatches.len().min(5)]
            );
            lookups += keys.len();
        }
    }
    (names.len(), lookups, ties)
}

#[test]
fn replays_live_haproxy_traces_with_zero_mismatches() {
    let (traces, lookups, ties) = replay(&testdata());
    // 5 lists x 8 hashes, and 6 forms on hp-2.
    assert_eq!(traces, 46, "traces in testdata/haproxy");
    assert!(ties >= 100, "only {ties} keys sit exactly on a tie");
    eprintln!("{lookups} lookups matched, {ties} of them on ties");
}

#[test]
fn the_lists_hold_what_the_issue_asks_for() {
    let dir = testdata();
    let mut seen = (false, false, false, false);
    for l in 1..=5 {
        let nodes = parse_servers(&read(&dir, &format!("hp-{l}.servers")), "s".as_ref()).unwrap();
        seen.0 |= nodes.iter().any(|n| n.weight() == 256) && nodes.iter().any(|n| n.weight() == 0);
        seen.1 |= nodes.len() >= 200;
        // An explicit id in the middle of the list, after servers without one.
        seen.2 |= nodes
            .iter()
            .position(|n| n.id().is_some())
            .is_some_and(|i| i > 0);
        seen.3 |= nodes.iter().filter(|n| n.is_down()).count() >= 2;
    }
    assert_eq!(seen, (true, true, true, true));
}

/// The recording rerun now against the installed HAProxy (two lists, two
/// hashes, two forms): its traces must replay with zero mismatches, so the
/// committed ones still describe the HAProxy CI installs.
#[test]
fn routes_like_the_haproxy_running_now() {
    let dir = std::env::temp_dir().join(format!("ketama-haproxy-golden-{}", std::process::id()));
    let out = Command::new("python3")
        .arg(testdata().join("regen.py"))
        .args([
            "--quick", "--keys", "300", "--ties", "4", "--seed", "11", "--out",
        ])
        .arg(&dir)
        .output()
        .expect("python3 must be installed (scripts/setup.sh)");
    assert!(
        out.status.success(),
        "regen.py --quick failed (scripts/setup.sh installs haproxy): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (traces, _, ties) = replay(&dir);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(traces, 6);
    assert!(ties >= 4, "only {ties} tie keys");
}
