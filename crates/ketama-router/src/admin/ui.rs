//! The admin page: `GET /ui` serves one self-contained HTML page (script
//! and styles inline; it loads nothing from anywhere else and holds no
//! data), and `GET /ui/data` the JSON it refreshes itself from.
//!
//! `/ui/data` carries the backends as columns (one array per field, in
//! backend order) rather than one object per backend: at 10,000 backends
//! that is about 1 MB instead of 3. Latency quantiles are over a window
//! of 10 to 20 s, kept here (one snapshot of every backend's histogram,
//! 160 bytes a backend), so any number of open pages share one window.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::Admin;
use crate::metrics::cache::{hit_ratio, CacheCounters, RINGS};
use crate::metrics::histogram::{quantile, BUCKETS};
use crate::state::RoutingState;
use ketama_config::cache_status::CacheResult;

/// The page.
pub const PAGE: &str = include_str!("ui.html");

/// A window starts over once it is this old.
const WINDOW: Duration = Duration::from_secs(10);

/// The histogram snapshot the latency window starts from.
#[derive(Debug, Default)]
pub struct LatencyWindow(Mutex<Option<Snap>>);

#[derive(Debug)]
struct Snap {
    at: Instant,
    /// The state whose backends these are (a new state starts over).
    state: usize,
    counts: Vec<[u64; BUCKETS]>,
}

/// The backends, one array per field; see the module docs.
#[derive(Serialize)]
struct Columns<'a> {
    server: Vec<&'a str>,
    labels: Vec<String>,
    weight: Vec<u32>,
    /// Per ring (in `rings` order): percent of the keyspace, 4 decimals.
    share: Vec<Vec<f64>>,
    /// 0 healthy, 1 down (configured), 2 unhealthy (checks or failures).
    state: Vec<u8>,
    /// Seconds since it last changed between serving and not.
    since_s: Vec<Option<f64>>,
    /// The last active check: passed, milliseconds, seconds ago.
    check: Vec<Option<(bool, u32, f64)>>,
    /// Failed attempts since start.
    failed: Vec<u64>,
    /// Requests answered (any status), 5xx answers, and errors (no
    /// answer), since start: the page takes rates from two fetches.
    requests: Vec<u64>,
    r5xx: Vec<u64>,
    errors: Vec<u64>,
    /// Responses its cache said were hits, and that went to the origin
    /// (`miss`, `stale`, `bypass`), since start.
    cache_hits: Vec<u64>,
    cache_origin: Vec<u64>,
    /// Over the window, milliseconds.
    p50_ms: Vec<Option<f64>>,
    p99_ms: Vec<Option<f64>>,
    /// Bounded loads only.
    in_flight: Option<Vec<u32>>,
    spills: Option<Vec<u64>>,
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

impl LatencyWindow {
    /// Each backend's latency counts over the window, and the window's
    /// length; since start for a state first seen now.
    fn deltas(&self, state: &Arc<RoutingState>) -> (Vec<[u64; BUCKETS]>, Option<f64>) {
        let now: Vec<[u64; BUCKETS]> = state
            .backends
            .iter()
            .map(|b| b.metrics.duration_counts())
            .collect();
        let id = Arc::as_ptr(state) as usize;
        let mut snap = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = Snap {
            at: Instant::now(),
            state: id,
            counts: now.clone(),
        };
        let Some(s) = snap.as_ref().filter(|s| s.state == id) else {
            *snap = Some(fresh);
            return (now, None);
        };
        let age = s.at.elapsed();
        let deltas = now
            .iter()
            .zip(&s.counts)
            .map(|(n, o)| std::array::from_fn(|i| n[i].saturating_sub(o[i])))
            .collect();
        if age >= WINDOW {
            *snap = Some(fresh);
        }
        (deltas, Some(age.as_secs_f64()))
    }
}

