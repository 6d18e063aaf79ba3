//! Migrations: the rollout decision's fixed definition, its laws, and live
//! rollout changes under concurrent lookups.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ketama::analysis;
use ketama::migration::rollout_bucket;
use ketama::mix::{fnv1a64, mix64};
use ketama::{synthetic, Migration, Node, Ring, RingBuilder, Rollout, Version};

fn rings() -> (Arc<Ring>, Arc<Ring>) {
    let servers = synthetic::seeded(60, 5);
    let nodes: Vec<Node> = servers.iter().map(|s| Node::new(s.clone(), 1)).collect();
    let old = RingBuilder::new().build(nodes.clone()).unwrap();
    let new = RingBuilder::new()
        .point_multiple(16)
        .layout(ketama::Layout::Compact)
        .build(nodes)
        .unwrap();
    (Arc::new(old), Arc::new(new))
}

fn keys(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("/objects/{i}/photo.jpg").into_bytes())
        .collect()
}

#[test]
fn the_decision_hash_is_the_published_fnv1a_and_splitmix64() {
    // FNV-1a 64 test vectors (Fowler, Noll, Vo).
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    // SplitMix64 seeded with 0: the first output (Vigna's reference code).
    assert_eq!(mix64(0x9e37_79b9_7f4a_7c15), 0xe220_a839_7b1d_cdaf);
    // The bucket is the top 32 bits scaled to 0..10000.
    let m = mix64(fnv1a64(b"/index.html"));
    assert_eq!(
        rollout_bucket(b"/index.html") as u64,
        ((m >> 32) * 10_000) >> 32
    );
}

#[test]
fn endpoints_monotonicity_and_share() {
    let (old, new) = rings();
    let m = Migration::new(old.clone(), new.clone(), Rollout::new(0).unwrap());
    let keys = keys(100_000);
    for k in &keys[..2000] {
        let (n, v) = m.node(k, None);
        assert_eq!((n, v), (old.node(k), Version::Old));
    }
    m.set_rollout(Rollout::new(10_000).unwrap());
    for k in &keys[..2000] {
        let (n, v) = m.node(k, None);
        assert_eq!((n, v), (new.node(k), Version::New));
    }
    let mut prev: Vec<Version> = vec![Version::Old; keys.len()];
    for bp in [0u32, 1, 100, 500, 2500, 5000, 7500, 9999, 10_000] {
        m.set_rollout(Rollout::new(bp).unwrap());
        let now: Vec<Version> = keys.iter().map(|k| m.version(k, None)).collect();
        for (p, n) in prev.iter().zip(&now) {
            assert!(
                !(*p == Version::New && *n == Version::Old),
                "raising the rollout moved a key back"
            );
        }
        let share = now.iter().filter(|v| **v == Version::New).count() as f64 / keys.len() as f64;
        assert!(
            (share * 10_000.0 - bp as f64).abs() <= 100.0,
            "bp {bp}: {share}"
        );
        prev = now;
    }
    // Rollback moves exactly those keys back.
    m.set_rollout(Rollout::new(2500).unwrap());
    let at_2500: Vec<Version> = keys.iter().map(|k| m.version(k, None)).collect();
    m.set_rollout(Rollout::new(5000).unwrap());
    m.set_rollout(Rollout::new(2500).unwrap());
    assert_eq!(
        keys.iter().map(|k| m.version(k, None)).collect::<Vec<_>>(),
        at_2500
    );
}

#[test]
fn the_decision_does_not_follow_ring_position() {
    // At 50%, each of the old ring's nodes sees about half its keys move.
    let (old, new) = rings();
    let m = Migration::new(old.clone(), new, Rollout::new(5000).unwrap());
    let mut per_node = vec![(0u32, 0u32); old.nodes().len()];
    for k in keys(120_000) {
        let i = old.node_index_for_hash(old.hash_key(&k)).unwrap();
        per_node[i].0 += 1;
        if m.version(&k, None) == Version::New {
            per_node[i].1 += 1;
        }
    }
    for (total, moved) in per_node {
        let f = moved as f64 / total as f64;
        let sd = (0.25 / total as f64).sqrt();
        assert!((f - 0.5).abs() < 5.0 * sd, "{moved}/{total}");
    }
}

#[test]
fn scopes_override_the_global_rollout() {
    let (old, new) = rings();
    let r = Rollout::new(0)
        .unwrap()
        .with_scope("ams", 10_000)
        .unwrap()
        .with_scope("sin", 2500)
        .unwrap();
    let m = Migration::new(old, new, r);
    assert_eq!(m.version(b"/x", Some("ams")), Version::New);
    assert_eq!(m.version(b"/x", Some("lhr")), Version::Old);
    assert_eq!(m.version(b"/x", None), Version::Old);
    assert_eq!(m.rollout().bp_for(Some("sin")), 2500);
    assert!(Rollout::new(10_001).is_err());
    let e = Rollout::new(0)
        .unwrap()
        .with_scope("fra", 20_000)
        .unwrap_err();
    assert!(e.to_string().contains("scope fra"), "{e}");
}

#[test]
fn rollout_changes_under_concurrent_lookups() {
    let (old, new) = rings();
    let m = Arc::new(Migration::new(
        old.clone(),
        new.clone(),
        Rollout::new(0).unwrap(),
    ));
    // Readers stop once they have looked up 20,000 keys and seen both
    // rings answer; the writer changes the rollout until every reader has
    // stopped, so the test cannot finish before the readers start.
    let finished = Arc::new(AtomicUsize::new(0));
    let keys = Arc::new(keys(5000));
    let readers: Vec<_> = (0..3)
        .map(|t| {
            let (m, finished, keys, old, new) = (
                m.clone(),
                finished.clone(),
                keys.clone(),
                old.clone(),
                new.clone(),
            );
            std::thread::spawn(move || {
                let mut n = 0u64;
                let mut by_version = [0u64; 2];
                while n < 20_000 || by_version.contains(&0) {
                    let k = &keys[(n as usize * 7 + t) % keys.len()];
                    let (node, v) = m.node(k, Some("ams"));
                    let want = match v {
                        Version::Old | Version::Only => old.node(k),
                        Version::New => new.node(k),
                    };
                    by_version[(v == Version::New) as usize] += 1;
                    assert_eq!(node, want);
                    assert!(node == old.node(k) || node == new.node(k));
                    n += 1;
                }
                finished.fetch_add(1, Ordering::SeqCst);
                by_version
            })
        })
        .collect();
    let mut i = 0u32;
    while finished.load(Ordering::SeqCst) < 3 {
        let bp = [(i * 37) % 10_001, 0, 10_000][i as usize % 3];
        m.set_rollout(Rollout::new(0).unwrap().with_scope("ams", bp).unwrap());
        i = i.wrapping_add(1);
    }
    // Every reader saw rollouts change under it: both rings answered.
    for r in readers {
        let [old, new] = r.join().unwrap();
        assert!(old > 0 && new > 0, "old {old}, new {new}");
    }
}

#[test]
fn plan_is_the_share_times_the_exact_moved_fraction() {
    let (old, new) = rings();
    let moved = analysis::diff(&old, &new).unwrap().moved;
    let plan = analysis::migration_plan(&old, &new, &[0, 100, 5000, 10_000]).unwrap();
    assert_eq!(plan[0], (0, 0.0));
    assert!((plan[2].1 - moved / 2.0).abs() < 1e-12);
    assert_eq!(plan[3], (10_000, moved));
}
