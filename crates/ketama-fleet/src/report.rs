//! What each router reports to its fleet: its cumulative cache and answer
//! counters by ring (the `ketama_cache_responses_total`,
//! `ketama_cache_response_bytes_total` and `ketama_ring_responses_total`
//! families, without the per-backend ones), written into its
//! registration every `[control] report_interval_ms`. A controller takes
//! rates from two reports of one router (the router's pid and `at_ms`
//! say whether the counters restarted).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Cache results in counter order.
pub const RESULTS: [&str; 7] = ["hit", "miss", "stale", "bypass", "peer", "other", "none"];

/// Results that cost the origin a request.
pub const ORIGIN_RESULTS: [&str; 3] = ["miss", "stale", "bypass"];

/// One report: when it was taken and the counters per ring (`only`,
/// `old`, `new`; rings without any count are left out).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// When the counters were read, milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// How often the router reports (`[control] report_interval_ms`).
    pub interval_ms: u64,
    /// Per ring version.
    pub rings: BTreeMap<String, RingCounts>,
    /// Routed requests' durations (backend chosen to the end of its
    /// response) since start, every backend: counts per bucket, not
    /// cumulated, bucket `i` up to 100 µs × 2^i, the last `+Inf`
    /// ([`LATENCY_BUCKETS`] of them; empty from routers before it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<u64>,
}

/// Buckets of [`Report::latency`], `+Inf` included.
pub const LATENCY_BUCKETS: usize = 20;

/// The `q` quantile (0 to 1) of latency bucket counts, in seconds,
/// interpolated within its bucket as Prometheus' `histogram_quantile`
/// does (the last finite bound for `+Inf`). `None` without observations.
pub fn quantile(counts: &[u64], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let last = counts.len().saturating_sub(1);
    let rank = q.clamp(0.0, 1.0) * total as f64;
    let mut below = 0u64;
    for (i, &n) in counts.iter().enumerate() {
        if n > 0 && (below + n) as f64 >= rank {
            let upper = 0.0001 * f64::powi(2.0, i.min(last.saturating_sub(1)) as i32);
            if i == last {
                return Some(upper);
            }
            let lower = if i == 0 { 0.0 } else { upper / 2.0 };
            return Some(lower + (upper - lower) * (rank - below as f64) / n as f64);
        }
        below += n;
    }
    None
}

/// One ring's counters since the router started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingCounts {
    /// Responses of keys that did not move, by cache result.
    pub unmoved: BTreeMap<String, u64>,
    /// Responses of keys that moved (the new ring chose another backend
    /// than the old ring's choice), by cache result.
    pub moved: BTreeMap<String, u64>,
    /// Body bytes of unmoved keys' responses, by cache result.
    pub bytes_unmoved: BTreeMap<String, u64>,
    /// Body bytes of moved keys' responses, by cache result.
    pub bytes_moved: BTreeMap<String, u64>,
    /// Routed requests by status class (`error`, `1xx` ... `5xx`).
    pub classes: BTreeMap<String, u64>,
}

impl RingCounts {
    /// Responses with `result`, moved and not.
    pub fn responses(&self, result: &str) -> u64 {
        self.unmoved.get(result).copied().unwrap_or(0)
            + self.moved.get(result).copied().unwrap_or(0)
    }

    /// Responses that went to the origin (`miss`, `stale`, `bypass`).
    pub fn origin_contacts(&self) -> u64 {
        ORIGIN_RESULTS.iter().map(|r| self.responses(r)).sum()
    }

    /// Routed requests answered with a class.
    pub fn class(&self, class: &str) -> u64 {
        self.classes.get(class).copied().unwrap_or(0)
    }
}