/// The `GET /ui/data` document of `state` (its keyspace shares computed
/// here if they were not yet: `O(points)` once per state).
pub fn data(admin: &Admin, state: &Arc<RoutingState>) -> String {
    let plan = &state.plan;
    let versions = plan.table.versions();
    let shares = state.keyspace_shares();
    let (latency, window_s) = admin.latency.deltas(state);
    let n = state.backends.len();
    let mut c = Columns {
        server: Vec::with_capacity(n),
        labels: Vec::with_capacity(n),
        weight: Vec::with_capacity(n),
        share: shares
            .iter()
            .map(|keys| {
                keys.iter()
                    .map(|&k| round(k as f64 / ketama::analysis::KEYSPACE as f64 * 100.0, 4))
                    .collect()
            })
            .collect(),
        state: Vec::with_capacity(n),
        since_s: Vec::with_capacity(n),
        check: Vec::with_capacity(n),
        failed: Vec::with_capacity(n),
        requests: Vec::with_capacity(n),
        r5xx: Vec::with_capacity(n),
        errors: Vec::with_capacity(n),
        cache_hits: Vec::with_capacity(n),
        cache_origin: Vec::with_capacity(n),
        p50_ms: Vec::with_capacity(n),
        p99_ms: Vec::with_capacity(n),
        in_flight: state.balance.as_ref().map(|_| Vec::with_capacity(n)),
        spills: state.balance.as_ref().map(|_| Vec::with_capacity(n)),
    };
    for (i, (b, cfg)) in state.backends.iter().zip(&plan.backends).enumerate() {
        let h = b.health.view();
        c.server.push(&b.server);
        c.labels.push(cfg.labels.join(","));
        c.weight.push(cfg.weight);
        c.state.push(if cfg.down {
            1
        } else if h.healthy {
            0
        } else {
            2
        });
        c.since_s.push(h.since_ms.map(|ms| ms as f64 / 1000.0));
        c.check.push(
            h.last_check
                .map(|(ok, ms, ago)| (ok, ms, round(ago as f64 / 1000.0, 1))),
        );
        c.failed.push(h.failed_attempts);
        let classes = b.metrics.classes();
        c.requests.push(classes[1..].iter().sum());
        c.r5xx.push(classes[5]);
        c.errors.push(classes[0]);
        let cache = b.metrics.cache_results();
        c.cache_hits.push(cache[CacheResult::Hit.index()]);
        c.cache_origin.push(
            CacheResult::ALL
                .iter()
                .filter(|r| r.contacted_origin())
                .map(|r| cache[r.index()])
                .sum(),
        );
        let ms = |q| quantile(&latency[i], q).map(|s| round(s * 1000.0, 3));
        c.p50_ms.push(ms(0.5));
        c.p99_ms.push(ms(0.99));
        if let (Some(bal), Some(f), Some(s)) = (&state.balance, &mut c.in_flight, &mut c.spills) {
            f.push(bal.loads.load(i));
            s.push(b.metrics.spills());
        }
    }
    let doc = json!({
        "now_ms": crate::health::now_ms(),
        "rings": versions.iter().map(|v| v.name()).collect::<Vec<_>>(),
        "window_s": window_s,
        "cache_history": cache_history(&admin.metrics.cache),
        "status": super::status_of(admin, state, false),
    });
    // The columns are written by serde directly (no Value per cell).
    let mut out = doc.to_string();
    out.pop(); // the closing brace
    out.push_str(",\"backends\":");
    out.push_str(&serde_json::to_string(&c).unwrap_or_else(|_| "{}".into()));
    out.push_str("}\n");
    out
}

/// The hit ratio per ring in each interval between two kept totals (every
/// 5 s, the last 10 minutes), oldest first: `{"ages_s": [...], RING:
/// [ratio or null, ...]}` for the rings with any response.
fn cache_history(c: &CacheCounters) -> serde_json::Value {
    let kept = c.history(Instant::now());
    let mut doc = serde_json::Map::new();
    doc.insert(
        "ages_s".into(),
        json!(kept
            .iter()
            .skip(1)
            .map(|(age, _)| round(age.as_secs_f64(), 1))
            .collect::<Vec<_>>()),
    );
    for v in RINGS {
        let ratios: Vec<Option<f64>> = kept
            .windows(2)
            .map(|w| hit_ratio(&w[1].1.since(&w[0].1).ring(v)).map(|r| round(r, 4)))
            .collect();
        if ratios.iter().any(Option::is_some) {
            doc.insert(v.name().into(), json!(ratios));
        }
    }
    doc.into()
}
