//! The numbers behind a ring: exact keyspace shares, predicted and measured
//! balance, and the cost of a change between two rings.
//!
//! # Shares
//!
//! A key with hash `h` goes to the first point at or after `h`, so point
//! `i` (in ring order) serves the `hash[i] - hash[i-1]` keys above its
//! predecessor, and the first point also serves everything past the last
//! point: `hash[0] + 2^32 - hash[P-1]` keys. A point of a `down` node serves
//! nothing itself: its keys go to the next serving point in ring order.
//! Summing per node gives each node's exact share of the 2^32 keyspace as
//! an integer; the counts add up to exactly 2^32. `O(P)`.
//!
//! # Predicted balance
//!
//! Throw `P` points uniformly on the ring; the `P` arcs between them are
//! jointly Dirichlet(1, ..., 1), so a node holding `k` of the points owns a
//! share `S ~ Beta(k, P - k)`: mean `k / P`, variance
//! `k (P - k) / (P^2 (P + 1))`. Its coefficient of variation is therefore
//!
//! ```text
//! CV_k = sqrt((P - k) / (k (P + 1)))
//! ```
//!
//! With `N` equal nodes of `k` points each (`P = N k`) this is the article's
//! `sqrt((N - 1) / (N k + 1))`: 0.990 for N = 100, k = 1; 0.0787 at k = 160.
//! With unequal weights, node `i` has `k_i = w_i x m` points and its own
//! `CV_i`; the ring's predicted CV is the root mean square of the `CV_i` over
//! the nodes of nonzero weight, because the measured CV is the spread of
//! `share_i / expected_i` (whose mean is 1 and whose variance for node `i`
//! is `CV_i^2`) over those nodes. The model ignores collisions: 32-bit
//! hashes of `P` points collide about `P^2 / 2^33` times, and each collision
//! hands a point (and its arc) to the tie winner, which adds error the
//! formula does not see once `P` reaches the tens of millions.

use std::collections::HashMap;

use crate::Ring;

/// The size of the hash space: 2^32 keys.
pub const KEYSPACE: u64 = 1 << 32;

/// Keys of the 2^32 keyspace each node serves (index = node index),
/// counting `down` nodes' points as their next serving point's. Adds up to
/// 2^32 unless no node can serve (then all zero). `O(P)`.
pub fn keyspace(ring: &Ring) -> Vec<u64> {
    let mut keys = vec![0u64; ring.nodes().len()];
    // One forward pass, no per-point memory: a down point's arc waits in
    // `pending` for the next serving point; what waits at the end wraps to
    // the first serving point.
    let mut prev: Option<u32> = None;
    let mut first_hash = 0u32;
    let mut last = 0u32;
    let mut first_serving: Option<usize> = None;
    let mut pending = 0u64;
    for (hash, owner) in ring.points() {
        let arc = match prev {
            None => {
                first_hash = hash;
                0 // the first point's arc is known only at the end
            }
            Some(p) => (hash - p) as u64,
        };
        prev = Some(hash);
        last = hash;
        if ring.node_is_down(owner) {
            pending += arc;
        } else {
            keys[owner] += pending + arc;
            pending = 0;
            first_serving.get_or_insert(owner);
        }
    }
    let Some(first) = first_serving else {
        return keys;
    };
    // The wrap-around arc belongs to the first point: to its owner, or if
    // that is down, to the first serving point, which is also where the
    // arcs still pending at the end go.
    let wrap = first_hash as u64 + KEYSPACE - last as u64;
    keys[first] += pending + wrap;
    keys
}

/// For every point in ring order, the node that serves its keys: its owner,
/// or if that is down, the owner of the next point whose owner is not
/// (`u32::MAX` everywhere when every owner is down). 4 bytes a point.
fn serving_owners(ring: &Ring) -> Vec<u32> {
    let mut out: Vec<u32> = ring.points().map(|(_, n)| n as u32).collect();
    let owners = out.clone();
    let mut next = u32::MAX;
    // Two passes backwards: the second carries the wrap-around.
    for _ in 0..2 {
        for (o, &own) in out.iter_mut().zip(&owners).rev() {
            if !ring.node_is_down(own as usize) {
                next = own;
            }
            *o = next;
        }
    }
    out
}

