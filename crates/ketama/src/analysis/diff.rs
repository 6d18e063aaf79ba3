//! The exact keyspace that changes server between two rings.

use std::collections::HashMap;

use super::shares::{serving_owners, KEYSPACE};
use crate::Ring;

/// What changes between two rings, servers matched by their exact strings.
#[derive(Clone, Debug, PartialEq)]
pub struct Diff {
    /// Keys (of 2^32) whose server changes.
    pub moved_keys: u64,
    /// `moved_keys / 2^32`: the share of cached objects that miss after the
    /// change.
    pub moved: f64,
    /// Per server (the union of both rings' servers, `from`'s order first):
    /// (server, share gained, share lost).
    pub servers: Vec<(String, f64, f64)>,
}

/// The exact keyspace that changes server between `from` and `to`. Walks
/// the merged point lists: between consecutive point hashes of either ring
/// both rings' answers are constant. `O(P_from + P_to)`.
pub fn diff(from: &Ring, to: &Ring) -> Diff {
    // Server names: from's nodes, then to's that from lacks.
    let mut names: Vec<&str> = from.nodes().iter().map(|n| n.server()).collect();
    let mut index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, &s)| (s, i)).collect();
    let to_ids: Vec<usize> = to
        .nodes()
        .iter()
        .map(|n| {
            *index.entry(n.server()).or_insert_with(|| {
                names.push(n.server());
                names.len() - 1
            })
        })
        .collect();
    // Each ring as (hash, serving server id) in ring order; `None` = no server.
    let side = |ring: &Ring, ids: &dyn Fn(usize) -> usize| -> Vec<(u32, Option<usize>)> {
        ring.points()
            .zip(serving_owners(ring))
            .map(|((h, _), o)| (h, (o != u32::MAX).then(|| ids(o as usize))))
            .collect()
    };
    let a = side(from, &|i| i);
    let b = side(to, &|i| to_ids[i]);
    let mut gained = vec![0u64; names.len()];
    let mut lost = vec![0u64; names.len()];
    let mut moved = 0u64;
    // The answer for keys in (lo, hi], hi being the next boundary.
    let answer = |pts: &[(u32, Option<usize>)], i: usize| -> Option<usize> {
        if pts.is_empty() {
            None
        } else {
            pts[if i == pts.len() { 0 } else { i }].1
        }
    };
    let (mut i, mut j) = (0usize, 0usize);
    let mut lo: u64 = 0; // keys from lo (inclusive) up to the boundary
    loop {
        let ha = a.get(i).map(|p| p.0 as u64);
        let hb = b.get(j).map(|p| p.0 as u64);
        let hi = match (ha, hb) {
            (Some(x), Some(y)) => x.min(y),
            (Some(x), None) => x,
            (None, Some(y)) => y,
            (None, None) => KEYSPACE - 1,
        };
        let len = hi + 1 - lo;
        let (sa, sb) = (answer(&a, i), answer(&b, j));
        if sa != sb {
            moved += len;
            if let Some(s) = sa {
                lost[s] += len;
            }
            if let Some(s) = sb {
                gained[s] += len;
            }
        }
        if hi == KEYSPACE - 1 {
            break;
        }
        lo = hi + 1;
        if ha == Some(hi) {
            i += 1;
        }
        if hb == Some(hi) {
            j += 1;
        }
    }
    let f = |k: u64| k as f64 / KEYSPACE as f64;
    Diff {
        moved_keys: moved,
        moved: f(moved),
        servers: names
            .iter()
            .enumerate()
            .map(|(k, s)| (s.to_string(), f(gained[k]), f(lost[k])))
            .collect(),
    }
}
