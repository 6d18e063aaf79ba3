//! What a controller does in a round once it is due: measure the
//! baseline, step, check the guards and act on their verdict, advance,
//! and obey a command.

use std::time::{Duration, Instant};

use super::{now_ms, Controller, Outcome, RunError};
use crate::plan::guards::{self, Delta, Verdict};
use crate::plan::{stage_scopes, Check, CompareWith, RolloutDoc, Status, KEPT_CHECKS};
use crate::{registrations, Registration};

impl Controller<'_> {
    /// Before the first step: the baseline window, then step one.
    pub(super) fn baseline(
        &mut self,
        elapsed: u64,
        current: &RolloutDoc,
        at: i64,
    ) -> Result<Option<Outcome>, RunError> {
        let _ = current;
        if self.spec.guards.compare == CompareWith::Concurrent {
            // Each check compares the two rings in its own interval.
            let now = registrations(self.client, self.keys)?;
            return self.enter(0, at, now);
        }
        if let Some(p) = &self.prometheus {
            // Prometheus holds the window before the plan already.
            let window = Duration::from_millis(self.spec.guards.baseline_ms);
            let deltas = match p.deltas(window) {
                Ok(d) => d,
                Err(e) => {
                    self.say(format!("baseline: {e}; retrying"));
                    return Ok(None);
                }
            };
            if let Some(why) = self.refuse_baseline(&deltas) {
                return self.baseline_refused(why, at);
            }
            self.state.baseline = Some(baseline_of(&deltas));
            self.state.reason = None;
            self.say(format!(
                "baseline from Prometheus over the last {} ms",
                window.as_millis()
            ));
            let now = registrations(self.client, self.keys)?;
            return self.enter(0, at, now);
        }
        if self.before.is_none() {
            self.before = Some((Instant::now(), registrations(self.client, self.keys)?));
            self.state.since_ms = now_ms();
            return Ok(None);
        }
        if elapsed < self.spec.guards.baseline_ms {
            return Ok(None);
        }
        let now = registrations(self.client, self.keys)?;
        let deltas = match &self.before {
            Some((_, before)) => guards::deltas(before, &now),
            None => Vec::new(),
        };
        if let Some(why) = self.refuse_baseline(&deltas) {
            // Measured again from now.
            self.before = Some((Instant::now(), now));
            self.state.since_ms = now_ms();
            return self.baseline_refused(why, at);
        }
        self.state.baseline = Some(baseline_of(&deltas));
        self.state.reason = None;
        self.say(format!(
            "baseline measured over {} ms on {} routers",
            elapsed,
            deltas.len()
        ));
        self.enter(0, at, now)
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

    /// A refused baseline counts as an inconclusive check: `max_inconclusive`
    /// of them in a row are a failure, and `failures_to_rollback` failures
    /// end the plan (nothing was stepped: back at its start) or pause it.
    fn baseline_refused(&mut self, why: String, at: i64) -> Result<Option<Outcome>, RunError> {
        let g = self.spec.guards.clone();
        self.state.inconclusive += 1;
        if self.state.inconclusive >= g.max_inconclusive {
            self.state.inconclusive = 0;
            self.state.failures += 1;
        }
        self.state.reason = Some(why.clone());
        if self.state.failures < g.failures_to_rollback {
            self.write(None)?;
            self.event("baseline_refused", why);
            return Ok(None);
        }
        let cause = format!(
            "{why}; {} baselines refused in a row (max_inconclusive {}, failures_to_rollback {})",
            g.max_inconclusive * g.failures_to_rollback,
            g.max_inconclusive,
            g.failures_to_rollback
        );
        if g.on_failure == crate::plan::OnFailure::Pause {
            self.state.status = Status::Paused;
            self.state.failures = 0;
            self.state.reason = Some(format!("paused before the first step: {cause}"));
            self.write(None)?;
            self.event("paused", format!("paused before the first step: {cause}"));
            return Ok(None);
        }
        self.state.status = Status::RolledBack;
        self.state.reason = Some(format!("ended before the first step: {cause}"));
        let start = self.state.start.clone();
        if !self.write(Some((&start, at)))? {
            return Ok(None);
        }
        self.event(
            "rolled_back",
            format!("ended before the first step, the rollout at its start: {cause}"),
        );
        Ok(Some(Outcome::RolledBack))
    }

    /// The first step of `stage`, or its gate: paused until `approve`.
    pub(super) fn enter(
        &mut self,
        stage: usize,
        at: i64,
        now: Vec<Registration>,
    ) -> Result<Option<Outcome>, RunError> {
        if !self.spec.stages[stage].approve {
            return self.step_to(stage, Some(0), at, now);
        }
        self.state.status = Status::Paused;
        self.state.gate = Some(stage);
        let why = format!(
            "waiting at stage {}'s gate ({}): `ketama fleet plan approve` applies its first step",
            stage + 1,
            self.spec.stages[stage].scopes.join(",")
        );
        self.state.reason = Some(why.clone());
        self.write(None)?;
        self.event("gate", why);
        Ok(None)
    }

    /// Applies `stage` at `step` (and the state) in one transaction.
    pub(super) fn step_to(
        &mut self,
        stage: usize,
        step: Option<usize>,
        at: i64,
        now: Vec<Registration>,
    ) -> Result<Option<Outcome>, RunError> {
        let (old_stage, old_step) = (self.state.stage, self.state.step);
        self.state.stage = stage;
        self.state.step = step;
        self.state.since_ms = now_ms();
        self.state.failures = 0;
        self.state.inconclusive = 0;
        self.state.promoted_ms = None;
        let doc = self.expected();
        if !self.write(Some((&doc, at)))? {
            (self.state.stage, self.state.step) = (old_stage, old_step);
            return Ok(None); // the next round sees the hand-written rollout
        }
        self.before = Some((Instant::now(), now));
        self.last_check = None;
        let bp = step.map_or(0, |k| self.spec.stages[stage].steps_bp[k]);
        let scopes = self.spec.stages[stage].scopes.join(",");
        self.event(
            "step",
            format!(
                "stage {} step {}: {scopes} at {bp} bp",
                stage + 1,
                step.map_or(0, |k| k + 1)
            ),
        );
        Ok(None)
    }

    /// One check of the guards; acts on a streak of failures.
    pub(super) fn check(&mut self, step: usize, at: i64) -> Result<Option<Outcome>, RunError> {
        let now = registrations(self.client, self.keys)?;
        self.last_check = Some(Instant::now());
        let Some((_, before)) = self.before.replace((Instant::now(), now.clone())) else {
            return Ok(None);
        };
        let known: Vec<String> = now
            .iter()
            .map(|r| r.scope.clone().unwrap_or_default())
            .collect();
        let scopes = stage_scopes(&self.spec, self.state.stage, &known);
        let base = self.state.baseline.as_ref().map(|b| {
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
        let mut reasons = verdict.reasons();
        match verdict {
            Verdict::Pass => {
                self.state.failures = 0;
                self.state.inconclusive = 0;
            }
            Verdict::Fail(_) => {
                self.state.failures += 1;
                self.state.inconclusive = 0;
            }
            Verdict::Inconclusive(_) => {
                self.state.inconclusive += 1;
                let max = self.spec.guards.max_inconclusive;
                if self.state.inconclusive >= max {
                    // So no plan waits forever on a scope it cannot judge.
                    self.state.inconclusive = 0;
                    self.state.failures += 1;
                    reasons.push(format!(
                        "{max} inconclusive checks in a row count as a failure (max_inconclusive)"
                    ));
                }
            }
        }
        let line = format!(
            "check stage {} step {}: {}{} ({})",
            self.state.stage + 1,
            step + 1,
            verdict.name(),
            if reasons.is_empty() {
                String::new()
            } else {
                format!(": {}", reasons.join("; "))
            },
            describe(&figures)
        );
        self.state.checks.push(Check {
            at_ms: now_ms(),
            stage: self.state.stage,
            step,
            figures,
            verdict: verdict.name().to_string(),
            reasons: reasons.clone(),
        });
        if self.state.checks.len() > KEPT_CHECKS {
            self.state.checks.remove(0);
        }
        if matches!(verdict, Verdict::Pass) {
            self.say(line);
        } else {
            self.event(&format!("check_{}", verdict.name()), line);
        }
        if self.state.failures >= self.spec.guards.failures_to_rollback {
            return self.on_failure(step, at, reasons);
        }
        self.write(None)?;
        Ok(None)
    }

    pub(super) fn on_failure(
        &mut self,
        step: usize,
        at: i64,
        why: Vec<String>,
    ) -> Result<Option<Outcome>, RunError> {
        let n = self.state.failures;
        let cause = format!(
            "{n} failed checks in a row at stage {} step {}: {}",
            self.state.stage + 1,
            step + 1,
            why.join("; ")
        );
        match self.spec.guards.on_failure {
            crate::plan::OnFailure::Rollback => {
                self.state.status = Status::RolledBack;
                self.state.reason = Some(format!("rolled back: {cause}"));
                let start = self.state.start.clone();
                if !self.write(Some((&start, at)))? {
                    return Ok(None);
                }
                self.event(
                    "rolled_back",
                    format!("rolled back to the shares at plan start: {cause}"),
                );
                Ok(Some(Outcome::RolledBack))
            }
            crate::plan::OnFailure::StepBack => {
                let back = step.checked_sub(1);
                let (old_step, old_status) = (self.state.step, self.state.status);
                self.state.step = back;
                self.state.status = Status::Paused;
                self.state.failures = 0;
                self.state.since_ms = now_ms();
                self.state.reason = Some(format!("stepped back one step, paused: {cause}"));
                let doc = self.expected();
                if !self.write(Some((&doc, at)))? {
                    (self.state.step, self.state.status) = (old_step, old_status);
                    return Ok(None);
                }
                self.event(
                    "stepped_back",
                    format!("stepped back one step and paused: {cause}"),
                );
                Ok(Some(Outcome::SteppedBack))
            }
            crate::plan::OnFailure::Pause => {
                self.state.status = Status::Paused;
                self.state.reason = Some(format!("paused: {cause}"));
                self.write(None)?;
                self.event("paused", format!("paused: {cause}"));
                Ok(None)
            }
        }
    }

    /// The next step, the next stage's first, or the end.
    pub(super) fn advance(&mut self, step: usize, at: i64) -> Result<Option<Outcome>, RunError> {
        let stage = self.state.stage;
        let now = registrations(self.client, self.keys)?;
        if step + 1 < self.spec.stages[stage].steps_bp.len() {
            return self.step_to(stage, Some(step + 1), at, now);
        }
        if stage + 1 < self.spec.stages.len() {
            return self.enter(stage + 1, at, now);
        }
        self.state.status = Status::Completed;
        self.state.reason = None;
        self.write(None)?;
        self.event(
            "completed",
            "completed: every stage at its last step".into(),
        );
        Ok(Some(Outcome::Completed))
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

/// A check's figures for the log: each one named, `-` where unmeasured.
fn describe(f: &guards::Figures) -> String {
    let r = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3}"));
    format!(
        "requests {}, hit ratio {}, baseline {}, moved {}, unmoved {}, errors {}, origin/s {:.1}",
        f.requests,
        r(f.hit_ratio),
        r(f.baseline_hit_ratio),
        r(f.moved_hit_ratio),
        r(f.unmoved_hit_ratio),
        r(f.error_ratio),
        f.origin_rps
    )
}