/// The predicted coefficient of variation of a node holding `k` of `p`
/// points: `sqrt((p - k) / (k (p + 1)))`; `None` when `k` is 0.
pub fn predicted_cv_of(k: u64, p: u64) -> Option<f64> {
    (k > 0 && p >= k).then(|| ((p - k) as f64 / (k as f64 * (p as f64 + 1.0))).sqrt())
}

/// The article's CV for `n` equal nodes of `k` points:
/// `sqrt((n - 1) / (n k + 1))`.
pub fn predicted_cv_equal(n: u64, k: u64) -> f64 {
    predicted_cv_of(k, n * k).unwrap_or(f64::NAN)
}

/// The predicted CV of a ring with these weights at this point multiple:
/// the root mean square of each nonzero-weight node's CV (see the module
/// docs). `NaN` when no node has weight.
pub fn predicted_cv(weights: &[u32], point_multiple: u32) -> f64 {
    let m = point_multiple as u64;
    let p: u64 = weights.iter().map(|&w| w as u64 * m).sum();
    let cvs: Vec<f64> = weights
        .iter()
        .filter_map(|&w| predicted_cv_of(w as u64 * m, p))
        .collect();
    rms(&cvs)
}

fn rms(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    (v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64).sqrt()
}

/// One node's numbers in an [`Analysis`].
#[derive(Clone, Debug, PartialEq)]
pub struct NodeStats {
    /// Index in configuration order.
    pub index: usize,
    /// Weight.
    pub weight: u32,
    /// Points generated: weight x point multiple.
    pub points: u64,
    /// Points lost to collisions (another node won the hash, or the node's
    /// own chain repeated a hash).
    pub collided: u64,
    /// Keys of the 2^32 keyspace it serves.
    pub keys: u64,
    /// Its share of the keyspace: `keys / 2^32`.
    pub share: f64,
    /// Its weight over the total weight of the nodes that serve (not
    /// down); 0 for a down or weight-0 node.
    pub expected_share: f64,
    /// `share / expected_share - 1`; `None` where the expected share is 0.
    pub relative_error: Option<f64>,
}

/// A ring's balance: per node and overall. See the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct Analysis {
    /// Per node, in configuration order.
    pub nodes: Vec<NodeStats>,
    /// The model's CV (root mean square over serving nodes).
    pub predicted_cv: f64,
    /// The CV measured on the ring: the standard deviation of
    /// `share / expected_share` over serving nodes (nonzero weight, not
    /// down) divided by its mean.
    pub measured_cv: f64,
    /// The largest `share / expected_share`.
    pub max_overload: f64,
    /// Points generated in all.
    pub generated_points: u64,
    /// Points on the ring after collisions.
    pub points: u64,
}

/// Analyses a built ring: exact shares from arcs, collisions per node,
/// predicted and measured CV, maximum overload. `O(P)`.
pub fn analyze(ring: &Ring) -> Analysis {
    let nodes = ring.nodes();
    let m = ring.point_multiple() as u64;
    let keys = keyspace(ring);
    let mut kept = vec![0u64; nodes.len()];
    for (_, n) in ring.points() {
        kept[n] += 1;
    }
    let serving = |i: usize| nodes[i].weight() > 0 && !nodes[i].is_down();
    let serving_weight: u64 = (0..nodes.len())
        .filter(|&i| serving(i))
        .map(|i| nodes[i].weight() as u64)
        .sum();
    let serving_points = serving_weight * m;
    let mut stats = Vec::with_capacity(nodes.len());
    let mut ratios = Vec::new();
    let mut cvs = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let points = node.weight() as u64 * m;
        let share = keys[i] as f64 / KEYSPACE as f64;
        let expected = if serving(i) && serving_weight > 0 {
            node.weight() as f64 / serving_weight as f64
        } else {
            0.0
        };
        let relative_error = (expected > 0.0).then(|| share / expected - 1.0);
        if expected > 0.0 {
            ratios.push(share / expected);
            cvs.extend(predicted_cv_of(points, serving_points));
        }
        stats.push(NodeStats {
            index: i,
            weight: node.weight(),
            points,
            collided: points - kept[i],
            keys: keys[i],
            share,
            expected_share: expected,
            relative_error,
        });
    }
    let (mean, sd) = mean_sd(&ratios);
    Analysis {
        nodes: stats,
        predicted_cv: rms(&cvs),
        measured_cv: if mean > 0.0 { sd / mean } else { f64::NAN },
        max_overload: ratios.iter().copied().fold(f64::NAN, f64::max),
        generated_points: ring.generated_points(),
        points: ring.point_count() as u64,
    }
}

