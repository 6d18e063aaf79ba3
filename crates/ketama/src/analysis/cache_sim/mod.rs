//! What a ring change costs the origin over time: every server's cache
//! simulated (LRU) through a rollout schedule, request by request.
//!
//! How a trace is consumed (exactly, so another simulator can replay it):
//! requests are taken in order; the first `warmup` are served by the old
//! ring and not counted; then each step of the schedule serves the next
//! `requests_per_step` requests at its share (a key goes to the new ring
//! when its [`rollout_bucket`](crate::migration::rollout_bucket) is below
//! the step's basis points, as the router decides), the last step taking
//! the rest. A request is a hit when its key is in its server's cache,
//! else a miss that inserts it (evicting least recently used entries until
//! it fits). With `fill_from_previous`, a miss at a moved key's new owner
//! first looks in the old ring's owner's cache without changing it (no
//! promotion): found there, it is a peer fill, not an origin fetch; the
//! new owner inserts it as on any miss, so the caches evolve exactly as
//! without fill and only the origin count differs.
//!
//! [`simulate`] runs a whole trace; a [`Simulation`] is fed one request at
//! a time and can be cloned after the warm-up to try other schedules from
//! the same warm caches, as [`fewest_steps`] does to find the fewest steps
//! that keep the origin under a cap.
//!
//! Cost: per request one FNV-1a of the key, one or two ring lookups and a
//! hash-map probe; about 45 bytes per cached object (see the LRU's
//! layout).

use std::collections::HashMap;

mod fewest_steps;

pub use fewest_steps::{fewest_steps, Schedule, ScheduleError, LADDER_BP};

use crate::analysis::lru::Lru;
use crate::mix::{fnv1a64, mix64};
use crate::ring::Ring;

/// How big each server's cache is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CacheSize {
    /// This many objects (or bytes, with an object size) per server.
    Each(u64),
    /// This many per unit of the server's weight on the old ring, times
    /// the mean weight: servers of the mean weight get it exactly.
    ByWeight(u64),
}

/// The simulation's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SimSettings {
    /// Requests served by the old ring first, not counted.
    pub warmup: u64,
    /// The schedule, in basis points per step.
    pub steps_bp: Vec<u32>,
    /// Requests each step serves (the last step: the rest of the trace).
    pub requests_per_step: u64,
    /// Requests per window of the time series.
    pub window: u64,
    /// Each cache's capacity, in objects or (with `object_size`) bytes.
    pub cache: CacheSize,
    /// Every object's size in bytes (`None`: objects count one each).
    pub object_size: Option<u64>,
    /// Moved keys' misses look in their previous owner's cache first.
    pub fill_from_previous: bool,
}

/// One step's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepStats {
    /// Its share, basis points.
    pub bp: u32,
    /// Requests it served.
    pub requests: u64,
    /// Hits by ring (old, new).
    pub hits: [u64; 2],
    /// Misses by ring (old, new).
    pub misses: [u64; 2],
    /// Misses a previous owner's cache answered.
    pub peer_fills: u64,
    /// Misses that went to the origin.
    pub origin_fetches: u64,
    /// Their bytes (with an object size).
    pub origin_bytes: u64,
}

/// One window of the time series (counted requests only).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// The step it ended in (0-based).
    pub step: usize,
    /// Requests in it.
    pub requests: u64,
    /// Hits by ring (old, new).
    pub hits: [u64; 2],
    /// Misses by ring (old, new).
    pub misses: [u64; 2],
    /// Misses a previous owner's cache answered.
    pub peer_fills: u64,
    /// Origin fetches in it.
    pub origin_fetches: u64,
    /// Their bytes (with an object size).
    pub origin_bytes: u64,
}

/// A server's counts over the counted requests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// As named on the rings.
    pub server: String,
    /// Hits.
    pub hits: u64,
    /// Misses.
    pub misses: u64,
}

/// The simulation's result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SimReport {
    /// Per step.
    pub steps: Vec<StepStats>,
    /// Per window of counted requests.
    pub windows: Vec<Window>,
    /// Per server.
    pub servers: Vec<ServerStats>,
    /// Origin fetches in the warm-up's last full window: the steady state.
    pub steady_window: Option<u64>,
}

impl SimReport {
    /// The window with the most origin fetches.
    pub fn peak_window(&self) -> Option<&Window> {
        self.windows.iter().max_by_key(|w| w.origin_fetches)
    }

