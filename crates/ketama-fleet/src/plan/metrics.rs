//! The operator's own guards, `[[guards.metric]]`: a PromQL query (with
//! `--prometheus`) or a figure every check already measures from the
//! routers' reports, each held to a `max`, a `min` or both.
//!
//! ```toml
//! [[guards.metric]]
//! name = "p99 latency, seconds"
//! query = 'histogram_quantile(0.99, sum by (le) (rate(ketama_request_duration_seconds_bucket[1m])))'
//! max = 0.25
//! [[guards.metric]]
//! name = "new ring errors"
//! figure = "error_ratio_new"
//! max = 0.01
//! [[guards.metric]]
//! name = "p99, seconds"
//! figure = "latency_p99"      # from the latency buckets routers report
//! max = 0.25
//! ```
//!
//! A query must answer one sample (aggregate it: `sum`, `max`, ...); none
//! or several make the check inconclusive, saying so. Its range windows
//! (`[1m]`) must each cover two of Prometheus' scrape intervals, checked at
//! `plan run`: `rate()` over fewer samples answers nothing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::figures::Figures;
use super::prometheus::Prometheus;
use super::values::{parse_duration, PlanError};

/// A figure of every check, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    /// The scopes' hit ratio, every ring.
    HitRatio,
    /// Moved keys' hit ratio on the new ring.
    MovedHitRatio,
    /// Unmoved keys' hit ratio on the new ring.
    UnmovedHitRatio,
    /// `5xx` and router errors over the new ring's answers.
    ErrorRatioNew,
    /// The same on the old ring.
    ErrorRatioOld,
    /// Origin contacts per second, whole fleet.
    OriginRps,
    /// Routed requests in the scopes over the interval.
    Requests,
    /// The median of the scopes' request durations, seconds (from the
    /// latency buckets the routers report).
    LatencyP50,
    /// Their 90th percentile.
    LatencyP90,
    /// Their 99th percentile.
    LatencyP99,
}

const FIGURES: [(&str, Figure); 10] = [
    ("hit_ratio", Figure::HitRatio),
    ("moved_hit_ratio", Figure::MovedHitRatio),
    ("unmoved_hit_ratio", Figure::UnmovedHitRatio),
    ("error_ratio_new", Figure::ErrorRatioNew),
    ("error_ratio_old", Figure::ErrorRatioOld),
    ("origin_rps", Figure::OriginRps),
    ("requests", Figure::Requests),
    ("latency_p50", Figure::LatencyP50),
    ("latency_p90", Figure::LatencyP90),
    ("latency_p99", Figure::LatencyP99),
];

impl Figure {
    fn of(self, f: &Figures) -> Option<f64> {
        match self {
            Figure::HitRatio => f.hit_ratio,
            Figure::MovedHitRatio => f.moved_hit_ratio,
            Figure::UnmovedHitRatio => f.unmoved_hit_ratio,
            Figure::ErrorRatioNew => f.error_ratio,
            Figure::ErrorRatioOld => f.old_error_ratio,
            Figure::OriginRps => Some(f.origin_rps),
            Figure::Requests => Some(f.requests as f64),
            Figure::LatencyP50 => crate::report::quantile(&f.latency, 0.5),
            Figure::LatencyP90 => crate::report::quantile(&f.latency, 0.9),
            Figure::LatencyP99 => crate::report::quantile(&f.latency, 0.99),
        }
    }
}

/// Where a metric guard's value comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A PromQL instant query (needs `--prometheus`).
    Query(String),
    /// A figure every check measures.
    Figure(Figure),
}

/// One `[[guards.metric]]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricGuard {
    /// Its name in checks and messages.
    pub name: String,
    /// Where its value comes from.
    pub source: Source,
    /// The highest passing value.
    pub max: Option<f64>,
    /// The lowest passing value.
    pub min: Option<f64>,
}

/// `[[guards.metric]]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMetric {
    name: String,
    query: Option<String>,
    figure: Option<String>,
    max: Option<f64>,
    min: Option<f64>,
}

/// The line of the `index`-th `[[guards.metric]]`.
fn line_of(text: &str, index: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim().starts_with("[[guards.metric]]"))
        .nth(index)
        .map_or(0, |(i, _)| i + 1)
}

/// Checks each entry; errors name its line.
pub(super) fn parse(
    raw: Vec<RawMetric>,
    text: &str,
    file: &str,
) -> Result<Vec<MetricGuard>, PlanError> {
    let mut out: Vec<MetricGuard> = Vec::with_capacity(raw.len());
    for (i, m) in raw.into_iter().enumerate() {
        let err = |message: String| PlanError {
            file: file.to_string(),
            line: line_of(text, i),
            message: format!("guards.metric {:?}: {message}", m.name),
        };
        if m.name.trim().is_empty() {
            return Err(err("give it a name".into()));
        }
        if out.iter().any(|o| o.name == m.name) {
            return Err(err(
                "a second metric of that name: names tell them apart".into()
            ));
        }
        let source = match (&m.query, &m.figure) {
            (Some(q), None) if !q.trim().is_empty() => Source::Query(q.clone()),
            (None, Some(f)) => match FIGURES.iter().find(|(n, _)| n == f) {
                Some(&(_, fig)) => Source::Figure(fig),
                None => {
                    let names: Vec<&str> = FIGURES.iter().map(|(n, _)| *n).collect();
                    return Err(err(format!(
                        "figure {f:?} is not one: {}",
                        names.join(", ")
                    )));
                }
            },
            _ => {
                return Err(err(
                    "give exactly one of query (PromQL, with --prometheus) or figure".into(),
                ))
            }
        };
        if m.max.is_none() && m.min.is_none() {
            return Err(err("give max, min or both".into()));
        }
        if [m.max, m.min].iter().flatten().any(|v| !v.is_finite()) {
            return Err(err("max and min are numbers".into()));
        }
        if let (Some(lo), Some(hi)) = (m.min, m.max) {
            if lo > hi {
                return Err(err(format!("min {lo} is above max {hi}")));
            }
        }
        out.push(MetricGuard {
            name: m.name,
            source,
            max: m.max,
            min: m.min,
        });
    }
    Ok(out)
}

