//! The guards' verdict on one interval: the figures of the routers a
//! stage concerns (and, for the origin, of the whole fleet), from two
//! rounds of their registrations' reports, against the plan's limits.
//!
//! A router's figures are the difference of its two reports (the same
//! process: a restarted router, whose counters began again, counts from
//! its next report). Requests are every routed request of the scope;
//! the hit ratio is hits over hits and origin contacts (`miss`, `stale`,
//! `bypass`), over every ring; moved keys' over the new ring's moved
//! responses; the error ratio is `5xx` and `error` answers over every
//! answer of the new ring; origin requests per second add each router's
//! origin contacts over its own interval.

use std::collections::BTreeMap;

pub use super::figures::{deltas, Delta, Figures};
use super::spec::{CompareWith, Guards};
use crate::report::{RingCounts, ORIGIN_RESULTS};

/// A check's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Every guard held.
    Pass,
    /// A guard failed (why).
    Fail(Vec<String>),
    /// Too little to judge by (why): neither passed nor failed.
    Inconclusive(Vec<String>),
}

impl Verdict {
    /// `pass`, `fail` or `inconclusive`.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail(_) => "fail",
            Verdict::Inconclusive(_) => "inconclusive",
        }
    }

    /// The reasons, if any.
    pub fn reasons(&self) -> Vec<String> {
        match self {
            Verdict::Pass => Vec::new(),
            Verdict::Fail(r) | Verdict::Inconclusive(r) => r.clone(),
        }
    }
}