    /// Checks the report's internal sums (for tests and fuzz targets):
    /// each step's hits and misses make its requests and its misses are
    /// peer fills or origin fetches; the servers' counts and the windows'
    /// add up to the steps'. Cost: one pass over steps, servers, windows.
    pub fn check(&self) -> Result<(), String> {
        let mut requests = 0;
        let mut fetches = 0;
        let mut misses = 0;
        for (i, s) in self.steps.iter().enumerate() {
            let (h, m) = (s.hits[0] + s.hits[1], s.misses[0] + s.misses[1]);
            if h + m != s.requests {
                return Err(format!(
                    "step {}: {h} hits + {m} misses != {} requests",
                    i + 1,
                    s.requests
                ));
            }
            if s.peer_fills + s.origin_fetches != m {
                return Err(format!(
                    "step {}: {} peer fills + {} origin fetches != {m} misses",
                    i + 1,
                    s.peer_fills,
                    s.origin_fetches
                ));
            }
            requests += s.requests;
            fetches += s.origin_fetches;
            misses += m;
        }
        let (sh, sm) = self
            .servers
            .iter()
            .fold((0, 0), |(h, m), s| (h + s.hits, m + s.misses));
        if sh + sm != requests || sm != misses {
            return Err(format!(
                "servers: {sh} hits and {sm} misses against the steps' {requests} requests and {misses} misses"
            ));
        }
        let (wr, wf, wm) = self.windows.iter().fold((0, 0, 0), |(r, f, m), w| {
            (
                r + w.requests,
                f + w.origin_fetches,
                m + w.misses[0] + w.misses[1],
            )
        });
        if wr != requests || wf != fetches || wm != misses {
            return Err(format!(
                "windows: {wr} requests, {wf} origin fetches and {wm} misses against the steps' {requests}, {fetches} and {misses}"
            ));
        }
        if let Some(w) = self
            .windows
            .iter()
            .find(|w| w.hits[0] + w.hits[1] + w.misses[0] + w.misses[1] != w.requests)
        {
            return Err(format!(
                "a window of step {}: hits and misses != its {} requests",
                w.step + 1,
                w.requests
            ));
        }
        Ok(())
    }
}

/// `n` Zipf draws of object ranks over `objects` objects (0 the hottest,
/// rank `k` drawn with weight `(k+1)^-alpha`), from `seed` (SplitMix64;
/// the same seed gives the same trace). Cost: `objects` floats, then one
/// binary search per draw.
pub fn zipf_ranks(objects: u32, alpha: f64, n: u64, seed: u64) -> Vec<u32> {
    let mut cdf = Vec::with_capacity(objects as usize);
    let mut acc = 0.0;
    for k in 1..=objects {
        acc += (k as f64).powf(-alpha);
        cdf.push(acc);
    }
    let mut rng = crate::mix::SplitMix64::new(seed);
    (0..n)
        .map(|_| {
            let u = rng.unit() * acc;
            cdf.partition_point(|&c| c < u).min(objects as usize - 1) as u32
        })
        .collect()
}

/// Simulates `trace` through the schedule from `old` to `new` (see the
/// module docs). Servers are matched across the rings by name.
pub fn simulate<R: SimRequest>(
    old: &Ring,
    new: &Ring,
    trace: impl IntoIterator<Item = R>,
    s: &SimSettings,
) -> SimReport {
    let mut sim = Simulation::new(old, new, s.clone());
    for r in trace {
        sim.serve_request(&r);
    }
    sim.finish()
}

/// One request to a simulation: the object the caches hold, and the key
/// each ring routes it by. A key (`&[u8]`) is all three; a key
/// migration's request is `(object, old key, new key)`.
pub trait SimRequest {
    /// What the caches key it by.
    fn object(&self) -> &[u8];
    /// What the old ring routes.
    fn old_key(&self) -> &[u8];
    /// What the new ring routes, and what chooses the side.
    fn new_key(&self) -> &[u8];
}

impl SimRequest for &[u8] {
    fn object(&self) -> &[u8] {
        self
    }
    fn old_key(&self) -> &[u8] {
        self
    }
    fn new_key(&self) -> &[u8] {
        self
    }
}

impl SimRequest for (&[u8], &[u8], &[u8]) {
    fn object(&self) -> &[u8] {
        self.0
    }
    fn old_key(&self) -> &[u8] {
        self.1
    }
    fn new_key(&self) -> &[u8] {
        self.2
    }
}

/// A simulation fed one request at a time: what [`simulate`] runs, for a
/// caller that wants to stop early (watching [`Simulation::peak`]) or to
/// try several schedules after one warm-up ([`Simulation::with_schedule`]
/// on a clone). Bound to its two rings by lifetime.
#[derive(Clone)]
pub struct Simulation<'r> {
    old: &'r Ring,
    new: &'r Ring,
    old_ix: Vec<usize>,
    new_ix: Vec<usize>,
    caches: Vec<Lru>,
    s: SimSettings,
    report: SimReport,
    window: Window,
    warm_window: u64,
    served: u64,
}