/// The range windows (`[5m]`, `[30s:10s]`'s `30s`) of a PromQL query, in
/// milliseconds.
pub fn windows_ms(query: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut rest = query;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find(']') else {
            break;
        };
        let inside = &rest[open + 1..open + close];
        let range = inside.split(':').next().unwrap_or("");
        if let Ok(d) = parse_duration(range) {
            out.push(d.as_millis() as u64);
        }
        rest = &rest[open + close + 1..];
    }
    out
}

/// At `plan run`: queries need `--prometheus`, and each of their windows
/// at least two scrape intervals.
pub fn check_fleet(
    metrics: &[MetricGuard],
    text: &str,
    file: &str,
    prometheus: bool,
    scrape_ms: Option<u64>,
) -> Result<(), PlanError> {
    for (i, m) in metrics.iter().enumerate() {
        let Source::Query(q) = &m.source else {
            continue;
        };
        let err = |message: String| PlanError {
            file: file.to_string(),
            line: line_of(text, i),
            message: format!("guards.metric {:?}: {message}", m.name),
        };
        if !prometheus {
            return Err(err(
                "a query needs a Prometheus server: run the plan with --prometheus URL, or use a figure".into(),
            ));
        }
        if let Some(every) = scrape_ms {
            if let Some(w) = windows_ms(q).into_iter().find(|&w| w < 2 * every) {
                return Err(err(format!("its window of {w} ms is shorter than two scrape intervals ({every} ms each): it would hold at most one sample; make it at least {} ms", 2 * every)));
            }
        }
    }
    Ok(())
}

/// Each guard's value this check, and which failed or could not be
/// judged (why).
pub fn judge(
    metrics: &[MetricGuard],
    figures: &Figures,
    prometheus: Option<&Prometheus>,
) -> (BTreeMap<String, f64>, Vec<String>, Vec<String>) {
    let (mut values, mut failed, mut unknown) = (BTreeMap::new(), Vec::new(), Vec::new());
    for m in metrics {
        let value = match (&m.source, prometheus) {
            (Source::Figure(f), _) => f
                .of(figures)
                .ok_or("not measured this interval".to_string()),
            (Source::Query(q), Some(p)) => match p.query(q) {
                Ok(s) if s.len() == 1 => Ok(s[0].1),
                Ok(s) if s.is_empty() => Err("the query answered no sample".to_string()),
                Ok(s) => Err(format!(
                    "the query answered {} samples: aggregate it to one (sum, max, ...)",
                    s.len()
                )),
                Err(e) => Err(e),
            },
            (Source::Query(_), None) => Err("no --prometheus to ask".to_string()),
        };
        match value {
            Ok(v) if v.is_nan() => unknown.push(format!("{}: NaN (no data in the window)", m.name)),
            Ok(v) => {
                values.insert(m.name.clone(), v);
                if let Some(max) = m.max.filter(|&max| v > max) {
                    failed.push(format!("{} {v:.4} above its max {max}", m.name));
                }
                if let Some(min) = m.min.filter(|&min| v < min) {
                    failed.push(format!("{} {v:.4} below its min {min}", m.name));
                }
            }
            Err(e) => unknown.push(format!("{}: {e}", m.name)),
        }
    }
    (values, failed, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_in_a_query() {
        assert_eq!(
            windows_ms("sum(rate(a[1m])) / sum(rate(b[30s:10s]))"),
            [60_000, 30_000]
        );
        assert!(windows_ms("up").is_empty());
    }

    #[test]
    fn figures_are_held_to_their_limits() {
        let m = |max, min| MetricGuard {
            name: "e".into(),
            source: Source::Figure(Figure::ErrorRatioNew),
            max,
            min,
        };
        let f = Figures {
            error_ratio: Some(0.02),
            ..Figures::default()
        };
        let (v, failed, unknown) = judge(&[m(Some(0.01), None)], &f, None);
        assert_eq!(v["e"], 0.02);
        assert_eq!(failed, ["e 0.0200 above its max 0.01"]);
        assert!(unknown.is_empty());
        let (_, failed, _) = judge(&[m(Some(0.05), Some(0.0))], &f, None);
        assert!(failed.is_empty());
        let (_, _, unknown) = judge(&[m(Some(0.05), None)], &Figures::default(), None);
        assert_eq!(unknown, ["e: not measured this interval"]);
    }
}
