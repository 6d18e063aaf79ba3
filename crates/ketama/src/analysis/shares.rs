//! Exact keyspace shares from arcs and the balance model (see the
//! [module docs](super)).

use crate::Ring;

/// The size of the hash space: 2^32 keys.
pub const KEYSPACE: u64 = 1 << 32;

/// Keys of the 2^32 keyspace each node serves (index = node index),
/// counting `down` nodes' points as their next serving point's. Adds up to
/// 2^32 unless no node can serve (then all zero). `O(P)`.
pub fn keyspace(ring: &Ring) -> Vec<u64> {
    let mut keys = vec![0u64; ring.nodes().len()];
    if ring.compat().nearer() {
        let view = successor_view(ring);
        let Some(&(last, _)) = view.last() else {
            return keys;
        };
        let mut prev = last as u64 + 1;
        for &(h, owner) in &view {
            // Keys from just after the previous boundary up to this one.
            let arc = (h as u64 + KEYSPACE - prev) % KEYSPACE + 1;
            keys[owner.unwrap_or(0)] += if view.len() == 1 { KEYSPACE } else { arc };
            prev = h as u64 + 1;
        }
        return keys;
    }
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

/// The ring as boundaries under the first-point-at-or-after rule: keys
/// from just after one boundary's hash up to the next's (wrapping) go to
/// its node (`None`: no node serves). For rings of that rule, the points
/// and their serving owners; for HAProxy's nearer-point rule, one boundary
/// per serving point, halfway (rounded down) to the next serving point,
/// which is where its keys end. `O(P)`, 16 bytes a point.
pub(super) fn successor_view(ring: &Ring) -> Vec<(u32, Option<usize>)> {
    if !ring.compat().nearer() {
        return ring
            .points()
            .zip(serving_owners(ring))
            .map(|((h, _), o)| (h, (o != u32::MAX).then_some(o as usize)))
            .collect();
    }
    let serving: Vec<(u32, usize)> = ring
        .points()
        .filter(|&(_, n)| !ring.node_is_down(n))
        .collect();
    let mut out: Vec<(u32, Option<usize>)> = Vec::with_capacity(serving.len());
    for (i, &(a, owner)) in serving.iter().enumerate() {
        let b = serving[(i + 1) % serving.len()].0;
        let gap = match b.wrapping_sub(a) {
            0 => KEYSPACE, // one point: the whole circle
            g => g as u64,
        };
        // HAProxy's `dp <= dn`: keys up to a + floor(gap / 2) stay with a.
        out.push((a.wrapping_add((gap / 2) as u32), Some(owner)));
    }
    // Boundaries past 2^32 wrapped to the front: rotate them there.
    let k = out
        .windows(2)
        .position(|w| w[1].0 < w[0].0)
        .map_or(0, |i| i + 1);
    out.rotate_left(k);
    out
}

/// For every point in ring order, the node that serves its keys: its owner,
/// or if that is down, the owner of the next point whose owner is not
/// (`u32::MAX` everywhere when every owner is down). 4 bytes a point.
pub(super) fn serving_owners(ring: &Ring) -> Vec<u32> {
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

pub(super) fn rms(v: &[f64]) -> f64 {
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
    /// Points generated: weight x point multiple, or the memcached
    /// schemes' share of 160 x N.
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
    let generated = ring.node_points();
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
    let serving_points: u64 = (0..nodes.len())
        .filter(|&i| serving(i))
        .map(|i| generated[i])
        .sum();
    let mut stats = Vec::with_capacity(nodes.len());
    let mut ratios = Vec::new();
    let mut cvs = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let points = generated[i];
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
pub(crate) fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}
