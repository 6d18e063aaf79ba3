//! What the backends' caches said, by ring: every proxied response's
//! cache result ([`ketama_config::cache_status`]) counted by the ring
//! version that routed it (`only`, `old`, `new`), whether its key moved
//! (the new ring chose a backend other than the old ring's choice), and
//! its result; its body bytes the same way; and every routed request by
//! ring and status class (`error`: the router's own failure, no response
//! from a backend).
//!
//! Plain atomics in fixed arrays, indexed by enum (3 rings x 2 x 6
//! results, twice, and 3 x 6 classes: about 1 KB in all): counting is
//! three relaxed adds, no lookup and no allocation. A background tick
//! ([`CacheCounters::tick`], every [`TICK`]) keeps totals of the last
//! [`KEPT`] for `/status`'s 60-second window and the page's chart.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ketama::Version;
use ketama_config::cache_status::{CacheResult, RESULTS as R};

use super::family_head;

/// Ring versions in counter order (`Version as usize`).
pub const RINGS: [Version; 3] = [Version::Only, Version::Old, Version::New];
/// Status classes in counter order (`error`: no response from a backend).
pub const CLASSES: [&str; 6] = ["error", "1xx", "2xx", "3xx", "4xx", "5xx"];
/// How often totals are kept.
pub const TICK: Duration = Duration::from_secs(5);
/// How long totals are kept (the page charts the last ten minutes).
pub const KEPT: Duration = Duration::from_secs(600);

type Grid = [[[AtomicU64; R]; 2]; 3];

/// The cache counters; see the [module docs](self).
#[derive(Debug, Default)]
pub struct CacheCounters {
    responses: Grid,
    bytes: Grid,
    classes: [[AtomicU64; 6]; 3],
    kept: Mutex<VecDeque<(Instant, Totals)>>,
}

/// Response counts by ring, moved and result, at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals(pub [[[u64; R]; 2]; 3]);

impl Totals {
    /// `self - earlier`, per cell.
    pub fn since(&self, earlier: &Totals) -> Totals {
        let mut out = *self;
        for (r, ring) in out.0.iter_mut().enumerate() {
            for (m, moved) in ring.iter_mut().enumerate() {
                for (i, n) in moved.iter_mut().enumerate() {
                    *n = n.saturating_sub(earlier.0[r][m][i]);
                }
            }
        }
        out
    }

    /// One ring's counts per result (moved and not, together), in
    /// [`CacheResult::ALL`] order.
    pub fn ring(&self, v: Version) -> [u64; R] {
        let r = &self.0[v as usize];
        std::array::from_fn(|i| r[0][i] + r[1][i])
    }

    /// One ring's counts per result for moved (`true`) or unmoved keys.
    pub fn ring_moved(&self, v: Version, moved: bool) -> [u64; R] {
        self.0[v as usize][moved as usize]
    }
}

/// Hits over the responses that said hit or went to the origin (`none`
/// and `other` say nothing of the cache); `None` without any.
pub fn hit_ratio(counts: &[u64; R]) -> Option<f64> {
    let hits = counts[CacheResult::Hit.index()];
    let origin: u64 = CacheResult::ALL
        .iter()
        .filter(|r| r.contacted_origin())
        .map(|r| counts[r.index()])
        .sum();
    (hits + origin > 0).then(|| hits as f64 / (hits + origin) as f64)
}

impl CacheCounters {
    /// Counts one response a backend sent: its ring, whether its key
    /// moved, its cache result and its body bytes sent to the client.
    #[inline]
    pub fn response(&self, ring: Version, moved: bool, result: CacheResult, bytes: u64) {
        let (r, m, i) = (ring as usize, moved as usize, result.index());
        self.responses[r][m][i].fetch_add(1, Relaxed);
        self.bytes[r][m][i].fetch_add(bytes, Relaxed);
    }

    /// Counts a routed request by its ring and the status class of its
    /// answer (`None`: the router's own failure, no backend answered).
    #[inline]
    pub fn class(&self, ring: Version, status: Option<u16>) {
        let class = status.map_or(0, |s| match s / 100 {
            c @ 1..=5 => c as usize,
            _ => 0,
        });
        self.classes[ring as usize][class].fetch_add(1, Relaxed);
    }