/// Mean and population standard deviation; `(NaN, NaN)` when empty.
pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

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

/// `n` distinct synthetic IPv4 servers, `10.A.B.C:PORT`, for sweeps: the 24
/// address bits and a port from 1,024 to 65,535 come from a SplitMix64
/// stream seeded with `seed` (a repeat is skipped), so a seed names the
/// same servers on every machine and release.
pub fn synthetic_servers(n: usize, seed: u64) -> Vec<String> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let x = next();
        let (a, port) = (
            x as u32 & 0x00FF_FFFF,
            1024 + (x >> 32) as u32 % (65_536 - 1024),
        );
        let s = format!("10.{}.{}.{}:{}", a >> 16, (a >> 8) & 255, a & 255, port);
        if seen.insert(s.clone()) {
            out.push(s);
        }
    }
    out
}

/// Points-per-node values from `from` to `to` spaced evenly on a log scale,
/// `steps` of them (both ends included, duplicates after rounding dropped).
pub fn log_steps(from: u32, to: u32, steps: usize) -> Vec<u32> {
    let (from, to) = (from.max(1), to.max(from.max(1)));
    if steps <= 1 || from == to {
        return vec![from];
    }
    let (a, b) = ((from as f64).ln(), (to as f64).ln());
    let mut out: Vec<u32> = (0..steps)
        .map(|i| (a + (b - a) * i as f64 / (steps - 1) as f64).exp().round() as u32)
        .collect();
    out.dedup();
    out
}

/// One point of a sweep: the CV of `n` equal nodes at `points_per_node`,
/// predicted and measured over several random node sets.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepRow {
    /// Points per node (weight 1 x this point multiple).
    pub points_per_node: u32,
    /// `sqrt((n - 1) / (n k + 1))`.
    pub predicted_cv: f64,
    /// Mean measured CV over the trials.
    pub measured_cv_mean: f64,
    /// Standard deviation of the measured CV over the trials.
    pub measured_cv_sd: f64,
    /// Smallest measured CV.
    pub measured_cv_min: f64,
    /// Largest measured CV.
    pub measured_cv_max: f64,
    /// Mean number of points lost to collisions per trial.
    pub collisions_mean: f64,
}

/// Measures one sweep step: `trials` rings of `n` synthetic servers (see
/// [`synthetic_servers`], seeds `seed`, `seed + 1`, ...) at
/// `points_per_node`, built with `builder`'s scheme in the wide layout.
/// Memory: one ring at a time, 8 bytes a point (plus 4 while building).
pub fn sweep_step(
    n: usize,
    points_per_node: u32,
    trials: u32,
    seed: u64,
    builder: crate::RingBuilder,
    mut on_trial: impl FnMut(),
) -> crate::Result<SweepRow> {
    let mut cvs = Vec::with_capacity(trials as usize);
    let mut collisions = 0u64;
    for t in 0..trials {
        let nodes = synthetic_servers(n, seed.wrapping_add(t as u64))
            .into_iter()
            .map(|s| crate::Node::new(s, 1))
            .collect();
        let ring = builder
            .layout(crate::Layout::Wide)
            .point_multiple(points_per_node)
            .build(nodes)?;
        let a = analyze(&ring);
        cvs.push(a.measured_cv);
        collisions += a.generated_points - a.points;
        on_trial();
    }
    let (mean, sd) = mean_sd(&cvs);
    Ok(SweepRow {
        points_per_node,
        predicted_cv: predicted_cv_equal(n as u64, points_per_node as u64),
        measured_cv_mean: mean,
        measured_cv_sd: sd,
        measured_cv_min: cvs.iter().copied().fold(f64::INFINITY, f64::min),
        measured_cv_max: cvs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        collisions_mean: collisions as f64 / trials.max(1) as f64,
    })
}

