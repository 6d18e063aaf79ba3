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
//!
//! Gauges that describe the running state (rings, discovery, control) are
//! not stored here: each scrape renders them from a [`Snapshot`] it takes
//! itself, so two scrapes at once never see each other's half-written
//! families.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use ketama::Version;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

pub mod cache;
mod gauges;
pub mod histogram;

use gauges::render_gauges;
pub use gauges::Snapshot;
use histogram::Histogram;

type Labels = Vec<(&'static str, String)>;

/// Response status classes a backend's requests are counted under.
const CLASSES: [&str; 6] = ["error", "1xx", "2xx", "3xx", "4xx", "5xx"];

/// One backend's counters: plain atomics, about 400 bytes a backend (the
/// `prometheus-client` families they replace took about 1.5 KB and a lock
/// per histogram observation). Rendered by [`Metrics::render`] with a
/// writer of its own: at 10,000 backends the per-backend families are
/// over 500,000 samples, which the generic encoder took over 100 ms to
/// write.
#[derive(Debug)]
pub struct BackendMetrics {
    /// The `backend` label's value, escaped for the exposition.
    label: Box<str>,
    by_class: [AtomicU64; 6],
    /// Backend chosen to the end of its response, failovers included.
    duration: Histogram,
    /// Each attempt that sent its head: the head sent to the last byte.
    upstream: Histogram,
    spills: AtomicU64,
    /// Responses by cache result, in `CacheResult::ALL` order.
    cache: [AtomicU64; ketama_config::cache_status::RESULTS],
}

impl BackendMetrics {
    fn new(server: &str) -> Self {
        let mut label = String::with_capacity(server.len());
        for c in server.chars() {
            match c {
                '\\' => label.push_str("\\\\"),
                '"' => label.push_str("\\\""),
                '\n' => label.push_str("\\n"),
                c => label.push(c),
            }
        }
        BackendMetrics {
            label: label.into(),
            by_class: Default::default(),
            duration: Histogram::default(),
            upstream: Histogram::default(),
            spills: AtomicU64::new(0),
            cache: Default::default(),
        }
    }

    /// Counts a response of this backend by its cache result.
    #[inline]
    pub fn cache(&self, result: ketama_config::cache_status::CacheResult) {
        self.cache[result.index()].fetch_add(1, Relaxed);
    }

    /// Responses by cache result, in `CacheResult::ALL` order.
    pub fn cache_results(&self) -> [u64; ketama_config::cache_status::RESULTS] {
        self.cache.each_ref().map(|c| c.load(Relaxed))
    }

    /// Counts a proxied request by the status the backend answered (0 for
    /// no response), and how long it took from choosing a backend to the
    /// end of the response. Three relaxed atomic adds.
    pub fn count(&self, status: u16, seconds: f64) {
        let class = (status / 100) as usize;
        self.by_class[if (1..=5).contains(&class) { class } else { 0 }].fetch_add(1, Relaxed);
        self.duration.observe(seconds);
    }

    /// Counts one attempt's time in this backend: from sending the request
    /// head to the last byte of its response (or its failure).
    pub fn upstream(&self, seconds: f64) {
        self.upstream.observe(seconds);
    }

    /// The request duration histogram's counts per bucket.
    pub fn duration_counts(&self) -> [u64; histogram::BUCKETS] {
        self.duration.counts()
    }

    /// Counts a request that found this backend full and went on to the
    /// next one (bounded loads).
    pub fn spilled(&self) {
        self.spills.fetch_add(1, Relaxed);
    }

    /// Requests that found this backend full.
    pub fn spills(&self) -> u64 {
        self.spills.load(Relaxed)
    }

    /// Requests by class, in the order `error`, `1xx`, ... `5xx`.
    pub fn classes(&self) -> [u64; 6] {
        self.by_class.each_ref().map(|c| c.load(Relaxed))
    }

    /// Requests counted under a class (`"2xx"`, `"error"`, ...).
    pub fn requests(&self, class: &str) -> u64 {
        CLASSES
            .iter()
            .position(|c| *c == class)
            .map_or(0, |i| self.by_class[i].load(Relaxed))
    }
}

/// Writes one family's `# HELP` and `# TYPE` lines: a counter's name takes
/// `_total` in the Prometheus text format, not in OpenMetrics.
pub(super) fn family_head(out: &mut String, name: &str, kind: &str, help: &str, openmetrics: bool) {
    let total = if kind == "counter" && !openmetrics {
        "_total"
    } else {
        ""
    };
    let _ = write!(
        out,
        "# HELP {name}{total} {help}.\n# TYPE {name}{total} {kind}\n"
    );
}

/// Writes `name{backend="label"[,extra]} value\n`.
fn sample(out: &mut String, name: &str, label: &str, extra: &str, value: u64) {
    out.push_str(name);
    out.push_str("{backend=\"");
    out.push_str(label);
    out.push('"');
    out.push_str(extra);
    out.push_str("} ");
    out.push_str(itoa::Buffer::new().format(value));
    out.push('\n');
}

/// The per-backend families (requests, durations, spills, health) of
/// every backend seen since start, then of the current backends' health.
fn render_backends(
    out: &mut String,
    all: &[Arc<BackendMetrics>],
    healthy: &[(&str, bool)],
    openmetrics: bool,
) {
    out.reserve(all.len() * 4800 + healthy.len() * 64);
    family_head(
        out,
        "ketama_requests",
        "counter",
        "Proxied requests by backend and response status class (error: no response)",
        openmetrics,
    );
    let extras = CLASSES.map(|c| format!(",status=\"{c}\""));
    for b in all {
        for (extra, n) in extras.iter().zip(&b.by_class) {
            sample(
                out,
                "ketama_requests_total",
                &b.label,
                extra,
                n.load(Relaxed),
            );
        }
    }
    family_head(
        out,
        "ketama_request_duration_seconds",
        "histogram",
        "Time from choosing a backend to the end of its response, by the backend that answered; it spans failovers (attempts at other backends before it)",
        openmetrics,
    );
    for b in all {
        b.duration
            .render(out, "ketama_request_duration_seconds", &b.label);
    }
    family_head(
        out,
        "ketama_upstream_duration_seconds",
        "histogram",
        "Time in the backend, one observation per attempt that sent its request head, by that attempt's backend: from sending the head to the last byte of the response (or the attempt's failure)",
        openmetrics,
    );
    for b in all {
        b.upstream
            .render(out, "ketama_upstream_duration_seconds", &b.label);
    }
    family_head(
        out,
        "ketama_spills",
        "counter",
        "Requests that found the backend at its load bound and went on in ring order (bounded loads), by the first full backend they passed (the key's own, when healthy)",
        openmetrics,
    );
    for b in all {
        sample(out, "ketama_spills_total", &b.label, "", b.spills());
    }
    family_head(
        out,
        "ketama_backend_cache_responses",
        "counter",
        "Responses by backend and the cache result their cache-status header gave (hit, miss, stale, bypass, peer, other, none)",
        openmetrics,
    );
    let results =
        ketama_config::cache_status::CacheResult::ALL.map(|r| format!(",result=\"{}\"", r.name()));
    for b in all {
        for (extra, n) in results.iter().zip(&b.cache) {
            sample(
                out,
                "ketama_backend_cache_responses_total",
                &b.label,
                extra,
                n.load(Relaxed),
            );
        }
    }
    family_head(
        out,
        "ketama_backend_healthy",
        "gauge",
        "1 if the backend passes its health checks",
        openmetrics,
    );
    for (label, up) in healthy {
        sample(out, "ketama_backend_healthy", label, "", *up as u64);
    }
}

/// Every counter of the router and the registry that exposes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Every backend's counters since start, by server.
    backends: Mutex<BTreeMap<Box<str>, Arc<BackendMetrics>>>,
    lookups: [Counter; 3],
    reloads: [Counter; 2],
    client_errors: Family<Labels, Counter>,
    upstream_errors: Family<Labels, Counter>,
    resolutions: Family<Labels, Counter>,
    control_rejected: Counter,
    previous_owner_hints: Counter,
    tls_failures: [Counter; 4],
    /// gRPC calls by `grpc-status`: 0 to 16, then any other code.
    grpc_calls: [Counter; 18],
    /// Client connections open now, counted by the connection guard.
    connections: AtomicUsize,
    /// Cache results and answers by ring.
    pub cache: cache::CacheCounters,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let client_errors = Family::<Labels, Counter>::default();
        registry.register(
            "ketama_client_errors",
            "Requests that failed on the client's side (bad framing, disconnect, timeout), by reason; no backend is blamed",
            client_errors.clone(),
        );
        let upstream_errors = Family::<Labels, Counter>::default();
        registry.register(
            "ketama_upstream_errors",
            "Exchanges with a backend broken after its response head arrived (the backend is not blamed: a client that stops reading stalls the backend too), by reason",
            upstream_errors.clone(),
        );
        let grpc_family = Family::<Labels, Counter>::default();
        registry.register(
            "ketama_grpc_calls",
            "gRPC calls (content-type application/grpc*) by the grpc-status they ended with: a backend's, or the router's own answer's (14 UNAVAILABLE, 4 DEADLINE_EXCEEDED); \"other\" for codes past 16",
            grpc_family.clone(),
        );
        let grpc_calls: [Counter; 18] = std::array::from_fn(|i| {
            let code = if i < 17 {
                i.to_string()
            } else {
                "other".into()
            };
            grpc_family.get_or_create_owned(&vec![("grpc_status", code)])
        });
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
        let resolutions = Family::<Labels, Counter>::default();
        registry.register(
            "ketama_discovery_resolutions",
            "DNS resolutions of each discovery source by result (ok, timeout, servfail, nxdomain, empty, error)",
            resolutions.clone(),
        );
        let control_rejected = Counter::default();
        registry.register(
            "ketama_control_rejected",
            "Values of the etcd config or rollout key this router refused",
            control_rejected.clone(),
        );
        let previous_owner_hints = Counter::default();
        registry.register(
            "ketama_previous_owner_hints",
            "Requests sent to a key's new owner with [migration] previous_owner_header naming its previous one",
            previous_owner_hints.clone(),
        );
        let tls_family = Family::<Labels, Counter>::default();
        registry.register(
            "ketama_tls_handshake_failures",
            "TLS handshakes with clients that failed, by reason (no_shared_version_or_cipher, bad_client_certificate, timeout, other)",
            tls_family.clone(),
        );
        let tls_failures = crate::tls::handshake::Failure::ALL
            .map(|f| tls_family.get_or_create_owned(&vec![("reason", f.name().to_string())]));
        Metrics {
            tls_failures,
            connections: AtomicUsize::new(0),
            registry,
            backends: Mutex::default(),
            lookups,
            reloads,
            client_errors,
            upstream_errors,
            grpc_calls,
            resolutions,
            control_rejected,
            previous_owner_hints,
            cache: cache::CacheCounters::default(),
        }
    }
}

