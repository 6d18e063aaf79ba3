//! The exact keyspace that changes server between two rings.

use std::collections::HashMap;

use super::shares::{successor_view, KEYSPACE};
use crate::error::{Error, Result};
use crate::Ring;

/// One server's part in a change between two rings (shares of the
/// keyspace for [`diff`], of the samples for [`diff_sampled`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ServerDiff {
    /// The server string, as on either ring.
    pub server: String,
    /// The share it gains (keys it serves on `to` and did not on `from`).
    pub gained: f64,
    /// The share it loses.
    pub lost: f64,
}

/// What changes between two rings, servers matched by their exact strings.
#[derive(Clone, Debug, PartialEq)]
pub struct Diff {
    /// Keys (of 2^32) whose server changes.
    pub moved_keys: u64,
    /// `moved_keys / 2^32`: the share of cached objects that miss after the
    /// change.
    pub moved: f64,
    /// Per server (the union of both rings' servers, `from`'s order first).
    pub servers: Vec<ServerDiff>,
}

/// Both rings' servers, matched by their strings: `from`'s nodes, then
/// `to`'s that `from` lacks; and each of `to`'s nodes' place in that list.
pub(super) fn server_union<'a>(from: &'a Ring, to: &'a Ring) -> (Vec<&'a str>, Vec<usize>) {
    let mut names: Vec<&str> = from.nodes().iter().map(|n| n.server()).collect();
    let mut index: HashMap<&str, usize> = names.iter().enumerate().map(|(i, &s)| (s, i)).collect();
    let to_ids = to
        .nodes()
        .iter()
        .map(|n| {
            *index.entry(n.server()).or_insert_with(|| {
                names.push(n.server());
                names.len() - 1
            })
        })
        .collect();
    (names, to_ids)
}

/// The exact keyspace that changes server between `from` and `to`. Walks
/// the merged point lists: between consecutive point hashes of either ring
/// both rings' answers are constant. `O(P_from + P_to)`.
///
/// # Errors
/// [`Error::DiffNeedsSampling`] when the rings hash keys differently (or
/// with a hash that does not spread over all 2^32 values): there the two
/// hash spaces are unrelated and only [`diff_sampled`] means anything.
pub fn diff(from: &Ring, to: &Ring) -> Result<Diff> {
    if !exact_diff_applies(from, to) {
        return Err(Error::DiffNeedsSampling {
            from: from.compat().key_hash().name(),
            to: to.compat().key_hash().name(),
        });
    }
    let (names, to_ids) = server_union(from, to);
    // Each ring as (hash, serving server id) in ring order; `None` = no server.
    let side = |ring: &Ring, ids: &dyn Fn(usize) -> usize| -> Vec<(u32, Option<usize>)> {
        successor_view(ring)
            .into_iter()
            .map(|(h, o)| (h, o.map(ids)))
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
    Ok(Diff {
        moved_keys: moved,
        moved: f(moved),
        servers: per_server(&names, &gained, &lost, f),
    })
}

pub(super) fn per_server(
    names: &[&str],
    gained: &[u64],
    lost: &[u64],
    f: impl Fn(u64) -> f64,
) -> Vec<ServerDiff> {
    names
        .iter()
        .enumerate()
        .map(|(k, s)| ServerDiff {
            server: s.to_string(),
            gained: f(gained[k]),
            lost: f(lost[k]),
        })
        .collect()
}

/// Whether [`diff`] counts the moved keys exactly for these rings: both
/// hash keys with the same function (nginx and pingora share CRC-32,
/// libmemcached and twemproxy's `md5` share MD5, twemproxy's `crc32a` is
/// CRC-32) and that function spreads keys over all 2^32 values. Otherwise
/// the two hash spaces are unrelated, or not uniform, and only
/// [`diff_sampled`] applies.
pub(crate) fn exact_diff_applies(from: &Ring, to: &Ring) -> bool {
    // O(1): two key hashes compared.
    let (a, b) = (from.compat().key_hash(), to.compat().key_hash());
    a == b && a.is_uniform()
}

/// What changes between two rings, estimated from sampled keys.
#[derive(Clone, Debug, PartialEq)]
pub struct SampledDiff {
    /// Keys routed on both rings.
    pub samples: u64,
    /// Of those, keys whose server changed.
    pub moved_samples: u64,
    /// `moved_samples / samples`: the estimated share of cached objects
    /// that miss after the change.
    pub moved: f64,
    /// The 95% confidence interval of `moved` (Wilson score interval).
    pub ci95: (f64, f64),
    /// Per server (the union of both rings' servers, `from`'s order
    /// first), as shares of the samples.
    pub servers: Vec<ServerDiff>,
}

/// Routes every key on both rings (each with its own key hash) and counts
/// the keys whose server changes. Use it where [`diff`] refuses (the rings
/// hash keys differently); with n keys the 95% interval is about `+-1.96 sqrt(p (1-p) / n)`
/// wide (+-0.001 at p = 0.5, n = 10^6). `O(n)` lookups on each ring.
pub fn diff_sampled<K: AsRef<[u8]>>(
    from: &Ring,
    to: &Ring,
    keys: impl IntoIterator<Item = K>,
) -> SampledDiff {
    let owners = keys.into_iter().map(|k| {
        let k = k.as_ref();
        (from.node_index(k), to.node_index(k))
    });
    tally(from, to, owners)
}

/// The moved share of samples, from each sample's node index on `from`
/// and on `to` (`None`: no server).
pub(super) fn tally(
    from: &Ring,
    to: &Ring,
    owners: impl IntoIterator<Item = (Option<usize>, Option<usize>)>,
) -> SampledDiff {
    let (names, to_ids) = server_union(from, to);
    let mut gained = vec![0u64; names.len()];
    let mut lost = vec![0u64; names.len()];
    let (mut n, mut moved) = (0u64, 0u64);
    for (a, b) in owners {
        let b = b.map(|j| to_ids[j]);
        n += 1;
        if a != b {
            moved += 1;
            if let Some(a) = a {
                lost[a] += 1;
            }
            if let Some(b) = b {
                gained[b] += 1;
            }
        }
    }
    let f = |x: u64| if n == 0 { 0.0 } else { x as f64 / n as f64 };
    SampledDiff {
        samples: n,
        moved_samples: moved,
        moved: f(moved),
        ci95: wilson95(moved, n),
        servers: per_server(&names, &gained, &lost, f),
    }
}

/// The Wilson score interval at 95% for `x` successes in `n` trials
/// (`(0, 1)` when `n` is 0).
pub(crate) fn wilson95(x: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = 1.959_963_984_540_054_f64;
    let (n, p) = (n as f64, x as f64 / n as f64);
    let d = 1.0 + z * z / n;
    let center = (p + z * z / (2.0 * n)) / d;
    let half = z / d * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    ((center - half).max(0.0), (center + half).min(1.0))
}
