//! Choosing a balance factor before deploying it: a workload replayed
//! through the routing decision with bounded loads, and what it costs in
//! balance and in cache locality.
//!
//! The workload keeps `K` requests in flight at all times: a request
//! starts when one ends (time advances from completion to completion),
//! each lasting a service time drawn from an exponential distribution of
//! mean 1 (or exactly 1). Keys come from a Zipf distribution over `P` keys
//! (`/obj/1` the hottest) or from a trace, in order. Every placement goes
//! through [`RouteTable::next_bounded`](crate::RouteTable::next_bounded)
//! (or the plain decision with the factor off) and a real
//! [`LoadTracker`], so the simulation measures the code a router runs.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

use crate::load::{BalanceFactor, LoadGuard, LoadTracker};
use crate::mix::SplitMix64;
use crate::route::RouteTable;
use crate::Version;

/// How long each request lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// Exponentially distributed, mean 1.
    Exponential,
    /// Exactly 1.
    Fixed,
}

/// What is replayed.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Requests placed.
    pub requests: u64,
    /// Distinct keys of the Zipf distribution (`/obj/1` to `/obj/P`).
    pub population: u32,
    /// The Zipf exponent `s` (key of rank `k` drawn with weight `k^-s`).
    pub zipf: f64,
    /// Requests in flight at all times.
    pub concurrency: u32,
    /// Service times.
    pub service: Service,
    /// Seed of the draws (keys and service times).
    pub seed: u64,
    /// Keys to replay in order instead of Zipf draws (cycled if shorter
    /// than `requests`).
    pub trace: Option<Vec<Vec<u8>>>,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            requests: 200_000,
            population: 100_000,
            zipf: 1.1,
            concurrency: 1_000,
            service: Service::Exponential,
            seed: 1,
            trace: None,
        }
    }
}

/// What one balance factor did to a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The factor (`None`: plain consistent hashing).
    pub balance: Option<BalanceFactor>,
    /// The highest load any node had when a request was placed, over the
    /// average `K / n` (n: serving nodes).
    pub max_over_avg: f64,
    /// Share of requests served by their key's own node (its plain-ring
    /// node): what the cache hit ratio depends on.
    pub own_node_share: f64,
    /// Full nodes passed over, per request.
    pub spills_per_request: f64,
    /// Keys served at least once by a node other than their own.
    pub moved_keys: u64,
}

/// A request in flight: when it ends, and its slot.
struct InFlight {
    end: f64,
    seq: u64,
    _slot: LoadGuard,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    /// Earliest end first (a max-heap of the reverse).
    fn cmp(&self, o: &Self) -> Ordering {
        o.end.total_cmp(&self.end).then(o.seq.cmp(&self.seq))
    }
}

/// A workload that cannot be replayed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkloadError {
    /// Nothing to draw keys from.
    #[error(
        "the workload has no key: give a population of at least 1 or a trace with at least one key"
    )]
    NoKey,
    /// No request in flight.
    #[error("concurrency 0 keeps no request in flight: give at least 1 (10x the servers or more, or rounding of the bound dominates)")]
    NoConcurrency,
    /// A Zipf exponent that is not a number of 0 or more.
    #[error("Zipf exponent {0} is not a number of 0 or more: 0 draws keys uniformly, 1.1 is typical of web objects")]
    BadZipf(f64),
    /// Every node of the ring is down or has weight 0.
    #[error("no server of the ring can serve (every one is down or has weight 0): nothing to place requests on")]
    NoServingNode,
}