/// Hits and origin contacts of `deltas` in `scopes`, over every ring.
pub fn hits_and_origin(deltas: &[Delta], scopes: &[String]) -> (u64, u64) {
    deltas
        .iter()
        .filter(|d| scopes.contains(&d.scope))
        .flat_map(|d| d.rings.values())
        .fold((0, 0), |(h, o), r| {
            (h + r.responses("hit"), o + r.origin_contacts())
        })
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// What the routers of `scopes` measured over the interval (`deltas`),
/// beside the baseline's hits and origin contacts.
pub fn figures(scopes: &[String], baseline: Option<(u64, u64)>, deltas: &[Delta]) -> Figures {
    let concerned: Vec<&Delta> = deltas
        .iter()
        .filter(|d| scopes.contains(&d.scope))
        .collect();
    let sum = |f: &dyn Fn(&RingCounts) -> u64, ring: Option<&str>| -> u64 {
        concerned
            .iter()
            .flat_map(|d| d.rings.iter())
            .filter(|(name, _)| ring.is_none_or(|r| r == name.as_str()))
            .map(|(_, r)| f(r))
            .sum()
    };
    let requests = sum(&|r| r.classes.values().sum(), None);
    let (hits, origin) = hits_and_origin(deltas, scopes);
    let moved_hits = sum(&|r| r.moved.get("hit").copied().unwrap_or(0), Some("new"));
    let moved_origin = sum(
        &|r| {
            ORIGIN_RESULTS
                .iter()
                .map(|k| r.moved.get(*k).copied().unwrap_or(0))
                .sum()
        },
        Some("new"),
    );
    let new_answers = sum(&|r| r.classes.values().sum(), Some("new"));
    let new_errors = sum(&|r| r.class("5xx") + r.class("error"), Some("new"));
    let old_answers = sum(&|r| r.classes.values().sum(), Some("old"));
    let old_errors = sum(&|r| r.class("5xx") + r.class("error"), Some("old"));
    let unmoved_hits = sum(&|r| r.unmoved.get("hit").copied().unwrap_or(0), Some("new"));
    let unmoved_origin = sum(
        &|r| {
            ORIGIN_RESULTS
                .iter()
                .map(|k| r.unmoved.get(*k).copied().unwrap_or(0))
                .sum()
        },
        Some("new"),
    );
    let origin_rps = deltas
        .iter()
        .map(|d| {
            d.rings
                .values()
                .map(RingCounts::origin_contacts)
                .sum::<u64>() as f64
                / d.seconds
        })
        .fold(0.0, |a, b| a + b);
    let mut ring_hit_ratio = BTreeMap::new();
    for ring in ["only", "old", "new"] {
        let h = sum(&|r| r.responses("hit"), Some(ring));
        let o = sum(&RingCounts::origin_contacts, Some(ring));
        if let Some(x) = ratio(h, h + o) {
            ring_hit_ratio.insert(ring.to_string(), x);
        }
    }
    Figures {
        ring_hit_ratio,
        routers: concerned.len(),
        requests,
        hit_ratio: ratio(hits, hits + origin),
        baseline_hit_ratio: baseline.and_then(|(h, o)| ratio(h, h + o)),
        moved_hit_ratio: ratio(moved_hits, moved_hits + moved_origin),
        error_ratio: ratio(new_errors, new_answers),
        origin_rps,
        unmoved_hit_ratio: ratio(unmoved_hits, unmoved_hits + unmoved_origin),
        old_error_ratio: ratio(old_errors, old_answers),
        latency: latency_of(&concerned),
        metrics: BTreeMap::new(),
    }
}

/// The figures of one interval and the guards' verdict on them.
/// `baseline` is the stage's scopes' (hits, origin contacts) over the
/// baseline window.
pub fn judge(
    g: &Guards,
    scopes: &[String],
    baseline: Option<(u64, u64)>,
    deltas: &[Delta],
) -> (Figures, Verdict) {
    let f = figures(scopes, baseline, deltas);
    let mut failed = Vec::new();
    if let Some(max) = g.max_origin_rps {
        if f.origin_rps > max {
            failed.push(format!(
                "origin requests/s {:.1} above max_origin_rps {max}",
                f.origin_rps
            ));
        }
    }
    if f.routers == 0 {
        return verdict(
            failed,
            vec!["no two reports from the scope's routers yet".into()],
            f,
        );
    }
    if f.requests < g.min_requests {
        return verdict(
            failed,
            vec![format!(
                "{} requests in the scope, under min_requests {}",
                f.requests, g.min_requests
            )],
            f,
        );
    }
    if g.compare == CompareWith::Concurrent {
        return concurrent(g, failed, f);
    }
    let mut unknown = Vec::new();
    if let Some(max) = g.max_hit_ratio_drop {
        match (f.baseline_hit_ratio, f.hit_ratio) {
            (Some(b), Some(h)) if b - h > max => failed.push(format!(
                "hit ratio {:.3}, {:.3} below its baseline {b:.3} (max_hit_ratio_drop {max})",
                h,
                b - h
            )),
            (Some(_), Some(_)) => {}
            _ => unknown.push("no hit ratio (no cache results, or no baseline)".to_string()),
        }
    }
    if let Some(max) = g.max_moved_hit_ratio_drop {
        if let (Some(b), Some(m)) = (f.baseline_hit_ratio, f.moved_hit_ratio) {
            if b - m > max {
                failed.push(format!(
                    "moved keys' hit ratio {m:.3}, {:.3} below the baseline {b:.3} (max_moved_hit_ratio_drop {max})",
                    b - m
                ));
            }
        }
    }
    if let Some(max) = g.max_error_ratio {
        if let Some(e) = f.error_ratio {
            if e > max {
                failed.push(format!(
                    "error ratio {e:.4} on the new ring above max_error_ratio {max}"
                ));
            }
        }
    }
    verdict(failed, unknown, f)
}

/// `compare = "concurrent"`: moved keys against unmoved keys, the new
/// ring's errors against the old ring's, over the same interval.
fn concurrent(g: &Guards, mut failed: Vec<String>, f: Figures) -> (Figures, Verdict) {
    let mut unknown = Vec::new();
    let drop = match (g.max_hit_ratio_drop, g.max_moved_hit_ratio_drop) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if let Some(max) = drop {
        match (f.unmoved_hit_ratio, f.moved_hit_ratio) {
            (Some(u), Some(m)) if u - m > max => failed.push(format!(
                "moved keys' hit ratio {m:.3}, {:.3} below unmoved keys' {u:.3} in the same interval (max drop {max})",
                u - m
            )),
            (Some(_), Some(_)) => {}
            _ => unknown.push(
                "no hit ratio of moved and of unmoved keys on the new ring in this interval".into(),
            ),
        }
    }
    if let Some(max) = g.max_error_ratio {
        if let Some(e) = f.error_ratio {
            let old = f.old_error_ratio.unwrap_or(0.0);
            if e - old > max {
                failed.push(format!(
                    "error ratio {e:.4} on the new ring, {:.4} above the old ring's {old:.4} in the same interval (max_error_ratio {max})",
                    e - old
                ));
            }
        }
    }
    verdict(failed, unknown, f)
}

/// The routers' latency buckets added up (those that report them).
fn latency_of(deltas: &[&Delta]) -> Vec<u64> {
    let mut sum: Vec<u64> = Vec::new();
    for d in deltas.iter().filter(|d| !d.latency.is_empty()) {
        if sum.is_empty() {
            sum = vec![0; d.latency.len()];
        }
        for (s, n) in sum.iter_mut().zip(&d.latency) {
            *s += n;
        }
    }
    sum
}

/// Routed requests and `5xx`/router errors of `deltas` in `scopes`, over
/// every ring (what a baseline is refused on).
pub fn requests_and_errors(deltas: &[Delta], scopes: &[String]) -> (u64, u64) {
    deltas
        .iter()
        .filter(|d| scopes.contains(&d.scope))
        .flat_map(|d| d.rings.values())
        .fold((0, 0), |(n, e), r| {
            (
                n + r.classes.values().sum::<u64>(),
                e + r.class("5xx") + r.class("error"),
            )
        })
}

fn verdict(failed: Vec<String>, unknown: Vec<String>, f: Figures) -> (Figures, Verdict) {
    let v = if !failed.is_empty() {
        Verdict::Fail(failed)
    } else if !unknown.is_empty() {
        Verdict::Inconclusive(unknown)
    } else {
        Verdict::Pass
    };
    (f, v)
}
