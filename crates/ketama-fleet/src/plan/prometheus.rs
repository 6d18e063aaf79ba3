//! The guards' figures from a Prometheus server instead of the routers'
//! registrations (`ketama fleet plan run --prometheus URL`): the same
//! families, `increase()` over the window, summed by the `scope` label the
//! routers' scrape targets carry (a router's scope is not in its own
//! metrics: give each target `labels: {scope: ams}` in the scrape
//! config).
//!
//! Three instant queries per check:
//! `sum by (scope, ring, moved, result) (increase(ketama_cache_responses_total[W]))`,
//! `sum by (scope, ring, class) (increase(ketama_ring_responses_total[W]))`
//! and `sum by (scope, le) (increase(ketama_request_duration_seconds_bucket[W]))`;
//! their samples become one [`Delta`] per scope, judged as the
//! registrations' are.

use std::collections::BTreeMap;
use std::time::Duration;

use super::figures::Delta;
use crate::report::RingCounts;

/// A Prometheus server's HTTP API.
pub struct Prometheus {
    url: String,
    agent: ureq::Agent,
}

/// A sample: its labels and value.
type Sample = (BTreeMap<String, String>, f64);

impl Prometheus {
    /// The server at `url` (`http://host:9090`).
    pub fn new(url: &str, timeout: Duration) -> Prometheus {
        Prometheus {
            url: url.trim_end_matches('/').to_string(),
            agent: ureq::AgentBuilder::new().timeout(timeout).build(),
        }
    }

    /// Its URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One instant query's vector.
    pub fn query(&self, q: &str) -> Result<Vec<Sample>, String> {
        let body = self.get("/api/v1/query", &[("query", q)])?;
        if body["status"] != "success" {
            return Err(format!(
                "Prometheus at {} refused {q:?}: {}",
                self.url, body["error"]
            ));
        }
        let result = body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok(result
            .iter()
            .map(|s| {
                let labels = s["metric"]
                    .as_object()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                            .collect()
                    })
                    .unwrap_or_default();
                let value = s["value"][1]
                    .as_str()
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0);
                (labels, value)
            })
            .collect())
    }

    /// Scopes with cache counters, as the `scope` label names them.
    pub fn scopes(&self) -> Result<Vec<String>, String> {
        let s = self.query("count by (scope) (ketama_cache_responses_total)")?;
        Ok(s.into_iter()
            .filter_map(|(l, _)| l.get("scope").cloned())
            .collect())
    }

    /// GET `path` with `query`, parsed as JSON.
    fn get(&self, path: &str, query: &[(&str, &str)]) -> Result<serde_json::Value, String> {
        let mut req = self.agent.get(&format!("{}{path}", self.url));
        for (k, v) in query {
            req = req.query(k, v);
        }
        let text = req
            .call()
            .map_err(|e| format!("Prometheus at {}: {e}", self.url))?
            .into_string()
            .map_err(|e| format!("Prometheus at {}: {e}", self.url))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("Prometheus at {}: not its API's JSON: {e}", self.url))
    }

    /// The longest scrape interval of Prometheus' active targets that
    /// carry a `scope` label (`None`: it names none), from
    /// `/api/v1/targets`.
    pub fn scrape_interval(&self) -> Result<Option<Duration>, String> {
        let body = self.get("/api/v1/targets", &[("state", "active")])?;
        let targets = body["data"]["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok(targets
            .iter()
            .filter(|t| t["labels"]["scope"].is_string())
            .filter_map(|t| t["scrapeInterval"].as_str().and_then(prom_duration))
            .max())
    }

    /// The counters' increase over the last `window`, one [`Delta`] per
    /// scope (series without a `scope` label: scope `""`).
    pub fn deltas(&self, window: Duration) -> Result<Vec<Delta>, String> {
        let w = window.as_millis().max(1);
        let cache = self.query(&format!(
            "sum by (scope, ring, moved, result) (increase(ketama_cache_responses_total[{w}ms]))"
        ))?;
        let classes = self.query(&format!(
            "sum by (scope, ring, class) (increase(ketama_ring_responses_total[{w}ms]))"
        ))?;
        let durations = self.query(&format!(
            "sum by (scope, le) (increase(ketama_request_duration_seconds_bucket[{w}ms]))"
        ))?;
        let mut by_scope: BTreeMap<String, BTreeMap<String, RingCounts>> = BTreeMap::new();
        let label = |l: &BTreeMap<String, String>, k: &str| l.get(k).cloned().unwrap_or_default();
        // Cumulative buckets by bound, per scope, made per-bucket counts as
        // the routers' reports carry them.
        let mut cumulative: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (l, v) in &durations {
            let le = match label(l, "le").as_str() {
                "+Inf" => f64::INFINITY,
                x => x.parse().unwrap_or(f64::NAN),
            };
            if !le.is_nan() {
                cumulative
                    .entry(label(l, "scope"))
                    .or_default()
                    .push((le, *v));
            }
        }
        let mut latency: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for (scope, mut b) in cumulative {
            b.sort_by(|x, y| x.0.total_cmp(&y.0));
            let mut below = 0.0;
            let counts = b
                .iter()
                .map(|&(_, c)| {
                    let n = (c - below).max(0.0).round() as u64;
                    below = c.max(below);
                    n
                })
                .collect();
            latency.insert(scope, counts);
        }
        for (l, v) in &cache {
            let ring = by_scope
                .entry(label(l, "scope"))
                .or_default()
                .entry(label(l, "ring"))
                .or_default();
            let side = if label(l, "moved") == "true" {
                &mut ring.moved
            } else {
                &mut ring.unmoved
            };
            *side.entry(label(l, "result")).or_default() += v.round() as u64;
        }
        for (l, v) in &classes {
            let ring = by_scope
                .entry(label(l, "scope"))
                .or_default()
                .entry(label(l, "ring"))
                .or_default();
            *ring.classes.entry(label(l, "class")).or_default() += v.round() as u64;
        }
        Ok(by_scope
            .into_iter()
            .map(|(scope, rings)| Delta {
                latency: latency.get(&scope).cloned().unwrap_or_default(),
                scope,
                rings,
                seconds: window.as_secs_f64(),
            })
            .collect())
    }
}

/// A Prometheus duration (`15s`, `1m30s`, `500ms`, `1h`).
fn prom_duration(s: &str) -> Option<Duration> {
    let mut ms = 0u64;
    let mut rest = s;
    while !rest.is_empty() {
        let at = rest.find(|c: char| !c.is_ascii_digit())?;
        let n: u64 = rest[..at].parse().ok()?;
        let unit_end = rest[at..]
            .find(|c: char| c.is_ascii_digit())
            .map_or(rest.len(), |e| at + e);
        let per = match &rest[at..unit_end] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return None,
        };
        ms += n * per;
        rest = &rest[unit_end..];
    }
    Some(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::prom_duration;
    use std::time::Duration;

    #[test]
    fn scrape_intervals_as_prometheus_writes_them() {
        assert_eq!(prom_duration("15s"), Some(Duration::from_secs(15)));
        assert_eq!(prom_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(prom_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(prom_duration("1x"), None);
        assert_eq!(prom_duration("s"), None);
    }
}