/// Replays `w` through `table` (its `Only`/`Old` ring, no label
/// requirement) with each factor of `factors` (`None`: off); one
/// [`Outcome`] per factor, in order. Cost: `O(requests x log K)` per
/// factor plus the decisions, and `O(P)` memory for the keys.
pub fn simulate(
    table: &RouteTable,
    w: &Workload,
    factors: &[Option<BalanceFactor>],
) -> Result<Vec<Outcome>, WorkloadError> {
    if w.concurrency == 0 {
        return Err(WorkloadError::NoConcurrency);
    }
    if !(w.zipf.is_finite() && w.zipf >= 0.0) {
        return Err(WorkloadError::BadZipf(w.zipf));
    }
    match &w.trace {
        Some(t) if t.is_empty() => return Err(WorkloadError::NoKey),
        None if w.population == 0 => return Err(WorkloadError::NoKey),
        _ => {}
    }
    let keys: Vec<Vec<u8>> = match &w.trace {
        Some(t) => {
            let mut k = t.clone();
            k.sort();
            k.dedup();
            k
        }
        None => (1..=w.population as u64)
            .map(|r| format!("/obj/{r}").into_bytes())
            .collect(),
    };
    let index_of = |key: &[u8]| {
        keys.binary_search_by(|k| k.as_slice().cmp(key))
            .unwrap_or(0)
    };
    // The order of keys requested: trace positions, or Zipf ranks.
    let order: Vec<usize> = match &w.trace {
        Some(t) => (0..w.requests as usize)
            .map(|i| index_of(&t[i % t.len()]))
            .collect(),
        None => zipf_draws(keys.len(), w.zipf, w.requests, w.seed),
    };
    let ring = table.ring(Version::Only);
    let own: Vec<Option<usize>> = keys
        .iter()
        .map(|k| {
            let mut r = table.route(k, None, None).ok()?;
            table.next(&mut r).ok().flatten()
        })
        .collect();
    let serving = ring
        .nodes()
        .iter()
        .filter(|n| n.weight() > 0 && !n.is_down())
        .count();
    let total_weight = table.serving_weight(None, Version::Only, |_| true);
    if serving == 0 || total_weight == 0 {
        return Err(WorkloadError::NoServingNode);
    }
    Ok(factors
        .iter()
        .map(|&factor| {
            let tracker = Arc::new(LoadTracker::new(table));
            let mut rng = SplitMix64::new(w.seed ^ 0x5eed_5eed);
            let mut heap: BinaryHeap<InFlight> =
                BinaryHeap::with_capacity(w.concurrency as usize + 1);
            let (mut now, mut max_load) = (0.0f64, 0u32);
            let (mut own_hits, mut spills, mut placed) = (0u64, 0u64, 0u64);
            let mut moved = vec![false; keys.len()];
            for (seq, &k) in order.iter().enumerate() {
                if heap.len() >= w.concurrency.max(1) as usize {
                    let done = heap.pop().expect("a request in flight");
                    now = done.end;
                }
                let Ok(mut route) = table.route(&keys[k], None, None) else {
                    continue;
                };
                let placement = match factor {
                    Some(f) => table
                        .next_bounded(&mut route, &tracker, f, total_weight, |_| true)
                        .ok()
                        .flatten(),
                    // Plain: the key's node, whatever its load (a total
                    // weight of 0 is no bound; the tracker still counts).
                    None => table
                        .next_bounded(&mut route, &tracker, BalanceFactor::MAX, 0, |_| true)
                        .ok()
                        .flatten(),
                };
                let Some(p) = placement else { continue };
                placed += 1;
                max_load = max_load.max(tracker.load(p.node));
                spills += p.spills as u64;
                if Some(p.node) == own[k] {
                    own_hits += 1;
                } else {
                    moved[k] = true;
                }
                let service = match w.service {
                    Service::Fixed => 1.0,
                    Service::Exponential => -(1.0 - rng.unit()).ln(),
                };
                heap.push(InFlight {
                    end: now + service,
                    seq: seq as u64,
                    _slot: p.guard,
                });
            }
            let avg = w.concurrency as f64 / serving as f64;
            Outcome {
                balance: factor,
                max_over_avg: max_load as f64 / avg,
                own_node_share: own_hits as f64 / placed.max(1) as f64,
                spills_per_request: spills as f64 / placed.max(1) as f64,
                moved_keys: moved.iter().filter(|&&m| m).count() as u64,
            }
        })
        .collect())
}

/// `n` draws of Zipf ranks over `keys` keys (0 is the hottest) with
/// exponent `s`, by inverting the cumulative distribution.
fn zipf_draws(keys: usize, s: f64, n: u64, seed: u64) -> Vec<usize> {
    let mut cdf = Vec::with_capacity(keys);
    let mut acc = 0.0;
    for k in 1..=keys {
        acc += (k as f64).powf(-s);
        cdf.push(acc);
    }
    let mut rng = SplitMix64::new(seed);
    (0..n)
        .map(|_| {
            let u = rng.unit() * acc;
            cdf.partition_point(|&c| c < u).min(keys - 1)
        })
        .collect()
}
