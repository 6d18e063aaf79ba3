//! Counters and the `GET /metrics` exposition, with the Prometheus
//! project's own Rust client (`prometheus-client`). It writes OpenMetrics,
//! served to scrapers that ask for it (`Accept:
//! application/openmetrics-text`); others get the same families in the
//! Prometheus text format 0.0.4 ([`to_prometheus_text`]), where a
//! counter's `# TYPE` names its `_total` samples.
//!
//! Counters live for the whole process (a reload never resets one). The
//! request path touches only handles taken when a backend's state is
//! built: an atomic add per counter and one histogram observation, no
//! lookup by label and no allocation.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use ketama::Version;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::app::App;

type Labels = Vec<(&'static str, String)>;

/// Response status classes a backend's requests are counted under.
const CLASSES: [&str; 6] = ["error", "1xx", "2xx", "3xx", "4xx", "5xx"];

/// One backend's counters (handles into the registry's families).
#[derive(Debug, Clone)]
pub struct BackendMetrics {
    by_class: [Counter; 6],
    duration: Histogram,
    spills: Counter,
}

impl BackendMetrics {
    /// Counts a proxied request by the status the backend answered (0 for
    /// no response), and how long it took.
    pub fn count(&self, status: u16, seconds: f64) {
        let class = (status / 100) as usize;
        self.by_class[if (1..=5).contains(&class) { class } else { 0 }].inc();
        self.duration.observe(seconds);
    }

    /// Counts a request that found this backend full and went on to the
    /// next one (bounded loads).
    pub fn spilled(&self) {
        self.spills.inc();
    }

    /// Requests that found this backend full.
    pub fn spills(&self) -> u64 {
        self.spills.get()
    }

    /// Requests counted under a class (`"2xx"`, `"error"`, ...).
    pub fn requests(&self, class: &str) -> u64 {
        CLASSES
            .iter()
            .position(|c| *c == class)
            .map_or(0, |i| self.by_class[i].get())
    }
}

/// Every counter of the router and the registry that exposes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    durations: Family<Labels, Histogram>,
    spills: Family<Labels, Counter>,
    lookups: [Counter; 3],
    reloads: [Counter; 2],
    client_errors: Family<Labels, Counter>,
    rollout_bp: Gauge,
    ring_points: Family<Labels, Gauge>,
    ring_bytes: Family<Labels, Gauge>,
    build_seconds: Gauge<f64, AtomicU64>,
    healthy: Family<Labels, Gauge>,
    resident: Gauge,
    resolutions: Family<Labels, Counter>,
    discovered: Family<Labels, Gauge>,
    moved_share: Gauge<f64, AtomicU64>,
}

fn histogram() -> Histogram {
    // 100 us to about 26 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 19))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<Labels, Counter>::default();
        registry.register(
            "ketama_requests",
            "Proxied requests by backend and response status class (error: no response)",
            requests.clone(),
        );
        let durations =
            Family::<Labels, Histogram>::new_with_constructor(histogram as fn() -> Histogram);
        registry.register(
            "ketama_request_duration_seconds",
            "Time from choosing a backend to the end of its response, by backend",
            durations.clone(),
        );
        let spills = Family::<Labels, Counter>::default();
        registry.register(
            "ketama_spills",
            "Requests that found the backend at its load bound and went on in ring order (bounded loads), by the first full backend they passed (the key's own, when healthy)",
            spills.clone(),
        );
        let client_errors = Family::<Labels, Counter>::default();
        registry.register(
            "ketama_client_errors",
            "Requests that failed on the client's side (bad framing, disconnect, timeout), by reason; no backend is blamed",
            client_errors.clone(),
        );
        let lookup_family = Family::<Labels, Counter>::default();
        registry.register(
            "ketama_lookups",
            "Routing decisions by ring version (only: no migration)",
            lookup_family.clone(),
        );
        let lookups = [Version::Only, Version::Old, Version::New]
            .map(|v| lookup_family.get_or_create_owned(&vec![("ring", v.name().to_string())]));
        let reload_family = Family::<Labels, Counter>::default();
        registry.register(
            "ketama_reloads",
            "Config reloads by result",
            reload_family.clone(),
        );
        let reloads = ["ok", "rejected"]
            .map(|r| reload_family.get_or_create_owned(&vec![("result", r.to_string())]));
        let rollout_bp = Gauge::default();
        registry.register(
            "ketama_rollout_bp",
            "Share of keys routed by the new ring, in basis points (this router's scope)",
            rollout_bp.clone(),
        );
        let ring_points = Family::<Labels, Gauge>::default();
        registry.register(
            "ketama_ring_points",
            "Points on each ring",
            ring_points.clone(),
        );
        let ring_bytes = Family::<Labels, Gauge>::default();
        registry.register(
            "ketama_ring_bytes",
            "Heap bytes of each ring's points",
            ring_bytes.clone(),
        );
        let build_seconds = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "ketama_ring_build_seconds",
            "Time the current ring(s) took to build",
            build_seconds.clone(),
        );
        let healthy = Family::<Labels, Gauge>::default();
        registry.register(
            "ketama_backend_healthy",
            "1 if the backend passes its health checks",
            healthy.clone(),
        );
        let resident = Gauge::default();
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory of the router",
            resident.clone(),
        );
        let resolutions = Family::<Labels, Counter>::default();
        registry.register(
            "ketama_discovery_resolutions",
            "DNS resolutions of each discovery source by result (ok, timeout, servfail, nxdomain, empty, error)",
            resolutions.clone(),
        );
        let discovered = Family::<Labels, Gauge>::default();
        registry.register(
            "ketama_discovery_backends",
            "Backends each discovery source contributes now",
            discovered.clone(),
        );
        let moved_share = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "ketama_ring_moved_share",
            "Share of the keyspace whose backend the last discovered change moved",
            moved_share.clone(),
        );
        Metrics {
            registry,
            requests,
            durations,
            spills,
            lookups,
            reloads,
            client_errors,
            rollout_bp,
            ring_points,
            ring_bytes,
            build_seconds,
            healthy,
            resident,
            resolutions,
            discovered,
            moved_share,
        }
    }
}