/// [`Simulation::with_schedule`] after the warm-up: the schedule has
/// already begun, so another one would not be a fair comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleStarted {
    /// Requests served so far.
    pub served: u64,
    /// The warm-up's length.
    pub warmup: u64,
}

impl std::fmt::Display for ScheduleStarted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the schedule can change only during the warm-up ({} requests served of a {}-request warm-up): start again from a clone taken before",
            self.served, self.warmup
        )
    }
}

impl std::error::Error for ScheduleStarted {}

impl<'r> Simulation<'r> {
    /// Empty caches for every server of either ring.
    pub fn new(old: &'r Ring, new: &'r Ring, s: SimSettings) -> Self {
        let mut names: Vec<String> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut map_ring = |r: &Ring| -> Vec<usize> {
            r.nodes()
                .iter()
                .map(|n| {
                    let name = n.server().to_string();
                    *index.entry(name.clone()).or_insert_with(|| {
                        names.push(name);
                        names.len() - 1
                    })
                })
                .collect()
        };
        let (old_ix, new_ix) = (map_ring(old), map_ring(new));
        let mut weights = vec![0u64; names.len()];
        for (i, n) in old.nodes().iter().enumerate() {
            weights[old_ix[i]] = n.weight() as u64;
        }
        let mean = (weights.iter().sum::<u64>() as f64 / weights.len().max(1) as f64).max(1e-9);
        let caches = weights
            .iter()
            .map(|&w| {
                Lru::new(match s.cache {
                    CacheSize::Each(n) => n,
                    CacheSize::ByWeight(n) => (n as f64 * w as f64 / mean).round() as u64,
                })
            })
            .collect();
        let report = SimReport {
            steps: steps_of(&s.steps_bp),
            servers: names
                .iter()
                .map(|n| ServerStats {
                    server: n.clone(),
                    ..ServerStats::default()
                })
                .collect(),
            ..SimReport::default()
        };
        Simulation {
            old,
            new,
            old_ix,
            new_ix,
            caches,
            s,
            report,
            window: Window::default(),
            warm_window: 0,
            served: 0,
        }
    }

    /// This simulation with another schedule (basis points per step),
    /// allowed only while the warm-up lasts, when nothing has been
    /// counted against a step yet. Cost: none beyond the step list.
    pub fn with_schedule(mut self, steps_bp: Vec<u32>) -> Result<Self, ScheduleStarted> {
        self.in_warm_up()?;
        self.report.steps = steps_of(&steps_bp);
        self.s.steps_bp = steps_bp;
        Ok(self)
    }

    /// This simulation with fill from the previous owner on or off, allowed
    /// only while the warm-up lasts (the warm-up does not depend on it).
    pub fn with_fill(mut self, fill_from_previous: bool) -> Result<Self, ScheduleStarted> {
        self.in_warm_up()?;
        self.s.fill_from_previous = fill_from_previous;
        Ok(self)
    }

    fn in_warm_up(&self) -> Result<(), ScheduleStarted> {
        if self.served > self.s.warmup {
            return Err(ScheduleStarted {
                served: self.served,
                warmup: self.s.warmup,
            });
        }
        Ok(())
    }

    /// Requests served so far (the warm-up's included).
    pub fn served(&self) -> u64 {
        self.served
    }

    /// Its settings.
    pub fn settings(&self) -> &SimSettings {
        &self.s
    }

    /// Origin fetches in the warm-up's last full window so far.
    pub fn steady_window(&self) -> Option<u64> {
        self.report.steady_window
    }

    /// The most origin fetches in one window so far, the window being
    /// filled included.
    pub fn peak(&self) -> u64 {
        self.report
            .windows
            .iter()
            .map(|w| w.origin_fetches)
            .max()
            .unwrap_or(0)
            .max(self.window.origin_fetches)
    }

    fn owner(&self, new_ring: bool, key: &[u8]) -> Option<usize> {
        let (r, ix) = if new_ring {
            (self.new, &self.new_ix)
        } else {
            (self.old, &self.old_ix)
        };
        r.node_index(key).map(|i| ix[i])
    }

    /// Serves one request. Cost: one FNV-1a of the key, one or two ring
    /// lookups and a hash-map probe or two.
    pub fn serve(&mut self, key: &[u8]) {
        self.serve_keyed(key, key, key);
    }

    /// Serves `r` ([`SimRequest`]).
    pub fn serve_request(&mut self, r: &impl SimRequest) {
        self.serve_keyed(r.object(), r.old_key(), r.new_key());
    }