    /// The response counts now.
    pub fn totals(&self) -> Totals {
        Totals(self.responses.each_ref().map(|ring| {
            ring.each_ref()
                .map(|moved| moved.each_ref().map(|n| n.load(Relaxed)))
        }))
    }

    /// Routed requests by ring and class, in [`CLASSES`] order.
    pub fn classes(&self, ring: Version) -> [u64; 6] {
        self.classes[ring as usize]
            .each_ref()
            .map(|n| n.load(Relaxed))
    }

    /// Keeps the totals of now (called every [`TICK`]), dropping those
    /// older than [`KEPT`].
    pub fn tick(&self, now: Instant) {
        let totals = self.totals();
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        while kept
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > KEPT + TICK)
        {
            kept.pop_front();
        }
        kept.push_back((now, totals));
    }

    /// The counts of about the last `window` (from the oldest kept totals
    /// within it), and how long that really was; the counts since start
    /// and zero seconds when nothing was kept yet.
    pub fn over(&self, window: Duration, now: Instant) -> (Totals, Duration) {
        let current = self.totals();
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        match kept
            .iter()
            .find(|(t, _)| now.duration_since(*t) <= window + TICK / 2)
        {
            Some((t, then)) => (current.since(then), now.duration_since(*t)),
            None => (current, Duration::ZERO),
        }
    }

    /// The kept totals, oldest first, with their age at `now`.
    pub fn history(&self, now: Instant) -> Vec<(Duration, Totals)> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter()
            .map(|(t, v)| (now.duration_since(*t), *v))
            .collect()
    }

    /// Writes the families `ketama_cache_responses_total`,
    /// `ketama_cache_response_bytes_total` and
    /// `ketama_ring_responses_total`.
    pub fn render(&self, out: &mut String, openmetrics: bool) {
        for (name, grid, help) in [
            ("ketama_cache_responses", &self.responses, "Responses from backends by the ring version that routed them, whether their key moved (the new ring chose another backend than the old ring's choice), and the cache result their cache-status header gave (hit, miss, stale, bypass, peer, other, none)"),
            ("ketama_cache_response_bytes", &self.bytes, "Response body bytes sent to clients, by ring, moved and cache result, as ketama_cache_responses_total"),
        ] {
            family_head(out, name, "counter", help, openmetrics);
            for (r, ring) in grid.iter().enumerate() {
                for (m, moved) in ring.iter().enumerate() {
                    for (i, n) in moved.iter().enumerate() {
                        let _ = writeln!(
                            out,
                            "{name}_total{{ring=\"{}\",moved=\"{}\",result=\"{}\"}} {}",
                            RINGS[r].name(),
                            m == 1,
                            CacheResult::ALL[i].name(),
                            n.load(Relaxed)
                        );
                    }
                }
            }
        }
        family_head(
            out,
            "ketama_ring_responses",
            "counter",
            "Routed requests by ring version and the status class of their answer (error: the router's own failure, no backend answered)",
            openmetrics,
        );
        for (r, ring) in self.classes.iter().enumerate() {
            for (c, n) in ring.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "ketama_ring_responses_total{{ring=\"{}\",class=\"{}\"}} {}",
                    RINGS[r].name(),
                    CLASSES[c],
                    n.load(Relaxed)
                );
            }
        }
    }
}

/// The counters as a router reports them to its fleet (its registration's
/// `report`): per ring with any count, unmoved and moved responses and
/// bytes by result, and answers by class.
pub fn report(c: &CacheCounters, interval: Duration) -> ketama_fleet::Report {
    let named = |names: &[&str], n: &[u64]| {
        names
            .iter()
            .zip(n)
            .map(|(k, v)| (k.to_string(), *v))
            .collect()
    };
    let results = CacheResult::ALL.map(CacheResult::name);
    let load = |grid: &Grid, r: usize, m: usize| grid[r][m].each_ref().map(|n| n.load(Relaxed));
    let mut rings = std::collections::BTreeMap::new();
    for (r, v) in RINGS.iter().enumerate() {
        let classes = c.classes(*v);
        let counts = [load(&c.responses, r, 0), load(&c.responses, r, 1)];
        if classes
            .iter()
            .chain(counts.iter().flatten())
            .all(|&n| n == 0)
        {
            continue;
        }
        rings.insert(
            v.name().to_string(),
            ketama_fleet::RingCounts {
                unmoved: named(&results, &counts[0]),
                moved: named(&results, &counts[1]),
                bytes_unmoved: named(&results, &load(&c.bytes, r, 0)),
                bytes_moved: named(&results, &load(&c.bytes, r, 1)),
                classes: named(&CLASSES, &classes),
            },
        );
    }
    ketama_fleet::Report {
        at_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        interval_ms: interval.as_millis() as u64,
        rings,
        latency: Vec::new(),
    }
}