impl Metrics {
    /// The counters of `server` (created on first use, kept for the life
    /// of the process).
    pub fn backend(&self, server: &str) -> Arc<BackendMetrics> {
        let mut all = self.backends.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = all.get(server) {
            return m.clone();
        }
        let m = Arc::new(BackendMetrics::new(server));
        all.insert(server.into(), m.clone());
        m
    }

    /// Every backend's request durations added up (what the router
    /// reports to its fleet). Cost: one pass over the backends.
    pub fn duration_counts(&self) -> [u64; histogram::BUCKETS] {
        let all = self.backends.lock().unwrap_or_else(|e| e.into_inner());
        let mut sum = [0u64; histogram::BUCKETS];
        for b in all.values() {
            for (s, n) in sum.iter_mut().zip(b.duration_counts()) {
                *s += n;
            }
        }
        sum
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

    /// Counts a request that told its backend the key's previous owner.
    pub fn previous_owner_hint(&self) {
        self.previous_owner_hints.inc();
    }

    /// Counts a value of an etcd key the router refused.
    pub fn control_rejected(&self) {
        self.control_rejected.inc();
    }

    /// Counts a request that failed on the client's side.
    pub fn client_error(&self, reason: &'static str) {
        self.client_errors
            .get_or_create(&vec![("reason", reason.to_string())])
            .inc();
    }

    /// Counts a gRPC call that ended with `grpc-status` `code`.
    pub fn grpc_call(&self, code: u8) {
        self.grpc_calls[usize::from(code).min(17)].inc();
    }

    /// gRPC calls by `grpc-status` (0 to 16, then any other code), for
    /// the admin page.
    pub fn grpc_calls(&self) -> [u64; 18] {
        std::array::from_fn(|i| self.grpc_calls[i].get())
    }

    /// Counts an exchange with a backend broken after its response head
    /// arrived (see [`crate::policy`]).
    pub fn upstream_error(&self, reason: &'static str) {
        self.upstream_errors
            .get_or_create(&vec![("reason", reason.to_string())])
            .inc();
    }

    /// Counts a client connection open until the guard it returns is
    /// dropped (however the connection ends, whichever task holds it
    /// then); also returns how many are open now, this one included.
    pub fn connection_opened(self: &Arc<Self>) -> (OpenConnection, usize) {
        let n = self.connections.fetch_add(1, Relaxed) + 1;
        (OpenConnection(self.clone()), n)
    }

    /// Client connections open now.
    pub fn open_connections(&self) -> usize {
        self.connections.load(Relaxed)
    }

    /// Counts a failed TLS handshake.
    pub fn tls_handshake_failed(&self, reason: crate::tls::handshake::Failure) {
        let i = crate::tls::handshake::Failure::ALL
            .iter()
            .position(|&f| f == reason)
            .unwrap_or(3);
        self.tls_failures[i].inc();
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

    /// Renders every metric, the state's gauges from `snap`, in
    /// OpenMetrics or (`openmetrics` false) the Prometheus text format.
    /// Reads only: any number of scrapes may render at once.
    pub fn render(&self, snap: &Snapshot<'_>, openmetrics: bool) -> String {
        let mut s = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut s, &self.registry);
        if !openmetrics {
            s = to_prometheus_text(&s);
        } else if s.ends_with("# EOF\n") {
            s.truncate(s.len() - "# EOF\n".len());
        }
        render_gauges(&mut s, snap, openmetrics);
        self.cache.render(&mut s, openmetrics);
        // Taken out of the lock first: a reload may need it meanwhile.
        let all: Vec<Arc<BackendMetrics>> = self
            .backends
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        let current: Vec<(&str, bool)> = snap
            .backends
            .iter()
            .map(|(m, up)| (&*m.label, *up))
            .collect();
        render_backends(&mut s, &all, &current, openmetrics);
        if openmetrics {
            s.push_str("# EOF\n");
        }
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

/// Resident set size from /proc (0 where unavailable), in the system's
/// page size (4 KiB on most x86-64 kernels, 16 or 64 KiB on some arm64
/// ones).
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page_size())
}

/// The system's memory page size, in bytes.
pub fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| rustix::param::page_size() as u64)
}

/// One client connection counted open (see [`Metrics::connection_opened`]).
#[derive(Debug)]
pub struct OpenConnection(Arc<Metrics>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Relaxed);
    }
}