    /// Serves one request of a key migration: the caches hold `object`
    /// (the request as they key it), the old ring routes `old_key`, the
    /// new ring `new_key`, and the side is chosen by `new_key` (as
    /// [`crate::RouteTable::route_rekeyed`] chooses it). Cost: as
    /// [`serve`](Self::serve), plus one FNV-1a of the object.
    pub fn serve_keyed(&mut self, object: &[u8], old_key: &[u8], new_key: &[u8]) {
        let key = old_key;
        let n = self.served;
        self.served += 1;
        let id = mix64(fnv1a64(object));
        let size = self.s.object_size.unwrap_or(1);
        if n < self.s.warmup {
            if let Some(o) = self.owner(false, key) {
                if !self.caches[o].get(id) {
                    self.caches[o].insert(id, size);
                    self.warm_window += 1;
                }
            }
            if self.s.window > 0 && (n + 1) % self.s.window == 0 {
                self.report.steady_window = Some(self.warm_window);
                self.warm_window = 0;
            }
            return;
        }
        let counted = n - self.s.warmup;
        let step = ((counted / self.s.requests_per_step.max(1)) as usize)
            .min(self.report.steps.len().saturating_sub(1));
        let Some(&bp) = self.s.steps_bp.get(step) else {
            return;
        };
        let on_new = (crate::migration::rollout_bucket(new_key) as u32) < bp;
        let Some(server) = self.owner(on_new, if on_new { new_key } else { key }) else {
            return;
        };
        let ring = on_new as usize;
        let (st, w) = (&mut self.report.steps[step], &mut self.window);
        st.requests += 1;
        w.requests += 1;
        w.step = step;
        if self.caches[server].get(id) {
            st.hits[ring] += 1;
            w.hits[ring] += 1;
            self.report.servers[server].hits += 1;
        } else {
            st.misses[ring] += 1;
            w.misses[ring] += 1;
            self.report.servers[server].misses += 1;
            let peer = self.s.fill_from_previous
                && on_new
                && self
                    .owner(false, key)
                    .is_some_and(|p| p != server && self.caches[p].peek(id));
            let (st, w) = (&mut self.report.steps[step], &mut self.window);
            if peer {
                st.peer_fills += 1;
                w.peer_fills += 1;
            } else {
                st.origin_fetches += 1;
                w.origin_fetches += 1;
                st.origin_bytes += self.s.object_size.unwrap_or(0);
                w.origin_bytes += self.s.object_size.unwrap_or(0);
            }
            self.caches[server].insert(id, size);
        }
        if self.s.window > 0 && self.window.requests == self.s.window {
            self.report.windows.push(std::mem::take(&mut self.window));
        }
    }

    /// The report, the last partial window included.
    pub fn finish(mut self) -> SimReport {
        if self.window.requests > 0 {
            self.report.windows.push(self.window);
        }
        self.report
    }
}

fn steps_of(steps_bp: &[u32]) -> Vec<StepStats> {
    steps_bp
        .iter()
        .map(|&bp| StepStats {
            bp,
            ..StepStats::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Node, Ring};

    #[test]
    fn a_one_shot_switch_costs_the_moved_keys_and_fill_saves_them() {
        let nodes = |n: usize| {
            (0..n)
                .map(|i| Node::new(format!("10.0.0.{i}:80"), 1))
                .collect()
        };
        let old = Ring::new(nodes(4)).unwrap();
        let new = crate::RingBuilder::new()
            .point_multiple(40)
            .build(nodes(4))
            .unwrap();
        let keys: Vec<String> = (0..500).map(|i| format!("/obj/{i}")).collect();
        let trace: Vec<&[u8]> = keys
            .iter()
            .chain(&keys)
            .chain(&keys)
            .map(|k| k.as_bytes())
            .collect();
        let base = SimSettings {
            warmup: 500,
            steps_bp: vec![10_000],
            requests_per_step: 1000,
            window: 100,
            cache: CacheSize::Each(1000),
            object_size: None,
            fill_from_previous: false,
        };
        let moved = keys
            .iter()
            .filter(|k| {
                old.node(k.as_bytes()).unwrap().server() != new.node(k.as_bytes()).unwrap().server()
            })
            .count() as u64;
        let r = simulate(&old, &new, trace.iter().copied(), &base);
        // The caches hold everything: only the moved keys miss, once.
        assert_eq!(r.steps[0].origin_fetches, moved);
        assert_eq!(r.steps[0].requests, 1000);
        assert_eq!(r.steady_window, Some(100));
        let fill = simulate(
            &old,
            &new,
            trace.iter().copied(),
            &SimSettings {
                fill_from_previous: true,
                ..base
            },
        );
        assert_eq!(fill.steps[0].origin_fetches, 0);
        assert_eq!(fill.steps[0].peer_fills, moved);
        assert_eq!(
            fill.steps[0].misses, r.steps[0].misses,
            "the caches evolve the same"
        );
    }
}
