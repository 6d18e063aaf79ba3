//! The plan as a state machine: [`next`] takes a state and one [`Event`]
//! (a measurement, a command, the controller's arrival, the clock) and
//! answers the next state and what must be written with it. It is pure:
//! no etcd, no clock, no webhook. [`apply`] is the one way a state is
//! replaced: the new one is kept only once its transaction succeeded, the
//! old one otherwise, so what a controller holds in memory is what etcd
//! holds. The controller and `ketama fleet plan pause|abort` (when no
//! controller runs) both go through it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::guards::{Figures, Verdict};
use super::state::{Check, CheckVerdict, End, Phase, PlanState, Streak, KEPT_CHECKS};
use super::{rollout_at, OnFailure, PlanSpec, RolloutDoc};

/// A command for the running controller (`PREFIX/rollout-plan/command`,
/// stored as `{"command": "pause"}`, `{"command": "abort", "rollback":
/// true}`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// Wait until `resume`.
    Pause,
    /// Write the current step again and go on.
    Resume,
    /// End the plan where it is.
    Abort {
        /// And write the rollout at plan start.
        #[serde(default)]
        rollback: bool,
    },
    /// Open the gate the plan waits at.
    Approve,
    /// End the current step's hold at the next passing check.
    Promote,
}

impl Command {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Command::Pause => "pause",
            Command::Resume => "resume",
            Command::Abort { .. } => "abort",
            Command::Approve => "approve",
            Command::Promote => "promote",
        }
    }
}

/// What happened, for [`next`].
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// Controller `id` took the plan over from the stored state.
    TakenOver {
        /// Its id.
        id: String,
    },
    /// A command for the running controller.
    Command(Command),
    /// A command applied with no controller running (`pause`, `abort`;
    /// the others need one and change nothing).
    Unowned(Command),
    /// The fleet's rollout is not the one the plan wrote (at `revision`).
    HandWritten {
        /// The rollout's revision.
        revision: i64,
    },
    /// The baseline's window began.
    BaselineBegun,
    /// The baseline was measured (`None`: each check compares the two
    /// rings in its own interval); `note` says how, for the log.
    BaselineMeasured {
        /// Hits and origin contacts per scope.
        baseline: Option<BTreeMap<String, (u64, u64)>>,
        /// How it was measured.
        note: String,
    },
    /// The baseline's window cannot be compared with (why).
    BaselineRefused {
        /// Why.
        why: String,
    },
    /// The guards judged the current step.
    Checked {
        /// By these figures.
        figures: Figures,
        /// Their verdict.
        verdict: Verdict,
    },
    /// Time passed: a held step whose hold is over and whose last check
    /// passed advances.
    Tick,
}

/// What a transition asks to be written beside the state: the rollout
/// (in the same etcd transaction), then, once that succeeded, the log
/// and the webhook.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// The fleet's rollout.
    Rollout(RolloutDoc),
    /// An event for the log and the plan's webhook.
    Notify {
        /// Its kind (`step`, `paused`, `rolled_back`, ...).
        kind: &'static str,
        /// What happened.
        message: String,
    },
    /// A line for the log only.
    Log(String),
}

/// The state after `event` at `now_ms`, and what to write with it. An
/// event that changes nothing answers the same state and no writes.
pub fn next(
    spec: &PlanSpec,
    state: &PlanState,
    event: Event,
    now_ms: u64,
) -> (PlanState, Vec<Write>) {
    let mut t = Transition {
        spec,
        s: state.clone(),
        writes: Vec::new(),
        now_ms,
    };
    t.on(event);
    (t.s, t.writes)
}

/// What [`apply`] did.
#[derive(Debug, PartialEq)]
pub enum Applied {
    /// The event changed nothing: nothing written.
    Unchanged,
    /// The transaction lost its race (the rollout changed meanwhile): the
    /// state is the old one; what would have been written with it.
    Lost(Vec<Write>),
    /// Written and kept; the log and webhook lines to send.
    Kept(Vec<Write>),
}