/// Keeps the cache totals every [`TICK`] (see [`CacheCounters::tick`]).
pub struct CacheTicker {
    /// The counters whose totals are kept.
    pub metrics: std::sync::Arc<super::Metrics>,
}

#[async_trait::async_trait]
impl crate::service::Background for CacheTicker {
    async fn start(&self, mut shutdown: crate::service::ShutdownWatch) {
        let mut every = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                _ = every.tick() => self.metrics.cache.tick(Instant::now()),
                _ = shutdown.changed() => return,
            }
        }
    }
}

/// `/status`'s `cache_status`: per ring (those with counts, and the
/// current state's), each result's count, the hit ratio and the same for
/// moved keys, over the last 60 s (`window_s` says how long that really
/// was) and since start.
pub fn status_json(c: &CacheCounters, header: &str, current: &[Version]) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    let now = Instant::now();
    let (window, took) = c.over(Duration::from_secs(60), now);
    let all = c.totals();
    let counts = |n: &[u64; R]| {
        let mut m: Map<String, Value> = CacheResult::ALL
            .iter()
            .map(|r| (r.name().to_string(), json!(n[r.index()])))
            .collect();
        m.insert("hit_ratio".into(), json!(hit_ratio(n)));
        Value::Object(m)
    };
    let part = |t: &Totals, v: Version| json!({"all": counts(&t.ring(v)), "moved": counts(&t.ring_moved(v, true))});
    let mut rings = Map::new();
    for v in RINGS {
        let any = all.ring(v).iter().any(|&n| n > 0) || c.classes(v).iter().any(|&n| n > 0);
        if !any && !current.contains(&v) {
            continue;
        }
        let mut since = part(&all, v);
        since["classes"] = CLASSES
            .iter()
            .zip(c.classes(v))
            .map(|(k, n)| (k.to_string(), json!(n)))
            .collect::<Map<String, Value>>()
            .into();
        rings.insert(
            v.name().to_string(),
            json!({"last_60s": part(&window, v), "since_start": since}),
        );
    }
    json!({
        "header": header,
        "window_s": took.as_secs_f64(),
        "rings": rings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_subtract_the_oldest_totals_within_them() {
        let c = CacheCounters::default();
        let t0 = Instant::now();
        c.response(Version::New, true, CacheResult::Miss, 10);
        c.tick(t0);
        c.response(Version::New, true, CacheResult::Hit, 5);
        c.response(Version::Old, false, CacheResult::Hit, 5);
        c.tick(t0 + TICK);
        c.response(Version::New, false, CacheResult::Hit, 5);
        let (w, took) = c.over(Duration::from_secs(5), t0 + TICK * 2);
        assert_eq!(took, TICK);
        assert_eq!(w.ring(Version::New), [1, 0, 0, 0, 0, 0, 0]);
        let (w, took) = c.over(Duration::from_secs(60), t0 + TICK * 2);
        assert_eq!(took, TICK * 2);
        assert_eq!(w.ring(Version::New), [2, 0, 0, 0, 0, 0, 0]);
        assert_eq!(w.ring_moved(Version::New, true), [1, 0, 0, 0, 0, 0, 0]);
        let all = c.totals();
        assert_eq!(all.ring(Version::New), [2, 1, 0, 0, 0, 0, 0]);
        assert_eq!(hit_ratio(&all.ring(Version::New)), Some(2.0 / 3.0));
        assert_eq!(hit_ratio(&all.ring(Version::Only)), None);
        let mut text = String::new();
        c.render(&mut text, false);
        assert!(text.contains(
            "ketama_cache_response_bytes_total{ring=\"new\",moved=\"true\",result=\"miss\"} 10\n"
        ));
    }
}
