//! Replays traces recorded from the real libmemcached (its own
//! `memcached_generate_hash`) and a live twemproxy (nutcracker in front of
//! memcached) against ketama's `Libmemcached` and `Twemproxy` schemes, in
//! every layout. See `testdata/memcached/README.md` (at the workspace root)
//! for how they were recorded.

use std::path::{Path, PathBuf};

use ketama::{parse_servers, Layout, RingBuilder, Scheme};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/memcached")
}

fn read(name: &str) -> String {
    let p = dir().join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// (list, scheme) for every `LIST.SCHEME.trace` file.
fn traces() -> Vec<(String, Scheme)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir()).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let Some(stem) = name.strip_suffix(".trace") else {
            continue;
        };
        let (list, scheme) = stem.split_once('.').unwrap();
        let compat = match scheme.strip_prefix("twemproxy-") {
            Some(hash) => Scheme::Twemproxy(hash.parse().unwrap()),
            None => scheme.parse().unwrap(),
        };
        out.push((list.to_string(), compat));
    }
    out.sort_by_key(|(l, c)| (l.clone(), c.to_string()));
    out
}

#[test]
fn replays_libmemcached_and_twemproxy_traces_with_zero_mismatches() {
    let all = traces();
    let hashes: std::collections::BTreeSet<String> = all
        .iter()
        .filter(|(_, c)| matches!(c, Scheme::Twemproxy(_)))
        .map(|(_, c)| c.key_hash().to_string())
        .collect();
    assert!(
        all.iter()
            .filter(|(_, c)| *c == Scheme::Libmemcached)
            .count()
            >= 4
    );
    assert_eq!(hashes.len(), 12, "every twemproxy key hash: {hashes:?}");
    let mut keys_checked = 0;
    let mut with_collisions = Vec::new();
    for (list, compat) in &all {
        let nodes = parse_servers(&read(&format!("{list}.servers")), list.as_ref()).unwrap();
        let keys: Vec<Vec<u8>> = read(&format!("{list}.keys")).lines().map(unhex).collect();
        let file = match compat {
            Scheme::Twemproxy(h) => format!("{list}.twemproxy-{h}.trace"),
            c => format!("{list}.{c}.trace"),
        };
        let want: Vec<String> = read(&file).lines().map(str::to_string).collect();
        assert_eq!(keys.len(), want.len(), "{file}");
        assert!(keys.len() >= 1000, "{file}: only {} keys", keys.len());
        assert!(
            keys.iter().any(|k| k.iter().any(|&b| b >= 0x80)),
            "{file}: the keys must hold bytes >= 0x80"
        );
        for layout in Layout::ALL {
            let ring = RingBuilder::new()
                .compat(*compat)
                .layout(layout)
                .build(nodes.clone())
                .unwrap();
            ketama::testing::check_invariants(&ring).unwrap();
            if layout == Layout::Wide && ring.point_count() < ring.generated_points() as usize {
                with_collisions.push(file.clone());
            }
            let mut mismatches = Vec::new();
            for (k, w) in keys.iter().zip(&want) {
                let got = ring.node(k).map(|n| n.server()).unwrap_or("-");
                if got != w {
                    mismatches.push(format!("{}: peer {w}, ketama {got}", hex(k)));
                }
            }
            assert!(
                mismatches.is_empty(),
                "{file}, {layout}: {} of {} mismatch, first: {:?}",
                mismatches.len(),
                keys.len(),
                &mismatches[..mismatches.len().min(5)]
            );
            keys_checked += keys.len();
        }
    }
    // The searched lists hold a collided point (and keys routed into its
    // arc), so the tie rules were checked against the programs.
    assert!(
        with_collisions.iter().any(|f| f.starts_with("lm-5."))
            && with_collisions.iter().any(|f| f.starts_with("tw-3.")),
        "collided points expected in lm-5 and tw-3, found in {with_collisions:?}"
    );
    eprintln!("{keys_checked} lookups matched");
}

fn hex(k: &[u8]) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}