/// Runs `event` through [`next`] and the result through `commit` (the new
/// state and the rollout to write with it, in one transaction; `Ok(false)`
/// when it lost its race). `state` becomes the new state only when
/// `commit` answered `Ok(true)`: after `Ok(false)` or an error it is
/// unchanged.
pub fn apply<E>(
    spec: &PlanSpec,
    state: &mut PlanState,
    event: Event,
    now_ms: u64,
    commit: impl FnOnce(&PlanState, Option<&RolloutDoc>) -> Result<bool, E>,
) -> Result<Applied, E> {
    let (new, writes) = next(spec, state, event, now_ms);
    if new == *state && writes.is_empty() {
        return Ok(Applied::Unchanged);
    }
    let rollout = writes.iter().find_map(|w| match w {
        Write::Rollout(d) => Some(d),
        _ => None,
    });
    if !commit(&new, rollout)? {
        return Ok(Applied::Lost(writes));
    }
    *state = new;
    Ok(Applied::Kept(writes))
}

struct Transition<'a> {
    spec: &'a PlanSpec,
    s: PlanState,
    writes: Vec<Write>,
    now_ms: u64,
}

impl Transition<'_> {
    fn on(&mut self, event: Event) {
        match event {
            Event::TakenOver { id } => {
                self.s.owner = Some(id);
                match &mut self.s.phase {
                    // A baseline cut short by a controller's death starts over.
                    Phase::Baseline { .. } => self.s.since_ms = self.now_ms,
                    // The run that stepped back ended there; this one waits.
                    Phase::Paused { stepped_back, .. } => *stepped_back = false,
                    _ => {}
                }
            }
            Event::Command(c) => self.command(c),
            Event::Unowned(c @ (Command::Pause | Command::Abort { .. })) => {
                self.command(c);
                self.s.owner = None;
            }
            Event::Unowned(_) => {}
            Event::HandWritten { revision } if self.s.running() => self.pause(format!(
                "the rollout was written by hand (revision {revision}): paused; `ketama fleet plan resume` writes the plan's current step again, `abort` ends it"
            )),
            Event::BaselineBegun => {
                if matches!(self.s.phase, Phase::Baseline { .. }) {
                    self.s.since_ms = self.now_ms;
                }
            }
            Event::BaselineMeasured { baseline, note } => {
                if let Phase::Baseline { .. } = self.s.phase {
                    self.s.baseline = baseline;
                    self.writes.push(Write::Log(note));
                    self.enter(0);
                }
            }
            Event::BaselineRefused { why } => self.baseline_refused(why),
            Event::Checked { figures, verdict } => self.checked(figures, verdict),
            Event::Tick => self.tick(),
            Event::HandWritten { .. } => {}
        }
    }

    fn notify(&mut self, kind: &'static str, message: String) {
        self.writes.push(Write::Notify { kind, message });
    }

    /// Writes the rollout the plan's stage and step imply.
    fn write_step(&mut self) {
        let doc = rollout_at(self.spec, &self.s.start, self.s.stage, self.s.step());
        self.write(doc);
    }

    fn write(&mut self, doc: RolloutDoc) {
        self.s.written = Some(doc.clone());
        self.writes.push(Write::Rollout(doc));
    }

    fn pause(&mut self, why: String) {
        self.s.phase = Phase::Paused {
            step: self.s.step(),
            why: why.clone(),
            stepped_back: false,
        };
        self.notify("paused", why);
    }

    fn end(&mut self, end: End, why: Option<String>) {
        self.s.phase = Phase::Ended {
            end,
            step: self.s.step(),
            why,
        };
    }

    fn command(&mut self, c: Command) {
        match (c, &self.s.phase) {
            (Command::Pause, Phase::Baseline { .. } | Phase::Holding { .. }) => {
                self.pause("paused by `ketama fleet plan pause`".into())
            }
            (Command::Resume, Phase::Paused { step, .. }) => {
                let step = *step;
                match step {
                    // Stepped back past a later stage's first step: that
                    // stage begins again.
                    None if self.s.stage > 0 => {
                        self.notify("resumed", "resumed".into());
                        self.enter(self.s.stage);
                        return;
                    }
                    // Else the plan's current step, written again over a
                    // hand-made rollout (the operator asked to resume).
                    None => self.settle(Phase::Baseline {
                        streak: Streak::default(),
                        refused: None,
                    }),
                    Some(step) => self.settle(holding(step)),
                }
                self.notify("resumed", "resumed".into());
            }
            (Command::Approve, Phase::Gated { gate, .. }) => {
                let stage = *gate;
                self.step_to(stage, 0);
                self.notify("approved", format!("approved: stage {} begins", stage + 1));
            }
            (Command::Promote, Phase::Holding { step, streak, .. }) => {
                let (step, streak) = (*step, *streak);
                self.s.phase = Phase::Holding {
                    step,
                    streak,
                    promoted_ms: Some(self.now_ms),
                };
                self.notify(
                    "promoted",
                    format!(
                        "promoted: stage {} step {} ends its hold at the next passing check",
                        self.s.stage + 1,
                        step + 1
                    ),
                );
            }
            (Command::Abort { rollback }, phase) if !matches!(phase, Phase::Ended { .. }) => {
                let why = if rollback {
                    "aborted and rolled back by `ketama fleet plan abort --rollback`"
                } else {
                    "aborted by `ketama fleet plan abort`"
                };
                self.end(End::Aborted, Some(why.into()));
                if rollback {
                    self.write(self.s.start.clone());
                }
                self.notify("aborted", why.into());
            }
            _ => {}
        }
    }

    /// The first step of `stage`, or its gate.
    fn enter(&mut self, stage: usize) {
        let st = &self.spec.stages[stage];
        if !st.approve {
            return self.step_to(stage, 0);
        }
        let why = format!(
            "waiting at stage {}'s gate ({}): `ketama fleet plan approve` applies its first step",
            stage + 1,
            st.scopes.join(",")
        );
        // The plan stays where the stage before left it.
        self.s.phase = Phase::Gated {
            gate: stage,
            step: self.s.step(),
            why: why.clone(),
        };
        self.notify("gate", why);
    }

    /// Enters `phase` from now, the plan's current step written.
    fn settle(&mut self, phase: Phase) {
        self.s.phase = phase;
        self.s.since_ms = self.now_ms;
        self.write_step();
    }

    fn step_to(&mut self, stage: usize, step: usize) {
        self.s.stage = stage;
        self.settle(holding(step));
        let st = &self.spec.stages[stage];
        let message = format!(
            "stage {} step {}: {} at {} bp",
            stage + 1,
            step + 1,
            st.scopes.join(","),
            st.steps_bp[step]
        );
        self.notify("step", message);
    }

    /// A refused baseline counts as an inconclusive check: `max_inconclusive`
    /// of them in a row are a failure, and `failures_to_rollback` failures
    /// end the plan (nothing was stepped: back at its start) or pause it.
    fn baseline_refused(&mut self, why: String) {
        let Phase::Baseline { streak, .. } = &self.s.phase else {
            return;
        };
        let g = &self.spec.guards;
        let streak = count(*streak, CheckVerdict::Inconclusive, g.max_inconclusive).0;
        self.s.since_ms = self.now_ms;
        if streak.failures < g.failures_to_rollback {
            self.s.phase = Phase::Baseline {
                streak,
                refused: Some(why.clone()),
            };
            return self.notify("baseline_refused", why);
        }
        let cause = format!(
            "{why}; {} baselines refused in a row (max_inconclusive {}, failures_to_rollback {})",
            g.max_inconclusive * g.failures_to_rollback,
            g.max_inconclusive,
            g.failures_to_rollback
        );
        if g.on_failure == OnFailure::Pause {
            return self.pause(format!("paused before the first step: {cause}"));
        }
        self.end(
            End::RolledBack,
            Some(format!("ended before the first step: {cause}")),
        );
        self.write(self.s.start.clone());
        self.notify(
            "rolled_back",
            format!("ended before the first step, the rollout at its start: {cause}"),
        );
    }

    /// A check of the held step: recorded, and acted on when it ends a
    /// streak of failures.
    fn checked(&mut self, figures: Figures, verdict: Verdict) {
        let Phase::Holding {
            step,
            streak,
            promoted_ms,
        } = self.s.phase
        else {
            return;
        };
        let g = &self.spec.guards;
        let kind = match verdict {
            Verdict::Pass => CheckVerdict::Pass,
            Verdict::Fail(_) => CheckVerdict::Fail,
            Verdict::Inconclusive(_) => CheckVerdict::Inconclusive,
        };
        let mut reasons = verdict.reasons();
        let (streak, counted) = count(streak, kind, g.max_inconclusive);
        if counted {
            // So no plan waits forever on a scope it cannot judge.
            reasons.push(format!(
                "{} inconclusive checks in a row count as a failure (max_inconclusive)",
                g.max_inconclusive
            ));
        }
        let line = format!(
            "check stage {} step {}: {kind}{} ({})",
            self.s.stage + 1,
            step + 1,
            if reasons.is_empty() {
                String::new()
            } else {
                format!(": {}", reasons.join("; "))
            },
            describe(&figures)
        );
        self.s.checks.push(Check {
            at_ms: self.now_ms,
            stage: self.s.stage,
            step,
            figures,
            verdict: kind,
            reasons: reasons.clone(),
        });
        if self.s.checks.len() > KEPT_CHECKS {
            self.s.checks.remove(0);
        }
        match kind {
            CheckVerdict::Pass => self.writes.push(Write::Log(line)),
            CheckVerdict::Fail => self.notify("check_fail", line),
            CheckVerdict::Inconclusive => self.notify("check_inconclusive", line),
        }
        self.s.phase = Phase::Holding {
            step,
            streak,
            promoted_ms,
        };
        if streak.failures >= g.failures_to_rollback {
            self.failed(step, streak.failures, reasons);
        }
    }

    /// `failures_to_rollback` failed checks in a row: what `on_failure` says.
    fn failed(&mut self, step: usize, n: u32, why: Vec<String>) {
        let cause = format!(
            "{n} failed checks in a row at stage {} step {}: {}",
            self.s.stage + 1,
            step + 1,
            why.join("; ")
        );
        match self.spec.guards.on_failure {
            OnFailure::Rollback => {
                self.end(End::RolledBack, Some(format!("rolled back: {cause}")));
                self.write(self.s.start.clone());
                self.notify(
                    "rolled_back",
                    format!("rolled back to the shares at plan start: {cause}"),
                );
            }
            OnFailure::StepBack => {
                self.s.phase = Phase::Paused {
                    step: step.checked_sub(1),
                    why: format!("stepped back one step, paused: {cause}"),
                    stepped_back: true,
                };
                self.s.since_ms = self.now_ms;
                self.write_step();
                self.notify(
                    "stepped_back",
                    format!("stepped back one step and paused: {cause}"),
                );
            }
            OnFailure::Pause => self.pause(format!("paused: {cause}")),
        }
    }

    /// A held step moves on once its hold is over (or it was promoted
    /// and a check since passed), its last decisive check passed and no
    /// check has failed since.
    fn tick(&mut self) {
        let Phase::Holding {
            step,
            streak,
            promoted_ms,
        } = self.s.phase
        else {
            return;
        };
        let stage = self.s.stage;
        let last = self.s.checks.iter().rev().find(|c| {
            c.stage == stage && c.step == step && c.verdict != CheckVerdict::Inconclusive
        });
        let passed = last.is_some_and(|c| c.verdict == CheckVerdict::Pass);
        let promoted = promoted_ms.is_some_and(|t| last.is_some_and(|c| c.at_ms >= t));
        let held = self.now_ms.saturating_sub(self.s.since_ms) >= self.spec.stages[stage].hold_ms;
        if !((held || promoted) && passed && streak.failures == 0) {
            return;
        }
        if step + 1 < self.spec.stages[stage].steps_bp.len() {
            return self.step_to(stage, step + 1);
        }
        if stage + 1 < self.spec.stages.len() {
            return self.enter(stage + 1);
        }
        self.end(End::Completed, None);
        self.notify(
            "completed",
            "completed: every stage at its last step".into(),
        );
    }
}

/// A fresh hold of `step`: no checks yet, not promoted.
fn holding(step: usize) -> Phase {
    Phase::Holding {
        step,
        streak: Streak::default(),
        promoted_ms: None,
    }
}

/// The streak after one more check of `kind`; `true` when it was the
/// `max_inconclusive`-th inconclusive one in a row, counted as a failure.
fn count(streak: Streak, kind: CheckVerdict, max_inconclusive: u32) -> (Streak, bool) {
    match kind {
        CheckVerdict::Pass => (Streak::default(), false),
        CheckVerdict::Fail => (
            Streak {
                failures: streak.failures + 1,
                inconclusive: 0,
            },
            false,
        ),
        CheckVerdict::Inconclusive if streak.inconclusive + 1 >= max_inconclusive => (
            Streak {
                failures: streak.failures + 1,
                inconclusive: 0,
            },
            true,
        ),
        CheckVerdict::Inconclusive => (
            Streak {
                failures: streak.failures,
                inconclusive: streak.inconclusive + 1,
            },
            false,
        ),
    }
}

/// A check's figures for the log: each one named, `-` where unmeasured.
fn describe(f: &Figures) -> String {
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
