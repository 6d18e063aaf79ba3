//! The commands `ketama fleet plan pause|resume|abort|approve|promote`
//! leave at `PREFIX/rollout-plan/command`, acted on by the running
//! controller and then cleared. A command whose write lost a race with
//! the rollout stays, and is tried again next round.

use super::{now_ms, Command, Controller, Outcome, RunError};
use crate::etcd::Compare;
use crate::plan::Status;
use crate::registrations;

/// What a command did to the round.
pub(super) enum Acted {
    /// No command, or one that changes nothing now.
    Nothing,
    /// The plan ended.
    Ended(Outcome),
    /// The state (and perhaps the rollout) was written: what the round
    /// read before is out of date.
    Wrote,
}

impl Controller<'_> {
    /// A pending command, acted on and cleared; `at` is the rollout's
    /// revision the round read.
    pub(super) fn command(&mut self, at: i64) -> Result<Acted, RunError> {
        let ck = self.keys.plan_command();
        let Some(kv) = self.client.get(&ck)?.0 else {
            return Ok(Acted::Nothing);
        };
        let cmd: Option<Command> = serde_json::from_slice(&kv.value).ok();
        let saved = self.state.clone();
        let (acted, event) = match cmd.as_ref().map(|c| c.command.as_str()) {
            Some("pause") if self.state.status == Status::Running => {
                self.state.status = Status::Paused;
                self.state.reason = Some("paused by `ketama fleet plan pause`".into());
                self.write(None)?;
                (Acted::Wrote, "paused")
            }
            Some("resume") if self.state.status == Status::Paused && self.state.gate.is_none() => {
                self.state.status = Status::Running;
                self.state.reason = None;
                self.state.failures = 0;
                self.state.inconclusive = 0;
                self.state.since_ms = now_ms();
                // The plan's current step, written again over a hand-made
                // rollout (the operator asked to resume).
                let doc = self.expected();
                if !self.write(Some((&doc, at)))? {
                    self.state = saved;
                    return Ok(Acted::Nothing);
                }
                self.before = None;
                self.last_check = None;
                (Acted::Wrote, "resumed")
            }
            Some("approve") if self.state.gate.is_some() => {
                let stage = self.state.gate.unwrap_or(0);
                self.state.status = Status::Running;
                self.state.gate = None;
                self.state.reason = None;
                let now = registrations(self.client, self.keys)?;
                self.step_to(stage, Some(0), at, now)?;
                if self.state.stage != stage || self.state.step != Some(0) {
                    self.state = saved;
                    return Ok(Acted::Nothing);
                }
                (Acted::Wrote, "approved")
            }
            Some("promote")
                if self.state.status == Status::Running && self.state.step.is_some() =>
            {
                self.state.promoted_ms = Some(now_ms());
                self.write(None)?;
                (Acted::Wrote, "promoted")
            }
            Some("abort") => {
                let rollback = cmd.as_ref().is_some_and(|c| c.rollback);
                self.state.status = Status::Aborted;
                self.state.gate = None;
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
                    self.state = saved;
                    return Ok(Acted::Nothing);
                }
                (Acted::Ended(Outcome::Aborted), "aborted")
            }
            _ => (Acted::Nothing, ""),
        };
        let _ = self
            .client
            .txn(&[Compare::ModRevision(&ck, kv.mod_revision)], &[], &[&ck]);
        if !event.is_empty() {
            let what = match (event, &self.state.reason) {
                ("approved", _) => format!("approved: stage {} begins", self.state.stage + 1),
                ("promoted", _) => format!(
                    "promoted: stage {} step {} ends its hold at the next passing check",
                    self.state.stage + 1,
                    self.state.step.map_or(0, |k| k + 1)
                ),
                (_, Some(r)) => r.clone(),
                (e, None) => e.to_string(),
            };
            self.event(event, what);
        }
        Ok(acted)
    }
}
