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
//! Cost: per request one FNV-1a of the key, one or two ring lookups and a
//! hash-map probe; about 24 bytes per cached object.

use std::collections::HashMap;

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

/// A least-recently-used cache of key hashes, sized in units.
struct Lru {
    map: HashMap<u64, u32>,
    key: Vec<u64>,
    size: Vec<u64>,
    prev: Vec<u32>,
    next: Vec<u32>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    used: u64,
    cap: u64,
}

const NIL: u32 = u32::MAX;

impl Lru {
    fn new(cap: u64) -> Lru {
        Lru {
            map: HashMap::new(),
            key: Vec::new(),
            size: Vec::new(),
            prev: Vec::new(),
            next: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            used: 0,
            cap,
        }
    }

    fn unlink(&mut self, i: u32) {
        let (p, n) = (self.prev[i as usize], self.next[i as usize]);
        if p == NIL {
            self.head = n
        } else {
            self.next[p as usize] = n
        }
        if n == NIL {
            self.tail = p
        } else {
            self.prev[n as usize] = p
        }
    }

    fn push_front(&mut self, i: u32) {
        self.prev[i as usize] = NIL;
        self.next[i as usize] = self.head;
        if self.head != NIL {
            self.prev[self.head as usize] = i;
        }
        self.head = i;
        if self.tail == NIL {
            self.tail = i;
        }
    }

    /// Whether `k` is cached (promoted when it is).
    fn get(&mut self, k: u64) -> bool {
        match self.map.get(&k) {
            Some(&i) => {
                self.unlink(i);
                self.push_front(i);
                true
            }
            None => false,
        }
    }

    fn peek(&self, k: u64) -> bool {
        self.map.contains_key(&k)
    }

    fn insert(&mut self, k: u64, size: u64) {
        if size > self.cap {
            return;
        }
        while self.used + size > self.cap && self.tail != NIL {
            let t = self.tail;
            self.unlink(t);
            self.map.remove(&self.key[t as usize]);
            self.used -= self.size[t as usize];
            self.free.push(t);
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.key[i as usize] = k;
                self.size[i as usize] = size;
                i
            }
            None => {
                self.key.push(k);
                self.size.push(size);
                self.prev.push(NIL);
                self.next.push(NIL);
                (self.key.len() - 1) as u32
            }
        };
        self.push_front(i);
        self.map.insert(k, i);
        self.used += size;
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
pub fn simulate<'k>(
    old: &Ring,
    new: &Ring,
    trace: impl IntoIterator<Item = &'k [u8]>,
    s: &SimSettings,
) -> SimReport {
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
    let weights: Vec<u64> = {
        let mut w = vec![0u64; names.len()];
        for (i, n) in old.nodes().iter().enumerate() {
            w[old_ix[i]] = n.weight() as u64;
        }
        w
    };
    let mean = (weights.iter().sum::<u64>() as f64 / weights.len().max(1) as f64).max(1e-9);
    let mut caches: Vec<Lru> = weights
        .iter()
        .map(|&w| {
            Lru::new(match s.cache {
                CacheSize::Each(n) => n,
                CacheSize::ByWeight(n) => (n as f64 * w as f64 / mean).round() as u64,
            })
        })
        .collect();
    let size = s.object_size.unwrap_or(1);
    let mut report = SimReport {
        steps: s
            .steps_bp
            .iter()
            .map(|&bp| StepStats {
                bp,
                ..StepStats::default()
            })
            .collect(),
        servers: names
            .iter()
            .map(|n| ServerStats {
                server: n.clone(),
                ..ServerStats::default()
            })
            .collect(),
        ..SimReport::default()
    };
    let owner = |r: &Ring, ix: &[usize], key: &[u8]| -> Option<usize> {
        r.node_index_for_hash(r.hash_key(key)).map(|i| ix[i])
    };
    let mut window = Window::default();
    let mut warm_window = 0u64;
    for (n, key) in trace.into_iter().enumerate() {
        let n = n as u64;
        let id = mix64(fnv1a64(key));
        if n < s.warmup {
            if let Some(o) = owner(old, &old_ix, key) {
                if !caches[o].get(id) {
                    caches[o].insert(id, size);
                    warm_window += 1;
                }
            }
            if s.window > 0 && (n + 1) % s.window == 0 {
                report.steady_window = Some(warm_window);
                warm_window = 0;
            }
            continue;
        }
        let counted = n - s.warmup;
        let step = ((counted / s.requests_per_step.max(1)) as usize)
            .min(report.steps.len().saturating_sub(1));
        let Some(st) = report.steps.get_mut(step) else {
            break;
        };
        let on_new = (crate::migration::rollout_bucket(key) as u32) < st.bp;
        let (ring, ix) = if on_new {
            (new, &new_ix)
        } else {
            (old, &old_ix)
        };
        let Some(server) = owner(ring, ix, key) else {
            continue;
        };
        st.requests += 1;
        window.requests += 1;
        window.step = step;
        if caches[server].get(id) {
            st.hits[on_new as usize] += 1;
            window.hits[on_new as usize] += 1;
            report.servers[server].hits += 1;
        } else {
            st.misses[on_new as usize] += 1;
            window.misses[on_new as usize] += 1;
            report.servers[server].misses += 1;
            let peer = s.fill_from_previous
                && on_new
                && owner(old, &old_ix, key).is_some_and(|p| p != server && caches[p].peek(id));
            if peer {
                st.peer_fills += 1;
                window.peer_fills += 1;
            } else {
                st.origin_fetches += 1;
                st.origin_bytes += s.object_size.unwrap_or(0);
                window.origin_fetches += 1;
                window.origin_bytes += s.object_size.unwrap_or(0);
            }
            caches[server].insert(id, size);
        }
        if s.window > 0 && window.requests == s.window {
            report.windows.push(std::mem::take(&mut window));
        }
    }
    if window.requests > 0 {
        report.windows.push(window);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Node, Ring};

    #[test]
    fn lru_evicts_the_least_recently_used_and_peek_does_not_promote() {
        let mut c = Lru::new(2);
        c.insert(1, 1);
        c.insert(2, 1);
        assert!(c.get(1));
        assert!(c.peek(2));
        c.insert(3, 1); // evicts 2: 1 was used last, a peek is no use
        assert!(!c.peek(2) && c.peek(1) && c.peek(3));
    }

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
