//! What a controller does in a round once it is due: measure the
//! baseline, step, check the guards and act on their verdict, advance,
//! and obey a command.

use std::time::{Duration, Instant};

use super::{now_ms, Command, Controller, Outcome, RunError};
use crate::etcd::Compare;
use crate::plan::guards::{self, Delta, Verdict};
use crate::plan::{stage_scopes, Check, RolloutDoc, Status, KEPT_CHECKS};
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
            self.state.baseline = Some(baseline_of(&deltas));
            self.say(format!(
                "baseline from Prometheus over the last {} ms",
                window.as_millis()
            ));
            let now = registrations(self.client, self.keys)?;
            return self.step_to(0, Some(0), at, now);
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
        self.state.baseline = Some(baseline_of(&deltas));
        self.say(format!(
            "baseline measured over {} ms on {} routers",
            elapsed,
            deltas.len()
        ));
        self.step_to(0, Some(0), at, now)
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
        let doc = self.expected();
        if !self.write(Some((&doc, at)))? {
            (self.state.stage, self.state.step) = (old_stage, old_step);
            return Ok(None); // the next round sees the hand-written rollout
        }
        self.before = Some((Instant::now(), now));
        self.last_check = None;
        let bp = step.map_or(0, |k| self.spec.stages[stage].steps_bp[k]);
        let scopes = self.spec.stages[stage].scopes.join(",");
        self.say(format!(
            "stage {} step {}: {scopes} at {bp} bp",
            stage + 1,
            step.map_or(0, |k| k + 1)
        ));
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
                    Ok(d) => guards::judge(&self.spec.guards, &scopes, base, &d),
                    Err(e) => (guards::Figures::default(), Verdict::Inconclusive(vec![e])),
                }
            }
        };
        match verdict {
            Verdict::Pass => self.state.failures = 0,
            Verdict::Fail(_) => self.state.failures += 1,
            Verdict::Inconclusive(_) => {}
        }
        self.say(format!(
            "check stage {} step {}: {} {:?} (requests {}, hit ratio {:?}, baseline {:?}, origin/s {:.1})",
            self.state.stage + 1,
            step + 1,
            verdict.name(),
            verdict.reasons(),
            figures.requests,
            figures.hit_ratio,
            figures.baseline_hit_ratio,
            figures.origin_rps
        ));
        self.state.checks.push(Check {
            at_ms: now_ms(),
            stage: self.state.stage,
            step,
            figures,
            verdict: verdict.name().to_string(),
            reasons: verdict.reasons(),
        });
        if self.state.checks.len() > KEPT_CHECKS {
            self.state.checks.remove(0);
        }
        if self.state.failures >= self.spec.guards.failures_to_rollback {
            return self.on_failure(step, at, verdict.reasons());
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
                self.say(format!("rolled back to the shares at plan start: {cause}"));
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
                self.say(format!("stepped back one step and paused: {cause}"));
                Ok(Some(Outcome::SteppedBack))
            }
            crate::plan::OnFailure::Pause => {
                self.state.status = Status::Paused;
                self.state.reason = Some(format!("paused: {cause}"));
                self.write(None)?;
                self.say(format!("paused: {cause}"));
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
            return self.step_to(stage + 1, Some(0), at, now);
        }
        self.state.status = Status::Completed;
        self.state.reason = None;
        self.write(None)?;
        self.say("completed: every stage at its last step".into());
        Ok(Some(Outcome::Completed))
    }

    /// A pending command, acted on and cleared.
    pub(super) fn command(
        &mut self,
        current: &RolloutDoc,
        at: i64,
    ) -> Result<Option<Outcome>, RunError> {
        let ck = self.keys.plan_command();
        let Some(kv) = self.client.get(&ck)?.0 else {
            return Ok(None);
        };
        let cmd: Option<Command> = serde_json::from_slice(&kv.value).ok();
        let _ = current;
        let out = match cmd.as_ref().map(|c| c.command.as_str()) {
            Some("pause") if self.state.status == Status::Running => {
                self.state.status = Status::Paused;
                self.state.reason = Some("paused by `ketama fleet plan pause`".into());
                self.write(None)?;
                None
            }
            Some("resume") if self.state.status == Status::Paused => {
                self.state.status = Status::Running;
                self.state.reason = None;
                self.state.failures = 0;
                self.state.since_ms = now_ms();
                self.before = None;
                self.last_check = None;
                // The plan's current step, written again over a hand-made
                // rollout (the operator asked to resume).
                let doc = self.expected();
                if !self.write(Some((&doc, at)))? {
                    return Ok(None);
                }
                None
            }
            Some("abort") => {
                let rollback = cmd.as_ref().is_some_and(|c| c.rollback);
                self.state.status = Status::Aborted;
                self.state.reason = Some(if rollback {
                    "aborted and rolled back by `ketama fleet plan abort --rollback`".into()
                } else {
                    "aborted by `ketama fleet plan abort`".into()
                });
                let start = self.state.start.clone();
                let written = if rollback {
                    self.write(Some((&start, at)))?
                } else {
                    self.write(None)?
                };
                if !written {
                    return Ok(None);
                }
                Some(Outcome::Aborted)
            }
            _ => None,
        };
        let _ = self
            .client
            .txn(&[Compare::ModRevision(&ck, kv.mod_revision)], &[], &[&ck]);
        if let Some(reason) = self.state.reason.clone() {
            if cmd.is_some() {
                self.say(reason);
            }
        } else if cmd.is_some() {
            self.say("resumed".into());
        }
        Ok(out)
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