impl Metrics {
    /// The counters of `server` (created on first use, kept for the life
    /// of the process).
    pub fn backend(&self, server: &str) -> Arc<BackendMetrics> {
        let by_class = CLASSES.map(|c| {
            self.requests.get_or_create_owned(&vec![
                ("backend", server.to_string()),
                ("status", c.to_string()),
            ])
        });
        let duration = self
            .durations
            .get_or_create_owned(&vec![("backend", server.to_string())]);
        let spills = self
            .spills
            .get_or_create_owned(&vec![("backend", server.to_string())]);
        Arc::new(BackendMetrics {
            by_class,
            duration,
            spills,
        })
    }

    /// Counts a routing decision made by a ring version.
    #[inline]
    pub fn lookup(&self, v: Version) {
        self.lookups[v as usize].inc();
    }

    /// Decisions made so far by a ring version.
    pub fn lookups(&self, v: Version) -> u64 {
        self.lookups[v as usize].get()
    }

    /// Counts a reload, done or rejected.
    pub fn reloaded(&self, ok: bool) {
        self.reloads[!ok as usize].inc();
    }

    /// Reloads (done, rejected) so far.
    pub fn reloads(&self) -> (u64, u64) {
        (self.reloads[0].get(), self.reloads[1].get())
    }

    /// Counts a request that failed on the client's side.
    pub fn client_error(&self, reason: &'static str) {
        self.client_errors
            .get_or_create(&vec![("reason", reason.to_string())])
            .inc();
    }

    /// Counts `n` resolutions of a discovery source with a result.
    pub fn discovery_resolved(&self, source: &str, result: &'static str, n: u64) {
        self.resolutions
            .get_or_create(&vec![
                ("source", source.to_string()),
                ("result", result.to_string()),
            ])
            .inc_by(n);
    }

    /// Renders every metric, gauges read from the current state.
    pub fn render(&self, app: &App) -> String {
        let state = app.state();
        let table = &state.plan.table;
        let bp = table
            .migration()
            .map_or(0, |m| m.rollout().bp_for(state.plan.scope.as_deref()));
        self.rollout_bp.set(bp as i64);
        self.ring_points.clear();
        self.ring_bytes.clear();
        for &v in table.versions() {
            let r = table.ring(v);
            let label = vec![("ring", v.name().to_string())];
            self.ring_points
                .get_or_create(&label)
                .set(r.point_count() as i64);
            self.ring_bytes
                .get_or_create(&label)
                .set(r.points_heap_bytes() as i64);
        }
        self.build_seconds.set(state.plan.build_ms / 1e3);
        self.healthy.clear();
        for b in &state.backends {
            self.healthy
                .get_or_create(&vec![("backend", b.server.clone())])
                .set(b.health.is_healthy() as i64);
        }
        self.resident.set(resident_bytes() as i64);
        self.discovered.clear();
        for (source, n) in app.discovery.backend_counts(&state.validated) {
            self.discovered
                .get_or_create(&vec![("source", source)])
                .set(n as i64);
        }
        self.moved_share.set(app.discovery.moved_share());
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut s, &self.registry);
        s
    }
}

/// The Prometheus text format (0.0.4) of an OpenMetrics exposition: the
/// same samples; a counter family's `# HELP`/`# TYPE` name its `_total`
/// samples (text-format parsers match names exactly); no `# UNIT` or
/// `# EOF`.
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            // Held until the TYPE line says whether the name takes _total.
            help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let name = if kind == "counter" && !name.ends_with("_total") {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            if let Some(h) = help.take() {
                let text = h.split_once(' ').map_or("", |(_, t)| t);
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Resident set size from /proc (0 where unavailable).
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}
