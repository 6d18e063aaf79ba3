//! What the guards read: one router's counters over an interval
//! ([`Delta`], the difference of two of its reports) and what one check
//! measured over a stage's routers ([`Figures`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::report::RingCounts;
use crate::Registration;

/// What one check measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Routers of the stage's scopes with two reports to compare.
    pub routers: usize,
    /// Their routed requests over the interval.
    pub requests: u64,
    /// Their hit ratio (`None`: no hit and no origin contact).
    pub hit_ratio: Option<f64>,
    /// The same scopes' hit ratio over the baseline window.
    pub baseline_hit_ratio: Option<f64>,
    /// Moved keys' hit ratio (new ring).
    pub moved_hit_ratio: Option<f64>,
    /// `5xx` and router errors over the new ring's answers.
    pub error_ratio: Option<f64>,
    /// Origin contacts per second over every reporting router.
    pub origin_rps: f64,
    /// The scope's hit ratio per ring version (`old`, `new`, `only`),
    /// for the rings that answered with a cache result.
    #[serde(default)]
    pub ring_hit_ratio: BTreeMap<String, f64>,
    /// Unmoved keys' hit ratio on the new ring (what `compare =
    /// "concurrent"` judges moved keys against).
    #[serde(default)]
    pub unmoved_hit_ratio: Option<f64>,
    /// `5xx` and router errors over the old ring's answers.
    #[serde(default)]
    pub old_error_ratio: Option<f64>,
    /// The scopes' request durations over the interval, per latency
    /// bucket (what the `latency_*` figures are read from).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<u64>,
    /// Each `[[guards.metric]]`'s value, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
}

fn minus(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    a.iter()
        .map(|(k, v)| (k.clone(), v.saturating_sub(b.get(k).copied().unwrap_or(0))))
        .collect()
}

/// One router's counters over an interval: per ring, and the interval's
/// length in seconds.
#[derive(Clone, Debug)]
pub struct Delta {
    /// Its scope (`""`: none).
    pub scope: String,
    /// Per ring.
    pub rings: BTreeMap<String, RingCounts>,
    /// Seconds between its two reports.
    pub seconds: f64,
    /// Its requests' durations over the interval, per latency bucket
    /// (empty from routers that report none).
    pub latency: Vec<u64>,
}

/// Each router's counters between two rounds of registrations (routers
/// present in both, the same process, each with a report).
pub fn deltas(before: &[Registration], now: &[Registration]) -> Vec<Delta> {
    let mut out = Vec::new();
    for r in now {
        let Some(b) = before.iter().find(|b| b.id == r.id && b.pid == r.pid) else {
            continue;
        };
        let (Some(new), Some(old)) = (&r.report, &b.report) else {
            continue;
        };
        if new.at_ms <= old.at_ms {
            continue;
        }
        let empty = RingCounts::default();
        let rings = new
            .rings
            .iter()
            .map(|(name, n)| {
                let o = old.rings.get(name).unwrap_or(&empty);
                (
                    name.clone(),
                    RingCounts {
                        unmoved: minus(&n.unmoved, &o.unmoved),
                        moved: minus(&n.moved, &o.moved),
                        bytes_unmoved: minus(&n.bytes_unmoved, &o.bytes_unmoved),
                        bytes_moved: minus(&n.bytes_moved, &o.bytes_moved),
                        classes: minus(&n.classes, &o.classes),
                    },
                )
            })
            .collect();
        let latency = if new.latency.len() == old.latency.len() {
            new.latency
                .iter()
                .zip(&old.latency)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect()
        } else {
            Vec::new()
        };
        out.push(Delta {
            scope: r.scope.clone().unwrap_or_default(),
            rings,
            seconds: (new.at_ms - old.at_ms) as f64 / 1000.0,
            latency,
        });
    }
    out
}
