//! What a controller measures in a round, and the event it makes of it:
//! the baseline's window, and the guards' figures and verdict on the
//! held step. What the plan does with them is the transition's.

use std::time::{Duration, Instant};

use super::{now_ms, Controller, RunError};
use crate::plan::guards::{self, Delta, Verdict};
use crate::plan::transition::Event;
use crate::plan::{stage_scopes, CompareWith};
use crate::registrations;

impl Controller<'_> {
    /// Before the first step: the baseline's window, measured.
    pub(super) fn baseline(&mut self, at: i64) -> Result<(), RunError> {
        if self.spec.guards.compare == CompareWith::Concurrent {
            // Each check compares the two rings in its own interval.
            let event = Event::BaselineMeasured {
                baseline: None,
                note: "no baseline: each check compares the two rings".into(),
            };
            self.apply(event, at)?;
            return Ok(());
        }
        if let Some(p) = &self.prometheus {
            // Prometheus holds the window before the plan already.
            let window = Duration::from_millis(self.spec.guards.baseline_ms);
            let deltas = match p.deltas(window) {
                Ok(d) => d,
                Err(e) => {
                    self.say(format!("baseline: {e}; retrying"));
                    return Ok(());
                }
            };
            let event = match self.refuse_baseline(&deltas) {
                Some(why) => Event::BaselineRefused { why },
                None => Event::BaselineMeasured {
                    baseline: Some(baseline_of(&deltas)),
                    note: format!(
                        "baseline from Prometheus over the last {} ms",
                        window.as_millis()
                    ),
                },
            };
            self.apply(event, at)?;
            return Ok(());
        }
        if self.before.is_none() {
            self.before = Some((Instant::now(), registrations(self.client, self.keys)?));
            self.apply(Event::BaselineBegun, at)?;
            return Ok(());
        }
        let elapsed = now_ms().saturating_sub(self.state.since_ms());
        if elapsed < self.spec.guards.baseline_ms {
            return Ok(());
        }
        let now = registrations(self.client, self.keys)?;
        let deltas = match &self.before {
            Some((_, before)) => guards::deltas(before, &now),
            None => Vec::new(),
        };
        let event = match self.refuse_baseline(&deltas) {
            Some(why) => {
                // Measured again from now.
                self.before = Some((Instant::now(), now));
                Event::BaselineRefused { why }
            }
            None => Event::BaselineMeasured {
                baseline: Some(baseline_of(&deltas)),
                note: format!(
                    "baseline measured over {elapsed} ms on {} routers",
                    deltas.len()
                ),
            },
        };
        self.apply(event, at)?;
        Ok(())
    }

    /// Why a baseline cannot be compared with: a stage's scopes with fewer
    /// than `min_requests`, or more errors than `max_error_ratio` allows
    /// (the caches were failing while it was measured).
    fn refuse_baseline(&self, deltas: &[Delta]) -> Option<String> {
        let g = &self.spec.guards;
        let known: Vec<String> = deltas.iter().map(|d| d.scope.clone()).collect();
        for stage in 0..self.spec.stages.len() {
            let scopes = stage_scopes(&self.spec, stage, &known);
            let (n, errors) = guards::requests_and_errors(deltas, &scopes);
            let names = scopes.join(",");
            if n < g.min_requests {
                return Some(format!("baseline refused: stage {} ({names}) had {n} requests, under min_requests {}; measuring it again", stage + 1, g.min_requests));
            }
            if let Some(max) = g.max_error_ratio {
                let r = errors as f64 / n as f64;
                if r > max {
                    return Some(format!("baseline refused: stage {} ({names}) answered {r:.4} of its requests with errors, above max_error_ratio {max}; measuring it again", stage + 1));
                }
            }
        }
        None
    }

    /// The `[[guards.metric]]` guards added to a check's verdict: a failed
    /// one fails it; one that could not be judged leaves a passing check
    /// inconclusive.
    fn own_guards(
        &self,
        mut figures: guards::Figures,
        verdict: Verdict,
    ) -> (guards::Figures, Verdict) {
        let m = &self.spec.guards.metrics;
        if m.is_empty() {
            return (figures, verdict);
        }
        let (values, failed, unknown) =
            crate::plan::metrics::judge(m, &figures, self.prometheus.as_ref());
        figures.metrics = values;
        let verdict = match verdict {
            Verdict::Fail(mut r) => {
                r.extend(failed);
                Verdict::Fail(r)
            }
            _ if !failed.is_empty() => Verdict::Fail(failed),
            Verdict::Inconclusive(mut r) => {
                r.extend(unknown);
                Verdict::Inconclusive(r)
            }
            Verdict::Pass if !unknown.is_empty() => Verdict::Inconclusive(unknown),
            Verdict::Pass => Verdict::Pass,
        };
        (figures, verdict)
    }

    /// One check of the guards on the held step.
    pub(super) fn check(&mut self, at: i64) -> Result<(), RunError> {
        let now = registrations(self.client, self.keys)?;
        self.last_check = Some(Instant::now());
        let Some((_, before)) = self.before.replace((Instant::now(), now.clone())) else {
            return Ok(());
        };
        let known: Vec<String> = now
            .iter()
            .map(|r| r.scope.clone().unwrap_or_default())
            .collect();
        let scopes = stage_scopes(&self.spec, self.state.stage(), &known);
        let base = self.state.baseline().map(|b| {
            scopes
                .iter()
                .filter_map(|s| b.get(s))
                .fold((0, 0), |(h, o), (a, b)| (h + a, o + b))
        });
        let (figures, verdict) = match &self.prometheus {
            None => guards::judge(
                &self.spec.guards,
                &scopes,
                base,
                &guards::deltas(&before, &now),
            ),
            Some(p) => {
                let window = Duration::from_millis(self.spec.guards.interval_ms);
                match p.deltas(window) {
                    Ok(d) if !d.iter().any(|d| scopes.contains(&d.scope)) => (
                        guards::Figures::default(),
                        Verdict::Inconclusive(vec![format!(
                            "Prometheus at {} has no samples of the stage's scopes over the last {} ms",
                            p.url(),
                            window.as_millis()
                        )]),
                    ),
                    Ok(d) => guards::judge(&self.spec.guards, &scopes, base, &d),
                    Err(e) => (guards::Figures::default(), Verdict::Inconclusive(vec![e])),
                }
            }
        };
        let (figures, verdict) = self.own_guards(figures, verdict);
        self.apply(Event::Checked { figures, verdict }, at)?;
        Ok(())
    }
}

/// Hits and origin contacts per scope.
fn baseline_of(deltas: &[Delta]) -> std::collections::BTreeMap<String, (u64, u64)> {
    let mut base = std::collections::BTreeMap::new();
    for d in deltas {
        let e = base.entry(d.scope.clone()).or_insert((0u64, 0u64));
        let (h, o) =
            guards::hits_and_origin(std::slice::from_ref(d), std::slice::from_ref(&d.scope));
        e.0 += h;
        e.1 += o;
    }
    base
}