/// What [`recommend`] aims for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target {
    /// The CV may be at most this.
    MaxCv(f64),
    /// The CV may exceed the one measured at the current multiple by at
    /// most this (absolute).
    MaxExtraError(f64),
}

/// The answer of [`recommend`].
#[derive(Clone, Debug, PartialEq)]
pub struct Recommendation {
    /// The smallest point multiple whose predicted CV meets the target and
    /// whose built ring confirms it.
    pub point_multiple: u32,
    /// The CV the target allows.
    pub target_cv: f64,
    /// Predicted CV at the recommended multiple.
    pub predicted_cv: f64,
    /// CV measured on the ring built at the recommended multiple.
    pub measured_cv: f64,
    /// CV measured at the current multiple.
    pub current_measured_cv: f64,
    /// Multiples tried after the prediction, with their measured CVs, when
    /// the measurement missed the target.
    pub stepped: Vec<(u32, f64)>,
    /// Per layout: (layout, heap bytes of the points at the current
    /// multiple, at the recommended one).
    pub memory: Vec<(crate::Layout, usize, usize)>,
}

/// Finds the smallest point multiple for `nodes` whose predicted CV meets
/// `target` (binary search: the prediction falls as the multiple grows),
/// then builds that ring and measures it, stepping the multiple up by an
/// eighth at a time while the measurement misses. `builder` gives the
/// scheme and the current multiple. Memory is measured on rings built in
/// every layout at both multiples.
pub fn recommend(
    nodes: &[crate::Node],
    builder: crate::RingBuilder,
    target: Target,
) -> crate::Result<Recommendation> {
    let weights: Vec<u32> = nodes
        .iter()
        .filter(|n| !n.is_down())
        .map(|n| n.weight())
        .collect();
    let total_weight: u64 = weights.iter().map(|&w| w as u64).sum::<u64>().max(1);
    let max_multiple = (crate::MAX_POINTS / total_weight).min(u32::MAX as u64) as u32;
    let build = |m: u32, layout: crate::Layout| {
        builder
            .point_multiple(m)
            .layout(layout)
            .build(nodes.to_vec())
    };
    let current = builder.get_point_multiple();
    let current_measured_cv = analyze(&build(current, crate::Layout::Wide)?).measured_cv;
    let target_cv = match target {
        Target::MaxCv(x) => x,
        Target::MaxExtraError(x) => current_measured_cv + x,
    };
    if target_cv.is_nan() || target_cv <= 0.0 || max_multiple == 0 {
        return Err(crate::Error::UnreachableTarget {
            target_cv,
            best_cv: predicted_cv(&weights, max_multiple.max(1)),
            max_multiple,
        });
    }
    if predicted_cv(&weights, max_multiple) > target_cv {
        return Err(crate::Error::UnreachableTarget {
            target_cv,
            best_cv: predicted_cv(&weights, max_multiple),
            max_multiple,
        });
    }
    let (mut lo, mut hi) = (1u32, max_multiple);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if predicted_cv(&weights, mid) <= target_cv {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let mut m = lo;
    let mut stepped = Vec::new();
    let mut measured = analyze(&build(m, crate::Layout::Wide)?).measured_cv;
    while measured > target_cv && m < max_multiple {
        m = m.saturating_add((m / 8).max(1)).min(max_multiple);
        measured = analyze(&build(m, crate::Layout::Wide)?).measured_cv;
        stepped.push((m, measured));
    }
    let mut memory = Vec::new();
    for layout in crate::Layout::ALL {
        let now = build(current, layout)
            .map(|r| r.points_heap_bytes())
            .unwrap_or(0);
        let then = build(m, layout).map(|r| r.points_heap_bytes()).unwrap_or(0);
        memory.push((layout, now, then));
    }
    Ok(Recommendation {
        point_multiple: m,
        target_cv,
        predicted_cv: predicted_cv(&weights, m),
        measured_cv: measured,
        current_measured_cv,
        stepped,
        memory,
    })
}
